//! JSON → Go's JSON, without the wire in between: the object Go's encoding/json would write
//! after unmarshalling `value` into its Go struct, which is what [`crate::decode`] of
//! [`crate::encode`] gives, read off the same schema in one walk instead of writing and
//! parsing protobuf. Every write of a built-in object takes a form twice (the request's when the
//! write begins, with empty lists kept; storage's before it is stored), so the walk is the
//! cheap way to the same answer, and the second walk mostly only visits.
//!
//! The rules are the two halves' rules composed: a field the struct does not have is dropped;
//! nil (JSON `null` or absent) pointers, slices and maps, and empty slices and maps (which Go's
//! marshaller does not write), come back as `null`, or not at all under `omitempty`; non-pointer
//! structs are always there; scalars take their zero value when `null` and leave under
//! `omitempty` when zero; the special types write themselves as their `MarshalJSON` does.
//! Anything the encoder would refuse is an error here too, and the caller falls back to the
//! round trip, which says why.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::ProtobufError;
use crate::decode::{double, is_zero_scalar as is_zero};
use crate::encode::{decode_base64, int32, int64, invalid, json_kind as kind, string_or_null};
use crate::schema::{Cardinality, Field, MemberField, MessageId, Schema, Special, Type};
use crate::time;

pub(crate) struct Normalizer<'s> {
    pub schema: &'s Schema,
    pub depth: usize,
    /// The request's form rather than the stored one (in-place walk only): an empty list or
    /// map without `omitempty` stays empty, as Go's JSON decoder and encoder keep a non-nil
    /// empty slice, where the protobuf round trip makes it nil (`null`).
    pub keep_empty: bool,
}

