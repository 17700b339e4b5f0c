//! Workloads with a pod template and a label selector (Deployments, ReplicaSets, StatefulSets,
//! DaemonSets): template defaults, kind defaults, and the selector-must-match-template rule.

use apimachinery::labels::Selector;
use apimachinery::object::ObjectExt;
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::object_at;
use super::pod::{default_pod_spec, validate_pod_spec};

pub struct WorkloadStrategy;

/// The annotation in which a DaemonSet keeps its template generation.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// `SetDefaults_StatefulSet` and the claim templates' own defaults.
fn default_stateful_set(spec: &mut Value) {
    if spec.get("podManagementPolicy").is_none() {
        spec["podManagementPolicy"] = json!("OrderedReady");
    }
    match spec.get_mut("updateStrategy") {
        None => {
            spec["updateStrategy"] =
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        }
        Some(strategy) => {
            if strategy.get("type").is_none() {
                strategy["type"] = json!("RollingUpdate");
            }
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                match strategy.get_mut("rollingUpdate") {
                    Some(rolling) if rolling.is_object() => {
                        if rolling.get("partition").is_none() {
                            rolling["partition"] = json!(0);
                        }
                    }
                    _ => strategy["rollingUpdate"] = json!({"partition": 0}),
                }
            }
        }
    }
    let policy = spec.as_object_mut().map(|s| {
        s.entry("persistentVolumeClaimRetentionPolicy")
            .or_insert(json!({}))
    });
    if let Some(policy) = policy.filter(|p| p.is_object()) {
        for field in ["whenDeleted", "whenScaled"] {
            if policy.get(field).is_none() {
                policy[field] = json!("Retain");
            }
        }
    }
    for claim in spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if claim.get("apiVersion").is_none() {
            claim["apiVersion"] = json!("v1");
        }
        if claim.get("kind").is_none() {
            claim["kind"] = json!("PersistentVolumeClaim");
        }
        if let Some(claim_spec) = claim.get_mut("spec").filter(|s| s.is_object())
            && claim_spec.get("volumeMode").is_none()
        {
            claim_spec["volumeMode"] = json!("Filesystem");
        }
        if claim.pointer("/status/phase").is_none() {
            object_at(claim, "status")["phase"] = json!("Pending");
        }
    }
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    let annotations = obj
        .metadata_mut()
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[key] = json!(value);
}

/// `SetDefaults_DaemonSet`: a rolling update of one pod at a time, without surge.
fn default_daemon_set(spec: &mut Value) {
    match spec.get_mut("updateStrategy") {
        None => {
            spec["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        }
        Some(strategy) => {
            if strategy.get("type").is_none() {
                strategy["type"] = json!("RollingUpdate");
            }
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                let rolling = object_at(strategy, "rollingUpdate");
                if rolling.get("maxUnavailable").is_none() {
                    rolling["maxUnavailable"] = json!(1);
                }
                if rolling.get("maxSurge").is_none() {
                    rolling["maxSurge"] = json!(0);
                }
            }
        }
    }
}

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
        match kind.as_str() {
            "Deployment" => {
                if spec.get("progressDeadlineSeconds").is_none() {
                    spec["progressDeadlineSeconds"] = json!(600);
                }
                if spec.get("strategy").is_none() {
                    spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
                }
            }
            "StatefulSet" => default_stateful_set(spec),
            "DaemonSet" => default_daemon_set(spec),
            _ => {}
        }
        if let Some(t) = spec.pointer_mut("/template/spec") {
            default_pod_spec(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
        // DaemonSets number their templates for the controller's history (upstream's strategy
        // keeps the deprecated annotation for rollbacks from older clients).
        if obj.get("kind").and_then(Value::as_str) == Some("DaemonSet") {
            set_annotation(obj, TEMPLATE_GENERATION, "1");
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if new.get("kind").and_then(Value::as_str) != Some("DaemonSet") {
            return;
        }
        // A new template is a new template generation.
        let generation = old
            .pointer(&format!(
                "/metadata/annotations/{}",
                TEMPLATE_GENERATION.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .and_then(|g| g.parse::<i64>().ok())
            .unwrap_or(0);
        let next = if new.pointer("/spec/template") != old.pointer("/spec/template") {
            generation + 1
        } else {
            generation
        };
        if next > 0 {
            set_annotation(new, TEMPLATE_GENERATION, &next.to_string());
        }
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
