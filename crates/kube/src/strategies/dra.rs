//! Dynamic resource allocation (resource.k8s.io/v1: DeviceClass, ResourceClaim,
//! ResourceClaimTemplate, ResourceSlice; upstream: pkg/apis/resource/v1/defaults.go,
//! pkg/apis/resource/validation/validation.go, pkg/registry/resource/*/strategy.go).
//!
//! The handwritten validation is authoritative in v1.36 (none of these strategies enforces
//! declarative validation), so the rules and their order are those of validation.go. Features
//! on by default in v1.36 apply (prioritized lists, device taints, partitionable devices,
//! consumable capacity, binding conditions, extended resources, admin access); the fields of
//! the alpha gates that are off (list-typed attributes, node allocatable resource mappings)
//! are dropped on create, as upstream's `dropDisabledFields` does.
//!
//! Device selectors' CEL expressions are compiled and their cost estimated in `dra_cel`.
//!
//! Not done here: the namespace label check for admin access (`AuthorizedForAdmin`, which reads the namespace) and
//! the `resourceclaims/binding` authorization of status writes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use apimachinery::quantity::Quantity;
use apimachinery::validation::{
    FieldError, FieldPath, NameValidator, is_c_identifier, is_dns1123_label, is_valid_label_value,
    validate_label_name,
};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::dra_cel::{SelectorError, check_selector};
use super::fields::{bool_at, int_at, list_at, opt_str, set_at, str_at, strs_at};
use super::nodeselection::validate_node_selector;
use super::pod::validate_template_object_meta;
use super::resources::{is_extended, is_native};
use super::set_default;
use super::volumes::validate_csi_driver_name;

const DEVICE_REQUESTS_MAX: usize = 32;
const DEVICE_CONSTRAINTS_MAX: usize = 32;
const DEVICE_CONFIG_MAX: usize = 32;
const DEVICE_SELECTORS_MAX: usize = 32;
const FIRST_AVAILABLE_MAX: usize = 8;
const CEL_EXPRESSION_MAX_LEN: usize = 10 * 1024;
const OPAQUE_PARAMETERS_MAX_LEN: usize = 10 * 1024;
const RESERVED_FOR_MAX: usize = 256;
const ALLOCATION_RESULTS_MAX: usize = 32;
const BINDING_CONDITIONS_MAX: usize = 4;
const POOL_NAME_MAX_LEN: usize = 253;
const DEVICE_MAX_ID_LEN: usize = 32;
const DEVICE_MAX_DOMAIN_LEN: usize = 63;
const ATTRIBUTE_VALUE_MAX_LEN: usize = 64;
const DEVICE_TAINTS_MAX: usize = 16;
const SLICE_MAX_DEVICES: usize = 128;
const SLICE_MAX_DEVICES_ADVANCED: usize = 64;
const SLICE_MAX_COUNTER_SETS: usize = 8;
const MAX_COUNTERS_PER_SET: usize = 32;
const MAX_COUNTER_CONSUMPTIONS_PER_DEVICE: usize = 2;
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
const MAX_ATTRIBUTE_VALUES: usize = 48;
const REQUEST_POLICY_MAX_OPTIONS: usize = 10;
const STATUS_MAX_CONDITIONS: usize = 8;
const STATUS_DATA_MAX_LEN: usize = 10 * 1024;
const INTERFACE_NAME_MAX_LEN: usize = 256;
const HARDWARE_ADDRESS_MAX_LEN: usize = 128;
const NETWORK_MAX_IPS: usize = 16;
const DNS1123_LABEL_MAX_LEN: usize = 63;

const REQUEST_REF_MESSAGE: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];

type Errs = Vec<FieldError>;

// ---------------------------------------------------------------------------------------------
// Shared shapes of upstream's helpers.

/// `validateSlice`: more than `max` items is one TooMany and nothing else; else every item.
fn validate_slice(
    list: &[Value],
    max: Option<usize>,
    path: &FieldPath,
    mut item: impl FnMut(&Value, &FieldPath) -> Errs,
) -> Errs {
    if let Some(max) = max
        && list.len() > max
    {
        return vec![FieldError::too_many(
            path,
            Some(list.len() as i64),
            Some(max as i64),
        )];
    }
    list.iter()
        .enumerate()
        .flat_map(|(i, v)| item(v, &path.index(i)))
        .collect()
}

/// `validateSet`: as `validate_slice`, then a Duplicate for every repeated key.
fn validate_set<K: Ord + Into<Value> + Clone>(
    list: &[Value],
    max: Option<usize>,
    path: &FieldPath,
    item: impl FnMut(&Value, &FieldPath) -> Errs,
    key: impl Fn(&Value) -> K,
) -> Errs {
    if let Some(max) = max
        && list.len() > max
    {
        return validate_slice(list, Some(max), path, item);
    }
    let mut errs = validate_slice(list, None, path, item);
    let mut seen = BTreeSet::new();
    for (i, v) in list.iter().enumerate() {
        let k = key(v);
        if !seen.insert(k.clone()) {
            errs.push(FieldError::duplicate(&path.index(i), k));
        }
    }
    errs
}

/// `validateMap`: a size limit, then each key (reported at the map's path) and each value
/// (at `path[key]`, long keys shortened in the middle). Go iterates maps in random order;
/// this goes by key order, as Go's encoder writes them.
fn validate_map(
    map: Option<&Value>,
    max: Option<usize>,
    truncate: usize,
    path: &FieldPath,
    key: impl Fn(&str, &FieldPath) -> Errs,
    item: impl Fn(&Value, &FieldPath) -> Errs,
) -> Errs {
    let Some(m) = map.and_then(Value::as_object) else {
        return Vec::new();
    };
    if let Some(max) = max
        && m.len() > max
    {
        return vec![FieldError::too_many(
            path,
            Some(m.len() as i64),
            Some(max as i64),
        )];
    }
    let mut errs = Vec::new();
    for (k, v) in m {
        errs.extend(key(k, path));
        errs.extend(item(v, &path.key(&truncate_if_too_long(k, truncate))));
    }
    errs
}

fn truncate_if_too_long(s: &str, max: usize) -> String {
    let max = max.max(16);
    if s.len() <= max {
        return s.to_string();
    }
    let remaining = max - 3;
    let b = s.as_bytes();
    let head = String::from_utf8_lossy(&b[..remaining.div_ceil(2)]);
    let tail = String::from_utf8_lossy(&b[b.len() - remaining / 2..]);
    format!("{head}...{tail}")
}

fn messages(path: &FieldPath, value: &str, msgs: Vec<String>) -> Errs {
    msgs.into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

fn dns_label(name: &str, path: &FieldPath) -> Errs {
    messages(path, name, is_dns1123_label(name))
}

fn dns_subdomain(name: &str, path: &FieldPath) -> Errs {
    messages(
        path,
        name,
        NameValidator::Dns1123Subdomain.validate(name, false),
    )
}

fn label_value(value: &str, path: &FieldPath) -> Errs {
    messages(path, value, is_valid_label_value(value))
}

/// `validatePoolName`: required, at most 253 bytes, DNS subdomains separated by slashes.
fn validate_pool_name(name: &str, path: &FieldPath) -> Errs {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    if name.len() > POOL_NAME_MAX_LEN {
        errs.push(FieldError::too_long(path, "", POOL_NAME_MAX_LEN as i64));
    }
    for part in name.split('/') {
        errs.extend(dns_subdomain(part, path));
    }
    errs
}

/// `validateUID`: an RFC 4122 UUID in its lowercase normalized form.
fn validate_uid(uid: &str, path: &FieldPath) -> Errs {
    match uuid_error(uid) {
        Some(e) => vec![FieldError::invalid(
            path,
            uid,
            format!("error validating uid: {e}"),
        )],
        None if uid.len() != 36 || uid != uid.to_lowercase() => vec![FieldError::invalid(
            path,
            uid,
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
        )],
        None => Vec::new(),
    }
}

/// The error of google/uuid's `Validate`, which accepts the 36-character form, the same
/// wrapped in braces or prefixed `urn:uuid:`, and 32 bare hex digits.
fn uuid_error(s: &str) -> Option<String> {
    let body = match s.len() {
        36 => s,
        38 if s.starts_with('{') && s.ends_with('}') => &s[1..37],
        45 if s.len() >= 9 && s[..9].eq_ignore_ascii_case("urn:uuid:") => &s[9..],
        32 => {
            return (!s.bytes().all(|c| c.is_ascii_hexdigit()))
                .then(|| "invalid UUID format".to_string());
        }
        n => return Some(format!("invalid UUID length: {n}")),
    };
    let b = body.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return Some("invalid UUID format".to_string());
    }
    let ok = b
        .iter()
        .enumerate()
        .all(|(i, c)| matches!(i, 8 | 13 | 18 | 23) || c.is_ascii_hexdigit());
    (!ok).then(|| "invalid UUID format".to_string())
}

