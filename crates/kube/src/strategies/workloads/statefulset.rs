//! StatefulSets (apps/v1): `SetDefaults_StatefulSet` (and its claim templates' defaults),
//! `ValidateStatefulSet` with its update rule (only a few fields may change, with upstream's
//! long Forbidden message) and status rules. Names are DNS labels: they become pod hostnames.

use crate::strategies::{struct_field, template_pod_spec};
use apimachinery::validation::{FieldError, FieldPath, NameValidator, is_dns1123_label};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::super::pod::{default_pod_spec, validate_template_metadata};
use super::super::{object_at, set_default};
use super::{
    collision_count_not_decremented, int, int_or_percent_value, invalid_struct,
    long_running_template, nonnegative, nonnegative_if_set, not_more_than_100_percent,
    positive_int_or_percent, present, required_selector, selector_error, selector_matches_template,
    status_counters, text, validate_pod_template,
};

pub struct StatefulSetStrategy;

/// The spec fields an update may change (`ValidateStatefulSetUpdate`).
const MUTABLE_SPEC_FIELDS: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

const FORBIDDEN_UPDATE: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// `SetDefaults_StatefulSet`, and a claim template's defaults as a PersistentVolumeClaim's.
fn default_spec(spec: &mut Value) {
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    let strategy = object_at(spec, "updateStrategy");
    if text(strategy, "type").is_empty() {
        strategy["type"] = json!("RollingUpdate");
        // An unset type also gets the rolling update parameters below.
        object_at(strategy, "rollingUpdate");
    }
    if text(strategy, "type") == "RollingUpdate"
        && let Some(rolling) = strategy.get_mut("rollingUpdate").filter(|r| r.is_object())
    {
        set_default(rolling, "partition", json!(0));
    }
    let policy = object_at(spec, "persistentVolumeClaimRetentionPolicy");
    set_default(policy, "whenDeleted", json!("Retain"));
    set_default(policy, "whenScaled", json!("Retain"));
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    for claim in spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|c| c.is_object())
    {
        set_default(claim, "apiVersion", json!("v1"));
        set_default(claim, "kind", json!("PersistentVolumeClaim"));
        if let Some(claim_spec) = claim.get_mut("spec").filter(|s| s.is_object()) {
            set_default(claim_spec, "volumeMode", json!("Filesystem"));
        }
        set_default(object_at(claim, "status"), "phase", json!("Pending"));
    }
    if let Some(t) = template_pod_spec(spec) {
        default_pod_spec(t);
    }
}

/// `validateRollingUpdateStatefulSet`.
fn validate_rolling_update(rolling: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = nonnegative(rolling, "partition", path);
    if let Some(max) = present(rolling, "maxUnavailable") {
        let max_path = path.child("maxUnavailable");
        errs.extend(positive_int_or_percent(max, &max_path));
        if int_or_percent_value(max) == 0 {
            errs.push(FieldError::invalid(&max_path, max.clone(), "cannot be 0"));
        }
        errs.extend(not_more_than_100_percent(max, &max_path));
    }
    errs
}

/// The update strategy: `RollingUpdate` or `OnDelete`, rolling parameters only with the former.
fn validate_update_strategy(strategy: &Value, path: &FieldPath) -> Vec<FieldError> {
    let rolling = present(strategy, "rollingUpdate");
    match text(strategy, "type") {
        "" => vec![FieldError::required(path, "")],
        "OnDelete" => rolling
            .map(|r| {
                invalid_struct(
                    &path.child("rollingUpdate"),
                    "apps.v1.RollingUpdateStatefulSetStrategy",
                    r,
                    "only allowed for updateStrategy 'RollingUpdate'",
                )
            })
            .into_iter()
            .collect(),
        "RollingUpdate" => rolling
            .map(|r| validate_rolling_update(r, &path.child("rollingUpdate")))
            .unwrap_or_default(),
        _ => vec![invalid_struct(
            path,
            "apps.v1.StatefulSetUpdateStrategy",
            strategy,
            "must be 'RollingUpdate' or 'OnDelete'",
        )],
    }
}

