//! CRD conversion webhooks end to end (issue 8): the test runs a conversion webhook over TLS on
//! loopback, kubectl writes and reads custom resources in two versions, the server converts
//! through the webhook reached by `url` and then by a Service resolved through its
//! EndpointSlices, and a webhook that is down gives upstream's error with nothing written.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Server;
use common::hook_server::{HookServer, Reply, own_address};
use serde_json::{Value, json};

/// The webhook: `v1` keeps the count in `spec.size`, `v2` in `spec.replicas`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut out = obj.clone();
    let spec = out["spec"].as_object_mut().cloned().unwrap_or_default();
    let mut spec = spec;
    match desired {
        "conv.example.com/v2" => {
            if let Some(size) = spec.remove("size") {
                spec.insert("replicas".into(), size);
            }
        }
        _ => {
            if let Some(replicas) = spec.remove("replicas") {
                spec.insert("size".into(), replicas);
            }
        }
    }
    out["spec"] = Value::Object(spec);
    out["apiVersion"] = json!(desired);
    out
}

/// The conversion webhook, with what it was asked.
struct Webhook {
    server: HookServer,
    port: u16,
    calls: Arc<AtomicUsize>,
    desired: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Webhook {
    /// A TLS webhook valid for 127.0.0.1 and the Service name `converter.default.svc`.
    fn start() -> Webhook {
        let calls = Arc::new(AtomicUsize::new(0));
        let desired = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, d) = (calls.clone(), desired.clone());
        let server = HookServer::start(
            &["converter.default.svc"],
            Arc::new(move |_path: &str, review: Value| {
                let want = review["request"]["desiredAPIVersion"]
                    .as_str()
                    .unwrap()
                    .to_string();
                c.fetch_add(1, Ordering::SeqCst);
                d.lock().unwrap().push(want.clone());
                let converted: Vec<Value> = review["request"]["objects"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| convert(o, &want))
                    .collect();
                Reply::json(&json!({
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "ConversionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "convertedObjects": converted,
                        "result": {"status": "Success"},
                    },
                }))
            }),
        );
        Webhook {
            port: server.port,
            server,
            calls,
            desired,
        }
    }

    fn ca_bundle(&self) -> String {
        self.server.ca_bundle()
    }

    fn stop(&mut self) {
        self.server.stop();
    }
}

