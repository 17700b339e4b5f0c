//! The cost of one RBAC authorization decision, with upstream's bootstrap policy and 1,000 Roles
//! and 1,000 RoleBindings present (issue 10's target: under 5 µs median). Run with
//! `cargo bench -p ironplane-kube --bench rbac_decision`; prints the median and p99 of
//! per-decision times, each measured over a batch of 1,000 decisions.

use std::time::Instant;

use apiserver::authentication::UserInfo;
use apiserver::authorization::Authorizer;
use apiserver::registry::reflector::Delta;
use apiserver::request::RequestInfo;
use ironplane_kube::rbac::RbacAuthorizer;
use ironplane_kube::rbac::index::Kind;
use serde_json::json;

const ROLES: usize = 1000;
const NAMESPACES: usize = 100;
const BATCH: u32 = 1000;
const BATCHES: usize = 201;

fn authorizer() -> RbacAuthorizer {
    let rbac = RbacAuthorizer::default();
    let mut by_kind: [(Kind, Vec<serde_json::Value>); 4] = [
        (Kind::ClusterRole, Vec::new()),
        (Kind::ClusterRoleBinding, Vec::new()),
        (Kind::Role, Vec::new()),
        (Kind::RoleBinding, Vec::new()),
    ];
    for o in ironplane_kube::rbac::bootstrap::policy() {
        let slot = match o.resource {
            "clusterroles" => 0,
            "clusterrolebindings" => 1,
            "roles" => 2,
            _ => 3,
        };
        by_kind[slot].1.push(o.object.clone());
    }
    // The aggregated `edit` role as the aggregation controller fills it: pods and deployments.
    by_kind[0].1.push(json!({"metadata": {"name": "bench-edit"}, "rules": [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps", "secrets"]},
        {"verbs": ["create", "update", "patch", "delete"], "apiGroups": [""], "resources": ["pods", "configmaps"]},
        {"verbs": ["create", "update", "patch", "delete"], "apiGroups": ["apps"], "resources": ["deployments", "deployments/scale"]},
    ]}));
    for i in 0..ROLES {
        let ns = format!("ns-{}", i % NAMESPACES);
        by_kind[2].1.push(json!({"metadata": {"name": format!("role-{i}"), "namespace": ns}, "rules": [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [format!("d-{i}")]},
        ]}));
        by_kind[3].1.push(json!({"metadata": {"name": format!("binding-{i}"), "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("role-{i}")},
            "subjects": [{"kind": "User", "name": format!("user-{i}")}, {"kind": "Group", "name": format!("team-{}", i % 50)}]}));
    }
    by_kind[3].1.push(json!({"metadata": {"name": "bench-edit", "namespace": "ns-7"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-edit"},
        "subjects": [{"kind": "User", "name": "alice"}]}));
    for (kind, items) in by_kind {
        rbac.index.apply(kind, Delta::Replace(items));
    }
    rbac
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn request(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_group: group.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Default::default()
    }
}

fn main() {
    let rbac = authorizer();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let cases = [
        (
            "allowed by a RoleBinding (user)",
            user("alice", &["system:authenticated"]),
            request("create", "", "configmaps", "ns-7", ""),
            true,
        ),
        (
            "allowed by a RoleBinding (group, resourceNames)",
            user("user-999", &["team-8", "system:authenticated"]),
            request("update", "apps", "deployments", "ns-8", "d-8"),
            true,
        ),
        (
            "allowed by a ClusterRoleBinding (system:basic-user)",
            user("bob", &["system:authenticated"]),
            request(
                "create",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
                "",
            ),
            true,
        ),
        (
            "denied (nothing applies)",
            user("mallory", &["team-3", "system:authenticated"]),
            request("delete", "", "secrets", "ns-3", "s"),
            false,
        ),
    ];
    for (what, user, request, allowed) in cases {
        let decide = || runtime.block_on(rbac.authorize(&user, &request));
        assert_eq!(decide().is_allowed(), allowed, "{what}");
        let mut per_decision: Vec<f64> = (0..BATCHES)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..BATCH {
                    std::hint::black_box(decide());
                }
                start.elapsed().as_nanos() as f64 / f64::from(BATCH)
            })
            .collect();
        per_decision.sort_by(f64::total_cmp);
        let median = per_decision[BATCHES / 2];
        let p99 = per_decision[BATCHES * 99 / 100];
        println!("{what:55} median {:7.0} ns   p99 {:7.0} ns", median, p99);
    }
}
