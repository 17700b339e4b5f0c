//! API Priority and Fairness: FlowSchemas and PriorityLevelConfigurations (upstream:
//! pkg/apis/flowcontrol/v1/defaults.go, pkg/apis/flowcontrol/validation and
//! pkg/registry/flowcontrol). Defaults: matching precedence 1000; a limited level gets 30
//! nominal shares and lends nothing; queuing is 64 queues, hands of 8, 50 requests per queue;
//! an exempt level's shares and lending default to 0. Status starts empty on create and is
//! written only through `/status`.
//!
//! The mandatory objects (`exempt` and `catch-all` of each kind) must keep the fixed specs of
//! upstream's bootstrap configuration, except the `exempt` level's `exempt` field.

use crate::strategies::struct_field;
use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label, is_dns1123_subdomain};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Map, Value, json};

use super::fields::{bool_at, int_at, json_list, list_at, set_at, str_at, strs_at};

/// `flowcontrol.FlowSchemaMaxMatchingPrecedence`.
const MAX_MATCHING_PRECEDENCE: i64 = 10000;
/// `priorityLevelConfigurationQueuingMaxQueues`.
const MAX_QUEUES: i64 = 10_000_000;
/// `shufflesharding.MaxHashBits`.
const MAX_HASH_BITS: i64 = 60;

const SUPPORTED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];

/// "Namespace names in a rule" errors start with this (`nsErrIntro`).
const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

pub struct FlowSchemaStrategy;
pub struct PriorityLevelStrategy;

/// Sets an integer field when it is absent, null or 0 (a Go int32 left at its zero value).
fn default_nonzero(obj: &mut Map<String, Value>, field: &str, value: i64) {
    if obj.get(field).and_then(Value::as_i64).unwrap_or(0) == 0 {
        obj.insert(field.into(), json!(value));
    }
}

/// Sets a pointer field when it is absent or null.
fn default_unset(obj: &mut Map<String, Value>, field: &str, value: i64) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.into(), json!(value));
    }
}

/// Status starts empty. (On updates of the object the store keeps the stored status, and a
/// write through `/status` brings its own: nothing to do here.)
fn reset_status(obj: &mut Value) {
    if obj.is_object() {
        obj["status"] = json!({});
    }
}

fn has_wildcard(values: &[&str]) -> bool {
    values.contains(&"*")
}

impl Strategy for FlowSchemaStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = struct_field(obj, "spec").and_then(Value::as_object_mut) {
            default_nonzero(spec, "matchingPrecedence", 1000);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        reset_status(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = validate_flow_schema_spec(name, spec, &FieldPath::new("spec"));
        errs.extend(mandatory_flow_schema_errors(name, spec));
        errs.extend(validate_conditions(obj));
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_conditions(new)
    }
}

