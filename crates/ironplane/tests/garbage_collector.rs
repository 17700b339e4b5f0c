//! The in-process garbage collector against the real binary, driven by kubectl: a
//! Deployment → ReplicaSet → Pod chain (made by the test, as no workload controller runs here)
//! deleted in the background, in the foreground (the owner waits while a dependent is held by
//! a finalizer) and with orphaning; a custom resource owning a ConfigMap, and the collector's
//! writes to custom resources in their managed fields; dependents whose
//! owner never existed or lives in another namespace; a cluster-scoped dependent of a
//! namespaced owner, which upstream leaves alone; and `--controllers` turning it off.

use crate::common;

use std::time::Duration;

use common::{Server, wait_until};
use serde_json::{Value, json};

fn wait_gone(s: &Server, ns: &str, what: &str) {
    wait_until(&format!("{what} to be collected"), 15, || {
        s.get_json(ns, what).is_none()
    });
}

fn uid(v: &Value) -> String {
    v["metadata"]["uid"].as_str().expect("a uid").to_string()
}

fn owner(api_version: &str, kind: &str, of: &Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": of["metadata"]["name"],
        "uid": of["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

fn create(s: &Server, obj: Value) -> Value {
    let out = s.kubectl_stdin(&["create", "-o", "json", "-f", "-"], &obj.to_string());
    serde_json::from_str(&out).expect("the created object")
}

/// A Deployment, a ReplicaSet it controls and a Pod the ReplicaSet controls, in `ns`.
fn chain(s: &Server, ns: &str, pod_finalizers: &[&str]) -> (Value, Value, Value) {
    let labels = json!({"app": "web"});
    let template = json!({
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    });
    let d = create(
        s,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }),
    );
    let rs = create(
        s,
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": ns,
                         "ownerReferences": [owner("apps/v1", "Deployment", &d)]},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }),
    );
    let pod = create(
        s,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1-a", "namespace": ns, "labels": labels,
                         "finalizers": pod_finalizers,
                         "ownerReferences": [owner("apps/v1", "ReplicaSet", &rs)]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }),
    );
    (d, rs, pod)
}

/// The namespaced custom resource `widgets.example.com/v1`, established and watched by the
/// collector (which picks up new resources within a second).
fn widgets(s: &Server) {
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#,
    );
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ]);
    // A widget whose owner never existed is collected once the collector watches widgets.
    create(
        s,
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "probe", "namespace": "default", "ownerReferences": [
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "never",
                    "uid": "00000000-0000-0000-0000-000000000001"}]}}),
    );
    wait_gone(s, "default", "widget/probe");
}

/// A namespace whose `default` ServiceAccount exists (pods need it to be admitted).
fn namespace(s: &Server, ns: &str) {
    s.kubectl(&["create", "namespace", ns]);
    wait_until("the default service account", 15, || {
        s.get_json(ns, "serviceaccount/default").is_some()
    });
}

#[test]
fn background_deletion_collects_the_whole_chain() {
    let s = Server::start();
    namespace(&s, "bg");
    chain(&s, "bg", &[]);
    s.kubectl(&["-n", "bg", "delete", "deployment", "web"]);
    assert!(
        s.get_json("bg", "deployment/web").is_none(),
        "the owner goes at once"
    );
    wait_gone(&s, "bg", "replicaset/web-1");
    wait_gone(&s, "bg", "pod/web-1-a");
}

