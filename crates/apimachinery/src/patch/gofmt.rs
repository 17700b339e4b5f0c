//! Go's `fmt` rendering of decoded JSON values, for the upstream error messages that print a
//! patch fragment (`map: map[image:nginx] does not contain declared merge key: name`). Values are
//! rendered as Go holds them after `sigs.k8s.io/json` decoding with preserved integers: integers
//! are `int64`, other numbers `float64`, objects `map[string]interface{}` (printed with sorted
//! keys) and lists `[]interface{}`.
//!
//! Only message text lives here; nothing in this module decides behaviour.

use serde_json::Value;

/// `fmt.Sprintf("%v", value)`.
pub(crate) fn v(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, false);
    out
}

/// `fmt.Sprintf("%s", value)`: strings print bare, other scalars as `%!s(int64=1)`.
pub(crate) fn s(value: &Value) -> String {
    let mut out = String::new();
    write(&mut out, value, true);
    out
}

/// `reflect.TypeOf(value).String()` as printed with `%s` (a nil type prints `%!s(<nil>)`).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn write(out: &mut String, value: &Value, verb_s: bool) {
    let scalar = |out: &mut String, text: String| {
        if verb_s {
            out.push_str(&format!("%!s({}={text})", type_name(value)));
        } else {
            out.push_str(&text);
        }
    };
    match value {
        Value::Null if verb_s => out.push_str("%!s(<nil>)"),
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => scalar(out, b.to_string()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => scalar(out, i.to_string()),
            None => scalar(out, float(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(text) => out.push_str(text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write(out, item, verb_s);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go prints maps with their keys sorted, as serde_json's map already keeps them.
            out.push_str("map[");
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                write(out, item, verb_s);
            }
            out.push(']');
        }
    }
}

/// A `float64` as `%v` prints it: the shortest digits that round-trip, in exponent form when the
/// exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`), plain otherwise.
pub(crate) fn float(f: f64) -> String {
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return f.to_string();
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return f.to_string();
    };
    if (-4..6).contains(&exp) {
        return f.to_string();
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_go() {
        assert_eq!(
            v(&json!({"b": [1, "x", null], "a": 1.5})),
            "map[a:1.5 b:[1 x <nil>]]"
        );
        assert_eq!(s(&json!("merge")), "merge");
        assert_eq!(s(&json!(1)), "%!s(int64=1)");
        assert_eq!(s(&json!({"a": true})), "map[a:%!s(bool=true)]");
        assert_eq!(float(1_000_000.0), "1e+06");
        assert_eq!(float(123_456.0), "123456");
        assert_eq!(float(1.234_567_89e8), "1.23456789e+08");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(-0.000_015), "-1.5e-05");
        assert_eq!(float(2.5), "2.5");
    }
}
