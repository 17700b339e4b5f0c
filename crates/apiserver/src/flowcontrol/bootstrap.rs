//! The FlowSchemas and PriorityLevelConfigurations every server starts with (upstream:
//! k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap): the mandatory ones, which the filter also
//! uses before (or without) their stored copies, and the suggested ones that the
//! `priority-and-fairness-config-producer` hook writes. Objects are built as the JSON a client
//! would send (flowcontrol.apiserver.k8s.io/v1), each carrying the
//! `apf.kubernetes.io/autoupdate-spec: "true"` annotation, as upstream's constructors add it.

use serde_json::{Value, json};

/// The annotation that says whether the server keeps an object's spec as it ships it.
pub const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

fn priority_level(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

/// A limited level that queues: nominal shares, lendable percent, queues, hand size, queue
/// length limit.
fn queuing_level(name: &str, shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    priority_level(
        name,
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": queues, "handSize": hand, "queueLengthLimit": 50}},
        }}),
    )
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: i64,
    distinguisher: Option<&str>,
    rule: Value,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

fn kube_system_service_accounts() -> Vec<Value> {
    vec![json!({"kind": "ServiceAccount",
        "serviceAccount": {"name": "*", "namespace": "kube-system"}})]
}

/// Every verb on every resource, namespaced and cluster-scoped, and every non-resource URL.
fn everything(subjects: Vec<Value>) -> Value {
    json!({
        "subjects": subjects,
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
            "namespaces": ["*"], "clusterScope": true}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    })
}

/// `exempt` and `catch-all`, in upstream's order.
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![
        priority_level(
            "catch-all",
            json!({"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5, "lendablePercent": 0,
                "limitResponse": {"type": "Reject"}}}),
        ),
        priority_level(
            "exempt",
            json!({"type": "Exempt", "exempt": {
                "nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
    ]
}

/// `exempt` (system:masters) and `catch-all` (everyone else), in upstream's order.
pub fn mandatory_flow_schemas() -> Vec<Value> {
    vec![
        flow_schema(
            "exempt",
            "exempt",
            1,
            None,
            everything(groups(&["system:masters"])),
        ),
        flow_schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            everything(groups(&["system:unauthenticated", "system:authenticated"])),
        ),
    ]
}

/// The suggested levels, in upstream's order.
pub fn suggested_priority_levels() -> Vec<Value> {
    vec![
        queuing_level("system", 30, 33, 64, 6),
        queuing_level("node-high", 40, 25, 64, 6),
        queuing_level("leader-election", 10, 0, 16, 4),
        queuing_level("workload-high", 40, 50, 128, 6),
        queuing_level("workload-low", 100, 90, 128, 6),
        queuing_level("global-default", 20, 50, 128, 6),
    ]
}

/// The suggested schemas, in upstream's order.
pub fn suggested_flow_schemas() -> Vec<Value> {
    let leases = |verbs: Value| {
        json!({"verbs": verbs, "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "namespaces": ["*"]})
    };
    let mut leader_election_subjects =
        users(&["system:kube-controller-manager", "system:kube-scheduler"]);
    leader_election_subjects.extend(kube_system_service_accounts());
    vec![
        flow_schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            everything(groups(&["system:nodes"])),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            json!({
                "subjects": groups(&["system:nodes"]),
                "resourceRules": [
                    {"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                        "namespaces": ["*"], "clusterScope": true},
                    leases(json!(["*"])),
                ],
            }),
        ),
        flow_schema(
            "probes",
            "exempt",
            2,
            None,
            json!({
                "subjects": groups(&["system:unauthenticated", "system:authenticated"]),
                "nonResourceRules": [{"verbs": ["get"],
                    "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
            }),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            json!({
                "subjects": leader_election_subjects,
                "resourceRules": [leases(json!(["get", "create", "update"]))],
            }),
        ),
        flow_schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&["system:kube-controller-manager"])),
        ),
        flow_schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            everything(users(&["system:kube-scheduler"])),
        ),
        flow_schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            everything(kube_system_service_accounts()),
        ),
        flow_schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            everything(groups(&["system:serviceaccounts"])),
        ),
        flow_schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            everything(groups(&["system:unauthenticated", "system:authenticated"])),
        ),
    ]
}
