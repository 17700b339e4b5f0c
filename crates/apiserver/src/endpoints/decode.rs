//! Request bodies → JSON objects: the negotiated encoding, apiVersion/kind checks against the
//! URL, and unknown-field handling per `fieldValidation`. Messages follow upstream's decoder.

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use serde_json::Value;

use super::negotiation::{Encoding, body_encoding};
use super::query::FieldValidation;
use super::{ApiRequest, ApiResources};
use crate::registry::ResourceInfo;

/// Decodes a body in the request's Content-Type into JSON.
pub fn decode_value(req: &ApiRequest) -> Result<Value, Status> {
    let ct = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let encoding = body_encoding(ct)?;
    parse(&req.body, encoding)
}

/// Parses bytes of a known encoding, for bodies and patches alike.
pub fn parse(body: &[u8], encoding: Encoding) -> Result<Value, Status> {
    match encoding {
        Encoding::Json => {
            serde_json::from_slice(body).map_err(|e| Status::bad_request(json_error(body, &e)))
        }
        Encoding::Yaml => yaml_to_json(body),
        Encoding::Protobuf => {
            ironplane_protobuf::decode(body).map_err(|e| Status::bad_request(e.to_string()))
        }
    }
}

fn json_error(body: &[u8], e: &serde_json::Error) -> String {
    let shown = String::from_utf8_lossy(&body[..body.len().min(256)]);
    let what = if e.is_eof() {
        "unexpected end of JSON input".to_string()
    } else {
        e.to_string()
    };
    format!("couldn't get version/kind; json parse error: {what} ({shown})")
}

pub fn yaml_to_json(body: &[u8]) -> Result<Value, Status> {
    let v: Value = serde_yaml_ng::from_slice(body)
        .map_err(|e| Status::bad_request(format!("error converting YAML to JSON: yaml: {e}")))?;
    Ok(v)
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
    let mut obj = match decode_value(req) {
        Ok(v) => v,
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
            "the object provided is unrecognized (must be of type {expected_kind}): couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
            json_type(&obj)
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
    } else if api_version != expected_api_version {
        return Err(Status::bad_request(format!(
            "{expected_kind} in version \"{url_version}\" cannot be handled as a {expected_kind}: no kind \"{expected_kind}\" is registered for version \"{api_version}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    }
    let warnings = prune_unknown_fields(api, &mut obj, &expected_api_version, &expected_kind, fv)?;
    Ok((obj, warnings))
}

/// Drops fields the kind's schema does not know, as decoding into upstream's Go types does, and
/// reports them as the policy asks.
pub fn prune_unknown_fields(
    api: &ApiResources,
    obj: &mut Value,
    api_version: &str,
    kind: &str,
    fv: FieldValidation,
) -> Result<Vec<String>, Status> {
    let Some(schemas) = api.schemas() else {
        return Ok(Vec::new());
    };
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let Some(root) = schemas.root_for(group, version, kind) else {
        return Ok(Vec::new());
    };
    let unknown = schemas.prune_unknown(root, obj);
    match fv {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(unknown),
        FieldValidation::Strict if unknown.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => {
            let url_version = version;
            let detail = if unknown.len() == 1 {
                unknown[0].clone()
            } else {
                format!("[{}]", unknown.join(", "))
            };
            Err(Status::bad_request(format!(
                "{kind} in version \"{url_version}\" cannot be handled as a {kind}: strict decoding error: {detail}"
            )))
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
