//! Content negotiation: which encoding a request body is in (Content-Type) and which form the
//! answer takes (Accept): plain JSON, YAML, protobuf, or one of the meta.k8s.io views — Table,
//! PartialObjectMetadata(List) — and the aggregated discovery document.
//! Upstream: k8s.io/apiserver/pkg/endpoints/handlers/negotiation.

use apimachinery::Status;

pub const JSON: &str = "application/json";
pub const YAML: &str = "application/yaml";
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// How bytes are encoded on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Yaml,
    Protobuf,
}

impl Encoding {
    pub fn media_type(self) -> &'static str {
        match self {
            Encoding::Json => JSON,
            Encoding::Yaml => YAML,
            Encoding::Protobuf => PROTOBUF,
        }
    }
}

/// What object the client wants back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The object (or list) itself.
    Object,
    /// `as=Table;g=meta.k8s.io;v=v1` (v1beta1 is also accepted, as upstream does).
    Table,
    /// `as=PartialObjectMetadata` / `as=PartialObjectMetadataList`.
    PartialObjectMetadata,
    PartialObjectMetadataList,
    /// `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2`.
    AggregatedDiscovery,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    pub encoding: Encoding,
    pub view: View,
    /// `meta.k8s.io` API version the view was asked in (`v1` or `v1beta1`).
    pub view_version: &'static str,
    /// What a Table's rows carry.
    pub include_object: IncludeObject,
}

/// `includeObject` of meta.k8s.io's TableOptions: what each row of a Table carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// `null`.
    None,
    /// The object's metadata as PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object, in the version asked for (what `kubectl get --sort-by` reads).
    Object,
}

impl Negotiated {
    pub const JSON: Negotiated = Negotiated {
        encoding: Encoding::Json,
        view: View::Object,
        view_version: "v1",
        include_object: IncludeObject::Metadata,
    };

    /// Reads the request's TableOptions when the view is a Table (upstream decodes them only
    /// then): `includeObject` is `Object`, `Metadata` (or empty) or `None`; anything else is
    /// upstream's 400.
    pub fn with_table_options(mut self, query: &str) -> Result<Negotiated, Status> {
        if self.view != View::Table {
            return Ok(self);
        }
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            if k == "includeObject" {
                self.include_object = match &*v {
                    "" | "Metadata" => IncludeObject::Metadata,
                    "Object" => IncludeObject::Object,
                    "None" => IncludeObject::None,
                    other => {
                        return Err(Status::bad_request(format!(
                            "unrecognized includeObject value: {other:?}"
                        )));
                    }
                };
            }
        }
        Ok(self)
    }
}

struct MediaRange<'a> {
    essence: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

fn parse_media_range(s: &str) -> MediaRange<'_> {
    let mut parts = s.split(';');
    let essence = parts.next().unwrap_or("").trim();
    let params = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
        .collect();
    MediaRange { essence, params }
}

fn encoding_of(essence: &str) -> Option<Encoding> {
    match essence.to_ascii_lowercase().as_str() {
        "application/json" | "application/*" | "*/*" | "*" => Some(Encoding::Json),
        "application/yaml" => Some(Encoding::Yaml),
        "application/vnd.kubernetes.protobuf" => Some(Encoding::Protobuf),
        _ => None,
    }
}

