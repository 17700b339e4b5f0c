//! The Node authorizer (upstream: plugin/pkg/auth/authorizer/node): a kubelet — a user named
//! `system:node:<name>` in the group `system:nodes` — may read the Secrets, ConfigMaps,
//! PersistentVolumeClaims, PersistentVolumes and ResourceClaims of the pods bound to its node,
//! create tokens for those pods' service accounts, use its own Lease and CSINode, read only its
//! own Node, list its own pods, and do what upstream's `system:node` rules allow otherwise.
//! Everyone else gets no opinion, for the next authorizer (RBAC).
//!
//! The relations come from a graph kept from pods and claims by reflectors (upstream keeps a
//! graph of vertices and edges; here each node holds the objects its pods name, counted, so a
//! check is one lookup). NodeRestriction admission limits what a node writes.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use apimachinery::object::{JsonPointer, ObjectExt};
use apiserver::authentication::UserInfo;
use apiserver::authorization::{Authorizer, Decision, Rules};
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta, Synced};
use apiserver::request::RequestInfo;
use async_trait::async_trait;
use serde_json::Value;

use crate::pod_fields::{self, CONTAINER_LISTS};
use crate::rbac::rules::PolicyRule;

/// What a node's pods name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
    ResourceClaim,
    Pod,
}

type Key = (Kind, String, String);

/// The objects one pod names, and its node.
#[derive(Default, Clone)]
struct PodRefs {
    node: String,
    refs: Vec<Key>,
}

#[derive(Default)]
struct Graph {
    pods: HashMap<(String, String), PodRefs>,
    /// Per node, the objects its pods name, with how many pods name each.
    by_node: HashMap<String, HashMap<Key, usize>>,
    /// Claims bound to a volume: (namespace, claim) → PersistentVolume.
    claim_volume: HashMap<(String, String), String>,
}

/// The string at `pointer`, or "".
fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.at(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `AddPod`'s edges: what the pod's spec and status name.
fn pod_refs(pod: &Value) -> PodRefs {
    let ns = pod.namespace().to_string();
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut refs: Vec<Key> = vec![(Kind::Pod, ns.clone(), pod.name().to_string())];
    let mut add = |kind: Kind, name: &str| {
        if !name.is_empty() {
            refs.push((kind, ns.clone(), name.to_string()));
        }
    };
    add(Kind::ServiceAccount, s(spec, "/serviceAccountName"));
    for p in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        add(Kind::Secret, s(p, "/name"));
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        add(Kind::Secret, s(v, "/secret/secretName"));
        add(Kind::ConfigMap, s(v, "/configMap/name"));
        add(Kind::Claim, s(v, "/persistentVolumeClaim/claimName"));
        add(Kind::Secret, s(v, "/csi/nodePublishSecretRef/name"));
        add(Kind::Secret, s(v, "/azureFile/secretName"));
        for ref_path in [
            "/cephfs/secretRef/name",
            "/rbd/secretRef/name",
            "/iscsi/secretRef/name",
            "/flexVolume/secretRef/name",
            "/scaleIO/secretRef/name",
            "/storageos/secretRef/name",
        ] {
            add(Kind::Secret, s(v, ref_path));
        }
        if v.get("ephemeral").is_some() {
            add(Kind::Claim, &format!("{}-{}", pod.name(), s(v, "/name")));
        }
        for src in v
            .at("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            add(Kind::Secret, s(src, "/secret/name"));
            add(Kind::ConfigMap, s(src, "/configMap/name"));
        }
    }
    for list in CONTAINER_LISTS {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                add(Kind::Secret, s(e, "/valueFrom/secretKeyRef/name"));
                add(Kind::ConfigMap, s(e, "/valueFrom/configMapKeyRef/name"));
            }
            for e in c["envFrom"].as_array().into_iter().flatten() {
                add(Kind::Secret, s(e, "/secretRef/name"));
                add(Kind::ConfigMap, s(e, "/configMapRef/name"));
            }
        }
    }
    for claim in pod
        .at("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(Kind::ResourceClaim, s(claim, "/resourceClaimName"));
    }
    PodRefs {
        node: s(spec, "/nodeName").to_string(),
        refs,
    }
}

impl Graph {
    fn remove_pod(&mut self, key: &(String, String)) {
        let Some(old) = self.pods.remove(key) else {
            return;
        };
        if let Some(objects) = self.by_node.get_mut(&old.node) {
            for r in &old.refs {
                if let Some(n) = objects.get_mut(r) {
                    *n -= 1;
                    if *n == 0 {
                        objects.remove(r);
                    }
                }
            }
            if objects.is_empty() {
                self.by_node.remove(&old.node);
            }
        }
    }

