//! The OpenAPI documents of the built-in groups: upstream's own v2 and v3 documents, kept as
//! compressed data, and the structural schemas read from v2 (for unknown-field pruning and
//! strategic merge patches).

use std::io::Read;

use apimachinery::schema::Schemas;
use apiserver::openapi::{GzDoc, OpenApi};
use bytes::Bytes;

const V2: &[u8] = include_bytes!("../data/openapi/v2.json.gz");
include!(concat!(env!("OUT_DIR"), "/openapi_v3.rs"));

pub fn documents() -> OpenApi {
    OpenApi {
        v2: Some(GzDoc(Bytes::from_static(V2))),
        v3: V3_DOCS
            .iter()
            .map(|(p, b)| (p.to_string(), GzDoc(Bytes::from_static(b))))
            .collect(),
    }
}

/// Parses the v2 document's definitions (tens of milliseconds: callers do it off the start-up
/// path).
pub fn schemas() -> Result<Schemas, String> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(V2)
        .read_to_end(&mut json)
        .map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    Ok(Schemas::from_openapi_v2(&doc))
}
