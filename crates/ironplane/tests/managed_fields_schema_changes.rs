//! managedFields across a change of a CRD's schema, end to end with kubectl: fields a manager
//! owned inside a map or list that the CRD then makes atomic are owned as the whole map or list
//! from the next write on (upstream's `reconcileManagedFieldsWithSchemaChanges`), so another
//! applier changing it conflicts with that manager; and managers of versions no longer served
//! are dropped. Expectations are what kube-apiserver v1.36.2 answered to the same requests.

use crate::common;

use common::Server;
use serde_json::{Value, json};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              sel: {type: object, additionalProperties: {type: string}}
              tags: {type: array, items: {type: string}, x-kubernetes-list-type: set}
              other: {type: integer}
"#;

fn apply_crd(s: &Server, crd: &str) {
    s.kubectl_stdin(&["apply", "-f", "-"], crd);
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
    ]);
}

/// Each manager's name, operation and fields.
fn managers(s: &Server) -> Vec<Value> {
    let out = s.kubectl(&[
        "-n",
        "w",
        "get",
        "widget",
        "a",
        "--show-managed-fields",
        "-o",
        "json",
    ]);
    let obj: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    obj["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|e| json!([e["manager"], e["operation"], e["fieldsV1"]]))
        .collect()
}

fn apply(s: &Server, manager: &str, spec: Value) -> std::process::Output {
    let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                     "metadata": {"name": "a"}, "spec": spec});
    s.kubectl_stdin_output(
        &[
            "-n",
            "w",
            "apply",
            "--server-side",
            &format!("--field-manager={manager}"),
            "-f",
            "-",
        ],
        &obj.to_string(),
    )
}

#[test]
fn fields_owned_inside_what_became_atomic_are_owned_whole_after_the_next_write() {
    let s = Server::start();
    apply_crd(&s, CRD);
    s.kubectl(&["create", "namespace", "w"]);
    let out = apply(&s, "alice", json!({"sel": {"a": "1"}, "tags": ["x"]}));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `sel` becomes an atomic map, `tags` an atomic list.
    let atomic = CRD
        .replace(
            "additionalProperties: {type: string}}",
            "additionalProperties: {type: string}, x-kubernetes-map-type: atomic}",
        )
        .replace(
            "x-kubernetes-list-type: set",
            "x-kubernetes-list-type: atomic",
        );
    apply_crd(&s, &atomic);
    // Nothing is rewritten until the object is written again.
    assert_eq!(
        managers(&s),
        [json!(["alice", "Apply", {"f:spec": {"f:sel": {"f:a": {}}, "f:tags": {"v:\"x\"": {}}}}])]
    );

    s.kubectl(&[
        "-n",
        "w",
        "patch",
        "widget",
        "a",
        "--type=merge",
        "--field-manager=bob",
        "-p",
        r#"{"spec":{"other":1}}"#,
    ]);
    assert_eq!(
        managers(&s),
        [
            json!(["alice", "Apply", {"f:spec": {"f:sel": {}, "f:tags": {}}}]),
            json!(["bob", "Update", {"f:spec": {"f:other": {}}}]),
        ]
    );

    // Another applier's value for the whole map, or the whole list, is a conflict with alice.
    for (spec, field) in [
        (json!({"sel": {"b": "2"}}), ".spec.sel"),
        (json!({"tags": ["y"]}), ".spec.tags"),
    ] {
        let out = apply(&s, "carol", spec);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "error: Apply failed with 1 conflict: conflict with \"alice\": {field}\n"
            )),
            "{err}"
        );
    }
}

/// Managers that wrote in versions of a built-in kind that are not served (extensions/v1beta1
/// and apps/v1beta2 Deployments, long removed) are dropped on the next write, as upstream's
/// type converter, which knows only the served versions' schemas, drops them.
#[test]
fn managers_of_versions_not_served_are_dropped() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "d"]);
    s.kubectl(&["-n", "d", "create", "deployment", "web", "--image=nginx"]);
    let out = s.kubectl(&[
        "-n",
        "d",
        "get",
        "deployment",
        "web",
        "--show-managed-fields",
        "-o",
        "json",
    ]);
    let mut dep: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let entries = dep["metadata"]["managedFields"]
        .as_array_mut()
        .expect("managedFields");
    for (manager, api_version) in [
        ("old-tool", "extensions/v1beta1"),
        ("older-tool", "apps/v1beta2"),
        ("gone-tool", "nosuch/v9"),
    ] {
        entries.push(json!({"manager": manager, "operation": "Update",
            "apiVersion": api_version, "time": "2020-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:minReadySeconds": {}}}}));
    }
    s.kubectl_stdin(&["-n", "d", "replace", "-f", "-"], &dep.to_string());
    let out = s.kubectl(&[
        "-n",
        "d",
        "get",
        "deployment",
        "web",
        "--show-managed-fields",
        "-o",
        "json",
    ]);
    let dep: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let managers: Vec<(&str, &str)> = dep["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or(""),
                e["apiVersion"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(managers, [("kubectl-create", "apps/v1")]);
}
