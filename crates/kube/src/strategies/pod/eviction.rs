//! `pods/eviction` (pkg/registry/core/pod/storage/eviction.go): a create of a policy/v1
//! Eviction that deletes the pod when its disruption budget allows it. An eviction may not ask
//! to ignore store read errors. A pod that is pending, finished or already being deleted goes
//! at once; otherwise the one PodDisruptionBudget that selects it must allow a disruption,
//! which the eviction takes (`disruptionsAllowed` goes down, the pod is listed in
//! `disruptedPods`) before the delete, unless the pod is unready and the budget lets unhealthy
//! pods go (AlwaysAllow, or a met budget). Before its delete the pod gets the DisruptionTarget
//! condition through a status write.

use std::sync::Arc;

use apimachinery::labels::Selector;
use apimachinery::object::{JsonPointer, ObjectExt};
use apimachinery::validation::{FieldError, FieldPath, invalid_status};
use apimachinery::{GroupResource, Status, StatusCause};
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, Requester, UpdateOptions, WriteOptions};
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion};

/// `createTooManyRequestsError` and the budget refusal: 429 with a DisruptionBudget cause.
fn too_many_requests(retry_after: i32, cause: String) -> Status {
    let mut s = Status::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        retry_after,
    );
    if let Some(d) = s.details.as_mut() {
        d.causes.push(StatusCause {
            reason: "DisruptionBudget".into(),
            message: cause,
            field: String::new(),
        });
    }
    s
}

/// The delete options an Eviction carries, with the request's dry run.
fn delete_options(eviction: &Value, dry_run: bool) -> DeleteOptions {
    let opts = eviction.get("deleteOptions").unwrap_or(&Value::Null);
    let dry = dry_run
        || opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| !d.is_empty());
    DeleteOptions {
        dry_run: dry,
        precondition_uid: opts
            .at("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version: opts
            .at("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        propagation_policy: opts
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string),
        grace_period_seconds: opts.get("gracePeriodSeconds").and_then(Value::as_i64),
        ignore_store_read_error: false,
    }
}

fn is_ready(pod: &Value) -> bool {
    pod.at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The condition an eviction adds before it deletes the pod.
fn disruption_target(now: &str) -> Value {
    json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now, "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting"})
}

/// `addConditionAndDeletePod`: unless this is a dry run, the latest pod gets the
/// DisruptionTarget condition through a status write (its delete preconditions checked first,
/// a version precondition then moved to the written version), and is deleted.
async fn add_condition_and_delete(
    pods: &Arc<apiserver::registry::RegistryStore>,
    requester: &Requester<'_>,
    namespace: &str,
    name: &str,
    mut opts: DeleteOptions,
) -> Result<(), Status> {
    if !opts.dry_run {
        let (uid, rv) = (
            opts.precondition_uid.clone().filter(|u| !u.is_empty()),
            opts.precondition_resource_version
                .clone()
                .filter(|r| !r.is_empty()),
        );
        let pod_kind = GroupResource::new("", "Pod");
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut updater = |current: Option<&Value>| {
            let Some(current) = current else {
                return Err(Status::not_found(&GroupResource::new("", "pods"), name));
            };
            apiserver::registry::before_delete_preconditions(
                &pod_kind,
                current,
                uid.as_deref(),
                rv.as_deref(),
            )?;
            let mut next = current.clone();
            super::util::update_pod_condition(&mut next["status"], disruption_target(&now));
            Ok(next)
        };
        // Upstream writes the condition on the pod store itself, past the handlers' field
        // manager: no managed fields entry for it (checked against kube-apiserver v1.36.2).
        let update = UpdateOptions {
            write: WriteOptions::default(),
            subresource: "status".into(),
            ..Default::default()
        };
        let (written, _) = pods
            .update(requester, namespace, name, &mut updater, &update)
            .await?;
        if opts.precondition_resource_version.is_some() {
            opts.precondition_resource_version = Some(written.resource_version.to_string());
        }
    }
    pods.delete(requester, namespace, name, &opts).await?;
    Ok(())
}

