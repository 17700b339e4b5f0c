//! ReplicaSets (apps/v1): `SetDefaults_ReplicaSet`, `ValidateReplicaSet` and its update and
//! status forms, and the template rules Deployments share (`ValidatePodTemplateSpecForReplicaSet`).

use crate::strategies::{struct_field, template_pod_spec};
use apimachinery::labels::Selector;
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::super::pod::default_pod_spec;
use super::super::set_default;
use super::{
    immutable_selector, long_running_template, nonnegative, required_selector, selector_error,
    selector_matches_template, status_counters, validate_pod_template,
};

pub struct ReplicaSetStrategy;

/// `ValidatePodTemplateSpecForReplicaSet`: the template matches a non-empty selector, is a
/// valid pod template, and its pods run forever.
pub(super) fn template_for_replica_set(
    template: &Value,
    selector: &Selector,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !selector.is_empty() {
        errs.extend(selector_matches_template(selector, template, path));
    }
    errs.extend(validate_pod_template(template, path));
    errs.extend(long_running_template(template, path, "ReplicaSet"));
    errs
}

/// `ValidateReplicaSetSpec`.
fn validate_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = nonnegative(spec, "replicas", path);
    errs.extend(nonnegative(spec, "minReadySeconds", path));
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
    errs
}

impl Strategy for ReplicaSetStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = struct_field(obj, "spec") else {
            return;
        };
        set_default(spec, "replicas", json!(1));
        if let Some(t) = template_pod_spec(spec) {
            default_pod_spec(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(obj, "/spec/template", None);
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(new, "/spec/template", Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        )
    }

    /// `ValidateReplicaSetUpdate`, then the selector's immutability (apps/v1).
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

    /// `ValidateReplicaSetStatusUpdate`.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = status_counters(
            status,
            &[
                ("replicas", false),
                ("fullyLabeledReplicas", true),
                ("readyReplicas", true),
                ("availableReplicas", true),
                ("observedGeneration", false),
            ],
            &path,
        );
        if super::int(status, "availableReplicas") > super::int(status, "readyReplicas") {
            errs.push(FieldError::invalid(
                &path.child("availableReplicas"),
                super::int(status, "availableReplicas"),
                "cannot be greater than readyReplicas",
            ));
        }
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

    fn rs(spec: Value) -> Value {
        let mut o = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": spec});
        ReplicaSetStrategy.default(&mut o);
        o
    }

    #[test]
    fn a_missing_template_label_prints_null() {
        // Corpus rs-missing-template-labels.
        let o = rs(
            json!({"selector": {"matchLabels": {"app": "x"}}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
        );
        let errs = ReplicaSetStrategy.validate(&o);
        assert_eq!(
            errs[0].to_string(),
            "spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`"
        );
    }

    #[test]
    fn pods_of_replica_sets_restart_always() {
        let o = rs(
            json!({"selector": {"matchLabels": {"app": "x"}}, "minReadySeconds": -1, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "OnFailure", "activeDeadlineSeconds": 5, "containers": [{"name": "c", "image": "i"}]}}}),
        );
        let msgs: Vec<String> = ReplicaSetStrategy
            .validate(&o)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ]
        );
    }

    #[test]
    fn status_counters_are_bounded_by_replicas() {
        let new = json!({"status": {"replicas": 1, "readyReplicas": 2, "availableReplicas": 3}});
        let msgs: Vec<String> = ReplicaSetStrategy
            .validate_status_update(&new, &json!({}))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            [
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
            ]
        );
    }
}
