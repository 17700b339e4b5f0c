//! Go's JSON decoding of a built-in kind, as a check: does this JSON fit the Go struct that
//! kube-apiserver decodes it into? Upstream refuses a body at decoding time when a value has the
//! wrong JSON type (a string where an `int32` goes, a list where a map goes), when a number does
//! not fit its integer type, or when a type that decodes itself (`Quantity`, `Time`,
//! `IntOrString`, base64 `[]byte`) refuses its text. This module answers with the first such
//! error in Go's words, e.g. `json: cannot unmarshal number into Go struct field ConfigMap.data
//! of type string`, so that nothing Go could not hold is ever stored.
//!
//! The walk is driven by the same schema as the transcoder (the Go structs' fields and types), so
//! an object that passes can always be encoded as protobuf. Unknown fields are not this module's
//! business (pruning drops them); neither are `apiVersion` and `kind`, which the caller checks.
//! Go reports the first error in document order; `serde_json` keeps keys sorted, so with several
//! errors the one reported here may be another of them.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::schema::{Cardinality, Field, MessageId, Schema, Special, Type, schema};
use crate::time;

/// Checks `value`, an object of this `apiVersion` and `kind`, against its Go type. `Ok` when the
/// kind has no Go type here (custom resources): there is nothing to check against.
pub fn check_go_types(api_version: &str, kind: &str, value: &Value) -> Result<(), String> {
    let schema = schema();
    let Some(id) = schema.resolve(api_version, kind) else {
        return Ok(());
    };
    let Value::Object(object) = value else {
        return Ok(());
    };
    Checker {
        schema,
        path: Vec::new(),
    }
    .fields(id, object, short_name(schema.messages[id].name))
}

/// [`crate::check_go_message`]: `value` against the message `full_name`; `Ok` when there is no
/// such message or the value is not an object (Go reports those itself elsewhere).
pub(crate) fn check_message(full_name: &str, value: &Value) -> Result<(), String> {
    let schema = schema();
    let Some(id) = schema.message_named(full_name) else {
        return Ok(());
    };
    match value {
        Value::Object(object) => Checker {
            schema,
            path: Vec::new(),
        }
        .fields(id, object, short_name(schema.messages[id].name)),
        Value::Null => Ok(()),
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type v1.{}",
            json_kind(other),
            short_name(full_name)
        )),
    }
}

/// The Go struct name (`ContainerPort`) of a message (`k8s.io.api.core.v1.ContainerPort`).
fn short_name(full: &str) -> &str {
    full.rsplit('.').next().unwrap_or(full)
}

struct Checker<'s> {
    schema: &'s Schema,
    /// The JSON names of the struct fields from the root to here: Go's error context, which
    /// leaves out list indexes and map keys.
    path: Vec<&'s str>,
}

