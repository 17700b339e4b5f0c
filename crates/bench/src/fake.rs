//! A tiny in-memory Kubernetes API server on a loopback port, for this crate's tests only.
//!
//! It owns just enough of the API for the scenarios: namespaces, and ConfigMaps with create
//! (generateName), get, update, delete, deletecollection, list (equality label selectors,
//! `limit`/`continue`) and watch from a resourceVersion; `/version` and `/readyz`; HTTPS with
//! HTTP/2 and HTTP/1.1; bearer-token or client-certificate authentication. It must not be mistaken
//! for a reference: its answers are shaped like upstream's only as far as the bench tool reads
//! them.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::kubeconfig::{Credentials, ResolvedContext};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// How the fake authenticates clients.
#[derive(Clone, Debug)]
pub enum FakeAuth {
    /// `Authorization: Bearer <token>` must match.
    Token(String),
    /// A client certificate signed by the fake's CA must be presented.
    ClientCertificate,
}

#[derive(Clone)]
struct Event {
    rv: u64,
    kind: &'static str,
    namespace: String,
    object: Value,
}

#[derive(Default)]
struct Store {
    rv: u64,
    seq: u64,
    namespaces: BTreeSet<String>,
    objects: BTreeMap<(String, String), Value>,
    log: Vec<Event>,
}

struct State {
    store: Mutex<Store>,
    events: broadcast::Sender<Event>,
    auth: FakeAuth,
}

/// A running fake server; it stops when dropped.
pub struct FakeServer {
    pub url: String,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
    /// Folders made by `write_kubeconfig`, removed on drop.
    dirs: Mutex<Vec<std::path::PathBuf>>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
        if let Ok(dirs) = self.dirs.lock() {
            for dir in dirs.iter() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

impl FakeServer {
    pub async fn start(auth: FakeAuth) -> FakeServer {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fake-ca");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();

        let server_key = rcgen::KeyPair::generate().unwrap();
        let server_params =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        let server_cert = server_params.signed_by(&server_key, &ca).unwrap();

        let client_key = rcgen::KeyPair::generate().unwrap();
        let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "bench-admin");
        let client_cert = client_params.signed_by(&client_key, &ca).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let key_der =
            rustls::pki_types::PrivateKeyDer::try_from(server_key.serialize_der()).unwrap();
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server_cert.der().clone()], key_der)
            .unwrap();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

        let (events, _) = broadcast::channel(1 << 16);
        let mut store = Store::default();
        store.namespaces.insert("default".to_string());
        let state = Arc::new(State {
            store: Mutex::new(store),
            events,
            auth,
        });

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let accept_state = state.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let state = accept_state.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let has_client_cert = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .is_some_and(|c| !c.is_empty());
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, req, has_client_cert).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });

        FakeServer {
            url,
            ca_pem: ca.pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
            state,
            task,
            dirs: Mutex::new(Vec::new()),
        }
    }

    /// A resolved context with the right CA and credentials for this fake.
    pub fn context(&self) -> ResolvedContext {
        let credentials = match &self.state.auth {
            FakeAuth::Token(token) => Credentials::Token(token.clone()),
            FakeAuth::ClientCertificate => Credentials::ClientCertificate {
                cert_pem: self.client_cert_pem.clone().into_bytes(),
                key_pem: self.client_key_pem.clone().into_bytes(),
            },
        };
        ResolvedContext {
            context: "fake".to_string(),
            server: self.url.clone(),
            ca_pem: Some(self.ca_pem.clone().into_bytes()),
            insecure_skip_tls_verify: false,
            tls_server_name: None,
            credentials,
            namespace: None,
        }
    }

    /// A kubeconfig file's text for this fake, with embedded data.
    pub fn kubeconfig_yaml(&self) -> String {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let user = match &self.state.auth {
            FakeAuth::Token(token) => format!("token: {token}"),
            FakeAuth::ClientCertificate => format!(
                "client-certificate-data: {}\n    client-key-data: {}",
                b64(&self.client_cert_pem),
                b64(&self.client_key_pem)
            ),
        };
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: {}\n    certificate-authority-data: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: admin\nusers:\n- name: admin\n  user:\n    {user}\n",
            self.url,
            b64(&self.ca_pem)
        )
    }

    /// Writes the kubeconfig to a fresh file in a fresh temporary folder.
    pub fn write_kubeconfig(&self, tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ironplane-bench-{tag}-{}-{}",
            std::process::id(),
            self.url.rsplit(':').next().unwrap_or("0")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        self.dirs.lock().unwrap().push(dir.clone());
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.kubeconfig_yaml()).unwrap();
        path
    }

    /// How many ConfigMaps the namespace holds.
    pub fn count(&self, namespace: &str) -> usize {
        let store = self.state.store.lock().unwrap();
        store
            .objects
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .count()
    }

    /// Whether the namespace exists.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.state
            .store
            .lock()
            .unwrap()
            .namespaces
            .contains(namespace)
    }
}

