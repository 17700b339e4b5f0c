//! Go's `encoding/json` rendering of a value of a named Go struct, for messages that print a bad
//! value as upstream's validation does.
//!
//! Upstream validates *internal* types, which carry no JSON tags: `field.Invalid(path, taint,
//! ...)` prints `{"Key":"k","Value":"b","Effect":"NoSchedule","TimeAdded":null}` — Go field
//! names, in declaration order, every field present (no `omitempty`), nil pointers and slices as
//! `null`, zero structs filled in. Types of `meta/v1` are shared by internal and versioned code
//! and keep their JSON tags (an `OwnerReference` prints as `{"apiVersion":"v1","kind":"Pod",...}`
//! in declaration order, empty `omitempty` fields left out). [`GoStyle::Versioned`] renders
//! every type the tagged way.
//!
//! The shapes come from the same Go facts as the transcoder; this module reads them, never
//! client input beyond the value it is asked to print, and it does not fail: a value that does
//! not fit its Go type is printed as it is.

use std::fmt::Write;

use serde_json::Value;

use crate::schema::{Cardinality, Field, MessageId, Schema, Special, Type, schema};

/// How struct fields are named and which are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoStyle {
    /// Internal types: Go field names, every field (except in `meta/v1` types, which are tagged).
    Internal,
    /// Versioned types: JSON names, `omitempty` honoured.
    Versioned,
}

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// The full message name for a short Go type name: `core.v1.Taint`, `rbac.v1.RoleRef`,
/// `meta.v1.OwnerReference`, `apiextensions.v1.JSONSchemaProps`, `apiregistration.v1.APIService`.
fn full_name(short: &str) -> String {
    if let Some(rest) = short.strip_prefix("meta.") {
        format!("k8s.io.apimachinery.pkg.apis.meta.{rest}")
    } else if short.starts_with("apiextensions.") {
        format!("k8s.io.apiextensions_apiserver.pkg.apis.{short}")
    } else if short.starts_with("apiregistration.") {
        format!("k8s.io.kube_aggregator.pkg.apis.{short}")
    } else {
        format!("k8s.io.api.{short}")
    }
}

/// Renders `value` as Go would marshal the struct `go_type` (a short name, see [`full_name`])
/// holding it; `None` when the type is unknown.
pub fn go_struct_json(go_type: &str, value: &Value, style: GoStyle) -> Option<String> {
    let schema = schema();
    let id = schema.message_named(&full_name(go_type))?;
    let mut out = String::new();
    Renderer { schema, style }.message(id, Some(value), &mut out);
    Some(out)
}

/// Renders a list of `go_type` values, as Go prints a slice (`[]core.Taint`).
pub fn go_slice_json(go_type: &str, values: &[Value], style: GoStyle) -> Option<String> {
    let schema = schema();
    let id = schema.message_named(&full_name(go_type))?;
    let r = Renderer { schema, style };
    let mut out = String::from("[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        r.message(id, Some(v), &mut out);
    }
    out.push(']');
    Some(out)
}

struct Renderer<'s> {
    schema: &'s Schema,
    style: GoStyle,
}

