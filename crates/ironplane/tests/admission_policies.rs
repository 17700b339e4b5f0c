//! ValidatingAdmissionPolicy end to end (issue 9), driven with the real kubectl: a policy with
//! params from a ConfigMap denies through one binding and only warns through another, the
//! binding's params and selectors scope it, a missing param with `parameterNotFoundAction: Deny`
//! refuses, a policy's `reason` picks the status code, and a policy that failed to configure
//! follows its failure policy.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{Value, json};

fn apply(s: &Server, manifest: Value) {
    s.kubectl_stdin(&["create", "-f", "-"], &manifest.to_string());
}

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": spec})
}

/// Runs kubectl with `manifest` on stdin: whether it succeeded, stdout and stderr.
fn run(s: &Server, args: &[&str], manifest: &str) -> (bool, String, String) {
    let out = s.kubectl_stdin_output(args, manifest);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Retries `probe` until it holds: policies are picked up from a watch, within moments.
fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !probe() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn deployment(name: &str, replicas: i64, labels: Value) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "default", "labels": labels},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    .to_string()
}

#[test]
fn a_policy_with_params_denies_through_one_binding_and_warns_through_another() {
    let s = Server::start();
    apply(
        &s,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "limits", "namespace": "default"},
               "data": {"maxReplicas": "3"}}),
    );
    apply(
        &s,
        policy(
            "replica-limit",
            json!({
                "failurePolicy": "Fail",
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "variables": [{"name": "max", "expression": "int(params.data.maxReplicas)"}],
                "validations": [{"expression": "object.spec.replicas <= variables.max",
                                 "messageExpression": "'replicas must be no greater than ' + string(variables.max)"}],
            }),
        ),
    );
    // Deny for deployments labelled env=prod, only warn for the rest.
    apply(
        &s,
        binding(
            "replica-limit-prod",
            json!({"policyName": "replica-limit", "validationActions": ["Deny"],
                   "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
                   "matchResources": {"objectSelector": {"matchLabels": {"env": "prod"}}}}),
        ),
    );
    apply(
        &s,
        binding(
            "replica-limit-test",
            json!({"policyName": "replica-limit", "validationActions": ["Warn"],
                   "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
                   "matchResources": {"objectSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}}}),
        ),
    );

    let mut n = 0;
    let mut refusal = String::new();
    eventually("the policy refuses a big prod deployment", || {
        n += 1;
        let (ok, _, err) = run(
            &s,
            &["create", "-f", "-"],
            &deployment(&format!("big{n}"), 5, json!({"env": "prod"})),
        );
        refusal = err;
        !ok
    });
    assert_eq!(
        refusal.trim(),
        format!(
            "The deployments \"big{n}\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be no greater than 3"
        )
    );
    // The same request as JSON: a 422 with the message as its only cause.
    let (ok, _, err) = run(
        &s,
        &["create", "-f", "-", "-v=8"],
        &deployment("big-json", 5, json!({"env": "prod"})),
    );
    assert!(!ok);
    assert!(err.contains("422 Unprocessable Entity"), "{err}");
    // kubectl -v=8 prints the response body as klog prints a value with a newline (a JSON
    // answer ends with one, as upstream's do): `body=<`, then the text indented by a tab, then
    // ` >`.
    let lines: Vec<&str> = err.lines().collect();
    let body = lines
        .iter()
        .rposition(|l| l.ends_with("\"Response Body\" body=<"))
        .and_then(|at| lines.get(at + 1))
        .and_then(|b| serde_json::from_str::<Value>(b.trim()).ok())
        .unwrap_or_else(|| panic!("no response body in {err}"));
    let message = "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be no greater than 3";
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
               "code": 422, "reason": "Invalid",
               "message": format!("deployments.apps \"big-json\" is forbidden: {message}"),
               "details": {"name": "big-json", "group": "apps", "kind": "deployments",
                           "causes": [{"message": message}]}})
    );

    // Within the limit: admitted.
    let (ok, _, err) = run(
        &s,
        &["create", "-f", "-"],
        &deployment("small", 2, json!({"env": "prod"})),
    );
    assert!(ok, "{err}");
    // Not prod: admitted with upstream's warning.
    let (ok, _, err) = run(
        &s,
        &["create", "-f", "-"],
        &deployment("big-test", 5, json!({"env": "test"})),
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-test': replicas must be no greater than 3"),
        "{err}"
    );
    // The params change and the policy follows.
    s.kubectl(&[
        "patch",
        "configmap",
        "limits",
        "-n",
        "default",
        "-p",
        r#"{"data":{"maxReplicas":"10"}}"#,
    ]);
    let (ok, _, err) = run(
        &s,
        &["create", "-f", "-"],
        &deployment("big-later", 5, json!({"env": "prod"})),
    );
    assert!(ok, "{err}");
    // Without its params, a Deny binding refuses everything it matches.
    s.kubectl(&["delete", "configmap", "limits", "-n", "default"]);
    let (ok, _, err) = run(
        &s,
        &["create", "-f", "-"],
        &deployment("no-params", 1, json!({"env": "prod"})),
    );
    assert!(!ok);
    assert!(
        err.contains("ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{err}"
    );
}