/// Evicts the pod `name` in `namespace`; the answer to the create.
pub async fn evict(
    api: &Arc<ApiResources>,
    namespace: &str,
    name: &str,
    eviction: &Value,
    user: &UserInfo,
    dry_run: bool,
) -> Result<Value, Status> {
    if eviction.name() != name {
        return Err(Status::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    if eviction
        .at("/deleteOptions/ignoreStoreReadErrorWithClusterBreakingPotential")
        .and_then(Value::as_bool)
        == Some(true)
    {
        let errs = [FieldError::invalid(
            &FieldPath::new("deleteOptions")
                .child("ignoreStoreReadErrorWithClusterBreakingPotential"),
            true,
            "can not be set for pod eviction, try after removing the option",
        )];
        return Err(invalid_status("policy", "Eviction", name, &errs));
    }
    let pods = api
        .get("", "v1", "pods")
        .ok_or_else(|| Status::internal("pods are not served"))?
        .clone();
    let requester = Requester { user };
    let original = delete_options(eviction, dry_run);
    let rv_unset = original.precondition_resource_version.is_none();
    // Conflicts are tried again unless the client pinned a version (`EvictionsRetry`).
    let mut attempts = 0;
    let pod = loop {
        attempts += 1;
        let pod = pods
            .get(namespace, name, ResourceVersion::default())
            .await?
            .value()
            .map_err(Status::internal)?;
        let phase = pod
            .at("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let deleting = pod.deletion_timestamp().is_some();
        // `canIgnorePDB`: pending pods have not started, finished ones already left.
        if !(terminal || phase == "Pending" || deleting) {
            break pod;
        }
        let mut opts = original.clone();
        // `shouldEnforceResourceVersion`: a pending pod's delete is pinned to the version
        // read, not to race a readiness change.
        if !terminal && !deleting && rv_unset {
            opts.precondition_resource_version = Some(pod.resource_version().to_string());
        }
        match add_condition_and_delete(&pods, &requester, namespace, name, opts).await {
            Err(e) if e.code == 409 && rv_unset && attempts < 5 => continue,
            Err(e) => return Err(e),
            Ok(()) => return Ok(apimachinery::status::created_status()),
        }
    };
    let budgets = matching_budgets(api, namespace, &pod).await?;
    let mut opts = original.clone();
    let mut unhealthy_deletion = false;
    let mut pdb_name = String::new();
    match budgets.as_slice() {
        [] => {}
        [pdb] => {
            pdb_name = pdb.name().to_string();
            let current = pdb
                .at("/status/currentHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let desired = pdb
                .at("/status/desiredHealthy")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let always_allow = pdb
                .at("/spec/unhealthyPodEvictionPolicy")
                .and_then(Value::as_str)
                == Some("AlwaysAllow");
            // An unready pod does not count as healthy: it may go without spending the
            // budget when the policy says so or the budget is met.
            if !is_ready(&pod) && (always_allow || (current >= desired && desired > 0)) {
                unhealthy_deletion = true;
            } else {
                take_disruption(api, namespace, name, pdb, user, opts.dry_run).await?;
            }
        }
        _ => {
            let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500});
            if let Some(o) = s.as_object_mut() {
                o.remove("reason");
            }
            return Ok(s);
        }
    }
    if unhealthy_deletion {
        opts.precondition_resource_version = Some(pod.resource_version().to_string());
    }
    match add_condition_and_delete(&pods, &requester, namespace, name, opts).await {
        Err(e) if e.code == 409 && unhealthy_deletion && rv_unset => Err(too_many_requests(
            10,
            format!("The disruption budget {pdb_name} is still being processed by the server."),
        )),
        Err(e) => Err(e),
        Ok(()) => Ok(apimachinery::status::created_status()),
    }
}

/// The budgets of the namespace whose selector selects the pod (an empty or invalid selector
/// selects nothing).
async fn matching_budgets(
    api: &Arc<ApiResources>,
    namespace: &str,
    pod: &Value,
) -> Result<Vec<Value>, Status> {
    let Some(pdbs) = api.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(Vec::new());
    };
    let list = pdbs.list(namespace, &ListOptions::default()).await?;
    let labels = pod.at("/metadata/labels").and_then(Value::as_object);
    let mut out = Vec::new();
    for item in list.items {
        let Ok(pdb) = item.value() else { continue };
        let Ok(sel) =
            Selector::from_label_selector(pdb.at("/spec/selector").unwrap_or(&Value::Null))
        else {
            continue;
        };
        if sel.is_empty() || sel.matches_nothing() || !sel.matches_json(labels) {
            continue;
        }
        out.push(pdb);
    }
    Ok(out)
}

/// `checkAndDecrement`: the budget allows one more disruption, which this eviction takes.
async fn take_disruption(
    api: &Arc<ApiResources>,
    namespace: &str,
    pod_name: &str,
    pdb: &Value,
    user: &UserInfo,
    dry_run: bool,
) -> Result<(), Status> {
    let pdb_name = pdb.name().to_string();
    let observed = pdb
        .at("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if observed < pdb.generation() {
        return Err(too_many_requests(
            10,
            format!("The disruption budget {pdb_name} is still being processed by the server."),
        ));
    }
    let allowed = pdb
        .at("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let resource = GroupResource::new("policy", "poddisruptionbudget");
    if allowed < 0 {
        return Err(Status::forbidden(
            &resource,
            &pdb_name,
            "pdb disruptions allowed is negative",
        ));
    }
    let disrupted = pdb
        .at("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > 2000 {
        return Err(Status::forbidden(
            &resource,
            &pdb_name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let desired = pdb
            .at("/status/desiredHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let current = pdb
            .at("/status/currentHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        // The DisruptionAllowed condition explains the refusal when it is False with a
        // message; a failed sync first, as the counts are not to be trusted then.
        let condition = pdb
            .at("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|c| c["type"] == "DisruptionAllowed"))
            .filter(|c| {
                c["status"] == "False"
                    && c.get("message")
                        .and_then(Value::as_str)
                        .is_some_and(|m| !m.is_empty())
            });
        let text = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let msg = match condition {
            Some(c) if text(c, "reason") == "SyncFailed" => format!(
                "The disruption budget {pdb_name} does not allow evicting pods currently because it failed sync: {}",
                text(c, "message")
            ),
            _ if current <= desired => format!(
                "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
            ),
            Some(c) => format!(
                "The disruption budget {pdb_name} does not allow evicting pods currently ({}): {}",
                text(c, "reason"),
                text(c, "message")
            ),
            None => {
                format!("The disruption budget {pdb_name} does not allow evicting pods currently")
            }
        };
        return Err(too_many_requests(0, msg));
    }
    if dry_run {
        return Ok(());
    }
    let Some(pdbs) = api.get("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let rv = pdb.resource_version().to_string();
    let mut updater = |current: Option<&Value>| {
        let Some(current) = current else {
            return Err(Status::not_found(
                &GroupResource::new("policy", "poddisruptionbudgets"),
                &pdb_name,
            ));
        };
        let mut next = current.clone();
        next.set_meta("resourceVersion", rv.clone());
        let status = super::super::object_at(&mut next, "status");
        let left = allowed - 1;
        status["disruptionsAllowed"] = json!(left);
        if left == 0 {
            set_insufficient_pods_condition(status);
        }
        let pods = super::super::object_at(status, "disruptedPods");
        pods[pod_name] = json!(now);
        Ok(next)
    };
    // Upstream takes the disruption through its loopback client's `UpdateStatus`: the budget's
    // status records a `kube-apiserver` Update entry (the pod's condition, written on the store
    // directly, records none).
    let opts = UpdateOptions {
        write: api.internal_write(pdbs, crate::bootstrap::API_SERVER_MANAGER),
        subresource: "status".into(),
        ..Default::default()
    };
    pdbs.update(
        &Requester { user },
        namespace,
        pdb.name(),
        &mut updater,
        &opts,
    )
    .await
    .map(|_| ())
}

/// `UpdateDisruptionAllowedCondition` once no disruption is left.
fn set_insufficient_pods_condition(status: &mut Value) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let observed = status
        .get("observedGeneration")
        .cloned()
        .unwrap_or(json!(0));
    let condition = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
        "message": "", "observedGeneration": observed, "lastTransitionTime": now});
    let conditions = super::super::object_at(status, "conditions");
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut() {
        match list.iter_mut().find(|c| c["type"] == "DisruptionAllowed") {
            Some(c) if c["status"] == "False" && c["reason"] == "InsufficientPods" => {}
            Some(c) => *c = condition,
            None => list.push(condition),
        }
    }
}
