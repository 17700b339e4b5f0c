//! The `resize` subresource (in-place pod vertical scaling) as v1.36 has it:
//! pkg/registry/core/pod/strategy.go `dropNonResizeUpdates` keeps only the containers'
//! resources and resize policies, and the pod-level resources
//! (InPlacePodLevelResourcesVerticalScaling, beta, on); pkg/apis/core/validation
//! `ValidatePodResize` checks what changed. Init containers of every kind may be resized
//! (InPlacePodVerticalScalingInitContainers, beta, on); memory limits may shrink (the kubelet
//! decides), so no rule refuses that any more.

use apimachinery::object::JsonPointer;
use apimachinery::validation::{FieldError, FieldPath};
use serde_json::{Map, Value};

use super::resources::compute_qos;
use super::spec::validate_pod_metadata_and_spec;
use super::update::{MIRROR_POD, copy_field, empty, reset_meta, spec_of, without_nulls};
use super::util::{items, list, map, present, text};

/// `dropNonResizeUpdates`: the stored pod with the new containers' resources and resize
/// policies and the new pod-level resources. A pod whose containers were added, removed,
/// renamed or reordered stays as sent (for that container list), for validation to refuse.
pub fn prepare_resize(new: &mut Value, old: &Value) {
    let (ns, os) = (spec_of(new), spec_of(old));
    let kinds = ["containers", "initContainers"];
    if kinds.iter().any(|k| list(ns, k).len() != list(os, k).len()) {
        return;
    }
    let mut spec = os.clone();
    for kind in kinds {
        let (nc, oc) = (list(ns, kind), list(os, kind));
        if nc.is_empty() {
            if let Some(s) = spec.as_object_mut() {
                s.remove(kind);
            }
            continue;
        }
        let renamed = nc
            .iter()
            .zip(oc)
            .any(|(n, o)| text(n, "name") != text(o, "name"));
        let merged: Vec<Value> = if renamed {
            nc.to_vec()
        } else {
            nc.iter()
                .zip(oc)
                .map(|(n, o)| {
                    let mut c = o.clone();
                    for field in ["resources", "resizePolicy"] {
                        copy_field(&mut c, n, field);
                    }
                    c
                })
                .collect()
        };
        spec[kind] = Value::Array(merged);
    }
    copy_field(&mut spec, ns, "resources");
    new["spec"] = spec;
    copy_field(new, old, "status");
    reset_meta(new, old);
}

/// Pod-level requests or limits are set (`isPodLevelResourcesSet`).
fn pod_level_resources_set(spec: &Value) -> bool {
    spec.get("resources")
        .is_some_and(|r| !map(r, "requests").is_empty() || !map(r, "limits").is_empty())
}

/// `resourcesRemoved`: a resource of the old list is missing from the new one.
fn resources_removed(new: &Map<String, Value>, old: &Map<String, Value>) -> bool {
    old.len() > new.len() || old.keys().any(|k| !new.contains_key(k))
}

/// `dropCPUMemoryUpdates`: the list with cpu and memory as the old list had them; absent
/// (Go's nil, equal to an empty map) when both lists were.
fn drop_cpu_memory_updates(new: Option<&Value>, old: Option<&Value>) -> Option<Value> {
    let new = new.and_then(Value::as_object);
    let old = old.and_then(Value::as_object);
    if new.is_none() && old.is_none() {
        return None;
    }
    let mut list = new.cloned().unwrap_or_default();
    list.remove("cpu");
    list.remove("memory");
    for k in ["cpu", "memory"] {
        if let Some(v) = old.and_then(|o| o.get(k)) {
            list.insert(k.to_string(), v.clone());
        }
    }
    (!list.is_empty()).then_some(Value::Object(list))
}

/// `dropCPUMemoryResourcesFromContainer`: the container's resources become its limits and
/// requests with cpu and memory as the old container had them (its claims are left out, as
/// upstream rebuilds the requirements from the two lists only).
fn drop_cpu_memory(c: &mut Value, old: &Value) {
    let (nr, or) = (
        c.get("resources").cloned().unwrap_or(Value::Null),
        old.get("resources").unwrap_or(empty()),
    );
    let mut res = Map::new();
    for list in ["limits", "requests"] {
        if let Some(l) = drop_cpu_memory_updates(nr.get(list), or.get(list)) {
            res.insert(list.to_string(), l);
        }
    }
    c["resources"] = Value::Object(res);
}

