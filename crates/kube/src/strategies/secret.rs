//! Secrets: type `Opaque` by default, valid keys, and a type that cannot change.

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::Value;

use super::configmap::validate_keys;

pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn default(&self, obj: &mut Value) {
        if obj
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            obj["type"] = Value::from("Opaque");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_keys(obj, &["data", "stringData"])
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                &FieldPath::new("type"),
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }
}
