//! Server-side apply and managed fields with the real kubectl: applies, conflicts and forcing,
//! shared ownership, removal of fields nobody else owns, status applies, `diff --server-side`,
//! the migration from client-side apply and back, and custom resources with keyed lists.

use crate::common;

use common::Server;
use serde_json::Value;

fn json(s: &str) -> Value {
    serde_json::from_str(s).expect("kubectl prints JSON")
}

fn get(s: &Server, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json", "--show-managed-fields"];
    all.extend_from_slice(args);
    json(&s.kubectl(&all))
}

/// The managers of an object as `(manager, operation, subresource, fieldsV1)`.
fn managers(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (
                s("manager"),
                s("operation"),
                s("subresource"),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn cm(name: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n{data}"
    )
}

#[test]
fn apply_twice_then_a_second_manager_conflicts_until_forced() {
    let s = Server::start();
    let doc = cm("ssa", "  a: \"1\"\n  b: \"2\"\n");
    let out = s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &doc);
    assert!(out.contains("configmap/ssa serverside-applied"), "{out}");
    let first = get(&s, &["configmap", "ssa"]);
    assert_eq!(
        managers(&first),
        vec![(
            "kubectl".into(),
            "Apply".into(),
            String::new(),
            // Applied fields only: `data` is a struct field, owned through its keys.
            serde_json::json!({"f:data": {"f:a": {}, "f:b": {}}})
        )]
    );
    // The same apply again changes nothing: not even the resourceVersion.
    s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &doc);
    let second = get(&s, &["configmap", "ssa"]);
    assert_eq!(
        first["metadata"]["resourceVersion"],
        second["metadata"]["resourceVersion"]
    );

    // Another manager changing a field kubectl owns: 409 naming the field and the manager.
    let other = cm("ssa", "  a: \"9\"\n");
    let err = s
        .kubectl_stdin_output(
            &["apply", "--server-side", "--field-manager=other", "-f", "-"],
            &other,
        )
        .stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{err}"
    );
    assert_eq!(get(&s, &["configmap", "ssa"])["data"]["a"], "1");

    // Forced, it takes the field: kubectl keeps only `b`.
    s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
        ],
        &other,
    );
    let forced = get(&s, &["configmap", "ssa"]);
    assert_eq!(forced["data"], serde_json::json!({"a": "9", "b": "2"}));
    let m = managers(&forced);
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0].0, "kubectl");
    assert_eq!(m[0].3, serde_json::json!({"f:data": {"f:b": {}}}));
    assert_eq!(m[1].0, "other");
    assert_eq!(m[1].3, serde_json::json!({"f:data": {"f:a": {}}}));
}

#[test]
fn shared_fields_stay_and_a_sole_owner_removes_what_it_stops_applying() {
    let s = Server::start();
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=one", "-f", "-"],
        &cm("share", "  a: \"1\"\n  b: \"2\"\n  c: \"3\"\n"),
    );
    // The same value of `a` from a second manager is no conflict: both own it.
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=two", "-f", "-"],
        &cm("share", "  a: \"1\"\n"),
    );
    // `one` stops applying `a` and `b`: `a` stays (two owns it), `b` goes (nobody does).
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=one", "-f", "-"],
        &cm("share", "  c: \"3\"\n"),
    );
    let obj = get(&s, &["configmap", "share"]);
    assert_eq!(obj["data"], serde_json::json!({"a": "1", "c": "3"}));
    // Appliers are listed oldest apply first: `two`, then `one`, which applied again.
    let m = managers(&obj);
    assert_eq!(
        m.iter()
            .map(|e| (e.0.as_str(), e.3.clone()))
            .collect::<Vec<_>>(),
        vec![
            ("two", serde_json::json!({"f:data": {"f:a": {}}})),
            ("one", serde_json::json!({"f:data": {"f:c": {}}})),
        ]
    );
    // An update by another client takes what it changes from the appliers.
    s.kubectl(&[
        "patch",
        "configmap",
        "share",
        "--type=merge",
        "-p",
        r#"{"data":{"c":"4"}}"#,
    ]);
    let m = managers(&get(&s, &["configmap", "share"]));
    assert!(
        m.iter().any(|e| e.0 == "kubectl-patch"
            && e.1 == "Update"
            && e.3 == serde_json::json!({"f:data": {"f:c": {}}})),
        "{m:?}"
    );
    assert!(!m.iter().any(|e| e.0 == "one"), "{m:?}");
}

