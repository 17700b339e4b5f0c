//! What an update of a pod may change (pkg/apis/core/validation `ValidatePodUpdate`,
//! `ValidatePodEphemeralContainersUpdate`, `ValidatePodResize`, `ValidatePodStatusUpdate`)
//! and how the `ephemeralcontainers` and `resize` subresources keep everything else as stored
//! (pkg/registry/core/pod/strategy.go). The refusal of a spec change carries a unified diff
//! of the two specs as upstream prints them (Go field names, one-space indentation).

use std::collections::BTreeSet;

use apimachinery::object::JsonPointer;
use apimachinery::validation::{FieldError, FieldPath, inclusive_range_error};
use serde_json::Value;

use super::scheduling::validate_tolerations;
use super::spec::validate_pod_metadata_and_spec;
use super::util::{items, list, map, opt_int, text};

const UPDATABLE_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub(super) const MIRROR_POD: &str = "kubernetes.io/config.mirror";
const APPARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

pub(super) fn empty() -> &'static Value {
    static NULL: Value = Value::Null;
    &NULL
}

pub(super) fn spec_of(pod: &Value) -> &Value {
    pod.get("spec").unwrap_or(empty())
}

/// `ValidatePodSpecificAnnotationUpdates` without the annotation rules themselves (which
/// `validate_pod_metadata_and_spec` already ran): AppArmor and mirror-pod annotations stay.
pub(super) fn annotation_updates(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    let empty_meta = Value::Null;
    let new_a = map(new.get("metadata").unwrap_or(&empty_meta), "annotations");
    let old_a = map(old.get("metadata").unwrap_or(&empty_meta), "annotations");
    let mut errs = Vec::new();
    for (k, v) in old_a {
        if new_a.get(k) == Some(v) {
            continue;
        }
        if k.starts_with(APPARMOR_PREFIX) {
            errs.push(FieldError::forbidden(
                &path.key(k),
                "may not remove or update AppArmor annotations",
            ));
        }
        if k == MIRROR_POD {
            errs.push(FieldError::forbidden(
                &path.key(k),
                "may not remove or update mirror pod annotation",
            ));
        }
    }
    for k in new_a.keys() {
        if old_a.contains_key(k) {
            continue;
        }
        if k.starts_with(APPARMOR_PREFIX) {
            errs.push(FieldError::forbidden(
                &path.key(k),
                "may not add AppArmor annotations",
            ));
        }
        if k == MIRROR_POD {
            errs.push(FieldError::forbidden(
                &path.key(k),
                "may not add mirror pod annotation",
            ));
        }
    }
    errs.extend(super::security::validate_pod_annotations(
        new.get("metadata").unwrap_or(&empty_meta),
        spec_of(new),
        path,
    ));
    errs
}