impl Normalizer<'_> {
    /// A message's JSON: an object for plain structs, what the special type writes otherwise.
    pub(crate) fn message(&mut self, id: MessageId, value: &Value) -> Result<Value, ProtobufError> {
        self.depth += 1;
        if self.depth > crate::MAX_DEPTH {
            return Err(ProtobufError::TooDeep);
        }
        let result = match self.schema.messages[id].special {
            Special::None => {
                let mut out = Map::new();
                self.fields_into(id, value, &mut out)
                    .map(|()| Value::Object(out))
            }
            special => self.special(id, special, value),
        };
        self.depth -= 1;
        result
    }

    /// The fields of a plain struct built from `value` (an object or null), written into `out`.
    pub(crate) fn fields_into(
        &mut self,
        id: MessageId,
        value: &Value,
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        let empty = Map::new();
        let object = match value {
            Value::Object(object) => object,
            Value::Null => &empty,
            other => {
                return Err(invalid(format!("expected an object, got {}", kind(other))));
            }
        };
        let schema = self.schema;
        for field in &schema.messages[id].fields {
            if field.inline {
                let Type::Message(inner) = field.ty else {
                    return Err(invalid("an inline field that is not a struct"));
                };
                self.depth += 1;
                let result = self.fields_into(inner, value, out);
                self.depth -= 1;
                result?;
                continue;
            }
            let value = object.get(field.json).unwrap_or(&Value::Null);
            self.field(field, value, out)?;
        }
        Ok(())
    }

    fn field(
        &mut self,
        field: &Field,
        value: &Value,
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        let key = || field.json.to_string();
        // What a nil pointer, slice or map writes: null, unless omitempty.
        let absent = |out: &mut Map<String, Value>| {
            if !field.omitempty {
                out.insert(key(), Value::Null);
            }
        };
        match field.cardinality {
            Cardinality::Map => {
                let entries = match value {
                    Value::Null => {
                        absent(out);
                        return Ok(());
                    }
                    Value::Object(entries) => entries,
                    other => {
                        return Err(invalid(format!("expected an object, got {}", kind(other))));
                    }
                };
                if entries.is_empty() {
                    absent(out);
                    return Ok(());
                }
                let mut map = Map::new();
                for (k, v) in entries {
                    let v = match field.ty {
                        Type::Message(id) => self.message(id, v)?,
                        Type::Bytes if v.is_null() => Value::Null,
                        Type::Bytes => rebase64(v)?,
                        ty => scalar(ty, v)?,
                    };
                    map.insert(k.clone(), v);
                }
                out.insert(key(), Value::Object(map));
            }
            Cardinality::Repeated => {
                let items = match value {
                    Value::Null => {
                        absent(out);
                        return Ok(());
                    }
                    Value::Array(items) => items,
                    other => {
                        return Err(invalid(format!("expected an array, got {}", kind(other))));
                    }
                };
                if items.is_empty() {
                    absent(out);
                    return Ok(());
                }
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    list.push(match field.ty {
                        Type::Message(id) => self.message(id, item)?,
                        Type::Bytes => rebase64(item)?,
                        ty => scalar(ty, item)?,
                    });
                }
                out.insert(key(), Value::Array(list));
            }
            Cardinality::Single => match field.ty {
                Type::Message(id) => {
                    let special = self.schema.messages[id].special;
                    if special == Special::Strings {
                        // A named slice: nil when null, else its strings (an empty one stays,
                        // unless omitempty).
                        if value.is_null() {
                            absent(out);
                            return Ok(());
                        }
                        let items = strings(value)?;
                        if !(field.omitempty && items.is_empty()) {
                            out.insert(key(), Value::Array(items));
                        }
                        return Ok(());
                    }
                    if field.pointer && value.is_null() {
                        absent(out);
                        return Ok(());
                    }
                    let v = self.message(id, value)?;
                    // omitempty never drops a struct; omitzero drops the zero value, which for
                    // the only omitzero field (a metav1.Time) is the one that writes null.
                    if !(field.omitzero && v.is_null()) {
                        out.insert(key(), v);
                    }
                }
                Type::Bytes => {
                    if value.is_null() {
                        absent(out);
                        return Ok(());
                    }
                    let bytes = decode_base64(value)?;
                    if !(field.omitempty && bytes.is_empty()) {
                        out.insert(
                            key(),
                            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
                        );
                    }
                }
                ty => {
                    if field.pointer && value.is_null() {
                        absent(out);
                        return Ok(());
                    }
                    let v = scalar(ty, value)?;
                    if field.pointer || !(field.omitempty && is_zero(&v)) {
                        out.insert(key(), v);
                    }
                }
            },
        }
        Ok(())
    }

    fn special(
        &mut self,
        id: MessageId,
        special: Special,
        value: &Value,
    ) -> Result<Value, ProtobufError> {
        Ok(match special {
            Special::None => Value::Null,
            Special::Time | Special::MicroTime => {
                let Some(text) = string_or_null(value, "a time")? else {
                    return Ok(Value::Null);
                };
                let (seconds, nanos) = time::parse_rfc3339(text).map_err(invalid)?;
                if seconds == time::ZERO_TIME_SECONDS {
                    // Go's zero time writes null (with or without nanoseconds on the wire).
                    Value::Null
                } else if special == Special::Time {
                    Value::String(time::format_rfc3339(seconds))
                } else {
                    Value::String(time::format_rfc3339_micro(seconds, nanos))
                }
            }
            Special::Duration => {
                let nanos = match string_or_null(value, "a duration")? {
                    Some(text) => time::parse_duration(text).map_err(invalid)?,
                    None => 0,
                };
                Value::String(time::format_duration(nanos))
            }
            Special::Quantity => {
                let text = match value {
                    Value::String(text) => crate::encode::canonical_quantity(text),
                    Value::Number(number) => crate::encode::canonical_quantity(&number.to_string()),
                    Value::Null => "0".to_string(),
                    other => {
                        return Err(invalid(format!("expected a quantity, got {}", kind(other))));
                    }
                };
                // What the wire reads back: an empty string is the zero quantity, "0".
                Value::String(if text.is_empty() {
                    "0".to_string()
                } else {
                    text
                })
            }
            Special::IntOrString => match value {
                Value::Null => Value::from(0),
                Value::String(text) => Value::String(text.clone()),
                Value::Number(_) => Value::from(int32(value)?),
                other => {
                    return Err(invalid(format!(
                        "expected a number or string, got {}",
                        kind(other)
                    )));
                }
            },
            // The JSON travels as text and is read back: the same value.
            Special::RawExtension | Special::RawJson => value.clone(),
            Special::Strings => Value::Array(strings(value)?),
            Special::SchemaOrBool => match value {
                Value::Bool(allows) => Value::Bool(*allows),
                Value::Object(_) => self.message(self.field_message(id, 2)?, value)?,
                Value::Null => Value::Bool(false),
                other => {
                    return Err(invalid(format!(
                        "boolean or JSON schema expected, got {}",
                        kind(other)
                    )));
                }
            },
            Special::SchemaOrArray => {
                let schema = self.field_message(id, 1)?;
                match value {
                    Value::Object(_) => self.message(schema, value)?,
                    Value::Array(items) if !items.is_empty() => Value::Array(
                        items
                            .iter()
                            .map(|item| self.message(schema, item))
                            .collect::<Result<_, _>>()?,
                    ),
                    _ => Value::Null,
                }
            }
            Special::SchemaOrStringArray => {
                let schema = self.field_message(id, 1)?;
                match value {
                    Value::Object(_) => self.message(schema, value)?,
                    Value::Array(_) => {
                        let items = strings(value)?;
                        if items.is_empty() {
                            Value::Null
                        } else {
                            Value::Array(items)
                        }
                    }
                    _ => Value::Null,
                }
            }
            Special::Unknown => return Err(invalid("runtime.Unknown cannot be built from JSON")),
        })
    }

    fn field_message(&self, id: MessageId, number: u32) -> Result<MessageId, ProtobufError> {
        crate::encode::field_message(self.schema, id, number)
    }
}

