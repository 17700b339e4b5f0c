//! The declared CEL types of Kubernetes values (upstream: apiserver/pkg/cel `DeclType` and
//! common/schemas.go `SchemaDeclType`): what a schema node looks like to a CEL expression, with
//! the size facts the cost estimator needs — the most elements a string, list or map can hold
//! (`maxLength`/`maxItems`/`maxProperties`, or what fits in a 3 MiB request) and the smallest
//! JSON a value can serialize to.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// The largest request body CEL sizes are estimated against (`celconfig.MaxRequestSizeBytes`).
pub const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;
const MAX_DURATION_SIZE_JSON: i64 = 32;
const MAX_DATETIME_SIZE_JSON: i64 = 32;
const MIN_DURATION_SIZE_JSON: i64 = 3;
const JSON_DATE_SIZE: i64 = 12;
const MIN_DATETIME_SIZE_JSON: i64 = 21;
const MIN_STRING_SIZE: i64 = 2;
const MIN_BOOL_SIZE: i64 = 4;
const MIN_NUMBER_SIZE: i64 = 1;

/// One declared type: its shape, and its size facts.
#[derive(Debug)]
pub struct DeclType {
    pub kind: DeclKind,
    /// The most characters (strings: four bytes a character), items or properties it holds.
    pub max_elements: i64,
    /// The smallest JSON it serializes to.
    pub min_serialized_size: i64,
}

#[derive(Debug)]
pub enum DeclKind {
    Bool,
    Int,
    /// No schema has it; an admission variable can (`1u`).
    Uint,
    /// No schema has it; an admission variable can (`null`).
    Null,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// `x-kubernetes-int-or-string`.
    Dyn,
    List(Arc<DeclType>),
    /// Keys are strings.
    Map(Arc<DeclType>),
    /// A map whose keys have their own type: no schema has one; an admission variable can
    /// (`{1: 'a'}`). Upstream's `DeclType` keeps every map's key type; schemas' are strings.
    KeyedMap(Arc<DeclType>, Arc<DeclType>),
    /// Declared properties, by their CEL (escaped) names.
    Object(BTreeMap<String, Arc<DeclType>>),
    /// `google.protobuf.Any` ("any"): a value whose type is only known when it is read, such as
    /// a device attribute's in DRA selectors; checked as `dyn`.
    Any,
    /// A type of Kubernetes' libraries (`kubernetes.Quantity`, ...), by its CEL name.
    Opaque(&'static str),
    /// An object type with a CEL name of its own (`Object` types are named after their place
    /// in the tree): admission's hand-made types such as `kubernetes.GroupVersionKind`.
    Named(&'static str, Arc<DeclType>),
}

/// Where a schema comes from, for the one place the two readings differ.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// A CRD's structural schema: int-or-string only by `x-kubernetes-int-or-string`.
    Structural,
    /// An OpenAPI schema of a served kind (upstream's `openapi.Schema` adaptor): built-in
    /// kinds say int-or-string with `format: int-or-string` instead.
    OpenApi,
}

impl DeclType {
    fn simple(kind: DeclKind, min_size: i64) -> Arc<DeclType> {
        Arc::new(DeclType {
            kind,
            max_elements: 0,
            min_serialized_size: min_size,
        })
    }

    /// A type that is only checked, never sized (admission's hand-made types, variables).
    pub fn of(kind: DeclKind) -> Arc<DeclType> {
        DeclType::simple(kind, 0)
    }

    /// `SchemaDeclType`: the type of a structural schema node; `None` where the schema declares
    /// no type CEL can see (e.g. a node that only preserves unknown fields). A resource root
    /// (the top level, or an embedded resource) always has `apiVersion`, `kind` and
    /// `metadata.{name,generateName}`.
    pub fn from_schema(s: &Value, is_resource_root: bool) -> Option<Arc<DeclType>> {
        DeclType::convert(s, is_resource_root, Source::Structural)
    }

    /// `SchemaDeclType` over an OpenAPI schema with its references filled in (a served kind's,
    /// as `cel::resolver` gives it): as `from_schema`, and `format: int-or-string` is `dyn`.
    pub fn from_openapi(s: &Value, is_resource_root: bool) -> Option<Arc<DeclType>> {
        DeclType::convert(s, is_resource_root, Source::OpenApi)
    }

