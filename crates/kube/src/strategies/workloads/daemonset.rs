//! DaemonSets (apps/v1): `SetDefaults_DaemonSet`, `ValidateDaemonSet` (update strategy, rolling
//! update bounds) with its update and status rules, and the template generation the strategy
//! keeps in the `deprecated.daemonset.template.generation` annotation.

use crate::strategies::{struct_field, template_pod_spec};
use apimachinery::labels::Selector;
use apimachinery::object::ObjectExt;
use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::super::pod::default_pod_spec;
use super::super::{object_at, set_default};
use super::{
    collision_count_not_decremented, immutable_selector, int_or_percent_value,
    long_running_template, nonnegative, nonnegative_if_set, not_more_than_100_percent,
    not_supported_struct, positive_int_or_percent, present, selector_error, selector_len,
    selector_matches_template, text, validate_pod_template, validate_selector,
};

pub struct DaemonSetStrategy;

/// The annotation in which apps/v1 keeps a DaemonSet's template generation.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// `SetDefaults_DaemonSet`: a rolling update of one pod at a time, without surge.
fn default_spec(spec: &mut Value) {
    let strategy = object_at(spec, "updateStrategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if text(strategy, "type") == "RollingUpdate" {
        let rolling = object_at(strategy, "rollingUpdate");
        set_default(rolling, "maxUnavailable", json!(1));
        set_default(rolling, "maxSurge", json!(0));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    if let Some(t) = template_pod_spec(spec) {
        default_pod_spec(t);
    }
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxUnavailable and maxSurge is non-zero.
fn validate_rolling_update(rolling: &Value, path: &FieldPath) -> Vec<FieldError> {
    let null = Value::Null;
    let unavailable = rolling.get("maxUnavailable").unwrap_or(&null);
    let surge = rolling.get("maxSurge").unwrap_or(&null);
    let (unavailable_path, surge_path) = (path.child("maxUnavailable"), path.child("maxSurge"));
    let mut errs = positive_int_or_percent(unavailable, &unavailable_path);
    errs.extend(positive_int_or_percent(surge, &surge_path));
    errs.extend(not_more_than_100_percent(unavailable, &unavailable_path));
    errs.extend(not_more_than_100_percent(surge, &surge_path));
    let has_unavailable = int_or_percent_value(unavailable) != 0;
    let has_surge = int_or_percent_value(surge) != 0;
    if has_unavailable && has_surge {
        errs.push(FieldError::invalid(
            &surge_path,
            surge.clone(),
            "may not be set when maxUnavailable is non-zero",
        ));
    } else if !has_unavailable && !has_surge {
        errs.push(FieldError::required(
            &unavailable_path,
            "cannot be 0 when maxSurge is 0",
        ));
    }
    errs
}

/// `ValidateDaemonSetUpdateStrategy`.
fn validate_update_strategy(strategy: &Value, path: &FieldPath) -> Vec<FieldError> {
    match text(strategy, "type") {
        "OnDelete" => Vec::new(),
        "RollingUpdate" => match present(strategy, "rollingUpdate") {
            None => vec![FieldError::required(&path.child("rollingUpdate"), "")],
            Some(r) => validate_rolling_update(r, &path.child("rollingUpdate")),
        },
        _ => vec![not_supported_struct(
            path,
            "apps.v1.DaemonSetUpdateStrategy",
            strategy,
            &["RollingUpdate", "OnDelete"],
        )],
    }
}

/// `ValidateDaemonSetSpec`.
fn validate_spec(obj: &Value, spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let selector = present(spec, "selector").cloned().unwrap_or(Value::Null);
    let selector_path = path.child("selector");
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    let mut errs = if selector.is_null() {
        Vec::new()
    } else {
        validate_selector(&selector, &selector_path)
    };
    if let Ok(parsed) = Selector::from_label_selector(&selector) {
        errs.extend(selector_matches_template(&parsed, template, &template_path));
    }
    if !selector.is_null() && selector_len(&selector) == 0 {
        errs.push(selector_error(
            &selector_path,
            &selector,
            "empty selector is invalid for daemonset",
        ));
    }
    errs.extend(validate_pod_template(template, &template_path));
    errs.extend(long_running_template(template, &template_path, "DaemonSet"));
    errs.extend(nonnegative(spec, "minReadySeconds", path));
    let generation = template_generation(obj);
    if generation < 0 {
        errs.extend(apimachinery::validation::validate_nonnegative_field(
            generation,
            &path.child("templateGeneration"),
        ));
    }
    errs.extend(validate_update_strategy(
        spec.get("updateStrategy").unwrap_or(&Value::Null),
        &path.child("updateStrategy"),
    ));
    errs.extend(nonnegative_if_set(spec, "revisionHistoryLimit", path));
    errs
}

/// The template generation apps/v1 carries in an annotation (0 when absent or unreadable, as
/// upstream's conversion reads it).
fn template_generation(obj: &Value) -> i64 {
    obj.pointer(&format!(
        "/metadata/annotations/{}",
        TEMPLATE_GENERATION.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|g| g.parse::<i64>().ok())
    .unwrap_or(0)
}

fn set_template_generation(obj: &mut Value, generation: i64) {
    let annotations = obj
        .metadata_mut()
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[TEMPLATE_GENERATION] = json!(generation.to_string());
}

impl Strategy for DaemonSetStrategy {
    /// Upstream's v1 form always has the template-generation annotation: the conversion from
    /// the internal type writes `spec.templateGeneration`, 0 until the strategy sets it, so a
    /// create's managed fields own it.
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = struct_field(obj, "spec") {
            default_spec(spec);
        }
        if obj.is_object()
            && obj
                .annotations()
                .is_none_or(|a| !a.contains_key(TEMPLATE_GENERATION))
        {
            set_template_generation(obj, 0);
        }
    }

    /// Status starts empty and the template is generation 1.
    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(obj, "/spec/template", None);
        obj["status"] = json!({});
        set_template_generation(obj, 1);
    }

    /// A new template is a new template generation.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(new, "/spec/template", Some(old));
        let generation = template_generation(old);
        let next = if new.pointer("/spec/template") != old.pointer("/spec/template") {
            generation + 1
        } else {
            generation
        };
        if next > 0 {
            set_template_generation(new, next);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(
            obj,
            obj.get("spec").unwrap_or(&Value::Null),
            &FieldPath::new("spec"),
        )
    }

    /// `ValidateDaemonSetUpdate`, then the selector's immutability (apps/v1).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let null = Value::Null;
        errs.extend(immutable_selector(
            new.get("spec").unwrap_or(&null),
            old.get("spec").unwrap_or(&null),
            &FieldPath::new("spec"),
        ));
        errs
    }

    /// `ValidateDaemonSetStatusUpdate`.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let status = new.get("status").unwrap_or(&Value::Null);
        let path = FieldPath::new("status");
        let mut errs = Vec::new();
        for f in [
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
        ] {
            errs.extend(nonnegative(status, f, &path));
        }
        errs.extend(nonnegative_if_set(status, "collisionCount", &path));
        errs.extend(collision_count_not_decremented(new, old));
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        super::template_warnings_on_create(obj)
    }

    /// Upstream warns when the template generation moved (a new template), not on other
    /// spec changes.
    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        if template_generation(new) == template_generation(old) {
            return Vec::new();
        }
        super::template_warnings_on_create(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(extra: Value) -> Value {
        let mut spec = json!({"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let mut o = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": spec});
        DaemonSetStrategy.default(&mut o);
        o
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rolling_updates_take_exactly_one_bound() {
        let d = ds(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}}),
        );
        assert_eq!(
            messages(DaemonSetStrategy.validate(&d)),
            [
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
            ]
        );
        let d = ds(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}}}),
        );
        assert_eq!(
            messages(DaemonSetStrategy.validate(&d)),
            [
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"10%\": may not be set when maxUnavailable is non-zero"
            ]
        );
        let d = ds(json!({"updateStrategy": {"type": "Surge"}}));
        assert_eq!(
            messages(DaemonSetStrategy.validate(&d)),
            [
                "spec.updateStrategy: Unsupported value: {\"Type\":\"Surge\",\"RollingUpdate\":null}: supported values: \"RollingUpdate\", \"OnDelete\""
            ]
        );
    }

    #[test]
    fn template_changes_bump_the_template_generation() {
        let mut old = ds(json!({}));
        DaemonSetStrategy.prepare_for_create(&mut old);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("j");
        DaemonSetStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(template_generation(&new), 2);
        let mut same = old.clone();
        DaemonSetStrategy.prepare_for_update(&mut same, &old);
        assert_eq!(template_generation(&same), 1);
    }
}
