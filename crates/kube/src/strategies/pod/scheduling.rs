//! Where a pod may run (pkg/apis/core/validation): tolerations, node and pod (anti-)affinity,
//! topology spread constraints, scheduling and readiness gates; and the scheduling-related
//! parts of the pod strategy (label keys merged into affinity selectors on create).

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::object::JsonPointer;
use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, is_dns1123_label, is_dns1123_subdomain,
    is_qualified_name, is_valid_label_value, validate_label_name, validate_label_selector,
};
use serde_json::{Value, json};

use super::util::{int, items, map, object, opt_int, present, strings, text};

/// `ValidateTolerations` of the `tolerations` of `holder`.
pub(crate) fn validate_tolerations(holder: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in items(holder, "tolerations") {
        let p = path.index(i);
        let key = text(t, "key");
        let op = text(t, "operator");
        let effect = text(t, "effect");
        let value = text(t, "value");
        if !key.is_empty() {
            errs.extend(validate_label_name(key, &p.child("key")));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                &p.child("operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if present(t, "tolerationSeconds") && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("operator"),
                        value,
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                &p.child("operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            errs.push(FieldError::not_supported(
                &p.child("effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
    errs
}

/// `validateAffinity`.
pub(super) fn validate_affinity(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(a) = object(spec, "affinity") else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if let Some(na) = object(a, "nodeAffinity") {
        let p = path.child("nodeAffinity");
        if let Some(req) = object(na, "requiredDuringSchedulingIgnoredDuringExecution") {
            errs.extend(validate_node_selector(
                req,
                false,
                &p.child("requiredDuringSchedulingIgnoredDuringExecution"),
            ));
        }
        let pp = p.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in items(na, "preferredDuringSchedulingIgnoredDuringExecution") {
            let w = int(term, "weight");
            if !(1..=100).contains(&w) {
                errs.push(FieldError::invalid(
                    &pp.index(i).child("weight"),
                    w,
                    "must be in the range 1-100",
                ));
            }
            // Preferred terms may name label values that no node has yet.
            errs.extend(validate_node_selector_term(
                term.get("preference").unwrap_or(&Value::Null),
                true,
                &pp.index(i).child("preference"),
            ));
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pa) = object(a, kind) else { continue };
        let p = path.child(kind);
        let rp = p.child("requiredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in items(pa, "requiredDuringSchedulingIgnoredDuringExecution") {
            errs.extend(validate_pod_affinity_term(term, &rp.index(i)));
        }
        let wp = p.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, wt) in items(pa, "preferredDuringSchedulingIgnoredDuringExecution") {
            let w = int(wt, "weight");
            if !(1..=100).contains(&w) {
                errs.push(FieldError::invalid(
                    &wp.index(i).child("weight"),
                    w,
                    "must be in the range 1-100",
                ));
            }
            errs.extend(validate_pod_affinity_term(
                wt.get("podAffinityTerm").unwrap_or(&Value::Null),
                &wp.index(i).child("podAffinityTerm"),
            ));
        }
    }
    errs
}

/// `ValidateNodeSelector`: at least one term, each valid.
pub(super) fn validate_node_selector(
    sel: &Value,
    allow_invalid_values: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let tp = path.child("nodeSelectorTerms");
    let terms = super::util::list(sel, "nodeSelectorTerms");
    if terms.is_empty() {
        return vec![FieldError::required(
            &tp,
            "must have at least one node selector term",
        )];
    }
    terms
        .iter()
        .enumerate()
        .flat_map(|(i, t)| validate_node_selector_term(t, allow_invalid_values, &tp.index(i)))
        .collect()
}

/// `ValidateNodeSelectorTerm`.
fn validate_node_selector_term(
    term: &Value,
    allow_invalid_values: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (j, req) in items(term, "matchExpressions") {
        let p = path.child("matchExpressions").index(j);
        let values = strings(req, "values");
        match text(req, "operator") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
                &p.child("values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
            other => errs.push(FieldError::invalid(
                &p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        errs.extend(validate_label_name(text(req, "key"), &p.child("key")));
        if !allow_invalid_values {
            for (k, v) in values.iter().enumerate() {
                errs.extend(
                    is_valid_label_value(v)
                        .into_iter()
                        .map(|m| FieldError::invalid(&p.child("values").index(k), *v, m)),
                );
            }
        }
    }
    for (j, req) in items(term, "matchFields") {
        let p = path.child("matchFields").index(j);
        let values = strings(req, "values");
        match text(req, "operator") {
            "In" | "NotIn" => {
                if values.len() != 1 {
                    errs.push(FieldError::required(
                        &p.child("values"),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                &p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = text(req, "key");
        if key != "metadata.name" {
            errs.push(FieldError::invalid(
                &p.child("key"),
                key,
                "not a valid field selector key",
            ));
        } else {
            for (k, v) in values.iter().enumerate() {
                errs.extend(
                    is_dns1123_subdomain(v)
                        .into_iter()
                        .map(|m| FieldError::invalid(&p.child("values").index(k), *v, m)),
                );
            }
        }
    }
    errs
}

/// `validatePodAffinityTerm`.
fn validate_pod_affinity_term(term: &Value, path: &FieldPath) -> Vec<FieldError> {
    let opts = LabelSelectorValidationOptions::default();
    let mut errs = validate_label_selector(
        term.get("labelSelector"),
        opts,
        &path.child("labelSelector"),
    );
    errs.extend(validate_label_selector(
        term.get("namespaceSelector"),
        opts,
        &path.child("namespaceSelector"),
    ));
    for ns in strings(term, "namespaces") {
        errs.extend(
            is_dns1123_label(ns)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("namespace"), ns, m)),
        );
    }
    errs.extend(match_label_keys(term, path));
    let key = text(term, "topologyKey");
    if key.is_empty() {
        errs.push(FieldError::required(
            &path.child("topologyKey"),
            "can not be empty",
        ));
    }
    errs.extend(validate_label_name(key, &path.child("topologyKey")));
    errs
}

/// `validateMatchLabelKeysAndMismatchLabelKeys` (with upstream's index on the term's own path
/// for a key also in the selector).
fn match_label_keys(term: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector = object(term, "labelSelector");
    let match_keys = strings(term, "matchLabelKeys");
    let mismatch_keys = strings(term, "mismatchLabelKeys");
    for (field, keys) in [
        ("matchLabelKeys", &match_keys),
        ("mismatchLabelKeys", &mismatch_keys),
    ] {
        if keys.is_empty() {
            continue;
        }
        if selector.is_none() {
            errs.push(FieldError::forbidden(
                &path.child(field),
                "must not be specified when labelSelector is not set",
            ));
            continue;
        }
        for (i, k) in keys.iter().enumerate() {
            errs.extend(validate_label_name(k, &path.child(field).index(i)));
        }
    }
    if let Some(sel) = selector {
        let positions: BTreeMap<&str, usize> = match_keys
            .iter()
            .enumerate()
            .map(|(i, k)| (*k, i))
            .collect();
        let mut selector_keys: BTreeSet<&str> =
            map(sel, "matchLabels").keys().map(String::as_str).collect();
        for (_, e) in items(sel, "matchExpressions") {
            let key = text(e, "key");
            if let Some(i) = positions.get(key)
                && selector_keys.contains(key)
            {
                errs.push(FieldError::invalid(
                    &path.index(*i),
                    key,
                    "exists in both matchLabelKeys and labelSelector",
                ));
            }
            selector_keys.insert(key);
        }
    }
    for (i, k) in match_keys.iter().enumerate() {
        if mismatch_keys.contains(k) {
            errs.push(FieldError::invalid(
                &path.child("matchLabelKeys").index(i),
                *k,
                "exists in both matchLabelKeys and mismatchLabelKeys",
            ));
        }
    }
    errs
}

/// `validateTopologySpreadConstraints`.
pub(super) fn validate_topology_spread(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let constraints = super::util::list(spec, "topologySpreadConstraints");
    for (i, c) in constraints.iter().enumerate() {
        let p = path.index(i);
        let skew = int(c, "maxSkew");
        if skew <= 0 {
            errs.push(FieldError::invalid(
                &p.child("maxSkew"),
                skew,
                "must be greater than zero",
            ));
        }
        let key = text(c, "topologyKey");
        if key.is_empty() {
            errs.push(FieldError::required(
                &p.child("topologyKey"),
                "can not be empty",
            ));
        }
        let when = text(c, "whenUnsatisfiable");
        if !matches!(when, "DoNotSchedule" | "ScheduleAnyway") {
            errs.push(FieldError::not_supported(
                &p.child("whenUnsatisfiable"),
                when,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if constraints[i + 1..]
            .iter()
            .any(|o| text(o, "topologyKey") == key && text(o, "whenUnsatisfiable") == when)
        {
            errs.push(FieldError::duplicate(
                &p.child("{topologyKey, whenUnsatisfiable}"),
                format!("{{{key}, {when}}}"),
            ));
        }
        if let Some(min) = opt_int(c, "minDomains") {
            let mp = p.child("minDomains");
            if min <= 0 {
                errs.push(FieldError::invalid(&mp, min, "must be greater than zero"));
            }
            if when != "DoNotSchedule" {
                errs.push(FieldError::invalid(
                    &mp,
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"
                    ),
                ));
            }
        }
        for field in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(policy) = c.get(field).and_then(Value::as_str)
                && !matches!(policy, "Honor" | "Ignore")
            {
                errs.push(FieldError::not_supported(
                    &p.child(field),
                    policy,
                    &["Honor", "Ignore"],
                ));
            }
        }
        let keys = strings(c, "matchLabelKeys");
        if !keys.is_empty() {
            let kp = p.child("matchLabelKeys");
            let selector = object(c, "labelSelector");
            let mut selector_keys: BTreeSet<&str> = BTreeSet::new();
            match selector {
                Some(sel) => {
                    selector_keys.extend(map(sel, "matchLabels").keys().map(String::as_str));
                    selector_keys
                        .extend(items(sel, "matchExpressions").map(|(_, e)| text(e, "key")));
                }
                None => errs.push(FieldError::forbidden(
                    &kp,
                    "must not be specified when labelSelector is not set",
                )),
            }
            for (j, k) in keys.iter().enumerate() {
                errs.extend(validate_label_name(k, &kp.index(j)));
                if selector_keys.contains(k) {
                    errs.push(FieldError::invalid(
                        &kp.index(j),
                        *k,
                        "exists in both matchLabelKeys and labelSelector",
                    ));
                }
            }
        }
        errs.extend(validate_label_selector(
            c.get("labelSelector"),
            LabelSelectorValidationOptions::default(),
            &p.child("labelSelector"),
        ));
    }
    errs
}

fn qualified(value: &str, path: &FieldPath) -> Vec<FieldError> {
    is_qualified_name(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `validateReadinessGates`.
pub(super) fn validate_readiness_gates(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    items(spec, "readinessGates")
        .flat_map(|(i, g)| {
            qualified(
                text(g, "conditionType"),
                &path.index(i).child("conditionType"),
            )
        })
        .collect()
}

/// `validateSchedulingGates`: qualified names, each once.
pub(super) fn validate_scheduling_gates(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, g) in items(spec, "schedulingGates") {
        let name = text(g, "name");
        errs.extend(qualified(name, &path.index(i)));
        if !seen.insert(name) {
            errs.push(FieldError::duplicate(&path.index(i), name));
        }
    }
    errs
}

/// `mutatePodAffinity`: each `matchLabelKeys` (`mismatchLabelKeys`) key the pod has as a label
/// becomes an `In` (`NotIn`) requirement of the term's selector.
pub(super) fn merge_affinity_label_keys(pod: &mut Value) {
    let labels = pod
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(affinity) = pod.pointer_mut("/spec/affinity").filter(|a| a.is_object()) else {
        return;
    };
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pa) = affinity.get_mut(kind).filter(|a| a.is_object()) else {
            continue;
        };
        for (list, weighted) in [
            ("requiredDuringSchedulingIgnoredDuringExecution", false),
            ("preferredDuringSchedulingIgnoredDuringExecution", true),
        ] {
            let Some(terms) = pa.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for t in terms {
                let term = if weighted {
                    match t.get_mut("podAffinityTerm") {
                        Some(term) => term,
                        None => continue,
                    }
                } else {
                    t
                };
                merge_term(term, &labels);
            }
        }
    }
}

/// `mutateTopologySpreadConstraints` (MatchLabelKeysInPodTopologySpread and its
/// SelectorMerge, both on in v1.36): each constraint's `matchLabelKeys` present in the pod's
/// labels join its label selector as `In` requirements.
pub(super) fn merge_spread_label_keys(pod: &mut Value) {
    let labels = pod
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(constraints) = pod
        .pointer_mut("/spec/topologySpreadConstraints")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in constraints {
        let keys: Vec<(String, &str)> = strings(c, "matchLabelKeys")
            .into_iter()
            .map(|k| (k.to_string(), "In"))
            .collect();
        if !keys.is_empty()
            && let Some(sel) = c.get_mut("labelSelector").filter(|s| s.is_object())
        {
            add_requirements(sel, keys, &labels);
        }
    }
}

fn add_requirements(
    sel: &mut Value,
    keys: Vec<(String, &str)>,
    labels: &serde_json::Map<String, Value>,
) {
    for (key, op) in keys {
        if let Some(value) = labels.get(&key) {
            if !sel.get("matchExpressions").is_some_and(Value::is_array) {
                sel["matchExpressions"] = json!([]);
            }
            if let Some(exprs) = sel["matchExpressions"].as_array_mut() {
                exprs.push(json!({"key": key, "operator": op, "values": [value]}));
            }
        }
    }
}

fn merge_term(term: &mut Value, labels: &serde_json::Map<String, Value>) {
    let keys: Vec<(String, &str)> = strings(term, "matchLabelKeys")
        .into_iter()
        .map(|k| (k.to_string(), "In"))
        .chain(
            strings(term, "mismatchLabelKeys")
                .into_iter()
                .map(|k| (k.to_string(), "NotIn")),
        )
        .collect();
    if keys.is_empty() {
        return;
    }
    if let Some(sel) = term.get_mut("labelSelector").filter(|s| s.is_object()) {
        add_requirements(sel, keys, labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toleration_and_affinity_rules() {
        let spec = json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]});
        assert_eq!(
            validate_tolerations(&spec, &FieldPath::new("spec").child("tolerations"))[0]
                .to_string(),
            r#"spec.tolerations[0].operator: Invalid value: "v": value must be empty when `operator` is 'Exists'"#
        );
        let spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}});
        assert_eq!(
            validate_affinity(&spec, &FieldPath::new("spec").child("affinity"))[0].to_string(),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term"
        );
        let spec = json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]});
        assert_eq!(
            validate_topology_spread(
                &spec,
                &FieldPath::new("spec").child("topologySpreadConstraints")
            )[0]
            .to_string(),
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"
        );
    }

    #[test]
    fn spread_label_keys_join_the_selector() {
        let mut pod = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"topologySpreadConstraints": [
            {"labelSelector": {"matchLabels": {"x": "y"}}, "matchLabelKeys": ["app", "none"], "topologyKey": "z"},
            {"matchLabelKeys": ["app"], "topologyKey": "z"}]}});
        merge_spread_label_keys(&mut pod);
        assert_eq!(
            pod.at("/spec/topologySpreadConstraints/0/labelSelector"),
            Some(
                &json!({"matchLabels": {"x": "y"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]})
            )
        );
        // No selector: nothing to merge into (upstream's applyMatchLabelKeys).
        assert_eq!(
            pod.at("/spec/topologySpreadConstraints/1/labelSelector"),
            None
        );
    }

    #[test]
    fn label_keys_join_the_selector() {
        let mut pod = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "matchLabelKeys": ["app", "none"], "topologyKey": "z"}]}}}});
        merge_affinity_label_keys(&mut pod);
        assert_eq!(
            pod.at("/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/0/labelSelector/matchExpressions"),
            Some(&json!([{"key": "app", "operator": "In", "values": ["a"]}]))
        );
    }
}
