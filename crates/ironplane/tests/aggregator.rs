//! The aggregation layer end to end: a small extension API server run by the test (HTTPS on
//! this machine's address, requiring the proxy's client certificate), registered by an
//! APIService through a selectorless Service and an EndpointSlice. Its resources are listed and
//! watched through Ironplane with kubectl, as the user who asked; discovery lists them; a stopped
//! extension server gives 503 and `Available=False`, and one that comes back is used again.
//! Also: the aggregator's readiness checks as upstream names them; silent extension servers not
//! holding up another's check; discovery order; HTTP/2 to an extension server that offers it;
//! an unavailable extension's group listed in discovery (stale in the aggregated documents) and
//! the 503s counted in `apiserver_request_terminations_total`; resources read from an extension
//! server's aggregated discovery (with its ETag), or from its legacy document when it serves
//! only that.

use crate::common;

use std::convert::Infallible;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{Server, hook_server::own_address, wait_until};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use serde_json::{Value, json};

const GROUP: &str = "wardle.example.com";
const APISERVICE: &str = "v1alpha1.wardle.example.com";

/// One request the extension server received.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    /// `HTTP/1.1` or `HTTP/2.0`.
    version: String,
    /// The client certificate the connection was made with (DER).
    client_cert: Vec<u8>,
}

impl Seen {
    fn all(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// Certificates made for one test: the extension server's serving pair (for
/// `api.wardle.svc`) under its own CA, and the proxy's client pair under the front-proxy CA.
struct Pki {
    serving_ca_pem: String,
    serving: (rustls::pki_types::CertificateDer<'static>, Vec<u8>),
    proxy_ca_der: rustls::pki_types::CertificateDer<'static>,
    proxy_ca_pem: String,
    proxy_cert_pem: String,
    proxy_key_pem: String,
    /// A second client pair of the front-proxy CA, as a rotation would bring.
    proxy2_cert_pem: String,
    proxy2_key_pem: String,
}

fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair,
    };
    let ca = |cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).unwrap();
        (cert, Issuer::new(params, key))
    };
    let (serving_ca, serving_issuer) = ca("wardle-ca");
    let serving_key = KeyPair::generate().unwrap();
    let serving = CertificateParams::new(vec!["api.wardle.svc".to_string()])
        .unwrap()
        .signed_by(&serving_key, &serving_issuer)
        .unwrap();
    let (proxy_ca, proxy_issuer) = ca("front-proxy-ca");
    let client = || {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "front-proxy-client");
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        (params.signed_by(&key, &proxy_issuer).unwrap(), key)
    };
    let (proxy, proxy_key) = client();
    let (proxy2, proxy2_key) = client();
    Pki {
        serving_ca_pem: serving_ca.pem(),
        serving: (serving.der().clone(), serving_key.serialize_der()),
        proxy_ca_der: proxy_ca.der().clone(),
        proxy_ca_pem: proxy_ca.pem(),
        proxy_cert_pem: proxy.pem(),
        proxy_key_pem: proxy_key.serialize_pem(),
        proxy2_cert_pem: proxy2.pem(),
        proxy2_key_pem: proxy2_key.serialize_pem(),
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn json_reply(v: &Value) -> hyper::Response<Body> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(v.to_string())).boxed());
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

fn flunder(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Flunder",
           "metadata": {"name": name, "namespace": ns, "resourceVersion": "1",
                        "creationTimestamp": "2026-01-01T00:00:00Z"}})
}

/// Which discovery the extension server serves at `/apis`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Discovery {
    /// Only legacy discovery: `/apis` is an `APIGroupList` whatever the client accepts (as
    /// extension servers built before aggregated discovery answer).
    Legacy,
    /// Also the aggregated v2 document, for a client that accepts it, with an `ETag` (and 304
    /// to a matching `If-None-Match`), as k8s.io/apiserver serves it.
    Aggregated,
}

/// The ETag of the extension server's aggregated document.
const ETAG: &str = "\"wardle-1\"";

/// The extension server's aggregated discovery document: `v1alpha1` with more than its legacy
/// document lists (so that a test can tell which one was read), and a `v1beta1` no APIService
/// names.
fn aggregated_document() -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
    "items": [{"metadata": {"name": GROUP, "creationTimestamp": null}, "versions": [
        {"version": "v1alpha1", "freshness": "Current", "resources": [
            {"resource": "flunders", "responseKind": {"group": "", "version": "", "kind": "Flunder"},
             "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list", "watch"],
             "shortNames": ["fl"], "categories": ["wardle"],
             "subresources": [{"subresource": "status",
                               "responseKind": {"group": "", "version": "", "kind": "Flunder"},
                               "verbs": ["get", "patch"]}]},
            {"resource": "fischers", "responseKind": {"group": "", "version": "", "kind": "Fischer"},
             "scope": "Cluster", "singularResource": "fischer", "verbs": ["get", "list"]}]},
        {"version": "v1beta1", "freshness": "Current", "resources": [
            {"resource": "flunders", "responseKind": {"group": "", "version": "", "kind": "Flunder"},
             "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get"]}]}]}]})
}

