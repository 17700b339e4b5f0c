//! `pods/binding` and the older `bindings` (pkg/registry/core/pod/storage/storage.go
//! `BindingREST`): a Binding assigns a pod to a node. As upstream, the pod is changed in storage
//! directly (`GuaranteedUpdate`, no pod strategy: no defaults, no validation, no generation
//! bump): it must be unbound, not being deleted and without scheduling gates; it gets the node,
//! the binding's annotations and labels (PodTopologyLabelsAdmission, beta, on in v1.36), loses
//! its nominated node (ClearingNominatedNodeNameAfterBinding, beta, on) and gets a
//! PodScheduled=True condition.

use apimachinery::object::{JsonPointer, ObjectExt};
use apimachinery::validation::{FieldError, FieldPath};
use apimachinery::{GroupResource, Status};
use apiserver::endpoints::ApiResources;
use serde_json::{Value, json};
use storage::{GetOptions, ResourceVersion, StorageError};

/// `ValidatePodBinding`. Upstream's BindingREST returns these as a plain error (an aggregate),
/// which the handler answers as a 500 with the errors' text and no details.
fn validate_binding(binding: &Value) -> Result<(), Status> {
    let target = FieldPath::new("target");
    let kind = binding
        .at("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = binding
        .at("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut errs = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        errs.push(FieldError::not_supported(
            &target.child("kind"),
            json!(kind),
            &["Node", "<empty>"],
        ));
    }
    if node.is_empty() {
        errs.push(FieldError::required(&target.child("name"), ""));
    }
    let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
    match msgs.len() {
        0 => Ok(()),
        1 => Err(Status::unknown(msgs[0].clone())),
        _ => Err(Status::unknown(format!("[{}]", msgs.join(", ")))),
    }
}

/// The refusals of `setPodNodeAndMetadata`, which upstream's `assignPod` turns into a
/// conflict on `pods/binding`.
fn binding_conflict(pod: &str, why: String) -> Status {
    Status::conflict(&GroupResource::new("", "pods/binding"), pod, why)
}

/// A storage precondition that failed, as upstream's `InterpretUpdateError` reports a
/// `StorageError` of an invalid object (the key as etcd holds it, under `/registry`).
fn precondition_failed(key: &str, pod: &str, why: String) -> Status {
    Status::conflict(
        &GroupResource::new("", "pods"),
        pod,
        format!(
            "StorageError: invalid object, Code: 4, Key: /registry{}, ResourceVersion: 0, AdditionalErrorMsg: {why}",
            key.strip_prefix("/registry").unwrap_or(key)
        ),
    )
}

/// The pod as the binding changes it (`setPodNodeAndMetadata`).
pub fn bind(pod: &Value, binding: &Value, now: &str) -> Result<Value, Status> {
    let name = pod.name();
    if pod.deletion_timestamp().is_some() {
        return Err(binding_conflict(
            name,
            format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    if let Some(bound) = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(binding_conflict(
            name,
            format!("pod {name} is already assigned to node \"{bound}\""),
        ));
    }
    if pod
        .at("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(binding_conflict(
            name,
            format!("pod {name} has non-empty .spec.schedulingGates"),
        ));
    }
    let node = binding
        .at("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut out = pod.clone();
    if !out["spec"].is_object() {
        out["spec"] = json!({});
    }
    out["spec"]["nodeName"] = json!(node);
    if !out["status"].is_object() {
        out["status"] = json!({});
    }
    if let Some(s) = out["status"].as_object_mut() {
        s.remove("nominatedNodeName");
    }
    for field in ["annotations", "labels"] {
        let Some(extra) = binding
            .at(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        else {
            continue;
        };
        if !out["metadata"][field].is_object() {
            out["metadata"][field] = json!({});
        }
        for (k, v) in extra {
            out["metadata"][field][k] = v.clone();
        }
    }
    // `UpdatePodCondition`: the first PodScheduled condition is replaced where it is.
    super::util::update_pod_condition(
        &mut out["status"],
        json!({"type": "PodScheduled", "status": "True",
            "lastProbeTime": null, "lastTransitionTime": now}),
    );
    Ok(out)
}

/// `BindingREST.Create`: `name` is the pod's (from the URL, or the Binding's own for the older
/// `bindings`). A dry run checks everything and writes nothing.
pub async fn create_binding(
    api: &ApiResources,
    namespace: &str,
    name: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<Value, Status> {
    if binding.name() != name {
        return Err(Status::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    validate_binding(binding)?;
    let pods = api
        .get("", "v1", "pods")
        .ok_or_else(|| Status::internal("pods are not served"))?
        .clone();
    let key = pods.key(namespace, name);
    let uid = binding.uid();
    let rv = binding.resource_version();
    loop {
        let current = match pods
            .storage
            .get(
                &key,
                &GetOptions {
                    resource_version: ResourceVersion::Unset,
                },
            )
            .await
        {
            Ok(o) => o,
            Err(e) => return Err(pods.status_of(e, name)),
        };
        let pod = current.value().map_err(|e| pods.status_of(e, name))?;
        if !uid.is_empty() && uid != pod.uid() {
            return Err(precondition_failed(
                &key,
                name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    pod.uid()
                ),
            ));
        }
        if !rv.is_empty() && rv != current.resource_version.to_string() {
            return Err(precondition_failed(
                &key,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    current.resource_version
                ),
            ));
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let bound = bind(&pod, binding, &now)?;
        if dry_run {
            return Ok(apimachinery::status::created_status());
        }
        match pods
            .storage
            .update(&key, bound, current.resource_version)
            .await
        {
            Ok(_) => return Ok(apimachinery::status::created_status()),
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => return Err(pods.status_of(e, name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::Reason;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]},
               "status": {"phase": "Pending", "nominatedNodeName": "n0", "conditions": [
                   {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                   {"type": "Other", "status": "True"}]}})
    }

    fn binding(node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "p", "annotations": {"a": "b"}, "labels": {"l": "v"}},
               "target": {"kind": "Node", "name": node}})
    }

    #[test]
    fn binding_assigns_the_node_once() {
        let now = "2026-01-01T00:00:00Z";
        let bound = bind(&pod(), &binding("n1"), now).unwrap();
        assert_eq!(bound["spec"]["nodeName"], "n1");
        assert_eq!(bound["metadata"]["annotations"]["a"], "b");
        assert_eq!(bound["metadata"]["labels"]["l"], "v");
        assert!(bound["status"].get("nominatedNodeName").is_none());
        assert_eq!(
            bound["status"]["conditions"][0],
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now})
        );
        assert_eq!(bound["status"]["conditions"][1]["type"], "Other");
        let again = bind(&bound, &binding("n2"), now).unwrap_err();
        assert_eq!(
            (again.code, again.message.as_str()),
            (
                409,
                r#"Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1""#
            )
        );
        let no_target = validate_binding(&binding("")).unwrap_err();
        assert_eq!(
            (no_target.code, no_target.reason, no_target.message.as_str()),
            (500, Reason::Unknown, "target.name: Required value")
        );
    }
}
