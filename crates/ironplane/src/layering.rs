//! The crates' layering, checked: a crate's normal dependencies on the workspace's own crates
//! point down the table of `../shared/DESIGN.md` (`apimachinery` ← `protobuf`, `storage` ←
//! `apiserver` ← `kube`, `apiextensions`, `aggregator` ← `ironplane`), so that no layer reaches up and no cycle can form.
//! Dev-dependencies (test harnesses, the bench tool's in-process server) are not layering.

use std::collections::{BTreeMap, BTreeSet};

/// Each crate and the workspace crates it may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    ("apimachinery", &[]),
    ("ironplane-protobuf", &["apimachinery"]),
    ("storage", &["apimachinery"]),
    (
        "apiserver",
        &["apimachinery", "ironplane-protobuf", "storage"],
    ),
    (
        "ironplane-kube",
        &["apimachinery", "ironplane-protobuf", "storage", "apiserver"],
    ),
    // The CRD server is a sibling of the built-in catalog: it reads CRDs through the generic
    // registry, never through `ironplane-kube`.
    ("apiextensions", &["apimachinery", "storage", "apiserver"]),
    // The aggregator is another sibling: APIServices, Services and EndpointSlices are read
    // through the generic registry.
    ("aggregator", &["apimachinery", "storage", "apiserver"]),
    (
        "ironplane",
        &[
            "apimachinery",
            "ironplane-protobuf",
            "storage",
            "apiserver",
            "ironplane-kube",
            "apiextensions",
            "aggregator",
        ],
    ),
    // The bench tool drives any API server; it depends on nothing of the server.
    ("ironplane-bench", &[]),
    // Tests only: everything it fuzzes is a dev-dependency.
    ("ironplane-fuzz", &[]),
];

/// The package name and the names under `[dependencies]` of a manifest.
fn manifest(text: &str) -> (String, BTreeSet<String>) {
    let (mut name, mut deps, mut section) = (String::new(), BTreeSet::new(), String::new());
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_end_matches(".workspace").trim();
        match section.as_str() {
            "[package]" if key == "name" => name = value.trim().trim_matches('"').to_string(),
            "[dependencies]" => {
                deps.insert(key.to_string());
            }
            _ => {}
        }
    }
    (name, deps)
}

#[test]
fn dependencies_point_down_the_layers() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let ours: BTreeSet<&str> = allowed.keys().copied().collect();
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&crates).expect("the crates folder") {
        let path = entry.expect("an entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let (name, deps) = manifest(&text);
        let Some(may) = allowed.get(name.as_str()) else {
            panic!("{name} ({}) is not in the layering table", path.display());
        };
        for dep in deps.iter().filter(|d| ours.contains(d.as_str())) {
            assert!(
                may.contains(&dep.as_str()),
                "{name} depends on {dep}, which is not below it"
            );
        }
        seen.insert(name);
    }
    assert_eq!(seen.len(), ALLOWED.len(), "crates found: {seen:?}");
}
