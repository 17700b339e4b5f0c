//! Lists the embedded OpenAPI v3 documents (`data/openapi/v3/v3<path>.json.gz`) as a table of
//! `(path, bytes)`, so adding a document is adding a file.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new("data/openapi/v3");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("data/openapi/v3 exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json.gz") && n != "v3_index.json.gz")
        .collect();
    names.sort();
    let mut out = String::from("pub const V3_DOCS: &[(&str, &[u8])] = &[\n");
    for n in names {
        let stem = n.trim_start_matches("v3").trim_end_matches(".json.gz");
        // File names flatten paths with `_`; group names never contain one.
        let path = match stem {
            ".well-known_openid-configuration" => ".well-known/openid-configuration".to_string(),
            s => s.replace('_', "/"),
        };
        let abs = std::fs::canonicalize(dir.join(&n)).expect("file exists");
        writeln!(
            out,
            "    ({path:?}, include_bytes!({:?})),",
            abs.display().to_string()
        )
        .expect("write to string");
    }
    out.push_str("];\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("openapi_v3.rs");
    std::fs::write(dest, out).expect("write generated file");
}
