//! Admission registration: webhook configurations (validating and mutating), admission policies
//! (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) and their bindings (upstream:
//! pkg/apis/admissionregistration/v1/defaults.go, pkg/apis/admissionregistration/validation and
//! pkg/registry/admissionregistration).
//!
//! Defaults: a webhook fails closed (`Fail`), matches equivalent versions, selects every
//! namespace and object, waits 10 s and (mutating) is not reinvoked; a rule's scope is `*`; a
//! service reference uses port 443. Policies fail closed and their match resources default as a
//! webhook's do.
//!
//! Validation is upstream's structural part: names, rules, enums, counts, selectors, client
//! configurations, parameter kinds and references, validation actions, mutations. CEL
//! expressions are compiled in the admission environment (`apiserver::admission::compile`) as
//! upstream's validation compiles them: match conditions, variables, validations, messages and
//! audit annotations must type-check and return what their field needs, refused with
//! upstream's details (`compilation failed:` and cel-go's issues, `must evaluate to ...`). A
//! mutating policy's mutations are only parsed: their `Object{...}` and `JSONPatch{...}` types
//! are not declared to the checker.

use crate::strategies::struct_field;
use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, is_c_identifier, is_dns1035_label,
    is_dns1123_subdomain, is_fully_qualified_name, is_path_segment_name, is_qualified_name,
    is_valid_condition_reason, validate_label_name, validate_label_selector,
};
use apiserver::admission::compile::{Compiler, Declarations, returns};
use apiserver::registry::Strategy;
use apiserver::util::webhook::{validate_webhook_service, validate_webhook_url};
use serde_json::{Map, Value, json};

use super::fields::{int_at, json_list, list_at, set_at, str_at, strs_at};

// ---------------------------------------------------------------------------------------------
// Upstream's value sets, each sorted as Go's `sets.String.List()` prints them.
// ---------------------------------------------------------------------------------------------

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const NO_SIDE_EFFECT_CLASSES: &[&str] = &["None", "NoneOnDryRun"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// A mutating policy cannot act on DELETE.
const MUTATING_OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const VALIDATION_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
/// AdmissionReview versions this server (and the one before it) understands.
const ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

const MAX_MATCH_CONDITIONS: i64 = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// 5 KiB: less than an audit annotation value's limit, as concatenations grow.
const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

// ---------------------------------------------------------------------------------------------
// Defaults.
// ---------------------------------------------------------------------------------------------

fn default_str(obj: &mut Map<String, Value>, field: &str, value: &str) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.into(), json!(value));
    }
}

fn default_empty_object(obj: &mut Map<String, Value>, field: &str) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.into(), json!({}));
    }
}

/// `SetDefaults_Rule` on each rule of a list.
fn default_rule_scopes(rules: Option<&mut Value>) {
    for rule in rules
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        default_str(rule, "scope", "*");
    }
}

/// `SetDefaults_MatchResources`, with the scopes of its rules.
fn default_match_resources(mr: Option<&mut Value>) {
    let Some(mr) = mr.and_then(Value::as_object_mut) else {
        return;
    };
    default_str(mr, "matchPolicy", "Equivalent");
    default_empty_object(mr, "namespaceSelector");
    default_empty_object(mr, "objectSelector");
    default_rule_scopes(mr.get_mut("resourceRules"));
    default_rule_scopes(mr.get_mut("excludeResourceRules"));
}

/// `SetDefaults_ValidatingWebhook` / `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`,
/// `SetDefaults_ServiceReference`.
fn default_webhook(hook: &mut Map<String, Value>, mutating: bool) {
    default_str(hook, "failurePolicy", "Fail");
    default_str(hook, "matchPolicy", "Equivalent");
    default_empty_object(hook, "namespaceSelector");
    default_empty_object(hook, "objectSelector");
    if hook.get("timeoutSeconds").is_none_or(Value::is_null) {
        hook.insert("timeoutSeconds".into(), json!(10));
    }
    if mutating {
        default_str(hook, "reinvocationPolicy", "Never");
    }
    default_rule_scopes(hook.get_mut("rules"));
    if let Some(service) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
        && service.get("port").is_none_or(Value::is_null)
    {
        service.insert("port".into(), json!(443));
    }
}

// ---------------------------------------------------------------------------------------------
// Rules.
// ---------------------------------------------------------------------------------------------

fn has_wildcard(values: &[&str]) -> bool {
    values.contains(&"*")
}

