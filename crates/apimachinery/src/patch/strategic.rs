//! Strategic merge patch as kube-apiserver applies it (k8s.io/apimachinery `strategicpatch`,
//! `StrategicMergeMapPatch` with parallel lists merged and unmatched nulls ignored), driven by the
//! `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` metadata of the OpenAPI
//! definitions instead of Go struct tags (the two are generated from the same source).
//!
//! The rules, in upstream's order for each object:
//! 1. `$patch: replace` keeps the patch object (less the directive); `$patch: delete` empties it.
//! 2. `$retainKeys` drops every key of the original not listed (and the patch may only set listed
//!    keys).
//! 3. `$setElementOrder/<list>` merges that list now and orders it: the directive's order first,
//!    then the patch's, then the live object's.
//! 4. Every other key: `null` deletes; a value of a different JSON type replaces; objects merge
//!    (unless the field's strategy is `replace`); lists with strategy `merge` merge by their merge
//!    key (or as sets, for scalars) with `$patch: delete|replace` items, other lists are replaced;
//!    `$deleteFromPrimitiveList/<list>` removes scalars.
//!
//! Where the schema knows nothing (no schema for the kind, an opaque value, a field missing from
//! the definitions) there is no strategy: objects merge and lists are replaced, as upstream does
//! for struct fields without patch tags. Rejecting strategic merge patch for custom resources
//! (415) is the caller's decision.
//!
//! Error texts are upstream's (k8s.io/apimachinery `mergepatch` errors), and so are their codes
//! (k8s.io/apiserver `interpretStrategicMergePatchError`): malformed directives are 400, lists of
//! lists 422, and everything else reaches the client as an uncategorized 500.

use serde_json::{Map, Value};

use super::{PatchError, go_json_type, go_syntax_error, gofmt};
use crate::schema::{PatchStrategy, SchemaRef, Schemas};

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const ERR_BAD_JSON_DOC: &str = "invalid JSON document";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";
const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

const MAP_TYPE: &str = "map[string]interface {}";
const LIST_TYPE: &str = "[]interface {}";

type Object = Map<String, Value>;

/// Decodes a strategic merge patch body: a JSON object, or `null` for no change. Anything else
/// is a 400 with Go's decoding message, as upstream's `UnmarshalCaseSensitivePreserveInts` gives.
pub fn decode_strategic_merge_patch(patch: &[u8]) -> Result<Value, PatchError> {
    match serde_json::from_slice(patch).map_err(|e| PatchError::bad_request(go_syntax_error(&e)))? {
        Value::Null => Ok(Value::Object(Map::new())),
        patch @ Value::Object(_) => Ok(patch),
        other => Err(PatchError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type {MAP_TYPE}",
            go_json_type(&other)
        ))),
    }
}

/// Applies the strategic merge patch `patch` to the object `doc`. `root` is the kind's schema
/// (see [`Schemas::root_for`]); without one every list is replaced and every object merged.
pub fn apply_strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    schemas: &Schemas,
    root: Option<SchemaRef>,
) -> Result<Value, PatchError> {
    let Value::Object(original) = doc else {
        return Err(PatchError::bad_request(ERR_BAD_JSON_DOC));
    };
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        Value::Null => return Ok(doc.clone()),
        other => {
            return Err(PatchError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type {MAP_TYPE}",
                go_json_type(other)
            )));
        }
    };
    Merger { schemas }
        .merge_map(original.clone(), patch, root)
        .map(Value::Object)
}

/// What the schema says about one field of the object being merged.
#[derive(Clone, Copy, Default)]
struct FieldMeta<'a> {
    strategy: PatchStrategy,
    merge_key: &'a str,
    node: Option<SchemaRef>,
    items: Option<SchemaRef>,
}

/// The Go type a decoded JSON value has; values of different types replace rather than merge,
/// and a list's items must all have one type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GoType {
    Nil,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

fn go_type(value: &Value) -> GoType {
    match value {
        Value::Null => GoType::Nil,
        Value::Bool(_) => GoType::Bool,
        Value::Number(n) if n.is_i64() => GoType::Int,
        Value::Number(_) => GoType::Float,
        Value::String(_) => GoType::String,
        Value::Array(_) => GoType::List,
        Value::Object(_) => GoType::Map,
    }
}

struct Merger<'a> {
    schemas: &'a Schemas,
}