#[test]
fn status_applies_and_server_side_diff() {
    let s = Server::start();
    let deploy = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
"#;
    s.kubectl_stdin(&["apply", "--server-side", "-f", "-"], deploy);
    let obj = get(&s, &["deployment", "web"]);
    let m = managers(&obj);
    assert_eq!(m.len(), 1, "{m:?}");
    // Applied fields only: a port's key takes protocol's default, as upstream's does.
    assert_eq!(
        m[0].3["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]["f:ports"],
        serde_json::json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
    );
    assert!(m[0].3["f:spec"].get("f:strategy").is_none(), "{:?}", m[0].3);

    let status = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
status:
  observedGeneration: 7
"#;
    s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--subresource=status",
            "--field-manager=ctrl",
            "-f",
            "-",
        ],
        status,
    );
    let obj = get(&s, &["deployment", "web"]);
    assert_eq!(obj["status"]["observedGeneration"], 7);
    assert!(
        managers(&obj).iter().any(|e| e.0 == "ctrl"
            && e.2 == "status"
            && e.3 == serde_json::json!({"f:status": {"f:observedGeneration": {}}})),
        "{:?}",
        managers(&obj)
    );

    // diff --server-side shows what an apply would change, and changes nothing.
    let changed = deploy.replace("replicas: 2", "replicas: 5");
    let out = s.kubectl_stdin_output(&["diff", "--server-side", "-f", "-"], &changed);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("-  replicas: 2") && text.contains("+  replicas: 5"),
        "{text}"
    );
    assert_eq!(get(&s, &["deployment", "web"])["spec"]["replicas"], 2);
}

#[test]
fn migration_from_client_side_apply_and_back() {
    let s = Server::start();
    s.kubectl_stdin(&["apply", "-f", "-"], &cm("csa", "  a: \"1\"\n"));
    let m = managers(&get(&s, &["configmap", "csa"]));
    assert_eq!(m[0].0, "kubectl-client-side-apply", "{m:?}");
    // kubectl's server-side apply takes over what it applied client-side: no conflict.
    s.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &cm("csa", "  a: \"2\"\n"),
    );
    let obj = get(&s, &["configmap", "csa"]);
    assert_eq!(obj["data"]["a"], "2");
    let last = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("the annotation is kept");
    assert_eq!(
        json(last)["data"]["a"],
        "2",
        "the annotation follows the apply"
    );
    // And back to client-side apply, which diffs against that annotation.
    s.kubectl_stdin(
        &["apply", "--server-side=false", "-f", "-"],
        &cm("csa", "  a: \"3\"\n"),
    );
    assert_eq!(get(&s, &["configmap", "csa"])["data"]["a"], "3");
}

#[test]
fn custom_resources_merge_keyed_lists_per_manager() {
    let s = Server::start();
    let crd = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
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
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    size: {type: integer}
"#;
    s.kubectl_stdin(&["apply", "-f", "-"], crd);
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ]);
    let widget = |part: &str, size: u32| {
        format!(
            "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\nspec:\n  parts:\n  - name: {part}\n    size: {size}\n"
        )
    };
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=a", "-f", "-"],
        &widget("left", 1),
    );
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=b", "-f", "-"],
        &widget("right", 2),
    );
    let obj = get(&s, &["widget", "w"]);
    assert_eq!(
        obj["spec"]["parts"],
        serde_json::json!([{"name": "left", "size": 1}, {"name": "right", "size": 2}])
    );
    let m = managers(&obj);
    assert_eq!(
        m.iter()
            .find(|e| e.0 == "b")
            .map(|e| e.3["f:spec"]["f:parts"].clone()),
        Some(serde_json::json!({"k:{\"name\":\"right\"}": {".": {}, "f:name": {}, "f:size": {}}}))
    );
    // `b` changing `left` conflicts with `a`.
    let err = s
        .kubectl_stdin_output(
            &["apply", "--server-side", "--field-manager=b", "-f", "-"],
            &widget("left", 5),
        )
        .stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains(r#"conflict with "a": .spec.parts[name="left"].size"#),
        "{err}"
    );
}

#[test]
fn python_client_applies_and_bad_input_gets_upstream_answers() {
    let s = Server::start();
    let out = s.python(&common::tests_dir().join("python/ssa.py"), &[]);
    assert!(out.contains("server-side apply: ok"), "{out}");
}

