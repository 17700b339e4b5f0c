//! Discovery documents, built from the served resources' data rows: `/api`, `/api/v1`, `/apis`,
//! `/apis/<group>`, `/apis/<group>/<version>`, and the aggregated `apidiscovery.k8s.io/v2`
//! documents that kubectl asks for first.

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// A group version a delegate lists in discovery whatever rows it has (upstream's aggregator
/// lists every remote APIService's group version): `entry` is its `APIVersionDiscovery` as the
/// aggregated documents list it — the extension server's resources in its order and their
/// `freshness`, or no resources and `Stale` while they cannot be fetched.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedVersion {
    pub group: String,
    pub version: String,
    pub entry: Value,
}

/// A row that stands for a listed group version without resources of its own, so that it is
/// ordered and listed with the others; never a resource.
pub fn placeholder(group: &str, version: &str) -> ResourceInfo {
    ResourceInfo {
        group: group.to_string(),
        version: version.to_string(),
        ..Default::default()
    }
}

fn is_placeholder(i: &ResourceInfo) -> bool {
    i.resource.is_empty()
}

/// Groups and their versions in serving order: the order of first registration, which the
/// caller makes upstream's (group priority, then version priority).
pub fn groups<'a>(infos: impl Iterator<Item = &'a ResourceInfo>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for i in infos.filter(|i| !i.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == i.group) {
            Some((_, versions)) if !versions.contains(&i.version) => {
                versions.push(i.version.clone())
            }
            Some(_) => {}
            None => out.push((i.group.clone(), vec![i.version.clone()])),
        }
    }
    out
}

fn group_version(g: &str, v: &str) -> Value {
    json!({"groupVersion": format!("{g}/{v}"), "version": v})
}

fn api_group(name: &str, versions: &[String]) -> Value {
    json!({
        "name": name,
        "versions": versions.iter().map(|v| group_version(name, v)).collect::<Vec<_>>(),
        "preferredVersion": group_version(name, &versions[0]),
    })
}

pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

pub fn group_list(groups: &[(String, Vec<String>)]) -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups.iter().map(|(g, v)| api_group(g, v)).collect::<Vec<_>>(),
    })
}

pub fn group(name: &str, versions: &[String]) -> Value {
    let mut g = api_group(name, versions);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `APIResourceList` of one group version: each resource, then its subresources as
/// `resource/subresource` entries, sorted by name as upstream lists them.
pub fn resource_list<'a>(
    group: &str,
    version: &str,
    infos: impl Iterator<Item = &'a ResourceInfo>,
) -> Value {
    let mut entries: Vec<Value> = Vec::new();
    for i in infos.filter(|i| i.group == group && i.version == version && !is_placeholder(i)) {
        let mut r = json!({
            "name": i.resource, "singularName": i.singular, "namespaced": i.namespaced,
            "kind": i.kind, "verbs": i.verbs,
        });
        if !i.short_names.is_empty() {
            r["shortNames"] = json!(i.short_names);
        }
        if !i.categories.is_empty() {
            r["categories"] = json!(i.categories);
        }
        if let Some(h) = &i.storage_version_hash {
            r["storageVersionHash"] = json!(h);
        }
        entries.push(r);
        for s in &i.subresources {
            let mut e = json!({
                "name": format!("{}/{}", i.resource, s.name), "singularName": "", "namespaced": i.namespaced,
                "kind": s.kind, "verbs": s.verbs,
            });
            if !s.group.is_empty() || !s.version.is_empty() {
                e["group"] = json!(s.group);
                e["version"] = json!(s.version);
            }
            entries.push(e);
        }
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut list = json!({"kind": "APIResourceList", "groupVersion": gv, "resources": entries});
    if !group.is_empty() {
        list["apiVersion"] = json!("v1");
    }
    list
}

fn aggregated_resource(i: &ResourceInfo) -> Value {
    let mut r = json!({
        "resource": i.resource,
        "responseKind": {"group": "", "version": "", "kind": i.kind},
        "scope": if i.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": i.singular,
        "verbs": i.verbs,
    });
    if !i.short_names.is_empty() {
        r["shortNames"] = json!(i.short_names);
    }
    if !i.categories.is_empty() {
        r["categories"] = json!(i.categories);
    }
    if !i.subresources.is_empty() {
        let mut subs: Vec<Value> = i
            .subresources
            .iter()
            .map(|s| json!({"subresource": s.name, "responseKind": {"group": s.group, "version": s.version, "kind": s.kind}, "verbs": s.verbs}))
            .collect();
        subs.sort_by(|a, b| a["subresource"].as_str().cmp(&b["subresource"].as_str()));
        r["subresources"] = json!(subs);
    }
    r
}

fn aggregated_version<'a>(
    group: &str,
    version: &str,
    infos: impl Iterator<Item = &'a ResourceInfo>,
    listed: &[ListedVersion],
) -> Value {
    if let Some(l) = listed
        .iter()
        .find(|l| l.group == group && l.version == version)
    {
        return l.entry.clone();
    }
    let mut resources: Vec<Value> = infos
        .filter(|i| i.group == group && i.version == version && !is_placeholder(i))
        .map(aggregated_resource)
        .collect();
    resources.sort_by(|a, b| a["resource"].as_str().cmp(&b["resource"].as_str()));
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// `APIGroupDiscoveryList` for `/api` (core only) or `/apis` (every named group); a listed
/// group version is given its own entry (its rows are placeholders or copies of that entry).
pub fn aggregated<'a>(
    core: bool,
    infos: impl Iterator<Item = &'a ResourceInfo> + Clone,
    listed: &[ListedVersion],
) -> Value {
    let items: Vec<Value> = if core {
        vec![json!({"metadata": {}, "versions": [aggregated_version("", "v1", infos, listed)]})]
    } else {
        groups(infos.clone())
            .iter()
            .map(|(g, versions)| {
                json!({
                    "metadata": {"name": g},
                    "versions": versions.iter().map(|v| aggregated_version(g, v, infos.clone(), listed)).collect::<Vec<_>>(),
                })
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_version_has_its_own_entry_and_a_placeholder_lists_no_resource() {
        let rows = [
            ResourceInfo {
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
                kind: "Deployment".into(),
                ..Default::default()
            },
            placeholder("wardle.example.com", "v1alpha1"),
        ];
        let stale = json!({"version": "v1alpha1", "freshness": "Stale"});
        let listed = [ListedVersion {
            group: "wardle.example.com".into(),
            version: "v1alpha1".into(),
            entry: stale.clone(),
        }];
        let doc = aggregated(false, rows.iter(), &listed);
        assert_eq!(
            doc["items"][1],
            json!({"metadata": {"name": "wardle.example.com"}, "versions": [stale]})
        );
        assert_eq!(doc["items"][0]["versions"][0]["freshness"], "Current");
        // Legacy discovery lists the group; its version has no resource of the placeholder's.
        let legacy = group_list(&groups(rows.iter()));
        assert_eq!(legacy["groups"][1]["name"], "wardle.example.com");
        assert_eq!(
            resource_list("wardle.example.com", "v1alpha1", rows.iter())["resources"],
            json!([])
        );
        // Without a listed entry, a placeholder's version is current and empty.
        let doc = aggregated(false, rows.iter(), &[]);
        assert_eq!(
            doc["items"][1]["versions"][0],
            json!({"version": "v1alpha1", "resources": [], "freshness": "Current"})
        );
    }
}