/// The extension server: the discovery documents of `wardle.example.com/v1alpha1`, a list of
/// one Flunder, and a watch that sends one event, then a second one when the test says so,
/// then ends. Every request is recorded; a client without the proxy's certificate is refused
/// in the handshake.
struct Extension {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Lets an open watch send its second event and end.
    release: Arc<tokio::sync::Notify>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Extension {
    fn start(pki: &Pki, port: u16) -> Extension {
        Extension::start_with(pki, port, false, Discovery::Legacy)
    }

    fn start_offering(pki: &Pki, port: u16, h2: bool) -> Extension {
        Extension::start_with(pki, port, h2, Discovery::Legacy)
    }

    /// `h2`: offer HTTP/2 in the TLS handshake (ALPN) and serve both versions.
    fn start_with(pki: &Pki, port: u16, h2: bool, discovery: Discovery) -> Extension {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.proxy_ca_der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![pki.serving.0.clone()],
                rustls::pki_types::PrivateKeyDer::try_from(pki.serving.1.clone()).unwrap(),
            )
            .unwrap();
        let mut config = config;
        if h2 {
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind((own_address(), port)))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let release = Arc::new(tokio::sync::Notify::new());
        {
            let (seen, release) = (seen.clone(), release.clone());
            runtime.spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let (acceptor, seen, release) =
                        (acceptor.clone(), seen.clone(), release.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let client_cert: Arc<Vec<u8>> = Arc::new(
                            tls.get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|c| c.first())
                                .map(|c| c.to_vec())
                                .unwrap_or_default(),
                        );
                        let service = hyper::service::service_fn(
                            move |req: hyper::Request<hyper::body::Incoming>| {
                                let (seen, release) = (seen.clone(), release.clone());
                                let client_cert = client_cert.clone();
                                async move {
                                    Ok::<_, Infallible>(answer(
                                        req,
                                        &seen,
                                        &release,
                                        discovery,
                                        &client_cert,
                                    ))
                                }
                            },
                        );
                        let io = hyper_util::rt::TokioIo::new(tls);
                        if h2 {
                            let _ = hyper_util::server::conn::auto::Builder::new(
                                hyper_util::rt::TokioExecutor::new(),
                            )
                            .serve_connection_with_upgrades(io, service)
                            .await;
                        } else {
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(io, service)
                                .with_upgrades()
                                .await;
                        }
                    });
                }
            });
        }
        Extension {
            port,
            seen,
            release,
            runtime: Some(runtime),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for Extension {
    fn drop(&mut self) {
        self.stop();
    }
}

fn answer(
    mut req: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Seen>>,
    release: &Arc<tokio::sync::Notify>,
    discovery: Discovery,
    client_cert: &[u8],
) -> hyper::Response<Body> {
    let path = req.uri().path().to_string();
    // `.../flunders/<name>/echo` with an Upgrade: switch protocols and echo what comes.
    if path.ends_with("/echo") && req.headers().contains_key("upgrade") {
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(upgraded) = on.await {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let (mut r, mut w) = tokio::io::split(io);
                let _ = tokio::io::copy(&mut r, &mut w).await;
            }
        });
        let mut r = hyper::Response::new(http_body_util::Empty::new().boxed());
        *r.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
        r.headers_mut()
            .insert("connection", "Upgrade".parse().unwrap());
        r.headers_mut()
            .insert("upgrade", "ironplane-echo".parse().unwrap());
        return r;
    }
    let query = req.uri().query().unwrap_or("").to_string();
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        query: query.clone(),
        version: format!("{:?}", req.version()),
        client_cert: client_cert.to_vec(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
    });
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    match segments.as_slice() {
        ["apis"]
            if discovery == Discovery::Aggregated
                && header("accept")
                    .contains("g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList") =>
        {
            if header("if-none-match") == ETAG {
                let mut r = hyper::Response::new(http_body_util::Empty::new().boxed());
                *r.status_mut() = hyper::StatusCode::NOT_MODIFIED;
                r.headers_mut().insert("etag", ETAG.parse().unwrap());
                return r;
            }
            let mut r = json_reply(&aggregated_document());
            r.headers_mut().insert(
                "content-type",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
                    .parse()
                    .unwrap(),
            );
            r.headers_mut().insert("etag", ETAG.parse().unwrap());
            r
        }
        ["apis"] => json_reply(&json!({
            "kind": "APIGroupList", "apiVersion": "v1", "groups": [{"name": GROUP,
                "versions": [{"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"}],
                "preferredVersion": {"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"}}],
        })),
        ["apis", GROUP, "v1alpha1"] => json_reply(&json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "wardle.example.com/v1alpha1",
            "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": true,
                           "kind": "Flunder", "verbs": ["get", "list", "watch"], "shortNames": ["fl"]},
                          {"name": "flunders/status", "singularName": "", "namespaced": true,
                           "kind": "Flunder", "verbs": ["get", "patch"]}],
        })),
        ["openapi", "v2"] => json_reply(&json!({
            "swagger": "2.0", "info": {"title": "wardle", "version": "v0"},
            "paths": {"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {"get": {
                "operationId": "listWardleV1alpha1NamespacedFlunder",
                "responses": {"200": {"description": "OK"}}}}},
            "definitions": {"com.example.wardle.v1alpha1.Flunder": {"type": "object",
                "x-kubernetes-group-version-kind": [{"group": GROUP, "version": "v1alpha1", "kind": "Flunder"}]}},
        })),
        ["openapi", "v3", "apis", GROUP, "v1alpha1"] => json_reply(&json!({
            "openapi": "3.0.0", "info": {"title": "wardle", "version": "v0"},
            "paths": {"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {}},
            "components": {"schemas": {"com.example.wardle.v1alpha1.Flunder": {"type": "object"}}},
        })),
        ["apis", GROUP, "v1alpha1", "namespaces", ns, "flunders"]
            if query.contains("watch=true") || query.contains("watch=1") =>
        {
            let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
            let (first, second) = (flunder("alpha", ns), flunder("beta", ns));
            let release = release.clone();
            tokio::spawn(async move {
                let event = |t: &str, o: &Value| {
                    Bytes::from(format!("{}\n", json!({"type": t, "object": o})))
                };
                let _ = tx.send(event("ADDED", &first)).await;
                release.notified().await;
                let _ = tx.send(event("ADDED", &second)).await;
            });
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|b| (Ok::<_, Infallible>(hyper::body::Frame::data(b)), rx))
            });
            let mut r = hyper::Response::new(StreamBody::new(stream).boxed());
            r.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            r
        }
        ["apis", GROUP, "v1alpha1", "namespaces", ns, "flunders"] => json_reply(&json!({
            "apiVersion": "wardle.example.com/v1alpha1", "kind": "FlunderList",
            "metadata": {"resourceVersion": "1"}, "items": [flunder("alpha", ns)],
        })),
        _ => {
            let mut r = json_reply(
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "NotFound", "code": 404}),
            );
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            r
        }
    }
}

