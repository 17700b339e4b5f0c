//! The `scale` subresource: an `autoscaling/v1 Scale` view of `spec.replicas`,
//! `status.replicas` and the label selector of any kind that has them (Deployments,
//! ReplicaSets, StatefulSets, ReplicationControllers), and of custom resources at the paths their
//! CRD names (`ResourceInfo::scale_paths`).

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::labels::Selector;
use apimachinery::object::ObjectExt;
use apimachinery::patch::{PatchType, apply_json_patch, apply_merge_patch};
use http::StatusCode;
use serde_json::{Value, json};

use super::decode::decode_value;
use super::get::accept;
use super::negotiation::{View, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::fieldmanager::ScaleChange;
use crate::registry::{RegistryStore, Requester, ResourceInfo, UpdateOptions, WriteOptions};

/// The selector in its string form: from a `LabelSelector` (apps kinds) or a plain map
/// (ReplicationController).
fn selector_string(obj: &Value) -> String {
    let Some(sel) = obj.pointer("/spec/selector") else {
        return String::new();
    };
    let from_label_selector =
        sel.get("matchLabels").is_some() || sel.get("matchExpressions").is_some();
    let parsed = if from_label_selector {
        Selector::from_label_selector(sel)
    } else {
        Selector::from_label_selector(&json!({"matchLabels": sel}))
    };
    parsed.map(|s| s.to_string()).unwrap_or_default()
}

/// The replicas and selector of an object, at its kind's paths.
fn replicas_and_selector(info: &ResourceInfo, obj: &Value) -> (Value, Value, String) {
    let Some(paths) = &info.scale_paths else {
        return (
            obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0)),
            obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            selector_string(obj),
        );
    };
    let at = |p: &str| obj.pointer(p).filter(|v| !v.is_null()).cloned();
    (
        at(&paths.spec_replicas).unwrap_or(json!(0)),
        at(&paths.status_replicas).unwrap_or(json!(0)),
        paths
            .label_selector
            .as_deref()
            .and_then(|p| obj.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    )
}

/// Sets the value at a JSON pointer, creating the objects on the way.
fn set_at(obj: &mut Value, pointer: &str, value: Value) {
    let mut at = obj;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        let Some(m) = at.as_object_mut() else {
            return;
        };
        if i == parts.len() - 1 {
            m.insert((*part).to_string(), value);
            return;
        }
        at = m.entry((*part).to_string()).or_insert_with(|| json!({}));
    }
}

/// The `autoscaling/v1 Scale` of a parent object: what `/scale` answers, and what admission sees
/// of a write through it.
pub(crate) fn scale_of(info: &ResourceInfo, obj: &Value) -> Value {
    let (spec_replicas, status_replicas, selector) = replicas_and_selector(info, obj);
    let meta = obj.metadata();
    let pick = |f: &str| meta.and_then(|m| m.get(f)).cloned().unwrap_or(Value::Null);
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
            "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp"),
        },
        "spec": {"replicas": spec_replicas},
        "status": {"replicas": status_replicas, "selector": selector},
    })
}

fn replicas_of(scale: &Value) -> i64 {
    scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn set_replicas(info: &ResourceInfo, parent: &mut Value, replicas: i64) {
    match &info.scale_paths {
        Some(paths) => set_at(parent, &paths.spec_replicas, json!(replicas)),
        None => parent["spec"]["replicas"] = json!(replicas),
    }
}

/// A Scale as mutating admission left it, into its parent (upstream's
/// `scaleUpdatedObjectInfo`): the Scale is validated (`ValidateScale`), then its replicas are
/// the parent's.
pub(crate) fn apply_scale(
    info: &ResourceInfo,
    name: &str,
    parent: &mut Value,
    scale: &Value,
) -> Result<(), Status> {
    let replicas = replicas_of(scale);
    if replicas < 0 {
        return Err(Status::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![apimachinery::StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                field: "spec.replicas".into(),
            }],
        ));
    }
    set_replicas(info, parent, replicas);
    Ok(())
}

