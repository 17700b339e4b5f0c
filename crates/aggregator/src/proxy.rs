//! The proxy to extension API servers (upstream: handler_proxy.go with client-go's auth-proxy
//! round tripper). A request for a remote group version goes, body still streaming, to a ready
//! endpoint of the APIService's Service (as `--enable-aggregator-routing` picks one), over TLS
//! verified with the APIService's `caBundle` for the name `<service>.<namespace>.svc` (or not
//! verified, with `insecureSkipTLSVerify`), presenting the proxy client certificate. The user who
//! asked travels in the `X-Remote-*` headers that the extension server's request-header
//! authenticator reads; the caller's own credentials do not travel. The answer streams back as
//! it comes (watches), hop-by-hop headers left out on both legs.
//!
//! What it must not do: buffer a body, or keep a connection to an endpoint it no longer picks
//! for longer than the pool's idle timeout.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use apiserver::authentication::UserInfo;
use apiserver::endpoints::Response;
use apiserver::filters::RequestBody;
use apiserver::request::RequestInfo;
use apiserver::util::webhook::{Dialer, ServiceReference, ServiceResolver};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::{ApiService, ServiceRef};

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1, as Go's reverse
/// proxy drops them).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

type Client = hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<Dialer>, RequestBody>;

/// The proxy's clients, one per trust configuration and kind of request, all presenting the
/// proxy client certificate. Requests go over HTTP/2 when the extension server offers it in the
/// TLS handshake (ALPN), as Go's transport does, else HTTP/1.1; connection upgrades always go
/// over HTTP/1.1, as upstream's upgrade-aware proxy sends them (HTTP/2 has no `Upgrade`).
pub(crate) struct Transports {
    resolver: Arc<dyn ServiceResolver>,
    clients: Mutex<Clients>,
}

/// The clients made so far and the identity they present, under one lock: a client is never
/// kept with an identity that has been replaced.
struct Clients {
    identity: Option<(Vec<u8>, Vec<u8>)>,
    by_key: HashMap<ClientKey, Client>,
}

/// The CA bundle, whether TLS is verified at all, and whether the client is for upgrades.
type ClientKey = (Vec<u8>, bool, bool);

impl Transports {
    pub(crate) fn new(
        identity: Option<(Vec<u8>, Vec<u8>)>,
        resolver: Arc<dyn ServiceResolver>,
    ) -> Result<Transports, String> {
        // A certificate or key that cannot be read is the operator's error, found at start.
        if let Some(identity) = &identity {
            apiserver::util::webhook::tls_config(b"", Some(identity))?;
        }
        Ok(Transports {
            resolver,
            clients: Mutex::new(Clients {
                identity,
                by_key: HashMap::new(),
            }),
        })
    }

    /// Presents `identity` from now on, if it differs from the one presented: the clients made
    /// so far are dropped, so that new connections present the new certificate, while
    /// connections in use (a watch, say) finish with the one they started with. A pair that
    /// does not make a TLS client (unreadable, or a key that is not the certificate's) is
    /// refused and the one in use kept. `Ok(true)` when it changed.
    pub(crate) fn replace_identity(&self, identity: (Vec<u8>, Vec<u8>)) -> Result<bool, String> {
        apiserver::util::webhook::tls_config(b"", Some(&identity))?;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.identity.as_ref() == Some(&identity) {
            return Ok(false);
        }
        clients.identity = Some(identity);
        clients.by_key.clear();
        Ok(true)
    }

    fn client(&self, apiservice: &ApiService, upgrade: bool) -> Result<Client, String> {
        let key = (
            apiservice.ca_bundle.clone(),
            apiservice.insecure_skip_tls_verify,
            upgrade,
        );
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.by_key.get(&key) {
            return Ok(c.clone());
        }
        let identity = clients.identity.as_ref();
        let tls = if apiservice.insecure_skip_tls_verify {
            insecure_tls_config(identity)?
        } else {
            apiserver::util::webhook::tls_config(&apiservice.ca_bundle, identity)?
        };
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only();
        // The Service's name is dialled at the ready endpoint the resolver picks from its
        // EndpointSlices (nothing routes cluster IPs here).
        let dialer = Dialer::new(Some(self.resolver.clone()));
        // ALPN offers `h2` and `http/1.1` (the server picks), or only `http/1.1` for upgrades.
        let connector = if upgrade {
            builder.enable_http1().wrap_connector(dialer)
        } else {
            builder.enable_all_versions().wrap_connector(dialer)
        };
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .build(connector);
        clients.by_key.insert(key, client.clone());
        Ok(client)
    }

