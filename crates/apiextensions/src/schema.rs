//! Structural schemas of CRD versions (`spec.versions[].schema.openAPIV3Schema`): the defaults
//! they declare, applied as upstream's structural defaulting applies them, and the OpenAPI form
//! in which the generic pruner (`apimachinery::schema::Schemas`) reads them.

use apimachinery::schema::Schemas;
use serde_json::{Map, Value, json};

/// The definition name upstream's OpenAPI builder gives a custom kind (reversed group, version,
/// kind), e.g. `com.example.v1.Widget`.
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The pruning schemas of a CRD's versions (`(version, openAPIV3Schema)` pairs). Metadata is
/// `ObjectMeta` whatever the schema says about it, at the top and in every embedded resource
/// (upstream decodes it into the Go type, `schemaobjectmeta`): its unknown fields are dropped and
/// reported like any other, and the decoder checks and normalizes it (`apiserver`'s
/// `decode`). `apiVersion` and `kind` are always kept at the top level, and in an embedded
/// resource are strings.
pub fn pruning_schemas(group: &str, kind: &str, versions: &[(String, Value)]) -> Schemas {
    let mut definitions = object_meta_definitions();
    for (version, schema) in versions {
        let mut root = schema.clone();
        mark_embedded_metadata(&mut root);
        if let Some(m) = root.as_object_mut() {
            let props = m
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut();
            if let Some(props) = props {
                props.remove("apiVersion");
                props.remove("kind");
                props.insert("metadata".into(), json!({ "$ref": OBJECT_META_REF }));
            }
            m.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
        definitions.insert(definition_name(group, version, kind), root);
    }
    Schemas::from_openapi_v2(&json!({ "definitions": definitions }))
}

const OBJECT_META_REF: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Gives every embedded resource of `schema` its type fields and `ObjectMeta` metadata.
fn mark_embedded_metadata(schema: &mut Value) {
    let Some(m) = schema.as_object_mut() else {
        return;
    };
    if m.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
        && let Some(props) = m
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        props.insert("apiVersion".into(), json!({"type": "string"}));
        props.insert("kind".into(), json!({"type": "string"}));
        props.insert("metadata".into(), json!({ "$ref": OBJECT_META_REF }));
    }
    for key in ["properties", "additionalProperties", "items"] {
        match m.get_mut(key) {
            Some(Value::Object(children)) if key == "properties" => {
                for child in children.values_mut() {
                    mark_embedded_metadata(child);
                }
            }
            Some(child @ Value::Object(_)) => mark_embedded_metadata(child),
            _ => {}
        }
    }
}

/// `metav1.ObjectMeta` and the types it holds, as the pruner reads OpenAPI definitions (the
/// Go type's JSON fields; `FieldsV1` is opaque by its name), with the list and map types of
/// upstream's definitions: the field manager reads them, so a custom resource's owner
/// references are tracked per uid and each one as a whole, and its finalizers per value, as
/// upstream tracks them (its custom resources' models refer to the same `ObjectMeta`).
fn object_meta_definitions() -> Map<String, Value> {
    let string = json!({"type": "string"});
    let finalizers = json!({"type": "array", "items": {"type": "string"},
        "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"});
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let integer = json!({"type": "integer"});
    let boolean = json!({"type": "boolean"});
    let def = |fields: &[(&str, &Value)]| {
        let props: Map<String, Value> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).clone()))
            .collect();
        json!({"type": "object", "properties": props})
    };
    let meta = "io.k8s.apimachinery.pkg.apis.meta.v1";
    let owner_ref = json!({"type": "array",
        "items": {"$ref": format!("#/definitions/{meta}.OwnerReference")},
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
        "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"});
    let managed = json!({"type": "array",
        "items": {"$ref": format!("#/definitions/{meta}.ManagedFieldsEntry")},
        "x-kubernetes-list-type": "atomic"});
    let fields_v1 = json!({"$ref": format!("#/definitions/{meta}.FieldsV1")});
    let mut defs = Map::new();
    defs.insert(
        format!("{meta}.ObjectMeta"),
        def(&[
            ("annotations", &string_map),
            ("creationTimestamp", &string),
            ("deletionGracePeriodSeconds", &integer),
            ("deletionTimestamp", &string),
            ("finalizers", &finalizers),
            ("generateName", &string),
            ("generation", &integer),
            ("labels", &string_map),
            ("managedFields", &managed),
            ("name", &string),
            ("namespace", &string),
            ("ownerReferences", &owner_ref),
            ("resourceVersion", &string),
            ("selfLink", &string),
            ("uid", &string),
        ]),
    );
    let mut owner_reference = def(&[
        ("apiVersion", &string),
        ("blockOwnerDeletion", &boolean),
        ("controller", &boolean),
        ("kind", &string),
        ("name", &string),
        ("uid", &string),
    ]);
    owner_reference["x-kubernetes-map-type"] = json!("atomic");
    defs.insert(format!("{meta}.OwnerReference"), owner_reference);
    defs.insert(
        format!("{meta}.ManagedFieldsEntry"),
        def(&[
            ("apiVersion", &string),
            ("fieldsType", &string),
            ("fieldsV1", &fields_v1),
            ("manager", &string),
            ("operation", &string),
            ("subresource", &string),
            ("time", &string),
        ]),
    );
    defs.insert(format!("{meta}.FieldsV1"), json!({"type": "object"}));
    defs
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable").and_then(Value::as_bool) == Some(true)
}

