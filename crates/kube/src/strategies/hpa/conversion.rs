//! autoscaling/v1 over autoscaling/v2 storage (upstream: pkg/apis/autoscaling/v1/
//! conversion.go). The v1 form has one CPU target where v2 has a list of metrics; what v1
//! cannot say travels in upstream's `autoscaling.alpha.kubernetes.io/*` annotations, in the
//! forms upstream writes them: the other metrics and the current metrics as v1's
//! `MetricSpec` / `MetricStatus` (the v2beta1 shapes), the conditions as v1 conditions, the
//! behavior as the internal Go struct (Go field names, read back case-insensitively).

use apiserver::registry::SyncConversion;
use ironplane_protobuf::{GoStyle, go_slice_json, go_struct_json};
use serde_json::{Map, Value, json};

use super::{DEFAULT_CPU_UTILIZATION, cpu_metric, default_scaling_rules};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

/// autoscaling/v1 over autoscaling/v2 storage.
pub struct HpaV1Conversion;

/// Whether a v2 metric is the CPU utilization v1 shows as `targetCPUUtilizationPercentage`.
fn cpu_utilization_target(m: &Value) -> Option<i64> {
    let r = m.get("resource")?;
    (m.get("type")? == "Resource" && r.get("name")? == "cpu")
        .then(|| r.pointer("/target/averageUtilization")?.as_i64())
        .flatten()
}

fn cpu_utilization_current(m: &Value) -> Option<i64> {
    let r = m.get("resource")?;
    (m.get("type")? == "Resource" && r.get("name")? == "cpu")
        .then(|| r.pointer("/current/averageUtilization")?.as_i64())
        .flatten()
}

/// Sets `key` to `value` unless the value is absent or null.
fn put(obj: &mut Value, key: &str, value: Option<&Value>) {
    if let Some(v) = value.filter(|v| !v.is_null()) {
        obj[key] = v.clone();
    }
}

fn reference(r: Option<&Value>) -> Value {
    let mut out = json!({});
    if let Some(r) = r {
        for k in ["kind", "name", "apiVersion"] {
            put(&mut out, k, r.get(k));
        }
    }
    out
}