/// `ValidatePersistentVolumeClaimRetentionPolicy`.
fn validate_retention_policy(policy: &Value, path: &FieldPath) -> Vec<FieldError> {
    ["whenDeleted", "whenScaled"]
        .into_iter()
        .filter_map(|field| {
            let v = text(policy, field);
            (!matches!(v, "Retain" | "Delete"))
                .then(|| FieldError::not_supported(&path.child(field), v, &["Retain", "Delete"]))
        })
        .collect()
}

/// What `ValidateStatefulSetSpec` tolerates (upstream's `StatefulSetValidationOptions`): an
/// update keeps an invalid service name and claim templates (both immutable), and skips the
/// pod template's checks when the old object already failed them.
#[derive(Clone, Copy, Default)]
struct SpecOptions {
    allow_invalid_service_name: bool,
    skip_claim_templates: bool,
    skip_pod_template: bool,
}

/// The template the pod rules see: the controller sets each pod's hostname and subdomain, and
/// a volume per claim template (claim templates' volumes first, then the template's own volumes
/// of other names, as `volumesToAddForTemplates` builds them).
fn template_to_validate(spec: &Value, template: &Value) -> Value {
    let claims: Vec<&str> = spec
        .get("volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            c.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        })
        .collect();
    let mut t = template.clone();
    let Some(pod_spec) = t.get_mut("spec").and_then(Value::as_object_mut) else {
        return t;
    };
    pod_spec.remove("hostname");
    pod_spec.remove("subdomain");
    if !claims.is_empty() {
        // Go keys the claim templates' volumes by name: one volume per distinct name.
        let mut names: Vec<&str> = Vec::new();
        for c in &claims {
            if !names.contains(c) {
                names.push(c);
            }
        }
        let mut volumes: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "persistentVolumeClaim": {"claimName": n}}))
            .collect();
        let own = pod_spec
            .get("volumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        volumes.extend(
            own.into_iter()
                .filter(|v| !names.contains(&text(v, "name"))),
        );
        pod_spec.insert("volumes".into(), Value::Array(volumes));
    }
    t
}

/// `ValidateStatefulSetSpec`, in upstream's order.
fn validate_spec(spec: &Value, path: &FieldPath, opts: SpecOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match text(spec, "podManagementPolicy") {
        "" => errs.push(FieldError::required(&path.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            &path.child("podManagementPolicy"),
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    errs.extend(validate_update_strategy(
        spec.get("updateStrategy").unwrap_or(&Value::Null),
        &path.child("updateStrategy"),
    ));
    if let Some(policy) = present(spec, "persistentVolumeClaimRetentionPolicy") {
        errs.extend(validate_retention_policy(
            policy,
            &path.child("persistentVolumeClaimRetentionPolicy"),
        ));
    }
    // `validateVolumeClaimTemplates`: each claim template's spec as a new claim's
    // (`ValidatePersistentVolumeClaimSpec`).
    if !opts.skip_claim_templates {
        for (i, claim) in spec
            .get("volumeClaimTemplates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            errs.extend(crate::strategies::volumes::validate_pvc_spec(
                claim.get("spec").unwrap_or(&Value::Null),
                false,
                &path.child("volumeClaimTemplates").index(i).child("spec"),
            ));
        }
    }
    errs.extend(nonnegative(spec, "replicas", path));
    errs.extend(nonnegative(spec, "minReadySeconds", path));
    if let Some(ordinals) = present(spec, "ordinals") {
        errs.extend(nonnegative(ordinals, "start", &path.child("ordinals")));
    }
    let service = text(spec, "serviceName");
    if !opts.allow_invalid_service_name && !service.is_empty() {
        for msg in is_dns1123_label(service) {
            errs.push(FieldError::invalid(
                &path.child("serviceName"),
                service,
                msg,
            ));
        }
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    match required_selector(spec, path, "statefulset", &mut errs) {
        Ok(selector) => {
            // `ValidatePodTemplateSpecForStatefulSet`: the selector matches the labels, the
            // pod template's rules, then the template's labels and annotations once more.
            let template = template_to_validate(spec, template);
            if !selector.is_empty() {
                errs.extend(selector_matches_template(
                    &selector,
                    &template,
                    &template_path,
                ));
            }
            if !opts.skip_pod_template {
                errs.extend(validate_pod_template(&template, &template_path));
            }
            errs.extend(validate_template_metadata(&template, &template_path));
        }
        Err(()) => errs.push(selector_error(
            &path.child("selector"),
            spec.get("selector").unwrap_or(&Value::Null),
            "",
        )),
    }
    errs.extend(long_running_template(
        template,
        &template_path,
        "StatefulSet",
    ));
    errs
}

/// `GetWarningsForPersistentVolumeClaimSpec` of each claim template: fractional byte storage.
/// Upstream's create names the claim template itself, its update `<claim>.Spec`.
fn claim_template_warnings(obj: &Value, update: bool) -> Vec<String> {
    let mut w = Vec::new();
    let claims_path = FieldPath::new("spec").child("volumeClaimTemplates");
    for (i, claim) in obj
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let base = if update {
            claims_path.index(i).child("Spec")
        } else {
            claims_path.index(i)
        };
        for list in ["requests", "limits"] {
            let Some(q) = claim
                .pointer(&format!("/spec/resources/{list}/storage"))
                .and_then(|v| match v {
                    Value::String(s) => apimachinery::quantity::Quantity::parse(s).ok(),
                    Value::Number(n) => {
                        apimachinery::quantity::Quantity::parse(&n.to_string()).ok()
                    }
                    _ => None,
                })
            else {
                continue;
            };
            if q.milli_value() % 1000 != 0 {
                w.push(format!(
                    "{}: fractional byte value {} is invalid, must be an integer",
                    base.child("resources").child(list).key("storage"),
                    apimachinery::validation::go_quote(&q.canonical())
                ));
            }
        }
    }
    w
}

/// A negative history limit keeps every revision (`WarningsOnCreate` / `WarningsOnUpdate`).
fn history_warning(obj: &Value) -> Option<String> {
    obj.pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_i64)
        .filter(|n| *n < 0)
        .map(|_| {
            "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended".to_string()
        })
}

