//! The validatingadmissionpolicy-status controller (upstream: pkg/controller/
//! validatingadmissionpolicystatus, which kube-controller-manager runs as
//! `validatingadmissionpolicy-status-controller`): it owns a ValidatingAdmissionPolicy's
//! `status.observedGeneration` and `status.typeChecking`. A policy whose generation is newer than
//! its observed generation is type-checked against the kinds it matches
//! (`apiserver::admission::policy::typechecking`, with the kinds and schemas this server
//! serves), and the result is applied to `/status` by server-side apply with upstream's field
//! manager, forcing. It writes nothing else, and never touches `status.conditions`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use apimachinery::object::ObjectExt;
use apiserver::admission::policy::typechecking::{self, ExpressionWarning, ServedTypes};
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta};
use apiserver::server::GenericApiServer;
use serde_json::{Value, json};

use super::rate_limiter::ControllerRateLimiter;

/// The field manager of the status writes (upstream's `ControllerName`, which says "status" to
/// tell it from the API server's own policy controller).
pub const FIELD_MANAGER: &str = "validatingadmissionpolicy-status";

/// Whether `policy`'s spec changed since its status was last written: only then is it checked
/// again (upstream's reconcile compares the two generations and nothing else).
pub fn needs_check(policy: &Value) -> bool {
    let generation = policy
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = policy
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    generation.unwrap_or(0) > observed
}

/// The applied configuration of the status: the generation that was checked and the warnings.
/// With no warnings `typeChecking` is an empty object, as Go's apply configuration encodes an
/// empty list it was given (`omitempty`).
pub fn status_config(name: &str, generation: i64, warnings: &[ExpressionWarning]) -> Value {
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        type_checking["expressionWarnings"] = warnings
            .iter()
            .map(|w| json!({"fieldRef": w.field_ref, "warning": w.warning}))
            .collect();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "typeChecking": type_checking},
    })
}

