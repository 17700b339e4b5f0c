//! Jobs: the strategy (status reset, the selector and pod labels generated from the Job's name
//! and uid, the Job sharing its template's labels), `ValidateJob` (the generated selector's
//! labels, the spec, Indexed pod hostnames) and `ValidateJobUpdate` (what may not change, and
//! what a suspended Job that never started may change in its template).

use crate::strategies::struct_field;
use std::collections::BTreeMap;

use apimachinery::labels::Selector;
use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label};
use apiserver::registry::Strategy;
use serde_json::{Map, Value, json};

use super::super::object_at;
use super::super::set_default;
use super::super::workloads::{
    internal_json, present, selector_error, selector_matches_template, text, validate_selector,
};
use super::{default_job_spec, job_spec_warnings, name_warning, validate_job_spec};

pub struct JobStrategy;

/// The labels a generated selector puts on a Job's pods: the job's name and its uid, under the
/// legacy and the `batch.kubernetes.io/` keys.
const LEGACY_NAME_LABEL: &str = "job-name";
const NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const LEGACY_UID_LABEL: &str = "controller-uid";
const UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The template fields a suspended Job that never started may change
/// (`AllowMutableSchedulingDirectives`), besides the node affinity.
const MUTABLE_SCHEDULING_FIELDS: &[&str] = &["nodeSelector", "tolerations", "schedulingGates"];

impl Strategy for JobStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = struct_field(obj, "spec") {
            default_job_spec(spec);
            set_default(spec, "manualSelector", json!(false));
        }
        // A Job without labels takes its template's (upstream shares the very map, so the
        // labels its selector generation adds show on the Job too: see prepare_for_create).
        share_template_labels(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(obj, "/spec/template", None);
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

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(new, "/spec/template", Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_job(obj, true)
    }

    /// `ValidateJob` of the new object, then `ValidateJobUpdate`, as upstream's strategy does.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let labels = |o: &Value| o.pointer("/spec/template/metadata/labels").cloned();
        let old_labels = labels(old).unwrap_or(Value::Null);
        let prefixed = old_labels.get(NAME_LABEL).is_some() && old_labels.get(UID_LABEL).is_some();
        let mut errs = validate_job(new, prefixed);
        errs.extend(validate_job_update(new, old));
        errs
    }

    /// `ValidateJobUpdateStatus`'s counters (the condition rules are the controller's).
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = Vec::new();
        for f in ["active", "succeeded", "failed"] {
            errs.extend(super::super::workloads::nonnegative(status, f, &path));
        }
        for f in ["ready", "terminating"] {
            errs.extend(super::super::workloads::nonnegative_if_set(
                status, f, &path,
            ));
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut warnings: Vec<String> = name_warning(name).into_iter().collect();
        warnings.extend(job_spec_warnings(
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        ));
        warnings
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        // Only a changed spec (a new generation) is warned about again.
        if new.pointer("/metadata/generation") == old.pointer("/metadata/generation") {
            return Vec::new();
        }
        job_spec_warnings(
            new.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        )
    }
}

/// `ValidateJob`: the generated selector's labels, the spec, and Indexed pod hostnames.
fn validate_job(obj: &Value, require_prefixed_labels: bool) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let spec_path = FieldPath::new("spec");
    let mut errs = validate_generated_selector(obj, require_prefixed_labels);
    errs.extend(validate_job_spec(spec, &spec_path));
    let selector = present(spec, "selector");
    match selector {
        None => errs.push(FieldError::required(&spec_path.child("selector"), "")),
        Some(s) => errs.extend(validate_selector(s, &spec_path.child("selector"))),
    }
    if let Ok(parsed) = Selector::from_label_selector(selector.unwrap_or(&Value::Null)) {
        errs.extend(selector_matches_template(
            &parsed,
            spec.get("template").unwrap_or(&Value::Null),
            &spec_path.child("template"),
        ));
    }
    let completions = present(spec, "completions").and_then(Value::as_i64);
    if text(spec, "completionMode") == "Indexed"
        && let Some(n) = completions.filter(|n| *n > 0)
    {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let hostname = format!("{name}-{}", n - 1);
        if !is_dns1123_label(&hostname).is_empty() {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
    errs
}

/// `ValidateHasLabel`.
fn has_label(labels: &Value, key: &str, expected: &str, path: &FieldPath) -> Vec<FieldError> {
    let label_path = path.child("labels").key(key);
    match labels.get(key).and_then(Value::as_str) {
        None => vec![FieldError::required(
            &label_path,
            format!("must be '{expected}'"),
        )],
        Some(v) if v != expected => vec![FieldError::invalid(
            &label_path,
            labels.clone(),
            format!("must be '{expected}'"),
        )],
        Some(_) => Vec::new(),
    }
}

/// `validateGeneratedSelector`: without a manual selector, the template carries the generated
/// labels and the selector selects them.
fn validate_generated_selector(obj: &Value, require_prefixed_labels: bool) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if spec.get("manualSelector") == Some(&Value::Bool(true)) {
        return Vec::new();
    }
    let Some(selector) = present(spec, "selector") else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required(
            &FieldPath::new("metadata").child("uid"),
            "",
        ));
    }
    let meta_path = FieldPath::new("spec").child("template").child("metadata");
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or(Value::Null);
    let mut expected = BTreeMap::new();
    let mut keys = vec![(LEGACY_UID_LABEL, uid), (LEGACY_NAME_LABEL, name)];
    if require_prefixed_labels {
        keys.extend([(UID_LABEL, uid), (NAME_LABEL, name)]);
    }
    for (key, value) in keys {
        errs.extend(has_label(&labels, key, value, &meta_path));
        expected.insert(key.to_string(), value.to_string());
    }
    if let Ok(parsed) = Selector::from_label_selector(selector)
        && !parsed.matches(&expected)
    {
        errs.push(selector_error(
            &FieldPath::new("spec").child("selector"),
            selector,
            "`selector` not auto-generated",
        ));
    }
    errs
}

