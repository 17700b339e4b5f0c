//! The object store: the `Store` trait (what the generic registry calls) and `KvStore`, its
//! implementation on any `Kv` backend (upstream's etcd3 store).
//!
//! This module owns how objects are stored and read back: the value in the `Kv` is the object
//! *without* `metadata.resourceVersion` (as upstream stores it in etcd), encoded by the store's
//! [`StorageCodec`] (JSON unless the codec says otherwise), and on the way out the object is JSON
//! whose `metadata.resourceVersion` is the key's mod revision, as a string. JSON values are read
//! by splicing the resourceVersion into the stored bytes; values in another format (protobuf) are
//! decoded by the codec and encoded as JSON once, when they are read. It also owns the
//! resourceVersion semantics of get and list (upstream's "Semantics for get and list"), paging
//! with upstream's continue tokens, and predicates. It must not know any particular kind: which
//! labels and fields an object exposes comes from the caller's [`AttrsFn`].

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apimachinery::object::ObjectExt;
use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use bytes::Bytes;
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::codec::{JsonCodec, StorageCodec, read_stored};
use crate::errors::{CONTINUE_EXPIRED, LIST_EXPIRED, StorageError, WATCH_EXPIRED};
use crate::kv::{KeyValue, Kv, KvError, KvEvent, TxnOutcome, prefix_end};
use crate::metrics::{Operation, ResourceMetrics};

/// What selectors see of an object: its labels and its selectable fields. `fields` always holds
/// `metadata.name` and `metadata.namespace`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    pub labels: BTreeMap<String, String>,
    pub fields: BTreeMap<String, String>,
}

/// Computes an object's [`Attrs`] (per resource: labels plus its selectable fields). The store
/// completes what it returns: labels default to `metadata.labels` when it gives none, and
/// `metadata.name` and `metadata.namespace` are always added to the fields.
pub type AttrsFn = Arc<dyn Fn(&Value) -> Attrs + Send + Sync>;

/// A filter on [`Attrs`] (label and field selectors); `None` matches everything.
pub type Predicate = Option<Arc<dyn Fn(&Attrs) -> bool + Send + Sync>>;

/// Whether `attrs` passes `predicate`.
pub fn matches(predicate: &Predicate, attrs: &Attrs) -> bool {
    predicate.as_ref().is_none_or(|p| p(attrs))
}

/// An [`AttrsFn`] giving labels and `metadata.name`/`metadata.namespace`, for resources without
/// other selectable fields (and for tests).
pub fn default_attrs() -> AttrsFn {
    Arc::new(|_: &Value| Attrs::default())
}

/// One stored object, as it leaves the storage layer: shared and cheap to clone. Its parts sit
/// behind one reference count, so that the watch cache's lists and fan-out, which clone and
/// drop an object per item or per watcher, touch one cache line per object instead of three.
#[derive(Clone, Debug)]
pub struct Object(Arc<ObjectData>);

/// What an [`Object`] holds; its fields are read through the object.
#[derive(Debug)]
pub struct ObjectData {
    pub key: Arc<str>,
    /// The object's JSON with `metadata.resourceVersion` set to `resource_version`.
    pub bytes: Bytes,
    pub resource_version: i64,
    pub attrs: Arc<Attrs>,
    /// Where the members after a leading `kind` and `apiVersion` begin in `bytes`, found once so
    /// that a typed list writes its item without scanning it; 0 when the JSON does not start
    /// that way.
    after_type_meta: usize,
    /// Set on the copy a watch event is handed out as ([`Object::for_fanout`]): the encodings its
    /// watchers share. `None` on every other object, so that an object at rest pays one word.
    fanout: Option<Box<Fanout>>,
}

/// The encodings one watch event's watchers share while it is being delivered, as upstream's
/// `cachingObject` keeps each serialization of a dispatched event, and the decodings its
/// in-process watchers share. They are dropped once every watcher the event was queued to has
/// moved past it, so nothing stays behind in the cache's window of past events.
#[derive(Debug)]
struct Fanout {
    /// Watchers that still have to take the event, plus one for the dispatcher until it has
    /// queued the event everywhere.
    pending: AtomicUsize,
    encodings: Mutex<Encodings>,
}

#[derive(Debug, Default)]
struct Encodings {
    /// Every watcher has taken the event: encodings made now are not kept.
    closed: bool,
    /// Each under its name: `Bytes` for an encoding, an `Arc` for a decoding.
    made: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
}

impl std::ops::Deref for Object {
    type Target = ObjectData;

    fn deref(&self) -> &ObjectData {
        &self.0
    }
}

impl Object {
    pub fn new(key: Arc<str>, bytes: Bytes, resource_version: i64, attrs: Arc<Attrs>) -> Object {
        let after_type_meta = leading_type_meta_end(&bytes).unwrap_or(0);
        Object(Arc::new(ObjectData {
            key,
            bytes,
            resource_version,
            attrs,
            after_type_meta,
            fanout: None,
        }))
    }

    /// A copy of this object (the same bytes, not copied) to hand to a watch event's watchers:
    /// [`Object::shared_encoding`] on it makes each encoding once for all of them. It holds its
    /// encodings until [`Object::release_fanout`] has been called once more than
    /// [`Object::hold_fanout`]: the dispatcher holds it from the start, and releases it once it
    /// has queued the event to every watcher.
    pub(crate) fn for_fanout(&self) -> Object {
        Object(Arc::new(ObjectData {
            key: self.key.clone(),
            bytes: self.bytes.clone(),
            resource_version: self.resource_version,
            attrs: self.attrs.clone(),
            after_type_meta: self.after_type_meta,
            fanout: Some(Box::new(Fanout {
                pending: AtomicUsize::new(1),
                encodings: Mutex::new(Encodings::default()),
            })),
        }))
    }