    fn add_pod(&mut self, pod: &Value) {
        let key = (pod.namespace().to_string(), pod.name().to_string());
        self.remove_pod(&key);
        // A pod not yet bound to a node gives no node any access (upstream's `AddPod` returns
        // then too); its references are read only once it is bound.
        if pod
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return;
        }
        let refs = pod_refs(pod);
        let objects = self.by_node.entry(refs.node.clone()).or_default();
        for r in &refs.refs {
            *objects.entry(r.clone()).or_default() += 1;
        }
        self.pods.insert(key, refs);
    }

    fn has(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        self.by_node
            .get(node)
            .is_some_and(|o| o.contains_key(&(kind, namespace.to_string(), name.to_string())))
    }

    /// A PersistentVolume is reachable through a claim the node's pods name.
    fn has_volume(&self, node: &str, volume: &str) -> bool {
        self.by_node.get(node).is_some_and(|objects| {
            objects.keys().any(|(kind, ns, claim)| {
                *kind == Kind::Claim
                    && self
                        .claim_volume
                        .get(&(ns.clone(), claim.clone()))
                        .map(String::as_str)
                        == Some(volume)
            })
        })
    }
}

/// The Node authorizer. Cheap to clone.
#[derive(Clone)]
pub struct NodeAuthorizer {
    graph: Arc<RwLock<Graph>>,
    /// Upstream's `NodeRules()`: the `system:node` bootstrap ClusterRole's rules.
    rules: Arc<Vec<PolicyRule>>,
    /// The graph's sources (pods, claims), each listed once.
    synced: Synced,
}

/// The resources the graph is built from.
const GRAPH_SOURCES: usize = 2;

/// `NodeIdentity`: `Some(name)` for a node user (`Some("")` when its name lacks the prefix).
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    if !user.groups.iter().any(|g| g == "system:nodes") {
        return None;
    }
    Some(user.name.strip_prefix("system:node:").unwrap_or(""))
}

