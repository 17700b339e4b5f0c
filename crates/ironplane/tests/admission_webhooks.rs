//! Admission webhooks end to end (issue 9): the tests run webhooks over HTTPS on loopback and
//! drive the real binary with kubectl. A validating webhook refuses with its own message, a
//! mutating one adds a label, failure policies decide what a webhook that is down or slow does,
//! selectors and match conditions scope the calls, a Service reaches its webhook through an
//! EndpointSlice, `matchPolicy: Equivalent` converts the object to the version a webhook asks
//! for, a dry run refuses webhooks with side effects, and bad answers from webhooks are refused
//! with upstream's words and nothing written.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use common::Server;
use common::hook_server::{HookServer, Reply, own_address};
use serde_json::{Value, json};

/// Every review a webhook received, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn allow(review: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "response": {"uid": review["request"]["uid"], "allowed": true}})
}

fn patched(review: &Value, patch: Value, patch_type: &str) -> Value {
    let mut a = allow(review);
    a["response"]["patch"] =
        json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
    a["response"]["patchType"] = json!(patch_type);
    a
}

/// The webhooks, one per path.
fn hooks() -> (HookServer, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let server = HookServer::start(
        &["hooks.default.svc"],
        Arc::new(move |path: &str, review: Value| {
            s.lock().unwrap().push((path.to_string(), review.clone()));
            let obj = &review["request"]["object"];
            let uid = &review["request"]["uid"];
            match path {
                "/deny" => {
                    if obj["metadata"]["labels"]["deny"] == "true" {
                        Reply::json(
                            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": uid, "allowed": false,
                                "status": {"code": 403, "reason": "Forbidden", "message": "configmaps labelled deny=true are refused"}}}),
                        )
                    } else {
                        Reply::json(&allow(&review))
                    }
                }
                "/deny-all" => Reply::json(
                    &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": false}}),
                ),
                "/label" => {
                    let mut ops = Vec::new();
                    if obj["metadata"]["labels"].is_null() {
                        ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
                    }
                    ops.push(
                        json!({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}),
                    );
                    Reply::json(&patched(&review, Value::Array(ops), "JSONPatch"))
                }
                "/warn" => {
                    let mut a = allow(&review);
                    a["response"]["warnings"] = json!(["careful with that configmap"]);
                    Reply::json(&a)
                }
                "/slow" => Reply {
                    delay: Duration::from_secs(3),
                    ..Reply::json(&allow(&review))
                },
                "/malformed" => Reply {
                    status: 200,
                    body: b"this is not an AdmissionReview".to_vec(),
                    delay: Duration::ZERO,
                },
                "/wrong-uid" => Reply::json(
                    &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": "not-the-request-uid", "allowed": true}}),
                ),
                "/bad-patch" => Reply::json(&patched(
                    &review,
                    json!([{"op": "replace", "path": "/data/absent/deeper", "value": "x"}]),
                    "JSONPatch",
                )),
                // A JSONPatch, labelled as another patch type.
                "/merge-patch" => Reply::json(&patched(
                    &review,
                    json!([{"op": "add", "path": "/data/a", "value": "b"}]),
                    "MergePatch",
                )),
                _ => Reply::json(&allow(&review)),
            }
        }),
    );
    (server, seen)
}

fn webhook(name: &str, client: Value, extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": client,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            h.insert(k.clone(), v.clone());
        }
    }
    h
}

fn url(server: &HookServer, path: &str) -> Value {
    json!({"url": format!("https://127.0.0.1:{}{path}", server.port), "caBundle": server.ca_bundle()})
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": hooks})
    .to_string()
}

fn configmap(ns: &str, name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": "v"}})
    .to_string()
}