    /// One more watcher will take this event (see [`Object::for_fanout`]).
    pub(crate) fn hold_fanout(&self) {
        if let Some(f) = &self.fanout {
            f.pending.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// One watcher has taken this event and encoded it; the last one drops the shared encodings.
    pub(crate) fn release_fanout(&self) {
        if let Some(f) = &self.fanout
            && f.pending.fetch_sub(1, Ordering::AcqRel) == 1
        {
            let made = f.encodings.lock().map(|mut e| {
                e.closed = true;
                std::mem::take(&mut e.made)
            });
            // The bytes are freed outside the lock.
            drop(made);
        }
    }

    /// `encode(self)`, made once and shared while this object is a watch event being delivered
    /// to its watchers: `encoding` names what `encode` makes (a media type and the event's
    /// type, say), and the same name must always give the same bytes for the same object. Any
    /// other object is encoded at every call; so is this one once every watcher has taken it.
    /// Two watchers asking at the same time may both encode; one answer is kept.
    pub fn shared_encoding<E>(
        &self,
        encoding: &'static str,
        encode: impl FnOnce(&Object) -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        self.shared(encoding, encode)
    }

    /// `decode(self)`, made once and shared as [`Object::shared_encoding`] shares encodings:
    /// for in-process watchers that read an event's object the same way. `name` names the
    /// decoding, and must be used for one type only.
    pub fn shared_decoding<T: Send + Sync + 'static, E>(
        &self,
        name: &'static str,
        decode: impl FnOnce(&Object) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        self.shared(name, |o| decode(o).map(Arc::new))
    }

    /// `make(self)`, kept under `name` while the event is being delivered.
    fn shared<T: Clone + Send + Sync + 'static, E>(
        &self,
        name: &'static str,
        make: impl FnOnce(&Object) -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(f) = &self.fanout else {
            return make(self);
        };
        let found = f.encodings.lock().ok().and_then(|e| {
            e.made
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, made)| made.downcast_ref::<T>().cloned())
        });
        if let Some(made) = found {
            return Ok(made);
        }
        // Made outside the lock, so that a watcher on another thread never waits for it.
        let made = make(self)?;
        if let Ok(mut e) = f.encodings.lock()
            && !e.closed
            && !e.made.iter().any(|(n, _)| *n == name)
        {
            e.made.push((name, Box::new(made.clone())));
        }
        Ok(made)
    }

    /// Appends the object as an item of a typed list: without its top-level `apiVersion` and
    /// `kind` (see [`extend_without_type_meta`]).
    pub fn extend_list_item(&self, out: &mut Vec<u8>) {
        match self.after_type_meta {
            0 => extend_without_type_meta(&self.bytes, out),
            from => {
                out.push(b'{');
                out.extend_from_slice(&self.bytes[from..]);
            }
        }
    }

    /// How many bytes [`Object::extend_list_item`] appends, when that is known without scanning
    /// the object (its type meta leads it, as it does in every object the server wrote).
    pub fn list_item_len(&self) -> Option<usize> {
        match self.after_type_meta {
            0 => None,
            from => Some(self.bytes.len() - from + 1),
        }
    }

    /// Parses `bytes`.
    pub fn value(&self) -> Result<Value, StorageError> {
        serde_json::from_slice(&self.bytes).map_err(|e| {
            StorageError::InvalidObject(format!("cannot decode object {}: {e}", self.key))
        })
    }

    /// The object built from its stored form (JSON without resourceVersion) at `resource_version`.
    pub fn from_stored(
        key: &str,
        stored: &[u8],
        resource_version: i64,
        attrs: &AttrsFn,
    ) -> Result<Object, StorageError> {
        Self::from_stored_in(key, stored, resource_version, attrs, &JsonCodec)
    }

    /// The object built from a stored value in any format: JSON is read as [`Object::from_stored`]
    /// reads it; anything else is decoded by `codec` and encoded as JSON with its resourceVersion.
    fn from_stored_in(
        key: &str,
        stored: &[u8],
        resource_version: i64,
        attrs: &AttrsFn,
        codec: &dyn StorageCodec,
    ) -> Result<Object, StorageError> {
        let (mut value, as_stored) = read_stored(codec, stored).map_err(|e| {
            StorageError::InvalidObject(format!("cannot decode stored object {key}: {e}"))
        })?;
        if as_stored {
            let computed = Arc::new(compute_attrs(attrs, &value));
            return Self::from_parts_with(key, value, stored, resource_version, computed, codec);
        }
        if !value.is_object() {
            return Err(StorageError::InvalidObject(format!(
                "cannot decode stored object {key}: not an object"
            )));
        }
        let computed = Arc::new(compute_attrs(attrs, &value));
        value.set_meta("resourceVersion", resource_version.to_string());
        Ok(Object::new(
            Arc::from(key),
            Bytes::from(codec.to_json(&value)),
            resource_version,
            computed,
        ))
    }

    /// The object from its parsed value, the JSON that `codec` wrote for it, and its attributes,
    /// without re-encoding when the resourceVersion can be spliced into the JSON.
    fn from_parts_with(
        key: &str,
        mut value: Value,
        json: &[u8],
        resource_version: i64,
        computed: Arc<Attrs>,
        codec: &dyn StorageCodec,
    ) -> Result<Object, StorageError> {
        let spliceable = value
            .metadata()
            .is_some_and(|m| !m.contains_key("resourceVersion"));
        let bytes = match spliceable
            .then(|| splice_resource_version(json, resource_version, codec))
            .flatten()
        {
            Some(bytes) => bytes,
            None => {
                value.set_meta("resourceVersion", resource_version.to_string());
                codec.to_json(&value)
            }
        };
        Ok(Object::new(
            Arc::from(key),
            Bytes::from(bytes),
            resource_version,
            computed,
        ))
    }

    /// The object from the JSON of a write (no resourceVersion in it) and its attributes, known
    /// from the write that stored it; `None` when the resourceVersion cannot be spliced in.
    fn from_written(
        key: &str,
        json: &[u8],
        resource_version: i64,
        attrs: Arc<Attrs>,
        codec: &dyn StorageCodec,
    ) -> Option<Object> {
        Some(Object::new(
            Arc::from(key),
            Bytes::from(splice_resource_version(json, resource_version, codec)?),
            resource_version,
            attrs,
        ))
    }

    /// The same object content carrying another resourceVersion (upstream sends a deleted
    /// object, or one that stopped matching a watch, with the event's resourceVersion).
    /// The resourceVersion is replaced where it stands, so the members keep their order.
    pub fn with_resource_version(&self, resource_version: i64) -> Result<Object, StorageError> {
        let bytes = match replace_resource_version(&self.bytes, resource_version) {
            Some(bytes) => bytes,
            // Not reached by objects the store made, which all carry their resourceVersion.
            None => {
                let mut value = self.value()?;
                value.set_meta("resourceVersion", resource_version.to_string());
                apimachinery::gojson::to_vec(&value)
            }
        };
        Ok(Object::new(
            self.key.clone(),
            Bytes::from(bytes),
            resource_version,
            self.attrs.clone(),
        ))
    }
}

/// Runs the caller's [`AttrsFn`] and makes sure the two fields every resource selects on exist.
fn compute_attrs(attrs: &AttrsFn, value: &Value) -> Attrs {
    let mut computed = attrs(value);
    if computed.labels.is_empty()
        && let Some(labels) = value.labels()
    {
        computed.labels = labels
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
    }
    computed
        .fields
        .entry("metadata.name".into())
        .or_insert_with(|| value.name().to_string());
    computed
        .fields
        .entry("metadata.namespace".into())
        .or_insert_with(|| value.namespace().to_string());
    computed
}

/// Inserts `"resourceVersion":"<rv>"` into the top-level `metadata` object of `json`, which
/// has none, where `codec` writes it: before the first member that does not precede it
/// ([`StorageCodec::precedes_resource_version`]), or last. `None` when `json` is not an object
/// with a `metadata` object (the caller then re-encodes).
fn splice_resource_version(
    json: &[u8],
    resource_version: i64,
    codec: &dyn StorageCodec,
) -> Option<Vec<u8>> {
    let (open, empty) = find_metadata_object(json)?;
    let field = format!("\"resourceVersion\":\"{resource_version}\"");
    // Where the member goes, and whether a comma goes before it (after the last member) or
    // after it (before a member).
    let (at, comma_before) = if empty {
        (open, None)
    } else {
        let mut i = skip_ws(json, open);
        loop {
            if json.get(i)? != &b'"' {
                return None;
            }
            let key_end = skip_string(json, i)?;
            if !codec.precedes_resource_version(&json[i + 1..key_end - 1]) {
                break (i, Some(false));
            }
            let value = skip_ws(json, key_end);
            if json.get(value)? != &b':' {
                return None;
            }
            let value_end = skip_value(json, skip_ws(json, value + 1))?;
            let next = skip_ws(json, value_end);
            match json.get(next)? {
                b',' => i = skip_ws(json, next + 1),
                b'}' => break (value_end, Some(true)),
                _ => return None,
            }
        }
    };
    let mut out = Vec::with_capacity(json.len() + field.len() + 1);
    out.extend_from_slice(&json[..at]);
    if comma_before == Some(true) {
        out.push(b',');
    }
    out.extend_from_slice(field.as_bytes());
    if comma_before == Some(false) {
        out.push(b',');
    }
    out.extend_from_slice(&json[at..]);
    Some(out)
}

/// `json` with the value of its top-level `metadata.resourceVersion` replaced, or `None` when
/// it has none.
fn replace_resource_version(json: &[u8], resource_version: i64) -> Option<Vec<u8>> {
    let (open, empty) = find_metadata_object(json)?;
    if empty {
        return None;
    }
    let mut i = skip_ws(json, open);
    loop {
        if json.get(i)? != &b'"' {
            return None;
        }
        let key_end = skip_string(json, i)?;
        let colon = skip_ws(json, key_end);
        if json.get(colon)? != &b':' {
            return None;
        }
        let value = skip_ws(json, colon + 1);
        let value_end = skip_value(json, value)?;
        if &json[i..key_end] == b"\"resourceVersion\"" {
            let mut out = Vec::with_capacity(json.len() + 8);
            out.extend_from_slice(&json[..value]);
            out.extend_from_slice(format!("\"{resource_version}\"").as_bytes());
            out.extend_from_slice(&json[value_end..]);
            return Some(out);
        }
        let next = skip_ws(json, value_end);
        match json.get(next)? {
            b',' => i = skip_ws(json, next + 1),
            _ => return None,
        }
    }
}

