//! The HTTP client: TLS from a resolved kubeconfig, a small set of connections, and requests that
//! return status and body.
//!
//! It owns connection management: HTTP/2 when the server offers it (ALPN), with a fixed number of
//! connections that many requests or watches share, and HTTP/1.1 with a connection per concurrent
//! request otherwise. It must not aim at any address other than the kubeconfig's server: every
//! request URL is the server URL followed by a path that the tool built, and no proxy is used.
//! It must not interpret Kubernetes objects; scenarios do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::{BenchError, error_chain};
use crate::kubeconfig::{Credentials, ResolvedContext};

type HyperClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The `User-Agent` the tool sends, so that server logs and audit events show who made the load.
pub const USER_AGENT_VALUE: &str = concat!("ironplane-bench/", env!("CARGO_PKG_VERSION"));

/// The content type of every request body but a patch.
pub const JSON: &str = "application/json";

/// The system CA bundle used when the kubeconfig names no CA and does not skip verification.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A request that got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Connecting, TLS, or the HTTP exchange failed.
    Transport(String),
    /// No answer within the request timeout.
    Timeout,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Transport(message) => f.write_str(message),
            RequestError::Timeout => f.write_str("no answer within the request timeout"),
        }
    }
}

/// A complete answer: status and the whole body.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub body: Bytes,
}

impl ApiResponse {
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }
}

/// A client for one server, holding `connections` independent connection pools. With HTTP/2 each
/// pool is one multiplexed connection; callers spread work over them by index.
pub struct ApiClient {
    server: String,
    authorization: Option<HeaderValue>,
    clients: Vec<HyperClient>,
    next: AtomicUsize,
    request_timeout: Duration,
    http2: bool,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("server", &self.server)
            .field("connections", &self.clients.len())
            .field("http2", &self.http2)
            .finish()
    }
}

impl ApiClient {
    /// Builds a client without contacting the server. `http2_only` must only be set when the
    /// server is known to speak HTTP/2 (see [`ApiClient::connect`]).
    pub fn build(
        context: &ResolvedContext,
        connections: usize,
        http2_only: bool,
        request_timeout: Duration,
    ) -> Result<Self, BenchError> {
        let tls = tls_config(context)?;
        let server_name = match &context.tls_server_name {
            Some(name) => Some(ServerName::try_from(name.clone()).map_err(|e| {
                BenchError::Tls(format!("tls-server-name {name:?} is not a valid name: {e}"))
            })?),
            None => None,
        };
        let connections = connections.max(1);
        let mut clients = Vec::with_capacity(connections);
        for _ in 0..connections {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            // Small requests and answers: Nagle's algorithm would add delay to HTTP/1.1 requests.
            http.set_nodelay(true);
            http.set_connect_timeout(Some(request_timeout));
            let builder = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls.clone())
                .https_or_http();
            let builder = match &server_name {
                Some(name) => builder.with_server_name_resolver(
                    hyper_rustls::FixedServerNameResolver::new(name.clone()),
                ),
                None => builder,
            };
            let connector = builder.enable_http1().enable_http2().wrap_connector(http);
            let client = Client::builder(TokioExecutor::new())
                .http2_only(http2_only)
                // Watches stream on many streams of one connection: large windows keep a slow
                // reader of one stream from stalling the others.
                .http2_initial_stream_window_size(1 << 20)
                .http2_initial_connection_window_size(16 << 20)
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
                .build(connector);
            clients.push(client);
        }
        let authorization = match &context.credentials {
            Credentials::Token(token) => {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        BenchError::Tls(
                            "the token holds characters not allowed in an HTTP header".to_string(),
                        )
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            _ => None,
        };
        Ok(ApiClient {
            server: context.server.clone(),
            authorization,
            clients,
            next: AtomicUsize::new(0),
            request_timeout,
            http2: http2_only,
        })
    }

