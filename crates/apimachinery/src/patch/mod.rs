//! The PATCH verb's body formats: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and
//! strategic merge patch, applied to an object's JSON the way kube-apiserver applies them
//! (k8s.io/apiserver `handlers/patch.go` with `gopkg.in/evanphx/json-patch.v4`, and
//! k8s.io/apimachinery `util/strategicpatch`), with the same error codes and messages.
//!
//! This module only transforms documents. Decoding the result into the kind (and pruning or
//! rejecting unknown fields, see [`crate::schema::Schemas::prune_unknown`]), admission, the
//! field manager and server-side apply (`application/apply-patch+yaml`) belong to the callers.

mod gofmt;
mod lazy;
mod strategic;

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use strategic::{apply_strategic_merge_patch, decode_strategic_merge_patch};

use crate::status::{Reason, Status, StatusDetails};

/// Upstream refuses JSON patches with more operations than this (413).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The `Content-Type` of a PATCH request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// Every patch type, in the order upstream lists them for built-in resources.
    pub const ALL: [PatchType; 4] = [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ];

    /// The patch type of a `Content-Type` header. Parameters after `;` are ignored, as upstream
    /// cuts them off; nothing else is normalized (upstream compares the rest byte for byte).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = match content_type.find(';') {
            Some(idx) if idx > 0 => &content_type[..idx],
            _ => content_type,
        };
        PatchType::ALL
            .into_iter()
            .find(|t| t.content_type() == media_type)
    }

    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// How a failed patch is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchErrorKind {
    /// 400 with the message: the patch cannot be decoded or breaks the patch format's rules.
    BadRequest,
    /// 422 `Invalid` with upstream's generic text "the server rejected our request due to an
    /// error in our request": upstream does not pass the detailed message on, so it is kept for
    /// logs only.
    Invalid,
    /// 413: more than [`MAX_JSON_PATCH_OPERATIONS`] operations.
    TooLarge,
    /// 500 with the bare message: upstream returns these errors unconverted, so they reach the
    /// client as a status with code 500 and no reason.
    Internal,
}

/// A patch that could not be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchError {
    pub kind: PatchErrorKind,
    pub message: String,
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PatchError {}