#[test]
fn foreground_deletion_waits_for_blocking_dependents() {
    let s = Server::start();
    namespace(&s, "fg");
    // The pod is held by a finalizer of the test's, so the foreground wait can be seen.
    chain(&s, "fg", &["example.com/hold"]);
    s.kubectl(&[
        "-n",
        "fg",
        "delete",
        "deployment",
        "web",
        "--cascade=foreground",
        "--wait=false",
    ]);
    // The pod is being deleted and held; the ReplicaSet (which has a dependent) and the
    // Deployment wait for it with the foregroundDeletion finalizer.
    wait_until("the pod to be marked for deletion", 15, || {
        s.get_json("fg", "pod/web-1-a")
            .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_string())
    });
    for what in ["replicaset/web-1", "deployment/web"] {
        let o = s
            .get_json("fg", what)
            .unwrap_or_else(|| panic!("{what} waits for its dependents"));
        assert!(
            o["metadata"]["deletionTimestamp"].is_string(),
            "{what}: {o}"
        );
        assert_eq!(
            o["metadata"]["finalizers"],
            json!(["foregroundDeletion"]),
            "{what}"
        );
    }
    // Releasing the pod lets the chain finish, owner last.
    s.kubectl(&[
        "-n",
        "fg",
        "patch",
        "pod",
        "web-1-a",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    wait_gone(&s, "fg", "pod/web-1-a");
    wait_gone(&s, "fg", "replicaset/web-1");
    wait_gone(&s, "fg", "deployment/web");
}

#[test]
fn orphan_deletion_releases_the_dependents() {
    let s = Server::start();
    namespace(&s, "or");
    let (_, rs, _) = chain(&s, "or", &[]);
    s.kubectl(&[
        "-n",
        "or",
        "delete",
        "deployment",
        "web",
        "--cascade=orphan",
    ]);
    assert!(s.get_json("or", "deployment/web").is_none());
    // The ReplicaSet stays, no longer owned; the pod stays owned by the ReplicaSet.
    let rs_now = s
        .get_json("or", "replicaset/web-1")
        .expect("the orphaned ReplicaSet stays");
    assert!(
        rs_now["metadata"].get("ownerReferences").is_none(),
        "{rs_now}"
    );
    let pod = s.get_json("or", "pod/web-1-a").expect("the pod stays");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], uid(&rs));
    // And it is still collected with its own owner.
    s.kubectl(&["-n", "or", "delete", "replicaset", "web-1"]);
    wait_gone(&s, "or", "pod/web-1-a");
}

#[test]
fn a_custom_resource_takes_its_configmap_with_it() {
    let s = Server::start();
    widgets(&s);
    let w = create(
        &s,
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "default"}}),
    );
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "w-config", "namespace": "default",
                            "ownerReferences": [owner("example.com/v1", "Widget", &w)]}}),
    );
    // The dependent of a custom resource is seen, and survives while its owner lives.
    std::thread::sleep(Duration::from_millis(300));
    assert!(s.get_json("default", "configmap/w-config").is_some());
    s.kubectl(&["delete", "widget", "w"]);
    wait_gone(&s, "default", "configmap/w-config");
}

/// The managed fields of `what` in `default`, by manager and operation, each with its
/// `fieldsV1` (which `kubectl get` leaves out unless asked).
fn managers(s: &Server, what: &str) -> Vec<(String, String, Value)> {
    let out = s.kubectl(&[
        "-n",
        "default",
        "get",
        what,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let obj: Value = serde_json::from_str(&out).unwrap();
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("manager"), s("operation"), m["fieldsV1"].clone())
        })
        .collect()
}

/// Orphaning a custom resource's owner removes its reference through the API as upstream's
/// collector does: the field leaves the managed fields of whoever set it, and the collector,
/// which only removed fields, owns nothing (upstream drops an empty entry).
#[test]
fn an_orphaned_custom_resource_loses_the_reference_from_its_managed_fields() {
    let s = Server::start();
    widgets(&s);
    let o = create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "namespace": "default"}}),
    );
    create(
        &s,
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "default",
                            "ownerReferences": [owner("v1", "ConfigMap", &o)]},
               "spec": {"size": 1}}),
    );
    // The reference is tracked by its uid, as upstream tracks a custom resource's.
    let key = format!("k:{{\"uid\":\"{}\"}}", uid(&o));
    assert_eq!(
        managers(&s, "widget/w")[0].2,
        json!({"f:metadata": {"f:ownerReferences": {".": {}, key.as_str(): {}}},
               "f:spec": {".": {}, "f:size": {}}})
    );
    s.kubectl(&["delete", "configmap", "o", "--cascade=orphan"]);
    wait_until("the reference to be removed", 15, || {
        s.get_json("default", "widget/w")
            .is_some_and(|w| w["metadata"].get("ownerReferences").is_none())
    });
    let after = managers(&s, "widget/w");
    assert_eq!(
        after,
        vec![(
            "kubectl-create".to_string(),
            "Update".to_string(),
            json!({"f:spec": {".": {}, "f:size": {}}})
        )]
    );
}

