//! Request bodies → JSON objects: the negotiated encoding, apiVersion/kind checks against the
//! URL, Go's type rules for built-in kinds, and unknown-field handling per `fieldValidation`.
//! Messages follow upstream's decoder. Every object that reaches a handler from a body or a patch
//! has passed through here, so nothing deeper than [`MAX_OBJECT_DEPTH`] or of a shape Go could
//! not hold is ever stored.

use apimachinery::Status;
use apimachinery::object::{ObjectExt, nests_deeper_than};
use apimachinery::patch::go_json_type;
use apimachinery::schema::{SchemaKind, SchemaRef, Schemas};
use apimachinery::validation::{FieldError, FieldPath, invalid_status};
use serde_json::Value;

use super::negotiation::{Encoding, body_encoding};
use super::query::FieldValidation;
use super::{ApiRequest, ApiResources};
use crate::registry::ResourceInfo;

/// Decodes a body in the request's Content-Type into JSON.
pub fn decode_value(req: &ApiRequest) -> Result<Value, Status> {
    decode_body(req, None).map(|(value, _)| value)
}

/// What Go's strict decoder found in a body before its fields are pruned.
#[derive(Debug, Default)]
struct Found {
    /// Its errors so far, in its order.
    errors: Vec<String>,
    /// For a JSON body scanned beside its kind's schema: whether it has unknown fields, which
    /// `errors` then already reports where the decoder meets them. Otherwise the pruner finds
    /// them.
    unknown: Option<bool>,
}

/// Decodes a body in the request's Content-Type into JSON and, with `strict`, says what Go's
/// strict decoder says of it: in YAML go-yaml's one `yaml: unmarshal errors:` text naming the keys
/// given twice (upstream runs sigs.k8s.io/yaml's `YAMLToJSONStrict` over a YAML body before its
/// strict JSON decoding of the converted, duplicate-free text); in JSON the duplicate keys and,
/// given the kind's schema, the unknown fields, in the body's order ([`strict_fields`]).
fn decode_body(
    req: &ApiRequest,
    strict: Option<Option<(&Schemas, SchemaRef)>>,
) -> Result<(Value, Found), Status> {
    let ct = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    match body_encoding(ct)? {
        Encoding::Yaml => {
            let doc = yaml_to_json(&req.body)?;
            let found = match strict {
                Some(_) => Found {
                    errors: doc.strict_error().into_iter().collect(),
                    unknown: None,
                },
                None => Found::default(),
            };
            Ok((doc.value, found))
        }
        Encoding::Json => {
            let value = parse(&req.body, Encoding::Json)?;
            let found = match strict {
                Some(schema) => {
                    let scanned = strict_fields(&req.body, schema);
                    Found {
                        errors: scanned.errors,
                        unknown: schema.map(|_| scanned.unknown),
                    }
                }
                None => Found::default(),
            };
            Ok((value, found))
        }
        Encoding::Protobuf => Ok((parse(&req.body, Encoding::Protobuf)?, Found::default())),
    }
}

/// How deep a decoded object may nest. The protobuf decoder refuses deeper messages before it
/// recurses, the JSON and YAML parsers stop at 128 levels on their own, and every object is
/// checked against this after decoding and after a patch, so a stored object is always readable
/// again (serde_json reads back 128 levels) and every recursive walk of it stays shallow.
pub const MAX_OBJECT_DEPTH: usize = ironplane_protobuf::MAX_DEPTH;

/// Parses JSON as Go's decoder would, with its error texts: nesting past [`MAX_OBJECT_DEPTH`]
/// is refused as Go's scanner refuses nesting past its own limit (checked before parsing, so
/// the parser never recurses that deep), and syntax errors read as Go's do.
pub fn parse_json(body: &[u8]) -> Result<Value, String> {
    if let Some(opening) = first_too_deep(body, MAX_OBJECT_DEPTH) {
        return Err(format!(
            "invalid character '{}' exceeded max depth",
            char::from(opening)
        ));
    }
    serde_json::from_slice(body).map_err(|e| go_syntax_error(body, &e))
}

/// The bracket that opens level `max + 1` of a JSON text, if it nests that deep. A byte scan
/// that skips strings; it does not validate, the parser does that.
fn first_too_deep(body: &[u8], max: usize) -> Option<u8> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some(b);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// A serde_json error in the words of Go's `encoding/json`: its scanner's message for a syntax
/// error, serde's for what Go's scanner accepts but serde does not.
fn go_syntax_error(body: &[u8], e: &serde_json::Error) -> String {
    match apimachinery::gojson::check(body) {
        Err(go) => go,
        Ok(()) => e.to_string(),
    }
}

/// Parses bytes of a known encoding, for bodies and patches alike, each held to
/// [`MAX_OBJECT_DEPTH`] once: JSON by its byte scan, YAML and protobuf by a walk of the result
/// (the protobuf decoder limits messages, and lists nest further).
pub fn parse(body: &[u8], encoding: Encoding) -> Result<Value, Status> {
    match encoding {
        Encoding::Json => {
            parse_json(body).map_err(|what| Status::bad_request(json_error(body, &what)))
        }
        Encoding::Yaml => yaml_to_json(body).map(|doc| doc.value),
        Encoding::Protobuf => {
            let value =
                ironplane_protobuf::decode(body).map_err(|e| Status::bad_request(e.to_string()))?;
            check_depth(&value).map_err(Status::bad_request)?;
            Ok(value)
        }
    }
}

