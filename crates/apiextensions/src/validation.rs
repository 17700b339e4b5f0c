//! Validation of custom resources against their version's structural schema (upstream:
//! kube-openapi's `validate.SchemaValidator`, whose errors apiextensions-apiserver turns into
//! field errors in `ValidateCustomResource`), plus the list-type rules (`x-kubernetes-list-type`
//! `set` and `map`: no duplicates).
//!
//! The validators run in upstream's order for each value: type (with `nullable`), string
//! (`maxLength`, `minLength`, `pattern`), format, number (`maximum`, `minimum`, `multipleOf`),
//! array (`maxItems`, `minItems`, `uniqueItems`, then the items), enum, object
//! (`maxProperties`/`minProperties`, which end the object's checks as upstream's do, then the
//! properties in name order, `additionalProperties`, and `required`), with `anyOf`, `oneOf`,
//! `allOf` and `not` right after the type as kube-openapi's `schemaPropsValidator` runs them.
//! Messages are upstream's: `<path> in body <rule>`, inside the field error upstream builds for
//! each kind of failure.

use std::collections::HashSet;

use apimachinery::validation::{FieldError, FieldPath, go_float_v, go_quote};
use serde_json::Value;

/// The compiled form of a schema's `pattern`, kept across requests: compiling a regex costs far
/// more than matching it, and every write of a custom resource checks the same few patterns.
/// The cache is bounded (patterns come from CRDs, which users write); past the bound it starts
/// over.
fn compiled(pattern: &str) -> Option<std::sync::Arc<regex::Regex>> {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, RwLock};
    const MAX_PATTERNS: usize = 4096;
    static CACHE: LazyLock<RwLock<HashMap<String, Option<Arc<regex::Regex>>>>> =
        LazyLock::new(Default::default);
    if let Ok(cache) = CACHE.read()
        && let Some(found) = cache.get(pattern)
    {
        return found.clone();
    }
    let re = regex::Regex::new(pattern).ok().map(Arc::new);
    if let Ok(mut cache) = CACHE.write() {
        if cache.len() >= MAX_PATTERNS {
            cache.clear();
        }
        cache.insert(pattern.to_string(), re.clone());
    }
    re
}

/// The JSON type name kube-openapi infers for a decoded value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A float that holds an integer passes as an integer (`swag.IsFloat64AJSONInteger`).
fn integral(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// Validates `value` (the whole object, or a value below it at `path`) against `schema`.
/// Schema errors come first, then the list-type duplicates, as upstream appends them.
pub fn validate(schema: &Value, value: &Value) -> Vec<FieldError> {
    validate_at(schema, value, None)
}

/// [`validate`] for a value found at `base` (a default in a CRD's schema): error paths start
/// there, as upstream's `ValidateCustomResource(fldPath, ...)` prefixes them.
pub fn validate_at(schema: &Value, value: &Value, base: Option<&FieldPath>) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut v = Validator {
        out: &mut out,
        base,
    };
    v.value(schema, value, "");
    v.list_types(schema, value, "");
    out
}

struct Validator<'a> {
    out: &'a mut Vec<FieldError>,
    base: Option<&'a FieldPath>,
}

