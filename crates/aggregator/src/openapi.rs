//! The extension servers' OpenAPI documents, merged into this server's (upstream:
//! pkg/controllers/openapi and openapiv3). After a passed availability check, at most once a
//! minute per APIService, the extension server is asked for `/openapi/v2` and for
//! `/openapi/v3/apis/<group>/<version>`: its v2 `paths` under its group version and its
//! `definitions` join this server's `/openapi/v2` (a definition this server already has keeps
//! this server's), and its v3 document is served as `/openapi/v3/apis/<group>/<version>` and
//! listed in the index. A server that has no such document simply adds nothing; the last
//! documents fetched are kept while it is unavailable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::{Aggregator, ApiService};

/// How often an available extension server's documents are fetched again (upstream's
/// OpenAPI aggregation controller resyncs every minute).
const REFRESH: Duration = Duration::from_secs(60);

/// What one extension server contributes.
#[derive(Clone, Default)]
pub(crate) struct Documents {
    pub fetched: Option<Instant>,
    /// Its part of `/openapi/v2` (`paths` and `definitions`) and their hash.
    pub v2: Option<(String, Arc<Value>)>,
    /// `/openapi/v3/apis/<group>/<version>`: the path below `/openapi/v3/`, the document and
    /// its hash.
    pub v3: Option<(String, Bytes, String)>,
}

/// The part of a v2 document that belongs to `group`/`version`: its paths under the group
/// version, and every definition.
pub(crate) fn v2_fragment(doc: &Value, group: &str, version: &str) -> Value {
    let prefix = format!("/apis/{group}/{version}");
    let paths: Map<String, Value> = doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(p, _)| p.as_str() == prefix || p.starts_with(&format!("{prefix}/")))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    let definitions = doc.get("definitions").cloned().unwrap_or_else(|| json!({}));
    json!({"paths": paths, "definitions": definitions})
}

/// Fetches an available remote APIService's documents when they are due.
pub(crate) async fn refresh(agg: &Aggregator, apiservice: &ApiService) {
    let due = agg
        .openapi
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&apiservice.name)
        .and_then(|d| d.fetched)
        .is_none_or(|at| at.elapsed() >= REFRESH);
    if !due {
        return;
    }
    let (group, version) = (&apiservice.group, &apiservice.version);
    let v2 = match agg.transports.get(apiservice, "/openapi/v2").await {
        Ok(body) => serde_json::from_slice::<Value>(&body).ok().map(|doc| {
            let fragment = v2_fragment(&doc, group, version);
            let hash = apiserver::openapi::content_hash(fragment.to_string().as_bytes());
            (hash, Arc::new(fragment))
        }),
        Err(e) => {
            tracing::debug!(apiservice = %apiservice.name, error = %e, "no OpenAPI v2 document");
            None
        }
    };
    let path = format!("apis/{group}/{version}");
    let v3 = match agg
        .transports
        .get(apiservice, &format!("/openapi/v3/{path}"))
        .await
    {
        Ok(body) if serde_json::from_slice::<Value>(&body).is_ok() => {
            let hash = apiserver::openapi::content_hash(&body);
            Some((path, body, hash))
        }
        _ => None,
    };
    agg.openapi
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(
            apiservice.name.clone(),
            Documents {
                fetched: Some(Instant::now()),
                v2,
                v3,
            },
        );
}

/// Every extension server's v2 part, as one fragment with a fingerprint of their hashes.
pub(crate) fn merged_v2(docs: &BTreeMap<String, Documents>) -> Option<(String, Arc<Value>)> {
    let parts: Vec<&(String, Arc<Value>)> = docs.values().filter_map(|d| d.v2.as_ref()).collect();
    match parts.as_slice() {
        [] => None,
        [one] => Some((*one).clone()),
        many => {
            let mut merged = json!({"paths": {}, "definitions": {}});
            for (_, part) in many {
                for section in ["paths", "definitions"] {
                    if let (Some(into), Some(from)) = (
                        merged[section].as_object_mut(),
                        part.get(section).and_then(Value::as_object),
                    ) {
                        for (k, v) in from {
                            into.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
            let fingerprint: String = many.iter().map(|(h, _)| h.as_str()).collect();
            Some((
                apiserver::openapi::content_hash(fingerprint.as_bytes()),
                Arc::new(merged),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_group_versions_paths_are_taken() {
        let doc = json!({"swagger": "2.0",
            "paths": {"/apis/wardle.example.com/v1alpha1/flunders": {"get": {}},
                      "/apis/wardle.example.com/v1alpha1": {"get": {}},
                      "/apis/wardle.example.com/v1alpha10/x": {"get": {}},
                      "/api/v1/pods": {"get": {}}},
            "definitions": {"com.example.wardle.v1alpha1.Flunder": {"type": "object"}}});
        let f = v2_fragment(&doc, "wardle.example.com", "v1alpha1");
        let paths: Vec<_> = f["paths"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            paths,
            [
                "/apis/wardle.example.com/v1alpha1",
                "/apis/wardle.example.com/v1alpha1/flunders"
            ]
        );
        assert!(f["definitions"]["com.example.wardle.v1alpha1.Flunder"].is_object());
        let mut docs = BTreeMap::new();
        assert!(merged_v2(&docs).is_none());
        let other = json!({"paths": {"/apis/b/v1": {}}, "definitions": {"b.X": {}}});
        docs.insert(
            "a".to_string(),
            Documents {
                v2: Some(("1".into(), Arc::new(f))),
                ..Default::default()
            },
        );
        docs.insert(
            "b".to_string(),
            Documents {
                v2: Some(("2".into(), Arc::new(other))),
                ..Default::default()
            },
        );
        let (_, merged) = merged_v2(&docs).unwrap();
        assert!(merged["paths"]["/apis/b/v1"].is_object());
        assert!(merged["paths"]["/apis/wardle.example.com/v1alpha1/flunders"].is_object());
        assert!(merged["definitions"]["b.X"].is_object());
    }
}
