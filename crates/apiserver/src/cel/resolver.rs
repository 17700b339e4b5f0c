//! The schema of a served kind from its OpenAPI v3 document (upstream: apiserver/pkg/cel/openapi/
//! resolver, `ClientDiscoveryResolver` and `PopulateRefs`): the component whose
//! `x-kubernetes-group-version-kind` names the kind, with every reference (a `$ref`, or one
//! wrapped in `allOf` to keep its description) replaced by what it refers to, so that
//! `DeclType::from_openapi` reads one tree. This module only follows references; what a schema
//! means to CEL is `types`'.

use apimachinery::gvk::GroupVersionKind;
use serde_json::{Map, Value, json};

const REF_PREFIX: &str = "#/components/schemas/";

/// The schema of `gvk` in `doc` (an `/openapi/v3/<group-version>` document) with its references
/// filled in; `None` when the document has no such kind or a reference leads nowhere (upstream's
/// `ErrSchemaNotFound`).
pub fn schema_of(doc: &Value, gvk: &GroupVersionKind) -> Option<Value> {
    let schemas = doc.pointer("/components/schemas")?.as_object()?;
    let (root, schema) = schemas.iter().find(|(_, s)| names_kind(s, gvk))?;
    // Upstream records the root by its bare name and nested references by their whole
    // `#/components/schemas/...` form, so a type that refers to the root is expanded once more
    // before it counts as a cycle; the same forms are kept here for the same trees.
    let mut visiting = vec![root.clone()];
    populate(schemas, &mut visiting, schema)
}

fn names_kind(schema: &Value, gvk: &GroupVersionKind) -> bool {
    schema
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
        .is_some_and(|gvks| {
            gvks.iter().any(|g| {
                let field = |k: &str| g.get(k).and_then(Value::as_str).unwrap_or("");
                field("group") == gvk.group
                    && field("version") == gvk.version
                    && field("kind") == gvk.kind
            })
        })
}

/// The reference a schema stands for: its `$ref`, or the first inside its `allOf`.
fn ref_of(schema: &Value) -> Option<&str> {
    if let Some(r) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        return Some(r);
    }
    schema
        .get("allOf")
        .and_then(Value::as_array)?
        .iter()
        .find_map(ref_of)
}

/// `schema` with the references of it, its properties, additional properties and items
/// replaced; a reference already being expanded on the way here is a recursive type and
/// becomes an empty object, as upstream's placeholder.
fn populate(
    schemas: &Map<String, Value>,
    visiting: &mut Vec<String>,
    schema: &Value,
) -> Option<Value> {
    let reference = ref_of(schema).map(str::to_string);
    let mut result = match &reference {
        Some(r) if visiting.contains(r) => return Some(json!({"type": "object"})),
        Some(r) => schemas
            .get(r.strip_prefix(REF_PREFIX).unwrap_or(r))?
            .clone(),
        None => schema.clone(),
    };
    if let Some(r) = reference {
        visiting.push(r);
    }
    let filled = fill_children(schemas, visiting, &mut result);
    if ref_of(schema).is_some() {
        visiting.pop();
    }
    filled.then_some(result)
}

fn fill_children(
    schemas: &Map<String, Value>,
    visiting: &mut Vec<String>,
    result: &mut Value,
) -> bool {
    if let Some(props) = result.get_mut("properties").and_then(Value::as_object_mut) {
        for prop in props.values_mut() {
            match populate(schemas, visiting, prop) {
                Some(p) => *prop = p,
                None => return false,
            }
        }
    }
    for key in ["additionalProperties", "items"] {
        // A boolean `additionalProperties` or a list of `items` has no schema to fill.
        if let Some(child) = result.get_mut(key).filter(|c| c.is_object()) {
            match populate(schemas, visiting, child) {
                Some(c) => *child = c,
                None => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_filled_and_cycles_end_in_an_empty_object() {
        let doc = json!({"components": {"schemas": {
            "io.k8s.Foo": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "Foo"}],
                "properties": {
                    "meta": {"allOf": [{"$ref": "#/components/schemas/io.k8s.Meta"}], "default": {}},
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.Node"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "io.k8s.Meta": {"type": "object", "properties": {"name": {"type": "string"}}},
            "io.k8s.Node": {"type": "object", "properties": {
                "child": {"$ref": "#/components/schemas/io.k8s.Node"},
            }},
        }}});
        let foo = schema_of(&doc, &GroupVersionKind::new("g", "v1", "Foo")).unwrap();
        assert_eq!(
            foo.pointer("/properties/meta"),
            Some(&json!({"type": "object", "properties": {"name": {"type": "string"}}}))
        );
        assert_eq!(
            foo.pointer("/properties/items/items/properties/child"),
            Some(&json!({"type": "object"}))
        );
        assert!(schema_of(&doc, &GroupVersionKind::new("g", "v1", "Bar")).is_none());
        let dangling = json!({"components": {"schemas": {"x": {
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "X"}],
            "properties": {"a": {"$ref": "#/components/schemas/missing"}},
        }}}});
        assert!(schema_of(&dangling, &GroupVersionKind::new("", "v1", "X")).is_none());
    }
}
