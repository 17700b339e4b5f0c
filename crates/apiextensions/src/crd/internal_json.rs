//! The JSON form of upstream's internal apiextensions types, which carry no JSON tags: Go's
//! encoder writes every field under its Go name, in declaration order. Upstream's validation
//! prints a bad value this way when it is one of those types (a version list, a schema, a
//! validation rule), so our messages render them the same.

use apimachinery::validation::go_json;
use serde_json::Value;

use super::validation::Version;

/// `{"Name":value,...}` from fields already rendered.
fn object(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", body.join(","))
}

fn string(v: &Value, field: &str) -> String {
    go_json(&Value::from(
        v.get(field).and_then(Value::as_str).unwrap_or(""),
    ))
}

fn boolean(v: &Value, field: &str) -> String {
    (v.get(field).and_then(Value::as_bool) == Some(true)).to_string()
}

/// A pointer or interface field: its JSON, or `null`.
fn optional(v: &Value, field: &str) -> String {
    v.get(field).map(go_json).unwrap_or_else(|| "null".into())
}

/// A slice field: its JSON, or `null` when unset.
fn list(v: &Value, field: &str, each: fn(&Value) -> String) -> String {
    match v.get(field).and_then(Value::as_array) {
        Some(items) => format!("[{}]", items.iter().map(each).collect::<Vec<_>>().join(",")),
        None => "null".into(),
    }
}

