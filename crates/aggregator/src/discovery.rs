//! An extension server's discovery answer for its group version (`APIResourceList`) made into
//! the data rows this server's discovery documents are built from, so that `/apis`,
//! `/apis/<group>` and the aggregated `apidiscovery.k8s.io/v2` documents list its resources
//! (upstream's discovery aggregation asks each extension server the same way); and the order
//! every group and version is listed in, from the APIServices' priorities.

use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;
use std::sync::Arc;

use apiserver::registry::{ResourceInfo, SubresourceInfo};
use serde_json::Value;

use crate::ApiService;

/// Sorts discovery rows as upstream's aggregator lists groups (`SortedByGroupAndVersion`):
/// groups by their best APIService, the highest `groupPriorityMinimum` first, ties by the
/// APIService's name; versions in a group by `versionPriority`, the highest first, ties in
/// Kubernetes version order. The core group stays first, and a group no APIService names
/// (this server's own `apiregistration.k8s.io`, which upstream always lists first) before
/// every other; within one group version the rows keep their order.
pub(crate) fn order(apiservices: &[Arc<ApiService>], infos: &mut [ResourceInfo]) {
    type GroupKey<'a> = (Reverse<i64>, &'a str);
    let mut groups: HashMap<&str, GroupKey<'_>> = HashMap::new();
    let mut versions: HashMap<(&str, &str), i64> = HashMap::new();
    for s in apiservices {
        let key = (Reverse(s.group_priority), s.name.as_str());
        groups
            .entry(s.group.as_str())
            .and_modify(|k| *k = (*k).min(key))
            .or_insert(key);
        versions.insert((s.group.as_str(), s.version.as_str()), s.version_priority);
    }
    let group_key = |g: &str| (!g.is_empty()).then(|| groups.get(g).copied());
    infos.sort_by(|a, b| {
        if a.group != b.group {
            return group_key(&a.group).cmp(&group_key(&b.group));
        }
        if a.version == b.version {
            return Ordering::Equal;
        }
        let priority = |v: &str| versions.get(&(a.group.as_str(), v)).copied();
        // A version without an APIService after those with one.
        match (priority(&a.version), priority(&b.version)) {
            (Some(x), Some(y)) => y
                .cmp(&x)
                .then_with(|| apimachinery::version::compare(&a.version, &b.version)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    });
}

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

    fn apiservice(
        group: &str,
        version: &str,
        group_priority: i64,
        version_priority: i64,
    ) -> Arc<ApiService> {
        Arc::new(ApiService::parse(&json!({
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version,
                     "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
        })))
    }

    fn row(group: &str, version: &str, resource: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            ..Default::default()
        }
    }

    #[test]
    fn groups_and_versions_are_listed_in_upstreams_order() {
        let services = [
            apiservice("", "v1", 18000, 1),
            apiservice("apps", "v1", 17800, 15),
            apiservice("stable.example.com", "v1", 1000, 100),
            apiservice("wardle.example.com", "v1alpha1", 1000, 15),
            apiservice("wardle.example.com", "v1beta1", 1000, 15),
            apiservice("wardle.example.com", "v1", 1000, 10),
            apiservice("metrics.k8s.io", "v1beta1", 100, 100),
            apiservice("zeta.example.com", "v1", 1000, 100),
        ];
        // In chain order: built-in, custom, then the extension servers'.
        let mut infos = vec![
            row("", "v1", "pods"),
            row("apiregistration.k8s.io", "v1", "apiservices"),
            row("apps", "v1", "deployments"),
            row("apps", "v1", "replicasets"),
            row("zeta.example.com", "v1", "zs"),
            row("stable.example.com", "v1", "widgets"),
            row("metrics.k8s.io", "v1beta1", "pods"),
            row("wardle.example.com", "v1", "flunders"),
            row("wardle.example.com", "v1alpha1", "flunders"),
            row("wardle.example.com", "v1beta1", "flunders"),
        ];
        order(&services, &mut infos);
        let got: Vec<String> = infos
            .iter()
            .map(|i| format!("{}/{}/{}", i.group, i.version, i.resource))
            .collect();
        assert_eq!(
            got,
            [
                "/v1/pods",
                "apiregistration.k8s.io/v1/apiservices",
                "apps/v1/deployments",
                "apps/v1/replicasets",
                // Priority 1000, by their first APIService's name: "v1.stable…" < "v1.wardle…"
                // < "v1.zeta…", custom and extension groups alike.
                "stable.example.com/v1/widgets",
                // Version priority first, then Kubernetes version order (beta before alpha).
                "wardle.example.com/v1beta1/flunders",
                "wardle.example.com/v1alpha1/flunders",
                "wardle.example.com/v1/flunders",
                "zeta.example.com/v1/zs",
                "metrics.k8s.io/v1beta1/pods",
            ]
        );
    }

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