/// Opens a connection to Ironplane as the admin, asks `.../flunders/alpha/echo` to switch to
/// the `ironplane-echo` protocol, sends `payload` once switched and reads it back: the response
/// head and the echoed bytes.
fn upgraded_echo(server: &Server, payload: &[u8]) -> (String, Vec<u8>) {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = server.dir.path().join("pki");
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(pki.join("ca.crt")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let chain = rustls::pki_types::CertificateDer::pem_file_iter(pki.join("admin.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(pki.join("admin.key")).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    let address = server.url.trim_start_matches("https://").to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        let request = format!(
            "GET /apis/{GROUP}/v1alpha1/namespaces/wardle/flunders/alpha/echo HTTP/1.1\r\n\
             Host: {address}\r\nConnection: Upgrade\r\nUpgrade: ironplane-echo\r\n\r\n"
        );
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(10), tls.read(&mut byte))
                .await
                .expect("the response head in time")
                .unwrap();
            assert_eq!(
                n, 1,
                "the connection closed before the head ended: {head:?}"
            );
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        if !head.starts_with("HTTP/1.1 101") {
            return (head, Vec::new());
        }
        tls.write_all(payload).await.unwrap();
        let mut echoed = vec![0u8; payload.len()];
        tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut echoed))
            .await
            .expect("the echo in time")
            .unwrap();
        (head, echoed)
    })
}

fn available(server: &Server) -> Option<(String, String, String)> {
    condition(server, APISERVICE)
}

/// The `Available` condition of an APIService: status, reason, message.
fn condition(server: &Server, apiservice: &str) -> Option<(String, String, String)> {
    let s = server.get_json("", &format!("apiservice/{apiservice}"))?;
    let c = s["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .clone();
    let text = |k: &str| c[k].as_str().unwrap_or("").to_string();
    Some((text("status"), text("reason"), text("message")))
}

fn metric(server: &Server, name: &str) -> Option<String> {
    let text = server.kubectl(&["get", "--raw", "/metrics"]);
    let prefix = format!("aggregator_unavailable_apiservice{{name=\"{name}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
}

#[test]
fn an_extension_api_server_is_served_through_the_aggregator() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_str().unwrap().to_string()
    };
    let proxy_cert = write("proxy.crt", &pki.proxy_cert_pem);
    let proxy_key = write("proxy.key", &pki.proxy_key_pem);
    let proxy_ca = write("proxy-ca.crt", &pki.proxy_ca_pem);
    let tokens = write("tokens.csv", "boss-token,boss,boss-uid,system:masters\n");
    let mut extension = Extension::start(&pki, 0);
    let port = extension.port;
    let server = Server::start_with(&[
        &format!("--token-auth-file={tokens}"),
        &format!("--proxy-client-cert-file={proxy_cert}"),
        &format!("--proxy-client-key-file={proxy_key}"),
        &format!("--requestheader-client-ca-file={proxy_ca}"),
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]);

    // Built-in group versions are registered as local APIServices with upstream's priorities.
    wait_until("the built-in APIServices", 30, || {
        server.get_json("", "apiservice/v1.apps").is_some()
            && server.get_json("", "apiservice/v1.").is_some()
    });
    let apps = server.get_json("", "apiservice/v1.apps").unwrap();
    assert_eq!(
        apps["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    assert_eq!(apps["spec"]["groupPriorityMinimum"], 17800);
    assert_eq!(apps["spec"]["versionPriority"], 15);
    assert!(apps["spec"].get("service").is_none_or(Value::is_null));
    assert_eq!(apps["status"]["conditions"][0]["reason"], "Local");

    // A CRD's group version is registered while a CRD serves it, and removed after.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
"#,
    );
    wait_until("the CRD's APIService", 30, || {
        server
            .get_json("", "apiservice/v1.stable.example.com")
            .is_some()
    });
    let crd = server
        .get_json("", "apiservice/v1.stable.example.com")
        .unwrap();
    assert_eq!(
        crd["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    assert_eq!(crd["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(crd["spec"]["versionPriority"], 100);
    server.kubectl(&["delete", "crd", "widgets.stable.example.com"]);
    wait_until("the CRD's APIService to go", 30, || {
        server
            .get_json("", "apiservice/v1.stable.example.com")
            .is_none()
    });

    // The extension server behind a selectorless Service and a hand-written EndpointSlice.
    use base64::Engine;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.serving_ca_pem);
    // Registered before its Service exists, then given a Service without endpoints, then the
    // endpoint: each step has upstream's reason.
    let apiservice = format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: wardle}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: {GROUP}
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{namespace: wardle, name: api, port: 443}}
  caBundle: {ca_bundle}
"#
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &apiservice);
    let reason_is = |want: &str| {
        wait_until(want, 30, || {
            available(&server).is_some_and(|(_, reason, _)| reason == want)
        });
        available(&server).unwrap()
    };
    let (status, _, message) = reason_is("ServiceNotFound");
    assert_eq!(status, "False");
    assert_eq!(message, r#"service/api in "wardle" is not present"#);
    let service = format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: api, namespace: wardle}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
