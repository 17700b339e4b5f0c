//! ResourceQuota (upstream: plugin/pkg/admission/resourcequota): the last validating plugin.
//! A create or update in a namespace with ResourceQuotas is checked against their
//! `status.hard` and charged to their `status.used` before the object is stored: the quotas of
//! a namespace are read, checked and written one request at a time (a lock per namespace), and
//! each `status.used` write is conditional on the quota's resourceVersion and retried from a
//! fresh read on a conflict, as upstream's evaluator retries, so no two writers can both take
//! the last unit. As upstream, a charge stays if the object's own write then fails (the quota
//! controller gives it back on its next pass); a dry run is checked but not charged.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;

use crate::quota::check::{Refusal, Request, check_request};
use crate::quota::{Quotas, equals, evaluators, to_json};

use super::forbidden;

/// Tries of the status write after the first (upstream's `checkQuotas(..., 3)`).
const RETRIES: usize = 3;
/// How long a request waits for its namespace's turn (upstream's evaluation timeout).
const TIMEOUT: Duration = Duration::from_secs(10);

pub struct ResourceQuota {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
    pub quotas: Quotas,
}

#[async_trait]
impl ValidatingPlugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !matches!(attrs.operation, Operation::Create | Operation::Update)
            || attrs.namespace.is_empty()
            || (attrs.resource.group.is_empty() && attrs.resource.resource == "namespaces")
        {
            return Ok(());
        }
        let Some(evaluator) =
            evaluators::for_resource(&attrs.resource.group, &attrs.resource.resource)
        else {
            return Ok(());
        };
        if !evaluator.handles(attrs.operation, attrs.subresource, obj, attrs.old_object) {
            return Ok(());
        }
        let Some(store) = self
            .api
            .get()
            .and_then(|a| a.get("", "v1", "resourcequotas"))
            .cloned()
        else {
            return Ok(());
        };
        // A namespace without quotas costs a look at the cache and no lock.
        if self
            .quotas
            .list(&store, attrs.namespace, false)
            .await?
            .is_empty()
        {
            return Ok(());
        }
        let Ok(_turn) = tokio::time::timeout(TIMEOUT, self.quotas.lock(attrs.namespace)).await
        else {
            return Err(Status::internal("resource quota evaluation timed out"));
        };
        let mut quotas = self.quotas.list(&store, attrs.namespace, false).await?;
        if quotas.is_empty() {
            return Ok(());
        }
        // The object as it will be stored names its namespace.
        let mut object = obj.clone();
        if object.namespace().is_empty() {
            object.set_meta("namespace", attrs.namespace);
        }
        let mut last = None;
        for attempt in 0..=RETRIES {
            let req = Request {
                operation: attrs.operation,
                subresource: attrs.subresource,
                object: &object,
                old_object: attrs.old_object,
                now: chrono::Utc::now(),
            };
            let used = check_request(&quotas, &evaluator, &req).map_err(|r| match r {
                Refusal::Forbidden(why) => forbidden(attrs, obj, why),
                Refusal::Internal(why) => Status::internal(why),
            })?;
            if attrs.dry_run {
                return Ok(());
            }
            let mut failed = Vec::new();
            for (quota, used) in quotas.iter().zip(used) {
                if equals(
                    &crate::quota::from_json(quota.pointer("/status/used")),
                    &used,
                ) {
                    continue;
                }
                let mut next = quota.clone();
                next["status"]["used"] = to_json(&used);
                if let Err(e) = self.quotas.write_status(&store, next).await {
                    failed.push(quota.name().to_string());
                    last = Some(e);
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            if attempt == RETRIES {
                break;
            }
            // Only the quotas whose write lost are checked again, from a fresh read.
            quotas = self
                .quotas
                .list(&store, attrs.namespace, true)
                .await?
                .into_iter()
                .filter(|q| failed.iter().any(|f| f == q.name()))
                .collect();
        }
        Err(last.unwrap_or_else(|| Status::internal("quota status was not written")))
    }
}
