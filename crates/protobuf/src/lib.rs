//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) ↔ JSON, for every built-in kind.
//!
//! One schema-driven transcoder, no code per kind: the schema is upstream's `generated.proto`
//! files (compiled at build time, see `build.rs`) joined with the Go facts the .proto files do
//! not carry (JSON names, `omitempty`, pointers, inline structs). Decoding yields the JSON that
//! kube-apiserver's Go types would marshal; encoding yields the bytes Go's generated marshaller
//! would write for the object that JSON unmarshals into.
//!
//! The wire form is upstream's envelope: the four bytes `k8s\0`, then a `runtime.Unknown` whose
//! `typeMeta` names the `apiVersion` and `kind` and whose `raw` is the object's message. A watch
//! stream frames each `metav1.WatchEvent` with a four-byte big-endian length; the event is not
//! wrapped in an envelope, but its `object.raw` is one.
//!
//! This crate knows nothing of HTTP, storage or custom resources (which upstream never serves
//! as protobuf): [`supports`] tells the caller which objects it can carry.

mod check;
mod decode;
mod encode;
mod json;
mod normalize;
pub mod openapi_v2;
mod render;
mod schema;
mod time;
mod wire;

use serde_json::Value;

pub use crate::check::check_go_types;
pub use crate::render::{GoStyle, go_slice_json, go_struct_json};
use crate::schema::schema;
/// Go's `time.ParseDuration`, in nanoseconds (`metav1.Duration` and query parameters use it).
pub use crate::time::parse_duration as parse_go_duration;

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// How deep messages may nest in what [`decode`] accepts. Go's decoder has no such limit but
/// Go's stacks grow; ours do not, so hostile nesting is refused here. Legitimate objects stay far
/// below it (a CRD schema ten levels deep is some thirty messages), and it keeps every decoded
/// object within what the JSON parser reads back (serde_json stops at 128 levels).
pub const MAX_DEPTH: usize = 100;

/// The four bytes that open every envelope.
const MAGIC: &[u8] = b"k8s\0";

const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("protobuf body does not start with the \"k8s\\x00\" envelope prefix")]
    MissingPrefix,
    #[error("no protobuf message is known for apiVersion {api_version:?}, kind {kind:?}")]
    UnknownKind { api_version: String, kind: String },
    #[error("unsupported protobuf content encoding {0:?}")]
    UnsupportedEncoding(String),
    /// The bytes are not a valid message of the type the envelope names.
    #[error("malformed protobuf{}: {message}", at(path))]
    Malformed { path: String, message: String },
    /// Messages nest deeper than [`MAX_DEPTH`].
    #[error("protobuf message nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The JSON does not fit the Go type of its kind.
    #[error("cannot encode as protobuf{}: {message}", at(path))]
    Invalid { path: String, message: String },
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

impl ProtobufError {
    /// Prefixes the location of a malformed or invalid value with the field it sits in, as the
    /// error travels out of nested messages: `spec`, then `template`, ... or `[3]` for an index.
    fn within(mut self, segment: &str) -> Self {
        if let ProtobufError::Malformed { path, .. } | ProtobufError::Invalid { path, .. } =
            &mut self
            && !segment.is_empty()
        {
            *path = if path.is_empty() || path.starts_with('[') {
                format!("{segment}{path}")
            } else {
                format!("{segment}.{path}")
            };
        }
        self
    }
}

fn malformed(message: impl Into<String>) -> ProtobufError {
    ProtobufError::Malformed {
        path: String::new(),
        message: message.into(),
    }
}

/// Decode an envelope (`k8s\0` + Unknown) into the object's JSON, with apiVersion and kind set.
pub fn decode(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or(ProtobufError::MissingPrefix)?;
    decode::unknown_to_json(schema(), body)
}

/// The message of an object's `apiVersion` and `kind`, with the two.
fn resolve(obj: &Value) -> Result<(schema::MessageId, &str, &str), ProtobufError> {
    let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let id = schema()
        .resolve(api_version, kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })?;
    Ok((id, api_version, kind))
}

/// Encode a JSON object (apiVersion/kind tell the message type; lists use kind `XxxList`) into an
/// envelope.
pub fn encode(obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let (id, api_version, kind) = resolve(obj)?;
    let schema = schema();
    let mut raw = Vec::with_capacity(256);
    encode::Encoder {
        schema,
        depth: Default::default(),
    }
    .message(id, obj, &mut raw)?;
    envelope(api_version, kind, &raw)
}

