//! The OpenAPI v2 document in gnostic's protobuf form (`openapi.v2.Document` of
//! github.com/google/gnostic-models, `openapiv2/OpenAPIv2.proto`), as kube-apiserver serves
//! `/openapi/v2` to clients asking for `application/com.github.proto-openapi.spec.v2.v1.0+protobuf`
//! (kubectl's client-side validation does).
//!
//! Upstream builds the message from the JSON document with gnostic's parser (`ParseDocument`:
//! JSON read as a YAML node tree, every message filled from its map in document order) and
//! marshals it with Go's protobuf library. This module does the same walk over the same JSON,
//! writing the wire bytes directly: the message shapes are data (the tables below, one per
//! gnostic message, fields in field-number order so the bytes come out in Go's order), and the
//! few `oneof` wrappers pick their member the way gnostic's generated matchers do (they try every
//! member and keep the last that parses). Values gnostic keeps as `Any` (vendor extensions,
//! `default`, `enum`, `example`) carry the YAML text of the JSON value, written by [`yaml`] in
//! yaml.v3's style.
//!
//! Where gnostic would reject a document (a key a message does not allow, a value of the wrong
//! type) this writer skips the offending value instead: the documents it is given are the
//! server's own, which upstream parses without error.

mod yaml;

#[cfg(test)]
mod tests;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::wire::{FIXED64, put_bytes, put_nested, put_tag, put_varint_field};

/// The media type upstream answers protobuf requests with (also for the deprecated
/// `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` that clients send).
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Encodes an OpenAPI v2 (Swagger 2.0) JSON document as gnostic's `openapi.v2.Document`.
pub fn encode_document(json: &[u8]) -> Result<Vec<u8>, String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let root = Node::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    if !matches!(root, Node::Map(_)) {
        return Err("the OpenAPI v2 document is not a JSON object".to_string());
    }
    let mut out = Vec::with_capacity(json.len());
    message(&mut out, &DOCUMENT, &root);
    Ok(out)
}

