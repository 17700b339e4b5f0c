//! Merging a partial object into a whole one by the kind's schema, as structured-merge-diff
//! merges typed values (upstream: sigs.k8s.io/structured-merge-diff `TypedValue.Merge`): fields of
//! structs and keys of granular maps merge one by one, `set` lists take the union, `map` lists
//! merge their items by key (lists under the `merge` patch strategy too), objects the schema
//! does not describe merge key by key, and everything else (scalars, atomic maps and lists) is
//! replaced. Mutating admission policies' ApplyConfiguration mutations and server-side apply
//! merge with it; what a node is comes from `managedfields::typed`'s reading of the schema.

use std::collections::HashSet;

use serde_json::Value;

use crate::managedfields::typed::{self, ListRel, Node, Ty};
use crate::schema::{MapType, SchemaKind, SchemaRef, Schemas};

/// `findAtomics`: the paths (`.spec.selector`, `.spec.containers[0].args`) of atomic maps,
/// structs and lists that `patch` sets, which a patch may not touch without replacing them whole.
pub fn atomics(schemas: &Schemas, root: SchemaRef, patch: &Value) -> Vec<String> {
    let mut found = Vec::new();
    find_atomics(schemas, Some(root), patch, &mut String::new(), &mut found);
    found
}

fn find_atomics(
    schemas: &Schemas,
    schema: Option<SchemaRef>,
    v: &Value,
    path: &mut String,
    found: &mut Vec<String>,
) {
    let Some(s) = schema else {
        return;
    };
    match (v, schemas.kind(s)) {
        (Value::Object(m), SchemaKind::Object | SchemaKind::Map) => {
            if schemas.map_type(s) == Some(MapType::Atomic) {
                found.push(path.clone());
            }
            for (k, child) in m {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                find_atomics(schemas, schemas.child(s, k), child, path, found);
                path.truncate(len);
            }
        }
        (Value::Array(items), SchemaKind::List) => {
            if matches!(typed::list_rel(schemas, s), ListRel::Atomic) {
                found.push(path.clone());
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                find_atomics(schemas, schemas.items(s), item, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// `live` with `patch` merged into it, both of the kind whose schema is `root`.
pub fn merge(
    schemas: &Schemas,
    root: SchemaRef,
    live: &Value,
    patch: &Value,
) -> Result<Value, String> {
    merge_typed(schemas, Ty::Schema(root), live, patch)
}

/// [`merge`] from a node of any type (server-side apply merges from the kind's root too).
pub fn merge_typed(
    schemas: &Schemas,
    root: Ty,
    live: &Value,
    patch: &Value,
) -> Result<Value, String> {
    merge_value(schemas, root, Some(live), patch, &mut String::new())
}

fn merge_value(
    schemas: &Schemas,
    ty: Ty,
    live: Option<&Value>,
    patch: &Value,
    path: &mut String,
) -> Result<Value, String> {
    match (typed::node(schemas, ty, Some(patch)), live, patch) {
        (Node::Map, Some(Value::Object(l)), Value::Object(p)) => {
            let mut out = l.clone();
            for (k, pv) in p {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let merged =
                    merge_value(schemas, typed::child_ty(schemas, ty, k), l.get(k), pv, path)?;
                path.truncate(len);
                out.insert(k.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Node::List(rel), Some(Value::Array(l)), Value::Array(p)) => match rel {
            ListRel::Set => merge_list(schemas, Ty::Untyped, l, p, |v| Ok(v.to_string()), path),
            ListRel::Map(_) => {
                let items = typed::items_ty(schemas, ty);
                // Items are matched by their key fields, a missing one read as its default.
                let key_of = |v: &Value| -> Result<String, String> {
                    typed::item_element(schemas, items, &rel, v).map(|pe| pe.serialize())
                };
                merge_list(schemas, items, l, p, key_of, path)
            }
            ListRel::Atomic => Ok(patch.clone()),
        },
        _ => Ok(patch.clone()),
    }
}

/// Merges two associative lists: items the patch names are merged with the live ones of the
/// same key, in the patch's order where both have them; live items the patch leaves out keep
/// their places; new items come where the patch puts them.
fn merge_list(
    schemas: &Schemas,
    items: Ty,
    live: &[Value],
    patch: &[Value],
    key_of: impl Fn(&Value) -> Result<String, String>,
    path: &mut String,
) -> Result<Value, String> {
    // Keys as text, comparable and hashable.
    let key_text = |v: &Value| key_of(v);
    let live_keys: Vec<String> = live.iter().map(key_text).collect::<Result<_, _>>()?;
    let patch_keys: Vec<String> = patch.iter().map(key_text).collect::<Result<_, _>>()?;
    let in_patch: HashSet<&str> = patch_keys.iter().map(String::as_str).collect();
    let in_live: HashSet<&str> = live_keys.iter().map(String::as_str).collect();
    // The keys both lists have, in the patch's order: the order shared items come out in.
    let mut shared = patch_keys
        .iter()
        .filter(|k| in_live.contains(k.as_str()))
        .cloned()
        .collect::<Vec<_>>()
        .into_iter();
    let mut next_shared = shared.next();
    let live_item = |key: &str| live_keys.iter().position(|k| k == key).map(|i| &live[i]);
    let mut merged: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(live.len().max(patch.len()));
    let (mut l, mut r) = (0, 0);
    while l < live.len() || r < patch.len() {
        if l < live.len() && r < patch.len() {
            let lk = live_keys[l].clone();
            if lk == patch_keys[r] {
                merged.insert(lk.clone());
                out.push(merge_value(
                    schemas,
                    items,
                    Some(&live[l]),
                    &patch[r],
                    path,
                )?);
                l += 1;
                r += 1;
                next_shared = shared.next();
                continue;
            }
            if in_patch.contains(lk.as_str()) && next_shared.as_ref().is_some_and(|n| *n != lk) {
                // A shared item, but not the one due now: it comes out with the patch's.
                l += 1;
                continue;
            }
        }
        if l < live.len() {
            let lk = &live_keys[l];
            if !in_patch.contains(lk.as_str()) {
                out.push(live[l].clone());
                l += 1;
                continue;
            } else if merged.contains(lk) {
                l += 1;
            }
        }
        if r < patch.len() {
            let rk = patch_keys[r].clone();
            merged.insert(rk.clone());
            out.push(merge_value(
                schemas,
                items,
                live_item(&rk),
                &patch[r],
                path,
            )?);
            r += 1;
            if next_shared.as_deref() == Some(rk.as_str()) {
                next_shared = shared.next();
            }
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Schemas {
        Schemas::from_openapi_v2(&json!({"definitions": {
            "Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                 "additionalProperties": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "containers": {"type": "array", "x-kubernetes-list-type": "map",
                                   "x-kubernetes-list-map-keys": ["name"],
                                   "items": {"type": "object", "properties": {
                                       "name": {"type": "string"}, "image": {"type": "string"},
                                       "env": {"type": "array", "items": {"type": "string"}}}}},
                }
            }
        }}))
    }

    #[test]
    fn merges_by_the_schema() {
        let s = schemas();
        let root = s.root_for("example.com", "v1", "Thing").unwrap();
        let live = json!({
            "labels": {"a": "1", "b": "2"},
            "finalizers": ["x", "y"],
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}],
            "args": ["1", "2"],
        });
        let patch = json!({
            "labels": {"b": "3", "c": "4"},
            "finalizers": ["z", "x"],
            "containers": [{"name": "c", "image": "c:1"}, {"name": "b", "image": "b:2"}],
        });
        assert_eq!(
            merge(&s, root, &live, &patch).unwrap(),
            json!({
                "labels": {"a": "1", "b": "3", "c": "4"},
                "finalizers": ["z", "x", "y"],
                "containers": [{"name": "a", "image": "a:1"}, {"name": "c", "image": "c:1"}, {"name": "b", "image": "b:2"}],
                "args": ["1", "2"],
            })
        );
        assert_eq!(
            merge(&s, root, &live, &json!({"containers": [{"image": "x"}]})).err(),
            Some("associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)".into())
        );
    }

    #[test]
    fn finds_atomic_values_a_patch_would_replace() {
        let s = schemas();
        let root = s.root_for("example.com", "v1", "Thing").unwrap();
        let patch = json!({"labels": {"a": "b"}, "selector": {"a": "b"}, "args": ["x"],
                           "containers": [{"name": "a", "env": ["E=1"]}]});
        assert_eq!(
            atomics(&s, root, &patch),
            vec![".args", ".containers[0].env", ".selector"]
        );
    }
}