fn no(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

fn allow() -> Decision {
    Decision::Allow(String::new())
}

/// Whether a field selector requires `field` to equal `value`.
fn selects(selector: &str, field: &str, value: &str) -> bool {
    selector.split(',').any(|req| {
        req.split_once("==")
            .or_else(|| req.split_once('='))
            .is_some_and(|(f, v)| f.trim() == field && v.trim() == value && !f.ends_with('!'))
    })
}

impl Default for NodeAuthorizer {
    fn default() -> Self {
        NodeAuthorizer::new()
    }
}

impl NodeAuthorizer {
    pub fn new() -> NodeAuthorizer {
        let rules = crate::rbac::bootstrap::cluster_role("system:node")
            .map(|role| PolicyRule::all_of(&role))
            .unwrap_or_default();
        NodeAuthorizer {
            graph: Arc::default(),
            rules: Arc::new(rules),
            synced: Synced::new(GRAPH_SOURCES),
        }
    }

    /// Both sources of the graph have been read once (upstream's graph populator waits for
    /// its informers).
    pub fn has_synced(&self) -> bool {
        self.synced.has_synced()
    }

    /// Keeps the graph from pods and claims.
    pub fn start(&self, api: &ApiResources) {
        match api.get("", "v1", "pods").cloned() {
            None => self.synced.source().mark(),
            Some(pods) => {
                let graph = self.graph.clone();
                let listed = self.synced.source();
                // The endpoints controllers' reflector shares each Pod's decoding (`pod_fields`).
                tokio::spawn(reflector::run_projected(
                    pods,
                    pod_fields::NAME,
                    &pod_fields::POD_FIELDS,
                    move |delta| {
                        let mut g = graph.write().unwrap_or_else(|e| e.into_inner());
                        match delta {
                            Delta::Replace(items) => {
                                g.pods.clear();
                                g.by_node.clear();
                                for p in &items {
                                    g.add_pod(p);
                                }
                            }
                            Delta::Upsert(p) => g.add_pod(&p),
                            Delta::Deleted(p) => {
                                g.remove_pod(&(p.namespace().to_string(), p.name().to_string()))
                            }
                        }
                        listed.mark();
                    },
                ));
            }
        }
        match api.get("", "v1", "persistentvolumeclaims").cloned() {
            None => self.synced.source().mark(),
            Some(claims) => {
                let graph = self.graph.clone();
                let listed = self.synced.source();
                tokio::spawn(reflector::run(claims, move |delta| {
                    let mut g = graph.write().unwrap_or_else(|e| e.into_inner());
                    let volume = |c: &Value| {
                        let key = (c.namespace().to_string(), c.name().to_string());
                        let v = c
                            .at("/spec/volumeName")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        (key, v.to_string())
                    };
                    match delta {
                        Delta::Replace(items) => {
                            g.claim_volume = items
                                .iter()
                                .map(volume)
                                .filter(|(_, v)| !v.is_empty())
                                .collect();
                        }
                        Delta::Upsert(c) => {
                            let (k, v) = volume(&c);
                            if v.is_empty() {
                                g.claim_volume.remove(&k);
                            } else {
                                g.claim_volume.insert(k, v);
                            }
                        }
                        Delta::Deleted(c) => {
                            g.claim_volume.remove(&volume(&c).0);
                        }
                    }
                    listed.mark();
                }));
            }
        }
    }

    /// `authorize`: the object must be named and related to the node.
    fn related(&self, node: &str, kind: Kind, request: &RequestInfo) -> Decision {
        if request.name.is_empty() {
            return no("No Object name found");
        }
        let g = self.graph.read().unwrap_or_else(|e| e.into_inner());
        if g.has(node, kind, &request.namespace, &request.name) {
            allow()
        } else {
            no(format!(
                "no relationship found between node '{node}' and this object"
            ))
        }
    }

    fn read_namespaced(&self, node: &str, kind: Kind, request: &RequestInfo) -> Decision {
        if !matches!(request.verb.as_str(), "get" | "list" | "watch") {
            return no("can only read resources of this type");
        }
        if !request.subresource.is_empty() {
            return no("cannot read subresource");
        }
        if request.namespace.is_empty() {
            return no("can only read namespaced object of this type");
        }
        self.related(node, kind, request)
    }

    fn get_only(&self, node: &str, kind: Kind, request: &RequestInfo) -> Decision {
        if request.verb != "get" {
            return no("can only get individual resources of this type");
        }
        if !request.subresource.is_empty() {
            return no("cannot get subresource");
        }
        self.related(node, kind, request)
    }

    fn decide(&self, node: &str, request: &RequestInfo) -> Decision {
        if !request.is_resource_request {
            return self.by_rules(request);
        }
        let verb = request.verb.as_str();
        let sub = request.subresource.as_str();
        match (request.api_group.as_str(), request.resource.as_str()) {
            ("", "secrets") => self.read_namespaced(node, Kind::Secret, request),
            ("", "configmaps") => self.read_namespaced(node, Kind::ConfigMap, request),
            ("", "persistentvolumeclaims") if sub == "status" => {
                if !matches!(verb, "update" | "patch") {
                    return no("can only get/update/patch this type");
                }
                self.related(node, Kind::Claim, request)
            }
            ("", "persistentvolumeclaims") => self.get_only(node, Kind::Claim, request),
            ("", "persistentvolumes") => {
                if verb != "get" {
                    return no("can only get individual resources of this type");
                }
                if !sub.is_empty() {
                    return no("cannot get subresource");
                }
                let g = self.graph.read().unwrap_or_else(|e| e.into_inner());
                if g.has_volume(node, &request.name) {
                    allow()
                } else {
                    no(format!(
                        "no relationship found between node '{node}' and this object"
                    ))
                }
            }
            ("resource.k8s.io", "resourceclaims") => {
                self.get_only(node, Kind::ResourceClaim, request)
            }
            ("", "serviceaccounts") => {
                if verb == "get" && sub.is_empty() {
                    return self.read_namespaced(node, Kind::ServiceAccount, request);
                }
                if verb != "create" || request.name.is_empty() {
                    return no("can only create tokens for individual service accounts");
                }
                if sub != "token" {
                    return no("can only create token subresource of serviceaccount");
                }
                self.related(node, Kind::ServiceAccount, request)
            }
            ("coordination.k8s.io", "leases") => {
                if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
                    return no("can only get, create, update, patch, or delete a node lease");
                }
                if request.namespace != "kube-node-lease" {
                    return no("can only access leases in the kube-node-lease namespace");
                }
                if verb != "create" && request.name != node {
                    return no(
                        "can only access node lease with the same name as the requesting node",
                    );
                }
                allow()
            }
            ("storage.k8s.io", "csinodes") => {
                if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
                    return no("can only get, create, update, patch, or delete a CSINode");
                }
                if verb != "create" && request.name != node {
                    return no("can only access CSINode with the same name as the requesting node");
                }
                allow()
            }
            ("", "nodes") => match (sub, verb) {
                ("", "create" | "update" | "patch") | ("status", "update" | "patch") => allow(),
                ("", "get" | "list" | "watch") if request.name == node => allow(),
                ("", "get" | "list" | "watch") if request.name.is_empty() => no(format!(
                    "node '{node}' cannot read all nodes, only its own Node object"
                )),
                ("", "get" | "list" | "watch") => no(format!(
                    "node '{node}' cannot read '{}', only its own Node object",
                    request.name
                )),
                _ => no(""),
            },
            ("", "pods") => match (sub, verb) {
                ("", "get") => self.get_only(node, Kind::Pod, request),
                ("", "list" | "watch") => {
                    if selects(&request.field_selector, "spec.nodeName", node) {
                        allow()
                    } else if !request.name.is_empty() {
                        self.related(node, Kind::Pod, request)
                    } else {
                        no("can only list/watch pods with spec.nodeName field selector")
                    }
                }
                ("", "create" | "delete")
                | ("status", "update" | "patch")
                | ("eviction", "create") => allow(),
                _ => no(""),
            },
            _ => self.by_rules(request),
        }
    }

    fn by_rules(&self, request: &RequestInfo) -> Decision {
        if self.rules.iter().any(|r| r.allows(request)) {
            allow()
        } else {
            no("")
        }
    }
}