/// `validateQualifiedName`: a C identifier of at most 32 bytes, optionally after a driver-name
/// domain and a slash.
fn validate_qualified_name(name: &str, path: &FieldPath) -> Errs {
    let parts: Vec<&str> = name.split('/').collect();
    let mut errs = Vec::new();
    match parts.as_slice() {
        [id] => errs.extend(validate_c_identifier(id, path)),
        [domain, id] => {
            if domain.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    "",
                    "the domain must not be empty",
                ));
            } else {
                errs.extend(validate_csi_driver_name(domain, path));
            }
            if id.is_empty() {
                errs.push(FieldError::invalid(path, "", "the name must not be empty"));
            } else {
                errs.extend(validate_c_identifier(id, path));
            }
        }
        _ => {}
    }
    errs
}

/// `validateFullyQualifiedName`: a qualified name that has its domain.
fn validate_fully_qualified_name(name: &str, path: &FieldPath) -> Errs {
    let mut errs = validate_qualified_name(name, path);
    if !name.contains('/') {
        errs.push(FieldError::invalid(
            path,
            name,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
    errs
}

fn validate_c_identifier(id: &str, path: &FieldPath) -> Errs {
    let mut errs = Vec::new();
    if id.len() > DEVICE_MAX_ID_LEN {
        errs.push(FieldError::too_long(path, "", DEVICE_MAX_ID_LEN as i64));
    }
    errs.extend(messages(path, id, is_c_identifier(id)));
    errs
}

/// `validateRawExtension`: present, not too large on create, a JSON object.
fn validate_raw_extension(raw: Option<&Value>, path: &FieldPath, stored: bool, max: usize) -> Errs {
    match raw {
        None => vec![FieldError::required(path, "")],
        Some(v) if !stored && v.to_string().len() > max => {
            vec![FieldError::too_long(path, "", max as i64)]
        }
        Some(Value::Null) => vec![FieldError::required(path, "")],
        Some(Value::Object(_)) => Vec::new(),
        Some(_) => vec![FieldError::invalid(
            path,
            "<value omitted>",
            "must be a valid JSON object",
        )],
    }
}

/// `validateDeviceTaint` (`old_effect`: the effect of the taint it replaces, not checked again).
fn validate_device_taint(taint: &Value, old_effect: Option<&str>, path: &FieldPath) -> Errs {
    let mut errs = validate_label_name(str_at(taint, "key"), &path.child("key"));
    let value = str_at(taint, "value");
    if !value.is_empty() {
        errs.extend(label_value(value, &path.child("value")));
    }
    let effect = str_at(taint, "effect");
    if old_effect != Some(effect) {
        if effect.is_empty() {
            errs.push(FieldError::required(&path.child("effect"), ""));
        } else if !TAINT_EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                &path.child("effect"),
                effect,
                TAINT_EFFECTS,
            ));
        }
    }
    errs
}

/// `validateDeviceToleration`.
fn validate_device_toleration(t: &Value, path: &FieldPath) -> Errs {
    let mut errs = Vec::new();
    let key = str_at(t, "key");
    if !key.is_empty() {
        errs.extend(validate_label_name(key, &path.child("key")));
    }
    let value = str_at(t, "value");
    match str_at(t, "operator") {
        "Exists" => {
            if !value.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child("value"),
                    value,
                    "must be empty for operator `Exists`",
                ));
            }
        }
        "Equal" => errs.extend(label_value(value, &path.child("value"))),
        "" => errs.push(FieldError::required(&path.child("operator"), "")),
        op => errs.push(FieldError::not_supported(
            &path.child("operator"),
            op,
            &["Equal", "Exists"],
        )),
    }
    let effect = str_at(t, "effect");
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        errs.push(FieldError::not_supported(
            &path.child("effect"),
            effect,
            TAINT_EFFECTS,
        ));
    }
    errs
}

