//! The encoder checked against gnostic's own `OpenAPIv2.proto` (kept in `data/gnostic/`): the
//! tables must name the same fields with the same numbers and types, and the bytes, decoded by a
//! reader that knows only the .proto file and gnostic's naming rules, must give back the JSON
//! document (the built-in one, and a made-up one that reaches every `oneof` member).

use std::collections::HashMap;
use std::io::Read as _;

use serde_json::{Value, json};

use super::*;
use crate::wire::{Reader, WireValue};

const PROTO: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/gnostic/OpenAPIv2.proto"
));

/// The built-in document the server serves (kept by the kube crate).
const BUILT_IN: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../kube/data/openapi/v2.json.gz"
));

#[derive(Debug)]
struct ProtoField {
    name: String,
    number: u32,
    ty: String,
    repeated: bool,
    in_oneof: bool,
}

/// The messages of a proto3 file: `message X {`, `oneof y {`, `[repeated] T name = N;`, `}`.
fn parse_proto(text: &str) -> HashMap<String, Vec<ProtoField>> {
    let mut messages: HashMap<String, Vec<ProtoField>> = HashMap::new();
    let mut current: Option<String> = None;
    let mut in_oneof = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ';' || c == '=')
            .filter(|w| !w.is_empty())
            .collect();
        match words.as_slice() {
            ["message", name, "{"] => current = Some(name.to_string()),
            ["oneof", _, "{"] => in_oneof = true,
            ["}"] if in_oneof => in_oneof = false,
            ["}"] => current = None,
            [rest @ .., ty, name, number] if current.is_some() && rest.len() <= 1 => {
                let Ok(number) = number.parse() else { continue };
                messages
                    .entry(current.clone().unwrap())
                    .or_default()
                    .push(ProtoField {
                        name: name.to_string(),
                        number,
                        ty: ty.to_string(),
                        repeated: rest == ["repeated"],
                        in_oneof,
                    });
            }
            _ => {}
        }
    }
    messages
}

