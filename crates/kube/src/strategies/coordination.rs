//! Leases (upstream: pkg/apis/coordination/validation and pkg/registry/coordination/lease). The
//! coordinated leader election fields (`strategy`, `preferredHolder`) belong to a feature gate
//! that v1.36 leaves off: the strategy drops them on create, and on update unless the stored
//! lease already had them. Durations are positive and transitions not negative (`ValidateLeaseSpec`).

use apimachinery::validation::{FieldError, FieldPath, is_qualified_name};
use apiserver::registry::Strategy;
use serde_json::Value;

use super::fields::{set_at, str_at};

/// The strategies Kubernetes defines (`validLeaseStrategies`).
const LEASE_STRATEGIES: &[&str] = &["OldestEmulationVersion"];

/// Fields of the disabled `CoordinatedLeaderElection` gate.
const GATED_FIELDS: &[&str] = &["strategy", "preferredHolder"];

pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for leases).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for f in GATED_FIELDS {
                spec.remove(*f);
            }
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            for f in GATED_FIELDS {
                if set_at(old_spec, f).is_none() {
                    spec.remove(*f);
                }
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_lease_spec(obj.get("spec").unwrap_or(&Value::Null))
    }
}

fn validate_lease_spec(spec: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("spec");
    let mut errs = Vec::new();
    if let Some(d) = set_at(spec, "leaseDurationSeconds").and_then(Value::as_i64)
        && d <= 0
    {
        errs.push(FieldError::invalid(
            &path.child("leaseDurationSeconds"),
            d,
            "must be greater than 0",
        ));
    }
    if let Some(t) = set_at(spec, "leaseTransitions").and_then(Value::as_i64)
        && t < 0
    {
        errs.push(FieldError::invalid(
            &path.child("leaseTransitions"),
            t,
            "must be greater than or equal to 0",
        ));
    }
    let strategy = set_at(spec, "strategy").map(|_| str_at(spec, "strategy"));
    if let Some(s) = strategy {
        errs.extend(validate_strategy(s, &path.child("strategy")));
    }
    if !str_at(spec, "preferredHolder").is_empty() && strategy.is_none_or(str::is_empty) {
        errs.push(FieldError::forbidden(
            &path.child("preferredHolder"),
            "may only be specified if `strategy` is defined",
        ));
    }
    errs
}

/// `ValidateCoordinatedLeaseStrategy`: a bare name must be one Kubernetes defines, anything
/// else a qualified name. Upstream reports both under `<path>.strategy`.
fn validate_strategy(strategy: &str, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("strategy");
    if !strategy.contains('/') {
        if LEASE_STRATEGIES.contains(&strategy) {
            return Vec::new();
        }
        return vec![FieldError::not_supported(&path, strategy, LEASE_STRATEGIES)];
    }
    is_qualified_name(strategy)
        .into_iter()
        .map(|m| FieldError::invalid(&path, strategy, m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_and_transitions() {
        let errs = LeaseStrategy
            .validate(&json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}));
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn gated_fields_are_dropped_unless_already_stored() {
        let mut l = json!({"spec": {"preferredHolder": "x", "strategy": "OldestEmulationVersion", "holderIdentity": "h"}});
        LeaseStrategy.prepare_for_create(&mut l);
        assert_eq!(l["spec"], json!({"holderIdentity": "h"}));
        let mut new =
            json!({"spec": {"preferredHolder": "y", "strategy": "OldestEmulationVersion"}});
        LeaseStrategy.prepare_for_update(
            &mut new,
            &json!({"spec": {"strategy": "OldestEmulationVersion"}}),
        );
        assert_eq!(new["spec"], json!({"strategy": "OldestEmulationVersion"}));
    }

    #[test]
    fn strategies_are_known_or_qualified() {
        let errs = LeaseStrategy
            .validate(&json!({"spec": {"strategy": "Newest", "preferredHolder": "x"}}));
        assert_eq!(
            errs[0].to_string(),
            "spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\""
        );
        assert_eq!(errs.len(), 1);
        assert!(
            LeaseStrategy
                .validate(&json!({"spec": {"strategy": "example.com/mine"}}))
                .is_empty()
        );
    }
}