/// `validateDeviceBindingParameters`: at most four of each, label-name shaped, no duplicates,
/// no overlap, and both or neither.
fn validate_binding_parameters(obj: &Value, path: &FieldPath) -> Errs {
    let conds = strs_at(obj, "bindingConditions");
    let failures = strs_at(obj, "bindingFailureConditions");
    let cpath = path.child("bindingConditions");
    let fpath = path.child("bindingFailureConditions");
    let mut errs = validate_slice(
        list_at(obj, "bindingConditions"),
        Some(BINDING_CONDITIONS_MAX),
        &cpath,
        |v, p| validate_label_name(v.as_str().unwrap_or(""), p),
    );
    errs.extend(validate_slice(
        list_at(obj, "bindingFailureConditions"),
        Some(BINDING_CONDITIONS_MAX),
        &fpath,
        |v, p| validate_label_name(v.as_str().unwrap_or(""), p),
    ));
    let mut seen = BTreeSet::new();
    for (i, c) in conds.iter().enumerate() {
        if !seen.insert(*c) {
            errs.push(FieldError::duplicate(&cpath.index(i), *c));
        }
    }
    let mut seen_failures = BTreeSet::new();
    for (i, c) in failures.iter().enumerate() {
        if !seen_failures.insert(*c) {
            errs.push(FieldError::duplicate(&fpath.index(i), *c));
        }
        if conds.contains(c) {
            errs.push(FieldError::invalid(
                &fpath.index(i),
                *c,
                "bindingFailureConditions must not overlap with bindingConditions",
            ));
        }
    }
    if conds.is_empty() && !failures.is_empty() {
        errs.push(
            FieldError::invalid(
                &cpath,
                Value::Null,
                "bindingConditions are required to use bindingFailureConditions",
            )
            .with_rendered_value(if obj.get("bindingConditions").is_some() {
                "[]"
            } else {
                "null"
            }),
        );
    }
    if failures.is_empty() && !conds.is_empty() {
        errs.push(
            FieldError::invalid(
                &fpath,
                Value::Null,
                "bindingFailureConditions are required to use bindingConditions",
            )
            .with_rendered_value(if obj.get("bindingFailureConditions").is_some() {
                "[]"
            } else {
                "null"
            }),
        );
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Claims.

/// Request names of a claim: each request with the names of its subrequests.
struct RequestNames(BTreeMap<String, Option<BTreeSet<String>>>);

impl RequestNames {
    fn of(devices: &Value) -> Self {
        let mut names = BTreeMap::new();
        for req in list_at(devices, "requests") {
            let subs = list_at(req, "firstAvailable");
            let entry = (!subs.is_empty())
                .then(|| subs.iter().map(|s| str_at(s, "name").to_string()).collect());
            names.insert(str_at(req, "name").to_string(), entry);
        }
        Self(names)
    }

    fn has(&self, name: &str) -> bool {
        let segments: Vec<&str> = name.split('/').collect();
        match segments.as_slice() {
            [req] => self.0.contains_key(*req),
            [req, sub] => matches!(self.0.get(*req), Some(Some(s)) if s.contains(*sub)),
            _ => false,
        }
    }
}

/// `validateRequestNameRef`: a request, or a request and a subrequest, of the claim.
fn validate_request_name_ref(name: &str, path: &FieldPath, names: &RequestNames) -> Errs {
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        return vec![FieldError::invalid(path, name, REQUEST_REF_MESSAGE)];
    }
    let mut errs: Errs = segments.iter().flat_map(|s| dns_label(s, path)).collect();
    if !names.has(name) {
        errs.push(FieldError::invalid(path, name, REQUEST_REF_MESSAGE));
    }
    errs
}

fn validate_request_refs(obj: &Value, path: &FieldPath, names: &RequestNames) -> Errs {
    validate_set(
        list_at(obj, "requests"),
        Some(DEVICE_REQUESTS_MAX),
        &path.child("requests"),
        |v, p| validate_request_name_ref(v.as_str().unwrap_or(""), p, names),
        |v| v.as_str().unwrap_or("").to_string(),
    )
}

/// `validateSelector`, `validateCELSelector`: an expression too long is not compiled; one that
/// compiles must give a bool and stay within the selector cost limit (`dra_cel`).
fn validate_selector(selector: &Value, path: &FieldPath) -> Errs {
    let Some(cel) = set_at(selector, "cel") else {
        return vec![FieldError::required(&path.child("cel"), "")];
    };
    let expression = str_at(cel, "expression");
    let path = path.child("cel").child("expression");
    if expression.len() > CEL_EXPRESSION_MAX_LEN {
        return vec![FieldError::too_long(
            &path,
            "",
            CEL_EXPRESSION_MAX_LEN as i64,
        )];
    }
    match check_selector(expression) {
        Ok(()) => Vec::new(),
        Err(SelectorError::Invalid(detail)) => {
            vec![FieldError::invalid(&path, expression, detail)]
        }
        Err(SelectorError::TooComplex) => vec![FieldError::forbidden(
            &path,
            "too complex, exceeds cost limit",
        )],
    }
}

fn validate_selectors(list: &[Value], path: &FieldPath) -> Errs {
    validate_slice(list, Some(DEVICE_SELECTORS_MAX), path, validate_selector)
}

/// `validateDeviceConfiguration`: opaque configuration for a driver.
fn validate_device_configuration(config: &Value, path: &FieldPath, stored: bool) -> Errs {
    match set_at(config, "opaque") {
        None => vec![FieldError::required(&path.child("opaque"), "")],
        Some(opaque) => {
            let p = path.child("opaque");
            let mut errs = validate_csi_driver_name(str_at(opaque, "driver"), &p.child("driver"));
            errs.extend(validate_raw_extension(
                opaque.get("parameters"),
                &p.child("parameters"),
                stored,
                OPAQUE_PARAMETERS_MAX_LEN,
            ));
            errs
        }
    }
}

/// The rules an exact request and a subrequest share: class, selectors, allocation mode and
/// count, tolerations.
fn validate_request_body(req: &Value, path: &FieldPath) -> Errs {
    let mut errs = Vec::new();
    let class = str_at(req, "deviceClassName");
    if class.is_empty() {
        errs.push(FieldError::required(&path.child("deviceClassName"), ""));
    } else {
        errs.extend(dns_subdomain(class, &path.child("deviceClassName")));
    }
    errs.extend(validate_selectors(
        list_at(req, "selectors"),
        &path.child("selectors"),
    ));
    let count = int_at(req, "count");
    match str_at(req, "allocationMode") {
        "All" if count != 0 => errs.push(FieldError::invalid(
            &path.child("count"),
            count,
            "must not be specified when allocationMode is 'All'",
        )),
        "ExactCount" if count <= 0 => errs.push(FieldError::invalid(
            &path.child("count"),
            count,
            "must be greater than zero",
        )),
        "All" | "ExactCount" => {}
        mode => errs.push(FieldError::not_supported(
            &path.child("allocationMode"),
            mode,
            &["All", "ExactCount"],
        )),
    }
    for (i, t) in list_at(req, "tolerations").iter().enumerate() {
        errs.extend(validate_device_toleration(
            t,
            &path.child("tolerations").index(i),
        ));
    }
    errs
}

/// `validateDeviceRequest`: a name and exactly one of `exactly` and `firstAvailable`.
fn validate_device_request(req: &Value, path: &FieldPath) -> Errs {
    let mut errs = dns_label(str_at(req, "name"), &path.child("name"));
    let exact = set_at(req, "exactly");
    let first = list_at(req, "firstAvailable");
    match (exact, first.is_empty()) {
        (None, true) => errs.push(FieldError::required(
            path,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        (Some(_), false) => errs.push(
            FieldError::invalid(
                path,
                Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )
            .with_rendered_value("null"),
        ),
        (None, false) => errs.extend(validate_set(
            first,
            Some(FIRST_AVAILABLE_MAX),
            &path.child("firstAvailable"),
            |sub, p| {
                let mut e = dns_label(str_at(sub, "name"), &p.child("name"));
                e.extend(validate_request_body(sub, p));
                e
            },
            |sub| str_at(sub, "name").to_string(),
        )),
        (Some(e), true) => errs.extend(validate_request_body(e, &path.child("exactly"))),
    }
    errs
}

/// `validateDeviceConstraint`.
fn validate_device_constraint(c: &Value, path: &FieldPath, names: &RequestNames) -> Errs {
    let mut errs = validate_request_refs(c, path, names);
    if let Some(m) = opt_str(c, "matchAttribute") {
        errs.extend(validate_fully_qualified_name(
            m,
            &path.child("matchAttribute"),
        ));
    } else if let Some(d) = opt_str(c, "distinctAttribute") {
        errs.extend(validate_fully_qualified_name(
            d,
            &path.child("distinctAttribute"),
        ));
    } else {
        // Upstream's wording, kept as it is for the case where neither is set.
        errs.push(FieldError::required(
            path,
            r#"exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#,
        ));
    }
    errs
}

/// `validateDeviceClaim`: requests, constraints and configuration.
fn validate_device_claim(devices: &Value, path: &FieldPath, stored: bool) -> Errs {
    let names = RequestNames::of(devices);
    let mut errs = validate_set(
        list_at(devices, "requests"),
        Some(DEVICE_REQUESTS_MAX),
        &path.child("requests"),
        validate_device_request,
        |r| str_at(r, "name").to_string(),
    );
    errs.extend(validate_slice(
        list_at(devices, "constraints"),
        Some(DEVICE_CONSTRAINTS_MAX),
        &path.child("constraints"),
        |c, p| validate_device_constraint(c, p, &names),
    ));
    errs.extend(validate_slice(
        list_at(devices, "config"),
        Some(DEVICE_CONFIG_MAX),
        &path.child("config"),
        |c, p| {
            let mut e = validate_request_refs(c, p, &names);
            e.extend(validate_device_configuration(c, p, stored));
            e
        },
    ));
    errs
}

fn validate_claim_spec(spec: &Value, path: &FieldPath) -> Errs {
    let devices = spec.get("devices").unwrap_or(&Value::Null);
    validate_device_claim(devices, &path.child("devices"), false)
}

/// The device a result or a device status names, with its share ID.
fn shared_device_id(v: &Value) -> String {
    let id = format!(
        "{}/{}/{}",
        str_at(v, "driver"),
        str_at(v, "pool"),
        str_at(v, "device")
    );
    match opt_str(v, "shareID") {
        Some(share) => format!("{id}/{share}"),
        None => id,
    }
}

/// The shared device ID as upstream prints it in messages: its struct's JSON.
fn shared_device_id_value(d: &Value) -> (Value, String) {
    let field = |k: &str| Value::from(str_at(d, k));
    let share = Value::from(opt_str(d, "shareID").unwrap_or(""));
    let rendered = format!(
        "{{\"Driver\":{},\"Pool\":{},\"Device\":{},\"ShareID\":{}}}",
        field("driver"),
        field("pool"),
        field("device"),
        share
    );
    let id = json!({"Driver": field("driver"), "Pool": field("pool"),
        "Device": field("device"), "ShareID": share});
    (id, rendered)
}

/// `validateResourceClaimStatusUpdate`.
fn validate_claim_status(new: &Value, old: &Value, path: &FieldPath) -> Errs {
    let status = new.get("status").unwrap_or(&Value::Null);
    let old_status = old.get("status").unwrap_or(&Value::Null);
    let names = RequestNames::of(new.pointer("/spec/devices").unwrap_or(&Value::Null));
    let reserved = list_at(status, "reservedFor");
    let mut errs = validate_set(
        reserved,
        Some(RESERVED_FOR_MAX),
        &path.child("reservedFor"),
        |r, p| {
            let mut e = Vec::new();
            for f in ["resource", "name", "uid"] {
                if str_at(r, f).is_empty() {
                    e.push(FieldError::required(&p.child(f), ""));
                }
            }
            e
        },
        |r| str_at(r, "uid").to_string(),
    );
    let allocation = set_at(status, "allocation");
    let allocated: BTreeSet<String> = allocation
        .map(|a| {
            list_at(a.get("devices").unwrap_or(&Value::Null), "results")
                .iter()
                .map(shared_device_id)
                .collect()
        })
        .unwrap_or_default();
    // A set keyed by the shared device ID, which upstream prints as its struct's JSON.
    let devices = list_at(status, "devices");
    for (i, d) in devices.iter().enumerate() {
        errs.extend(validate_device_status(
            d,
            &path.child("devices").index(i),
            &allocated,
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        if !seen.insert(shared_device_id(d)) {
            let (id, rendered) = shared_device_id_value(d);
            errs.push(
                FieldError::duplicate(&path.child("devices").index(i), id)
                    .with_rendered_value(rendered),
            );
        }
    }
    if !reserved.is_empty() {
        if allocation.is_none() {
            errs.push(FieldError::forbidden(
                &path.child("reservedFor"),
                "may not be specified when `allocated` is not set",
            ));
        } else if new.pointer("/metadata/deletionTimestamp").is_some() {
            let old_reserved = list_at(old_status, "reservedFor");
            if reserved.iter().any(|r| !old_reserved.contains(r)) {
                errs.push(FieldError::forbidden(
                    &path.child("reservedFor"),
                    "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                ));
            }
        }
    }
    match (allocation, set_at(old_status, "allocation")) {
        (Some(a), Some(o)) if a != o => {
            let mut err =
                FieldError::invalid(&path.child("allocation"), a.clone(), "field is immutable");
            if let Some(r) = go_struct_json("resource.v1.AllocationResult", a, GoStyle::Internal) {
                err = err.with_rendered_value(r);
            }
            errs.push(err);
        }
        (Some(a), None) => errs.extend(validate_allocation_result(
            a,
            &path.child("allocation"),
            &names,
        )),
        _ => {}
    }
    errs
}

/// `validateAllocationResult` for a new allocation.
fn validate_allocation_result(a: &Value, path: &FieldPath, names: &RequestNames) -> Errs {
    let devices = a.get("devices").unwrap_or(&Value::Null);
    let dpath = path.child("devices");
    let mut errs = validate_slice(
        list_at(devices, "results"),
        Some(ALLOCATION_RESULTS_MAX),
        &dpath.child("results"),
        |r, p| {
            let mut e = validate_request_name_ref(str_at(r, "request"), &p.child("request"), names);
            e.extend(validate_csi_driver_name(
                str_at(r, "driver"),
                &p.child("driver"),
            ));
            e.extend(validate_pool_name(str_at(r, "pool"), &p.child("pool")));
            e.extend(dns_label(str_at(r, "device"), &p.child("device")));
            e.extend(validate_binding_parameters(r, p));
            if let Some(share) = opt_str(r, "shareID") {
                e.extend(validate_uid(share, &p.child("shareID")));
            }
            e
        },
    );
    errs.extend(validate_slice(
        list_at(devices, "config"),
        Some(2 * DEVICE_CONFIG_MAX),
        &dpath.child("config"),
        |c, p| {
            let mut e = Vec::new();
            match str_at(c, "source") {
                "" => e.push(FieldError::required(&p.child("source"), "")),
                "FromClaim" | "FromClass" => {}
                s => e.push(FieldError::not_supported(
                    &p.child("source"),
                    s,
                    &["FromClaim", "FromClass"],
                )),
            }
            e.extend(validate_request_refs(c, p, names));
            e.extend(validate_device_configuration(c, p, false));
            e
        },
    ));
    if let Some(selector) = set_at(a, "nodeSelector") {
        errs.extend(validate_node_selector(
            selector,
            false,
            &path.child("nodeSelector"),
        ));
    }
    errs
}

/// `validateDeviceStatus`: an allocated device's status.
fn validate_device_status(d: &Value, path: &FieldPath, allocated: &BTreeSet<String>) -> Errs {
    let mut errs = validate_csi_driver_name(str_at(d, "driver"), &path.child("driver"));
    errs.extend(validate_pool_name(str_at(d, "pool"), &path.child("pool")));
    errs.extend(dns_label(str_at(d, "device"), &path.child("device")));
    if let Some(share) = opt_str(d, "shareID") {
        errs.extend(validate_uid(share, &path.child("shareID")));
    }
    if !allocated.contains(&shared_device_id(d)) {
        let (id, rendered) = shared_device_id_value(d);
        errs.push(
            FieldError::invalid(path, id, "must be an allocated device in the claim")
                .with_rendered_value(rendered),
        );
    }
    let conditions = list_at(d, "conditions");
    if conditions.len() > STATUS_MAX_CONDITIONS {
        errs.push(FieldError::too_many(
            &path.child("conditions"),
            Some(conditions.len() as i64),
            Some(STATUS_MAX_CONDITIONS as i64),
        ));
    }
    errs.extend(super::admissionregistration::validate_metav1_conditions(
        conditions,
        &path.child("conditions"),
    ));
    if let Some(data) = d.get("data").filter(|v| !v.is_null()) {
        errs.extend(validate_raw_extension(
            Some(data),
            &path.child("data"),
            false,
            STATUS_DATA_MAX_LEN,
        ));
    }
    if let Some(net) = set_at(d, "networkData") {
        let np = path.child("networkData");
        if str_at(net, "interfaceName").len() > INTERFACE_NAME_MAX_LEN {
            errs.push(FieldError::too_long(
                &np.child("interfaceName"),
                "",
                INTERFACE_NAME_MAX_LEN as i64,
            ));
        }
        if str_at(net, "hardwareAddress").len() > HARDWARE_ADDRESS_MAX_LEN {
            errs.push(FieldError::too_long(
                &np.child("hardwareAddress"),
                "",
                HARDWARE_ADDRESS_MAX_LEN as i64,
            ));
        }
        errs.extend(validate_set(
            list_at(net, "ips"),
            Some(NETWORK_MAX_IPS),
            &np.child("ips"),
            |v, p| validate_interface_address(v.as_str().unwrap_or(""), p),
            |v| v.as_str().unwrap_or("").to_string(),
        ));
    }
    errs
}

/// `IsValidInterfaceAddress`: an address with its prefix length, in canonical form.
fn validate_interface_address(value: &str, path: &FieldPath) -> Errs {
    let parsed = value.split_once('/').and_then(|(ip, bits)| {
        let ip = parse_ip_sloppy(ip)?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits: u8 = bits
            .parse()
            .ok()
            .filter(|b| *b <= max && !bits.starts_with('+'))?;
        Some((ip, bits))
    });
    let Some((ip, bits)) = parsed else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)",
        )];
    };
    let canonical = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) if bits >= 96 => format!("{v4}/{}", bits - 96),
            Some(v4) => format!("{v4}/{bits}"),
            None => format!("{v6}/{bits}"),
        },
        IpAddr::V4(v4) => format!("{v4}/{bits}"),
    };
    if canonical != value {
        return vec![FieldError::invalid(
            path,
            value,
            format!("must be in canonical form ({})", go_quote(&canonical)),
        )];
    }
    Vec::new()
}

