//! LimitRanges: a container limit range fills its defaults as upstream's
//! `SetDefaults_LimitRangeItem` does: the default limit from the max, the default request from
//! the default limit, then from the min; `ValidateLimitRange` then checks the names and that
//! min ≤ default request ≤ default ≤ max for every resource (upstream:
//! pkg/apis/core/validation).

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::quantity::Quantity;
use apimachinery::validation::{FieldError, FieldPath, is_qualified_name};
use apiserver::registry::Strategy;
use serde_json::Value;

use super::nodeselection::str_of;
use super::object_at;
use super::resources::{
    entries, is_overcommit_allowed, validate_container_resource_name, validate_resource_name,
};

pub struct LimitRangeStrategy;

/// Adds to `target` every resource of `source` it lacks.
fn fill(item: &mut Value, target: &str, source: &str) {
    let Some(from) = item.get(source).and_then(Value::as_object).cloned() else {
        return;
    };
    if let Some(to) = object_at(item, target).as_object_mut() {
        for (resource, quantity) in from {
            to.entry(resource).or_insert(quantity);
        }
    }
}

impl Strategy for LimitRangeStrategy {
    fn default(&self, obj: &mut Value) {
        for item in obj
            .pointer_mut("/spec/limits")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("Container"))
        {
            fill(item, "default", "max");
            fill(item, "defaultRequest", "default");
            fill(item, "defaultRequest", "min");
        }
    }

    /// A LimitRange created without a name is named by a new UUID (upstream's
    /// `PrepareForCreate`), before a `generateName` would apply.
    fn prepare_for_create(&self, obj: &mut Value) {
        let unnamed = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if unnamed && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("name".into(), uuid::Uuid::new_v4().to_string().into());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_limit_range(obj)
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_limit_range(new)
    }
}

const LIMIT_TYPES: &[&str] = &["Pod", "Container", "PersistentVolumeClaim"];

/// `validateLimitRangeTypeName`.
fn validate_type_name(value: &str, path: &FieldPath) -> Vec<FieldError> {
    let errs: Vec<FieldError> = is_qualified_name(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect();
    if errs.is_empty() && !value.contains('/') && !LIMIT_TYPES.contains(&value) {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a standard limit type or fully qualified",
        )];
    }
    errs
}

/// `validateLimitRangeResourceName`: pod and container limits name container resources.
fn validate_limit_resource_name(limit_type: &str, name: &str, path: &FieldPath) -> Vec<FieldError> {
    match limit_type {
        "Pod" | "Container" => validate_container_resource_name(name, path),
        _ => validate_resource_name(name, path),
    }
}