/// How Go names a JSON value's type in `cannot unmarshal X`.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// An error with no struct context: what a type's own `UnmarshalJSON` reports when it calls
/// `json.Unmarshal` on a plain Go value.
fn plain(kind: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

impl<'s> Checker<'s> {
    fn mismatch(&self, owner: &str, kind: &str, go_type: &str) -> String {
        format!(
            "json: cannot unmarshal {kind} into Go struct field {owner}.{} of type {go_type}",
            self.path.join(".")
        )
    }

    /// The fields of a plain struct, found in `object`. `owner` is the struct Go names in its
    /// errors: the enclosing one for an embedded (inline) struct, whose fields Go promotes.
    fn fields(
        &mut self,
        id: MessageId,
        object: &Map<String, Value>,
        owner: &'s str,
    ) -> Result<(), String> {
        let schema = self.schema;
        for field in &schema.messages[id].fields {
            if field.inline {
                if let Type::Message(inner) = field.ty {
                    self.fields(inner, object, owner)?;
                }
                continue;
            }
            let Some(value) = object.get(field.json) else {
                continue;
            };
            self.path.push(field.json);
            self.field(field, value, owner)?;
            self.path.pop();
        }
        Ok(())
    }

    fn field(&mut self, field: &'s Field, value: &Value, owner: &'s str) -> Result<(), String> {
        // `null` leaves any Go value as it is (nil for pointers, maps and slices): never an error.
        if value.is_null() {
            return Ok(());
        }
        let go_type = field.go_type;
        match field.cardinality {
            Cardinality::Single => self.element(field.ty, go_type, value, owner),
            Cardinality::Repeated => {
                let Value::Array(items) = value else {
                    return Err(self.mismatch(owner, json_kind(value), go_type));
                };
                let item_type = go_type.strip_prefix("[]").unwrap_or(go_type);
                items
                    .iter()
                    .try_for_each(|item| self.element(field.ty, item_type, item, owner))
            }
            Cardinality::Map => {
                let Value::Object(entries) = value else {
                    return Err(self.mismatch(owner, json_kind(value), go_type));
                };
                let value_type = map_value_type(go_type);
                entries
                    .values()
                    .try_for_each(|entry| self.element(field.ty, value_type, entry, owner))
            }
        }
    }

    /// One value of type `ty` (a field, a list item or a map value).
    fn element(
        &mut self,
        ty: Type,
        go_type: &str,
        value: &Value,
        owner: &'s str,
    ) -> Result<(), String> {
        let ok = match (ty, value) {
            (_, Value::Null) => true,
            (Type::String, Value::String(_)) | (Type::Bool, Value::Bool(_)) => true,
            (Type::Double, Value::Number(_)) => true,
            (Type::Int32 | Type::Int64, Value::Number(n)) => {
                let fits = match ty {
                    Type::Int32 => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => n.as_i64().is_some(),
                };
                if !fits {
                    // Go names the number itself when it is a number that does not fit.
                    return Err(self.mismatch(owner, &format!("number {n}"), go_type));
                }
                true
            }
            (Type::Bytes, Value::String(text)) => {
                return base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map(drop)
                    .map_err(base64_error);
            }
            (Type::Message(id), _) => {
                let message = &self.schema.messages[id];
                if message.special != Special::None {
                    return self.special(message.special, go_type, value, owner);
                }
                let Value::Object(object) = value else {
                    return Err(self.mismatch(owner, json_kind(value), go_type));
                };
                return self.fields(id, object, short_name(message.name));
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(self.mismatch(owner, json_kind(value), go_type))
        }
    }

    /// Types that decode themselves: their `UnmarshalJSON` errors carry no struct context.
    fn special(
        &mut self,
        special: Special,
        go_type: &str,
        value: &Value,
        owner: &'s str,
    ) -> Result<(), String> {
        match (special, value) {
            (_, Value::Null) => Ok(()),
            (Special::Time | Special::MicroTime, Value::String(text)) => {
                time::parse_rfc3339(text).map(drop).map_err(|_| {
                    format!(
                        "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                        go_quote(text),
                        go_quote(text)
                    )
                })
            }
            (Special::Duration, Value::String(text)) => time::parse_duration(text)
                .map(drop)
                .map_err(|_| format!("time: invalid duration {}", go_quote(text))),
            (Special::Time | Special::MicroTime | Special::Duration, other) => {
                Err(plain(json_kind(other), "string"))
            }
            (Special::Quantity, Value::String(text)) => check_quantity(text.trim()),
            (Special::Quantity, Value::Number(n)) => check_quantity(&n.to_string()),
            (Special::Quantity, _) => Err(QUANTITY_FORMAT.to_string()),
            (Special::IntOrString, Value::String(_)) => Ok(()),
            (Special::IntOrString, Value::Number(n)) => {
                if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) {
                    Ok(())
                } else {
                    Err(plain(&format!("number {n}"), "int32"))
                }
            }
            (Special::IntOrString, other) => Err(plain(json_kind(other), "int32")),
            (Special::RawExtension | Special::RawJson | Special::Unknown, _) => Ok(()),
            (Special::Strings, Value::Array(items)) => match items
                .iter()
                .find(|item| !matches!(item, Value::String(_) | Value::Null))
            {
                Some(item) => Err(self.mismatch(owner, json_kind(item), "string")),
                None => Ok(()),
            },
            (Special::Strings, other) => Err(self.mismatch(owner, json_kind(other), go_type)),
            (Special::SchemaOrBool, Value::Bool(_)) => Ok(()),
            (Special::SchemaOrStringArray, Value::Array(items))
                if items.iter().all(Value::is_string) =>
            {
                Ok(())
            }
            (
                Special::SchemaOrBool | Special::SchemaOrArray | Special::SchemaOrStringArray,
                Value::Object(object),
            ) => self.schema_props(object),
            (Special::SchemaOrArray, Value::Array(items)) => {
                items.iter().try_for_each(|item| match item {
                    Value::Object(object) => self.schema_props(object),
                    Value::Null => Ok(()),
                    other => Err(plain(json_kind(other), "v1.JSONSchemaProps")),
                })
            }
            (Special::SchemaOrBool, _) => Err("boolean or JSON schema expected".to_string()),
            (Special::SchemaOrArray, other) => Err(plain(json_kind(other), "v1.JSONSchemaProps")),
            (Special::SchemaOrStringArray, other) => Err(plain(json_kind(other), "[]string")),
            (Special::None, _) => Ok(()),
        }
    }

    /// A `JSONSchemaProps` inside one of the `JSONSchemaPropsOr*` types, which decode it with a
    /// fresh `json.Unmarshal`: Go's error context starts again there.
    fn schema_props(&mut self, object: &Map<String, Value>) -> Result<(), String> {
        let Some(id) = self.schema.message_named(SCHEMA_PROPS) else {
            return Ok(());
        };
        let saved = std::mem::take(&mut self.path);
        let result = self.fields(id, object, "JSONSchemaProps");
        self.path = saved;
        result
    }
}

const SCHEMA_PROPS: &str =
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

/// `map[K]V` → `V`, minding nested brackets in the key.
fn map_value_type(go_type: &str) -> &str {
    let Some(rest) = go_type.strip_prefix("map[") else {
        return go_type;
    };
    let mut depth = 1;
    for (i, c) in rest.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return &rest[i + 1..];
                }
            }
            _ => {}
        }
    }
    go_type
}

