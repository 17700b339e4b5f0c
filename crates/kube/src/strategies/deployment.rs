//! Workloads with a pod template and a label selector (Deployments, ReplicaSets, StatefulSets,
//! DaemonSets): template defaults, kind defaults, and the selector-must-match-template rule.

use apimachinery::labels::Selector;
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::pod::{default_pod_spec, validate_pod_spec};

pub struct WorkloadStrategy;

impl Strategy for WorkloadStrategy {
    fn default(&self, obj: &mut Value) {
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        if kind != "DaemonSet" && spec.get("replicas").is_none() {
            spec["replicas"] = json!(1);
        }
        if spec.get("revisionHistoryLimit").is_none() {
            spec["revisionHistoryLimit"] = json!(10);
        }
        if kind == "Deployment" {
            if spec.get("progressDeadlineSeconds").is_none() {
                spec["progressDeadlineSeconds"] = json!(600);
            }
            if spec.get("strategy").is_none() {
                spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
            }
        }
        if let Some(t) = spec.pointer_mut("/template/spec") {
            default_pod_spec(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec_path = FieldPath::new("spec");
        let mut errs = Vec::new();
        let selector = obj.pointer("/spec/selector");
        let labels = obj
            .pointer("/spec/template/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        match selector.map(Selector::from_label_selector) {
            None => errs.push(FieldError::required(&spec_path.child("selector"), "")),
            Some(Err(msg)) => errs.push(FieldError::invalid(
                &spec_path.child("selector"),
                selector.cloned().unwrap_or_default(),
                &msg,
            )),
            Some(Ok(sel)) => {
                let map = labels
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                if sel.is_empty() {
                    errs.push(FieldError::invalid(
                        &spec_path.child("selector"),
                        selector.cloned().unwrap_or_default(),
                        "empty selector is invalid for deployment",
                    ));
                } else if !sel.matches(&map) {
                    errs.push(FieldError::invalid(
                        &spec_path
                            .child("template")
                            .child("metadata")
                            .child("labels"),
                        labels.clone(),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
        errs.extend(validate_pod_spec(
            obj.pointer("/spec/template/spec"),
            &spec_path.child("template").child("spec"),
        ));
        errs
    }
}