/// `field.Invalid(path, new, "field is immutable")` for a pointer field printed as its JSON
/// or, for structs, as upstream's internal type.
fn immutable(
    new: &Value,
    old: &Value,
    field: &str,
    go_type: Option<&str>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let get = |o: &Value| present(o, field).cloned().unwrap_or(Value::Null);
    let (n, o) = (get(new), get(old));
    if n == o {
        return Vec::new();
    }
    let err = FieldError::invalid(
        &path.child(field),
        n.clone(),
        apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
    );
    vec![match go_type {
        Some(t) if !n.is_null() => err.with_rendered_value(internal_json(t, &n)),
        _ => err,
    }]
}

/// `ValidateJobSpecUpdate`: the spec as on create, then the fields that may not change.
fn validate_job_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = new.get("spec").unwrap_or(&null);
    let old_spec = old.get("spec").unwrap_or(&null);
    let path = FieldPath::new("spec");
    let mut errs = validate_job_spec(spec, &path);
    let selector = present(spec, "selector");
    match selector {
        None => errs.push(FieldError::required(&path.child("selector"), "")),
        Some(s) => errs.extend(validate_selector(s, &path.child("selector"))),
    }
    if let Ok(parsed) = Selector::from_label_selector(selector.unwrap_or(&null)) {
        errs.extend(selector_matches_template(
            &parsed,
            spec.get("template").unwrap_or(&null),
            &path.child("template"),
        ));
    }
    errs.extend(validate_completions(spec, old_spec, &path));
    errs.extend(immutable(
        spec,
        old_spec,
        "selector",
        Some("meta.v1.LabelSelector"),
        &path,
    ));
    errs.extend(validate_template_update(new, old, &path));
    errs.extend(immutable(spec, old_spec, "completionMode", None, &path));
    errs.extend(immutable(
        spec,
        old_spec,
        "podFailurePolicy",
        Some("batch.v1.PodFailurePolicy"),
        &path,
    ));
    errs.extend(immutable(
        spec,
        old_spec,
        "backoffLimitPerIndex",
        None,
        &path,
    ));
    errs.extend(immutable(spec, old_spec, "managedBy", None, &path));
    errs.extend(immutable(
        spec,
        old_spec,
        "successPolicy",
        Some("batch.v1.SuccessPolicy"),
        &path,
    ));
    errs
}

/// `validateCompletions`: immutable, except for Indexed Jobs, which change it together with
/// parallelism.
fn validate_completions(spec: &Value, old_spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    if text(spec, "completionMode") != "Indexed" {
        return immutable(spec, old_spec, "completions", None, path);
    }
    let completions = present(spec, "completions");
    if completions == present(old_spec, "completions") {
        return Vec::new();
    }
    match completions {
        Some(c) if Some(c) != present(spec, "parallelism") => vec![FieldError::invalid(
            &path.child("completions"),
            c.clone(),
            "can only be modified in tandem with spec.parallelism",
        )],
        _ => Vec::new(),
    }
}

