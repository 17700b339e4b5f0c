//! Namespaces: `Active` on create, the `kubernetes` finalizer in `spec.finalizers`, and a
//! two-phase delete: DELETE marks the namespace `Terminating`; the namespace controller empties
//! it and clears the finalizer; then it is removed. Spec finalizers are standard or
//! domain-qualified; the phase follows the deletion (upstream: `ValidateNamespace*` of
//! pkg/apis/core/validation, pkg/registry/core/namespace/strategy.go).

use apimachinery::validation::{FieldError, FieldPath, NameValidator, is_qualified_name};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

/// Finalizer names without a domain that upstream knows (`IsStandardFinalizerName`).
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// `validateFinalizerName`: a qualified name, and standard when it has no domain.
fn validate_finalizer_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "name is neither a standard finalizer name nor is it fully qualified",
        ));
    }
    errs
}

fn spec_finalizers(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    /// `SetDefaults_Namespace`: a named namespace carries the `kubernetes.io/metadata.name`
    /// label; `SetDefaults_NamespaceStatus`: the phase is `Active` unless given (a status write
    /// that leaves it out sets `Active`).
    fn default(&self, obj: &mut Value) {
        if let Some(name) = obj
            .pointer("/metadata/name")
            .filter(|n| n.as_str().is_some_and(|n| !n.is_empty()))
            .cloned()
        {
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
        let Some(map) = obj.as_object_mut() else {
            return;
        };
        let status = map.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        if let Some(status) = status.as_object_mut()
            && status
                .get("phase")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            status.insert("phase".into(), json!("Active"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        // Every new namespace carries the `kubernetes` finalizer, added to those the client gave.
        // It is no default (defaults run on every read): the namespace controller removes it.
        if !obj.get("spec").is_some_and(Value::is_object) {
            obj["spec"] = json!({});
        }
        if !obj["spec"]["finalizers"].is_array() {
            obj["spec"]["finalizers"] = json!([]);
        }
        if let Some(finalizers) = obj["spec"]["finalizers"].as_array_mut()
            && !finalizers.iter().any(|f| f == "kubernetes")
        {
            finalizers.push(json!("kubernetes"));
        }
        // Upstream labels every namespace with its own name.
        let name = obj
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::Null);
        if name.is_string() {
            if !obj["metadata"]["labels"].is_object() {
                obj["metadata"]["labels"] = json!({});
            }
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Spec finalizers change only through /finalize (the controller), status only through
        // /status; the name label cannot be removed.
        new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        if let Some(name) = old.pointer("/metadata/name").cloned() {
            if !new["metadata"]["labels"].is_object() {
                new["metadata"]["labels"] = json!({});
            }
            new["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        if subresource == "finalize" {
            // `finalize` changes spec.finalizers and nothing else.
            let finalizers = new
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(json!([]));
            *new = old.clone();
            new["spec"]["finalizers"] = finalizers;
        }
    }

    fn name_validator(&self) -> NameValidator {
        NameValidator::Dns1123Label
    }

    /// `ValidateNamespace`: every spec finalizer, reported at `spec.finalizers`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let path = FieldPath::new("spec").child("finalizers");
        spec_finalizers(obj)
            .into_iter()
            .flat_map(|f| validate_finalizer_name(f, &path))
            .collect()
    }

    /// An update keeps the stored spec (see `prepare_for_update`); a `finalize` write sets it,
    /// checked per entry as `ValidateNamespaceFinalizeUpdate` does.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let path = FieldPath::new("spec").child("finalizers");
        spec_finalizers(new)
            .into_iter()
            .enumerate()
            .flat_map(|(i, f)| validate_finalizer_name(f, &path.index(i)))
            .collect()
    }

    /// `ValidateNamespaceStatusUpdate`: `Active` until deleted, `Terminating` after.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let phase = new
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        let deleted = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        let path = FieldPath::new("status").child("Phase");
        match (deleted, phase) {
            (false, "Active") | (true, "Terminating") => Vec::new(),
            (false, _) => vec![FieldError::invalid(
                &path,
                phase,
                "may only be 'Active' if `deletionTimestamp` is empty",
            )],
            (true, _) => vec![FieldError::invalid(
                &path,
                phase,
                "may only be 'Terminating' if `deletionTimestamp` is not empty",
            )],
        }
    }

    fn delete_is_graceful(&self, obj: &mut Value) -> bool {
        obj["status"] = json!({"phase": "Terminating"});
        true
    }

    fn ready_to_remove(&self, obj: &Value) -> bool {
        let empty = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        };
        empty("/spec/finalizers") && empty("/metadata/finalizers")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_finalizers_are_standard_or_qualified() {
        let ns = json!({"spec": {"finalizers": ["kubernetes", "example.com/cleanup", "cleanup"]}});
        let errs = NamespaceStrategy.validate(&ns);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.finalizers: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"
        );
        let errs = NamespaceStrategy.validate_update(&ns, &ns);
        assert_eq!(errs[0].field, "spec.finalizers[2]");
    }

    #[test]
    fn phase_follows_deletion() {
        let ns = json!({"status": {"phase": "Terminating"}});
        assert_eq!(
            NamespaceStrategy.validate_status_update(&ns, &ns)[0].to_string(),
            "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
        );
    }
}