/// A JSON value with its object keys in document order (gnostic reads objects in order, and the
/// order of map entries is the order of the repeated `Named*` fields).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn entries(&self) -> &[(String, Node)] {
        match self {
            Node::Map(entries) => entries,
            _ => &[],
        }
    }

    /// The first value under `key`, as gnostic's `MapValueForKey`.
    fn get(&self, key: &str) -> Option<&Node> {
        self.entries()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    fn str_at(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Node::String(s)) => Some(s),
            _ => None,
        }
    }

    fn is_int(n: &serde_json::Number) -> bool {
        n.is_i64() || n.is_u64()
    }

    /// A scalar read into a string field (gnostic's `StringForScalarNode`: strings, integers as
    /// written, null as empty; floats and booleans are refused).
    fn as_string(&self) -> Option<String> {
        match self {
            Node::String(s) => Some(s.clone()),
            Node::Number(n) if Self::is_int(n) => Some(n.to_string()),
            Node::Null => Some(String::new()),
            _ => None,
        }
    }

    /// The text of any scalar, as the YAML node's value (`TypeItem` reads it unchecked).
    fn scalar_text(&self) -> Option<String> {
        match self {
            Node::String(s) => Some(s.clone()),
            Node::Number(n) => Some(n.to_string()),
            Node::Bool(b) => Some(b.to_string()),
            Node::Null => Some("null".to_string()),
            Node::Seq(_) | Node::Map(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        // JSON has no NaN or infinities, so every float read is finite.
        Ok(serde_json::Number::from_f64(v).map_or(Node::Null, Node::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Node>()? {
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

/// How one field's value is read from JSON and written (proto3: zero scalars are left out).
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    /// A `bool` member of a oneof: written even when false, as a set oneof always is.
    OneofBool,
    Double,
    Int64,
    /// `repeated string` from a JSON array of strings.
    Strings,
    /// `Any`: the YAML text of the value.
    Any,
    /// `repeated Any` from a JSON array.
    Anys,
    Msg(&'static Shape),
    /// `repeated` messages from a JSON array.
    Msgs(&'static Shape),
}

struct Field {
    /// The JSON key (gnostic's name for the proto field: `basePath` for `base_path`, `$ref` for
    /// `_ref`).
    key: &'static str,
    number: u32,
    kind: Kind,
}

const fn f(key: &'static str, number: u32, kind: Kind) -> Field {
    Field { key, number, kind }
}

/// A oneof wrapper's choice: the member's field number and kind, None when no member fits.
type Choose = fn(&Node) -> Option<(u32, Kind)>;

/// The shape of one gnostic message.
enum Shape {
    /// Named fields, in field-number order; `ext` is the number of `repeated NamedAny
    /// vendor_extension`, filled from the `x-` keys in document order (0: none).
    Object { fields: &'static [Field], ext: u32 },
    /// `repeated Named* additional_properties = 1`: every key of the object.
    Map(Kind),
    /// `Paths`: `x-` keys as vendor extensions (field 1), `/` keys as path items (field 2).
    Paths,
    /// `Responses`: status codes and `default` (field 1), then `x-` keys (field 2).
    Responses,
    /// A message of one `oneof`.
    OneOf(Choose),
    /// `TypeItem`: `repeated string value = 1` from a string or an array of strings.
    TypeItem,
    /// `ItemsItem`: `repeated Schema schema = 1`, the one schema `items` holds.
    ItemsItem,
    /// `StringArray`: `repeated string value = 1`.
    StringArray,
}

/// Writes the fields of `node` as a message of `shape`.
fn message(out: &mut Vec<u8>, shape: &Shape, node: &Node) {
    match shape {
        Shape::Object { fields, ext } => {
            for field in *fields {
                if let Some(v) = node.get(field.key) {
                    value(out, field.number, field.kind, v);
                }
            }
            if *ext != 0 {
                extensions(out, *ext, node);
            }
        }
        Shape::Map(kind) => {
            for (k, v) in node.entries() {
                named(out, 1, k, *kind, v);
            }
        }
        Shape::Paths => {
            extensions(out, 1, node);
            for (k, v) in node.entries().iter().filter(|(k, _)| k.starts_with('/')) {
                named(out, 2, k, Kind::Msg(&PATH_ITEM), v);
            }
        }
        Shape::Responses => {
            for (k, v) in node.entries().iter().filter(|(k, _)| is_response_code(k)) {
                named(out, 1, k, Kind::Msg(&RESPONSE_VALUE), v);
            }
            extensions(out, 2, node);
        }
        Shape::OneOf(choose) => {
            if let Some((number, kind)) = choose(node) {
                value(out, number, kind, node);
            }
        }
        Shape::TypeItem => {
            let items = match node {
                Node::Seq(items) => items.iter().filter_map(Node::scalar_text).collect(),
                other => other.scalar_text().into_iter().collect::<Vec<_>>(),
            };
            for item in items {
                put_bytes(out, 1, item.as_bytes());
            }
        }
        Shape::ItemsItem => value(out, 1, Kind::Msg(&SCHEMA), node),
        Shape::StringArray => {
            if let Node::Seq(items) = node {
                for item in items {
                    put_bytes(out, 1, item.as_string().unwrap_or_default().as_bytes());
                }
            }
        }
    }
}

/// Writes field `number` of `kind` from `v`.
fn value(out: &mut Vec<u8>, number: u32, kind: Kind, v: &Node) {
    let nested = |out: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
        put_nested::<()>(out, number, |o| {
            write(o);
            Ok(())
        })
        .ok();
    };
    match kind {
        Kind::Str => {
            if let Some(s) = v.as_string().filter(|s| !s.is_empty()) {
                put_bytes(out, number, s.as_bytes());
            }
        }
        Kind::Bool => {
            if matches!(v, Node::Bool(true)) {
                put_varint_field(out, number, 1);
            }
        }
        Kind::OneofBool => {
            if let Node::Bool(b) = v {
                put_varint_field(out, number, u64::from(*b));
            }
        }
        Kind::Double => {
            if let Node::Number(n) = v
                && let Some(x) = n.as_f64()
                && x.to_bits() != 0
            {
                put_tag(out, number, FIXED64);
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            }
        }
        Kind::Int64 => {
            if let Node::Number(n) = v
                && let Some(i) = n.as_i64()
                && i != 0
            {
                put_varint_field(out, number, i as u64);
            }
        }
        Kind::Strings => {
            if let Node::Seq(items) = v {
                for s in items.iter().filter_map(Node::as_string) {
                    put_bytes(out, number, s.as_bytes());
                }
            }
        }
        Kind::Any => nested(out, &|o| any(o, v)),
        Kind::Anys => {
            if let Node::Seq(items) = v {
                for item in items {
                    nested(out, &|o| any(o, item));
                }
            }
        }
        Kind::Msg(shape) => nested(out, &|o| message(o, shape, v)),
        Kind::Msgs(shape) => {
            if let Node::Seq(items) = v {
                for item in items {
                    nested(out, &|o| message(o, shape, item));
                }
            }
        }
    }
}

/// `Any { yaml = 2 }`: the value as YAML text (`value = 1`, a protobuf Any, stays unset).
fn any(out: &mut Vec<u8>, v: &Node) {
    put_bytes(out, 2, yaml::to_yaml(v).as_bytes());
}

/// One `Named*` entry: `name = 1`, `value = 2`.
fn named(out: &mut Vec<u8>, number: u32, name: &str, kind: Kind, v: &Node) {
    put_nested::<()>(out, number, |o| {
        if !name.is_empty() {
            put_bytes(o, 1, name.as_bytes());
        }
        value(o, 2, kind, v);
        Ok(())
    })
    .ok();
}

/// The `x-` keys of an object, as `repeated NamedAny` field `number`.
fn extensions(out: &mut Vec<u8>, number: u32, node: &Node) {
    for (k, v) in node.entries().iter().filter(|(k, _)| k.starts_with("x-")) {
        named(out, number, k, Kind::Any, v);
    }
}

/// gnostic's `^([0-9]{3})$|^(default)$`.
fn is_response_code(k: &str) -> bool {
    k == "default" || (k.len() == 3 && k.bytes().all(|b| b.is_ascii_digit()))
}

// The oneof wrappers. gnostic tries each member in field order and keeps the last that parses,
// so where two could both parse the later member wins.

/// `ParametersItem`: a `JsonReference` (2) whenever `$ref` is there, else a `Parameter` (1).
fn choose_parameters_item(v: &Node) -> Option<(u32, Kind)> {
    Some(if v.get("$ref").is_some() {
        (2, Kind::Msg(&JSON_REFERENCE))
    } else {
        (1, Kind::Msg(&PARAMETER))
    })
}

/// `Parameter`: `in: body` is a `BodyParameter` (1), anything else a `NonBodyParameter` (2).
fn choose_parameter(v: &Node) -> Option<(u32, Kind)> {
    Some(if v.str_at("in") == Some("body") {
        (1, Kind::Msg(&BODY_PARAMETER))
    } else {
        (2, Kind::Msg(&NON_BODY_PARAMETER))
    })
}

/// `NonBodyParameter`: the sub-schema whose `in` enum admits the parameter's `in`.
fn choose_non_body_parameter(v: &Node) -> Option<(u32, Kind)> {
    Some(match v.str_at("in")? {
        "header" => (1, Kind::Msg(&HEADER_PARAMETER)),
        "formData" => (2, Kind::Msg(FORM_DATA_PARAMETER)),
        "query" => (3, Kind::Msg(&QUERY_PARAMETER)),
        "path" => (4, Kind::Msg(PATH_PARAMETER)),
        _ => return None,
    })
}

/// `ResponseValue`: a `JsonReference` (2) whenever `$ref` is there, else a `Response` (1).
fn choose_response_value(v: &Node) -> Option<(u32, Kind)> {
    Some(if v.get("$ref").is_some() {
        (2, Kind::Msg(&JSON_REFERENCE))
    } else {
        (1, Kind::Msg(&RESPONSE))
    })
}

/// `SchemaItem`: a `FileSchema` (2) when the value parses as one (`type: file` and only the keys
/// a file schema allows), else a `Schema` (1).
fn choose_schema_item(v: &Node) -> Option<(u32, Kind)> {
    const FILE_KEYS: &[&str] = &[
        "default",
        "description",
        "example",
        "externalDocs",
        "format",
        "readOnly",
        "required",
        "title",
        "type",
    ];
    let file = v.str_at("type") == Some("file")
        && v.entries()
            .iter()
            .all(|(k, _)| k.starts_with("x-") || FILE_KEYS.contains(&k.as_str()));
    Some(if file {
        (2, Kind::Msg(&FILE_SCHEMA))
    } else {
        (1, Kind::Msg(&SCHEMA))
    })
}

/// `AdditionalPropertiesItem`: a boolean (2) for `true`/`false`, else a `Schema` (1).
fn choose_additional_properties(v: &Node) -> Option<(u32, Kind)> {
    Some(match v {
        Node::Bool(_) => (2, Kind::OneofBool),
        _ => (1, Kind::Msg(&SCHEMA)),
    })
}

/// `SecurityDefinitionsItem`: by `type`, and for OAuth2 by `flow`.
fn choose_security_definition(v: &Node) -> Option<(u32, Kind)> {
    Some(match (v.str_at("type")?, v.str_at("flow")) {
        ("basic", _) => (1, Kind::Msg(&BASIC_AUTHENTICATION_SECURITY)),
        ("apiKey", _) => (2, Kind::Msg(&API_KEY_SECURITY)),
        ("oauth2", Some("implicit")) => (3, Kind::Msg(&OAUTH2_IMPLICIT_SECURITY)),
        ("oauth2", Some("password")) => (4, Kind::Msg(&OAUTH2_PASSWORD_SECURITY)),
        ("oauth2", Some("application")) => (5, Kind::Msg(OAUTH2_APPLICATION_SECURITY)),
        ("oauth2", Some("accessCode")) => (6, Kind::Msg(&OAUTH2_ACCESS_CODE_SECURITY)),
        _ => return None,
    })
}

// The messages of OpenAPIv2.proto, as gnostic fills them from JSON.

use Kind::{Any as A, Anys, Bool as B, Double as D, Int64 as I, Msg, Msgs, Str as S, Strings};

static DOCUMENT: Shape = Shape::Object {
    fields: &[
        f("swagger", 1, S),
        f("info", 2, Msg(&INFO)),
        f("host", 3, S),
        f("basePath", 4, S),
        f("schemes", 5, Strings),
        f("consumes", 6, Strings),
        f("produces", 7, Strings),
        f("paths", 8, Msg(&PATHS)),
        f("definitions", 9, Msg(&DEFINITIONS)),
        f("parameters", 10, Msg(&PARAMETER_DEFINITIONS)),
        f("responses", 11, Msg(&RESPONSE_DEFINITIONS)),
        f("security", 12, Msgs(&SECURITY_REQUIREMENT)),
        f("securityDefinitions", 13, Msg(&SECURITY_DEFINITIONS)),
        f("tags", 14, Msgs(&TAG)),
        f("externalDocs", 15, Msg(&EXTERNAL_DOCS)),
    ],
    ext: 16,
};

static INFO: Shape = Shape::Object {
    fields: &[
        f("title", 1, S),
        f("version", 2, S),
        f("description", 3, S),
        f("termsOfService", 4, S),
        f("contact", 5, Msg(&CONTACT)),
        f("license", 6, Msg(&LICENSE)),
    ],
    ext: 7,
};

static CONTACT: Shape = Shape::Object {
    fields: &[f("name", 1, S), f("url", 2, S), f("email", 3, S)],
    ext: 4,
};

static LICENSE: Shape = Shape::Object {
    fields: &[f("name", 1, S), f("url", 2, S)],
    ext: 3,
};

static EXTERNAL_DOCS: Shape = Shape::Object {
    fields: &[f("description", 1, S), f("url", 2, S)],
    ext: 3,
};

static TAG: Shape = Shape::Object {
    fields: &[
        f("name", 1, S),
        f("description", 2, S),
        f("externalDocs", 3, Msg(&EXTERNAL_DOCS)),
    ],
    ext: 4,
};

static PATHS: Shape = Shape::Paths;

static PATH_ITEM: Shape = Shape::Object {
    fields: &[
        f("$ref", 1, S),
        f("get", 2, Msg(&OPERATION)),
        f("put", 3, Msg(&OPERATION)),
        f("post", 4, Msg(&OPERATION)),
        f("delete", 5, Msg(&OPERATION)),
        f("options", 6, Msg(&OPERATION)),
        f("head", 7, Msg(&OPERATION)),
        f("patch", 8, Msg(&OPERATION)),
        f("parameters", 9, Msgs(&PARAMETERS_ITEM)),
    ],
    ext: 10,
};

static OPERATION: Shape = Shape::Object {
    fields: &[
        f("tags", 1, Strings),
        f("summary", 2, S),
        f("description", 3, S),
        f("externalDocs", 4, Msg(&EXTERNAL_DOCS)),
        f("operationId", 5, S),
        f("produces", 6, Strings),
        f("consumes", 7, Strings),
        f("parameters", 8, Msgs(&PARAMETERS_ITEM)),
        f("responses", 9, Msg(&RESPONSES)),
        f("schemes", 10, Strings),
        f("deprecated", 11, B),
        f("security", 12, Msgs(&SECURITY_REQUIREMENT)),
    ],
    ext: 13,
};

static PARAMETERS_ITEM: Shape = Shape::OneOf(choose_parameters_item);
static PARAMETER: Shape = Shape::OneOf(choose_parameter);
static NON_BODY_PARAMETER: Shape = Shape::OneOf(choose_non_body_parameter);

static JSON_REFERENCE: Shape = Shape::Object {
    fields: &[f("$ref", 1, S), f("description", 2, S)],
    ext: 0,
};

static BODY_PARAMETER: Shape = Shape::Object {
    fields: &[
        f("description", 1, S),
        f("name", 2, S),
        f("in", 3, S),
        f("required", 4, B),
        f("schema", 5, Msg(&SCHEMA)),
    ],
    ext: 6,
};

/// Header and path parameters share one layout.
static HEADER_PARAMETER: Shape = Shape::Object {
    fields: &[
        f("required", 1, B),
        f("in", 2, S),
        f("description", 3, S),
        f("name", 4, S),
        f("type", 5, S),
        f("format", 6, S),
        f("items", 7, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 8, S),
        f("default", 9, A),
        f("maximum", 10, D),
        f("exclusiveMaximum", 11, B),
        f("minimum", 12, D),
        f("exclusiveMinimum", 13, B),
        f("maxLength", 14, I),
        f("minLength", 15, I),
        f("pattern", 16, S),
        f("maxItems", 17, I),
        f("minItems", 18, I),
        f("uniqueItems", 19, B),
        f("enum", 20, Anys),
        f("multipleOf", 21, D),
    ],
    ext: 22,
};
static PATH_PARAMETER: &Shape = &HEADER_PARAMETER;

/// Query and form-data parameters share one layout (with `allowEmptyValue`).
static QUERY_PARAMETER: Shape = Shape::Object {
    fields: &[
        f("required", 1, B),
        f("in", 2, S),
        f("description", 3, S),
        f("name", 4, S),
        f("allowEmptyValue", 5, B),
        f("type", 6, S),
        f("format", 7, S),
        f("items", 8, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 9, S),
        f("default", 10, A),
        f("maximum", 11, D),
        f("exclusiveMaximum", 12, B),
        f("minimum", 13, D),
        f("exclusiveMinimum", 14, B),
        f("maxLength", 15, I),
        f("minLength", 16, I),
        f("pattern", 17, S),
        f("maxItems", 18, I),
        f("minItems", 19, I),
        f("uniqueItems", 20, B),
        f("enum", 21, Anys),
        f("multipleOf", 22, D),
    ],
    ext: 23,
};
static FORM_DATA_PARAMETER: &Shape = &QUERY_PARAMETER;

static PRIMITIVES_ITEMS: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("format", 2, S),
        f("items", 3, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 4, S),
        f("default", 5, A),
        f("maximum", 6, D),
        f("exclusiveMaximum", 7, B),
        f("minimum", 8, D),
        f("exclusiveMinimum", 9, B),
        f("maxLength", 10, I),
        f("minLength", 11, I),
        f("pattern", 12, S),
        f("maxItems", 13, I),
        f("minItems", 14, I),
        f("uniqueItems", 15, B),
        f("enum", 16, Anys),
        f("multipleOf", 17, D),
    ],
    ext: 18,
};

static HEADER: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("format", 2, S),
        f("items", 3, Msg(&PRIMITIVES_ITEMS)),
        f("collectionFormat", 4, S),
        f("default", 5, A),
        f("maximum", 6, D),
        f("exclusiveMaximum", 7, B),
        f("minimum", 8, D),
        f("exclusiveMinimum", 9, B),
        f("maxLength", 10, I),
        f("minLength", 11, I),
        f("pattern", 12, S),
        f("maxItems", 13, I),
        f("minItems", 14, I),
        f("uniqueItems", 15, B),
        f("enum", 16, Anys),
        f("multipleOf", 17, D),
        f("description", 18, S),
    ],
    ext: 19,
};

static RESPONSES: Shape = Shape::Responses;
static RESPONSE_VALUE: Shape = Shape::OneOf(choose_response_value);

static RESPONSE: Shape = Shape::Object {
    fields: &[
        f("description", 1, S),
        f("schema", 2, Msg(&SCHEMA_ITEM)),
        f("headers", 3, Msg(&HEADERS)),
        f("examples", 4, Msg(&EXAMPLES)),
    ],
    ext: 5,
};

static SCHEMA_ITEM: Shape = Shape::OneOf(choose_schema_item);

static SCHEMA: Shape = Shape::Object {
    fields: &[
        f("$ref", 1, S),
        f("format", 2, S),
        f("title", 3, S),
        f("description", 4, S),
        f("default", 5, A),
        f("multipleOf", 6, D),
        f("maximum", 7, D),
        f("exclusiveMaximum", 8, B),
        f("minimum", 9, D),
        f("exclusiveMinimum", 10, B),
        f("maxLength", 11, I),
        f("minLength", 12, I),
        f("pattern", 13, S),
        f("maxItems", 14, I),
        f("minItems", 15, I),
        f("uniqueItems", 16, B),
        f("maxProperties", 17, I),
        f("minProperties", 18, I),
        f("required", 19, Strings),
        f("enum", 20, Anys),
        f("additionalProperties", 21, Msg(&ADDITIONAL_PROPERTIES_ITEM)),
        f("type", 22, Msg(&TYPE_ITEM)),
        f("items", 23, Msg(&ITEMS_ITEM)),
        f("allOf", 24, Msgs(&SCHEMA)),
        f("properties", 25, Msg(&PROPERTIES)),
        f("discriminator", 26, S),
        f("readOnly", 27, B),
        f("xml", 28, Msg(&XML)),
        f("externalDocs", 29, Msg(&EXTERNAL_DOCS)),
        f("example", 30, A),
    ],
    ext: 31,
};

static FILE_SCHEMA: Shape = Shape::Object {
    fields: &[
        f("format", 1, S),
        f("title", 2, S),
        f("description", 3, S),
        f("default", 4, A),
        f("required", 5, Strings),
        f("type", 6, S),
        f("readOnly", 7, B),
        f("externalDocs", 8, Msg(&EXTERNAL_DOCS)),
        f("example", 9, A),
    ],
    ext: 10,
};

static XML: Shape = Shape::Object {
    fields: &[
        f("name", 1, S),
        f("namespace", 2, S),
        f("prefix", 3, S),
        f("attribute", 4, B),
        f("wrapped", 5, B),
    ],
    ext: 6,
};

static ADDITIONAL_PROPERTIES_ITEM: Shape = Shape::OneOf(choose_additional_properties);
static TYPE_ITEM: Shape = Shape::TypeItem;
static ITEMS_ITEM: Shape = Shape::ItemsItem;

static DEFINITIONS: Shape = Shape::Map(Msg(&SCHEMA));
static PROPERTIES: Shape = Shape::Map(Msg(&SCHEMA));
static PARAMETER_DEFINITIONS: Shape = Shape::Map(Msg(&PARAMETER));
static RESPONSE_DEFINITIONS: Shape = Shape::Map(Msg(&RESPONSE));
static HEADERS: Shape = Shape::Map(Msg(&HEADER));
static EXAMPLES: Shape = Shape::Map(A);
static SECURITY_DEFINITIONS: Shape = Shape::Map(Msg(&SECURITY_DEFINITIONS_ITEM));
static SECURITY_REQUIREMENT: Shape = Shape::Map(Msg(&STRING_ARRAY));
static STRING_ARRAY: Shape = Shape::StringArray;
static OAUTH2_SCOPES: Shape = Shape::Map(S);

static SECURITY_DEFINITIONS_ITEM: Shape = Shape::OneOf(choose_security_definition);

static BASIC_AUTHENTICATION_SECURITY: Shape = Shape::Object {
    fields: &[f("type", 1, S), f("description", 2, S)],
    ext: 3,
};

static API_KEY_SECURITY: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("name", 2, S),
        f("in", 3, S),
        f("description", 4, S),
    ],
    ext: 5,
};

static OAUTH2_IMPLICIT_SECURITY: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("flow", 2, S),
        f("scopes", 3, Msg(&OAUTH2_SCOPES)),
        f("authorizationUrl", 4, S),
        f("description", 5, S),
    ],
    ext: 6,
};

