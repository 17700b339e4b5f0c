//! Validation of the OpenAPI v3 schemas of a CustomResourceDefinition (upstream:
//! `validateCustomResourceDefinitionValidation` and `ValidateCustomResourceDefinitionOpenAPISchema`
//! in apiextensions validation.go, `ValidateStructural` in pkg/apiserver/schema, and
//! `ValidateDefaults` in pkg/apiserver/schema/defaulting): what a structural schema may say,
//! the keywords CRDs refuse, list and map types, the shape of `x-kubernetes-validations` and
//! the compilation of their rules, and defaults that must themselves validate and survive
//! pruning.
//!
//! Upstream walks Go maps in random order; properties here go in the object's key order.

use std::cell::RefCell;
use std::sync::Arc;

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::cel::{self as celcheck, DeclSizes, DeclType, Type as CelType};
use serde_json::{Value, json};

use super::validation::Internal;

fn set(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

fn flag(v: &Value, field: &str) -> bool {
    v.get(field).and_then(Value::as_bool) == Some(true)
}

fn props(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// The schema of `additionalProperties`, when it is one (not a bare boolean).
fn additional_schema(v: &Value) -> Option<&Value> {
    v.get("additionalProperties").filter(|a| a.is_object())
}

/// The single schema of `items` (not the array form).
fn items_schema(v: &Value) -> Option<&Value> {
    v.get("items").filter(|i| i.is_object())
}

/// `validationOptions`: how strict this write is. Updates loosen the rules the stored object
/// already breaks, so that a CRD accepted by an older server can still be changed.
#[derive(Clone)]
pub struct Options {
    pub require_recognized_review_version: bool,
    pub require_openapi_schema: bool,
    pub require_valid_property_type: bool,
    pub require_structural: bool,
    pub require_pruned_defaults: bool,
    pub require_atomic_set_type: bool,
    pub require_map_list_keys_map_set: bool,
    pub allow_invalid_ca_bundle: bool,
    /// The versions ("" for the shared top level) whose stored selectable fields were already
    /// more than the limit and did not change.
    too_many_selectable_allowed: Vec<String>,
    /// The versions whose schema did not change in an update: their rules' costs are not
    /// checked again (`suppressPerExpressionCost`), so a CRD accepted before is not refused
    /// for them now.
    unchanged_schemas: Vec<String>,
}

impl Options {
    pub fn for_create() -> Options {
        Options {
            require_recognized_review_version: true,
            require_openapi_schema: true,
            require_valid_property_type: true,
            require_structural: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set: true,
            // The CRD is not established yet.
            allow_invalid_ca_bundle: true,
            too_many_selectable_allowed: Vec::new(),
            unchanged_schemas: Vec::new(),
        }
    }

    pub fn for_update(new: &Internal<'_>, old: &Internal<'_>, old_crd: &Value) -> Options {
        let review = old_crd
            .pointer("/spec/conversion/webhook/conversionReviewVersions")
            .and_then(Value::as_array);
        let established = old_crd
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| text(c, "type") == "Established" && text(c, "status") == "True");
        let old_bundle = old_crd
            .pointer("/spec/conversion/webhook/clientConfig/caBundle")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut allowed = Vec::new();
        if old.selectable.len() > 8 && old.selectable == new.selectable {
            allowed.push(String::new());
        }
        for v in &new.versions {
            if let Some(o) = old.versions.iter().find(|o| o.name == v.name)
                && o.selectable.len() > 8
                && o.selectable == v.selectable
            {
                allowed.push(v.name.to_string());
            }
        }
        let old_schemas: Vec<&Value> = old.schemas().collect();
        fn schema_of<'a>(i: &Internal<'a>, name: &str) -> Option<&'a Value> {
            i.validation.or_else(|| {
                i.versions
                    .iter()
                    .find(|v| v.name == name)
                    .and_then(|v| v.schema)
            })
        }
        let unchanged_schemas = new
            .versions
            .iter()
            .filter(|v| old.versions.iter().any(|o| o.name == v.name))
            .filter(|v| schema_of(new, v.name) == schema_of(old, v.name))
            .map(|v| v.name.to_string())
            .collect();
        Options {
            require_recognized_review_version: review.is_none_or(|r| {
                r.is_empty()
                    || r.iter()
                        .any(|v| matches!(v.as_str(), Some("v1" | "v1beta1")))
            }),
            require_openapi_schema: old
                .validation
                .is_some_and(|v| set(v.get("openAPIV3Schema")).is_some())
                || old.versions.iter().all(|v| {
                    v.schema
                        .is_some_and(|s| set(s.get("openAPIV3Schema")).is_some())
                }),
            require_valid_property_type: !old_schemas.iter().any(|s| {
                schema_has(s, &|n| {
                    let t = text(n, "type");
                    !t.is_empty() && !OPENAPI_TYPES.contains(&t)
                })
            }),
            require_structural: !old_schemas
                .iter()
                .any(|s| !structural_errors(s, &FieldPath::nil()).is_empty()),
            require_pruned_defaults: !old_schemas.iter().any(|s| has_unpruned_defaults(s)),
            require_atomic_set_type: !old_schemas.iter().any(|s| schema_has(s, &non_atomic_set)),
            require_map_list_keys_map_set: !old_schemas.iter().any(|s| {
                schema_has(s, &|n| {
                    !map_list_keys_map_set(n, &FieldPath::nil()).is_empty()
                })
            }),
            allow_invalid_ca_bundle: !established
                || (!old_bundle.is_empty() && !super::validation::ca_bundle_is_valid(old_bundle)),
            too_many_selectable_allowed: allowed,
            unchanged_schemas,
        }
    }

    pub fn too_many_selectable_fields_allowed(&self, version: &str) -> bool {
        self.too_many_selectable_allowed
            .iter()
            .any(|v| v == version)
    }
}

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// `SchemaHas`: whether `pred` holds for a node of the schema, in upstream's traversal (items,
/// allOf, anyOf, oneOf, not, properties, additionalProperties, patternProperties,
/// additionalItems, definitions, dependencies).
pub fn schema_has(s: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    if !s.is_object() {
        return false;
    }
    if pred(s) {
        return true;
    }
    let one = |v: Option<&Value>| match v {
        Some(Value::Array(items)) => items.iter().any(|i| schema_has(i, pred)),
        Some(o @ Value::Object(_)) => schema_has(o, pred),
        _ => false,
    };
    let values = |v: Option<&Value>| {
        v.and_then(Value::as_object)
            .is_some_and(|m| m.values().any(|i| schema_has(i, pred)))
    };
    one(s.get("items"))
        || one(s.get("allOf"))
        || one(s.get("anyOf"))
        || one(s.get("oneOf"))
        || one(s.get("not"))
        || values(s.get("properties"))
        || one(s.get("additionalProperties"))
        || values(s.get("patternProperties"))
        || one(s.get("additionalItems"))
        || values(s.get("definitions"))
        || values(s.get("dependencies"))
}