/// Appends the JSON object `json` to `out` without its top-level `apiVersion` and `kind`: the
/// form of an item in upstream's typed lists, where only the list names its kind. The members
/// are scanned only until both are found; the rest is copied as it is. Anything that is not a
/// JSON object is appended unchanged.
fn extend_without_type_meta(json: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    if write_without_type_meta(json, out).is_none() {
        out.truncate(start);
        out.extend_from_slice(json);
    }
}

/// The index of the first member after `json`'s leading `kind` and `apiVersion` (in either
/// order), when it has both first and a member after them: the rest of a typed list's item.
fn leading_type_meta_end(json: &[u8]) -> Option<usize> {
    let mut i = skip_ws(json, 0);
    if json.get(i)? != &b'{' {
        return None;
    }
    let mut seen: Option<&[u8]> = None;
    for _ in 0..2 {
        i = skip_ws(json, i + 1);
        if json.get(i)? != &b'"' {
            return None;
        }
        let key_end = skip_string(json, i)?;
        let key = &json[i..key_end];
        if !matches!(key, b"\"apiVersion\"" | b"\"kind\"") || seen == Some(key) {
            return None;
        }
        seen = Some(key);
        let colon = skip_ws(json, key_end);
        if json.get(colon)? != &b':' {
            return None;
        }
        i = skip_ws(json, skip_value(json, skip_ws(json, colon + 1))?);
        if json.get(i)? != &b',' {
            return None;
        }
    }
    Some(skip_ws(json, i + 1))
}

fn write_without_type_meta(json: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut i = skip_ws(json, 0);
    if json.get(i)? != &b'{' {
        return None;
    }
    out.push(b'{');
    i = skip_ws(json, i + 1);
    if json.get(i)? == &b'}' {
        out.push(b'}');
        return Some(());
    }
    let (mut kept, mut found) = (0usize, 0usize);
    loop {
        if json.get(i)? != &b'"' {
            return None;
        }
        let key_end = skip_string(json, i)?;
        let type_meta = matches!(&json[i..key_end], b"\"apiVersion\"" | b"\"kind\"");
        let colon = skip_ws(json, key_end);
        if json.get(colon)? != &b':' {
            return None;
        }
        let value_end = skip_value(json, skip_ws(json, colon + 1))?;
        if type_meta {
            found += 1;
        } else {
            if kept > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&json[i..value_end]);
            kept += 1;
        }
        let j = skip_ws(json, value_end);
        match json.get(j)? {
            b'}' => {
                out.push(b'}');
                return Some(());
            }
            b',' => {
                let next = skip_ws(json, j + 1);
                if found == 2 {
                    if kept > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&json[next..]);
                    return Some(());
                }
                i = next;
            }
            _ => return None,
        }
    }
}

fn skip_ws(json: &[u8], mut i: usize) -> usize {
    while matches!(json.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index just after the string that starts at `i` (at its opening quote).
fn skip_string(json: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match json.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The index just after the JSON value that starts at `i`.
fn skip_value(json: &[u8], mut i: usize) -> Option<usize> {
    match json.get(i)? {
        b'"' => skip_string(json, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match json.get(i)? {
                    b'"' => {
                        i = skip_string(json, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(
                json.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}

/// Where the top-level `metadata` object of the JSON object `json` starts (the index of its
/// `{`), found by scanning only the members before it: stored objects lead with their type meta
/// and metadata, so a reader of names, uids and owners can parse from there and stop at the
/// object's end without reading the rest. `None` when `json` is not an object with a `metadata`
/// object.
pub fn metadata_offset(json: &[u8]) -> Option<usize> {
    find_metadata_object(json).map(|(open, _)| open - 1)
}

/// Where the top-level `"metadata": {` object opens: the index after its `{`, and whether the
/// object is empty.
fn find_metadata_object(json: &[u8]) -> Option<(usize, bool)> {
    let mut i = skip_ws(json, 0);
    if json.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(json, i);
        if json.get(i)? != &b'"' {
            return None;
        }
        let key_end = skip_string(json, i)?;
        let is_metadata = &json[i..key_end] == b"\"metadata\"";
        i = skip_ws(json, key_end);
        if json.get(i)? != &b':' {
            return None;
        }
        i = skip_ws(json, i + 1);
        if is_metadata {
            if json.get(i)? != &b'{' {
                return None;
            }
            let empty = json.get(skip_ws(json, i + 1))? == &b'}';
            return Some((i + 1, empty));
        }
        i = skip_ws(json, skip_value(json, i)?);
        if json.get(i)? != &b',' {
            return None;
        }
        i += 1;
    }
}

/// The `resourceVersion` query parameter, parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResourceVersion {
    /// Absent or `""`: the most recent state (a consistent read).
    #[default]
    Unset,
    /// `"0"`: any state (may be stale).
    Any,
    /// A specific revision; what it means depends on [`ResourceVersionMatch`].
    Exact(i64),
}

impl ResourceVersion {
    /// Parses the query parameter: `""` is `Unset`, `"0"` is `Any`, a positive integer `Exact`;
    /// `None` for anything else (the apiserver answers that with its own 400).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "" => Some(ResourceVersion::Unset),
            "0" => Some(ResourceVersion::Any),
            _ => s
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .map(ResourceVersion::Exact),
        }
    }
}

/// The `resourceVersionMatch` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    NotOlderThan,
    Exact,
}

#[derive(Clone, Debug, Default)]
pub struct GetOptions {
    pub resource_version: ResourceVersion,
}

#[derive(Clone, Default)]
pub struct ListOptions {
    pub resource_version: ResourceVersion,
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// 0 = all.
    pub limit: i64,
    pub continue_token: Option<String>,
    pub predicate: Predicate,
}

impl std::fmt::Debug for ListOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListOptions")
            .field("resource_version", &self.resource_version)
            .field("resource_version_match", &self.resource_version_match)
            .field("limit", &self.limit)
            .field("continue_token", &self.continue_token)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

#[derive(Clone, Debug, Default)]
pub struct ListResult {
    pub items: Vec<Object>,
    /// The revision the list was read at.
    pub resource_version: i64,
    pub continue_token: Option<String>,
    /// Only when there is more and no predicate was given (as upstream).
    pub remaining_item_count: Option<i64>,
}

#[derive(Clone, Default)]
pub struct WatchOptions {
    pub resource_version: ResourceVersion,
    pub send_initial_events: Option<bool>,
    pub allow_bookmarks: bool,
    pub predicate: Predicate,
}

impl std::fmt::Debug for WatchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchOptions")
            .field("resource_version", &self.resource_version)
            .field("send_initial_events", &self.send_initial_events)
            .field("allow_bookmarks", &self.allow_bookmarks)
            .field("predicate", &self.predicate.is_some())
            .finish()
    }
}

/// One event of a watch stream.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    Added(Object),
    Modified(Object),
    Deleted(Object),
    Bookmark {
        resource_version: i64,
        initial_events_end: bool,
    },
    /// The watch failed (e.g. 410 Expired); it is the stream's last event.
    Error(StorageError),
}

/// A watch's events. Dropping it ends the watch and frees its resources.
///
/// Either the receiving end of a channel that a task of the store fills, or a stream that does
/// the watch's work when its consumer polls it (the watch cache's watchers: one task fewer to
/// wake per watcher and event).
pub struct WatchStream(Events);

enum Events {
    Channel(mpsc::Receiver<WatchEvent>),
    Polled(Pin<Box<dyn Stream<Item = WatchEvent> + Send + Sync>>),
}

impl WatchStream {
    /// A watch whose events `stream` computes as it is polled.
    pub fn polled(stream: impl Stream<Item = WatchEvent> + Send + Sync + 'static) -> WatchStream {
        WatchStream(Events::Polled(Box::pin(stream)))
    }

    /// The next event; `None` once the watch is over.
    pub async fn recv(&mut self) -> Option<WatchEvent> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`WatchStream::recv`] for a consumer that is itself polled (a response body).
    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<WatchEvent>> {
        match &mut self.0 {
            Events::Channel(events) => events.poll_recv(cx),
            Events::Polled(events) => events.as_mut().poll_next(cx),
        }
    }
}

impl From<mpsc::Receiver<WatchEvent>> for WatchStream {
    fn from(events: mpsc::Receiver<WatchEvent>) -> WatchStream {
        WatchStream(Events::Channel(events))
    }
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Events::Channel(_) => "WatchStream(channel)",
            Events::Polled(_) => "WatchStream(polled)",
        })
    }
}