/// A custom resource between an owner deleted in the foreground and a dependent that is
/// itself deleting its dependents has its references unblocked first (upstream's cycle
/// guard): the collector's write shows in its managed fields as `kube-controller-manager`'s
/// `Update`, owning the reference it changed.
#[test]
fn the_collectors_write_to_a_custom_resource_is_in_its_managed_fields() {
    let s = Server::start();
    widgets(&s);
    let cm = |name: &str, meta: Value| {
        let mut m = meta;
        m["name"] = json!(name);
        m["namespace"] = json!("default");
        create(
            &s,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": m}),
        )
    };
    let a = cm("a", json!({}));
    // `b` is held by a finalizer of the test's: once unblocked it is deleted in the
    // foreground, or, when `a` is gone by the time it is looked at again (upstream's collector
    // races the same way), in the background; either way it stays to be looked at.
    let b = create(
        &s,
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "b", "namespace": "default",
                            "finalizers": ["example.com/hold"],
                            "ownerReferences": [owner("v1", "ConfigMap", &a)]}}),
    );
    let c = cm(
        "c",
        json!({"ownerReferences": [owner("example.com/v1", "Widget", &b)]}),
    );
    cm(
        "d",
        json!({"finalizers": ["example.com/hold"],
               "ownerReferences": [owner("v1", "ConfigMap", &c)]}),
    );
    // `c` deletes its dependents first, and waits for `d`, which a finalizer holds.
    s.kubectl(&[
        "delete",
        "configmap",
        "c",
        "--cascade=foreground",
        "--wait=false",
    ]);
    wait_until("d to be marked for deletion", 15, || {
        s.get_json("default", "configmap/d")
            .is_some_and(|d| d["metadata"]["deletionTimestamp"].is_string())
    });
    s.kubectl(&[
        "delete",
        "configmap",
        "a",
        "--cascade=foreground",
        "--wait=false",
    ]);
    // `b` stops blocking `a`, which goes; `b` is deleted.
    wait_gone(&s, "default", "configmap/a");
    wait_until("b to be marked for deletion", 15, || {
        s.get_json("default", "widget/b")
            .is_some_and(|b| b["metadata"]["deletionTimestamp"].is_string())
    });
    let w = s.get_json("default", "widget/b").unwrap();
    assert_eq!(
        w["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
        false
    );
    let ours = managers(&s, "widget/b");
    let key = format!("k:{{\"uid\":\"{}\"}}", uid(&a));
    let collector = ours
        .iter()
        .find(|(m, _, _)| m == "kube-controller-manager")
        .unwrap_or_else(|| panic!("no entry of the collector: {ours:?}"));
    assert_eq!(collector.1, "Update");
    // An owner reference is atomic, tracked whole by its uid.
    assert_eq!(
        collector.2,
        json!({"f:metadata": {"f:ownerReferences": {key.as_str(): {}}}})
    );
    // The creator no longer owns the reference the collector changed, only the list (and its
    // finalizer, tracked by value).
    let creator = ours.iter().find(|(m, _, _)| m == "kubectl-create").unwrap();
    assert_eq!(
        creator.2,
        json!({"f:metadata": {
            "f:finalizers": {".": {}, "v:\"example.com/hold\"": {}},
            "f:ownerReferences": {},
        }}),
        "{ours:?}"
    );
    // Releasing `d` and `b` lets the rest go.
    for what in ["configmap/d", "widget/b"] {
        s.kubectl(&[
            "patch",
            what,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
        ]);
    }
    wait_gone(&s, "default", "configmap/c");
    wait_gone(&s, "default", "widget/b");
}