/// `raw`, an object of `kind` in `api_version`, in its envelope: `k8s\0`, then a
/// runtime.Unknown of typeMeta, raw, and the empty contentEncoding and contentType, which Go
/// writes because they are non-pointer strings.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Result<Vec<u8>, ProtobufError> {
    let mut out = Vec::with_capacity(raw.len() + api_version.len() + kind.len() + 24);
    out.extend_from_slice(MAGIC);
    wire::put_nested::<ProtobufError>(&mut out, 1, |out| {
        wire::put_bytes(out, 1, api_version.as_bytes());
        wire::put_bytes(out, 2, kind.as_bytes());
        Ok(())
    })?;
    wire::put_bytes(&mut out, 2, raw);
    wire::put_bytes(&mut out, 3, b"");
    wire::put_bytes(&mut out, 4, b"");
    Ok(out)
}

/// A typed list (`list_kind` of `api_version`, e.g. `ConfigMapList` of `v1`) as an envelope,
/// built from its `metadata` and its items one at a time: what [`encode`] makes of the whole
/// list, without a JSON list holding every item first. An item with no protobuf form (an
/// object stored before the type checks existed) is left out, and `left_out` is told why.
pub fn encode_list<V: std::borrow::Borrow<Value>>(
    api_version: &str,
    list_kind: &str,
    metadata: &Value,
    items: impl IntoIterator<Item = V>,
    mut left_out: impl FnMut(&Value, &ProtobufError),
) -> Result<Vec<u8>, ProtobufError> {
    let schema = schema();
    let id = schema
        .resolve(api_version, list_kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: list_kind.to_string(),
        })?;
    let message = &schema.messages[id];
    let field = |json: &str| message.fields.iter().find(|f| f.json == json);
    let (Some(meta_field), Some(items_field)) = (field("metadata"), field("items")) else {
        return Err(encode::invalid(format!("{list_kind} is not a list")));
    };
    let schema::Type::Message(item_id) = items_field.ty else {
        return Err(encode::invalid(format!("{list_kind} has no object items")));
    };
    // The items sit one message below the list, as in a list encoded whole: the depth limit
    // counts from the list.
    let encoder = encode::Encoder {
        schema,
        depth: std::cell::Cell::new(1),
    };
    let mut raw = Vec::with_capacity(4096);
    let write_meta = |raw: &mut Vec<u8>| encoder.field(meta_field, metadata, raw);
    // Fields go out in their numbers' order, as Go marshals them: every list type has its
    // metadata first.
    if meta_field.number < items_field.number {
        write_meta(&mut raw)?;
    }
    for item in items {
        let item = item.borrow();
        let start = raw.len();
        let written = wire::put_nested(&mut raw, items_field.number, |raw| {
            encoder.message(item_id, item, raw)
        });
        if let Err(e) = written {
            raw.truncate(start);
            left_out(item, &e);
        }
    }
    if meta_field.number > items_field.number {
        write_meta(&mut raw)?;
    }
    envelope(api_version, list_kind, &raw)
}

/// The object as Go's encoding/json writes it after unmarshalling it into its Go type: what
/// [`decode`] of [`encode`] gives (fields the type lacks dropped, nil and empty collections as Go
/// writes them, non-pointer structs present, times, quantities and the other special types in
/// their Go form), computed in one walk of the JSON, without the wire.
pub fn go_form(obj: &Value) -> Result<Value, ProtobufError> {
    let (id, api_version, kind) = resolve(obj)?;
    let schema = schema();
    let mut out = serde_json::Map::new();
    out.insert("kind".to_string(), Value::String(kind.to_string()));
    out.insert(
        "apiVersion".to_string(),
        Value::String(api_version.to_string()),
    );
    normalize::Normalizer {
        schema,
        depth: 1,
        keep_empty: false,
    }
    .fields_into(id, obj, &mut out)?;
    Ok(Value::Object(out))
}

/// [`go_form`] done on `obj` where it lies: the same object, at a fraction of the cost when
/// most of it is in Go's form already (a write's object on its way to storage, which took the
/// request's form, [`request_form_in_place`], when the write began). On an error `obj` may be
/// left part-way.
pub fn go_form_in_place(obj: &mut Value) -> Result<(), ProtobufError> {
    walk_in_place(obj, false)
}

/// The request's Go form of `obj`, where it lies: what Go's JSON decoder and encoder make of
/// it, which is [`go_form_in_place`]'s answer but for empty lists and maps without
/// `omitempty`, which stay empty (a decoded non-nil slice) where storage makes them `null`.
/// What upstream's handlers, field manager, admission and validation see of a request.
pub fn request_form_in_place(obj: &mut Value) -> Result<(), ProtobufError> {
    walk_in_place(obj, true)
}