#[async_trait]
impl Authorizer for NodeAuthorizer {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        match node_identity(user) {
            None => no(""),
            Some("") => no(format!("unknown node for user {:?}", user.name)),
            Some(node) => self.decide(node, request),
        }
    }

    /// Upstream cannot list a node's rules; other users have none here.
    fn rules_for(&self, user: &UserInfo, _namespace: &str) -> Rules {
        Rules {
            incomplete: node_identity(user).is_some(),
            errors: if node_identity(user).is_some() {
                vec!["node authorizer does not support user rule resolution".into()]
            } else {
                Vec::new()
            },
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The graph's reflector decodes pods through `pod_fields::POD_FIELDS`: what `pod_refs` finds in the
    /// projected pod must be what it finds in the whole one, for a pod that names an object
    /// through every path `pod_refs` reads.
    #[test]
    fn pod_fields_hold_every_member_pod_refs_reads() {
        let secret_ref = |name: &str| json!({"secretRef": {"name": name}});
        let env = |c: &str| {
            json!([
                {"name": "A", "value": "x"},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": format!("{c}-s"), "key": "k"}}},
                {"name": "C", "valueFrom": {"configMapKeyRef": {"name": format!("{c}-c"), "key": "k"}}},
            ])
        };
        let env_from = |c: &str| {
            json!([{"secretRef": {"name": format!("{c}-fs")}},
                   {"configMapRef": {"name": format!("{c}-fc")}}])
        };
        let container = |c: &str| {
            json!({"name": c, "image": "busybox", "env": env(c), "envFrom": env_from(c),
                   "resources": {"limits": {"cpu": "1"}}})
        };
        let mut volumes = vec![
            json!({"name": "v1", "secret": {"secretName": "vs"}}),
            json!({"name": "v2", "configMap": {"name": "vc"}}),
            json!({"name": "v3", "persistentVolumeClaim": {"claimName": "claim"}}),
            json!({"name": "v4", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}}),
            json!({"name": "v5", "azureFile": {"secretName": "az", "shareName": "s"}}),
            json!({"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}),
            json!({"name": "v6", "projected": {"sources": [
                {"secret": {"name": "ps"}}, {"configMap": {"name": "pc"}}]}}),
        ];
        for (i, source) in [
            "cephfs",
            "rbd",
            "iscsi",
            "flexVolume",
            "scaleIO",
            "storageos",
        ]
        .iter()
        .enumerate()
        {
            volumes.push(json!({"name": format!("r{i}"), (*source): secret_ref(source)}));
        }
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {
                "nodeName": "n1",
                "serviceAccountName": "sa",
                "imagePullSecrets": [{"name": "pull"}],
                "volumes": volumes,
                "containers": [container("c")],
                "initContainers": [container("i")],
                "ephemeralContainers": [container("e")],
            },
            "status": {"phase": "Running",
                "resourceClaimStatuses": [{"name": "r", "resourceClaimName": "rc"}]},
        });
        let whole = pod_refs(&pod);
        // The pod, its service account, the pull secret, 14 volume refs, 4 per container
        // list, the resource claim.
        assert_eq!(
            whole.refs.len(),
            1 + 1 + 1 + 14 + 3 * 4 + 1,
            "{:?}",
            whole.refs
        );
        let projected = crate::pod_fields::POD_FIELDS
            .decode(&serde_json::to_vec(&pod).unwrap())
            .unwrap();
        let got = pod_refs(&projected);
        assert_eq!((got.node, got.refs), (whole.node, whole.refs));
    }

    fn node_user(name: &str) -> UserInfo {
        UserInfo {
            name: format!("system:node:{name}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..Default::default()
        }
    }

    fn req(
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn nodes_reach_what_their_pods_name_and_nothing_else() {
        let a = NodeAuthorizer::new();
        {
            let mut g = a.graph.write().unwrap();
            g.add_pod(&json!({"metadata": {"name": "web", "namespace": "ns"},
                "spec": {"nodeName": "n1", "serviceAccountName": "sa",
                    "volumes": [{"name": "v", "secret": {"secretName": "tls"}},
                                {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}},
                                {"name": "p", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}],
                    "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "env"}}]}]}}));
            g.claim_volume
                .insert(("ns".into(), "claim".into()), "pv1".into());
        }
        let n1 = node_user("n1");
        let n2 = node_user("n2");
        let decide = |u: &UserInfo, r: RequestInfo| {
            let a = a.clone();
            let u = u.clone();
            async move { a.authorize(&u, &r).await }
        };
        for (resource, name) in [
            ("secrets", "tls"),
            ("secrets", "env"),
            ("configmaps", "cfg"),
        ] {
            assert!(
                decide(&n1, req("get", "", resource, "", "ns", name))
                    .await
                    .is_allowed(),
                "{name}"
            );
            assert_eq!(
                decide(&n2, req("get", "", resource, "", "ns", name)).await,
                Decision::NoOpinion(
                    "no relationship found between node 'n2' and this object".into()
                )
            );
        }
        assert!(
            decide(&n1, req("get", "", "persistentvolumes", "", "", "pv1"))
                .await
                .is_allowed()
        );
        assert!(
            !decide(&n1, req("get", "", "persistentvolumes", "", "", "pv2"))
                .await
                .is_allowed()
        );
        assert_eq!(
            decide(&n1, req("list", "", "secrets", "", "ns", "")).await,
            Decision::NoOpinion("No Object name found".into())
        );
        assert!(
            decide(
                &n1,
                req("create", "", "serviceaccounts", "token", "ns", "sa")
            )
            .await
            .is_allowed()
        );
        assert!(
            !decide(
                &n1,
                req("create", "", "serviceaccounts", "token", "ns", "other")
            )
            .await
            .is_allowed()
        );
        // Its own Node and Lease only.
        assert!(
            decide(&n1, req("get", "", "nodes", "", "", "n1"))
                .await
                .is_allowed()
        );
        assert_eq!(
            decide(&n1, req("get", "", "nodes", "", "", "n2")).await,
            Decision::NoOpinion("node 'n1' cannot read 'n2', only its own Node object".into())
        );
        assert!(
            decide(
                &n1,
                req(
                    "update",
                    "coordination.k8s.io",
                    "leases",
                    "",
                    "kube-node-lease",
                    "n1"
                )
            )
            .await
            .is_allowed()
        );
        assert!(
            !decide(
                &n1,
                req(
                    "update",
                    "coordination.k8s.io",
                    "leases",
                    "",
                    "kube-node-lease",
                    "n2"
                )
            )
            .await
            .is_allowed()
        );
        // Pods of its node by field selector; the rest by upstream's node rules.
        let mut list = req("list", "", "pods", "", "", "");
        list.field_selector = "spec.nodeName=n1".into();
        assert!(decide(&n1, list.clone()).await.is_allowed());
        list.field_selector = "spec.nodeName=n2".into();
        assert!(!decide(&n1, list).await.is_allowed());
        assert!(
            decide(&n1, req("list", "", "services", "", "", ""))
                .await
                .is_allowed()
        );
        assert!(
            !decide(&n1, req("delete", "", "namespaces", "", "", "ns"))
                .await
                .is_allowed()
        );
        // Not a node: no opinion at all.
        let alice = UserInfo {
            name: "alice".into(),
            ..Default::default()
        };
        assert_eq!(
            decide(&alice, req("get", "", "secrets", "", "ns", "tls")).await,
            no("")
        );
        // Removing the pod removes its relations.
        a.graph
            .write()
            .unwrap()
            .remove_pod(&("ns".into(), "web".into()));
        assert!(
            !decide(&n1, req("get", "", "secrets", "", "ns", "tls"))
                .await
                .is_allowed()
        );
    }
}