/// gnostic's JSON key for a proto field: `_ref` is `$ref`, snake_case becomes camelCase.
fn json_key(proto_name: &str) -> String {
    if proto_name == "_ref" {
        return "$ref".to_string();
    }
    let mut out = String::new();
    let mut upper = false;
    for c in proto_name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn shape_names(shape: &'static Shape) -> Vec<&'static str> {
    shapes()
        .into_iter()
        .filter(|(_, s)| std::ptr::eq(*s, shape))
        .map(|(n, _)| n)
        .collect()
}

/// Whether a table kind fits a .proto field's type and cardinality.
fn kind_fits(kind: Kind, field: &ProtoField) -> bool {
    match kind {
        Kind::Str => field.ty == "string" && !field.repeated,
        Kind::Bool | Kind::OneofBool => field.ty == "bool" && !field.repeated,
        Kind::Double => field.ty == "double" && !field.repeated,
        Kind::Int64 => field.ty == "int64" && !field.repeated,
        Kind::Strings => field.ty == "string" && field.repeated,
        Kind::Any => field.ty == "Any" && !field.repeated,
        Kind::Anys => field.ty == "Any" && field.repeated,
        Kind::Msg(s) => !field.repeated && shape_names(s).contains(&field.ty.as_str()),
        Kind::Msgs(s) => field.repeated && shape_names(s).contains(&field.ty.as_str()),
    }
}

#[test]
fn the_tables_match_openapiv2_proto() {
    let proto = parse_proto(PROTO);
    let declared = PROTO.lines().filter(|l| l.starts_with("message ")).count();
    assert_eq!(proto.len(), declared, "every message parsed");
    let field = |message: &str, name: &str| -> &ProtoField {
        proto[message]
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{message}.{name} is not in the .proto"))
    };
    for (name, shape) in shapes() {
        let fields = &proto[name];
        match shape {
            Shape::Object { fields: table, ext } => {
                let mut last = 0;
                for entry in *table {
                    let pf = fields
                        .iter()
                        .find(|pf| json_key(&pf.name) == entry.key)
                        .unwrap_or_else(|| panic!("{name}: no field for key {}", entry.key));
                    assert_eq!(pf.number, entry.number, "{name}.{}", pf.name);
                    assert!(kind_fits(entry.kind, pf), "{name}.{}: {pf:?}", pf.name);
                    assert!(entry.number > last, "{name}: fields out of number order");
                    last = entry.number;
                }
                for pf in fields {
                    if pf.name == "vendor_extension" {
                        assert_eq!((pf.number, pf.ty.as_str()), (*ext, "NamedAny"), "{name}");
                        assert!(*ext > last, "{name}: extensions must come last");
                    } else {
                        assert!(
                            table.iter().any(|e| e.number == pf.number),
                            "{name}.{} is missing from the table",
                            pf.name
                        );
                    }
                }
                assert!(*ext != 0 || fields.iter().all(|f| f.name != "vendor_extension"));
            }
            Shape::Map(kind) => {
                let entries = field(name, "additional_properties");
                assert_eq!((entries.number, entries.repeated), (1, true), "{name}");
                assert_eq!(fields.len(), 1, "{name}");
                let value = field(&entries.ty, "value");
                assert_eq!(field(&entries.ty, "name").number, 1);
                assert_eq!(value.number, 2);
                assert!(kind_fits(*kind, value), "{name}: {value:?}");
            }
            Shape::Paths => {
                assert_eq!(field(name, "vendor_extension").number, 1);
                let path = field(name, "path");
                assert_eq!((path.number, path.ty.as_str()), (2, "NamedPathItem"));
                assert_eq!(field("NamedPathItem", "value").ty, "PathItem");
            }
            Shape::Responses => {
                let codes = field(name, "response_code");
                assert_eq!((codes.number, codes.ty.as_str()), (1, "NamedResponseValue"));
                assert_eq!(field(name, "vendor_extension").number, 2);
                assert_eq!(field("NamedResponseValue", "value").ty, "ResponseValue");
            }
            Shape::OneOf(_) => assert!(fields.iter().all(|f| f.in_oneof), "{name}"),
            Shape::TypeItem | Shape::StringArray => {
                let v = field(name, "value");
                assert_eq!((v.number, v.ty.as_str(), v.repeated), (1, "string", true));
            }
            Shape::ItemsItem => {
                let s = field(name, "schema");
                assert_eq!((s.number, s.ty.as_str(), s.repeated), (1, "Schema", true));
            }
        }
    }
    let any = &proto["Any"];
    assert!(any.iter().any(|f| f.name == "yaml" && f.number == 2));
}

/// Decodes `bytes` as `message` knowing only the .proto file, into the JSON gnostic read it from:
/// `Named*` entries become object keys, oneof wrappers and `ItemsItem` are transparent, `Any`
/// is its YAML parsed, a one-element `TypeItem` is a string. `trace` gets every oneof member.
fn decode(
    proto: &HashMap<String, Vec<ProtoField>>,
    message: &str,
    bytes: &[u8],
    trace: &mut Vec<String>,
) -> Value {
    let fields = &proto[message];
    let mut reader = Reader::new(bytes);
    let mut object = serde_json::Map::new();
    let mut oneof: Option<Value> = None;
    while let Some((number, wire)) = reader.next_field().unwrap() {
        let pf = fields
            .iter()
            .find(|f| f.number == number)
            .unwrap_or_else(|| panic!("{message}: unknown field {number}"));
        let v = match (pf.ty.as_str(), wire) {
            ("string", WireValue::Bytes(b)) => {
                Value::String(String::from_utf8(b.to_vec()).unwrap())
            }
            ("bool", WireValue::Varint(v)) => Value::Bool(v != 0),
            ("int64", WireValue::Varint(v)) => json!(v as i64),
            ("double", WireValue::Fixed64(v)) => json!(f64::from_bits(v)),
            ("Any", WireValue::Bytes(b)) => {
                let any = decode(proto, "Any", b, trace);
                let text = any["yaml"].as_str().unwrap_or_else(|| panic!("{any}"));
                serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
            }
            (ty, WireValue::Bytes(b)) if proto.contains_key(ty) => decode(proto, ty, b, trace),
            other => panic!("{message}.{}: unexpected {other:?}", pf.name),
        };
        if pf.in_oneof {
            trace.push(format!("{message}.{}", pf.name));
            oneof = Some(v);
        } else if pf.ty.starts_with("Named") {
            let Value::Object(mut entry) = v else {
                panic!("{message}.{}", pf.name)
            };
            let name = entry.remove("name").unwrap_or(json!(""));
            let value = entry.remove("value").unwrap_or(Value::Null);
            object.insert(name.as_str().unwrap().to_string(), value);
        } else if pf.repeated {
            object
                .entry(json_key(&pf.name))
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .unwrap()
                .push(v);
        } else {
            object.insert(json_key(&pf.name), v);
        }
    }
    match message {
        _ if fields.iter().all(|f| f.in_oneof) => oneof.unwrap_or(Value::Null),
        "ItemsItem" => object.remove("schema").unwrap_or(json!([]))[0].take(),
        "TypeItem" => match object.remove("value") {
            Some(Value::Array(mut v)) if v.len() == 1 => v.remove(0),
            Some(v) => v,
            None => json!([]),
        },
        "StringArray" => object.remove("value").unwrap_or(json!([])),
        _ => Value::Object(object),
    }
}

/// Compares the decoded JSON with the original: proto3 drops `false`, `""` and `0`, so a key
/// holding one of those may be missing from the decoded side; nothing else may differ.
fn assert_same(original: &Value, decoded: &Value, path: &str) {
    match (original, decoded) {
        (Value::Object(o), Value::Object(d)) => {
            for (k, v) in o {
                match d.get(k) {
                    Some(dv) => assert_same(v, dv, &format!("{path}/{k}")),
                    None => assert!(
                        matches!(v, Value::Bool(false) | Value::Null)
                            || v.as_str() == Some("")
                            || v.as_f64() == Some(0.0),
                        "{path}/{k} is missing from the decoded document"
                    ),
                }
            }
            for k in d.keys() {
                assert!(o.contains_key(k), "{path}/{k} was not in the JSON document");
            }
        }
        (Value::Array(o), Value::Array(d)) => {
            assert_eq!(o.len(), d.len(), "{path}: lengths");
            for (i, (ov, dv)) in o.iter().zip(d).enumerate() {
                assert_same(ov, dv, &format!("{path}/{i}"));
            }
        }
        (Value::Number(o), Value::Number(d)) => assert_eq!(o.as_f64(), d.as_f64(), "{path}"),
        _ => assert_eq!(original, decoded, "{path}"),
    }
}

fn built_in_json() -> Vec<u8> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(BUILT_IN)
        .read_to_end(&mut json)
        .unwrap();
    json
}

#[test]
fn the_built_in_document_decodes_back_to_its_json() {
    let json = built_in_json();
    let started = std::time::Instant::now();
    let bytes = encode_document(&json).unwrap();
    let took = started.elapsed();
    eprintln!(
        "encoded {} bytes of JSON into {} bytes of protobuf in {took:?}",
        json.len(),
        bytes.len()
    );
    let proto = parse_proto(PROTO);
    let mut trace = Vec::new();
    let decoded = decode(&proto, "Document", &bytes, &mut trace);
    let original: Value = serde_json::from_slice(&json).unwrap();
    assert_same(&original, &decoded, "");
    // The document's parameters are query, path and body parameters, and its operations
    // reference shared ones.
    for member in [
        "NonBodyParameter.query_parameter_sub_schema",
        "NonBodyParameter.path_parameter_sub_schema",
        "Parameter.body_parameter",
        "ParametersItem.json_reference",
        "ResponseValue.response",
        "SchemaItem.schema",
        "SecurityDefinitionsItem.api_key_security",
    ] {
        assert!(trace.iter().any(|t| t == member), "{member} never chosen");
    }
    // The encoding is deterministic.
    assert_eq!(encode_document(&json).unwrap(), bytes);
}

#[test]
fn every_oneof_member_and_document_part_round_trips() {
    let doc = json!({
        "swagger": "2.0",
        "info": {"title": "t", "version": "1", "contact": {"name": "c", "x-c": 1},
                 "license": {"name": "Apache", "url": "u"}, "x-info": {"a": [1, 2]}},
        "host": "h", "basePath": "/b", "schemes": ["https"], "consumes": ["application/json"],
        "produces": ["application/yaml"],
        "paths": {
            "x-paths": true,
            "/p/{name}": {
                "get": {
                    "tags": ["t"], "summary": "s", "operationId": "op", "deprecated": true,
                    "externalDocs": {"url": "https://example.com", "description": "d"},
                    "parameters": [
                        {"name": "h", "in": "header", "type": "string", "required": true},
                        {"name": "f", "in": "formData", "type": "file", "allowEmptyValue": true},
                        {"name": "q", "in": "query", "type": "array", "collectionFormat": "multi",
                         "items": {"type": "array", "items": {"type": "integer", "maximum": 3.5,
                                   "enum": [1, 2], "default": 1}},
                         "minItems": 1, "maxItems": 9, "uniqueItems": true, "x-q": "v"},
                        {"name": "name", "in": "path", "type": "string", "required": true,
                         "pattern": "^a", "minLength": 1, "maxLength": -2, "multipleOf": 0.5,
                         "exclusiveMinimum": true, "minimum": -1},
                        {"name": "body", "in": "body", "required": true,
                         "schema": {"$ref": "#/definitions/D"}},
                        {"$ref": "#/parameters/shared"}
                    ],
                    "responses": {
                        "200": {"description": "ok", "schema": {"type": "file"},
                                "headers": {"X-H": {"type": "integer", "description": "hd",
                                                    "format": "int32"}},
                                "examples": {"application/json": {"a": "b"}}},
                        "404": {"$ref": "#/responses/NotFound"},
                        "default": {"description": "d", "schema": {"type": ["string", "null"]}},
                        "x-responses": "r"
                    },
                    "security": [{"k": ["s1", "s2"]}, {}],
                    "x-op": [{"g": "", "k": "K"}]
                },
                "parameters": [{"name": "pretty", "in": "query", "type": "string"}],
                "x-item": "i"
            }
        },
        "definitions": {
            "D": {
                "type": "object", "title": "T", "description": "desc", "required": ["a"],
                "discriminator": "a", "readOnly": true, "minProperties": 1, "maxProperties": 4,
                "properties": {
                    "a": {"type": "string", "enum": ["", "*", "x y"], "default": "x y",
                          "example": "e", "format": "f"},
                    "m": {"type": "object", "additionalProperties": false},
                    "n": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "l": {"type": "array", "items": {"$ref": "#/definitions/D"},
                          "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"]},
                    "x": {"xml": {"name": "x", "namespace": "n", "prefix": "p", "attribute": true,
                                  "wrapped": true}, "allOf": [{"$ref": "#/definitions/D"}, {}]}
                },
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "D", "version": "v1"}]
            }
        },
        "parameters": {"shared": {"name": "s", "in": "query", "type": "boolean",
                                  "uniqueItems": true}},
        "responses": {"NotFound": {"description": "nf", "schema": {"$ref": "#/definitions/D"}}},
        "securityDefinitions": {
            "basic": {"type": "basic", "description": "b"},
            "key": {"type": "apiKey", "name": "authorization", "in": "header"},
            "implicit": {"type": "oauth2", "flow": "implicit", "authorizationUrl": "a",
                         "scopes": {"read": "r"}},
            "password": {"type": "oauth2", "flow": "password", "tokenUrl": "t", "scopes": {}},
            "application": {"type": "oauth2", "flow": "application", "tokenUrl": "t",
                            "scopes": {"w": "write"}},
            "code": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "a",
                     "tokenUrl": "t", "scopes": {}, "x-s": 1}
        },
        "security": [{"key": []}],
        "tags": [{"name": "t", "description": "d", "externalDocs": {"url": "u"}, "x-t": 1}],
        "externalDocs": {"url": "u"},
        "x-document": {"nested": {"deeper": ["a", {"b": "c"}]}}
    });
    let json = serde_json::to_vec(&doc).unwrap();
    let bytes = encode_document(&json).unwrap();
    let proto = parse_proto(PROTO);
    let mut trace = Vec::new();
    let decoded = decode(&proto, "Document", &bytes, &mut trace);
    assert_same(&doc, &decoded, "");
    for member in [
        "NonBodyParameter.header_parameter_sub_schema",
        "NonBodyParameter.form_data_parameter_sub_schema",
        "NonBodyParameter.query_parameter_sub_schema",
        "NonBodyParameter.path_parameter_sub_schema",
        "Parameter.body_parameter",
        "Parameter.non_body_parameter",
        "ParametersItem.parameter",
        "ParametersItem.json_reference",
        "ResponseValue.response",
        "ResponseValue.json_reference",
        "SchemaItem.schema",
        "SchemaItem.file_schema",
        "AdditionalPropertiesItem.schema",
        "AdditionalPropertiesItem.boolean",
        "SecurityDefinitionsItem.basic_authentication_security",
        "SecurityDefinitionsItem.api_key_security",
        "SecurityDefinitionsItem.oauth2_implicit_security",
        "SecurityDefinitionsItem.oauth2_password_security",
        "SecurityDefinitionsItem.oauth2_application_security",
        "SecurityDefinitionsItem.oauth2_access_code_security",
    ] {
        assert!(trace.iter().any(|t| t == member), "{member} never chosen");
    }
}

/// A few messages byte for byte, as Go's marshaller writes them.
#[test]
fn bytes_follow_go_protobuf() {
    let bytes =
        encode_document(br#"{"swagger":"2.0","info":{"title":"K","version":"1"},"paths":{}}"#)
            .unwrap();
    assert_eq!(
        bytes,
        [
            0x0a, 3, b'2', b'.', b'0', // swagger
            0x12, 6, 0x0a, 1, b'K', 0x12, 1, b'1', // info
            0x42, 0, // paths: present, empty
        ]
    );
    // A `false` additionalProperties is a set oneof member, so it is written.
    let bytes = encode_document(
        br#"{"definitions":{"d":{"additionalProperties":false,"uniqueItems":false}}}"#,
    )
    .unwrap();
    assert_eq!(
        bytes,
        [
            0x4a, 12, 0x0a, 10, 0x0a, 1, b'd', 0x12, 5, 0xaa, 0x01, 2, 0x10, 0
        ]
    );
}

#[test]
fn refuses_what_is_not_a_json_object() {
    assert!(encode_document(b"[]").is_err());
    assert!(encode_document(b"{").is_err());
    assert!(encode_document(b"{} x").is_err());
}
