//! An extension server's discovery answer for its group version (`APIResourceList`) made into
//! the data rows this server's discovery documents are built from, so that `/apis`,
//! `/apis/<group>` and the aggregated `apidiscovery.k8s.io/v2` documents list its resources
//! (upstream's discovery aggregation asks each extension server the same way).

use apiserver::registry::{ResourceInfo, SubresourceInfo};
use serde_json::Value;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The rows of `group`/`version` that `list` (an `APIResourceList`) describes; `resource/sub`
/// entries become subresources of their resource. Nothing when it is not such a list.
pub(crate) fn rows(group: &str, version: &str, list: &Value) -> Vec<ResourceInfo> {
    let entries = list
        .get("resources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut rows: Vec<ResourceInfo> = entries
        .iter()
        .filter(|e| !text(e, "name").contains('/') && !text(e, "name").is_empty())
        .map(|e| ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            resource: text(e, "name"),
            kind: text(e, "kind"),
            singular: text(e, "singularName"),
            namespaced: e
                .get("namespaced")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            short_names: strings(e, "shortNames"),
            categories: strings(e, "categories"),
            verbs: strings(e, "verbs"),
            storage_version_hash: e
                .get("storageVersionHash")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Default::default()
        })
        .collect();
    for e in &entries {
        let name = text(e, "name");
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        if let Some(row) = rows.iter_mut().find(|r| r.resource == parent) {
            row.subresources.push(SubresourceInfo {
                name: sub.to_string(),
                group: text(e, "group"),
                version: text(e, "version"),
                kind: text(e, "kind"),
                verbs: strings(e, "verbs"),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources_and_their_subresources_become_rows() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1alpha1",
        "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
             "verbs": ["get", "list", "watch"], "shortNames": ["fl"]},
            {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder",
             "verbs": ["get"]},
            {"name": "fischers", "singularName": "fischer", "namespaced": false, "kind": "Fischer",
             "verbs": ["list"]},
        ]});
        let rows = rows("wardle.example.com", "v1alpha1", &list);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].resource, "flunders");
        assert!(rows[0].namespaced);
        assert_eq!(rows[0].short_names, ["fl"]);
        assert_eq!(rows[0].subresources.len(), 1);
        assert_eq!(rows[0].subresources[0].name, "status");
        assert_eq!(rows[1].kind, "Fischer");
        assert!(!rows[1].namespaced);
        assert!(super::rows("g", "v", &json!({"kind": "Status"})).is_empty());
    }
}