/// A v2 `MetricSpec` as v1's (`Convert_autoscaling_MetricSpec_To_v1_MetricSpec`).
fn metric_to_v1(m: &Value) -> Value {
    let mut out = json!({"type": m.get("type").cloned().unwrap_or(json!(""))});
    let target = |s: &Value, f: &str| s.get("target").and_then(|t| t.get(f)).cloned();
    if let Some(s) = m.get("object").filter(|s| s.is_object()) {
        let mut o = json!({"target": reference(s.get("describedObject")),
            "metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(&mut o, "targetValue", target(s, "value").as_ref());
        put(&mut o, "selector", s.pointer("/metric/selector"));
        put(&mut o, "averageValue", target(s, "averageValue").as_ref());
        out["object"] = o;
    }
    if let Some(s) = m.get("pods").filter(|s| s.is_object()) {
        let mut o = json!({"metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(
            &mut o,
            "targetAverageValue",
            target(s, "averageValue").as_ref(),
        );
        put(&mut o, "selector", s.pointer("/metric/selector"));
        out["pods"] = o;
    }
    for kind in ["resource", "containerResource"] {
        if let Some(s) = m.get(kind).filter(|s| s.is_object()) {
            let mut o = json!({"name": s.get("name").cloned().unwrap_or(json!(""))});
            put(
                &mut o,
                "targetAverageUtilization",
                target(s, "averageUtilization").as_ref(),
            );
            put(
                &mut o,
                "targetAverageValue",
                target(s, "averageValue").as_ref(),
            );
            put(&mut o, "container", s.get("container"));
            out[kind] = o;
        }
    }
    if let Some(s) = m.get("external").filter(|s| s.is_object()) {
        let mut o = json!({"metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(&mut o, "metricSelector", s.pointer("/metric/selector"));
        put(&mut o, "targetValue", target(s, "value").as_ref());
        put(
            &mut o,
            "targetAverageValue",
            target(s, "averageValue").as_ref(),
        );
        out["external"] = o;
    }
    out
}

fn identifier(name: Option<&Value>, selector: Option<&Value>) -> Value {
    let mut out = json!({"name": name.cloned().unwrap_or(json!(""))});
    put(&mut out, "selector", selector);
    out
}

/// A v1 `MetricSpec` as v2's (`Convert_v1_MetricSpec_To_autoscaling_MetricSpec`).
fn metric_from_v1(m: &Value) -> Value {
    let mut out = json!({"type": m.get("type").cloned().unwrap_or(json!(""))});
    if let Some(s) = m.get("object").filter(|s| s.is_object()) {
        let average = s.get("averageValue").filter(|v| !v.is_null());
        let mut target = json!({"type": if average.is_some() { "AverageValue" } else { "Value" },
            "value": s.get("targetValue").cloned().unwrap_or(json!("0"))});
        put(&mut target, "averageValue", average);
        out["object"] = json!({"describedObject": reference(s.get("target")),
            "metric": identifier(s.get("metricName"), s.get("selector")), "target": target});
    }
    if let Some(s) = m.get("pods").filter(|s| s.is_object()) {
        out["pods"] = json!({"metric": identifier(s.get("metricName"), s.get("selector")),
            "target": {"type": "AverageValue", "averageValue": s.get("targetAverageValue").cloned().unwrap_or(json!("0"))}});
    }
    for kind in ["resource", "containerResource"] {
        if let Some(s) = m.get(kind).filter(|s| s.is_object()) {
            let utilization = s.get("targetAverageUtilization").filter(|v| !v.is_null());
            let mut target =
                json!({"type": if utilization.is_some() { "Utilization" } else { "AverageValue" }});
            put(&mut target, "averageUtilization", utilization);
            put(&mut target, "averageValue", s.get("targetAverageValue"));
            let mut o =
                json!({"name": s.get("name").cloned().unwrap_or(json!("")), "target": target});
            put(&mut o, "container", s.get("container"));
            out[kind] = o;
        }
    }
    if let Some(s) = m.get("external").filter(|s| s.is_object()) {
        let value = s.get("targetValue").filter(|v| !v.is_null());
        let mut target = json!({"type": if value.is_some() { "Value" } else { "AverageValue" }});
        put(&mut target, "value", value);
        put(&mut target, "averageValue", s.get("targetAverageValue"));
        out["external"] = json!({"metric": identifier(s.get("metricName"), s.get("metricSelector")), "target": target});
    }
    out
}

/// A v2 `MetricStatus` as v1's.
fn status_to_v1(m: &Value) -> Value {
    let mut out = json!({"type": m.get("type").cloned().unwrap_or(json!(""))});
    let current = |s: &Value, f: &str| s.get("current").and_then(|c| c.get(f)).cloned();
    if let Some(s) = m.get("object").filter(|s| s.is_object()) {
        let mut o = json!({"target": reference(s.get("describedObject")),
            "metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(&mut o, "currentValue", current(s, "value").as_ref());
        put(&mut o, "selector", s.pointer("/metric/selector"));
        put(&mut o, "averageValue", current(s, "averageValue").as_ref());
        out["object"] = o;
    }
    if let Some(s) = m.get("pods").filter(|s| s.is_object()) {
        let mut o = json!({"metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(
            &mut o,
            "currentAverageValue",
            current(s, "averageValue").as_ref(),
        );
        put(&mut o, "selector", s.pointer("/metric/selector"));
        out["pods"] = o;
    }
    for kind in ["resource", "containerResource"] {
        if let Some(s) = m.get(kind).filter(|s| s.is_object()) {
            let mut o = json!({"name": s.get("name").cloned().unwrap_or(json!(""))});
            put(
                &mut o,
                "currentAverageUtilization",
                current(s, "averageUtilization").as_ref(),
            );
            put(
                &mut o,
                "currentAverageValue",
                current(s, "averageValue").as_ref(),
            );
            put(&mut o, "container", s.get("container"));
            out[kind] = o;
        }
    }
    if let Some(s) = m.get("external").filter(|s| s.is_object()) {
        let mut o = json!({"metricName": s.pointer("/metric/name").cloned().unwrap_or(json!(""))});
        put(&mut o, "metricSelector", s.pointer("/metric/selector"));
        put(&mut o, "currentValue", current(s, "value").as_ref());
        put(
            &mut o,
            "currentAverageValue",
            current(s, "averageValue").as_ref(),
        );
        out["external"] = o;
    }
    out
}

/// A v1 `MetricStatus` as v2's.
fn status_from_v1(m: &Value) -> Value {
    let mut out = json!({"type": m.get("type").cloned().unwrap_or(json!(""))});
    let zero = json!("0");
    if let Some(s) = m.get("object").filter(|s| s.is_object()) {
        let mut current = json!({"value": s.get("currentValue").unwrap_or(&zero)});
        put(&mut current, "averageValue", s.get("averageValue"));
        out["object"] = json!({"describedObject": reference(s.get("target")),
            "metric": identifier(s.get("metricName"), s.get("selector")), "current": current});
    }
    if let Some(s) = m.get("pods").filter(|s| s.is_object()) {
        out["pods"] = json!({"metric": identifier(s.get("metricName"), s.get("selector")),
            "current": {"averageValue": s.get("currentAverageValue").unwrap_or(&zero)}});
    }
    for kind in ["resource", "containerResource"] {
        if let Some(s) = m.get(kind).filter(|s| s.is_object()) {
            let mut current =
                json!({"averageValue": s.get("currentAverageValue").unwrap_or(&zero)});
            put(
                &mut current,
                "averageUtilization",
                s.get("currentAverageUtilization"),
            );
            let mut o =
                json!({"name": s.get("name").cloned().unwrap_or(json!("")), "current": current});
            put(&mut o, "container", s.get("container"));
            out[kind] = o;
        }
    }
    if let Some(s) = m.get("external").filter(|s| s.is_object()) {
        let mut current = json!({"value": s.get("currentValue").unwrap_or(&zero)});
        put(&mut current, "averageValue", s.get("currentAverageValue"));
        out["external"] = json!({"metric": identifier(s.get("metricName"), s.get("metricSelector")), "current": current});
    }
    out
}

/// Go's `encoding/json` matches keys case-insensitively: the internal behavior's Go names
/// (`ScaleUp`, `StabilizationWindowSeconds`) read as the JSON names.
fn lower_first_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let mut chars = k.chars();
                    let key = match chars.next() {
                        Some(c) => c.to_lowercase().chain(chars).collect(),
                        None => String::new(),
                    };
                    (key, lower_first_keys(v))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lower_first_keys).collect()),
        other => other.clone(),
    }
}

fn take_annotation(meta: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let annotations = meta.get_mut("annotations")?.as_object_mut()?;
    let v = annotations.remove(key)?;
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    serde_json::from_str(v.as_str()?).ok()
}

fn put_annotation(meta: &mut Value, key: &str, encoded: String) {
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][key] = Value::from(encoded);
}

fn list(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_array).cloned().unwrap_or_default()
}

fn copy(from: &Value, to: &mut Value, fields: &[&str]) {
    for f in fields {
        if let Some(v) = from.get(*f) {
            to[*f] = v.clone();
        }
    }
}

impl SyncConversion for HpaV1Conversion {
    fn to_served(&self, v2: Value) -> Value {
        let mut meta = v2.get("metadata").cloned().unwrap_or_else(|| json!({}));
        // Only the annotations this conversion writes may be there.
        if let Some(m) = meta.as_object_mut() {
            for key in ROUND_TRIP {
                take_annotation(m, key);
                if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
                    a.remove(key);
                }
            }
        }
        let spec2 = v2.get("spec").cloned().unwrap_or_default();
        let mut spec = json!({});
        copy(
            &spec2,
            &mut spec,
            &["scaleTargetRef", "minReplicas", "maxReplicas"],
        );
        let metrics = list(spec2.get("metrics"));
        if let Some(cpu) = metrics.iter().find_map(cpu_utilization_target) {
            spec["targetCPUUtilizationPercentage"] = json!(cpu);
        }
        let others: Vec<Value> = metrics
            .iter()
            .filter(|m| cpu_utilization_target(m).is_none())
            .map(metric_to_v1)
            .collect();
        if !others.is_empty()
            && let Some(s) = go_slice_json("autoscaling.v1.MetricSpec", &others, GoStyle::Versioned)
        {
            put_annotation(&mut meta, METRICS, s);
        }
        let status2 = v2.get("status").cloned().unwrap_or_default();
        let current = list(status2.get("currentMetrics"));
        if !current.is_empty() {
            let v1: Vec<Value> = current.iter().map(status_to_v1).collect();
            if let Some(s) = go_slice_json("autoscaling.v1.MetricStatus", &v1, GoStyle::Versioned) {
                put_annotation(&mut meta, CURRENT_METRICS, s);
            }
        }
        if let Some(b) = spec2.get("behavior").filter(|b| !b.is_null())
            && let Some(s) = go_struct_json(
                "autoscaling.v2.HorizontalPodAutoscalerBehavior",
                b,
                GoStyle::Internal,
            )
        {
            put_annotation(&mut meta, BEHAVIOR, s);
        }
        let conditions = list(status2.get("conditions"));
        if !conditions.is_empty()
            && let Some(s) = go_slice_json(
                "autoscaling.v1.HorizontalPodAutoscalerCondition",
                &conditions,
                GoStyle::Versioned,
            )
        {
            put_annotation(&mut meta, CONDITIONS, s);
        }
        let mut status = json!({
            "currentReplicas": status2.get("currentReplicas").cloned().unwrap_or(json!(0)),
            "desiredReplicas": status2.get("desiredReplicas").cloned().unwrap_or(json!(0)),
        });
        copy(
            &status2,
            &mut status,
            &["observedGeneration", "lastScaleTime"],
        );
        // Upstream keeps the last CPU utilization it meets.
        if let Some(cpu) = current
            .iter()
            .filter_map(cpu_utilization_current)
            .next_back()
        {
            status["currentCPUUtilizationPercentage"] = json!(cpu);
        }
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": spec, "status": status})
    }

    fn to_storage(&self, v1: Value) -> Value {
        let mut meta = v1.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let (metrics, behavior, current, conditions) = match meta.as_object_mut() {
            Some(m) => (
                take_annotation(m, METRICS),
                take_annotation(m, BEHAVIOR),
                take_annotation(m, CURRENT_METRICS),
                take_annotation(m, CONDITIONS),
            ),
            None => (None, None, None, None),
        };
        let spec1 = v1.get("spec").cloned().unwrap_or_default();
        let mut spec = json!({});
        copy(
            &spec1,
            &mut spec,
            &["scaleTargetRef", "minReplicas", "maxReplicas"],
        );
        // The annotation's metrics first, then the CPU target, as upstream orders them.
        let mut all: Vec<Value> = list(metrics.as_ref()).iter().map(metric_from_v1).collect();
        if let Some(cpu) = spec1
            .get("targetCPUUtilizationPercentage")
            .and_then(Value::as_i64)
        {
            all.push(cpu_metric("target", cpu));
        }
        if all.is_empty() {
            // autoscaling/v1's implicit default, made explicit.
            all.push(cpu_metric("target", DEFAULT_CPU_UTILIZATION));
        }
        spec["metrics"] = Value::from(all);
        if let Some(b) = behavior.map(|b| lower_first_keys(&b)).filter(|b| {
            b.as_object()
                .is_some_and(|m| m.values().any(|v| !v.is_null()))
        }) {
            // A rule set the annotation leaves out gets upstream's defaults; a given one is
            // kept as given.
            let mut out = json!({});
            for (rules, scale_up) in [("scaleUp", true), ("scaleDown", false)] {
                out[rules] = match b.get(rules).and_then(Value::as_object) {
                    Some(given) => Value::Object(
                        given
                            .iter()
                            .filter(|(_, v)| !v.is_null())
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    None => default_scaling_rules(None, scale_up),
                };
            }
            spec["behavior"] = out;
        }
        let status1 = v1.get("status").cloned().unwrap_or_default();
        let mut status =
            json!({"desiredReplicas": status1.get("desiredReplicas").cloned().unwrap_or(json!(0))});
        if let Some(n) = status1
            .get("currentReplicas")
            .filter(|n| n.as_i64().is_some_and(|n| n != 0))
        {
            status["currentReplicas"] = n.clone();
        }
        copy(
            &status1,
            &mut status,
            &["observedGeneration", "lastScaleTime"],
        );
        let now: Vec<Value> = match current {
            // The annotation has more than the CPU percentage: it wins.
            Some(c) => list(Some(&c)).iter().map(status_from_v1).collect(),
            None => status1
                .get("currentCPUUtilizationPercentage")
                .and_then(Value::as_i64)
                .map(|cpu| vec![cpu_metric("current", cpu)])
                .unwrap_or_default(),
        };
        status["currentMetrics"] = if now.is_empty() {
            Value::Null
        } else {
            Value::from(now)
        };
        if let Some(c) = conditions {
            status["conditions"] = c;
        }
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta, "spec": spec, "status": status})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiserver::registry::Strategy;

    use super::super::HpaStrategy;

    fn v2_with_everything() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "ns", "annotations": {"keep": "me"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "minReplicas": 2, "maxReplicas": 9,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    cpu_metric("target", 60),
                ],
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
                    "scaleDown": {"stabilizationWindowSeconds": 30, "selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]},
                },
            },
            "status": {
                "currentReplicas": 3, "desiredReplicas": 4, "observedGeneration": 2,
                "currentMetrics": [{"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}],
            },
        })
    }

    #[test]
    fn v1_shows_the_cpu_target_and_keeps_the_rest_in_annotations() {
        let v1 = HpaV1Conversion.to_served(v2_with_everything());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        let ann = v1["metadata"]["annotations"].as_object().unwrap();
        assert_eq!(
            ann[METRICS],
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
        );
        assert_eq!(
            ann[BEHAVIOR],
            r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        assert_eq!(
            ann[CURRENT_METRICS],
            r#"[{"type":"Pods","pods":{"metricName":"qps","currentAverageValue":"12"}}]"#
        );
        assert!(ann.contains_key(CONDITIONS));
        assert!(v1["spec"].get("metrics").is_none());
    }

    #[test]
    fn a_round_trip_through_v1_loses_nothing() {
        let original = v2_with_everything();
        let back = HpaV1Conversion.to_storage(HpaV1Conversion.to_served(original.clone()));
        assert_eq!(back, original);
    }

    #[test]
    fn v1_create_matches_upstreams_stored_form() {
        // /work/shared/upstream-v1.36/defaults/hpa-v1.json, as v1 answers it.
        let mut v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h1"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}});
        let s = HpaStrategy { v2: false };
        s.default(&mut v1);
        s.prepare_for_create(&mut v1);
        let read_back = HpaV1Conversion.to_served(HpaV1Conversion.to_storage(v1));
        assert_eq!(
            read_back["spec"],
            json!({"maxReplicas": 5, "minReplicas": 1, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"}, "targetCPUUtilizationPercentage": 70})
        );
        assert_eq!(
            read_back["status"],
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        );
    }

    #[test]
    fn v2_defaults_match_upstream() {
        // /work/shared/upstream-v1.36/defaults/hpa-v2.json.
        let mut v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"}, "maxReplicas": 5}});
        let s = HpaStrategy { v2: true };
        s.default(&mut v2);
        s.prepare_for_create(&mut v2);
        assert_eq!(
            v2["spec"]["metrics"],
            json!([{"resource": {"name": "cpu", "target": {"averageUtilization": 80, "type": "Utilization"}}, "type": "Resource"}])
        );
        assert_eq!(v2["spec"]["minReplicas"], 1);
        assert_eq!(
            v2["status"],
            json!({"currentMetrics": null, "desiredReplicas": 0})
        );
    }

    #[test]
    fn a_v1_behavior_annotation_gets_the_missing_rules() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "annotations": {BEHAVIOR: r#"{"ScaleUp":{"StabilizationWindowSeconds":10,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":60}]}}"#}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3}});
        let v2 = HpaV1Conversion.to_storage(v1);
        assert_eq!(
            v2["spec"]["behavior"],
            json!({"scaleUp": {"stabilizationWindowSeconds": 10, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
                   "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}})
        );
        assert!(v2["metadata"].get("annotations").is_none());
    }
}
