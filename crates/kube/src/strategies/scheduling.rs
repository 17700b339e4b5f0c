//! PriorityClasses (upstream: pkg/apis/scheduling/validation and pkg/apis/scheduling/v1): a
//! class preempts lower priorities unless it says otherwise (`SetDefaults_PriorityClass`); the
//! `system-` prefix belongs to the two classes the system ships, and user classes stay at or
//! below one billion (`ValidatePriorityClass`). The value never changes (a row of the catalog),
//! nor does the preemption policy.

use apimachinery::validation::{FieldError, FieldPath, validate_immutable_field};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::fields::{bool_at, int_at, set_at, str_at};

/// `scheduling.HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// The system's own classes: name, value, globalDefault (`SystemPriorityClasses`).
const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, bool)] = &[
    ("system-node-critical", 2_000_001_000, false),
    ("system-cluster-critical", 2_000_000_000, false),
];

pub struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn default(&self, obj: &mut Value) {
        if obj.is_object() && obj.get("preemptionPolicy").is_none_or(Value::is_null) {
            obj["preemptionPolicy"] = json!("PreemptLowerPriority");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let value = int_at(obj, "value");
        if name.starts_with("system-") {
            if let Err(why) = known_system_class(name, value, bool_at(obj, "globalDefault")) {
                errs.push(FieldError::forbidden(
                    &FieldPath::new("metadata").child("name"),
                    format!(
                        "priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                    ),
                ));
            }
        } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(FieldError::forbidden(
                &FieldPath::new("value"),
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            ));
        }
        if set_at(obj, "preemptionPolicy").is_some() {
            errs.extend(validate_preemption_policy(str_at(obj, "preemptionPolicy")));
        }
        errs
    }

    /// Upstream's update check is metadata, the value (the catalog's row) and the preemption
    /// policy only: the rest of the class is not validated again.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_immutable_field(
            new.get("preemptionPolicy").unwrap_or(&Value::Null),
            old.get("preemptionPolicy").unwrap_or(&Value::Null),
            &FieldPath::new("preemptionPolicy"),
        )
    }
}

/// `IsKnownSystemPriorityClass`: why a `system-` class is not one of the system's.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    let Some((_, v, g)) = SYSTEM_PRIORITY_CLASSES.iter().find(|(n, ..)| *n == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if *v != value {
        return Err(format!("value of {name} PriorityClass must be {v}"));
    }
    if *g != global_default {
        return Err(format!("globalDefault of {name} PriorityClass must be {g}"));
    }
    Ok(())
}

/// `ValidatePreemptionPolicy` (core validation, shared with pods).
fn validate_preemption_policy(policy: &str) -> Vec<FieldError> {
    let path = FieldPath::new("preemptionPolicy");
    match policy {
        "PreemptLowerPriority" | "Never" => Vec::new(),
        "" => vec![FieldError::required(&path, "")],
        other => vec![FieldError::not_supported(
            &path,
            other,
            &["PreemptLowerPriority", "Never"],
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: Value) -> Vec<String> {
        PriorityClassStrategy
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn user_classes_and_the_system_prefix() {
        assert_eq!(
            messages(json!({"metadata": {"name": "big"}, "value": 2_000_000_000})),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        assert_eq!(
            messages(json!({"metadata": {"name": "system-x"}, "value": 1000})),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-x is not a known system priority class"
            ]
        );
        assert_eq!(
            messages(json!({"metadata": {"name": "system-node-critical"}, "value": 1})),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"
            ]
        );
        assert!(
            messages(
                json!({"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000})
            )
            .is_empty()
        );
        assert_eq!(
            messages(
                json!({"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "Sometimes"})
            ),
            [
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""
            ]
        );
    }

    #[test]
    fn preemption_policy_is_immutable() {
        let errs = PriorityClassStrategy.validate_update(
            &json!({"preemptionPolicy": "Never"}),
            &json!({"preemptionPolicy": "PreemptLowerPriority"}),
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "preemptionPolicy");
    }
}
