//! PATCH: JSON patch, JSON merge patch and strategic merge patch, applied to the current object
//! inside the store's compare-and-swap loop, so a patch never loses a concurrent write.

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::patch::{
    PatchType, apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, go_json_type,
    json_patch_as_go_writes, merge_patch_as_go_writes,
};
use http::StatusCode;
use serde_json::Value;

use super::decode::{decode_patched, parse_json, strict_decoding_warnings, strict_fields};
use super::get::{OBJECT_VIEWS, accept};
use super::negotiation::negotiate;
use super::query::FieldValidation;
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{RegistryStore, Requester, UpdateOptions, WriteOptions};

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), OBJECT_VIEWS)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    let ct = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim();
    let patch_type = match PatchType::from_content_type(essence) {
        // A custom resource's handler names the patch types it takes, whatever it was sent.
        None | Some(PatchType::Strategic) if store.info.unstructured => {
            return Err(custom_resource_patch_types());
        }
        None => {
            // Upstream's answer to a patch type it does not know.
            let mut s = Status::unsupported_media_type("415: Unsupported Media Type");
            s.details = Some(Box::default());
            return Err(s);
        }
        Some(t) => t,
    };
    let apply = patch_type == PatchType::Apply;
    q.validate_write_options("PatchOptions", apply)?;
    let info = store.info.clone();
    let name = req.info.name.clone();
    let namespace = req.info.namespace.clone();
    let sub = req.info.subresource.clone();
    let body = req.body.clone();
    // The patch document is read once, before the update loop; a strategic merge patch and an
    // applied configuration are kept parsed, the others as bytes for their appliers. An applied
    // configuration's keys given twice are go-yaml's strict complaint, judged after the apply.
    let (patch_doc, strict_yaml) = check_patch_document(patch_type, &body, q.field_validation)?;
    // With Warn or Strict, upstream decodes a merge or strategic merge patch strictly into a map
    // first: its keys given twice are strict errors, before those of the patched object.
    let patch_errors = match (patch_type, q.field_validation) {
        (_, FieldValidation::Ignore) => Vec::new(),
        (PatchType::Merge | PatchType::Strategic, _) => strict_fields(&body, None).errors,
        _ => Vec::new(),
    };
    let managed_fields = super::managed_fields(api, &req, q.field_manager.as_deref());
    let force = q.force.unwrap_or(false);
    let mut updater = |current: Option<&Value>| -> Result<Value, Status> {
        if apply {
            // Server-side apply: a missing object is created from the applied configuration.
            let mf = managed_fields
                .as_ref()
                .ok_or_else(|| Status::internal("server-side apply needs the OpenAPI schemas"))?;
            let config = patch_doc.as_ref().unwrap_or(&Value::Null);
            let applied = store.apply(mf, &sub, current, config, force)?;
            // Upstream's applyPatcher checks the configuration with sigs.k8s.io/yaml's
            // `UnmarshalStrict` once the apply succeeded (an apply error wins): Strict refuses
            // it, Warn warns of each duplicate key.
            applied_yaml_strictness(strict_yaml.as_deref(), q.field_validation)?;
            return finish_patched(
                api,
                &info,
                &name,
                &namespace,
                current,
                applied,
                q.field_validation,
                (Vec::new(), false),
                |p| p.to_string(),
                None,
            );
        }
        let Some(current) = current else {
            return Err(Status::not_found(&info.group_resource(), &name));
        };
        let patched = match patch_type {
            PatchType::Json => apply_json_patch(current, &body).map_err(|e| e.to_status())?,
            PatchType::Merge => apply_merge_patch(current, &body).map_err(|e| e.to_status())?,
            PatchType::Strategic => {
                let schemas = api.schemas();
                let root = schemas.and_then(|s| s.root_for(&info.group, &info.version, &info.kind));
                let (Some(schemas), Some(root)) = (schemas, root) else {
                    let mut s = Status::unsupported_media_type("415: Unsupported Media Type");
                    s.details = Some(Box::default());
                    return Err(s);
                };
                apply_strategic_merge_patch(
                    current,
                    patch_doc.as_ref().unwrap_or(&Value::Null),
                    schemas,
                    Some(root),
                )
                .map_err(|e| e.to_status())?
            }
            PatchType::Apply => unreachable!("applied above"),
        };
        // Upstream shows the patched JSON in the error of a JSON or merge patch, as its patch
        // library wrote it from the current object's encoding, and the patch map (as Go prints
        // it) in that of a strategic merge patch.
        let written_as_go_writes = || -> Option<Vec<u8>> {
            let go_json = ironplane_protobuf::to_json(current);
            match patch_type {
                PatchType::Json => json_patch_as_go_writes(current, &go_json, &body),
                PatchType::Merge => {
                    let result = apply_merge_patch(current, &body).ok()?;
                    merge_patch_as_go_writes(&go_json, &body, &result)
                }
                _ => None,
            }
        };
        finish_patched(
            api,
            &info,
            &name,
            &namespace,
            Some(current),
            patched,
            q.field_validation,
            (patch_errors.clone(), patch_type == PatchType::Strategic),
            |patched| match patch_doc.as_ref() {
                Some(doc) => go_print(doc),
                None => patched.to_string(),
            },
            (patch_type != PatchType::Strategic).then_some(&written_as_go_writes),
        )
    };
    let opts = UpdateOptions {
        write: WriteOptions {
            dry_run: q.dry_run,
            // An apply records its own managed fields.
            managed_fields: if apply { None } else { managed_fields.clone() },
        },
        subresource: sub.clone(),
        is_put: false,
        force_allow_create: apply,
    };
    let (updated, created) = store
        .update(
            &Requester { user: &req.user },
            &req.info.namespace,
            &req.info.name,
            &mut updater,
            &opts,
        )
        .await?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    response::object(api, &store.info, code, &updated, n)
}