/// What becomes of a member after its value was brought to Go's form where it lies.
enum Member {
    Keep,
    /// Gone: empty under `omitempty`, or zero under `omitzero`.
    Drop,
}

impl Normalizer<'_> {
    /// [`Normalizer::message`] done on `value` where it lies: the same result, but what is
    /// already in Go's form (most of an object that went through here before) is only visited,
    /// not built again. On an error `value` may be left part-way.
    pub(crate) fn message_in_place(
        &mut self,
        id: MessageId,
        value: &mut Value,
    ) -> Result<(), ProtobufError> {
        self.depth += 1;
        if self.depth > crate::MAX_DEPTH {
            return Err(ProtobufError::TooDeep);
        }
        let result = match self.schema.messages[id].special {
            Special::None => {
                if value.is_null() {
                    *value = Value::Object(Map::new());
                }
                match value {
                    Value::Object(object) => self.fields_in_place(id, object),
                    other => Err(invalid(format!("expected an object, got {}", kind(other)))),
                }
            }
            // Embedded JSON, and an int-or-string's string, are their own Go form: the
            // by-reference walk copies them, here they stay.
            Special::RawExtension | Special::RawJson => Ok(()),
            Special::IntOrString if value.is_string() => Ok(()),
            special => self.special(id, special, value).map(|v| *value = v),
        };
        self.depth -= 1;
        result
    }

    /// The fields of a plain struct, in `object` itself: members the struct does not have go,
    /// the others take Go's form, and what Go writes for absent ones is added.
    pub(crate) fn fields_in_place(
        &mut self,
        id: MessageId,
        object: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        let members = object.len();
        let known = self.known_fields_in_place(id, object)?;
        if known < members {
            // Rare: the decoder prunes unknown fields first. Members are kept by name.
            let schema = self.schema;
            object.retain(|name, _| has_field(schema, id, name));
        }
        Ok(())
    }

    /// Brings each field of `id` (and of its inline structs) in `object` to Go's form; the number
    /// of members that were fields. The walk goes over the object's members, each found among
    /// the struct's by name, then adds what Go writes for the absent ones that write something:
    /// an object sets a few of its struct's many fields.
    fn known_fields_in_place(
        &mut self,
        id: MessageId,
        object: &mut Map<String, Value>,
    ) -> Result<usize, ProtobufError> {
        let schema = self.schema;
        let message = &schema.messages[id];
        let field_of = |m: &MemberField| &schema.messages[m.message()].fields[usize::from(m.index)];
        let mut known = 0;
        let mut dropped: Vec<&'static str> = Vec::new();
        for (name, value) in object.iter_mut() {
            let Ok(at) = message
                .members
                .binary_search_by(|m| field_of(m).json.cmp(name.as_str()))
            else {
                continue;
            };
            known += 1;
            let member = message.members[at];
            let field = field_of(&member);
            self.depth += usize::from(member.inline_depth);
            let result = self.field_in_place(field, value);
            self.depth -= usize::from(member.inline_depth);
            if let Member::Drop = result? {
                dropped.push(field.json);
            }
        }
        for member in &message.written_when_absent {
            let field = field_of(member);
            if !object.contains_key(field.json) {
                // What an absent field writes: the by-reference walk's answer for null.
                self.depth += usize::from(member.inline_depth);
                let result = self.field(field, &Value::Null, object);
                self.depth -= usize::from(member.inline_depth);
                result?;
            }
        }
        for name in dropped {
            object.remove(name);
        }
        Ok(known)
    }

    fn field_in_place(
        &mut self,
        field: &Field,
        value: &mut Value,
    ) -> Result<Member, ProtobufError> {
        // What a nil pointer, slice or map writes: null, unless omitempty.
        let absent = |value: &mut Value| {
            if field.omitempty {
                Member::Drop
            } else {
                *value = Value::Null;
                Member::Keep
            }
        };
        match field.cardinality {
            Cardinality::Map => {
                let entries = match value {
                    Value::Null => return Ok(absent(value)),
                    Value::Object(entries) => entries,
                    other => {
                        return Err(invalid(format!("expected an object, got {}", kind(other))));
                    }
                };
                if entries.is_empty() {
                    return Ok(self.empty_collection(field, value));
                }
                for v in entries.values_mut() {
                    self.element_in_place(field.ty, v, true)?;
                }
            }
            Cardinality::Repeated => {
                let items = match value {
                    Value::Null => return Ok(absent(value)),
                    Value::Array(items) => items,
                    other => {
                        return Err(invalid(format!("expected an array, got {}", kind(other))));
                    }
                };
                if items.is_empty() {
                    return Ok(self.empty_collection(field, value));
                }
                for item in items {
                    self.element_in_place(field.ty, item, false)?;
                }
            }
            Cardinality::Single => match field.ty {
                Type::Message(id) => {
                    if self.schema.messages[id].special == Special::Strings {
                        if value.is_null() {
                            return Ok(absent(value));
                        }
                        let items = strings(value)?;
                        if field.omitempty && items.is_empty() {
                            return Ok(Member::Drop);
                        }
                        *value = Value::Array(items);
                        return Ok(Member::Keep);
                    }
                    if field.pointer && value.is_null() {
                        return Ok(absent(value));
                    }
                    self.message_in_place(id, value)?;
                    if field.omitzero && value.is_null() {
                        return Ok(Member::Drop);
                    }
                }
                Type::Bytes => {
                    if value.is_null() {
                        return Ok(absent(value));
                    }
                    let bytes = decode_base64(value)?;
                    if field.omitempty && bytes.is_empty() {
                        return Ok(Member::Drop);
                    }
                    *value = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
                ty => {
                    if field.pointer && value.is_null() {
                        return Ok(absent(value));
                    }
                    scalar_in_place(ty, value)?;
                    if !field.pointer && field.omitempty && is_zero(value) {
                        return Ok(Member::Drop);
                    }
                }
            },
        }
        Ok(Member::Keep)
    }

    /// What becomes of an empty list or map: nil (`null`, or gone under `omitempty`), unless
    /// the request's form keeps it.
    fn empty_collection(&self, field: &Field, value: &mut Value) -> Member {
        if field.omitempty {
            Member::Drop
        } else {
            if !self.keep_empty {
                *value = Value::Null;
            }
            Member::Keep
        }
    }

    /// An item of a list or a value of a map, of type `ty`; a null bytes value of a map stays.
    fn element_in_place(
        &mut self,
        ty: Type,
        value: &mut Value,
        in_map: bool,
    ) -> Result<(), ProtobufError> {
        match ty {
            Type::Message(id) => self.message_in_place(id, value),
            Type::Bytes if in_map && value.is_null() => Ok(()),
            Type::Bytes => rebase64(value).map(|v| *value = v),
            ty => scalar_in_place(ty, value),
        }
    }
}