    fn convert(s: &Value, is_resource_root: bool, source: Source) -> Option<Arc<DeclType>> {
        let s = s.as_object()?;
        let int_or_string_format = source == Source::OpenApi
            && s.get("format").and_then(Value::as_str) == Some("int-or-string");
        if flag(s, "x-kubernetes-int-or-string") || int_or_string_format {
            let max = match int(s, "maxLength") {
                Some(l) => l.max(0) * 4,
                None => MAX_REQUEST_SIZE_BYTES - 2,
            };
            return Some(Arc::new(DeclType {
                kind: DeclKind::Dyn,
                max_elements: max,
                min_serialized_size: 1,
            }));
        }
        let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "array" => {
                let items = s.get("items").filter(|i| i.is_object())?;
                let elem = DeclType::convert(
                    items,
                    flag_of(items, "x-kubernetes-embedded-resource"),
                    source,
                )?;
                let max = match int(s, "maxItems") {
                    Some(m) => m.max(0),
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 1),
                };
                Some(Arc::new(DeclType {
                    kind: DeclKind::List(elem),
                    max_elements: max,
                    min_serialized_size: 2,
                }))
            }
            "object" => {
                if let Some(additional) = s.get("additionalProperties").filter(|a| a.is_object()) {
                    let elem = DeclType::convert(
                        additional,
                        flag_of(additional, "x-kubernetes-embedded-resource"),
                        source,
                    )?;
                    let max = match int(s, "maxProperties") {
                        Some(m) => m.max(0),
                        None => (MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 6),
                    };
                    return Some(Arc::new(DeclType {
                        kind: DeclKind::Map(elem),
                        max_elements: max,
                        min_serialized_size: 2,
                    }));
                }
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let mut fields = BTreeMap::new();
                let mut min_size = 2;
                let mut props: Vec<(&String, &Value)> = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .collect();
                let meta;
                if is_resource_root && !has_type_and_object_meta(s) {
                    props
                        .retain(|(k, _)| !matches!(k.as_str(), "kind" | "apiVersion" | "metadata"));
                    meta = resource_meta_props();
                    props.extend(meta.iter().map(|(k, v)| (k, v)));
                }
                for (name, prop) in props {
                    let Some(field) = DeclType::convert(
                        prop,
                        flag_of(prop, "x-kubernetes-embedded-resource"),
                        source,
                    ) else {
                        continue;
                    };
                    let is_required = required.contains(&name.as_str());
                    if is_required && prop.get("default").is_none() {
                        min_size += name.len() as i64 + field.min_serialized_size + 4;
                    }
                    if let Some(escaped) = escape(name) {
                        fields.insert(escaped, field);
                    }
                }
                Some(Arc::new(DeclType {
                    kind: DeclKind::Object(fields),
                    max_elements: 0,
                    min_serialized_size: min_size,
                }))
            }
            "string" => {
                let format = s.get("format").and_then(Value::as_str).unwrap_or("");
                let (kind, min, max) = match format {
                    "byte" => (
                        DeclKind::Bytes,
                        MIN_STRING_SIZE,
                        int(s, "maxLength").map(|m| m.max(0)),
                    ),
                    "duration" => (
                        DeclKind::Duration,
                        MIN_DURATION_SIZE_JSON,
                        Some(MAX_DURATION_SIZE_JSON),
                    ),
                    "date" => (DeclKind::Timestamp, JSON_DATE_SIZE, Some(JSON_DATE_SIZE)),
                    "date-time" => (
                        DeclKind::Timestamp,
                        MIN_DATETIME_SIZE_JSON,
                        Some(MAX_DATETIME_SIZE_JSON),
                    ),
                    _ => {
                        let max = if let Some(l) = int(s, "maxLength") {
                            Some(l.max(0) * 4)
                        } else {
                            s.get("enum")
                                .and_then(Value::as_array)
                                .filter(|e| !e.is_empty())
                                .map(|e| {
                                    e.iter()
                                        .filter_map(Value::as_str)
                                        .map(|v| v.len() as i64)
                                        .max()
                                        .unwrap_or(0)
                                })
                        };
                        (DeclKind::String, MIN_STRING_SIZE, max)
                    }
                };
                Some(Arc::new(DeclType {
                    kind,
                    max_elements: max.unwrap_or(MAX_REQUEST_SIZE_BYTES - 2),
                    min_serialized_size: min,
                }))
            }
            "boolean" => Some(DeclType::simple(DeclKind::Bool, MIN_BOOL_SIZE)),
            "number" => Some(DeclType::simple(DeclKind::Double, MIN_NUMBER_SIZE)),
            "integer" => Some(DeclType::simple(DeclKind::Int, MIN_NUMBER_SIZE)),
            _ => None,
        }
    }

    /// The declared field `name` (already escaped) of an object type.
    pub fn field(&self, name: &str) -> Option<&Arc<DeclType>> {
        match &self.kind {
            DeclKind::Object(fields) => fields.get(name),
            DeclKind::Named(_, inner) => inner.field(name),
            _ => None,
        }
    }
}

