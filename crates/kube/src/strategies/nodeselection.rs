//! Rules on where things may run, shared by the storage and node kinds: node selectors (a PV's
//! `nodeAffinity`), topology selector terms (a StorageClass's `allowedTopologies`), taints (a
//! Node's `spec.taints`), tolerations (a RuntimeClass's `scheduling`), and the warnings for
//! deprecated beta node labels. Upstream: pkg/apis/core/validation (`ValidateNodeSelector`,
//! `ValidateTopologySelectorTerm`, `validateNodeTaints`, `ValidateTolerations`) and
//! pkg/api/node/util.go (the deprecated labels).
//!
// candidate for apimachinery::validation (pod scheduling rules use the same validators)

use std::collections::{BTreeMap, BTreeSet};

pub(crate) use crate::strategies::fields::str_at as str_of;
use apimachinery::validation::{
    FieldError, FieldPath, is_dns1123_subdomain, is_valid_label_value, validate_label_name,
};
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::Value;

/// Beta node labels and upstream's words for each (pkg/api/node/util.go).
const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    (
        "beta.kubernetes.io/arch",
        "deprecated since v1.14; use \"kubernetes.io/arch\" instead",
    ),
    (
        "beta.kubernetes.io/os",
        "deprecated since v1.14; use \"kubernetes.io/os\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead",
    ),
];

/// The deprecation message of a beta node label.
pub fn deprecated_node_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, m)| *m)
}

pub(crate) fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn strings(v: Option<&Value>) -> Vec<&str> {
    items(v).iter().filter_map(Value::as_str).collect()
}

/// Warnings for a node selector term's expressions on beta labels (`GetWarningsForNodeSelectorTerm`).
pub fn node_selector_term_warnings(term: &Value, path: &FieldPath) -> Vec<String> {
    items(term.get("matchExpressions"))
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let key = str_of(e, "key");
            let msg = deprecated_node_label(key)?;
            let at = path.child("matchExpressions").index(i).child("key");
            Some(format!("{at}: {key} is {msg}"))
        })
        .collect()
}

/// Warnings for a label selector on beta node labels (`GetWarningsForNodeSelector`): expressions
/// first, then match labels (a Go map: sorted here).
pub fn label_selector_node_warnings(selector: Option<&Value>, path: &FieldPath) -> Vec<String> {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut out = node_selector_term_warnings(selector, path);
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for key in labels.keys() {
            if let Some(msg) = deprecated_node_label(key) {
                out.push(format!("{}: {msg}", path.child("matchLabels").child(key)));
            }
        }
    }
    out
}

