//! What admission hands on besides its decision, end to end with the real binary, kubectl and
//! webhooks on loopback: a webhook's refusal reaches the client with the webhook's own reason
//! and code; the audit log records upstream's admission annotations (a webhook's
//! `auditAnnotations`, mutations, patches at level Request only, webhooks that failed open,
//! PodSecurity's enforce level and audit findings); a write through `/scale` reaches
//! admission as an `autoscaling/v1 Scale`; and webhooks that ask for the same other version
//! share one conversion of the object.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use common::Server;
use common::hook_server::{HookServer, Reply};
use serde_json::{Value, json};

/// Every review a webhook received, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn allow(review: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "response": {"uid": review["request"]["uid"], "allowed": true}})
}

fn with_patch(mut answer: Value, ops: Value) -> Value {
    answer["response"]["patch"] =
        json!(base64::engine::general_purpose::STANDARD.encode(ops.to_string()));
    answer["response"]["patchType"] = json!("JSONPatch");
    answer
}

fn hooks() -> (HookServer, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let server = HookServer::start(
        &[],
        Arc::new(move |path: &str, review: Value| {
            s.lock().unwrap().push((path.to_string(), review.clone()));
            let obj = &review["request"]["object"];
            let uid = &review["request"]["uid"];
            let answer = match path {
                // A CRD's conversion webhook: the versions differ only in name.
                "/convert" => {
                    let want = &review["request"]["desiredAPIVersion"];
                    let objects: Vec<Value> = review["request"]["objects"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|o| {
                            let mut o = o.clone();
                            o["apiVersion"] = want.clone();
                            o
                        })
                        .collect();
                    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                        "response": {"uid": review["request"]["uid"], "convertedObjects": objects,
                                     "result": {"status": "Success"}}})
                }
                // Labels the object and says so in an audit annotation.
                "/label" => {
                    let mut a = allow(&review);
                    a["response"]["auditAnnotations"] = json!({"seen": "yes"});
                    if obj["metadata"]["labels"]["mutated"] == "yes" {
                        a
                    } else {
                        with_patch(
                            a,
                            json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]),
                        )
                    }
                }
                // A refusal with a reason of the webhook's own, not one of metav1's.
                "/custom" if obj["metadata"]["annotations"]["refuse"] == "yes" => {
                    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                        "response": {"uid": uid, "allowed": false,
                            "status": {"code": 409, "reason": "PolicyViolation", "message": "refused by policy"}}})
                }
                // Scales of 2 become 3.
                "/scale" if obj["spec"]["replicas"] == 2 => with_patch(
                    allow(&review),
                    json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
                ),
                _ => allow(&review),
            };
            Reply::json(&answer)
        }),
    );
    (server, seen)
}

fn webhook(name: &str, url: String, ca: &str, resources: &[&str], extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["", "apps"], "apiVersions": ["v1"], "resources": resources}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 2,
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(extra.clone());
    }
    h
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": hooks})
    .to_string()
}

fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !probe() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server that audits configmaps at level Request, except in namespace `meta` (Metadata),
/// and pods at Metadata.
fn audited() -> (Server, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("audit.yaml");
    let log = dir.path().join("audit.log");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: Metadata\n  namespaces: [meta]\n\
         - level: Request\n  resources: [{group: \"\", resources: [configmaps]}]\n\
         - level: Metadata\n  resources: [{group: \"\", resources: [pods]}]\n",
    )
    .unwrap();
    let s = Server::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    (s, dir, log)
}

/// The last `create` of `resource` in namespace `ns` named `name` in the audit log (the name
/// comes from the request object at every level from Metadata up, as upstream's
/// `LogRequestObject` records it).
fn create_event(log: &std::path::Path, resource: &str, ns: &str, name: &str) -> Value {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|e| {
            e["verb"] == "create"
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["namespace"] == ns
                && e["objectRef"]["name"] == name
        })
        .unwrap_or_else(|| panic!("the create of {resource} {ns}/{name} is audited"))
}

