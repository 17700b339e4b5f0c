//! JSON → protobuf: reads JSON as Go's encoding/json would fill the Go struct, then writes the
//! bytes Go's generated marshaller would write for that struct.
//!
//! Go's marshaller writes fields in number order; it writes every non-pointer field, even when
//! empty (`generateName: ""` is on the wire), but a pointer, a byte slice or a named slice only
//! when it is non-nil (JSON `null` or absent is nil); repeated fields are unpacked; map entries
//! are sorted by key. Special types write themselves as their `Marshal` does. This module never
//! reads protobuf.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::ProtobufError;
use crate::schema::{Cardinality, Field, MessageId, Schema, Special, Type};
use crate::time;
use crate::wire::{FIXED64, put_bytes, put_nested, put_tag, put_varint_field};

pub(crate) struct Encoder<'s> {
    pub schema: &'s Schema,
    /// How many messages deep the encoder is: the server refuses objects nested past
    /// [`crate::MAX_DEPTH`] on the way in, and this keeps anything stored before that rule from
    /// exhausting the stack on the way out.
    pub depth: std::cell::Cell<usize>,
}

pub(crate) fn invalid(message: impl Into<String>) -> ProtobufError {
    ProtobufError::Invalid {
        path: String::new(),
        message: message.into(),
    }
}