/// Upstream's 415 for a custom resource (or its scale) sent a patch type it does not take: the
/// three it does, in the CRD handler's order (checked against kube-apiserver v1.36.2).
pub(super) fn custom_resource_patch_types() -> Status {
    Status::unsupported_media_type(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )
}

/// What every patch does with its result: decoded as the kind's Go type (with the request's
/// field validation), the name and namespace checked against the URL, and a resourceVersion
/// kept from the stored object dropped (only a changed one is a precondition).
#[allow(clippy::too_many_arguments)]
fn finish_patched(
    api: &ApiResources,
    info: &crate::registry::ResourceInfo,
    name: &str,
    namespace: &str,
    current: Option<&Value>,
    patched: Value,
    fv: FieldValidation,
    (patch_errors, sorted): (Vec<String>, bool),
    shown: impl FnOnce(&Value) -> String,
    written: Option<&dyn Fn() -> Option<Vec<u8>>>,
) -> Result<Value, Status> {
    let (mut patched, found) = decode_patched(
        api,
        info,
        patched,
        fv,
        (patch_errors, sorted),
        shown,
        written,
    )?;
    crate::warning::add_all(found);
    // Upstream's checkName: the patched object keeps the URL's name and namespace.
    super::update::check_name(&patched, name)?;
    if !namespace.is_empty() && !patched.namespace().is_empty() && patched.namespace() != namespace
    {
        return Err(Status::bad_request(format!(
            "the namespace of the object ({}) does not match the namespace on the request ({namespace})",
            patched.namespace()
        )));
    }
    if current.is_some_and(|c| patched.resource_version() == c.resource_version()) {
        patched.remove_meta("resourceVersion");
    }
    Ok(patched)
}