impl PatchError {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self {
            kind: PatchErrorKind::BadRequest,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self {
            kind: PatchErrorKind::Invalid,
            message: message.into(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self {
            kind: PatchErrorKind::Internal,
            message: message.into(),
        }
    }

    /// The `metav1.Status` upstream answers with.
    pub fn to_status(&self) -> Status {
        match self.kind {
            PatchErrorKind::BadRequest => Status::bad_request(self.message.clone()),
            PatchErrorKind::Invalid => Status::new(
                422,
                Reason::Invalid,
                "the server rejected our request due to an error in our request",
            )
            .with_details(StatusDetails::default()),
            PatchErrorKind::TooLarge => {
                Status::too_large(format!("Request entity too large: {}", self.message))
            }
            // Upstream passes the plain error on: a 500 without a reason (StatusReasonUnknown).
            PatchErrorKind::Internal => Status::unknown(self.message.clone()),
        }
    }
}

/// Applies a JSON patch (RFC 6902) to `doc`.
///
/// As upstream: a body that is not a list of objects is a 400 with Go's decoding message, more
/// than [`MAX_JSON_PATCH_OPERATIONS`] operations a 413, and any operation that fails (unknown
/// `op`, missing path, failed `test`) a 422. Array indexes may be negative (`-1` is the last
/// element) and may have leading zeros, as evanphx/json-patch v4 allows.
pub fn apply_json_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    apply_json_patch_following(doc, patch, &mut None, &[])
}

/// A JSON patch's result as kube-apiserver's patch library writes it (see [`lazy`]): `go_json`,
/// the current object `doc` as upstream encodes it (a built-in's members in Go's order), with
/// `patch` applied. `None` when the patch fails or the model cannot follow it.
pub fn json_patch_as_go_writes(doc: &Value, go_json: &[u8], patch: &[u8]) -> Option<Vec<u8>> {
    let mut written = Some(lazy::Document::read(std::str::from_utf8(go_json).ok()?)?);
    // v4 reads each operation as a map of raw values; a value keeps the patch's text.
    let operations: Vec<Option<BTreeMap<String, Option<&RawValue>>>> =
        serde_json::from_slice(patch).ok()?;
    let values: Vec<lazy::Node> = operations
        .iter()
        .map(|op| {
            lazy::Node::read(
                op.as_ref()
                    .and_then(|op| op.get("value").copied().flatten()),
            )
        })
        .collect();
    let result = apply_json_patch_following(doc, patch, &mut written, &values).ok()?;
    written?.json_if_same(&result)
}

/// A merge patch's result as kube-apiserver's patch library writes it (see [`lazy`]), given
/// `go_json` as in [`json_patch_as_go_writes`] and `result`, what [`apply_merge_patch`] made of
/// the same patch. `None` for a patch that is not an object or where the model cannot follow.
pub fn merge_patch_as_go_writes(go_json: &[u8], patch: &[u8], result: &Value) -> Option<Vec<u8>> {
    let mut written = lazy::Document::read(std::str::from_utf8(go_json).ok()?)?;
    written.merge(std::str::from_utf8(patch).ok()?)?;
    written.json_if_same(result)
}

/// [`apply_json_patch`], with each operation that succeeds followed on `written` (its value, if
/// it has one, at the same index of `values`); `written` becomes `None` where it cannot follow.
fn apply_json_patch_following(
    doc: &Value,
    patch: &[u8],
    written: &mut Option<lazy::Document>,
    values: &[lazy::Node],
) -> Result<Value, PatchError> {
    let operations = match decode_json(patch)? {
        // Go decodes `null` into an empty patch.
        Value::Null => Vec::new(),
        Value::Array(operations) => operations,
        other => {
            return Err(PatchError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
                go_json_type(&other)
            )));
        }
    };
    if let Some(bad) = operations
        .iter()
        .find(|op| !(op.is_object() || op.is_null()))
    {
        return Err(PatchError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            go_json_type(bad)
        )));
    }
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError {
            kind: PatchErrorKind::TooLarge,
            message: format!(
                "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                operations.len()
            ),
        });
    }
    let mut doc = doc.clone();
    for (i, operation) in operations.into_iter().enumerate() {
        let value = values.get(i).cloned().unwrap_or(lazy::Node::Null);
        apply_operation(&mut doc, operation, written, value)?;
    }
    Ok(doc)
}

/// Runs `step` on `written`, and gives it up if the step cannot be followed.
fn follow<T>(
    written: &mut Option<lazy::Document>,
    step: impl FnOnce(&mut lazy::Document) -> Option<T>,
) -> Option<T> {
    let done = written.as_mut().and_then(step);
    if done.is_none() {
        *written = None;
    }
    done
}

