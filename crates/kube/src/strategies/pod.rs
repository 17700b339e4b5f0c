//! Pods and pod templates: upstream's defaults for a pod spec and the basic validation of
//! containers. Workload kinds reuse `default_pod_spec` and `validate_pod_spec` for templates.

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct PodStrategy;

fn set_default(obj: &mut Value, field: &str, value: Value) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj[field] = value;
    }
}

/// Image pull policy default: `Always` for `:latest` or untagged images, else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) if image.contains('@') => "IfNotPresent",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(c: &mut Value) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    set_default(c, "imagePullPolicy", json!(pull_policy(&image)));
    set_default(c, "resources", json!({}));
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

/// The defaults upstream's scheme gives a `PodSpec`.
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container);
        }
    }
}

/// Containers present, each with a name and an image.
pub fn validate_pod_spec(spec: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => errs.push(FieldError::required(&path.child("containers"), "")),
        Some(cs) if cs.is_empty() => errs.push(FieldError::required(&path.child("containers"), "")),
        Some(cs) => {
            for (i, c) in cs.iter().enumerate() {
                let p = path.child("containers").index(i);
                if c.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errs.push(FieldError::required(&p.child("name"), ""));
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(|s| s.trim().is_empty())
                {
                    errs.push(FieldError::required(&p.child("image"), ""));
                }
            }
        }
    }
    errs
}

impl Strategy for PodStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec") {
            default_pod_spec(spec);
            set_default(spec, "enableServiceLinks", json!(true));
            set_default(spec, "priority", json!(0));
            set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(obj.get("spec"), &FieldPath::new("spec"))
    }
}
