//! The custom resource strategy (upstream: apiextensions-apiserver
//! pkg/registry/customresource/strategy.go): defaults from the version's structural schema,
//! `status` reset on create when the status subresource is on, validation against the schema,
//! finalizer names only warned about, names as DNS subdomains; on writes the scale paths hold
//! valid counts (`ValidateScaleSpec`/`ValidateScaleStatus`) and embedded resources name their
//! type and carry valid metadata (`schemaobjectmeta.Validate`).

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::Value;

use crate::schema::apply_defaults;

pub struct CustomResourceStrategy {
    /// The served version's `apiVersion` and the CRD's kind.
    pub api_version: String,
    pub kind: String,
    /// The version's `openAPIV3Schema`.
    pub schema: Option<std::sync::Arc<Value>>,
    /// `subresources.status` is set: status is written only through `/status`.
    pub status_enabled: bool,
    /// The schema's `x-kubernetes-validations` rules, compiled.
    pub rules: Option<crate::cel::Rules>,
    /// The scale subresource's paths (`.spec.replicas`...), whose values are checked on writes.
    pub scale: Option<apiserver::registry::ScalePaths>,
}

impl CustomResourceStrategy {
    /// Upstream's order: type meta, the schema, then the CEL rules unless a schema error makes
    /// the object unfit for them.
    fn validate_with_old(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let type_meta = self.validate_type_meta(obj);
        if !type_meta.is_empty() {
            return type_meta;
        }
        let mut errs = match &self.schema {
            Some(schema) => crate::validation::validate(schema, obj),
            None => Vec::new(),
        };
        errs.extend(self.validate_scale(obj));
        if let Some(schema) = &self.schema {
            embedded_resources(schema, obj, &FieldPath::nil(), true, &mut errs);
        }
        if let Some(rules) = &self.rules {
            match crate::cel::blocking_error(&errs) {
                Some(blocked) => errs.push(blocked),
                None => errs.extend(rules.validate(obj, old)),
            }
        }
        errs
    }

    /// `ValidateScaleSpec` and `ValidateScaleStatus`: the replica counts the scale paths name
    /// are integers between 0 and 2^31-1, and the selector a string.
    fn validate_scale(&self, obj: &Value) -> Vec<FieldError> {
        let Some(scale) = &self.scale else {
            return Vec::new();
        };
        let mut errs = Vec::new();
        for pointer in [&scale.spec_replicas, &scale.status_replicas] {
            let dotted = pointer.replace('/', ".");
            let path = FieldPath::new(&dotted);
            match nested(obj, pointer, "int64") {
                Err(why) => errs.push(FieldError::invalid(&path, 0, why)),
                Ok(None) => {}
                Ok(Some(v)) => match v.as_i64() {
                    Some(n) if n < 0 => errs.push(FieldError::invalid(
                        &path,
                        n,
                        "should be a non-negative integer",
                    )),
                    Some(n) if n > i64::from(i32::MAX) => errs.push(FieldError::invalid(
                        &path,
                        n,
                        format!("should be less than or equal to {}", i32::MAX),
                    )),
                    Some(_) => {}
                    None => errs.push(FieldError::invalid(
                        &path,
                        0,
                        accessor_error(&dotted, v, "int64"),
                    )),
                },
            }
        }
        if let Some(pointer) = &scale.label_selector {
            let dotted = pointer.replace('/', ".");
            let why = match nested(obj, pointer, "string") {
                Err(why) => Some(why),
                Ok(Some(v)) if !v.is_string() => Some(accessor_error(&dotted, v, "string")),
                _ => None,
            };
            if let Some(why) = why {
                errs.push(FieldError::invalid(&FieldPath::new(&dotted), "", why));
            }
        }
        errs
    }

    /// Upstream's `ValidateTypeMeta`: the object is of this kind and version; nothing else is
    /// checked when it is not.
    fn validate_type_meta(&self, obj: &Value) -> Vec<FieldError> {
        let text = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let mut errs = Vec::new();
        if text("kind") != self.kind {
            errs.push(FieldError::invalid(
                &FieldPath::new("kind"),
                Value::from(text("kind")),
                format!("must be {}", self.kind),
            ));
        }
        if text("apiVersion") != self.api_version {
            errs.push(FieldError::invalid(
                &FieldPath::new("apiVersion"),
                Value::from(text("apiVersion")),
                format!("must be {}", self.api_version),
            ));
        }
        errs
    }
}

impl Strategy for CustomResourceStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            apply_defaults(schema, obj);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.status_enabled
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.validate_with_old(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate_with_old(new, Some(old))
    }

    fn checks_kube_finalizer_names(&self) -> bool {
        false
    }
}

/// `unstructured.NestedFieldNoCopy` along a pointer (`/spec/replicas`): the value, `None` when a
/// step is missing, or upstream's accessor error when a step is not an object.
fn nested<'a>(obj: &'a Value, pointer: &str, _want: &str) -> Result<Option<&'a Value>, String> {
    let steps: Vec<&str> = pointer.split('/').filter(|s| !s.is_empty()).collect();
    let mut node = obj;
    for (i, step) in steps.iter().enumerate() {
        let Some(map) = node.as_object() else {
            let at = format!(".{}", steps[..i].join("."));
            return Err(format!(
                "{at} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                go_v(node),
                go_type(node)
            ));
        };
        match map.get(*step) {
            Some(next) => node = next,
            None => return Ok(None),
        }
    }
    Ok(Some(node))
}