#[test]
fn webhook_reasons_and_annotations_reach_the_client_and_the_audit_log() {
    let (s, _dir, log) = audited();
    let (hooks, _seen) = hooks();
    let url = |p: &str| format!("https://127.0.0.1:{}{p}", hooks.port);
    let ca = hooks.ca_bundle();
    // Nothing listens on port 1: the call fails, and `Ignore` lets the request through.
    let down = |name: &str| {
        webhook(
            name,
            "https://127.0.0.1:1/".into(),
            &ca,
            &["configmaps"],
            json!({"failurePolicy": "Ignore"}),
        )
    };
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "m",
            vec![
                webhook(
                    "label.example.com",
                    url("/label"),
                    &ca,
                    &["configmaps"],
                    json!({}),
                ),
                down("down.example.com"),
            ],
        ),
    );
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "v",
            vec![
                webhook(
                    "custom.example.com",
                    url("/custom"),
                    &ca,
                    &["configmaps"],
                    json!({}),
                ),
                down("down-v.example.com"),
            ],
        ),
    );
    s.kubectl(&["create", "namespace", "meta"]);
    let refused = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "refused", "namespace": "default", "annotations": {"refuse": "yes"}}});
    let mut n = 0;
    eventually("both configurations are read", || {
        n += 1;
        let out = s.kubectl(&["create", "configmap", &format!("probe{n}"), "-o", "json"]);
        out.contains("\"mutated\": \"yes\"")
            && !s
                .kubectl_stdin_output(&["create", "-f", "-"], &refused.to_string())
                .status
                .success()
    });

    // The refusal keeps the webhook's reason and code.
    let out = s.kubectl_stdin_output(&["create", "-f", "-"], &refused.to_string());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"Error from server (PolicyViolation): error when creating "STDIN": admission webhook "custom.example.com" denied the request: refused by policy"#),
        "{err}"
    );
    let event = create_event(&log, "configmaps", "default", "refused");
    assert_eq!(
        event["responseStatus"]["reason"], "PolicyViolation",
        "{event}"
    );
    assert_eq!(event["responseStatus"]["code"], 409, "{event}");

    // At level Request every annotation is recorded.
    s.kubectl(&["create", "configmap", "req"]);
    let event = create_event(&log, "configmaps", "default", "req");
    let annotations = &event["annotations"];
    assert_eq!(annotations["label.example.com/seen"], "yes", "{event}");
    assert_eq!(
        annotations["mutation.webhook.admission.k8s.io/round_0_index_0"],
        r#"{"configuration":"m","webhook":"label.example.com","mutated":true}"#
    );
    assert_eq!(
        annotations["patch.webhook.admission.k8s.io/round_0_index_0"],
        r#"{"configuration":"m","webhook":"label.example.com","patch":[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}],"patchType":"JSONPatch"}"#
    );
    assert_eq!(
        annotations["failed-open.mutation.webhook.admission.k8s.io/round_0_index_1"],
        "down.example.com"
    );
    assert_eq!(
        annotations["mutation.webhook.admission.k8s.io/round_0_index_1"],
        r#"{"configuration":"m","webhook":"down.example.com","mutated":false}"#
    );
    assert_eq!(
        annotations["failed-open.validating.webhook.admission.k8s.io/round_0_index_1"],
        "down-v.example.com"
    );

    // At level Metadata the patch, which may carry the object's data, is left out.
    s.kubectl(&["create", "configmap", "md", "-n", "meta"]);
    let event = create_event(&log, "configmaps", "meta", "md");
    let annotations = &event["annotations"];
    assert_eq!(
        annotations["mutation.webhook.admission.k8s.io/round_0_index_0"],
        r#"{"configuration":"m","webhook":"label.example.com","mutated":true}"#,
        "{event}"
    );
    assert!(
        annotations
            .get("patch.webhook.admission.k8s.io/round_0_index_0")
            .is_none(),
        "{event}"
    );
}

#[test]
fn pod_security_notes_its_enforce_level_and_audit_findings() {
    let (s, _dir, log) = audited();
    s.kubectl(&["create", "namespace", "checked"]);
    s.kubectl(&[
        "label",
        "namespace",
        "checked",
        "pod-security.kubernetes.io/enforce=baseline",
        "pod-security.kubernetes.io/audit=restricted",
    ]);
    let pod = |ns: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
               "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})
        .to_string()
    };
    let mut created = false;
    eventually("the pod is created", || {
        created = created
            || s.kubectl_stdin_output(&["create", "-f", "-"], &pod("checked"))
                .status
                .success();
        created
    });
    let event = create_event(&log, "pods", "checked", "p");
    let annotations = &event["annotations"];
    assert_eq!(
        annotations["pod-security.kubernetes.io/enforce-policy"], "baseline:latest",
        "{event}"
    );
    assert_eq!(
        annotations["pod-security.kubernetes.io/audit-violations"],
        concat!(
            r#"would violate PodSecurity "restricted:latest": "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        ),
        "{event}"
    );
    // A namespace without labels is privileged: nothing to find.
    s.kubectl_stdin(&["create", "-f", "-"], &pod("default"));
    let event = create_event(&log, "pods", "default", "p");
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/enforce-policy"], "privileged:latest",
        "{event}"
    );
    assert!(
        event["annotations"]
            .get("pod-security.kubernetes.io/audit-violations")
            .is_none()
    );
}