fn validate_flow_schema_spec(name: &str, spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let precedence = int_at(spec, "matchingPrecedence");
    let precedence_path = path.child("matchingPrecedence");
    if precedence <= 0 {
        errs.push(FieldError::invalid(
            &precedence_path,
            precedence,
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(FieldError::invalid(
            &precedence_path,
            precedence,
            format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != "exempt" {
        errs.push(FieldError::invalid(
            &precedence_path,
            precedence,
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(method) = set_at(spec, "distinguisherMethod") {
        let t = str_at(method, "type");
        if !matches!(t, "ByNamespace" | "ByUser") {
            // Upstream reports the whole method, printed as its internal Go struct.
            errs.push(
                FieldError::not_supported(
                    &path.child("distinguisherMethod").child("type"),
                    t,
                    &["ByNamespace", "ByUser"],
                )
                .with_rendered_value(format!(
                    "{{\"Type\":{}}}",
                    apimachinery::validation::go_json(&Value::from(t))
                )),
            );
        }
    }
    let plc = spec
        .get("priorityLevelConfiguration")
        .map(|p| str_at(p, "name"))
        .unwrap_or("");
    let plc_path = path.child("priorityLevelConfiguration").child("name");
    if plc.is_empty() {
        errs.push(FieldError::required(
            &plc_path,
            "must reference a priority level",
        ));
    } else {
        for m in is_dns1123_subdomain(plc) {
            errs.push(FieldError::invalid(&plc_path, plc, m));
        }
    }
    for (i, rule) in list_at(spec, "rules").iter().enumerate() {
        errs.extend(validate_rule(rule, &path.child("rules").index(i)));
    }
    errs
}

/// `ValidateFlowSchemaPolicyRulesWithSubjects`.
fn validate_rule(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let subjects = list_at(rule, "subjects");
    if subjects.is_empty() {
        errs.push(FieldError::required(
            &path.child("subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, s) in subjects.iter().enumerate() {
        errs.extend(validate_subject(s, &path.child("subjects").index(i)));
    }
    let resource_rules = list_at(rule, "resourceRules");
    let non_resource_rules = list_at(rule, "nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        errs.extend(validate_resource_rule(
            r,
            &path.child("resourceRules").index(i),
        ));
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        errs.extend(validate_non_resource_rule(
            r,
            &path.child("nonResourceRules").index(i),
        ));
    }
    errs
}

/// The subject kinds, each with its member field (`ValidateFlowSchemaSubject`).
const SUBJECT_KINDS: &[(&str, &str)] = &[
    ("ServiceAccount", "serviceAccount"),
    ("User", "user"),
    ("Group", "group"),
];

fn validate_subject(subject: &Value, path: &FieldPath) -> Vec<FieldError> {
    let kind = str_at(subject, "kind");
    let Some((_, member)) = SUBJECT_KINDS.iter().find(|(k, _)| *k == kind) else {
        return vec![FieldError::not_supported(
            &path.child("kind"),
            kind,
            &["Group", "ServiceAccount", "User"],
        )];
    };
    let member_path = path.child(member);
    let mut errs = Vec::new();
    match set_at(subject, member) {
        None => errs.push(FieldError::required(
            &member_path,
            format!("{member} is required when subject kind is '{kind}'"),
        )),
        Some(m) if kind == "ServiceAccount" => {
            let name = str_at(m, "name");
            if name.is_empty() {
                errs.push(FieldError::required(&member_path.child("name"), ""));
            } else if name != "*" {
                for msg in is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(&member_path.child("name"), name, msg));
                }
            }
            let ns = str_at(m, "namespace");
            if ns.is_empty() {
                errs.push(FieldError::required(
                    &member_path.child("namespace"),
                    "must specify namespace for service account",
                ));
            } else {
                for msg in is_dns1123_label(ns) {
                    errs.push(FieldError::invalid(
                        &member_path.child("namespace"),
                        ns,
                        msg,
                    ));
                }
            }
        }
        Some(m) => {
            if str_at(m, "name").is_empty() {
                errs.push(FieldError::required(&member_path.child("name"), ""));
            }
        }
    }
    // The other kinds' members must be absent, in upstream's order for each kind.
    for (other_kind, other) in SUBJECT_KINDS {
        if other_kind != &kind && set_at(subject, other).is_some() {
            errs.push(FieldError::forbidden(
                &path.child(other),
                format!("{other} is forbidden when subject kind is not '{other_kind}'"),
            ));
        }
    }
    errs
}

/// Verbs of a rule: at least one, `*` alone, otherwise known ones.
fn validate_verbs(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let verbs = strs_at(rule, "verbs");
    let path = path.child("verbs");
    if verbs.is_empty() {
        vec![FieldError::required(
            &path,
            "verbs must contain at least one value",
        )]
    } else if has_wildcard(&verbs) {
        if verbs.len() > 1 {
            vec![FieldError::invalid(
                &path,
                json_list(&verbs),
                "if '*' is present, must not specify other verbs",
            )]
        } else {
            Vec::new()
        }
    } else if verbs.iter().any(|v| !SUPPORTED_VERBS.contains(v)) {
        vec![FieldError::not_supported(
            &path,
            json_list(&verbs),
            SUPPORTED_VERBS,
        )]
    } else {
        Vec::new()
    }
}

fn validate_resource_rule(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_verbs(rule, path);
    let groups = strs_at(rule, "apiGroups");
    if groups.is_empty() {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    } else if groups.len() > 1 && has_wildcard(&groups) {
        errs.push(FieldError::invalid(
            &path.child("apiGroups"),
            json_list(&groups),
            "if '*' is present, must not specify other api groups",
        ));
    }
    let resources = strs_at(rule, "resources");
    if resources.is_empty() {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    } else if resources.len() > 1 && has_wildcard(&resources) {
        errs.push(FieldError::invalid(
            &path.child("resources"),
            json_list(&resources),
            "if '*' is present, must not specify other resources",
        ));
    }
    let namespaces = strs_at(rule, "namespaces");
    if namespaces.is_empty() && !bool_at(rule, "clusterScope") {
        errs.push(FieldError::required(
            &path.child("namespaces"),
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if has_wildcard(&namespaces) {
        if namespaces.len() > 1 {
            errs.push(FieldError::invalid(
                &path.child("namespaces"),
                json_list(&namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            for m in is_dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    &path.child("namespaces").index(i),
                    *ns,
                    format!("{NS_ERR_INTRO}{m}"),
                ));
            }
        }
    }
    errs
}

fn validate_non_resource_rule(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_verbs(rule, path);
    let urls = strs_at(rule, "nonResourceURLs");
    let urls_path = path.child("nonResourceURLs");
    if urls.is_empty() {
        errs.push(FieldError::required(
            &urls_path,
            "nonResourceURLs must contain at least one value",
        ));
    } else if has_wildcard(&urls) {
        if urls.len() > 1 {
            errs.push(FieldError::invalid(
                &urls_path,
                json_list(&urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            if let Some(why) = non_resource_url_error(url) {
                errs.push(FieldError::invalid(&urls_path.index(i), *url, why));
            }
        }
    }
    errs
}

/// `flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey`.
const PRESERVE_ZERO_SHARES_KEY: &str =
    "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

/// The specs of upstream's mandatory objects (staging/src/k8s.io/apiserver/pkg/apis/flowcontrol/
/// bootstrap/default.go), as their v1 JSON reads once defaulted.
fn mandatory_flow_schema_spec(name: &str) -> Option<Value> {
    let all_rules = |groups: &[&str]| {
        json!([{
            "subjects": groups.iter().map(|g| json!({"kind": "Group", "group": {"name": g}})).collect::<Vec<_>>(),
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        }])
    };
    match name {
        "exempt" => Some(json!({
            "priorityLevelConfiguration": {"name": "exempt"},
            "matchingPrecedence": 1,
            "rules": all_rules(&["system:masters"]),
        })),
        "catch-all" => Some(json!({
            "priorityLevelConfiguration": {"name": "catch-all"},
            "matchingPrecedence": 10000,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": all_rules(&["system:unauthenticated", "system:authenticated"]),
        })),
        _ => None,
    }
}

fn mandatory_priority_level_spec(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({
            "type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0},
        })),
        "catch-all" => Some(json!({
            "type": "Limited",
            "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0, "limitResponse": {"type": "Reject"}},
        })),
        _ => None,
    }
}

/// A value as `equality.Semantic.DeepEqual` compares these specs: unset strings, booleans and
/// lists (nil or empty) are their zero values. Pointers to integers keep their zeros, and
/// pointers to structs their empty objects, for they differ from nil.
fn semantic_form(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| {
                    !(v.is_null()
                        || v.as_bool() == Some(false)
                        || v.as_str() == Some("")
                        || v.as_array().is_some_and(Vec::is_empty))
                })
                .map(|(k, v)| (k.clone(), semantic_form(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic_form).collect()),
        other => other.clone(),
    }
}

/// The spec as upstream prints it in the message: its internal Go struct.
fn fixed_spec_error(spec: &Value, go_type: &str, detail: String) -> FieldError {
    let path = FieldPath::new("spec");
    let mut e = FieldError::invalid(&path, spec.clone(), detail);
    if let Some(rendered) = go_struct_json(go_type, spec, GoStyle::Internal) {
        e = e.with_rendered_value(rendered);
    }
    e
}

/// `ValidateFlowSchema`'s check of the mandatory schemas.
fn mandatory_flow_schema_errors(name: &str, spec: &Value) -> Vec<FieldError> {
    let Some(want) = mandatory_flow_schema_spec(name) else {
        return Vec::new();
    };
    if semantic_form(spec) == semantic_form(&want) {
        return Vec::new();
    }
    vec![fixed_spec_error(
        spec,
        "flowcontrol.v1.FlowSchemaSpec",
        format!("spec of '{name}' must equal the fixed value"),
    )]
}

/// `ValidateIfMandatoryPriorityLevelConfigurationObject`: the `exempt` level may change its
/// `exempt` field only.
fn mandatory_priority_level_errors(name: &str, spec: &Value) -> Vec<FieldError> {
    let Some(want) = mandatory_priority_level_spec(name) else {
        return Vec::new();
    };
    let mut have = spec.clone();
    let detail = if name == "exempt" {
        if let Some(h) = have.as_object_mut() {
            h.insert("exempt".into(), want["exempt"].clone());
        } else {
            have = json!({"exempt": want["exempt"].clone()});
        }
        format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value")
    } else {
        format!("spec of '{name}' must equal the fixed value")
    };
    if semantic_form(&have) == semantic_form(&want) {
        return Vec::new();
    }
    vec![fixed_spec_error(
        spec,
        "flowcontrol.v1.PriorityLevelConfigurationSpec",
        detail,
    )]
}

/// `ValidateNonResourceURLPath`: what is wrong with a non-resource URL, if anything.
fn non_resource_url_error(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return Some("must start with slash");
    }
    if path.contains(' ') {
        return Some("must not contain white-space");
    }
    if path.contains("//") {
        return Some("must not contain double slash");
    }
    let wildcards = path.matches('*').count();
    if wildcards > 1 || (wildcards == 1 && !path.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

/// Status conditions: types present and not repeated (`ValidateFlowSchemaStatus`,
/// `ValidatePriorityLevelConfigurationStatus`).
fn validate_conditions(obj: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("conditions");
    let conditions = obj
        .get("status")
        .map(|s| list_at(s, "conditions"))
        .unwrap_or(&[]);
    let mut seen: Vec<&str> = Vec::new();
    let mut errs = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let t = str_at(c, "type");
        if seen.contains(&t) {
            errs.push(FieldError::duplicate(&path.index(i).child("type"), t));
        }
        seen.push(t);
        if t.is_empty() {
            errs.push(FieldError::required(&path.index(i).child("type"), ""));
        }
    }
    errs
}

impl Strategy for PriorityLevelStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        if let Some(exempt) = spec.get_mut("exempt").and_then(Value::as_object_mut) {
            default_unset(exempt, "nominalConcurrencyShares", 0);
            default_unset(exempt, "lendablePercent", 0);
        }
        if let Some(limited) = spec.get_mut("limited").and_then(Value::as_object_mut) {
            default_unset(limited, "nominalConcurrencyShares", 30);
            default_unset(limited, "lendablePercent", 0);
            if let Some(queuing) = limited
                .get_mut("limitResponse")
                .and_then(|r| r.get_mut("queuing"))
                .and_then(Value::as_object_mut)
            {
                default_nonzero(queuing, "handSize", 8);
                default_nonzero(queuing, "queues", 64);
                default_nonzero(queuing, "queueLengthLimit", 50);
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        reset_status(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        // The v1beta3 round-trip annotation has no place on a stored object.
        let mut errs = Vec::new();
        if obj
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(PRESERVE_ZERO_SHARES_KEY))
        {
            errs.push(FieldError::forbidden(
                &FieldPath::new("metadata").child("annotations"),
                format!("annotation '{PRESERVE_ZERO_SHARES_KEY}' is forbidden"),
            ));
        }
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        errs.extend(validate_priority_level_spec(
            name,
            spec,
            &FieldPath::new("spec"),
        ));
        errs.extend(mandatory_priority_level_errors(name, spec));
        errs.extend(validate_conditions(obj));
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_conditions(new)
    }
}

fn validate_priority_level_spec(name: &str, spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let t = str_at(spec, "type");
    if (name == "exempt") != (t == "Exempt") {
        errs.push(FieldError::invalid(
            &path.child("type"),
            t,
            "must be 'Exempt' if and only if `name` is 'exempt'",
        ));
    }
    match t {
        "Exempt" => {
            if set_at(spec, "limited").is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("limited"),
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = set_at(spec, "exempt") {
                errs.extend(validate_exempt(exempt, &path.child("exempt")));
            }
        }
        "Limited" => {
            if set_at(spec, "exempt").is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("exempt"),
                    "must be nil if the type is Limited",
                ));
            }
            match set_at(spec, "limited") {
                None => errs.push(FieldError::required(
                    &path.child("limited"),
                    "must not be empty when type is Limited",
                )),
                Some(limited) => errs.extend(validate_limited(limited, &path.child("limited"))),
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["Exempt", "Limited"],
        )),
    }
    errs
}

fn validate_lendable_percent(obj: &Value, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if let Some(p) = set_at(obj, "lendablePercent").and_then(Value::as_i64)
        && !(0..=100).contains(&p)
    {
        errs.push(FieldError::invalid(
            &path.child("lendablePercent"),
            p,
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_exempt(exempt: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(s) = set_at(exempt, "nominalConcurrencyShares").and_then(Value::as_i64)
        && s < 0
    {
        errs.push(FieldError::invalid(
            &path.child("nominalConcurrencyShares"),
            s,
            "must be a non-negative integer",
        ));
    }
    validate_lendable_percent(exempt, path, &mut errs);
    errs
}

/// A limited level as v1 has it: zero nominal shares are allowed, negative ones are not.
fn validate_limited(limited: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let shares = int_at(limited, "nominalConcurrencyShares");
    if shares < 0 {
        errs.push(FieldError::invalid(
            &path.child("nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    errs.extend(validate_limit_response(
        limited.get("limitResponse").unwrap_or(&Value::Null),
        &path.child("limitResponse"),
    ));
    validate_lendable_percent(limited, path, &mut errs);
    if let Some(b) = set_at(limited, "borrowingLimitPercent").and_then(Value::as_i64)
        && b < 0
    {
        errs.push(FieldError::invalid(
            &path.child("borrowingLimitPercent"),
            b,
            "if specified, must be a non-negative integer",
        ));
    }
    errs
}

fn validate_limit_response(response: &Value, path: &FieldPath) -> Vec<FieldError> {
    let queuing = set_at(response, "queuing");
    match str_at(response, "type") {
        "Reject" if queuing.is_some() => vec![FieldError::forbidden(
            &path.child("queuing"),
            "must be nil if limited.limitResponse.type is not Limited",
        )],
        "Reject" => Vec::new(),
        "Queue" => match queuing {
            None => vec![FieldError::required(
                &path.child("queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )],
            Some(q) => validate_queuing(q, &path.child("queuing")),
        },
        other => vec![FieldError::not_supported(
            &path.child("type"),
            other,
            &["Queue", "Reject"],
        )],
    }
}

/// `ValidatePriorityLevelQueuingConfiguration`, with shuffle sharding's entropy bound.
fn validate_queuing(q: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let limit = int_at(q, "queueLengthLimit");
    if limit <= 0 {
        errs.push(FieldError::invalid(
            &path.child("queueLengthLimit"),
            limit,
            "must be positive",
        ));
    }
    let queues = int_at(q, "queues");
    if queues <= 0 {
        errs.push(FieldError::invalid(
            &path.child("queues"),
            queues,
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errs.push(FieldError::invalid(
            &path.child("queues"),
            queues,
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = int_at(q, "handSize");
    if hand <= 0 {
        errs.push(FieldError::invalid(
            &path.child("handSize"),
            hand,
            "must be positive",
        ));
    } else if hand > queues {
        errs.push(FieldError::invalid(
            &path.child("handSize"),
            hand,
            format!("should not be greater than queues ({queues})"),
        ));
    } else if required_entropy_bits(queues, hand) > MAX_HASH_BITS {
        errs.push(FieldError::invalid(
            &path.child("handSize"),
            hand,
            format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
    errs
}

/// `shufflesharding.RequiredEntropyBits`: ceil(log2(deck) * hand).
fn required_entropy_bits(deck: i64, hand: i64) -> i64 {
    ((deck as f64).log2() * hand as f64).ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn priority_levels_default_as_v1() {
        let mut plc = json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 0}}}}});
        PriorityLevelStrategy.default(&mut plc);
        assert_eq!(
            plc["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
        );
        let mut zero = json!({"spec": {"limited": {"nominalConcurrencyShares": 0}}});
        PriorityLevelStrategy.default(&mut zero);
        assert_eq!(zero["spec"]["limited"]["nominalConcurrencyShares"], 0);
    }

    #[test]
    fn priority_levels_validate_limits_and_queues() {
        let plc = json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject", "queuing": {"queues": 2}}}}});
        assert_eq!(
            messages(&PriorityLevelStrategy.validate(&plc)),
            [
                "spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"
            ]
        );
        let plc = json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"lendablePercent": 101, "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 9, "queueLengthLimit": 1}}}}});
        assert_eq!(
            messages(&PriorityLevelStrategy.validate(&plc)),
            [
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 9: required entropy bits of deckSize 128 and handSize 9 should not be greater than 60",
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
            ]
        );
        let plc = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Limited"}});
        assert_eq!(
            messages(&PriorityLevelStrategy.validate(&plc)),
            [
                "spec.type: Invalid value: \"Limited\": must be 'Exempt' if and only if `name` is 'exempt'",
                "spec.limited: Required value: must not be empty when type is Limited",
                "spec: Invalid value: {\"Type\":\"Limited\",\"Limited\":null,\"Exempt\":null}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value",
            ]
        );
    }

    #[test]
    fn mandatory_objects_keep_their_fixed_specs() {
        // The `exempt` level may change its `exempt` field, nothing else.
        let mut plc = json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 7}}});
        PriorityLevelStrategy.default(&mut plc);
        assert!(PriorityLevelStrategy.validate(&plc).is_empty());
        let mut plc = json!({"metadata": {"name": "catch-all"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
        PriorityLevelStrategy.default(&mut plc);
        assert!(PriorityLevelStrategy.validate(&plc).is_empty());
        plc["spec"]["limited"]["borrowingLimitPercent"] = json!(0);
        assert_eq!(
            messages(&PriorityLevelStrategy.validate(&plc)),
            [
                "spec: Invalid value: {\"Type\":\"Limited\",\"Limited\":{\"NominalConcurrencyShares\":5,\"LimitResponse\":{\"Type\":\"Reject\",\"Queuing\":null},\"LendablePercent\":0,\"BorrowingLimitPercent\":0},\"Exempt\":null}: spec of 'catch-all' must equal the fixed value"
            ]
        );
        let mut fs = json!({"metadata": {"name": "catch-all"}, "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000, "distinguisherMethod": {"type": "ByUser"}, "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}}, {"kind": "Group", "group": {"name": "system:authenticated"}}], "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
        FlowSchemaStrategy.default(&mut fs);
        assert!(FlowSchemaStrategy.validate(&fs).is_empty());
        fs["spec"]["matchingPrecedence"] = json!(9000);
        let errs = messages(&FlowSchemaStrategy.validate(&fs));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].ends_with("spec of 'catch-all' must equal the fixed value"));
        let mut plc = json!({"metadata": {"name": "p", "annotations": {PRESERVE_ZERO_SHARES_KEY: "true"}}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}});
        PriorityLevelStrategy.default(&mut plc);
        assert_eq!(
            messages(&PriorityLevelStrategy.validate(&plc)),
            [
                "metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"
            ]
        );
    }

    #[test]
    fn flow_schemas_validate_rules_and_subjects() {
        let mut fs = json!({"metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "distinguisherMethod": {"type": "ByPod"}, "rules": [{"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true}]}, {"subjects": [{"kind": "User", "group": {"name": "g"}}], "nonResourceRules": [{"verbs": ["get", "fly"], "nonResourceURLs": ["/a/*/b"]}]}]}});
        FlowSchemaStrategy.default(&mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        assert_eq!(
            messages(&FlowSchemaStrategy.validate(&fs)),
            [
                "spec.distinguisherMethod.type: Unsupported value: {\"Type\":\"ByPod\"}: supported values: \"ByNamespace\", \"ByUser\"",
                "spec.rules[0].subjects: Required value: subjects must contain at least one value",
                "spec.rules[1].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[1].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
                "spec.rules[1].nonResourceRules[0].verbs: Unsupported value: [\"get\",\"fly\"]: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                "spec.rules[1].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"/a/*/b\": wildcard can only do suffix matching",
            ]
        );
    }
}
