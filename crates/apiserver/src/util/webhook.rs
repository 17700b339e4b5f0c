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
#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceReference>,
    /// PEM certificates; empty trusts the system's roots, as upstream's client does.
    pub ca_bundle: Vec<u8>,
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
        }
    }
}

/// Turns a Service port into an address to dial (upstream's `ServiceResolver`).
#[async_trait::async_trait]
pub trait ServiceResolver: Send + Sync {
    async fn resolve(&self, service: &ServiceReference) -> Result<(String, u16), String>;
}

/// Where a request goes: the address dialled, the TLS server name, the request target, and the
/// URL as upstream's client prints it in errors.
struct Target {
    dial: (String, u16),
    server_name: String,
    path_and_query: String,
    shown: String,
}

async fn target(
    config: &ClientConfig,
    resolver: Option<&dyn ServiceResolver>,
    timeout: std::time::Duration,
) -> Result<Target, String> {
    let query = format!("timeout={}s", timeout.as_secs());
    if let Some(url) = &config.url {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
        let host = uri.host().unwrap_or("").to_string();
        let port = uri.port_u16().unwrap_or(443);
        let path = match uri.path() {
            "" => "/",
            p => p,
        };
        let path_and_query = format!("{path}?{query}");
        let shown_host = uri.authority().map(|a| a.as_str()).unwrap_or("");
        return Ok(Target {
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            dial: (host, port),
            shown: format!("https://{shown_host}{path_and_query}"),
            path_and_query,
        });
    }
    let Some(service) = &config.service else {
        return Err("webhook has neither a url nor a service".into());
    };
    let resolver = resolver.ok_or("no resolver for webhook services")?;
    let server_name = format!("{}.{}.svc", service.name, service.namespace);
    let path = if service.path.is_empty() {
        "/"
    } else {
        &service.path
    };
    let path_and_query = format!("{path}?{query}");
    let shown = format!("https://{server_name}:{}{path_and_query}", service.port);
    let dial = resolver
        .resolve(service)
        .await
        .map_err(|e| format!("Post {}: {e}", go_quote(&shown)))?;
    Ok(Target {
        dial,
        server_name,
        path_and_query,
        shown,
    })
}

/// The TLS configuration for a webhook: its `caBundle`, or without one the system's trusted
/// roots, as Go's TLS client uses them when a REST config has no CA data.
fn tls_config(ca_bundle: &[u8]) -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    if ca_bundle.is_empty() {
        roots = system_roots().clone();
    }
    let mut reader = ca_bundle;
    for cert in rustls_pemfile::certs(&mut reader).flatten() {
        roots.add(cert).map_err(|e| format!("x509: {e}"))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(std::sync::Arc::new(config))
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

/// Go's wording for a failed dial.
fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        _ => format!("dial tcp {addr}: {e}"),
    }
}

/// POSTs `body` as JSON to a webhook over TLS and returns the decoded answer. The error is the
/// text upstream's REST client gives (`Post "<url>": <why>`, or the server's answer), which
/// callers wrap in their own message.
pub async fn post_json(
    config: &ClientConfig,
    resolver: Option<&dyn ServiceResolver>,
    body: &Value,
    timeout: std::time::Duration,
) -> Result<Value, String> {
    use http_body_util::{BodyExt, Full};
    let target = target(config, resolver, timeout).await?;
    let shown = go_quote(&target.shown);
    let fail = |why: String| format!("Post {shown}: {why}");
    let call = async {
        let (host, port) = &target.dial;
        let addr = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let tcp = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| fail(dial_error(&addr, &e)))?;
        let name = rustls::pki_types::ServerName::try_from(target.server_name.clone())
            .map_err(|e| fail(e.to_string()))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config(&config.ca_bundle).map_err(fail)?)
            .connect(name, tcp)
            .await
            .map_err(|e| fail(format!("tls: failed to verify certificate: {e}")))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| fail(e.to_string()))?;
        tokio::spawn(conn);
        let bytes = serde_json::to_vec(body).map_err(|e| fail(e.to_string()))?;
        let request = http::Request::post(&target.path_and_query)
            .header(http::header::HOST, &target.server_name)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(bytes::Bytes::from(bytes)))
            .map_err(|e| fail(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| fail(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            return Err(format!(
                "the server responded with the status code {} but did not return more information{}",
                status.as_u16(),
                if text.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", text.trim())
                }
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("invalid webhook response: {e}"))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(fail(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        )),
    }
}
