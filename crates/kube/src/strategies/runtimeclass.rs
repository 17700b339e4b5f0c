//! RuntimeClasses (upstream: pkg/apis/node/validation, pkg/registry/node/runtimeclass,
//! pkg/api/node/util.go): a DNS-label handler that never changes, a pod overhead checked as
//! container limits, and scheduling constraints (labels, unique tolerations); beta node labels
//! in the node selector warn.

use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label, validate_labels};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::nodeselection::{deprecated_node_label, items, str_of, validate_tolerations};
use super::resources::validate_container_resource_requirements;

pub struct RuntimeClassStrategy;

fn validate_runtime_class(rc: &Value) -> Vec<FieldError> {
    let handler = str_of(rc, "handler");
    let mut errs: Vec<FieldError> = if handler.is_empty() {
        vec![FieldError::required(&FieldPath::new("handler"), "")]
    } else {
        is_dns1123_label(handler)
            .into_iter()
            .map(|m| FieldError::invalid(&FieldPath::new("handler"), handler, m))
            .collect()
    };
    if let Some(fixed) = rc.pointer("/overhead/podFixed").filter(|o| !o.is_null()) {
        errs.extend(validate_container_resource_requirements(
            &json!({"limits": fixed}),
            &FieldPath::new("overhead"),
        ));
    }
    if let Some(scheduling) = rc.get("scheduling").filter(|s| !s.is_null()) {
        let path = FieldPath::new("scheduling");
        if let Some(selector) = scheduling.get("nodeSelector").filter(|s| !s.is_null()) {
            errs.extend(validate_labels(Some(selector), &path.child("nodeSelector")));
        }
        let tolerations = items(scheduling.get("tolerations"));
        let tol_path = path.child("tolerations");
        errs.extend(validate_tolerations(tolerations, &tol_path));
        // Tolerations are a set keyed by key, operator, value and effect.
        let mut seen: Vec<[&str; 4]> = Vec::new();
        for (i, t) in tolerations.iter().enumerate() {
            let key = ["key", "operator", "value", "effect"].map(|f| str_of(t, f));
            if seen.contains(&key) {
                let mut err = FieldError::duplicate(&tol_path.index(i), t.clone());
                if let Some(r) = go_struct_json("core.v1.Toleration", t, GoStyle::Internal) {
                    err = err.with_rendered_value(r);
                }
                errs.push(err);
            } else {
                seen.push(key);
            }
        }
    }
    errs
}

/// `GetWarningsForRuntimeClass`: one warning per beta node label of the node selector.
fn warnings(rc: &Value) -> Vec<String> {
    rc.pointer("/scheduling/nodeSelector")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.keys())
        .filter_map(|k| deprecated_node_label(k))
        .map(|msg| format!("scheduling.nodeSelector: {msg}"))
        .collect()
}

impl Strategy for RuntimeClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_runtime_class(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_runtime_class(new);
        if str_of(new, "handler") != str_of(old, "handler") {
            errs.push(FieldError::invalid(
                &FieldPath::new("handler"),
                str_of(new, "handler"),
                "field is immutable",
            ));
        }
        errs
    }

    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for RuntimeClasses).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        warnings(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_checked_as_limits() {
        let rc = json!({"handler": "runc", "overhead": {"podFixed": {"cpu": "-1"}}});
        assert_eq!(
            RuntimeClassStrategy.validate(&rc)[0].to_string(),
            "overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        );
    }

    #[test]
    fn beta_node_labels_warn() {
        let rc = json!({"handler": "runc", "scheduling": {"nodeSelector": {"beta.kubernetes.io/os": "linux"}}});
        assert_eq!(
            RuntimeClassStrategy.warnings_on_create(&rc),
            vec![
                "scheduling.nodeSelector: deprecated since v1.14; use \"kubernetes.io/os\" instead"
            ]
        );
    }
}
