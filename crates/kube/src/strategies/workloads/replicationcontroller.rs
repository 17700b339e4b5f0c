//! ReplicationControllers (core/v1): `SetDefaults_ReplicationController` (selector and labels
//! from the template's labels, one replica) and `ValidateReplicationController`.

use crate::strategies::struct_field;
use std::collections::BTreeMap;

use apimachinery::labels::Selector;
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Map, Value, json};

use super::super::pod::default_pod_spec;
use super::super::set_default;
use super::{
    long_running_template, nonnegative, present, selector_matches_template, validate_pod_template,
};

pub struct ReplicationControllerStrategy;

fn is_empty_map(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_none_or(Map::is_empty)
}

/// `SetDefaults_ReplicationController`.
fn default_rc(obj: &mut Value) {
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = labels {
        if is_empty_map(obj.pointer("/spec/selector")) {
            obj["spec"]["selector"] = labels.clone();
        }
        if is_empty_map(obj.pointer("/metadata/labels"))
            && obj.get("metadata").is_some_and(Value::is_object)
        {
            obj["metadata"]["labels"] = labels;
        }
    }
    if let Some(spec) = struct_field(obj, "spec") {
        set_default(spec, "replicas", json!(1));
        // The template is a pointer here, so only a template that is there has a pod spec.
        if let Some(t) = spec
            .get_mut("template")
            .filter(|t| t.is_object())
            .and_then(|t| struct_field(t, "spec"))
        {
            default_pod_spec(t);
        }
    }
}

/// `ValidateReplicationControllerSpec`, with `ValidatePodTemplateSpecForRC`.
fn validate_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = nonnegative(spec, "minReadySeconds", path);
    let selector: BTreeMap<String, String> = spec
        .get("selector")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let selector = Selector::from_set(&selector);
    if selector.is_empty() {
        errs.push(FieldError::required(&path.child("selector"), ""));
    }
    errs.extend(nonnegative(spec, "replicas", path));
    let template_path = path.child("template");
    match present(spec, "template") {
        None => errs.push(FieldError::required(&template_path, "")),
        Some(template) => {
            if !selector.is_empty() {
                errs.extend(selector_matches_template(
                    &selector,
                    template,
                    &template_path,
                ));
            }
            errs.extend(validate_pod_template(template, &template_path));
            errs.extend(long_running_template(
                template,
                &template_path,
                "ReplicationController",
            ));
        }
    }
    errs
}

impl Strategy for ReplicationControllerStrategy {
    fn default(&self, obj: &mut Value) {
        default_rc(obj);
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

    /// `ValidateReplicationControllerStatusUpdate`.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = super::status_counters(
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

    #[test]
    fn selector_and_labels_default_from_the_template() {
        let mut rc = json!({"metadata": {"name": "rc"}, "spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        ReplicationControllerStrategy.default(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "x"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert!(ReplicationControllerStrategy.validate(&rc).is_empty());
    }

    #[test]
    fn a_template_is_required_and_must_match() {
        let rc = json!({"spec": {"selector": {"app": "x"}, "replicas": 1}});
        assert_eq!(
            ReplicationControllerStrategy.validate(&rc)[0].to_string(),
            "spec.template: Required value"
        );
        let mut rc = json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "y"}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        ReplicationControllerStrategy.default(&mut rc);
        assert_eq!(
            ReplicationControllerStrategy.validate(&rc)[0].to_string(),
            "spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` does not match template `labels`"
        );
    }
}