    /// Builds a client, finds out whether the server speaks HTTP/2, and opens every connection
    /// before returning, so that connection setup is not part of any measurement. Fails with
    /// [`BenchError::Unreachable`] when the server does not answer.
    pub async fn connect(
        context: &ResolvedContext,
        connections: usize,
        request_timeout: Duration,
    ) -> Result<Self, BenchError> {
        let probe = ApiClient::build(context, 1, false, request_timeout)?;
        let response = probe.probe_version().await?;
        let http2 = response == Version::HTTP_2;
        drop(probe);
        let client = ApiClient::build(context, connections, http2, request_timeout)?;
        // With HTTP/2 each pool opens exactly one connection here, and every later request shares
        // it; with HTTP/1.1 this leaves one idle connection per pool.
        for index in 0..client.clients.len() {
            client.probe_version_on(index).await?;
        }
        Ok(client)
    }

    async fn probe_version(&self) -> Result<Version, BenchError> {
        self.probe_version_on(0).await
    }

    /// `GET /version`: answered to anyone (upstream binds it to `system:public-info-viewer`), so
    /// it tests reachability, not credentials. Returns the HTTP version the answer came in.
    async fn probe_version_on(&self, index: usize) -> Result<Version, BenchError> {
        let request = self.request(Method::GET, "/version", None, JSON)?;
        let client = &self.clients[index % self.clients.len()];
        let answer = tokio::time::timeout(self.request_timeout, client.request(request)).await;
        match answer {
            Err(_) => Err(self.unreachable(RequestError::Timeout)),
            Ok(Err(e)) => Err(self.unreachable(RequestError::Transport(error_chain(&e)))),
            Ok(Ok(response)) => {
                let version = response.version();
                // Drain the body so the HTTP/1.1 connection goes back to the pool.
                let _ = response.into_body().collect().await;
                Ok(version)
            }
        }
    }

    /// The server URL, without a trailing slash.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether requests go over HTTP/2.
    pub fn http2(&self) -> bool {
        self.http2
    }

