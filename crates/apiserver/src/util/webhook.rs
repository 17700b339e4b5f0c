//! What a webhook's client configuration may say (upstream: k8s.io/apiserver
//! pkg/util/webhook/validation.go): admission webhook configurations and CRD conversion webhooks
//! check their `url` and `service` with these rules.

use apimachinery::validation::{
    FieldError, FieldPath, go_quote, is_dns1123_subdomain, is_valid_port_num,
};
use serde_json::Value;

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The parts of a URL upstream's webhook check looks at, split as Go's `url.Parse` splits them.
struct UrlParts<'a> {
    scheme: String,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

/// Whether Go's URL parser refuses `c` in a host name (`shouldEscape` in host mode: ASCII other
/// than letters, digits, `-._~`, sub-delimiters, `:[]<>"` and `%`).
fn bad_host_byte(c: u8) -> bool {
    c < 0x80 && !c.is_ascii_alphanumeric() && !b"-._~!$&'()*+,;=:[]<>\"%".contains(&c)
}

/// Go's `url.Parse`, as far as the webhook check needs it: the parts, or the parse error
/// (`parse "<url>": <why>`) for the mistakes clients make (control characters, a missing
/// scheme, a colon in a schemeless first segment, a bad character in the host, a bad port,
/// a bad percent escape).
fn parse_url(url: &str) -> Result<UrlParts<'_>, String> {
    let fail = |why: String| {
        Err(format!(
            "parse {}: {why}",
            apimachinery::validation::go_quote(url)
        ))
    };
    if url.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return fail("net/url: invalid control character in URL".into());
    }
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    // `getScheme`: letters first, then letters, digits, `+-.`; a leading colon is an error.
    let mut scheme = "";
    let mut after_scheme = rest;
    for (i, c) in rest.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if i > 0 && (c.is_ascii_digit() || matches!(c, '+' | '-' | '.')) {
            continue;
        }
        if c == ':' {
            if i == 0 {
                return fail("missing protocol scheme".into());
            }
            scheme = &rest[..i];
            after_scheme = &rest[i + 1..];
        }
        break;
    }
    let (rest, query) = after_scheme.split_once('?').unwrap_or((after_scheme, ""));
    if scheme.is_empty() && !rest.starts_with('/') {
        let first = rest.split('/').next().unwrap_or("");
        if first.contains(':') {
            return fail("first path segment in URL cannot contain colon".into());
        }
    }
    let (user, host, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            match authority.rsplit_once('@') {
                Some((u, h)) => (Some(u), h, path),
                None => (None, authority, path),
            }
        }
        None => (None, "", rest),
    };
    if !host.starts_with('[') {
        if let Some(i) = host.rfind(':') {
            let port = &host[i..];
            if !port[1..].bytes().all(|b| b.is_ascii_digit()) {
                return fail(format!(
                    "invalid port {} after host",
                    apimachinery::validation::go_quote(port)
                ));
            }
        }
        if let Some(c) = host.bytes().find(|b| bad_host_byte(*b)) {
            return fail(format!(
                "invalid character {} in host name",
                apimachinery::validation::go_quote(&(c as char).to_string())
            ));
        }
    }
    // Percent escapes must be complete in the host, the path and the fragment.
    for part in [host, path, fragment] {
        let b = part.as_bytes();
        for (i, _) in b.iter().enumerate().filter(|(_, c)| **c == b'%') {
            let escape = b.get(i + 1..i + 3);
            if !escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
                let shown = part.get(i..(i + 3).min(part.len())).unwrap_or("%");
                return fail(format!(
                    "invalid URL escape {}",
                    apimachinery::validation::go_quote(shown)
                ));
            }
        }
    }
    Ok(UrlParts {
        scheme: scheme.to_ascii_lowercase(),
        user,
        host,
        query,
        fragment,
    })
}