/// Creates `manifest`, returning whether it was accepted and what kubectl printed.
fn try_create(s: &Server, manifest: &str, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["create", "-f", "-", "-o", "json"];
    args.extend_from_slice(extra);
    let out = s.kubectl_stdin_output(&args, manifest);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Retries `probe` until it holds: configurations are picked up from a watch, within moments.
fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !probe() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn absent(s: &Server, ns: &str, name: &str) {
    let err = s.kubectl_fails(&["get", "configmap", name, "-n", ns]);
    assert!(err.contains("NotFound"), "{err}");
}

#[test]
fn a_validating_webhook_refuses_and_a_mutating_one_labels() {
    let s = Server::start();
    let (hooks, seen) = hooks();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "deny",
            vec![webhook("deny.example.com", url(&hooks, "/deny"), json!({}))],
        ),
    );
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "label",
            vec![
                webhook("label.example.com", url(&hooks, "/label"), json!({})),
                webhook("warn.example.com", url(&hooks, "/warn"), json!({})),
            ],
        ),
    );
    let mut n = 0;
    eventually("the mutating webhook labels", || {
        n += 1;
        let (ok, out) = try_create(
            &s,
            &configmap("default", &format!("probe{n}"), json!({})),
            &[],
        );
        ok && out.contains("\"mutated\": \"yes\"")
    });

    let (ok, out) = try_create(
        &s,
        &configmap("default", "refused", json!({"deny": "true"})),
        &[],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains(r#"Error from server (Forbidden): error when creating "STDIN": admission webhook "deny.example.com" denied the request: configmaps labelled deny=true are refused"#),
        "{out}"
    );
    absent(&s, "default", "refused");

    let (ok, out) = try_create(&s, &configmap("default", "kept", json!({"app": "x"})), &[]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Warning: careful with that configmap"),
        "{out}"
    );
    let got: Value =
        serde_json::from_str(&s.kubectl(&["get", "configmap", "kept", "-o", "json"])).unwrap();
    assert_eq!(
        got["metadata"]["labels"],
        json!({"app": "x", "mutated": "yes"})
    );

    // An update goes through the webhooks too.
    let out = s.kubectl_fails(&["label", "configmap", "kept", "deny=true"]);
    assert!(out.contains(r#"admission webhook "deny.example.com" denied the request: configmaps labelled deny=true are refused"#), "{out}");

    // A dry run reaches webhooks as one (v1 admits only webhooks without side effects, or
    // without them on dry runs), and stores nothing.
    let before = seen.lock().unwrap().len();
    let (ok, out) = try_create(
        &s,
        &configmap("default", "dry", json!({})),
        &["--dry-run=server"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("\"mutated\": \"yes\""), "{out}");
    let dry_runs: Vec<bool> = seen.lock().unwrap()[before..]
        .iter()
        .map(|(_, r)| r["request"]["dryRun"] == true)
        .collect();
    assert!(
        !dry_runs.is_empty() && dry_runs.iter().all(|d| *d),
        "{dry_runs:?}"
    );
    absent(&s, "default", "dry");
    let out = s.kubectl_stdin_output(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "side-effects",
            vec![webhook(
                "side.example.com",
                url(&hooks, "/"),
                json!({"sideEffects": "Unknown"}),
            )],
        ),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(r#"The ValidatingWebhookConfiguration "side-effects" is invalid: webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun""#),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn failure_policies_decide_for_a_webhook_that_is_down_or_slow() {
    let s = Server::start();
    let (hooks, _seen) = hooks();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down =
        json!({"url": format!("https://127.0.0.1:{closed}/"), "caBundle": hooks.ca_bundle()});
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "down",
            vec![webhook(
                "down.example.com",
                down.clone(),
                json!({"failurePolicy": "Ignore"}),
            )],
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    let (ok, out) = try_create(&s, &configmap("default", "ignored", json!({})), &[]);
    assert!(ok, "Ignore lets the request through: {out}");

    s.kubectl_stdin(
        &["replace", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "down",
            vec![webhook(
                "down.example.com",
                down,
                json!({"failurePolicy": "Fail"}),
            )],
        ),
    );
    let want = format!(
        r#"Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:{closed}/?timeout=10s": dial tcp 127.0.0.1:{closed}: connect: connection refused"#
    );
    eventually("Fail refuses the request", || {
        let (ok, out) = try_create(&s, &configmap("default", "refused", json!({})), &[]);
        !ok && out.contains(&want)
    });
    absent(&s, "default", "refused");
    s.kubectl(&["delete", "validatingwebhookconfiguration", "down"]);

    // A webhook slower than its timeout fails like one that is down.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "slow",
            vec![webhook(
                "slow.example.com",
                url(&hooks, "/slow"),
                json!({"timeoutSeconds": 1}),
            )],
        ),
    );
    let want = format!(
        r#"Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "https://127.0.0.1:{}/slow?timeout=1s": context deadline exceeded"#,
        hooks.port
    );
    eventually("the timeout refuses the request", || {
        let started = Instant::now();
        let (ok, out) = try_create(&s, &configmap("default", "late", json!({})), &[]);
        if !ok {
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "the call was not cut at 1 s"
            );
        }
        !ok && out.contains(&want)
    });
    absent(&s, "default", "late");
}

#[test]
fn selectors_match_conditions_and_services_scope_the_calls() {
    let s = Server::start();
    let (hooks, seen) = hooks();
    s.kubectl(&["create", "namespace", "hooked"]);
    s.kubectl(&["label", "namespace", "hooked", "webhooks=on"]);
    s.kubectl(&["create", "namespace", "plain"]);
    // The webhook behind a Service: its EndpointSlice names this machine's own address.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "default"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": hooks.port}]}})
        .to_string(),
    );
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "hooks-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "hooks"}},
                "addressType": "IPv4",
                "ports": [{"name": "https", "port": hooks.port, "protocol": "TCP"}],
                "endpoints": [{"addresses": [own_address().to_string()], "conditions": {"ready": true}}]})
        .to_string(),
    );
    let service = json!({"service": {"namespace": "default", "name": "hooks", "path": "/deny-all", "port": 443},
                         "caBundle": hooks.ca_bundle()});
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "scoped",
            vec![webhook(
                "scoped.example.com",
                service,
                json!({
                    "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
                    "objectSelector": {"matchExpressions": [{"key": "exempt", "operator": "DoesNotExist"}]},
                    "matchConditions": [{"name": "not-skipped", "expression": "object.metadata.name != 'skipped'"}],
                }),
            )],
        ),
    );
    let want = r#"admission webhook "scoped.example.com" denied the request without explanation"#;
    eventually("the webhook behind the Service refuses", || {
        let (ok, out) = try_create(&s, &configmap("hooked", "refused", json!({})), &[]);
        !ok && out.contains(want)
    });
    let calls = seen.lock().unwrap().len();
    assert!(calls > 0);
    // Out of scope: another namespace, an exempt object, a failed match condition.
    for (ns, name, labels) in [
        ("plain", "other-namespace", json!({})),
        ("hooked", "exempt", json!({"exempt": "yes"})),
        ("hooked", "skipped", json!({})),
    ] {
        let (ok, out) = try_create(&s, &configmap(ns, name, labels), &[]);
        assert!(ok, "{name}: {out}");
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        calls,
        "no call for requests out of scope"
    );
    let review = seen.lock().unwrap().last().unwrap().1.clone();
    let request = &review["request"];
    assert_eq!(request["namespace"], "hooked");
    assert_eq!(request["name"], "refused");
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(request["userInfo"]["username"], "kubernetes-admin");
    assert_eq!(request["object"]["metadata"]["name"], "refused");
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(
        request["options"],
        json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
    );
}