impl<'a> Merger<'a> {
    fn field(&self, parent: Option<SchemaRef>, key: &str) -> FieldMeta<'a> {
        let schemas: &'a Schemas = self.schemas;
        let Some(node) = parent.and_then(|p| schemas.child(p, key)) else {
            return FieldMeta::default();
        };
        FieldMeta {
            strategy: schemas.patch_strategy(node),
            merge_key: schemas.merge_key(node).unwrap_or(""),
            node: Some(node),
            items: schemas.items(node),
        }
    }

    fn merge_map(
        &self,
        mut original: Object,
        mut patch: Object,
        schema: Option<SchemaRef>,
    ) -> Result<Object, PatchError> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some(REPLACE) => {
                    patch.remove(DIRECTIVE);
                    Ok(patch)
                }
                Some(DELETE) => Ok(Map::new()),
                _ => Err(bad_patch_type(directive, &patch)),
            };
        }
        apply_retain_keys(&mut original, &mut patch)?;
        self.merge_ordered_lists(&mut original, &mut patch, schema)?;

        for (key, patch_value) in patch {
            let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                let list = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST, ERR_PRIMITIVE_LIST)?;
                (
                    if list.is_empty() {
                        key.clone()
                    } else {
                        list.to_string()
                    },
                    true,
                )
            } else {
                (key, false)
            };
            if patch_value.is_null() {
                original.remove(&key);
                continue;
            }
            let same_type = match original.get(&key) {
                None => false,
                Some(current) => go_type(current) == go_type(&patch_value),
            };
            if !same_type {
                if !is_delete_list {
                    insert_new_value(&mut original, key, patch_value);
                }
                continue;
            }
            let Some(current) = original.get_mut(&key) else {
                continue;
            };
            match (current, patch_value) {
                (Value::Object(current), Value::Object(patch_map)) => {
                    let meta = self.field(schema, &key);
                    *current = if meta.strategy.replace {
                        patch_map
                    } else {
                        self.merge_map(std::mem::take(current), patch_map, meta.node)?
                    };
                }
                (Value::Array(current), Value::Array(patch_list)) => {
                    let meta = self.field(schema, &key);
                    let (merged, _) = self.merge_list_field(
                        std::mem::take(current),
                        patch_list,
                        meta,
                        is_delete_list,
                    )?;
                    *current = merged;
                }
                (current, patch_value) => *current = patch_value,
            }
        }
        Ok(original)
    }

    /// `$setElementOrder/<list>`: merges the list and orders it by the directive.
    fn merge_ordered_lists(
        &self,
        original: &mut Object,
        patch: &mut Object,
        schema: Option<SchemaRef>,
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
            .cloned()
            .collect();
        for key in keys {
            let Some(order) = patch.remove(&key) else {
                continue;
            };
            let Value::Array(order) = order else {
                return Err(bad_arg_type(LIST_TYPE, &order));
            };
            let list_key = extract_key(&key, SET_ELEMENT_ORDER, ERR_SET_ELEMENT_ORDER)?.to_string();
            let original_list = list_at(original, &list_key)?;
            let found_original = original_list.is_some();
            let patch_list = list_at(patch, &list_key)?;
            let meta = self.field(schema, &list_key);
            validate_patch_against_order(
                patch_list.as_deref().unwrap_or_default(),
                &order,
                meta.merge_key,
            )?;

            let original_list = original_list.unwrap_or_default();
            // `live` is the original list as upstream reads it after merging (see
            // `merge_list`), which decides where server-only items go.
            let (merged, live) = match (found_original, patch_list.clone()) {
                (true, None) => (original_list.clone(), original_list),
                (false, Some(added)) => match remove_directives(Value::Array(added)) {
                    Some(Value::Array(added)) => (added, original_list),
                    _ => continue,
                },
                (true, Some(added)) => self.merge_list_field(original_list, added, meta, false)?,
                (false, None) => continue,
            };
            let (in_order, server_only) = partition(merged, &order, meta.merge_key)?;
            let kind = element_type(&[&live, patch_list.as_deref().unwrap_or_default()])?;
            let ordered =
                normalize_order(in_order, server_only, &order, &live, meta.merge_key, kind)?;
            original.insert(list_key.clone(), Value::Array(ordered));
            patch.remove(&list_key);
        }
        Ok(())
    }

    /// Merges a list field by its strategy. Returns the merged list and the original list as
    /// upstream's Go slice reads afterwards (see [`Merger::merge_list`]).
    fn merge_list_field(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta<'_>,
        is_delete_list: bool,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        // A deletion list is handled the same way whatever the field's strategy is.
        if meta.strategy.merge || is_delete_list {
            self.merge_list(original, patch, meta.items, meta.merge_key, is_delete_list)
        } else {
            Ok((patch, original))
        }
    }

    /// Merges two lists of a `merge` field. Besides the merged list it returns what upstream's
    /// caller later reads as "the live list": Go removes `$patch: delete` items by shifting the
    /// slice in place and appends new items into the room that frees, so the original slice's
    /// backing array ends up holding a mix of both. `$setElementOrder` orders server-only items
    /// by that array, and matching it keeps the resulting order identical to upstream's.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        items: Option<SchemaRef>,
        merge_key: &str,
        is_delete_list: bool,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        if original.is_empty() && patch.is_empty() {
            return Ok((original, Vec::new()));
        }
        let kind = element_type(&[&original, &patch])?;
        if kind != GoType::Map {
            if is_delete_list {
                let kept = original
                    .iter()
                    .filter(|v| !patch.contains(v))
                    .cloned()
                    .collect();
                return Ok((kept, original));
            }
            // A list of scalars merges as a set.
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for value in original.iter().chain(&patch) {
                if !merged.contains(value) {
                    merged.push(value.clone());
                }
            }
            let (in_patch, server_only) = merged.into_iter().partition(|v| patch.contains(v));
            let ordered = normalize_order(in_patch, server_only, &patch, &original, "", kind)?;
            return Ok((ordered, original));
        }
        if merge_key.is_empty() {
            return Err(PatchError::internal(
                "cannot merge lists without merge key for struct",
            ));
        }
        let special = merge_special_items(original, patch, merge_key)?;
        let (original, patch) = (special.original, special.plain);
        let mut merged = original.clone();
        for item in &patch {
            let Value::Object(item) = item else { continue };
            let Some(key_value) = item.get(merge_key) else {
                return Err(no_merge_key(item, merge_key));
            };
            match find_by_key(&merged, merge_key, key_value)? {
                Some(idx) => {
                    let current = match std::mem::take(&mut merged[idx]) {
                        Value::Object(current) => current,
                        _ => Map::new(),
                    };
                    merged[idx] = Value::Object(self.merge_map(current, item.clone(), items)?);
                }
                // A new item goes in as sent, directives and nulls included, as upstream appends it.
                None => merged.push(Value::Object(item.clone())),
            }
        }
        let mut backing = special.backing;
        if !special.replaced {
            for (slot, value) in backing.iter_mut().zip(&merged) {
                slot.clone_from(value);
            }
        }
        let (in_patch, server_only) = partition(merged, &patch, merge_key)?;
        let ordered = normalize_order(in_patch, server_only, &patch, &original, merge_key, kind)?;
        Ok((ordered, backing))
    }
}

