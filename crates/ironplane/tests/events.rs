//! Events are stored once and served twice: core/v1 and events.k8s.io/v1 read and write the
//! same objects, each in its own field names, and select on each other's fields the way
//! upstream's field label conversion maps them.

use crate::common;

use common::Server;
use serde_json::Value;

const CORE_EVENT: &str = r#"{"apiVersion": "v1", "kind": "Event",
  "metadata": {"name": "core-e", "namespace": "default"},
  "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1", "apiVersion": "v1"},
  "reason": "Started", "message": "started", "type": "Normal",
  "source": {"component": "kubelet", "host": "n1"}, "count": 2}"#;

const V1_EVENT: &str = r#"{"apiVersion": "events.k8s.io/v1", "kind": "Event",
  "metadata": {"name": "new-e", "namespace": "default"},
  "eventTime": "2024-01-01T00:00:00.000000Z",
  "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
  "action": "Scale", "reason": "Scaled", "type": "Normal", "note": "scaled",
  "regarding": {"kind": "Deployment", "namespace": "default", "name": "d1", "apiVersion": "apps/v1"}}"#;

fn raw(s: &Server, path: &str) -> Value {
    serde_json::from_str(&s.kubectl(&["get", "--raw", path])).expect("JSON")
}

fn names(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

#[test]
fn events_are_one_store_in_two_versions() {
    let s = Server::start();
    s.kubectl_stdin(&["create", "-f", "-"], CORE_EVENT);
    s.kubectl_stdin(&["create", "-f", "-"], V1_EVENT);

    // The core event, read through events.k8s.io.
    let e = raw(
        &s,
        "/apis/events.k8s.io/v1/namespaces/default/events/core-e",
    );
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["note"], "started");
    assert_eq!(e["regarding"]["name"], "p1");
    assert_eq!(e["deprecatedSource"]["component"], "kubelet");
    assert_eq!(e["deprecatedCount"], 2);
    assert!(e.get("message").is_none() && e.get("involvedObject").is_none());

    // The events.k8s.io event, read through core.
    let e = raw(&s, "/api/v1/namespaces/default/events/new-e");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["message"], "scaled");
    assert_eq!(e["involvedObject"]["kind"], "Deployment");
    assert_eq!(e["reportingComponent"], "example.com/ctl");
    assert!(e.get("note").is_none() && e.get("regarding").is_none());

    // Both lists hold both.
    let both = vec!["core-e".to_string(), "new-e".to_string()];
    assert_eq!(
        names(&raw(&s, "/apis/events.k8s.io/v1/namespaces/default/events")),
        both
    );
    assert_eq!(names(&raw(&s, "/api/v1/namespaces/default/events")), both);

    // Selectors name each version's fields and read the same attributes.
    let by_regarding = raw(
        &s,
        "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dp1",
    );
    assert_eq!(names(&by_regarding), vec!["core-e"]);
    let by_controller = raw(
        &s,
        "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=reportingController%3Dexample.com%2Fctl",
    );
    assert_eq!(names(&by_controller), vec!["new-e"]);
    let by_involved = raw(
        &s,
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DDeployment",
    );
    assert_eq!(names(&by_involved), vec!["new-e"]);
    // A source falls back to the reporting controller.
    let by_source = raw(
        &s,
        "/api/v1/namespaces/default/events?fieldSelector=source%3Dexample.com%2Fctl",
    );
    assert_eq!(names(&by_source), vec!["new-e"]);

    // Each version refuses the other's names.
    let err = s.kubectl_fails(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/events?fieldSelector=regarding.name%3Dp1",
    ]);
    assert!(
        err.contains("field label not supported: regarding.name"),
        "{err}"
    );
    let err = s.kubectl_fails(&[
        "get",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp1",
    ]);
    assert!(
        err.contains("field label not supported: involvedObject.name"),
        "{err}"
    );

    // Deleting through one version removes it from the other.
    s.kubectl(&[
        "delete",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events/core-e",
    ]);
    assert_eq!(
        names(&raw(&s, "/api/v1/namespaces/default/events")),
        vec!["new-e"]
    );
}

#[test]
fn nodes_and_namespaces_select_on_their_own_fields_only() {
    let s = Server::start();
    let list = raw(&s, "/api/v1/namespaces?fieldSelector=status.phase%3DActive");
    assert!(names(&list).contains(&"default".to_string()));
    let err = s.kubectl_fails(&[
        "get",
        "--raw",
        "/api/v1/nodes?fieldSelector=metadata.namespace%3Dx",
    ]);
    assert!(
        err.contains("field label not supported: metadata.namespace"),
        "{err}"
    );
    let err = s.kubectl_fails(&[
        "get",
        "--raw",
        "/api/v1/namespaces?fieldSelector=spec.finalizers%3Dx",
    ]);
    assert!(
        err.contains("field label not supported: spec.finalizers"),
        "{err}"
    );
}