/// `webhook.ValidateWebhookURL` with https required.
pub fn validate_webhook_url(url: &str, path: &FieldPath) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = match parse_url(url) {
        Ok(u) => u,
        Err(why) => {
            return vec![FieldError::required(
                path,
                format!("url must be a valid URL: {why}{FORM}"),
            )];
        }
    };
    let mut errs = Vec::new();
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            u.scheme.as_str(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.host,
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// `webhook.ValidateWebhookService`: name, namespace, port, and a path of DNS-1123 segments.
pub fn validate_webhook_service(service: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(service, "name").is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    if text(service, "namespace").is_empty() {
        errs.push(FieldError::required(&path.child("namespace"), ""));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(0);
    let port_errs = is_valid_port_num(port);
    if !port_errs.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("port"),
            port,
            format!("port is not valid: {}", port_errs.join(", ")),
        ));
    }
    if service.get("path").is_none_or(Value::is_null) {
        return errs;
    }
    let url_path = text(service, "path");
    if url_path.is_empty() || url_path == "/" {
        return errs;
    }
    let p = path.child("path");
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &p,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(&p, url_path, "must start with a '/'"));
    }
    // Upstream drops the first byte whatever it is, and one trailing slash.
    let rest = url_path.get(1..).unwrap_or("");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &p,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &p,
                url_path,
                format!("segment[{i}]: {m}"),
            ));
        }
    }
    errs
}

// The client (upstream: pkg/util/webhook ClientManager and its REST client).

/// A Service a webhook runs behind (`clientConfig.service`).
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceReference {
    pub namespace: String,
    pub name: String,
    pub path: String,
    pub port: i32,
}

/// Where a webhook listens and which certificates may sign its serving certificate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceReference>,
    /// PEM certificates; empty trusts the system's roots, as upstream's client does.
    pub ca_bundle: Vec<u8>,
    /// The certificate chain and key (PEM) the server presents to the webhook, when its
    /// kubeconfig gives one (authentication and authorization webhooks).
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The bearer token sent to the webhook, when its kubeconfig gives one.
    pub bearer_token: Option<String>,
}

impl ClientConfig {
    /// A `WebhookClientConfig` as the API holds it (`url` or `service`, base64 `caBundle`).
    pub fn from_api(client_config: &Value) -> ClientConfig {
        use base64::Engine;
        let service = client_config
            .get("service")
            .filter(|s| s.is_object())
            .map(|s| ServiceReference {
                namespace: text(s, "namespace").to_string(),
                name: text(s, "name").to_string(),
                path: text(s, "path").to_string(),
                port: s.get("port").and_then(Value::as_i64).unwrap_or(443) as i32,
            });
        ClientConfig {
            url: client_config
                .get("url")
                .and_then(Value::as_str)
                .map(str::to_string),
            service,
            ca_bundle: base64::engine::general_purpose::STANDARD
                .decode(text(client_config, "caBundle"))
                .unwrap_or_default(),
            ..ClientConfig::default()
        }
    }
}

/// Turns a Service port into an address to dial (upstream's `ServiceResolver`).
#[async_trait::async_trait]
pub trait ServiceResolver: Send + Sync {
    async fn resolve(&self, service: &ServiceReference) -> Result<(String, u16), String>;
}

/// How a call failed: the time ran out (callers word it as their upstream client does), or
/// anything else, in the words of upstream's REST client (`Post "<url>": <why>`, or what the
/// server answered).
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    Timeout { url: String },
    Failed(String),
}

impl CallError {
    /// The text of a call that ran out of time under a context deadline (admission webhooks).
    pub fn context_text(&self) -> String {
        match self {
            CallError::Timeout { url } => {
                format!("Post {}: context deadline exceeded", go_quote(url))
            }
            CallError::Failed(s) => s.clone(),
        }
    }

    /// The text of a call that ran out of time under the HTTP client's own timeout (conversion
    /// webhooks).
    pub fn client_text(&self) -> String {
        match self {
            CallError::Timeout { url } => format!(
                "Post {}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                go_quote(url)
            ),
            CallError::Failed(s) => s.clone(),
        }
    }
}

