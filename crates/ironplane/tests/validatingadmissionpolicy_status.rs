//! The validatingadmissionpolicy-status controller against the real binary with kubectl: a
//! ValidatingAdmissionPolicy gets `status.observedGeneration` and `status.typeChecking` with
//! upstream's warnings for each kind it matches (built-in kinds, custom resources, params), a
//! spec change is checked again, the status is written by server-side apply under upstream's
//! field manager, and with the controller turned off the status stays empty. Variables are
//! typed by what they compile to (`uint` and `null` too), and `authorizer.requestResource` is
//! warned about as upstream's type checking warns. When a policy is written, its expressions
//! are compiled in the admission environment and refused with upstream's details.

use crate::common;

use common::{Server, wait_until};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "validatingadmissionpolicy-status";

fn policy(name: &str, rules: Value, validations: Value) -> String {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": rules}, "validations": validations},
    })
    .to_string()
}

fn rule(group: &str, version: &str, resource: &str) -> Value {
    json!({"apiGroups": [group], "apiVersions": [version], "resources": [resource], "operations": ["CREATE", "UPDATE"]})
}

/// The policy with its managed fields (kubectl hides them unless asked).
fn get(s: &Server, name: &str) -> Value {
    let out = s.kubectl(&[
        "get",
        "validatingadmissionpolicy",
        name,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// The policy once its status has observed `generation`.
fn observed(s: &Server, name: &str, generation: i64) -> Value {
    let mut last = Value::Null;
    wait_until(
        &format!("{name}'s status to observe generation {generation}"),
        20,
        || {
            last = get(s, name);
            last.pointer("/status/observedGeneration") == Some(&json!(generation))
        },
    );
    last
}

fn warnings(p: &Value) -> Vec<(String, String)> {
    p.pointer("/status/typeChecking/expressionWarnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| {
            let text = |k: &str| w[k].as_str().unwrap_or_default().to_string();
            (text("fieldRef"), text("warning"))
        })
        .collect()
}

fn pair(field_ref: &str, warning: &str) -> (String, String) {
    (field_ref.to_string(), warning.to_string())
}

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
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
              size: {type: integer}
"#;

#[test]
fn policies_get_upstreams_type_checking_for_each_generation() {
    let s = Server::start();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &policy(
            "typed",
            json!([rule("apps", "v1", "deployments")]),
            json!([
                {"expression": "object.spec.replicasss > 1"},
                {"expression": "object.spec.replicas >= 0", "messageExpression": "'replicas: ' + object.spec.replicas"},
                {"expression": "object.spec.replicas == \"x\""},
                {"expression": "object.spec.template.spec.containers.all(c, c.image != '')"},
            ]),
        ),
    );
    let p = observed(&s, "typed", 1);
    assert_eq!(
        warnings(&p),
        vec![
            pair(
                "spec.validations[0].expression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicasss'\n | object.spec.replicasss > 1\n | ...........^\n"
            ),
            pair(
                "spec.validations[1].messageExpression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(string, int)'\n | 'replicas: ' + object.spec.replicas\n | .............^\n"
            ),
            pair(
                "spec.validations[2].expression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == \"x\"\n | .....................^\n"
            ),
        ],
        "{p}"
    );
    // Written by server-side apply of /status, under upstream's manager.
    let entries = p["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours: Vec<&Value> = entries
        .iter()
        .filter(|e| e["manager"] == FIELD_MANAGER)
        .collect();
    assert_eq!(ours.len(), 1, "{entries:?}");
    assert_eq!(ours[0]["operation"], "Apply");
    assert_eq!(ours[0]["subresource"], "status");
    assert_eq!(
        ours[0]["fieldsV1"],
        json!({"f:status": {"f:observedGeneration": {}, "f:typeChecking": {"f:expressionWarnings": {}}}})
    );

    // A new generation is checked again: no warnings now, and typeChecking stays, empty.
    s.kubectl(&[
        "patch",
        "validatingadmissionpolicy",
        "typed",
        "--type=merge",
        "-p",
        r#"{"spec": {"validations": [{"expression": "object.spec.replicas >= 0"}]}}"#,
    ]);
    let p = observed(&s, "typed", 2);
    assert_eq!(
        p["status"],
        json!({"observedGeneration": 2, "typeChecking": {}}),
        "{p}"
    );
    let entry = p["metadata"]["managedFields"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["manager"] == FIELD_MANAGER).cloned())
        .unwrap_or_default();
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:status": {"f:observedGeneration": {}, "f:typeChecking": {}}}),
        "{p}"
    );

    // Several kinds: each kind's issues, joined; a resource nothing serves adds no kind.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &policy(
            "several",
            json!([
                {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "secrets", "nosuchthings"], "operations": ["CREATE"]},
            ]),
            json!([{"expression": "object.spec == null"}]),
        ),
    );
    let p = observed(&s, "several", 1);
    let issue = |kind: &str| {
        format!(
            "/v1, Kind={kind}: ERROR: <input>:1:7: undefined field 'spec'\n | object.spec == null\n | ......^\n"
        )
    };
    assert_eq!(
        warnings(&p),
        vec![pair(
            "spec.validations[0].expression",
            &format!("{}\n{}", issue("ConfigMap"), issue("Secret"))
        )],
        "{p}"
    );

    // Wildcard resources and resources unknown to the server are not type-checked at all.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &policy(
            "unchecked",
            json!([
                rule("apps", "v1", "*"),
                rule("example.org", "v1", "gadgets")
            ]),
            json!([{"expression": "object.nothing.at.all == 1"}]),
        ),
    );
    let p = observed(&s, "unchecked", 1);
    assert_eq!(p["status"]["typeChecking"], json!({}), "{p}");

    // Params are typed by the param kind's schema.
    let mut with_params: Value = serde_json::from_str(&policy(
        "params",
        json!([rule("apps", "v1", "deployments")]),
        json!([
            {"expression": "params.data.max == object.metadata.name"},
            {"expression": "params.spec.max > 1"},
        ]),
    ))
    .expect("JSON");
    with_params["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    s.kubectl_stdin(&["create", "-f", "-"], &with_params.to_string());
    let p = observed(&s, "params", 1);
    assert_eq!(
        warnings(&p),
        vec![pair(
            "spec.validations[1].expression",
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'spec'\n | params.spec.max > 1\n | ......^\n"
        )],
        "{p}"
    );

    // Custom resources are typed by their CRD's schema, as /openapi/v3 serves it.
    s.kubectl_stdin(&["create", "-f", "-"], WIDGETS);
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=10s",
    ]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &policy(
            "widgets",
            json!([rule("example.com", "v1", "widgets")]),
            json!([{"expression": "object.spec.size == 'big'"}]),
        ),
    );
    let p = observed(&s, "widgets", 1);
    assert_eq!(
        warnings(&p),
        vec![pair(
            "spec.validations[0].expression",
            "example.com/v1, Kind=Widget: ERROR: <input>:1:18: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.size == 'big'\n | .................^\n"
        )],
        "{p}"
    );
}

