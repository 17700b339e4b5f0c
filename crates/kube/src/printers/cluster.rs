//! Rows of the cluster-wide and policy kinds of the smaller groups: RBAC bindings, PodDisruptionBudget,
//! PriorityClass, RuntimeClass, Lease, CertificateSigningRequest, FlowSchema,
//! PriorityLevelConfiguration and APIService (whose table upstream builds in kube-aggregator).
//!
//! Roles and ClusterRoles keep the default table and have no function here.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

use super::field::{at, bool_at, int_at, list_at, opt_int, opt_str, str_at};
use super::format::{age, human_duration, int_or_string};

/// Name, Role ("Kind/name"), Age, Users, Groups, ServiceAccounts; for RoleBindings and
/// ClusterRoleBindings alike.
pub(super) fn role_binding(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        str_at(obj, &["roleRef", "kind"]),
        str_at(obj, &["roleRef", "name"])
    );
    let mut users = Vec::new();
    let mut groups = Vec::new();
    let mut service_accounts = Vec::new();
    for subject in list_at(obj, &["subjects"]) {
        let name = str_at(subject, &["name"]);
        match str_at(subject, &["kind"]) {
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            "ServiceAccount" => {
                service_accounts.push(format!("{}/{name}", str_at(subject, &["namespace"])))
            }
            // Upstream collects other kinds too but prints no column for them.
            _ => {}
        }
    }
    cells![
        obj.name(),
        role,
        age(obj, now),
        users.join(", "),
        groups.join(", "),
        service_accounts.join(", "),
    ]
}

/// Name, Min Available, Max Unavailable ("N/A" when unset), Allowed Disruptions, Age.
pub(super) fn pod_disruption_budget(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let bound =
        |field: &str| at(obj, &["spec", field]).map_or_else(|| "N/A".to_string(), int_or_string);
    cells![
        obj.name(),
        bound("minAvailable"),
        bound("maxUnavailable"),
        int_at(obj, &["status", "disruptionsAllowed"]),
        age(obj, now),
    ]
}

/// Name, Value, Global-Default, Age, PreemptionPolicy.
pub(super) fn priority_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        int_at(obj, &["value"]),
        bool_at(obj, &["globalDefault"]),
        age(obj, now),
        str_at(obj, &["preemptionPolicy"]),
    ]
}

/// Name, Handler, Age.
pub(super) fn runtime_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), str_at(obj, &["handler"]), age(obj, now)]
}

/// Name, Holder, Age.
pub(super) fn lease(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        str_at(obj, &["spec", "holderIdentity"]),
        age(obj, now)
    ]
}

/// Name, Age, SignerName, Requestor, RequestedDuration, Condition.
pub(super) fn certificate_signing_request(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let signer = match str_at(obj, &["spec", "signerName"]) {
        "" => "<none>",
        signer => signer,
    };
    let requested = opt_int(obj, &["spec", "expirationSeconds"]).map_or_else(
        || "<none>".to_string(),
        |seconds| human_duration(TimeDelta::try_seconds(seconds).unwrap_or(TimeDelta::MAX)),
    );
    cells![
        obj.name(),
        age(obj, now),
        signer,
        str_at(obj, &["spec", "username"]),
        requested,
        csr_condition(obj),
    ]
}

