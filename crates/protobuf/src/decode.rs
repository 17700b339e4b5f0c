//! Protobuf → JSON: reads a message by its schema and builds the JSON that Go's encoding/json
//! would write for the Go struct the message unmarshals into.
//!
//! That means Go's view of absence: a field missing from the wire is the Go zero value (or nil
//! for pointers, slices, maps and byte slices), `omitempty` drops empty values, non-pointer
//! structs are always written, a nil slice or map without `omitempty` is `null`, and the special
//! types write themselves as their `MarshalJSON` does. This module never writes protobuf.

use std::cell::Cell;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::schema::{Cardinality, Field, MessageId, Schema, Special, Type};
use crate::time;
use crate::wire::{Reader, WireValue};
use crate::{ProtobufError, malformed};

/// Decodes an envelope body (a `runtime.Unknown` without the `k8s\0` prefix) into the object's
/// JSON with `kind` and `apiVersion` first, as Go's `TypeMeta` is the first embedded field.
pub(crate) fn unknown_to_json(schema: &Schema, bytes: &[u8]) -> Result<Value, ProtobufError> {
    Decoder::new(schema).envelope(bytes)
}

/// Decodes a message (no envelope) of the named type; used for watch event frames.
pub(crate) fn message_to_json(
    schema: &Schema,
    id: MessageId,
    bytes: &[u8],
) -> Result<Value, ProtobufError> {
    Decoder::new(schema).value(id, bytes)
}

struct Decoder<'s> {
    schema: &'s Schema,
    /// How many messages deep the decoder is. Nesting is checked before each level, so that
    /// hostile input (a CRD schema whose `not` nests ten thousand times) is refused instead of
    /// exhausting the stack.
    depth: Cell<usize>,
}

impl<'s> Decoder<'s> {
    fn new(schema: &'s Schema) -> Self {
        Decoder {
            schema,
            depth: Cell::new(0),
        }
    }

    /// Runs `f` one level deeper, or refuses when that is past [`crate::MAX_DEPTH`].
    fn nested<T>(&self, f: impl FnOnce() -> Result<T, ProtobufError>) -> Result<T, ProtobufError> {
        let depth = self.depth.get() + 1;
        if depth > crate::MAX_DEPTH {
            return Err(ProtobufError::TooDeep);
        }
        self.depth.set(depth);
        let result = f();
        self.depth.set(depth - 1);
        result
    }

    fn envelope(&self, bytes: &[u8]) -> Result<Value, ProtobufError> {
        let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
        let mut encoding = String::new();
        let mut reader = Reader::new(bytes);
        while let Some((number, value)) = reader.next_field().map_err(malformed)? {
            match (number, value) {
                (1, WireValue::Bytes(type_meta)) => {
                    let mut inner = Reader::new(type_meta);
                    while let Some((number, value)) = inner.next_field().map_err(malformed)? {
                        match (number, value) {
                            (1, WireValue::Bytes(text)) => api_version = utf8(text),
                            (2, WireValue::Bytes(text)) => kind = utf8(text),
                            _ => {}
                        }
                    }
                }
                (2, WireValue::Bytes(bytes)) => raw = bytes,
                (3, WireValue::Bytes(text)) => encoding = utf8(text),
                // Field 4, the content type, is left empty by upstream's protobuf serializer, which
                // reads the raw bytes as protobuf whatever it says; so does this.
                _ => {}
            }
        }
        if !encoding.is_empty() {
            return Err(ProtobufError::UnsupportedEncoding(encoding));
        }
        let id =
            self.schema
                .resolve(&api_version, &kind)
                .ok_or_else(|| ProtobufError::UnknownKind {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                })?;
        let mut object = Map::new();
        object.insert("kind".to_string(), Value::String(kind));
        object.insert("apiVersion".to_string(), Value::String(api_version));
        self.fields_into(id, raw, &mut object)?;
        Ok(Value::Object(object))
    }

    /// The JSON of one message: an object for plain structs, whatever the special type writes
    /// otherwise.
    fn value(&self, id: MessageId, bytes: &[u8]) -> Result<Value, ProtobufError> {
        match self.schema.messages[id].special {
            Special::None => {
                let mut object = Map::new();
                self.fields_into(id, bytes, &mut object)?;
                Ok(Value::Object(object))
            }
            special => self.special(id, special, bytes),
        }
    }

    /// Writes the JSON fields of a plain struct into `out`, in Go declaration order.
    fn fields_into(
        &self,
        id: MessageId,
        bytes: &[u8],
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        self.nested(|| self.fields_into_here(id, bytes, out))
    }

