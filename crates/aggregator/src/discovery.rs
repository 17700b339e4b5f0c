//! An extension server's discovery answers read as upstream's aggregator reads them: its
//! aggregated document (`APIGroupDiscoveryList`) split into one entry per group version, or its
//! legacy `APIResourceList` converted into such an entry; each entry made into the data rows
//! in-process clients of discovery read; and the order every group and version is listed in,
//! from the APIServices' priorities. Fetching them is `discovery_manager`'s.

use std::cmp::{Ordering, Reverse};
use std::collections::HashMap;
use std::sync::Arc;

use apiserver::registry::{ResourceInfo, SubresourceInfo};
use serde_json::{Value, json};

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

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The group versions of an aggregated discovery document (`APIGroupDiscoveryList`, v2 or
/// v2beta1) with their entries. As upstream's discovery manager does, a resource or subresource
/// without `responseKind` is given an empty one (client-go v0.26.0 to v0.26.3 dereference it).
pub(crate) fn entries(list: &Value) -> Result<HashMap<(String, String), Value>, String> {
    let items = list
        .get("items")
        .and_then(Value::as_array)
        .ok_or("not an APIGroupDiscoveryList")?;
    let mut out = HashMap::new();
    for group in items {
        let name = group
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        for version in group
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut entry = version.clone();
            for resource in entry
                .get_mut("resources")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                empty_response_kind(resource);
                for sub in resource
                    .get_mut("subresources")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    empty_response_kind(sub);
                }
            }
            out.insert(
                (name.to_string(), text(version, "version").to_string()),
                entry,
            );
        }
    }
    Ok(out)
}

fn empty_response_kind(v: &mut Value) {
    if let Some(o) = v.as_object_mut()
        && o.get("responseKind").is_none_or(Value::is_null)
    {
        o.insert(
            "responseKind".into(),
            json!({"group": "", "version": "", "kind": ""}),
        );
    }
}

/// The aggregated discovery entry of a group version from its legacy `APIResourceList`, as
/// upstream converts it (`ConvertGroupVersionIntoToDiscovery`): the resources in the list's
/// order, each `resource/sub` entry a subresource of its resource (one made up, with an empty
/// kind, when the list lacks it); a subresource whose scope differs from its resource's is an
/// error.
pub(crate) fn entry_from_resource_list(version: &str, list: &Value) -> Result<Value, String> {
    let entries = list
        .get("resources")
        .and_then(Value::as_array)
        .ok_or("not an APIResourceList")?;
    let scope = |e: &Value| {
        if e.get("namespaced").and_then(Value::as_bool) == Some(true) {
            "Namespaced"
        } else {
            "Cluster"
        }
    };
    let mut resources: Vec<Value> = Vec::new();
    for e in entries.iter().filter(|e| !text(e, "name").contains('/')) {
        let mut r = json!({
            "resource": text(e, "name"),
            "responseKind": {"group": text(e, "group"), "version": text(e, "version"), "kind": text(e, "kind")},
            "scope": scope(e),
            "singularResource": text(e, "singularName"),
            "verbs": e.get("verbs").cloned().unwrap_or(Value::Null),
        });
        for key in ["shortNames", "categories"] {
            if !strings(e, key).is_empty() {
                r[key] = json!(strings(e, key));
            }
        }
        resources.push(r);
    }
    for e in entries {
        let Some((parent, sub)) = text(e, "name").split_once('/') else {
            continue;
        };
        let at = match resources.iter().position(|r| r["resource"] == parent) {
            Some(at) => at,
            None => {
                resources.push(json!({
                    "resource": parent,
                    "responseKind": {"group": "", "version": "", "kind": ""},
                    "scope": scope(e),
                    "singularResource": "",
                    "verbs": null,
                }));
                resources.len() - 1
            }
        };
        if resources[at]["scope"] != scope(e) {
            return Err(format!(
                "Error: Parent {parent} (scope: {}) and subresource {sub} (scope: {}) scope do not match",
                text(&resources[at], "scope"),
                scope(e)
            ));
        }
        let response_kind = if text(e, "kind").is_empty() {
            json!({"group": "", "version": "", "kind": ""})
        } else {
            json!({"group": text(e, "group"), "version": text(e, "version"), "kind": text(e, "kind")})
        };
        let subresource = json!({
            "subresource": sub,
            "responseKind": response_kind,
            "verbs": e.get("verbs").cloned().unwrap_or(Value::Null),
        });
        match resources[at]
            .get_mut("subresources")
            .and_then(Value::as_array_mut)
        {
            Some(subs) => subs.push(subresource),
            None => resources[at]["subresources"] = json!([subresource]),
        }
    }
    let mut entry = json!({"version": version});
    if !resources.is_empty() {
        entry["resources"] = json!(resources);
    }
    Ok(entry)
}