fn check_depth(value: &Value) -> Result<(), String> {
    if nests_deeper_than(value, MAX_OBJECT_DEPTH) {
        return Err(format!(
            "object nests deeper than the maximum of {MAX_OBJECT_DEPTH} levels"
        ));
    }
    Ok(())
}

/// What Go's decoder answers for a body that is no JSON object: it fails to read `apiVersion`
/// and `kind` into its anonymous struct.
fn not_an_object(value: &Value) -> String {
    format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
        go_json_type(value)
    )
}

/// Go decodes `apiVersion` and `kind` first, into an anonymous struct of two strings; anything
/// else there is refused with that struct's (nameless) type error.
fn check_type_meta(obj: &Value) -> Result<(), String> {
    for key in ["apiVersion", "kind"] {
        match obj.get(key) {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => {
                return Err(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{key} of type string",
                    go_json_type(other)
                ));
            }
        }
    }
    Ok(())
}

fn json_error(body: &[u8], what: &str) -> String {
    let shown = String::from_utf8_lossy(&body[..body.len().min(256)]);
    format!("couldn't get version/kind; json parse error: {what} ({shown})")
}

/// A YAML body as JSON, as upstream's sigs.k8s.io/yaml converts it (see [`apimachinery::yaml`]:
/// the last of duplicate keys wins, merge keys merge), with go-yaml's strict complaints about
/// keys given twice; held to [`MAX_OBJECT_DEPTH`] by a walk of the result.
pub fn yaml_to_json(body: &[u8]) -> Result<apimachinery::yaml::Document, Status> {
    let refused =
        |what: &str| Status::bad_request(format!("error converting YAML to JSON: yaml: {what}"));
    let doc = apimachinery::yaml::to_json(body).map_err(|e| {
        // Say it in go-yaml's words where the two libraries refuse the same thing.
        let text = e.to_string();
        if text.starts_with("recursion limit exceeded") {
            refused(&format!("exceeded max depth of {MAX_OBJECT_DEPTH}"))
        } else if text.starts_with("repetition limit exceeded") {
            refused("document contains excessive aliasing")
        } else if text.contains(apimachinery::yaml::MERGE_NOT_MAP) {
            refused(apimachinery::yaml::MERGE_NOT_MAP)
        } else {
            refused(&text)
        }
    })?;
    if nests_deeper_than(&doc.value, MAX_OBJECT_DEPTH) {
        return Err(refused(&format!(
            "exceeded max depth of {MAX_OBJECT_DEPTH}"
        )));
    }
    Ok(doc)
}

/// The warnings upstream's handlers make of strict decoding errors (`addStrictDecodingWarnings`
/// in k8s.io/apiserver's handlers/rest.go): go-yaml's `yaml: unmarshal errors:` text (bare, or
/// as sigs.k8s.io/yaml's `UnmarshalStrict` wraps it) becomes one warning per line it lists, as
/// `line 5: key "name" already set in map`; any other error is one warning as it is.
pub(crate) fn strict_decoding_warnings(errors: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for e in errors {
        let listed = e
            .strip_prefix(apimachinery::yaml::UNMARSHAL_ERRORS)
            .or_else(|| {
                e.strip_prefix("error converting YAML to JSON: ")
                    .and_then(|rest| rest.strip_prefix(apimachinery::yaml::UNMARSHAL_ERRORS))
            })
            .and_then(|rest| rest.strip_prefix('\n'));
        match listed {
            Some(lines) => out.extend(lines.split('\n').map(|l| l.trim().to_string())),
            None => out.push(e.clone()),
        }
    }
    out
}

