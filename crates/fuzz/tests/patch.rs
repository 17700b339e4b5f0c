//! Fuzz target: the three patch types of `apimachinery::patch` — JSON patch
//! (`apply_json_patch`), JSON merge patch (`apply_merge_patch`) and strategic merge patch
//! (`decode_strategic_merge_patch` + `apply_strategic_merge_patch` against the built-in schemas
//! of `ironplane_kube::openapi::schemas`). Documents are the stored objects of 40-odd kinds and
//! generated JSON; patches are arbitrary bytes and generated operations, pointers (negative and
//! zero-padded indexes, `-`, `~0`/`~1` escapes, huge numbers) and directives (`$patch`,
//! `$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`), with the field names of
//! the real kinds. Properties: never panics; a merge patch applied twice is a merge patch applied
//! once; a null or empty strategic patch changes nothing; a patch's result reads back through
//! serde_json (a result the server could not read back could be written but never read); the
//! model of the bytes upstream's patch library writes (`json_patch_as_go_writes`,
//! `merge_patch_as_go_writes`) follows every JSON and merge patch that applies, to the same
//! result.

mod common;

use std::sync::OnceLock;

use apimachinery::patch::{
    apply_json_patch, apply_merge_patch, apply_strategic_merge_patch, decode_strategic_merge_patch,
    json_patch_as_go_writes, merge_patch_as_go_writes,
};
use apimachinery::schema::Schemas;
use common::*;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const TARGET: &str = "patch";

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| ironplane_kube::openapi::schemas().expect("the built-in schemas"))
}

fn strategic(doc: &Value, patch: &Value) -> Result<Value, apimachinery::patch::PatchError> {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api.split_once('/').unwrap_or(("", api));
    let root = schemas().root_for(group, version, doc["kind"].as_str().unwrap_or_default());
    apply_strategic_merge_patch(doc, patch, schemas(), root)
}

/// Field names of the built-in kinds, the directives, and a few strangers.
const KEYS: &[&str] = &[
    "metadata",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "spec",
    "template",
    "containers",
    "initContainers",
    "name",
    "image",
    "env",
    "value",
    "ports",
    "containerPort",
    "protocol",
    "volumes",
    "volumeMounts",
    "mountPath",
    "tolerations",
    "key",
    "selector",
    "matchLabels",
    "matchExpressions",
    "replicas",
    "strategy",
    "rollingUpdate",
    "status",
    "conditions",
    "type",
    "data",
    "rules",
    "subjects",
    "items",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$setElementOrder/env",
    "$setElementOrder/ports",
    "$setElementOrder/finalizers",
    "$deleteFromPrimitiveList/finalizers",
    "$deleteFromPrimitiveList/containers",
    "$bogus",
    "",
    "a/b~c",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => text(),
    ]
}

fn patch_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop::sample::select(&["delete", "replace", "merge", "retainKeys", "web", "a", "", "Exists"][..])
            .prop_map(Value::from),
        2 => json_scalar(),
    ]
}