/// A map of schemas: its JSON (keys sorted, as Go's encoder sorts them), or `null`.
fn schema_map(v: &Value, field: &str) -> String {
    match v.get(field).and_then(Value::as_object) {
        Some(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_json(&Value::from(k.as_str())), schema(&m[*k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        None => "null".into(),
    }
}

/// `JSONSchemaPropsOrBool`: `{"Allows":..,"Schema":..}`.
fn props_or_bool(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => object(&[("Allows", b.to_string()), ("Schema", "null".into())]),
        Some(s) => object(&[("Allows", "true".into()), ("Schema", schema(s))]),
    }
}

/// The internal `JSONSchemaProps`.
pub fn schema(s: &Value) -> String {
    let items = match s.get("items") {
        None | Some(Value::Null) => "null".into(),
        Some(Value::Array(list)) => object(&[
            ("Schema", "null".into()),
            (
                "JSONSchemas",
                format!(
                    "[{}]",
                    list.iter().map(schema).collect::<Vec<_>>().join(",")
                ),
            ),
        ]),
        Some(one) => object(&[("Schema", schema(one)), ("JSONSchemas", "null".into())]),
    };
    let dependencies = match s.get("dependencies").and_then(Value::as_object) {
        Some(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .iter()
                .map(|k| {
                    let d = &m[*k];
                    let (sch, prop) = match d {
                        Value::Array(_) => ("null".to_string(), go_json(d)),
                        other => (schema(other), "null".to_string()),
                    };
                    format!(
                        "{}:{}",
                        go_json(&Value::from(k.as_str())),
                        object(&[("Schema", sch), ("Property", prop)])
                    )
                })
                .collect();
            format!("{{{}}}", body.join(","))
        }
        None => "null".into(),
    };
    let external_docs = match s.get("externalDocs").filter(|d| d.is_object()) {
        Some(d) => object(&[
            ("Description", string(d, "description")),
            ("URL", string(d, "url")),
        ]),
        None => "null".into(),
    };
    object(&[
        ("ID", string(s, "id")),
        ("Schema", string(s, "$schema")),
        ("Ref", optional(s, "$ref")),
        ("Description", string(s, "description")),
        ("Type", string(s, "type")),
        ("Nullable", boolean(s, "nullable")),
        ("Format", string(s, "format")),
        ("Title", string(s, "title")),
        ("Default", optional(s, "default")),
        ("Maximum", optional(s, "maximum")),
        ("ExclusiveMaximum", boolean(s, "exclusiveMaximum")),
        ("Minimum", optional(s, "minimum")),
        ("ExclusiveMinimum", boolean(s, "exclusiveMinimum")),
        ("MaxLength", optional(s, "maxLength")),
        ("MinLength", optional(s, "minLength")),
        ("Pattern", string(s, "pattern")),
        ("MaxItems", optional(s, "maxItems")),
        ("MinItems", optional(s, "minItems")),
        ("UniqueItems", boolean(s, "uniqueItems")),
        ("MultipleOf", optional(s, "multipleOf")),
        ("Enum", optional(s, "enum")),
        ("MaxProperties", optional(s, "maxProperties")),
        ("MinProperties", optional(s, "minProperties")),
        ("Required", optional(s, "required")),
        ("Items", items),
        ("AllOf", list(s, "allOf", schema)),
        ("OneOf", list(s, "oneOf", schema)),
        ("AnyOf", list(s, "anyOf", schema)),
        (
            "Not",
            s.get("not")
                .filter(|n| n.is_object())
                .map(schema)
                .unwrap_or_else(|| "null".into()),
        ),
        ("Properties", schema_map(s, "properties")),
        (
            "AdditionalProperties",
            props_or_bool(s.get("additionalProperties")),
        ),
        ("PatternProperties", schema_map(s, "patternProperties")),
        ("Dependencies", dependencies),
        ("AdditionalItems", props_or_bool(s.get("additionalItems"))),
        ("Definitions", schema_map(s, "definitions")),
        ("ExternalDocs", external_docs),
        ("Example", optional(s, "example")),
        (
            "XPreserveUnknownFields",
            optional(s, "x-kubernetes-preserve-unknown-fields"),
        ),
        (
            "XEmbeddedResource",
            boolean(s, "x-kubernetes-embedded-resource"),
        ),
        ("XIntOrString", boolean(s, "x-kubernetes-int-or-string")),
        ("XListMapKeys", optional(s, "x-kubernetes-list-map-keys")),
        ("XListType", optional(s, "x-kubernetes-list-type")),
        ("XMapType", optional(s, "x-kubernetes-map-type")),
        ("XValidations", list(s, "x-kubernetes-validations", rule)),
    ])
}

/// The internal `ValidationRule`.
pub fn rule(r: &Value) -> String {
    object(&[
        ("Rule", string(r, "rule")),
        ("Message", string(r, "message")),
        ("MessageExpression", string(r, "messageExpression")),
        ("Reason", optional(r, "reason")),
        ("FieldPath", string(r, "fieldPath")),
        ("OptionalOldSelf", optional(r, "optionalOldSelf")),
    ])
}

fn column(c: &Value) -> String {
    object(&[
        ("Name", string(c, "name")),
        ("Type", string(c, "type")),
        ("Format", string(c, "format")),
        ("Description", string(c, "description")),
        (
            "Priority",
            c.get("priority")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
        ),
        ("JSONPath", string(c, "jsonPath")),
    ])
}

fn selectable(f: &Value) -> String {
    object(&[("JSONPath", string(f, "jsonPath"))])
}

fn subresources(s: Option<&Value>) -> String {
    let Some(s) = s.filter(|s| s.is_object()) else {
        return "null".into();
    };
    let status = if s.get("status").is_some_and(|v| !v.is_null()) {
        "{}".to_string()
    } else {
        "null".into()
    };
    let scale = match s.get("scale").filter(|v| v.is_object()) {
        Some(sc) => object(&[
            ("SpecReplicasPath", string(sc, "specReplicasPath")),
            ("StatusReplicasPath", string(sc, "statusReplicasPath")),
            ("LabelSelectorPath", optional(sc, "labelSelectorPath")),
        ]),
        None => "null".into(),
    };
    object(&[("Status", status), ("Scale", scale)])
}

/// The internal `CustomResourceDefinitionVersion` list of a spec.
pub fn versions(versions: &[Version<'_>]) -> String {
    let each: Vec<String> = versions
        .iter()
        .map(|v| {
            let validation = match v.schema {
                Some(s) => object(&[(
                    "OpenAPIV3Schema",
                    s.get("openAPIV3Schema")
                        .filter(|o| o.is_object())
                        .map(schema)
                        .unwrap_or_else(|| "null".into()),
                )]),
                None => "null".into(),
            };
            let columns = if v.columns.is_empty() {
                "null".to_string()
            } else {
                format!(
                    "[{}]",
                    v.columns.iter().map(column).collect::<Vec<_>>().join(",")
                )
            };
            let fields = if v.selectable.is_empty() {
                "null".to_string()
            } else {
                format!(
                    "[{}]",
                    v.selectable
                        .iter()
                        .map(selectable)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            };
            object(&[
                ("Name", string(v.raw, "name")),
                ("Served", boolean(v.raw, "served")),
                ("Storage", boolean(v.raw, "storage")),
                ("Deprecated", boolean(v.raw, "deprecated")),
                ("DeprecationWarning", optional(v.raw, "deprecationWarning")),
                ("Schema", validation),
                ("Subresources", subresources(v.subresources)),
                ("AdditionalPrinterColumns", columns),
                ("SelectableFields", fields),
            ])
        })
        .collect();
    format!("[{}]", each.join(","))
}
