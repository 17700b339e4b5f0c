//! HorizontalPodAutoscalers, served as autoscaling/v2 (the storage version) and autoscaling/v1
//! (see `conversion`). This module holds the strategy: v2's defaults (`minReplicas`, the CPU
//! metric, the scaling behavior's rules), status reset, and upstream's validation
//! (pkg/apis/autoscaling/validation), which runs on the v2 form whatever version was sent, as
//! upstream validates the internal type.

mod conversion;

pub use conversion::HpaV1Conversion;

use crate::strategies::struct_field;
use apimachinery::validation::{
    FieldError, FieldPath, is_dns1123_label, is_path_segment_name, validate_nonnegative_field,
};
use apiserver::registry::{Strategy, SyncConversion};
use serde_json::{Value, json};

use super::set_default;
use super::workloads::{int, present, text};

/// The CPU target upstream's v2 defaulting gives an HPA without metrics.
pub(crate) const DEFAULT_CPU_UTILIZATION: i64 = 80;
const MAX_PERIOD_SECONDS: i64 = 1800;
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;
/// Sorted, as upstream lists its sets.
const METRIC_SOURCE_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
const SELECT_POLICIES: &[&str] = &["Disabled", "Max", "Min"];
const POLICY_TYPES: &[&str] = &["Percent", "Pods"];

/// `CrossVersionObjectReferenceValidationOptions`.
#[derive(Clone, Copy, Default)]
struct RefOptions {
    allow_empty_group: bool,
    allow_invalid_api_version: bool,
}

/// `HorizontalPodAutoscalerSpecValidationOptions` as upstream's strategy builds them
/// (`validationOptionsForHorizontalPodAutoscaler`), from the v2 forms of the new and old
/// objects.
#[derive(Clone, Copy)]
struct SpecOptions {
    /// 1: HPAScaleToZero is alpha and off in v1.36, unless the old object already has 0.
    min_replicas_lower_bound: i64,
    scale_target: RefOptions,
    object_metrics: RefOptions,
}

impl SpecOptions {
    fn new(new: &Value, old: Option<&Value>) -> Self {
        let mut opts = SpecOptions {
            min_replicas_lower_bound: 1,
            scale_target: RefOptions::default(),
            object_metrics: RefOptions {
                allow_empty_group: true,
                allow_invalid_api_version: false,
            },
        };
        if old
            .and_then(|o| o.pointer("/spec/minReplicas"))
            .and_then(Value::as_i64)
            == Some(0)
        {
            opts.min_replicas_lower_bound = 0;
        }
        let target = |o: &Value, f: &str| {
            o.pointer(&format!("/spec/scaleTargetRef/{f}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if let Some(o) = old
            && target(o, "apiVersion") == target(new, "apiVersion")
            && target(o, "kind") == target(new, "kind")
        {
            // An update that keeps the target's kind and version does not check the version.
            opts.scale_target.allow_invalid_api_version = true;
        } else if target(new, "kind") == "ReplicationController" {
            // The one scalable kind of the core group.
            opts.scale_target.allow_empty_group = true;
        }
        // Object metrics that are already invalid keep their versions unchecked.
        let old_metrics = old
            .and_then(|o| o.pointer("/spec/metrics"))
            .and_then(Value::as_array);
        if old_metrics.into_iter().flatten().any(|m| {
            text(m, "type") == "Object"
                && present(m, "object").is_some_and(|o| {
                    api_version_error(
                        o.get("describedObject").unwrap_or(&Value::Null),
                        opts.object_metrics,
                    )
                    .is_some()
                })
        }) {
            opts.object_metrics.allow_invalid_api_version = true;
        }
        opts
    }
}

/// `ValidateAPIVersion`: the reference's apiVersion parses as a group/version
/// (`schema.ParseGroupVersion`) and names a group unless allowed not to.
fn api_version_error(reference: &Value, opts: RefOptions) -> Option<String> {
    if opts.allow_invalid_api_version {
        return None;
    }
    let api_version = text(reference, "apiVersion");
    let group = if api_version.is_empty() || api_version == "/" {
        ""
    } else {
        match api_version.matches('/').count() {
            0 => "",
            1 => api_version.split('/').next().unwrap_or(""),
            _ => return Some(format!("unexpected GroupVersion string: {api_version}")),
        }
    };
    (!opts.allow_empty_group && group.is_empty())
        .then(|| "apiVersion must specify API group".to_string())
}

pub struct HpaStrategy {
    /// Whether this is the v2 form (else v1).
    pub v2: bool,
}

pub(crate) fn cpu_metric(target_or_current: &str, utilization: i64) -> Value {
    let field = if target_or_current == "target" {
        json!({"type": "Utilization", "averageUtilization": utilization})
    } else {
        json!({"averageUtilization": utilization})
    };
    json!({"type": "Resource", "resource": {"name": "cpu", target_or_current: field}})
}

/// `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`: the rules a client left unset take
/// the defaults (scale up: no window, at most 4 pods or 100% per 15 s; scale down: the
/// controller's window, at most 100% per 15 s).
pub(crate) fn default_scaling_rules(rules: Option<&Value>, scale_up: bool) -> Value {
    let mut out = if scale_up {
        json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ]})
    } else {
        json!({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})
    };
    if let Some(Value::Object(given)) = rules {
        for (k, v) in given {
            if !v.is_null() {
                out[k] = v.clone();
            }
        }
    }
    out
}