/// A patch-shaped JSON value: objects keyed by real field names and directives, lists of objects
/// with `name` merge keys, scalars and nulls.
fn patch_value(depth: u32) -> impl Strategy<Value = Value> {
    patch_scalar().prop_recursive(depth, 96, 6, |inner| {
        prop_oneof![
            3 => prop::collection::vec((key(), inner.clone()), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
            2 => prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            2 => prop::collection::vec((prop::sample::select(&["web", "sidecar", "log", "new", ""][..]), inner), 0..5)
                .prop_map(|items| Value::Array(items.into_iter().map(|(name, v)| {
                    let mut item = match v { Value::Object(m) => m, other => { let mut m = Map::new(); m.insert("value".into(), other); m } };
                    item.insert("name".into(), Value::from(name));
                    Value::Object(item)
                }).collect())),
        ]
    })
}

/// A strategic patch aimed at a real object: the patch sits under one of the object's top-level
/// fields, or at the root.
fn strategic_patch() -> impl Strategy<Value = Value> {
    prop_oneof![
        patch_value(5),
        (
            prop::sample::select(&["spec", "metadata", "status", "data", "template"][..]),
            patch_value(5)
        )
            .prop_map(|(k, v)| json!({ k: v })),
        patch_value(3).prop_map(|v| json!({"spec": {"template": {"spec": {"containers": v}}}})),
    ]
}

/// A JSON pointer: tokens from the field names, array indexes in every spelling evanphx
/// accepts or refuses, and escapes.
fn pointer() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        4 => key(),
        2 => (0usize..4).prop_map(|i| i.to_string()),
        1 => prop::sample::select(&["-", "-1", "-2", "+1", "01", "-0", "99999999999999999999", "~0", "~1", "~", "~2", ""][..])
            .prop_map(str::to_string),
        1 => any::<i64>().prop_map(|i| i.to_string()),
    ];
    prop_oneof![
        8 => prop::collection::vec(token, 0..6).prop_map(|t| t.iter().map(|t| format!("/{t}")).collect::<String>()),
        1 => text(),
    ]
}

fn operation() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        6 => prop::sample::select(&["add", "remove", "replace", "move", "copy", "test"][..]).prop_map(Value::from),
        1 => json_scalar(),
    ];
    (
        op,
        proptest::option::of(pointer()),
        proptest::option::of(pointer()),
        proptest::option::of(json_value(3, 12)),
        any::<bool>(),
    )
        .prop_map(|(op, path, from, value, extra)| {
            let mut m = Map::new();
            m.insert("op".into(), op);
            if let Some(p) = path {
                m.insert("path".into(), Value::String(p));
            }
            if let Some(f) = from {
                m.insert("from".into(), Value::String(f));
            }
            if let Some(v) = value {
                m.insert("value".into(), v);
            }
            if extra {
                m.insert("extra".into(), Value::Bool(true));
            }
            Value::Object(m)
        })
}

fn document() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => stored_object(),
        1 => json_value(4, 32),
    ]
}

/// Whether serde_json reads `value` back after writing it (its default limit is 128 levels).
fn reads_back(value: &Value) -> Result<(), String> {
    let text = serde_json::to_vec(value).map_err(|e| e.to_string())?;
    serde_json::from_slice::<Value>(&text)
        .map(drop_deep)
        .map_err(|e| format!("the result does not read back: {e}"))
}

/// Whether a null sits anywhere inside a list of `value`.
fn null_in_a_list(value: &Value) -> bool {
    fn has_null(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.iter().any(has_null),
            Value::Object(map) => map.values().any(has_null),
            _ => false,
        }
    }
    match value {
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(map) => map.values().any(null_in_a_list),
        _ => false,
    }
}