impl Encoder<'_> {
    /// Appends the contents (no tag, no length) of message `id` built from `value`.
    pub(crate) fn message(
        &self,
        id: MessageId,
        value: &Value,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        let depth = self.depth.get() + 1;
        if depth > crate::MAX_DEPTH {
            return Err(ProtobufError::TooDeep);
        }
        self.depth.set(depth);
        let result = self.message_here(id, value, out);
        self.depth.set(depth - 1);
        result
    }

    fn message_here(
        &self,
        id: MessageId,
        value: &Value,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        let message = &self.schema.messages[id];
        if message.special != Special::None {
            return self.special(id, message.special, value, out);
        }
        let empty = Map::new();
        // JSON null fills nothing: the struct keeps its zero value.
        let object = match value {
            Value::Object(object) => object,
            Value::Null => &empty,
            other => {
                return Err(invalid(format!(
                    "expected an object, got {}",
                    json_kind(other)
                )));
            }
        };
        for &index in &message.wire_order {
            let field = &message.fields[usize::from(index)];
            let value = if field.inline {
                Some(value)
            } else {
                object.get(field.json)
            };
            self.field(field, value.unwrap_or(&Value::Null), out)
                .map_err(|e| e.within(if field.inline { "" } else { field.json }))?;
        }
        Ok(())
    }

    pub(crate) fn field(
        &self,
        field: &Field,
        value: &Value,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        match field.cardinality {
            Cardinality::Single => match field.ty {
                Type::Message(id) => {
                    // A nil pointer or nil named slice is not written; a struct always is.
                    let nil_able =
                        field.pointer || self.schema.messages[id].special == Special::Strings;
                    if !(nil_able && value.is_null()) {
                        put_nested(out, field.number, |out| self.message(id, value, out))?;
                    }
                }
                Type::Bytes => {
                    if !value.is_null() {
                        put_bytes(out, field.number, &decode_base64(value)?);
                    }
                }
                ty => {
                    if !(field.pointer && value.is_null()) {
                        scalar(field.number, ty, value, out)?;
                    }
                }
            },
            Cardinality::Repeated => {
                let items = match value {
                    Value::Null => return Ok(()),
                    Value::Array(items) => items,
                    other => {
                        return Err(invalid(format!(
                            "expected an array, got {}",
                            json_kind(other)
                        )));
                    }
                };
                for (index, item) in items.iter().enumerate() {
                    let result = match field.ty {
                        Type::Message(id) => {
                            put_nested(out, field.number, |out| self.message(id, item, out))
                        }
                        Type::Bytes => {
                            decode_base64(item).map(|bytes| put_bytes(out, field.number, &bytes))
                        }
                        ty => scalar(field.number, ty, item, out),
                    };
                    result.map_err(|e| e.within(&format!("[{index}]")))?;
                }
            }
            Cardinality::Map => {
                let entries = match value {
                    Value::Null => return Ok(()),
                    Value::Object(entries) => entries,
                    other => {
                        return Err(invalid(format!(
                            "expected an object, got {}",
                            json_kind(other)
                        )));
                    }
                };
                // Go sorts map keys (byte order) before writing them.
                let mut keys: Vec<&String> = entries.keys().collect();
                keys.sort_unstable();
                for key in keys {
                    let entry_value = &entries[key];
                    put_nested(out, field.number, |out| {
                        put_bytes(out, 1, key.as_bytes());
                        match field.ty {
                            Type::Message(id) => {
                                put_nested(out, 2, |out| self.message(id, entry_value, out))
                            }
                            // A nil byte slice value is left out of the entry.
                            Type::Bytes if entry_value.is_null() => Ok(()),
                            Type::Bytes => {
                                decode_base64(entry_value).map(|bytes| put_bytes(out, 2, &bytes))
                            }
                            ty => scalar(2, ty, entry_value, out),
                        }
                    })
                    .map_err(|e| e.within(&format!("[{key}]")))?;
                }
            }
        }
        Ok(())
    }

    fn special(
        &self,
        id: MessageId,
        special: Special,
        value: &Value,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        match special {
            Special::None => {}
            Special::Time | Special::MicroTime => {
                let Some(text) = string_or_null(value, "a time")? else {
                    return Ok(());
                };
                let (seconds, nanos) = time::parse_rfc3339(text).map_err(invalid)?;
                // The zero time marshals to nothing; metav1.Time drops the nanoseconds.
                if seconds != time::ZERO_TIME_SECONDS || nanos != 0 {
                    let nanos = if special == Special::Time { 0 } else { nanos };
                    put_varint_field(out, 1, seconds as u64);
                    put_varint_field(out, 2, u64::from(nanos));
                }
            }
            Special::Duration => {
                let nanos = match string_or_null(value, "a duration")? {
                    Some(text) => time::parse_duration(text).map_err(invalid)?,
                    None => 0,
                };
                put_varint_field(out, 1, nanos as u64);
            }
            Special::Quantity => {
                // Quantity accepts a JSON number too; it is written in its string form. A zero
                // Quantity writes "0".
                // Go writes a quantity's `String()`: its canonical form (`1.5` → `1500m`,
                // `1024Mi` → `1Gi`), or the text itself when Go's parser kept it.
                let text = match value {
                    Value::String(text) => canonical_quantity(text),
                    Value::Number(number) => canonical_quantity(&number.to_string()),
                    Value::Null => "0".to_string(),
                    other => {
                        return Err(invalid(format!(
                            "expected a quantity, got {}",
                            json_kind(other)
                        )));
                    }
                };
                put_bytes(out, 1, text.as_bytes());
            }
            Special::IntOrString => {
                let (kind, int, text) = match value {
                    Value::Null => (0, 0, ""),
                    Value::String(text) => (1, 0, text.as_str()),
                    Value::Number(_) => (0, int32(value)?, ""),
                    other => {
                        return Err(invalid(format!(
                            "expected a number or string, got {}",
                            json_kind(other)
                        )));
                    }
                };
                put_varint_field(out, 1, kind);
                put_varint_field(out, 2, i64::from(int) as u64);
                put_bytes(out, 3, text.as_bytes());
            }
            Special::RawExtension | Special::RawJson => {
                // Go keeps the JSON text as it came; here it is re-serialized compactly.
                if !value.is_null() {
                    let raw = serde_json::to_vec(value).map_err(|e| invalid(e.to_string()))?;
                    put_bytes(out, 1, &raw);
                }
            }
            Special::Strings => {
                for text in string_array(value)? {
                    put_bytes(out, 1, text.as_bytes());
                }
            }
            Special::SchemaOrBool => {
                let schema = self.field_message(id, 2)?;
                match value {
                    Value::Bool(allows) => put_varint_field(out, 1, u64::from(*allows)),
                    Value::Object(_) => {
                        put_varint_field(out, 1, 1);
                        put_nested(out, 2, |out| self.message(schema, value, out))?;
                    }
                    Value::Null => put_varint_field(out, 1, 0),
                    other => {
                        return Err(invalid(format!(
                            "boolean or JSON schema expected, got {}",
                            json_kind(other)
                        )));
                    }
                }
            }
            Special::SchemaOrArray => {
                let schema = self.field_message(id, 1)?;
                match value {
                    Value::Object(_) => put_nested(out, 1, |out| self.message(schema, value, out))?,
                    Value::Array(items) => {
                        for (index, item) in items.iter().enumerate() {
                            put_nested(out, 2, |out| self.message(schema, item, out))
                                .map_err(|e| e.within(&format!("[{index}]")))?;
                        }
                    }
                    _ => {}
                }
            }
            Special::SchemaOrStringArray => {
                let schema = self.field_message(id, 1)?;
                match value {
                    Value::Object(_) => put_nested(out, 1, |out| self.message(schema, value, out))?,
                    Value::Array(_) => {
                        for text in string_array(value)? {
                            put_bytes(out, 2, text.as_bytes());
                        }
                    }
                    _ => {}
                }
            }
            Special::Unknown => return Err(invalid("runtime.Unknown cannot be built from JSON")),
        }
        Ok(())
    }

    fn field_message(&self, id: MessageId, number: u32) -> Result<MessageId, ProtobufError> {
        field_message(self.schema, id, number)
    }
}

