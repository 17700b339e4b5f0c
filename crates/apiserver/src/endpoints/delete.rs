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

/// DeleteOptions as upstream's delete handler reads them: from the body when there is one,
/// and then the query is not read at all; else from the query. Then `ValidateDeleteOptions`,
/// every error in one 422.
fn delete_options(req: &ApiRequest, q: &Query) -> Result<DeleteOptions, Status> {
    let mut opts = DeleteOptions {
        dry_run: q.dry_run,
        propagation_policy: q.propagation_policy.clone(),
        grace_period_seconds: q.grace_period_seconds,
        ignore_store_read_error: q.ignore_store_read_error,
        ..Default::default()
    };
    let mut dry_run_values = q.dry_run_values.clone();
    let mut orphan_dependents = None;
    if req.body.iter().any(|b| !b.is_ascii_whitespace()) {
        let ct = req
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let body = super::decode::parse(
            &req.body,
            super::negotiation::body_encoding(ct).unwrap_or(Encoding::Json),
        )?;
        opts = body_delete_options(&body)?;
        dry_run_values = strs(&body, "dryRun");
        orphan_dependents = body.get("orphanDependents").and_then(Value::as_bool);
    }
    validate_delete_options(&opts, &dry_run_values, orphan_dependents)?;
    // The deprecated `orphanDependents` stands for a propagation policy when none is given.
    if opts.propagation_policy.is_none()
        && let Some(orphan) = orphan_dependents
    {
        opts.propagation_policy = Some(if orphan { "Orphan" } else { "Background" }.into());
    }
    Ok(opts)
}

fn strs(body: &Value, field: &str) -> Vec<String> {
    body.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// A DeleteOptions body as the meta codecs decode it: of kind DeleteOptions (in any group's
/// version, for old clients) and of Go's types, else a 400 in the decoder's words.
fn body_delete_options(body: &Value) -> Result<DeleteOptions, Status> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && kind != "DeleteOptions" {
        let version = body
            .get("apiVersion")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .unwrap_or("v1");
        return Err(Status::bad_request(format!(
            "no kind \"{kind}\" is registered for version \"{version}\" in scheme \"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27\""
        )));
    }
    ironplane_protobuf::check_go_message(
        "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        body,
    )
    .map_err(Status::bad_request)?;
    let pre = body.get("preconditions");
    let pre_str = |field: &str| {
        pre.and_then(|p| p.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeleteOptions {
        dry_run: strs(body, "dryRun").iter().any(|v| v == "All"),
        propagation_policy: body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string),
        grace_period_seconds: body.get("gracePeriodSeconds").and_then(Value::as_i64),
        precondition_uid: pre_str("uid"),
        precondition_resource_version: pre_str("resourceVersion"),
        ignore_store_read_error: body
            .get("ignoreStoreReadErrorWithClusterBreakingPotential")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// Upstream's `ValidateDeleteOptions`: `orphanDependents` with a propagation policy, the policy's
/// values, `dryRun`'s, and the unsafe deletion alone.
fn validate_delete_options(
    opts: &DeleteOptions,
    dry_run_values: &[String],
    orphan_dependents: Option<bool>,
) -> Result<(), Status> {
    use apimachinery::validation::{FieldError, FieldPath, invalid_status};
    let mut errs = Vec::new();
    if let Some(p) = opts.propagation_policy.as_deref()
        && orphan_dependents.is_some()
    {
        errs.push(FieldError::invalid(
            &FieldPath::new("propagationPolicy"),
            Value::from(p),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    errs.extend(opts.propagation_policy_error());
    errs.extend(super::query::dry_run_error(dry_run_values));
    errs.extend(unsafe_delete_errors(opts));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid_status("meta.k8s.io", "DeleteOptions", "", &errs))
    }
}

/// `ValidateIgnoreStoreReadError`: the unsafe deletion goes with no other option.
fn unsafe_delete_errors(opts: &DeleteOptions) -> Vec<apimachinery::validation::FieldError> {
    use apimachinery::validation::{FieldError, FieldPath};
    if !opts.ignore_store_read_error {
        return Vec::new();
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
    errs
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
    response::list(api, &store.info, deleted, meta, n)
}