    fn fields_into_here(
        &self,
        id: MessageId,
        bytes: &[u8],
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        let message = &self.schema.messages[id];
        // Gather the occurrences of each known field, keeping wire order within a field (the
        // order of repeated elements); unknown fields are skipped, as Go's unmarshaller does.
        let mut occurrences: Vec<(usize, WireValue)> = Vec::new();
        let mut reader = Reader::new(bytes);
        while let Some((number, value)) = reader.next_field().map_err(malformed)? {
            if let Some(index) = message.field_index(number) {
                occurrences.push((index, value));
            }
        }
        occurrences.sort_by_key(|(index, _)| *index);
        let mut rest = occurrences.as_slice();
        for (index, field) in message.fields.iter().enumerate() {
            let count = rest.iter().take_while(|(i, _)| *i == index).count();
            let (mine, others) = rest.split_at(count);
            rest = others;
            self.field(field, mine, out)
                .map_err(|e| e.within(field.json))?;
        }
        Ok(())
    }

    fn field(
        &self,
        field: &Field,
        values: &[(usize, WireValue)],
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        let key = || field.json.to_string();
        // A nil slice, map or pointer: Go's JSON encoder writes null unless omitempty.
        let absent = |out: &mut Map<String, Value>| {
            if !field.omitempty {
                out.insert(key(), Value::Null);
            }
        };
        match field.cardinality {
            Cardinality::Map => {
                if values.is_empty() {
                    absent(out);
                    return Ok(());
                }
                let mut map = Map::new();
                for (_, value) in values {
                    let (entry_key, entry_value) = self.map_entry(field.ty, *value)?;
                    map.insert(entry_key, entry_value);
                }
                out.insert(key(), Value::Object(map));
            }
            Cardinality::Repeated => {
                let mut items = Vec::new();
                for (_, value) in values {
                    self.repeated(field.ty, *value, &mut items)
                        .map_err(|e| e.within(&format!("[{}]", items.len())))?;
                }
                if items.is_empty() {
                    absent(out);
                } else {
                    out.insert(key(), Value::Array(items));
                }
            }
            Cardinality::Single => {
                let last = values.last().map(|(_, value)| *value);
                match field.ty {
                    Type::Message(id) => {
                        let special = self.schema.messages[id].special;
                        let Some(value) = last else {
                            // A named slice type (Verbs) is nil when absent, like a pointer.
                            if field.pointer || special == Special::Strings {
                                absent(out);
                                return Ok(());
                            }
                            // A non-pointer struct is always there, as its zero value.
                            return self.embedded(field, id, &[], out);
                        };
                        let bytes = expect_bytes(value)?;
                        if special == Special::Strings {
                            let items = strings(bytes)?;
                            if !(field.omitempty && items.is_empty()) {
                                out.insert(key(), Value::Array(items));
                            }
                            return Ok(());
                        }
                        self.embedded(field, id, bytes, out)?;
                    }
                    Type::Bytes => match last {
                        None => absent(out),
                        Some(value) => {
                            let bytes = expect_bytes(value)?;
                            if !(field.omitempty && bytes.is_empty()) {
                                out.insert(key(), base64_value(bytes));
                            }
                        }
                    },
                    ty => match last {
                        None if field.pointer => absent(out),
                        None => {
                            if !field.omitempty {
                                out.insert(key(), zero_scalar(ty));
                            }
                        }
                        Some(value) => {
                            let json = scalar(ty, value)?;
                            if field.pointer || !(field.omitempty && is_zero_scalar(&json)) {
                                out.insert(key(), json);
                            }
                        }
                    },
                }
            }
        }
        Ok(())
    }

    /// A present (or zero-valued non-pointer) struct field.
    fn embedded(
        &self,
        field: &Field,
        id: MessageId,
        bytes: &[u8],
        out: &mut Map<String, Value>,
    ) -> Result<(), ProtobufError> {
        if field.inline {
            return self.fields_into(id, bytes, out);
        }
        let value = self.value(id, bytes)?;
        // Go's omitempty never drops a struct; omitzero drops the zero value, which for the
        // only omitzero field (a metav1.Time) is the one that marshals as null.
        if !(field.omitzero && value.is_null()) {
            out.insert(field.json.to_string(), value);
        }
        Ok(())
    }