/// `SetDefaults_HorizontalPodAutoscalerBehavior`: a behavior that is set is filled in.
pub(crate) fn default_behavior(spec: &mut Value) {
    if let Some(behavior) = spec.get_mut("behavior").filter(|b| b.is_object()) {
        let up = default_scaling_rules(behavior.get("scaleUp"), true);
        let down = default_scaling_rules(behavior.get("scaleDown"), false);
        behavior["scaleUp"] = up;
        behavior["scaleDown"] = down;
    }
}

impl Strategy for HpaStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = struct_field(obj, "spec") else {
            return;
        };
        set_default(spec, "minReplicas", json!(1));
        if self.v2 {
            if spec
                .get("metrics")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                spec["metrics"] = json!([cpu_metric("target", DEFAULT_CPU_UTILIZATION)]);
            }
            default_behavior(spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // Status starts empty; these are its zero values as each version writes them.
        obj["status"] = if self.v2 {
            json!({"currentMetrics": null, "desiredReplicas": 0})
        } else {
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        };
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let v2 = self.as_v2(obj);
        validate_spec(
            v2.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
            SpecOptions::new(&v2, None),
        )
    }

    /// Like create, with the old object's allowances (a minimum of 0 replicas, unchecked
    /// versions it already had).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new, old) = (self.as_v2(new), self.as_v2(old));
        validate_spec(
            new.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
            SpecOptions::new(&new, Some(&old)),
        )
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = validate_nonnegative_field(
            int(status, "currentReplicas"),
            &path.child("currentReplicas"),
        );
        errs.extend(validate_nonnegative_field(
            int(status, "desiredReplicas"),
            &path.child("desiredReplicas"),
        ));
        errs
    }
}

impl HpaStrategy {
    /// The object in its v2 form, which validation reads.
    fn as_v2(&self, obj: &Value) -> Value {
        if self.v2 {
            obj.clone()
        } else {
            SyncConversion::to_storage(&HpaV1Conversion, obj.clone())
        }
    }
}