/// The rows of `group`/`version` that an aggregated discovery entry describes (what in-process
/// clients of discovery see of an extension server's resources).
pub(crate) fn rows(group: &str, version: &str, entry: &Value) -> Vec<ResourceInfo> {
    entry
        .get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| !text(r, "resource").is_empty())
        .map(|r| ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            resource: text(r, "resource").to_string(),
            kind: r
                .pointer("/responseKind/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            singular: text(r, "singularResource").to_string(),
            namespaced: text(r, "scope") == "Namespaced",
            short_names: strings(r, "shortNames"),
            categories: strings(r, "categories"),
            verbs: strings(r, "verbs"),
            subresources: r
                .get("subresources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|s| SubresourceInfo {
                    name: text(s, "subresource").to_string(),
                    group: s
                        .pointer("/responseKind/group")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    version: s
                        .pointer("/responseKind/version")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    kind: s
                        .pointer("/responseKind/kind")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    verbs: strings(s, "verbs"),
                })
                .collect(),
            ..Default::default()
        })
        .collect()
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
    fn a_legacy_resource_list_becomes_an_entry_and_rows() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1alpha1",
        "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
             "verbs": ["get", "list", "watch"], "shortNames": ["fl"]},
            {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder",
             "verbs": ["get"]},
            {"name": "fischers", "singularName": "fischer", "namespaced": false, "kind": "Fischer",
             "verbs": ["list"]},
        ]});
        let entry = entry_from_resource_list("v1alpha1", &list).unwrap();
        assert_eq!(entry["version"], "v1alpha1");
        assert_eq!(entry["resources"][0]["scope"], "Namespaced");
        assert_eq!(
            entry["resources"][0]["responseKind"],
            json!({"group": "", "version": "", "kind": "Flunder"})
        );
        assert_eq!(
            entry["resources"][0]["subresources"][0]["subresource"],
            "status"
        );
        // Upstream keeps the list's order (resources first), not an alphabetical one.
        assert_eq!(entry["resources"][1]["resource"], "fischers");
        let rows = rows("wardle.example.com", "v1alpha1", &entry);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].resource, "flunders");
        assert!(rows[0].namespaced);
        assert_eq!(rows[0].short_names, ["fl"]);
        assert_eq!(rows[0].subresources.len(), 1);
        assert_eq!(rows[0].subresources[0].name, "status");
        assert_eq!(rows[1].kind, "Fischer");
        assert!(!rows[1].namespaced);
        assert!(entry_from_resource_list("v", &json!({"kind": "Status"})).is_err());
        // A subresource without its resource gets one made up; scopes must agree.
        let orphan = json!({"resources": [
            {"name": "things/scale", "namespaced": true, "kind": "Scale", "group": "autoscaling", "version": "v1", "verbs": ["get"]}]});
        let entry = entry_from_resource_list("v1", &orphan).unwrap();
        assert_eq!(entry["resources"][0]["resource"], "things");
        assert_eq!(entry["resources"][0]["responseKind"]["kind"], "");
        assert_eq!(
            entry["resources"][0]["subresources"][0]["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        let mismatch = json!({"resources": [
            {"name": "things", "namespaced": false, "kind": "Thing", "verbs": []},
            {"name": "things/status", "namespaced": true, "kind": "Thing", "verbs": []}]});
        assert!(entry_from_resource_list("v1", &mismatch).is_err());
        // An empty list is a version without resources.
        assert_eq!(
            entry_from_resource_list("v1", &json!({"resources": []})).unwrap(),
            json!({"version": "v1"})
        );
    }

    #[test]
    fn an_aggregated_document_gives_each_group_version_its_entry() {
        let list = json!({"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "wardle.example.com"}, "versions": [
                {"version": "v1beta1", "resources": [
                    {"resource": "flunders", "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get"],
                     "subresources": [{"subresource": "status", "verbs": ["get"]}]}],
                 "freshness": "Current"},
                {"version": "v1alpha1"}]}]});
        let found = entries(&list).unwrap();
        assert_eq!(found.len(), 2);
        let beta = &found[&("wardle.example.com".to_string(), "v1beta1".to_string())];
        assert_eq!(
            beta["resources"][0]["responseKind"],
            json!({"group": "", "version": "", "kind": ""})
        );
        assert_eq!(
            beta["resources"][0]["subresources"][0]["responseKind"],
            json!({"group": "", "version": "", "kind": ""})
        );
        assert!(entries(&json!({"kind": "APIGroupList", "groups": []})).is_err());
    }
}
