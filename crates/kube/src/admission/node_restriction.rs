//! NodeRestriction (upstream: plugin/pkg/admission/noderestriction), off by default as
//! upstream's and turned on as kubeadm does: a kubelet (`system:node:<name>` in `system:nodes`)
//! writes only its own Node — not its taints, owner references, or labels outside the kubelet's
//! own set — and only the pods bound to it: mirror pods on create, status updates, deletes and
//! evictions of its own pods. The Node authorizer decides what it may ask at all; this decides
//! what the write may contain.
//!
//! Not here yet: the checks on service-account tokens (bound to the node's pods), on claims'
//! status, and on mirror pods' references to other objects.

use std::collections::BTreeSet;

use apimachinery::Status;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::node_authorizer::node_identity;

const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub struct NodeRestriction;

fn forbidden(attrs: &Attributes<'_>, why: String) -> Status {
    Status::forbidden(&attrs.resource.group_resource(), attrs.name, why)
}

/// `IsKubeletLabel`: the kubernetes.io labels a kubelet may set on its Node.
fn is_kubelet_label(key: &str) -> bool {
    const LABELS: &[&str] = &[
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    ];
    let namespace = key.split_once('/').map(|(n, _)| n).unwrap_or("");
    LABELS.contains(&key)
        || ["kubelet.kubernetes.io", "node.kubernetes.io"]
            .iter()
            .any(|allowed| namespace == *allowed || namespace.ends_with(&format!(".{allowed}")))
}

/// `getForbiddenLabels`: node-restriction labels, and kubernetes.io/k8s.io labels that are not
/// the kubelet's.
fn forbidden_labels(modified: &BTreeSet<String>) -> Vec<String> {
    modified
        .iter()
        .filter(|key| {
            let ns = key.split_once('/').map(|(n, _)| n).unwrap_or("");
            let restricted = ns == "node-restriction.kubernetes.io"
                || ns.ends_with(".node-restriction.kubernetes.io");
            let kubernetes = ns == "kubernetes.io"
                || ns.ends_with(".kubernetes.io")
                || ns == "k8s.io"
                || ns.ends_with(".k8s.io");
            restricted || (kubernetes && !is_kubelet_label(key))
        })
        .cloned()
        .collect()
}

fn labels(v: &Value) -> Map<String, Value> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// `getModifiedLabels`.
fn modified_labels(new: &Value, old: Option<&Value>) -> BTreeSet<String> {
    let (a, b) = (labels(new), old.map(labels).unwrap_or_default());
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .chain(b.iter().filter(|(k, v)| a.get(*k) != Some(v)))
        .map(|(k, _)| k.clone())
        .collect()
}

fn node_name_of(pod: Option<&Value>) -> &str {
    pod.and_then(|p| p.pointer("/spec/nodeName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl NodeRestriction {
    fn admit_node(&self, node: &str, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if attrs.name != node {
            return Err(forbidden(
                attrs,
                format!(
                    "node {node:?} is not allowed to modify node {:?}",
                    attrs.name
                ),
            ));
        }
        let labels = match attrs.operation {
            Operation::Create => modified_labels(obj, None),
            Operation::Update => {
                let old = attrs.old_object.unwrap_or(&Value::Null);
                if obj.pointer("/spec/taints") != old.pointer("/spec/taints") {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} is not allowed to modify taints"),
                    ));
                }
                if obj.pointer("/metadata/ownerReferences")
                    != old.pointer("/metadata/ownerReferences")
                {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} is not allowed to modify ownerReferences"),
                    ));
                }
                modified_labels(obj, Some(old))
            }
            _ => return Ok(()),
        };
        let refused = forbidden_labels(&labels);
        if refused.is_empty() {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            if attrs.operation == Operation::Create {
                format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    refused.join(", ")
                )
            } else {
                format!("is not allowed to modify labels: {}", refused.join(", "))
            },
        ))
    }

    fn admit_pod(&self, node: &str, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        match (attrs.subresource, attrs.operation) {
            ("", Operation::Create) => {
                let mirror = obj
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
                    .is_some();
                if !mirror {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "pod does not have {MIRROR_POD_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
                        ),
                    ));
                }
                if node_name_of(Some(obj)) != node {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "node {node:?} can only create pods with spec.nodeName set to itself"
                        ),
                    ));
                }
                Ok(())
            }
            ("", Operation::Delete) => {
                if node_name_of(attrs.old_object) != node {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "node {node:?} can only delete pods with spec.nodeName set to itself"
                        ),
                    ));
                }
                Ok(())
            }
            ("", op) => Err(forbidden(
                attrs,
                format!(
                    "unexpected operation {:?}, node {node:?} can only create and delete mirror pods",
                    op.as_str()
                ),
            )),
            ("status", _) => {
                if node_name_of(attrs.old_object) != node {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
                        ),
                    ));
                }
                if obj.pointer("/metadata/labels")
                    != attrs.old_object.and_then(|o| o.pointer("/metadata/labels"))
                {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} cannot update labels through pod status"),
                    ));
                }
                Ok(())
            }
            ("eviction", _) => {
                if node_name_of(attrs.old_object) != node && !attrs.name.is_empty() {
                    return Err(forbidden(
                        attrs,
                        format!("node {node} can only evict pods with spec.nodeName set to itself"),
                    ));
                }
                Ok(())
            }
            (sub, _) => Err(forbidden(
                attrs,
                format!(
                    "unexpected pod subresource {sub:?}, only 'status' and 'eviction' are allowed"
                ),
            )),
        }
    }
}

#[async_trait]
impl ValidatingPlugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let Some(node) = node_identity(attrs.user) else {
            return Ok(());
        };
        let resource = attrs.resource.resource.as_str();
        if !attrs.resource.group.is_empty() || !matches!(resource, "nodes" | "pods") {
            return Ok(());
        }
        if node.is_empty() {
            return Err(forbidden(
                attrs,
                format!("could not determine node from user {:?}", attrs.user.name),
            ));
        }
        match resource {
            "nodes" => self.admit_node(node, attrs, obj),
            _ => self.admit_pod(node, attrs, obj),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelets_may_set_their_own_labels_only() {
        let set = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
        assert!(
            forbidden_labels(&set(&[
                "kubernetes.io/hostname",
                "node.kubernetes.io/exclude-from-external-load-balancers",
                "example.com/x"
            ]))
            .is_empty()
        );
        assert_eq!(
            forbidden_labels(&set(&[
                "node-restriction.kubernetes.io/pool",
                "node-role.kubernetes.io/control-plane",
                "kubernetes.io/os"
            ])),
            vec![
                "node-restriction.kubernetes.io/pool".to_string(),
                "node-role.kubernetes.io/control-plane".to_string()
            ]
        );
    }
}
