//! `/openapi/v2` and `/openapi/v3`: documents handed in by the kinds' crates (for built-in
//! groups, upstream's own documents kept as data), served gzip-compressed to clients that accept
//! it and inflated for those that don't.

use std::collections::BTreeMap;
use std::io::Read;

use bytes::Bytes;

/// One gzip-compressed JSON document.
#[derive(Clone)]
pub struct GzDoc(pub Bytes);

impl GzDoc {
    pub fn inflate(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&self.0[..]).read_to_end(&mut out)?;
        Ok(out)
    }
}

#[derive(Clone, Default)]
pub struct OpenApi {
    pub v2: Option<GzDoc>,
    /// By path below `/openapi/v3/`, e.g. `api/v1`, `apis/apps/v1`.
    pub v3: BTreeMap<String, GzDoc>,
}

impl OpenApi {
    /// The `/openapi/v3` index: every document with its content-addressed URL, as upstream.
    pub fn v3_index(&self) -> serde_json::Value {
        let paths: serde_json::Map<String, serde_json::Value> = self
            .v3
            .iter()
            .map(|(p, d)| {
                let hash = content_hash(&d.0);
                (p.clone(), serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}))
            })
            .collect();
        serde_json::json!({"paths": paths})
    }
}

/// A stable hash of a document's bytes for its `?hash=` URL. Upstream uses SHA-512; clients
/// treat the value as opaque (a cache key), so a cheap FNV-1a (64 bits, upper-case hex) does.
fn content_hash(b: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for byte in b {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}
