//! Lists the embedded OpenAPI v3 documents (`data/openapi/v3/v3<path>.json.gz`) as a table of
//! `(path, bytes)`, so adding a document is adding a file; and derives from the v2 document the
//! structural schemas the server parses at start (definitions without descriptions: a tenth
//! of the size, so parsing them costs a tenth of the memory and time); and takes from the core
//! group's v3 document the `meta/v1` schemas that custom resources' documents embed, so that the
//! server does not inflate and parse the whole document on its way to serving.

use std::fmt::Write;
use std::io::Read;

/// Removes `description` annotations from a schema and everything under it. The keys of a
/// `properties` map are field names, not annotations: a field may be called `description`
/// (PriorityClass has one), so those maps keep their keys.
fn strip_descriptions(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(m) => {
            m.remove("description");
            for (k, v) in m.iter_mut() {
                match (k.as_str(), v) {
                    ("properties", serde_json::Value::Object(fields)) => {
                        fields.values_mut().for_each(strip_descriptions)
                    }
                    (_, v) => strip_descriptions(v),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn structural_v2() {
    let src = "data/openapi/v2.json.gz";
    println!("cargo:rerun-if-changed={src}");
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).expect("the v2 document exists"))
        .read_to_end(&mut json)
        .expect("the v2 document is gzip");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&json).expect("the v2 document is JSON");
    let mut definitions = doc
        .get_mut("definitions")
        .map(serde_json::Value::take)
        .expect("the v2 document has definitions");
    // `definitions` maps names to schemas: strip inside each schema, not among the names.
    if let serde_json::Value::Object(defs) = &mut definitions {
        defs.values_mut().for_each(strip_descriptions);
    }
    let out = serde_json::json!({"definitions": definitions});
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("v2-structural.json");
    std::fs::write(dest, serde_json::to_vec(&out).expect("encode")).expect("write generated file");
}

/// The `io.k8s.apimachinery.pkg.apis.meta.v1.*` schemas of `api/v1`'s v3 document, descriptions
/// kept (they are served again in custom resources' documents).
fn meta_v1_v3() {
    let src = "data/openapi/v3/v3api_v1.json.gz";
    println!("cargo:rerun-if-changed={src}");
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).expect("the api/v1 document exists"))
        .read_to_end(&mut json)
        .expect("the api/v1 document is gzip");
    let doc: serde_json::Value =
        serde_json::from_slice(&json).expect("the api/v1 document is JSON");
    let meta: serde_json::Map<String, serde_json::Value> = doc
        .pointer("/components/schemas")
        .and_then(serde_json::Value::as_object)
        .expect("the api/v1 document has schemas")
        .iter()
        .filter(|(k, _)| k.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        meta.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        "the api/v1 document defines ObjectMeta"
    );
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("meta-v1-v3.json");
    std::fs::write(dest, serde_json::to_vec(&meta).expect("encode")).expect("write generated file");
}

fn main() {
    structural_v2();
    meta_v1_v3();
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