/// Go's `ParseIPSloppy`: IPv4 octets may carry leading zeros (read as decimal).
fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut b = [0u8; 4];
    for (i, o) in octets.iter().enumerate() {
        if o.is_empty() || o.len() > 3 || !o.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        b[i] = o.parse().ok()?;
    }
    Some(IpAddr::from(b))
}

fn go_quote(s: &str) -> String {
    apimachinery::validation::go_quote(s)
}

/// `SetDefaults_ExactDeviceRequest` / `SetDefaults_DeviceSubRequest`: `ExactCount` of one
/// device; tolerations default to the `Equal` operator.
fn default_request(req: &mut Value) {
    if !req.is_object() {
        return;
    }
    set_default(req, "allocationMode", json!("ExactCount"));
    if req.get("allocationMode").and_then(Value::as_str) == Some("ExactCount")
        && req.get("count").and_then(Value::as_i64).unwrap_or(0) == 0
    {
        req["count"] = json!(1);
    }
    default_tolerations(req);
}

fn default_tolerations(obj: &mut Value) {
    if let Some(tolerations) = obj.get_mut("tolerations").and_then(Value::as_array_mut) {
        for t in tolerations {
            set_default(t, "operator", json!("Equal"));
        }
    }
}

fn default_claim(claim: &mut Value, spec_pointer: &str) {
    if let Some(requests) = claim
        .pointer_mut(&format!("{spec_pointer}/devices/requests"))
        .and_then(Value::as_array_mut)
    {
        for req in requests {
            if let Some(exact) = req.get_mut("exactly") {
                default_request(exact);
            }
            if let Some(subs) = req.get_mut("firstAvailable").and_then(Value::as_array_mut) {
                for sub in subs {
                    default_request(sub);
                }
            }
        }
    }
    if let Some(results) = claim
        .pointer_mut("/status/allocation/devices/results")
        .and_then(Value::as_array_mut)
    {
        for r in results {
            default_tolerations(r);
        }
    }
}