/// `validatePodLevelResourcesResize`: pod-level requests and limits may not go away, and only
/// their cpu and memory may change. The pod-level resources of `munged` take the old cpu and
/// memory for the final comparison.
fn pod_level_resize(ns: &Value, os: &Value, munged: &mut Value, sp: &FieldPath) -> Vec<FieldError> {
    let rp = sp.child("resources");
    let old_res = os.get("resources").filter(|r| !r.is_null());
    let new_res = ns.get("resources").filter(|r| !r.is_null());
    if old_res.is_some() && new_res.is_none() {
        return vec![FieldError::forbidden(
            &rp,
            "pod-level resources cannot be removed",
        )];
    }
    let mut errs = Vec::new();
    if let (Some(o), Some(n)) = (old_res, new_res) {
        if resources_removed(map(n, "requests"), map(o, "requests")) {
            errs.push(FieldError::forbidden(
                &rp.child("requests"),
                "pod-level resource requests cannot be removed",
            ));
        }
        if resources_removed(map(n, "limits"), map(o, "limits")) {
            errs.push(FieldError::forbidden(
                &rp.child("limits"),
                "pod-level resource limits cannot be removed",
            ));
        }
    }
    // `dropCPUMemoryResourceRequirementsUpdates`.
    if let Some(res) = munged.get_mut("resources").filter(|r| r.is_object()) {
        for list in ["requests", "limits"] {
            let l = drop_cpu_memory_updates(res.get(list), old_res.and_then(|o| o.get(list)));
            match l {
                Some(l) => res[list] = l,
                None => {
                    if let Some(m) = res.as_object_mut() {
                        m.remove(list);
                    }
                }
            }
        }
        let emptied = ["requests", "limits", "claims"]
            .iter()
            .all(|f| res.get(*f).is_none_or(|v| v.is_null()));
        if old_res.is_none()
            && emptied
            && let Some(m) = munged.as_object_mut()
        {
            m.remove("resources");
        }
    }
    let old_cmp = old_res.map(without_nulls);
    let new_cmp = munged
        .get("resources")
        .filter(|r| !r.is_null())
        .map(without_nulls);
    if old_cmp != new_cmp {
        errs.push(FieldError::forbidden(
            sp,
            "only cpu and memory resources are mutable at pod-level",
        ));
    }
    errs
}

/// `validatePodResizeContainerOrdering`: no container may be added, removed, renamed or
/// reordered.
fn container_ordering(ns: &Value, os: &Value, sp: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (kind, what) in [
        ("containers", "containers"),
        ("initContainers", "initContainers"),
    ] {
        let (nc, oc) = (list(ns, kind), list(os, kind));
        let p = sp.child(kind);
        if nc.len() != oc.len() {
            errs.push(FieldError::forbidden(
                &p,
                format!("{what} may not be added or removed on resize"),
            ));
            continue;
        }
        for (i, o) in oc.iter().enumerate() {
            if text(&nc[i], "name") != text(o, "name") {
                errs.push(FieldError::forbidden(
                    &p.index(i).child("name"),
                    format!("{what} may not be renamed or reordered on resize"),
                ));
            }
        }
    }
    errs
}

/// `validateContainerResize`: requests and limits may not lose a resource.
fn container_resize(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    let (nr, or) = (
        new.get("resources").unwrap_or(empty()),
        old.get("resources").unwrap_or(empty()),
    );
    let mut errs = Vec::new();
    if resources_removed(map(nr, "requests"), map(or, "requests")) {
        errs.push(FieldError::forbidden(
            &path.child("requests"),
            "resource requests cannot be removed",
        ));
    }
    if resources_removed(map(nr, "limits"), map(or, "limits")) {
        errs.push(FieldError::forbidden(
            &path.child("limits"),
            "resource limits cannot be removed",
        ));
    }
    errs
}

/// `isPodResizeRequestSupported`: the first running container reports its resources (the node
/// knows about resizing); a pod without running containers may always be resized.
fn resize_supported(old: &Value) -> bool {
    items(old.get("status").unwrap_or(empty()), "containerStatuses")
        .find(|(_, s)| present(s.get("state").unwrap_or(empty()), "running"))
        .is_none_or(|(_, s)| present(s, "resources"))
}