/// The storage interface the generic registry uses (upstream's `storage.Interface`). Keys are
/// full keys (`/registry/configmaps/ns/name`); list and watch prefixes end with `/`.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `NotFound` when absent; `TooLargeResourceVersion` when `Exact(n)` is newer than the store.
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError>;
    /// The objects under `prefix` (which ends with `/`), in key order.
    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError>;
    /// `AlreadyExists` when present. Any incoming resourceVersion is dropped before storing.
    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError>;
    /// `Conflict` (with the current resourceVersion) or `NotFound`. An update that changes
    /// nothing writes nothing and returns the stored object, as upstream's GuaranteedUpdate.
    async fn update(
        &self,
        key: &str,
        obj: Value,
        expected_resource_version: i64,
    ) -> Result<Object, StorageError>;
    /// Returns the last state, with resourceVersion = the delete's revision.
    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError>;
    /// Watches a prefix (ending with `/`) or one key.
    async fn watch(
        &self,
        prefix_or_key: &str,
        opts: &WatchOptions,
    ) -> Result<WatchStream, StorageError>;
    /// The store's current revision.
    async fn current_revision(&self) -> Result<i64, StorageError>;

    /// Asks the store's watches for progress notifications ([`crate::Kv::request_progress`]),
    /// for a cache waiting to reach a revision. Stores that wrap another pass it on.
    fn request_progress(&self);

    /// Whether an update that changes nothing may still have to be written (the stored value is
    /// encrypted with an old key): callers that skip no-op updates themselves must then pass
    /// them down instead, for [`Store::update`] to decide.
    fn rewrites_unchanged(&self) -> bool {
        false
    }
}

/// Upstream's continue token: base64url (no padding) of this JSON.
#[derive(Serialize, Deserialize)]
struct ContinueToken {
    #[serde(default)]
    v: String,
    #[serde(default)]
    rv: i64,
    #[serde(default)]
    start: String,
}

/// Go's `base64.RawURLEncoding`, which ignores the unused bits of the last symbol.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// The continue token for a list under `prefix` that goes on at `key` at revision `rv`.
pub fn encode_continue(key: &str, prefix: &str, rv: i64) -> Result<String, StorageError> {
    let start = key.strip_prefix(prefix).ok_or_else(|| {
        StorageError::Internal(format!(
            "unable to encode next field: the key and key prefix do not match {prefix} {key}"
        ))
    })?;
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: start.into(),
    };
    let json = serde_json::to_vec(&token).map_err(|e| StorageError::Internal(e.to_string()))?;
    Ok(RAW_URL.encode(json))
}

