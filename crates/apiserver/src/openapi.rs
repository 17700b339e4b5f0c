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
    /// The document merged with the delegates' fragments (custom resources), for the
    /// fingerprint it was built for; rebuilt when that changes.
    merged: Arc<std::sync::Mutex<Option<Merged>>>,
}

struct Merged {
    fingerprint: String,
    doc: GzDoc,
    cache: Arc<v2::V2Cache>,
}

impl OpenApi {
    pub fn new(v2: Option<GzDoc>, v3: BTreeMap<String, GzDoc>) -> Self {
        OpenApi {
            v2,
            v3,
            v2_cache: Arc::default(),
            merged: Arc::default(),
        }
    }

    /// Answers a GET or HEAD of `/openapi/v2`; None when there is no v2 document.
    pub fn serve_v2(&self, headers: &HeaderMap) -> Option<Response> {
        let doc = self.v2.as_ref()?;
        Some(v2::serve(doc, &self.v2_cache, headers))
    }

    /// `/openapi/v2` with the delegates' `paths` and `definitions` merged in (upstream's
    /// aggregated spec: built-in document, then CRDs). The merge is built on the first request
    /// after the fragments change and shared until they change again.
    pub fn serve_v2_with(
        &self,
        fragments: &[(String, Arc<serde_json::Value>)],
        headers: &HeaderMap,
    ) -> Option<Response> {
        if fragments.is_empty() {
            return self.serve_v2(headers);
        }
        let base = self.v2.as_ref()?;
        let fingerprint: String = fragments.iter().map(|(f, _)| f.as_str()).collect();
        let (doc, cache) = {
            let mut merged = self.merged.lock().unwrap_or_else(|e| e.into_inner());
            match merged.as_ref() {
                Some(m) if m.fingerprint == fingerprint => (m.doc.clone(), m.cache.clone()),
                _ => {
                    let doc = merge_v2(base, fragments)?;
                    let cache = Arc::new(v2::V2Cache::default());
                    *merged = Some(Merged {
                        fingerprint,
                        doc: doc.clone(),
                        cache: cache.clone(),
                    });
                    (doc, cache)
                }
            }
        };
        Some(v2::serve(&doc, &cache, headers))
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

/// The base v2 document with each fragment's `paths` and `definitions` added (the base keeps
/// what it has: built-in definitions win over a CRD's of the same name, as upstream's merge
/// keeps the first).
fn merge_v2(base: &GzDoc, fragments: &[(String, Arc<serde_json::Value>)]) -> Option<GzDoc> {
    use std::io::Write as _;
    let json = base.inflate().ok()?;
    let mut doc: serde_json::Value = serde_json::from_slice(&json).ok()?;
    for (_, fragment) in fragments {
        for section in ["paths", "definitions"] {
            let (Some(into), Some(from)) = (
                doc.get_mut(section)
                    .and_then(serde_json::Value::as_object_mut),
                fragment.get(section).and_then(serde_json::Value::as_object),
            ) else {
                continue;
            };
            for (k, v) in from {
                into.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    let bytes = serde_json::to_vec(&doc).ok()?;
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    gz.write_all(&bytes).ok()?;
    Some(GzDoc(Bytes::from(gz.finish().ok()?)))
}