/// The URL a call goes to (`url`, or `https://<service>.<namespace>.svc:<port><path>`, which
/// the dialer resolves through the `ServiceResolver`), with upstream's `?timeout=` parameter.
/// The path is cleaned as client-go's REST client cleans it (`path.Join("/", path)`), so that
/// `https://host//hook/` is called as `https://host/hook`.
fn target_url(config: &ClientConfig, timeout: std::time::Duration) -> Result<String, String> {
    let query = format!("timeout={}s", timeout.as_secs());
    if let Some(url) = &config.url {
        let sep = if url.contains('?') { '&' } else { '?' };
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
        let path = clean_path(uri.path());
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
        let query = match uri.query() {
            Some(q) => format!("{q}{sep}{query}"),
            None => query,
        };
        return Ok(format!("https://{authority}{path}?{query}"));
    }
    let Some(service) = &config.service else {
        return Err("webhook has neither a url nor a service".into());
    };
    let path = clean_path(&service.path);
    Ok(format!(
        "https://{}.{}.svc:{}{path}?{query}",
        service.name, service.namespace, service.port
    ))
}

/// Go's `path.Join("/", p)`: a rooted path without empty or `.` segments, `..` resolved (not
/// above the root), and no trailing slash.
fn clean_path(p: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in p.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
}

/// The TLS configuration for a webhook: its `caBundle`, or without one the system's trusted
/// roots, as Go's TLS client uses them when a REST config has no CA data.
pub fn tls_config(
    ca_bundle: &[u8],
    identity: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<rustls::ClientConfig, String> {
    let mut reader = ca_bundle;
    let bundle: Vec<_> = rustls_pemfile::certs(&mut reader).flatten().collect();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = if ca_bundle.is_empty() {
        builder.with_root_certificates(system_roots().clone())
    } else if bundle.is_empty() {
        // A bundle without a certificate trusts nothing.
        builder.with_root_certificates(rustls::RootCertStore::empty())
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(std::sync::Arc::new(BundleVerifier::new(
                bundle, provider,
            )?))
    };
    let config = match identity {
        None => config.with_no_client_auth(),
        Some((cert, key)) => {
            let chain: Vec<_> = rustls_pemfile::certs(&mut cert.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("reading the client certificate: {e}"))?;
            let key = rustls_pemfile::private_key(&mut key.as_slice())
                .map_err(|e| format!("reading the client key: {e}"))?
                .ok_or("the client key file holds no key")?;
            config
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("tls: {e}"))?
        }
    };
    // hyper-rustls sets ALPN itself (HTTP/1.1 only, as upstream's webhook client speaks).
    Ok(config)
}

/// Verifies a webhook's serving certificate against its `caBundle` as Go's `x509.Verify` does:
/// the serving certificate itself found in the bundle, or else a chain to one of the bundle's
/// certificates. The first is what controller-runtime's envtest relies on: its `caBundle` is
/// the webhook's serving certificate, not the CA that signed it, which webpki alone refuses (an
/// unknown issuer). A certificate taken from the bundle is still checked for its validity
/// period, the server's name and the serverAuth usage, as Go checks them.
#[derive(Debug)]
struct BundleVerifier {
    chains: std::sync::Arc<rustls::client::WebPkiServerVerifier>,
    bundle: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl BundleVerifier {
    fn new(
        bundle: Vec<rustls::pki_types::CertificateDer<'static>>,
        provider: std::sync::Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<BundleVerifier, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &bundle {
            roots.add(cert.clone()).map_err(|e| format!("x509: {e}"))?;
        }
        let chains = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider,
        )
        .build()
        .map_err(|e| format!("x509: {e}"))?;
        Ok(BundleVerifier { chains, bundle })
    }

    /// Go's checks of a serving certificate that is itself a root.
    fn check_pinned(
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        server_name: &rustls::pki_types::ServerName<'_>,
        now: rustls::pki_types::UnixTime,
    ) -> Result<(), rustls::Error> {
        use rustls::{CertificateError, Error};
        let (_, cert) = x509_parser::parse_x509_certificate(end_entity)
            .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let validity = cert.validity();
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if now < validity.not_before.timestamp() {
            return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
        }
        if now > validity.not_after.timestamp() {
            return Err(Error::InvalidCertificate(CertificateError::Expired));
        }
        if let Ok(Some(eku)) = cert.extended_key_usage() {
            let eku = &eku.value;
            if !(eku.any || eku.server_auth) {
                return Err(Error::InvalidCertificate(CertificateError::InvalidPurpose));
            }
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)
    }
}