fn walk_in_place(obj: &mut Value, keep_empty: bool) -> Result<(), ProtobufError> {
    let (id, _, _) = resolve(obj)?;
    let Value::Object(object) = obj else {
        return Err(encode::invalid("expected an object"));
    };
    // The type's fields are walked without the two members that name it, which stay as they are.
    let kind = object.remove("kind");
    let api_version = object.remove("apiVersion");
    let result = normalize::Normalizer {
        schema: schema(),
        depth: 1,
        keep_empty,
    }
    .fields_in_place(id, object);
    object.extend(
        [("kind", kind), ("apiVersion", api_version)]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?))),
    );
    result
}

/// Parses the schema now rather than at its first use (a few milliseconds, once per process).
pub fn load_schema() {
    let _ = schema();
}

/// `obj` as kube-apiserver writes it in JSON: a built-in object's members in its Go struct's
/// declaration order (a `Table`'s too), anything else's sorted (custom resources, which upstream writes from a
/// map), strings with Go's escapes (see the `json` module). `obj` should be in Go's form
/// ([`go_form`]); only the order and the escapes are decided here.
pub fn to_json(obj: &Value) -> Vec<u8> {
    // Room for a typical object with its managed fields, so that the buffer seldom grows.
    let mut out = Vec::with_capacity(1024);
    write_json(obj, &mut out);
    out
}

/// [`to_json`], appended to `out`.
pub fn write_json(obj: &Value, out: &mut Vec<u8>) {
    match (resolve(obj), obj) {
        (Ok((id, _, _)), _) => json::write_message(schema(), id, obj, out),
        (Err(_), Value::Object(table))
            if table.get("kind").and_then(Value::as_str) == Some("Table")
                && table
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("meta.k8s.io/")) =>
        {
            json::write_table(schema(), table, out)
        }
        _ => json::plain(obj, out),
    }
}

/// Encode one watch event frame for `;stream=watch`: 4-byte big-endian length + a meta/v1
/// `WatchEvent{type, object: RawExtension{raw: envelope of the object}}`. As upstream's stream
/// shows, the frame holds the bare WatchEvent message; only the object inside is an envelope.
pub fn encode_watch_event(event_type: &str, obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let envelope = encode(obj)?;
    let mut event = Vec::with_capacity(envelope.len() + event_type.len() + 12);
    wire::put_bytes(&mut event, 1, event_type.as_bytes());
    wire::put_nested::<ProtobufError>(&mut event, 2, |out| {
        wire::put_bytes(out, 1, &envelope);
        Ok(())
    })?;
    let len = u32::try_from(event.len()).map_err(|_| ProtobufError::Invalid {
        path: String::new(),
        message: "watch event over 4 GiB".into(),
    })?;
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&event);
    Ok(frame)
}

/// Decode one watch event message (a frame without its 4-byte length) into the JSON event,
/// `{"type": ..., "object": {...}}`, as the JSON watch stream writes it.
pub fn decode_watch_event(message: &[u8]) -> Result<Value, ProtobufError> {
    let schema = schema();
    let id = schema
        .message_named(WATCH_EVENT)
        .ok_or_else(|| malformed("the schema has no WatchEvent"))?;
    decode::message_to_json(schema, id, message)
}

/// The Go type `metav1.ObjectMeta`, which custom resources' metadata decodes into.
pub const OBJECT_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Go's JSON decoding of `value` into one API type, named by its protobuf message (e.g.
/// [`OBJECT_META`]), as a check: the first error in Go's words, with the type's own name as the
/// struct Go reports (`json: cannot unmarshal string into Go struct field ObjectMeta.labels of
/// type map[string]string`).
pub fn check_go_message(full_name: &str, value: &Value) -> Result<(), String> {
    check::check_message(full_name, value)
}

/// `value` as the Go type named by its protobuf message holds it and prints it again: fields the
/// type does not have dropped, empty ones omitted as Go's encoder omits them, times in Go's form.
/// The value must pass [`check_go_message`] first.
pub fn normalize_go_message(full_name: &str, value: &Value) -> Result<Value, ProtobufError> {
    let schema = schema();
    let id = schema
        .message_named(full_name)
        .ok_or_else(|| malformed(format!("the schema has no {full_name}")))?;
    normalize::Normalizer {
        schema,
        depth: 0,
        keep_empty: false,
    }
    .message(id, value)
}

/// Whether objects of this apiVersion and kind have a protobuf form (every built-in kind and
/// list does; custom resources and `Table` do not).
pub fn supports(api_version: &str, kind: &str) -> bool {
    schema().resolve(api_version, kind).is_some()
}

#[cfg(test)]
mod tests;