/// `dropDeallocatedStatusDevices`: the status of devices the new status no longer allocates
/// goes away with their allocation.
fn drop_deallocated_status_devices(new: &mut Value, old: &Value) {
    let ids = |claim: &Value| -> BTreeSet<String> {
        claim
            .pointer("/status/allocation/devices/results")
            .and_then(Value::as_array)
            .map(|r| r.iter().map(shared_device_id).collect())
            .unwrap_or_default()
    };
    let kept = ids(new);
    let deallocated: BTreeSet<String> = ids(old).difference(&kept).cloned().collect();
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(devices) = status.get_mut("devices").and_then(Value::as_array_mut) else {
        return;
    };
    devices.retain(|d| !deallocated.contains(&shared_device_id(d)));
    if devices.is_empty() {
        status.remove("devices");
    }
}

fn immutable_spec(new: &Value, old: &Value, go_type: &str) -> Errs {
    let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
    if spec(new) == spec(old) {
        return Vec::new();
    }
    let mut err = FieldError::invalid(&FieldPath::new("spec"), spec(new), "field is immutable");
    if let Some(r) = go_struct_json(go_type, &spec(new), GoStyle::Internal) {
        err = err.with_rendered_value(r);
    }
    vec![err]
}

pub struct ResourceClaimStrategy {
    /// A ResourceClaimTemplate (its claim spec is under `spec.spec`), else a ResourceClaim.
    pub template: bool,
}

impl ResourceClaimStrategy {
    fn spec_pointer(&self) -> &'static str {
        if self.template { "/spec/spec" } else { "/spec" }
    }
}

impl Strategy for ResourceClaimStrategy {
    fn default(&self, obj: &mut Value) {
        default_claim(obj, self.spec_pointer());
    }

    /// A claim's status is the scheduler's.
    fn prepare_for_create(&self, obj: &mut Value) {
        if !self.template {
            obj["status"] = json!({});
        }
    }

    /// Status writes drop the status of devices no longer allocated (a spec write keeps the
    /// old status, so nothing is deallocated there).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if !self.template {
            drop_deallocated_status_devices(new, old);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        if self.template {
            let spec = obj.get("spec").unwrap_or(&Value::Null);
            let path = FieldPath::new("spec");
            let mut errs = validate_template_object_meta(
                spec.get("metadata").unwrap_or(&Value::Null),
                &path.child("metadata"),
            );
            errs.extend(validate_claim_spec(
                spec.get("spec").unwrap_or(&Value::Null),
                &path.child("spec"),
            ));
            errs
        } else {
            validate_claim_spec(
                obj.get("spec").unwrap_or(&Value::Null),
                &FieldPath::new("spec"),
            )
        }
    }

    /// The spec is immutable, and only that is checked on update (upstream does not validate
    /// it again).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let go_type = if self.template {
            "resource.v1.ResourceClaimTemplateSpec"
        } else {
            "resource.v1.ResourceClaimSpec"
        };
        immutable_spec(new, old, go_type)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_claim_status(new, old, &FieldPath::new("status"))
    }
}

// ---------------------------------------------------------------------------------------------
// Classes.

pub struct DeviceClassStrategy;

impl DeviceClassStrategy {
    /// `validateDeviceClassSpec`.
    fn validate_spec(spec: &Value, old: Option<&Value>) -> Errs {
        let path = FieldPath::new("spec");
        let stored_config = old.is_some_and(|o| o.get("config") == spec.get("config"));
        let mut errs = validate_selectors(list_at(spec, "selectors"), &path.child("selectors"));
        errs.extend(validate_slice(
            list_at(spec, "config"),
            Some(DEVICE_CONFIG_MAX),
            &path.child("config"),
            |c, p| validate_device_configuration(c, p, stored_config),
        ));
        if let Some(name) = opt_str(spec, "extendedResourceName")
            && !is_extended(name)
        {
            errs.push(FieldError::invalid(
                &path.child("extendedResourceName"),
                name,
                "must be a valid extended resource name",
            ));
        }
        errs
    }
}