/// "Denied", "Approved" or "Pending", then ",Failed" and ",Issued" as they apply.
fn csr_condition(obj: &Value) -> String {
    let conditions = list_at(obj, &["status", "conditions"]);
    let has = |kind: &str| conditions.iter().any(|c| str_at(c, &["type"]) == kind);
    // Precedence is upstream's: a denial outweighs an approval.
    let mut status = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !str_at(obj, &["status", "certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    status
}

/// Name, PriorityLevel, MatchingPrecedence, DistinguisherMethod, Age, MissingPL (the Dangling
/// condition's status, "?" when unknown).
pub(super) fn flow_schema(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let distinguisher = opt_str(obj, &["spec", "distinguisherMethod", "type"])
        .or_else(|| at(obj, &["spec", "distinguisherMethod"]).map(|_| ""))
        .unwrap_or("<none>");
    let missing = list_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Dangling")
        .map_or("?", |c| str_at(c, &["status"]));
    cells![
        obj.name(),
        str_at(obj, &["spec", "priorityLevelConfiguration", "name"]),
        int_at(obj, &["spec", "matchingPrecedence"]),
        distinguisher,
        age(obj, now),
        missing,
    ]
}

/// Name, Type, NominalConcurrencyShares, Queues, HandSize, QueueLengthLimit, Age: numbers for a
/// limited level (and its queuing), "<none>" where they do not apply.
pub(super) fn priority_level_configuration(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let none = || Value::from("<none>");
    let (shares, queues, hand_size, queue_length) = match at(obj, &["spec", "limited"]) {
        None => (none(), none(), none(), none()),
        Some(limited) => {
            let shares = Value::from(int_at(limited, &["nominalConcurrencyShares"]));
            match at(limited, &["limitResponse", "queuing"]) {
                None => (shares, none(), none(), none()),
                Some(q) => (
                    shares,
                    Value::from(int_at(q, &["queues"])),
                    Value::from(int_at(q, &["handSize"])),
                    Value::from(int_at(q, &["queueLengthLimit"])),
                ),
            }
        }
    };
    cells![
        obj.name(),
        str_at(obj, &["spec", "type"]),
        shares,
        queues,
        hand_size,
        queue_length,
        age(obj, now),
    ]
}

/// Name, Service ("namespace/name" or "Local"), Available (the condition's status, with its
/// reason when not True), Age.
pub(super) fn api_service(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let service = match at(obj, &["spec", "service"]) {
        None => "Local".to_string(),
        Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
    };
    let available = match list_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Available")
    {
        None => "Unknown".to_string(),
        Some(c) => {
            let status = str_at(c, &["status"]);
            let reason = str_at(c, &["reason"]);
            if status == "True" || reason.is_empty() {
                status.to_string()
            } else {
                format!("{status} ({reason})")
            }
        }
    };
    cells![obj.name(), service, available, age(obj, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn role_bindings() {
        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "default", "namespace": "golden"}]});
        assert_eq!(
            role_binding(&rb, now()),
            vec![
                json!("rb"),
                json!("ClusterRole/view"),
                json!("<unknown>"),
                json!("alice, bob"),
                json!("devs"),
                json!("golden/default")
            ]
        );
    }

    #[test]
    fn disruption_budgets_and_classes() {
        let pdb = json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 0}});
        assert_eq!(
            pod_disruption_budget(&pdb, now()),
            vec![
                json!("pdb"),
                json!("1"),
                json!("N/A"),
                json!(0),
                json!("<unknown>")
            ]
        );
        let pdb = json!({"spec": {"maxUnavailable": "25%"}});
        assert_eq!(
            pod_disruption_budget(&pdb, now())[1..3],
            [json!("N/A"), json!("25%")]
        );
        let pc = json!({"metadata": {"name": "high"}, "value": 1000000, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(
            priority_class(&pc, now()),
            vec![
                json!("high"),
                json!(1000000),
                json!(false),
                json!("<unknown>"),
                json!("PreemptLowerPriority")
            ]
        );
        let rc = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        assert_eq!(runtime_class(&rc, now())[1], json!("runsc"));
        let l =
            json!({"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "n1_abc"}});
        assert_eq!(lease(&l, now())[1], json!("n1_abc"));
        assert_eq!(lease(&json!({}), now())[1], json!(""));
    }

    #[test]
    fn certificate_signing_requests() {
        let csr = json!({"metadata": {"name": "csr1", "creationTimestamp": "2025-06-01T11:59:00Z"},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client", "username": "admin", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        assert_eq!(
            certificate_signing_request(&csr, now()),
            vec![
                json!("csr1"),
                json!("60s"),
                json!("kubernetes.io/kube-apiserver-client"),
                json!("admin"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
        let denied = json!({"status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]}});
        assert_eq!(csr_condition(&denied), "Denied,Failed");
        let bare = certificate_signing_request(&json!({}), now());
        assert_eq!(
            (&bare[2], &bare[4], &bare[5]),
            (&json!("<none>"), &json!("<none>"), &json!("Pending"))
        );
    }

    #[test]
    fn flow_control() {
        let fs = json!({"metadata": {"name": "exempt"}, "spec": {"priorityLevelConfiguration": {"name": "exempt"},
            "matchingPrecedence": 1, "distinguisherMethod": {"type": "ByUser"}},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}});
        assert_eq!(
            flow_schema(&fs, now()),
            vec![
                json!("exempt"),
                json!("exempt"),
                json!(1),
                json!("ByUser"),
                json!("<unknown>"),
                json!("False")
            ]
        );
        let bare = flow_schema(&json!({}), now());
        assert_eq!((&bare[3], &bare[5]), (&json!("<none>"), &json!("?")));
        let limited = json!({"metadata": {"name": "workload-low"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 100, "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
        assert_eq!(
            priority_level_configuration(&limited, now()),
            vec![
                json!("workload-low"),
                json!("Limited"),
                json!(100),
                json!(128),
                json!(6),
                json!(50),
                json!("<unknown>")
            ]
        );
        let exempt = json!({"spec": {"type": "Exempt", "exempt": {}}});
        assert_eq!(
            priority_level_configuration(&exempt, now())[2..6],
            [
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let reject = json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
        assert_eq!(
            priority_level_configuration(&reject, now())[2..4],
            [json!(5), json!("<none>")]
        );
    }

    #[test]
    fn api_services() {
        let local = json!({"metadata": {"name": "v1.apps"}, "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            api_service(&local, now()),
            vec![
                json!("v1.apps"),
                json!("Local"),
                json!("True"),
                json!("<unknown>")
            ]
        );
        let remote = json!({"spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}});
        assert_eq!(
            api_service(&remote, now())[1..3],
            [
                json!("kube-system/metrics-server"),
                json!("False (MissingEndpoints)")
            ]
        );
        assert_eq!(api_service(&json!({}), now())[2], json!("Unknown"));
    }
}