/// `ValidateContainerUpdates`: same number of containers; images set and trimmed.
fn container_updates(new: &[Value], old: &[Value], path: &FieldPath) -> (Vec<FieldError>, bool) {
    if new.len() != old.len() {
        return (
            vec![FieldError::forbidden(
                path,
                "pod updates may not add or remove containers",
            )],
            true,
        );
    }
    let mut errs = Vec::new();
    for (i, c) in new.iter().enumerate() {
        let image = text(c, "image");
        if image.is_empty() {
            errs.push(FieldError::required(&path.index(i).child("image"), ""));
        }
        if image.trim().len() != image.len() {
            errs.push(FieldError::invalid(
                &path.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    (errs, false)
}

/// `ValidatePodUpdate` (after the generic metadata update rules, which the store checks).
pub fn validate_pod_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let ap = FieldPath::new("metadata").child("annotations");
    let mut errs = validate_pod_metadata_and_spec(new);
    errs.extend(annotation_updates(new, old, &ap));
    let sp = FieldPath::new("spec");
    let (ns, os) = (spec_of(new), spec_of(old));
    for kind in ["containers", "initContainers"] {
        let (e, stop) = container_updates(list(ns, kind), list(os, kind), &sp.child(kind));
        errs.extend(e);
        if stop {
            return errs;
        }
    }
    let ads = sp.child("activeDeadlineSeconds");
    match (
        opt_int(ns, "activeDeadlineSeconds"),
        opt_int(os, "activeDeadlineSeconds"),
    ) {
        (Some(n), old_ads) => {
            if !(0..=i64::from(i32::MAX)).contains(&n) {
                errs.push(FieldError::invalid(
                    &ads,
                    n,
                    inclusive_range_error(0, i64::from(i32::MAX)),
                ));
                return errs;
            }
            if old_ads.is_some_and(|o| o < n) {
                errs.push(FieldError::invalid(
                    &ads,
                    n,
                    "must be less than or equal to previous value",
                ));
                return errs;
            }
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            &ads,
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        (None, None) => {}
    }
    errs.extend(only_added_tolerations(ns, os, &sp.child("tolerations")));
    errs.extend(only_deleted_gates(ns, os, &sp.child("schedulingGates")));
    if ns == os {
        return errs;
    }
    // The fields a pod update may change take their old values; anything left is a change.
    let mut munged = ns.clone();
    for kind in ["containers", "initContainers"] {
        if let Some(cs) = munged.get_mut(kind).and_then(Value::as_array_mut) {
            for (i, c) in cs.iter_mut().enumerate() {
                if let Some(o) = list(os, kind).get(i) {
                    c["image"] = o.get("image").cloned().unwrap_or(Value::Null);
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        copy_field(&mut munged, os, field);
    }
    if opt_int(os, "terminationGracePeriodSeconds").is_some_and(|g| g < 0)
        && opt_int(&munged, "terminationGracePeriodSeconds") == Some(1)
    {
        copy_field(&mut munged, os, "terminationGracePeriodSeconds");
    }
    if !list(os, "schedulingGates").is_empty() {
        errs.extend(gated_pod_mutations(&mut munged, os, &sp));
    }
    if without_nulls(&munged) != without_nulls(os) {
        errs.push(FieldError::forbidden(
            &sp,
            format!(
                "pod updates may not change fields other than {UPDATABLE_FIELDS}\n{}",
                spec_diff(os, &munged)
            ),
        ));
    }
    errs
}

pub(super) fn copy_field(to: &mut Value, from: &Value, field: &str) {
    let Some(obj) = to.as_object_mut() else {
        return;
    };
    match from.get(field) {
        Some(v) => {
            obj.insert(field.to_string(), v.clone());
        }
        None => {
            obj.remove(field);
        }
    }
}

/// Go compares structs, where a null and an absent field are the same.
pub(super) fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// `validateOnlyAddedTolerations`: every old toleration is still there (its seconds may change).
fn only_added_tolerations(ns: &Value, os: &Value, path: &FieldPath) -> Vec<FieldError> {
    let strip = |t: &Value| {
        let mut t = without_nulls(t);
        if let Some(o) = t.as_object_mut() {
            o.remove("tolerationSeconds");
        }
        t
    };
    let new: Vec<Value> = list(ns, "tolerations").iter().map(strip).collect();
    for old in list(os, "tolerations") {
        if !new.contains(&strip(old)) {
            return vec![FieldError::forbidden(
                path,
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    validate_tolerations(ns, path)
}

/// `validateOnlyDeletedSchedulingGates`.
fn only_deleted_gates(ns: &Value, os: &Value, path: &FieldPath) -> Vec<FieldError> {
    let old: BTreeSet<&str> = items(os, "schedulingGates")
        .map(|(_, g)| text(g, "name"))
        .collect();
    let mut added: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, g) in items(ns, "schedulingGates") {
        added.insert(text(g, "name"), i);
    }
    added
        .into_iter()
        .filter(|(name, _)| !old.contains(name))
        .map(|(name, i)| {
            FieldError::forbidden(
                &path.index(i).child("name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            )
        })
        .collect()
}

/// A gated pod may gain node selector entries and node affinity requirements; those changes
/// are checked here and taken out of the comparison.
fn gated_pod_mutations(munged: &mut Value, os: &Value, sp: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let new_sel = munged.get("nodeSelector").cloned().unwrap_or(Value::Null);
    let old_sel = os.get("nodeSelector").cloned().unwrap_or(Value::Null);
    if without_nulls(&new_sel) != without_nulls(&old_sel) {
        let new_map = map(munged, "nodeSelector");
        if map(os, "nodeSelector")
            .iter()
            .any(|(k, v)| new_map.get(k) != Some(v))
        {
            errs.push(FieldError::invalid(
                &sp.child("nodeSelector"),
                new_sel.clone(),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        copy_field(munged, os, "nodeSelector");
    }
    let old_na = os
        .at("/affinity/nodeAffinity")
        .cloned()
        .unwrap_or(Value::Null);
    let new_na = munged
        .at("/affinity/nodeAffinity")
        .cloned()
        .unwrap_or(Value::Null);
    if without_nulls(&old_na) != without_nulls(&new_na) {
        let np = sp.child("affinity").child("nodeAffinity");
        if let Some(old_req) = old_na
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .filter(|r| !r.is_null())
        {
            let old_terms = list(old_req, "nodeSelectorTerms");
            let new_terms: Vec<Value> = new_na
                .at("/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let tp = np
                .child("requiredDuringSchedulingIgnoredDuringExecution")
                .child("nodeSelectorTerms");
            if !old_terms.is_empty() && old_terms.len() != new_terms.len() {
                // Upstream prints the internal terms (a nil list is `null`).
                let rendered = if new_terms.is_empty() {
                    "null".to_string()
                } else {
                    ironplane_protobuf::go_slice_json(
                        "core.v1.NodeSelectorTerm",
                        &new_terms,
                        ironplane_protobuf::GoStyle::Internal,
                    )
                    .unwrap_or_default()
                };
                errs.push(
                    FieldError::invalid(
                        &tp,
                        Value::Array(new_terms),
                        "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
                    )
                    .with_rendered_value(rendered),
                );
            } else {
                for (i, old_term) in old_terms.iter().enumerate() {
                    let Some(new_term) = new_terms.get(i) else {
                        continue;
                    };
                    if !term_only_adds(new_term, old_term) {
                        let rendered = ironplane_protobuf::go_struct_json(
                            "core.v1.NodeSelectorTerm",
                            new_term,
                            ironplane_protobuf::GoStyle::Internal,
                        )
                        .unwrap_or_default();
                        errs.push(
                            FieldError::invalid(
                                &tp.index(i),
                                new_term.clone(),
                                "only additions are allowed (no mutations or deletions)",
                            )
                            .with_rendered_value(rendered),
                        );
                    }
                }
            }
        }
        let old_has_affinity = os.get("affinity").is_some_and(|a| !a.is_null());
        let only_node = munged.get("affinity").is_some_and(|a| {
            a.get("podAffinity").is_none_or(Value::is_null)
                && a.get("podAntiAffinity").is_none_or(Value::is_null)
        });
        match munged.get_mut("affinity").filter(|a| a.is_object()) {
            None if !old_na.is_null() => {
                munged["affinity"] = serde_json::json!({"nodeAffinity": old_na})
            }
            None => {}
            Some(_) if !old_has_affinity && only_node => {
                if let Some(o) = munged.as_object_mut() {
                    o.remove("affinity");
                }
            }
            Some(a) => a["nodeAffinity"] = old_na,
        }
    }
    errs
}

fn term_only_adds(new: &Value, old: &Value) -> bool {
    let (oe, of) = (list(old, "matchExpressions"), list(old, "matchFields"));
    let (ne, nf) = (list(new, "matchExpressions"), list(new, "matchFields"));
    if oe.is_empty() && of.is_empty() && (!ne.is_empty() || !nf.is_empty()) {
        return false;
    }
    let prefix = |n: &[Value], o: &[Value]| {
        o.is_empty()
            || (n.len() >= o.len()
                && n[..o.len()]
                    .iter()
                    .map(without_nulls)
                    .eq(o.iter().map(without_nulls)))
    };
    prefix(ne, oe) && prefix(nf, of)
}

// ---------------------------------------------------------------------------------------------
// Subresources.
// ---------------------------------------------------------------------------------------------

/// Metadata a subresource write may not change (`ResetObjectMetaForStatus`): the stored values
/// come back.
pub(super) fn reset_meta(new: &mut Value, old: &Value) {
    for field in [
        "deletionTimestamp",
        "generation",
        "selfLink",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
    ] {
        let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        match old.at(&format!("/metadata/{field}")) {
            Some(v) => {
                meta.insert(field.to_string(), v.clone());
            }
            None => {
                meta.remove(field);
            }
        }
    }
}

/// `dropNonEphemeralContainerUpdates`: only the ephemeral containers change.
pub fn prepare_ephemeral_update(new: &mut Value, old: &Value) {
    let ephemeral = new.at("/spec/ephemeralContainers").cloned();
    new["spec"] = old
        .get("spec")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    match ephemeral {
        Some(e) => new["spec"]["ephemeralContainers"] = e,
        None => {
            if let Some(s) = new["spec"].as_object_mut() {
                s.remove("ephemeralContainers");
            }
        }
    }
    copy_field(new, old, "status");
    reset_meta(new, old);
}

/// `ValidatePodEphemeralContainersUpdate`.
pub fn validate_ephemeral_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let ap = FieldPath::new("metadata").child("annotations");
    let mut errs = validate_pod_metadata_and_spec(new);
    errs.extend(annotation_updates(new, old, &ap));
    if old
        .at(&format!(
            "/metadata/annotations/{}",
            MIRROR_POD.replace('/', "~1")
        ))
        .is_some()
    {
        return vec![FieldError::forbidden(
            &FieldPath::new(""),
            "static pods do not support ephemeral containers",
        )];
    }
    let path = FieldPath::new("spec").child("ephemeralContainers");
    let new_by_name: std::collections::BTreeMap<&str, &Value> =
        items(spec_of(new), "ephemeralContainers")
            .map(|(_, c)| (text(c, "name"), c))
            .collect();
    for (_, o) in items(spec_of(old), "ephemeralContainers") {
        let name = text(o, "name");
        match new_by_name.get(name) {
            None => errs.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {} may not be removed\n",
                    apimachinery::validation::go_quote(name)
                ),
            )),
            Some(n) if without_nulls(n) != without_nulls(o) => errs.push(FieldError::forbidden(
                &path,
                format!(
                    "existing ephemeral containers {} may not be changed\n{}",
                    apimachinery::validation::go_quote(name),
                    json_diff("core.v1.EphemeralContainer", o, n)
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// The diff of a refused change.
// ---------------------------------------------------------------------------------------------

fn spec_diff(old: &Value, new: &Value) -> String {
    json_diff("core.v1.PodSpec", old, new)
}

/// `diff.Diff` of two values rendered as the internal Go struct `ty` (see
/// `strategies::godiff`).
fn json_diff(ty: &str, old: &Value, new: &Value) -> String {
    let render = |v: &Value| {
        ironplane_protobuf::go_struct_json(ty, v, ironplane_protobuf::GoStyle::Internal)
            .unwrap_or_else(|| apimachinery::validation::go_json(v))
    };
    crate::strategies::godiff::go_diff(&render(old), &render(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "u", "namespace": "n"}, "spec": spec})
    }

    fn base() -> Value {
        json!({"containers": [{"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePolicy": "File", "terminationMessagePath": "/dev/termination-log"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30,
            "securityContext": {}, "schedulerName": "default-scheduler"})
    }

    #[test]
    fn update_rules() {
        let old = pod(base());
        let mut new_spec = base();
        new_spec["activeDeadlineSeconds"] = json!(100);
        let mut older = base();
        older["activeDeadlineSeconds"] = json!(50);
        let errs = validate_pod_update(&pod(new_spec), &pod(older));
        assert_eq!(
            errs[0].to_string(),
            "spec.activeDeadlineSeconds: Invalid value: 100: must be less than or equal to previous value"
        );
        let mut changed = base();
        changed["containers"][0]["ports"] = json!([{"containerPort": 80, "protocol": "TCP"}]);
        let errs = validate_pod_update(&pod(changed), &old);
        assert_eq!(errs.len(), 1);
        let msg = errs[0].to_string();
        assert!(msg.starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"), "{msg}");
        assert!(
            msg.contains("-   \"Ports\": null,\n+   \"Ports\": [\n"),
            "{msg}"
        );
        let mut image = base();
        image["containers"][0]["image"] = json!("nginx:1.28");
        assert!(validate_pod_update(&pod(image), &old).is_empty());
    }
}