/// The outcome of a merging list's `$patch` items.
struct SpecialItems {
    /// The live list less the deleted items, or the patch's plain items after `replace`.
    original: Vec<Value>,
    /// The patch items without directives (none after `replace`).
    plain: Vec<Value>,
    /// The live list's backing array after Go's in-place deletions (same length as the list).
    backing: Vec<Value>,
    replaced: bool,
}

/// Applies the `$patch` items of a merging list of objects: `delete` removes the matching items
/// of the original, `replace` makes the rest of the patch the whole list.
fn merge_special_items(
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<SpecialItems, PatchError> {
    let mut backing = original;
    let mut len = backing.len();
    let mut plain = Vec::with_capacity(patch.len());
    let mut replaced = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE) => match item.get(merge_key) {
                Some(key_value) => {
                    // Go's `append(s[:k], s[k+1:]...)`: shift left in place; the last slot
                    // keeps its old value.
                    while let Some(k) = find_by_key(&backing[..len], merge_key, key_value)? {
                        for i in k..len - 1 {
                            backing[i] = backing[i + 1].clone();
                        }
                        len -= 1;
                    }
                }
                None => {
                    return Err(no_merge_key(
                        item.as_object().unwrap_or(&Map::new()),
                        merge_key,
                    ));
                }
            },
            Some(REPLACE) => replaced = true,
            Some(MERGE) => {
                return Err(PatchError::internal(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            _ => {
                return Err(bad_patch_type(
                    directive,
                    item.as_object().unwrap_or(&Map::new()),
                ));
            }
        }
    }
    if replaced {
        Ok(SpecialItems {
            original: plain,
            plain: Vec::new(),
            backing,
            replaced,
        })
    } else {
        Ok(SpecialItems {
            original: backing[..len].to_vec(),
            plain,
            backing,
            replaced,
        })
    }
}

/// `$retainKeys`: the original keeps only the listed keys, and the patch may set no other key.
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::bad_request(ERR_RETAIN_KEYS));
    };
    let kept = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !kept(key) {
            return Err(PatchError::bad_request(ERR_RETAIN_KEYS));
        }
    }
    original.retain(|key, _| kept(key));
    Ok(())
}

