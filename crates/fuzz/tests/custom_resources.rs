//! Fuzz target: the custom resource layer of `apiextensions` — schema validation
//! (`validation::validate`), defaults and pruning (`schema`), and CEL rules (`cel::Rules`) —
//! over generated objects against a realistic operator schema, and generated schemas (type,
//! bounds, patterns, list types, rules with random expressions) against generated objects.
//! Properties: never panics; defaulting is idempotent; an object the schema accepts keeps being
//! accepted after defaulting (defaults come from the schema).

mod common;

use apiextensions::cel::Rules;
use apiextensions::validation::validate;
use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};

const TARGET: &str = "custom_resources";

/// A schema like an operator's: nested objects, lists of maps, enums, patterns, bounds,
/// int-or-string, preserved fields, defaults and CEL rules (with transition rules).
fn operator_schema() -> Value {
    json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
        "spec": {
            "type": "object",
            "required": ["replicas"],
            "x-kubernetes-validations": [
                {"rule": "self.replicas >= self.minReplicas", "message": "replicas below minimum"},
                {"rule": "!has(self.mode) || self.mode != 'off' || self.replicas == 0"},
                {"rule": "self.replicas >= oldSelf.replicas || self.allowScaleDown", "reason": "FieldValueForbidden"},
                {"rule": "self.ports.all(p, p.port > 0)", "fieldPath": ".ports"},
                {"rule": "size(self.name) < 10", "messageExpression": "'name ' + self.name + ' too long'"},
            ],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 1},
                "minReplicas": {"type": "integer", "default": 0},
                "allowScaleDown": {"type": "boolean", "default": true},
                "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "default": "x"},
                "mode": {"type": "string", "enum": ["fast", "slow", "off"]},
                "ratio": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": true, "maximum": 10},
                "port": {"x-kubernetes-int-or-string": true},
                "at": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 4, "items": {"type": "string"}},
                "ports": {"type": "array", "default": [], "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                    "items": {"type": "object", "required": ["port"], "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "maxProperties": 3, "additionalProperties": {"type": "string", "minLength": 1}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "nullable": {"type": "string", "nullable": true},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    }})
}

fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_scalar(),
        json_value(3, 6),
        (0i64..2000).prop_map(Value::from),
        prop::sample::select(vec!["fast", "slow", "off", "", "a-b", "X"]).prop_map(Value::from),
        prop::collection::vec((0i64..5).prop_map(|p| json!({"port": p})), 0..4)
            .prop_map(Value::from),
    ]
}

const FIELDS: &[&str] = &[
    "replicas",
    "minReplicas",
    "allowScaleDown",
    "name",
    "mode",
    "ratio",
    "port",
    "at",
    "tags",
    "ports",
    "labels",
    "free",
    "nullable",
    "unknown",
];

fn object() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(FIELDS), field_value()), 0..8).prop_map(|fields| {
        let spec: serde_json::Map<String, Value> =
            fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
    })
}

/// A small generated schema: a type, a few keywords, sometimes items, properties and rules
/// (random text among them, which must not compile into anything that panics).
fn schema(depth: u32) -> BoxedStrategy<Value> {
    let leaf = (
        prop::sample::select(vec![
            "string", "integer", "number", "boolean", "object", "array", "",
        ]),
        prop::option::of(-5i64..5),
        prop::option::of(prop::sample::select(vec![
            "^a+$", "(", "[z-a]", ".*", "\\d{2,}",
        ])),
        prop::option::of(prop::sample::select(vec![
            "self > 0",
            "self == oldSelf",
            "size(self) < 3",
            "self.all(x, x > 0)",
            "has(self.a)",
            "self.a.b.c",
            "1/0 == 1",
            "'a'.matches('(')",
            "isURL(self)",
            ")(",
            "self",
            "quantity(self).isGreaterThan(quantity('1'))",
            "ip(self).family() == 4",
        ])),
    )
        .prop_map(|(ty, bound, pattern, rule)| {
            let mut s = json!({});
            if !ty.is_empty() {
                s["type"] = json!(ty);
            }
            if let Some(b) = bound {
                s["minimum"] = json!(b);
                s["maxLength"] = json!(b.unsigned_abs());
                s["minItems"] = json!(b.unsigned_abs());
            }
            if let Some(p) = pattern {
                s["pattern"] = json!(p);
            }
            if let Some(r) = rule {
                s["x-kubernetes-validations"] = json!([{"rule": r}]);
            }
            s
        });
    if depth == 0 {
        return leaf.boxed();
    }
    (leaf, schema(depth - 1), schema(depth - 1), any::<bool>())
        .prop_map(|(mut s, a, b, list)| {
            if list {
                s["items"] = a;
                s["x-kubernetes-list-type"] = json!("set");
            } else {
                s["properties"] = json!({"a": a, "b": b});
                s["required"] = json!(["a"]);
            }
            s
        })
        .boxed()
}

proptest! {
    #![proptest_config(config(TARGET, 3_000))]

    #[test]
    fn operator_objects_validate_without_panics(obj in object(), old in object()) {
        let schema = operator_schema();
        let mut obj = obj;
        apiextensions::schema_defaults(&schema, &mut obj);
        let once = obj.clone();
        apiextensions::schema_defaults(&schema, &mut obj);
        prop_assert_eq!(&obj, &once, "defaulting is idempotent");
        let errs = validate(&schema, &obj);
        let rules = Rules::compile(&std::sync::Arc::new(schema.clone())).expect("the schema has rules");
        let _ = rules.validate(&obj, Some(&old));
        let _ = rules.validate(&obj, None);
        if errs.is_empty() {
            let mut again = obj.clone();
            apiextensions::schema_defaults(&schema, &mut again);
            prop_assert!(validate(&schema, &again).is_empty());
        }
    }

    #[test]
    fn generated_schemas_never_panic(s in schema(2), v in json_value(4, 8), old in json_value(3, 4)) {
        let mut v = v;
        apiextensions::schema_defaults(&s, &mut v);
        let _ = validate(&s, &v);
        if let Some(rules) = Rules::compile(&std::sync::Arc::new(s.clone())) {
            let _ = rules.validate(&v, Some(&old));
            let _ = rules.validate(&v, None);
        }
    }
}
