//! Namespaces: `Active` on create, the `kubernetes` finalizer in `spec.finalizers`, and a
//! two-phase delete: DELETE marks the namespace `Terminating`; the namespace controller empties
//! it and clears the finalizer; then it is removed.

use apimachinery::validation::NameValidator;
use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
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
