//! PodDisruptionBudgets (policy/v1): `ValidatePodDisruptionBudgetSpec` (one of minAvailable
//! and maxUnavailable, each a non-negative integer or a percent up to 100%, a valid selector,
//! a known unhealthy pod eviction policy) and the status counters.

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::{
    invalid_struct, nonnegative, not_more_than_100_percent, positive_int_or_percent, present, text,
    validate_selector,
};

pub struct PodDisruptionBudgetStrategy;

const EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

fn validate_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let min = present(spec, "minAvailable");
    let max = present(spec, "maxUnavailable");
    if min.is_some() && max.is_some() {
        errs.push(invalid_struct(
            path,
            "policy.v1.PodDisruptionBudgetSpec",
            spec,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, value) in [("minAvailable", min), ("maxUnavailable", max)] {
        if let Some(v) = value {
            errs.extend(positive_int_or_percent(v, &path.child(field)));
            errs.extend(not_more_than_100_percent(v, &path.child(field)));
        }
    }
    if let Some(selector) = present(spec, "selector") {
        errs.extend(validate_selector(selector, &path.child("selector")));
    }
    if present(spec, "unhealthyPodEvictionPolicy").is_some() {
        let policy = text(spec, "unhealthyPodEvictionPolicy");
        if !EVICTION_POLICIES.contains(&policy) {
            errs.push(FieldError::not_supported(
                &path.child("unhealthyPodEvictionPolicy"),
                policy,
                EVICTION_POLICIES,
            ));
        }
    }
    errs
}

impl Strategy for PodDisruptionBudgetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        )
    }

    /// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1): counters not negative.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        [
            "disruptionsAllowed",
            "currentHealthy",
            "desiredHealthy",
            "expectedPods",
        ]
        .into_iter()
        .flat_map(|f| nonnegative(status, f, &path))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(spec: Value) -> Vec<String> {
        PodDisruptionBudgetStrategy
            .validate(&json!({"spec": spec}))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn budgets_match_upstream() {
        assert_eq!(
            messages(
                json!({"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1, "maxUnavailable": 1})
            ),
            [
                "spec: Invalid value: {\"MinAvailable\":1,\"Selector\":{\"matchLabels\":{\"app\":\"x\"}},\"MaxUnavailable\":1,\"UnhealthyPodEvictionPolicy\":null}: minAvailable and maxUnavailable cannot be both set"
            ]
        );
        assert_eq!(
            messages(json!({"maxUnavailable": "120%"})),
            ["spec.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"]
        );
        assert_eq!(
            messages(json!({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"})),
            [
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
            ]
        );
        assert!(messages(json!({"maxUnavailable": "25%"})).is_empty());
    }
}