impl Validator<'_> {
    /// `apiextensions`' conversion of a kube-openapi error: the field path is the error's name.
    fn path(&self, name: &str) -> FieldPath {
        let name = name.trim_start_matches('.');
        match self.base {
            Some(base) if name.is_empty() => base.clone(),
            Some(base) => base.child(name),
            None => FieldPath::new(name),
        }
    }

    fn invalid(&mut self, name: &str, value: Value, rule: String) {
        let message = format!("{name} in body {rule}");
        self.out
            .push(FieldError::invalid(&self.path(name), value, message));
    }

    fn value(&mut self, schema: &Value, v: &Value, name: &str) {
        if !schema.is_object() {
            return;
        }
        if !self.type_check(schema, v, name) {
            // A value of the wrong type is not checked further by the validators that do not
            // apply to its kind; the ones that do still run, as upstream's chain does.
        }
        self.junctors(schema, v, name);
        if v.is_null() {
            self.enumeration(schema, v, name);
            return;
        }
        match v {
            Value::String(s) => {
                self.string(schema, s, name);
                self.format(schema, s, name);
            }
            Value::Number(_) => self.number(schema, v, name),
            Value::Array(items) => self.array(schema, items, name),
            _ => {}
        }
        self.enumeration(schema, v, name);
        if let Value::Object(map) = v {
            self.object(schema, map, name);
        }
    }

    /// The errors `schema` finds in `v`, without recording them.
    fn trial(&self, schema: &Value, v: &Value, name: &str) -> Vec<FieldError> {
        let mut out = Vec::new();
        Validator {
            out: &mut out,
            base: self.base,
        }
        .value(schema, v, name);
        out
    }

    /// kube-openapi's `schemaPropsValidator`: `anyOf`, `oneOf`, `allOf` and `not`, each
    /// alternative validating the same value. The failures are not field errors upstream (they
    /// come back as plain errors), so they stand at the validation's root path with an empty
    /// value; the first alternative that failed stands for `anyOf` and `oneOf`.
    fn junctors(&mut self, schema: &Value, v: &Value, name: &str) {
        let list = |field: &str| {
            schema
                .get(field)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
        };
        let quoted = go_quote(name);
        let at = self.base.cloned().unwrap_or_else(FieldPath::nil);
        let failure = |message: String| FieldError::invalid(&at, "", message);
        let any_of = list("anyOf");
        if !any_of.is_empty() {
            let results: Vec<Vec<FieldError>> =
                any_of.iter().map(|s| self.trial(s, v, name)).collect();
            if !results.iter().any(Vec::is_empty) {
                self.out.push(failure(format!(
                    "{quoted} must validate at least one schema (anyOf)"
                )));
                self.out
                    .extend(results.into_iter().next().unwrap_or_default());
            }
        }
        let one_of = list("oneOf");
        if !one_of.is_empty() {
            let results: Vec<Vec<FieldError>> =
                one_of.iter().map(|s| self.trial(s, v, name)).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let why = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.out.push(failure(format!(
                    "{quoted} must validate one and only one schema (oneOf). {why}"
                )));
                if valid == 0 {
                    self.out
                        .extend(results.into_iter().next().unwrap_or_default());
                }
            }
        }
        let all_of = list("allOf");
        if !all_of.is_empty() {
            let mut valid = 0;
            for s in all_of {
                let found = self.trial(s, v, name);
                valid += usize::from(found.is_empty());
                self.out.extend(found);
            }
            if valid != all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                self.out.push(failure(format!(
                    "{quoted} must validate all the schemas (allOf){none}"
                )));
            }
        }
        if let Some(not) = schema.get("not").filter(|n| n.is_object())
            && self.trial(not, v, name).is_empty()
        {
            self.out.push(failure(format!(
                "{quoted} must not validate the schema (not)"
            )));
        }
    }

    /// Upstream's type validator; false when it refused the value.
    fn type_check(&mut self, schema: &Value, v: &Value, name: &str) -> bool {
        let declared = schema.get("type").and_then(Value::as_str).unwrap_or("");
        if schema
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            // Structural schemas give int-or-string fields no type: the anyOf of integer and
            // string they carry is what upstream checks; both other kinds are refused by it.
            if v.is_null() || v.is_string() || integral(v) {
                return true;
            }
        }
        if declared.is_empty() {
            return true;
        }
        let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
        if v.is_null() {
            if nullable {
                return true;
            }
            self.type_error(name, declared, "null");
            return false;
        }
        let actual = json_type(v);
        let ok = declared == actual
            || (declared == "integer" && actual == "number" && integral(v))
            || (declared == "number" && actual == "integer");
        if !ok {
            self.type_error(name, declared, actual);
        }
        ok
    }

    fn type_error(&mut self, name: &str, declared: &str, actual: &str) {
        let message = format!(
            "{name} in body must be of type {declared}: {}",
            go_quote(actual)
        );
        self.out.push(FieldError::type_invalid(
            &self.path(name),
            Value::from(actual),
            message,
        ));
    }

    fn string(&mut self, schema: &Value, s: &str, name: &str) {
        let chars = s.chars().count() as i64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_i64)
            && chars > max
        {
            self.out
                .push(FieldError::too_long(&self.path(name), Value::from(s), max));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_i64)
            && chars < min
        {
            self.invalid(
                name,
                Value::from(s),
                format!("should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Some(re) = compiled(pattern)
            && !re.is_match(s)
        {
            self.invalid(name, Value::from(s), format!("should match '{pattern}'"));
        }
    }

    /// The formats upstream's CRD validation checks; others pass.
    fn format(&mut self, schema: &Value, s: &str, name: &str) {
        let Some(format) = schema.get("format").and_then(Value::as_str) else {
            return;
        };
        let ok = match format {
            "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
            "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
            "byte" => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(s).is_ok()
            }
            "uuid" => is_uuid(s),
            "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
            "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
            "k8s-short-name" => apimachinery::validation::is_dns1123_label(s).is_empty(),
            "k8s-long-name" => apimachinery::validation::is_dns1123_subdomain(s).is_empty(),
            _ => true,
        };
        if !ok {
            let message = format!("{name} in body must be of type {format}: {}", go_quote(s));
            self.out.push(FieldError::type_invalid(
                &self.path(name),
                Value::from(s),
                message,
            ));
        }
    }

    fn number(&mut self, schema: &Value, v: &Value, name: &str) {
        let Some(x) = v.as_f64() else { return };
        let is_int = v.is_i64() || v.is_u64();
        // An integer value is compared with the bound as an integer and the bound printed so.
        let show = |bound: f64| {
            if is_int && bound.fract() == 0.0 && bound.abs() < 9.2e18 {
                format!("{}", bound as i64)
            } else {
                go_float_v(bound)
            }
        };
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = schema.get("exclusiveMaximum").and_then(Value::as_bool) == Some(true);
            if x > max || (exclusive && x == max) {
                let rule = if exclusive {
                    format!("should be less than {}", show(max))
                } else {
                    format!("should be less than or equal to {}", show(max))
                };
                self.invalid(name, v.clone(), rule);
            }
        }
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = schema.get("exclusiveMinimum").and_then(Value::as_bool) == Some(true);
            if x < min || (exclusive && x == min) {
                let rule = if exclusive {
                    format!("should be greater than {}", show(min))
                } else {
                    format!("should be greater than or equal to {}", show(min))
                };
                self.invalid(name, v.clone(), rule);
            }
        }
        if let Some(factor) = schema.get("multipleOf").and_then(Value::as_f64)
            && factor > 0.0
        {
            let q = x / factor;
            if q.fract() != 0.0 {
                self.invalid(
                    name,
                    v.clone(),
                    format!("should be a multiple of {}", show(factor)),
                );
            }
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], name: &str) {
        let size = items.len() as i64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_i64)
            && size > max
        {
            self.out.push(FieldError::too_many(
                &self.path(name),
                Some(size),
                Some(max),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_i64)
            && size < min
        {
            self.invalid(
                name,
                Value::from(size),
                format!("should have at least {min} items"),
            );
        }
        if schema.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
            let mut seen = HashSet::new();
            if !items.iter().all(|i| seen.insert(i.to_string())) {
                self.invalid(name, Value::from(""), "shouldn't contain duplicates".into());
            }
        }
        if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
            for (i, item) in items.iter().enumerate() {
                self.value(item_schema, item, &format!("{name}[{i}]"));
            }
        }
    }

    /// The list-type rules of every list below `v`.
    fn list_types(&mut self, schema: &Value, v: &Value, name: &str) {
        match v {
            Value::Array(items) => {
                self.list_type(schema, items, name);
                if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                    for (i, item) in items.iter().enumerate() {
                        self.list_types(item_schema, item, &format!("{name}[{i}]"));
                    }
                }
            }
            Value::Object(map) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (key, child) in map {
                    if name.is_empty() && key == "metadata" {
                        continue;
                    }
                    let path = if name.is_empty() {
                        key.clone()
                    } else {
                        format!("{name}.{key}")
                    };
                    if let Some(p) = props.and_then(|p| p.get(key)).or(additional) {
                        self.list_types(p, child, &path);
                    }
                }
            }
            _ => {}
        }
    }

    /// `x-kubernetes-list-type: set` items are unique; `map` items are unique by their
    /// `x-kubernetes-list-map-keys` (upstream's `validateListSetsAndMaps`: `Duplicate value`).
    fn list_type(&mut self, schema: &Value, items: &[Value], name: &str) {
        let base = self.path(name);
        let path = |i: usize| base.index(i);
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => {
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    if !seen.insert(item.to_string()) {
                        self.out.push(FieldError::duplicate(&path(i), item.clone()));
                    }
                }
            }
            Some("map") => {
                let keys: Vec<&str> = schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let Some(obj) = item.as_object() else {
                        continue;
                    };
                    let key: serde_json::Map<String, Value> = keys
                        .iter()
                        .filter_map(|k| obj.get(*k).map(|v| (k.to_string(), v.clone())))
                        .collect();
                    if !seen.insert(Value::Object(key.clone()).to_string()) {
                        self.out
                            .push(FieldError::duplicate(&path(i), Value::Object(key)));
                    }
                }
            }
            _ => {}
        }
    }

    fn enumeration(&mut self, schema: &Value, v: &Value, name: &str) {
        let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
            return;
        };
        if allowed.is_empty() || allowed.contains(v) {
            return;
        }
        // Strings as they are, other values as their JSON, as upstream lists them.
        let values: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        self.out.push(FieldError::not_supported(
            &self.path(name),
            v.clone(),
            &refs,
        ));
    }

    fn object(&mut self, schema: &Value, map: &serde_json::Map<String, Value>, name: &str) {
        let count = map.len() as i64;
        if let Some(min) = schema.get("minProperties").and_then(Value::as_i64)
            && count < min
        {
            self.invalid(
                name,
                Value::from(count),
                format!("should have at least {min} properties"),
            );
            return;
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_i64)
            && count > max
        {
            self.out.push(FieldError::too_many(
                &self.path(name),
                Some(count),
                Some(max),
            ));
            return;
        }
        let child = |key: &str| {
            if name.is_empty() {
                key.to_string()
            } else {
                format!("{name}.{key}")
            }
        };
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            for (key, value) in map {
                if props.is_some_and(|p| p.contains_key(key)) {
                    continue;
                }
                self.value(additional, value, &format!("{name}.{key}"));
            }
        }
        if let Some(props) = props {
            // The root's `metadata` is checked too: a structural schema may only constrain its
            // `name` and `generateName` there, and upstream validates those by the schema.
            for (key, prop) in props {
                if let Some(value) = map.get(key) {
                    self.value(prop, value, &child(key));
                }
            }
        }
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(required) {
                self.out.push(FieldError::required(
                    &self.path(&format!("{name}.{required}")),
                    "",
                ));
            }
        }
    }
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(schema: Value, v: Value) -> Vec<String> {
        validate(&schema, &v)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    fn spec_schema(props: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
    }

    #[test]
    fn types_are_checked_with_upstreams_words() {
        let s = spec_schema(json!({"replicas": {"type": "integer"}, "name": {"type": "string"}}));
        assert_eq!(
            messages(s.clone(), json!({"spec": {"replicas": "3", "name": 4}})),
            [
                r#"spec.name: Invalid value: "integer": spec.name in body must be of type string: "integer""#,
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ]
        );
        assert_eq!(
            messages(s.clone(), json!({"spec": {"replicas": 1.5}})),
            [
                r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#
            ]
        );
        assert!(messages(s.clone(), json!({"spec": {"replicas": 2.0}})).is_empty());
        assert_eq!(
            messages(s, json!({"spec": {"replicas": null}})),
            [
                r#"spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null""#
            ]
        );
    }

    #[test]
    fn bounds_lengths_patterns_and_enums() {
        let s = spec_schema(json!({
            "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1000000},
            "name": {"type": "string", "maxLength": 3, "minLength": 2, "pattern": "^[a-z]+$"},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
        }));
        assert_eq!(
            messages(
                s,
                json!({"spec": {"replicas": 11, "ratio": 1e6, "name": "ABCD",
                "mode": "warp", "tags": ["a", "b"]}})
            ),
            [
                r#"spec.mode: Unsupported value: "warp": supported values: "fast", "slow""#,
                "spec.name: Too long: may not be more than 3 bytes",
                r#"spec.name: Invalid value: "ABCD": spec.name in body should match '^[a-z]+$'"#,
                "spec.ratio: Invalid value: 1e+06: spec.ratio in body should be less than 1e+06",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.tags: Too many: 2: must have at most 1 item",
            ]
        );
    }

    #[test]
    fn required_fields_and_list_maps() {
        let s = json!({"type": "object", "required": ["spec"], "properties": {"spec": {
        "type": "object", "required": ["ports"], "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port"],
                "items": {"type": "object", "required": ["port"],
                    "properties": {"port": {"type": "integer"}, "name": {"type": "string"}}}},
            "hosts": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        }}}});
        assert_eq!(messages(s.clone(), json!({})), ["spec: Required value"]);
        assert_eq!(
            messages(
                s,
                json!({"spec": {"ports": [{"port": 80, "name": "a"}, {"port": 80}, {"name": "x"}],
                "hosts": ["a", "a"]}})
            ),
            [
                "spec.ports[2].port: Required value",
                r#"spec.hosts[1]: Duplicate value: "a""#,
                r#"spec.ports[1]: Duplicate value: {"port":80}"#,
            ]
        );
    }

    #[test]
    fn the_root_metadata_name_follows_the_schema() {
        let s = json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"name": {"type": "string", "maxLength": 5}}}}});
        assert_eq!(
            messages(
                s.clone(),
                json!({"metadata": {"name": "too-long", "labels": {"a": "b"}}})
            ),
            ["metadata.name: Too long: may not be more than 5 bytes"]
        );
        assert!(messages(s, json!({"metadata": {"name": "ok"}})).is_empty());
    }

    #[test]
    fn int_or_string_and_formats() {
        let s = spec_schema(json!({
            "port": {"x-kubernetes-int-or-string": true},
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
        }));
        assert!(
            messages(
                s.clone(),
                json!({"spec": {"port": "http", "at": "2024-01-02T03:04:05Z",
            "id": "123e4567-e89b-12d3-a456-426614174000"}})
            )
            .is_empty()
        );
        assert!(messages(s.clone(), json!({"spec": {"port": 8080}})).is_empty());
        assert_eq!(
            messages(s, json!({"spec": {"at": "yesterday"}})),
            [
                r#"spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday""#
            ]
        );
    }

    #[test]
    fn junctors_check_alternatives_as_kube_openapi_does() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            "oneOf": [{"required": ["a"]}, {"required": ["c"]}],
            "allOf": [{"properties": {"a": {"maxLength": 1}}}],
            "not": {"required": ["d"]},
            "properties": {"a": {"type": "string"}, "b": {"type": "string"},
                "c": {"type": "string"}, "d": {"type": "string"}}}}});
        let shown = |v: Value| -> Vec<String> {
            validate(&schema, &v)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(shown(json!({"spec": {"a": "x"}})).is_empty());
        assert_eq!(
            shown(json!({"spec": {"a": "xy", "c": "z", "d": "w"}})),
            [
                "<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
                "spec.a: Too long: may not be more than 1 byte",
                "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf). None validated",
                "<nil>: Invalid value: \"\": \"spec\" must not validate the schema (not)",
            ]
        );
        assert_eq!(
            shown(json!({"spec": {}})),
            [
                "<nil>: Invalid value: \"\": \"spec\" must validate at least one schema (anyOf)",
                "spec.a: Required value",
                "<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found none valid",
                "spec.a: Required value",
            ]
        );
    }
}