/// Decodes the body of a create or update of `info`: fills a missing apiVersion/kind from the
/// URL (as upstream's decoder does with its default GVK), rejects a different one, and applies
/// the field validation policy. Returns the object and the warnings to send.
pub fn decode_object(
    api: &ApiResources,
    req: &ApiRequest,
    info: &ResourceInfo,
    kind_override: Option<(&str, &str)>,
    fv: FieldValidation,
) -> Result<(Value, Vec<String>), Status> {
    let (expected_api_version, expected_kind) = match kind_override {
        Some((av, k)) => (av.to_string(), k.to_string()),
        None => (info.api_version(), info.kind.clone()),
    };
    let object_meta = info.unstructured && kind_override.is_none();
    // A built-in kind's JSON body is scanned beside its schema, so that unknown fields are
    // reported where Go's strict decoder meets them, among the duplicate keys; a custom
    // resource's body is decoded into a map (duplicates only) and pruned afterwards.
    let strict = (fv != FieldValidation::Ignore).then(|| match object_meta {
        true => None,
        false => kind_schema(api, &expected_api_version, &expected_kind),
    });
    let (mut obj, found) = match decode_body(req, strict) {
        Ok(decoded) => decoded,
        Err(mut s) if s.code == 400 && !s.message.starts_with("error converting YAML") => {
            s.message = format!(
                "the object provided is unrecognized (must be of type {expected_kind}): {}",
                s.message
            );
            return Err(s);
        }
        Err(s) => return Err(s),
    };
    if !obj.is_object() {
        return Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {expected_kind}): {}",
            not_an_object(&obj)
        )));
    }
    if let Err(e) = check_type_meta(&obj) {
        return Err(Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {expected_kind}): {e}"
        )));
    }
    let url_version = expected_api_version
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let kind = obj.kind().to_string();
    let api_version = obj.api_version().to_string();
    if kind.is_empty() {
        obj["kind"] = Value::from(expected_kind.clone());
    } else if kind != expected_kind && info.unstructured && kind_override.is_none() {
        // A custom resource of another kind is decoded as it is; the kind's validation refuses
        // it (upstream's `ValidateTypeMeta`: `kind: Invalid value`).
    } else if kind != expected_kind {
        let group = expected_api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("core");
        return Err(Status::bad_request(format!(
            "{kind} in version \"{url_version}\" cannot be handled as a {expected_kind}: converting ({url_version}.{kind}) to ({group}.{expected_kind}): unknown conversion"
        )));
    }
    if api_version.is_empty() {
        obj["apiVersion"] = Value::from(expected_api_version.clone());
    } else if api_version != expected_api_version && info.unstructured && kind_override.is_none() {
        // A custom resource's handler accepts only its URL's group version (the request
        // scope's `AcceptsGroupVersion`), even another served version of the same CRD.
        return Err(Status::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected_api_version})"
        )));
    } else if api_version != expected_api_version {
        // The decoder names the version the body says it is in, not the URL's.
        let sent_version = api_version.rsplit('/').next().unwrap_or_default();
        return Err(Status::bad_request(format!(
            "{expected_kind} in version \"{sent_version}\" cannot be handled as a {expected_kind}: no kind \"{expected_kind}\" is registered for version \"{api_version}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    let go_types = ironplane_protobuf::check_go_types(&expected_api_version, &expected_kind, &obj)
        .and_then(|()| match object_meta {
            true => check_object_meta(api, &mut obj, &expected_api_version, &expected_kind),
            false => Ok(()),
        });
    if let Err(e) = go_types {
        return Err(Status::bad_request(format!(
            "{expected_kind} in version \"{url_version}\" cannot be handled as a {expected_kind}: {e}"
        )));
    }
    let warnings = checked_fields(
        api,
        &mut obj,
        &expected_api_version,
        &expected_kind,
        fv,
        object_meta,
        found,
    )?;
    if object_meta {
        normalize_object_meta(api, &mut obj, &expected_api_version, &expected_kind);
    }
    Ok((obj, warnings))
}

/// The schema of a kind, if the server has one.
fn kind_schema<'a>(
    api: &'a ApiResources,
    api_version: &str,
    kind: &str,
) -> Option<(&'a Schemas, SchemaRef)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let schemas = api.schemas()?;
    Some((schemas, schemas.root_for(group, version, kind)?))
}

/// Unknown fields in the order upstream's custom resource decoder finds them: the top-level
/// metadata's, then the schema's pruning, then each embedded resource's metadata (sorted).
fn in_decoding_order(
    schemas: &apimachinery::schema::Schemas,
    root: apimachinery::schema::SchemaRef,
    obj: &mut Value,
    found: Vec<String>,
) -> Vec<String> {
    // The object's own metadata is decoded first (a custom resource's `ObjectMeta` before its
    // pruning), then the rest in the pruner's order, then embedded resources' metadata.
    let mut prefixes = Vec::new();
    if schemas.has_embedded_resources() {
        let _ = schemas.visit_embedded_resources(root, obj, &mut String::new(), &mut |path, _| {
            prefixes.push(format!("\"{path}.metadata."));
            Ok(())
        });
    }
    let (mut embedded, rest): (Vec<String>, Vec<String>) = found.into_iter().partition(|m| {
        m.strip_prefix("unknown field ")
            .is_some_and(|p| prefixes.iter().any(|pre| p.starts_with(pre.as_str())))
    });
    let (top, mut rest): (Vec<String>, Vec<String>) = rest
        .into_iter()
        .partition(|m| m.starts_with("unknown field \"metadata."));
    embedded.sort();
    let mut ordered = top;
    ordered.append(&mut rest);
    ordered.append(&mut embedded);
    ordered
}

/// Custom resources decode their metadata into `ObjectMeta`, at the top and in every embedded
/// resource, whose `apiVersion` and `kind` are strings (upstream: `schemaobjectmeta`'s
/// `GetObjectMeta` and `Coerce`, run by the decoder): the first value Go could not hold there,
/// in Go's words, so that no client's decoder ever meets it.
fn check_object_meta(
    api: &ApiResources,
    obj: &mut Value,
    api_version: &str,
    kind: &str,
) -> Result<(), String> {
    let meta = ironplane_protobuf::OBJECT_META;
    if let Some(m) = obj.get("metadata") {
        ironplane_protobuf::check_go_message(meta, m)?;
    }
    with_embedded_resources(api, obj, api_version, kind, &mut |path, map| {
        for field in ["apiVersion", "kind"] {
            if let Some(v) = map.get(field).filter(|v| !v.is_string()) {
                let at = FieldPath::new(&format!("{path}.{field}"));
                return Err(FieldError::invalid(&at, v.clone(), "must be a string").to_string());
            }
        }
        if let Some(m) = map.get("metadata")
            && let Err(e) = ironplane_protobuf::check_go_message(meta, m)
        {
            let at = FieldPath::new(&format!("{path}.metadata"));
            return Err(FieldError::invalid(&at, m.clone(), e).to_string());
        }
        Ok(())
    })
}

/// Checked metadata as Go holds and prints it (empty fields omitted, times in Go's form); an
/// embedded resource's zero `creationTimestamp` is dropped, as `Coerce` drops it.
fn normalize_object_meta(api: &ApiResources, obj: &mut Value, api_version: &str, kind: &str) {
    let normalize = |m: &mut Value| {
        if m.is_object()
            && let Ok(n) =
                ironplane_protobuf::normalize_go_message(ironplane_protobuf::OBJECT_META, m)
        {
            *m = n;
        }
    };
    if let Some(m) = obj.get_mut("metadata") {
        normalize(m);
    }
    let _ = with_embedded_resources(api, obj, api_version, kind, &mut |_, map| {
        if let Some(m) = map.get_mut("metadata") {
            normalize(m);
        }
        Ok(())
    });
}

fn with_embedded_resources(
    api: &ApiResources,
    obj: &mut Value,
    api_version: &str,
    kind: &str,
    f: &mut apimachinery::schema::EmbeddedVisitor<'_>,
) -> Result<(), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let Some(schemas) = api.schemas() else {
        return Ok(());
    };
    let Some(root) = schemas.root_for(group, version, kind) else {
        return Ok(());
    };
    schemas.visit_embedded_resources(root, obj, &mut String::new(), f)
}

/// How many strict-decoding errors Go's decoder keeps for one body (sigs.k8s.io/json's
/// `saveStrictError`); later ones are dropped.
const STRICT_ERRORS_KEPT: usize = 100;

/// What a scan of a JSON body finds, as Go's strict decoder would (see [`strict_fields`]).
#[derive(Debug, Default, PartialEq)]
pub struct StrictFields {
    /// `duplicate field "a.b"` and `unknown field "a.c"`, in the order the decoder meets them.
    pub errors: Vec<String>,
    /// Whether the body holds any field its schema lacks, reported or not (past the cap, or
    /// below a value Go decodes leniently): if not, there is nothing to prune.
    pub unknown: bool,
}

/// What the strict decoder makes of the next value in a body.
#[derive(Clone, Copy)]
enum Expect {
    /// A value of the schema `r`; with `report`, what is wrong below it is reported.
    Typed(SchemaRef, bool),
    /// Go's `interface{}` (a body without a schema): every key is decoded, none is unknown.
    Untyped,
    /// A value that Go decodes itself (`RawExtension`, `FieldsV1`, a scalar) or skips (an unknown
    /// field's): nothing below it is reported.
    Skipped,
}

/// Go's strict decoding errors for a JSON body, in document order: each key that is not a field
/// of its object's schema as `unknown field "spec.containers[0].foo"` (nothing below it is
/// looked at), each key that a struct or map already had as `duplicate field "metadata.name"`
/// (list elements as `[i]`), each message once, at most [`STRICT_ERRORS_KEPT`]. `schema` is the
/// kind's root; without one every object is a map of anything, so only duplicates are found.
///
/// A byte scan over text that already parsed: it skips strings and tracks where it is beside the
/// schema. It runs on every create and update (fieldValidation defaults to Warn), so it keeps raw
/// key bytes, looks each key up once, and builds a path only for an error.
pub fn strict_fields(body: &[u8], schema: Option<(&Schemas, SchemaRef)>) -> StrictFields {
    use std::borrow::Cow;
    use std::collections::HashSet;
    /// Objects with more keys than this check duplicates in a hash set rather than a list.
    const LINEAR_KEYS: usize = 16;
    struct Object<'a> {
        schema: Option<SchemaRef>,
        report: bool,
        top: bool,
        keys: Vec<Cow<'a, [u8]>>,
        many: HashSet<Cow<'a, [u8]>>,
        key: Option<Cow<'a, [u8]>>,
        /// What the current key's value is.
        value: Expect,
    }
    impl Object<'_> {
        fn typed(schema: Option<SchemaRef>, report: bool, top: bool) -> Self {
            Object {
                schema,
                report,
                top,
                keys: Vec::new(),
                many: HashSet::new(),
                key: None,
                value: Expect::Skipped,
            }
        }
    }
    enum Frame<'a> {
        Object(Object<'a>),
        Array { index: usize, items: Expect },
        Skipped,
    }
    /// The path of `key` in the object on top of `stack`.
    fn path_of(stack: &[Frame<'_>], key: &[u8]) -> String {
        let mut path = String::new();
        for frame in &stack[..stack.len().saturating_sub(1)] {
            match frame {
                Frame::Object(Object { key: Some(k), .. }) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&String::from_utf8_lossy(k));
                }
                Frame::Array { index, .. } => path.push_str(&format!("[{index}]")),
                Frame::Object(_) | Frame::Skipped => {}
            }
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&String::from_utf8_lossy(key));
        path
    }
    let mut found = StrictFields::default();
    let save = |errors: &mut Vec<String>, kind: &str, path: String| {
        let message = format!("{kind} {}", apimachinery::validation::go_quote(&path));
        if errors.len() < STRICT_ERRORS_KEPT && !errors.contains(&message) {
            errors.push(message);
        }
    };
    // What the value about to open is: the current key's, the list's items, or the body.
    let next_value = |stack: &[Frame<'_>]| match stack.last() {
        Some(Frame::Object(o)) => o.value,
        Some(Frame::Array { items, .. }) => *items,
        Some(Frame::Skipped) => Expect::Skipped,
        None => match schema {
            Some((_, root)) => Expect::Typed(root, true),
            None => Expect::Untyped,
        },
    };
    let mut stack: Vec<Frame<'_>> = Vec::new();
    // Whether the next string in an object is a key.
    let mut expect_key = false;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                let mut escaped = false;
                while j < body.len() && body[j] != b'"' {
                    if body[j] == b'\\' {
                        escaped = true;
                        j += 1;
                    }
                    j += 1;
                }
                if expect_key && let Some(Frame::Object(object)) = stack.last() {
                    let raw = &body[start..j.min(body.len())];
                    // Escapes are rare in keys; only then is the key decoded.
                    let key: Cow<'_, [u8]> = if escaped {
                        let quoted = [b"\"".as_slice(), raw, b"\"".as_slice()].concat();
                        Cow::Owned(
                            serde_json::from_slice::<String>(&quoted)
                                .map(String::into_bytes)
                                .unwrap_or_else(|_| raw.to_vec()),
                        )
                    } else {
                        Cow::Borrowed(raw)
                    };
                    let (report, top) = (object.report, object.top);
                    // Which value the key holds, and whether Go decodes it (a known field, a
                    // map entry) or reports it as unknown and skips it.
                    let (value, decoded) = match (schema, object.schema) {
                        (Some((schemas, _)), Some(r)) => {
                            let name = std::str::from_utf8(&key).unwrap_or_default();
                            match schemas.field(r, name).or_else(|| schemas.map_values(r)) {
                                Some(child) => (Expect::Typed(child, report), true),
                                // Always fields of the top level, whatever the schema says.
                                None if top
                                    && matches!(name, "apiVersion" | "kind" | "metadata") =>
                                {
                                    (Expect::Skipped, true)
                                }
                                None if schemas.allows_unknown_fields(r) => (Expect::Skipped, true),
                                None => {
                                    found.unknown = true;
                                    if report {
                                        save(
                                            &mut found.errors,
                                            "unknown field",
                                            path_of(&stack, &key),
                                        );
                                    }
                                    (Expect::Skipped, false)
                                }
                            }
                        }
                        _ => (Expect::Untyped, true),
                    };
                    // Go checks a key for a duplicate only when it decodes it: a struct's known
                    // fields and every key of a map.
                    let duplicate = decoded
                        && report
                        && match stack.last() {
                            Some(Frame::Object(o)) if o.keys.len() < LINEAR_KEYS => {
                                o.keys.contains(&key)
                            }
                            Some(Frame::Object(o)) => o.many.contains(&key),
                            _ => false,
                        };
                    if duplicate {
                        save(&mut found.errors, "duplicate field", path_of(&stack, &key));
                    }
                    if let Some(Frame::Object(o)) = stack.last_mut() {
                        if decoded && report && !duplicate {
                            if o.keys.len() < LINEAR_KEYS {
                                o.keys.push(key.clone());
                                if o.keys.len() == LINEAR_KEYS {
                                    o.many = o.keys.iter().cloned().collect();
                                }
                            } else {
                                o.many.insert(key.clone());
                            }
                        }
                        o.key = Some(key);
                        o.value = value;
                    }
                    expect_key = false;
                }
                i = j;
            }
            open @ (b'{' | b'[') => {
                let expect = next_value(&stack);
                let schemas = schema.map(|(s, _)| s);
                let frame = match (expect, schemas) {
                    (Expect::Typed(r, report), Some(schemas)) => {
                        // A `JSONSchemaPropsOr*` holds an object or a list of them, decoded
                        // leniently: walked for pruning, never reported.
                        let lenient = schemas.lenient_inner(r);
                        match (open, lenient, schemas.kind(r)) {
                            (b'{', Some(inner), _) => {
                                Frame::Object(Object::typed(Some(inner), false, stack.is_empty()))
                            }
                            (_, Some(_), _) => Frame::Array {
                                index: 0,
                                items: Expect::Typed(r, false),
                            },
                            (b'{', None, SchemaKind::Object | SchemaKind::Map) => {
                                Frame::Object(Object::typed(Some(r), report, stack.is_empty()))
                            }
                            (b'[', None, SchemaKind::List) => Frame::Array {
                                index: 0,
                                items: schemas
                                    .items(r)
                                    .map_or(Expect::Skipped, |items| Expect::Typed(items, report)),
                            },
                            _ => Frame::Skipped,
                        }
                    }
                    (Expect::Untyped, _) if open == b'{' => {
                        Frame::Object(Object::typed(None, true, stack.is_empty()))
                    }
                    (Expect::Untyped, _) => Frame::Array {
                        index: 0,
                        items: Expect::Untyped,
                    },
                    _ => Frame::Skipped,
                };
                expect_key = matches!(frame, Frame::Object(_));
                stack.push(frame);
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object(_)) => expect_key = true,
                Some(Frame::Array { index, .. }) => *index += 1,
                _ => {}
            },
            _ => {}
        }
        i += 1;
    }
    found
}