fn crd(client_config: Value) -> Value {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.conv.example.com"},
        "spec": {
            "group": "conv.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("replicas")},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": client_config, "conversionReviewVersions": ["v1"]}},
        },
    })
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[test]
fn custom_resources_convert_through_a_webhook_by_url_and_by_service() {
    let mut hook = Webhook::start();
    let s = Server::start();
    let url = format!("https://127.0.0.1:{}/convert", hook.port);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &crd(json!({"url": url, "caBundle": hook.ca_bundle()})).to_string(),
    );
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.conv.example.com",
        "--timeout=10s",
    ]);

    // Written in v2, stored in v1 (the storage version) through the webhook.
    let created = json!({"apiVersion": "conv.example.com/v2", "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "default", "labels": {"team": "a"}},
        "spec": {"replicas": 3}});
    s.kubectl_stdin(&["create", "-f", "-"], &created.to_string());
    let v1 = json_of(&s.kubectl(&["get", "gadgets.v1.conv.example.com", "g1", "-o", "json"]));
    assert_eq!(v1["apiVersion"], "conv.example.com/v1");
    assert_eq!(v1["spec"], json!({"size": 3}), "stored in v1: {v1}");
    assert_eq!(v1["metadata"]["labels"], json!({"team": "a"}));
    // Read back in v2, one object and a list alike.
    let v2 = json_of(&s.kubectl(&["get", "gadgets.v2.conv.example.com", "g1", "-o", "json"]));
    assert_eq!(v2["apiVersion"], "conv.example.com/v2");
    assert_eq!(v2["spec"], json!({"replicas": 3}));
    assert_eq!(v2["metadata"]["uid"], v1["metadata"]["uid"]);
    let list = json_of(&s.kubectl(&["get", "gadgets.v2.conv.example.com", "-o", "json"]));
    assert_eq!(list["items"][0]["spec"], json!({"replicas": 3}));
    {
        let desired = hook.desired.lock().unwrap();
        assert!(
            desired.iter().any(|d| d == "conv.example.com/v1"),
            "{desired:?}"
        );
        assert!(
            desired.iter().any(|d| d == "conv.example.com/v2"),
            "{desired:?}"
        );
    }

    // The same webhook behind a Service, found through its EndpointSlice.
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "converter", "namespace": "default"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": hook.port}]}});
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "converter-1", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "converter"}},
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": hook.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [own_address().to_string()], "conditions": {"ready": true}}]});
    s.kubectl_stdin(&["apply", "-f", "-"], &service.to_string());
    s.kubectl_stdin(&["apply", "-f", "-"], &slice.to_string());
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &crd(
            json!({"service": {"namespace": "default", "name": "converter", "path": "/convert"},
            "caBundle": hook.ca_bundle()}),
        )
        .to_string(),
    );
    let before = hook.calls.load(Ordering::SeqCst);
    // The CRD's new conversion settings are served once its controller has seen them.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = s.kubectl_output(&["get", "gadgets.v2.conv.example.com", "g1", "-o", "json"]);
        let served = out.status.success()
            && json_of(&String::from_utf8_lossy(&out.stdout))["spec"] == json!({"replicas": 3});
        let crd = json_of(&s.kubectl(&["get", "crd", "gadgets.conv.example.com", "-o", "json"]));
        let via_service =
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"].is_object();
        if served && via_service && hook.calls.load(Ordering::SeqCst) > before + 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no conversion through the Service"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A webhook that is down: upstream's error, and nothing is written.
    hook.stop();
    let down = json!({"apiVersion": "conv.example.com/v2", "kind": "Gadget",
        "metadata": {"name": "g2", "namespace": "default"}, "spec": {"replicas": 1}});
    let out = s.kubectl_stdin_output(&["create", "-f", "-"], &down.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("conversion webhook for conv.example.com/v2, Kind=Gadget failed: Post \"https://converter.default.svc:443/convert?timeout=30s\": dial tcp"),
        "{err}"
    );
    let names = s.kubectl(&["get", "gadgets.v1.conv.example.com", "-o", "name"]);
    assert_eq!(names.trim(), "gadget.conv.example.com/g1");
    // Reads in the other version fail the same way; the storage version needs no webhook.
    let err = s.kubectl_fails(&["get", "gadgets.v2.conv.example.com", "g1"]);
    assert!(
        err.contains("conversion webhook for conv.example.com/v1, Kind=Gadget failed"),
        "{err}"
    );
}

/// Server-side apply across versions converted by the webhook: an applier of `v2`'s
/// `spec.replicas` conflicts with the `v1` applier of `spec.size` (the field the webhook maps it
/// to), named by its own version's path; forced, it takes the field over.
#[test]
fn appliers_of_other_versions_see_the_webhooks_conversion() {
    let hook = Webhook::start();
    let s = Server::start();
    let url = format!("https://127.0.0.1:{}/convert", hook.port);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &crd(json!({"url": url, "caBundle": hook.ca_bundle()})).to_string(),
    );
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.conv.example.com",
        "--timeout=10s",
    ]);
    let gadget = |version: &str, spec: Value| {
        json!({"apiVersion": format!("conv.example.com/{version}"), "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "default"}, "spec": spec})
        .to_string()
    };
    s.kubectl_stdin(
        &["apply", "--server-side", "--field-manager=a", "-f", "-"],
        &gadget("v1", json!({"size": 3})),
    );
    let v2 = gadget("v2", json!({"replicas": 5}));
    let out = s.kubectl_stdin_output(
        &["apply", "--server-side", "--field-manager=b", "-f", "-"],
        &v2,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "a": .spec.size"#),
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
        &v2,
    );
    let obj = json_of(&s.kubectl(&[
        "get",
        "gadgets.v1.conv.example.com",
        "g",
        "-o",
        "json",
        "--show-managed-fields",
    ]));
    assert_eq!(obj["spec"], json!({"size": 5}));
    let managers: Vec<(String, String, Value)> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["apiVersion"].as_str().unwrap_or("").to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect();
    // `a` lost its only field and is gone; `b` owns `spec.replicas` in v2.
    assert_eq!(
        managers,
        vec![(
            "b".to_string(),
            "conv.example.com/v2".to_string(),
            json!({"f:spec": {"f:replicas": {}}})
        )]
    );
}