impl rustls::client::danger::ServerCertVerifier for BundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // As Go's `Verify`: a serving certificate found in the roots is its own chain.
        if self
            .bundle
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Self::check_pinned(end_entity, server_name, now)
                .map(|()| rustls::client::danger::ServerCertVerified::assertion());
        }
        self.chains
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chains.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chains.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.chains.supported_verify_schemes()
    }
}

/// The system's trusted certificates, read once (certificates it cannot parse are skipped, as
/// Go's `SystemCertPool` skips them).
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: std::sync::OnceLock<rustls::RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        roots
    })
}

/// A dial that failed, worded as Go's net package words it; found again in the client's error
/// chain to build the message.
#[derive(Debug)]
pub struct DialError(String);

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DialError {}

/// Go's wording for a failed dial.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        _ => format!("dial tcp {addr}: {e}"),
    }
}

/// The TCP half of the connector: a `<name>.<namespace>.svc` host is a Service, dialled at the
/// endpoint the resolver picks (nothing routes cluster IPs here); any other host is dialled as
/// it is. TLS is layered on top by `hyper-rustls`, with the URL's host as the server name. The
/// webhook clients and the aggregator's proxy to extension servers dial with it.
#[derive(Clone)]
pub struct Dialer {
    resolver: Option<std::sync::Arc<dyn ServiceResolver>>,
}

impl Dialer {
    pub fn new(resolver: Option<std::sync::Arc<dyn ServiceResolver>>) -> Dialer {
        Dialer { resolver }
    }
}

impl tower::Service<http::Uri> for Dialer {
    type Response = hyper_util::rt::TokioIo<tokio::net::TcpStream>;
    type Error = DialError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, DialError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), DialError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let resolver = self.resolver.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or("").to_string();
            let port = uri.port_u16().unwrap_or(443);
            let service = host
                .strip_suffix(".svc")
                .and_then(|h| h.split_once('.'))
                .filter(|(_, ns)| !ns.contains('.'));
            let (host, port) = match (service, &resolver) {
                (Some((name, namespace)), Some(resolver)) => resolver
                    .resolve(&ServiceReference {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        path: String::new(),
                        port: port as i32,
                    })
                    .await
                    .map_err(DialError)?,
                _ => (
                    host.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_string(),
                    port,
                ),
            };
            let addr = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let tcp = tokio::net::TcpStream::connect(&addr)
                .await
                .map_err(|e| DialError(dial_error(&addr, &e)))?;
            let _ = tcp.set_nodelay(true);
            Ok(hyper_util::rt::TokioIo::new(tcp))
        })
    }
}

type PooledClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<Dialer>,
    http_body_util::Full<bytes::Bytes>,
>;

/// The certificates a client trusts and the identity it presents.
type TlsKey = (Vec<u8>, Option<(Vec<u8>, Vec<u8>)>);

/// A pooled client and the resolver its dialer holds, keyed by TLS settings and resolver.
type PoolEntries = std::collections::HashMap<
    (TlsKey, usize),
    (PooledClient, Option<std::sync::Arc<dyn ServiceResolver>>),
>;

/// Keep-alive clients, one per trust configuration and resolver, shared by every call (upstream's
/// `ClientManager` caches its REST clients the same way).
#[derive(Default)]
struct Pool {
    clients: std::sync::Mutex<PoolEntries>,
}

