//! managedFields of writes the server makes itself, end to end with kubectl: the cluster IP
//! allocator's IPAddress objects, the eviction subresource's writes, and the service-account
//! tokens controller's. Each expectation is what kube-apiserver v1.36.2 recorded for the same
//! requests (the tokens controller's update replayed with its User-Agent, since it runs in the
//! controller manager); times are left out of the comparison.

use crate::common;

use common::{Server, wait_until};
use serde_json::{Value, json};

/// `kubectl get -o json --show-managed-fields` (kubectl hides them otherwise).
fn get(s: &Server, ns: &str, what: &str) -> Value {
    let out = s.kubectl(&["-n", ns, "get", what, "--show-managed-fields", "-o", "json"]);
    serde_json::from_str(&out).expect("kubectl prints JSON")
}

/// The object's managedFields without their times, by manager name: upstream orders Update
/// entries by time to the second first, so writes within one second come out by name and the
/// order of others depends on the clock.
fn managers(obj: &Value) -> Vec<Value> {
    let mut entries: Vec<Value> = obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut e| {
            if let Some(e) = e.as_object_mut() {
                assert!(e.remove("time").is_some(), "an entry without a time");
            }
            e
        })
        .collect();
    entries.sort_by_key(|e| e["manager"].as_str().unwrap_or("").to_string());
    entries
}

#[test]
fn the_cluster_ip_allocators_ipaddresses_are_kube_apiservers_updates() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "t"]);
    s.kubectl(&[
        "-n",
        "t",
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
    ]);
    let ip = s.kubectl(&[
        "-n",
        "t",
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let address = get(&s, "", &format!("ipaddress/{ip}"));
    assert_eq!(
        managers(&address),
        vec![json!({
            "apiVersion": "networking.k8s.io/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {
                    ".": {},
                    "f:ipaddress.kubernetes.io/ip-family": {},
                    "f:ipaddress.kubernetes.io/managed-by": {},
                }},
                "f:spec": {"f:parentRef": {
                    ".": {}, "f:name": {}, "f:namespace": {}, "f:resource": {},
                }},
            },
            "manager": "kube-apiserver",
            "operation": "Update",
        })]
    );
}

#[test]
fn an_eviction_records_the_budgets_status_and_not_the_pods_condition() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "t"]);
    s.kubectl_stdin(
        &["-n", "t", "create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "p", "labels": {"app": "x"}},
             "spec": {"nodeName": "node-a", "automountServiceAccountToken": false,
                      "containers": [{"name": "c", "image": "pause"}]}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "pdb"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}]}"#,
    );
    // A running, ready pod and a budget that allows one disruption (no disruption controller
    // runs here to say so).
    s.kubectl(&[
        "-n",
        "t",
        "patch",
        "pod",
        "p",
        "--subresource=status",
        "--type=merge",
        "--field-manager=kubelet-ish",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    s.kubectl(&[
        "-n",
        "t",
        "patch",
        "pdb",
        "pdb",
        "--subresource=status",
        "--type=merge",
        "--field-manager=test-status",
        "-p",
        r#"{"status":{"observedGeneration":1,"disruptionsAllowed":1,"currentHealthy":2,"desiredHealthy":1,"expectedPods":2}}"#,
    ]);
    s.kubectl_stdin(
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/t/pods/p/eviction",
            "-f",
            "-",
        ],
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"t"}}"#,
    );

    let pdb = get(&s, "t", "pdb/pdb");
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    let entries = managers(&pdb);
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["manager"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["kube-apiserver", "kubectl-create", "test-status"]);
    assert_eq!(
        entries[0],
        json!({
            "apiVersion": "policy/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {
                "f:conditions": {
                    ".": {},
                    "k:{\"type\":\"DisruptionAllowed\"}": {
                        ".": {}, "f:lastTransitionTime": {}, "f:message": {},
                        "f:observedGeneration": {}, "f:reason": {}, "f:status": {}, "f:type": {},
                    },
                },
                "f:disruptedPods": {".": {}, "f:p": {}},
                "f:disruptionsAllowed": {},
            }},
            "manager": "kube-apiserver",
            "operation": "Update",
            "subresource": "status",
        })
    );

    // The pod has its DisruptionTarget condition and is being deleted, with no entry for either.
    let pod = get(&s, "t", "pod/p");
    assert!(pod["metadata"]["deletionTimestamp"].is_string());
    assert!(
        pod["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "DisruptionTarget"))
    );
    let names: Vec<Value> = managers(&pod)
        .iter()
        .map(|e| e["manager"].clone())
        .collect();
    assert_eq!(names, [json!("kubectl-create"), json!("kubelet-ish")]);
}

#[test]
fn the_tokens_controllers_fill_in_is_the_controller_managers_update() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "t"]);
    s.kubectl(&["-n", "t", "create", "serviceaccount", "robot"]);
    s.kubectl_stdin(
        &["-n", "t", "create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "robot-token",
                         "annotations": {"kubernetes.io/service-account.name": "robot"}}}"#,
    );
    wait_until("the token filled in", 10, || {
        get(&s, "t", "secret/robot-token")["data"]["token"].is_string()
    });
    let secret = get(&s, "t", "secret/robot-token");
    assert_eq!(
        managers(&secret),
        vec![
            json!({
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:data": {".": {}, "f:ca.crt": {}, "f:namespace": {}, "f:token": {}},
                    "f:metadata": {"f:annotations": {
                        "f:kubernetes.io/service-account.uid": {},
                    }},
                },
                "manager": "kube-controller-manager",
                "operation": "Update",
            }),
            json!({
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {
                        ".": {}, "f:kubernetes.io/service-account.name": {},
                    }},
                    "f:type": {},
                },
                "manager": "kubectl-create",
                "operation": "Update",
            }),
        ]
    );
}
