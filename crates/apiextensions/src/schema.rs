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

/// The pruning schemas of a CRD's versions (`(version, openAPIV3Schema)` pairs). The root's `metadata`, `apiVersion` and `kind` are
/// left to the generic rules (metadata is ObjectMeta whatever the schema says about it), so a
/// schema that constrains `metadata.name` does not prune the rest of the metadata away.
pub fn pruning_schemas(group: &str, kind: &str, versions: &[(String, Value)]) -> Schemas {
    let mut definitions = Map::new();
    for (version, schema) in versions {
        let mut root = schema.clone();
        if let Some(props) = root.get_mut("properties").and_then(Value::as_object_mut) {
            for field in ["metadata", "apiVersion", "kind"] {
                props.remove(field);
            }
        }
        if let Some(m) = root.as_object_mut() {
            m.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
        definitions.insert(definition_name(group, version, kind), root);
    }
    Schemas::from_openapi_v2(&json!({ "definitions": definitions }))
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
