//! Readers of JSON objects as upstream's Go structs read them, shared by every kind's
//! defaults and validation: a field that
//! is absent, null or of the wrong JSON type reads as Go's zero value, so that rules written
//! against Go structs apply to client JSON without panics.

use serde_json::Value;

/// The string at `key` of `obj`, or "" (Go's zero string).
pub(crate) fn str_at<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The list at `key` of `obj`, or an empty one (a nil slice).
pub(crate) fn list_at<'a>(obj: &'a Value, key: &str) -> &'a [Value] {
    obj.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The strings of the list at `key` (non-strings skipped: the Go types rejected them already).
pub(crate) fn strs_at<'a>(obj: &'a Value, key: &str) -> Vec<&'a str> {
    list_at(obj, key).iter().filter_map(Value::as_str).collect()
}

/// The value at `key` when it is set: neither absent nor null (a non-nil Go pointer).
pub(crate) fn set_at<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// The string at `key` when it is one (a set Go pointer to a string).
pub(crate) fn opt_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

/// The integer at `key` when it is one.
pub(crate) fn opt_int(obj: &Value, key: &str) -> Option<i64> {
    obj.get(key).and_then(Value::as_i64)
}

/// The integer at `key`, or 0.
pub(crate) fn int_at(obj: &Value, key: &str) -> i64 {
    obj.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// The boolean at `key`, or false.
pub(crate) fn bool_at(obj: &Value, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The strings of `values` as a JSON list, for error messages that print a Go slice.
pub(crate) fn json_list(values: &[&str]) -> Value {
    Value::from(values.iter().map(|s| Value::from(*s)).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_null_and_mistyped_fields_read_as_zero_values() {
        let o = json!({"s": "x", "n": null, "l": ["a", 1, "b"], "i": 3, "b": true, "bad": 7});
        assert_eq!(str_at(&o, "s"), "x");
        assert_eq!(str_at(&o, "bad"), "");
        assert_eq!(str_at(&o, "missing"), "");
        assert_eq!(strs_at(&o, "l"), vec!["a", "b"]);
        assert!(list_at(&o, "n").is_empty());
        assert!(set_at(&o, "n").is_none() && set_at(&o, "s").is_some());
        assert_eq!((int_at(&o, "i"), int_at(&o, "s")), (3, 0));
        assert!(bool_at(&o, "b") && !bool_at(&o, "i"));
        assert_eq!(json_list(&["a"]), json!(["a"]));
    }
}