fn apply_operation(
    doc: &mut Value,
    operation: Value,
    written: &mut Option<lazy::Document>,
    value: lazy::Node,
) -> Result<(), PatchError> {
    let Value::Object(mut op) = operation else {
        return Err(PatchError::invalid("Unexpected kind: unknown"));
    };
    let kind = op
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    if !matches!(
        kind.as_str(),
        "add" | "remove" | "replace" | "move" | "copy" | "test"
    ) {
        return Err(PatchError::invalid(format!("Unexpected kind: {kind}")));
    }
    // evanphx/json-patch finds no container for the root pointer, so it never operates on the
    // whole document.
    for field in ["path", "from"] {
        if op.get(field).and_then(Value::as_str) == Some("") {
            return Err(PatchError::invalid(format!(
                "{kind} operation does not apply: doc is missing path: \"\""
            )));
        }
    }
    if let Some(Value::String(from)) = op.get_mut("from") {
        *from = normalize_pointer(doc, from, false);
    }
    let mut moved = None;
    if kind == "move" {
        // A move is a remove then an add, and the destination's indexes count after the removal.
        let Some(from) = op.get("from").and_then(Value::as_str).map(str::to_string) else {
            return Err(PatchError::invalid(
                "move operation does not apply: doc is missing from path",
            ));
        };
        let value = doc.pointer(&from).cloned().ok_or_else(|| {
            PatchError::invalid(format!(
                "move operation does not apply: doc is missing from path: {from}"
            ))
        })?;
        run(doc, serde_json::json!({"op": "remove", "path": from}))?;
        // v4 moves the node itself, looked into or not.
        moved = follow(written, |w| w.remove(&from));
        op.insert("op".into(), Value::String("add".into()));
        op.insert("value".into(), value);
        op.remove("from");
    }
    // Go reads a missing `value` as null rather than rejecting the operation.
    if matches!(kind.as_str(), "add" | "replace" | "test") && !op.contains_key("value") {
        op.insert("value".into(), Value::Null);
    }
    let insert = matches!(kind.as_str(), "add" | "move" | "copy");
    if let Some(Value::String(path)) = op.get_mut("path") {
        *path = normalize_pointer(doc, path, insert);
    }
    // v4 replaces a key an object does not have by setting it (its object container has no
    // existence check), which is an add.
    if kind == "replace"
        && let Some((parent, key)) = op
            .get("path")
            .and_then(Value::as_str)
            .and_then(|p| p.rsplit_once('/'))
        && let Some(Value::Object(map)) = doc.pointer(parent)
        && !map.contains_key(&key.replace("~1", "/").replace("~0", "~"))
    {
        op.insert("op".into(), Value::String("add".into()));
    }
    check_depth(doc, &kind, &op)?;
    let pointer = |name: &str| op.get(name).and_then(Value::as_str).map(str::to_string);
    let (path, from) = (pointer("path").unwrap_or_default(), pointer("from"));
    run(doc, Value::Object(op))?;
    follow(written, |w| match kind.as_str() {
        "add" => w.add(&path, value),
        "replace" => w.replace(&path, value),
        "remove" => w.remove(&path).map(drop),
        "move" => w.add(&path, moved?),
        "copy" => w.copy(from.as_deref()?, &path),
        "test" => w.test(&path),
        _ => None,
    });
    Ok(())
}

/// The deepest nesting of arrays and objects a patch may leave: serde_json, which reads every
/// body and every stored object, refuses anything deeper, so a deeper result could be written
/// but never read back. (Upstream's decoder of the patched object stops at 10,000 levels.)
pub const MAX_DEPTH: usize = 127;