"#
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &service);
    let (_, _, message) = reason_is("EndpointsNotFound");
    assert_eq!(
        message,
        r#"cannot find endpointslices for service/api in "wardle""#
    );
    let slice = format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-1
  namespace: wardle
  labels: {{kubernetes.io/service-name: api}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
"#,
        ip = own_address()
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &slice);
    wait_until("the APIService to become available", 60, || {
        available(&server).is_some_and(|(s, _, _)| s == "True")
    });
    let (_, reason, message) = available(&server).unwrap();
    assert_eq!(
        (reason.as_str(), message.as_str()),
        ("Passed", "all checks passed")
    );
    // The availability check asked as upstream's aggregator does.
    let check = extension
        .seen()
        .into_iter()
        .find(|s| s.path == "/apis/wardle.example.com/v1alpha1")
        .expect("a discovery check");
    assert_eq!(check.all("x-remote-user"), ["system:kube-aggregator"]);
    assert_eq!(check.all("x-remote-group"), ["system:masters"]);

    // The extension server's OpenAPI documents are merged into this server's.
    wait_until("the extension server's OpenAPI v3 document", 30, || {
        let index: Value =
            serde_json::from_str(&server.kubectl(&["get", "--raw", "/openapi/v3"])).unwrap();
        index["paths"]
            .get("apis/wardle.example.com/v1alpha1")
            .is_some()
    });
    let v3: Value = serde_json::from_str(&server.kubectl(&[
        "get",
        "--raw",
        "/openapi/v3/apis/wardle.example.com/v1alpha1",
    ]))
    .unwrap();
    assert!(v3["components"]["schemas"]["com.example.wardle.v1alpha1.Flunder"].is_object());
    let v2: Value =
        serde_json::from_str(&server.kubectl(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert!(
        v2["paths"]["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"]
            .is_object()
    );
    assert!(v2["definitions"]["com.example.wardle.v1alpha1.Flunder"].is_object());
    // Built-in paths are still there.
    assert!(v2["paths"]["/api/v1/namespaces/{namespace}/pods"].is_object());

    // A list through the proxy, as the admin.
    let names = server.kubectl(&["-n", "wardle", "get", "flunders", "-o", "name"]);
    assert_eq!(names.trim(), "flunder.wardle.example.com/alpha");
    let list = extension
        .seen()
        .into_iter()
        .rfind(|s| s.path == "/apis/wardle.example.com/v1alpha1/namespaces/wardle/flunders")
        .expect("the list reached the extension server");
    assert_eq!(list.all("x-remote-user"), ["kubernetes-admin"]);
    assert!(
        list.all("x-remote-group")
            .contains(&"system:masters".to_string()),
        "{list:?}"
    );
    assert!(list.all("authorization").is_empty(), "{list:?}");

    // Impersonated, by a user with a bearer token: the impersonated user, uid, groups and extra
    // travel; neither the token nor the Impersonate-* headers do.
    server.kubectl(&[
        "create",
        "clusterrolebinding",
        "devs",
        "--clusterrole=cluster-admin",
        "--group=devs",
    ]);
    let answer = common::raw_https(
        &format!(
            "{}/apis/{GROUP}/v1alpha1/namespaces/wardle/flunders",
            server.url
        ),
        "GET",
        &[
            ("Authorization", "Bearer boss-token"),
            ("Impersonate-User", "alice"),
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Extra-Team", "blue"),
        ],
        None,
    );
    assert!(answer.starts_with("200 "), "{answer}");
    let list = extension
        .seen()
        .into_iter()
        .rfind(|s| s.path.ends_with("/flunders"))
        .unwrap();
    assert_eq!(list.all("x-remote-user"), ["alice"], "{list:?}");
    assert_eq!(list.all("x-remote-uid"), ["u-1"], "{list:?}");
    let groups = list.all("x-remote-group");
    assert!(groups.contains(&"devs".to_string()), "{list:?}");
    assert_eq!(list.all("x-remote-extra-team"), ["blue"], "{list:?}");
    assert!(list.all("authorization").is_empty(), "{list:?}");
    assert!(
        list.headers
            .iter()
            .all(|(k, _)| !k.starts_with("impersonate-")),
        "{list:?}"
    );

    // A watch streams through: the first event arrives while the extension server holds the
    // second back.
    let mut watch = server
        .kubectl_cmd(&[
            "get",
            "--raw",
            "/apis/wardle.example.com/v1alpha1/namespaces/wardle/flunders?watch=true",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let first: Value = serde_json::from_str(
        &lines_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the first watch event before the stream ends"),
    )
    .unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "alpha");
    extension.release.notify_waiters();
    assert!(
        extension
            .seen()
            .iter()
            .any(|s| s.path.ends_with("/flunders") && s.query.contains("watch=true")),
        "the watch reached the extension server"
    );
    let second: Value =
        serde_json::from_str(&lines_rx.recv_timeout(Duration::from_secs(20)).unwrap()).unwrap();
    assert_eq!(second["object"]["metadata"]["name"], "beta");
    let _ = watch.kill();
    let _ = watch.wait();

    // A connection upgrade passes through: after the 101, bytes go both ways.
    let echoed = upgraded_echo(&server, b"ping through the aggregator\n");
    assert!(echoed.0.starts_with("HTTP/1.1 101"), "{}", echoed.0);
    assert!(
        echoed
            .0
            .to_ascii_lowercase()
            .contains("upgrade: ironplane-echo"),
        "{}",
        echoed.0
    );
    assert_eq!(echoed.1, b"ping through the aggregator\n");

    // Discovery lists the extension server's resources.
    let resources = server.kubectl(&["api-resources", "--api-group", GROUP, "-o", "name"]);
    assert_eq!(resources.trim(), "flunders.wardle.example.com");
    let groups: Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/apis"])).unwrap();
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == GROUP),
        "{groups}"
    );
    assert_eq!(metric(&server, APISERVICE).as_deref(), Some("0"));
    assert_eq!(metric(&server, "v1.apps").as_deref(), Some("0"));

    // Stopped: 503 at once (the proxy cannot connect), then Available=False.
    extension.stop();
    let out = server.kubectl_output(&["-n", "wardle", "get", "flunders"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ServiceUnavailable") || stderr.contains("unable to handle the request"),
        "{stderr}"
    );
    wait_until("the APIService to become unavailable", 60, || {
        available(&server).is_some_and(|(s, _, _)| s == "False")
    });
    let (_, reason, message) = available(&server).unwrap();
    assert_eq!(reason, "FailedDiscoveryCheck");
    assert!(
        message.starts_with(&format!(
            "failing or missing response from https://{}:{port}/apis/wardle.example.com/v1alpha1",
            own_address()
        )),
        "{message}"
    );
    assert_eq!(metric(&server, APISERVICE).as_deref(), Some("1"));
    // Now refused by the aggregator itself, as upstream's proxy refuses an unavailable one.
    let raw = server.kubectl_output(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]);
    assert!(!raw.status.success());
    let stderr = String::from_utf8_lossy(&raw.stderr);
    assert!(stderr.contains("ServiceUnavailable"), "{stderr}");
    // The rest of discovery and the built-in groups are untouched.
    server.kubectl(&["get", "--raw", "/apis"]);
    server.kubectl(&["api-resources", "--api-group", "apps"]);
    server.kubectl(&["-n", "default", "get", "services"]);

    // Back on the same port: available again, and used.
    let extension = Extension::start(&pki, port);
    wait_until("the APIService to become available again", 90, || {
        available(&server).is_some_and(|(s, _, _)| s == "True")
    });
    // Discovery lists its resources again once the discovery manager has fetched them, just
    // after `Available` (upstream's manager lags the same way): until then the group is stale
    // and kubectl does not know `flunders`.
    wait_until("discovery to list flunders again", 30, || {
        let out = server.kubectl_output(&["-n", "wardle", "get", "flunders", "-o", "name"]);
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim() == "flunder.wardle.example.com/alpha"
    });
    assert!(!extension.seen().is_empty());
}

