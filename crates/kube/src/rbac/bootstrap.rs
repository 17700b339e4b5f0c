//! Upstream's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy): the cluster
//! roles, cluster role bindings, and the roles and bindings in `kube-system` and `kube-public`
//! that kube-apiserver v1.36 creates, read from `data/rbac/bootstrap-policy.txt` (its format
//! is described at the top of that file), and the `rbac/bootstrap-roles` post-start hook that
//! reconciles them at every start (component-helpers/auth/rbac/reconciliation): what is
//! missing is created; an object whose `rbac.authorization.kubernetes.io/autoupdate`
//! annotation is not `false` gets the labels, annotations, rules, aggregation selectors and
//! subjects it lacks, never losing what was added to it; a binding whose roleRef changed is
//! recreated.

use std::sync::LazyLock;

use apimachinery::object::ObjectExt;
use apimachinery::projection::Projection;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, Requester};
use serde_json::{Map, Value, json};
use storage::ResourceVersion;

use super::escalation::GROUP;
use super::rules::{self, PolicyRule};

const POLICY: &str = include_str!("../../data/rbac/bootstrap-policy.txt");
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The members of a stored object that [`reconciled`] reads (and, of a binding, the roleRef
/// compared before it): what the hook decodes of each existing object to decide whether it
/// needs a write. A member read there and not listed here would always look missing, and the
/// object be written at every start: a test compares the decision on whole and projected
/// objects.
static RECONCILED_FIELDS: LazyLock<Projection> = LazyLock::new(|| {
    Projection::of([
        "metadata.labels",
        "metadata.annotations",
        "rules",
        "aggregationRule",
        "subjects",
        "roleRef",
    ])
});

/// One object of the policy: the resource it is stored in, and the object.
#[derive(Clone, Debug)]
pub struct PolicyObject {
    pub resource: &'static str,
    pub object: Value,
}

fn list(words: &str) -> Vec<String> {
    words
        .split(',')
        .map(|w| if w == "\"\"" { "" } else { w }.to_string())
        .collect()
}

/// The whole policy, in upstream's order of reconciliation: cluster roles, cluster role
/// bindings, roles, role bindings, built from the embedded text at each call. The
/// `rbac/bootstrap-roles` hook writes every object once per start and nothing reads the policy
/// after it: kept for the process's life, its objects were 0.6 MiB of an idle server's heap.
pub fn policy() -> Vec<PolicyObject> {
    parse_policy(|_, _| true)
}

/// The policy's cluster role `name`, read alone (the Node authorizer's `system:node` rules).
pub fn cluster_role(name: &str) -> Option<Value> {
    parse_policy(|resource, object| resource == "clusterroles" && object == name)
        .pop()
        .map(|o| o.object)
}

/// The policy's objects for which `wanted(resource, name)` holds (`namespace/name` for roles
/// and role bindings); the lines of the others are skipped unparsed.
fn parse_policy(wanted: impl Fn(&str, &str) -> bool) -> Vec<PolicyObject> {
    let mut objects: Vec<PolicyObject> = Vec::new();
    let mut skipping = false;
    for line in POLICY.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with(' ') && skipping {
            continue;
        }
        if !line.starts_with(' ') {
            let (head, role_ref) = match line.split_once(" -> ") {
                Some((h, r)) => (h, Some(r)),
                None => (line, None),
            };
            let (kind_word, full) = head.split_once(' ').expect("kind and name");
            let (kind, resource) = match kind_word {
                "clusterrole" => ("ClusterRole", "clusterroles"),
                "clusterrolebinding" => ("ClusterRoleBinding", "clusterrolebindings"),
                "role" => ("Role", "roles"),
                "rolebinding" => ("RoleBinding", "rolebindings"),
                other => panic!("unknown kind {other} in the bootstrap policy"),
            };
            skipping = !wanted(resource, full);
            if skipping {
                continue;
            }
            let mut meta = json!({
                "name": full,
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {AUTOUPDATE: "true"},
            });
            if let Some((ns, name)) = full.split_once('/') {
                meta["namespace"] = json!(ns);
                meta["name"] = json!(name);
            }
            let mut object = json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": kind,
                "metadata": meta,
            });
            match role_ref {
                Some(r) => {
                    let (ref_kind, ref_name) = r.split_once(' ').expect("roleRef kind and name");
                    object["roleRef"] =
                        json!({"apiGroup": GROUP, "kind": ref_kind, "name": ref_name});
                }
                None => object["rules"] = json!([]),
            }
            objects.push(PolicyObject { resource, object });
            continue;
        }
        let object = &mut objects.last_mut().expect("a line inside an object").object;
        let (word, rest) = line.trim().split_once(' ').expect("a word and its values");
        match word {
            "label" => {
                let (k, v) = rest.split_once('=').expect("label k=v");
                object["metadata"]["labels"][k] = json!(v);
            }
            "aggregate" => {
                let labels: Map<String, Value> = rest
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                let rule = object
                    .as_object_mut()
                    .expect("an object")
                    .entry("aggregationRule")
                    .or_insert_with(|| json!({"clusterRoleSelectors": []}));
                rule["clusterRoleSelectors"]
                    .as_array_mut()
                    .expect("selectors")
                    .push(json!({"matchLabels": labels}));
            }
            "allow" => {
                let mut parts = rest.split(' ');
                let mut rule = PolicyRule {
                    verbs: list(parts.next().expect("verbs")),
                    ..Default::default()
                };
                for part in parts {
                    let (key, values) = part.split_once('=').expect("key=values");
                    let values = list(values);
                    match key {
                        "groups" => rule.api_groups = values,
                        "resources" => rule.resources = values,
                        "names" => rule.resource_names = values,
                        "urls" => rule.non_resource_urls = values,
                        other => panic!("unknown rule field {other} in the bootstrap policy"),
                    }
                }
                object["rules"]
                    .as_array_mut()
                    .expect("rules")
                    .push(rule.to_value());
            }
            "User" | "Group" | "ServiceAccount" => {
                let subject = match rest.split_once('/') {
                    Some((ns, name)) if word == "ServiceAccount" => {
                        json!({"kind": word, "name": name, "namespace": ns})
                    }
                    _ => json!({"apiGroup": GROUP, "kind": word, "name": rest}),
                };
                let subjects = object
                    .as_object_mut()
                    .expect("an object")
                    .entry("subjects")
                    .or_insert_with(|| json!([]));
                subjects.as_array_mut().expect("subjects").push(subject);
            }
            other => panic!("unknown line {other} in the bootstrap policy"),
        }
    }
    // Aggregated roles start without rules: the aggregation controller fills them.
    for o in &mut objects {
        if o.object.get("aggregationRule").is_some()
            && o.object["rules"].as_array().is_some_and(Vec::is_empty)
        {
            o.object["rules"] = Value::Null;
        }
    }
    let order = |r: &str| match r {
        "clusterroles" => 0,
        "clusterrolebindings" => 1,
        "roles" => 2,
        _ => 3,
    };
    objects.sort_by_key(|o| order(o.resource));
    objects
}

