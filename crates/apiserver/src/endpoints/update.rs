//! PUT: replace an object (or its `/status`).

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use http::StatusCode;

use super::decode::decode_object;
use super::get::{OBJECT_VIEWS, accept};
use super::negotiation::negotiate;
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{RegistryStore, Requester, UpdateOptions, WriteOptions};

/// Upstream's `checkName` for a PUT or a PATCH: the object names the URL's object.
pub(super) fn check_name(obj: &serde_json::Value, name: &str) -> Result<(), Status> {
    match obj.name() {
        "" => Err(Status::bad_request(format!(
            "the name of the object ({name} based on URL) was undeterminable: name must be provided"
        ))),
        n if n != name => Err(Status::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), OBJECT_VIEWS)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    q.validate_write_options("UpdateOptions", false)?;
    let (obj, warnings) = decode_object(api, &req, &store.info, None, q.field_validation)?;
    crate::warning::add_all(warnings);
    crate::audit::log_request_object(&obj);
    let name = &req.info.name;
    check_name(&obj, name)?;
    if store.info.namespaced && !obj.namespace().is_empty() && obj.namespace() != req.info.namespace
    {
        return Err(Status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let opts = UpdateOptions {
        write: WriteOptions {
            dry_run: q.dry_run,
            managed_fields: super::managed_fields(api, &req, q.field_manager.as_deref()),
        },
        subresource: req.info.subresource.clone(),
        is_put: true,
        force_allow_create: false,
    };
    let mut updater = |_: Option<&serde_json::Value>| Ok(obj.clone());
    let (updated, created) = store
        .update(
            &Requester { user: &req.user },
            &req.info.namespace,
            name,
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