/// Whether `name` is a member of the struct `id`, its inline structs included.
fn has_field(schema: &Schema, id: MessageId, name: &str) -> bool {
    schema.messages[id]
        .fields
        .iter()
        .any(|f| match (f.inline, f.ty) {
            (true, Type::Message(inner)) => has_field(schema, inner, name),
            _ => f.json == name,
        })
}

/// [`scalar`] where the value lies: a string that is one already stays as it is.
fn scalar_in_place(ty: Type, value: &mut Value) -> Result<(), ProtobufError> {
    if !(ty == Type::String && value.is_string()) {
        *value = scalar(ty, value)?;
    }
    Ok(())
}

/// A scalar as it comes back from the wire: null is the zero value, an integral float an
/// integer, a double without a fraction an integer.
fn scalar(ty: Type, value: &Value) -> Result<Value, ProtobufError> {
    Ok(match ty {
        Type::String => Value::String(
            string_or_null(value, "a string")?
                .unwrap_or_default()
                .to_string(),
        ),
        Type::Bool => match value {
            Value::Bool(flag) => Value::Bool(*flag),
            Value::Null => Value::Bool(false),
            other => {
                return Err(invalid(format!("expected a boolean, got {}", kind(other))));
            }
        },
        Type::Int32 => Value::from(int32(value)?),
        Type::Int64 => Value::from(int64(value)?),
        Type::Double => {
            let f = match value {
                Value::Number(n) => n.as_f64().unwrap_or_default(),
                Value::Null => 0.0,
                other => {
                    return Err(invalid(format!("expected a number, got {}", kind(other))));
                }
            };
            double(f)?
        }
        Type::Bytes | Type::Message(_) => return Err(invalid("not a scalar")),
    })
}

/// A string list: null items are empty strings, as the wire holds them.
fn strings(value: &Value) -> Result<Vec<Value>, ProtobufError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                string_or_null(item, "a string")
                    .map(|s| Value::String(s.unwrap_or_default().to_string()))
            })
            .collect(),
        other => Err(invalid(format!(
            "expected an array of strings, got {}",
            kind(other)
        ))),
    }
}

fn rebase64(value: &Value) -> Result<Value, ProtobufError> {
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(decode_base64(value)?),
    ))
}