/// Go's `base64.CorruptInputError` text.
fn base64_error(e: base64::DecodeError) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            at
        }
        base64::DecodeError::InvalidLength(at) => at,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

/// What `resource.ParseQuantity` answers for text that is not a quantity.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `resource.ParseQuantity`, with its error words.
fn check_quantity(text: &str) -> Result<(), String> {
    apimachinery::quantity::Quantity::parse(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Go's `%q` for the texts quoted in messages (printable ASCII kept, the rest escaped).
fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(api_version: &str, kind: &str, value: Value) -> Result<(), String> {
        check_go_types(api_version, kind, &value)
    }

    #[test]
    fn well_typed_objects_pass() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"},
            "creationTimestamp": null, "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "500m", "memory": 1024}},
                "livenessProbe": {"httpGet": {"port": "http", "path": "/"}, "periodSeconds": 3}}],
                "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}],
                "terminationGracePeriodSeconds": 30, "activeDeadlineSeconds": null},
            "status": {"startTime": "2024-01-01T00:00:00Z"}});
        assert_eq!(check("v1", "Pod", pod), Ok(()));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "YWJj"}, "stringData": {"b": "c"}});
        assert_eq!(check("v1", "Secret", secret), Ok(()));
        assert_eq!(check("example.com/v1", "Thing", json!({"spec": 5})), Ok(()));
    }

    #[test]
    fn wrong_json_types_get_gos_messages() {
        let cases = [
            (
                json!({"data": {"a": 5}}),
                "v1",
                "ConfigMap",
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            ),
            (
                json!({"metadata": {"labels": ["a"]}}),
                "v1",
                "ConfigMap",
                "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string",
            ),
            (
                json!({"spec": {"replicas": "three"}}),
                "apps/v1",
                "Deployment",
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"spec": {"replicas": 1.5}}),
                "apps/v1",
                "Deployment",
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"spec": {"replicas": 3_000_000_000u64}}),
                "apps/v1",
                "Deployment",
                "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}),
                "v1",
                "Pod",
                "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32",
            ),
            (
                json!({"spec": "x"}),
                "v1",
                "Pod",
                "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec",
            ),
            (
                json!({"spec": {"containers": {"name": "c"}}}),
                "v1",
                "Pod",
                "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container",
            ),
            (
                json!({"binaryData": {"a": 1}}),
                "v1",
                "ConfigMap",
                "json: cannot unmarshal number into Go struct field ConfigMap.binaryData of type []uint8",
            ),
            (
                json!({"immutable": "yes"}),
                "v1",
                "ConfigMap",
                "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool",
            ),
            (
                // An inline struct's fields are reported against the struct that embeds it.
                json!({"spec": {"volumes": [{"name": "v", "configMap": {"defaultMode": "x"}}]}}),
                "v1",
                "Pod",
                "json: cannot unmarshal string into Go struct field ConfigMapVolumeSource.spec.volumes.configMap.defaultMode of type int32",
            ),
            (
                json!({"spec": {"volumes": [{"name": "v", "configMap": 1}]}}),
                "v1",
                "Pod",
                "json: cannot unmarshal number into Go struct field Volume.spec.volumes.configMap of type v1.ConfigMapVolumeSource",
            ),
        ];
        for (value, api_version, kind, expected) in cases {
            assert_eq!(
                check(api_version, kind, value.clone()),
                Err(expected.to_string()),
                "{value}"
            );
        }
    }

    #[test]
    fn self_decoding_types_report_their_own_errors() {
        assert_eq!(
            check("v1", "Secret", json!({"data": {"a": "!!"}})),
            Err("illegal base64 data at input byte 0".into())
        );
        let pod = |resources: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"limits": resources}}]}});
        assert_eq!(
            check("v1", "Pod", pod(json!({"cpu": "lots"}))),
            Err(QUANTITY_FORMAT.into())
        );
        assert_eq!(
            check("v1", "Pod", pod(json!({"cpu": true}))),
            Err(QUANTITY_FORMAT.into())
        );
        assert_eq!(
            check(
                "v1",
                "Pod",
                pod(json!({"cpu": "1.5Gi", "memory": "1e3", "x": 2}))
            ),
            Ok(())
        );
        assert_eq!(
            check("v1", "Pod", pod(json!({"cpu": "1Mii"}))),
            Err("unable to parse quantity's suffix".into())
        );
        assert_eq!(
            check(
                "apps/v1",
                "Deployment",
                json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": true}}}})
            ),
            Err("json: cannot unmarshal bool into Go value of type int32".into())
        );
        assert_eq!(
            check(
                "v1",
                "ConfigMap",
                json!({"metadata": {"creationTimestamp": 5}})
            ),
            Err("json: cannot unmarshal number into Go value of type string".into())
        );
        assert!(
            check(
                "v1",
                "ConfigMap",
                json!({"metadata": {"creationTimestamp": "yesterday"}})
            )
            .is_err_and(|e| e.starts_with("parsing time \"yesterday\""))
        );
        // Raw extensions and FieldsV1 hold any JSON.
        assert_eq!(
            check(
                "apps/v1",
                "ControllerRevision",
                json!({"data": [1, {"x": true}], "metadata": {"managedFields": [{"fieldsV1": {"f:a": {}}}]}})
            ),
            Ok(())
        );
    }

    #[test]
    fn crd_schemas_are_checked_below_their_self_decoding_wrappers() {
        let crd = |props: Value| json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": props}}]}});
        let ok = crd(
            json!({"type": "object", "properties": {"a": {"type": "string", "items": {"type": "x"}}},
                           "additionalProperties": false, "not": {"type": "integer"}}),
        );
        assert_eq!(
            check("apiextensions.k8s.io/v1", "CustomResourceDefinition", ok),
            Ok(())
        );
        let bad = crd(json!({"type": "object", "properties": {"a": {"type": 5}}}));
        assert_eq!(
            check("apiextensions.k8s.io/v1", "CustomResourceDefinition", bad),
            Err("json: cannot unmarshal number into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.type of type string".into())
        );
        // Inside a `JSONSchemaPropsOr*` the schema is decoded afresh: no outer context.
        let bad = crd(json!({"items": {"type": 5}}));
        assert_eq!(
            check("apiextensions.k8s.io/v1", "CustomResourceDefinition", bad),
            Err("json: cannot unmarshal number into Go struct field JSONSchemaProps.type of type string".into())
        );
        let bad = crd(json!({"additionalProperties": "yes"}));
        assert_eq!(
            check("apiextensions.k8s.io/v1", "CustomResourceDefinition", bad),
            Err("boolean or JSON schema expected".into())
        );
    }

    #[test]
    fn quantities_follow_parse_quantity() {
        for ok in [
            "1", "-1", "+1.5", "500m", "1Ki", "2e3", "2E-3", "0.1", ".5", "5.",
            // Go's scanner reads a bare suffix as zero.
            "m",
        ] {
            assert_eq!(check_quantity(ok), Ok(()), "{ok}");
        }
        for bad in ["", "1.2.3", "1 Ki", "x1", "1Kib", "1e"] {
            assert!(check_quantity(bad).is_err(), "{bad}");
        }
    }
}