    /// How many connection pools the client holds.
    pub fn connections(&self) -> usize {
        self.clients.len()
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The error for a request that got no answer.
    pub fn unreachable(&self, error: RequestError) -> BenchError {
        BenchError::Unreachable {
            server: self.server.clone(),
            message: error.to_string(),
        }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        content_type: &'static str,
    ) -> Result<Request<Full<Bytes>>, BenchError> {
        // Paths are built by the tool and always absolute; anything else would change the target.
        if !path.starts_with('/') {
            return Err(BenchError::InvalidArgument(format!(
                "request path {path:?} is not absolute"
            )));
        }
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.server, path))
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, USER_AGENT_VALUE);
        if body.is_some() {
            builder = builder.header(CONTENT_TYPE, content_type);
        }
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| {
                BenchError::InvalidArgument(format!("cannot build request for {path:?}: {e}"))
            })
    }

    /// Sends one request on connection pool `connection` (taken modulo the pool count) and reads
    /// the whole answer within the request timeout.
    pub async fn send_on(
        &self,
        connection: usize,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<ApiResponse, RequestError> {
        self.send_with_timeout(connection, method, path, body, self.request_timeout)
            .await
    }

    /// [`ApiClient::send_on`] with its own time limit (cleanup of many objects takes longer than
    /// one request should).
    pub async fn send_with_timeout(
        &self,
        connection: usize,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        timeout: Duration,
    ) -> Result<ApiResponse, RequestError> {
        self.exchange(connection, method, path, body, JSON, timeout)
            .await
    }

    /// A PATCH on pool `connection` with the patch type as its content type
    /// (`application/strategic-merge-patch+json`, `application/merge-patch+json`), within the
    /// request timeout.
    pub async fn patch_on(
        &self,
        connection: usize,
        path: &str,
        body: Bytes,
        content_type: &'static str,
    ) -> Result<ApiResponse, RequestError> {
        self.exchange(
            connection,
            Method::PATCH,
            path,
            Some(body),
            content_type,
            self.request_timeout,
        )
        .await
    }

    async fn exchange(
        &self,
        connection: usize,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        content_type: &'static str,
        timeout: Duration,
    ) -> Result<ApiResponse, RequestError> {
        let request = self
            .request(method, path, body, content_type)
            .map_err(|e| RequestError::Transport(e.to_string()))?;
        self.exchange_request(connection, request, timeout).await
    }

    /// A GET on the next pool in turn that asks for `accept` (protobuf, say), within the
    /// request timeout.
    pub async fn get_accepting(
        &self,
        path: &str,
        accept: &'static str,
    ) -> Result<ApiResponse, RequestError> {
        let connection = self.next.fetch_add(1, Ordering::Relaxed);
        self.get_on_accepting(connection, path, accept).await
    }

    /// [`ApiClient::get_accepting`] on pool `connection`.
    pub async fn get_on_accepting(
        &self,
        connection: usize,
        path: &str,
        accept: &'static str,
    ) -> Result<ApiResponse, RequestError> {
        let request = self.get_accepting_request(path, accept)?;
        self.exchange_request(connection, request, self.request_timeout)
            .await
    }

    /// A GET of `path` whose `Accept` is `accept`.
    fn get_accepting_request(
        &self,
        path: &str,
        accept: &'static str,
    ) -> Result<Request<Full<Bytes>>, RequestError> {
        let mut request = self
            .request(Method::GET, path, None, JSON)
            .map_err(|e| RequestError::Transport(e.to_string()))?;
        request
            .headers_mut()
            .insert(ACCEPT, http::HeaderValue::from_static(accept));
        Ok(request)
    }

    async fn exchange_request(
        &self,
        connection: usize,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<ApiResponse, RequestError> {
        let client = &self.clients[connection % self.clients.len()];
        let exchange = async {
            let response = client
                .request(request)
                .await
                .map_err(|e| RequestError::Transport(error_chain(&e)))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| RequestError::Transport(error_chain(&e)))?
                .to_bytes();
            Ok(ApiResponse { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(RequestError::Timeout),
        }
    }

    /// Sends one request on the next pool in turn.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<ApiResponse, RequestError> {
        let connection = self.next.fetch_add(1, Ordering::Relaxed);
        self.send_on(connection, method, path, body).await
    }

    /// A setup request that must succeed: no answer is [`BenchError::Unreachable`], 401/403 is
    /// [`BenchError::Rejected`], any other non-2xx is [`BenchError::Status`].
    pub async fn expect_success(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<Bytes, BenchError> {
        let response = self
            .send(method.clone(), path, body)
            .await
            .map_err(|e| self.unreachable(e))?;
        if response.is_success() {
            Ok(response.body)
        } else {
            Err(BenchError::from_status(
                &self.server,
                method.as_str(),
                path,
                response.status.as_u16(),
                &response.body,
            ))
        }
    }

    /// Opens a streaming request (a watch) on pool `connection` and returns once the answer's
    /// headers arrived; the body is the caller's to read, without a time limit.
    pub async fn open_stream(
        &self,
        connection: usize,
        path: &str,
    ) -> Result<hyper::Response<Incoming>, RequestError> {
        self.open_stream_accepting(connection, path, JSON).await
    }

    /// [`ApiClient::open_stream`] asking for `accept` (e.g. protobuf, as client-go's informers
    /// of built-in kinds ask).
    pub async fn open_stream_accepting(
        &self,
        connection: usize,
        path: &str,
        accept: &'static str,
    ) -> Result<hyper::Response<Incoming>, RequestError> {
        let request = self.get_accepting_request(path, accept)?;
        let client = &self.clients[connection % self.clients.len()];
        match tokio::time::timeout(self.request_timeout, client.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(RequestError::Transport(error_chain(&e))),
            Err(_) => Err(RequestError::Timeout),
        }
    }
}

/// Builds the rustls client configuration from the kubeconfig: the CA to trust (or no
/// verification), and the client certificate to present.
pub fn tls_config(context: &ResolvedContext) -> Result<rustls::ClientConfig, BenchError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| BenchError::Tls(e.to_string()))?;
    let builder = if context.insecure_skip_tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipServerVerification(provider)))
    } else {
        let pem = match &context.ca_pem {
            Some(pem) => pem.clone(),
            None => std::fs::read(SYSTEM_CA_BUNDLE).map_err(|e| {
                BenchError::Tls(format!(
                    "the kubeconfig names no certificate-authority and {SYSTEM_CA_BUNDLE} cannot be read: {e}"
                ))
            })?,
        };
        let mut roots = rustls::RootCertStore::empty();
        let mut added = 0;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| BenchError::Tls(format!("certificate-authority: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| BenchError::Tls(format!("certificate-authority: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(BenchError::Tls(
                "certificate-authority holds no PEM certificate".to_string(),
            ));
        }
        builder.with_root_certificates(roots)
    };
    match &context.credentials {
        Credentials::ClientCertificate { cert_pem, key_pem } => {
            let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| BenchError::Tls(format!("client-certificate: {e}")))?;
            if certs.is_empty() {
                return Err(BenchError::Tls(
                    "client-certificate holds no PEM certificate".to_string(),
                ));
            }
            let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
                .map_err(|e| BenchError::Tls(format!("client-key: {e}")))?
                .ok_or_else(|| {
                    BenchError::Tls("client-key holds no PEM private key".to_string())
                })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| BenchError::Tls(format!("client certificate: {e}")))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// `insecure-skip-tls-verify`: accepts any server certificate, but still checks the handshake
/// signatures so that the connection is a well-formed TLS connection.
#[derive(Debug)]
struct SkipServerVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipServerVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeAuth, FakeServer};

    #[tokio::test]
    async fn token_over_http2() {
        let server = FakeServer::start(FakeAuth::Token("t0k".to_string())).await;
        let context = server.context();
        let client = ApiClient::connect(&context, 2, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(client.http2());
        assert_eq!(client.connections(), 2);
        let body = client
            .expect_success(Method::GET, "/api/v1/namespaces/default", None)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("\"default\""));
    }

    #[tokio::test]
    async fn client_certificate_is_presented() {
        let server = FakeServer::start(FakeAuth::ClientCertificate).await;
        let client = ApiClient::connect(&server.context(), 1, Duration::from_secs(5))
            .await
            .unwrap();
        client
            .expect_success(Method::GET, "/api/v1/namespaces/default", None)
            .await
            .unwrap();

        // Without the certificate the fake answers 401, which is a clear "rejected" error.
        let mut anonymous = server.context();
        anonymous.credentials = Credentials::Anonymous;
        let client = ApiClient::connect(&anonymous, 1, Duration::from_secs(5))
            .await
            .unwrap();
        let err = client
            .expect_success(Method::GET, "/api/v1/namespaces/default", None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, BenchError::Rejected { status: 401, .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn wrong_token_is_rejected_and_wrong_ca_is_unreachable() {
        let server = FakeServer::start(FakeAuth::Token("right".to_string())).await;
        let mut context = server.context();
        context.credentials = Credentials::Token("wrong".to_string());
        let client = ApiClient::connect(&context, 1, Duration::from_secs(5))
            .await
            .unwrap();
        let err = client
            .expect_success(Method::GET, "/api/v1/namespaces/default", None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("rejected the credentials: 401"),
            "{err}"
        );

        // A CA that did not sign the server's certificate: the handshake fails.
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let mut context = server.context();
        context.ca_pem = Some(other.cert.pem().into_bytes());
        let err = ApiClient::connect(&context, 1, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(err, BenchError::Unreachable { .. }), "{err}");

        // The same CA problem is no problem with insecure-skip-tls-verify.
        context.insecure_skip_tls_verify = true;
        ApiClient::connect(&context, 1, Duration::from_secs(5))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable() {
        // Bind and drop a listener to get a loopback port that refuses connections.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let context = ResolvedContext {
            context: "c".to_string(),
            server: format!("https://127.0.0.1:{port}"),
            ca_pem: None,
            insecure_skip_tls_verify: true,
            tls_server_name: None,
            credentials: Credentials::Anonymous,
            namespace: None,
        };
        let err = ApiClient::connect(&context, 1, Duration::from_secs(5))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("is unreachable"), "{text}");
        assert!(text.to_lowercase().contains("refused"), "{text}");
    }

    #[test]
    fn bad_key_material_is_a_tls_error() {
        let context = ResolvedContext {
            context: "c".to_string(),
            server: "https://127.0.0.1:1".to_string(),
            ca_pem: Some(b"not pem".to_vec()),
            insecure_skip_tls_verify: false,
            tls_server_name: None,
            credentials: Credentials::Anonymous,
            namespace: None,
        };
        let err = tls_config(&context).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }
}