#[test]
fn a_scale_reaches_admission_as_a_scale() {
    let s = Server::start();
    let (hooks, seen) = hooks();
    let url = |p: &str| format!("https://127.0.0.1:{}{p}", hooks.port);
    let ca = hooks.ca_bundle();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "scale",
            vec![webhook(
                "scale.example.com",
                url("/scale"),
                &ca,
                &["deployments/scale"],
                json!({}),
            )],
        ),
    );
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "watch",
            vec![
                webhook(
                    "scale-seen.example.com",
                    url("/scale-seen"),
                    &ca,
                    &["deployments/scale"],
                    json!({}),
                ),
                webhook(
                    "deployments.example.com",
                    url("/deployments"),
                    &ca,
                    &["deployments"],
                    json!({}),
                ),
            ],
        ),
    );
    eventually("the deployment webhook is called", || {
        let _ = s.kubectl_output(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=1",
        ]);
        seen.lock()
            .unwrap()
            .iter()
            .any(|(p, _)| p == "/deployments")
    });
    let before = seen.lock().unwrap().len();
    s.kubectl(&["scale", "deployment", "web", "--replicas=2"]);
    // The mutating webhook turned 2 into 3, and the parent took it.
    assert_eq!(
        s.kubectl(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );
    // The client's calls (the deployment controller writes too, as another user).
    let all: Vec<(String, Value)> = seen.lock().unwrap()[before..].to_vec();
    let client = &all
        .iter()
        .find(|(p, _)| p == "/scale")
        .expect("/scale called")
        .1["request"]["userInfo"]["username"];
    let calls: Vec<(String, Value)> = all
        .iter()
        .filter(|(_, r)| r["request"]["userInfo"]["username"] == *client)
        .cloned()
        .collect();
    let paths: Vec<&str> = calls.iter().map(|(p, _)| p.as_str()).collect();
    // A webhook for deployments is not called for their /scale.
    assert_eq!(paths, ["/scale", "/scale-seen"], "{calls:?}");
    let mutating = &calls[0].1["request"];
    assert_eq!(
        mutating["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        mutating["requestKind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        mutating["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(mutating["subResource"], "scale");
    assert_eq!(mutating["object"]["kind"], "Scale");
    assert_eq!(mutating["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(mutating["object"]["spec"]["replicas"], 2);
    assert_eq!(mutating["object"]["metadata"]["name"], "web");
    assert_eq!(mutating["oldObject"]["kind"], "Scale");
    assert_eq!(mutating["oldObject"]["spec"]["replicas"], 1);
    let validating = &calls[1].1["request"];
    assert_eq!(validating["object"]["kind"], "Scale");
    assert_eq!(validating["object"]["spec"]["replicas"], 3);
    assert_eq!(validating["oldObject"]["spec"]["replicas"], 1);
}

#[test]
fn webhooks_asking_for_one_version_share_its_conversion() {
    let s = Server::start();
    let (hooks, seen) = hooks();
    let url = |p: &str| format!("https://127.0.0.1:{}{p}", hooks.port);
    let ca = hooks.ca_bundle();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.conv.example.com"},
        "spec": {
            "group": "conv.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": url("/convert"), "caBundle": ca},
                "conversionReviewVersions": ["v1"]}},
        },
    });
    s.kubectl_stdin(&["apply", "-f", "-"], &crd.to_string());
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.conv.example.com",
        "--timeout=10s",
    ]);
    // Two webhooks that know only v2, called for writes in v1 with the object converted.
    let v2 = |name: &str, path: &str| {
        json!({
            "name": name,
            "clientConfig": {"url": url(path), "caBundle": ca},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["conv.example.com"], "apiVersions": ["v2"], "resources": ["gadgets"]}],
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "v2",
            vec![v2("one.example.com", "/one"), v2("two.example.com", "/two")],
        ),
    );
    let gadget = |name: &str| {
        json!({"apiVersion": "conv.example.com/v1", "kind": "Gadget",
               "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
        .to_string()
    };
    let mut n = 0;
    eventually("both webhooks are called", || {
        n += 1;
        let name = format!("probe{n}");
        s.kubectl_stdin(&["create", "-f", "-"], &gadget(&name));
        let seen = seen.lock().unwrap();
        ["/one", "/two"].iter().all(|p| {
            seen.iter()
                .any(|(q, r)| q == p && r["request"]["name"] == name.as_str())
        })
    });
    s.kubectl_stdin(&["create", "-f", "-"], &gadget("counted"));
    let seen = seen.lock().unwrap();
    for path in ["/one", "/two"] {
        let review = &seen
            .iter()
            .find(|(p, r)| p == path && r["request"]["name"] == "counted")
            .unwrap_or_else(|| panic!("{path} is called"))
            .1;
        assert_eq!(
            review["request"]["object"]["apiVersion"],
            "conv.example.com/v2"
        );
    }
    // Admission's conversion is of the object before it is stored (no resourceVersion); what
    // watchers of v2 convert afterwards has one.
    let conversions = seen
        .iter()
        .filter(|(p, r)| {
            p == "/convert"
                && r["request"]["desiredAPIVersion"] == "conv.example.com/v2"
                && r["request"]["objects"].as_array().is_some_and(|objects| {
                    objects.iter().any(|o| {
                        o["metadata"]["name"] == "counted"
                            && o["metadata"].get("resourceVersion").is_none()
                    })
                })
        })
        .count();
    assert_eq!(conversions, 1, "one conversion to v2 serves both webhooks");
}