/// What a patch produced, decoded as upstream decodes the patched JSON into the kind's Go type:
/// it must be an object of the same kind (a missing `kind` or `apiVersion` is filled in, as
/// upstream's decoder defaults them), fit the Go type, and nest no deeper than the limit. Every
/// refusal is upstream's 422 with one cause on the field `patch`; `shown` is the bad value the
/// cause carries (the patched JSON for JSON and merge patches, the patch for strategic ones).
///
/// The strict errors are `patch_errors`, those of the patch document itself (its duplicate keys),
/// then the unknown fields of the result: in the order of `written`, the result's bytes as
/// upstream's patch library writes them (JSON and merge patches of built-in kinds); otherwise in
/// the pruner's order, or `sorted` by their text, as the unstructured converter that decodes a
/// strategic merge patch's result sorts them.
pub fn decode_patched(
    api: &ApiResources,
    info: &ResourceInfo,
    mut patched: Value,
    fv: FieldValidation,
    (patch_errors, sorted): (Vec<String>, bool),
    shown: impl FnOnce(&Value) -> String,
    written: Option<&dyn Fn() -> Option<Vec<u8>>>,
) -> Result<(Value, Vec<String>), Status> {
    let api_version = info.api_version();
    let kind = info.kind.as_str();
    let mut written = Written {
        source: written,
        bytes: None,
    };
    let refuse = |shown: String, e: String| -> Status {
        invalid_status(
            "",
            "",
            "",
            &[FieldError::invalid(&FieldPath::new("patch"), shown, e)],
        )
    };
    if let Err(e) = check_depth(&patched) {
        return Err(refuse(written.show(&patched, shown), e));
    }
    if !patched.is_object() {
        let e = not_an_object(&patched);
        return Err(refuse(written.show(&patched, shown), e));
    }
    if let Err(e) = check_type_meta(&patched) {
        return Err(refuse(written.show(&patched, shown), e));
    }
    let group = api_version
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("core");
    let (sent_kind, sent_version) = (
        patched.kind().to_string(),
        patched.api_version().to_string(),
    );
    if !sent_kind.is_empty() && sent_kind != kind {
        let sent_short = sent_version.rsplit('/').next().unwrap_or_default();
        let e = format!(
            "converting ({sent_short}.{sent_kind}) to ({group}.{kind}): unknown conversion"
        );
        return Err(refuse(written.show(&patched, shown), e));
    }
    if !sent_version.is_empty() && sent_version != api_version {
        let e = format!(
            "no kind \"{kind}\" is registered for version \"{sent_version}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        );
        return Err(refuse(written.show(&patched, shown), e));
    }
    let go_types =
        ironplane_protobuf::check_go_types(&api_version, kind, &patched).and_then(|()| match info
            .unstructured
        {
            true => check_object_meta(api, &mut patched, &api_version, kind),
            false => Ok(()),
        });
    if let Err(e) = go_types {
        return Err(refuse(written.show(&patched, shown), e));
    }
    // The decoded object carries its type again, whatever the patch did to those two fields.
    patched["apiVersion"] = Value::from(api_version.clone());
    patched["kind"] = Value::from(kind);
    // A refusal shows the result as it was patched, unknown fields and all.
    let unpruned = (fv == FieldValidation::Strict).then(|| patched.clone());
    let mut unknown = strict_errors(
        api,
        &mut patched,
        &api_version,
        kind,
        info.unstructured,
        Found::default(),
    );
    if sorted {
        unknown.sort();
    }
    // Upstream's decoder meets a built-in's unknown fields in the order of the bytes its patch
    // library wrote, which sort only the objects a patch went through: scanned there, they come
    // in that order (with any key a patch's value gives twice).
    if !unknown.is_empty()
        && !info.unstructured
        && let Some(bytes) = written.bytes()
        && let Some(schemas) = api.schemas()
    {
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let root = schemas.root_for(group, version, kind);
        let scanned = strict_fields(bytes, root.map(|r| (schemas, r)));
        if !scanned.errors.is_empty() {
            unknown = scanned.errors;
        }
    }
    let mut errors = patch_errors;
    errors.append(&mut unknown);
    let warnings = match (fv, unpruned) {
        (FieldValidation::Ignore, _) => Vec::new(),
        (FieldValidation::Strict, Some(unpruned)) if !errors.is_empty() => {
            // Upstream's patcher refuses the strict decoding error as an invalid `patch`.
            return Err(refuse(
                written.show(&unpruned, shown),
                format!("strict decoding error: {}", errors.join(", ")),
            ));
        }
        _ => strict_decoding_warnings(&errors),
    };
    if info.unstructured {
        normalize_object_meta(api, &mut patched, &api_version, kind);
    }
    Ok((patched, warnings))
}

/// A patched object's bytes as upstream's patch library writes them (JSON and merge patches; see
/// `apimachinery::patch::json_patch_as_go_writes`): worked out at most once, and only for a
/// refusal, which shows them, or for unknown fields, whose order they decide.
struct Written<'a> {
    source: Option<&'a dyn Fn() -> Option<Vec<u8>>>,
    bytes: Option<Option<Vec<u8>>>,
}

