//! `/openapi/v2` as kube-openapi's handler serves it (pkg/handler/handler.go): JSON or gnostic's
//! protobuf by the `Accept` header, an `ETag` (the SHA-512 of the JSON document, for both forms),
//! `Last-Modified`, conditional requests (`http.ServeContent`), and gzip for clients that accept
//! it (NYTimes/gziphandler around the handler).
//!
//! Everything derived from the document is computed on the first request that needs it and kept:
//! the ETag on the first request, the protobuf bytes on the first protobuf request, their gzip
//! on the first protobuf request that accepts gzip. Until then the server holds only the
//! compressed JSON it was built with. The JSON itself is served from those compressed bytes to
//! gzip clients, and inflated per request for the others (as before).

use std::sync::OnceLock;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::GzDoc;
use crate::endpoints::response::{Response, empty, full};

const JSON: &str = "application/json";
/// Both protobuf subtypes are answered with the current media type.
const PROTOBUF_SUBTYPES: [&str; 2] = [
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Protobuf,
}

/// The document's derived forms, filled on demand.
#[derive(Default)]
pub(super) struct V2Cache {
    meta: OnceLock<Result<Meta, String>>,
    protobuf: OnceLock<Result<Bytes, String>>,
    protobuf_gz: OnceLock<Bytes>,
}

struct Meta {
    /// Quoted, as upstream sends it.
    etag: String,
    /// When the cache was filled: upstream's `lastModified` is when its JSON was computed.
    modified: SystemTime,
}

impl V2Cache {
    fn meta(&self, doc: &GzDoc) -> Result<&Meta, &str> {
        self.meta
            .get_or_init(|| {
                let json = doc.inflate().map_err(|e| e.to_string())?;
                let sum = ring::digest::digest(&ring::digest::SHA512, &json);
                let hex: String = sum.as_ref().iter().map(|b| format!("{b:02X}")).collect();
                Ok(Meta {
                    etag: format!("\"{hex}\""),
                    modified: SystemTime::now(),
                })
            })
            .as_ref()
            .map_err(String::as_str)
    }

    fn protobuf(&self, doc: &GzDoc) -> Result<&Bytes, &str> {
        self.protobuf
            .get_or_init(|| {
                let started = std::time::Instant::now();
                let json = doc.inflate().map_err(|e| e.to_string())?;
                let bytes = ironplane_protobuf::openapi_v2::encode_document(&json)?;
                tracing::debug!(
                    bytes = bytes.len(),
                    took = ?started.elapsed(),
                    "built the OpenAPI v2 protobuf document"
                );
                Ok(Bytes::from(bytes))
            })
            .as_ref()
            .map_err(String::as_str)
    }

    fn protobuf_gz(&self, protobuf: &Bytes) -> &Bytes {
        self.protobuf_gz.get_or_init(|| {
            use std::io::Write as _;
            let mut gz = flate2::write::GzEncoder::new(
                Vec::with_capacity(protobuf.len() / 4),
                flate2::Compression::default(),
            );
            // Writing into a Vec cannot fail.
            let _ = gz.write_all(protobuf);
            Bytes::from(gz.finish().unwrap_or_default())
        })
    }
}

/// Answers a GET or HEAD of `/openapi/v2`.
pub(super) fn serve(doc: &GzDoc, cache: &V2Cache, headers: &HeaderMap) -> Response {
    let gzip = accepts_gzip(headers.get(header::ACCEPT_ENCODING));
    let accept = headers
        .get(header::ACCEPT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "*/*".to_string());
    let Some(format) = negotiate(&accept) else {
        return bare(StatusCode::NOT_ACCEPTABLE);
    };
    let meta = match cache.meta(doc) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = e, "OpenAPI v2 document unavailable");
            return bare(StatusCode::SERVICE_UNAVAILABLE);
        }
    };
    let content_type = match format {
        Format::Json => JSON.to_string(),
        Format::Protobuf => ironplane_protobuf::openapi_v2::MEDIA_TYPE.to_string(),
    };
    let last_modified = http_date(meta.modified);
    let mut head = vec![
        ("content-type", content_type),
        ("etag", meta.etag.clone()),
        ("last-modified", last_modified),
    ];
    match preconditions(headers, &meta.etag, meta.modified) {
        Precondition::Proceed => {}
        Precondition::NotModified => {
            // Go's writeNotModified drops the body's headers, and Last-Modified when an ETag
            // is set.
            head.retain(|(name, _)| *name == "etag");
            return with_headers(bare(StatusCode::NOT_MODIFIED), &head);
        }
        Precondition::Failed => {
            return with_headers(bare(StatusCode::PRECONDITION_FAILED), &head);
        }
    }
    let (body, gzipped) = match (format, gzip) {
        (Format::Json, true) => (doc.0.clone(), true),
        (Format::Json, false) => match doc.inflate() {
            Ok(json) => (Bytes::from(json), false),
            Err(e) => {
                tracing::error!(error = %e, "OpenAPI v2 document unreadable");
                return bare(StatusCode::SERVICE_UNAVAILABLE);
            }
        },
        (Format::Protobuf, _) => match cache.protobuf(doc) {
            Ok(pb) if gzip => (cache.protobuf_gz(pb).clone(), true),
            Ok(pb) => (pb.clone(), false),
            Err(e) => {
                tracing::error!(error = e, "OpenAPI v2 protobuf document unavailable");
                return bare(StatusCode::SERVICE_UNAVAILABLE);
            }
        },
    };
    if gzipped {
        head.push(("content-encoding", "gzip".to_string()));
    }
    let mut r = http::Response::new(full(body));
    append_vary(&mut r);
    with_headers(r, &head)
}