#[test]
fn reasons_failure_policies_and_the_namespace_object() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "locked"]);
    s.kubectl(&["label", "namespace", "locked", "frozen=true"]);
    // A reason of Forbidden answers 403; the namespace's labels are in `namespaceObject`.
    apply(
        &s,
        policy(
            "frozen",
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                   "validations": [{"expression": "!('frozen' in namespaceObject.metadata.labels) || namespaceObject.metadata.labels['frozen'] != 'true'",
                                    "message": "namespace is frozen", "reason": "Forbidden"}]}),
        ),
    );
    apply(
        &s,
        binding(
            "frozen",
            json!({"policyName": "frozen", "validationActions": ["Deny"]}),
        ),
    );
    let mut refusal = String::new();
    eventually("the frozen namespace refuses configmaps", || {
        let (ok, _, err) = run(&s, &["create", "configmap", "c", "-n", "locked"], "");
        refusal = err;
        !ok
    });
    assert_eq!(
        refusal.trim(),
        "error: failed to create configmap: configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'frozen' with binding 'frozen' denied request: namespace is frozen"
    );
    let (ok, _, err) = run(&s, &["create", "configmap", "c", "-n", "default"], "");
    assert!(ok, "{err}");

    // A param kind nobody serves: the policy fails to configure; Fail refuses, Ignore admits.
    for (name, failure_policy) in [("unknown-fail", "Fail"), ("unknown-ignore", "Ignore")] {
        apply(
            &s,
            policy(
                name,
                json!({"failurePolicy": failure_policy,
                       "paramKind": {"apiVersion": "example.com/v1", "kind": "Nothing"},
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["secrets"]}]},
                       "validations": [{"expression": "true"}]}),
            ),
        );
        apply(
            &s,
            binding(
                name,
                json!({"policyName": name, "validationActions": ["Deny"],
                       "paramRef": {"name": "p", "parameterNotFoundAction": "Allow"}}),
            ),
        );
    }
    let mut refusal = String::new();
    eventually("the unconfigured policy refuses secrets", || {
        let (ok, _, err) = run(
            &s,
            &["create", "secret", "generic", "s", "-n", "default"],
            "",
        );
        refusal = err;
        !ok
    });
    assert!(
        refusal.contains("ValidatingAdmissionPolicy 'unknown-fail' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nothing'"),
        "{refusal}"
    );
    assert!(!refusal.contains("unknown-ignore"), "{refusal}");
    s.kubectl(&["delete", "validatingadmissionpolicy", "unknown-fail"]);
    eventually("the policy's removal lets secrets in", || {
        run(
            &s,
            &["create", "secret", "generic", "s", "-n", "default"],
            "",
        )
        .0
    });
}