impl Strategy for DeviceClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        Self::validate_spec(obj.get("spec").unwrap_or(&Value::Null), None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        Self::validate_spec(
            new.get("spec").unwrap_or(&Value::Null),
            Some(old.get("spec").unwrap_or(&Value::Null)),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Slices.

pub struct ResourceSliceStrategy;

/// Attribute fields of the `DRAListTypeAttributes` alpha gate (off in v1.36).
const LIST_ATTRIBUTES: &[&str] = &["bools", "ints", "strings", "versions"];

fn devices_of(slice: &Value) -> &[Value] {
    slice
        .pointer("/spec/devices")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn uses_list_attributes(slice: &Value) -> bool {
    devices_of(slice).iter().any(|d| {
        d.get("attributes")
            .and_then(Value::as_object)
            .is_some_and(|a| {
                a.values()
                    .any(|v| LIST_ATTRIBUTES.iter().any(|f| v.get(*f).is_some()))
            })
    })
}

fn uses_node_allocatable_mappings(slice: &Value) -> bool {
    devices_of(slice).iter().any(|d| {
        d.get("nodeAllocatableResourceMappings")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    })
}

/// `dropDisabledFields`: fields of gates off by default go, unless the old slice used them.
fn drop_disabled_slice_fields(new: &mut Value, old: Option<&Value>) {
    let keep_lists = old.is_some_and(uses_list_attributes);
    let keep_mappings = old.is_some_and(uses_node_allocatable_mappings);
    let Some(devices) = new
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for d in devices {
        let Some(d) = d.as_object_mut() else { continue };
        if !keep_mappings {
            d.remove("nodeAllocatableResourceMappings");
        }
        if !keep_lists && let Some(attrs) = d.get_mut("attributes").and_then(Value::as_object_mut) {
            for a in attrs.values_mut() {
                if let Some(a) = a.as_object_mut() {
                    for f in LIST_ATTRIBUTES {
                        a.remove(*f);
                    }
                }
            }
        }
    }
}

/// `validateDeviceAttribute`: exactly one value.
fn validate_device_attribute(attr: &Value, path: &FieldPath) -> Errs {
    let mut errs = Vec::new();
    let mut set = 0;
    if set_at(attr, "bool").is_some() {
        set += 1;
    }
    if set_at(attr, "int").is_some() {
        set += 1;
    }
    if let Some(s) = opt_str(attr, "string") {
        set += 1;
        errs.extend(attribute_string(s, &path.child("string")));
    }
    if let Some(v) = opt_str(attr, "version") {
        set += 1;
        errs.extend(attribute_version(v, &path.child("version")));
    }
    for (field, check) in [
        ("bools", None),
        ("ints", None),
        (
            "strings",
            Some(attribute_string as fn(&str, &FieldPath) -> Errs),
        ),
        (
            "versions",
            Some(attribute_version as fn(&str, &FieldPath) -> Errs),
        ),
    ] {
        if let Some(list) = set_at(attr, field) {
            set += 1;
            let items = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
            if items.is_empty() {
                errs.push(
                    FieldError::invalid(
                        &path.child(field),
                        list.clone(),
                        "must not be empty if specified",
                    )
                    .with_rendered_value("[]"),
                );
            }
            if let Some(check) = check {
                for (i, v) in items.iter().enumerate() {
                    errs.extend(check(v.as_str().unwrap_or(""), &path.child(field).index(i)));
                }
            }
        }
    }
    match set {
        0 => errs.push(FieldError::invalid(
            path,
            "",
            "exactly one value must be specified",
        )),
        1 => {}
        _ => {
            let mut err =
                FieldError::invalid(path, attr.clone(), "exactly one value must be specified");
            if let Some(r) = go_struct_json("resource.v1.DeviceAttribute", attr, GoStyle::Internal)
            {
                err = err.with_rendered_value(r);
            }
            errs.push(err);
        }
    }
    errs
}

fn attribute_string(s: &str, path: &FieldPath) -> Errs {
    if s.len() > ATTRIBUTE_VALUE_MAX_LEN {
        vec![FieldError::too_long(
            path,
            "",
            ATTRIBUTE_VALUE_MAX_LEN as i64,
        )]
    } else {
        Vec::new()
    }
}

fn attribute_version(v: &str, path: &FieldPath) -> Errs {
    let mut errs = Vec::new();
    if !is_semver(v) {
        errs.push(FieldError::invalid(
            path,
            v,
            "must be a string compatible with semver.org spec 2.0.0",
        ));
    }
    errs.extend(attribute_string(v, path));
    errs
}

/// semver.org 2.0.0: `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`.
fn is_semver(v: &str) -> bool {
    let numeric = |s: &str| {
        !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    let ident =
        |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    let (rest, build) = match v.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (v, None),
    };
    if let Some(b) = build
        && !b.split('.').all(ident)
    {
        return false;
    }
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    if let Some(p) = pre
        && !p
            .split('.')
            .all(|s| ident(s) && (s.bytes().any(|c| !c.is_ascii_digit()) || numeric(s)))
    {
        return false;
    }
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| numeric(p))
}

fn zero() -> Quantity {
    Quantity::new(0, 0, apimachinery::quantity::Format::DecimalSI)
}

fn quantity_at(obj: &Value, key: &str) -> Option<Quantity> {
    let v = obj.get(key)?;
    match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// `validateRequestPolicy` of a capacity shared by several allocations.
fn validate_request_policy(max: &Quantity, policy: &Value, path: &FieldPath) -> Errs {
    let valid_values = list_at(policy, "validValues");
    let range = set_at(policy, "validRange");
    if !valid_values.is_empty() && range.is_some() {
        return vec![FieldError::forbidden(
            path,
            r#"exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time"#,
        )];
    }
    let default = quantity_at(policy, "default");
    let mut errs = Vec::new();
    if !valid_values.is_empty() {
        let Some(default) = default else {
            return vec![FieldError::required(
                &path.child("default"),
                "required when validValues is defined",
            )];
        };
        let vpath = path.child("validValues");
        let values: Vec<Quantity> = valid_values
            .iter()
            .map(|v| match v {
                Value::String(s) => Quantity::parse(s).unwrap_or_else(|_| zero()),
                other => Quantity::parse(&other.to_string()).unwrap_or_else(|_| zero()),
            })
            .collect();
        for i in 0..values.len().saturating_sub(1) {
            if values[i] > values[i + 1] {
                errs.push(FieldError::invalid(
                    &vpath.index(i + 1),
                    values[i + 1].to_string(),
                    "values must be sorted in ascending order",
                ));
            }
        }
        if values.len() > REQUEST_POLICY_MAX_OPTIONS {
            errs.push(FieldError::too_many(
                &vpath,
                Some(values.len() as i64),
                Some(REQUEST_POLICY_MAX_OPTIONS as i64),
            ));
        } else {
            let mut found = false;
            let mut seen = BTreeSet::new();
            for (i, q) in values.iter().enumerate() {
                if q > max {
                    errs.push(FieldError::invalid(
                        &vpath.index(i),
                        q.to_string(),
                        format!("option is larger than capacity value: {max}"),
                    ));
                }
                if q == &default {
                    found = true;
                }
            }
            for (i, q) in values.iter().enumerate() {
                let key = q.value().to_string();
                if !seen.insert(key.clone()) {
                    errs.push(FieldError::duplicate(&vpath.index(i), key));
                }
            }
            if !found {
                errs.push(FieldError::invalid(
                    &vpath,
                    default.to_string(),
                    "default value is not valid according to the requestPolicy",
                ));
            }
        }
    } else if let Some(range) = range {
        let Some(default) = default else {
            return vec![FieldError::required(
                &path.child("default"),
                "required when validRange is defined",
            )];
        };
        let rpath = path.child("validRange");
        let Some(min) = quantity_at(range, "min") else {
            return vec![FieldError::required(
                &rpath.child("min"),
                "required when validRange is defined",
            )];
        };
        if &min > max {
            errs.push(FieldError::invalid(
                &rpath.child("min"),
                min.to_string(),
                format!("min is larger than capacity value: {max}"),
            ));
        }
        if default < min {
            errs.push(FieldError::invalid(
                &rpath.child("min"),
                default.to_string(),
                format!("default is less than min: {min}"),
            ));
        }
        let range_max = quantity_at(range, "max");
        if let Some(rmax) = &range_max {
            if min > *rmax {
                errs.push(FieldError::invalid(
                    &rpath.child("max"),
                    min.to_string(),
                    format!("min is larger than max: {rmax}"),
                ));
            }
            if rmax > max {
                errs.push(FieldError::invalid(
                    &rpath.child("max"),
                    rmax.to_string(),
                    format!("max is larger than capacity value: {max}"),
                ));
            }
            if default > *rmax {
                errs.push(FieldError::invalid(
                    &rpath.child("max"),
                    default.to_string(),
                    format!("default is more than max: {rmax}"),
                ));
            }
        }
        if let Some(step) = quantity_at(range, "step") {
            let added = min.add(&step);
            if &added > max {
                errs.push(FieldError::invalid(
                    &rpath.child("step"),
                    step.to_string(),
                    format!("one step {added} is larger than capacity value: {max}"),
                ));
            }
            let mut check = |value: &Quantity| {
                let s = step.value();
                if s != 0 && (value.value() - min.value()) % s != 0 {
                    errs.push(FieldError::invalid(
                        &rpath.child("step"),
                        value.to_string(),
                        format!("value is not a multiple of a given step ({step}) from ({min})"),
                    ));
                }
            };
            check(&default);
            if let Some(rmax) = &range_max {
                check(rmax);
            }
        }
    }
    errs
}

/// `validateDevice`.
fn validate_device(
    device: &Value,
    old_device: Option<&Value>,
    path: &FieldPath,
    per_device_node_selection: Option<bool>,
) -> Errs {
    let mut errs = dns_label(str_at(device, "name"), &path.child("name"));
    let attributes = device.get("attributes").and_then(Value::as_object);
    let capacity = device.get("capacity").and_then(Value::as_object);
    let total = attributes.map_or(0, |a| a.len()) + capacity.map_or(0, |c| c.len());
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        errs.push(FieldError::invalid(
            path,
            total as i64,
            format!(
                "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
            ),
        ));
    }
    let values: usize = attributes
        .map(|a| {
            a.values()
                .map(|v| {
                    let n: usize = LIST_ATTRIBUTES.iter().map(|f| list_at(v, f).len()).sum();
                    n.max(1)
                })
                .sum()
        })
        .unwrap_or(0);
    if values > MAX_ATTRIBUTE_VALUES {
        errs.push(FieldError::invalid(
            path,
            values as i64,
            format!("the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"),
        ));
    }
    let key_len = DEVICE_MAX_DOMAIN_LEN + 1 + DEVICE_MAX_ID_LEN;
    errs.extend(validate_map(
        device.get("attributes"),
        None,
        key_len,
        &path.child("attributes"),
        validate_qualified_name,
        validate_device_attribute,
    ));
    let multiple = bool_at(device, "allowMultipleAllocations");
    errs.extend(validate_map(
        device.get("capacity"),
        None,
        key_len,
        &path.child("capacity"),
        validate_qualified_name,
        |cap, p| match set_at(cap, "requestPolicy") {
            None => Vec::new(),
            Some(_) if !multiple => vec![FieldError::forbidden(
                &p.child("requestPolicy"),
                "allowMultipleAllocations must be true",
            )],
            Some(policy) => validate_request_policy(
                &quantity_at(cap, "value").unwrap_or_else(zero),
                policy,
                &p.child("requestPolicy"),
            ),
        },
    ));
    let taints = list_at(device, "taints");
    if old_device.is_none_or(|o| list_at(o, "taints") != taints) {
        errs.extend(validate_slice(
            taints,
            Some(DEVICE_TAINTS_MAX),
            &path.child("taints"),
            |t, p| validate_device_taint(t, None, p),
        ));
    }
    errs.extend(validate_set(
        list_at(device, "consumesCounters"),
        Some(MAX_COUNTER_CONSUMPTIONS_PER_DEVICE),
        &path.child("consumesCounters"),
        |c, p| {
            let mut e = Vec::new();
            let set = str_at(c, "counterSet");
            if set.is_empty() {
                e.push(FieldError::required(&p.child("counterSet"), ""));
            } else {
                e.extend(dns_label(set, &p.child("counterSet")));
            }
            e.extend(validate_counters(
                c,
                MAX_COUNTERS_PER_SET,
                &p.child("counters"),
            ));
            e
        },
        |c| str_at(c, "counterSet").to_string(),
    ));
    if per_device_node_selection == Some(true) {
        let mut set = Vec::new();
        if let Some(node) = opt_str(device, "nodeName") {
            if node.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child("nodeName"),
                    "",
                    "must not be empty",
                ));
            } else {
                set.push("`nodeName`");
                errs.extend(dns_subdomain(node, &path.child("nodeName")));
            }
        }
        if let Some(selector) = set_at(device, "nodeSelector") {
            set.push("`nodeSelector`");
            errs.extend(validate_node_selector(
                selector,
                false,
                &path.child("nodeSelector"),
            ));
        }
        if let Some(all) = device.get("allNodes").and_then(Value::as_bool) {
            if all {
                set.push("`allNodes`");
            } else {
                errs.push(FieldError::invalid(
                    &path.child("allNodes"),
                    false,
                    "must be either unset or set to true",
                ));
            }
        }
        const MSG: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
        match set.len() {
            0 => errs.push(FieldError::required(path, MSG)),
            1 => {}
            _ => errs.push(FieldError::invalid(
                path,
                format!("{{{}}}", set.join(", ")),
                MSG,
            )),
        }
    } else if opt_str(device, "nodeName").is_some()
        || set_at(device, "nodeSelector").is_some()
        || device.get("allNodes").and_then(Value::as_bool).is_some()
    {
        errs.push(
            FieldError::invalid(
                path,
                Value::Null,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
            .with_rendered_value("null"),
        );
    }
    errs.extend(validate_binding_parameters(device, path));
    errs.extend(validate_node_allocatable_mappings(
        device,
        &path.child("nodeAllocatableResourceMappings"),
    ));
    errs
}