    /// Sends `req` to the extension server as `user` and streams its answer back; a failure to
    /// reach it is a 503 with the reason, as upstream's proxy responder answers. The caller has
    /// checked that the Service has an endpoint.
    pub(crate) async fn forward(
        &self,
        apiservice: &ApiService,
        req: http::Request<RequestBody>,
        info: &RequestInfo,
        user: &UserInfo,
    ) -> Response {
        let Some(service) = &apiservice.service else {
            return crate::refuse(&req, info, http::StatusCode::NOT_FOUND, "");
        };
        let client = match self.client(apiservice, upgrade_protocol(req.headers()).is_some()) {
            Ok(c) => c,
            Err(e) => {
                return crate::refuse(&req, info, http::StatusCode::INTERNAL_SERVER_ERROR, &e);
            }
        };
        let (mut parts, body) = req.into_parts();
        // A connection upgrade (exec, attach, port-forward of an extension's resources) is passed
        // through: the Upgrade headers travel, and after the extension server's 101 the two
        // connections are joined byte for byte.
        let upgrade = upgrade_protocol(&parts.headers);
        let client_upgrade = upgrade
            .as_ref()
            .and_then(|_| parts.extensions.remove::<hyper::upgrade::OnUpgrade>());
        let path_and_query = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let uri =
            match format!("https://{}{path_and_query}", authority(service)).parse::<http::Uri>() {
                Ok(u) => u,
                Err(e) => return error_text(http::StatusCode::BAD_REQUEST, &e.to_string()),
            };
        let mut out = http::Request::builder()
            .method(parts.method)
            .uri(uri)
            .body(body)
            .unwrap_or_else(|_| http::Request::new(empty_body()));
        *out.headers_mut() = forwarded_headers(&parts.headers, user);
        if let Some(protocol) = &upgrade {
            out.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("Upgrade"),
            );
            out.headers_mut()
                .insert(http::header::UPGRADE, protocol.clone());
        }
        let mut response = match client.request(out).await {
            Ok(r) => r,
            Err(e) => {
                let reason = error_reason(&e);
                tracing::warn!(apiservice = %apiservice.name, error = %reason, "proxying to an aggregated API failed");
                return error_text(http::StatusCode::SERVICE_UNAVAILABLE, &reason);
            }
        };
        if response.status() == http::StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_upgrade) = client_upgrade
        {
            let backend_upgrade = hyper::upgrade::on(&mut response);
            tokio::spawn(async move {
                match tokio::try_join!(client_upgrade, backend_upgrade) {
                    Ok((client, backend)) => {
                        let mut client = hyper_util::rt::TokioIo::new(client);
                        let mut backend = hyper_util::rt::TokioIo::new(backend);
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "an upgraded connection was not joined"),
                }
            });
            let (mut parts, _) = response.into_parts();
            let protocol = parts.headers.get(http::header::UPGRADE).cloned();
            remove_hop_by_hop(&mut parts.headers);
            parts.headers.insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("Upgrade"),
            );
            if let Some(p) = protocol {
                parts.headers.insert(http::header::UPGRADE, p);
            }
            return http::Response::from_parts(parts, apiserver::endpoints::response::empty());
        }
        let (mut parts, body) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        http::Response::from_parts(
            parts,
            apiserver::endpoints::response::Body::stream(Relay(body)),
        )
    }

    /// A GET of the extension server's own (discovery, OpenAPI), as upstream's aggregator makes
    /// it: as `system:kube-aggregator` in `system:masters`, within 5 s. Returns the answer's
    /// body, or why there is none, in upstream's words.
    pub(crate) async fn get(&self, apiservice: &ApiService, path: &str) -> Result<Bytes, String> {
        let user = UserInfo {
            name: "system:kube-aggregator".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let url = self.url(apiservice, path).await?;
        let (status, _, body) = self
            .request(apiservice, path, &http::HeaderMap::new(), &user)
            .await?;
        if !status.is_success() {
            return Err(format!(
                "failing or missing response from {url}: bad status from {url}: {}",
                status.as_u16()
            ));
        }
        Ok(body)
    }

    /// Where a request for `path` goes, as upstream's messages name it.
    async fn url(&self, apiservice: &ApiService, path: &str) -> Result<String, String> {
        let Some(service) = &apiservice.service else {
            return Err("not a remote APIService".into());
        };
        let (host, port) = self.resolver.resolve(&reference(service)).await?;
        Ok(if host.contains(':') {
            format!("https://[{host}]:{port}{path}")
        } else {
            format!("https://{host}:{port}{path}")
        })
    }

    /// A GET of `path` with `headers`, as `user`, within 5 s: the answer's status, headers and
    /// body, whatever the status; or why there is none, in upstream's words.
    pub(crate) async fn request(
        &self,
        apiservice: &ApiService,
        path: &str,
        headers: &http::HeaderMap,
        user: &UserInfo,
    ) -> Result<(http::StatusCode, http::HeaderMap, Bytes), String> {
        let Some(service) = &apiservice.service else {
            return Err("not a remote APIService".into());
        };
        let url = self.url(apiservice, path).await?;
        let client = self.client(apiservice, false)?;
        let mut req = http::Request::builder()
            .method(http::Method::GET)
            .uri(format!("https://{}{path}", authority(service)))
            .body(empty_body())
            .map_err(|e| e.to_string())?;
        *req.headers_mut() = forwarded_headers(headers, user);
        let exchange = async {
            let response = client
                .request(req)
                .await
                .map_err(|e| format!("Get {url:?}: {}", error_reason(&e)))?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("Get {url:?}: {e}"))?
                .to_bytes();
            Ok::<_, String>((parts.status, parts.headers, body))
        };
        match tokio::time::timeout(Duration::from_secs(5), exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(format!("failing or missing response from {url}: {e}")),
            Err(_) => Err(format!("timed out waiting for {url}")),
        }
    }
}