pub async fn get(
    _api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), &[View::Object])?;
    let q = Query::parse(&req.query)?;
    let obj = store
        .get(
            &req.info.namespace,
            &req.info.name,
            q.read_resource_version()?,
        )
        .await?;
    response::value(
        StatusCode::OK,
        &scale_of(&store.info, &obj.value().map_err(Status::internal)?),
        n,
    )
}

pub async fn update(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), &[View::Object])?;
    let q = Query::parse(&req.query)?;
    let is_put = req.method == http::Method::PUT;
    let incoming = if is_put {
        Some(decode_value(&req)?)
    } else {
        None
    };
    let ct = req
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let patch_type = PatchType::from_content_type(ct.split(';').next().unwrap_or("").trim());
    if !is_put && store.info.unstructured && matches!(patch_type, None | Some(PatchType::Strategic))
    {
        return Err(super::patch::custom_resource_patch_types());
    }
    if !is_put
        && !matches!(
            patch_type,
            Some(PatchType::Json | PatchType::Merge | PatchType::Strategic | PatchType::Apply)
        )
    {
        return Err(Status::unsupported_media_type(
            "415: Unsupported Media Type",
        ));
    }
    let apply = !is_put && patch_type == Some(PatchType::Apply);
    if apply {
        q.validate_write_options("PatchOptions", true)?;
    }
    let body = req.body.clone();
    let (config, strict_yaml) = if apply {
        super::patch::check_patch_document(PatchType::Apply, &body, q.field_validation)?
    } else {
        (None, None)
    };
    let managed_fields = super::managed_fields(api, &req, q.field_manager.as_deref());
    let force = q.force.unwrap_or(false);
    let mut updater = |current: Option<&Value>| -> Result<Value, Status> {
        let Some(current) = current else {
            return Err(Status::not_found(
                &store.info.group_resource(),
                &req.info.name,
            ));
        };
        let old_scale = scale_of(&store.info, current);
        let change = match (&incoming, patch_type, &config) {
            (Some(s), _, _) => ScaleChange::Update(s.clone()),
            (None, _, Some(config)) => ScaleChange::Apply { config, force },
            (None, Some(PatchType::Json), _) => {
                ScaleChange::Update(apply_json_patch(&old_scale, &body).map_err(|e| e.to_status())?)
            }
            // A Scale has no lists, so a strategic merge patch of it is a merge patch.
            (None, _, _) => ScaleChange::Update(
                apply_merge_patch(&old_scale, &body).map_err(|e| e.to_status())?,
            ),
        };
        let (new_scale, managed) =
            store.scale_write(managed_fields.as_ref(), current, old_scale, change)?;
        if apply {
            super::patch::applied_yaml_strictness(strict_yaml.as_deref(), q.field_validation)?;
        }
        // The replicas are checked once admission has seen the Scale (`apply_scale`).
        let mut parent = current.clone();
        set_replicas(&store.info, &mut parent, replicas_of(&new_scale));
        match managed {
            Some(entries) => parent.set_meta("managedFields", entries),
            None => {
                parent.remove_meta("managedFields");
            }
        }
        // An apply names no resourceVersion to hold to (the one it read is the parent's).
        match new_scale.resource_version() {
            rv if !apply && !rv.is_empty() && rv != current.resource_version() => Err(
                Status::stale_resource_version(&store.info.group_resource(), &req.info.name),
            ),
            _ => {
                parent.remove_meta("resourceVersion");
                Ok(parent)
            }
        }
    };
    let opts = UpdateOptions {
        write: WriteOptions {
            dry_run: q.dry_run,
            // The Scale's field manager records the write (`scale_write`).
            managed_fields: None,
        },
        // The parent is updated through its own strategy; admission sees a Scale.
        subresource: "scale".into(),
        is_put: false,
        force_allow_create: false,
    };
    let (updated, _) = store
        .update(
            &Requester { user: &req.user },
            &req.info.namespace,
            &req.info.name,
            &mut updater,
            &opts,
        )
        .await?;
    response::value(
        StatusCode::OK,
        &scale_of(&store.info, &updated.value().map_err(Status::internal)?),
        n,
    )
}