/// The Vary headers of every answer: gziphandler adds its own first, then the handler.
fn append_vary(r: &mut Response) {
    for v in ["Accept-Encoding", "Accept"] {
        r.headers_mut()
            .append(header::VARY, HeaderValue::from_static(v));
    }
}

/// An answer without a body.
fn bare(code: StatusCode) -> Response {
    let mut r = http::Response::new(empty());
    *r.status_mut() = code;
    append_vary(&mut r);
    r
}

fn with_headers(mut r: Response, head: &[(&'static str, String)]) -> Response {
    for (name, value) in head {
        if let Ok(v) = HeaderValue::from_str(value) {
            r.headers_mut().insert(*name, v);
        }
    }
    r
}

/// goautoneg's clauses, sorted as `sort.Sort` sorts them (an insertion sort for the short lists
/// clients send), then the first clause matching a served type wins; q=0 clauses count too.
fn negotiate(accept: &str) -> Option<Format> {
    let mut clauses = parse_accept(accept);
    for i in 1..clauses.len() {
        let mut j = i;
        while j > 0 && less(&clauses[j], &clauses[j - 1]) {
            clauses.swap(j, j - 1);
            j -= 1;
        }
    }
    let served = [
        ("json", Format::Json),
        (PROTOBUF_SUBTYPES[0], Format::Protobuf),
        (PROTOBUF_SUBTYPES[1], Format::Protobuf),
    ];
    clauses.iter().find_map(|c| {
        served.iter().find_map(|(subtype, format)| {
            let type_ok = c.kind == "application" || c.kind == "*";
            let subtype_ok = c.subtype == *subtype || c.subtype == "*";
            (type_ok && subtype_ok).then_some(*format)
        })
    })
}

#[derive(Debug)]
struct Clause {
    kind: String,
    subtype: String,
    q: f64,
}

/// goautoneg's `ParseAccept`: `type/subtype` (or a lone `*`), parameters after `;`, only `q`
/// kept; malformed clauses are skipped.
fn parse_accept(header: &str) -> Vec<Clause> {
    let mut out = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let (media, mut params) = next_split(part, ';');
        let (kind, rest) = next_split(media, '/');
        let kind = kind.trim_matches(' ');
        let subtype = if rest.is_empty() {
            if kind != "*" {
                continue;
            }
            "*"
        } else {
            let (subtype, more) = next_split(rest, '/');
            if !more.is_empty() {
                continue;
            }
            subtype.trim_matches(' ')
        };
        let mut q = 1.0;
        while !params.is_empty() {
            let param;
            (param, params) = next_split(params, ';');
            let (name, value) = next_split(param, '=');
            let (value, extra) = next_split(value, '=');
            if value.is_empty() || !extra.is_empty() {
                continue;
            }
            if name.trim_matches(' ') == "q" {
                // strconv.ParseFloat(v, 32): the value untrimmed, 0 when it does not parse.
                q = value.parse::<f32>().map_or(0.0, f64::from);
            }
        }
        out.push(Clause {
            kind: kind.to_string(),
            subtype: subtype.to_string(),
            q,
        });
    }
    out
}

/// goautoneg's `nextSplitElement`: before and after the first `sep` (all and nothing without one).
fn next_split(s: &str, sep: char) -> (&str, &str) {
    s.split_once(sep).unwrap_or((s, ""))
}

/// goautoneg's `Less`: higher q first, then concrete types before wildcards.
fn less(a: &Clause, b: &Clause) -> bool {
    a.q > b.q || (a.kind != "*" && b.kind == "*") || (a.subtype != "*" && b.subtype == "*")
}

/// gziphandler's `acceptsGzip`: a `gzip` coding with q above zero.
fn accepts_gzip(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mut q_gzip = 0.0;
    for coding in value.split(',') {
        let mut name = String::new();
        let mut q = 1.0;
        for (n, part) in coding.split(';').enumerate() {
            let part = part.trim();
            q = 1.0;
            if n == 0 {
                name = part.to_ascii_lowercase();
            } else if let Some(v) = part.strip_prefix("q=") {
                q = v.parse::<f64>().unwrap_or(0.0).clamp(0.0, 1.0);
            }
        }
        if name == "gzip" {
            q_gzip = q;
        }
    }
    q_gzip > 0.0
}

enum Precondition {
    Proceed,
    NotModified,
    Failed,
}

/// `http.ServeContent`'s `checkPreconditions` for GET and HEAD: If-Match, else
/// If-Unmodified-Since (412 when they fail); If-None-Match, else If-Modified-Since (304).
fn preconditions(headers: &HeaderMap, etag: &str, modified: SystemTime) -> Precondition {
    let get = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let modified_secs = unix_seconds(modified);
    if let Some(im) = get(header::IF_MATCH) {
        if !etag_list_matches(im, etag, false) {
            return Precondition::Failed;
        }
    } else if let Some(since) = get(header::IF_UNMODIFIED_SINCE).and_then(parse_http_date)
        && modified_secs > since
    {
        return Precondition::Failed;
    }
    if let Some(inm) = get(header::IF_NONE_MATCH) {
        if etag_list_matches(inm, etag, true) {
            return Precondition::NotModified;
        }
    } else if let Some(since) = get(header::IF_MODIFIED_SINCE).and_then(parse_http_date)
        && modified_secs <= since
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether a list of entity tags (or `*`) names `etag`; weak comparison ignores `W/`.
fn etag_list_matches(list: &str, etag: &str, weak: bool) -> bool {
    list.split(',')
        .map(|t| t.trim_matches([' ', '\t']))
        .filter(|t| !t.is_empty())
        .any(|t| {
            if t == "*" {
                return true;
            }
            match t.strip_prefix("W/") {
                Some(tag) => weak && tag == etag,
                None => t == etag,
            }
        })
}

fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Go's `http.TimeFormat`.
fn http_date(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// Go's `http.ParseTime`: RFC 1123 with GMT, RFC 850, ANSI C; seconds since the epoch.
fn parse_http_date(s: &str) -> Option<i64> {
    [
        "%a, %d %b %Y %H:%M:%S GMT",
        "%A, %d-%b-%y %H:%M:%S GMT",
        "%a %b %e %H:%M:%S %Y",
    ]
    .iter()
    .find_map(|f| chrono::NaiveDateTime::parse_from_str(s, f).ok())
    .map(|t| t.and_utc().timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation_follows_kube_openapi() {
        let pb = Some(Format::Protobuf);
        let json = Some(Format::Json);
        for (accept, want) in [
            ("*/*", json),
            ("application/json", json),
            ("application/*", json),
            ("*", json),
            (
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                pb,
            ),
            (
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                pb,
            ),
            // kubectl's discovery client asks for exactly this.
            (
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
                pb,
            ),
            (
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                pb,
            ),
            // goautoneg keeps q=0 clauses and orders concrete types before wildcards.
            ("application/json;q=0", json),
            (
                "*/*;q=1, application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.1",
                pb,
            ),
            ("application/vnd.kubernetes.protobuf", None),
            ("text/html", None),
            ("application/yaml, text/*", None),
            ("application/json/x", None),
            ("application", None),
            (" application/json ; q=0.9 ", json),
        ] {
            assert_eq!(negotiate(accept), want, "{accept}");
        }
    }

    #[test]
    fn gzip_is_used_when_accepted_with_a_positive_q() {
        let h = |s: &'static str| HeaderValue::from_static(s);
        assert!(accepts_gzip(Some(&h("gzip"))));
        assert!(accepts_gzip(Some(&h("deflate, GZIP;q=0.5"))));
        assert!(!accepts_gzip(Some(&h("gzip;q=0"))));
        assert!(!accepts_gzip(Some(&h("*"))));
        assert!(!accepts_gzip(Some(&h("identity"))));
        assert!(!accepts_gzip(None));
    }

    #[test]
    fn conditional_requests_as_serve_content() {
        let etag = "\"ABC\"";
        let modified = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let check = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            match preconditions(&h, etag, modified) {
                Precondition::Proceed => 200,
                Precondition::NotModified => 304,
                Precondition::Failed => 412,
            }
        };
        assert_eq!(check(&[]), 200);
        assert_eq!(check(&[("if-none-match", "\"ABC\"")]), 304);
        assert_eq!(check(&[("if-none-match", "\"x\", W/\"ABC\"")]), 304);
        assert_eq!(check(&[("if-none-match", "*")]), 304);
        assert_eq!(check(&[("if-none-match", "\"other\"")]), 200);
        // If-None-Match decides alone when present.
        assert_eq!(
            check(&[
                ("if-none-match", "\"other\""),
                ("if-modified-since", "Tue, 14 Nov 2023 22:13:20 GMT")
            ]),
            200
        );
        assert_eq!(
            check(&[("if-modified-since", "Tue, 14 Nov 2023 22:13:20 GMT")]),
            304
        );
        assert_eq!(
            check(&[("if-modified-since", "Tue, 14 Nov 2023 22:13:19 GMT")]),
            200
        );
        assert_eq!(check(&[("if-match", "\"other\"")]), 412);
        assert_eq!(check(&[("if-match", "W/\"ABC\"")]), 412);
        assert_eq!(check(&[("if-match", "\"ABC\"")]), 200);
        assert_eq!(
            check(&[("if-unmodified-since", "Tue, 14 Nov 2023 22:13:19 GMT")]),
            412
        );
        assert_eq!(http_date(modified), "Tue, 14 Nov 2023 22:13:20 GMT");
    }

    fn doc() -> GzDoc {
        use std::io::Write as _;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(br#"{"swagger":"2.0","info":{"title":"K","version":"1"},"paths":{}}"#)
            .unwrap();
        GzDoc(Bytes::from(gz.finish().unwrap()))
    }

    fn get(cache: &V2Cache, doc: &GzDoc, pairs: &[(&'static str, &str)]) -> Response {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        serve(doc, cache, &h)
    }

    fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
        r.headers().get(name).and_then(|v| v.to_str().ok())
    }

    #[test]
    fn answers_carry_upstreams_headers_and_share_one_etag() {
        let (doc, cache) = (doc(), V2Cache::default());
        let json = get(&cache, &doc, &[]);
        assert_eq!(json.status(), StatusCode::OK);
        assert_eq!(header(&json, "content-type"), Some("application/json"));
        assert_eq!(header(&json, "content-encoding"), None);
        let vary: Vec<_> = json.headers().get_all("vary").iter().collect();
        assert_eq!(vary, ["Accept-Encoding", "Accept"]);
        let etag = header(&json, "etag").unwrap().to_string();
        assert_eq!(etag.len(), 130, "a quoted SHA-512 in hex: {etag}");
        assert!(header(&json, "last-modified").unwrap().ends_with(" GMT"));

        let pb = get(
            &cache,
            &doc,
            &[
                (
                    "accept",
                    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                ),
                ("accept-encoding", "gzip"),
            ],
        );
        assert_eq!(pb.status(), StatusCode::OK);
        assert_eq!(
            header(&pb, "content-type"),
            Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        );
        assert_eq!(header(&pb, "content-encoding"), Some("gzip"));
        assert_eq!(header(&pb, "etag"), Some(etag.as_str()));

        let not_modified = get(
            &cache,
            &doc,
            &[("accept", "application/json"), ("if-none-match", &etag)],
        );
        assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&not_modified, "etag"), Some(etag.as_str()));
        assert_eq!(header(&not_modified, "content-type"), None);
        assert_eq!(header(&not_modified, "last-modified"), None);

        let refused = get(
            &cache,
            &doc,
            &[("accept", "application/vnd.kubernetes.protobuf")],
        );
        assert_eq!(refused.status(), StatusCode::NOT_ACCEPTABLE);
        assert_eq!(header(&refused, "content-type"), None);
    }

    #[test]
    fn nothing_is_derived_before_it_is_asked_for() {
        let (doc, cache) = (doc(), V2Cache::default());
        assert!(cache.meta.get().is_none() && cache.protobuf.get().is_none());
        get(&cache, &doc, &[("accept", "application/json")]);
        assert!(cache.meta.get().is_some() && cache.protobuf.get().is_none());
        get(
            &cache,
            &doc,
            &[(
                "accept",
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
        );
        assert!(cache.protobuf.get().is_some() && cache.protobuf_gz.get().is_none());
    }
}