/// Upstream's aggregator hooks, in kube-apiserver's order and last before `shutdown`, and its
/// `autoregister-completion` boot-sequence check (on /readyz, /livez and /healthz), which
/// passes once every built-in group version's APIService has been available.
#[test]
fn the_aggregators_readiness_checks_are_upstreams() {
    let server = Server::start();
    let verbose = server.kubectl(&["get", "--raw", "/readyz?verbose"]);
    let lines: Vec<&str> = verbose.lines().collect();
    let first = lines
        .iter()
        .position(|l| *l == "[+]poststarthook/start-kube-aggregator-informers ok")
        .unwrap_or_else(|| panic!("{verbose}"));
    assert_eq!(
        lines[first..],
        [
            "[+]poststarthook/start-kube-aggregator-informers ok",
            "[+]poststarthook/apiservice-status-local-available-controller ok",
            "[+]poststarthook/apiservice-status-remote-available-controller ok",
            "[+]poststarthook/apiservice-registration-controller ok",
            "[+]poststarthook/apiservice-wait-for-first-sync ok",
            "[+]poststarthook/apiservice-discovery-controller ok",
            "[+]poststarthook/kube-apiserver-autoregistration ok",
            "[+]autoregister-completion ok",
            "[+]poststarthook/apiservice-openapi-controller ok",
            "[+]poststarthook/apiservice-openapiv3-controller ok",
            "[+]shutdown ok",
            "readyz check passed",
        ],
        "{verbose}"
    );
    for endpoint in ["/livez", "/healthz"] {
        let verbose = server.kubectl(&["get", "--raw", &format!("{endpoint}?verbose")]);
        assert!(
            verbose.contains("[+]autoregister-completion ok\n"),
            "{endpoint}: {verbose}"
        );
    }
    assert_eq!(
        server
            .kubectl(&["get", "--raw", "/readyz/autoregister-completion"])
            .trim(),
        "ok"
    );
    // Ready means every built-in APIService has been available.
    let apps = server.get_json("", "apiservice/v1.apps").unwrap();
    assert_eq!(apps["status"]["conditions"][0]["status"], "True");
}

/// Three extension servers that never answer do not hold up a fourth's `Available` (upstream
/// checks with several workers); discovery lists the extension's group among the custom ones in
/// upstream's order (group priority, then APIService name); requests reach an extension server
/// that offers HTTP/2 over HTTP/2, and connection upgrades over HTTP/1.1.
#[test]
fn extension_servers_are_checked_concurrently_listed_in_order_and_spoken_to_over_http2() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_str().unwrap().to_string()
    };
    let proxy_cert = write("proxy.crt", &pki.proxy_cert_pem);
    let proxy_key = write("proxy.key", &pki.proxy_key_pem);
    let proxy_ca = write("proxy-ca.crt", &pki.proxy_ca_pem);
    let tokens = write("tokens.csv", "boss-token,boss,boss-uid,system:masters\n");
    let server = Server::start_with(&[
        &format!("--token-auth-file={tokens}"),
        &format!("--proxy-client-cert-file={proxy_cert}"),
        &format!("--proxy-client-key-file={proxy_key}"),
        &format!("--requestheader-client-ca-file={proxy_ca}"),
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]);
    use base64::Engine;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.serving_ca_pem);
    let ip = own_address();
    let register = |group: &str, version: &str, service: &str, port: u16| {
        format!(
            r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {version}.{group}}}
spec:
  group: {group}
  version: {version}
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{namespace: wardle, name: {service}, port: 443}}
  caBundle: {ca_bundle}