/// The identity the hook writes as: kube-apiserver's loopback client, a `system:masters`
/// member, so that no escalation check stops it.
fn apiserver_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        ..Default::default()
    }
}

/// `merge(expected, existing)`: the existing entries win.
fn merged_map(expected: Option<&Value>, existing: Option<&Value>) -> Option<Value> {
    if expected.is_none() && existing.is_none() {
        return None;
    }
    let mut out = expected.cloned().unwrap_or_else(|| json!({}));
    if let (Some(out), Some(existing)) = (out.as_object_mut(), existing.and_then(Value::as_object))
    {
        for (k, v) in existing {
            out.insert(k.clone(), v.clone());
        }
    }
    Some(out)
}

/// The reconciled form of `existing`, or `None` when nothing is to change.
fn reconciled(existing: &Value, expected: &Value, is_role: bool) -> Option<Value> {
    let mut out = existing.clone();
    for field in ["labels", "annotations"] {
        if let Some(m) = merged_map(
            expected.pointer(&format!("/metadata/{field}")),
            existing.pointer(&format!("/metadata/{field}")),
        ) {
            out.metadata_mut().insert(field.into(), m);
        }
    }
    if is_role {
        let have = PolicyRule::all_of(existing);
        let (_, missing) = rules::covers(&have, &PolicyRule::all_of(expected));
        if !missing.is_empty() {
            let mut all: Vec<Value> = out["rules"].as_array().cloned().unwrap_or_default();
            all.extend(missing.iter().map(PolicyRule::to_value));
            out["rules"] = Value::Array(all);
        }
        let selectors = |v: &Value| {
            v.pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
                .cloned()
        };
        match (selectors(expected), selectors(existing)) {
            (None, Some(_)) => {
                if let Some(m) = out.as_object_mut() {
                    m.remove("aggregationRule");
                }
            }
            (Some(want), have) => {
                let mut have = have.unwrap_or_default();
                let missing: Vec<Value> = want.into_iter().filter(|s| !have.contains(s)).collect();
                if !missing.is_empty() {
                    have.extend(missing);
                    out["aggregationRule"] = json!({"clusterRoleSelectors": have});
                }
            }
            (None, None) => {}
        }
    } else {
        let have: Vec<Value> = existing["subjects"].as_array().cloned().unwrap_or_default();
        let missing: Vec<Value> = expected["subjects"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| !have.contains(s))
            .collect();
        if !missing.is_empty() {
            let mut all = have;
            all.extend(missing);
            out["subjects"] = Value::Array(all);
        }
    }
    (out != *existing).then_some(out)
}