/// `validateNodeAllocatableResourceMappings` (kept only where an old slice used them).
fn validate_node_allocatable_mappings(device: &Value, path: &FieldPath) -> Errs {
    let Some(mappings) = device
        .get("nodeAllocatableResourceMappings")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let capacity = device.get("capacity").and_then(Value::as_object);
    let mut errs = Vec::new();
    for (name, m) in mappings {
        let kp = path.key(name);
        if !is_native(name) {
            errs.push(FieldError::invalid(
                &kp,
                name.as_str(),
                "must be a node allocatable resource name",
            ));
        }
        let multiplier = quantity_at(m, "allocationMultiplier");
        let key = opt_str(m, "capacityKey");
        if multiplier.is_none() && key.is_none() {
            errs.push(FieldError::invalid(
                &kp,
                "",
                "at least one of allocationMultiplier or capacityKey must be set",
            ));
            continue;
        }
        if let Some(q) = multiplier
            && q.sign() <= 0
        {
            errs.push(FieldError::invalid(
                &kp.child("allocationMultiplier"),
                q.to_string(),
                "must be positive",
            ));
        }
        match key {
            Some("") => errs.push(FieldError::invalid(
                &kp.child("capacityKey"),
                "",
                "capacityKey must not be an empty string",
            )),
            Some(k) if !capacity.is_some_and(|c| c.contains_key(k)) => {
                errs.push(FieldError::not_found(&kp.child("capacityKey"), k))
            }
            _ => {}
        }
    }
    errs
}

/// Counters of a counter set or a consumption: required, at most `max`, DNS-label names.
fn validate_counters(obj: &Value, max: usize, path: &FieldPath) -> Errs {
    let counters = obj.get("counters").and_then(Value::as_object);
    if counters.is_none_or(|c| c.is_empty()) {
        return vec![FieldError::required(path, "")];
    }
    validate_map(
        obj.get("counters"),
        Some(max),
        DNS1123_LABEL_MAX_LEN,
        path,
        dns_label,
        |_, _| Vec::new(),
    )
}