fn mutating_policy(name: &str, mut spec: Value) -> Value {
    spec["reinvocationPolicy"] = json!("Never");
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec})
}

fn mutating_binding(name: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": {"policyName": name}})
}

fn rule(group: &str, resource: &str) -> Value {
    json!({"resourceRules": [{"apiGroups": [group], "apiVersions": ["v1"],
                              "operations": ["CREATE", "UPDATE"], "resources": [resource]}]})
}

#[test]
fn mutating_policies_set_fields_by_apply_configuration_and_json_patch() {
    let s = Server::start();
    // ApplyConfiguration: a label merged into what the object has.
    apply(
        &s,
        mutating_policy(
            "team-label",
            json!({"matchConstraints": rule("", "configmaps"),
                   "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                       "Object{metadata: Object.metadata{labels: {'team': 'platform'}}}"}}]}),
        ),
    );
    apply(&s, mutating_binding("team-label"));
    // JSONPatch, behind a match condition: deployments are capped at one replica.
    apply(
        &s,
        mutating_policy(
            "one-replica",
            json!({"matchConstraints": rule("apps", "deployments"),
                   "matchConditions": [{"name": "many", "expression": "object.spec.replicas > 1"}],
                   "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                       "[JSONPatch{op: 'replace', path: '/spec/replicas', value: 1}]"}}]}),
        ),
    );
    apply(&s, mutating_binding("one-replica"));
    // An ApplyConfiguration may not set an atomic map (a Service's selector).
    apply(
        &s,
        mutating_policy(
            "atomic",
            json!({"matchConstraints": rule("", "services"),
                   "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                       "Object{spec: Object.spec{selector: {'app': 'x'}}}"}}]}),
        ),
    );
    apply(&s, mutating_binding("atomic"));

    let mut n = 0;
    let mut created = Value::Null;
    eventually("the policy labels configmaps", || {
        n += 1;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c{n}"), "namespace": "default", "labels": {"app": "a"}}});
        let (ok, out, _) = run(&s, &["create", "-f", "-", "-o", "json"], &cm.to_string());
        created = serde_json::from_str(&out).unwrap_or(Value::Null);
        ok && created["metadata"]["labels"]["team"] == "platform"
    });
    assert_eq!(
        created["metadata"]["labels"],
        json!({"app": "a", "team": "platform"})
    );

    let (ok, out, err) = run(
        &s,
        &["create", "-f", "-", "-o", "json"],
        &deployment("capped", 3, json!({})),
    );
    assert!(ok, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["spec"]["replicas"], 1);
    // The patched object is defaulted as any other.
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    // What is stored is what was answered.
    let stored: Value =
        serde_json::from_str(&s.kubectl(&["get", "deployment", "capped", "-o", "json"])).unwrap();
    assert_eq!(stored["spec"]["replicas"], 1);

    let svc = json!({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "svc", "namespace": "default"},
                     "spec": {"ports": [{"port": 80}]}});
    let (ok, _, err) = run(&s, &["create", "-f", "-"], &svc.to_string());
    assert!(!ok);
    assert!(
        err.contains("policy 'atomic' with binding 'atomic' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"),
        "{err}"
    );
    let missing = s.kubectl_fails(&["get", "service", "svc"]);
    assert!(missing.contains("NotFound"), "{missing}");
}

#[test]
fn expressions_ask_the_authorizer() {
    let s = Server::start();
    // RBAC: the admin (system:masters) may read secrets; the service account `robot` is bound
    // to a Role that does not exist yet, so it may not. A message expression sees no
    // `authorizer` (upstream compiles it without one, and refuses a policy whose message
    // expression names it), so the denial carries the validation's message.
    apply(
        &s,
        policy(
            "authz",
            json!({"matchConstraints": rule("", "configmaps"),
            "validations": [
                {"expression": "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('get').allowed() && authorizer.requestResource.check('create').allowed()",
                 "message": "the requester may not read secrets"},
                {"expression": "!has(object.metadata.labels) || !('as-sa' in object.metadata.labels) || authorizer.serviceAccount('default', 'robot').group('').resource('secrets').namespace('default').check('get').allowed()",
                 "message": "robot may not read secrets"},
            ]}),
        ),
    );
    apply(
        &s,
        binding(
            "authz",
            json!({"policyName": "authz", "validationActions": ["Deny"]}),
        ),
    );
    s.kubectl(&[
        "create",
        "rolebinding",
        "robot",
        "-n",
        "default",
        "--role=secret-reader",
        "--serviceaccount=default:robot",
    ]);
    let mut refusal = String::new();
    let mut n = 0;
    eventually(
        "the policy asks the authorizer about the service account",
        || {
            n += 1;
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("sa{n}"), "namespace": "default", "labels": {"as-sa": "x"}}});
            let (ok, _, err) = run(&s, &["create", "-f", "-"], &cm.to_string());
            refusal = err;
            // The policy's binding reaches admission through a watch.
            !ok && refusal.contains("robot may not read secrets")
        },
    );
    assert!(
        refusal.contains(
            "ValidatingAdmissionPolicy 'authz' with binding 'authz' denied request: robot may not read secrets"
        ),
        "{refusal}"
    );
    let (ok, _, err) = run(&s, &["create", "configmap", "plain", "-n", "default"], "");
    assert!(ok, "{err}");
    // Once the Role exists, the service account may read secrets and the labelled create passes.
    s.kubectl(&[
        "create",
        "role",
        "secret-reader",
        "-n",
        "default",
        "--verb=get",
        "--resource=secrets",
    ]);
    eventually("the service account may read secrets", || {
        n += 1;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("sa{n}"), "namespace": "default", "labels": {"as-sa": "x"}}});
        run(&s, &["create", "-f", "-"], &cm.to_string()).0
    });
}