/// `maxUnavailable` of a rolling update is behind the MaxUnavailableStatefulSet feature gate,
/// off in v1.36 (upstream's defaults give no `maxUnavailable`): upstream's strategy drops it,
/// unless the object being updated already uses it.
fn drop_max_unavailable(obj: &mut Value, old: Option<&Value>) {
    const POINTER: &str = "/spec/updateStrategy/rollingUpdate";
    let in_use = old
        .and_then(|o| o.pointer(POINTER))
        .is_some_and(|r| present(r, "maxUnavailable").is_some());
    if in_use {
        return;
    }
    if let Some(rolling) = obj.pointer_mut(POINTER).and_then(Value::as_object_mut) {
        rolling.remove("maxUnavailable");
    }
}

fn without_mutable_fields(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(Value::Null);
    if let Some(m) = spec.as_object_mut() {
        for f in MUTABLE_SPEC_FIELDS {
            m.remove(*f);
        }
        // Go compares values: an absent field is its zero value.
        m.retain(|_, v| !v.is_null());
    }
    spec
}

impl Strategy for StatefulSetStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = struct_field(obj, "spec") {
            default_spec(spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(obj, "/spec/template", None);
        obj["status"] = json!({});
        drop_max_unavailable(obj, None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(new, "/spec/template", Some(old));
        drop_max_unavailable(new, Some(old));
    }

    fn name_validator(&self) -> NameValidator {
        NameValidator::Dns1123Label
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
            SpecOptions::default(),
        )
    }

