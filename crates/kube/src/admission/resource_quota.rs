//! ResourceQuota (upstream: plugin/pkg/admission/resourcequota): the last validating plugin.
//! A create or update in a namespace with ResourceQuotas is checked against their
//! `status.hard` and charged to their `status.used` before the object is stored: the quotas of
//! a namespace are read, checked and written one request at a time (a lock per namespace), and
//! each `status.used` write is conditional on the quota's resourceVersion and retried from a
//! fresh read on a conflict, as upstream's evaluator retries, so no two writers can both take
//! the last unit. As upstream, a charge stays if the object's own write then fails (the quota
//! controller gives it back on its next pass); a dry run is checked but not charged.
//!
//! The plugin's configuration (`ResourceQuotaConfiguration` in `--admission-control-config-file`)
//! names `limitedResources`: consumption that needs a covering quota, so that with it even a
//! namespace without quotas is checked.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;

use crate::quota::check::{LimitedResource, Refusal, Request, check_request};
use crate::quota::resource_claims::verified_pod_usages;
use crate::quota::{Quotas, ScopeSelector, equals, evaluators, to_json};

use super::config::{check_type, strict};
use super::forbidden;

/// Tries of the status write after the first (upstream's `checkQuotas(..., 3)`).
const RETRIES: usize = 3;
/// How long a request waits for its namespace's turn (upstream's evaluation timeout).
const TIMEOUT: Duration = Duration::from_secs(10);

pub struct ResourceQuota {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
    pub quotas: Quotas,
    pub limited: Vec<LimitedResource>,
}

/// The plugin's configuration (`LoadConfiguration` and `ValidateConfiguration`): strict, in
/// `apiserver.config.k8s.io/v1` (`ResourceQuotaConfiguration`) or
/// `resourcequota.admission.k8s.io/v1beta1` and `v1alpha1` (`Configuration`). None configures
/// nothing.
pub fn limited_resources(config: Option<&Value>) -> Result<Vec<LimitedResource>, String> {
    let Some(config) = config else {
        return Ok(Vec::new());
    };
    let obj = config
        .as_object()
        .ok_or("expected a ResourceQuotaConfiguration object")?;
    if let Err(e) = check_type(
        obj,
        "ResourceQuotaConfiguration",
        &["apiserver.config.k8s.io/v1"],
    ) {
        check_type(
            obj,
            "Configuration",
            &[
                "resourcequota.admission.k8s.io/v1beta1",
                "resourcequota.admission.k8s.io/v1alpha1",
            ],
        )
        .map_err(|_| e)?;
    }
    strict(obj, &["apiVersion", "kind", "limitedResources"], "")?;
    let strings = |v: Option<&Value>, path: &str| -> Result<Vec<String>, String> {
        match v {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(String::from)
                        .ok_or_else(|| format!("{path}: expected a list of strings"))
                })
                .collect(),
            Some(_) => Err(format!("{path}: expected a list of strings")),
        }
    };
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let entries = match obj.get("limitedResources") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err("limitedResources: expected a list".into()),
    };
    for (i, l) in entries.iter().enumerate() {
        let at = format!("limitedResources[{i}]");
        let l = l.as_object().ok_or(format!("{at}: expected an object"))?;
        strict(
            l,
            &["apiGroup", "resource", "matchContains", "matchScopes"],
            &format!("{at}."),
        )?;
        let text = |f: &str| l.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let mut scopes = Vec::new();
        for (j, s) in l
            .get("matchScopes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let field = |f: &str| s.get(f).and_then(Value::as_str).unwrap_or("").to_string();
            scopes.push(ScopeSelector {
                scope: field("scopeName"),
                operator: field("operator"),
                values: strings(s.get("values"), &format!("{at}.matchScopes[{j}].values"))?,
            });
        }
        let entry = LimitedResource {
            api_group: text("apiGroup"),
            resource: text("resource"),
            match_contains: strings(l.get("matchContains"), &format!("{at}.matchContains"))?,
            match_scopes: scopes,
        };
        if entry.resource.is_empty() {
            errs.push(format!("{at}.resource: Required value"));
        }
        out.push(entry);
    }
    match errs.as_slice() {
        [] => Ok(out),
        [one] => Err(one.clone()),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
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
        let Some(evaluator) = self
            .quotas
            .evaluator(&attrs.resource.group, &attrs.resource.resource)
        else {
            return Ok(());
        };
        if !evaluator.handles(attrs.operation, attrs.subresource, obj, attrs.old_object) {
            return Ok(());
        }
        let Some(api) = self.api.get() else {
            return Ok(());
        };
        let Some(store) = api.get("", "v1", "resourcequotas").cloned() else {
            return Ok(());
        };
        // A namespace without quotas costs a look at the cache and no lock, unless the
        // configuration limits consumption to what quotas cover.
        if self.limited.is_empty()
            && self
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
        if quotas.is_empty() && self.limited.is_empty() {
            return Ok(());
        }
        // The object as it will be stored names its namespace.
        let mut object = obj.clone();
        if object.namespace().is_empty() {
            object.set_meta("namespace", attrs.namespace);
        }
        // What a DRA extended resource claim's Pod already counts, looked up once: it does not
        // depend on the quotas a retry reads again.
        let (owner_usage, old_owner_usage) =
            if matches!(evaluator, evaluators::Evaluator::ResourceClaims(_)) {
                verified_pod_usages(&object, attrs.old_object, api, chrono::Utc::now()).await
            } else {
                (None, None)
            };
        let mut last = None;
        for attempt in 0..=RETRIES {
            let req = Request {
                operation: attrs.operation,
                group: &attrs.resource.group,
                resource: &attrs.resource.resource,
                subresource: attrs.subresource,
                object: &object,
                old_object: attrs.old_object,
                now: chrono::Utc::now(),
                limited: &self.limited,
                owner_usage: owner_usage.as_ref(),
                old_owner_usage: old_owner_usage.as_ref(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configurations_are_read_strictly() {
        let v1 = json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
            "limitedResources": [{"resource": "pods", "matchContains": ["cpu"],
                "matchScopes": [{"scopeName": "PriorityClass", "operator": "In", "values": ["critical"]}]}]});
        let got = limited_resources(Some(&v1)).unwrap();
        assert_eq!(
            got,
            vec![LimitedResource {
                api_group: String::new(),
                resource: "pods".into(),
                match_contains: vec!["cpu".into()],
                match_scopes: vec![ScopeSelector {
                    scope: "PriorityClass".into(),
                    operator: "In".into(),
                    values: vec!["critical".into()],
                }],
            }]
        );
        let beta = json!({"apiVersion": "resourcequota.admission.k8s.io/v1beta1", "kind": "Configuration",
            "limitedResources": [{"apiGroup": "", "resource": "persistentvolumeclaims", "matchContains": [".storageclass.storage.k8s.io/requests.storage"]}]});
        assert_eq!(limited_resources(Some(&beta)).unwrap().len(), 1);
        assert_eq!(limited_resources(None).unwrap(), vec![]);
        assert_eq!(
            limited_resources(Some(
                &json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
                "limitedResources": [{"matchContains": ["cpu"]}]})
            )),
            Err("limitedResources[0].resource: Required value".into())
        );
        assert_eq!(
            limited_resources(Some(
                &json!({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
                "limitedResources": [{"resource": "pods", "matchContain": ["cpu"]}]})
            )),
            Err("strict decoding error: unknown field \"limitedResources[0].matchContain\"".into())
        );
        assert!(
            limited_resources(Some(&json!({"apiVersion": "v1", "kind": "Configuration"}))).is_err()
        );
    }
}