/// Checks that the patch list's items appear in the `$setElementOrder` list in the same relative
/// order (deletions and other directives aside).
fn validate_patch_against_order(
    patch: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Result<(), PatchError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let mut kept = Vec::with_capacity(patch.len());
    for item in patch {
        if !merge_key.is_empty() {
            let Value::Object(map) = item else {
                return Err(bad_arg_type(MAP_TYPE, item));
            };
            if map.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE) {
                continue;
            }
        }
        kept.push(item);
    }
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p]
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE))
        {
            p += 1;
            continue;
        }
        if merge_key_value_equal(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(PatchError::internal(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            gofmt::v(&Value::Array(patch.to_vec())),
            gofmt::v(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, PatchError> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let Value::Object(left) = left else {
        return Err(bad_arg_type(MAP_TYPE, left));
    };
    let Value::Object(right) = right else {
        return Err(bad_arg_type(MAP_TYPE, right));
    };
    let Some(l) = left.get(merge_key) else {
        return Err(no_merge_key(left, merge_key));
    };
    let Some(r) = right.get(merge_key) else {
        return Err(no_merge_key(right, merge_key));
    };
    Ok(l == r)
}

/// Splits `items` into those present in `by` (by merge key for objects, by value for scalars)
/// and the others, keeping their order.
fn partition(
    items: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    if merge_key.is_empty() {
        return Ok(items.into_iter().partition(|v| by.contains(v)));
    }
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for item in items {
        let Value::Object(map) = &item else {
            return Err(bad_arg_type(MAP_TYPE, &item));
        };
        let Some(key_value) = map.get(merge_key) else {
            return Err(no_merge_key(map, merge_key));
        };
        if find_by_key(by, merge_key, key_value)?.is_some() {
            inside.push(item);
        } else {
            outside.push(item);
        }
    }
    Ok((inside, outside))
}

/// Orders a merged list: the patch's items in `patch_order`, the live object's other items in
/// `server_order`, then the two interleaved so that each keeps its relative order and server
/// items stay ahead of patch items they preceded in the live object.
fn normalize_order(
    patch_items: Vec<Value>,
    server_items: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, PatchError> {
    let patch_items = sort_by_order(patch_items, patch_order, merge_key, kind)?;
    let server_items = sort_by_order(server_items, server_order, merge_key, kind)?;
    let mut out = Vec::with_capacity(patch_items.len() + server_items.len());
    let mut left = server_items.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, merge_key, kind), position(server_order, r, merge_key, kind)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// Sorts `items` by their position in `order`, stably; `$patch: delete` items go last. Items
/// missing from `order` (which upstream's own checks keep from happening) go first.
fn sort_by_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, PatchError> {
    let mut deletions = Vec::new();
    let mut items = if kind == GoType::Map {
        for item in items.iter().chain(order) {
            let Value::Object(map) = item else {
                return Err(bad_arg_type(MAP_TYPE, item));
            };
            if !map.contains_key(merge_key) {
                return Err(no_merge_key(map, merge_key));
            }
        }
        let (deleted, kept): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|item| item.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE));
        deletions = deleted;
        kept
    } else {
        items
    };
    items.sort_by_key(|item| position(order, item, merge_key, kind));
    items.extend(deletions);
    Ok(items)
}

fn position(order: &[Value], item: &Value, merge_key: &str, kind: GoType) -> Option<usize> {
    if kind == GoType::Map {
        let key = item.get(merge_key);
        order.iter().position(|o| o.get(merge_key) == key)
    } else {
        order.iter().position(|o| o == item)
    }
}

fn find_by_key(
    list: &[Value],
    merge_key: &str,
    key_value: &Value,
) -> Result<Option<usize>, PatchError> {
    for (idx, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(PatchError::internal(format!(
                "value for key {idx} is not a map"
            )));
        };
        if map.get(merge_key) == Some(key_value) {
            return Ok(Some(idx));
        }
    }
    Ok(None)
}

/// The one Go type of all the lists' items.
fn element_type(lists: &[&[Value]]) -> Result<GoType, PatchError> {
    let mut found = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let t = go_type(item);
        match found {
            None if t == GoType::List => {
                return Err(PatchError {
                    kind: super::PatchErrorKind::Invalid,
                    message: ERR_NO_LIST_OF_LISTS.into(),
                });
            }
            None => found = Some(t),
            Some(prev) if prev != t => {
                let all: Vec<String> = lists
                    .iter()
                    .map(|l| gofmt::v(&Value::Array(l.to_vec())))
                    .collect();
                return Err(PatchError::internal(format!(
                    "list element types are not identical: [{}]",
                    all.join(" ")
                )));
            }
            Some(_) => {}
        }
    }
    found.ok_or_else(|| PatchError::internal("no elements in any of the given slices"))
}

