//! `/openapi/v2` and `/openapi/v3`: documents handed in by the kinds' crates (for built-in
//! groups, upstream's own documents kept as data, gzip-compressed). `/openapi/v2` is served as
//! upstream's kube-openapi handler serves it, in JSON or gnostic's protobuf (module [`v2`]).

mod v2;

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;

use crate::endpoints::Response;

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
    /// What `/openapi/v2` derives from `v2` (ETag, protobuf), computed on first request and
    /// shared by every clone.
    v2_cache: Arc<v2::V2Cache>,
}

impl OpenApi {
    pub fn new(v2: Option<GzDoc>, v3: BTreeMap<String, GzDoc>) -> Self {
        OpenApi {
            v2,
            v3,
            v2_cache: Arc::default(),
        }
    }

    /// Answers a GET or HEAD of `/openapi/v2`; None when there is no v2 document.
    pub fn serve_v2(&self, headers: &HeaderMap) -> Option<Response> {
        let doc = self.v2.as_ref()?;
        Some(v2::serve(doc, &self.v2_cache, headers))
    }

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
pub fn content_hash(b: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for byte in b {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}