/// `validateResourceSliceSpec`.
fn validate_slice_spec(spec: &Value, old: Option<&Value>) -> Errs {
    let path = FieldPath::new("spec");
    let mut errs = validate_csi_driver_name(str_at(spec, "driver"), &path.child("driver"));
    let pool = spec.get("pool").unwrap_or(&Value::Null);
    let ppath = path.child("pool");
    errs.extend(validate_pool_name(
        str_at(pool, "name"),
        &ppath.child("name"),
    ));
    let count = int_at(pool, "resourceSliceCount");
    if count <= 0 {
        errs.push(FieldError::invalid(
            &ppath.child("resourceSliceCount"),
            count,
            "must be greater than zero",
        ));
    }
    let generation = int_at(pool, "generation");
    if generation < 0 {
        errs.push(FieldError::invalid(
            &ppath.child("generation"),
            generation,
            "must be greater than or equal to zero",
        ));
    }
    if let Some(old) = old {
        let old_pool = old.get("pool").unwrap_or(&Value::Null);
        for (new_v, old_v, p) in [
            (pool.get("name"), old_pool.get("name"), ppath.child("name")),
            (spec.get("driver"), old.get("driver"), path.child("driver")),
            (
                spec.get("nodeName"),
                old.get("nodeName"),
                path.child("nodeName"),
            ),
        ] {
            if new_v != old_v {
                let shown = new_v.cloned().unwrap_or(Value::Null);
                let mut err = FieldError::invalid(&p, shown, "field is immutable");
                if p.to_string() == "spec.nodeName" && new_v.is_none() {
                    err = err.with_rendered_value("null");
                }
                errs.push(err);
            }
        }
    }
    let mut set = Vec::new();
    if let Some(node) = opt_str(spec, "nodeName") {
        if node.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("nodeName"),
                "",
                "must be either unset or set to a non-empty string",
            ));
        } else {
            set.push("`nodeName`");
            errs.extend(dns_subdomain(node, &path.child("nodeName")));
        }
    }
    if let Some(selector) = set_at(spec, "nodeSelector") {
        set.push("`nodeSelector`");
        let spath = path.child("nodeSelector");
        errs.extend(validate_node_selector(selector, false, &spath));
        let terms = list_at(selector, "nodeSelectorTerms");
        if terms.len() != 1 {
            let rendered: Vec<String> = terms
                .iter()
                .map(|t| {
                    go_struct_json("core.v1.NodeSelectorTerm", t, GoStyle::Internal)
                        .unwrap_or_else(|| t.to_string())
                })
                .collect();
            errs.push(
                FieldError::invalid(
                    &spath.child("nodeSelectorTerms"),
                    Value::Null,
                    "must have exactly one node selector term",
                )
                .with_rendered_value(
                    if selector.get("nodeSelectorTerms").is_some() {
                        format!("[{}]", rendered.join(","))
                    } else {
                        "null".to_string()
                    },
                ),
            );
        }
    }
    for field in ["allNodes", "perDeviceNodeSelection"] {
        if let Some(b) = spec.get(field).and_then(Value::as_bool) {
            if b {
                set.push(if field == "allNodes" {
                    "`allNodes`"
                } else {
                    "`perDeviceNodeSelection`"
                });
            } else {
                errs.push(FieldError::invalid(
                    &path.child(field),
                    false,
                    "must be either unset or set to true",
                ));
            }
        }
    }
    const EXACTLY_ONE: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => errs.push(FieldError::required(&path, EXACTLY_ONE)),
        1 => {}
        _ => errs.push(FieldError::invalid(
            &path,
            format!("{{{}}}", set.join(", ")),
            format!("{EXACTLY_ONE}, but multiple fields are set"),
        )),
    }
    if set_at(spec, "sharedCounters").is_some() && set_at(spec, "devices").is_some() {
        errs.push(FieldError::invalid(
            &path,
            "",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let devices = list_at(spec, "devices");
    let advanced = devices.iter().any(|d| {
        !list_at(d, "taints").is_empty()
            || !list_at(d, "consumesCounters").is_empty()
            || d.get("attributes")
                .and_then(Value::as_object)
                .is_some_and(|a| {
                    a.values()
                        .any(|v| LIST_ATTRIBUTES.iter().any(|f| set_at(v, f).is_some()))
                })
    });
    let per_device = spec.get("perDeviceNodeSelection").and_then(Value::as_bool);
    let old_devices = old.map(|o| list_at(o, "devices")).unwrap_or(&[]);
    errs.extend(validate_set(
        devices,
        Some(if advanced {
            SLICE_MAX_DEVICES_ADVANCED
        } else {
            SLICE_MAX_DEVICES
        }),
        &path.child("devices"),
        |d, p| {
            let name = str_at(d, "name");
            let old_device = old
                .is_some()
                .then(|| old_devices.iter().find(|o| str_at(o, "name") == name))
                .flatten();
            validate_device(d, old_device, p, per_device)
        },
        |d| str_at(d, "name").to_string(),
    ));
    errs.extend(validate_set(
        list_at(spec, "sharedCounters"),
        Some(SLICE_MAX_COUNTER_SETS),
        &path.child("sharedCounters"),
        |c, p| {
            let mut e = Vec::new();
            let name = str_at(c, "name");
            if name.is_empty() {
                e.push(FieldError::required(&p.child("name"), ""));
            } else {
                e.extend(dns_label(name, &p.child("name")));
            }
            e.extend(validate_counters(
                c,
                MAX_COUNTERS_PER_SET,
                &p.child("counters"),
            ));
            e
        },
        |c| str_at(c, "name").to_string(),
    ));
    errs
}

fn default_slice(slice: &mut Value) {
    let Some(devices) = slice
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for d in devices {
        if let Some(taints) = d.get_mut("taints").and_then(Value::as_array_mut) {
            for t in taints {
                if t.is_object() && t.get("timeAdded").is_none_or(Value::is_null) {
                    t["timeAdded"] = json!(now_rfc3339());
                }
            }
        }
        if let Some(m) = d
            .get_mut("nodeAllocatableResourceMappings")
            .and_then(Value::as_object_mut)
        {
            for v in m.values_mut() {
                if v.is_object() && v.get("allocationMultiplier").is_none_or(Value::is_null) {
                    v["allocationMultiplier"] = json!("1");
                }
            }
        }
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn driver_warnings(obj: &Value) -> Vec<String> {
    let driver = obj
        .pointer("/spec/driver")
        .and_then(Value::as_str)
        .unwrap_or("");
    if driver != driver.to_lowercase() {
        vec![format!(
            "spec.driver: driver names should be lowercase; {} contains uppercase characters",
            go_quote(driver)
        )]
    } else {
        Vec::new()
    }
}

impl Strategy for ResourceSliceStrategy {
    fn default(&self, obj: &mut Value) {
        default_slice(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_disabled_slice_fields(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_disabled_slice_fields(new, Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_slice_spec(obj.get("spec").unwrap_or(&Value::Null), None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_slice_spec(
            new.get("spec").unwrap_or(&Value::Null),
            Some(old.get("spec").unwrap_or(&Value::Null)),
        )
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        driver_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        driver_warnings(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages_of(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn exact_requests_default_to_one_device() {
        let mut claim = json!({"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "tolerations": [{"key": "k"}]}},
            {"name": "two", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}});
        ResourceClaimStrategy { template: false }.default(&mut claim);
        assert_eq!(
            claim["spec"]["devices"]["requests"][0]["exactly"],
            json!({"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
                   "tolerations": [{"key": "k", "operator": "Equal"}]})
        );
        assert_eq!(
            claim["spec"]["devices"]["requests"][1]["exactly"]["count"],
            2
        );
    }

    #[test]
    fn request_names_are_dns_labels() {
        let claim = json!({"spec": {"devices": {"requests": [
            {"name": "GPU_1", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}});
        let errs = ResourceClaimStrategy { template: false }.validate(&claim);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().starts_with(
            "spec.devices.requests[0].name: Invalid value: \"GPU_1\": a lowercase RFC 1123 label"
        ));
    }

    #[test]
    fn constraints_and_config_name_requests_of_the_claim() {
        let claim = json!({"spec": {"devices": {
            "requests": [{"name": "a", "firstAvailable": [
                {"name": "x", "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1}]}],
            "constraints": [{"requests": ["a/x", "b"], "matchAttribute": "model"}, {"requests": ["a"]}],
            "config": [{"requests": ["a/y"], "opaque": {"driver": "d.example.com", "parameters": []}}]}}});
        let errs = ResourceClaimStrategy { template: false }.validate(&claim);
        assert_eq!(
            messages_of(&errs),
            [
                "spec.devices.constraints[0].requests[1]: Invalid value: \"b\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
                "spec.devices.constraints[0].matchAttribute: Invalid value: \"model\": a fully qualified name must be a domain and a name separated by a slash",
                "spec.devices.constraints[1]: Required value: exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
                "spec.devices.config[0].requests[0]: Invalid value: \"a/y\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
                "spec.devices.config[0].opaque.parameters: Invalid value: \"<value omitted>\": must be a valid JSON object",
            ]
        );
    }

    #[test]
    fn claim_updates_only_check_immutability() {
        let old = json!({"spec": {"devices": {"requests": [{"name": "BAD"}]}}});
        let s = ResourceClaimStrategy { template: false };
        assert!(s.validate_update(&old, &old).is_empty());
    }

    #[test]
    fn slice_needs_one_node_selection() {
        let slice = json!({"spec": {"driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1},
            "nodeName": "n", "allNodes": true}});
        let errs = ResourceSliceStrategy.validate(&slice);
        assert_eq!(
            messages_of(&errs),
            [
                "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"
            ]
        );
    }

    #[test]
    fn device_attributes_hold_one_value() {
        let slice = json!({"spec": {"driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1},
            "allNodes": true, "devices": [{"name": "d0", "attributes": {
                "a": {}, "b": {"version": "1.0"}, "-c/x": {"int": 1}}}]}});
        let errs = ResourceSliceStrategy.validate(&slice);
        assert_eq!(
            messages_of(&errs),
            [
                "spec.devices[0].attributes: Invalid value: \"-c\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.devices[0].attributes[a]: Invalid value: \"\": exactly one value must be specified",
                "spec.devices[0].attributes[b].version: Invalid value: \"1.0\": must be a string compatible with semver.org spec 2.0.0",
            ]
        );
    }

    #[test]
    fn semver_and_interface_addresses() {
        assert!(is_semver("1.2.3-alpha.1+build.5"));
        assert!(!is_semver("01.2.3"));
        assert!(!is_semver("1.2"));
        assert!(validate_interface_address("10.9.8.7/24", &FieldPath::new("ip")).is_empty());
        assert_eq!(
            messages_of(&validate_interface_address(
                "2001:DB8::1/64",
                &FieldPath::new("ip")
            )),
            [
                "ip: Invalid value: \"2001:DB8::1/64\": must be in canonical form (\"2001:db8::1/64\")"
            ]
        );
    }

    #[test]
    fn status_devices_must_be_allocated() {
        let new = json!({"spec": {"devices": {"requests": [{"name": "r"}]}},
            "status": {"devices": [{"driver": "d.example.com", "pool": "p", "device": "x"}]}});
        let errs =
            ResourceClaimStrategy { template: false }.validate_status_update(&new, &json!({}));
        assert_eq!(
            messages_of(&errs),
            [
                "status.devices[0]: Invalid value: {\"Driver\":\"d.example.com\",\"Pool\":\"p\",\"Device\":\"x\",\"ShareID\":\"\"}: must be an allocated device in the claim"
            ]
        );
    }
}