pub fn has_defaults(s: &Value) -> bool {
    schema_has(s, &|n| set(n.get("default")).is_some())
}

pub fn has_kubernetes_extensions(s: &Value) -> bool {
    schema_has(s, &|n| {
        flag(n, "x-kubernetes-embedded-resource")
            || set(n.get("x-kubernetes-preserve-unknown-fields")).is_some()
            || flag(n, "x-kubernetes-int-or-string")
            || n.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .is_some_and(|k| !k.is_empty())
            || set(n.get("x-kubernetes-list-type")).is_some()
            || n.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|k| !k.is_empty())
    })
}

fn non_atomic_set(s: &Value) -> bool {
    if text(s, "x-kubernetes-list-type") != "set" {
        return false;
    }
    let Some(items) = items_schema(s) else {
        return false;
    };
    match text(items, "type") {
        "array" => set(items.get("x-kubernetes-list-type")).is_some_and(|t| t != "atomic"),
        "object" => text(items, "x-kubernetes-map-type") != "atomic",
        _ => false,
    }
}

/// The fields of the internal `JSONSchemaProps` in Go's order, with whether a status subresource lets them
/// stand at the root of the schema (`allowedFieldsAtRootSchema`).
const ROOT_FIELDS: &[(&str, bool)] = &[
    ("id", false),
    ("$schema", false),
    ("$ref", false),
    ("description", true),
    ("type", true),
    ("nullable", false),
    ("format", true),
    ("title", true),
    ("default", false),
    ("maximum", true),
    ("exclusiveMaximum", true),
    ("minimum", true),
    ("exclusiveMinimum", true),
    ("maxLength", true),
    ("minLength", true),
    ("pattern", true),
    ("maxItems", true),
    ("minItems", true),
    ("uniqueItems", true),
    ("multipleOf", true),
    ("enum", false),
    ("maxProperties", false),
    ("minProperties", false),
    ("required", true),
    ("items", true),
    ("allOf", false),
    ("oneOf", false),
    ("anyOf", false),
    ("not", false),
    ("properties", true),
    ("additionalProperties", false),
    ("patternProperties", false),
    ("dependencies", false),
    ("additionalItems", false),
    ("definitions", false),
    ("externalDocs", true),
    ("example", true),
    ("x-kubernetes-preserve-unknown-fields", true),
    ("x-kubernetes-embedded-resource", false),
    ("x-kubernetes-int-or-string", false),
    ("x-kubernetes-list-map-keys", false),
    ("x-kubernetes-list-type", false),
    ("x-kubernetes-map-type", false),
    ("x-kubernetes-validations", true),
];

