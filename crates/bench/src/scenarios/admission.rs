//! What the create scenario can put in front of its writes (`--admission`): one
//! ValidatingAdmissionPolicy with a binding, or one validating webhook that the bench serves
//! itself over HTTPS on loopback. Either matches only the kind being created in the scenario's
//! namespace and refuses only objects labelled `bench-deny`, so every create of the run pays for
//! the check and passes it. The setup waits until a labelled probe is refused (the server has
//! picked the configuration up) and is removed when the run ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use http::Method;
use serde_json::{Value, json};

use super::Workspace;
use super::create::CreateKind;
use crate::error::BenchError;

/// The admission configuration in front of the creates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AdmissionLoad {
    /// Nothing beyond the default plugins.
    #[default]
    None,
    /// One ValidatingAdmissionPolicy (one CEL validation) and its binding.
    Policy,
    /// One validating webhook served by the bench on loopback.
    Webhook,
}

/// The label that makes the policy or the webhook refuse an object.
const DENY_LABEL: &str = "bench-deny";

/// What `install` set up, for `remove`.
pub(crate) struct Installed {
    /// Cluster-scoped objects to delete afterwards.
    objects: Vec<String>,
    server: Option<tokio::task::JoinHandle<()>>,
}

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// The rule that matches the created kind's creates.
fn rule(kind: CreateKind, workspace: &Workspace) -> Value {
    let (group, resource) = match kind {
        CreateKind::Configmap => (String::new(), "configmaps"),
        CreateKind::Pod => (String::new(), "pods"),
        CreateKind::Deployment => ("apps".to_string(), "deployments"),
        CreateKind::CustomResource => (super::create::custom_group(workspace), "things"),
    };
    json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource]})
}

fn namespace_selector(workspace: &Workspace) -> Value {
    json!({"matchLabels": {"kubernetes.io/metadata.name": workspace.namespace}})
}

/// Sets up `load` for creates of `kind` in the workspace and waits until it acts.
pub(crate) async fn install(
    workspace: &Workspace,
    load: AdmissionLoad,
    kind: CreateKind,
) -> Result<Installed, BenchError> {
    let client = &workspace.client;
    let name = format!("{}-{:?}", workspace.namespace, load).to_lowercase();
    let mut installed = Installed {
        objects: Vec::new(),
        server: None,
    };
    match load {
        AdmissionLoad::None => return Ok(installed),
        AdmissionLoad::Policy => {
            let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                "spec": {"failurePolicy": "Fail",
                         "matchConstraints": {"resourceRules": [rule(kind, workspace)],
                                              "namespaceSelector": namespace_selector(workspace)},
                         "validations": [{"expression": format!("!has(object.metadata.labels) || !('{DENY_LABEL}' in object.metadata.labels)"),
                                          "message": "refused by the bench policy"}]}});
            let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"]}});
            for (path, body) in [(POLICIES, policy), (BINDINGS, binding)] {
                client
                    .expect_success(Method::POST, path, Some(body.to_string().into()))
                    .await?;
                installed.objects.push(format!("{path}/{name}"));
            }
        }
        AdmissionLoad::Webhook => {
            let (port, ca_pem, server) = serve_webhook().await?;
            installed.server = Some(server);
            let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
                "webhooks": [{"name": "bench.ironplane.io",
                    "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate"),
                                     "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)},
                    "rules": [rule(kind, workspace)],
                    "namespaceSelector": namespace_selector(workspace),
                    "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                    "admissionReviewVersions": ["v1"]}]});
            client
                .expect_success(Method::POST, WEBHOOKS, Some(config.to_string().into()))
                .await?;
            installed.objects.push(format!("{WEBHOOKS}/{name}"));
        }
    }
    // Wait until a labelled probe is refused: the configuration is in force.
    let mut probe: Value = serde_json::from_slice(&kind.body(16, workspace)).unwrap_or(Value::Null);
    probe["metadata"]["labels"][DENY_LABEL] = json!("true");
    let path = format!("{}?dryRun=All", kind.collection(workspace));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client
            .send(Method::POST, &path, Some(probe.to_string().into()))
            .await
            .map_err(|e| client.unreachable(e))?;
        if matches!(r.status.as_u16(), 403 | 422) {
            return Ok(installed);
        }
        if Instant::now() > deadline {
            remove(workspace, installed).await;
            return Err(BenchError::Protocol(format!(
                "the {load:?} admission setup did not refuse its probe within 30s (last answer {})",
                r.status
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Deletes what `install` created and stops the webhook server.
pub(crate) async fn remove(workspace: &Workspace, installed: Installed) {
    for path in installed.objects.iter().rev() {
        let _ = workspace.client.send(Method::DELETE, path, None).await;
    }
    if let Some(server) = installed.server {
        server.abort();
    }
}

/// Serves the webhook: HTTPS on an ephemeral loopback port, with a certificate from a fresh CA
/// for 127.0.0.1. Returns the port, the CA's PEM and the server task.
async fn serve_webhook() -> Result<(u16, String, tokio::task::JoinHandle<()>), BenchError> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let setup = |e: &dyn std::fmt::Display| BenchError::Protocol(format!("webhook setup: {e}"));
    let ca_key = KeyPair::generate().map_err(|e| setup(&e))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| setup(&e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| setup(&e))?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().map_err(|e| setup(&e))?;
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .map_err(|e| setup(&e))?
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| setup(&e))?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
        .map_err(|e| setup(&e))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| setup(&e))?
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .map_err(|e| setup(&e))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| setup(&e))?;
    let port = listener.local_addr().map_err(|e| setup(&e))?.port();
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        use http_body_util::BodyExt;
                        let body = req.into_body().collect().await?.to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let request = &review["request"];
                        let denied =
                            request["object"]["metadata"]["labels"][DENY_LABEL].is_string();
                        let mut response = json!({"uid": request["uid"], "allowed": !denied});
                        if denied {
                            response["status"] =
                                json!({"code": 403, "message": "refused by the bench webhook"});
                        }
                        let answer = json!({"apiVersion": "admission.k8s.io/v1",
                                            "kind": "AdmissionReview", "response": response});
                        let mut r = hyper::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(answer.to_string()),
                        ));
                        r.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, hyper::Error>(r)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((port, ca_cert.pem(), server))
}