/// Refuses an operation that would put a value deeper than [`MAX_DEPTH`]: each operation's value
/// was parsed, so it is within the limit, but an `add`, `copy` or `move` can place it at the
/// bottom of a branch that is already deep, and a patch may repeat that 10,000 times.
fn check_depth(doc: &Value, kind: &str, op: &Map<String, Value>) -> Result<(), PatchError> {
    let placed = match kind {
        "add" | "replace" => op.get("value"),
        "copy" | "move" => op
            .get("from")
            .and_then(Value::as_str)
            .and_then(|from| doc.pointer(from)),
        _ => None,
    };
    let (Some(value), Some(path)) = (placed, op.get("path").and_then(Value::as_str)) else {
        return Ok(());
    };
    // Every token of the path is one container above the value.
    let above = path.matches('/').count();
    if above > MAX_DEPTH || crate::object::nests_deeper_than(value, MAX_DEPTH - above) {
        return Err(PatchError::invalid(format!(
            "{kind} operation does not apply: the result would nest deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(())
}

fn run(doc: &mut Value, op: Value) -> Result<(), PatchError> {
    let op: json_patch::PatchOperation =
        serde_json::from_value(op).map_err(|e| PatchError::invalid(e.to_string()))?;
    // The caller works on a copy, so a half-applied patch is simply dropped.
    json_patch::patch_unsafe(doc, std::slice::from_ref(&op))
        .map_err(|e| PatchError::invalid(e.to_string()))
}

/// Rewrites the array indexes of a JSON pointer the way evanphx/json-patch v4 reads them
/// (`strconv.Atoi`, so `01` and `+1` are 1; negative indexes count from the end, and for an
/// insertion `-1` means after the last element) into the canonical form RFC 6901 expects.
fn normalize_pointer(doc: &Value, pointer: &str, insert: bool) -> String {
    // v4 splits the pointer on `/` and skips the first part whatever it is, so `data/x` is
    // `/x`; a pointer without any `/` finds nothing.
    let Some((_, rest)) = pointer.split_once('/') else {
        return pointer.to_string();
    };
    let tokens: Vec<&str> = rest.split('/').collect();
    let mut out = String::with_capacity(pointer.len());
    let mut current = Some(doc);
    for (i, token) in tokens.iter().enumerate() {
        let last = i + 1 == tokens.len();
        let mut written = (*token).to_string();
        current = match current {
            Some(Value::Array(items)) => match go_atoi(token) {
                Some(index) if *token != "-" => {
                    let len = items.len() as i64;
                    let index = if index < 0 {
                        index + len + i64::from(last && insert)
                    } else {
                        index
                    };
                    if index >= 0 {
                        written = index.to_string();
                    }
                    usize::try_from(index).ok().and_then(|i| items.get(i))
                }
                _ => None,
            },
            Some(Value::Object(map)) => map.get(&token.replace("~1", "/").replace("~0", "~")),
            _ => None,
        };
        out.push('/');
        out.push_str(&written);
    }
    out
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits, within `int64`.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// The strict-decoding warnings upstream adds for a JSON patch under `fieldValidation=Warn` or
/// `Strict`: keys of an operation other than `op`, `path`, `from` and `value`, as
/// `json patch unknown field "[0].foo"`.
pub fn json_patch_unknown_fields(patch: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (i, op) in patch.as_array().into_iter().flatten().enumerate() {
        for key in op.as_object().into_iter().flat_map(Map::keys) {
            if !matches!(key.as_str(), "op" | "path" | "from" | "value") {
                found.push(format!(
                    "json patch unknown field {}",
                    crate::schema::go_quote(&format!("[{i}].{key}"))
                ));
            }
        }
    }
    found
}

/// Applies a JSON merge patch (RFC 7386) to `doc`, as evanphx/json-patch v4's `MergePatch` does:
/// `null` removes a key, objects merge, anything else replaces; nulls inside newly added objects
/// are dropped, at every depth, while lists keep theirs. A body that is not JSON, `null`, or a scalar is a 400
/// `Invalid JSON Patch`; a list replaces the whole document (and fails to decode later).
pub fn apply_merge_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    const BAD_PATCH: &str = "Invalid JSON Patch";
    let patch: Value =
        serde_json::from_slice(patch).map_err(|_| PatchError::bad_request(BAD_PATCH))?;
    match patch {
        Value::Object(patch) => {
            let mut doc = doc.clone();
            match &mut doc {
                Value::Object(map) => merge_objects(map, patch),
                _ => return Err(PatchError::internal("Invalid JSON Document")),
            }
            Ok(doc)
        }
        mut list @ Value::Array(_) => {
            prune_nulls(&mut list);
            Ok(list)
        }
        _ => Err(PatchError::bad_request(BAD_PATCH)),
    }
}

fn merge_objects(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            doc.remove(&key);
            continue;
        }
        match doc.get_mut(&key) {
            Some(current) => merge_value(current, value),
            None => {
                let mut value = value;
                prune_nulls(&mut value);
                doc.insert(key, value);
            }
        }
    }
}

fn merge_value(current: &mut Value, patch: Value) {
    match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => merge_objects(current, patch),
        // A non-object is replaced; an object patch then loses its nulls, a list patch keeps
        // them (evanphx prunes only when the current value is not an object).
        (current @ Value::Object(_), patch) => *current = patch,
        (current, mut patch) => {
            prune_nulls(&mut patch);
            *current = patch;
        }
    }
}

fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => {
            // v4.13 keeps a list's null elements (v4.12 dropped them); kube-apiserver v1.36
            // decodes them as their type's zero value.
            items.iter_mut().for_each(prune_nulls);
        }
        _ => {}
    }
}