/// `<path> accessor error: <value> is of the type <T>, expected <want>`.
fn accessor_error(dotted: &str, v: &Value, want: &str) -> String {
    format!(
        "{dotted} accessor error: {} is of the type {}, expected {want}",
        go_v(v),
        go_type(v)
    )
}

/// Go's `%T` of a decoded JSON value.
pub(crate) fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a decoded JSON value.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => apimachinery::validation::go_float_v(f),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(go_v).collect::<Vec<_>>().join(" "))
        }
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_v(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// `schemaobjectmeta.Validate`: every object the schema marks `x-kubernetes-embedded-resource`
/// names its apiVersion and kind and carries valid metadata (names as path segments).
fn embedded_resources(
    schema: &Value,
    v: &Value,
    path: &FieldPath,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    let child = |name: &str| {
        if path.is_nil() {
            FieldPath::new(name)
        } else {
            path.child(name)
        }
    };
    match v {
        Value::Object(map) => {
            if !root
                && schema
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    == Some(true)
            {
                embedded_resource(map, &child, errs);
            }
            for (k, value) in map {
                if let Some(p) = schema.get("properties").and_then(|p| p.get(k)) {
                    embedded_resources(p, value, &child(k), false, errs);
                } else if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    let key = if path.is_nil() {
                        FieldPath::nil().key(k)
                    } else {
                        path.key(k)
                    };
                    embedded_resources(a, value, &key, false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter().enumerate() {
                    let p = if path.is_nil() {
                        FieldPath::nil().index(i)
                    } else {
                        path.index(i)
                    };
                    embedded_resources(item_schema, item, &p, false, errs);
                }
            }
        }
        _ => {}
    }
}

fn embedded_resource(
    map: &serde_json::Map<String, Value>,
    child: &dyn Fn(&str) -> FieldPath,
    errs: &mut Vec<FieldError>,
) {
    use apimachinery::validation::{
        is_dns1035_label, is_path_segment_name, is_path_segment_prefix,
    };
    for field in ["apiVersion", "kind"] {
        if !map.contains_key(field) {
            errs.push(FieldError::required(&child(field), ""));
        }
    }
    if let Some(v) = map.get("apiVersion") {
        let p = child("apiVersion");
        match v.as_str() {
            None => errs.push(FieldError::invalid(&p, v.clone(), "must be a string")),
            Some("") => errs.push(FieldError::invalid(&p, "", "must not be empty")),
            Some(s) if s != "/" && s.matches('/').count() > 1 => errs.push(FieldError::invalid(
                &p,
                s,
                format!("unexpected GroupVersion string: {s}"),
            )),
            Some(_) => {}
        }
    }
    if let Some(v) = map.get("kind") {
        let p = child("kind");
        match v.as_str() {
            None => errs.push(FieldError::invalid(&p, v.clone(), "must be a string")),
            Some("") => errs.push(FieldError::invalid(&p, "", "must not be empty")),
            Some(k) => {
                let msgs = is_dns1035_label(&k.to_lowercase());
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        &p,
                        k,
                        format!(
                            "may have mixed case, but should otherwise match: {}",
                            msgs.join(",")
                        ),
                    ));
                }
            }
        }
    }
    if let Some(meta) = map.get("metadata") {
        let p = child("metadata");
        let Some(m) = meta.as_object() else {
            errs.push(FieldError::invalid(
                &p,
                meta.clone(),
                format!(
                    ".metadata accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    go_v(meta),
                    go_type(meta)
                ),
            ));
            return;
        };
        let mut m = m.clone();
        // Upstream validates a nameless embedded object under a stand-in name.
        if m.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            m.insert("name".into(), Value::from("fakename"));
        }
        let namespaced = m
            .get("namespace")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let name_fn = |name: &str, prefix: bool| {
            if prefix {
                is_path_segment_prefix(name)
            } else {
                is_path_segment_name(name)
            }
        };
        errs.extend(apimachinery::validation::validate_object_meta_with(
            &Value::Object(m),
            namespaced,
            &name_fn,
            &p,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiserver::registry::ScalePaths;
    use serde_json::json;

    fn strategy() -> CustomResourceStrategy {
        CustomResourceStrategy {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            schema: Some(std::sync::Arc::new(
                json!({"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "x-kubernetes-preserve-unknown-fields": true}}}}}),
            )),
            status_enabled: false,
            rules: None,
            scale: Some(ScalePaths {
                spec_replicas: "/spec/replicas".into(),
                status_replicas: "/status/replicas".into(),
                label_selector: Some("/status/selector".into()),
            }),
        }
    }

    fn messages(obj: Value) -> Vec<String> {
        strategy()
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn scale_paths_hold_counts_and_a_selector_string() {
        let base =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        let mut obj = base.clone();
        obj["spec"] = json!({"replicas": 2});
        assert!(messages(obj.clone()).is_empty());
        obj["spec"] = json!({"replicas": -1});
        obj["status"] = json!({"replicas": 2.5, "selector": 3});
        assert_eq!(
            messages(obj),
            [
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 0: .status.replicas accessor error: 2.5 is of the type float64, expected int64",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: 3 is of the type int64, expected string",
            ]
        );
    }

    #[test]
    fn embedded_resources_carry_type_and_valid_metadata() {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"template": {"apiVersion": "a/b/c", "metadata": {"name": ".."}}}});
        assert_eq!(
            messages(obj),
            [
                "spec.template.kind: Required value",
                "spec.template.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.template.metadata.name: Invalid value: \"..\": may not be '..'",
            ]
        );
    }
}