---
apiVersion: v1
kind: Service
metadata: {{name: {service}, namespace: wardle}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {service}-1
  namespace: wardle
  labels: {{kubernetes.io/service-name: {service}}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
"#
        )
    };
    // A custom group whose APIService (`v1beta1.aaa…`) sorts after the extension's
    // (`v1alpha1.wardle…`): upstream lists the extension's group first.
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.aaa.example.com}
spec:
  group: aaa.example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
"#,
    );

    // Extension servers that accept connections and never answer: each check of theirs waits
    // for its whole 5 s timeout.
    let silent = std::net::TcpListener::bind((ip, 0)).unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming() {
            held.push(conn);
        }
    });
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: wardle}\n",
    );
    for name in ["silent-a", "silent-b", "silent-c"] {
        let group = format!("{name}.example.com");
        server.kubectl_stdin(
            &["apply", "-f", "-"],
            &register(&group, "v1", name, silent_port),
        );
    }
    // Their checks are under way.
    std::thread::sleep(Duration::from_secs(1));

    let extension = Extension::start_offering(&pki, 0, true);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        &register(GROUP, "v1alpha1", "api", extension.port),
    );
    let registered = std::time::Instant::now();
    wait_until("the answering extension to become available", 60, || {
        condition(&server, APISERVICE).is_some_and(|(s, _, _)| s == "True")
    });
    let took = registered.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the silent extension servers held the check up for {took:?}"
    );
    wait_until("the silent ones to fail their checks", 60, || {
        ["silent-a", "silent-b", "silent-c"].iter().all(|n| {
            condition(&server, &format!("v1.{n}.example.com"))
                .is_some_and(|(_, reason, _)| reason == "FailedDiscoveryCheck")
        })
    });

    // HTTP/2 when the extension server offers it.
    let names = server.kubectl(&["-n", "wardle", "get", "flunders", "-o", "name"]);
    assert_eq!(names.trim(), "flunder.wardle.example.com/alpha");
    let list = extension
        .seen()
        .into_iter()
        .rfind(|s| s.path == "/apis/wardle.example.com/v1alpha1/namespaces/wardle/flunders")
        .expect("the list reached the extension server");
    assert_eq!(list.version, "HTTP/2.0", "{list:?}");
    // An upgrade is still made over HTTP/1.1 (HTTP/2 has none).
    let echoed = upgraded_echo(&server, b"upgraded over HTTP/1.1\n");
    assert!(echoed.0.starts_with("HTTP/1.1 101"), "{}", echoed.0);
    assert_eq!(echoed.1, b"upgraded over HTTP/1.1\n");

    // Discovery, legacy and aggregated: built-in groups, then the extension's before the custom
    // group that sorts after it.
    wait_until("the extension's group in discovery", 30, || {
        server
            .kubectl(&["get", "--raw", "/apis"])
            .contains("\"wardle.example.com\"")
    });
    let legacy: Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/apis"])).unwrap();
    let legacy: Vec<&str> = legacy["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    let answer = common::raw_https(
        &format!("{}/apis", server.url),
        "GET",
        &[
            ("Authorization", "Bearer boss-token"),
            (
                "Accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            ),
        ],
        None,
    );
    let (code, body) = answer.split_once(' ').unwrap();
    assert_eq!(code, "200", "{answer}");
    let aggregated: Value = serde_json::from_str(body).unwrap();
    let aggregated: Vec<&str> = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect();
    for names in [&legacy, &aggregated] {
        let at = |g: &str| {
            names
                .iter()
                .position(|n| *n == g)
                .unwrap_or_else(|| panic!("{g} in {names:?}"))
        };
        assert_eq!(names[0], "apiregistration.k8s.io", "{names:?}");
        assert!(at("apps") < at(GROUP), "{names:?}");
        assert!(at(GROUP) < at("aaa.example.com"), "{names:?}");
    }
}

/// A server that trusts the test's front proxy and takes `boss-token` (raw requests).
/// The proxy client certificate is read again when its files change (upstream's
/// `aggregator-reload-proxy-client-cert`): the extension server sees the new certificate on the
/// next request, and a pair that does not load (a key that is not the certificate's) leaves the
/// one in use.
#[test]
fn the_proxy_client_certificate_is_read_again_when_its_files_change() {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let extension = Extension::start(&pki, 0);
    let server = aggregating_server(&pki, dir.path());
    // Listed first of the aggregator's hooks, as upstream registers it.
    let verbose = server.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        verbose.contains(
            "[+]poststarthook/aggregator-reload-proxy-client-cert ok\n\
             [+]poststarthook/start-kube-aggregator-informers ok\n"
        ),
        "{verbose}"
    );
    server.kubectl_stdin(&["apply", "-f", "-"], &apiservice_yaml(&pki));
    server.kubectl_stdin(&["apply", "-f", "-"], &service_yaml(extension.port));
    wait_until("Available", 30, || {
        available(&server).is_some_and(|(status, _, _)| status == "True")
    });
    let der = |pem: &str| {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    };
    let (first, second) = (der(&pki.proxy_cert_pem), der(&pki.proxy2_cert_pem));
    // The certificate the extension server saw on a request made now.
    let presented = || {
        server.kubectl(&[
            "get",
            "--raw",
            &format!("/apis/{GROUP}/v1alpha1/namespaces/wardle/flunders"),
        ]);
        extension.seen().last().unwrap().client_cert.clone()
    };
    assert!(presented() == first, "not the first certificate");

    // Rotated: the key first, then the certificate, as a rotation may leave them a moment.
    std::fs::write(dir.path().join("proxy.key"), &pki.proxy2_key_pem).unwrap();
    std::fs::write(dir.path().join("proxy.crt"), &pki.proxy2_cert_pem).unwrap();
    wait_until("the new certificate presented", 30, || {
        presented() == second
    });

    // A certificate without its key: not loaded; requests still go, with the pair in use.
    std::fs::write(dir.path().join("proxy.crt"), &pki.proxy_cert_pem).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(presented() == second, "a mismatched pair was loaded");
    assert!(
        server
            .log_lines()
            .iter()
            .any(|l| l.contains("loading the proxy client certificate failed")),
        "the refused pair was not logged"
    );
}