/// Managers who wrote in another version of the kind see a write in their version: an
/// autoscaling/v1 apply of `targetCPUUtilizationPercentage` conflicts with the autoscaling/v2
/// applier of `metrics` (atomic there), an update through v2 takes the field from the v1
/// applier, and one applier moving from v2 to v1 prunes in the version it applied last.
#[test]
fn managers_of_other_versions_see_writes_in_their_version() {
    let s = Server::start();
    let v2 = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h, namespace: default}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: d}\n  minReplicas: 2\n  maxReplicas: 5\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}\n";
    let v1 = |extra: &str| {
        format!(
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {{name: h, namespace: default}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: d}}\n  maxReplicas: 5\n{extra}"
        )
    };
    let hpa = |s: &Server| get(s, &["horizontalpodautoscalers.v2.autoscaling", "h"]);
    let fields_of = |obj: &Value, manager: &str| {
        obj["metadata"]["managedFields"]
            .as_array()
            .and_then(|m| m.iter().find(|e| e["manager"] == manager).cloned())
            .map(|e| (e["apiVersion"].clone(), e["fieldsV1"].clone()))
    };
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=a", "-f", "-"],
        v2,
    );
    let cpu70 = v1("  targetCPUUtilizationPercentage: 70\n");
    let err = s
        .kubectl_stdin_output(
            &["apply", "--server-side", "--field-manager=b", "-f", "-"],
            &cpu70,
        )
        .stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "a": .spec.metrics"#),
        "{err}"
    );
    s.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=b",
            "--force-conflicts",
            "-f",
            "-",
        ],
        &cpu70,
    );
    let obj = hpa(&s);
    assert_eq!(
        obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        70
    );
    // `a` lost `metrics` (seen in v2) but shares what `b` applied with the same values.
    assert_eq!(
        fields_of(&obj, "a"),
        Some((
            "autoscaling/v2".into(),
            serde_json::json!({"f:spec": {"f:maxReplicas": {}, "f:minReplicas": {}, "f:scaleTargetRef": {"f:apiVersion": {}, "f:kind": {}, "f:name": {}}}})
        ))
    );
    assert_eq!(
        fields_of(&obj, "b"),
        Some((
            "autoscaling/v1".into(),
            // v1's scaleTargetRef is an atomic struct.
            serde_json::json!({"f:spec": {"f:maxReplicas": {}, "f:scaleTargetRef": {}, "f:targetCPUUtilizationPercentage": {}}})
        ))
    );

    // An update through v2 changes what `b` owns in v1: `b` loses it.
    s.kubectl(&[
        "patch",
        "horizontalpodautoscalers.v2.autoscaling",
        "h",
        "--type=json",
        "--field-manager=c",
        "-p",
        r#"[{"op":"replace","path":"/spec/metrics/0/resource/target/averageUtilization","value":80}]"#,
    ]);
    let obj = hpa(&s);
    assert_eq!(
        fields_of(&obj, "b").map(|f| f.1),
        Some(serde_json::json!({"f:spec": {"f:maxReplicas": {}, "f:scaleTargetRef": {}}}))
    );
    assert_eq!(
        fields_of(&obj, "c"),
        Some((
            "autoscaling/v2".into(),
            serde_json::json!({"f:spec": {"f:metrics": {}}})
        ))
    );

    // `a` now applies in v1 without `minReplicas`: pruned in v2, where `a` applied it, and
    // only `a` owned it, so it goes (and comes back as the default); `metrics` stays (`c`).
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=a", "-f", "-"],
        &v1(""),
    );
    let obj = hpa(&s);
    assert_eq!(obj["spec"]["minReplicas"], 1);
    assert_eq!(
        obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(
        fields_of(&obj, "a"),
        Some((
            "autoscaling/v1".into(),
            serde_json::json!({"f:spec": {"f:maxReplicas": {}, "f:scaleTargetRef": {}}})
        ))
    );
}

#[test]
fn scale_subresource_writes_and_applies_own_the_replicas_path() {
    let s = Server::start();
    let out = s.python(&common::tests_dir().join("python/ssa_scale.py"), &[]);
    assert!(out.contains("scale managed fields: ok"), "{out}");
}

/// What the server writes itself carries the managers upstream's writers have: kube-apiserver
/// for what it bootstraps, kube-controller-manager for what the controllers write.
#[test]
fn server_writes_carry_upstream_managers() {
    let s = Server::start();
    let ns = get(&s, &["namespace", "default"]);
    assert_eq!(
        managers(&ns),
        vec![(
            "kube-apiserver".into(),
            "Update".into(),
            String::new(),
            serde_json::json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}})
        )]
    );
    // The root CA publisher runs in the background: wait for its ConfigMap.
    s.kubectl(&[
        "wait",
        "--for=create",
        "configmap/kube-root-ca.crt",
        "--timeout=20s",
    ]);
    let ca = get(&s, &["configmap", "kube-root-ca.crt"]);
    assert_eq!(
        managers(&ca),
        vec![(
            "kube-controller-manager".into(),
            "Update".into(),
            String::new(),
            serde_json::json!({"f:data": {".": {}, "f:ca.crt": {}},
                "f:metadata": {"f:annotations": {".": {}, "f:kubernetes.io/description": {}}}})
        )]
    );
    let svc = get(&s, &["service", "kubernetes"]);
    assert_eq!(managers(&svc)[0].0, "kube-apiserver");
}