fn full(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed_unsync())
        .unwrap()
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    full(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

fn query_map(query: Option<&str>) -> BTreeMap<String, String> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

fn matches_selector(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|req| {
        let Some((key, value)) = req.split_once('=') else {
            return false;
        };
        object["metadata"]["labels"][key].as_str() == Some(value)
    })
}

async fn handle(
    state: &Arc<State>,
    req: Request<Incoming>,
    has_client_cert: bool,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = query_map(req.uri().query());
    let method = req.method().clone();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if matches!(segments.as_slice(), ["version"] | ["readyz"] | ["livez"]) {
        return full(
            StatusCode::OK,
            json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"}),
        );
    }
    let authenticated = match &state.auth {
        FakeAuth::Token(token) => req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {token}")),
        FakeAuth::ClientCertificate => has_client_cert,
    };
    if !authenticated {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return status(StatusCode::BAD_REQUEST, "BadRequest", "bad body"),
    };
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();

    match (method, segments.as_slice()) {
        (Method::POST, ["api", "v1", "namespaces"]) => {
            let Some(name) = parsed
                .as_ref()
                .and_then(|v| v["metadata"]["name"].as_str().map(str::to_string))
            else {
                return status(StatusCode::BAD_REQUEST, "BadRequest", "no name");
            };
            let mut store = state.store.lock().unwrap();
            if !store.namespaces.insert(name.clone()) {
                return status(
                    StatusCode::CONFLICT,
                    "AlreadyExists",
                    &format!("namespaces \"{name}\" already exists"),
                );
            }
            full(
                StatusCode::CREATED,
                json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}}),
            )
        }
        (Method::GET, ["api", "v1", "namespaces", ns]) => {
            let store = state.store.lock().unwrap();
            if store.namespaces.contains(*ns) {
                full(
                    StatusCode::OK,
                    json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}}),
                )
            } else {
                status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("namespaces \"{ns}\" not found"),
                )
            }
        }
        (Method::DELETE, ["api", "v1", "namespaces", ns]) => {
            let mut store = state.store.lock().unwrap();
            if !store.namespaces.remove(*ns) {
                return status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("namespaces \"{ns}\" not found"),
                );
            }
            store.objects.retain(|(n, _), _| n != ns);
            full(
                StatusCode::OK,
                json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}}),
            )
        }
        (Method::GET, ["api", "v1", "namespaces", ns, "configmaps"]) => {
            if query.get("watch").is_some_and(|w| w == "1" || w == "true") {
                return watch(state, ns, &query);
            }
            list(state, ns, &query)
        }
        (Method::POST, ["api", "v1", "namespaces", ns, "configmaps"]) => {
            let Some(mut object) = parsed else {
                return status(StatusCode::BAD_REQUEST, "BadRequest", "bad json");
            };
            let mut store = state.store.lock().unwrap();
            if !store.namespaces.contains(*ns) {
                return status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("namespaces \"{ns}\" not found"),
                );
            }
            let name = match object["metadata"]["name"].as_str() {
                Some(name) => name.to_string(),
                None => {
                    store.seq += 1;
                    let prefix = object["metadata"]["generateName"].as_str().unwrap_or("x-");
                    format!("{prefix}{:05}", store.seq)
                }
            };
            let key = (ns.to_string(), name.clone());
            if store.objects.contains_key(&key) {
                return status(
                    StatusCode::CONFLICT,
                    "AlreadyExists",
                    &format!("configmaps \"{name}\" already exists"),
                );
            }
            store.rv += 1;
            let rv = store.rv;
            object["metadata"]["name"] = json!(name);
            object["metadata"]["namespace"] = json!(ns);
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            store.objects.insert(key, object.clone());
            record(state, &mut store, "ADDED", ns, &object);
            full(StatusCode::CREATED, object)
        }
        (Method::DELETE, ["api", "v1", "namespaces", ns, "configmaps"]) => {
            let selector = query.get("labelSelector").cloned().unwrap_or_default();
            let mut store = state.store.lock().unwrap();
            let doomed: Vec<(String, String)> = store
                .objects
                .iter()
                .filter(|((n, _), o)| n == ns && matches_selector(o, &selector))
                .map(|(k, _)| k.clone())
                .collect();
            for key in doomed {
                if let Some(mut object) = store.objects.remove(&key) {
                    store.rv += 1;
                    object["metadata"]["resourceVersion"] = json!(store.rv.to_string());
                    record(state, &mut store, "DELETED", ns, &object);
                }
            }
            full(
                StatusCode::OK,
                json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": []}),
            )
        }
        (Method::GET, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            let store = state.store.lock().unwrap();
            match store.objects.get(&(ns.to_string(), name.to_string())) {
                Some(object) => full(StatusCode::OK, object.clone()),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("configmaps \"{name}\" not found"),
                ),
            }
        }
        (Method::PUT, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            let Some(mut object) = parsed else {
                return status(StatusCode::BAD_REQUEST, "BadRequest", "bad json");
            };
            let mut store = state.store.lock().unwrap();
            let key = (ns.to_string(), name.to_string());
            let Some(current) = store.objects.get(&key) else {
                return status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("configmaps \"{name}\" not found"),
                );
            };
            if let Some(rv) = object["metadata"]["resourceVersion"].as_str()
                && Some(rv) != current["metadata"]["resourceVersion"].as_str()
            {
                return status(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "the object has been modified",
                );
            }
            store.rv += 1;
            object["metadata"]["name"] = json!(name);
            object["metadata"]["namespace"] = json!(ns);
            object["metadata"]["resourceVersion"] = json!(store.rv.to_string());
            store.objects.insert(key, object.clone());
            record(state, &mut store, "MODIFIED", ns, &object);
            full(StatusCode::OK, object)
        }
        (Method::DELETE, ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            let mut store = state.store.lock().unwrap();
            match store.objects.remove(&(ns.to_string(), name.to_string())) {
                Some(mut object) => {
                    store.rv += 1;
                    object["metadata"]["resourceVersion"] = json!(store.rv.to_string());
                    record(state, &mut store, "DELETED", ns, &object);
                    full(StatusCode::OK, object)
                }
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("configmaps \"{name}\" not found"),
                ),
            }
        }
        _ => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