    /// `ValidateStatefulSetUpdate`: the spec as on create (tolerating an invalid service name
    /// and claim templates, and the pod template's checks when the old object failed them), and
    /// nothing but the mutable fields changed.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut opts = SpecOptions {
            allow_invalid_service_name: true,
            skip_claim_templates: true,
            skip_pod_template: false,
        };
        let root = FieldPath::new("spec");
        if !validate_spec(old.get("spec").unwrap_or(&Value::Null), &root, opts).is_empty() {
            opts.skip_pod_template = true;
        }
        let mut errs = validate_spec(new.get("spec").unwrap_or(&Value::Null), &root, opts);
        if without_mutable_fields(new.get("spec")) != without_mutable_fields(old.get("spec")) {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec"),
                FORBIDDEN_UPDATE,
            ));
        }
        errs
    }

    /// `ValidateStatefulSetStatusUpdate`.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = Vec::new();
        for f in [
            "replicas",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
        ] {
            errs.extend(nonnegative(status, f, &path));
        }
        errs.extend(nonnegative_if_set(status, "observedGeneration", &path));
        errs.extend(nonnegative_if_set(status, "collisionCount", &path));
        errs.extend(
            status_counters(
                status,
                &[
                    ("readyReplicas", true),
                    ("currentReplicas", true),
                    ("updatedReplicas", true),
                    ("availableReplicas", true),
                ],
                &path,
            )
            .into_iter()
            .filter(|e| e.detail == "cannot be greater than status.replicas"),
        );
        if int(status, "availableReplicas") > int(status, "readyReplicas") {
            errs.push(FieldError::invalid(
                &path.child("availableReplicas"),
                int(status, "availableReplicas"),
                "cannot be greater than status.readyReplicas",
            ));
        }
        errs.extend(collision_count_not_decremented(new, old));
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let mut w = super::template_warnings_on_create(obj);
        w.extend(claim_template_warnings(obj, false));
        w.extend(history_warning(obj));
        w
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        let mut w = super::template_warnings_on_update(new, old);
        w.extend(claim_template_warnings(new, true));
        w.extend(history_warning(new));
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts(extra: Value) -> Value {
        let mut spec = json!({"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let mut o = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": spec});
        StatefulSetStrategy.default(&mut o);
        o
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_match_upstream() {
        let s = sts(
            json!({"volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}),
        );
        assert_eq!(
            s["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            s["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        let claim = &s["spec"]["volumeClaimTemplates"][0];
        assert_eq!(
            (
                &claim["kind"],
                &claim["spec"]["volumeMode"],
                &claim["status"]["phase"]
            ),
            (
                &json!("PersistentVolumeClaim"),
                &json!("Filesystem"),
                &json!("Pending")
            )
        );
        // An explicit RollingUpdate without parameters stays without them.
        let s = sts(json!({"updateStrategy": {"type": "RollingUpdate"}}));
        assert_eq!(
            s["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate"})
        );
        assert!(StatefulSetStrategy.validate(&s).is_empty());
    }

    #[test]
    fn on_delete_takes_no_rolling_update() {
        let s =
            sts(json!({"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}}));
        assert_eq!(
            messages(StatefulSetStrategy.validate(&s)),
            [
                "spec.updateStrategy.rollingUpdate: Invalid value: {\"Partition\":1,\"MaxUnavailable\":null}: only allowed for updateStrategy 'RollingUpdate'"
            ]
        );
        let s = sts(json!({"updateStrategy": {"type": "Sometimes"}}));
        assert_eq!(
            messages(StatefulSetStrategy.validate(&s)),
            [
                "spec.updateStrategy: Invalid value: {\"Type\":\"Sometimes\",\"RollingUpdate\":null}: must be 'RollingUpdate' or 'OnDelete'"
            ]
        );
    }

    #[test]
    fn max_unavailable_is_dropped_while_its_gate_is_off() {
        let mut s = sts(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1, "maxUnavailable": 0}}}),
        );
        StatefulSetStrategy.prepare_for_create(&mut s);
        assert_eq!(
            s["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"partition": 1})
        );
        // An object that already uses it keeps it.
        let mut old = s.clone();
        old["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(2);
        let mut new = old.clone();
        StatefulSetStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(
            new["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            2
        );
    }

    #[test]
    fn only_some_fields_change() {
        let old = sts(json!({}));
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(5);
        new["spec"]["minReadySeconds"] = json!(3);
        assert!(StatefulSetStrategy.validate_update(&new, &old).is_empty());
        new["spec"]["serviceName"] = json!("other");
        assert_eq!(
            messages(StatefulSetStrategy.validate_update(&new, &old)),
            [format!("spec: Forbidden: {FORBIDDEN_UPDATE}")]
        );
    }
}
