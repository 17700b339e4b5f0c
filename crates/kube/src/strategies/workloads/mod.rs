//! Workload kinds: the controllers built on a pod template (Deployments, ReplicaSets,
//! StatefulSets, DaemonSets, ReplicationControllers), their ControllerRevisions and the
//! PodDisruptionBudgets that guard their pods. One module per kind; this one holds what they
//! share: reading fields as Go reads them, the pod template's validation
//! (`ValidatePodTemplateSpec`), label selectors, int-or-percent values, and bad values printed
//! as upstream's internal Go structs.
//!
//! Validation runs on a create before the object is in Go's form and on an update after, so
//! every helper reads an absent field and a `null` alike, as Go's zero value.

mod controllerrevision;
mod daemonset;
mod deployment;
mod pdb;
mod replicaset;
mod replicationcontroller;
mod statefulset;

pub use controllerrevision::ControllerRevisionStrategy;
pub use daemonset::DaemonSetStrategy;
pub use deployment::DeploymentStrategy;
pub use pdb::PodDisruptionBudgetStrategy;
pub use replicaset::ReplicaSetStrategy;
pub use replicationcontroller::ReplicationControllerStrategy;
pub use statefulset::StatefulSetStrategy;

use std::collections::BTreeMap;

use apimachinery::labels::Selector;
use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, is_valid_percent,
    validate_label_selector, validate_nonnegative_field,
};
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::Value;

pub(crate) use crate::strategies::fields::{int_at as int, str_at as text};

/// `field` of `obj` unless absent or null.
pub(crate) fn present<'a>(obj: &'a Value, field: &str) -> Option<&'a Value> {
    obj.get(field).filter(|v| !v.is_null())
}

/// `ValidateNonnegativeField` of a Go value field (absent is 0, which passes).
pub(crate) fn nonnegative(obj: &Value, field: &str, path: &FieldPath) -> Vec<FieldError> {
    validate_nonnegative_field(int(obj, field), &path.child(field))
}

/// `ValidateNonnegativeField` of a Go pointer field: only when set.
pub(crate) fn nonnegative_if_set(obj: &Value, field: &str, path: &FieldPath) -> Vec<FieldError> {
    match present(obj, field).and_then(Value::as_i64) {
        Some(n) => validate_nonnegative_field(n, &path.child(field)),
        None => Vec::new(),
    }
}

/// `value` as upstream prints the internal Go struct `go_type` in a message.
pub(crate) fn internal_json(go_type: &str, value: &Value) -> String {
    go_struct_json(go_type, value, GoStyle::Internal)
        .unwrap_or_else(|| apimachinery::validation::go_json(value))
}

/// `field.Invalid(path, <internal struct>, detail)`.
pub(crate) fn invalid_struct(
    path: &FieldPath,
    go_type: &str,
    value: &Value,
    detail: &str,
) -> FieldError {
    FieldError::invalid(path, value.clone(), detail)
        .with_rendered_value(internal_json(go_type, value))
}

/// `field.NotSupported(path, <internal struct>, valid)`.
pub(crate) fn not_supported_struct(
    path: &FieldPath,
    go_type: &str,
    value: &Value,
    valid: &[&str],
) -> FieldError {
    FieldError::not_supported(path, value.clone(), valid)
        .with_rendered_value(internal_json(go_type, value))
}

/// A label selector as upstream prints a `*metav1.LabelSelector` (tagged, declaration order).
pub(crate) fn selector_error(path: &FieldPath, selector: &Value, detail: &str) -> FieldError {
    invalid_struct(path, "meta.v1.LabelSelector", selector, detail)
}

/// `field.Invalid(path, new, "field is immutable")` for a label selector.
pub(crate) fn immutable_selector(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    let (new, old) = (
        present(new, "selector").cloned().unwrap_or(Value::Null),
        present(old, "selector").cloned().unwrap_or(Value::Null),
    );
    if new == old {
        return Vec::new();
    }
    vec![selector_error(
        &path.child("selector"),
        &new,
        apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
    )]
}

/// The number of requirements of a `metav1.LabelSelector` (upstream's
/// `len(MatchLabels)+len(MatchExpressions)`).
pub(crate) fn selector_len(selector: &Value) -> usize {
    let n = |f: &str| match selector.get(f) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    };
    n("matchLabels") + n("matchExpressions")
}

/// A template's labels as a Go map: absent or null is nil (printed `null`).
pub(crate) fn template_labels(template: &Value) -> Value {
    template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(Value::Null)
}

