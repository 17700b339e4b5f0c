//! CRD validation rules (`x-kubernetes-validations`), evaluated with the `cel` interpreter and
//! the Kubernetes CEL libraries of `kube-cel` (upstream: apiextensions-apiserver
//! pkg/apiserver/schema/cel). Rules are compiled once per CRD version; `self` is the value at
//! the rule's node, `oldSelf` the stored one on updates (transition rules run only then, unless
//! `optionalOldSelf`). A failed rule is reported as upstream's `fieldErrorForReason` builds it:
//! at the rule's node (plus its `fieldPath`), `Invalid value: "<schema type>"` with the rule's
//! message, its `messageExpression`, or `failed rule: <rule>`; `reason` picks Forbidden,
//! Required or Duplicate instead.
//!
//! Rules are type-checked and their cost estimated when the CRD is written
//! (`crd::schema_checks`, with `apiserver::cel`); at run time `budget` charges each evaluation
//! against upstream's per-call limit and per-object budget before any rule runs.

pub mod budget;

use std::sync::Arc;

use apimachinery::validation::{ErrorType, FieldError, FieldPath};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use serde_json::Value;

/// The compiled rules of one version's schema.
pub struct Rules {
    compiled: Arc<CompiledSchema>,
    schema: Arc<Value>,
    budget: Option<Arc<budget::CostTree>>,
}

impl Rules {
    /// The rules of `schema`, or `None` when it has none (most schemas: nothing to run).
    pub fn compile(schema: &Arc<Value>) -> Option<Rules> {
        if !has_rules(schema) {
            return None;
        }
        Some(Rules {
            compiled: Arc::new(compile_schema(schema)),
            schema: schema.clone(),
            budget: budget::for_schema(schema),
        })
    }

    /// The failed rules of `obj` (and of the change from `old`, for transition rules).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        // An object whose rules would cost more than upstream allows is refused before any runs.
        if let Some(stop) = self.budget.as_ref().and_then(|b| b.charge(obj)) {
            return vec![stop];
        }
        let Err(errors) = kube_cel::validate_compiled(&self.compiled, obj, old) else {
            return Vec::new();
        };
        errors
            .iter()
            .map(|e| {
                let path = if e.field_path.is_empty() {
                    FieldPath::nil()
                } else {
                    FieldPath::new(&e.field_path)
                };
                let value = Value::from(schema_type_at(&self.schema, &e.field_path));
                match (e.kind.clone(), e.reason.as_deref()) {
                    (ErrorKind::ValidationFailure, Some("FieldValueForbidden")) => {
                        FieldError::forbidden(&path, e.message.clone())
                    }
                    (ErrorKind::ValidationFailure, Some("FieldValueRequired")) => {
                        FieldError::required(&path, e.message.clone())
                    }
                    (ErrorKind::ValidationFailure, Some("FieldValueDuplicate")) => {
                        FieldError::duplicate(&path, value)
                    }
                    _ => FieldError::invalid(&path, value, e.message.clone()),
                }
            })
            .collect()
    }
}

/// Whether any node of the schema carries rules.
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty())
                || m.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// The schema type at a path like `spec.items[2].name` (the value upstream prints for a failed
/// rule); "object" at the root.
fn schema_type_at(schema: &Value, path: &str) -> String {
    let mut node = schema;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (field, indices) = match part.find('[') {
            Some(i) => (&part[..i], part[i..].matches('[').count()),
            None => (part, 0),
        };
        if !field.is_empty() {
            node = match node.pointer(&format!("/properties/{field}")) {
                Some(n) => n,
                None => match node.get("additionalProperties").filter(|a| a.is_object()) {
                    Some(n) => n,
                    None => return String::new(),
                },
            };
        }
        for _ in 0..indices {
            node = node
                .get("items")
                .or_else(|| node.get("additionalProperties"))
                .unwrap_or(&Value::Null);
        }
    }
    node.get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Upstream's `hasBlockingErr`: schema errors that leave the object unfit for the rules, which
/// then do not run; the caller reports this error in their place.
pub fn blocking_error(errs: &[FieldError]) -> Option<FieldError> {
    errs.iter()
        .any(|e| {
            matches!(
                e.error_type,
                ErrorType::NotSupported
                    | ErrorType::Required
                    | ErrorType::TooLong
                    | ErrorType::TooMany
                    | ErrorType::TypeInvalid
            )
        })
        .then(|| {
            // Upstream passes a nil value, which its error printer shows as "null".
            FieldError::invalid(
                &FieldPath::nil(),
                Value::from("null"),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.replicas", "message": "replicas should be greater than or equal to minReplicas"},
                {"rule": "self.replicas < 100"},
                {"rule": "self.replicas >= oldSelf.replicas", "reason": "FieldValueForbidden", "message": "may not scale down"},
            ],
            "properties": {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}},
        }}})
    }

    fn messages(obj: Value, old: Option<Value>) -> Vec<String> {
        let rules = Rules::compile(&Arc::new(schema())).expect("rules");
        rules
            .validate(&obj, old.as_ref())
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn failed_rules_read_as_upstreams() {
        assert_eq!(
            messages(json!({"spec": {"replicas": 200, "minReplicas": 300}}), None),
            [
                r#"spec: Invalid value: "object": replicas should be greater than or equal to minReplicas"#,
                r#"spec: Invalid value: "object": failed rule: self.replicas < 100"#,
            ]
        );
        assert!(messages(json!({"spec": {"replicas": 2, "minReplicas": 1}}), None).is_empty());
    }

    #[test]
    fn transition_rules_run_on_updates() {
        let old = json!({"spec": {"replicas": 5, "minReplicas": 1}});
        assert_eq!(
            messages(
                json!({"spec": {"replicas": 3, "minReplicas": 1}}),
                Some(old)
            ),
            ["spec: Forbidden: may not scale down"]
        );
    }

    #[test]
    fn schemas_without_rules_compile_to_nothing() {
        let plain = Arc::new(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        assert!(Rules::compile(&plain).is_none());
    }

    #[test]
    fn types_are_found_along_paths() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}});
        assert_eq!(schema_type_at(&s, ""), "object");
        assert_eq!(schema_type_at(&s, "spec.items"), "array");
        assert_eq!(schema_type_at(&s, "spec.items[2]"), "object");
        assert_eq!(schema_type_at(&s, "spec.items[2].name"), "string");
    }
}