/// One `NodeSelectorRequirement` of `matchExpressions` (`ValidateNodeSelectorRequirement`).
fn validate_node_selector_requirement(
    req: &Value,
    allow_invalid_label_value: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let operator = str_of(req, "operator");
    let values = strings(req.get("values"));
    match operator {
        "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
            &path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
            &path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
            &path.child("values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => errs.push(FieldError::invalid(
            &path.child("operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    errs.extend(validate_label_name(str_of(req, "key"), &path.child("key")));
    if !allow_invalid_label_value {
        for (i, v) in values.iter().enumerate() {
            for msg in is_valid_label_value(v) {
                errs.push(FieldError::invalid(&path.child("values").index(i), *v, msg));
            }
        }
    }
    errs
}

/// One `NodeSelectorRequirement` of `matchFields` (`ValidateNodeFieldSelectorRequirement`): only
/// `metadata.name`, with one node name.
fn validate_node_field_selector_requirement(req: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let operator = str_of(req, "operator");
    let values = strings(req.get("values"));
    match operator {
        "In" | "NotIn" => {
            if values.len() != 1 {
                errs.push(FieldError::required(
                    &path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        _ => errs.push(FieldError::invalid(
            &path.child("operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    let key = str_of(req, "key");
    if key == "metadata.name" {
        for (i, v) in values.iter().enumerate() {
            for msg in is_dns1123_subdomain(v) {
                errs.push(FieldError::invalid(&path.child("values").index(i), *v, msg));
            }
        }
    } else {
        errs.push(FieldError::invalid(
            &path.child("key"),
            key,
            "not a valid field selector key",
        ));
    }
    errs
}

/// A `NodeSelectorTerm` (`ValidateNodeSelectorTerm`).
pub fn validate_node_selector_term(
    term: &Value,
    allow_invalid_label_value: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (j, req) in items(term.get("matchExpressions")).iter().enumerate() {
        errs.extend(validate_node_selector_requirement(
            req,
            allow_invalid_label_value,
            &path.child("matchExpressions").index(j),
        ));
    }
    for (j, req) in items(term.get("matchFields")).iter().enumerate() {
        errs.extend(validate_node_field_selector_requirement(
            req,
            &path.child("matchFields").index(j),
        ));
    }
    errs
}

/// A `NodeSelector` (`ValidateNodeSelector`): at least one term.
pub fn validate_node_selector(
    selector: &Value,
    allow_invalid_label_value: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let terms_path = path.child("nodeSelectorTerms");
    let terms = items(selector.get("nodeSelectorTerms"));
    if terms.is_empty() {
        return vec![FieldError::required(
            &terms_path,
            "must have at least one node selector term",
        )];
    }
    terms
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            validate_node_selector_term(t, allow_invalid_label_value, &terms_path.index(i))
        })
        .collect()
}

/// Whether any `matchExpressions` value of the terms is not a valid label value
/// (`HasInvalidLabelValueInNodeSelectorTerms`): such objects keep being accepted on update.
pub fn has_invalid_label_value_in_terms(terms: &[Value]) -> bool {
    terms.iter().any(|t| {
        items(t.get("matchExpressions"))
            .iter()
            .flat_map(|e| strings(e.get("values")))
            .any(|v| !is_valid_label_value(v).is_empty())
    })
}

/// A `TopologySelectorTerm` (`ValidateTopologySelectorTerm`): its expressions, and the term as
/// key → values, for the caller's duplicate check.
pub fn validate_topology_selector_term(
    term: &Value,
    path: &FieldPath,
) -> (BTreeMap<String, BTreeSet<String>>, Vec<FieldError>) {
    let mut errs = Vec::new();
    let mut exprs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let exprs_path = path.child("matchLabelExpressions");
    for (i, req) in items(term.get("matchLabelExpressions")).iter().enumerate() {
        let idx = exprs_path.index(i);
        let values_path = idx.child("values");
        let values = strings(req.get("values"));
        if values.is_empty() {
            errs.push(FieldError::required(&values_path, ""));
        }
        let mut set = BTreeSet::new();
        for (j, v) in values.iter().enumerate() {
            if !set.insert(v.to_string()) {
                errs.push(FieldError::duplicate(&values_path.index(j), *v));
            }
        }
        let key = str_of(req, "key");
        errs.extend(validate_label_name(key, &idx.child("key")));
        if exprs.contains_key(key) {
            errs.push(FieldError::duplicate(&idx.child("key"), key));
        }
        exprs.insert(key.to_string(), set);
    }
    (exprs, errs)
}

/// A taint's or toleration's effect (`validateTaintEffect`).
fn validate_taint_effect(effect: &str, allow_empty: bool, path: &FieldPath) -> Vec<FieldError> {
    if !allow_empty && effect.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    match effect {
        "NoSchedule" | "PreferNoSchedule" | "NoExecute" => Vec::new(),
        _ => vec![FieldError::not_supported(
            path,
            effect,
            &["NoSchedule", "PreferNoSchedule", "NoExecute"],
        )],
    }
}

/// A node's taints (`validateNodeTaints`); a duplicate key and effect pair prints the internal
/// `core.Taint`.
pub fn validate_node_taints(taints: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, taint) in taints.iter().enumerate() {
        let idx = path.index(i);
        let key = str_of(taint, "key");
        let value = str_of(taint, "value");
        let effect = str_of(taint, "effect");
        errs.extend(validate_label_name(key, &idx.child("key")));
        let value_errs = is_valid_label_value(value);
        if !value_errs.is_empty() {
            errs.push(FieldError::invalid(
                &idx.child("value"),
                value,
                value_errs.join(";"),
            ));
        }
        errs.extend(validate_taint_effect(effect, false, &idx.child("effect")));
        if !seen.insert((effect.to_string(), key.to_string())) {
            let mut dup = FieldError::duplicate(&idx, taint.clone());
            if let Some(rendered) = go_struct_json("core.v1.Taint", taint, GoStyle::Internal) {
                dup = dup.with_rendered_value(rendered);
            }
            dup.detail = "taints must be unique by key and effect pair".into();
            errs.push(dup);
        }
    }
    errs
}

/// Tolerations (`ValidateTolerations`).
pub fn validate_tolerations(tolerations: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let idx = path.index(i);
        let key = str_of(t, "key");
        let operator = str_of(t, "operator");
        let value = str_of(t, "value");
        let effect = str_of(t, "effect");
        if !key.is_empty() {
            errs.extend(validate_label_name(key, &idx.child("key")));
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                &idx.child("operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &idx.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let value_errs = is_valid_label_value(value);
                if !value_errs.is_empty() {
                    errs.push(FieldError::invalid(
                        &idx.child("operator"),
                        value,
                        value_errs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        &idx.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            _ => errs.push(FieldError::not_supported(
                &idx.child("operator"),
                operator,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() {
            errs.extend(validate_taint_effect(effect, true, &idx.child("effect")));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicate_taints_print_the_internal_struct() {
        let taints = [
            json!({"key": "k", "value": "a", "effect": "NoSchedule"}),
            json!({"key": "k", "value": "b", "effect": "NoSchedule"}),
        ];
        let errs = validate_node_taints(&taints, &FieldPath::new("metadata").child("taints"));
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "metadata.taints[1]: Duplicate value: {\"Key\":\"k\",\"Value\":\"b\",\"Effect\":\"NoSchedule\",\"TimeAdded\":null}: taints must be unique by key and effect pair"
        );
    }

    #[test]
    fn node_selector_needs_a_term_and_valid_operators() {
        let path = FieldPath::new("spec")
            .child("nodeAffinity")
            .child("required");
        let errs = validate_node_selector(&json!({}), false, &path);
        assert_eq!(
            errs[0].to_string(),
            "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term"
        );
        let sel = json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "Near", "values": ["a"]}]}]});
        let errs = validate_node_selector(&sel, false, &path);
        assert_eq!(
            errs[0].to_string(),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"
        );
    }

    #[test]
    fn beta_labels_warn() {
        let term = json!({"matchExpressions": [{"key": "failure-domain.beta.kubernetes.io/zone"}]});
        assert_eq!(
            node_selector_term_warnings(&term, &FieldPath::new("t")),
            vec![
                "t.matchExpressions[0].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead"
            ]
        );
    }
}
