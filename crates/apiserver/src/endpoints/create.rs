//! POST: create an object in a collection.

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use http::StatusCode;

use super::decode::decode_object;
use super::get::{OBJECT_VIEWS, accept};
use super::negotiation::{View, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{RegistryStore, Requester, WriteOptions};

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    // Kinds that are only ever created (reviews) have no table printer upstream, which then
    // refuses a Table before reading the body (406), as for any kind without one.
    let create_only = store.info.verbs.iter().all(|v| v == "create");
    let views: &[View] = if create_only {
        &[View::Object, View::PartialObjectMetadata]
    } else {
        OBJECT_VIEWS
    };
    let n = negotiate(accept(&req), views)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    q.validate_write_options("CreateOptions", false)?;
    let (mut obj, warnings) = decode_object(api, &req, &store.info, None, q.field_validation)?;
    crate::warning::add_all(warnings);
    crate::audit::log_request_object(&obj);
    if store.info.namespaced && obj.namespace().is_empty() {
        // The URL's namespace, before anyone reads the object: create-only kinds (bindings)
        // see it as stored kinds do.
        obj.set_meta("namespace", req.info.namespace.clone());
    }
    let requester = Requester { user: &req.user };
    if store.info.verbs.iter().all(|v| v == "create") {
        // What is never stored takes the request's Go form here, as a stored kind's create
        // takes it after defaulting; upstream's create handler takes managed fields before the
        // review answers.
        crate::registry::request_form(&mut obj);
        if let Some(mf) = super::managed_fields(api, &req, q.field_manager.as_deref()) {
            store.track_update(&mf, "", None, &mut obj);
        }
        let name = obj.name().to_string();
        store
            .admit_create_without_storage(
                &requester,
                &req.info.namespace,
                &name,
                "",
                &mut obj,
                q.dry_run,
            )
            .await?;
    }
    if let Some(answer) = store
        .strategy
        .create_without_storage(&obj, &req.user, q.dry_run)
        .await
    {
        // Reviews and other create-only kinds answer without storing anything.
        let mut v = answer?;
        if n.view == View::PartialObjectMetadata {
            v = serde_json::json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": format!("meta.k8s.io/{}", n.view_version),
                "metadata": v.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
            });
        }
        return response::value(StatusCode::CREATED, &v, n);
    }
    let created = store
        .create(
            &requester,
            &req.info.namespace,
            obj,
            &WriteOptions {
                dry_run: q.dry_run,
                managed_fields: super::managed_fields(api, &req, q.field_manager.as_deref()),
            },
        )
        .await?;
    response::object(api, &store.info, StatusCode::CREATED, &created, n)
}

/// POST on a subresource of an existing object (e.g. `pods/<name>/binding`): the strategy
/// turns the body into a change of the object, applied like any update (compare-and-swap,
/// validation, admission); the answer is a Status of success, as upstream's.
pub async fn handle_subresource(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), &[super::negotiation::View::Object])?;
    let q = Query::parse(&req.query)?;
    q.validate_write_options("CreateOptions", false)?;
    let sub = store
        .info
        .subresource(&req.info.subresource)
        .cloned()
        .ok_or_else(Status::path_not_found)?;
    let api_version = if sub.group.is_empty() && sub.version.is_empty() {
        store.info.api_version()
    } else {
        apimachinery::GroupVersion::new(sub.group.clone(), sub.version.clone()).api_version()
    };
    let (body, warnings) = decode_object(
        api,
        &req,
        &store.info,
        Some((&api_version, &sub.kind)),
        q.field_validation,
    )?;
    crate::warning::add_all(warnings);
    let mut body = body;
    crate::audit::log_request_object(&body);
    store
        .admit_create_without_storage(
            &Requester { user: &req.user },
            &req.info.namespace,
            &req.info.name,
            &sub.name,
            &mut body,
            q.dry_run,
        )
        .await?;
    if let Some(answer) = store
        .strategy
        .serve_subresource_create(
            &sub.name,
            &req.info.namespace,
            &req.info.name,
            &body,
            &req.user,
            q.dry_run,
        )
        .await
    {
        return response::value(StatusCode::CREATED, &answer?, n);
    }
    let strategy = store.strategy.clone();
    let mut updater = |current: Option<&serde_json::Value>| match current {
        Some(current) => strategy.create_on_subresource(&sub.name, &body, current),
        None => Err(Status::not_found(
            &store.info.group_resource(),
            &req.info.name,
        )),
    };
    let opts = crate::registry::UpdateOptions {
        write: WriteOptions {
            dry_run: q.dry_run,
            managed_fields: super::managed_fields(api, &req, q.field_manager.as_deref()),
        },
        subresource: sub.name.clone(),
        is_put: false,
        force_allow_create: false,
    };
    store
        .update(
            &Requester { user: &req.user },
            &req.info.namespace,
            &req.info.name,
            &mut updater,
            &opts,
        )
        .await?;
    let status = apimachinery::status::created_status();
    response::value(StatusCode::CREATED, &status, n)
}