fn label_set(labels: &Value) -> BTreeMap<String, String> {
    labels
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `selector.Matches(labels.Set(template.Labels))`, reported at `spec.template.metadata.labels`.
pub(crate) fn selector_matches_template(
    selector: &Selector,
    template: &Value,
    template_path: &FieldPath,
) -> Vec<FieldError> {
    let labels = template_labels(template);
    if selector.matches(&label_set(&labels)) {
        return Vec::new();
    }
    vec![FieldError::invalid(
        &template_path.child("metadata").child("labels"),
        labels,
        "`selector` does not match template `labels`",
    )]
}

/// `unversionedvalidation.ValidateLabelSelector` in its strict form.
pub(crate) fn validate_selector(selector: &Value, path: &FieldPath) -> Vec<FieldError> {
    validate_label_selector(
        Some(selector),
        LabelSelectorValidationOptions::default(),
        path,
    )
}

/// The selector rules of Deployments, ReplicaSets and StatefulSets: required, valid, not
/// empty (`empty selector is invalid for <kind>`). Returns the parsed selector, `Err` when
/// `metav1.LabelSelectorAsSelector` refuses it.
pub(crate) fn required_selector(
    spec: &Value,
    spec_path: &FieldPath,
    kind_word: &str,
    errs: &mut Vec<FieldError>,
) -> Result<Selector, ()> {
    let path = spec_path.child("selector");
    let selector = present(spec, "selector").cloned().unwrap_or(Value::Null);
    if selector.is_null() {
        errs.push(FieldError::required(&path, ""));
    } else {
        errs.extend(validate_selector(&selector, &path));
        if selector_len(&selector) == 0 {
            errs.push(selector_error(
                &path,
                &selector,
                &format!("empty selector is invalid for {kind_word}"),
            ));
        }
    }
    Selector::from_label_selector(&selector).map_err(|_| ())
}

/// `ValidatePodTemplateSpec` (core validation): the template's labels and annotations
/// (reported at `<template>.labels` and `<template>.annotations`, as upstream does), the pod
/// annotations, its pod spec, annotation/field consistency, and no ephemeral containers.
pub(crate) fn validate_pod_template(template: &Value, path: &FieldPath) -> Vec<FieldError> {
    super::pod::validate_pod_template_spec(Some(template), path)
}

/// The restart policy and active deadline rules of controllers whose pods run forever:
/// `Always` only, and no `activeDeadlineSeconds` (`... in <Kind> is not Supported`).
pub(crate) fn long_running_template(
    template: &Value,
    template_path: &FieldPath,
    kind: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let policy = text(spec, "restartPolicy");
    let spec_path = template_path.child("spec");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            &spec_path.child("restartPolicy"),
            policy,
            &["Always"],
        ));
    }
    if present(spec, "activeDeadlineSeconds").is_some() {
        errs.push(FieldError::forbidden(
            &spec_path.child("activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errs
}

/// The percentage of an `intstr.IntOrString` holding a valid percent string.
fn percent_value(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    if !is_valid_percent(s).is_empty() {
        return None;
    }
    s.trim_end_matches('%').parse().ok()
}

/// upstream's `getIntOrPercentValue`: the percentage, else the integer (a string that is not
/// a percent reads as Go's `strconv.Atoi` would, 0 on failure).
pub(crate) fn int_or_percent_value(v: &Value) -> i64 {
    if let Some(p) = percent_value(v) {
        return p;
    }
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

/// `ValidatePositiveIntOrPercent`: a valid percent string, or a non-negative integer.
pub(crate) fn positive_int_or_percent(v: &Value, path: &FieldPath) -> Vec<FieldError> {
    match v {
        Value::String(s) => is_valid_percent(s)
            .into_iter()
            .map(|m| FieldError::invalid(path, s.as_str(), m))
            .collect(),
        Value::Number(n) => validate_nonnegative_field(n.as_i64().unwrap_or(0), path),
        // An unset IntOrString is the integer 0.
        Value::Null => Vec::new(),
        other => vec![FieldError::invalid(
            path,
            other.clone(),
            "must be an integer or percentage (e.g '5%%')",
        )],
    }
}

/// `IsNotMoreThan100Percent`.
pub(crate) fn not_more_than_100_percent(v: &Value, path: &FieldPath) -> Vec<FieldError> {
    match percent_value(v) {
        Some(p) if p > 100 => vec![FieldError::invalid(
            path,
            v.clone(),
            "must not be greater than 100%",
        )],
        _ => Vec::new(),
    }
}

/// The status counters every workload status validation checks: non-negative, and not more
/// than `status.replicas` where upstream says so. `counters` are (field, must not exceed
/// replicas).
pub(crate) fn status_counters(
    status: &Value,
    counters: &[(&str, bool)],
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, _) in counters {
        errs.extend(nonnegative(status, field, path));
    }
    let replicas = int(status, "replicas");
    for (field, bounded) in counters {
        if *bounded && int(status, field) > replicas {
            errs.push(FieldError::invalid(
                &path.child(field),
                int(status, field),
                "cannot be greater than status.replicas",
            ));
        }
    }
    errs
}

/// `status.collisionCount` may not go down (`IsDecremented`).
pub(crate) fn collision_count_not_decremented(new: &Value, old: &Value) -> Vec<FieldError> {
    let get = |o: &Value| o.pointer("/status/collisionCount").and_then(Value::as_i64);
    match (get(new), get(old)) {
        (new_count, Some(old_count))
            if new_count.unwrap_or(0) < old_count || new_count.is_none() =>
        {
            vec![FieldError::invalid(
                &FieldPath::new("status").child("collisionCount"),
                new_count.unwrap_or(0),
                "cannot be decremented",
            )]
        }
        _ => Vec::new(),
    }
}

/// Upstream's workload strategies warn about their pod template (`GetWarningsForPodTemplate`
/// at `spec.template`) on create, and on an update that changed the spec (a new generation).
pub(crate) fn template_warnings_on_create(obj: &Value) -> Vec<String> {
    super::pod::template_warnings(
        obj.pointer("/spec/template"),
        &FieldPath::new("spec").child("template"),
    )
}

/// Deployments and ReplicaSets name their pods after themselves: a name that is no DNS label
/// earns a warning before the template's (`WarningsOnCreate`).
pub(crate) fn pod_name_warnings_on_create(obj: &Value) -> Vec<String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let msgs = apimachinery::validation::is_dns1123_label(name);
    let mut w = Vec::new();
    if !msgs.is_empty() {
        w.push(format!(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{}]",
            msgs.join(" ")
        ));
    }
    w.extend(template_warnings_on_create(obj));
    w
}

pub(crate) fn template_warnings_on_update(new: &Value, old: &Value) -> Vec<String> {
    if new.pointer("/metadata/generation") == old.pointer("/metadata/generation") {
        return Vec::new();
    }
    template_warnings_on_create(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_percent_values_read_as_upstream() {
        assert_eq!(int_or_percent_value(&json!("25%")), 25);
        assert_eq!(int_or_percent_value(&json!(3)), 3);
        assert_eq!(int_or_percent_value(&json!("x")), 0);
        let p = FieldPath::new("m");
        assert_eq!(
            not_more_than_100_percent(&json!("110%"), &p)[0].to_string(),
            "m: Invalid value: \"110%\": must not be greater than 100%"
        );
        assert_eq!(
            positive_int_or_percent(&json!(-1), &p)[0].to_string(),
            "m: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(positive_int_or_percent(&json!("5%"), &p).is_empty());
        assert_eq!(positive_int_or_percent(&json!("5"), &p).len(), 1);
    }

    #[test]
    fn selectors_print_in_declaration_order() {
        let sel = json!({"matchExpressions": [{"values": ["v"], "operator": "Like", "key": "k"}], "matchLabels": {"app": "x"}});
        assert_eq!(
            selector_error(
                &FieldPath::new("spec").child("selector"),
                &sel,
                "invalid label selector"
            )
            .to_string(),
            r#"spec.selector: Invalid value: {"matchLabels":{"app":"x"},"matchExpressions":[{"key":"k","operator":"Like","values":["v"]}]}: invalid label selector"#
        );
    }

    #[test]
    fn collision_counts_may_only_grow() {
        let s = |n: i64| json!({"status": {"collisionCount": n}});
        assert!(collision_count_not_decremented(&s(2), &s(1)).is_empty());
        assert_eq!(collision_count_not_decremented(&s(1), &s(2)).len(), 1);
        assert_eq!(
            collision_count_not_decremented(&json!({"status": {}}), &s(2)).len(),
            1
        );
        assert!(collision_count_not_decremented(&s(1), &json!({})).is_empty());
    }
}
