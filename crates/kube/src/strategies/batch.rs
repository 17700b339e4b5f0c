//! Jobs and CronJobs: upstream's defaults (`SetDefaults_Job`, `SetDefaults_CronJob`), the
//! selector and labels a Job generates for its pods, and the pod templates' defaults.

use apiserver::registry::Strategy;
use serde_json::{Map, Value, json};

use super::pod::{default_pod_spec, validate_pod_spec};
use super::{object_at, set_default};
use apimachinery::validation::{FieldError, FieldPath};

pub struct JobStrategy;
pub struct CronJobStrategy;

/// The labels a generated selector puts on a Job's pods: the job's name and its uid, each under
/// the legacy and the `batch.kubernetes.io/` key.
const NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

/// `SetDefaults_JobSpec`, for Jobs and the job templates of CronJobs.
fn default_job_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    // Upstream leaves completions unset for a work queue (parallelism without completions).
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    // Per-index backoff makes the global limit unbounded by default.
    if spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null())
    {
        set_default(spec, "backoffLimit", json!(i32::MAX));
    }
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    set_default(
        spec,
        "podReplacementPolicy",
        json!(if failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    if let Some(rules) = spec
        .pointer_mut("/podFailurePolicy/rules")
        .and_then(Value::as_array_mut)
    {
        for rule in rules {
            for pattern in rule
                .get_mut("onPodConditions")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                set_default(pattern, "status", json!("True"));
            }
        }
    }
    if let Some(pod) = spec.pointer_mut("/template/spec") {
        default_pod_spec(pod);
    }
}

impl Strategy for JobStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec") {
            default_job_spec(spec);
            set_default(spec, "manualSelector", json!(false));
        }
        // A Job without labels takes its template's (upstream shares the very map, so the
        // labels its selector generation adds show on the Job too: see prepare_for_create).
        share_template_labels(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
        if obj.pointer("/spec/manualSelector") != Some(&Value::Bool(true)) {
            let shared = job_labels_are_template_labels(obj);
            generate_selector(obj);
            if shared {
                let labels = obj.pointer("/spec/template/metadata/labels").cloned();
                if let Some(labels) = labels {
                    obj["metadata"]["labels"] = labels;
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(
            obj.pointer("/spec/template/spec"),
            &FieldPath::new("spec").child("template").child("spec"),
        )
    }
}

/// Whether the Job's labels are its template's, as upstream's defaulting made them.
fn job_labels_are_template_labels(obj: &Value) -> bool {
    let template = obj.pointer("/spec/template/metadata/labels");
    template.is_some_and(|t| t.as_object().is_some_and(|m| !m.is_empty()))
        && obj.pointer("/metadata/labels") == template
}

fn share_template_labels(obj: &mut Value) {
    let template = obj.pointer("/spec/template/metadata/labels").cloned();
    let Some(Value::Object(labels)) = template else {
        return;
    };
    let empty = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if !labels.is_empty() && empty && obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"]["labels"] = Value::Object(labels);
    }
}

/// `generateSelector`: pods are labelled with the Job's name and uid, and selected by the uid.
fn generate_selector(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    let labels = object_at(object_at(object_at(spec, "template"), "metadata"), "labels");
    // A label the user set is kept; a conflict is validation's to report.
    for key in NAME_LABELS {
        if labels.get(key).is_none() {
            labels[key] = json!(name);
        }
    }
    for key in UID_LABELS {
        if labels.get(key).is_none() {
            labels[key] = json!(uid);
        }
    }
    let match_labels = object_at(object_at(spec, "selector"), "matchLabels");
    if match_labels.get(UID_LABELS[1]).is_none() {
        match_labels[UID_LABELS[1]] = json!(uid);
    }
}

impl Strategy for CronJobStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        set_default(spec, "concurrencyPolicy", json!("Allow"));
        set_default(spec, "suspend", json!(false));
        set_default(spec, "successfulJobsHistoryLimit", json!(3));
        set_default(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(template) = spec.pointer_mut("/jobTemplate/spec/template/spec") {
            default_pod_spec(template);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(
            obj.pointer("/spec/jobTemplate/spec/template/spec"),
            &FieldPath::new("spec")
                .child("jobTemplate")
                .child("spec")
                .child("template")
                .child("spec"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_upstreams_defaults_and_a_generated_selector() {
        let mut job = json!({"metadata": {"name": "j", "uid": "u-1"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
        JobStrategy.default(&mut job);
        JobStrategy.prepare_for_create(&mut job);
        let spec = &job["spec"];
        for (field, value) in [
            ("completions", json!(1)),
            ("parallelism", json!(1)),
            ("backoffLimit", json!(6)),
            ("completionMode", json!("NonIndexed")),
            ("suspend", json!(false)),
            ("manualSelector", json!(false)),
            ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ] {
            assert_eq!(spec[field], value, "{field}");
        }
        let labels = json!({"app": "x", "job-name": "j", "batch.kubernetes.io/job-name": "j",
                            "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"});
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(job["metadata"]["labels"], labels);
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        // A work queue: parallelism without completions leaves completions unset.
        let mut queue = json!({"spec": {"parallelism": 3}});
        default_job_spec(&mut queue["spec"]);
        assert!(queue["spec"].get("completions").is_none());
    }

    #[test]
    fn a_cron_job_gets_upstreams_defaults() {
        let mut cron = json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        CronJobStrategy.default(&mut cron);
        let spec = &cron["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        assert_eq!(
            spec["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
    }
}