/// `ValidatePodResize` (after the generic metadata update rules, which the store checks).
pub fn validate_resize(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_pod_metadata_and_spec(new);
    let root = FieldPath::new("");
    if old
        .at("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD))
        .is_some()
    {
        return vec![FieldError::forbidden(
            &root,
            "static pods cannot be resized",
        )];
    }
    if old.at("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden(
            &root,
            "windows pods cannot be resized",
        )];
    }
    let sp = FieldPath::new("spec");
    let (ns, os) = (spec_of(new), spec_of(old));
    // `qos.GetPodQOS(oldPod)` against `qos.ComputePodQOS(newPod)`; the value shown is the new
    // pod's status class (the stored one, as the status is not the client's).
    let old_qos = old
        .at("/status/qosClass")
        .and_then(Value::as_str)
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| compute_qos(os));
    if old_qos != compute_qos(ns) {
        let q = new
            .at("/status/qosClass")
            .and_then(Value::as_str)
            .unwrap_or("");
        errs.push(FieldError::invalid(
            &sp,
            q,
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    if !resize_supported(old) {
        errs.push(FieldError::forbidden(
            &sp,
            "Pod running on node without support for resize",
        ));
    }
    let mut munged = ns.clone();
    if pod_level_resources_set(os) || pod_level_resources_set(ns) {
        errs.extend(pod_level_resize(ns, os, &mut munged, &sp));
    }
    // Node-allocatable resource claims (DRANodeAllocatableResources, alpha, off) can only be
    // in a status written while the gate was on.
    if !list(
        old.get("status").unwrap_or(empty()),
        "nodeAllocatableResourceClaimStatuses",
    )
    .is_empty()
    {
        errs.push(FieldError::forbidden(
            &sp,
            "pods with node allocatable resource claims cannot be resized",
        ));
    }
    let order = container_ordering(ns, os, &sp);
    if !order.is_empty() {
        errs.extend(order);
        return errs;
    }
    for kind in ["initContainers", "containers"] {
        for (i, oc) in items(os, kind) {
            errs.extend(container_resize(
                &list(ns, kind)[i],
                oc,
                &sp.child(kind).index(i).child("resources"),
            ));
        }
    }
    if let Some(cs) = munged.get_mut("containers").and_then(Value::as_array_mut) {
        for (c, oc) in cs.iter_mut().zip(list(os, "containers")) {
            drop_cpu_memory(c, oc);
            if without_nulls(c) != without_nulls(oc) {
                errs.push(FieldError::forbidden(
                    &sp,
                    "only cpu and memory resources are mutable",
                ));
            }
        }
    }
    if let Some(cs) = munged
        .get_mut("initContainers")
        .and_then(Value::as_array_mut)
    {
        for (i, (c, oc)) in cs.iter_mut().zip(list(os, "initContainers")).enumerate() {
            let restartable = text(c, "restartPolicy") == "Always";
            let modified = without_nulls(c) != without_nulls(oc);
            let p = sp.child("initContainers").index(i);
            drop_cpu_memory(c, oc);
            if without_nulls(c) != without_nulls(oc) {
                errs.push(FieldError::forbidden(
                    &p,
                    "only cpu and memory resources for init or sidecar containers are mutable",
                ));
            }
            if modified && !restartable {
                for (_, policy) in items(c, "resizePolicy") {
                    if text(policy, "restartPolicy") == "RestartContainer" {
                        errs.push(FieldError::forbidden(
                            &p,
                            "non-sidecar init containers with a resize policy of RestartContainer cannot be resized",
                        ));
                    }
                }
            }
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    if without_nulls(&munged) != without_nulls(os) {
        errs.push(FieldError::forbidden(
            &sp,
            "only cpu and memory resources are mutable",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value, resources: Option<Value>) -> Value {
        let mut spec = json!({"containers": containers, "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30,
            "schedulerName": "default-scheduler", "securityContext": {}});
        if let Some(r) = resources {
            spec["resources"] = r;
        }
        json!({"metadata": {"name": "rz", "namespace": "n"}, "spec": spec,
               "status": {"phase": "Pending", "qosClass": "Burstable"}})
    }

    fn container(resources: Value) -> Value {
        json!({"name": "c", "image": "nginx", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "resources": resources})
    }

    #[test]
    fn memory_limits_may_shrink() {
        let old = pod(
            json!([container(
                json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}})
            )]),
            None,
        );
        let new = pod(
            json!([container(
                json!({"requests": {"memory": "64Mi"}, "limits": {"memory": "100Mi"}})
            )]),
            None,
        );
        assert!(validate_resize(&new, &old).is_empty());
    }

    #[test]
    fn pod_level_resources_resize() {
        let c = json!([container(json!({}))]);
        let old = pod(
            c.clone(),
            Some(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})),
        );
        let grown = pod(
            c.clone(),
            Some(json!({"requests": {"cpu": "2"}, "limits": {"cpu": "2"}})),
        );
        assert!(validate_resize(&grown, &old).is_empty());
        let dropped = pod(c.clone(), Some(json!({"limits": {"cpu": "2"}})));
        let errs: Vec<String> = validate_resize(&dropped, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            ["spec.resources.requests: Forbidden: pod-level resource requests cannot be removed"]
        );
        let other = pod(
            c,
            Some(
                json!({"requests": {"cpu": "1", "ephemeral-storage": "1Gi"}, "limits": {"cpu": "2"}}),
            ),
        );
        let errs: Vec<String> = validate_resize(&other, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs.last().map(String::as_str),
            Some("spec: Forbidden: only cpu and memory resources are mutable at pod-level")
        );
    }

    #[test]
    fn renamed_containers_are_refused() {
        let res = json!({"requests": {"cpu": "1"}});
        let old = pod(json!([container(res.clone())]), None);
        let mut renamed = container(res);
        renamed["name"] = json!("d");
        let new = pod(json!([renamed]), None);
        let errs: Vec<String> = validate_resize(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
            ]
        );
    }
}