impl Written<'_> {
    fn bytes(&mut self) -> Option<&[u8]> {
        let source = self.source;
        self.bytes
            .get_or_insert_with(|| source.and_then(|w| w()))
            .as_deref()
    }

    /// What a refusal shows of the patched object: its bytes, else `shown` of its value.
    fn show(&mut self, patched: &Value, shown: impl FnOnce(&Value) -> String) -> String {
        match self.bytes().map(std::str::from_utf8) {
            Some(Ok(text)) => text.to_string(),
            _ => shown(patched),
        }
    }
}

/// Drops fields the kind's schema does not know, as decoding into upstream's Go types does, and
/// reports them as the policy asks, after what decoding the body `found`. A JSON body scanned
/// beside its schema has its unknown fields in `found` already, in the body's order (pruning is
/// skipped when it has none); otherwise the pruner names them in its sorted order, which is
/// upstream's for JSON that Go wrote from a map (a YAML body, a patch's result), and a custom
/// resource's (`custom`) are put in its decoder's order.
fn checked_fields(
    api: &ApiResources,
    obj: &mut Value,
    api_version: &str,
    kind: &str,
    fv: FieldValidation,
    custom: bool,
    found: Found,
) -> Result<Vec<String>, Status> {
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let unknown = strict_errors(api, obj, api_version, kind, custom, found);
    match fv {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(strict_decoding_warnings(&unknown)),
        FieldValidation::Strict if unknown.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => {
            // Upstream's strictDecodingError: its errors joined by ", " (no brackets).
            let url_version = version;
            Err(Status::bad_request(format!(
                "{kind} in version \"{url_version}\" cannot be handled as a {kind}: strict decoding error: {}",
                unknown.join(", ")
            )))
        }
    }
}

