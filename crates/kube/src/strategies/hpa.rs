//! HorizontalPodAutoscalers, served as autoscaling/v2 (the storage version) and autoscaling/v1.
//! The v1 form has one CPU target where v2 has a list of metrics; what v1 cannot say travels in
//! upstream's `autoscaling.alpha.kubernetes.io/*` annotations, so that a v2 object written back
//! through v1 loses nothing (upstream: pkg/apis/autoscaling/v1/conversion.go).

use apiserver::registry::{Conversion, Strategy};
use serde_json::{Map, Value, json};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// The CPU target upstream's v2 defaulting gives an HPA without metrics.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

pub struct HpaStrategy {
    /// Whether this is the v2 form (else v1).
    pub v2: bool,
}

fn cpu_metric(target_or_current: &str, utilization: i64) -> Value {
    let field = if target_or_current == "target" {
        json!({"type": "Utilization", "averageUtilization": utilization})
    } else {
        json!({"averageUtilization": utilization})
    };
    json!({"type": "Resource", "resource": {"name": "cpu", target_or_current: field}})
}

/// The CPU utilization of a v2 metric, when it is the one metric v1 can express.
fn cpu_utilization(m: &Value, target_or_current: &str) -> Option<i64> {
    let r = m.get("resource")?;
    let is_cpu = m.get("type")? == "Resource" && r.get("name")? == "cpu";
    let v = r.get(target_or_current)?;
    let utilization_target = target_or_current == "current" || v.get("type")? == "Utilization";
    (is_cpu && utilization_target)
        .then(|| v.get("averageUtilization")?.as_i64())
        .flatten()
}

impl Strategy for HpaStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        spec.entry("minReplicas").or_insert(json!(1));
        if self.v2
            && spec
                .get("metrics")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        {
            spec.insert(
                "metrics".into(),
                json!([cpu_metric("target", DEFAULT_CPU_UTILIZATION)]),
            );
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
}

/// autoscaling/v1 over autoscaling/v2 storage.
pub struct HpaV1Conversion;

fn take_annotation(meta: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let annotations = meta.get_mut("annotations")?.as_object_mut()?;
    let v = annotations.remove(key)?;
    if annotations.is_empty() {
        meta.remove("annotations");
    }
    serde_json::from_str(v.as_str()?).ok()
}

fn put_annotation(meta: &mut Value, key: &str, v: &Value) {
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][key] = Value::from(v.to_string());
}

fn copy(from: &Value, to: &mut Value, fields: &[&str]) {
    for f in fields {
        if let Some(v) = from.get(*f) {
            to[*f] = v.clone();
        }
    }
}

impl Conversion for HpaV1Conversion {
    fn to_served(&self, v2: Value) -> Value {
        let mut meta = v2.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let spec2 = v2.get("spec").cloned().unwrap_or_default();
        let mut spec = json!({});
        copy(
            &spec2,
            &mut spec,
            &["scaleTargetRef", "minReplicas", "maxReplicas"],
        );
        let metrics: Vec<Value> = spec2
            .get("metrics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cpu = metrics
            .iter()
            .position(|m| cpu_utilization(m, "target").is_some());
        if let Some(i) = cpu {
            spec["targetCPUUtilizationPercentage"] = json!(cpu_utilization(&metrics[i], "target"));
        }
        let others: Vec<Value> = metrics
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != cpu)
            .map(|(_, m)| m.clone())
            .collect();
        if !others.is_empty() {
            put_annotation(&mut meta, METRICS, &Value::from(others));
        }
        if let Some(b) = spec2.get("behavior") {
            put_annotation(&mut meta, BEHAVIOR, b);
        }
        let status2 = v2.get("status").cloned().unwrap_or_default();
        let mut status = json!({
            "currentReplicas": status2.get("currentReplicas").cloned().unwrap_or(json!(0)),
            "desiredReplicas": status2.get("desiredReplicas").cloned().unwrap_or(json!(0)),
        });
        copy(
            &status2,
            &mut status,
            &["observedGeneration", "lastScaleTime"],
        );
        let current: Vec<Value> = status2
            .get("currentMetrics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cpu_now = current
            .iter()
            .position(|m| cpu_utilization(m, "current").is_some());
        if let Some(i) = cpu_now {
            status["currentCPUUtilizationPercentage"] =
                json!(cpu_utilization(&current[i], "current"));
        }
        let other_now: Vec<Value> = current
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != cpu_now)
            .map(|(_, m)| m.clone())
            .collect();
        if !other_now.is_empty() {
            put_annotation(&mut meta, CURRENT_METRICS, &Value::from(other_now));
        }
        if let Some(c) = status2
            .get("conditions")
            .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        {
            put_annotation(&mut meta, CONDITIONS, c);
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
        let mut all: Vec<Value> = Vec::new();
        if let Some(cpu) = spec1
            .get("targetCPUUtilizationPercentage")
            .and_then(Value::as_i64)
        {
            all.push(cpu_metric("target", cpu));
        }
        all.extend(
            metrics
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default(),
        );
        if all.is_empty() {
            // What upstream's v2 defaulting gives the object when it is read back.
            all.push(cpu_metric("target", DEFAULT_CPU_UTILIZATION));
        }
        spec["metrics"] = Value::from(all);
        if let Some(b) = behavior {
            spec["behavior"] = b;
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
        let mut now: Vec<Value> = Vec::new();
        if let Some(cpu) = status1
            .get("currentCPUUtilizationPercentage")
            .and_then(Value::as_i64)
        {
            now.push(cpu_metric("current", cpu));
        }
        now.extend(
            current
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default(),
        );
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

    fn v2_with_everything() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "ns", "annotations": {"keep": "me"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "minReplicas": 2, "maxReplicas": 9,
                "metrics": [
                    cpu_metric("target", 60),
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}},
            },
            "status": {
                "currentReplicas": 3, "desiredReplicas": 4, "observedGeneration": 2,
                "currentMetrics": [cpu_metric("current", 55), {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "12"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}],
            },
        })
    }

    #[test]
    fn v1_shows_the_cpu_target_and_keeps_the_rest_in_annotations() {
        let v1 = HpaV1Conversion.to_served(v2_with_everything());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 55);
        assert_eq!(
            (
                v1["status"]["currentReplicas"].as_i64(),
                v1["status"]["desiredReplicas"].as_i64()
            ),
            (Some(3), Some(4))
        );
        let ann = v1["metadata"]["annotations"].as_object().unwrap();
        assert!(
            ann.contains_key(METRICS)
                && ann.contains_key(BEHAVIOR)
                && ann.contains_key(CONDITIONS)
                && ann.contains_key(CURRENT_METRICS)
        );
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
}