impl Pool {
    fn client(
        &self,
        config: &ClientConfig,
        resolver: Option<&std::sync::Arc<dyn ServiceResolver>>,
    ) -> Result<PooledClient, String> {
        // The resolver's address tells resolvers apart; the entry holds the resolver, so the
        // address cannot be reused while the entry lives.
        let id = resolver
            .map(|r| std::sync::Arc::as_ptr(r) as *const () as usize)
            .unwrap_or(0);
        let key = (
            (config.ca_bundle.clone(), config.client_identity.clone()),
            id,
        );
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, _)) = clients.get(&key) {
            return Ok(c.clone());
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(
                &config.ca_bundle,
                config.client_identity.as_ref(),
            )?)
            .https_only()
            .enable_http1()
            .wrap_connector(Dialer {
                resolver: resolver.cloned(),
            });
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(std::time::Duration::from_secs(90))
                .build(connector);
        clients.insert(key, (client.clone(), resolver.cloned()));
        Ok(client)
    }
}

fn pool() -> &'static Pool {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// The words of a failed request: the dial error if the dial failed, the TLS error if the
/// handshake did, else the client's own.
fn request_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut last = e.to_string();
    while let Some(c) = cause {
        if let Some(d) = c.downcast_ref::<DialError>() {
            return d.0.clone();
        }
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return format!("tls: failed to verify certificate: {tls}");
        }
        // The handshake's error comes wrapped in I/O errors (tokio-rustls's, then
        // hyper-rustls's), whose `source` skips the wrapped error itself.
        let mut io = c.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(std::io::Error::get_ref) {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return format!("tls: failed to verify certificate: {tls}");
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        last = c.to_string();
        cause = c.source();
    }
    last
}

/// Sends `request` on a pooled client and reads the whole answer: its status and body, or why
/// it could not (in the words `request_error` gives).
async fn exchange(
    client: &PooledClient,
    request: http::Request<http_body_util::Full<bytes::Bytes>>,
) -> Result<(http::StatusCode, bytes::Bytes), String> {
    use http_body_util::BodyExt;
    let response = client
        .request(request)
        .await
        .map_err(|e| request_error(&e))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

/// POSTs `body` as JSON to a webhook over TLS, on a pooled keep-alive connection, and returns
/// the decoded answer.
pub async fn post_json(
    config: &ClientConfig,
    resolver: Option<&std::sync::Arc<dyn ServiceResolver>>,
    body: &Value,
    timeout: std::time::Duration,
) -> Result<Value, CallError> {
    use http_body_util::Full;
    let url = target_url(config, timeout).map_err(CallError::Failed)?;
    let fail = |why: String| CallError::Failed(format!("Post {}: {why}", go_quote(&url)));
    if config.service.is_some() && resolver.is_none() {
        return Err(fail("no resolver for webhook services".into()));
    }
    let client = pool().client(config, resolver).map_err(fail)?;
    let call = async {
        let bytes = serde_json::to_vec(body).map_err(|e| fail(e.to_string()))?;
        let mut request = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*");
        if let Some(token) = &config.bearer_token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(bytes::Bytes::from(bytes)))
            .map_err(|e| fail(e.to_string()))?;
        let (status, body) = exchange(&client, request).await.map_err(fail)?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            return Err(CallError::Failed(format!(
                "the server responded with the status code {} but did not return more information{}",
                status.as_u16(),
                if text.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", text.trim())
                }
            )));
        }
        serde_json::from_slice(&body)
            .map_err(|e| CallError::Failed(format!("invalid webhook response: {e}")))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(CallError::Timeout { url }),
    }
}

/// GETs a JSON document over TLS trusting `ca_bundle` (the system's roots when empty), on a
/// pooled connection: an OIDC issuer's discovery document and keys. The error is in the words
/// of Go's HTTP client.
pub async fn get_json(
    url: &str,
    ca_bundle: &[u8],
    timeout: std::time::Duration,
) -> Result<Value, String> {
    use http_body_util::Full;
    let fail = |why: String| format!("Get {}: {why}", go_quote(url));
    let config = ClientConfig {
        ca_bundle: ca_bundle.to_vec(),
        ..ClientConfig::default()
    };
    let client = pool().client(&config, None).map_err(fail)?;
    let call = async {
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(bytes::Bytes::new()))
            .map_err(|e| fail(e.to_string()))?;
        let (status, body) = exchange(&client, request).await.map_err(fail)?;
        if !status.is_success() {
            return Err(format!(
                "{} {}: {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                String::from_utf8_lossy(&body).trim()
            ));
        }
        serde_json::from_slice(&body).map_err(|e| {
            format!("got Content-Type = application/json, but could not unmarshal as JSON: {e}")
        })
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(fail(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        )),
    }
}

