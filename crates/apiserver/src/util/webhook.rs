//! What a webhook's client configuration may say (upstream: k8s.io/apiserver
//! pkg/util/webhook/validation.go): admission webhook configurations and CRD conversion webhooks
//! check their `url` and `service` with these rules.

use apimachinery::validation::{FieldError, FieldPath, is_dns1123_subdomain, is_valid_port_num};
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