/// The protocol an HTTP/1.1 request asks to switch to (`Connection: Upgrade` with `Upgrade`).
fn upgrade_protocol(headers: &http::HeaderMap) -> Option<http::HeaderValue> {
    let asks = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| headers.get(http::header::UPGRADE).cloned())
        .flatten()
}

fn reference(service: &ServiceRef) -> ServiceReference {
    ServiceReference {
        namespace: service.namespace.clone(),
        name: service.name.clone(),
        path: String::new(),
        port: service.port,
    }
}

/// The Service's name as TLS checks it and the dialer resolves it.
fn authority(service: &ServiceRef) -> String {
    format!(
        "{}.{}.svc:{}",
        service.name, service.namespace, service.port
    )
}

fn empty_body() -> RequestBody {
    http_body_util::Empty::<Bytes>::new()
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

/// A plain-text error as Go's `http.Error` writes it.
pub(crate) fn error_text(code: http::StatusCode, message: &str) -> Response {
    let mut r = apiserver::endpoints::response::raw(
        code,
        "text/plain; charset=utf-8",
        format!("{message}\n"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        http::HeaderValue::from_static("nosniff"),
    );
    r
}

fn remove_hop_by_hop(headers: &mut http::HeaderMap) {
    // Headers a `Connection` header names are hop-by-hop too.
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    for h in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(h);
    }
}

/// The request headers the extension server gets: the client's, less what is hop-by-hop, the
/// host (the target's own is sent), the client's credentials and impersonation (this server
/// has used them), and any `X-Remote-*` a client sent; then the user (client-go's
/// `SetAuthProxyHeaders`; the uid too, as the `RemoteRequestHeaderUID` gate on by default in
/// v1.36 sends it).
fn forwarded_headers(incoming: &http::HeaderMap, user: &UserInfo) -> http::HeaderMap {
    let mut headers = incoming.clone();
    remove_hop_by_hop(&mut headers);
    headers.remove(http::header::HOST);
    headers.remove(http::header::AUTHORIZATION);
    let dropped: Vec<http::HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k.starts_with("impersonate-")
                || k == "x-remote-user"
                || k == "x-remote-uid"
                || k == "x-remote-group"
                || k.starts_with("x-remote-extra-")
        })
        .cloned()
        .collect();
    for k in dropped {
        headers.remove(&k);
    }
    let mut add = |name: String, value: &str| {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::try_from(name),
            http::HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    };
    add("X-Remote-User".into(), &user.name);
    if !user.uid.is_empty() {
        add("X-Remote-Uid".into(), &user.uid);
    }
    for group in &user.groups {
        add("X-Remote-Group".into(), group);
    }
    for (key, values) in &user.extra {
        for value in values {
            add(format!("X-Remote-Extra-{}", header_key_escape(key)), value);
        }
    }
    headers
}