#[test]
fn bad_answers_from_webhooks_are_refused_and_nothing_is_written() {
    let s = Server::start();
    let (hooks, _seen) = hooks();
    let cases: [(&str, &str, &str); 4] = [
        (
            "/malformed",
            "malformed.example.com",
            r#"Internal error occurred: failed calling webhook "malformed.example.com": failed to call webhook: "#,
        ),
        (
            "/wrong-uid",
            "uid.example.com",
            r#"Internal error occurred: failed calling webhook "uid.example.com": received invalid webhook response: expected response.uid="#,
        ),
        (
            "/bad-patch",
            "patch.example.com",
            "Internal error occurred: ",
        ),
        (
            "/merge-patch",
            "merge.example.com",
            r#"Internal error occurred: failed calling webhook "merge.example.com": unsupported patch type "MergePatch""#,
        ),
    ];
    for (i, (path, name, want)) in cases.iter().enumerate() {
        let config = format!("bad{i}");
        s.kubectl_stdin(
            &["create", "-f", "-"],
            &configuration(
                "MutatingWebhookConfiguration",
                &config,
                vec![webhook(name, url(&hooks, path), json!({}))],
            ),
        );
        let cm = format!("victim{i}");
        eventually(&format!("{name} refuses"), || {
            let (ok, out) = try_create(&s, &configmap("default", &cm, json!({})), &[]);
            assert!(
                !ok || !out.contains("victim"),
                "{name} let {cm} through: {out}"
            );
            !ok && out.contains(want)
        });
        absent(&s, "default", &cm);
        s.kubectl(&["delete", "mutatingwebhookconfiguration", &config]);
    }
}

#[test]
fn equivalent_versions_are_converted_and_mutating_webhooks_are_reinvoked() {
    let s = Server::start();
    let (hooks, seen) = hooks();
    // A webhook that asks for autoscaling/v1 is called for a write in autoscaling/v2, with the
    // object converted; one that asks for exactly v1 is not.
    let rule = |policy: &str| {
        json!({"matchPolicy": policy, "rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"],
               "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers"]}]})
    };
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "hpa",
            vec![
                webhook(
                    "equivalent.example.com",
                    url(&hooks, "/equivalent"),
                    rule("Equivalent"),
                ),
                webhook("exact.example.com", url(&hooks, "/exact"), rule("Exact")),
            ],
        ),
    );
    // Reinvocation: the first webhook asks to be called again if a later one changes the object.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "reinvoke",
            vec![
                webhook(
                    "first.example.com",
                    url(&hooks, "/first"),
                    json!({"reinvocationPolicy": "IfNeeded"}),
                ),
                webhook("label.example.com", url(&hooks, "/label"), json!({})),
            ],
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    eventually("the equivalent webhook is called", || {
        let _ = s.kubectl_stdin_output(&["create", "-f", "-"], &hpa.to_string());
        seen.lock().unwrap().iter().any(|(p, _)| p == "/equivalent")
    });
    let seen_now = seen.lock().unwrap().clone();
    assert!(
        !seen_now.iter().any(|(p, _)| p == "/exact"),
        "matchPolicy Exact is not called"
    );
    let review = &seen_now.iter().find(|(p, _)| p == "/equivalent").unwrap().1;
    let request = &review["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(request["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(
        request["object"]["spec"]["targetCPUUtilizationPercentage"],
        50
    );

    let (ok, out) = try_create(&s, &configmap("default", "twice", json!({})), &[]);
    assert!(ok, "{out}");
    let firsts = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, r)| p == "/first" && r["request"]["name"] == "twice")
        .count();
    assert_eq!(
        firsts, 2,
        "the first webhook is called again after the label was added"
    );
}
