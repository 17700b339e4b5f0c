//! A webhook server the tests run themselves: HTTPS on an ephemeral port of loopback and of the
//! machine's own address (for Services, whose EndpointSlices may not name loopback), with a
//! certificate from a fresh CA valid for 127.0.0.1 and the Service names given. Each request's
//! path and JSON body go to the test's handler, whose reply may come late (timeouts). A request
//! without a body that carries an `Authorization` header (an OIDC distributed claim's fetch)
//! gives the handler `{"authorization": <header>}` as its body.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Reply {
    pub fn json(v: &Value) -> Reply {
        Reply {
            status: 200,
            body: serde_json::to_vec(v).unwrap(),
            delay: Duration::ZERO,
        }
    }
}

pub type Handler = Arc<dyn Fn(&str, Value) -> Reply + Send + Sync>;

pub struct HookServer {
    pub port: u16,
    pub ca_pem: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl HookServer {
    pub fn start(service_names: &[&str], handler: Handler) -> HookServer {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let mut names = vec!["127.0.0.1".to_string()];
        names.extend(service_names.iter().map(|s| s.to_string()));
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let own = runtime
            .block_on(tokio::net::TcpListener::bind((own_address(), port)))
            .unwrap();
        for listener in [listener, own] {
            let (acceptor, handler) = (acceptor.clone(), handler.clone());
            runtime.spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let (acceptor, handler) = (acceptor.clone(), handler.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(
                            move |req: hyper::Request<hyper::body::Incoming>| {
                                let handler = handler.clone();
                                async move {
                                    use http_body_util::BodyExt;
                                    let path = req.uri().path().to_string();
                                    let authorization = req
                                        .headers()
                                        .get("authorization")
                                        .and_then(|v| v.to_str().ok())
                                        .map(str::to_string);
                                    let body = req.into_body().collect().await?.to_bytes();
                                    let value = match (body.is_empty(), authorization) {
                                        (true, Some(a)) => {
                                            serde_json::json!({ "authorization": a })
                                        }
                                        _ => serde_json::from_slice(&body).unwrap_or(Value::Null),
                                    };
                                    let reply = handler(&path, value);
                                    tokio::time::sleep(reply.delay).await;
                                    let mut r = hyper::Response::new(http_body_util::Full::new(
                                        hyper::body::Bytes::from(reply.body),
                                    ));
                                    *r.status_mut() =
                                        hyper::StatusCode::from_u16(reply.status).unwrap();
                                    r.headers_mut().insert(
                                        "content-type",
                                        "application/json".parse().unwrap(),
                                    );
                                    Ok::<_, hyper::Error>(r)
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                            .await;
                    });
                }
            });
        }
        HookServer {
            port,
            ca_pem: ca_cert.pem(),
            runtime: Some(runtime),
        }
    }

    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// Stops serving: the port refuses connections from now on.
    pub fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for HookServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A non-loopback IPv4 address of this machine: the source address the kernel picks for a route
/// out (a UDP "connection" sends nothing). Fails loudly on a machine with no such address.
pub fn own_address() -> std::net::Ipv4Addr {
    for target in ["192.0.2.1:9", "10.255.255.1:9", "172.16.0.1:9"] {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        if socket.connect(target).is_ok()
            && let Ok(std::net::SocketAddr::V4(a)) = socket.local_addr()
            && !a.ip().is_loopback()
            && !a.ip().is_unspecified()
        {
            return *a.ip();
        }
    }
    panic!("this test needs a non-loopback IPv4 address (EndpointSlices may not name loopback)");
}
