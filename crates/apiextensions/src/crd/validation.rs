//! Validation of a CustomResourceDefinition object (upstream: apiextensions-apiserver
//! pkg/apis/apiextensions/validation/validation.go, `ValidateCustomResourceDefinition`,
//! `ValidateCustomResourceDefinitionUpdate`, `ValidateUpdateCustomResourceDefinitionStatus`):
//! group, scope, versions, names, printer columns, subresources, selectable fields, conversion,
//! stored versions, API approval of protected groups, `preserveUnknownFields`. The schemas
//! themselves are checked by [`super::schema_checks`].
//!
//! Upstream validates the internal form of the object, into which the v1 conversion moves a
//! schema, subresources or printer columns that every version shares to the top level of the
//! spec. Field paths therefore name `spec.validation.openAPIV3Schema...` when all versions
//! carry the same schema, and `spec.versions[i].schema.openAPIV3Schema...` otherwise; the
//! [`Internal`] view reproduces that split.

use apimachinery::validation::{
    FieldError, FieldPath, go_quote, is_dns1035_label, is_dns1123_subdomain,
};
use apiserver::util::webhook::{validate_webhook_service, validate_webhook_url};
use serde_json::Value;

use super::schema_checks::{self, Options};

/// The printer column types and formats upstream accepts (sorted, as `sets.NewString` lists).
const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
const MAX_SELECTABLE_FIELDS: usize = 8;
const APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

fn set(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn array(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Go's semantic equality of two optional fields: unset, null and empty compare equal.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if empty(a) || empty(b) {
        return empty(a) && empty(b);
    }
    a == b
}

/// One entry of `spec.versions` in the internal form: the per-version fields that all
/// versions shared are gone to the top level.
pub(super) struct Version<'a> {
    pub raw: &'a Value,
    pub name: &'a str,
    pub schema: Option<&'a Value>,
    pub subresources: Option<&'a Value>,
    pub columns: &'a [Value],
    pub selectable: &'a [Value],
}

/// The spec as upstream's internal `CustomResourceDefinitionSpec` holds it after conversion
/// from v1.
pub(super) struct Internal<'a> {
    pub spec: &'a Value,
    pub versions: Vec<Version<'a>>,
    /// `spec.validation`: the `CustomResourceValidation` every version shares.
    pub validation: Option<&'a Value>,
    pub subresources: Option<&'a Value>,
    pub columns: &'a [Value],
    pub selectable: &'a [Value],
    /// The first version's name (`spec.version`).
    pub version: &'a str,
}