    fn repeated(
        &self,
        ty: Type,
        value: WireValue,
        items: &mut Vec<Value>,
    ) -> Result<(), ProtobufError> {
        match (ty, value) {
            (Type::Message(id), value) => items.push(self.value(id, expect_bytes(value)?)?),
            (Type::String, value) => items.push(Value::String(utf8(expect_bytes(value)?))),
            (Type::Bytes, value) => items.push(base64_value(expect_bytes(value)?)),
            // Go's unmarshaller accepts packed numbers although it writes them unpacked.
            (Type::Double, WireValue::Bytes(packed)) => {
                for chunk in packed.chunks(8) {
                    let bits = <[u8; 8]>::try_from(chunk)
                        .map_err(|_| malformed("truncated packed double"))?;
                    items.push(scalar(
                        Type::Double,
                        WireValue::Fixed64(u64::from_le_bytes(bits)),
                    )?);
                }
            }
            (ty, WireValue::Bytes(packed)) => {
                let mut reader = Reader::new(packed);
                while !reader.at_end() {
                    items.push(scalar(
                        ty,
                        WireValue::Varint(reader.varint().map_err(malformed)?),
                    )?);
                }
            }
            (ty, value) => items.push(scalar(ty, value)?),
        }
        Ok(())
    }

    fn map_entry(&self, ty: Type, value: WireValue) -> Result<(String, Value), ProtobufError> {
        let mut key = String::new();
        let mut entry_value = None;
        let mut reader = Reader::new(expect_bytes(value)?);
        while let Some((number, value)) = reader.next_field().map_err(malformed)? {
            match number {
                1 => key = utf8(expect_bytes(value)?),
                2 => entry_value = Some(value),
                _ => {}
            }
        }
        let json = match (ty, entry_value) {
            (Type::Message(id), value) => {
                let bytes = value.map(expect_bytes).transpose()?.unwrap_or_default();
                self.value(id, bytes)
                    .map_err(|e| e.within(&format!("[{key}]")))?
            }
            (Type::Bytes, None) => Value::Null,
            (Type::Bytes, Some(value)) => base64_value(expect_bytes(value)?),
            (ty, None) => zero_scalar(ty),
            (ty, Some(value)) => scalar(ty, value)?,
        };
        Ok((key, json))
    }

    fn special(
        &self,
        id: MessageId,
        special: Special,
        bytes: &[u8],
    ) -> Result<Value, ProtobufError> {
        let fields = SpecialFields::read(bytes)?;
        Ok(match special {
            Special::None => Value::Null,
            Special::Time | Special::MicroTime => {
                // An empty message is Go's zero time; metav1.Time ignores nanoseconds when
                // unmarshalling, MicroTime keeps them.
                let seconds = fields.varint(1)? as i64;
                if bytes.is_empty() || seconds == time::ZERO_TIME_SECONDS {
                    Value::Null
                } else if special == Special::Time {
                    Value::String(time::format_rfc3339(seconds))
                } else {
                    let nanos = (fields.varint(2)? as i32).clamp(0, 999_999_999) as u32;
                    Value::String(time::format_rfc3339_micro(seconds, nanos))
                }
            }
            Special::Duration => Value::String(time::format_duration(fields.varint(1)? as i64)),
            Special::Quantity => {
                // A zero Quantity (no string) marshals as "0".
                let text = fields.string(1)?;
                Value::String(if text.is_empty() {
                    "0".to_string()
                } else {
                    text
                })
            }
            Special::IntOrString => match fields.varint(1)? {
                0 => Value::from(fields.varint(2)? as i32),
                1 => Value::String(fields.string(3)?),
                other => return Err(malformed(format!("impossible IntOrString type {other}"))),
            },
            Special::RawExtension => match fields.last(1) {
                None => Value::Null,
                Some(value) => self.raw_extension(expect_bytes(value)?)?,
            },
            Special::RawJson => match fields.last(1) {
                None => Value::Null,
                Some(value) => raw_json(expect_bytes(value)?)?,
            },
            Special::Strings => Value::Array(strings(bytes)?),
            Special::SchemaOrBool => match fields.last(2) {
                Some(schema) => self.value(self.field_message(id, 2)?, expect_bytes(schema)?)?,
                None => Value::Bool(fields.varint(1)? != 0),
            },
            Special::SchemaOrArray => {
                let schema_id = self.field_message(id, 1)?;
                let all = fields.all(2);
                if !all.is_empty() {
                    let items: Result<Vec<Value>, ProtobufError> = all
                        .iter()
                        .map(|v| self.value(schema_id, expect_bytes(*v)?))
                        .collect();
                    Value::Array(items?)
                } else if let Some(schema) = fields.last(1) {
                    self.value(schema_id, expect_bytes(schema)?)?
                } else {
                    Value::Null
                }
            }
            Special::SchemaOrStringArray => {
                let all = fields.all(2);
                if !all.is_empty() {
                    let items: Result<Vec<Value>, ProtobufError> = all
                        .iter()
                        .map(|v| Ok(Value::String(utf8(expect_bytes(*v)?))))
                        .collect();
                    Value::Array(items?)
                } else if let Some(schema) = fields.last(1) {
                    self.value(self.field_message(id, 1)?, expect_bytes(schema)?)?
                } else {
                    Value::Null
                }
            }
            Special::Unknown => self.nested(|| self.envelope(bytes))?,
        })
    }