/// Whether the schema already declares `apiVersion`, `kind` and `metadata.{name,generateName}`
/// as strings (`WithTypeAndObjectMeta` leaves such a schema alone).
fn has_type_and_object_meta(s: &serde_json::Map<String, Value>) -> bool {
    let props = s.get("properties");
    let ty = |v: Option<&Value>, want: &str| {
        v.and_then(|p| p.get("type")).and_then(Value::as_str) == Some(want)
    };
    let meta = props.and_then(|p| p.get("metadata"));
    let meta_props = meta.and_then(|m| m.get("properties"));
    ty(props.and_then(|p| p.get("kind")), "string")
        && ty(props.and_then(|p| p.get("apiVersion")), "string")
        && ty(meta, "object")
        && meta_props.is_some()
        && ty(meta_props.and_then(|p| p.get("name")), "string")
        && ty(meta_props.and_then(|p| p.get("generateName")), "string")
}

fn resource_meta_props() -> Vec<(String, Value)> {
    let string = serde_json::json!({"type": "string"});
    vec![
        ("kind".to_string(), string.clone()),
        ("apiVersion".to_string(), string.clone()),
        (
            "metadata".to_string(),
            serde_json::json!({"type": "object", "properties": {"name": string, "generateName": string}}),
        ),
    ]
}

/// CEL's reserved words: no identifier, and a property of that name is escaped as `__word__`.
pub const RESERVED_WORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `cel.Escape`: the CEL name of a property, or `None` for names CEL cannot spell (those
/// properties are invisible to rules).
pub fn escape(name: &str) -> Option<String> {
    if RESERVED_WORDS.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
    }
    Some(out)
}

fn flag(s: &serde_json::Map<String, Value>, key: &str) -> bool {
    s.get(key) == Some(&Value::Bool(true))
}

fn flag_of(s: &Value, key: &str) -> bool {
    s.get(key) == Some(&Value::Bool(true))
}

fn int(s: &serde_json::Map<String, Value>, key: &str) -> Option<i64> {
    s.get(key).and_then(Value::as_i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_follow_the_schema_or_the_request_limit() {
        let t = DeclType::from_schema(
            &json!({"type": "object", "properties": {
                "a": {"type": "string", "maxLength": 10},
                "b": {"type": "array", "items": {"type": "string"}},
                "c": {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 5},
                "my-name": {"type": "boolean"},
                "1bad": {"type": "boolean"},
            }}),
            true,
        )
        .unwrap();
        assert_eq!(t.field("a").unwrap().max_elements, 40);
        // (3 MiB - 2) / (minimum string "" + comma)
        assert_eq!(
            t.field("b").unwrap().max_elements,
            (3 * 1024 * 1024 - 2) / 3
        );
        assert_eq!(t.field("c").unwrap().max_elements, 5);
        assert!(t.field("my__dash__name").is_some());
        assert!(t.field("1bad").is_none());
        let meta = t.field("metadata").unwrap();
        assert!(meta.field("name").is_some() && meta.field("labels").is_none());
    }
}