fn record(state: &State, store: &mut Store, kind: &'static str, namespace: &str, object: &Value) {
    let event = Event {
        rv: store.rv,
        kind,
        namespace: namespace.to_string(),
        object: object.clone(),
    };
    store.log.push(event.clone());
    // No receivers is fine: nobody watches.
    let _ = state.events.send(event);
}

fn list(state: &State, ns: &str, query: &BTreeMap<String, String>) -> Response<Body> {
    let selector = query.get("labelSelector").cloned().unwrap_or_default();
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let after = query.get("continue").cloned().unwrap_or_default();
    let store = state.store.lock().unwrap();
    let matching: Vec<&Value> = store
        .objects
        .iter()
        .filter(|((n, name), o)| {
            n == ns && (after.is_empty() || *name > after) && matches_selector(o, &selector)
        })
        .map(|(_, o)| o)
        .collect();
    let page: Vec<Value> = matching.iter().take(limit).map(|o| (*o).clone()).collect();
    let mut metadata = json!({"resourceVersion": store.rv.to_string()});
    if matching.len() > page.len() {
        let last = page
            .last()
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or("")
            .to_string();
        metadata["continue"] = json!(last);
        metadata["remainingItemCount"] = json!(matching.len() - page.len());
    }
    full(
        StatusCode::OK,
        json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": metadata, "items": page}),
    )
}

fn watch(state: &Arc<State>, ns: &str, query: &BTreeMap<String, String>) -> Response<Body> {
    let selector = query.get("labelSelector").cloned().unwrap_or_default();
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(300);
    let since: u64 = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0);
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    // Subscribe and read the backlog under one lock so that no event falls between them.
    let (backlog, mut live) = {
        let store = state.store.lock().unwrap();
        let live = state.events.subscribe();
        let backlog: Vec<Event> = if since == 0 {
            store
                .objects
                .iter()
                .filter(|((n, _), _)| n == ns)
                .map(|((n, _), o)| Event {
                    rv: store.rv,
                    kind: "ADDED",
                    namespace: n.clone(),
                    object: o.clone(),
                })
                .collect()
        } else {
            store.log.iter().filter(|e| e.rv > since).cloned().collect()
        };
        (backlog, live)
    };
    let ns = ns.to_string();
    tokio::spawn(async move {
        let send = |event: &Event| -> bool {
            if event.namespace != ns || !matches_selector(&event.object, &selector) {
                return true;
            }
            let mut line = json!({"type": event.kind, "object": event.object}).to_string();
            line.push('\n');
            tx.send(Bytes::from(line)).is_ok()
        };
        let mut last = since;
        for event in &backlog {
            last = last.max(event.rv);
            if !send(event) {
                return;
            }
        }
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                event = live.recv() => match event {
                    Ok(event) => {
                        if event.rv > last {
                            last = event.rv;
                            if !send(&event) {
                                return;
                            }
                        }
                    }
                    Err(_) => return,
                },
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(BodyExt::boxed_unsync(StreamBody::new(stream)))
        .unwrap()
}