#[test]
fn variables_and_the_authorizer_are_typed_as_upstream_types_them() {
    let s = Server::start();
    let mut p: Value = serde_json::from_str(&policy(
        "typed-variables",
        json!([rule("apps", "v1", "deployments")]),
        json!([
            {"expression": "variables.limit == object.spec.replicas"},
            {"expression": "variables.nothing == object.spec.paused"},
            {"expression": "variables.limit > 2 && variables.nothing == null"},
            {"expression": "authorizer.group('apps').resource('deployments').check('get').allowed()"},
            {"expression": "authorizer.requestResource.check('update').allowed()"},
        ]),
    ))
    .expect("JSON");
    p["spec"]["variables"] = json!([
        {"name": "limit", "expression": "3u"},
        {"name": "nothing", "expression": "null"},
    ]);
    // Admission types `object` as dyn, so the policy is written; type checking knows better.
    s.kubectl_stdin(&["create", "-f", "-"], &p.to_string());
    let p = observed(&s, "typed-variables", 1);
    assert_eq!(
        warnings(&p),
        vec![
            pair(
                "spec.validations[0].expression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:17: found no matching overload for '_==_' applied to '(uint, int)'\n | variables.limit == object.spec.replicas\n | ................^\n"
            ),
            pair(
                "spec.validations[1].expression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:19: found no matching overload for '_==_' applied to '(null_type, bool)'\n | variables.nothing == object.spec.paused\n | ..................^\n"
            ),
            // Upstream's type checking declares no `authorizer.requestResource`.
            pair(
                "spec.validations[4].expression",
                "apps/v1, Kind=Deployment: ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'\n | authorizer.requestResource.check('update').allowed()\n | ..........^\n"
            ),
        ],
        "{p}"
    );
}

#[test]
fn policy_expressions_are_compiled_in_the_admission_environment_when_written() {
    let s = Server::start();
    let create = |name: &str, validations: Value, variables: Value| {
        let mut p: Value = serde_json::from_str(&policy(
            name,
            json!([rule("apps", "v1", "deployments")]),
            validations,
        ))
        .expect("JSON");
        p["spec"]["variables"] = variables;
        s.kubectl_stdin_output(&["create", "-f", "-"], &p.to_string())
    };
    // Admission declares `authorizer.requestResource`, and typed variables.
    let ok = create(
        "compiles",
        json!([
            {"expression": "authorizer.requestResource.check('update').allowed() && variables.prod", "messageExpression": "'not for ' + request.userInfo.username"},
        ]),
        json!([{"name": "prod", "expression": "object.metadata.labels['env'] == 'prod'"}]),
    );
    assert!(ok.status.success(), "{ok:?}");
    let refused = create(
        "refused",
        json!([
            {"expression": "authorizer.requestResource.check(1).allowed()"},
            {"expression": "size(variables.name)"},
        ]),
        json!([{"name": "name", "expression": "nope"}]),
    );
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    for expected in [
        "spec.variables[0].expression: Invalid value: \"nope\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')",
        "spec.validations[0].expression: Invalid value: \"authorizer.requestResource.check(1).allowed()\": compilation failed: ERROR: <input>:1:33: found no matching overload for 'check' applied to 'kubernetes.authorization.ResourceCheck.(int)'",
        "spec.validations[1].expression: Invalid value: \"size(variables.name)\": must evaluate to bool but got int",
    ] {
        assert!(stderr.contains(expected), "{expected}\n{stderr}");
    }
}

#[test]
fn without_the_controller_the_status_stays_empty() {
    let s = Server::start_with(&["--controllers=*,-validatingadmissionpolicy-status-controller"]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &policy(
            "quiet",
            json!([rule("apps", "v1", "deployments")]),
            json!([{"expression": "object.spec.replicasss > 1"}]),
        ),
    );
    // Long enough for the controller to have written, were it running (it takes milliseconds).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let p = get(&s, "quiet");
    assert_eq!(p["status"], json!({}), "{p}");
    let managers: Vec<&Value> = p["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| &e["manager"])
        .collect();
    assert_eq!(managers, [&json!("kubectl-create")], "{p}");
}