/// Picks the first acceptable media range in the client's order, as upstream does (it ignores
/// q-values in favour of order). `allowed` tells which views this endpoint can produce.
pub fn negotiate(accept: Option<&str>, allowed: &[View]) -> Result<Negotiated, Status> {
    let accept = match accept.map(str::trim) {
        None | Some("") => return Ok(Negotiated::JSON),
        Some(a) => a,
    };
    for range in accept.split(',') {
        let mr = parse_media_range(range);
        let Some(mut encoding) = encoding_of(mr.essence) else {
            continue;
        };
        let param = |k: &str| {
            mr.params
                .iter()
                .find(|(pk, _)| pk.eq_ignore_ascii_case(k))
                .map(|(_, v)| *v)
        };
        let (view, version) = match (param("as"), param("g"), param("v")) {
            (None, _, _) => (View::Object, "v1"),
            (Some("Table"), Some("meta.k8s.io"), Some(v @ ("v1" | "v1beta1"))) => {
                (View::Table, if v == "v1" { "v1" } else { "v1beta1" })
            }
            (Some("PartialObjectMetadata"), Some("meta.k8s.io"), Some(v @ ("v1" | "v1beta1"))) => (
                View::PartialObjectMetadata,
                if v == "v1" { "v1" } else { "v1beta1" },
            ),
            (
                Some("PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some(v @ ("v1" | "v1beta1")),
            ) => (
                View::PartialObjectMetadataList,
                if v == "v1" { "v1" } else { "v1beta1" },
            ),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                (View::AggregatedDiscovery, "v2")
            }
            _ => continue,
        };
        if !allowed.contains(&view) {
            continue;
        }
        // A Table or discovery document in protobuf is not something we produce yet for every
        // view; JSON is always acceptable for them to a client that listed protobuf first only
        // when it also lists JSON later, so skip rather than answer in the wrong form.
        if encoding == Encoding::Protobuf && view != View::Object {
            continue;
        }
        if mr.essence == "*/*" && view == View::Object {
            encoding = Encoding::Json;
        }
        return Ok(Negotiated {
            encoding,
            view,
            view_version: version,
            include_object: IncludeObject::Metadata,
        });
    }
    Err(Status::not_acceptable(format!(
        "only the following media types are accepted: {JSON}, {YAML}, {PROTOBUF}"
    )))
}

/// Custom resources have no protobuf form (upstream serves them as unstructured JSON): a body in
/// protobuf is refused with 415, and protobuf is struck from the Accept header, which leaves a
/// client that accepts nothing else a 406 naming what is served.
pub fn without_protobuf(req: &mut super::ApiRequest) -> Result<(), Status> {
    let essence = |v: &str| parse_media_range(v).essence.to_ascii_lowercase();
    if let Some(ct) = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        && essence(ct) == PROTOBUF
        && !req.body.is_empty()
    {
        return Err(Status::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {JSON}, {YAML}"
        )));
    }
    let Some(accept) = req
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.trim().is_empty())
    else {
        return Ok(());
    };
    let kept: Vec<&str> = accept
        .split(',')
        .filter(|range| essence(range) != PROTOBUF)
        .collect();
    if kept.is_empty() {
        return Err(Status::not_acceptable(format!(
            "only the following media types are accepted: {JSON}, {YAML}"
        )));
    }
    let kept = kept.join(",");
    if let Ok(v) = http::HeaderValue::from_str(&kept) {
        req.headers.insert(http::header::ACCEPT, v);
    }
    Ok(())
}

/// The encoding of a request body, from its Content-Type. A missing Content-Type is JSON, as
/// upstream treats it.
pub fn body_encoding(content_type: Option<&str>) -> Result<Encoding, Status> {
    let Some(ct) = content_type else {
        return Ok(Encoding::Json);
    };
    match parse_media_range(ct).essence.to_ascii_lowercase().as_str() {
        "" | "application/json" => Ok(Encoding::Json),
        "application/yaml" => Ok(Encoding::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(Encoding::Protobuf),
        _ => Err(Status::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {JSON}, {YAML}, {PROTOBUF}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[View] = &[
        View::Object,
        View::Table,
        View::PartialObjectMetadata,
        View::PartialObjectMetadataList,
    ];

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        let n = negotiate(Some(a), ALL).unwrap();
        assert_eq!(
            (n.encoding, n.view, n.view_version),
            (Encoding::Json, View::Table, "v1")
        );
        // An endpoint that cannot make tables falls through to plain JSON.
        assert_eq!(
            negotiate(Some(a), &[View::Object]).unwrap(),
            Negotiated::JSON
        );
    }

    #[test]
    fn protobuf_and_yaml() {
        let n = negotiate(Some("application/vnd.kubernetes.protobuf, */*"), ALL).unwrap();
        assert_eq!(n.encoding, Encoding::Protobuf);
        assert_eq!(
            negotiate(Some("application/yaml"), ALL).unwrap().encoding,
            Encoding::Yaml
        );
        assert!(negotiate(Some("text/html"), ALL).is_err());
    }

    #[test]
    fn body_types() {
        assert_eq!(
            body_encoding(Some("application/json; charset=utf-8")).unwrap(),
            Encoding::Json
        );
        assert_eq!(body_encoding(None).unwrap(), Encoding::Json);
        let e = body_encoding(Some("text/plain")).unwrap_err();
        assert_eq!(e.code, 415);
    }
}