impl Renderer<'_> {
    /// Whether fields of this message print under their Go names, all of them.
    fn untagged(&self, id: MessageId) -> bool {
        self.style == GoStyle::Internal && !self.schema.messages[id].name.starts_with(META_V1)
    }

    fn message(&self, id: MessageId, value: Option<&Value>, out: &mut String) {
        let message = &self.schema.messages[id];
        let value = value.filter(|v| !v.is_null());
        match message.special {
            Special::None => {}
            Special::Time | Special::MicroTime => return json_or(value, "null", out),
            Special::Duration => return json_or(value, "\"0s\"", out),
            Special::Quantity => return json_or(value, "\"0\"", out),
            Special::IntOrString => return json_or(value, "0", out),
            _ => return json_or(value, "null", out),
        }
        out.push('{');
        let mut first = true;
        self.fields(id, value.and_then(Value::as_object), &mut first, out);
        out.push('}');
    }

    fn fields(
        &self,
        id: MessageId,
        object: Option<&serde_json::Map<String, Value>>,
        first: &mut bool,
        out: &mut String,
    ) {
        let untagged = self.untagged(id);
        for field in &self.schema.messages[id].fields {
            if field.inline {
                // An embedded struct's fields are promoted into this object, as Go does.
                if let Type::Message(inner) = field.ty {
                    self.fields(inner, object, first, out);
                }
                continue;
            }
            let value = object.and_then(|o| o.get(&*field.json));
            if !untagged && field.omitempty && is_empty(field, value) {
                continue;
            }
            if !*first {
                out.push(',');
            }
            *first = false;
            let key = if untagged && !field.go_name.is_empty() {
                &*field.go_name
            } else {
                &*field.json
            };
            write_string(key, out);
            out.push(':');
            self.field(field, value, out);
        }
    }

    fn field(&self, field: &Field, value: Option<&Value>, out: &mut String) {
        let value = value.filter(|v| !v.is_null());
        match field.cardinality {
            Cardinality::Single if field.pointer && value.is_none() => out.push_str("null"),
            Cardinality::Single => self.element(field.ty, value, out),
            Cardinality::Repeated if field.ty == Type::Bytes => json_or(value, "null", out),
            Cardinality::Repeated => match value {
                Some(Value::Array(items)) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        self.element(field.ty, Some(item), out);
                    }
                    out.push(']');
                }
                Some(other) => json_or(Some(other), "null", out),
                None => out.push_str("null"),
            },
            Cardinality::Map => match value {
                Some(Value::Object(entries)) => {
                    // Go writes map keys sorted.
                    let mut keys: Vec<&String> = entries.keys().collect();
                    keys.sort();
                    out.push('{');
                    for (i, k) in keys.into_iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        write_string(k, out);
                        out.push(':');
                        self.element(field.ty, entries.get(k), out);
                    }
                    out.push('}');
                }
                Some(other) => json_or(Some(other), "null", out),
                None => out.push_str("null"),
            },
        }
    }

    fn element(&self, ty: Type, value: Option<&Value>, out: &mut String) {
        match ty {
            Type::Message(id) => self.message(id, value, out),
            Type::String => json_or(value, "\"\"", out),
            Type::Bool => json_or(value, "false", out),
            Type::Int32 | Type::Int64 | Type::Double => json_or(value, "0", out),
            Type::Bytes => json_or(value, "null", out),
        }
    }
}

/// Go's `omitempty`: false, 0, "", nil pointers and empty slices and maps are left out; structs
/// never are.
fn is_empty(field: &Field, value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty() && !matches!(field.ty, Type::Message(_)),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty() && field.cardinality == Cardinality::Map,
    }
}

/// `value` as Go's encoder writes it, or `zero` when there is none.
fn json_or(value: Option<&Value>, zero: &str, out: &mut String) {
    match value {
        None | Some(Value::Null) => out.push_str(zero),
        Some(v) => write_json(v, out),
    }
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_json(&map[k], out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Go's encoder escapes it (HTML-safe: `<`, `>`, `&`, U+2028, U+2029).
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn internal(ty: &str, v: Value) -> String {
        go_struct_json(ty, &v, GoStyle::Internal).expect("a known type")
    }

    #[test]
    fn internal_types_print_go_names_and_every_field() {
        assert_eq!(
            internal(
                "core.v1.Taint",
                json!({"key": "k", "value": "b", "effect": "NoSchedule"})
            ),
            r#"{"Key":"k","Value":"b","Effect":"NoSchedule","TimeAdded":null}"#
        );
        assert_eq!(
            internal(
                "rbac.v1.RoleRef",
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "w"})
            ),
            r#"{"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"w"}"#
        );
        assert_eq!(
            internal("core.v1.SeccompProfile", json!({"type": "RuntimeDefault"})),
            r#"{"Type":"RuntimeDefault","LocalhostProfile":null}"#
        );
    }

    #[test]
    fn meta_types_keep_their_tags_in_declaration_order() {
        let owner =
            json!({"uid": "u", "name": "p", "kind": "Pod", "apiVersion": "v1", "controller": true});
        assert_eq!(
            internal("meta.v1.OwnerReference", owner),
            r#"{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u","controller":true}"#
        );
    }

    #[test]
    fn unknown_types_are_none() {
        assert_eq!(
            go_struct_json("core.v1.Nope", &json!({}), GoStyle::Internal),
            None
        );
    }
}
