//! Deployments (apps/v1): `SetDefaults_Deployment`, `ValidateDeployment` (strategy, rolling
//! update bounds, progress deadline) and its update and status forms, and the strategy's
//! generation rule (annotations too bump it, since they are copied to ReplicaSets).

use crate::strategies::{struct_field, template_pod_spec};
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::super::pod::default_pod_spec;
use super::super::{object_at, set_default};
use super::replicaset::template_for_replica_set;
use super::{
    collision_count_not_decremented, immutable_selector, int, int_or_percent_value, nonnegative,
    nonnegative_if_set, not_more_than_100_percent, not_supported_struct, positive_int_or_percent,
    present, required_selector, selector_error, status_counters, text,
};

pub struct DeploymentStrategy;

/// `SetDefaults_Deployment`.
fn default_spec(spec: &mut Value) {
    set_default(spec, "replicas", json!(1));
    let strategy = object_at(spec, "strategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if text(strategy, "type") == "RollingUpdate" {
        let rolling = object_at(strategy, "rollingUpdate");
        set_default(rolling, "maxUnavailable", json!("25%"));
        set_default(rolling, "maxSurge", json!("25%"));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(t) = template_pod_spec(spec) {
        default_pod_spec(t);
    }
}

/// `ValidateRollingUpdateDeployment`.
fn validate_rolling_update(rolling: &Value, path: &FieldPath) -> Vec<FieldError> {
    let null = Value::Null;
    let unavailable = rolling.get("maxUnavailable").unwrap_or(&null);
    let surge = rolling.get("maxSurge").unwrap_or(&null);
    let mut errs = positive_int_or_percent(unavailable, &path.child("maxUnavailable"));
    errs.extend(positive_int_or_percent(surge, &path.child("maxSurge")));
    if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
        errs.push(FieldError::invalid(
            &path.child("maxUnavailable"),
            if unavailable.is_null() {
                json!(0)
            } else {
                unavailable.clone()
            },
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    errs.extend(not_more_than_100_percent(
        unavailable,
        &path.child("maxUnavailable"),
    ));
    errs
}

/// `ValidateDeploymentStrategy`.
fn validate_strategy(strategy: &Value, path: &FieldPath) -> Vec<FieldError> {
    let rolling = present(strategy, "rollingUpdate");
    match text(strategy, "type") {
        "Recreate" if rolling.is_some() => vec![FieldError::forbidden(
            &path.child("rollingUpdate"),
            "may not be specified when strategy `type` is 'Recreate'",
        )],
        "Recreate" => Vec::new(),
        "RollingUpdate" => match rolling {
            None => vec![FieldError::required(
                &path.child("rollingUpdate"),
                "this should be defaulted and never be nil",
            )],
            Some(r) => validate_rolling_update(r, &path.child("rollingUpdate")),
        },
        _ => vec![not_supported_struct(
            path,
            "apps.v1.DeploymentStrategy",
            strategy,
            &["Recreate", "RollingUpdate"],
        )],
    }
}

/// `ValidateDeploymentSpec`.
fn validate_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = nonnegative(spec, "replicas", path);
    let template = spec.get("template").unwrap_or(&Value::Null);
    match required_selector(spec, path, "deployment", &mut errs) {
        Ok(selector) => errs.extend(template_for_replica_set(
            template,
            &selector,
            &path.child("template"),
        )),
        Err(()) => errs.push(selector_error(
            &path.child("selector"),
            spec.get("selector").unwrap_or(&Value::Null),
            "invalid label selector",
        )),
    }
    errs.extend(validate_strategy(
        spec.get("strategy").unwrap_or(&Value::Null),
        &path.child("strategy"),
    ));
    errs.extend(nonnegative(spec, "minReadySeconds", path));
    errs.extend(nonnegative_if_set(spec, "revisionHistoryLimit", path));
    if let Some(rollback) = present(spec, "rollbackTo") {
        errs.extend(nonnegative(
            rollback,
            "revision",
            &path.child("rollback").child("version"),
        ));
    }
    if let Some(deadline) = present(spec, "progressDeadlineSeconds").and_then(Value::as_i64) {
        errs.extend(nonnegative_if_set(spec, "progressDeadlineSeconds", path));
        if deadline <= int(spec, "minReadySeconds") {
            errs.push(FieldError::invalid(
                &path.child("progressDeadlineSeconds"),
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errs
}

impl Strategy for DeploymentStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = struct_field(obj, "spec") {
            default_spec(spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(obj, "/spec/template", None);
        obj["status"] = json!({});
    }

    /// Annotations are copied to the Deployment's ReplicaSets, so changing them is a new
    /// generation as a spec change is (the store handles the spec).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(new, "/spec/template", Some(old));
        let annotations = |o: &Value| {
            o.pointer("/metadata/annotations")
                .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
                .cloned()
        };
        if annotations(new) != annotations(old) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(meta) = new.get_mut("metadata").filter(|m| m.is_object()) {
                meta["generation"] = json!(generation + 1);
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        )
    }

    /// `ValidateDeploymentUpdate`, then the selector's immutability (apps/v1).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let null = Value::Null;
        errs.extend(immutable_selector(
            new.get("spec").unwrap_or(&null),
            old.get("spec").unwrap_or(&null),
            &FieldPath::new("spec"),
        ));
        errs
    }

    /// `ValidateDeploymentStatusUpdate`.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = status_counters(
            status,
            &[
                ("observedGeneration", false),
                ("replicas", false),
                ("updatedReplicas", true),
                ("readyReplicas", true),
                ("availableReplicas", true),
                ("unavailableReplicas", false),
            ],
            &path,
        );
        // collisionCount is checked with the counters in upstream's order: after them, before
        // the bounds.
        let bounds_at = errs
            .iter()
            .position(|e| e.detail == "cannot be greater than status.replicas")
            .unwrap_or(errs.len());
        let collision = nonnegative_if_set(status, "collisionCount", &path);
        errs.splice(bounds_at..bounds_at, collision);
        if int(status, "availableReplicas") > int(status, "readyReplicas") {
            errs.push(FieldError::invalid(
                &path.child("availableReplicas"),
                int(status, "availableReplicas"),
                "cannot be greater than readyReplicas",
            ));
        }
        errs.extend(collision_count_not_decremented(new, old));
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        super::pod_name_warnings_on_create(obj)
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        super::template_warnings_on_update(new, old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(spec: Value) -> Value {
        let mut o = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec});
        DeploymentStrategy.default(&mut o);
        o
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn basic(extra: Value) -> Value {
        let mut spec = json!({"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        deployment(spec)
    }

    #[test]
    fn defaults_match_upstream() {
        let d = basic(json!({}));
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(
            (
                &d["spec"]["replicas"],
                &d["spec"]["revisionHistoryLimit"],
                &d["spec"]["progressDeadlineSeconds"]
            ),
            (&json!(1), &json!(10), &json!(600))
        );
        // Recreate gets no rolling update parameters.
        let r = basic(json!({"strategy": {"type": "Recreate"}}));
        assert_eq!(r["spec"]["strategy"], json!({"type": "Recreate"}));
        assert!(DeploymentStrategy.validate(&r).is_empty());
    }

    #[test]
    fn strategy_rules_match_upstream() {
        let d = basic(json!({"strategy": {"type": "BlueGreen"}}));
        assert_eq!(
            messages(DeploymentStrategy.validate(&d)),
            [
                "spec.strategy: Unsupported value: {\"Type\":\"BlueGreen\",\"RollingUpdate\":null}: supported values: \"Recreate\", \"RollingUpdate\""
            ]
        );
        let d = basic(json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}));
        assert_eq!(
            messages(DeploymentStrategy.validate(&d)),
            [
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
            ]
        );
        let d = basic(
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}}),
        );
        assert_eq!(
            messages(DeploymentStrategy.validate(&d)),
            [
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"
            ]
        );
    }

    #[test]
    fn a_missing_selector_also_fails_the_template() {
        // Corpus deploy-missing-selector: a nil selector selects nothing.
        let d = deployment(
            json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}),
        );
        assert_eq!(
            messages(DeploymentStrategy.validate(&d)),
            [
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`"
            ]
        );
    }

    #[test]
    fn annotation_changes_bump_the_generation() {
        let old = json!({"metadata": {"generation": 3}, "spec": {}});
        let mut new = json!({"metadata": {"generation": 3, "annotations": {"a": "b"}}, "spec": {}});
        DeploymentStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["metadata"]["generation"], 4);
        let mut same = old.clone();
        DeploymentStrategy.prepare_for_update(&mut same, &old);
        assert_eq!(same["metadata"]["generation"], 3);
    }

    #[test]
    fn selectors_are_immutable() {
        let old = basic(json!({}));
        let mut new = old.clone();
        new["spec"]["selector"] = json!({"matchLabels": {"app": "x", "b": "c"}});
        new["spec"]["template"]["metadata"]["labels"]["b"] = json!("c");
        assert_eq!(
            messages(DeploymentStrategy.validate_update(&new, &old)),
            [
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"x\",\"b\":\"c\"}}: field is immutable"
            ]
        );
    }
}