#[test]
fn audit_annotations_and_the_audit_action_reach_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let audit_policy = dir.path().join("audit.yaml");
    let log = dir.path().join("audit.log");
    std::fs::write(
        &audit_policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources: [{group: \"\", resources: [configmaps]}]\n",
    )
    .unwrap();
    let s = Server::start_with(&[
        "--audit-policy-file",
        audit_policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    apply(
        &s,
        policy(
            "size",
            json!({"matchConstraints": rule("", "configmaps"),
                "validations": [{"expression": "!has(object.data) || size(object.data) < 2", "message": "too many keys <2"}],
                // Not `has(object.data) ? ... : null`: cel-go's checker does not let a string and
                // null be one conditional's type, and upstream refuses such a policy.
                "auditAnnotations": [{"key": "keys", "valueExpression": "string(size(has(object.data) ? object.data : {}))"}]}),
        ),
    );
    apply(
        &s,
        binding(
            "size",
            json!({"policyName": "size", "validationActions": ["Audit", "Warn"]}),
        ),
    );
    // Audit and Warn admit: the create succeeds with a warning, and the event says it failed.
    let mut n = 0;
    eventually("the policy warns", || {
        n += 1;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big{n}"), "namespace": "default"}, "data": {"a": "1", "b": "2"}});
        let (ok, _, err) = run(&s, &["create", "-f", "-"], &cm.to_string());
        assert!(ok, "{err}");
        err.contains("Validation failed for ValidatingAdmissionPolicy 'size' with binding 'size': too many keys <2")
    });
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The last create is the one that warned.
    let event = events
        .iter()
        .rfind(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "configmaps")
        .expect("the create is audited");
    assert_eq!(event["annotations"]["size/keys"], "2", "{event}");
    assert_eq!(
        event["annotations"]["validation.policy.admission.k8s.io/validation_failure"],
        r#"[{"message":"too many keys \u003c2","policy":"size","binding":"size","expressionIndex":0,"validationActions":["Audit","Warn"]}]"#,
        "{event}"
    );
    assert_eq!(
        event["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
}