/// An extra's key as a header name: bytes that are not HTTP token characters, and `%`, are
/// percent-encoded (client-go's `headerKeyEscape`; the request-header authenticator decodes
/// them).
fn header_key_escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let token = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if token {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a request to an extension server failed: the innermost error that says something (a
/// refused dial, a failed handshake), not the client's generic wrapper.
fn error_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() {
            reason = text;
        }
        cause = c.source();
    }
    reason
}

/// The extension server's answer, frame by frame. A failure mid-stream (the extension server
/// went away during a watch) ends the answer, as a closed upstream connection ends Go's copy.
struct Relay(hyper::body::Incoming);

impl Body for Relay {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match Pin::new(&mut self.0).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(e))) => {
                tracing::debug!(error = %e, "an aggregated API's answer ended early");
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// TLS that checks nothing of the server (`insecureSkipTLSVerify`), still presenting the proxy
/// client certificate.
fn insecure_tls_config(
    identity: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerification(provider)));
    match identity {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain: Vec<_> = rustls_pemfile_certs(cert)?;
            use rustls::pki_types::pem::PemObject;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("reading the proxy client key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("tls: {e}"))
        }
    }
}

fn rustls_pemfile_certs(
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading the proxy client certificate: {e}"))
}

#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_replaces_the_callers_credentials_and_forged_identity() {
        let mut incoming = http::HeaderMap::new();
        incoming.insert("authorization", "Bearer secret".parse().unwrap());
        incoming.insert("x-remote-user", "forged".parse().unwrap());
        incoming.insert("x-remote-extra-scopes", "forged".parse().unwrap());
        incoming.insert("impersonate-user", "someone".parse().unwrap());
        incoming.insert("connection", "keep-alive, x-private".parse().unwrap());
        incoming.insert("x-private", "hop".parse().unwrap());
        incoming.insert("accept", "application/json".parse().unwrap());
        incoming.insert("host", "ironplane:6443".parse().unwrap());
        let user = UserInfo {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: [(
                "example.org/team name".to_string(),
                vec!["a".to_string(), "b".to_string()],
            )]
            .into_iter()
            .collect(),
        };
        let out = forwarded_headers(&incoming, &user);
        assert_eq!(out.get("x-remote-user").unwrap(), "alice");
        assert_eq!(out.get("x-remote-uid").unwrap(), "u-1");
        let groups: Vec<_> = out.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["devs", "system:authenticated"]);
        let extra: Vec<_> = out
            .get_all("x-remote-extra-example.org%2Fteam%20name")
            .iter()
            .collect();
        assert_eq!(extra, ["a", "b"]);
        for gone in [
            "authorization",
            "impersonate-user",
            "x-remote-extra-scopes",
            "connection",
            "x-private",
            "host",
        ] {
            assert!(out.get(gone).is_none(), "{gone} forwarded");
        }
        assert_eq!(out.get("accept").unwrap(), "application/json");
    }

    #[test]
    fn extra_keys_are_escaped_as_client_go_escapes_them() {
        assert_eq!(header_key_escape("scopes"), "scopes");
        assert_eq!(header_key_escape("a/b%c"), "a%2Fb%25c");
    }
}