/// GETs `url` over TLS trusting `ca_bundle` (the system's roots when empty), with `bearer` as
/// the bearer token when given, and answers the status and body as they came: an OIDC
/// distributed claim's JWT. The error is in the words of Go's HTTP client.
pub async fn get_with_bearer(
    url: &str,
    ca_bundle: &[u8],
    bearer: Option<&str>,
    timeout: std::time::Duration,
) -> Result<(http::StatusCode, bytes::Bytes), String> {
    use http_body_util::Full;
    let fail = |why: String| format!("Get {}: {why}", go_quote(url));
    let config = ClientConfig {
        ca_bundle: ca_bundle.to_vec(),
        ..ClientConfig::default()
    };
    let client = pool().client(&config, None).map_err(fail)?;
    let call = async {
        let mut request = http::Request::get(url);
        if let Some(token) = bearer {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(bytes::Bytes::new()))
            .map_err(|e| fail(e.to_string()))?;
        exchange(&client, request).await.map_err(fail)
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(fail(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    /// A serving certificate for 127.0.0.1 signed by a CA, as envtest's tiny CA makes them
    /// (PEM and DER), and another one signed by another CA.
    fn certs() -> (String, CertificateDer<'static>, CertificateDer<'static>) {
        let serving_from_a_new_ca = || {
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca.distinguished_name = rcgen::DistinguishedName::new();
            ca.distinguished_name
                .push(rcgen::DnType::CommonName, "envtest-environment");
            let issuer = rcgen::Issuer::new(ca, rcgen::KeyPair::generate().unwrap());
            let mut p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
            p.distinguished_name = rcgen::DistinguishedName::new();
            p.distinguished_name
                .push(rcgen::DnType::CommonName, "localhost");
            p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
            p.signed_by(&rcgen::KeyPair::generate().unwrap(), &issuer)
                .unwrap()
        };
        let serving = serving_from_a_new_ca();
        let other = serving_from_a_new_ca();
        (serving.pem(), serving.der().clone(), other.der().clone())
    }

    fn verify(bundle_pem: &str, cert: &CertificateDer<'_>, name: &str) -> Result<(), String> {
        let bundle = rustls_pemfile::certs(&mut bundle_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier = BundleVerifier::new(bundle, provider)?;
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier
            .verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_path_is_cleaned_as_client_go_cleans_it() {
        let url = |u: &str| {
            let config = ClientConfig {
                url: Some(u.to_string()),
                ..Default::default()
            };
            target_url(&config, std::time::Duration::from_secs(10)).unwrap()
        };
        // controller-runtime's envtest joins host and path with a slash of its own.
        assert_eq!(
            url("https://127.0.0.1:9443//failing"),
            "https://127.0.0.1:9443/failing?timeout=10s"
        );
        assert_eq!(url("https://h/validate/"), "https://h/validate?timeout=10s");
        assert_eq!(url("https://h"), "https://h/?timeout=10s");
        assert_eq!(url("https://h/a/./b/../c"), "https://h/a/c?timeout=10s");
        assert_eq!(url("https://h/../x"), "https://h/x?timeout=10s");
    }

    #[test]
    fn a_serving_certificate_in_the_bundle_is_trusted_as_go_trusts_it() {
        // envtest's caBundle is the webhook's serving certificate itself.
        let (serving_pem, serving, other) = certs();
        verify(&serving_pem, &serving, "127.0.0.1").expect("the pinned certificate");
        // Still only for its own names, and only itself.
        assert!(verify(&serving_pem, &serving, "127.0.0.2").is_err());
        let err = verify(&serving_pem, &other, "127.0.0.1").unwrap_err();
        assert!(err.contains("UnknownIssuer"), "{err}");
    }
}
