//! ConfigMaps: key names and the 1 MiB total, as upstream validates them.

use apimachinery::validation::{FieldError, FieldPath, is_config_map_key};
use apiserver::registry::Strategy;
use serde_json::Value;

pub struct ConfigMapStrategy;

/// Upstream's limit on the total size of a ConfigMap's data.
const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// Validates the keys of `data` and `binaryData` (shared by ConfigMaps and Secrets).
pub fn validate_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for field in fields {
        let Some(map) = obj.get(*field).and_then(Value::as_object) else {
            continue;
        };
        let path = FieldPath::new(field);
        for key in map.keys() {
            for msg in is_config_map_key(key) {
                errs.push(FieldError::invalid(
                    &path.key(key),
                    Value::from(key.as_str()),
                    &msg,
                ));
            }
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    &path.key(key),
                    Value::from(key.as_str()),
                ));
            }
        }
    }
    errs
}

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_keys(obj, &["data", "binaryData"]);
        let size: usize = ["data", "binaryData"]
            .iter()
            .filter_map(|f| obj.get(*f).and_then(Value::as_object))
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAX_TOTAL_BYTES {
            errs.push(FieldError::too_long(
                &FieldPath::new(""),
                Value::from(size),
                MAX_TOTAL_BYTES as i64,
            ));
        }
        errs
    }
}