fn list_at(map: &Object, key: &str) -> Result<Option<Vec<Value>>, PatchError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list.clone())),
        Some(other) => Err(bad_arg_type(LIST_TYPE, other)),
    }
}

/// `$deleteFromPrimitiveList/<key>` and `$setElementOrder/<key>` name their list after a slash.
fn extract_key<'k>(key: &'k str, prefix: &str, malformed: &str) -> Result<&'k str, PatchError> {
    match key.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest),
        _ => Err(PatchError::bad_request(malformed)),
    }
}

/// A patch value for a key the original lacks (or holds with another type): nulls inside are
/// dropped and directive-carrying objects removed, since there is nothing for them to act on.
fn insert_new_value(original: &mut Object, key: String, mut value: Value) {
    discard_nulls(&mut value);
    match remove_directives(value) {
        Some(value) => {
            original.insert(key, value);
        }
        None => {
            original.remove(&key);
        }
    }
}

fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Drops every object that carries `$patch` (and the key or item holding it).
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

fn no_merge_key(map: &Object, merge_key: &str) -> PatchError {
    PatchError::internal(format!(
        "map: {} does not contain declared merge key: {merge_key}",
        gofmt::v(&Value::Object(map.clone()))
    ))
}

fn bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError::internal(format!(
        "expected a {expected}, but received a {}",
        gofmt::type_name(actual)
    ))
}