/// Watches ValidatingAdmissionPolicies and writes the status of each new generation. Runs until
/// the process ends.
pub async fn run(api: Arc<ApiResources>, server: Arc<GenericApiServer>) {
    let Some(store) = api
        .get(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
        )
        .cloned()
    else {
        return;
    };
    let policies: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
    // Names to look at, each once however often it changed (upstream's work queue).
    let pending: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let changed = Arc::new(tokio::sync::Notify::new());
    {
        let (policies, pending, changed) = (policies.clone(), pending.clone(), changed.clone());
        tokio::spawn(reflector::run(store.clone(), move |delta| {
            let mut map = policies.lock().unwrap_or_else(|e| e.into_inner());
            let mut queue = pending.lock().unwrap_or_else(|e| e.into_inner());
            match delta {
                Delta::Replace(items) => {
                    *map = items
                        .into_iter()
                        .map(|v| (v.name().to_string(), v))
                        .collect();
                    queue.extend(map.keys().cloned());
                }
                Delta::Upsert(v) => {
                    queue.insert(v.name().to_string());
                    map.insert(v.name().to_string(), v);
                }
                Delta::Deleted(v) => {
                    map.remove(v.name());
                }
            }
            changed.notify_one();
        }));
    }
    let types = Arc::new(ServedTypes::new(server));
    let user = super::kube_system_account("validatingadmissionpolicy-status-controller");
    // A policy whose status could not be written is retried after its rate limiter's delay
    // (upstream's `AddRateLimited`), and its backoff forgotten once it goes through.
    let mut limiter = ControllerRateLimiter::default();
    // Retries waiting for their time, each at the earliest time it was asked for (upstream's
    // delaying queue); a change of the policy meanwhile is checked at once all the same.
    let mut waiting: HashMap<String, Instant> = HashMap::new();
    loop {
        match waiting.values().min().copied() {
            Some(next) => {
                tokio::select! {
                    _ = changed.notified() => {}
                    _ = tokio::time::sleep_until(next) => {}
                }
            }
            None => changed.notified().await,
        }
        let now = Instant::now();
        let mut names = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        waiting.retain(|name, at| {
            let due = *at <= now;
            if due {
                names.insert(name.clone());
            }
            !due
        });
        for name in names {
            let policy = policies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&name)
                .cloned();
            // A deleted policy, or one whose generation was checked, needs nothing.
            let Some(policy) = policy.filter(needs_check) else {
                limiter.forget(&name);
                continue;
            };
            let generation = policy
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            // Resolving schemas parses OpenAPI documents: off the async workers.
            let checked = {
                let types = types.clone();
                tokio::task::spawn_blocking(move || typechecking::check(&policy, &types.snapshot()))
                    .await
            };
            let warnings = match checked {
                Ok(w) => w,
                Err(e) => {
                    tracing::error!(policy = %name, error = %e, "type checking failed; this is a bug");
                    continue;
                }
            };
            let config = status_config(&name, generation, &warnings);
            match api
                .apply_status(&store, FIELD_MANAGER, &user, &name, &config)
                .await
            {
                Ok(()) => limiter.forget(&name),
                Err(e) if e.code == 404 => limiter.forget(&name),
                Err(e) => {
                    let delay = limiter.when(&name);
                    tracing::warn!(policy = %name, error = %e.message, retry_in = ?delay, "cannot write the policy's type checking");
                    let at = Instant::now() + delay;
                    waiting
                        .entry(name)
                        .and_modify(|t| *t = (*t).min(at))
                        .or_insert(at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::gvk::{GroupVersionKind, GroupVersionResource};
    use apiserver::admission::policy::typechecking::TypeSource;
    use apiserver::cel::resolver;

    /// The built-in kinds as this server serves them: the catalog's resources and its OpenAPI v3
    /// documents.
    struct BuiltIn;

    impl TypeSource for BuiltIn {
        fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
            let resources: Vec<_> = crate::catalog::builtin_resources()
                .iter()
                .map(|i| (**i).clone())
                .collect();
            typechecking::kinds_for(&resources, gvr)
        }

        fn schema(&self, gvk: &GroupVersionKind) -> Option<Value> {
            let path = match gvk.group.as_str() {
                "" => format!("api/{}", gvk.version),
                g => format!("apis/{g}/{}", gvk.version),
            };
            let docs = crate::openapi::documents();
            let doc: Value = serde_json::from_slice(&docs.v3.get(&path)?.inflate().ok()?).ok()?;
            resolver::schema_of(&doc, gvk)
        }
    }

    fn policy(rules: Value, validations: Value) -> Value {
        json!({
            "metadata": {"name": "p", "generation": 1},
            "spec": {"matchConstraints": {"resourceRules": rules}, "validations": validations},
        })
    }

    fn deployments() -> Value {
        json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["CREATE"]}])
    }

    fn warnings(p: &Value) -> Vec<(String, String)> {
        typechecking::check(p, &BuiltIn)
            .into_iter()
            .map(|w| (w.field_ref, w.warning))
            .collect()
    }

    #[test]
    fn a_field_the_kind_lacks_and_a_type_mismatch_are_warned_about() {
        let p = policy(
            deployments(),
            json!([
                {"expression": "object.spec.replicasss > 1"},
                {"expression": "object.spec.replicas == \"x\"", "messageExpression": "'replicas: ' + string(object.spec.replicas)"},
                {"expression": "object.spec.template.spec.containers.all(c, c.image.startsWith('registry/')) && object.metadata.labels['a'] == 'b'"},
            ]),
        );
        assert_eq!(
            warnings(&p),
            vec![
                (
                    "spec.validations[0].expression".to_string(),
                    "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicasss'\n | object.spec.replicasss > 1\n | ...........^\n".to_string()
                ),
                (
                    "spec.validations[1].expression".to_string(),
                    "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'\n | object.spec.replicas == \"x\"\n | .....................^\n".to_string()
                ),
            ]
        );
    }

    #[test]
    fn int_or_string_fields_are_dyn_and_params_are_typed_by_their_kind() {
        let mut p = policy(
            deployments(),
            json!([
                {"expression": "object.spec.strategy.rollingUpdate.maxSurge == 1 || object.spec.strategy.rollingUpdate.maxSurge == '25%'"},
                {"expression": "params.data.limit == object.metadata.name"},
                {"expression": "params.spec == 1"},
            ]),
        );
        p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(
            warnings(&p),
            vec![(
                "spec.validations[2].expression".to_string(),
                "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'spec'\n | params.spec == 1\n | ......^\n".to_string()
            )]
        );
    }

    #[test]
    fn every_kind_a_policy_matches_is_checked_and_unknown_or_wildcard_ones_are_not() {
        let rules = json!([
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "replicasets"], "operations": ["*"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "nosuchthings"], "operations": ["*"]},
        ]);
        let p = policy(rules, json!([{"expression": "object.spec.replicas > 0"}]));
        // Deployments and ReplicaSets have `spec.replicas`; the first undefined field is the
        // only issue (the rest of the path is an error value cel-go lets through).
        let configmap = "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'\n | object.spec.replicas > 0\n | ......^\n";
        assert_eq!(
            warnings(&p),
            vec![(
                "spec.validations[0].expression".to_string(),
                configmap.to_string()
            )]
        );
        let wildcard = policy(
            json!([{"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["*"]},
                   {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"], "operations": ["*"]}]),
            json!([{"expression": "object.spec.replicas > 0"}]),
        );
        assert!(warnings(&wildcard).is_empty());
        let several = policy(
            json!([{"apiGroups": ["", "apps"], "apiVersions": ["v1"], "resources": ["configmaps", "secrets"], "operations": ["*"]}]),
            json!([{"expression": "object.nope"}]),
        );
        let w = warnings(&several);
        assert_eq!(w.len(), 1);
        let kinds: Vec<&str> = w[0]
            .1
            .split("\n\n")
            .map(|m| m.split(": ERROR").next().unwrap_or(""))
            .collect();
        assert_eq!(kinds, ["/v1, Kind=ConfigMap", "/v1, Kind=Secret"]);
    }

    #[test]
    fn the_status_is_rewritten_only_for_a_new_generation() {
        let at = |generation: i64, observed: Option<i64>| {
            let mut p = json!({"metadata": {"name": "p", "generation": generation}});
            if let Some(o) = observed {
                p["status"] = json!({"observedGeneration": o});
            }
            needs_check(&p)
        };
        assert!(at(1, None));
        assert!(at(2, Some(1)));
        assert!(!at(2, Some(2)));
        assert!(!at(1, Some(3)));
        assert_eq!(
            status_config("p", 2, &[])["status"],
            json!({"observedGeneration": 2, "typeChecking": {}})
        );
        let w = ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "w".into(),
        };
        assert_eq!(
            status_config("p", 3, &[w])["status"]["typeChecking"],
            json!({"expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": "w"}]})
        );
    }
}