/// `shouldAllowMutablePodTemplate`: a suspended Job that has not started (or is suspended by
/// its condition) and runs no pod may change its template's scheduling directives and, with
/// MutablePodResourcesForSuspendedJobs and MutableSchedulingDirectivesForSuspendedJobs (both
/// beta and on in v1.36), its containers' resources.
fn template_is_mutable(old: &Value) -> bool {
    let suspended = old.pointer("/spec/suspend") == Some(&Value::Bool(true));
    let not_started = old.pointer("/status/startTime").is_none_or(Value::is_null);
    let suspended_condition = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Suspended" && c["status"] == "True");
    let active = old
        .pointer("/status/active")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    suspended && (not_started || suspended_condition) && active == 0
}

/// `validatePodTemplateUpdate`: the template is immutable, except that a Job whose template
/// is mutable (`template_is_mutable`) may change its scheduling directives, labels and
/// annotations, and then its containers' resources only (`validatePodResourceUpdatesOnly`,
/// reported at `spec.template.spec`).
fn validate_template_update(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    let template = new
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mut old_template = old
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null);
    let mutable = template_is_mutable(old);
    if mutable && old_template.is_object() {
        relax_scheduling_directives(&template, &mut old_template);
    }
    if !mutable {
        if template == old_template {
            return Vec::new();
        }
        return vec![
            FieldError::invalid(
                &path.child("template"),
                template.clone(),
                apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
            )
            .with_rendered_value(internal_json("core.v1.PodTemplateSpec", &template)),
        ];
    }
    let new_spec = template.get("spec").cloned().unwrap_or(Value::Null);
    let mut old_spec = old_template.get("spec").cloned().unwrap_or(Value::Null);
    for list in ["containers", "initContainers"] {
        let new_list = new_spec.get(list).and_then(Value::as_array);
        let Some(old_list) = old_spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        let Some(new_list) = new_list.filter(|n| n.len() == old_list.len()) else {
            continue;
        };
        for (o, n) in old_list.iter_mut().zip(new_list) {
            if o.get("name") == n.get("name")
                && let Some(m) = o.as_object_mut()
            {
                match n.get("resources") {
                    Some(r) => {
                        m.insert("resources".into(), r.clone());
                    }
                    None => {
                        m.remove("resources");
                    }
                }
            }
        }
    }
    if new_spec == old_spec {
        return Vec::new();
    }
    // Upstream names the path with one element, "template.spec".
    vec![
        FieldError::invalid(
            &path.child("template.spec"),
            new_spec.clone(),
            apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
        )
        .with_rendered_value(internal_json("core.v1.PodSpec", &new_spec)),
    ]
}