fn aggregating_server(pki: &Pki, dir: &std::path::Path) -> Server {
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_str().unwrap().to_string()
    };
    let proxy_cert = write("proxy.crt", &pki.proxy_cert_pem);
    let proxy_key = write("proxy.key", &pki.proxy_key_pem);
    let proxy_ca = write("proxy-ca.crt", &pki.proxy_ca_pem);
    let tokens = write("tokens.csv", "boss-token,boss,boss-uid,system:masters\n");
    Server::start_with(&[
        &format!("--token-auth-file={tokens}"),
        &format!("--proxy-client-cert-file={proxy_cert}"),
        &format!("--proxy-client-key-file={proxy_key}"),
        &format!("--requestheader-client-ca-file={proxy_ca}"),
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ])
}

/// The `wardle` namespace and the APIService of `v1alpha1.wardle.example.com`, naming the
/// Service `wardle/api`.
fn apiservice_yaml(pki: &Pki) -> String {
    use base64::Engine;
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.serving_ca_pem);
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: wardle}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {APISERVICE}}}
spec:
  group: {GROUP}
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{namespace: wardle, name: api, port: 443}}
  caBundle: {ca_bundle}
"#
    )
}

/// The Service `wardle/api` and its EndpointSlice, pointing at `port` on this machine.
fn service_yaml(port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: api, namespace: wardle}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-1
  namespace: wardle
  labels: {{kubernetes.io/service-name: api}}
addressType: IPv4
ports: [{{name: https, port: {port}, protocol: TCP}}]
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
"#,
        ip = own_address()
    )
}

/// `/apis` as an aggregated discovery document (`APIGroupDiscoveryList` v2).
fn aggregated_discovery(server: &Server) -> Value {
    let answer = common::raw_https(
        &format!("{}/apis", server.url),
        "GET",
        &[
            ("Authorization", "Bearer boss-token"),
            (
                "Accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            ),
        ],
        None,
    );
    let (code, body) = answer.split_once(' ').unwrap();
    assert_eq!(code, "200", "{answer}");
    serde_json::from_str(body.trim()).unwrap()
}

/// The versions the aggregated discovery document lists for `group`, if it lists the group.
fn aggregated_versions(server: &Server, group: &str) -> Option<Value> {
    aggregated_discovery(server)["items"]
        .as_array()?
        .iter()
        .find(|g| g["metadata"]["name"] == group)
        .map(|g| g["versions"].clone())
}

/// The legacy `/apis` list's entry for `group`, if it lists the group.
fn legacy_group(server: &Server, group: &str) -> Option<Value> {
    let list: Value = serde_json::from_str(&server.kubectl(&["get", "--raw", "/apis"])).unwrap();
    list["groups"]
        .as_array()?
        .iter()
        .find(|g| g["name"] == group)
        .cloned()
}

/// The value of the sample of `name` with exactly `labels`, read from Prometheus text.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut want: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    want.sort();
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.rsplit_once("} ")?;
        let mut got = Vec::new();
        let mut chars = set.chars().peekable();
        while chars.peek().is_some() {
            let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut value = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
            got.push((key, value));
            if chars.peek() == Some(&',') {
                chars.next();
            }
        }
        got.sort();
        (got == want).then(|| value.trim().parse().unwrap())
    })
}

