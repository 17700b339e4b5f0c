//! Events the in-process controllers record, as upstream's kube-controller-manager records
//! them, read back with `kubectl get events -o json`: the garbage collector's
//! `OwnerRefInvalidNamespace` on a dependent naming an owner of another namespace, and the
//! EndpointSlice controller's `FailedToUpdateEndpointSlices` on a Service whose pod runs on a
//! node that does not exist, repeated as one Event whose count grows.

use crate::common;

use common::{Server, wait_until};
use serde_json::{Value, json};

fn create(s: &Server, obj: Value) -> Value {
    let out = s.kubectl_stdin(&["create", "-o", "json", "-f", "-"], &obj.to_string());
    serde_json::from_str(&out).expect("the created object")
}

/// The Events of `ns` with `reason`.
fn events(s: &Server, ns: &str, reason: &str) -> Vec<Value> {
    let out = s.kubectl(&[
        "get",
        "events",
        "-n",
        ns,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let list: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["reason"] == reason)
        .cloned()
        .collect()
}

fn one_event(s: &Server, ns: &str, reason: &str) -> Value {
    wait_until(&format!("a {reason} Event in {ns}"), 20, || {
        !events(s, ns, reason).is_empty()
    });
    let found = events(s, ns, reason);
    assert_eq!(found.len(), 1, "{found:#?}");
    found[0].clone()
}

/// What client-go's recorder writes besides type, reason and message.
fn assert_recorded_by(event: &Value, component: &str, object_name: &str) {
    assert_eq!(event["source"], json!({"component": component}));
    assert_eq!(event["reportingComponent"], component);
    assert_eq!(event["reportingInstance"], "");
    let name = event["metadata"]["name"].as_str().expect("a name");
    let suffix = name
        .strip_prefix(&format!("{object_name}."))
        .unwrap_or_else(|| panic!("{name} is <object>.<hex time>"));
    assert!(
        suffix.len() >= 16 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
        "{name}"
    );
    assert!(event["firstTimestamp"].is_string(), "{event:#}");
    assert!(event["lastTimestamp"].is_string(), "{event:#}");
    let managers: Vec<&Value> = event["metadata"]["managedFields"]
        .as_array()
        .expect("managed fields")
        .iter()
        .map(|m| &m["manager"])
        .collect();
    assert_eq!(managers, vec!["kube-controller-manager"]);
}

#[test]
fn the_garbage_collector_reports_an_owner_in_another_namespace() {
    let s = Server::start();
    // The owner's namespace sorts first, so that a list shows the owner before the dependent,
    // as a watch does: upstream reports the reference when it sees the dependent after the
    // owner.
    for ns in ["ev-a", "ev-b"] {
        s.kubectl(&["create", "namespace", ns]);
    }
    let owner = create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "owner", "namespace": "ev-a"}}),
    );
    let owner_uid = owner["metadata"]["uid"].as_str().expect("uid").to_string();
    let dep = create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "dep", "namespace": "ev-b", "ownerReferences": [{
                   "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}]}}),
    );
    let event = one_event(&s, "ev-b", "OwnerRefInvalidNamespace");
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["message"],
        format!(
            "ownerRef [v1/ConfigMap, namespace: ev-b, name: owner, uid: {owner_uid}] does not exist in namespace \"ev-b\""
        )
    );
    // The dependent as the graph knows it: no resourceVersion.
    assert_eq!(
        event["involvedObject"],
        json!({"kind": "ConfigMap", "namespace": "ev-b", "name": "dep",
               "uid": dep["metadata"]["uid"], "apiVersion": "v1"})
    );
    assert_eq!(event["count"], 1);
    assert_recorded_by(&event, "garbage-collector-controller", "dep");
    // The owner is not in the dependent's namespace, so the dependent is collected.
    wait_until("the dependent to be collected", 15, || {
        s.get_json("ev-b", "configmap/dep").is_none()
    });
}

#[test]
fn the_endpointslice_controller_reports_a_pod_on_a_missing_node_and_counts_repeats() {
    let s = Server::start();
    let ns = "ev-slices";
    s.kubectl(&["create", "namespace", ns]);
    wait_until("the default service account", 15, || {
        s.get_json(ns, "serviceaccount/default").is_some()
    });
    let svc = create(
        &s,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    );
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1", "namespace": ns, "labels": {"app": "web"}},
               "spec": {"nodeName": "ghost", "containers": [{"name": "c", "image": "nginx"}]}}),
    );
    // What a kubelet would report: the pod runs with an IP.
    let status = json!({"status": {"phase": "Running", "podIP": "10.9.8.7",
                                   "podIPs": [{"ip": "10.9.8.7"}]}});
    s.kubectl(&[
        "-n",
        ns,
        "patch",
        "pod",
        "web-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let event = one_event(&s, ns, "FailedToUpdateEndpointSlices");
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["message"],
        format!(
            "Error updating Endpoint Slices for Service {ns}/web: skipping Pod web-1 for Service {ns}/web: Node ghost Not Found"
        )
    );
    let involved = &event["involvedObject"];
    assert_eq!(
        (
            &involved["kind"],
            &involved["apiVersion"],
            &involved["namespace"],
            &involved["name"],
            &involved["uid"],
        ),
        (
            &json!("Service"),
            &json!("v1"),
            &json!(ns),
            &json!("web"),
            &svc["metadata"]["uid"],
        )
    );
    assert!(involved["resourceVersion"].is_string(), "{involved:#}");
    assert_recorded_by(&event, "endpoint-slice-controller", "web");
    // The controller retries with backoff and fails the same way: the same Event is patched,
    // its count raised, rather than another one made.
    wait_until("the Event's count to grow", 20, || {
        let found = events(&s, ns, "FailedToUpdateEndpointSlices");
        found.len() == 1 && found[0]["count"].as_i64().is_some_and(|c| c >= 2)
    });
    let again = one_event(&s, ns, "FailedToUpdateEndpointSlices");
    assert_eq!(again["metadata"]["name"], event["metadata"]["name"]);
    assert_eq!(again["firstTimestamp"], event["firstTimestamp"]);
    assert_eq!(again["message"], event["message"]);
}
