//! HorizontalPodAutoscaler rows, for `autoscaling/v2` and `autoscaling/v1` objects.
//!
//! Upstream prints the internal object, whose metrics have the v2 shape; a v1 object's CPU target
//! and current utilization are read as the one Resource metric that conversion makes of them.
//! Metrics a v1 object keeps in its `autoscaling.alpha.kubernetes.io/*metrics` annotations are not
//! read.
//!
//! Columns: Name, Reference, Targets, MinPods, MaxPods, Replicas, Age.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::field::{at, int_at, list_at, opt_int, str_at};
use super::format::{age, quantity};

pub(super) fn horizontal_pod_autoscaler_v2(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let targets = format_metrics(
        list_at(obj, &["spec", "metrics"]),
        list_at(obj, &["status", "currentMetrics"]),
    );
    row(obj, targets, now)
}

pub(super) fn horizontal_pod_autoscaler_v1(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let specs: Vec<Value> = opt_int(obj, &["spec", "targetCPUUtilizationPercentage"])
        .map(|target| {
            json!({"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": target}}})
        })
        .into_iter()
        .collect();
    let statuses: Vec<Value> = opt_int(obj, &["status", "currentCPUUtilizationPercentage"])
        .map(|current| {
            json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}})
        })
        .into_iter()
        .collect();
    row(obj, format_metrics(&specs, &statuses), now)
}

fn row(obj: &Value, targets: String, now: DateTime<Utc>) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        str_at(obj, &["spec", "scaleTargetRef", "kind"]),
        str_at(obj, &["spec", "scaleTargetRef", "name"])
    );
    let min_pods = opt_int(obj, &["spec", "minReplicas"])
        .map_or_else(|| "<unset>".to_string(), |n| n.to_string());
    cells![
        obj.name(),
        reference,
        targets,
        min_pods,
        int_at(obj, &["spec", "maxReplicas"]),
        int_at(obj, &["status", "currentReplicas"]),
        age(obj, now),
    ]
}

/// A quantity behind a pointer, printed as Go prints a nil `*Quantity`: "<nil>".
fn quantity_or_nil(v: Option<&Value>) -> String {
    quantity(v).unwrap_or_else(|| "<nil>".to_string())
}

/// "current/target" for the first two metrics, then "+ N more...", or "<none>".
fn format_metrics(specs: &[Value], statuses: &[Value]) -> String {
    const MAX: usize = 2;
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let status = statuses.get(i);
        // The status entry of the same source, when there is one (upstream pairs them by index).
        let current = |source: &str| status.and_then(|s| at(s, &[source]));
        let text = match str_at(spec, &["type"]) {
            source @ ("External" | "Object") => {
                let field = if source == "External" {
                    "external"
                } else {
                    "object"
                };
                let target = |name: &str| at(spec, &[field, "target", name]);
                if let Some(average) = target("averageValue") {
                    let observed = current(field)
                        .and_then(|c| at(c, &["current", "averageValue"]))
                        .map_or_else(|| "<unknown>".to_string(), |q| quantity_or_nil(Some(q)));
                    format!("{observed}/{} (avg)", quantity_or_nil(Some(average)))
                } else {
                    let observed = current(field).map_or_else(
                        || "<unknown>".to_string(),
                        |c| quantity_or_nil(at(c, &["current", "value"])),
                    );
                    format!("{observed}/{}", quantity_or_nil(target("value")))
                }
            }
            "Pods" => {
                let observed = current("pods").map_or_else(
                    || "<unknown>".to_string(),
                    |c| quantity_or_nil(at(c, &["current", "averageValue"])),
                );
                format!(
                    "{observed}/{}",
                    quantity_or_nil(at(spec, &["pods", "target", "averageValue"]))
                )
            }
            source @ ("Resource" | "ContainerResource") => {
                let field = if source == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let name = str_at(spec, &[field, "name"]);
                if let Some(average) = at(spec, &[field, "target", "averageValue"]) {
                    let observed = current(field).map_or_else(
                        || "<unknown>".to_string(),
                        |c| quantity_or_nil(at(c, &["current", "averageValue"])),
                    );
                    format!("{name}: {observed}/{}", quantity_or_nil(Some(average)))
                } else {
                    let observed = current(field)
                        .and_then(|c| opt_int(c, &["current", "averageUtilization"]))
                        .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
                    let target = opt_int(spec, &[field, "target", "averageUtilization"])
                        .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                    format!("{name}: {observed}/{target}")
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(text);
    }
    let count = list.len();
    if count > MAX {
        list.truncate(MAX);
        format!("{} + {} more...", list.join(", "), count - MAX)
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn v1_cpu_target() {
        let h = json!({"metadata": {"name": "h1"}, "spec": {"maxReplicas": 5, "minReplicas": 1,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"},
            "targetCPUUtilizationPercentage": 70}, "status": {"currentReplicas": 0, "desiredReplicas": 0}});
        assert_eq!(
            horizontal_pod_autoscaler_v1(&h, now()),
            vec![
                json!("h1"),
                json!("Deployment/d1"),
                json!("cpu: <unknown>/70%"),
                json!("1"),
                json!(5),
                json!(0),
                json!("<unknown>")
            ]
        );
        let h = json!({"spec": {"targetCPUUtilizationPercentage": 70}, "status": {"currentCPUUtilizationPercentage": 35}});
        assert_eq!(
            horizontal_pod_autoscaler_v1(&h, now())[2],
            json!("cpu: 35%/70%")
        );
        let bare = horizontal_pod_autoscaler_v1(&json!({}), now());
        assert_eq!(
            (&bare[1], &bare[2], &bare[3]),
            (&json!("/"), &json!("<none>"), &json!("<unset>"))
        );
    }

    #[test]
    fn v2_metrics() {
        let h = json!({
            "metadata": {"name": "h2"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d1"}, "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}
            ]},
            "status": {"currentReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12, "averageValue": "12m"}}}
            ]}
        });
        assert_eq!(
            horizontal_pod_autoscaler_v2(&h, now())[2],
            json!("cpu: 12%/80%, memory: <unknown>/100Mi + 1 more...")
        );
        let specs = json!([
            {"type": "External", "external": {"target": {"type": "Value", "value": "10"}}},
            {"type": "Object", "object": {"target": {"type": "AverageValue", "averageValue": "5"}}}
        ]);
        let statuses = json!([
            {"type": "External", "external": {"current": {"value": "7"}}},
            {"type": "Object", "object": {"current": {"value": "1"}}}
        ]);
        assert_eq!(
            format_metrics(specs.as_array().unwrap(), statuses.as_array().unwrap()),
            "7/10, <unknown>/5 (avg)"
        );
        let specs = json!([
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app", "target": {"type": "Utilization"}}},
            {"type": "Bogus"}
        ]);
        assert_eq!(
            format_metrics(specs.as_array().unwrap(), &[]),
            "cpu: <unknown>/<auto>, <unknown type>"
        );
        let specs = json!([{"type": "Pods", "pods": {"target": {}}}]);
        let statuses = json!([{"type": "Pods", "pods": {"current": {}}}]);
        assert_eq!(
            format_metrics(specs.as_array().unwrap(), statuses.as_array().unwrap()),
            "<nil>/<nil>"
        );
    }
}