/// Upstream's structural defaulting: a property that is missing (or null where the schema does
/// not allow null) takes its `default`, then every value below is defaulted the same way. The
/// root's `metadata` is never defaulted from the schema.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    default_value(schema, value, true);
}

fn default_value(schema: &Value, value: &mut Value, root: bool) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    if root && name == "metadata" {
                        continue;
                    }
                    let Some(default) = prop.get("default") else {
                        continue;
                    };
                    let missing = match map.get(name) {
                        None => true,
                        Some(Value::Null) => !nullable(prop),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(name.clone(), default.clone());
                    }
                }
                for (name, child) in map.iter_mut() {
                    if root && name == "metadata" {
                        continue;
                    }
                    if let Some(prop) = props.get(name) {
                        default_value(prop, child, false);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    default_value(additional, child, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    default_value(item_schema, item, false);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
                "spec": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "mode": {"type": "string", "default": "fast", "nullable": true},
                        "ports": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}},
                        }},
                        "labels": {"type": "object", "additionalProperties": {
                            "type": "object", "properties": {"weight": {"type": "integer", "default": 5}},
                        }},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                },
            },
        })
    }

    #[test]
    fn defaults_fill_missing_and_nested_values() {
        let mut obj =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        apply_defaults(&schema(), &mut obj);
        // The spec default is applied first, then defaulted itself.
        assert_eq!(obj["spec"], json!({"replicas": 1, "mode": "fast"}));

        let mut obj = json!({"spec": {"replicas": null, "mode": null, "ports": [{"port": 80}],
                                      "labels": {"a": {}}}});
        apply_defaults(&schema(), &mut obj);
        // A null where null is not allowed takes the default; a nullable null stays.
        assert_eq!(obj["spec"]["replicas"], json!(1));
        assert_eq!(obj["spec"]["mode"], Value::Null);
        assert_eq!(
            obj["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP"}])
        );
        assert_eq!(obj["spec"]["labels"], json!({"a": {"weight": 5}}));
    }

    #[test]
    fn pruning_keeps_metadata_and_preserved_fields() {
        let schemas = pruning_schemas("example.com", "Widget", &[("v1".into(), schema())]);
        let root = schemas.root_for("example.com", "v1", "Widget").unwrap();
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "unknown": 1, "free": {"anything": {"goes": true}}},
            "extra": true,
        });
        let unknown = schemas.prune_unknown(root, &mut obj);
        assert_eq!(
            unknown,
            ["unknown field \"extra\"", "unknown field \"spec.unknown\""]
        );
        assert_eq!(obj["metadata"], json!({"name": "w", "labels": {"a": "b"}}));
        assert_eq!(
            obj["spec"],
            json!({"replicas": 2, "free": {"anything": {"goes": true}}})
        );
    }

    #[test]
    fn definition_names_reverse_the_group() {
        assert_eq!(
            definition_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
    }
}