/// The pruning half of [`checked_fields`]: the strict errors `found` while decoding, then those
/// the pruner finds (unless the scan already did).
fn strict_errors(
    api: &ApiResources,
    obj: &mut Value,
    api_version: &str,
    kind: &str,
    custom: bool,
    found: Found,
) -> Vec<String> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let Found {
        errors: mut unknown,
        unknown: scanned,
    } = found;
    if scanned != Some(false)
        && let Some(schemas) = api.schemas()
        && let Some(root) = schemas.root_for(group, version, kind)
    {
        let pruned = schemas.prune_unknown(root, obj);
        match (scanned, custom) {
            (Some(_), _) => {}
            (None, true) => unknown.extend(in_decoding_order(schemas, root, obj, pruned)),
            (None, false) => unknown.extend(pruned),
        }
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind shaped like the parts of the built-in API that decode differently: structs, a
    /// map, lists, a `RawExtension` (decodes itself) and a `JSONSchemaPropsOrBool` (decoded
    /// leniently), named as in the built-in document.
    fn schemas() -> Schemas {
        let ext = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1";
        Schemas::from_openapi_v2(&serde_json::json!({"definitions": {
            "Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                    "spec": {"type": "object", "properties": {
                        "restartPolicy": {"type": "string"},
                        "raw": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.runtime.RawExtension"},
                        "lenient": {"$ref": format!("#/definitions/{ext}.JSONSchemaPropsOrBool")},
                        "containers": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "ports": {"type": "array", "items": {"type": "object", "properties": {
                                "containerPort": {"type": "integer"}}}}}}}}},
                }
            },
            "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
            format!("{ext}.JSONSchemaPropsOrBool"): {},
            format!("{ext}.JSONSchemaProps"): {"type": "object", "properties": {
                "type": {"type": "string"}}},
        }}))
    }

    fn scan(body: &str) -> StrictFields {
        let s = schemas();
        let root = s.root_for("", "v1", "Thing").unwrap();
        strict_fields(body.as_bytes(), Some((&s, root)))
    }

    #[test]
    fn strict_errors_come_in_document_order() {
        // As kube-apiserver v1.36.2 answers this body: unknown and duplicate fields where the
        // decoder meets them, nested ones inside their parent, metadata where it is.
        let body = r#"{"zeta":1,"apiVersion":"v1","kind":"Thing",
            "spec":{"containers":[{"name":"c","zz":1,"ports":[{"containerPort":80,"q":1,"containerPort":81}]}],
                    "bogus":3,"restartPolicy":"Always","restartPolicy":"Never"},
            "metadata":{"name":"p","yy":1,"labels":{"a":"1","a":"2"},"name":"p"},"alpha":4,"alpha":5}"#;
        assert_eq!(
            scan(body),
            StrictFields {
                errors: [
                    r#"unknown field "zeta""#,
                    r#"unknown field "spec.containers[0].zz""#,
                    r#"unknown field "spec.containers[0].ports[0].q""#,
                    r#"duplicate field "spec.containers[0].ports[0].containerPort""#,
                    r#"unknown field "spec.bogus""#,
                    r#"duplicate field "spec.restartPolicy""#,
                    r#"unknown field "metadata.yy""#,
                    r#"duplicate field "metadata.labels.a""#,
                    r#"duplicate field "metadata.name""#,
                    r#"unknown field "alpha""#,
                ]
                .map(String::from)
                .to_vec(),
                unknown: true,
            }
        );
    }

    #[test]
    fn each_strict_error_is_said_once_and_nothing_below_an_unknown_or_opaque_field() {
        // A repeated unknown field is one unknown field (Go reports duplicates of fields it
        // decodes); a repeated struct is one duplicate, what is unknown in each copy is reported;
        // nothing inside an unknown field, a RawExtension or a leniently decoded value is.
        let body = r#"{"u":{"a":1,"a":2},"u":3,"metadata":{"x":1},"metadata":{"y":1,"x":1},"metadata":{},
            "spec":{"raw":{"a":1,"a":2},"lenient":{"type":"a","type":"b","nope":1}}}"#;
        assert_eq!(
            scan(body).errors,
            [
                r#"unknown field "u""#,
                r#"unknown field "metadata.x""#,
                r#"duplicate field "metadata""#,
                r#"unknown field "metadata.y""#,
            ]
        );
        // Go's decoder keeps at most 100.
        let many = (0..105)
            .map(|i| format!(r#""u{i:03}":1"#))
            .collect::<Vec<_>>();
        let found = scan(&format!("{{{}}}", many.join(",")));
        assert_eq!(found.errors.len(), STRICT_ERRORS_KEPT);
        assert_eq!(found.errors[99], r#"unknown field "u099""#);
    }

    #[test]
    fn the_scan_finds_what_the_pruner_drops() {
        // Pruning is skipped when the scan finds no unknown field, so the two must agree,
        // including below a leniently decoded value, where nothing is reported.
        let s = schemas();
        let root = s.root_for("", "v1", "Thing").unwrap();
        for body in [
            r#"{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"containers":[{"name":"c","ports":[{"containerPort":1}]}]}}"#,
            r#"{"spec":{"raw":{"anything":[{"goes":1}]},"lenient":true}}"#,
            r#"{"spec":{"lenient":{"type":"object","nope":1}}}"#,
            r#"{"spec":{"containers":[{"name":"c"},{"name":"d","bad":1}]}}"#,
            r#"{"metadata":{"name":"a","\u006eope":1}}"#,
        ] {
            let mut value: Value = serde_json::from_str(body).unwrap();
            let before = value.clone();
            s.prune_unknown(root, &mut value);
            let found = strict_fields(body.as_bytes(), Some((&s, root)));
            assert_eq!(found.unknown, value != before, "{body}");
        }
    }

    #[test]
    fn without_a_schema_only_duplicate_keys_are_named() {
        let body = br#"{"metadata":{"name":"a","name":"b","name":"c","x":"{\"name\":1}"},"spec":{"c":[{"n":1},{"n":1,"n":2}]}}"#;
        assert_eq!(
            strict_fields(body, None).errors,
            [
                r#"duplicate field "metadata.name""#,
                r#"duplicate field "spec.c[1].n""#
            ]
        );
        assert!(
            strict_fields(br#"{"a":{"b":1},"c":{"b":2}}"#, None)
                .errors
                .is_empty()
        );
        // Past a handful of keys duplicates are found by hashing; still in order.
        let keys = (0..40).map(|i| format!(r#""k{i}":1"#)).collect::<Vec<_>>();
        let body = format!(r#"{{{},"k3":2,"k39":2}}"#, keys.join(","));
        assert_eq!(
            strict_fields(body.as_bytes(), None).errors,
            [r#"duplicate field "k3""#, r#"duplicate field "k39""#]
        );
    }

    #[test]
    fn yaml_strict_errors_warn_once_per_line_they_list() {
        let errors = [
            "yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  line 12: key 1 already set in map",
            "error converting YAML to JSON: yaml: unmarshal errors:\n  line 3: key \"a\" already set in map",
            r#"unknown field "spec.x""#,
            "yaml: unmarshal errors: not a list",
        ]
        .map(String::from);
        assert_eq!(
            strict_decoding_warnings(&errors),
            [
                r#"line 5: key "name" already set in map"#,
                "line 12: key 1 already set in map",
                r#"line 3: key "a" already set in map"#,
                r#"unknown field "spec.x""#,
                "yaml: unmarshal errors: not a list",
            ]
        );
    }

    #[test]
    fn yaml_bodies_keep_the_last_duplicate_and_say_so_in_go_yamls_words() {
        let doc = yaml_to_json(b"a: 1\nb:\n  c: 2\n  c: 3\na: 4\n").unwrap();
        assert_eq!(doc.value, serde_json::json!({"a": 4, "b": {"c": 3}}));
        assert_eq!(
            doc.strict_error().unwrap(),
            "yaml: unmarshal errors:\n  line 4: key \"c\" already set in map\n  line 5: key \"a\" already set in map"
        );
        let err = yaml_to_json(b"a: {<<: 1}\n").unwrap_err();
        assert_eq!(
            err.message,
            "error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value"
        );
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            yaml_to_json(deep.as_bytes()).unwrap_err().message,
            format!(
                "error converting YAML to JSON: yaml: exceeded max depth of {MAX_OBJECT_DEPTH}"
            )
        );
    }
}