/// `validateResources`: resources with subresources, where wildcards may not overlap.
fn validate_resources(resources: &[&str], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    // `x/*` seen, `*/x` seen.
    let mut wildcard_sub_of: Vec<&str> = Vec::new();
    let mut wildcard_res_for: Vec<&str> = Vec::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut without_subresource = false;
    for (i, r) in resources.iter().enumerate() {
        if r.is_empty() {
            errs.push(FieldError::required(&path.index(i), ""));
            continue;
        }
        double_wildcard |= *r == "*/*";
        single_wildcard |= *r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            // Upstream keeps only the last such resource's answer.
            without_subresource = *r != "*";
            continue;
        };
        if wildcard_sub_of.contains(&res) {
            errs.push(FieldError::invalid(
                &path.index(i),
                *r,
                format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if wildcard_res_for.contains(&sub) {
            errs.push(FieldError::invalid(
                &path.index(i),
                *r,
                format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            wildcard_sub_of.push(res);
        }
        if res == "*" {
            wildcard_res_for.push(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errs.push(FieldError::invalid(
            path,
            json_list(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_subresource {
        errs.push(FieldError::invalid(
            path,
            json_list(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

/// `validateRule` (subresources allowed, as every caller in v1 has it).
fn validate_rule(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let groups = strs_at(rule, "apiGroups");
    if groups.is_empty() {
        errs.push(FieldError::required(&path.child("apiGroups"), ""));
    }
    if groups.len() > 1 && has_wildcard(&groups) {
        errs.push(FieldError::invalid(
            &path.child("apiGroups"),
            json_list(&groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = strs_at(rule, "apiVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(&path.child("apiVersions"), ""));
    }
    if versions.len() > 1 && has_wildcard(&versions) {
        errs.push(FieldError::invalid(
            &path.child("apiVersions"),
            json_list(&versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(
                &path.child("apiVersions").index(i),
                "",
            ));
        }
    }
    errs.extend(validate_resources(
        &strs_at(rule, "resources"),
        &path.child("resources"),
    ));
    if set_at(rule, "scope").is_some() {
        let scope = str_at(rule, "scope");
        if !SCOPES.contains(&scope) {
            errs.push(FieldError::not_supported(
                &path.child("scope"),
                scope,
                SCOPES,
            ));
        }
    }
    errs
}

/// `validateRuleWithOperations`.
fn validate_rule_with_operations(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ops = strs_at(rule, "operations");
    if ops.is_empty() {
        errs.push(FieldError::required(&path.child("operations"), ""));
    }
    if ops.len() > 1 && has_wildcard(&ops) {
        errs.push(FieldError::invalid(
            &path.child("operations"),
            json_list(&ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(op) {
            errs.push(FieldError::not_supported(
                &path.child("operations").index(i),
                *op,
                OPERATIONS,
            ));
        }
    }
    errs.extend(validate_rule(rule, path));
    errs
}

/// `validateNamedRuleWithOperations`: resource names are path segments, each once.
fn validate_named_rule(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in strs_at(rule, "resourceNames").into_iter().enumerate() {
        let p = path.child("resourceNames").index(i);
        for m in is_path_segment_name(name) {
            errs.push(FieldError::invalid(&p, name, m));
        }
        if seen.contains(&name) {
            errs.push(FieldError::duplicate(&p, name));
        } else {
            seen.push(name);
        }
    }
    errs.extend(validate_rule_with_operations(rule, path));
    errs
}

// ---------------------------------------------------------------------------------------------
// Selectors, match resources, match conditions, parameters.
// ---------------------------------------------------------------------------------------------

fn selector_options(allow_invalid_label_value: bool) -> LabelSelectorValidationOptions {
    LabelSelectorValidationOptions {
        allow_invalid_label_value,
        ..Default::default()
    }
}

/// `validateMatchResources`: policy and both selectors required (defaults fill them), rules.
fn validate_match_resources(mr: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match set_at(mr, "matchPolicy") {
        None => errs.push(FieldError::required(&path.child("matchPolicy"), "")),
        Some(_) => {
            let p = str_at(mr, "matchPolicy");
            if !MATCH_POLICIES.contains(&p) {
                errs.push(FieldError::not_supported(
                    &path.child("matchPolicy"),
                    p,
                    MATCH_POLICIES,
                ));
            }
        }
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        match set_at(mr, selector) {
            None => errs.push(FieldError::required(&path.child(selector), "")),
            // Strict: this type came after label values were checked everywhere.
            Some(s) => errs.extend(validate_label_selector(
                Some(s),
                selector_options(false),
                &path.child(selector),
            )),
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in list_at(mr, list).iter().enumerate() {
            errs.extend(validate_named_rule(rule, &path.child(list).index(i)));
        }
    }
    errs
}

/// A policy's `matchConstraints`: required, with at least one resource rule to give the policy
/// its types; a mutating policy's rules may not name DELETE.
fn validate_match_constraints(spec: &Value, mutating: bool, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("matchConstraints");
    let Some(mc) = set_at(spec, "matchConstraints") else {
        return vec![FieldError::required(&path, "")];
    };
    let mut errs = validate_match_resources(mc, &path);
    if list_at(mc, "resourceRules").is_empty() {
        errs.push(FieldError::required(&path.child("resourceRules"), ""));
    }
    if mutating {
        errs.extend(validate_mutating_operations(mc, &path));
    }
    errs
}

/// Operations of a mutating policy's or binding's resource rules: no DELETE.
fn validate_mutating_operations(mr: &Value, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("resourceRules").child("operations");
    list_at(mr, "resourceRules")
        .iter()
        .flat_map(|r| strs_at(r, "operations"))
        .filter(|op| !MUTATING_OPERATIONS.contains(op))
        .map(|op| FieldError::not_supported(&path, op, MUTATING_OPERATIONS))
        .collect()
}

/// `validateMatchConditions`: each expression, trimmed, compiled without `variables` (a stateless
/// compiler) and with `params` where the configuration has a param kind.
fn validate_match_conditions(
    conditions: &[Value],
    has_params: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let compiler = Compiler::stateless();
    let declarations = Declarations {
        has_params,
        has_authorizer: true,
    };
    let mut errs = Vec::new();
    if conditions.len() as i64 > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            Some(conditions.len() as i64),
            Some(MAX_MATCH_CONDITIONS),
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        let expression = str_at(c, "expression").trim();
        if expression.is_empty() {
            errs.push(FieldError::required(&p.child("expression"), ""));
        } else {
            errs.extend(compile_error(
                compiler.compile(expression, declarations, returns::BOOL),
                expression,
                &p.child("expression"),
            ));
        }
        let name = str_at(c, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            for m in is_qualified_name(name) {
                errs.push(FieldError::invalid(&p.child("name"), name, m));
            }
        }
        if !name.is_empty() {
            if seen.contains(&name) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            } else {
                seen.push(name);
            }
        }
    }
    errs
}

/// `validateParamKind`: an apiVersion and a kind that could name a resource's kind.
fn validate_param_kind(kind: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_version = str_at(kind, "apiVersion");
    let av_path = path.child("apiVersion");
    if api_version.is_empty() {
        errs.push(FieldError::required(&av_path, ""));
    } else if api_version.matches('/').count() > 1 {
        errs.push(FieldError::invalid(
            &av_path,
            api_version,
            format!("unexpected GroupVersion string: {api_version}"),
        ));
    } else {
        let (group, version) = match api_version {
            "/" => ("", ""),
            gv => gv.split_once('/').unwrap_or(("", gv)),
        };
        if !group.is_empty() {
            let msgs = is_dns1123_subdomain(group);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(&av_path, group, msgs.join(",")));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &av_path,
                api_version,
                "version must be specified",
            ));
        } else {
            let msgs = is_dns1035_label(version);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(&av_path, version, msgs.join(",")));
            }
        }
    }
    let k = str_at(kind, "kind");
    if k.is_empty() {
        errs.push(FieldError::required(&path.child("kind"), ""));
    } else {
        let msgs = is_dns1035_label(&k.to_lowercase());
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("kind"),
                k,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    errs
}

/// `validateParamRef`: a name or a selector (not both), and what to do when none is found.
fn validate_param_ref(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(pr) = set_at(spec, "paramRef") else {
        return Vec::new();
    };
    let path = path.child("paramRef");
    let mut errs = Vec::new();
    let name = str_at(pr, "name");
    let selector = set_at(pr, "selector");
    if !name.is_empty() {
        for m in is_path_segment_name(name) {
            errs.push(FieldError::invalid(&path.child("name"), name, m));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                &path.child("name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(s) = selector {
        errs.extend(validate_label_selector(
            Some(s),
            selector_options(false),
            &path.child("selector"),
        ));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                &path.child("selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            &path,
            "one of name or selector must be specified",
        ));
    }
    let action = str_at(pr, "parameterNotFoundAction");
    if action.is_empty() {
        errs.push(FieldError::required(
            &path.child("parameterNotFoundAction"),
            "",
        ));
    } else if !matches!(action, "Deny" | "Allow") {
        errs.push(FieldError::not_supported(
            &path.child("parameterNotFoundAction"),
            action,
            &["Deny", "Allow"],
        ));
    }
    errs
}

/// `convertCELErrorToValidationError`: what the compiler refused, as an invalid `shown` value
/// (every compile error of an expression is `ErrorTypeInvalid`).
fn compile_error<T>(
    result: Result<T, String>,
    shown: &str,
    path: &FieldPath,
) -> Option<FieldError> {
    result
        .err()
        .map(|detail| FieldError::invalid(path, shown, detail))
}

/// An expression that does not parse, as upstream's compiler refuses it (`compilation failed:`
/// and cel-go's issues): for a mutating policy's mutations, whose object types the checker does
/// not know.
fn syntax_error(expression: &str, path: &FieldPath) -> Option<FieldError> {
    apiserver::cel::checker::syntax_errors(expression)
        .map(|e| FieldError::invalid(path, expression, format!("compilation failed: {e}")))
}

/// A CEL identifier that is not a reserved word (`isCELIdentifier`).
fn is_cel_identifier(name: &str) -> bool {
    is_c_identifier(name).is_empty() && !apiserver::cel::types::RESERVED_WORDS.contains(&name)
}

/// `validateVariable`: the expression compiled and stored, typed, for the expressions after it.
fn validate_variable(
    v: &Value,
    compiler: &mut Compiler,
    declarations: Declarations,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(v, "name");
    if name.trim().is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name is not specified",
        ));
    } else if !is_cel_identifier(name) {
        errs.push(FieldError::invalid(
            &path.child("name"),
            name,
            "must be a valid CEL identifier",
        ));
    }
    let expression = str_at(v, "expression");
    if expression.trim().is_empty() {
        errs.push(FieldError::required(
            &path.child("expression"),
            "expression is not specified",
        ));
    } else {
        errs.extend(compile_error(
            compiler.compile_and_store_variable(name, expression, declarations),
            expression,
            &path.child("expression"),
        ));
    }
    errs
}

fn failure_policy_errors(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("failurePolicy");
    match set_at(spec, "failurePolicy") {
        None => vec![FieldError::required(&path, "")],
        Some(_) => {
            let p = str_at(spec, "failurePolicy");
            if FAILURE_POLICIES.contains(&p) {
                Vec::new()
            } else {
                vec![FieldError::not_supported(&path, p, FAILURE_POLICIES)]
            }
        }
    }
}

fn policy_name_errors(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("policyName");
    let name = str_at(spec, "policyName");
    if name.is_empty() {
        return vec![FieldError::required(&path, "")];
    }
    is_dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid(&path, name, m))
        .collect()
}

/// Names ending in this suffix are reserved for configurations loaded from manifests at startup
/// (`StaticConfigSuffix`, pkg/apis/admissionregistration/validation/static_suffix.go). With the
/// `ManifestBasedAdmissionControlConfig` gate off, as v1.36 has it, every strategy of this group
/// only warns about such a name (`WarningsForStaticSuffix`) on create and on update.
const STATIC_CONFIG_SUFFIX: &str = ".static.k8s.io";

fn static_suffix_warnings(obj: &Value) -> Vec<String> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !name.ends_with(STATIC_CONFIG_SUFFIX) {
        return Vec::new();
    }
    vec![format!(
        "metadata.name: names ending with {} are reserved for static manifest-based configurations and cannot be managed via the API",
        apimachinery::validation::go_quote(STATIC_CONFIG_SUFFIX)
    )]
}

/// metav1 `ValidateConditions`: types once each and label-name shaped, statuses known,
/// generations not negative, a transition time, a reason of the CamelCase form.
// candidate for apimachinery::validation
pub(crate) fn validate_metav1_conditions(
    conditions: &[Value],
    path: &FieldPath,
) -> Vec<FieldError> {
    const MAX_REASON_LEN: usize = 1024;
    const MAX_MESSAGE_LEN: usize = 32 * 1024;
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        let ty = str_at(c, "type");
        if seen.contains(&ty) {
            errs.push(FieldError::duplicate(&p.child("type"), ty));
        } else {
            seen.push(ty);
        }
        errs.extend(validate_label_name(ty, &p.child("type")));
        let status = str_at(c, "status");
        if !matches!(status, "True" | "False" | "Unknown") {
            errs.push(FieldError::not_supported(
                &p.child("status"),
                status,
                &["False", "True", "Unknown"],
            ));
        }
        let generation = int_at(c, "observedGeneration");
        if generation < 0 {
            errs.push(FieldError::invalid(
                &p.child("observedGeneration"),
                generation,
                "must be greater than or equal to zero",
            ));
        }
        if str_at(c, "lastTransitionTime").is_empty() {
            errs.push(FieldError::required(&p.child("lastTransitionTime"), ""));
        }
        let reason = str_at(c, "reason");
        if reason.is_empty() {
            errs.push(FieldError::required(&p.child("reason"), ""));
        } else {
            for m in is_valid_condition_reason(reason) {
                errs.push(FieldError::invalid(&p.child("reason"), reason, m));
            }
            if reason.len() > MAX_REASON_LEN {
                errs.push(FieldError::too_long(
                    &p.child("reason"),
                    "",
                    MAX_REASON_LEN as i64,
                ));
            }
        }
        if str_at(c, "message").len() > MAX_MESSAGE_LEN {
            errs.push(FieldError::too_long(
                &p.child("message"),
                "",
                MAX_MESSAGE_LEN as i64,
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Webhook configurations.
// ---------------------------------------------------------------------------------------------

/// What an update tolerates because the stored configuration already had it.
#[derive(Clone, Copy)]
struct WebhookOptions {
    /// An update that leaves every webhook's match conditions as stored does not check them
    /// again (`ignoreValidatingWebhookMatchConditions`). Upstream's preexisting expressions of a
    /// configuration only choose the StoredExpressions environment, the same as NewExpressions
    /// in v1.36 (see `PolicyStrategy::validate_update`).
    ignore_match_conditions: bool,
    require_no_side_effects: bool,
    require_recognized_review_version: bool,
    require_unique_names: bool,
    allow_invalid_label_value: bool,
}

impl WebhookOptions {
    const CREATE: Self = Self {
        ignore_match_conditions: false,
        require_no_side_effects: true,
        require_recognized_review_version: true,
        require_unique_names: true,
        allow_invalid_label_value: false,
    };

    /// Upstream's update options, each from the stored object.
    fn for_update(new: &Value, old: &Value) -> Self {
        let hooks = list_at(old, "webhooks");
        let new_hooks = list_at(new, "webhooks");
        let ignore_match_conditions = new_hooks.len() == hooks.len()
            && new_hooks
                .iter()
                .zip(hooks)
                .all(|(n, o)| list_at(n, "matchConditions") == list_at(o, "matchConditions"));
        let mut names: Vec<&str> = Vec::new();
        let unique = hooks.iter().all(|h| {
            let n = str_at(h, "name");
            let fresh = !names.contains(&n);
            names.push(n);
            fresh
        });
        Self {
            ignore_match_conditions,
            require_no_side_effects: hooks.iter().all(|h| {
                set_at(h, "sideEffects").is_some()
                    && NO_SIDE_EFFECT_CLASSES.contains(&str_at(h, "sideEffects"))
            }),
            require_recognized_review_version: hooks.iter().all(|h| {
                let versions = strs_at(h, "admissionReviewVersions");
                versions.is_empty()
                    || versions
                        .iter()
                        .any(|v| ADMISSION_REVIEW_VERSIONS.contains(v))
            }),
            require_unique_names: unique,
            allow_invalid_label_value: hooks.iter().any(|h| {
                ["namespaceSelector", "objectSelector"].iter().any(|s| {
                    !validate_label_selector(
                        set_at(h, s),
                        selector_options(false),
                        &FieldPath::nil(),
                    )
                    .is_empty()
                })
            }),
        }
    }
}

fn validate_webhooks(obj: &Value, mutating: bool, opts: WebhookOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, hook) in list_at(obj, "webhooks").iter().enumerate() {
        let path = FieldPath::new("webhooks").index(i);
        errs.extend(validate_webhook(hook, mutating, opts, &path));
        errs.extend(validate_admission_review_versions(
            &strs_at(hook, "admissionReviewVersions"),
            opts.require_recognized_review_version,
            &path.child("admissionReviewVersions"),
        ));
        let name = str_at(hook, "name");
        if opts.require_unique_names && !name.is_empty() {
            if names.contains(&name) {
                errs.push(FieldError::duplicate(&path.child("name"), name));
            } else {
                names.push(name);
            }
        }
    }
    errs
}

fn validate_webhook(
    hook: &Value,
    mutating: bool,
    opts: WebhookOptions,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = is_fully_qualified_name(&path.child("name"), str_at(hook, "name"));
    for (i, rule) in list_at(hook, "rules").iter().enumerate() {
        errs.extend(validate_rule_with_operations(
            rule,
            &path.child("rules").index(i),
        ));
    }
    for (field, allowed) in [
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
    ] {
        if set_at(hook, field).is_some() && !allowed.contains(&str_at(hook, field)) {
            errs.push(FieldError::not_supported(
                &path.child(field),
                str_at(hook, field),
                allowed,
            ));
        }
    }
    let allowed_side_effects = if opts.require_no_side_effects {
        NO_SIDE_EFFECT_CLASSES
    } else {
        SIDE_EFFECT_CLASSES
    };
    match set_at(hook, "sideEffects") {
        None => errs.push(FieldError::required(
            &path.child("sideEffects"),
            format!("must specify one of {}", allowed_side_effects.join(", ")),
        )),
        Some(_) => {
            let s = str_at(hook, "sideEffects");
            if !allowed_side_effects.contains(&s) {
                errs.push(FieldError::not_supported(
                    &path.child("sideEffects"),
                    s,
                    allowed_side_effects,
                ));
            }
        }
    }
    if let Some(t) = set_at(hook, "timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(
            &path.child("timeoutSeconds"),
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        errs.extend(validate_label_selector(
            set_at(hook, selector),
            selector_options(opts.allow_invalid_label_value),
            &path.child(selector),
        ));
    }
    if mutating && set_at(hook, "reinvocationPolicy").is_some() {
        let p = str_at(hook, "reinvocationPolicy");
        if !REINVOCATION_POLICIES.contains(&p) {
            errs.push(FieldError::not_supported(
                &path.child("reinvocationPolicy"),
                p,
                REINVOCATION_POLICIES,
            ));
        }
    }
    let cc = hook.get("clientConfig").unwrap_or(&Value::Null);
    let cc_path = path.child("clientConfig");
    match (set_at(cc, "url"), set_at(cc, "service")) {
        (Some(_), None) => errs.extend(validate_webhook_url(
            str_at(cc, "url"),
            &cc_path.child("url"),
        )),
        (None, Some(service)) => {
            errs.extend(validate_webhook_service(service, &cc_path.child("service")))
        }
        _ => errs.push(FieldError::required(
            &cc_path,
            "exactly one of url or service is required",
        )),
    }
    if !opts.ignore_match_conditions {
        // A webhook has no params.
        errs.extend(validate_match_conditions(
            list_at(hook, "matchConditions"),
            false,
            &path.child("matchConditions"),
        ));
    }
    errs
}

fn validate_admission_review_versions(
    versions: &[&str],
    require_recognized: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    if versions.is_empty() {
        return vec![FieldError::required(
            path,
            format!(
                "must specify one of {}",
                ADMISSION_REVIEW_VERSIONS.join(", ")
            ),
        )];
    }
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if seen.contains(v) {
            errs.push(FieldError::invalid(&path.index(i), *v, "duplicate version"));
            continue;
        }
        seen.push(v);
        for m in is_dns1035_label(v) {
            errs.push(FieldError::invalid(&path.index(i), *v, m));
        }
    }
    if require_recognized
        && !versions
            .iter()
            .any(|v| ADMISSION_REVIEW_VERSIONS.contains(v))
    {
        errs.push(FieldError::invalid(
            path,
            json_list(versions),
            format!(
                "must include at least one of {}",
                ADMISSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

/// ValidatingWebhookConfiguration and MutatingWebhookConfiguration.
pub struct WebhookConfigurationStrategy {
    pub mutating: bool,
}

impl Strategy for WebhookConfigurationStrategy {
    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for webhook configurations).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        for hook in obj
            .get_mut("webhooks")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            default_webhook(hook, self.mutating);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_webhooks(obj, self.mutating, WebhookOptions::CREATE)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_webhooks(new, self.mutating, WebhookOptions::for_update(new, old))
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        static_suffix_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        static_suffix_warnings(new)
    }
}

// ---------------------------------------------------------------------------------------------
// Policies.
// ---------------------------------------------------------------------------------------------

/// ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
pub struct PolicyStrategy {
    pub mutating: bool,
}

/// `validateValidation` of each validation: the expression must return a bool, a message
/// expression a string (and it sees no `authorizer`).
fn validate_validations(spec: &Value, compiler: &Compiler, path: &FieldPath) -> Vec<FieldError> {
    let has_params = set_at(spec, "paramKind").is_some();
    let mut errs = Vec::new();
    for (i, v) in list_at(spec, "validations").iter().enumerate() {
        let p = path.child("validations").index(i);
        let expression = str_at(v, "expression");
        if expression.trim().is_empty() {
            errs.push(FieldError::required(
                &p.child("expression"),
                "expression is not specified",
            ));
        } else {
            let declarations = Declarations {
                has_params,
                has_authorizer: true,
            };
            errs.extend(compile_error(
                compiler.compile(expression, declarations, returns::BOOL),
                expression,
                &p.child("expression"),
            ));
        }
        let message_expression = str_at(v, "messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errs.push(FieldError::invalid(
                &p.child("messageExpression"),
                message_expression,
                "must be non-empty if specified",
            ));
        } else if !message_expression.is_empty() {
            let declarations = Declarations {
                has_params,
                has_authorizer: false,
            };
            errs.extend(compile_error(
                compiler.compile(message_expression, declarations, returns::STRING),
                message_expression,
                &p.child("messageExpression"),
            ));
        }
        let message = str_at(v, "message");
        let trimmed = message.trim();
        if !message.is_empty() && trimmed.is_empty() {
            errs.push(FieldError::invalid(
                &p.child("message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if trimmed.contains(['\n', '\r']) {
            errs.push(FieldError::invalid(
                &p.child("message"),
                message,
                "message must not contain line breaks",
            ));
        }
        if set_at(v, "reason").is_some() {
            let reason = str_at(v, "reason");
            if !VALIDATION_REASONS.contains(&reason) {
                errs.push(FieldError::not_supported(
                    &p.child("reason"),
                    reason,
                    VALIDATION_REASONS,
                ));
            }
        }
    }
    errs
}

/// `validateAuditAnnotation` of each annotation: a key qualified by the policy's name, and a
/// value expression (compiled trimmed) that returns a string or null.
fn validate_audit_annotations(
    name: &str,
    spec: &Value,
    compiler: &Compiler,
    path: &FieldPath,
) -> Vec<FieldError> {
    let declarations = Declarations {
        has_params: set_at(spec, "paramKind").is_some(),
        has_authorizer: true,
    };
    let Some(annotations) = set_at(spec, "auditAnnotations").and_then(Value::as_array) else {
        return Vec::new();
    };
    let path = path.child("auditAnnotations");
    let mut errs = Vec::new();
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        let mut e = FieldError::invalid(
            &path,
            Value::Array(annotations.clone()),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        );
        // Upstream prints the internal `[]AuditAnnotation` (Go field names).
        if let Some(rendered) = ironplane_protobuf::go_slice_json(
            "admissionregistration.v1.AuditAnnotation",
            annotations,
            ironplane_protobuf::GoStyle::Internal,
        ) {
            e = e.with_rendered_value(rendered);
        }
        errs.push(e);
    }
    let mut keys: Vec<&str> = Vec::new();
    for (i, a) in annotations.iter().enumerate() {
        let p = path.index(i);
        let key = str_at(a, "key");
        if name.is_empty() {
            errs.push(FieldError::invalid(
                &p.child("key"),
                key,
                "requires metadata.name be non-empty",
            ));
        } else {
            let qualified = format!("{name}/{key}");
            for m in is_qualified_name(&qualified) {
                errs.push(FieldError::invalid(&p.child("key"), qualified.as_str(), m));
            }
        }
        let value_expression = str_at(a, "valueExpression").trim();
        if value_expression.is_empty() {
            errs.push(FieldError::required(
                &p.child("valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value_expression.len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
            errs.push(FieldError::required(
                &p.child("valueExpression"),
                format!(
                    "must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length"
                ),
            ));
        } else {
            errs.extend(compile_error(
                compiler.compile(value_expression, declarations, returns::STRING_OR_NULL),
                str_at(a, "valueExpression"),
                &p.child("valueExpression"),
            ));
        }
        if keys.contains(&key) {
            errs.push(FieldError::duplicate(&p.child("key"), key));
        }
        keys.push(key);
    }
    errs
}

/// A mutation: its patch type and the expression that type calls for.
fn validate_mutation(m: &Value, path: &FieldPath) -> Vec<FieldError> {
    let patch_type = str_at(m, "patchType");
    if patch_type.is_empty() {
        return vec![FieldError::required(&path.child("patchType"), "")];
    }
    let (own, other) = match patch_type {
        "JSONPatch" => ("jsonPatch", "applyConfiguration"),
        "ApplyConfiguration" => ("applyConfiguration", "jsonPatch"),
        _ => {
            return vec![FieldError::not_supported(
                &path.child("patchType"),
                patch_type,
                PATCH_TYPES,
            )];
        }
    };
    let mut errs = Vec::new();
    match set_at(m, own) {
        None => errs.push(FieldError::required(
            &path.child(own),
            format!("must be specified when patchType is {patch_type}"),
        )),
        Some(p) if str_at(p, "expression").trim().is_empty() => {
            errs.push(FieldError::required(
                &path.child(own).child("expression"),
                "",
            ));
        }
        Some(p) => errs.extend(syntax_error(
            str_at(p, "expression"),
            &path.child(own).child("expression"),
        )),
    }
    if set_at(m, other).is_some() {
        errs.push(FieldError::invalid(
            &path.child(other),
            format!("{{{other}}}"),
            format!("must not be specified when patchType is {patch_type}"),
        ));
    }
    errs
}

impl PolicyStrategy {
    /// `validateValidatingAdmissionPolicySpec` / `validateMutatingAdmissionPolicySpec`;
    /// `ignore_match_conditions` on an update that keeps the parameter kind and the match
    /// conditions as stored.
    fn validate_spec(
        &self,
        name: &str,
        spec: &Value,
        ignore_match_conditions: bool,
    ) -> Vec<FieldError> {
        let path = FieldPath::new("spec");
        let mut errs = failure_policy_errors(spec, &path);
        if let Some(kind) = set_at(spec, "paramKind") {
            errs.extend(validate_param_kind(kind, &path.child("paramKind")));
        }
        errs.extend(validate_match_constraints(spec, self.mutating, &path));
        let has_params = set_at(spec, "paramKind").is_some();
        if !ignore_match_conditions {
            errs.extend(validate_match_conditions(
                list_at(spec, "matchConditions"),
                has_params,
                &path.child("matchConditions"),
            ));
        }
        // One compiler for the policy's expressions: the variables are stored in it for the
        // expressions after them. A validating policy without variables has no `variables` at
        // all; a mutating policy always has them.
        let variables = list_at(spec, "variables");
        let mut compiler = if self.mutating || !variables.is_empty() {
            Compiler::composited()
        } else {
            Compiler::stateless()
        };
        let declarations = Declarations {
            has_params,
            has_authorizer: true,
        };
        for (i, v) in variables.iter().enumerate() {
            errs.extend(validate_variable(
                v,
                &mut compiler,
                declarations,
                &path.child("variables").index(i),
            ));
        }
        if self.mutating {
            let mutations = list_at(spec, "mutations");
            if mutations.is_empty() {
                errs.push(FieldError::required(
                    &path.child("mutations"),
                    "mutations must contain at least one item",
                ));
            }
            for (i, m) in mutations.iter().enumerate() {
                errs.extend(validate_mutation(m, &path.child("mutations").index(i)));
            }
            let reinvocation = str_at(spec, "reinvocationPolicy");
            if reinvocation.is_empty() {
                errs.push(FieldError::required(&path.child("reinvocationPolicy"), ""));
            } else if !REINVOCATION_POLICIES.contains(&reinvocation) {
                errs.push(FieldError::not_supported(
                    &path.child("reinvocationPolicy"),
                    reinvocation,
                    REINVOCATION_POLICIES,
                ));
            }
            return errs;
        }
        if list_at(spec, "validations").is_empty() && list_at(spec, "auditAnnotations").is_empty() {
            const WHY: &str = "validations or auditAnnotations must contain at least one item";
            errs.push(FieldError::required(&path.child("validations"), WHY));
            errs.push(FieldError::required(&path.child("auditAnnotations"), WHY));
            return errs;
        }
        errs.extend(validate_validations(spec, &compiler, &path));
        errs.extend(validate_audit_annotations(name, spec, &compiler, &path));
        errs
    }
}

impl Strategy for PolicyStrategy {
    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for admission policies).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        let Some(spec) = struct_field(obj, "spec").and_then(Value::as_object_mut) else {
            return;
        };
        default_str(spec, "failurePolicy", "Fail");
        default_match_resources(spec.get_mut("matchConstraints"));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // A validating policy's status (type checking) is the controller's to write.
        if !self.mutating && obj.is_object() {
            obj["status"] = json!({});
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.validate_spec(name, obj.get("spec").unwrap_or(&Value::Null), false)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let name = new
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let spec = new.get("spec").unwrap_or(&Value::Null);
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        // Only unchanged match conditions are left unchecked. Upstream also collects the stored
        // object's expressions (`findValidatingPolicyPreexistingExpressions`), but an expression
        // found there is still compiled, in the StoredExpressions environment instead of
        // NewExpressions; in v1.36 the two hold the same libraries for admission (none was
        // introduced after 1.34, the compatibility version is 1.35), so a stored expression
        // that does not type-check is refused on any update as a new one is.
        let ignore = set_at(spec, "paramKind") == set_at(old_spec, "paramKind")
            && list_at(spec, "matchConditions") == list_at(old_spec, "matchConditions");
        self.validate_spec(name, spec, ignore)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        static_suffix_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        static_suffix_warnings(new)
    }

    /// `validateValidatingAdmissionPolicyStatus`: each expression warning says what and where;
    /// the conditions are metav1 conditions.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let path = FieldPath::new("status")
            .child("typeChecking")
            .child("expressionWarnings");
        let warnings = new
            .pointer("/status/typeChecking")
            .map(|t| list_at(t, "expressionWarnings"))
            .unwrap_or(&[]);
        let mut errs = Vec::new();
        for (i, w) in warnings.iter().enumerate() {
            if str_at(w, "warning").is_empty() {
                errs.push(FieldError::required(&path.index(i).child("warning"), ""));
            }
            if str_at(w, "fieldRef").trim().is_empty() {
                errs.push(FieldError::required(&path.index(i).child("fieldRef"), ""));
            }
        }
        let conditions = new
            .get("status")
            .map(|s| list_at(s, "conditions"))
            .unwrap_or(&[]);
        errs.extend(validate_metav1_conditions(
            conditions,
            &FieldPath::new("status").child("conditions"),
        ));
        errs
    }
}

// ---------------------------------------------------------------------------------------------
// Bindings.
// ---------------------------------------------------------------------------------------------

/// ValidatingAdmissionPolicyBinding and MutatingAdmissionPolicyBinding.
pub struct PolicyBindingStrategy {
    pub mutating: bool,
}

/// `validateValidationActions`: known, each once, not both Deny and Warn, at least one.
fn validate_validation_actions(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let path = path.child("validationActions");
    let actions = strs_at(spec, "validationActions");
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        if !VALIDATION_ACTIONS.contains(a) {
            errs.push(FieldError::not_supported(
                &path.index(i),
                *a,
                VALIDATION_ACTIONS,
            ));
        }
        if seen.contains(a) {
            errs.push(FieldError::duplicate(&path.index(i), *a));
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errs.push(FieldError::invalid(
            &path,
            json_list(&actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            &path,
            "at least one validation action is required",
        ));
    }
    errs
}

impl Strategy for PolicyBindingStrategy {
    /// Updates must name the resourceVersion they replace (upstream's
    /// `AllowUnconditionalUpdate` is false for policy bindings).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            default_match_resources(spec.get_mut("matchResources"));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let path = FieldPath::new("spec");
        let mut errs = policy_name_errors(spec, &path);
        errs.extend(validate_param_ref(spec, &path));
        if let Some(mr) = set_at(spec, "matchResources") {
            errs.extend(validate_match_resources(mr, &path.child("matchResources")));
            if self.mutating {
                errs.extend(validate_mutating_operations(
                    mr,
                    &path.child("matchResources"),
                ));
            }
        }
        if !self.mutating {
            errs.extend(validate_validation_actions(spec, &path));
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        static_suffix_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        static_suffix_warnings(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn hook(extra: Value) -> Value {
        let mut h = json!({"name": "w.example.com", "clientConfig": {"url": "https://hook.example.com/v"}, "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}], "sideEffects": "None", "admissionReviewVersions": ["v1"]});
        if let (Some(h), Some(e)) = (h.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                h.insert(k.clone(), v.clone());
            }
        }
        h
    }

    fn vwc(hooks: Vec<Value>) -> Value {
        let mut c = json!({"metadata": {"name": "c"}, "webhooks": hooks});
        WebhookConfigurationStrategy { mutating: false }.default(&mut c);
        c
    }

    #[test]
    fn webhooks_default_as_v1() {
        let mut c = json!({"webhooks": [{"name": "w.example.com", "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "rules": [{"operations": ["*"]}]}]});
        WebhookConfigurationStrategy { mutating: true }.default(&mut c);
        let h = &c["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["objectSelector"], json!({}));
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(h.get("sideEffects").is_none());
    }

    #[test]
    fn webhook_rules_and_fields() {
        let s = WebhookConfigurationStrategy { mutating: false };
        let c = vwc(vec![hook(
            json!({"sideEffects": null, "admissionReviewVersions": []}),
        )]);
        assert_eq!(
            messages(&s.validate(&c)),
            [
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ]
        );
        let c = vwc(vec![hook(
            json!({"name": "hook", "timeoutSeconds": 31, "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods/*", "*/*", "*"]}]}),
        )]);
        assert_eq!(
            messages(&s.validate(&c)),
            [
                "webhooks[0].name: Invalid value: \"hook\": should be a domain with at least three segments separated by dots",
                "webhooks[0].rules[0].resources: Invalid value: [\"pods/*\",\"*/*\",\"*\"]: if '*/*' is present, must not specify other resources",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            ]
        );
        let c = vwc(vec![
            hook(json!({})),
            hook(json!({"clientConfig": {"url": "http://u@h/x?q#f"}})),
        ]);
        assert_eq!(
            messages(&s.validate(&c)),
            [
                "webhooks[1].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[1].clientConfig.url: Invalid value: \"u\": user information is not permitted in the URL",
                "webhooks[1].clientConfig.url: Invalid value: \"f\": fragments are not permitted in the URL",
                "webhooks[1].clientConfig.url: Invalid value: \"q\": query parameters are not permitted in the URL",
                "webhooks[1].name: Duplicate value: \"w.example.com\"",
            ]
        );
        let c = vwc(vec![hook(
            json!({"clientConfig": {"service": {"name": "s", "namespace": "n", "port": 0, "path": "/a//B"}}}),
        )]);
        assert_eq!(
            messages(&s.validate(&c)),
            [
                "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "webhooks[0].clientConfig.service.path: Invalid value: \"/a//B\": segment[1] may not be empty",
                "webhooks[0].clientConfig.service.path: Invalid value: \"/a//B\": segment[2]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ]
        );
    }

    #[test]
    fn unchanged_match_conditions_are_not_checked_again() {
        let s = WebhookConfigurationStrategy { mutating: false };
        let conditions: Vec<Value> = (0..65)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect();
        let old = vwc(vec![hook(json!({"matchConditions": conditions}))]);
        assert_eq!(
            messages(&s.validate(&old)),
            ["webhooks[0].matchConditions: Too many: 65: must have at most 64 items"]
        );
        assert!(s.validate_update(&old, &old).is_empty());
        let mut new = old.clone();
        new["webhooks"][0]["matchConditions"][0]["expression"] = json!("false");
        assert_eq!(s.validate_update(&new, &old).len(), 1);

        let p = PolicyStrategy { mutating: false };
        let rules = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]});
        let old = policy(
            json!({"matchConstraints": rules, "validations": [{"expression": "true"}], "matchConditions": [{"name": "a", "expression": " "}]}),
            false,
        );
        assert_eq!(p.validate(&old).len(), 1);
        assert!(p.validate_update(&old, &old).is_empty());
        let mut new = old.clone();
        new["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(
            messages(&p.validate_update(&new, &old)),
            ["spec.matchConditions[0].expression: Required value"]
        );
    }

    #[test]
    fn static_names_are_warned_about() {
        let s = WebhookConfigurationStrategy { mutating: true };
        let c = json!({"metadata": {"name": "x.static.k8s.io"}});
        assert_eq!(
            s.warnings_on_create(&c),
            [
                "metadata.name: names ending with \".static.k8s.io\" are reserved for static manifest-based configurations and cannot be managed via the API"
            ]
        );
        assert_eq!(s.warnings_on_update(&c, &c).len(), 1);
        assert!(
            PolicyBindingStrategy { mutating: true }
                .warnings_on_create(&json!({"metadata": {"name": "static.k8s.io"}}))
                .is_empty()
        );
    }

    #[test]
    fn policy_status_conditions_are_metav1_conditions() {
        let p = PolicyStrategy { mutating: false };
        let s = json!({"status": {"conditions": [
            {"type": "Ready", "status": "Yes", "reason": "bad reason", "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": -1},
            {"type": "Ready", "status": "True", "reason": "Ok", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        assert_eq!(
            messages(&p.validate_status_update(&s, &s)),
            [
                "status.conditions[0].status: Unsupported value: \"Yes\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.conditions[0].observedGeneration: Invalid value: -1: must be greater than or equal to zero",
                "status.conditions[0].reason: Invalid value: \"bad reason\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
                "status.conditions[1].type: Duplicate value: \"Ready\"",
            ]
        );
    }

    #[test]
    fn webhook_urls_parse_as_go_parses_them() {
        let p = FieldPath::new("u");
        let m = |url: &str| messages(&validate_webhook_url(url, &p));
        assert!(m("HTTPS://hook.example.com/x").is_empty());
        assert_eq!(
            m("https:///x"),
            ["u: Invalid value: \"\": host must be specified; desired format: https://host[/path]"]
        );
        assert_eq!(
            m("https://a b/x"),
            [
                "u: Required value: url must be a valid URL: parse \"https://a b/x\": invalid character \" \" in host name; desired format: https://host[/path]"
            ]
        );
        assert_eq!(
            m(":x"),
            [
                "u: Required value: url must be a valid URL: parse \":x\": missing protocol scheme; desired format: https://host[/path]"
            ]
        );
        assert_eq!(
            m("https://h:port/"),
            [
                "u: Required value: url must be a valid URL: parse \"https://h:port/\": invalid port \":port\" after host; desired format: https://host[/path]"
            ]
        );
        assert_eq!(
            m("https://h/%zz"),
            [
                "u: Required value: url must be a valid URL: parse \"https://h/%zz\": invalid URL escape \"%zz\"; desired format: https://host[/path]"
            ]
        );
    }

    #[test]
    fn updates_tolerate_what_was_stored() {
        let s = WebhookConfigurationStrategy { mutating: false };
        let old = vwc(vec![hook(json!({"sideEffects": "Some"}))]);
        let new = vwc(vec![hook(json!({"sideEffects": "Unknown"}))]);
        assert!(s.validate_update(&new, &old).is_empty());
        assert_eq!(s.validate(&new).len(), 1);
    }

    fn policy(spec: Value, mutating: bool) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": spec});
        PolicyStrategy { mutating }.default(&mut p);
        p
    }

    #[test]
    fn expressions_must_parse() {
        let rules = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]});
        let vap = PolicyStrategy { mutating: false };
        let p = policy(
            json!({"matchConstraints": rules,
                   "matchConditions": [{"name": "m", "expression": " object.x == "}],
                   "variables": [{"name": "v", "expression": "1 +"}],
                   "validations": [{"expression": "object.(", "messageExpression": "'a' +"}],
                   "auditAnnotations": [{"key": "k", "valueExpression": "'x' + 'y'"}]}),
            false,
        );
        let errs = messages(&vap.validate(&p));
        let fields: Vec<&str> = errs
            .iter()
            .map(|e| e.split(": Invalid value: ").next().unwrap_or(""))
            .collect();
        assert_eq!(
            fields,
            [
                "spec.matchConditions[0].expression",
                "spec.variables[0].expression",
                "spec.validations[0].expression",
                "spec.validations[0].messageExpression",
            ],
            "{errs:?}"
        );
        // The trimmed expression for match conditions, cel-go's issue text after the prefix.
        assert!(
            errs[0].starts_with(
                "spec.matchConditions[0].expression: Invalid value: \"object.x ==\": compilation failed: ERROR: <input>:1:"
            ),
            "{errs:?}"
        );
        let map = PolicyStrategy { mutating: true };
        let p = policy(
            json!({"matchConstraints": rules, "reinvocationPolicy": "Never",
                   "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{"}}]}),
            true,
        );
        let errs = messages(&map.validate(&p));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("spec.mutations[0].jsonPatch.expression: Invalid value: \"[JSONPatch{\": compilation failed: ERROR: <input>:1:"), "{errs:?}");
    }

    #[test]
    fn expressions_are_type_checked_in_the_admission_environment() {
        let rules = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]});
        let vap = PolicyStrategy { mutating: false };
        let p = policy(
            json!({"matchConstraints": rules, "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                   "matchConditions": [{"name": "m", "expression": "params.data.x == 'y' && variables.v"}],
                   "variables": [{"name": "v", "expression": "object.metadata.name.size()"}],
                   "validations": [
                       {"expression": "variables.v > 1 && authorizer.requestResource.check('get').allowed()",
                        "messageExpression": "authorizer.requestResource.check('get').reason()"},
                       {"expression": "variables.v"},
                   ],
                   "auditAnnotations": [{"key": "k", "valueExpression": " params.data.x "}]}),
            false,
        );
        assert_eq!(
            messages(&vap.validate(&p)),
            [
                // Match conditions have no variables.
                "spec.matchConditions[0].expression: Invalid value: \"params.data.x == 'y' && variables.v\": compilation failed: ERROR: <input>:1:25: undeclared reference to 'variables' (in container '')\n | params.data.x == 'y' && variables.v\n | ........................^",
                // Message expressions have no authorizer.
                "spec.validations[0].messageExpression: Invalid value: \"authorizer.requestResource.check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.requestResource.check('get').reason()\n | ^",
                "spec.validations[1].expression: Invalid value: \"variables.v\": must evaluate to bool but got int",
                // The value is shown as written, compiled trimmed.
                "spec.auditAnnotations[0].valueExpression: Invalid value: \" params.data.x \": must evaluate to one of [string null_type] but got dyn",
            ]
        );
        // Upstream's validation tests: variables see only those before them, validations all.
        let p = policy(
            json!({"matchConstraints": rules,
                   "variables": [{"name": "correct", "expression": "object"},
                                 {"name": "bar", "expression": "variables.foo + 1"},
                                 {"name": "foo", "expression": "1 + 1"},
                                 {"name": "sum", "expression": "114 + '514'"}],
                   "validations": [{"expression": "variables.foo > 1"},
                                   {"expression": "variables.replicas == 2"},
                                   {"expression": "true", "messageExpression": "0 == 0"}],
                   "auditAnnotations": [{"key": "k", "valueExpression": "true"}]}),
            false,
        );
        assert_eq!(
            messages(&vap.validate(&p)),
            [
                "spec.variables[1].expression: Invalid value: \"variables.foo + 1\": compilation failed: ERROR: <input>:1:10: undefined field 'foo'\n | variables.foo + 1\n | .........^",
                "spec.variables[3].expression: Invalid value: \"114 + '514'\": compilation failed: ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(int, string)'\n | 114 + '514'\n | ....^",
                "spec.validations[1].expression: Invalid value: \"variables.replicas == 2\": compilation failed: ERROR: <input>:1:10: undefined field 'replicas'\n | variables.replicas == 2\n | .........^",
                "spec.validations[2].messageExpression: Invalid value: \"0 == 0\": must evaluate to string but got bool",
                "spec.auditAnnotations[0].valueExpression: Invalid value: \"true\": must evaluate to one of [string null_type] but got bool",
            ]
        );
        let hooks = WebhookConfigurationStrategy { mutating: false }.validate(&vwc(vec![hook(
            json!({"matchConditions": [{"name": "six", "expression": "6"}]}),
        )]));
        assert_eq!(
            messages(&hooks),
            [
                "webhooks[0].matchConditions[0].expression: Invalid value: \"6\": must evaluate to bool but got int"
            ]
        );
        // A mutating policy's variables are compiled too; its mutations are only parsed.
        let map = PolicyStrategy { mutating: true };
        let p = policy(
            json!({"matchConstraints": rules, "reinvocationPolicy": "Never",
                   "variables": [{"name": "v", "expression": "undeclared"}],
                   "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {'a': variables.v}}}"}}]}),
            true,
        );
        assert_eq!(
            messages(&map.validate(&p)),
            [
                "spec.variables[0].expression: Invalid value: \"undeclared\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'undeclared' (in container '')\n | undeclared\n | ^"
            ]
        );
    }

    #[test]
    fn stored_expressions_are_checked_unless_match_conditions_are_unchanged() {
        let rules = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]});
        let vap = PolicyStrategy { mutating: false };
        let relabel = |old: &Value| {
            let mut new = old.clone();
            new["metadata"]["labels"] = json!({"a": "b"});
            new
        };
        // Validations, messages and audit annotations that do not type-check are refused on an
        // update that only changes labels, as on create: upstream compiles the stored ones in
        // the StoredExpressions environment, which in v1.36 is NewExpressions.
        let old = policy(
            json!({"matchConstraints": rules,
                   "validations": [{"expression": "undeclared", "messageExpression": "1"}],
                   "auditAnnotations": [{"key": "k", "valueExpression": "true"}]}),
            false,
        );
        let on_create = messages(&vap.validate(&old));
        assert_eq!(
            on_create,
            [
                "spec.validations[0].expression: Invalid value: \"undeclared\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'undeclared' (in container '')\n | undeclared\n | ^",
                "spec.validations[0].messageExpression: Invalid value: \"1\": must evaluate to string but got int",
                "spec.auditAnnotations[0].valueExpression: Invalid value: \"true\": must evaluate to one of [string null_type] but got bool",
            ]
        );
        assert_eq!(
            messages(&vap.validate_update(&relabel(&old), &old)),
            on_create
        );

        // Unchanged match conditions are not compiled again; a changed one is.
        let old = policy(
            json!({"matchConstraints": rules, "validations": [{"expression": "true"}],
                   "matchConditions": [{"name": "m", "expression": "undeclared"}]}),
            false,
        );
        assert_eq!(vap.validate(&old).len(), 1);
        assert!(vap.validate_update(&relabel(&old), &old).is_empty());
        let mut new = relabel(&old);
        new["spec"]["matchConditions"][0]["expression"] = json!("1");
        assert_eq!(
            messages(&vap.validate_update(&new, &old)),
            [
                "spec.matchConditions[0].expression: Invalid value: \"1\": must evaluate to bool but got int"
            ]
        );

        let s = WebhookConfigurationStrategy { mutating: false };
        let old = vwc(vec![hook(
            json!({"matchConditions": [{"name": "m", "expression": "undeclared"}]}),
        )]);
        assert_eq!(s.validate(&old).len(), 1);
        assert!(s.validate_update(&relabel(&old), &old).is_empty());
        let mut new = relabel(&old);
        new["webhooks"][0]["matchConditions"][0]["expression"] = json!("1");
        assert_eq!(
            messages(&s.validate_update(&new, &old)),
            [
                "webhooks[0].matchConditions[0].expression: Invalid value: \"1\": must evaluate to bool but got int"
            ]
        );
    }

    #[test]
    fn policies_default_and_validate_structure() {
        let rules = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "DELETE"], "resources": ["deployments"]}]});
        let p = policy(json!({"matchConstraints": rules}), false);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(
            p["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        let vap = PolicyStrategy { mutating: false };
        assert_eq!(
            messages(&vap.validate(&p)),
            [
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ]
        );
        let p = policy(
            json!({"failurePolicy": "Warn", "paramKind": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}, "matchConstraints": rules, "validations": [{"expression": " ", "reason": "Teapot"}], "auditAnnotations": [{"key": "k", "valueExpression": "x"}, {"key": "k", "valueExpression": "y"}]}),
            false,
        );
        assert_eq!(
            messages(&vap.validate(&p)),
            [
                "spec.failurePolicy: Unsupported value: \"Warn\": supported values: \"Fail\", \"Ignore\"",
                "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.paramKind.kind: Invalid value: \"Bad_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.validations[0].expression: Required value: expression is not specified",
                "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
                "spec.auditAnnotations[0].valueExpression: Invalid value: \"x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x\n | ^",
                "spec.auditAnnotations[1].valueExpression: Invalid value: \"y\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'y' (in container '')\n | y\n | ^",
                "spec.auditAnnotations[1].key: Duplicate value: \"k\"",
            ]
        );
        let map = PolicyStrategy { mutating: true };
        let p = policy(
            json!({"matchConstraints": rules, "mutations": [{"patchType": "JSONPatch", "applyConfiguration": {"expression": "x"}}]}),
            true,
        );
        assert_eq!(
            messages(&map.validate(&p)),
            [
                "spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
                "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
                "spec.mutations[0].applyConfiguration: Invalid value: \"{applyConfiguration}\": must not be specified when patchType is JSONPatch",
                "spec.reinvocationPolicy: Required value",
            ]
        );
    }

    #[test]
    fn bindings_validate_references_and_actions() {
        let s = PolicyBindingStrategy { mutating: false };
        let mut b = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": {"name": "x", "selector": {}}, "matchResources": {}, "validationActions": ["Deny", "Warn", "Deny"]}});
        s.default(&mut b);
        assert_eq!(b["spec"]["matchResources"]["objectSelector"], json!({}));
        assert_eq!(
            messages(&s.validate(&b)),
            [
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.validationActions[2]: Duplicate value: \"Deny\"",
                "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
        let b = json!({"spec": {"policyName": "p"}});
        assert_eq!(
            messages(&s.validate(&b)),
            ["spec.validationActions: Required value: at least one validation action is required"]
        );
    }
}