/// `ValidateLimitRange` without the metadata (the store checks it).
fn validate_limit_range(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = FieldPath::new("spec").child("limits");
    let mut types = BTreeSet::new();
    let limits = obj
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, limit) in limits.iter().enumerate() {
        let idx = path.index(i);
        let limit_type = str_of(limit, "type");
        errs.extend(validate_type_name(limit_type, &idx.child("type")));
        if !types.insert(limit_type) {
            errs.push(FieldError::duplicate(&idx.child("type"), limit_type));
        }
        let mut keys: BTreeSet<String> = BTreeSet::new();
        let mut read = |field: &str, errs: &mut Vec<FieldError>| -> BTreeMap<String, Quantity> {
            let mut out = BTreeMap::new();
            for (k, q) in entries(limit.get(field)) {
                errs.extend(validate_limit_resource_name(
                    limit_type,
                    k,
                    &idx.child(field).key(k),
                ));
                keys.insert(k.to_string());
                out.insert(k.to_string(), q);
            }
            out
        };
        let max = read("max", &mut errs);
        let min = read("min", &mut errs);
        let (mut defaults, mut default_requests) = (BTreeMap::new(), BTreeMap::new());
        if limit_type == "Pod" {
            for field in ["default", "defaultRequest"] {
                if limit
                    .get(field)
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    errs.push(FieldError::forbidden(
                        &idx.child(field),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        } else {
            defaults = read("default", &mut errs);
            default_requests = read("defaultRequest", &mut errs);
        }
        if limit_type == "PersistentVolumeClaim"
            && !min.contains_key("storage")
            && !max.contains_key("storage")
        {
            errs.push(FieldError::required(
                &idx.child("limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        let ratios = read("maxLimitRequestRatio", &mut errs);
        for k in &keys {
            errs.extend(check_resource(
                k,
                &idx,
                [
                    min.get(k),
                    max.get(k),
                    defaults.get(k),
                    default_requests.get(k),
                    ratios.get(k),
                ],
            ));
        }
    }
    errs
}

/// The bounds of one resource of a limit item, in upstream's order of checks.
fn check_resource(k: &str, idx: &FieldPath, q: [Option<&Quantity>; 5]) -> Vec<FieldError> {
    let [min, max, default, default_request, ratio] = q;
    let mut errs = Vec::new();
    let at = |field: &str| idx.child(field).key(k);
    let s = |q: &Quantity| q.canonical();
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        errs.push(FieldError::invalid(
            &at("min"),
            s(min),
            format!("min value {} is greater than max value {}", s(min), s(max)),
        ));
    }
    if let (Some(dr), Some(min)) = (default_request, min)
        && min > dr
    {
        errs.push(FieldError::invalid(
            &at("defaultRequest"),
            s(dr),
            format!(
                "min value {} is greater than default request value {}",
                s(min),
                s(dr)
            ),
        ));
    }
    if let (Some(dr), Some(max)) = (default_request, max)
        && dr > max
    {
        errs.push(FieldError::invalid(
            &at("defaultRequest"),
            s(dr),
            format!(
                "default request value {} is greater than max value {}",
                s(dr),
                s(max)
            ),
        ));
    }
    if let (Some(dr), Some(d)) = (default_request, default)
        && dr > d
    {
        errs.push(FieldError::invalid(
            &at("defaultRequest"),
            s(dr),
            format!(
                "default request value {} is greater than default limit value {}",
                s(dr),
                s(d)
            ),
        ));
    }
    if let (Some(d), Some(min)) = (default, min)
        && min > d
    {
        errs.push(FieldError::invalid(
            &at("default"),
            s(min),
            format!(
                "min value {} is greater than default value {}",
                s(min),
                s(d)
            ),
        ));
    }
    if let (Some(d), Some(max)) = (default, max)
        && d > max
    {
        errs.push(FieldError::invalid(
            &at("default"),
            s(max),
            format!(
                "default value {} is greater than max value {}",
                s(d),
                s(max)
            ),
        ));
    }
    if let Some(ratio) = ratio {
        if ratio.cmp_int64(1) == std::cmp::Ordering::Less {
            errs.push(FieldError::invalid(
                &at("maxLimitRequestRatio"),
                s(ratio),
                format!("ratio {} is less than 1", s(ratio)),
            ));
        }
        if let (Some(min), Some(max)) = (min, max) {
            // Milli precision when every value allows it, as upstream.
            const MAX_MILLI: i64 = i64::MAX / 1000;
            let (mut r, mut lo, mut hi) = (ratio.value() as f64, min.value(), max.value());
            if ratio.value() < MAX_MILLI && lo < MAX_MILLI && hi < MAX_MILLI {
                r = ratio.milli_value() as f64 / 1000.0;
                lo = min.milli_value();
                hi = max.milli_value();
            }
            let limit = hi as f64 / lo as f64;
            if r > limit {
                errs.push(FieldError::invalid(
                    &at("maxLimitRequestRatio"),
                    s(ratio),
                    format!("ratio {} is greater than max/min = {limit:.6}", s(ratio)),
                ));
            }
        }
    }
    if let (Some(d), Some(dr)) = (default, default_request)
        && !is_overcommit_allowed(k)
        && d != dr
    {
        errs.push(FieldError::invalid(
            &at("defaultRequest"),
            s(dr),
            format!(
                "default value {} must equal to defaultRequest value {} in {k}",
                s(d),
                s(dr)
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_defaults_come_from_max_then_min() {
        let mut lr = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"cpu": "100m"}},
            {"type": "Pod", "max": {"cpu": "4"}}]}});
        LimitRangeStrategy.default(&mut lr);
        assert_eq!(
            lr["spec"]["limits"][0]["default"],
            json!({"cpu": "2", "memory": "1Gi"})
        );
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "2", "memory": "1Gi"})
        );
        assert!(lr["spec"]["limits"][1].get("default").is_none());
    }

    #[test]
    fn bounds_are_checked_in_upstreams_order() {
        let mut lr = json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}});
        LimitRangeStrategy.default(&mut lr);
        let msgs: Vec<String> = LimitRangeStrategy
            .validate(&lr)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[0].defaultRequest[cpu]: Invalid value: \"1\": min value 2 is greater than default request value 1",
                "spec.limits[0].default[cpu]: Invalid value: \"2\": min value 2 is greater than default value 1",
            ]
        );
    }

    #[test]
    fn pod_limits_take_no_defaults() {
        let lr = json!({"spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}});
        assert_eq!(
            LimitRangeStrategy.validate(&lr)[0].to_string(),
            "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"
        );
    }
}