    /// RawExtension bytes are JSON when the object was decoded from JSON, and a whole protobuf
    /// envelope when upstream embedded an object it encoded itself (watch events, lists).
    fn raw_extension(&self, raw: &[u8]) -> Result<Value, ProtobufError> {
        match raw.strip_prefix(crate::MAGIC) {
            Some(envelope) => self.nested(|| self.envelope(envelope)),
            None => raw_json(raw),
        }
    }

    fn field_message(&self, id: MessageId, number: u32) -> Result<MessageId, ProtobufError> {
        let message = &self.schema.messages[id];
        match message
            .field_index(number)
            .map(|index| message.fields[index].ty)
        {
            Some(Type::Message(id)) => Ok(id),
            _ => Err(malformed(format!(
                "{} has no message field {number}",
                message.name
            ))),
        }
    }
}

/// The fields of a small special message, by number.
struct SpecialFields<'a> {
    values: Vec<(u32, WireValue<'a>)>,
}

impl<'a> SpecialFields<'a> {
    fn read(bytes: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut values = Vec::new();
        let mut reader = Reader::new(bytes);
        while let Some(field) = reader.next_field().map_err(malformed)? {
            values.push(field);
        }
        Ok(SpecialFields { values })
    }

    fn last(&self, number: u32) -> Option<WireValue<'a>> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| *n == number)
            .map(|(_, v)| *v)
    }

    fn all(&self, number: u32) -> Vec<WireValue<'a>> {
        self.values
            .iter()
            .filter(|(n, _)| *n == number)
            .map(|(_, v)| *v)
            .collect()
    }

    fn varint(&self, number: u32) -> Result<u64, ProtobufError> {
        match self.last(number) {
            None => Ok(0),
            Some(WireValue::Varint(v)) => Ok(v),
            Some(_) => Err(malformed(format!("field {number}: wrong wire type"))),
        }
    }

    fn string(&self, number: u32) -> Result<String, ProtobufError> {
        self.last(number)
            .map(|v| expect_bytes(v).map(utf8))
            .transpose()
            .map(Option::unwrap_or_default)
    }
}

fn strings(bytes: &[u8]) -> Result<Vec<Value>, ProtobufError> {
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field().map_err(malformed)? {
        if number == 1 {
            items.push(Value::String(utf8(expect_bytes(value)?)));
        }
    }
    Ok(items)
}

fn raw_json(raw: &[u8]) -> Result<Value, ProtobufError> {
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| malformed(format!("embedded JSON: {e}")))
}

fn expect_bytes<'a>(value: WireValue<'a>) -> Result<&'a [u8], ProtobufError> {
    match value {
        WireValue::Bytes(bytes) => Ok(bytes),
        _ => Err(malformed("expected a length-delimited field")),
    }
}

/// Go strings hold any bytes; its JSON encoder replaces invalid UTF-8 with U+FFFD, as this does.
fn utf8(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn base64_value(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn scalar(ty: Type, value: WireValue) -> Result<Value, ProtobufError> {
    Ok(match (ty, value) {
        (Type::String, WireValue::Bytes(bytes)) => Value::String(utf8(bytes)),
        (Type::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        // Go keeps the low 32 bits of an int32 varint.
        (Type::Int32, WireValue::Varint(v)) => Value::from(v as i32),
        (Type::Int64, WireValue::Varint(v)) => Value::from(v as i64),
        (Type::Double, WireValue::Fixed64(bits)) => double(f64::from_bits(bits))?,
        (ty, _) => return Err(malformed(format!("wrong wire type for a {ty:?} field"))),
    })
}

/// A float64 as Go's JSON encoder writes it: integral values have no fraction (`5`, not `5.0`).
pub(crate) fn double(value: f64) -> Result<Value, ProtobufError> {
    if !value.is_finite() {
        return Err(malformed(format!("unsupported float value {value}")));
    }
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return Ok(Value::from(value as i64));
    }
    serde_json::Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| malformed(format!("unsupported float value {value}")))
}

fn zero_scalar(ty: Type) -> Value {
    match ty {
        Type::String => Value::String(String::new()),
        Type::Bool => Value::Bool(false),
        Type::Int32 | Type::Int64 | Type::Double => Value::from(0),
        Type::Bytes | Type::Message(_) => Value::Null,
    }
}

pub(crate) fn is_zero_scalar(value: &Value) -> bool {
    match value {
        Value::String(text) => text.is_empty(),
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        _ => false,
    }
}
