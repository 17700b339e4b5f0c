//! The CustomResourceDefinition strategy (upstream: apiextensions-apiserver
//! pkg/registry/customresourcedefinition/strategy.go and apis/apiextensions/v1/defaults.go):
//! defaults, what create and update do (status reset, `storedVersions` kept up to date with the
//! storage version), the first delete that keeps the CRD for its finalizer, and warnings for
//! schema formats the server does not know. The built-in catalog stores CRDs with this strategy.

use serde_json::{Value, json};

use apimachinery::validation::FieldError;
use apiserver::registry::Strategy;

/// Sets `field` of an object unless it holds a value (unset pointers and empty strings alike,
/// as upstream's `SetDefaults_*` fill them).
fn set_default(obj: &mut Value, field: &str, value: Value) {
    if obj.is_object()
        && obj
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        obj[field] = value;
    }
}

/// The object at `field`, made one if it is not.
fn object_at<'a>(obj: &'a mut Value, field: &str) -> &'a mut Value {
    if !obj.get(field).is_some_and(Value::is_object) {
        obj[field] = Value::Object(serde_json::Map::new());
    }
    &mut obj[field]
}

pub struct CustomResourceDefinitionStrategy;

/// The name of the version marked `storage: true`, if any.
fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

/// Appends the storage version to `status.storedVersions` unless it is there: a CRD records
/// every version its objects may have been stored in.
fn record_stored_version(crd: &mut Value) {
    let Some(version) = storage_version(crd) else {
        return;
    };
    let status = object_at(crd, "status");
    if !status.get("storedVersions").is_some_and(Value::is_array) {
        status["storedVersions"] = json!([]);
    }
    if let Some(stored) = status["storedVersions"].as_array_mut()
        && !stored.iter().any(|v| v.as_str() == Some(version.as_str()))
    {
        stored.push(json!(version));
    }
}

/// String formats CRD schemas understand at v1.36's compatibility version, written as go-openapi
/// normalizes them, without dashes (`supportedVersionedFormats`, apiextensions-apiserver
/// pkg/apiserver/validation/formats.go; `k8s-short-name` and `k8s-long-name` since 1.34).
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// `GetUnrecognizedFormats` for one schema node: its format, if its type does not know it.
fn unrecognized_format(schema: &Value) -> Option<String> {
    let format = schema.get("format").and_then(Value::as_str)?;
    if format.is_empty() {
        return None;
    }
    let known = match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => matches!(format, "int32" | "int64"),
        "number" => matches!(format, "float" | "double"),
        _ => false,
    };
    (!known).then(|| format.to_string())
}

/// Every unrecognized format of a schema, in `SchemaHas`'s order of traversal: the node, its
/// items, allOf, anyOf, oneOf, not, properties, additionalProperties, patternProperties,
/// additionalItems, definitions, dependencies. (Go walks the maps in random order; here they go
/// by key.)
fn unrecognized_formats(schema: &Value, out: &mut Vec<String>) {
    if !schema.is_object() {
        return;
    }
    out.extend(unrecognized_format(schema));
    let each = |v: Option<&Value>, out: &mut Vec<String>| match v {
        Some(Value::Array(items)) => items.iter().for_each(|s| unrecognized_formats(s, out)),
        Some(s @ Value::Object(_)) => unrecognized_formats(s, out),
        _ => {}
    };
    let values = |v: Option<&Value>, out: &mut Vec<String>| {
        if let Some(Value::Object(m)) = v {
            m.values().for_each(|s| unrecognized_formats(s, out));
        }
    };
    each(schema.get("items"), out);
    each(schema.get("allOf"), out);
    each(schema.get("anyOf"), out);
    each(schema.get("oneOf"), out);
    each(schema.get("not"), out);
    values(schema.get("properties"), out);
    each(schema.get("additionalProperties"), out);
    values(schema.get("patternProperties"), out);
    each(schema.get("additionalItems"), out);
    values(schema.get("definitions"), out);
    values(schema.get("dependencies"), out);
}

/// `getUnrecognizedFormatsInCRD`: over each version's schema.
fn crd_unrecognized_formats(crd: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for v in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            unrecognized_formats(schema, &mut out);
        }
    }
    out
}

fn format_warning(format: &str) -> String {
    format!(
        "unrecognized format {}",
        apimachinery::validation::go_quote(format)
    )
}