impl<'a> Internal<'a> {
    pub fn of(crd: &'a Value) -> Internal<'a> {
        static NULL: Value = Value::Null;
        let spec = crd.get("spec").unwrap_or(&NULL);
        let raw = array(spec.get("versions"));
        let field = |v: &'a Value, f: &str| set(v.get(f));
        let identical = |f: &str| {
            raw.first()
                .is_some_and(|first| raw.iter().all(|v| same(v.get(f), first.get(f))))
        };
        let (schemas, subresources, columns, selectable) = (
            identical("schema"),
            identical("subresources"),
            identical("additionalPrinterColumns"),
            identical("selectableFields"),
        );
        let first = raw.first();
        Internal {
            spec,
            versions: raw
                .iter()
                .map(|v| Version {
                    raw: v,
                    name: text(v, "name"),
                    schema: if schemas { None } else { field(v, "schema") },
                    subresources: if subresources {
                        None
                    } else {
                        field(v, "subresources")
                    },
                    columns: if columns {
                        &[]
                    } else {
                        array(v.get("additionalPrinterColumns"))
                    },
                    selectable: if selectable {
                        &[]
                    } else {
                        array(v.get("selectableFields"))
                    },
                })
                .collect(),
            validation: first.filter(|_| schemas).and_then(|v| field(v, "schema")),
            subresources: first
                .filter(|_| subresources)
                .and_then(|v| field(v, "subresources")),
            columns: first
                .filter(|_| columns)
                .map(|v| array(v.get("additionalPrinterColumns")))
                .unwrap_or(&[]),
            selectable: first
                .filter(|_| selectable)
                .map(|v| array(v.get("selectableFields")))
                .unwrap_or(&[]),
            version: first.map(|v| text(v, "name")).unwrap_or(""),
        }
    }

    /// v1's `preserveUnknownFields` is a plain bool: unset is false.
    fn preserve_unknown_fields(&self) -> bool {
        self.spec
            .get("preserveUnknownFields")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Every schema of the spec: the shared one, then each version's.
    pub fn schemas(&self) -> impl Iterator<Item = &'a Value> + '_ {
        self.validation
            .into_iter()
            .chain(self.versions.iter().filter_map(|v| v.schema))
            .filter_map(|s| set(s.get("openAPIV3Schema")))
    }

    fn subresources_for(&self, version: &Version<'_>) -> Option<&'a Value> {
        if self.versions.iter().any(|v| v.subresources.is_some()) {
            self.versions
                .iter()
                .find(|v| v.name == version.name)
                .and_then(|v| v.subresources)
        } else {
            self.subresources
        }
    }

    fn any_status(&self) -> bool {
        has_status(self.subresources) || self.versions.iter().any(|v| has_status(v.subresources))
    }
}

fn has_status(subresources: Option<&Value>) -> bool {
    subresources.is_some_and(|s| set(s.get("status")).is_some())
}

fn is_condition_true(crd: &Value, kind: &str) -> bool {
    array(crd.pointer("/status/conditions"))
        .iter()
        .any(|c| text(c, "type") == kind && text(c, "status") == "True")
}

/// The `metadata.name` messages the CRD adds to the subdomain rules: the name is
/// `<plural>.<group>` (upstream's name function applies it to `generateName` as well).
pub fn name_errors(crd: &Value, name: &str) -> Vec<String> {
    let spec = crd.get("spec").unwrap_or(&Value::Null);
    let required = format!(
        "{}.{}",
        spec.pointer("/names/plural")
            .and_then(Value::as_str)
            .unwrap_or(""),
        text(spec, "group")
    );
    if name == required {
        Vec::new()
    } else {
        vec!["must be spec.names.plural+\".\"+spec.group".to_string()]
    }
}

/// `ValidateCustomResourceDefinition` without the object metadata (the store checks that).
pub fn validate_create(crd: &Value) -> Vec<FieldError> {
    let internal = Internal::of(crd);
    let opts = Options::for_create();
    let mut errs = validate_spec(&internal, &opts, &FieldPath::new("spec"));
    errs.extend(validate_status(crd));
    errs.extend(validate_stored_versions(crd, &internal));
    errs.extend(validate_api_approval(crd, None));
    errs.extend(validate_preserve_unknown_fields(crd, None));
    errs
}

/// `ValidateCustomResourceDefinitionUpdate` without the object metadata: the rules of a create,
/// loosened where the stored object already breaks them, plus what may not change.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let internal = Internal::of(new);
    let old_internal = Internal::of(old);
    let opts = Options::for_update(&internal, &old_internal, old);
    let spec_path = FieldPath::new("spec");
    let mut errs = validate_spec(&internal, &opts, &spec_path);
    let immutable = |path: &FieldPath, a: &Value, b: &Value| {
        (a != b).then(|| FieldError::invalid(path, a.clone(), "field is immutable"))
    };
    let at = |v: &Value, p: &str| v.pointer(p).cloned().unwrap_or(Value::from(""));
    if is_condition_true(old, "Established") {
        errs.extend(immutable(
            &spec_path.child("scope"),
            &at(new, "/spec/scope"),
            &at(old, "/spec/scope"),
        ));
        errs.extend(immutable(
            &spec_path.child("names").child("kind"),
            &at(new, "/spec/names/kind"),
            &at(old, "/spec/names/kind"),
        ));
    }
    errs.extend(immutable(
        &spec_path.child("group"),
        &at(new, "/spec/group"),
        &at(old, "/spec/group"),
    ));
    errs.extend(immutable(
        &spec_path.child("names").child("plural"),
        &at(new, "/spec/names/plural"),
        &at(old, "/spec/names/plural"),
    ));
    errs.extend(validate_status(new));
    errs.extend(validate_stored_versions(new, &internal));
    errs.extend(validate_api_approval(new, Some(old)));
    errs.extend(validate_preserve_unknown_fields(new, Some(old)));
    errs
}

/// `ValidateUpdateCustomResourceDefinitionStatus` without the metadata: the accepted names.
pub fn validate_status(crd: &Value) -> Vec<FieldError> {
    validate_names(
        crd.pointer("/status/acceptedNames").unwrap_or(&Value::Null),
        &FieldPath::new("status").child("acceptedNames"),
    )
}

fn validate_spec(internal: &Internal<'_>, opts: &Options, path: &FieldPath) -> Vec<FieldError> {
    let spec = internal.spec;
    let mut errs = Vec::new();
    let group = text(spec, "group");
    if group.is_empty() {
        errs.push(FieldError::required(&path.child("group"), ""));
    } else {
        let msgs = is_dns1123_subdomain(group);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("group"),
                group,
                msgs.join(","),
            ));
        } else if !group.contains('.') {
            errs.push(FieldError::invalid(
                &path.child("group"),
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    errs.extend(validate_enum(
        &path.child("scope"),
        text(spec, "scope"),
        &["Cluster", "Namespaced"],
    ));

    let preserve = internal.preserve_unknown_fields();
    let mut opts = opts.clone();
    // Pruning needs structural schemas.
    if !preserve {
        opts.require_structural = true;
    }
    if internal
        .validation
        .is_none_or(|v| set(v.get("openAPIV3Schema")).is_none())
    {
        for (i, v) in internal.versions.iter().enumerate() {
            let missing = v
                .schema
                .is_none_or(|s| set(s.get("openAPIV3Schema")).is_none());
            let schema_path = path
                .child("versions")
                .index(i)
                .child("schema")
                .child("openAPIV3Schema");
            if opts.require_openapi_schema {
                if missing {
                    errs.push(FieldError::required(&schema_path, ""));
                }
            } else if !preserve
                && missing
                && v.raw.get("served").and_then(Value::as_bool) == Some(true)
            {
                errs.push(FieldError::required(
                    &schema_path,
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    if internal.schemas().any(schema_checks::has_defaults) {
        opts.require_structural = true;
        if preserve {
            errs.push(FieldError::invalid(
                &path.child("preserveUnknownFields"),
                true,
                "must be false in order to use defaults in the schema",
            ));
        }
    }
    if internal
        .schemas()
        .any(schema_checks::has_kubernetes_extensions)
    {
        opts.require_structural = true;
    }

    let mut storage = 0;
    let mut seen = std::collections::HashSet::new();
    let mut unique = true;
    for (i, version) in internal.versions.iter().enumerate() {
        let vpath = path.child("versions").index(i);
        if version.raw.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        if !seen.insert(version.name) {
            unique = false;
        }
        let msgs = is_dns1035_label(version.name);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &vpath.child("name"),
                version.name,
                msgs.join(","),
            ));
        }
        let status = has_status(internal.subresources_for(version));
        errs.extend(validate_version(version, &vpath, status, &opts));
    }

    // The v1 form cannot express the internal form's conflicts between top-level and
    // per-version fields (the conversion moves only what all versions share), so upstream's
    // checks of them never fire for it and are left out.
    if !unique {
        errs.push(versions_error(
            path,
            internal,
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(versions_error(
            path,
            internal,
            "must have exactly one version marked as storage version",
        ));
    }
    // `spec.version` is the first version's name in the internal form.
    if !internal.version.is_empty() {
        let msgs = is_dns1035_label(internal.version);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("version"),
                internal.version,
                msgs.join(","),
            ));
        }
    }

    for (field, value) in [
        ("plural", "/names/plural"),
        ("singular", "/names/singular"),
        ("kind", "/names/kind"),
        ("listKind", "/names/listKind"),
    ] {
        if spec
            .pointer(value)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(FieldError::required(&path.child("names").child(field), ""));
        }
    }
    errs.extend(validate_names(
        spec.get("names").unwrap_or(&Value::Null),
        &path.child("names"),
    ));
    errs.extend(schema_checks::validate_validation(
        internal.validation,
        internal.any_status(),
        &opts,
        &path.child("validation"),
        internal.version,
    ));
    errs.extend(validate_subresources(
        internal.subresources,
        &path.child("subresources"),
    ));
    for (i, col) in internal.columns.iter().enumerate() {
        errs.extend(validate_column(
            col,
            &path.child("additionalPrinterColumns").index(i),
        ));
    }
    if !internal.selectable.is_empty() {
        match internal
            .validation
            .and_then(|v| set(v.get("openAPIV3Schema")))
        {
            None => errs.push(FieldError::invalid(
                &path.child("selectableFields"),
                "",
                "may only be set when validations.schema is included",
            )),
            Some(schema) => errs.extend(validate_selectable_fields(
                internal.selectable,
                schema,
                &path.child("selectableFields"),
                &opts,
                "",
            )),
        }
    }

    let conversion = set(spec.get("conversion"));
    if let Some(c) = conversion
        && text(c, "strategy") != "None"
        && preserve
    {
        errs.push(FieldError::invalid(
            &path.child("conversion").child("strategy"),
            text(c, "strategy"),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    errs.extend(validate_conversion(
        conversion,
        &path.child("conversion"),
        &opts,
    ));
    errs
}

fn versions_error(path: &FieldPath, internal: &Internal<'_>, detail: &str) -> FieldError {
    // Go's nil slice: no `versions` at all shows as `null`, an empty list as `[]`.
    let rendered = match internal.spec.get("versions") {
        None | Some(Value::Null) => "null".to_string(),
        Some(_) => super::internal_json::versions(&internal.versions),
    };
    FieldError::invalid(&path.child("versions"), Value::Null, detail).with_rendered_value(rendered)
}

fn validate_enum(path: &FieldPath, value: &str, accepted: &[&str]) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    if accepted.contains(&value) {
        return Vec::new();
    }
    vec![FieldError::not_supported(path, value, accepted)]
}

fn validate_version(
    version: &Version<'_>,
    path: &FieldPath,
    status: bool,
    opts: &Options,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let deprecated = version.raw.get("deprecated").and_then(Value::as_bool) == Some(true);
    let warning = version
        .raw
        .get("deprecationWarning")
        .and_then(Value::as_str);
    for e in deprecation_warning_errors(deprecated, warning) {
        errs.push(FieldError::invalid(
            &path.child("deprecationWarning"),
            warning.map(Value::from).unwrap_or(Value::Null),
            e,
        ));
    }
    errs.extend(schema_checks::validate_validation(
        version.schema,
        status,
        opts,
        &path.child("schema"),
        version.name,
    ));
    errs.extend(validate_subresources(
        version.subresources,
        &path.child("subresources"),
    ));
    for (i, col) in version.columns.iter().enumerate() {
        errs.extend(validate_column(
            col,
            &path.child("additionalPrinterColumns").index(i),
        ));
    }
    if !version.selectable.is_empty() {
        match version.schema.and_then(|s| set(s.get("openAPIV3Schema"))) {
            None => errs.push(FieldError::invalid(
                &path.child("selectableFields"),
                "",
                "may only be set when `version.schema.openAPIV3Schema` is not included",
            )),
            Some(schema) => errs.extend(validate_selectable_fields(
                version.selectable,
                schema,
                &path.child("selectableFields"),
                opts,
                version.name,
            )),
        }
    }
    errs
}

fn deprecation_warning_errors(deprecated: bool, warning: Option<&str>) -> Vec<String> {
    if !deprecated && warning.is_some() {
        return vec!["can only be set for deprecated versions".into()];
    }
    let Some(w) = warning else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if w.len() > 256 {
        out.push("must be <= 256 characters long".into());
    }
    if w.is_empty() {
        out.push("must not be an empty string".into());
    }
    for (i, c) in w.char_indices() {
        if c.is_control() {
            out.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
        if !is_go_printable(c) {
            out.push(format!(
                "must only contain printable UTF-8 characters; non-printable character found at index {i}"
            ));
            break;
        }
    }
    out
}

/// Go's `unicode.IsPrint`, near enough: letters, marks, numbers, punctuation, symbols and the
/// ASCII space; not other spaces, controls, format or private-use characters.
fn is_go_printable(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || ('\u{200b}'..='\u{200f}').contains(&c))
}

/// `ValidateCustomResourceDefinitionNames`, for `spec.names` and `status.acceptedNames`.
fn validate_names(names: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in ["plural", "singular"] {
        let v = text(names, field);
        let msgs = is_dns1035_label(v);
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(&path.child(field), v, msgs.join(",")));
        }
    }
    for field in ["kind", "listKind"] {
        let v = text(names, field);
        let msgs = is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child(field),
                v,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    for (i, short) in array(names.get("shortNames")).iter().enumerate() {
        let s = short.as_str().unwrap_or("");
        let msgs = is_dns1035_label(s);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("shortNames").index(i),
                s,
                msgs.join(","),
            ));
        }
    }
    let kind = text(names, "kind");
    if !kind.is_empty() && kind == text(names, "listKind") {
        errs.push(FieldError::invalid(
            &path.child("listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in array(names.get("categories")).iter().enumerate() {
        let s = category.as_str().unwrap_or("");
        let msgs = is_dns1035_label(s);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("categories").index(i),
                s,
                msgs.join(","),
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceColumnDefinition`.
fn validate_column(col: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(col, "name").is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let types = format!("must be one of {}", COLUMN_TYPES.join(","));
    let ty = text(col, "type");
    if ty.is_empty() {
        errs.push(FieldError::required(&path.child("type"), types));
    } else if !COLUMN_TYPES.contains(&ty) {
        errs.push(FieldError::invalid(&path.child("type"), ty, types));
    }
    let format = text(col, "format");
    if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
        errs.push(FieldError::invalid(
            &path.child("format"),
            format,
            format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    let json_path = text(col, "jsonPath");
    if json_path.is_empty() {
        errs.push(FieldError::required(&path.child("JSONPath"), ""));
    } else {
        errs.extend(validate_simple_json_path(
            json_path,
            &path.child("JSONPath"),
        ));
    }
    errs
}

fn validate_simple_json_path(s: &str, path: &FieldPath) -> Vec<FieldError> {
    if s.is_empty() {
        return vec![FieldError::invalid(path, s, "must not be empty")];
    }
    if !s.starts_with('.') {
        return vec![FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        )];
    }
    Vec::new()
}

/// `ValidateCustomResourceDefinitionSubresources`: the scale paths.
fn validate_subresources(subresources: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(scale) = subresources.and_then(|s| set(s.get("scale"))) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    for (field, prefix, under) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = path.child(&format!("scale.{field}"));
        let v = text(scale, field);
        if v.is_empty() {
            errs.push(FieldError::required(&p, ""));
            continue;
        }
        let simple = validate_simple_json_path(v, &p);
        if !simple.is_empty() {
            errs.extend(simple);
        } else if !v.starts_with(prefix) {
            errs.push(FieldError::invalid(&p, v, under));
        }
    }
    let selector = text(scale, "labelSelectorPath");
    if !selector.is_empty() {
        let p = path.child("scale.labelSelectorPath");
        let simple = validate_simple_json_path(selector, &p);
        if !simple.is_empty() {
            errs.extend(simple);
        } else if !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
            // Upstream passes the *string pointer, which its printer dereferences.
            errs.push(FieldError::invalid(
                &p,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceSelectableFields`: paths into the schema, to a string, boolean or
/// integer outside metadata, unique, at most eight.
fn validate_selectable_fields(
    fields: &[Value],
    schema: &Value,
    path: &FieldPath,
    opts: &Options,
    version: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut unique = Vec::<String>::new();
    for (i, f) in fields.iter().enumerate() {
        let p = path.index(i).child("jsonPath");
        let json_path = text(f, "jsonPath");
        if json_path.is_empty() {
            errs.push(FieldError::required(&p, ""));
            continue;
        }
        let (steps, found) = match schema_checks::valid_field_path(json_path, schema, false) {
            Ok(found) => found,
            Err(why) => {
                errs.push(FieldError::invalid(
                    &p,
                    json_path,
                    format!("is an invalid path: {why}"),
                ));
                continue;
            }
        };
        if steps.first().map(String::as_str) == Some("metadata") {
            errs.push(FieldError::invalid(
                &p,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            found.get("type").and_then(Value::as_str),
            Some("string" | "boolean" | "integer")
        ) {
            errs.push(FieldError::invalid(
                &p,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        let key = steps.join(".");
        if unique.contains(&key) {
            errs.push(FieldError::duplicate(&p, json_path));
        } else {
            unique.push(key);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS && !opts.too_many_selectable_fields_allowed(version) {
        errs.push(FieldError::too_many(
            path,
            Some(unique.len() as i64),
            Some(MAX_SELECTABLE_FIELDS as i64),
        ));
    }
    errs
}

/// `validateCustomResourceConversion`.
fn validate_conversion(
    conversion: Option<&Value>,
    path: &FieldPath,
    opts: &Options,
) -> Vec<FieldError> {
    let Some(c) = conversion else {
        return Vec::new();
    };
    let mut errs = validate_enum(
        &path.child("strategy"),
        text(c, "strategy"),
        &["None", "Webhook"],
    );
    let webhook = set(c.get("webhook"));
    let client = webhook.and_then(|w| set(w.get("clientConfig")));
    let review_versions = webhook.and_then(|w| set(w.get("conversionReviewVersions")));
    // The internal form holds the client configuration at `webhookClientConfig` and the
    // review versions beside it, so upstream's paths name them there.
    let cc_path = path.child("webhookClientConfig");
    if text(c, "strategy") == "Webhook" {
        match client {
            None => errs.push(FieldError::required(
                &cc_path,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = set(cc.get("url"));
                let service = set(cc.get("service"));
                match (url, service) {
                    (Some(u), None) => errs.extend(validate_webhook_url(
                        u.as_str().unwrap_or(""),
                        &cc_path.child("url"),
                    )),
                    (None, Some(s)) => {
                        errs.extend(validate_webhook_service(s, &cc_path.child("service")))
                    }
                    _ => errs.push(FieldError::required(
                        &cc_path,
                        "exactly one of url or service is required",
                    )),
                }
                let bundle = text(cc, "caBundle");
                if !bundle.is_empty() && !opts.allow_invalid_ca_bundle {
                    errs.extend(validate_ca_bundle(bundle, &cc_path.child("caBundle")));
                }
            }
        }
        errs.extend(validate_review_versions(
            array(review_versions),
            opts.require_recognized_review_version,
            &path.child("conversionReviewVersions"),
        ));
    } else {
        if client.is_some() {
            errs.push(FieldError::forbidden(
                &cc_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !array(review_versions).is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// Whether a base64 CA bundle holds PEM certificates.
pub(super) fn ca_bundle_is_valid(bundle_b64: &str) -> bool {
    validate_ca_bundle(bundle_b64, &FieldPath::nil()).is_empty()
}

/// `webhook.ValidateCABundle`: the bundle must hold PEM certificates (client-go's transport
/// refuses anything else).
fn validate_ca_bundle(bundle_b64: &str, path: &FieldPath) -> Vec<FieldError> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(bundle_b64)
        .unwrap_or_default();
    let pem = String::from_utf8_lossy(&bytes);
    if pem.contains("-----BEGIN CERTIFICATE-----") && pem.contains("-----END CERTIFICATE-----") {
        return Vec::new();
    }
    // Upstream's bad value is the decoded bytes, which Go's JSON encoder writes as base64.
    vec![FieldError::invalid(
        path,
        bundle_b64,
        "unable to load root certificates: unable to parse bytes as PEM block",
    )]
}

/// The ConversionReview versions this server understands.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

fn validate_review_versions(
    versions: &[Value],
    require_recognized: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    if versions.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut seen = Vec::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let s = v.as_str().unwrap_or("");
        if seen.contains(&s) {
            errs.push(FieldError::invalid(&path.index(i), s, "duplicate version"));
            continue;
        }
        seen.push(s);
        for m in is_dns1035_label(s) {
            errs.push(FieldError::invalid(&path.index(i), s, m));
        }
        accepted |= REVIEW_VERSIONS.contains(&s);
    }
    if require_recognized && !accepted {
        errs.push(FieldError::invalid(
            path,
            Value::from(seen),
            format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
fn validate_stored_versions(crd: &Value, internal: &Internal<'_>) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("storedVersions");
    let stored: Vec<&str> = array(crd.pointer("/status/storedVersions"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if stored.is_empty() {
        let shown = crd
            .pointer("/status/storedVersions")
            .filter(|v| v.is_array())
            .cloned()
            .unwrap_or(Value::Null);
        return vec![FieldError::invalid(
            &path,
            shown,
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    let mut remaining: Vec<(usize, &str)> = stored.iter().copied().enumerate().collect();
    for v in &internal.versions {
        let found = remaining.iter().position(|(_, s)| *s == v.name);
        if v.raw.get("storage").and_then(Value::as_bool) == Some(true) && found.is_none() {
            errs.push(FieldError::invalid(
                &path,
                Value::from(stored.clone()),
                format!("must have the storage version {}", v.name),
            ));
        }
        if let Some(i) = found {
            remaining.remove(i);
        }
    }
    for (i, v) in remaining {
        errs.push(FieldError::invalid(
            &path.index(i),
            v,
            format!(
                "missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
            ),
        ));
    }
    errs
}

#[derive(PartialEq, Clone, Copy)]
enum Approval {
    Invalid,
    Approved,
    Bypassed,
    Missing,
}

fn approval_state(crd: &Value) -> (Approval, String) {
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(APPROVAL_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    let quoted = go_quote(APPROVAL_ANNOTATION);
    if annotation.is_empty() {
        return (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {quoted}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    if annotation.starts_with("unapproved") {
        return (
            Approval::Bypassed,
            format!("not approved: {}", go_quote(annotation)),
        );
    }
    // `url.ParseRequestURI` with a scheme and a host.
    if let Some((scheme, rest)) = annotation.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && rest
            .split(['/', '?', '#'])
            .next()
            .is_some_and(|h| !h.is_empty())
    {
        return (Approval::Approved, format!("approved in {annotation}"));
    }
    (
        Approval::Invalid,
        format!(
            "protected groups must have approval annotation {quoted} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

/// `validateAPIApproval`: groups under `k8s.io` and `kubernetes.io` need the approval
/// annotation, unless an update leaves its state as it was.
fn validate_api_approval(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let protected = group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io");
    if !protected {
        return Vec::new();
    }
    let (state, reason) = approval_state(crd);
    if old.is_some_and(|o| approval_state(o).0 == state) {
        return Vec::new();
    }
    let path = FieldPath::new("metadata")
        .child("annotations")
        .key(APPROVAL_ANNOTATION);
    let value = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(APPROVAL_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    match state {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![FieldError::required(&path, reason)],
        Approval::Invalid => vec![FieldError::invalid(&path, value, reason)],
    }
}

/// `validatePreserveUnknownFields`: it may not be set to true (unless it already was).
fn validate_preserve_unknown_fields(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let preserve = |c: &Value| {
        c.pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
    };
    if old.and_then(preserve) == Some(true) || preserve(crd) != Some(true) {
        return Vec::new();
    }
    vec![FieldError::invalid(
        &FieldPath::new("spec").child("preserveUnknownFields"),
        true,
        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "conversion": {"strategy": "None"},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"storedVersions": ["v1"]}})
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn established(mut c: Value) -> Value {
        c["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
        c
    }

    #[test]
    fn a_valid_crd_passes() {
        assert_eq!(messages(&validate_create(&crd())), Vec::<String>::new());
    }

    #[test]
    fn a_shared_schema_is_reported_at_the_top_level_and_distinct_ones_per_version() {
        let mut c = crd();
        for v in 0..2 {
            c["spec"]["versions"][v]["schema"]["openAPIV3Schema"]["properties"] =
                json!({"a": {"type": "array"}});
        }
        assert_eq!(
            messages(&validate_create(&c)),
            [
                "spec.validation.openAPIV3Schema.properties[a].items: Required value: must be specified"
            ]
        );
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("older");
        assert_eq!(
            messages(&validate_create(&c)),
            [
                "spec.versions[0].schema.openAPIV3Schema.properties[a].items: Required value: must be specified",
                "spec.versions[1].schema.openAPIV3Schema.properties[a].items: Required value: must be specified",
            ]
        );
    }

    #[test]
    fn scope_and_kind_are_immutable_once_established_group_and_plural_always() {
        let old = crd();
        let mut new = crd();
        new["spec"]["scope"] = json!("Cluster");
        new["spec"]["names"]["kind"] = json!("Gadget");
        new["spec"]["names"]["listKind"] = json!("GadgetList");
        assert!(validate_update(&new, &old).is_empty());
        assert_eq!(
            messages(&validate_update(&new, &established(old.clone()))),
            [
                "spec.scope: Invalid value: \"Cluster\": field is immutable",
                "spec.names.kind: Invalid value: \"Gadget\": field is immutable",
            ]
        );
        let mut renamed = crd();
        renamed["spec"]["names"]["plural"] = json!("gadgets");
        assert_eq!(
            messages(&validate_update(&renamed, &old)),
            ["spec.names.plural: Invalid value: \"gadgets\": field is immutable"]
        );
    }

    #[test]
    fn a_stored_version_stays_in_spec_versions() {
        let mut c = crd();
        c["status"]["storedVersions"] = json!(["v1beta1", "v1"]);
        c["spec"]["versions"].as_array_mut().unwrap().remove(0);
        assert_eq!(
            messages(&validate_create(&c)),
            [
                "status.storedVersions[0]: Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"
            ]
        );
    }

    #[test]
    fn an_unchanged_approval_state_is_not_checked_again() {
        let mut c = crd();
        c["metadata"]["name"] = json!("widgets.x.k8s.io");
        c["spec"]["group"] = json!("x.k8s.io");
        c["metadata"]["annotations"] = json!({APPROVAL_ANNOTATION: "bogus"});
        assert_eq!(validate_create(&c).len(), 1);
        let mut new = c.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        assert!(validate_update(&new, &c).is_empty());
        new["metadata"]["annotations"] =
            json!({APPROVAL_ANNOTATION: "https://github.com/kubernetes/enhancements/pull/1111"});
        assert!(validate_update(&new, &c).is_empty());
        new["metadata"]["annotations"] = json!({APPROVAL_ANNOTATION: "unapproved, testing"});
        assert!(validate_create(&new).is_empty());
    }

    #[test]
    fn the_name_is_plural_dot_group() {
        assert!(name_errors(&crd(), "widgets.example.com").is_empty());
        assert_eq!(
            name_errors(&crd(), "gadgets.example.com"),
            ["must be spec.names.plural+\".\"+spec.group"]
        );
    }
}