#[test]
fn dependents_of_missing_owners_are_collected_and_invalid_ones_left() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "a"]);
    s.kubectl(&["create", "namespace", "b"]);
    // An owner that never existed.
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "lost", "namespace": "a", "ownerReferences": [
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "never",
                    "uid": "00000000-0000-0000-0000-000000000001"}]}}),
    );
    // An owner in another namespace: looked for in the dependent's own, so absent.
    let real = create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "owner", "namespace": "a"}}),
    );
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "elsewhere", "namespace": "b",
                            "ownerReferences": [owner("v1", "ConfigMap", &real)]}}),
    );
    // A cluster-scoped dependent of a namespaced owner: invalid, and upstream leaves it.
    create(
        &s,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "held-by-a-configmap",
                            "ownerReferences": [owner("v1", "ConfigMap", &real)]}}),
    );
    // A cluster-scoped owner of a namespaced dependent is valid, and kept while it lives.
    let cluster_owner = create(
        &s,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cluster-owner"}}),
    );
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cluster-owned", "namespace": "b",
                            "ownerReferences": [owner("rbac.authorization.k8s.io/v1", "ClusterRole", &cluster_owner)]}}),
    );
    wait_gone(&s, "a", "configmap/lost");
    wait_gone(&s, "b", "configmap/elsewhere");
    assert!(s.get_json("a", "configmap/owner").is_some());
    assert!(s.get_json("", "clusterrole/held-by-a-configmap").is_some());
    assert!(s.get_json("b", "configmap/cluster-owned").is_some());
    s.kubectl(&["delete", "clusterrole", "cluster-owner"]);
    wait_gone(&s, "b", "configmap/cluster-owned");
}

#[test]
fn two_owners_keep_a_dependent_until_both_are_gone() {
    let s = Server::start();
    let o1 = create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o1", "namespace": "default"}}),
    );
    let o2 = create(
        &s,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "o2", "namespace": "default"}}),
    );
    let mut r2 = owner("v1", "Secret", &o2);
    r2["controller"] = json!(false);
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "shared", "namespace": "default",
                            "ownerReferences": [owner("v1", "ConfigMap", &o1), r2]}}),
    );
    s.kubectl(&["delete", "configmap", "o1"]);
    // The gone owner's reference is removed; the other keeps the dependent.
    wait_until("the dangling reference to be removed", 15, || {
        s.get_json("default", "configmap/shared").is_some_and(|d| {
            d["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|r| r.len() == 1 && r[0]["uid"] == uid(&o2))
        })
    });
    s.kubectl(&["delete", "secret", "o2"]);
    wait_gone(&s, "default", "configmap/shared");
}

#[test]
fn controllers_flag_turns_the_collector_off_and_refuses_unknown_names() {
    let s = Server::start_with(&["--controllers=*,-garbagecollector"]);
    create(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "lost", "namespace": "default", "ownerReferences": [
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "never",
                    "uid": "00000000-0000-0000-0000-000000000001"}]}}),
    );
    // Other controllers still run: a new namespace gets its service account...
    s.kubectl(&["create", "namespace", "still-on"]);
    wait_until("the default service account", 15, || {
        s.get_json("still-on", "serviceaccount/default").is_some()
    });
    // ...while the dangling dependent stays.
    std::thread::sleep(Duration::from_millis(500));
    assert!(s.get_json("default", "configmap/lost").is_some());

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(s.dir.path().join("other"))
        .arg("--controllers=*,-nope,garbage")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "\"nope\" is not in the list of known controllers, \"garbage\" is not in the list of known controllers"
        ),
        "{err}"
    );
}