/// Go's zero value test for a schema field as decoded: unset, null, false and "" are zero.
fn is_zero(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// `validateCustomResourceDefinitionValidation` for one `CustomResourceValidation`.
pub fn validate_validation(
    validation: Option<&Value>,
    status_enabled: bool,
    opts: &Options,
    path: &FieldPath,
    version: &str,
) -> Vec<FieldError> {
    let Some(schema) = validation.and_then(|v| set(v.get("openAPIV3Schema"))) else {
        return Vec::new();
    };
    let root = path.child("openAPIV3Schema");
    let mut errs = Vec::new();
    if status_enabled {
        for (field, allowed) in ROOT_FIELDS {
            if is_zero(schema.get(*field)) {
                continue;
            }
            if *field == "type" {
                if text(schema, "type") != "object" {
                    errs.push(FieldError::invalid(
                        &path.child("openAPIV3Schema.type"),
                        text(schema, "type"),
                        "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                    ));
                    break;
                }
                continue;
            }
            if !allowed {
                let names = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";
                errs.push(
                    FieldError::invalid(
                        &root,
                        Value::Null,
                        format!("only {names} fields are allowed at the root of the schema if the status subresource is enabled"),
                    )
                    .with_rendered_value(super::internal_json::schema(schema)),
                );
                break;
            }
        }
    }
    if flag(schema, "nullable") {
        errs.push(FieldError::forbidden(
            &path.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut cel = false;
    let total = RefCell::new(TotalCost::default());
    if opts.require_structural {
        let structural = structural_errors(schema, &root);
        if !structural.is_empty() {
            errs.extend(structural);
        } else {
            let defaults = validate_defaults(schema, &root, opts.require_pruned_defaults);
            if !defaults.is_empty() {
                errs.extend(defaults);
            } else {
                cel = true;
            }
        }
    }
    let ssv = Ssv {
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_meta: false,
        require_valid_type: opts.require_valid_property_type,
        forbid_old_self: None,
    };
    let ctx = CelCtx {
        cardinality: Some(1),
        total: &total,
        suppress_cost: opts.unchanged_schemas.iter().any(|v| v == version),
    };
    let found = openapi_schema(schema, &root, &ssv, true, opts, cel.then_some(ctx));
    errs.extend(found.schema);
    errs.extend(found.cel);
    if cel {
        errs.extend(total.into_inner().errors(&root));
    }
    errs
}

/// The most the rules of one CRD version may cost together (`StaticEstimatedCRDCostLimit`).
const CRD_COST_LIMIT: u64 = 100_000_000;
/// The most one rule may cost, times how often it can run (`StaticEstimatedCostLimit`).
const EXPRESSION_COST_LIMIT: u64 = 10_000_000;

/// `TotalCost`: the estimated cost of every rule of a schema, and the costliest four that each
/// take at least a hundredth of the limit.
#[derive(Default)]
struct TotalCost {
    total: u64,
    most_expensive: Vec<(FieldPath, u64)>,
}

impl TotalCost {
    fn observe(&mut self, path: FieldPath, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }

    fn errors(self, root: &FieldPath) -> Vec<FieldError> {
        if self.total <= CRD_COST_LIMIT {
            return Vec::new();
        }
        let mut errs: Vec<FieldError> = self
            .most_expensive
            .iter()
            .map(|(p, _)| {
                FieldError::forbidden(
                    p,
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                )
            })
            .collect();
        errs.push(FieldError::forbidden(
            root,
            celcheck::cost_error_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                self.total,
                CRD_COST_LIMIT,
            ),
        ));
        errs
    }
}

/// `CELSchemaContext`: where rules are compiled, how many times a node's rules can run at most
/// in one object (`None`: unbounded), and the schema's running cost total.
#[derive(Clone, Copy)]
struct CelCtx<'a> {
    cardinality: Option<u64>,
    total: &'a RefCell<TotalCost>,
    suppress_cost: bool,
}

impl<'a> CelCtx<'a> {
    /// The context of a child of `parent`: its cardinality times how many children the parent
    /// can have (`extractMaxElements`).
    fn child(self, parent: &Value) -> CelCtx<'a> {
        let factor = match text(parent, "type") {
            "object" if parent.get("additionalProperties").is_some() => {
                parent.get("maxProperties").and_then(Value::as_i64)
            }
            "array" => parent.get("maxItems").and_then(Value::as_i64),
            _ => Some(1),
        };
        CelCtx {
            cardinality: self
                .cardinality
                .zip(factor)
                .map(|(c, f)| c.saturating_mul(f.max(0) as u64)),
            ..self
        }
    }
}

/// `specStandardValidatorV3`: what is refused at one node, and what its children inherit.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_meta: bool,
    require_valid_type: bool,
    forbid_old_self: Option<FieldPath>,
}

impl Ssv {
    fn without_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_reason: reason.to_string(),
            ..self.clone()
        }
    }

    fn inside_meta(&self) -> Ssv {
        Ssv {
            inside_meta: true,
            ..self.clone()
        }
    }

    fn forbid_old_self(&self, path: &FieldPath) -> Ssv {
        if self.forbid_old_self.is_some() {
            return self.clone();
        }
        Ssv {
            forbid_old_self: Some(path.clone()),
            ..self.clone()
        }
    }

    fn validate(&self, s: &Value, path: &FieldPath) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ty = text(s, "type");
        if self.require_valid_type && !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
            errs.push(FieldError::not_supported(
                &path.child("type"),
                ty,
                OPENAPI_TYPES,
            ));
        }
        if set(s.get("default")).is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_string();
            if !self.disallow_reason.is_empty() {
                detail.push(' ');
                detail.push_str(&self.disallow_reason);
            }
            errs.push(FieldError::forbidden(&path.child("default"), detail));
        }
        if !text(s, "id").is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("id"),
                "id is not supported",
            ));
        }
        if set(s.get("additionalItems")).is_some() {
            errs.push(FieldError::forbidden(
                &path.child("additionalItems"),
                "additionalItems is not supported",
            ));
        }
        for (field, what) in [
            ("patternProperties", "patternProperties is not supported"),
            ("definitions", "definitions is not supported"),
        ] {
            if s.get(field)
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
            {
                errs.push(FieldError::forbidden(&path.child(field), what));
            }
        }
        if set(s.get("dependencies")).is_some() {
            errs.push(FieldError::forbidden(
                &path.child("dependencies"),
                "dependencies is not supported",
            ));
        }
        if set(s.get("$ref")).is_some() {
            errs.push(FieldError::forbidden(
                &path.child("$ref"),
                "$ref is not supported",
            ));
        }
        if ty == "null" {
            errs.push(FieldError::forbidden(
                &path.child("type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if s.get("items")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            errs.push(FieldError::forbidden(
                &path.child("items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_meta && flag(s, "x-kubernetes-embedded-resource") {
            errs.push(FieldError::forbidden(
                &path.child("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
        errs
    }
}

/// `OpenAPISchemaErrorList`: schema errors first, CEL errors after them.
#[derive(Default)]
struct Found {
    schema: Vec<FieldError>,
    cel: Vec<FieldError>,
}

impl Found {
    fn append(&mut self, other: Found) {
        self.schema.extend(other.schema);
        self.cel.extend(other.cel);
    }
}

const META_FIELDS: &[&str] = &["metadata", "kind", "apiVersion"];

/// `ValidateCustomResourceDefinitionOpenAPISchema`. `cel` is set where the rules are compiled
/// (the schema is structural with valid defaults, and the node is not inside a logical
/// junctor).
fn openapi_schema(
    s: &Value,
    path: &FieldPath,
    ssv: &Ssv,
    is_root: bool,
    opts: &Options,
    cel: Option<CelCtx<'_>>,
) -> Found {
    let mut found = Found::default();
    if !s.is_object() {
        return found;
    }
    found.schema.extend(ssv.validate(s, path));
    if flag(s, "uniqueItems") {
        found.schema.push(FieldError::forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(additional) = set(s.get("additionalProperties")) {
        let has_props = s
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_props && (additional.is_object() || additional == &Value::Bool(false)) {
            found.schema.push(FieldError::forbidden(
                &path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_meta {
            ssv.without_defaults("inside additionalProperties applying to object metadata")
        } else {
            ssv.clone()
        };
        if additional.is_object() {
            found.append(openapi_schema(
                additional,
                &path.child("additionalProperties"),
                &sub,
                false,
                opts,
                cel.map(|c| c.child(s)),
            ));
        }
    }
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    for (name, prop) in props(s) {
        let mut sub = ssv.clone();
        if !matches!(map_type, None | Some("granular" | "atomic")) {
            sub = sub.forbid_old_self(path);
        }
        if (is_root || embedded) && META_FIELDS.contains(&name.as_str()) {
            sub = sub.inside_meta();
            if is_root {
                sub = sub.without_defaults(&format!("in top-level {name}"));
            }
        }
        found.append(openapi_schema(
            prop,
            &path.child("properties").key(name),
            &sub,
            false,
            opts,
            cel.map(|c| c.child(s)),
        ));
    }
    if let Some(not) = set(s.get("not")) {
        found.append(openapi_schema(
            not,
            &path.child("not"),
            ssv,
            false,
            opts,
            None,
        ));
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (i, sub) in s
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            found.append(openapi_schema(
                sub,
                &path.child(junctor).index(i),
                ssv,
                false,
                opts,
                None,
            ));
        }
    }
    for (name, def) in s
        .get("definitions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        found.append(openapi_schema(
            def,
            &path.child("definitions").key(name),
            ssv,
            false,
            opts,
            None,
        ));
    }
    if let Some(items) = set(s.get("items")) {
        let sub = if text(s, "x-kubernetes-list-type") != "map" {
            ssv.forbid_old_self(path)
        } else {
            ssv.clone()
        };
        match items {
            Value::Array(list) => {
                for (i, item) in list.iter().enumerate() {
                    found.append(openapi_schema(
                        item,
                        &path.child("items").index(i),
                        &sub,
                        false,
                        opts,
                        cel.map(|c| c.child(s)),
                    ));
                }
            }
            item => found.append(openapi_schema(
                item,
                &path.child("items"),
                &sub,
                false,
                opts,
                cel.map(|c| c.child(s)),
            )),
        }
    }
    for (name, dep) in s
        .get("dependencies")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if dep.is_object() {
            found.append(openapi_schema(
                dep,
                &path.child("dependencies").key(name),
                ssv,
                false,
                opts,
                None,
            ));
        }
    }
    found.schema.extend(extension_errors(s, path, opts));
    found.schema.extend(rule_shape_errors(s, path));
    // Rules are compiled only when nothing is wrong with the schema at this node or below:
    // invalid schemas give CEL messages that would not help anyone.
    if found.schema.is_empty()
        && let Some(ctx) = cel
    {
        found.cel.extend(compile_rules(s, path, ssv, is_root, ctx));
    }
    found
}

/// The list-type, map-type and preserve-unknown-fields rules of one node.
fn extension_errors(s: &Value, path: &FieldPath, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    let ty = text(s, "type");
    let type_rule = |errs: &mut Vec<FieldError>, want: &str, ext: &str| {
        let detail = format!("must be {want} if {ext} is specified");
        if ty.is_empty() {
            errs.push(FieldError::required(&path.child("type"), detail));
        } else {
            errs.push(FieldError::invalid(&path.child("type"), ty, detail));
        }
    };
    let map_type = set(s.get("x-kubernetes-map-type"));
    if map_type.is_some() && ty != "object" {
        type_rule(&mut errs, "object", "x-kubernetes-map-type");
    }
    if let Some(m) = map_type
        && !matches!(m.as_str(), Some("atomic" | "granular"))
    {
        errs.push(FieldError::not_supported(
            &path.child("x-kubernetes-map-type"),
            m.clone(),
            &["atomic", "granular"],
        ));
    }
    let list_type = set(s.get("x-kubernetes-list-type"));
    let list = list_type.and_then(Value::as_str).unwrap_or("");
    if list_type.is_some() && ty != "array" {
        type_rule(&mut errs, "array", "x-kubernetes-list-type");
    } else if opts.require_atomic_set_type
        && list == "set"
        && let Some(items) = items_schema(s)
    {
        match text(items, "type") {
            "array" => {
                if let Some(t) = set(items.get("x-kubernetes-list-type"))
                    && t != "atomic"
                {
                    errs.push(FieldError::invalid(
                        &path.child("items").child("x-kubernetes-list-type"),
                        t.clone(),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
            }
            // Upstream prints the item's list type here (a nil pointer, mostly).
            "object" if text(items, "x-kubernetes-map-type") != "atomic" => {
                errs.push(FieldError::invalid(
                    &path.child("items").child("x-kubernetes-map-type"),
                    items
                        .get("x-kubernetes-list-type")
                        .cloned()
                        .unwrap_or(Value::Null),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(t) = list_type
        && !matches!(t.as_str(), Some("atomic" | "set" | "map"))
    {
        errs.push(FieldError::not_supported(
            &path.child("x-kubernetes-list-type"),
            t.clone(),
            &["atomic", "set", "map"],
        ));
    }
    let keys: Vec<&str> = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !keys.is_empty() {
        if list_type.is_none() {
            errs.push(FieldError::required(
                &path.child("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            ));
        } else if list != "map" {
            errs.push(FieldError::invalid(
                &path.child("x-kubernetes-list-type"),
                list,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            ));
        }
    }
    if list == "map" {
        if keys.is_empty() {
            errs.push(FieldError::required(
                &path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match s.get("items") {
            None | Some(Value::Null) => errs.push(FieldError::required(
                &path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(items @ Value::Array(_)) => errs.push(FieldError::invalid(
                &path.child("items"),
                items.clone(),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(items) => {
                let item_type = text(items, "type");
                if item_type != "object" {
                    errs.push(FieldError::invalid(
                        &path.child("items").child("type"),
                        item_type,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let keys_value = s
                        .get("x-kubernetes-list-map-keys")
                        .cloned()
                        .unwrap_or(Value::Null);
                    let mut seen = Vec::new();
                    for k in &keys {
                        match items.pointer(&format!(
                            "/properties/{}",
                            k.replace('~', "~0").replace('/', "~1")
                        )) {
                            Some(p) => {
                                if matches!(text(p, "type"), "array" | "object") {
                                    // Upstream prints the item's type, not the key's.
                                    errs.push(FieldError::invalid(
                                        &path.child("items").child("properties").key(k).child("type"),
                                        item_type,
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError::invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "entries must all be names of item properties",
                            )),
                        }
                        if seen.contains(k) {
                            errs.push(FieldError::invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "must not contain duplicate entries",
                            ));
                        }
                        seen.push(k);
                    }
                }
            }
        }
    }
    if opts.require_map_list_keys_map_set {
        errs.extend(map_list_keys_map_set(s, path));
    }
    errs
}

/// `validateMapListKeysMapSet`: items of sets and maps are not nullable; map keys are required
/// or defaulted, and not nullable.
fn map_list_keys_map_set(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(items) = items_schema(s) else {
        return Vec::new();
    };
    let list = text(s, "x-kubernetes-list-type");
    if list != "set" && list != "map" {
        return Vec::new();
    }
    let mut errs = Vec::new();
    if flag(items, "nullable") {
        errs.push(FieldError::forbidden(
            &path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list}"),
        ));
    }
    if list == "map" {
        let required: Vec<&str> = items
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for k in s
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let Some(prop) = items.get("properties").and_then(|p| p.get(k)) else {
                continue;
            };
            let kp = path.child("items").child("properties").key(k);
            if !required.contains(&k) && set(prop.get("default")).is_none() {
                errs.push(FieldError::required(
                    &kp.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if flag(prop, "nullable") {
                errs.push(FieldError::forbidden(
                    &kp.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}

const RULE_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// What each `x-kubernetes-validations` entry must look like, before its rule is compiled.
fn rule_shape_errors(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (i, rule) in rules.iter().enumerate() {
        let p = path.child("x-kubernetes-validations").index(i);
        let (r, message, expr, field_path) = (
            text(rule, "rule"),
            text(rule, "message"),
            text(rule, "messageExpression"),
            text(rule, "fieldPath"),
        );
        if r.trim().is_empty() {
            errs.push(FieldError::required(
                &p.child("rule"),
                "rule is not specified",
            ));
        } else if !message.is_empty() && message.trim().is_empty() {
            errs.push(FieldError::invalid(
                &p.child("message"),
                message,
                "must be non-empty if specified",
            ));
        } else if has_newlines(message.trim()) {
            errs.push(FieldError::invalid(
                &p.child("message"),
                message,
                "must not contain line breaks",
            ));
        } else if has_newlines(r.trim()) && message.trim().is_empty() {
            errs.push(FieldError::required(
                &p.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !expr.is_empty() && expr.trim().is_empty() {
            errs.push(FieldError::required(
                &p.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = set(rule.get("reason"))
            && !reason.as_str().is_some_and(|r| RULE_REASONS.contains(&r))
        {
            errs.push(FieldError::not_supported(
                &p.child("reason"),
                reason.clone(),
                RULE_REASONS,
            ));
        }
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                &p.child("fieldPath"),
                field_path,
                "must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errs.push(FieldError::invalid(
                &p.child("fieldPath"),
                field_path,
                "must not contain line breaks",
            ));
        }
        // Upstream checks the path whenever the schema converts to its structural form
        // (`pathValid`), whether or not that form passes ValidateStructural.
        if !field_path.is_empty()
            && converts_to_structural(s)
            && valid_field_path(field_path, s, true).is_err()
        {
            errs.push(FieldError::invalid(
                &p.child("fieldPath"),
                field_path,
                "must be a valid path",
            ));
        }
    }
    errs
}

/// Whether upstream's `NewStructural` accepts the schema: none of the keywords it refuses
/// anywhere, and no array form of `items`.
fn converts_to_structural(s: &Value) -> bool {
    !schema_has(s, &|n| {
        [
            "id",
            "$schema",
            "$ref",
            "patternProperties",
            "dependencies",
            "additionalItems",
            "definitions",
        ]
        .iter()
        .any(|k| set(n.get(*k)).is_some())
            || n.get("items").is_some_and(Value::is_array)
    })
}

/// Compiles the rules of one node as upstream's `cel.Compile` does, in its order for each rule:
/// the rule's estimated cost (times how often the node can occur) against the per-expression
/// limit, its compile errors (syntax, types — cel-go's text), the same for its
/// `messageExpression`, then `oldSelf` where old and new values cannot be paired and
/// `optionalOldSelf` on a rule that does not use `oldSelf`. Every cost goes to the schema's
/// total.
fn compile_rules(
    s: &Value,
    path: &FieldPath,
    ssv: &Ssv,
    is_root: bool,
    ctx: CelCtx<'_>,
) -> Vec<FieldError> {
    let Some(rules) = s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
    else {
        return Vec::new();
    };
    let Some(decl) = DeclType::from_schema(s, is_root || flag(s, "x-kubernetes-embedded-resource"))
    else {
        return Vec::new();
    };
    let self_type = CelType::of_decl(&decl, "selfType");
    // Unbounded: as many as fit in a request of the smallest serialized values.
    let cardinality = ctx
        .cardinality
        .unwrap_or((celcheck::MAX_REQUEST_SIZE_BYTES / (decl.min_serialized_size + 1)) as u64);
    let sizes = DeclSizes(decl);
    let mut errs = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let p = path.child("x-kubernetes-validations").index(i);
        let source = text(rule, "rule");
        let optional_old_self = rule.get("optionalOldSelf") == Some(&Value::Bool(true));
        let old_self_type = if optional_old_self {
            CelType::Optional(Box::new(self_type.clone()))
        } else {
            self_type.clone()
        };
        let vars = [("self", self_type.clone()), ("oldSelf", old_self_type)];
        let mut uses_old_self = false;
        if !source.trim().is_empty() {
            match celcheck::compile(source, &vars) {
                Err(issues) => errs.push(
                    FieldError::invalid(
                        &p.child("rule"),
                        Value::Null,
                        format!("compilation failed: {issues}"),
                    )
                    .with_rendered_value(super::internal_json::rule(rule)),
                ),
                Ok(checked) if is_concrete_but_not(checked.output(), &CelType::Bool) => errs.push(
                    FieldError::invalid(
                        &p.child("rule"),
                        Value::Null,
                        "cel expression must evaluate to a bool",
                    )
                    .with_rendered_value(super::internal_json::rule(rule)),
                ),
                Ok(checked) => {
                    let max = celcheck::estimate(&checked, &sizes).max;
                    let cost = if max == 0 {
                        0
                    } else {
                        max.saturating_mul(cardinality)
                    };
                    if !ctx.suppress_cost && cost > EXPRESSION_COST_LIMIT {
                        errs.push(FieldError::forbidden(
                            &p.child("rule"),
                            celcheck::cost_error_message(
                                "estimated rule cost",
                                cost,
                                EXPRESSION_COST_LIMIT,
                            ),
                        ));
                    }
                    ctx.total.borrow_mut().observe(p.child("rule"), cost);
                    uses_old_self = references(&checked.expr, "oldSelf");
                    errs.extend(message_expression_errors(rule, &p, &vars, &sizes, ctx));
                }
            }
        }
        if uses_old_self {
            if let Some(uncorrelatable) = &ssv.forbid_old_self {
                errs.push(FieldError::invalid(
                    &p.child("rule"),
                    source,
                    format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}"
                    ),
                ));
            }
        } else if let Some(optional) = set(rule.get("optionalOldSelf")) {
            errs.push(FieldError::invalid(
                &p.child("optionalOldSelf"),
                optional.clone(),
                "may not be set if oldSelf is not used in rule",
            ));
        }
    }
    errs
}

/// The compile errors and cost of a rule's `messageExpression` (its cost is not multiplied:
/// a message is built once per failure).
fn message_expression_errors(
    rule: &Value,
    p: &FieldPath,
    vars: &[(&str, CelType)],
    sizes: &DeclSizes,
    ctx: CelCtx<'_>,
) -> Vec<FieldError> {
    let source = text(rule, "messageExpression");
    if source.is_empty() {
        return Vec::new();
    }
    let path = p.child("messageExpression");
    let invalid = |detail: String| {
        vec![
            FieldError::invalid(&path, Value::Null, detail)
                .with_rendered_value(super::internal_json::rule(rule)),
        ]
    };
    match celcheck::compile(source, vars) {
        Err(issues) => invalid(format!("messageExpression compilation failed: {issues}")),
        Ok(checked) if is_concrete_but_not(checked.output(), &CelType::String) => {
            invalid("messageExpression must evaluate to a string".to_string())
        }
        Ok(checked) => {
            let cost = celcheck::estimate(&checked, sizes).max;
            let mut errs = Vec::new();
            if !ctx.suppress_cost && cost > EXPRESSION_COST_LIMIT {
                errs.push(FieldError::forbidden(
                    &path,
                    celcheck::cost_error_message(
                        "estimated messageExpression cost",
                        cost,
                        EXPRESSION_COST_LIMIT,
                    ),
                ));
            }
            ctx.total.borrow_mut().observe(path.clone(), cost);
            errs
        }
    }
}

/// Whether the checker knows `t` and it is not `want` (a `dyn` result is left to run time:
/// this checker gives `dyn` in places cel-go would know better).
fn is_concrete_but_not(t: &CelType, want: &CelType) -> bool {
    !t.is_dyn() && t != want
}

/// Whether the expression names the variable `name`.
fn references(e: &kube_cel::cel::IdedExpr, name: &str) -> bool {
    use kube_cel::cel::common::ast::{EntryExpr, Expr, MapExpr, StructExpr};
    match &e.expr {
        Expr::Ident(n) => n == name,
        Expr::Select(s) => references(&s.operand, name),
        Expr::Call(c) => {
            c.target.as_deref().is_some_and(|t| references(t, name))
                || c.args.iter().any(|a| references(a, name))
        }
        Expr::List(l) => l.elements.iter().any(|x| references(x, name)),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => {
            entries.iter().any(|en| match &en.expr {
                EntryExpr::MapEntry(me) => references(&me.key, name) || references(&me.value, name),
                EntryExpr::StructField(sf) => references(&sf.value, name),
            })
        }

        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .iter()
        .any(|x| references(x, name)),
        _ => false,
    }
}

/// `cel.ValidFieldPath`: the steps of a JSON path (`.a.b`, `['x']`) into the schema, and the
/// schema it reaches.
pub fn valid_field_path<'a>(
    json_path: &str,
    schema: &'a Value,
    allow_array_notation: bool,
) -> Result<(Vec<String>, &'a Value), String> {
    let mut node = schema;
    let mut steps = Vec::new();
    let tokens = tokenize(json_path);
    let mut it = tokens.iter().map(String::as_str);
    let descend = |node: &'a Value, name: &str| -> Result<&'a Value, String> {
        let has_props = node
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        if has_props {
            node.get("properties")
                .and_then(|p| p.get(name))
                .ok_or_else(|| "does not refer to a valid field".to_string())
        } else if let Some(a) = set(node.get("additionalProperties")) {
            Ok(a)
        } else {
            Err("does not refer to a valid field".into())
        }
    };
    while let Some(tok) = it.next() {
        match tok {
            "[" => {
                if !allow_array_notation {
                    return Err("array notation is not allowed".into());
                }
                let quoted = it.next().ok_or("unexpected end of JSON path")?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {quoted}"));
                }
                let name = quoted[1..quoted.len() - 1].replace("\\'", "'");
                node = descend(node, &name)?;
                steps.push(name);
                let close = it.next().ok_or("unexpected end of JSON path")?;
                if close != "]" {
                    return Err(format!("expected ] but got {close}"));
                }
            }
            "." => {
                let name = it.next().ok_or("unexpected end of JSON path")?;
                node = descend(node, name)?;
                steps.push(name.to_string());
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((steps, node))
}

/// The tokens of upstream's JSON path scanner: `.`, `[`, `]`, quoted strings and names.
fn tokenize(path: &str) -> Vec<String> {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            let mut j = i + 1;
            while j < b.len() && !(b[j] == b'\'' && b[j - 1] != b'\\') {
                j += 1;
            }
            let end = (j + 1).min(b.len());
            out.push(path[i..end].to_string());
            i = end;
        } else if matches!(b[i], b'.' | b'[' | b']') {
            out.push(path[i..i + 1].to_string());
            i += 1;
        } else {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b'.' | b'[' | b']') {
                j += 1;
            }
            out.push(path[i..j].to_string());
            i = j;
        }
    }
    out
}

// Structural schemas (pkg/apiserver/schema validation.go and complete.go).

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `ValidateStructural`: the invariants of a structural schema and the completeness of its
/// value validations, sorted by their text as upstream sorts them.
pub fn structural_errors(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = invariants(s, Level::Root, path);
    errs.extend(completeness(s, path));
    errs.sort_by_cached_key(ToString::to_string);
    errs
}

fn int_or_string_any_of(v: Option<&Value>) -> bool {
    v == Some(&json!([{"type": "integer"}, {"type": "string"}]))
}

fn invariants(s: &Value, level: Level, path: &FieldPath) -> Vec<FieldError> {
    if !s.is_object() {
        return Vec::new();
    }
    let mut errs = Vec::new();
    let ty = text(s, "type");
    if ty == "array" && set(s.get("items")).is_none() {
        errs.push(FieldError::required(
            &path.child("items"),
            "must be specified",
        ));
    }
    if let Some(items) = items_schema(s) {
        errs.extend(invariants(items, Level::Item, &path.child("items")));
    }
    for (name, prop) in props(s) {
        errs.extend(invariants(
            prop,
            Level::Field,
            &path.child("properties").key(name),
        ));
    }
    if set(s.get("additionalProperties")).is_some() {
        if level == Level::Root {
            errs.push(FieldError::forbidden(
                &path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(a) = additional_schema(s) {
            errs.extend(invariants(
                a,
                Level::Field,
                &path.child("additionalProperties"),
            ));
        }
    }
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = int_or_string_any_of(s.get("anyOf"));
    let skip_first_all_of_any_of = s
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|first| int_or_string_any_of(first.get("anyOf")));
    errs.extend(value_validation(
        s,
        skip_any_of,
        skip_first_all_of_any_of,
        level,
        path,
    ));

    if embedded && ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        if ty.is_empty() {
            errs.push(FieldError::required(&path.child("type"), detail));
        } else {
            errs.push(FieldError::invalid(&path.child("type"), ty, detail));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(&path.child("type"), detail));
    }
    if embedded && set(s.get("additionalProperties")).is_some() {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            &path.child("type"),
            ty,
            "must be object at the root",
        ));
    }
    let check_metadata = level == Level::Root || embedded;
    for field in ["kind", "apiVersion"] {
        if let Some(p) = s.get("properties").and_then(|p| p.get(field))
            && check_metadata
            && text(p, "type") != "string"
        {
            errs.push(FieldError::invalid(
                &path.child("properties").key(field).child("type"),
                text(p, "type"),
                "must be string",
            ));
        }
    }
    if let Some(meta) = s.get("properties").and_then(|p| p.get("metadata")) {
        let mp = path.child("properties").key("metadata");
        if check_metadata && text(meta, "type") != "object" {
            errs.push(FieldError::invalid(
                &mp.child("type"),
                text(meta, "type"),
                "must be object",
            ));
        }
        if level == Level::Root && !metadata_is_implicit(meta) {
            errs.push(FieldError::forbidden(
                &mp,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    let has_props = s
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if embedded && !preserve && !has_props {
        errs.push(FieldError::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    errs
}

/// Whether the root's `metadata` schema says nothing but its type, a default, and schemas for
/// `name` and `generateName`.
fn metadata_is_implicit(meta: &Value) -> bool {
    let Some(m) = meta.as_object() else {
        return true;
    };
    m.iter().all(|(k, v)| match k.as_str() {
        "type" | "default" => true,
        "properties" => v
            .as_object()
            .is_none_or(|p| p.is_empty() || p.keys().all(|k| k == "name" || k == "generateName")),
        _ => is_zero(Some(v)),
    })
}

/// `validateValueValidation`: the logical junctors hold nested value validations only.
fn value_validation(
    s: &Value,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    level: Level,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let each = |field: &str| {
        s.get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    };
    if !skip_any_of {
        for (i, v) in each("anyOf").iter().enumerate() {
            errs.extend(nested(v, false, level, &path.child("anyOf").index(i)));
        }
    }
    for (i, v) in each("allOf").iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        errs.extend(nested(v, skip, level, &path.child("allOf").index(i)));
    }
    for (i, v) in each("oneOf").iter().enumerate() {
        errs.extend(nested(v, false, level, &path.child("oneOf").index(i)));
    }
    if let Some(not) = set(s.get("not")) {
        errs.extend(nested(not, false, level, &path.child("not")));
    }
    let pattern = text(s, "pattern");
    if !pattern.is_empty()
        && let Err(e) = regex::Regex::new(pattern)
    {
        errs.push(FieldError::invalid(
            &path.child("pattern"),
            pattern,
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {}",
                e.to_string()
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
            ),
        ));
    }
    errs
}

/// `validateNestedValueValidation`: inside a junctor, only value validations may appear.
/// Nested value validations may not carry CEL rules (`AllowNestedXValidations` is off).
fn nested(v: &Value, skip_any_of: bool, level: Level, path: &FieldPath) -> Vec<FieldError> {
    if !v.is_object() {
        return Vec::new();
    }
    let mut errs = value_validation(v, skip_any_of, false, level, path);
    if let Some(items) = items_schema(v) {
        errs.extend(nested(items, false, level, &path.child("items")));
    }
    for (name, prop) in props(v) {
        errs.extend(nested(
            prop,
            false,
            Level::Field,
            &path.child("properties").key(name),
        ));
    }
    let forbidden = |errs: &mut Vec<FieldError>, field: &str, detail: &str| {
        errs.push(FieldError::forbidden(&path.child(field), detail));
    };
    if !text(v, "type").is_empty() {
        forbidden(&mut errs, "type", "must be empty to be structural");
    }
    if set(v.get("additionalProperties")).is_some() {
        forbidden(
            &mut errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if set(v.get("default")).is_some() {
        forbidden(&mut errs, "default", "must be undefined to be structural");
    }
    if !text(v, "title").is_empty() {
        forbidden(&mut errs, "title", "must be empty to be structural");
    }
    if !text(v, "description").is_empty() {
        forbidden(&mut errs, "description", "must be empty to be structural");
    }
    if flag(v, "nullable") {
        forbidden(&mut errs, "nullable", "must be false to be structural");
    }
    for field in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if flag(v, field) {
            forbidden(&mut errs, field, "must be false to be structural");
        }
    }
    if v.get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .is_some_and(|k| !k.is_empty())
    {
        forbidden(
            &mut errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    for field in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if set(v.get(field)).is_some() {
            forbidden(&mut errs, field, "must be undefined to be structural");
        }
    }
    if v.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
    {
        forbidden(
            &mut errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.get("properties")
        .and_then(|p| p.get("metadata"))
        .is_some()
    {
        errs.push(FieldError::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
    errs
}

/// `validateStructuralCompleteness`: every property and item a junctor names exists in the
/// structural part of the schema.
fn completeness(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    if !s.is_object() {
        return Vec::new();
    }
    junctor_completeness(s, Some(s), path, path)
}

fn junctor_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &FieldPath,
    v_path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(not) = set(v.get("not")) {
        errs.extend(nested_completeness(not, s, s_path, &v_path.child("not")));
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in v
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            errs.extend(nested_completeness(
                sub,
                s,
                s_path,
                &v_path.child(junctor).index(i),
            ));
        }
    }
    errs
}

fn nested_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &FieldPath,
    v_path: &FieldPath,
) -> Vec<FieldError> {
    let Some(s) = s else {
        return vec![FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        )];
    };
    let mut errs = junctor_completeness(v, Some(s), s_path, v_path);
    if let Some(items) = items_schema(v) {
        errs.extend(nested_completeness(
            items,
            items_schema(s),
            &s_path.child("items"),
            &v_path.child("items"),
        ));
    }
    for (name, prop) in props(v) {
        match s.get("properties").and_then(|p| p.get(name)) {
            None => errs.push(FieldError::required(
                &s_path.child("properties").key(name),
                format!(
                    "because it is defined in {}",
                    v_path.child("properties").key(name)
                ),
            )),
            Some(sp) => errs.extend(nested_completeness(
                prop,
                Some(sp),
                &s_path.child("properties").key(name),
                &v_path.child("properties").key(name),
            )),
        }
    }
    errs
}

// Defaults (pkg/apiserver/schema/defaulting validation.go).

/// `ValidateDefaults`: each default validates against its own schema, survives pruning, and
/// passes the node's CEL rules. The root counts as an embedded resource.
pub fn validate_defaults(s: &Value, path: &FieldPath, require_pruned: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    defaults_of(s, path, false, require_pruned, true, &mut errs);
    errs
}

fn defaults_of(
    s: &Value,
    path: &FieldPath,
    inside_meta: bool,
    require_pruned: bool,
    resource_root: bool,
    errs: &mut Vec<FieldError>,
) {
    if !s.is_object() {
        return;
    }
    let embedded = resource_root || flag(s, "x-kubernetes-embedded-resource");
    let inside_meta = inside_meta && !embedded;
    if let Some(default) = set(s.get("default")) {
        let dp = path.child("default");
        if !inside_meta && require_pruned {
            let mut pruned = default.clone();
            prune(&mut pruned, s, flag(s, "x-kubernetes-embedded-resource"));
            if &pruned != default {
                errs.push(FieldError::invalid(
                    &dp,
                    default.clone(),
                    "must not have unknown fields",
                ));
            }
        }
        let found = crate::validation::validate_at(s, default, Some(&dp));
        if !found.is_empty() {
            errs.extend(found);
        } else if let Some(rules) = crate::cel::Rules::compile(&Arc::new(s.clone())) {
            for e in rules.validate(default, Some(default)) {
                errs.push(prefixed(e, &dp));
            }
        }
    }
    if let Some(items) = items_schema(s) {
        defaults_of(
            items,
            &path.child("items"),
            inside_meta,
            require_pruned,
            false,
            errs,
        );
    }
    for (name, prop) in props(s) {
        let sub_meta = inside_meta || (embedded && META_FIELDS.contains(&name.as_str()));
        defaults_of(
            prop,
            &path.child("properties").key(name),
            sub_meta,
            require_pruned,
            false,
            errs,
        );
    }
}

/// A rule's error, found on a value that stands at `base` (its own path comes after it).
fn prefixed(mut e: FieldError, base: &FieldPath) -> FieldError {
    e.field = match e.field.as_str() {
        "" | "<nil>" | "[]" => base.to_string(),
        f if f.starts_with('[') => format!("{base}{f}"),
        f => format!("{base}.{f}"),
    };
    e
}

/// Structural pruning of a value: fields the schema does not specify go, unless it preserves
/// unknown fields; `apiVersion`, `kind` and `metadata` of an embedded resource stay.
fn prune(v: &mut Value, s: &Value, embedded: bool) {
    match v {
        Value::Object(map) => {
            if flag(s, "x-kubernetes-preserve-unknown-fields")
                && props(s).next().is_none()
                && additional_schema(s).is_none()
            {
                return;
            }
            let keep_unknown = flag(s, "x-kubernetes-preserve-unknown-fields")
                || s.get("additionalProperties") == Some(&Value::Bool(true));
            map.retain(|k, child| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                if let Some(p) = s.get("properties").and_then(|p| p.get(k)) {
                    prune(child, p, flag(p, "x-kubernetes-embedded-resource"));
                    return true;
                }
                if let Some(a) = additional_schema(s) {
                    prune(child, a, flag(a, "x-kubernetes-embedded-resource"));
                    return true;
                }
                keep_unknown
            });
        }
        Value::Array(items) => {
            if let Some(i) = items_schema(s) {
                for item in items {
                    prune(item, i, flag(i, "x-kubernetes-embedded-resource"));
                }
            }
        }
        _ => {}
    }
}

/// Whether a schema has a default that pruning would change (`schemaHasUnprunedDefaults`).
fn has_unpruned_defaults(s: &Value) -> bool {
    has_defaults(s)
        && structural_errors(s, &FieldPath::nil()).is_empty()
        && schema_has(s, &|n| {
            set(n.get("default")).is_some_and(|d| {
                let mut pruned = d.clone();
                prune(&mut pruned, n, flag(n, "x-kubernetes-embedded-resource"));
                &pruned != d
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn check(schema: Value) -> Vec<String> {
        let validation = json!({ "openAPIV3Schema": schema });
        messages(&validate_validation(
            Some(&validation),
            false,
            &Options::for_create(),
            &FieldPath::new("s"),
            "v1",
        ))
    }

    fn string_list_rule(rule: Value) -> Value {
        json!({"type": "object", "properties": {"f": {
            "type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [rule],
        }}})
    }

    #[test]
    fn rules_are_type_checked() {
        let errs = check(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"replicas": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.replicsa > 0"},
                {"rule": "self.replicas"},
                {"rule": "self.replicas > 0", "messageExpression": "self.replicas"},
            ],
        }}}));
        assert_eq!(errs.len(), 3, "{errs:#?}");
        assert!(errs[0].starts_with(
            "s.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        ));
        assert!(errs[0].ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'replicsa'\n | self.replicsa > 0\n | ....^"), "{}", errs[0]);
        assert!(errs[1].ends_with(": cel expression must evaluate to a bool"));
        assert!(errs[2].contains("x-kubernetes-validations[2].messageExpression: Invalid value: "));
        assert!(errs[2].ends_with(": messageExpression must evaluate to a string"));
        // The root's metadata is name and generateName only, as upstream declares it to rules.
        let errs = check(json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('a') && has(self.metadata.labels)"},
        ]}));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains("undefined field 'labels'"), "{errs:?}");
    }

    #[test]
    fn expensive_rules_are_refused_as_upstream_refuses_them() {
        // Upstream's "messageExpression exceeding per-expression estimated cost limit".
        let errs = check(string_list_rule(json!({"rule": "true",
            "messageExpression": "self[0] + self[1] + self[2] + self[3] + self[4] + self[5] + self[6] + self[7]"})));
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(errs[0].starts_with("s.openAPIV3Schema.properties[f].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of "), "{}", errs[0]);
        // "... exceeding per-CRD estimated cost limit": the expression, its share, the total.
        let errs = check(string_list_rule(json!({"rule": "true",
            "messageExpression": "string(self[0]) + string(self[1]) + string(self[2])"})));
        assert_eq!(errs.len(), 3, "{errs:#?}");
        assert!(errs[1].ends_with("messageExpression: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"));
        assert!(errs[2].starts_with("s.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of "));
        // Bounded lists and strings bring the same rule under the limit.
        let bounded = json!({"type": "object", "properties": {"f": {
            "type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 5},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x.lowerAscii() == y.lowerAscii()))"}],
        }}});
        assert_eq!(check(bounded.clone()), Vec::<String>::new());
        let mut unbounded = bounded;
        unbounded["properties"]["f"]
            .as_object_mut()
            .unwrap()
            .remove("maxItems");
        // Unbounded, it is over both limits.
        let errs = check(unbounded);
        assert_eq!(errs.len(), 3, "{errs:#?}");
        assert_eq!(
            errs[0],
            "s.openAPIV3Schema.properties[f].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
    }

    #[test]
    fn structural_errors_are_sorted_by_their_text() {
        assert_eq!(
            check(json!({"type": "object", "properties": {
                "b": {"type": "array"},
                "a": {},
                "c": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}})),
            [
                "s.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields",
                "s.openAPIV3Schema.properties[b].items: Required value: must be specified",
                "s.openAPIV3Schema.properties[c].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
            ]
        );
    }

    #[test]
    fn int_or_string_junctors_are_allowed_and_others_must_be_complete() {
        assert!(
            check(json!({"type": "object", "properties": {"p": {
                "x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]}}}))
            .is_empty()
        );
        assert_eq!(
            check(json!({"type": "object", "anyOf": [{"properties": {"zz": {"minimum": 1}}}]})),
            [
                "s.openAPIV3Schema.properties[zz]: Required value: because it is defined in s.openAPIV3Schema.anyOf[0].properties[zz]"
            ]
        );
    }

    #[test]
    fn defaults_validate_against_their_schema() {
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 2, "default": 1}}})
            ),
            // kube-openapi names the failing value relative to the default itself: the root, "".
            [
                "s.openAPIV3Schema.properties[n].default: Invalid value: 1:  in body should be greater than or equal to 2"
            ]
        );
    }

    #[test]
    fn list_map_keys_name_required_or_defaulted_scalar_properties() {
        assert_eq!(
            check(json!({"type": "object", "properties": {"l": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "o", "zz"],
                "items": {"type": "object", "required": ["k"], "properties": {
                    "k": {"type": "string"}, "o": {"type": "object"}}}}}})),
            [
                "s.openAPIV3Schema.properties[l].items.properties[o].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map",
                "s.openAPIV3Schema.properties[l].x-kubernetes-list-map-keys: Invalid value: [\"k\",\"o\",\"zz\"]: entries must all be names of item properties",
                "s.openAPIV3Schema.properties[l].items.properties[o].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ]
        );
    }

    #[test]
    fn a_rule_field_path_is_checked_even_in_a_schema_that_is_not_structural() {
        let found = check(json!({"type": "object", "properties": {
            "a": {},
            "spec": {"type": "object", "x-kubernetes-validations": [
                {"rule": "true", "fieldPath": ".nope"}]}}}));
        assert!(
            found.contains(&"s.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: \".nope\": must be a valid path".to_string()),
            "{found:?}"
        );
    }

    #[test]
    fn field_paths_walk_properties_and_maps() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "labels": {"type": "object", "additionalProperties": {"type": "integer"}}}});
        let (steps, found) = valid_field_path(".spec.a", &schema, false).unwrap();
        assert_eq!(
            (steps, found["type"].clone()),
            (vec!["spec".to_string(), "a".to_string()], json!("string"))
        );
        assert_eq!(
            valid_field_path(".labels['x.y']", &schema, true).unwrap().1["type"],
            "integer"
        );
        assert_eq!(
            valid_field_path(".labels['x']", &schema, false).unwrap_err(),
            "array notation is not allowed"
        );
        assert_eq!(
            valid_field_path(".spec.b", &schema, false).unwrap_err(),
            "does not refer to a valid field"
        );
    }
}