/// Parses a patch body; a syntax error is a 400 with Go's message where it can be matched.
fn decode_json(bytes: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(bytes).map_err(|e| PatchError::bad_request(go_syntax_error(&e)))
}

/// Go's `encoding/json` message for a document that does not parse. Only the truncated case has
/// a fixed text worth matching; other syntax errors keep serde's wording.
pub(crate) fn go_syntax_error(err: &serde_json::Error) -> String {
    if err.is_eof() {
        "unexpected end of JSON input".to_string()
    } else {
        err.to_string()
    }
}

/// The JSON type word Go's `UnmarshalTypeError` prints.
pub fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_patch(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply_json_patch(&doc, patch.to_string().as_bytes())
    }

    /// Found by the fuzz target (crates/fuzz, patch): operations that each add a value 64 levels
    /// deep at the bottom of the previous one built a document serde_json could not read back.
    #[test]
    fn refuses_results_deeper_than_a_body_may_be() {
        let nested = |depth: usize| (0..depth).fold(json!(1), |v, _| json!([v]));
        let deep_path = format!("/a{}", "/0".repeat(63));
        let patch = json!([
            {"op": "add", "path": "/a", "value": nested(64)},
            {"op": "add", "path": deep_path, "value": nested(64)},
        ]);
        let err = json_patch(json!({}), patch).unwrap_err();
        assert_eq!(err.kind, PatchErrorKind::Invalid);
        assert!(
            err.message.contains("deeper than 127 levels"),
            "{}",
            err.message
        );
        // Up to the limit is fine: 27 objects above a value of 100 nested arrays.
        let doc = (0..26).fold(json!({}), |v, _| json!({ "k": v }));
        let path = format!("{}/v", "/k".repeat(26));
        let at_limit = json_patch(
            doc,
            json!([{"op": "add", "path": path, "value": nested(100)}]),
        )
        .unwrap();
        let text = serde_json::to_string(&at_limit).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok());
        // A copy counts the copied branch.
        let doc = json!({"a": nested(100)});
        let copy = json!([{"op": "copy", "from": "/a", "path": format!("/a{}", "/0".repeat(40))}]);
        assert!(json_patch(doc, copy).is_err());
    }

    /// evanphx/json-patch v4 as kube-apiserver v1.36.2 answers (checked against one): `replace`
    /// of a key an object lacks sets it, an array index past the end is still missing, and a
    /// path without a leading `/` drops its first part.
    #[test]
    fn replaces_missing_object_keys_and_reads_paths_as_v4() {
        let doc = json!({"data": {"k": "v"}, "l": [1]});
        let out = json_patch(
            doc.clone(),
            json!([{"op": "replace", "path": "/data/nope", "value": "1"}]),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"k": "v", "nope": "1"}));
        assert!(
            json_patch(
                doc.clone(),
                json!([{"op": "replace", "path": "/l/3", "value": 2}])
            )
            .is_err()
        );
        assert!(
            json_patch(
                doc.clone(),
                json!([{"op": "replace", "path": "/no/where", "value": 2}])
            )
            .is_err()
        );
        let out = json_patch(
            doc.clone(),
            json!([{"op": "add", "path": "data/x", "value": "1"}]),
        )
        .unwrap();
        assert_eq!(out["x"], json!("1"));
        assert_eq!(out["data"], doc["data"]);
        assert!(json_patch(doc, json!([{"op": "add", "path": "data", "value": "1"}])).is_err());
    }

    #[test]
    fn recognizes_content_types() {
        assert_eq!(
            PatchType::from_content_type("application/json-patch+json"),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json"),
            Some(PatchType::Strategic)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json ;x=y"),
            None
        );
        assert_eq!(PatchType::from_content_type(""), None);
    }

    #[test]
    fn applies_the_rfc_6902_examples() {
        // RFC 6902 appendix A.1, A.2, A.3, A.4, A.5, A.6, A.7, A.8, A.10, A.16.
        assert_eq!(
            json_patch(
                json!({"foo": "bar"}),
                json!([{"op": "add", "path": "/baz", "value": "qux"}])
            )
            .unwrap(),
            json!({"baz": "qux", "foo": "bar"})
        );
        assert_eq!(
            json_patch(
                json!({"foo": ["bar", "baz"]}),
                json!([{"op": "add", "path": "/foo/1", "value": "qux"}])
            )
            .unwrap(),
            json!({"foo": ["bar", "qux", "baz"]})
        );
        assert_eq!(
            json_patch(
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "remove", "path": "/baz"}])
            )
            .unwrap(),
            json!({"foo": "bar"})
        );
        assert_eq!(
            json_patch(
                json!({"foo": ["bar", "qux", "baz"]}),
                json!([{"op": "remove", "path": "/foo/1"}])
            )
            .unwrap(),
            json!({"foo": ["bar", "baz"]})
        );
        assert_eq!(
            json_patch(
                json!({"baz": "qux", "foo": "bar"}),
                json!([{"op": "replace", "path": "/baz", "value": "boo"}])
            )
            .unwrap(),
            json!({"baz": "boo", "foo": "bar"})
        );
        assert_eq!(
            json_patch(
                json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
                json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}])
            )
            .unwrap(),
            json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})
        );
        assert_eq!(
            json_patch(
                json!({"foo": ["all", "grass", "cows", "eat"]}),
                json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}])
            )
            .unwrap(),
            json!({"foo": ["all", "cows", "eat", "grass"]})
        );
        let doc = json!({"baz": "qux", "foo": ["a", 2, "c"]});
        assert_eq!(
            json_patch(doc.clone(), json!([{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}]))
                .unwrap(),
            doc
        );
        let failed = json_patch(
            json!({"baz": "qux"}),
            json!([{"op": "test", "path": "/baz", "value": "bar"}]),
        )
        .unwrap_err();
        assert_eq!(failed.kind, PatchErrorKind::Invalid);
        assert_eq!(
            json_patch(
                json!({"foo": ["bar"]}),
                json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}])
            )
            .unwrap(),
            json!({"foo": ["bar", ["abc", "def"]]})
        );
        // A.9 and A.12: adding below a missing parent fails as a whole and leaves nothing behind.
        let missing = json_patch(
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
        )
        .unwrap_err();
        assert_eq!(missing.kind, PatchErrorKind::Invalid);
    }

    #[test]
    fn reads_indexes_as_evanphx_v4_does() {
        // Expected values are what `kubectl patch --local --type json` (evanphx v4) prints.
        let doc = json!({"f": ["a", "b", "c"]});
        let patched = |op: Value| json_patch(doc.clone(), json!([op])).map(|d| d["f"].clone());
        assert_eq!(
            patched(json!({"op": "remove", "path": "/f/-1"})).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            patched(json!({"op": "add", "path": "/f/-1", "value": "z"})).unwrap(),
            json!(["a", "b", "c", "z"])
        );
        assert_eq!(
            patched(json!({"op": "add", "path": "/f/-4", "value": "z"})).unwrap(),
            json!(["z", "a", "b", "c"])
        );
        assert_eq!(
            patched(json!({"op": "add", "path": "/f/01", "value": "z"})).unwrap(),
            json!(["a", "z", "b", "c"])
        );
        assert_eq!(
            patched(json!({"op": "replace", "path": "/f/-3", "value": "z"})).unwrap(),
            json!(["z", "b", "c"])
        );
        assert_eq!(
            patched(json!({"op": "move", "from": "/f/0", "path": "/f/-1"})).unwrap(),
            json!(["b", "c", "a"])
        );
        assert!(patched(json!({"op": "add", "path": "/f/-5", "value": "z"})).is_err());
        assert!(patched(json!({"op": "add", "path": "/f/4", "value": "z"})).is_err());
        // A missing value adds null, as Go's decoder leaves it.
        assert_eq!(
            json_patch(json!({"d": {}}), json!([{"op": "add", "path": "/d/k"}])).unwrap(),
            json!({"d": {"k": null}})
        );
        assert_eq!(
            json_patch(
                json!({"d": {"k": "v"}}),
                json!([{"op": "copy", "from": "/d/k", "path": "/d/k2"}])
            )
            .unwrap(),
            json!({"d": {"k": "v", "k2": "v"}})
        );
    }

    #[test]
    fn maps_json_patch_failures_to_upstream_statuses() {
        let doc = json!({"a": 1});
        let err = json_patch(doc.clone(), json!({"op": "add"})).unwrap_err();
        assert_eq!(
            err.message,
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
        assert_eq!(err.to_status().code, 400);
        let err = json_patch(doc.clone(), json!(["x"])).unwrap_err();
        assert_eq!(
            err.message,
            "json: cannot unmarshal string into Go value of type jsonpatch.Operation"
        );
        let err = apply_json_patch(&doc, b"[{\"op\":").unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (PatchErrorKind::BadRequest, "unexpected end of JSON input")
        );

        let err = json_patch(doc.clone(), json!([{"op": "x"}])).unwrap_err();
        assert_eq!(err.message, "Unexpected kind: x");
        assert_eq!(
            err.to_status().to_json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "the server rejected our request due to an error in our request",
                   "reason": "Invalid", "details": {}, "code": 422})
        );
        assert_eq!(
            json_patch(doc.clone(), json!([{"op": "remove", "path": "/nope"}]))
                .unwrap_err()
                .kind,
            PatchErrorKind::Invalid
        );
        assert_eq!(
            json_patch(
                doc.clone(),
                json!([{"op": "replace", "path": "", "value": {}}])
            )
            .unwrap_err()
            .kind,
            PatchErrorKind::Invalid
        );
        assert_eq!(json_patch(doc.clone(), json!(null)).unwrap(), doc);

        let many: Vec<Value> = (0..10_001)
            .map(|_| json!({"op": "test", "path": "/a", "value": 1}))
            .collect();
        let err = json_patch(doc, Value::Array(many)).unwrap_err();
        assert_eq!(
            err.to_status().message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        assert_eq!(err.to_status().code, 413);
    }

    #[test]
    fn lists_unknown_json_patch_fields() {
        let patch = json!([{"op": "add", "path": "/a", "value": 1, "extra": 2}, {"op": "remove", "path": "/b", "Op": "x"}]);
        assert_eq!(
            json_patch_unknown_fields(&patch),
            vec![
                r#"json patch unknown field "[0].extra""#,
                r#"json patch unknown field "[1].Op""#
            ]
        );
    }

    #[test]
    fn applies_the_rfc_7386_examples() {
        // RFC 7386 appendix A, on an object document as the apiserver always has.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            (
                json!({"a": "x"}),
                json!({"a": {"b": null, "c": 1}}),
                json!({"a": {"c": 1}}),
            ),
        ];
        for (doc, patch, want) in cases {
            assert_eq!(
                apply_merge_patch(&doc, patch.to_string().as_bytes()).unwrap(),
                want,
                "{doc} + {patch}"
            );
        }
        // A list that a patch adds keeps its nulls (kube-apiserver v1.36 answers a merge patch
        // of `finalizers: ["a/b", null]` with a 422 about the `""` finalizer), and its objects
        // lose theirs; a list that replaces an object is kept as it is.
        assert_eq!(
            apply_merge_patch(&json!({}), br#"{"a":[1,null,{"b":null}]}"#).unwrap(),
            json!({"a": [1, null, {}]})
        );
        assert_eq!(
            apply_merge_patch(&json!({"a": {}}), br#"{"a":[1,null]}"#).unwrap(),
            json!({"a": [1, null]})
        );
    }

    #[test]
    fn rejects_merge_patches_as_upstream() {
        let doc = json!({"a": 1});
        for bad in [&b"null"[..], b"\"s\"", b"1", b"{", b""] {
            let err = apply_merge_patch(&doc, bad).unwrap_err();
            assert_eq!(
                (err.kind, err.message.as_str()),
                (PatchErrorKind::BadRequest, "Invalid JSON Patch")
            );
        }
        assert_eq!(
            apply_merge_patch(&doc, b"[1,null]").unwrap(),
            json!([1, null])
        );
    }
}
