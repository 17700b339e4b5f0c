//! ConfigMaps: key names, keys in both `data` and `binaryData`, the 1 MiB total, and the
//! immutability of `immutable` ones, as upstream's `ValidateConfigMap(Update)` has them.

use apimachinery::validation::{FieldError, FieldPath, is_config_map_key};
use apiserver::registry::Strategy;
use base64::Engine as _;
use serde_json::{Map, Value};

pub struct ConfigMapStrategy;

/// Upstream's limit on the total size of a ConfigMap's or a Secret's values (`MaxSecretSize`).
pub const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// The `map[string]string` or `map[string][]byte` field `field`, when present.
pub fn string_map<'a>(obj: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    obj.get(field).and_then(Value::as_object)
}

/// A `[]byte` value's length as Go holds it: JSON carries it in base64.
pub fn decoded_len(value: &Value) -> usize {
    value
        .as_str()
        .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
        .map_or(0, |bytes| bytes.len())
}

/// The keys of `field` must be config keys (shared with Secrets).
pub fn validate_keys(obj: &Value, field: &str) -> Vec<FieldError> {
    let path = FieldPath::new(field);
    string_map(obj, field)
        .into_iter()
        .flat_map(|map| map.keys())
        .flat_map(|key| {
            is_config_map_key(key)
                .into_iter()
                .map(|msg| FieldError::invalid(&path.key(key), Value::from(key.as_str()), &msg))
        })
        .collect()
}

/// Upstream's rule for `immutable` ConfigMaps and Secrets: once set, it stays, and `fields` keep
/// their content.
pub fn validate_immutable(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return Vec::new();
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    let mut errs = Vec::new();
    if new.get("immutable") != Some(&Value::Bool(true)) {
        errs.push(FieldError::forbidden(&FieldPath::new("immutable"), WHY));
    }
    for field in fields {
        if new.get(*field) != old.get(*field) {
            errs.push(FieldError::forbidden(&FieldPath::new(field), WHY));
        }
    }
    errs
}

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_keys(obj, "data");
        let binary = string_map(obj, "binaryData");
        if let Some(data) = string_map(obj, "data") {
            for key in data
                .keys()
                .filter(|k| binary.is_some_and(|b| b.contains_key(*k)))
            {
                errs.push(FieldError::invalid(
                    &FieldPath::new("data").key(key),
                    Value::from(key.as_str()),
                    "duplicate of key present in binaryData",
                ));
            }
        }
        errs.extend(validate_keys(obj, "binaryData"));
        // Upstream counts the values only: strings as they are, bytes decoded.
        let size: usize = string_map(obj, "data")
            .into_iter()
            .flat_map(|m| m.values())
            .map(|v| v.as_str().map_or(0, str::len))
            .chain(binary.into_iter().flat_map(|m| m.values()).map(decoded_len))
            .sum();
        if size > MAX_TOTAL_BYTES {
            // The empty path stands for the whole object.
            errs.push(FieldError::too_long(
                &FieldPath::new(""),
                Value::from(size),
                MAX_TOTAL_BYTES as i64,
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_immutable(new, old, &["data", "binaryData"]);
        errs.extend(self.validate(new));
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn keys_in_both_bags_and_the_total_size() {
        let s = ConfigMapStrategy;
        let cm = json!({"data": {"k": "v", "bad/key": "x"}, "binaryData": {"k": "dg=="}});
        assert_eq!(
            messages(&s.validate(&cm)),
            vec![
                "data[bad/key]: Invalid value: \"bad/key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
            ]
        );
        let big = json!({"data": {"a": "x".repeat(MAX_TOTAL_BYTES)}, "binaryData": {"b": "eA=="}});
        assert_eq!(
            messages(&s.validate(&big)),
            vec!["[]: Too long: may not be more than 1048576 bytes"]
        );
        // Keys do not count, and bytes count decoded.
        let fits = json!({"data": {"a".repeat(10): "x".repeat(MAX_TOTAL_BYTES - 3)}, "binaryData": {"b": "eHh4"}});
        assert!(s.validate(&fits).is_empty());
    }

    #[test]
    fn immutable_config_maps_keep_their_data() {
        let s = ConfigMapStrategy;
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(s.validate_update(&old, &old).is_empty());
        assert_eq!(
            messages(&s.validate_update(&json!({"immutable": true, "data": {"a": "2"}}), &old)),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        assert_eq!(
            messages(&s.validate_update(&json!({"data": {"a": "1"}}), &old)),
            vec!["immutable: Forbidden: field is immutable when `immutable` is set"]
        );
        let mutable = json!({"data": {"a": "1"}});
        assert!(
            s.validate_update(&json!({"immutable": true, "data": {"b": "2"}}), &mutable)
                .is_empty()
        );
    }
}
