//! POST: create an object in a collection.

use std::sync::Arc;

use apimachinery::Status;
use http::StatusCode;

use super::decode::decode_object;
use super::get::{OBJECT_VIEWS, accept};
use super::negotiation::negotiate;
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{RegistryStore, Requester, WriteOptions};

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), OBJECT_VIEWS)?;
    let q = Query::parse(&req.query)?;
    let (obj, warnings) = decode_object(api, &req, &store.info, None, q.field_validation)?;
    let requester = Requester { user: &req.user };
    if let Some(answer) = store.strategy.create_without_storage(&obj, &req.user).await {
        // Reviews and other create-only kinds answer without storing anything.
        let v = answer?;
        return Ok(response::with_warnings(
            response::value(StatusCode::CREATED, &v, n)?,
            &warnings,
        ));
    }
    let created = store
        .create(
            &requester,
            &req.info.namespace,
            obj,
            &WriteOptions { dry_run: q.dry_run },
        )
        .await?;
    Ok(response::with_warnings(
        response::object(api, &store.info, StatusCode::CREATED, &created, n)?,
        &warnings,
    ))
}
