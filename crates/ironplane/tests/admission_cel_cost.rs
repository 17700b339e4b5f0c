//! The runtime cost limits of admission CEL end to end (issue 9), driven with the real kubectl:
//! a ValidatingAdmissionPolicy whose expression is cheap on a small ConfigMap but quadratic in
//! its `data` crosses cel-go's per-call limit on a large one, and the policy's failure policy
//! decides (Fail refuses with upstream's message, Ignore admits), while an ordinary policy on
//! the same large object still runs and denies what it should.

use crate::common;

use common::Server;
use serde_json::{Value, json};

/// Compares every key of `data` with every other: the cost grows with the square of its size.
const QUADRATIC: &str = "object.data.all(k, object.data.all(j, k == j || k != j))";

fn apply(s: &Server, manifest: Value) {
    s.kubectl_stdin(&["create", "-f", "-"], &manifest.to_string());
}

/// A policy on ConfigMap creates, with one validation, and its binding selecting ConfigMaps
/// labelled `mode=<mode>`.
fn policy_and_binding(s: &Server, name: &str, failure_policy: &str, mode: &str, validation: Value) {
    apply(
        s,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": failure_policy,
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [validation],
        }}),
    );
    apply(
        s,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"objectSelector": {"matchExpressions": [
                            {"key": "mode", "operator": "In", "values": [mode]}]}}}}),
    );
}

fn config_map(name: &str, mode: &str, keys: usize, extra: &[&str]) -> String {
    let mut data: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("key{i:05}"), Value::from("v")))
        .collect();
    for k in extra {
        data.insert((*k).to_string(), Value::from("v"));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": {"mode": mode}},
           "data": data})
    .to_string()
}

/// Creates the manifest: whether it succeeded, and stderr.
fn create(s: &Server, manifest: &str) -> (bool, String) {
    let out = s.kubectl_stdin_output(&["create", "-f", "-"], manifest);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

#[test]
fn an_expression_over_the_per_call_limit_follows_the_failure_policy() {
    let s = Server::start();
    policy_and_binding(
        &s,
        "quadratic-fail",
        "Fail",
        "fail",
        json!({"expression": QUADRATIC}),
    );
    policy_and_binding(
        &s,
        "quadratic-ignore",
        "Ignore",
        "ignore",
        json!({"expression": QUADRATIC}),
    );
    // An ordinary policy over both: cheap on any size, and it still denies.
    for mode in ["fail", "ignore"] {
        policy_and_binding(
            &s,
            &format!("ordinary-{mode}"),
            "Fail",
            mode,
            json!({"expression": "!('forbidden' in object.data)", "message": "no forbidden key"}),
        );
    }
    // Once the ordinary policies are in force, the others are too (created before them).
    // Policies are picked up from a watch, within moments.
    let mut n = 0;
    for mode in ["ignore", "fail"] {
        common::wait_until(
            &format!("the ordinary policy in {mode} to deny"),
            10,
            || {
                n += 1;
                let (ok, _) = create(
                    &s,
                    &config_map(&format!("probe{n}"), mode, 1, &["forbidden"]),
                );
                !ok
            },
        );
    }

    // Small: the quadratic expression is cheap, and true.
    let (ok, err) = create(&s, &config_map("small", "fail", 10, &[]));
    assert!(ok, "{err}");

    // Large, failing closed: refused as kube-apiserver refuses it.
    let (ok, err) = create(&s, &config_map("large-fail", "fail", 1000, &[]));
    assert!(!ok);
    assert_eq!(
        err,
        format!(
            "The configmaps \"large-fail\" is invalid: : ValidatingAdmissionPolicy 'quadratic-fail' with binding 'quadratic-fail' denied request: expression '{QUADRATIC}' resulted in error: operation cancelled: actual cost limit exceeded"
        )
    );

    // Large, failing open: admitted.
    let (ok, err) = create(&s, &config_map("large-ignore", "ignore", 1000, &[]));
    assert!(ok, "{err}");

    // The ordinary policy still judges the large object.
    let (ok, err) = create(
        &s,
        &config_map("large-forbidden", "ignore", 1000, &["forbidden"]),
    );
    assert!(!ok);
    assert_eq!(
        err,
        "The configmaps \"large-forbidden\" is invalid: : ValidatingAdmissionPolicy 'ordinary-ignore' with binding 'ordinary-ignore' denied request: no forbidden key"
    );
    let names = s.kubectl(&[
        "get",
        "configmaps",
        "-n",
        "default",
        "-l",
        "mode",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    assert_eq!(names.trim(), "large-ignore small");
}