/// Password and application flows share one layout.
static OAUTH2_PASSWORD_SECURITY: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("flow", 2, S),
        f("scopes", 3, Msg(&OAUTH2_SCOPES)),
        f("tokenUrl", 4, S),
        f("description", 5, S),
    ],
    ext: 6,
};
static OAUTH2_APPLICATION_SECURITY: &Shape = &OAUTH2_PASSWORD_SECURITY;

static OAUTH2_ACCESS_CODE_SECURITY: Shape = Shape::Object {
    fields: &[
        f("type", 1, S),
        f("flow", 2, S),
        f("scopes", 3, Msg(&OAUTH2_SCOPES)),
        f("authorizationUrl", 4, S),
        f("tokenUrl", 5, S),
        f("description", 6, S),
    ],
    ext: 7,
};

/// Every message shape by its proto name, for the tests to check against OpenAPIv2.proto (a
/// shape shared by two messages is listed under both).
#[cfg(test)]
fn shapes() -> Vec<(&'static str, &'static Shape)> {
    vec![
        ("Document", &DOCUMENT),
        ("Info", &INFO),
        ("Contact", &CONTACT),
        ("License", &LICENSE),
        ("ExternalDocs", &EXTERNAL_DOCS),
        ("Tag", &TAG),
        ("PathItem", &PATH_ITEM),
        ("Operation", &OPERATION),
        ("JsonReference", &JSON_REFERENCE),
        ("BodyParameter", &BODY_PARAMETER),
        ("HeaderParameterSubSchema", &HEADER_PARAMETER),
        ("PathParameterSubSchema", PATH_PARAMETER),
        ("QueryParameterSubSchema", &QUERY_PARAMETER),
        ("FormDataParameterSubSchema", FORM_DATA_PARAMETER),
        ("PrimitivesItems", &PRIMITIVES_ITEMS),
        ("Header", &HEADER),
        ("Response", &RESPONSE),
        ("Schema", &SCHEMA),
        ("FileSchema", &FILE_SCHEMA),
        ("Xml", &XML),
        (
            "BasicAuthenticationSecurity",
            &BASIC_AUTHENTICATION_SECURITY,
        ),
        ("ApiKeySecurity", &API_KEY_SECURITY),
        ("Oauth2ImplicitSecurity", &OAUTH2_IMPLICIT_SECURITY),
        ("Oauth2PasswordSecurity", &OAUTH2_PASSWORD_SECURITY),
        ("Oauth2ApplicationSecurity", OAUTH2_APPLICATION_SECURITY),
        ("Oauth2AccessCodeSecurity", &OAUTH2_ACCESS_CODE_SECURITY),
        ("Paths", &PATHS),
        ("Responses", &RESPONSES),
        ("ParametersItem", &PARAMETERS_ITEM),
        ("Parameter", &PARAMETER),
        ("NonBodyParameter", &NON_BODY_PARAMETER),
        ("ResponseValue", &RESPONSE_VALUE),
        ("SchemaItem", &SCHEMA_ITEM),
        ("AdditionalPropertiesItem", &ADDITIONAL_PROPERTIES_ITEM),
        ("SecurityDefinitionsItem", &SECURITY_DEFINITIONS_ITEM),
        ("TypeItem", &TYPE_ITEM),
        ("ItemsItem", &ITEMS_ITEM),
        ("StringArray", &STRING_ARRAY),
        ("Definitions", &DEFINITIONS),
        ("Properties", &PROPERTIES),
        ("ParameterDefinitions", &PARAMETER_DEFINITIONS),
        ("ResponseDefinitions", &RESPONSE_DEFINITIONS),
        ("Headers", &HEADERS),
        ("Examples", &EXAMPLES),
        ("SecurityDefinitions", &SECURITY_DEFINITIONS),
        ("SecurityRequirement", &SECURITY_REQUIREMENT),
        ("Oauth2Scopes", &OAUTH2_SCOPES),
    ]
}