/// `rbac/bootstrap-roles`: creates or reconciles every object of the policy. The objects are
/// independent of each other, so they are written concurrently: the store commits the writes that
/// arrive together in one transaction, where one after another each waited for its own commit.
pub async fn reconcile(api: &ApiResources) -> Result<(), String> {
    let user = apiserver_user();
    let requester = Requester { user: &user };
    let writes = policy()
        .into_iter()
        .map(|object| reconcile_one(api, &requester, object));
    futures_util::future::try_join_all(writes).await?;
    Ok(())
}

/// Creates one object of the policy, or reconciles the stored one with it.
async fn reconcile_one(
    api: &ApiResources,
    requester: &Requester<'_>,
    PolicyObject { resource, object }: PolicyObject,
) -> Result<(), String> {
    let store = api
        .get(GROUP, "v1", resource)
        .ok_or_else(|| format!("{resource} are not served"))?;
    let (ns, name) = (object.namespace().to_string(), object.name().to_string());
    // From the watch cache, and only the members `reconciled` reads: at most starts every
    // object is up to date, and the decision needs nothing else of it.
    let existing = match store.get(&ns, &name, ResourceVersion::Any).await {
        Ok(o) => Some(
            RECONCILED_FIELDS
                .decode(&o.bytes)
                .map_err(|e| format!("decoding {resource} {name}: {e}"))?,
        ),
        Err(s) if s.code == 404 => None,
        Err(s) => return Err(format!("reading {resource} {name}: {}", s.message)),
    };
    let write = api.internal_write(store, crate::bootstrap::API_SERVER_MANAGER);
    let create = |object: Value| {
        let store = store.clone();
        let (ns, write) = (ns.clone(), &write);
        async move {
            match store.create(requester, &ns, object, write).await {
                Ok(_) => Ok(()),
                Err(s) if s.code == 409 => Ok(()),
                Err(s) => Err(format!("creating {resource}: {}", s.message)),
            }
        }
    };
    let Some(existing) = existing else {
        return create(object).await;
    };
    if existing.pointer(&format!(
        "/metadata/annotations/{}",
        AUTOUPDATE.replace('/', "~1")
    )) == Some(&json!("false"))
    {
        return Ok(());
    }
    let is_role = matches!(resource, "clusterroles" | "roles");
    if !is_role && existing.get("roleRef") != object.get("roleRef") {
        // A binding's roleRef cannot change: upstream deletes and recreates it.
        store
            .delete(requester, &ns, &name, &DeleteOptions::default())
            .await
            .map_err(|s| format!("deleting {resource} {name}: {}", s.message))?;
        return create(object).await;
    }
    if reconciled(&existing, &object, is_role).is_none() {
        return Ok(());
    }
    tracing::info!(resource, name = %name, "reconciling bootstrap RBAC object");
    // The whole stored object is reconciled as the update reads it, so that a change made
    // since the cache's copy is kept (upstream's reconciliation runs in a conflict retry
    // loop over a fresh read). A stored object that turns out to be up to date is written
    // back as it is, which changes nothing.
    let mut updater = |current: Option<&Value>| match current {
        Some(current) => {
            Ok(reconciled(current, &object, is_role).unwrap_or_else(|| current.clone()))
        }
        None => Err(apimachinery::Status::not_found(
            &apimachinery::GroupResource::new(GROUP, resource),
            &name,
        )),
    };
    let opts = crate::bootstrap::own_update(api, store);
    store
        .update(requester, &ns, &name, &mut updater, &opts)
        .await
        .map_err(|s| format!("updating {resource} {name}: {}", s.message))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [PolicyObject], resource: &str, name: &str) -> &'a Value {
        &objects
            .iter()
            .find(|o| o.resource == resource && o.object.name() == name)
            .unwrap_or_else(|| panic!("{resource} {name}"))
            .object
    }

    #[test]
    fn a_cluster_role_read_alone_is_the_policys_own() {
        let objects = policy();
        for name in [
            "system:node",
            "cluster-admin",
            "view",
            "system:aggregate-to-view",
        ] {
            let alone = cluster_role(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(&alone, find(&objects, "clusterroles", name), "{name}");
        }
        // A binding or a namespaced role of that name is not a cluster role.
        assert!(cluster_role("system:controller:bootstrap-signer").is_none());
        assert!(cluster_role("no-such-role").is_none());
    }

    #[test]
    fn the_policy_holds_upstreams_objects() {
        let objects = policy();
        let count = |r: &str| objects.iter().filter(|o| o.resource == r).count();
        // Upstream v1.36's golden files: 31 + 39 cluster roles, 12 + 39 cluster role bindings,
        // 7 roles, 7 role bindings (without a distribution's own additions).
        assert_eq!(
            (
                count("clusterroles"),
                count("clusterrolebindings"),
                count("roles"),
                count("rolebindings")
            ),
            (70, 51, 7, 7)
        );
        let admin = find(&objects, "clusterroles", "cluster-admin");
        assert_eq!(
            admin["rules"],
            json!([
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]}
            ])
        );
        assert_eq!(
            admin["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        let edit = find(&objects, "clusterroles", "edit");
        assert_eq!(edit["rules"], Value::Null);
        assert_eq!(
            edit["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
        assert_eq!(
            edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
            "true"
        );
        let masters = find(&objects, "clusterrolebindings", "cluster-admin");
        assert_eq!(
            masters["subjects"],
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}])
        );
        let signer = find(
            &objects,
            "rolebindings",
            "system:controller:bootstrap-signer",
        );
        assert_eq!(signer["metadata"]["namespace"], "kube-public");
        assert_eq!(
            signer["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "bootstrap-signer", "namespace": "kube-system"})
        );
        let view = find(&objects, "clusterroles", "system:aggregate-to-view");
        assert!(
            view["rules"][0]["apiGroups"] == json!([""]),
            "the core group is written as \"\""
        );
        assert_eq!(objects[0].resource, "clusterroles");
        assert_eq!(objects.last().unwrap().resource, "rolebindings");
    }

    #[test]
    fn reconciling_adds_what_is_missing_and_keeps_what_was_added() {
        let expected = json!({"metadata": {"name": "r", "labels": {"a": "1"}, "annotations": {AUTOUPDATE: "true"}},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]});
        let existing = json!({"metadata": {"name": "r", "labels": {"a": "2", "b": "3"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                      {"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]}]});
        let out = reconciled(&existing, &expected, true).expect("an update");
        assert_eq!(out["metadata"]["labels"], json!({"a": "2", "b": "3"}));
        assert_eq!(out["metadata"]["annotations"], json!({AUTOUPDATE: "true"}));
        assert_eq!(
            out["rules"],
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                   {"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]},
                   {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert!(
            reconciled(&out, &expected, true).is_none(),
            "a second pass changes nothing"
        );
        let binding =
            json!({"metadata": {"name": "b"}, "subjects": [{"kind": "Group", "name": "g"}]});
        let grown = json!({"metadata": {"name": "b"}, "subjects": [{"kind": "User", "name": "u"}]});
        let out = reconciled(&grown, &binding, false).expect("an update");
        assert_eq!(
            out["subjects"],
            json!([{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"}])
        );
    }

    /// The hook decides from the members [`RECONCILED_FIELDS`] keeps: for every object of the
    /// policy, stored as it was written or stripped of a rule, a selector, a subject, its labels
    /// or its annotations, the decision on the projected object is the decision on the whole
    /// one, and the annotations and roleRef the hook reads before it are kept whole.
    #[test]
    fn the_decision_reads_only_projected_members() {
        let decide = |stored: &Value, expected: &Value, is_role: bool| {
            let projected = RECONCILED_FIELDS
                .decode(&serde_json::to_vec(stored).unwrap())
                .unwrap();
            assert_eq!(projected.get("roleRef"), stored.get("roleRef"));
            assert_eq!(
                projected.pointer("/metadata/annotations"),
                stored.pointer("/metadata/annotations")
            );
            let whole = reconciled(stored, expected, is_role);
            assert_eq!(
                reconciled(&projected, expected, is_role).is_some(),
                whole.is_some(),
                "{stored}"
            );
            whole.is_some()
        };
        let mut updates = 0;
        for o in policy() {
            let is_role = matches!(o.resource, "clusterroles" | "roles");
            let mut stored = o.object.clone();
            let meta = stored.metadata_mut();
            meta.insert("uid".into(), "u".into());
            meta.insert("resourceVersion".into(), "7".into());
            meta.insert("managedFields".into(), json!([{"manager": "m"}]));
            assert!(!decide(&stored, &o.object, is_role), "{}", o.object.name());
            let mut changed = Vec::new();
            // Each list's first item taken away.
            for list in [
                "/rules",
                "/aggregationRule/clusterRoleSelectors",
                "/subjects",
            ] {
                let mut c = stored.clone();
                if let Some(items) = c.pointer_mut(list).and_then(Value::as_array_mut)
                    && !items.is_empty()
                {
                    items.remove(0);
                    changed.push(c);
                }
            }
            for member in ["labels", "annotations"] {
                let mut c = stored.clone();
                c.metadata_mut().remove(member);
                changed.push(c);
            }
            // (A rule the others cover can go without an update.)
            for c in changed {
                updates += usize::from(decide(&c, &o.object, is_role));
            }
        }
        assert!(
            updates > 300,
            "only {updates} changed objects need an update"
        );
    }
}
