//! GET of one object (and of `/status`, which reads the same object).

use std::sync::Arc;

use apimachinery::Status;
use http::StatusCode;

use super::negotiation::{View, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::RegistryStore;

pub const OBJECT_VIEWS: &[View] = &[View::Object, View::Table, View::PartialObjectMetadata];

pub fn accept(req: &ApiRequest) -> Option<&str> {
    req.headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
}

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), OBJECT_VIEWS)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    let obj = store
        .get(
            &req.info.namespace,
            &req.info.name,
            q.read_resource_version()?,
        )
        .await?;
    response::object(api, &store.info, StatusCode::OK, &obj, n)
}