/// `validateHorizontalPodAutoscalerSpec`.
fn validate_spec(spec: &Value, path: &FieldPath, opts: SpecOptions) -> Vec<FieldError> {
    let min_lower_bound = opts.min_replicas_lower_bound;
    let mut errs = Vec::new();
    let min = present(spec, "minReplicas").and_then(Value::as_i64);
    let max = int(spec, "maxReplicas");
    if let Some(m) = min.filter(|m| *m < min_lower_bound) {
        errs.push(FieldError::invalid(
            &path.child("minReplicas"),
            m,
            format!("must be greater than or equal to {min_lower_bound}"),
        ));
    }
    if max == 0 {
        errs.push(FieldError::required(
            &path.child("maxReplicas"),
            "must be set and greater than 0",
        ));
    } else if max < 0 {
        errs.push(FieldError::invalid(
            &path.child("maxReplicas"),
            max,
            "must be greater than or equal to 1",
        ));
    }
    if min.is_some_and(|m| max < m) {
        errs.push(FieldError::invalid(
            &path.child("maxReplicas"),
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    errs.extend(validate_object_reference(
        spec.get("scaleTargetRef").unwrap_or(&Value::Null),
        &path.child("scaleTargetRef"),
        opts.scale_target,
    ));
    errs.extend(validate_metrics(
        spec,
        &path.child("metrics"),
        min,
        opts.object_metrics,
    ));
    if let Some(behavior) = present(spec, "behavior") {
        let behavior_path = path.child("behavior");
        for rules in ["scaleUp", "scaleDown"] {
            if let Some(r) = present(behavior, rules) {
                errs.extend(validate_scaling_rules(r, &behavior_path.child(rules)));
            }
        }
    }
    errs
}

/// `ValidateCrossVersionObjectReference`.
fn validate_object_reference(
    reference: &Value,
    path: &FieldPath,
    opts: RefOptions,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["kind", "name"] {
        let value = text(reference, field);
        if value.is_empty() {
            errs.push(FieldError::required(&path.child(field), ""));
        } else {
            for msg in is_path_segment_name(value) {
                errs.push(FieldError::invalid(&path.child(field), value, msg));
            }
        }
    }
    if let Some(msg) = api_version_error(reference, opts) {
        errs.push(FieldError::invalid(
            &path.child("apiVersion"),
            text(reference, "apiVersion"),
            msg,
        ));
    }
    errs
}

/// `validateMetrics`: each metric, and an Object or External one to scale to zero.
fn validate_metrics(
    spec: &Value,
    path: &FieldPath,
    min: Option<i64>,
    opts: RefOptions,
) -> Vec<FieldError> {
    let metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errs = Vec::new();
    for (i, metric) in metrics.iter().enumerate() {
        errs.extend(validate_metric(metric, &path.index(i), opts));
    }
    let scales_on_objects = metrics
        .iter()
        .any(|m| matches!(text(m, "type"), "Object" | "External"));
    if min == Some(0) && !scales_on_objects {
        errs.push(FieldError::forbidden(
            path,
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    errs
}

/// The sources of a metric, by field and `type`.
const SOURCES: &[(&str, &str)] = &[
    ("object", "Object"),
    ("external", "External"),
    ("pods", "Pods"),
    ("resource", "Resource"),
    ("containerResource", "ContainerResource"),
];

/// `validateMetricSpec`.
fn validate_metric(metric: &Value, path: &FieldPath, opts: RefOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = text(metric, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            &path.child("type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            &path.child("type"),
            ty,
            METRIC_SOURCE_TYPES,
        ));
    }
    let present_sources: Vec<&str> = SOURCES
        .iter()
        .map(|(field, _)| *field)
        .filter(|field| present(metric, field).is_some())
        .collect();
    // Only the first source present (in upstream's order) is validated.
    if let Some(first) = present_sources.first() {
        let source = present(metric, first).unwrap_or(&Value::Null);
        let source_path = path.child(first);
        errs.extend(match *first {
            "object" => validate_object_source(source, &source_path, opts),
            "external" => validate_external_source(source, &source_path),
            "pods" => validate_pods_source(source, &source_path),
            "resource" => validate_resource_source(source, &source_path, false),
            _ => validate_resource_source(source, &source_path, true),
        });
    }
    let expected = SOURCES.iter().find(|(_, t)| *t == ty).map(|(f, _)| *f);
    match expected {
        Some(field) if present(metric, field).is_none() => errs.push(FieldError::required(
            &path.child(field),
            "must populate information for the given metric source",
        )),
        Some(_) => {}
        None => errs.push(FieldError::not_supported(
            &path.child("type"),
            ty,
            METRIC_SOURCE_TYPES,
        )),
    }
    if present_sources.len() != 1 {
        // Upstream walks a Go set here, in no particular order; the sources' order is kept.
        for field in present_sources.iter().filter(|f| Some(**f) != expected) {
            errs.push(FieldError::forbidden(
                &path.child(field),
                "must populate the given metric source only",
            ));
        }
    }
    errs
}

/// Whether a quantity string is positive (`Sign() == 1`).
fn quantity_is_positive(q: &str) -> bool {
    let (negative, rest) = match q.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let mantissa: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let nonzero = mantissa.chars().any(|c| ('1'..='9').contains(&c));
    nonzero && !negative
}

/// `validateMetricTarget`.
fn validate_target(target: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = text(target, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(
            &path.child("type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(ty, "Utilization" | "Value" | "AverageValue") {
        errs.push(FieldError::invalid(
            &path.child("type"),
            ty,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for field in ["value", "averageValue"] {
        if let Some(q) = present(target, field)
            && !q.as_str().is_some_and(quantity_is_positive)
        {
            errs.push(FieldError::invalid(
                &path.child(field),
                q.clone(),
                "must be positive",
            ));
        }
    }
    if let Some(u) = present(target, "averageUtilization").and_then(Value::as_i64)
        && u < 1
    {
        errs.push(FieldError::invalid(
            &path.child("averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
    errs
}

/// `validateMetricIdentifier`.
fn validate_metric_identifier(metric: &Value, path: &FieldPath) -> Vec<FieldError> {
    let name = text(metric, "name");
    if name.is_empty() {
        return vec![FieldError::required(
            &path.child("name"),
            "must specify a metric name",
        )];
    }
    is_path_segment_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(&path.child("name"), name, m))
        .collect()
}

fn target_of(source: &Value) -> &Value {
    source.get("target").unwrap_or(&Value::Null)
}

fn validate_object_source(source: &Value, path: &FieldPath, opts: RefOptions) -> Vec<FieldError> {
    let mut errs = validate_object_reference(
        source.get("describedObject").unwrap_or(&Value::Null),
        &path.child("describedObject"),
        opts,
    );
    errs.extend(validate_metric_identifier(
        source.get("metric").unwrap_or(&Value::Null),
        &path.child("metric"),
    ));
    let target = target_of(source);
    errs.extend(validate_target(target, &path.child("target")));
    if present(target, "value").is_none() && present(target, "averageValue").is_none() {
        errs.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must set either a target value or averageValue",
        ));
    }
    errs
}

fn validate_external_source(source: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_metric_identifier(
        source.get("metric").unwrap_or(&Value::Null),
        &path.child("metric"),
    );
    let target = target_of(source);
    errs.extend(validate_target(target, &path.child("target")));
    let (value, average) = (
        present(target, "value").is_some(),
        present(target, "averageValue").is_some(),
    );
    if !value && !average {
        errs.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if value && average {
        errs.push(FieldError::forbidden(
            &path.child("target").child("value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
    errs
}

fn validate_pods_source(source: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_metric_identifier(
        source.get("metric").unwrap_or(&Value::Null),
        &path.child("metric"),
    );
    let target = target_of(source);
    errs.extend(validate_target(target, &path.child("target")));
    if present(target, "averageValue").is_none() {
        errs.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must specify a positive target averageValue",
        ));
    }
    errs
}

/// `validateResourceSource` and, with `container`, `validateContainerResourceSource`.
fn validate_resource_source(source: &Value, path: &FieldPath, container: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(source, "name").is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "must specify a resource name",
        ));
    }
    if container {
        let name = text(source, "container");
        if name.is_empty() {
            errs.push(FieldError::required(
                &path.child("container"),
                "must specify a container",
            ));
        } else {
            for msg in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&path.child("container"), name, msg));
            }
        }
    }
    let target = target_of(source);
    errs.extend(validate_target(target, &path.child("target")));
    let (utilization, average) = (
        present(target, "averageUtilization").is_some(),
        present(target, "averageValue").is_some(),
    );
    if !utilization && !average {
        errs.push(FieldError::required(
            &path.child("target").child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if utilization && average {
        errs.push(FieldError::forbidden(
            &path.child("target").child("averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
    errs
}

/// `validateScalingRules`.
fn validate_scaling_rules(rules: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(window) = present(rules, "stabilizationWindowSeconds").and_then(Value::as_i64) {
        let window_path = path.child("stabilizationWindowSeconds");
        if window < 0 {
            errs.push(FieldError::invalid(
                &window_path,
                window,
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(FieldError::invalid(
                &window_path,
                window,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(select) = present(rules, "selectPolicy").and_then(Value::as_str)
        && !SELECT_POLICIES.contains(&select)
    {
        errs.push(FieldError::not_supported(
            &path.child("selectPolicy"),
            select,
            SELECT_POLICIES,
        ));
    }
    let policies_path = path.child("policies");
    let policies = rules
        .get("policies")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(
            &policies_path,
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in policies.iter().enumerate() {
        let p = policies_path.index(i);
        let ty = text(policy, "type");
        if !POLICY_TYPES.contains(&ty) {
            errs.push(FieldError::not_supported(
                &p.child("type"),
                ty,
                POLICY_TYPES,
            ));
        }
        let value = int(policy, "value");
        if value <= 0 {
            errs.push(FieldError::invalid(
                &p.child("value"),
                value,
                "must be greater than zero",
            ));
        }
        let period = int(policy, "periodSeconds");
        if period <= 0 {
            errs.push(FieldError::invalid(
                &p.child("periodSeconds"),
                period,
                "must be greater than zero",
            ));
        }
        if period > MAX_PERIOD_SECONDS {
            errs.push(FieldError::invalid(
                &p.child("periodSeconds"),
                period,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(spec: Value) -> Value {
        let mut o = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": spec});
        HpaStrategy { v2: true }.default(&mut o);
        o
    }

    fn messages(o: &Value) -> Vec<String> {
        HpaStrategy { v2: true }
            .validate(o)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn target() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    }

    #[test]
    fn behavior_defaults_fill_what_is_unset() {
        let o = v2(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 30}}}),
        );
        assert_eq!(
            o["spec"]["behavior"],
            json!({
                "scaleUp": {"stabilizationWindowSeconds": 30, "selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
            })
        );
        assert!(messages(&o).is_empty());
        // No behavior, no defaults for it.
        assert!(
            v2(json!({"scaleTargetRef": target(), "maxReplicas": 3}))["spec"]
                .get("behavior")
                .is_none()
        );
    }

    #[test]
    fn specs_match_upstream() {
        assert_eq!(
            messages(&v2(
                json!({"scaleTargetRef": target(), "maxReplicas": 3, "minReplicas": 5})
            )),
            ["spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`"]
        );
        assert_eq!(
            messages(&v2(
                json!({"scaleTargetRef": {"name": "web"}, "maxReplicas": 0, "minReplicas": 0})
            )),
            [
                "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                "spec.maxReplicas: Required value: must be set and greater than 0",
                "spec.scaleTargetRef.kind: Required value",
                "spec.scaleTargetRef.apiVersion: Invalid value: \"\": apiVersion must specify API group",
                "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
            ]
        );
    }

    #[test]
    fn metrics_match_upstream() {
        let o = v2(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
                {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "0"}}},
                {"type": "Object", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "Magic"},
            ]}),
        );
        assert_eq!(
            messages(&o),
            [
                "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization",
                "spec.metrics[1].pods.target.averageValue: Invalid value: \"0\": must be positive",
                "spec.metrics[2].object: Required value: must populate information for the given metric source",
                "spec.metrics[3].type: Unsupported value: \"Magic\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
                "spec.metrics[3].type: Unsupported value: \"Magic\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            ]
        );
    }

    #[test]
    fn scaling_rules_match_upstream() {
        let o = v2(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "behavior": {"scaleUp": {
            "stabilizationWindowSeconds": 4000, "selectPolicy": "Sometimes",
            "policies": [{"type": "Percent", "value": 0, "periodSeconds": 3600}]}}}),
        );
        assert_eq!(
            messages(&o),
            [
                "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
                "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Sometimes\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to 1800",
            ]
        );
    }

    #[test]
    fn v1_objects_are_validated_in_their_v2_form() {
        let mut o = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": target(), "maxReplicas": 5, "targetCPUUtilizationPercentage": 0}});
        let s = HpaStrategy { v2: false };
        s.default(&mut o);
        let errs: Vec<String> = s.validate(&o).iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            [
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
            ]
        );
    }
}