/// The message type of field `number` of message `id` (the parts of the special schema types).
pub(crate) fn field_message(
    schema: &Schema,
    id: MessageId,
    number: u32,
) -> Result<MessageId, ProtobufError> {
    let message = &schema.messages[id];
    match message
        .field_index(number)
        .map(|index| message.fields[index].ty)
    {
        Some(Type::Message(id)) => Ok(id),
        _ => Err(invalid(format!(
            "{} has no message field {number}",
            message.name
        ))),
    }
}

fn scalar(number: u32, ty: Type, value: &Value, out: &mut Vec<u8>) -> Result<(), ProtobufError> {
    match ty {
        Type::String => {
            let text = string_or_null(value, "a string")?.unwrap_or_default();
            put_bytes(out, number, text.as_bytes());
        }
        Type::Bool => {
            let flag = match value {
                Value::Bool(flag) => *flag,
                Value::Null => false,
                other => {
                    return Err(invalid(format!(
                        "expected a boolean, got {}",
                        json_kind(other)
                    )));
                }
            };
            put_varint_field(out, number, u64::from(flag));
        }
        // Negative numbers are sign-extended to ten bytes, as Go writes them.
        Type::Int32 => put_varint_field(out, number, i64::from(int32(value)?) as u64),
        Type::Int64 => put_varint_field(out, number, int64(value)? as u64),
        Type::Double => {
            let number_value = match value {
                Value::Number(n) => n.as_f64().unwrap_or_default(),
                Value::Null => 0.0,
                other => {
                    return Err(invalid(format!(
                        "expected a number, got {}",
                        json_kind(other)
                    )));
                }
            };
            put_tag(out, number, FIXED64);
            out.extend_from_slice(&number_value.to_le_bytes());
        }
        // The callers handle these; reaching here is a bug, reported rather than panicked on.
        Type::Bytes | Type::Message(_) => {
            return Err(invalid(format!("field {number} is not a scalar")));
        }
    }
    Ok(())
}

pub(crate) fn int64(value: &Value) -> Result<i64, ProtobufError> {
    match value {
        Value::Null => Ok(0),
        Value::Number(number) => number
            .as_i64()
            .or_else(|| {
                // An integral float (`3.0`) is accepted: serde_json keeps such numbers as floats.
                number
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| invalid(format!("cannot unmarshal number {number} into an integer"))),
        other => Err(invalid(format!(
            "expected a number, got {}",
            json_kind(other)
        ))),
    }
}

pub(crate) fn int32(value: &Value) -> Result<i32, ProtobufError> {
    let wide = int64(value)?;
    i32::try_from(wide).map_err(|_| invalid(format!("number {wide} overflows int32")))
}

pub(crate) fn string_or_null<'v>(
    value: &'v Value,
    what: &str,
) -> Result<Option<&'v str>, ProtobufError> {
    match value {
        Value::String(text) => Ok(Some(text)),
        Value::Null => Ok(None),
        other => Err(invalid(format!(
            "expected {what}, got {}",
            json_kind(other)
        ))),
    }
}

fn string_array(value: &Value) -> Result<Vec<&str>, ProtobufError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                string_or_null(item, "a string")
                    .map(Option::unwrap_or_default)
                    .map_err(|e| e.within(&format!("[{index}]")))
            })
            .collect(),
        other => Err(invalid(format!(
            "expected an array of strings, got {}",
            json_kind(other)
        ))),
    }
}

/// Go's encoding/json reads a `[]byte` from standard base64 with padding.
pub(crate) fn decode_base64(value: &Value) -> Result<Vec<u8>, ProtobufError> {
    match value {
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| invalid(format!("illegal base64 data: {e}"))),
        Value::Null => Ok(Vec::new()),
        other => Err(invalid(format!(
            "expected a base64 string, got {}",
            json_kind(other)
        ))),
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A quantity as Go writes it back; text that is no quantity (refused before it gets here by
/// the type check) is kept as it is.
pub(crate) fn canonical_quantity(text: &str) -> String {
    match apimachinery::quantity::Quantity::parse(text.trim()) {
        Ok(q) => q.canonical(),
        Err(_) => text.to_string(),
    }
}