fn bad_patch_type(directive: &Value, map: &Object) -> PatchError {
    PatchError::internal(format!(
        "unknown patch type: {} in map: {}",
        gofmt::s(directive),
        gofmt::v(&Value::Object(map.clone()))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::PatchErrorKind;
    use crate::schema::tests::builtin;
    use serde_json::json;

    // Expected results are what `kubectl patch --local --type strategic` (upstream's
    // strategicpatch package, driven by the Go types) prints for the same inputs.

    fn smp(doc: &Value, patch: Value) -> Result<Value, PatchError> {
        let schemas = builtin();
        let api = doc["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api.split_once('/').unwrap_or(("", api));
        let root = schemas.root_for(group, version, doc["kind"].as_str().unwrap_or_default());
        assert!(root.is_some(), "no schema for {api}");
        apply_strategic_merge_patch(doc, &patch, schemas, root)
    }

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "web", "tier": "fe"}, "finalizers": ["f1", "f2", "f3"]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        {"name": "sidecar", "image": "proxy"},
                        {"name": "log", "image": "fluent"}
                    ],
                    "tolerations": [{"key": "a", "operator": "Exists"}]}}}})
    }

    /// The deployment with `f` applied to its pod spec.
    fn with_pod_spec(f: impl FnOnce(&mut Value)) -> Value {
        let mut doc = deployment();
        f(&mut doc["spec"]["template"]["spec"]);
        doc
    }

    #[test]
    fn merges_containers_by_name_and_deletes_with_a_directive() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:2"},
                {"name": "sidecar", "$patch": "delete"},
                {"name": "cache", "image": "redis"}
            ]}}}}),
        );
        let want = with_pod_spec(|spec| {
            spec["containers"] = json!([
                {"name": "web", "image": "nginx:2", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "cache", "image": "redis"},
                {"name": "log", "image": "fluent"}
            ]);
        });
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn merges_env_by_name_with_new_items_first() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [
                {"name": "C", "value": "3"}, {"name": "A", "value": "9"}, {"name": "B", "$patch": "delete"}
            ]}]}}}}),
        );
        let want = with_pod_spec(|spec| {
            spec["containers"][0]["env"] =
                json!([{"name": "C", "value": "3"}, {"name": "A", "value": "9"}]);
        });
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn orders_by_set_element_order_as_upstream() {
        // The server-only `sidecar` lands first because upstream orders it by the live list
        // after its in-place deletion and append (`[web, sidecar, cache]`), not the original.
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "cache"}, {"name": "web"}],
                "containers": [{"name": "cache", "image": "redis"}, {"name": "log", "$patch": "delete"}]
            }}}}),
        );
        let want = with_pod_spec(|spec| {
            spec["containers"] = json!([
                {"name": "sidecar", "image": "proxy"},
                {"name": "cache", "image": "redis"},
                {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
            ]);
        });
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn retain_keys_clears_the_other_strategy_fields() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        );
        let mut want = deployment();
        want["spec"]["strategy"] = json!({"type": "Recreate"});
        assert_eq!(patched.unwrap(), want);

        let err = smp(
            &deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
        )
        .unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (
                PatchErrorKind::BadRequest,
                "invalid patch format of retainKeys"
            )
        );
        assert_eq!(err.to_status().code, 400);
    }

    #[test]
    fn replaces_lists_without_a_merge_strategy() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}}),
        );
        let want =
            with_pod_spec(|spec| spec["tolerations"] = json!([{"key": "b", "operator": "Exists"}]));
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn deletes_map_keys_with_null_and_drops_unmatched_nulls() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {"labels": {"tier": null, "track": "stable"}, "annotations": {"a": "1", "b": null}}}),
        );
        let mut want = deployment();
        want["metadata"]["labels"] = json!({"app": "web", "track": "stable"});
        want["metadata"]["annotations"] = json!({"a": "1"});
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn merges_primitive_lists_with_deletions_and_order() {
        let patched = smp(
            &deployment(),
            json!({"metadata": {
                "$setElementOrder/finalizers": ["f3", "f4", "f1"],
                "$deleteFromPrimitiveList/finalizers": ["f2"],
                "finalizers": ["f4"]
            }}),
        );
        let mut want = deployment();
        want["metadata"]["finalizers"] = json!(["f3", "f4", "f1"]);
        assert_eq!(patched.unwrap(), want);

        let patched = smp(
            &deployment(),
            json!({"metadata": {"finalizers": ["f4", "f1"]}}),
        );
        let mut want = deployment();
        want["metadata"]["finalizers"] = json!(["f4", "f1", "f2", "f3"]);
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn applies_replace_and_delete_directives() {
        let patched = smp(
            &deployment(),
            json!({"spec": {
                "selector": {"$patch": "replace", "matchLabels": {"app": "api"}},
                "strategy": {"$patch": "delete"},
                "template": {"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}}
            }}),
        );
        let mut want =
            with_pod_spec(|spec| spec["containers"] = json!([{"name": "only", "image": "x"}]));
        want["spec"]["selector"] = json!({"matchLabels": {"app": "api"}});
        want["spec"]["strategy"] = json!({});
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn merges_service_ports_by_port() {
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}]}});
        let patched = smp(
            &service,
            json!({"spec": {"ports": [
                {"port": 443, "$patch": "delete"}, {"port": 80, "targetPort": 9090}, {"port": 53, "name": "dns", "protocol": "UDP"}
            ]}}),
        );
        let mut want = service.clone();
        want["spec"]["ports"] = json!([
            {"name": "http", "port": 80, "targetPort": 9090}, {"name": "dns", "port": 53, "protocol": "UDP"}
        ]);
        assert_eq!(patched.unwrap(), want);
    }

    #[test]
    fn cleans_new_values_of_nulls_and_directives() {
        let patched = smp(
            &deployment(),
            json!({"spec": {"template": {"spec": {
                "containers": [{"name": "new", "image": "i", "env": [{"name": "A", "value": null}], "resources": {"limits": null}}],
                "affinity": {"nodeAffinity": {"x": null, "y": {"$patch": "delete"}, "z": 1}}
            }}}}),
        );
        let patched = patched.unwrap();
        let spec = &patched["spec"]["template"]["spec"];
        // A new list item keeps what it was sent with, nulls included, as upstream appends it.
        assert_eq!(
            spec["containers"][0],
            json!({"name": "new", "image": "i", "env": [{"name": "A", "value": null}], "resources": {"limits": null}})
        );
        assert_eq!(spec["affinity"], json!({"nodeAffinity": {"z": 1}}));
    }

    #[test]
    fn reports_upstream_errors_with_their_codes() {
        let cases = [
            (
                json!({"spec": {"template": {"spec": {"containers": [{"image": "noname"}]}}}}),
                PatchErrorKind::Internal,
                "map: map[image:noname] does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "$patch": "bogus"}]}}}}),
                PatchErrorKind::Internal,
                "unknown patch type: bogus in map: map[$patch:bogus name:web]",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "$patch": "merge"}]}}}}),
                PatchErrorKind::Internal,
                "merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec": {"$patch": "merge"}}),
                PatchErrorKind::Internal,
                "unknown patch type: merge in map: map[$patch:merge]",
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                PatchErrorKind::BadRequest,
                "invalid patch format of retainKeys",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["f1"]}}),
                PatchErrorKind::BadRequest,
                "invalid patch format of primitive list",
            ),
            (
                json!({"metadata": {"$setElementOrder/finalizers": "x"}}),
                PatchErrorKind::Internal,
                "expected a []interface {}, but received a string",
            ),
            (
                json!({"spec": {"template": {"spec": {"$setElementOrder/containers": ["web"]}}}}),
                PatchErrorKind::Internal,
                "value for key 0 is not a map",
            ),
            (
                json!({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "web"}], "containers": [{"name": "log", "image": "x"}]}}}}),
                PatchErrorKind::Internal,
                "The order in patch list:\n[map[image:x name:log]]\n doesn't match $setElementOrder list:\n[map[name:web]]\n",
            ),
            (
                json!({"metadata": {"finalizers": ["a", 1]}}),
                PatchErrorKind::Internal,
                "list element types are not identical: [[f1 f2 f3] [a 1]]",
            ),
        ];
        for (patch, kind, message) in cases {
            let err = smp(&deployment(), patch.clone()).unwrap_err();
            assert_eq!((err.kind, err.message.as_str()), (kind, message), "{patch}");
        }
        let mut doc = deployment();
        doc["metadata"]["finalizers"] = json!([]);
        let err = smp(&doc, json!({"metadata": {"finalizers": [["a"]]}})).unwrap_err();
        assert_eq!(
            (err.kind, err.message.as_str()),
            (PatchErrorKind::Invalid, "lists of lists are not supported")
        );
        assert_eq!(err.to_status().code, 422);
        let internal = smp(&deployment(), json!({"spec": {"$patch": "merge"}}))
            .unwrap_err()
            .to_status();
        assert_eq!(internal.code, 500);
    }

    #[test]
    fn without_a_schema_merges_objects_and_replaces_lists() {
        let doc = json!({"a": {"b": 1, "c": [1, 2]}, "list": [{"name": "x", "v": 1}]});
        let patch =
            json!({"a": {"b": null, "c": [3], "d": {"e": null}}, "list": [{"name": "x", "w": 2}]});
        let patched = apply_strategic_merge_patch(&doc, &patch, builtin(), None).unwrap();
        assert_eq!(
            patched,
            json!({"a": {"c": [3], "d": {}}, "list": [{"name": "x", "w": 2}]})
        );

        // Inside a kind, an opaque value (RawExtension) is patched the same way.
        let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
                              "revision": 1, "data": {"spec": {"list": [1, 2], "keep": true}}});
        let patched = smp(&revision, json!({"data": {"spec": {"list": [3]}}})).unwrap();
        assert_eq!(
            patched["data"],
            json!({"spec": {"list": [3], "keep": true}})
        );
    }

    #[test]
    fn decodes_patch_bodies_as_upstream() {
        assert_eq!(decode_strategic_merge_patch(b"null").unwrap(), json!({}));
        assert_eq!(
            decode_strategic_merge_patch(br#"{"a":1}"#).unwrap(),
            json!({"a": 1})
        );
        let err = decode_strategic_merge_patch(b"[1]").unwrap_err();
        assert_eq!(
            err.message,
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(err.kind, PatchErrorKind::BadRequest);
        let err = decode_strategic_merge_patch(b"{\"a\":").unwrap_err();
        assert_eq!(err.message, "unexpected end of JSON input");
        assert_eq!(
            apply_strategic_merge_patch(&json!({"a": 1}), &Value::Null, builtin(), None).unwrap(),
            json!({"a": 1})
        );
    }
}