proptest! {
    #![proptest_config(config(TARGET, 50_000))]

    #[test]
    fn arbitrary_bytes_are_errors_not_panics(doc in document(), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = apply_json_patch(&doc, &bytes);
        let _ = apply_merge_patch(&doc, &bytes);
        if let Ok(patch) = decode_strategic_merge_patch(&bytes) {
            let _ = strategic(&doc, &patch);
        }
    }

    #[test]
    fn json_patches_are_errors_not_panics(doc in document(), ops in prop::collection::vec(operation(), 0..8)) {
        let body = serde_json::to_vec(&ops).expect("serializes");
        if let Ok(result) = apply_json_patch(&doc, &body) {
            reads_back(&result).map_err(TestCaseError::fail)?;
            if doc.is_object() {
                let go_json = serde_json::to_vec(&doc).expect("serializes");
                prop_assert!(
                    json_patch_as_go_writes(&doc, &go_json, &body).is_some(),
                    "the model of upstream's bytes does not follow {}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
    }

    #[test]
    fn merge_patches_are_followed_by_the_model(doc in document(), patch in patch_value(5)) {
        let body = serde_json::to_vec(&patch).expect("serializes");
        if let Ok(result) = apply_merge_patch(&doc, &body)
            && doc.is_object()
            && patch.is_object()
        {
            let go_json = serde_json::to_vec(&doc).expect("serializes");
            prop_assert!(
                merge_patch_as_go_writes(&go_json, &body, &result).is_some(),
                "the model of upstream's bytes does not follow {}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    /// RFC 7386 merge patches are idempotent, except where evanphx/json-patch v4 is not (and so
    /// neither is upstream): a list holding nulls (at any depth) that replaces an object keeps
    /// them, and the second application, replacing a list, drops them.
    #[test]
    fn merge_patches_are_idempotent(doc in document(), patch in patch_value(5)) {
        if null_in_a_list(&patch) {
            return Ok(());
        }
        let body = serde_json::to_vec(&patch).expect("serializes");
        if let Ok(once) = apply_merge_patch(&doc, &body)
            && once.is_object()
        {
            let twice = apply_merge_patch(&once, &body).map_err(|e| TestCaseError::fail(e.message))?;
            prop_assert_eq!(twice, once);
        }
    }

    #[test]
    fn strategic_patches_are_errors_not_panics(doc in document(), patch in strategic_patch()) {
        let body = serde_json::to_vec(&patch).expect("serializes");
        let Ok(patch) = decode_strategic_merge_patch(&body) else { return Ok(()) };
        if let Ok(result) = strategic(&doc, &patch) {
            reads_back(&result).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn empty_strategic_patches_change_nothing(doc in stored_object(), null in any::<bool>()) {
        let patch = if null { Value::Null } else { json!({}) };
        prop_assert_eq!(strategic(&doc, &patch).map_err(|e| TestCaseError::fail(e.message))?, doc);
    }
}

/// A JSON patch of `ops` operations, each adding a value nested `step` levels at the deepest
/// point the previous ones made.
fn deepening_patch(ops: usize, step: usize) -> Vec<u8> {
    let mut patch = Vec::new();
    let mut path = String::from("/deep");
    for _ in 0..ops {
        let value = nested_value(step, Value::Null);
        // nested_value alternates arrays (outermost when `step` is odd) and one-key objects.
        patch.push(json!({"op": "add", "path": path.clone(), "value": value}));
        let mut suffix = String::new();
        for level in (0..step).rev() {
            suffix.push_str(if level % 2 == 0 { "/0" } else { "/k" });
        }
        path.push_str(&suffix);
    }
    let body = serde_json::to_vec(&patch).expect("serializes");
    drop_deep(Value::Array(patch));
    body
}

proptest! {
    #![proptest_config(forked_config(TARGET, 32, 20_000))]

    /// Each operation's value is at most 128 levels deep (the body is parsed), but a patch can
    /// add one at the bottom of the last: what it builds must still be readable.
    #[test]
    fn json_patches_do_not_build_unreadable_documents(ops in 1usize..40, step in 1usize..120) {
        let body = deepening_patch(ops, step);
        let outcome = on_server_stack(move || {
            let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
            match apply_json_patch(&doc, &body) {
                Ok(result) => {
                    let outcome = reads_back(&result);
                    drop_deep(result);
                    outcome
                }
                Err(_) => Ok(()),
            }
        });
        outcome.map_err(TestCaseError::fail)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------

/// Found by `json_patches_do_not_build_unreadable_documents`: two `add` operations, the second
/// adding a value 64 levels deep at the bottom of the first, built a ConfigMap 130 levels deep,
/// which serde_json (limit: 127 levels) cannot read back, so the stored object would be
/// unreadable. Fixed in crates/apimachinery/src/patch/mod.rs (`MAX_DEPTH`): such an operation is
/// refused with a 422.
#[test]
fn regression_json_patch_cannot_nest_past_the_parser_limit() {
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let result = apply_json_patch(&doc, &deepening_patch(2, 64));
    assert!(result.is_err(), "a 130-level document was built");
}