impl Strategy for CustomResourceDefinitionStrategy {
    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for CustomResourceDefinitions).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn object_name_errors(&self, crd: &Value, name: &str) -> Vec<String> {
        super::validation::name_errors(crd, name)
    }

    fn validate(&self, crd: &Value) -> Vec<FieldError> {
        super::validation::validate_create(crd)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        super::validation::validate_update(new, old)
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        super::validation::validate_status(new)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        crd_unrecognized_formats(obj)
            .iter()
            .map(|f| format_warning(f))
            .collect()
    }

    /// Only formats the update introduces are warned about.
    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        let before = crd_unrecognized_formats(old);
        crd_unrecognized_formats(new)
            .iter()
            .filter(|f| !before.contains(f))
            .map(|f| format_warning(f))
            .collect()
    }

    fn default(&self, crd: &mut Value) {
        let Some(spec) = crd.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        if let Some(names) = spec.get_mut("names").filter(|n| n.is_object()) {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            set_default(names, "singular", json!(kind.to_lowercase()));
            if !kind.is_empty() {
                set_default(names, "listKind", json!(format!("{kind}List")));
            }
        }
        if spec.get("conversion").is_none_or(Value::is_null) {
            spec["conversion"] = json!({"strategy": "None"});
        }
        // `SetDefaults_ServiceReference`: a conversion webhook's service listens on 443.
        if let Some(service) = spec
            .pointer_mut("/conversion/webhook/clientConfig/service")
            .filter(|s| s.is_object())
            && service.get("port").is_none_or(Value::is_null)
        {
            service["port"] = json!(443);
        }
        // `storedVersions` starts with the storage version.
        let has_stored = crd
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .is_some_and(|v| !v.is_empty());
        if !has_stored {
            record_stored_version(crd);
        }
    }

    fn prepare_for_create(&self, crd: &mut Value) {
        // Status is the controllers' to write; a create starts from the stored version alone.
        crd["status"] = json!({});
        record_stored_version(crd);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        // The store keeps the old status; the storage version joins the stored versions.
        record_stored_version(new);
    }

    /// Upstream's CRD REST `Delete`: the first delete keeps the CRD, with the cleanup finalizer
    /// and a `Terminating` condition, for the apiextensions finalizer to delete its custom
    /// resources first.
    fn delete_is_graceful(&self, crd: &mut Value) -> bool {
        let meta = object_at(crd, "metadata");
        if !meta.get("finalizers").is_some_and(Value::is_array) {
            meta["finalizers"] = json!([]);
        }
        if let Some(list) = meta["finalizers"].as_array_mut()
            && !list.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            list.push(json!(CLEANUP_FINALIZER));
        }
        let condition = json!({
            "type": "Terminating", "status": "True",
            "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        });
        let status = object_at(crd, "status");
        if !status.get("conditions").is_some_and(Value::is_array) {
            status["conditions"] = json!([]);
        }
        if let Some(list) = status["conditions"].as_array_mut() {
            list.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
            list.push(condition);
        }
        true
    }
}

use crate::controller::CLEANUP_FINALIZER;

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1beta1", "served": true, "storage": false}, {"name": "v1", "served": true, "storage": true}]},
            "status": {"acceptedNames": {"kind": "Bogus"}}})
    }

    #[test]
    fn names_conversion_and_stored_versions_are_defaulted() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        s.default(&mut c);
        s.prepare_for_create(&mut c);
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(c["status"], json!({"storedVersions": ["v1"]}));
    }

    #[test]
    fn a_new_storage_version_is_recorded_on_update() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        c["status"] = json!({"storedVersions": ["v1beta1"]});
        s.prepare_for_update(&mut c, &Value::Null);
        assert_eq!(c["status"]["storedVersions"], json!(["v1beta1", "v1"]));
    }

    #[test]
    fn unknown_formats_are_warned_about_once_introduced() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        c["spec"]["versions"][1]["schema"] = json!({"openAPIV3Schema": {"type": "object", "properties": {
            "a": {"type": "string", "format": "date-time"},
            "b": {"type": "string", "format": "k8s-short-name"},
            "c": {"type": "integer", "format": "uint8"},
            "d": {"type": "array", "items": {"type": "string", "format": "color"}},
            "e": {"type": "boolean", "format": "byte"}}}});
        assert_eq!(
            s.warnings_on_create(&c),
            [
                "unrecognized format \"uint8\"",
                "unrecognized format \"color\"",
                "unrecognized format \"byte\"",
            ]
        );
        let old = c.clone();
        c["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["f"] =
            json!({"type": "number", "format": "decimal"});
        assert_eq!(
            s.warnings_on_update(&c, &old),
            ["unrecognized format \"decimal\""]
        );
    }

    #[test]
    fn webhook_services_default_to_port_443() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}, "conversionReviewVersions": ["v1"]}});
        s.default(&mut c);
        assert_eq!(
            c["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );
    }
}