/// Makes `old` take `new`'s mutable scheduling directives, so that comparing the two sees only
/// the other changes.
fn relax_scheduling_directives(new: &Value, old: &mut Value) {
    let take = |old: &mut Value, pointer: &str, field: &str| {
        let parent = old.pointer_mut(pointer).filter(|p| p.is_object());
        if let Some(parent) = parent {
            match new.pointer(&format!("{pointer}/{field}")) {
                Some(v) => parent[field] = v.clone(),
                None => {
                    if let Some(m) = parent.as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
    };
    let new_affinity = new.pointer("/spec/affinity").filter(|a| !a.is_null());
    let old_spec = object_at(old, "spec");
    match (
        new_affinity,
        old_spec.get("affinity").filter(|a| !a.is_null()).cloned(),
    ) {
        (None, Some(mut affinity)) => {
            // Clearing the affinity is allowed if it held only a node affinity.
            if let Some(m) = affinity.as_object_mut() {
                m.remove("nodeAffinity");
            }
            if affinity.as_object().is_none_or(Map::is_empty) {
                if let Some(m) = old_spec.as_object_mut() {
                    m.remove("affinity");
                }
            } else {
                old_spec["affinity"] = affinity;
            }
        }
        (Some(new_affinity), None) => {
            let mut affinity = json!({});
            if let Some(node) = new_affinity.get("nodeAffinity") {
                affinity["nodeAffinity"] = node.clone();
            }
            old_spec["affinity"] = affinity;
        }
        (Some(new_affinity), Some(_)) => {
            let affinity = object_at(old_spec, "affinity");
            match new_affinity.get("nodeAffinity") {
                Some(node) => affinity["nodeAffinity"] = node.clone(),
                None => {
                    if let Some(m) = affinity.as_object_mut() {
                        m.remove("nodeAffinity");
                    }
                }
            }
        }
        (None, None) => {}
    }
    for field in MUTABLE_SCHEDULING_FIELDS {
        take(old, "/spec", field);
    }
    object_at(old, "metadata");
    take(old, "/metadata", "annotations");
    take(old, "/metadata", "labels");
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
    for (key, value) in [
        (LEGACY_NAME_LABEL, &name),
        (NAME_LABEL, &name),
        (LEGACY_UID_LABEL, &uid),
        (UID_LABEL, &uid),
    ] {
        if labels.get(key).is_none() {
            labels[key] = json!(value);
        }
    }
    let match_labels = object_at(object_at(spec, "selector"), "matchLabels");
    if match_labels.get(UID_LABEL).is_none() {
        match_labels[UID_LABEL] = json!(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(spec: Value) -> Value {
        let mut job = json!({"metadata": {"name": "u", "uid": "u-1"}, "spec": spec});
        JobStrategy.default(&mut job);
        JobStrategy.prepare_for_create(&mut job);
        job
    }

    fn basic() -> Value {
        created(
            json!({"template": {"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "nginx:1.27"}]}}}),
        )
    }

    #[test]
    fn a_job_gets_upstreams_defaults_and_a_generated_selector() {
        let job = basic();
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
        let labels = json!({"app": "x", "job-name": "u", "batch.kubernetes.io/job-name": "u",
                            "controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"});
        assert_eq!(spec["template"]["metadata"]["labels"], labels);
        assert_eq!(job["metadata"]["labels"], labels);
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert!(JobStrategy.validate(&job).is_empty());
        // A work queue: parallelism without completions leaves completions unset.
        let mut queue = json!({"spec": {"parallelism": 3}});
        default_job_spec(&mut queue["spec"]);
        assert!(queue["spec"].get("completions").is_none());
    }

    #[test]
    fn a_conflicting_label_is_reported() {
        let job = created(
            json!({"template": {"metadata": {"labels": {"job-name": "other"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}),
        );
        let errs = JobStrategy.validate(&job);
        assert_eq!(
            errs[0].to_string(),
            "spec.template.metadata.labels[job-name]: Invalid value: {\"batch.kubernetes.io/controller-uid\":\"u-1\",\"batch.kubernetes.io/job-name\":\"u\",\"controller-uid\":\"u-1\",\"job-name\":\"other\"}: must be 'u'"
        );
    }

    #[test]
    fn the_template_is_immutable_and_printed_as_the_internal_type() {
        let old = basic();
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
        let errs = JobStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        let msg = errs[0].to_string();
        assert!(
            msg.starts_with("spec.template: Invalid value: {\"labels\":{\"app\":\"x\",\"batch.kubernetes.io/controller-uid\":\"u-1\",\"batch.kubernetes.io/job-name\":\"u\",\"controller-uid\":\"u-1\",\"job-name\":\"u\"},\"Spec\":{\"Volumes\":null,\"InitContainers\":null,\"Containers\":[{\"Name\":\"c\",\"Image\":\"nginx:1.28\""),
            "{msg}"
        );
        assert!(
            msg.ends_with(
                "\"HostnameOverride\":null,\"SchedulingGroup\":null}}: field is immutable"
            ),
            "{msg}"
        );
    }

    #[test]
    fn a_suspended_job_may_change_its_scheduling_directives() {
        let mut old = basic();
        old["spec"]["suspend"] = json!(true);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        new["spec"]["template"]["metadata"]["annotations"] = json!({"a": "b"});
        assert!(JobStrategy.validate_update(&new, &old).is_empty());
        // Not once it started.
        old["status"] = json!({"startTime": "2024-01-01T00:00:00Z"});
        assert_eq!(JobStrategy.validate_update(&new, &old).len(), 1);
    }

    #[test]
    fn a_suspended_job_may_change_its_container_resources_only() {
        let mut old = basic();
        old["spec"]["suspend"] = json!(true);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": "2"}});
        assert!(JobStrategy.validate_update(&new, &old).is_empty());
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other:2");
        let errs = JobStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .starts_with("spec.template.spec: Invalid value: {\"Volumes\":")
        );
        // A running suspended Job keeps its template whole.
        old["status"] = json!({"startTime": "2024-01-01T00:00:00Z", "active": 1});
        new["spec"]["template"]["spec"]["containers"][0]["image"] =
            old["spec"]["template"]["spec"]["containers"][0]["image"].clone();
        let errs = JobStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .to_string()
                .starts_with("spec.template: Invalid value:")
        );
    }

    #[test]
    fn indexed_completions_change_with_parallelism() {
        let old = created(
            json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}),
        );
        let mut new = old.clone();
        new["spec"]["completions"] = json!(3);
        assert_eq!(
            JobStrategy.validate_update(&new, &old)[0].to_string(),
            "spec.completions: Invalid value: 3: can only be modified in tandem with spec.parallelism"
        );
        new["spec"]["parallelism"] = json!(3);
        assert!(JobStrategy.validate_update(&new, &old).is_empty());
    }
}
