//! Field access for the printers, reading an object held as JSON the way Go's decoder fills
//! upstream's typed structs: an absent or `null` field is the zero value (empty string, 0, false,
//! empty list or map), and a pointer field is `None` only when it is absent or `null`.
//!
//! Printers read only through these helpers so that no object, however malformed, can make them
//! panic. This module never changes an object and knows nothing about any kind.

use apimachinery::object::get_path;
use serde_json::{Map, Value};

/// The value at `path`, or `None` when it is absent or `null` (a nil pointer upstream).
pub(super) fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    get_path(obj, path).filter(|v| !v.is_null())
}

/// A string field; `None` when absent, `null` or not a string.
pub(super) fn opt_str<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path)?.as_str()
}

/// A string field, empty when absent.
pub(super) fn str_at<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    opt_str(obj, path).unwrap_or("")
}

/// An integer field; `None` when absent, `null` or not an integer.
pub(super) fn opt_int(obj: &Value, path: &[&str]) -> Option<i64> {
    at(obj, path)?.as_i64()
}

/// An integer field, 0 when absent.
pub(super) fn int_at(obj: &Value, path: &[&str]) -> i64 {
    opt_int(obj, path).unwrap_or(0)
}

/// A boolean field; `None` when absent, `null` or not a boolean.
pub(super) fn opt_bool(obj: &Value, path: &[&str]) -> Option<bool> {
    at(obj, path)?.as_bool()
}

/// A boolean field, false when absent.
pub(super) fn bool_at(obj: &Value, path: &[&str]) -> bool {
    opt_bool(obj, path).unwrap_or(false)
}

/// A list field, empty when absent or not a list.
pub(super) fn list_at<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    at(obj, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A map field; `None` when absent or not an object.
pub(super) fn map_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    at(obj, path)?.as_object()
}

/// The number of entries of a list or map field, 0 when absent (Go's `len` of a nil slice or map).
pub(super) fn len_at(obj: &Value, path: &[&str]) -> usize {
    match at(obj, path) {
        Some(Value::Array(items)) => items.len(),
        Some(Value::Object(entries)) => entries.len(),
        _ => 0,
    }
}

/// The strings of a list field, skipping anything that is not a string.
pub(super) fn strings_at<'a>(obj: &'a Value, path: &[&str]) -> Vec<&'a str> {
    list_at(obj, path)
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_and_null_read_as_zero_values() {
        let o =
            json!({"a": {"s": "x", "n": 3, "b": true, "l": [1, "y"], "m": {"k": 1}, "z": null}});
        assert_eq!(str_at(&o, &["a", "s"]), "x");
        assert_eq!(str_at(&o, &["a", "missing"]), "");
        assert_eq!(opt_str(&o, &["a", "z"]), None);
        assert_eq!(int_at(&o, &["a", "n"]), 3);
        assert_eq!(int_at(&o, &["a", "s"]), 0);
        assert!(bool_at(&o, &["a", "b"]));
        assert_eq!(list_at(&o, &["a", "l"]).len(), 2);
        assert_eq!(strings_at(&o, &["a", "l"]), vec!["y"]);
        assert_eq!(len_at(&o, &["a", "m"]), 1);
        assert_eq!(len_at(&o, &["a", "z"]), 0);
        assert!(map_at(&o, &["a", "m"]).is_some());
        assert!(at(&o, &["a", "z"]).is_none());
    }
}