/// Decodes a continue token for a list under `prefix`: the key to start at and the revision to
/// read at (negative: the latest). Errors carry upstream's messages.
pub fn decode_continue(token: &str, prefix: &str) -> Result<(String, i64), StorageError> {
    const INVALID: &str = "continue key is not valid";
    let invalid =
        |detail: String| StorageError::invalid_continue_token(format!("{INVALID}: {detail}"));
    let data = RAW_URL
        .decode(token)
        .map_err(|e| invalid(go_base64_error(token, &e)))?;
    let parsed: ContinueToken = serde_json::from_slice(&data).map_err(|e| {
        invalid(
            apimachinery::gojson::check(&data)
                .err()
                .unwrap_or_else(|| e.to_string()),
        )
    })?;
    if parsed.v != "meta.k8s.io/v1" {
        return Err(StorageError::invalid_continue_token(format!(
            "{INVALID}: server does not recognize this encoded version {}",
            parsed.v
        )));
    }
    if parsed.rv == 0 {
        return Err(StorageError::invalid_continue_token(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    if parsed.start.is_empty() {
        return Err(StorageError::invalid_continue_token(
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
        ));
    }
    // A client must not be able to walk out of the listed prefix with `..`: the start key must
    // already be in clean path form, as upstream requires.
    let rooted = if parsed.start.starts_with('/') {
        parsed.start.clone()
    } else {
        format!("/{}", parsed.start)
    };
    if clean_path(&rooted) != rooted {
        return Err(invalid(parsed.start));
    }
    Ok((format!("{prefix}{}", &rooted[1..]), parsed.rv))
}

/// Go's `path.Clean` for a rooted path.
fn clean_path(rooted: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in rooted.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's message for a base64 decoding error (`illegal base64 data at input byte N`).
fn go_base64_error(input: &str, err: &base64::DecodeError) -> String {
    let offset = match err {
        base64::DecodeError::InvalidByte(offset, _)
        | base64::DecodeError::InvalidLastSymbol(offset, _) => *offset,
        base64::DecodeError::InvalidLength(_) => input.len().saturating_sub(1),
        base64::DecodeError::InvalidPadding => input.find('=').unwrap_or(input.len()),
    };
    format!("illegal base64 data at input byte {offset}")
}

/// The most keys read from the backend per page when a predicate makes a list read more pages
/// (upstream's `maxLimit`).
const MAX_PAGE: i64 = 10_000;
/// Capacity of a `KvStore` watch's channel.
const WATCH_BUFFER: usize = 256;

/// `Store` on a `Kv` backend. See the module documentation.
pub struct KvStore {
    kv: Arc<dyn Kv>,
    attrs: AttrsFn,
    codec: Arc<dyn StorageCodec>,
    written: Arc<Written>,
    /// The resource's request metrics; none for stores no resource owns (tests, tools).
    metrics: Option<Arc<ResourceMetrics>>,
}

/// What this store just wrote, by key: the stored bytes, the object's JSON (the same bytes when
/// the codec stores JSON) and its attributes, so that the watch event of the write takes the
/// JSON and the attributes instead of decoding the object again. The first watch
/// that sees the write takes its entry; entries no watch takes are dropped when there are many
/// or they hold too many bytes.
#[derive(Default)]
struct Written(std::sync::Mutex<WrittenMap>);

#[derive(Default)]
struct WrittenMap {
    entries: HashMap<String, WrittenEntry>,
    bytes: usize,
}

struct WrittenEntry {
    stored: Bytes,
    json: Bytes,
    attrs: Arc<Attrs>,
}

impl WrittenEntry {
    /// The bytes the entry holds (once when the JSON is what was stored).
    fn size(&self) -> usize {
        if self.stored.as_ptr() == self.json.as_ptr() {
            self.stored.len()
        } else {
            self.stored.len() + self.json.len()
        }
    }
}

/// How many writes no watch has seen are remembered, and how many bytes they may hold.
const WRITTEN_MAX: usize = 4096;
const WRITTEN_MAX_BYTES: usize = 64 << 20;

impl Written {
    fn put(&self, key: &str, stored: Bytes, json: Bytes, attrs: Arc<Attrs>) {
        let entry = WrittenEntry {
            stored,
            json,
            attrs,
        };
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.entries.len() >= WRITTEN_MAX || map.bytes + entry.size() > WRITTEN_MAX_BYTES {
            *map = WrittenMap::default();
        }
        map.bytes += entry.size();
        if let Some(old) = map.entries.insert(key.to_string(), entry) {
            map.bytes -= old.size();
        }
    }

    /// The JSON and attributes of `key` when `stored` is what this store wrote there.
    fn take(&self, key: &str, stored: &[u8]) -> Option<(Bytes, Arc<Attrs>)> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match map.entries.get(key) {
            Some(entry) if entry.stored.as_ref() == stored => {
                let entry = map.entries.remove(key)?;
                map.bytes -= entry.size();
                Some((entry.json, entry.attrs))
            }
            _ => None,
        }
    }
}

impl KvStore {
    /// A store that writes JSON.
    pub fn new(kv: Arc<dyn Kv>, attrs: AttrsFn) -> Self {
        Self::with_codec(kv, attrs, Arc::new(JsonCodec))
    }

    /// A store that writes what `codec` encodes (and reads JSON and whatever `codec` decodes).
    pub fn with_codec(kv: Arc<dyn Kv>, attrs: AttrsFn, codec: Arc<dyn StorageCodec>) -> Self {
        Self {
            kv,
            attrs,
            codec,
            written: Arc::default(),
            metrics: None,
        }
    }

    /// Records this store's backend requests and LISTs in the resource's metrics.
    pub fn with_metrics(mut self, metrics: Arc<ResourceMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Records one backend call that started at `start`.
    fn record<T>(&self, op: Operation, start: Instant, result: &Result<T, KvError>) {
        if let Some(m) = &self.metrics {
            m.backend_request(op, start, result.is_err());
        }
    }

    /// The backend.
    pub fn kv(&self) -> &Arc<dyn Kv> {
        &self.kv
    }

    fn object(&self, kv: &KeyValue) -> Result<Object, StorageError> {
        Object::from_stored_in(
            &kv.key,
            &kv.value,
            kv.mod_revision,
            &self.attrs,
            self.codec.as_ref(),
        )
    }

    /// An object of a list or a watch, or `None` when its stored bytes cannot be decoded: one
    /// undecodable object (corrupted on disk, or stored by an older version under looser
    /// rules) is left out and logged, never making the whole collection unreadable. A GET of
    /// it still answers the decoding error, and a DELETE that ignores read errors removes it.
    fn readable(&self, kv: &KeyValue) -> Option<Object> {
        undecodable_left_out(self.object(kv))
    }

    /// The object without resourceVersion, its JSON, and the value to store (the JSON again
    /// unless the codec encodes it otherwise).
    fn prepare(&self, key: &str, mut obj: Value) -> Result<(Value, Bytes, Bytes), StorageError> {
        if !obj.is_object() {
            return Err(StorageError::InvalidObject(format!(
                "object for {key} is not a JSON object"
            )));
        }
        obj.remove_meta("resourceVersion");
        let json = Bytes::from(self.codec.to_json(&obj));
        let stored = match self.codec.encode(&obj) {
            Ok(Some(stored)) => Bytes::from(stored),
            Ok(None) => json.clone(),
            Err(e) => {
                return Err(StorageError::InvalidObject(format!(
                    "cannot encode object {key}: {e}"
                )));
            }
        };
        Ok((obj, json, stored))
    }
}

/// A write's backend error; one refused as too large gives the object back (see
/// [`StorageError::RequestTooLarge`]).
fn refused(err: KvError, obj: Value) -> StorageError {
    StorageError::from(err).with_rejected(Some(obj))
}

/// A list's backend error as upstream answers it; `continuing` holds the continued list's start
/// key and prefix, from which a fresh token at the latest revision is made (revision -1).
fn list_error(err: KvError, continuing: Option<(&str, &str)>) -> StorageError {
    match err {
        KvError::Compacted { .. } if continuing.is_some() => {
            let (start, prefix) = continuing.unwrap_or_default();
            match encode_continue(start, prefix, -1) {
                Ok(token) => StorageError::ContinueExpired { token },
                Err(_) => StorageError::Expired(CONTINUE_EXPIRED.into()),
            }
        }
        KvError::Compacted { .. } => StorageError::Expired(LIST_EXPIRED.into()),
        err => err.into(),
    }
}

/// Lists end with `/` so that `/registry/pods/a` never lists `/registry/pods/ab`.
pub(crate) fn list_prefix(prefix: &str) -> String {
    if prefix.ends_with('/') {
        prefix.to_string()
    } else {
        format!("{prefix}/")
    }
}

#[async_trait]
impl Store for KvStore {
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
        let start = Instant::now();
        let got = self.kv.get(key).await;
        self.record(Operation::Get, start, &got);
        let (kv, revision) = got?;
        // Upstream checks the minimum resourceVersion before looking at the answer.
        if let ResourceVersion::Exact(requested) = opts.resource_version
            && requested > revision
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested,
                current: revision,
            });
        }
        let kv = kv.ok_or_else(|| StorageError::NotFound {
            key: key.to_string(),
        })?;
        self.object(&kv)
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let prefix = list_prefix(prefix);
        let end = prefix_end(&prefix);
        let paging = opts.limit > 0;
        let mut start = prefix.clone();
        let mut with_rev = 0;
        let continuing = opts.continue_token.is_some();
        let mut continued_from = String::new();
        if let Some(token) = &opts.continue_token {
            let (key, rv) = decode_continue(token, &prefix)?;
            if matches!(opts.resource_version, ResourceVersion::Exact(_)) {
                return Err(StorageError::InvalidContinue(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            start = key;
            continued_from = start.clone();
            // A negative revision asks for the latest (upstream hands such tokens out after
            // compaction); zero was rejected above.
            if rv > 0 {
                with_rev = rv;
            }
        } else if let ResourceVersion::Exact(n) = opts.resource_version {
            match opts.resource_version_match {
                Some(ResourceVersionMatch::Exact) => with_rev = n,
                // Legacy: a paginated list at a resourceVersion reads exactly there.
                None if paging => with_rev = n,
                _ => {}
            }
        }
        let minimum = match opts.resource_version {
            ResourceVersion::Exact(n) => n,
            _ => 0,
        };

        let mut page = opts.limit;
        let mut items = Vec::new();
        let mut last_key: Option<String> = None;
        let (mut has_more, mut count, mut revision);
        let (mut fetched, mut evaluated) = (0, 0);
        // Read pages until `limit` objects passed the predicate or the range ends, doubling the
        // page size when the predicate drops objects, as upstream does.
        loop {
            let started = Instant::now();
            let resp = self
                .kv
                .range(&start, &end, with_rev, if paging { page } else { 0 })
                .await;
            self.record(Operation::List, started, &resp);
            let resp = resp.map_err(|e| {
                list_error(
                    e,
                    continuing.then_some((continued_from.as_str(), prefix.as_str())),
                )
            })?;
            if minimum > resp.revision {
                return Err(StorageError::TooLargeResourceVersion {
                    requested: minimum,
                    current: resp.revision,
                });
            }
            has_more = resp.more;
            count = resp.count;
            revision = resp.revision;
            if resp.kvs.is_empty() && resp.more {
                return Err(StorageError::Internal(
                    "no results were found, but the store indicated there were more values remaining".into(),
                ));
            }
            for kv in &resp.kvs {
                if paging && items.len() as i64 >= opts.limit {
                    has_more = true;
                    break;
                }
                last_key = Some(kv.key.clone());
                fetched += 1;
                let Some(object) = self.readable(kv) else {
                    continue;
                };
                evaluated += 1;
                if matches(&opts.predicate, &object.attrs) {
                    items.push(object);
                }
            }
            if !has_more || !paging || items.len() as i64 >= opts.limit {
                break;
            }
            page = (page * 2).min(MAX_PAGE.max(opts.limit));
            if let Some(last) = &last_key {
                start = format!("{last}\0");
            }
            // Later pages read at the first page's revision, so the whole list is one snapshot.
            if with_rev == 0 {
                with_rev = resp.revision;
            }
        }
        let resource_version = if with_rev != 0 { with_rev } else { revision };
        if let Some(m) = &self.metrics {
            m.storage_list(fetched, evaluated, items.len());
        }
        let mut result = ListResult {
            items,
            resource_version,
            continue_token: None,
            remaining_item_count: None,
        };
        if has_more && let Some(last) = last_key {
            result.continue_token = Some(encode_continue(
                &format!("{last}\0"),
                &prefix,
                resource_version,
            )?);
            // The backend's count includes objects a predicate would drop, so upstream gives no
            // count at all when there is a predicate.
            if opts.predicate.is_none() {
                result.remaining_item_count = Some(count - opts.limit);
            }
        }
        Ok(result)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        let (mut obj, json, stored) = self.prepare(key, obj)?;
        let attrs = Arc::new(compute_attrs(&self.attrs, &obj));
        self.written
            .put(key, stored.clone(), json.clone(), attrs.clone());
        let start = Instant::now();
        let created = self.kv.create(key, stored).await;
        self.record(Operation::Create, start, &created);
        match created.map_err(|e| refused(e, obj.take()))? {
            TxnOutcome::Succeeded { revision, .. } => {
                Object::from_parts_with(key, obj, &json, revision, attrs, self.codec.as_ref())
            }
            TxnOutcome::Failed { .. } => Err(StorageError::AlreadyExists {
                key: key.to_string(),
                rejected: Some(Box::new(obj)),
            }),
        }
    }

    async fn update(
        &self,
        key: &str,
        obj: Value,
        expected_resource_version: i64,
    ) -> Result<Object, StorageError> {
        let (mut obj, json, stored) = self.prepare(key, obj)?;
        // Upstream's GuaranteedUpdate skips the write when the new object encodes to exactly the
        // stored bytes: a no-op update keeps its resourceVersion and wakes no watcher.
        // A stale value (encrypted with an old key) is written even when unchanged, so that
        // rewriting every object moves them all to the new key.
        let start = Instant::now();
        let current = self.kv.get_for_update(key).await;
        self.record(Operation::Get, start, &current);
        let (current, stale) = current?;
        let current = current.ok_or_else(|| StorageError::NotFound {
            key: key.to_string(),
        })?;
        if current.mod_revision != expected_resource_version {
            return Err(StorageError::Conflict {
                key: key.to_string(),
                current_resource_version: current.mod_revision,
            });
        }
        if !stale && current.value == stored {
            return self.object(&current);
        }
        let attrs = Arc::new(compute_attrs(&self.attrs, &obj));
        self.written
            .put(key, stored.clone(), json.clone(), attrs.clone());
        let start = Instant::now();
        let updated = self.kv.update(key, stored, expected_resource_version).await;
        self.record(Operation::Update, start, &updated);
        match updated.map_err(|e| refused(e, obj.take()))? {
            TxnOutcome::Succeeded { revision, .. } => {
                Object::from_parts_with(key, obj, &json, revision, attrs, self.codec.as_ref())
            }
            TxnOutcome::Failed { current: None } => Err(StorageError::NotFound {
                key: key.to_string(),
            }),
            TxnOutcome::Failed {
                current: Some(current),
            } => Err(StorageError::Conflict {
                key: key.to_string(),
                current_resource_version: current.mod_revision,
            }),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError> {
        let start = Instant::now();
        let deleted = self.kv.delete(key, expected_resource_version).await;
        self.record(Operation::Delete, start, &deleted);
        match deleted? {
            TxnOutcome::Succeeded {
                revision,
                prev: Some(prev),
            } => {
                Object::from_stored_in(key, &prev.value, revision, &self.attrs, self.codec.as_ref())
            }
            TxnOutcome::Succeeded { prev: None, .. } => Err(StorageError::Internal(format!(
                "delete of {key} returned no previous value"
            ))),
            TxnOutcome::Failed { current: None } => Err(StorageError::NotFound {
                key: key.to_string(),
            }),
            TxnOutcome::Failed {
                current: Some(current),
            } => Err(StorageError::Conflict {
                key: key.to_string(),
                current_resource_version: current.mod_revision,
            }),
        }
    }

    async fn watch(
        &self,
        prefix_or_key: &str,
        opts: &WatchOptions,
    ) -> Result<WatchStream, StorageError> {
        let scope = WatchScope::new(prefix_or_key);
        // Unset and Any start with the current state as synthetic Added events (unless the
        // client asked for no initial events); Exact(n) replays what happened after n.
        let (initial, start) = match (opts.send_initial_events, opts.resource_version) {
            (Some(false), ResourceVersion::Unset | ResourceVersion::Any) => {
                (Vec::new(), self.kv.current_revision().await?)
            }
            (None, ResourceVersion::Exact(n)) | (Some(false), ResourceVersion::Exact(n)) => {
                (Vec::new(), n)
            }
            (_, rv) => {
                let (items, revision) = self.current_state(&scope).await?;
                if let ResourceVersion::Exact(requested) = rv
                    && requested > revision
                {
                    return Err(StorageError::TooLargeResourceVersion {
                        requested,
                        current: revision,
                    });
                }
                let items = items
                    .into_iter()
                    .filter(|o| matches(&opts.predicate, &o.attrs))
                    .collect();
                (items, revision)
            }
        };
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let source = match self.kv.watch(scope.kv_prefix(), start).await {
            Ok(source) => Some(source),
            Err(KvError::Compacted { .. }) => {
                // Upstream's watch answers 200 and sends the 410 as an ERROR event.
                let _ = tx.try_send(WatchEvent::Error(StorageError::Expired(
                    WATCH_EXPIRED.into(),
                )));
                None
            }
            Err(err) => return Err(err.into()),
        };
        if let Some(source) = source {
            let task = KvWatch {
                attrs: self.attrs.clone(),
                codec: self.codec.clone(),
                written: self.written.clone(),
                scope,
                predicate: opts.predicate.clone(),
                allow_bookmarks: opts.allow_bookmarks,
                tx,
            };
            // Only a watch that allows bookmarks is told where the initial events end.
            let initial_end =
                (opts.send_initial_events == Some(true) && opts.allow_bookmarks).then_some(start);
            tokio::spawn(task.run(initial, initial_end, source));
        }
        Ok(rx.into())
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        Ok(self.kv.current_revision().await?)
    }

    fn request_progress(&self) {
        self.kv.request_progress();
    }

    fn rewrites_unchanged(&self) -> bool {
        self.kv.transforms_values()
    }
}

impl KvStore {
    /// Every object in `scope` now, and the revision they were read at.
    async fn current_state(&self, scope: &WatchScope) -> Result<(Vec<Object>, i64), StorageError> {
        match scope {
            WatchScope::Key(key) => {
                let (kv, revision) = self.kv.get(key).await?;
                Ok((
                    kv.map(|kv| self.object(&kv))
                        .transpose()?
                        .into_iter()
                        .collect(),
                    revision,
                ))
            }
            WatchScope::Prefix(prefix) => {
                let resp = self
                    .kv
                    .range(prefix, &prefix_end(prefix), 0, 0)
                    .await
                    .map_err(|e| list_error(e, None))?;
                let items = resp.kvs.iter().filter_map(|kv| self.readable(kv)).collect();
                Ok((items, resp.revision))
            }
        }
    }
}

/// What a watch covers: every key under a prefix (ending with `/`), or one key.
#[derive(Clone, Debug)]
pub(crate) enum WatchScope {
    Prefix(String),
    Key(String),
}

impl WatchScope {
    pub(crate) fn new(prefix_or_key: &str) -> Self {
        if prefix_or_key.ends_with('/') {
            WatchScope::Prefix(prefix_or_key.to_string())
        } else {
            WatchScope::Key(prefix_or_key.to_string())
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        match self {
            WatchScope::Prefix(prefix) => key.starts_with(prefix.as_str()),
            WatchScope::Key(k) => k == key,
        }
    }

    fn kv_prefix(&self) -> &str {
        match self {
            WatchScope::Prefix(p) | WatchScope::Key(p) => p,
        }
    }
}

/// The event one watcher sees for a change, given its predicate (upstream's cache watcher rules):
/// an object that starts matching is Added, one that stops matching is Deleted (with its previous
/// content at the event's resourceVersion), and events on objects it never matched are dropped.
pub(crate) fn filter_event<F>(
    predicate: &Predicate,
    event: &WatchEvent,
    prev_attrs: Option<&Attrs>,
    prev_at_event: F,
) -> Option<WatchEvent>
where
    F: FnOnce() -> Option<Object>,
{
    match event {
        WatchEvent::Added(obj) => matches(predicate, &obj.attrs).then(|| event.clone()),
        WatchEvent::Deleted(obj) => {
            // A deleted object's content is its last state, so its attrs are the previous ones.
            matches(predicate, prev_attrs.unwrap_or(&obj.attrs)).then(|| event.clone())
        }
        WatchEvent::Modified(obj) => {
            if predicate.is_none() {
                return Some(event.clone());
            }
            let now = matches(predicate, &obj.attrs);
            let before = prev_attrs.is_some_and(|attrs| matches(predicate, attrs));
            match (before, now) {
                (true, true) => Some(event.clone()),
                (false, true) => Some(WatchEvent::Added(obj.clone())),
                (true, false) => prev_at_event().map(WatchEvent::Deleted),
                (false, false) => None,
            }
        }
        WatchEvent::Bookmark { .. } | WatchEvent::Error(_) => Some(event.clone()),
    }
}

/// The task behind one `KvStore` watch: initial events, then the backend's events as objects.
struct KvWatch {
    attrs: AttrsFn,
    codec: Arc<dyn StorageCodec>,
    written: Arc<Written>,
    scope: WatchScope,
    predicate: Predicate,
    allow_bookmarks: bool,
    tx: mpsc::Sender<WatchEvent>,
}

impl KvWatch {
    async fn run(
        self,
        initial: Vec<Object>,
        initial_end: Option<i64>,
        mut source: mpsc::Receiver<Result<KvEvent, KvError>>,
    ) {
        for object in initial {
            if self.tx.send(WatchEvent::Added(object)).await.is_err() {
                return;
            }
        }
        if let Some(resource_version) = initial_end {
            let bookmark = WatchEvent::Bookmark {
                resource_version,
                initial_events_end: true,
            };
            if self.tx.send(bookmark).await.is_err() {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                _ = self.tx.closed() => return,
                next = source.recv() => next,
            };
            let Some(next) = next else { return };
            let event = match next {
                Ok(event) => self.convert(event),
                Err(KvError::Compacted { .. }) => Some(WatchEvent::Error(StorageError::Expired(
                    WATCH_EXPIRED.into(),
                ))),
                Err(err) => Some(WatchEvent::Error(err.into())),
            };
            let Some(event) = event else { continue };
            let last = matches!(event, WatchEvent::Error(_));
            if self.tx.send(event).await.is_err() || last {
                return;
            }
        }
    }

    /// A stored value of the watched keys as an object, whatever its format.
    fn object(&self, key: &str, stored: &[u8], revision: i64) -> Result<Object, StorageError> {
        Object::from_stored_in(key, stored, revision, &self.attrs, self.codec.as_ref())
    }

    fn convert(&self, event: KvEvent) -> Option<WatchEvent> {
        let result = (|| -> Result<Option<WatchEvent>, StorageError> {
            match event {
                KvEvent::Progress { revision } => {
                    Ok(self.allow_bookmarks.then_some(WatchEvent::Bookmark {
                        resource_version: revision,
                        initial_events_end: false,
                    }))
                }
                KvEvent::Put { kv, prev } => {
                    if !self.scope.contains(&kv.key) {
                        return Ok(None);
                    }
                    // A write of this store: its attributes are known, no parse needed.
                    let written =
                        self.written
                            .take(&kv.key, &kv.value)
                            .and_then(|(json, attrs)| {
                                Object::from_written(
                                    &kv.key,
                                    &json,
                                    kv.mod_revision,
                                    attrs,
                                    self.codec.as_ref(),
                                )
                            });
                    let object = match written {
                        Some(object) => object,
                        None => match undecodable_left_out(self.object(
                            &kv.key,
                            &kv.value,
                            kv.mod_revision,
                        )) {
                            Some(object) => object,
                            None => return Ok(None),
                        },
                    };
                    let Some(prev) = prev else {
                        return Ok(filter_event(
                            &self.predicate,
                            &WatchEvent::Added(object),
                            None,
                            || None,
                        ));
                    };
                    if self.predicate.is_none() {
                        return Ok(Some(WatchEvent::Modified(object)));
                    }
                    // A previous value that cannot be decoded: the watcher sees the object as
                    // new, as it never saw the old one.
                    let Some(prev_at_event) =
                        undecodable_left_out(self.object(&kv.key, &prev.value, kv.mod_revision))
                    else {
                        return Ok(filter_event(
                            &self.predicate,
                            &WatchEvent::Added(object),
                            None,
                            || None,
                        ));
                    };
                    let prev_attrs = prev_at_event.attrs.clone();
                    Ok(filter_event(
                        &self.predicate,
                        &WatchEvent::Modified(object),
                        Some(&prev_attrs),
                        || Some(prev_at_event),
                    ))
                }
                KvEvent::Delete {
                    key,
                    mod_revision,
                    prev,
                } => {
                    if !self.scope.contains(&key) {
                        return Ok(None);
                    }
                    let Some(prev) = prev else {
                        tracing::warn!(%key, "delete event without the previous value; skipped");
                        return Ok(None);
                    };
                    let Some(object) =
                        undecodable_left_out(self.object(&key, &prev.value, mod_revision))
                    else {
                        return Ok(None);
                    };
                    Ok(filter_event(
                        &self.predicate,
                        &WatchEvent::Deleted(object),
                        None,
                        || None,
                    ))
                }
            }
        })();
        result.unwrap_or_else(|err| Some(WatchEvent::Error(err)))
    }
}

/// See [`KvStore::readable`]: a decoding error becomes `None`, logged with the key.
fn undecodable_left_out(object: Result<Object, StorageError>) -> Option<Object> {
    match object {
        Ok(object) => Some(object),
        Err(e) => {
            tracing::error!(error = %e, "a stored object cannot be decoded; it is left out");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_entry_is_taken_once_by_the_matching_bytes_and_bounded() {
        let written = Written::default();
        let attrs = Arc::new(Attrs::default());
        let json = Bytes::from_static(b"{\"a\":1}");
        written.put("/k", json.clone(), json, attrs.clone());
        assert!(written.take("/k", b"{\"a\":2}").is_none(), "other bytes");
        assert!(written.take("/other", b"{\"a\":1}").is_none(), "other key");
        assert!(written.take("/k", b"{\"a\":1}").is_some());
        assert!(written.take("/k", b"{\"a\":1}").is_none(), "taken once");
        // Past the byte budget, what no watch took is forgotten.
        let big = Bytes::from(vec![b' '; WRITTEN_MAX_BYTES / 2 + 1]);
        written.put("/a", big.clone(), big.clone(), attrs.clone());
        written.put("/b", big.clone(), big.clone(), attrs);
        assert!(written.take("/a", &big).is_none());
        assert!(written.take("/b", &big).is_some());
    }

    /// A codec writing metadata in Go's order, as the built-in kinds' codec does.
    struct GoOrder;

    impl StorageCodec for GoOrder {
        fn encode(&self, _obj: &Value) -> Result<Option<Vec<u8>>, String> {
            Ok(None)
        }
        fn decode(&self, _stored: &[u8]) -> Result<Value, String> {
            Err("JSON only".into())
        }
        fn precedes_resource_version(&self, member: &[u8]) -> bool {
            matches!(
                member,
                b"name" | b"generateName" | b"namespace" | b"selfLink" | b"uid"
            )
        }
    }

    #[test]
    fn splices_resource_version_where_the_codec_writes_it() {
        let splice = |json: &[u8], codec: &dyn StorageCodec| {
            String::from_utf8(splice_resource_version(json, 7, codec).expect("splice"))
                .expect("utf-8")
        };
        // Sorted members (custom resources): in name order, past a `metadata` elsewhere.
        assert_eq!(
            splice(
                br#"{"a":{"metadata":1},"metadata":{"name":"x"}}"#,
                &JsonCodec
            ),
            r#"{"a":{"metadata":1},"metadata":{"name":"x","resourceVersion":"7"}}"#
        );
        assert_eq!(
            splice(
                br#"{"metadata":{"labels":{"uid":"1"},"name":"x","uid":"u"}}"#,
                &JsonCodec
            ),
            r#"{"metadata":{"labels":{"uid":"1"},"name":"x","resourceVersion":"7","uid":"u"}}"#
        );
        // Go's order: after uid, before the creation time.
        assert_eq!(
            splice(
                br#"{"kind":"ConfigMap","metadata":{"name":"x","namespace":"d","uid":"u","creationTimestamp":null,"labels":{"a":"b"}}}"#,
                &GoOrder
            ),
            r#"{"kind":"ConfigMap","metadata":{"name":"x","namespace":"d","uid":"u","resourceVersion":"7","creationTimestamp":null,"labels":{"a":"b"}}}"#
        );
        assert_eq!(
            splice(br#"{"metadata":{"labels":{},"name":"x"}}"#, &GoOrder),
            r#"{"metadata":{"resourceVersion":"7","labels":{},"name":"x"}}"#
        );
        // Last, with white space kept; an empty object.
        assert_eq!(
            splice(br#"{"metadata": {"name" : "x" } }"#, &GoOrder),
            r#"{"metadata": {"name" : "x","resourceVersion":"7" } }"#
        );
        assert_eq!(
            splice(br#"{"s":"q\"}","metadata": { } }"#, &JsonCodec),
            r#"{"s":"q\"}","metadata": {"resourceVersion":"7" } }"#
        );
        for json in [
            &br#"{"metadata":[]}"#[..],
            br#"{"kind":"X"}"#,
            b"[]",
            br#"{"metadata":{"name":"#,
        ] {
            assert!(splice_resource_version(json, 1, &GoOrder).is_none());
        }
    }

    #[test]
    fn replaces_resource_version_where_it_stands() {
        let replaced = replace_resource_version(
            br#"{"metadata":{"name":"x","resourceVersion":"5","creationTimestamp":null}}"#,
            12,
        )
        .expect("replaced");
        assert_eq!(
            replaced,
            br#"{"metadata":{"name":"x","resourceVersion":"12","creationTimestamp":null}}"#
        );
        assert!(replace_resource_version(br#"{"metadata":{"name":"x"}}"#, 1).is_none());
        assert!(replace_resource_version(br#"{"metadata":{}}"#, 1).is_none());
    }

    #[test]
    fn the_metadata_object_is_found_wherever_it_stands() {
        // What follows the offset, up to the length expected.
        let at = |json: &str, len: usize| {
            metadata_offset(json.as_bytes()).map(|i| json[i..(i + len).min(json.len())].to_string())
        };
        let expected = r#"{"name":"a","uid":"u"}"#;
        assert_eq!(
            at(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","uid":"u"},"data":{"k":"v"}}"#, expected.len()).as_deref(),
            Some(expected)
        );
        // After members that hold a `metadata` of their own and strings with braces and quotes,
        // with spaces around it.
        let expected = r#"{ "name" : "a}\"" }"#;
        assert_eq!(
            at(r#" { "spec" : {"template":{"metadata":{"name":"inner"}}}, "s":"}\"{", "metadata" : { "name" : "a}\"" } , "status":{}}"#, expected.len()).as_deref(),
            Some(expected)
        );
        assert_eq!(
            at(r#"{"a":[1,{"b":2}],"metadata":{}}"#, 2).as_deref(),
            Some("{}")
        );
        for absent in [
            r#"{"kind":"X"}"#,
            r#"{"metadata":"x"}"#,
            r#"{"metadata":null}"#,
            r#"["metadata",{}]"#,
            r#"{"kind":"#,
            "",
        ] {
            assert_eq!(metadata_offset(absent.as_bytes()), None, "{absent}");
        }
    }

    #[test]
    fn type_meta_is_left_out_wherever_it_stands() {
        // Every case goes through both the scan and an object's list item, whose leading type
        // meta was found when it was made; the two must agree.
        let strip = |json: &[u8]| {
            let mut out = b"[".to_vec();
            extend_without_type_meta(json, &mut out);
            let object = Object::new(
                Arc::from("/k"),
                Bytes::copy_from_slice(json),
                1,
                Arc::new(Attrs::default()),
            );
            let mut item = b"[".to_vec();
            object.extend_list_item(&mut item);
            assert_eq!(item, out, "{}", String::from_utf8_lossy(json));
            if let Some(len) = object.list_item_len() {
                assert_eq!(len, item.len() - 1, "{}", String::from_utf8_lossy(json));
            }
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(
            leading_type_meta_end(br#"{"kind":"Pod","apiVersion":"v1","metadata":{}}"#),
            Some(32)
        );
        assert_eq!(
            strip(br#" { "apiVersion" : "v1" , "kind":"X" ,  "a":{"kind":1}}"#),
            r#"[{"a":{"kind":1}}"#
        );
        assert_eq!(strip(br#"{"kind":"X","apiVersion":"v1"}"#), "[{}");
        assert_eq!(strip(br#"{"kind":"X","kind":"Y","a":1}"#), r#"[{"a":1}"#);
        assert_eq!(
            leading_type_meta_end(br#"{"kind":"X","kind":"Y","a":1}"#),
            None
        );
        assert_eq!(
            leading_type_meta_end(br#"{"kind":"X","metadata":{},"apiVersion":"v1"}"#),
            None
        );
        // Sorted keys (how objects are stored), Go's order, a string holding a brace and the
        // key names, and members after both.
        assert_eq!(
            strip(br#"{"apiVersion":"v1","data":{"k":"}"kind""},"kind":"ConfigMap","metadata":{"name":"a"}}"#),
            r#"[{"data":{"k":"}"kind""},"metadata":{"name":"a"}}"#
        );
        assert_eq!(
            strip(br#"{"kind":"Pod","apiVersion":"v1","metadata":{},"spec":{"kind":1}}"#),
            r#"[{"metadata":{},"spec":{"kind":1}}"#
        );
        // Last members, a lone member, whitespace, and nothing to take out.
        assert_eq!(
            strip(br#"{ "a" : [1,{"b":"]"}] , "apiVersion":"v1", "kind" : "X" }"#),
            r#"[{"a" : [1,{"b":"]"}]}"#
        );
        assert_eq!(strip(br#"{"kind":"X"}"#), "[{}");
        assert_eq!(strip(br#"{}"#), "[{}");
        assert_eq!(strip(br#"{"a":1,"b":true}"#), r#"[{"a":1,"b":true}"#);
        // Not an object, or cut short: appended unchanged.
        assert_eq!(strip(b"[1]"), "[[1]");
        assert_eq!(strip(br#"{"kind":"X","a":"#), r#"[{"kind":"X","a":"#);
    }

    #[test]
    fn object_gets_resource_version_and_attrs() {
        let stored =
            br#"{"kind":"ConfigMap","metadata":{"labels":{"a":"b"},"name":"n","namespace":"ns"}}"#;
        let object = Object::from_stored("/k", stored, 12, &default_attrs()).expect("object");
        let value = object.value().expect("value");
        assert_eq!(value.resource_version(), "12");
        assert_eq!(object.attrs.labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(
            object.attrs.fields.get("metadata.name").map(String::as_str),
            Some("n")
        );
        assert_eq!(
            object
                .attrs
                .fields
                .get("metadata.namespace")
                .map(String::as_str),
            Some("ns")
        );
        // No metadata at all: the object is re-encoded with one.
        let object =
            Object::from_stored("/k", br#"{"kind":"X"}"#, 3, &default_attrs()).expect("object");
        assert_eq!(object.value().expect("value").resource_version(), "3");
        assert_eq!(
            object
                .with_resource_version(9)
                .expect("rv")
                .value()
                .expect("value")
                .resource_version(),
            "9"
        );
    }

    #[test]
    fn continue_tokens_round_trip_in_upstream_format() {
        let token = encode_continue("/registry/cm/ns/b\0", "/registry/cm/", 42).expect("encode");
        let json = RAW_URL.decode(&token).expect("base64");
        assert_eq!(
            json,
            br#"{"v":"meta.k8s.io/v1","rv":42,"start":"ns/b\u0000"}"#
        );
        assert_eq!(
            decode_continue(&token, "/registry/cm/").expect("decode"),
            ("/registry/cm/ns/b\0".to_string(), 42)
        );
    }

    #[test]
    fn bad_continue_tokens_get_upstream_messages() {
        let message = |token: &str| {
            decode_continue(token, "/p/")
                .expect_err("invalid")
                .to_string()
        };
        // Recorded from kube-apiserver v1.36 for `?continue=garbage`.
        assert_eq!(
            message("garbage"),
            "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
        );
        assert_eq!(
            message("a"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 0"
        );
        assert_eq!(
            message("a*bc"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 1"
        );
        let encoded = |json: &str| RAW_URL.encode(json);
        assert_eq!(
            message(&encoded(r#"{"v":"x","rv":1,"start":"a"}"#)),
            "invalid continue token: continue key is not valid: server does not recognize this encoded version x"
        );
        assert_eq!(
            message(&encoded(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#)),
            "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        );
        assert_eq!(
            message(&encoded(r#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#)),
            "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
        );
        assert_eq!(
            message(&encoded(
                r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../other/x"}"#
            )),
            "invalid continue token: continue key is not valid: ../other/x"
        );
    }

    #[test]
    fn parses_resource_version_parameter() {
        assert_eq!(ResourceVersion::parse(""), Some(ResourceVersion::Unset));
        assert_eq!(ResourceVersion::parse("0"), Some(ResourceVersion::Any));
        assert_eq!(
            ResourceVersion::parse("17"),
            Some(ResourceVersion::Exact(17))
        );
        assert_eq!(ResourceVersion::parse("x"), None);
        assert_eq!(ResourceVersion::parse("-1"), None);
    }
}