/// What `fieldValidation` makes of go-yaml's strict complaint about an applied configuration
/// (`check_patch_document`'s second answer), once the apply succeeded: Strict refuses it, Warn
/// warns of each duplicate key.
pub(super) fn applied_yaml_strictness(
    strict_yaml: Option<&str>,
    fv: FieldValidation,
) -> Result<(), Status> {
    let Some(err) = strict_yaml else {
        return Ok(());
    };
    let err = format!("error converting YAML to JSON: {err}");
    match fv {
        FieldValidation::Strict => Err(Status::bad_request(format!(
            "error strict decoding YAML: {err}"
        ))),
        FieldValidation::Warn => {
            crate::warning::add_all(strict_decoding_warnings(&[err]));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Reads the patch document as upstream does before applying it: with `fieldValidation` Warn or
/// Strict, JSON and merge patches are decoded into their Go shapes (a list of operations, a
/// map) and refused with `error decoding patch: ...`; a strategic merge patch is always decoded
/// into a map, an applied configuration (YAML) too, as sigs.k8s.io/yaml's `Unmarshal` reads it
/// (the last of duplicate keys wins, merge keys merge). Returns the parsed strategic patch or
/// applied configuration and, for the latter under Warn or Strict, go-yaml's strict complaint
/// about its duplicate keys.
pub(super) fn check_patch_document(
    patch_type: PatchType,
    body: &[u8],
    fv: FieldValidation,
) -> Result<(Option<Value>, Option<String>), Status> {
    if patch_type == PatchType::Apply {
        let doc = apimachinery::yaml::to_json(body).map_err(|e| {
            let text = e.to_string();
            match text.contains(apimachinery::yaml::MERGE_NOT_MAP) {
                // go-yaml's fatal error, as sigs.k8s.io/yaml's `Unmarshal` wraps it.
                true => Status::bad_request(format!(
                    "error decoding YAML: error converting YAML to JSON: yaml: {}",
                    apimachinery::yaml::MERGE_NOT_MAP
                )),
                false => Status::bad_request(format!("error decoding YAML: {text}")),
            }
        })?;
        let strict = match fv {
            FieldValidation::Ignore => None,
            _ => doc.strict_error(),
        };
        return match doc.value {
            doc @ Value::Object(_) => Ok((Some(doc), strict)),
            other => Err(Status::bad_request(format!(
                "error decoding YAML: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_type(&other)
            ))),
        };
    }
    check_other_patch_document(patch_type, body, fv).map(|doc| (doc, None))
}

/// [`check_patch_document`] for the patch types that are JSON.
fn check_other_patch_document(
    patch_type: PatchType,
    body: &[u8],
    fv: FieldValidation,
) -> Result<Option<Value>, Status> {
    let kind = go_json_type;
    let checked = fv != FieldValidation::Ignore;
    let decoding = |e: String| Status::bad_request(format!("error decoding patch: {e}"));
    match patch_type {
        PatchType::Json if checked => {
            let doc = parse_json(body).map_err(decoding)?;
            let ops = match &doc {
                Value::Array(ops) => ops,
                Value::Null => return Ok(None),
                other => {
                    return Err(decoding(format!(
                        "json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                        kind(other)
                    )));
                }
            };
            for op in ops {
                let Value::Object(fields) = op else {
                    if op.is_null() {
                        continue;
                    }
                    return Err(decoding(format!(
                        "json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp",
                        kind(op)
                    )));
                };
                for key in ["op", "path", "from"] {
                    if let Some(v) = fields.get(key).filter(|v| !v.is_string() && !v.is_null()) {
                        return Err(decoding(format!(
                            "json: cannot unmarshal {} into Go struct field jsonPatchOp.{key} of type string",
                            kind(v)
                        )));
                    }
                }
            }
            Ok(None)
        }
        PatchType::Merge if checked => match parse_json(body).map_err(decoding)? {
            Value::Object(_) | Value::Null => Ok(None),
            other => Err(decoding(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                kind(&other)
            ))),
        },
        PatchType::Strategic => match parse_json(body).map_err(Status::bad_request)? {
            doc @ (Value::Object(_) | Value::Null) => Ok(Some(doc)),
            other => Err(Status::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                kind(&other)
            ))),
        },
        _ => Ok(None),
    }
}

/// A JSON value as Go's `fmt` prints the `map[string]interface{}` it decodes into with `%+v`:
/// `map[data:map[a:5]]`, keys sorted, lists as `[a b]`, null as `<nil>`.
fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_print).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}
