//! DELETE of one object, and of a collection (deletecollection).

use std::sync::Arc;

use apimachinery::status::success_status;
use apimachinery::{Status, StatusDetails};
use http::StatusCode;
use serde_json::Value;
use storage::ListOptions;

use super::get::{OBJECT_VIEWS, accept};
use super::list::predicate;
use super::negotiation::{Encoding, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{DeleteOptions, DeleteOutcome, RegistryStore, Requester};

/// DeleteOptions from the query and, if present, the body (the body wins, as upstream reads it
/// after the query).
fn delete_options(req: &ApiRequest, q: &Query) -> Result<DeleteOptions, Status> {
    if let Some(e) = q.validate_dry_run() {
        return Err(apimachinery::validation::invalid_status(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &[e],
        ));
    }
    let mut opts = DeleteOptions {
        dry_run: q.dry_run,
        propagation_policy: q.propagation_policy.clone(),
        grace_period_seconds: q.grace_period_seconds,
        ignore_store_read_error: q.ignore_store_read_error,
        ..Default::default()
    };
    if req.body.iter().any(|b| !b.is_ascii_whitespace()) {
        let ct = req
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let body = super::decode::parse(
            &req.body,
            super::negotiation::body_encoding(ct).unwrap_or(Encoding::Json),
        )?;
        if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
            opts.propagation_policy = Some(p.to_string());
        } else if let Some(orphan) = body.get("orphanDependents").and_then(Value::as_bool) {
            opts.propagation_policy =
                Some(if orphan { "Orphan" } else { "Background" }.to_string());
        }
        if let Some(g) = body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            opts.grace_period_seconds = Some(g);
        }
        if let Some(pre) = body.get("preconditions") {
            opts.precondition_uid = pre.get("uid").and_then(Value::as_str).map(str::to_string);
            opts.precondition_resource_version = pre
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(dr) = body.get("dryRun").and_then(Value::as_array) {
            opts.dry_run |= dr.iter().any(|v| v == "All");
        }
        if let Some(ignore) = body
            .get("ignoreStoreReadErrorWithClusterBreakingPotential")
            .and_then(Value::as_bool)
        {
            opts.ignore_store_read_error = ignore;
        }
    }
    validate_unsafe_delete(&opts)?;
    Ok(opts)
}

/// Upstream's `ValidateDeleteOptions` for the unsafe deletion: it goes with no other option.
fn validate_unsafe_delete(opts: &DeleteOptions) -> Result<(), Status> {
    use apimachinery::validation::{FieldError, FieldPath, invalid_status};
    if !opts.ignore_store_read_error {
        return Ok(());
    }
    let with = |field: &str| {
        FieldError::forbidden(
            &FieldPath::new(field),
            "cannot be set together with ignoreStoreReadErrorWithClusterBreakingPotential",
        )
    };
    let mut errs = Vec::new();
    if opts.dry_run {
        errs.push(with("dryRun"));
    }
    if opts.propagation_policy.is_some() {
        errs.push(with("propagationPolicy"));
    }
    if opts.grace_period_seconds.is_some() {
        errs.push(with("gracePeriodSeconds"));
    }
    if opts.precondition_uid.is_some() || opts.precondition_resource_version.is_some() {
        errs.push(with("preconditions"));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid_status("meta.k8s.io", "DeleteOptions", "", &errs))
    }
}

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), OBJECT_VIEWS)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    let opts = delete_options(&req, &q)?;
    let outcome = store
        .delete(
            &Requester { user: &req.user },
            &req.info.namespace,
            &req.info.name,
            &opts,
        )
        .await?;
    match outcome {
        DeleteOutcome::Pending(obj) => response::object(api, &store.info, StatusCode::OK, &obj, n),
        DeleteOutcome::DeletedUnreadable => {
            let details = StatusDetails {
                name: req.info.name.clone(),
                group: store.info.group.clone(),
                kind: store.info.resource.clone(),
                ..Default::default()
            };
            response::value(StatusCode::OK, &success_status(Some(details)), n)
        }
        DeleteOutcome::Deleted(obj) if store.info.return_deleted_object => {
            response::object(api, &store.info, StatusCode::OK, &obj, n)
        }
        DeleteOutcome::Deleted(obj) => {
            // Upstream answers a finished delete with a Status of success naming the object, so
            // that clients can tell it from one that waits for finalizers.
            let v = obj.value().map_err(Status::internal)?;
            let details = StatusDetails {
                name: req.info.name.clone(),
                group: store.info.group.clone(),
                kind: store.info.resource.clone(),
                uid: v
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                ..Default::default()
            };
            response::value(StatusCode::OK, &success_status(Some(details)), n)
        }
    }
}

pub async fn handle_collection(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), &[super::negotiation::View::Object])?;
    let q = Query::parse(&req.query)?;
    let opts = delete_options(&req, &q)?;
    let list = store
        .list(
            &req.info.namespace,
            &ListOptions {
                predicate: predicate(&store.info, &q)?,
                ..ListOptions::default()
            },
        )
        .await?;
    let requester = Requester { user: &req.user };
    let mut deleted = Vec::with_capacity(list.items.len());
    for item in &list.items {
        let v = item.value().map_err(Status::internal)?;
        let ns = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match store.delete(&requester, ns, name, &opts).await {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => deleted.push(o),
            // Listed objects were readable; one that is not any more has nothing to show.
            Ok(DeleteOutcome::DeletedUnreadable) => {}
            // Deleted by someone else meanwhile: that is what we wanted.
            Err(s) if s.code == 404 => {}
            Err(s) => return Err(s),
        }
    }
    let meta = response::list_metadata(list.resource_version, None, None);
    response::list(api, &store.info, &deleted, meta, n)
}