/// Upstream lists an extension's group whatever its APIService's availability: in the legacy
/// `/apis` list and `/apis/<group>` from the APIServices, and in the aggregated documents with
/// `freshness: Stale` and no resources while its discovery cannot be fetched. The proxy's 503s
/// are counted in `apiserver_request_terminations_total`. Once available, the resources listed
/// are those of the extension server's aggregated document (its other group versions left
/// out), fetched again with `If-None-Match` after it comes back.
#[test]
fn unavailable_extension_groups_are_listed_stale_and_aggregated_discovery_is_read() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let server = aggregating_server(&pki, dir.path());
    server.kubectl_stdin(&["apply", "-f", "-"], &apiservice_yaml(&pki));
    wait_until("ServiceNotFound", 30, || {
        available(&server).is_some_and(|(_, reason, _)| reason == "ServiceNotFound")
    });

    // Never available: listed all the same.
    let stale = json!([{"version": "v1alpha1", "freshness": "Stale"}]);
    wait_until("the stale group version", 30, || {
        aggregated_versions(&server, GROUP).as_ref() == Some(&stale)
    });
    let version = json!({"groupVersion": "wardle.example.com/v1alpha1", "version": "v1alpha1"});
    assert_eq!(
        legacy_group(&server, GROUP),
        Some(json!({"name": GROUP, "versions": [version], "preferredVersion": version}))
    );
    let group: Value =
        serde_json::from_str(&server.kubectl(&["get", "--raw", &format!("/apis/{GROUP}")]))
            .unwrap();
    assert_eq!(
        group,
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
               "versions": [version], "preferredVersion": version})
    );

    // kubectl, reading discovery afresh, lists the rest (a stale group version has no versions
    // for client-go's cached discovery to ask about, so this is no error, as with upstream).
    let cache = tempfile::tempdir().unwrap();
    let out = server.kubectl(&[
        "api-resources",
        "-o",
        "name",
        &format!("--cache-dir={}", cache.path().display()),
    ]);
    assert!(out.contains("deployments.apps"), "{out}");
    assert!(!out.contains(GROUP), "{out}");

    // The proxy refuses the group version's requests, and counts them.
    let out = server.kubectl_output(&["get", "--raw", "/apis/wardle.example.com/v1alpha1"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ServiceUnavailable"),
        "{out:?}"
    );
    for _ in 0..2 {
        let out = server.kubectl_output(&[
            "get",
            "--raw",
            "/apis/wardle.example.com/v1alpha1/namespaces/wardle/flunders",
        ]);
        assert!(!out.status.success());
    }
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    assert!(
        metrics.contains("# HELP apiserver_request_terminations_total [ALPHA] Number of requests which apiserver terminated in self-defense.\n# TYPE apiserver_request_terminations_total counter\n"),
        "{metrics}"
    );
    let terminations =
        |labels: &[(&str, &str)]| sample(&metrics, "apiserver_request_terminations_total", labels);
    assert_eq!(
        terminations(&[
            ("verb", "LIST"),
            ("group", GROUP),
            ("version", "v1alpha1"),
            ("resource", "flunders"),
            ("subresource", ""),
            ("scope", "namespace"),
            ("component", "aggregator"),
            ("code", "503"),
        ]),
        Some(2.0)
    );
    assert_eq!(
        terminations(&[
            ("verb", "GET"),
            ("group", ""),
            ("version", ""),
            ("resource", ""),
            ("subresource", "/apis/wardle.example.com/v1alpha1"),
            ("scope", ""),
            ("component", "aggregator"),
            ("code", "503"),
        ]),
        Some(1.0)
    );

    // Available: the extension server's aggregated entry, as it lists it.
    let mut extension = Extension::start_with(&pki, 0, false, Discovery::Aggregated);
    let port = extension.port;
    server.kubectl_stdin(&["apply", "-f", "-"], &service_yaml(port));
    let mut current = aggregated_document()["items"][0]["versions"][0].clone();
    current["freshness"] = json!("Current");
    wait_until("the extension's aggregated discovery", 60, || {
        aggregated_versions(&server, GROUP) == Some(json!([current]))
    });
    let asked = extension
        .seen()
        .into_iter()
        .find(|s| s.path == "/apis")
        .expect("the aggregated document asked for");
    assert_eq!(
        asked.all("accept"),
        [
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ]
    );
    assert_eq!(asked.all("x-remote-user"), ["system:kube-aggregator"]);
    assert_eq!(asked.all("x-remote-group"), ["system:masters"]);
    assert!(asked.all("if-none-match").is_empty(), "{asked:?}");
    let resources = server.kubectl(&["api-resources", "--api-group", GROUP, "-o", "name"]);
    assert_eq!(
        resources.lines().collect::<Vec<_>>(),
        ["fischers.wardle.example.com", "flunders.wardle.example.com"]
    );
    // Legacy discovery lists the group version an APIService names, not the others.
    assert_eq!(
        legacy_group(&server, GROUP),
        Some(json!({"name": GROUP, "versions": [version], "preferredVersion": version}))
    );

    // Stopped: stale again, without the resources it had.
    extension.stop();
    wait_until("the APIService to become unavailable", 60, || {
        available(&server).is_some_and(|(s, _, _)| s == "False")
    });
    wait_until("the stale group version again", 30, || {
        aggregated_versions(&server, GROUP).as_ref() == Some(&stale)
    });
    assert!(legacy_group(&server, GROUP).is_some());

    // Back: asked with the ETag it gave, and its 304 keeps what was fetched.
    let extension = Extension::start_with(&pki, port, false, Discovery::Aggregated);
    wait_until("the extension's discovery, current again", 90, || {
        aggregated_versions(&server, GROUP) == Some(json!([current]))
    });
    let asked = extension
        .seen()
        .into_iter()
        .find(|s| s.path == "/apis")
        .expect("the aggregated document asked for again");
    assert_eq!(asked.all("if-none-match"), [ETAG]);
}

/// An extension server that serves only legacy discovery: upstream's discovery manager asks for
/// the aggregated document, then falls back to the group version's `APIResourceList` (as the
/// aggregator without its group), converted as upstream converts it.
#[test]
fn an_extension_without_aggregated_discovery_is_read_through_its_legacy_document() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let server = aggregating_server(&pki, dir.path());
    let extension = Extension::start_with(&pki, 0, false, Discovery::Legacy);
    server.kubectl_stdin(&["apply", "-f", "-"], &apiservice_yaml(&pki));
    server.kubectl_stdin(&["apply", "-f", "-"], &service_yaml(extension.port));
    let want = json!([{"version": "v1alpha1", "freshness": "Current", "resources": [
        {"resource": "flunders", "responseKind": {"group": "", "version": "", "kind": "Flunder"},
         "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list", "watch"],
         "shortNames": ["fl"],
         "subresources": [{"subresource": "status",
                           "responseKind": {"group": "", "version": "", "kind": "Flunder"},
                           "verbs": ["get", "patch"]}]}]}]);
    wait_until("the extension's legacy discovery", 60, || {
        aggregated_versions(&server, GROUP) == Some(want.clone())
    });
    let seen = extension.seen();
    let first = seen
        .iter()
        .position(|s| s.path == "/apis")
        .expect("the aggregated document asked for first");
    let fallback = seen[first..]
        .iter()
        .find(|s| {
            s.path == "/apis/wardle.example.com/v1alpha1" && s.all("x-remote-group").is_empty()
        })
        .expect("the legacy document asked for");
    assert_eq!(fallback.all("accept"), ["application/json"]);
    assert_eq!(fallback.all("x-remote-user"), ["system:kube-aggregator"]);
    let resources = server.kubectl(&["api-resources", "--api-group", GROUP, "-o", "name"]);
    assert_eq!(resources.trim(), "flunders.wardle.example.com");
}
