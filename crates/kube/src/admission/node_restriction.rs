//! NodeRestriction (upstream: plugin/pkg/admission/noderestriction), off by default as
//! upstream's and turned on as kubeadm does: a kubelet (`system:node:<name>` in `system:nodes`)
//! writes only its own Node — not its taints, owner references, config source, or labels
//! outside the kubelet's own set — and only the pods bound to it: mirror pods on create (owned
//! by its Node, naming no other API object), status updates (not of resource claims), deletes
//! and evictions of its own pods. It may change only the capacity and conditions of claims'
//! status, ask tokens only for service accounts of its pods (bound to the pod, for an audience
//! the pod mounts, one a CSI driver of the pod's volumes asks tokens for, or one it is authorized
//! for), and touch only its own Lease, CSINode,
//! ResourceSlices and node CSRs. The Node authorizer decides what it may ask at all; this
//! decides what the write may contain.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::authorization::Authorizer;
use apiserver::endpoints::ApiResources;
use apiserver::request::RequestInfo;
use async_trait::async_trait;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Map, Value};
use storage::ResourceVersion;

use crate::node_authorizer::node_identity;

const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The namespace of node leases (`api.NamespaceNodeLease`).
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

pub struct NodeRestriction {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
    pub authorizer: Arc<dyn Authorizer>,
}

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
        let config_source = |v: &Value| {
            v.pointer("/spec/configSource")
                .filter(|c| !c.is_null())
                .cloned()
        };
        let labels = match attrs.operation {
            Operation::Create => {
                if config_source(obj).is_some() {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "node {node:?} is not allowed to create pods with a non-nil configSource"
                        ),
                    ));
                }
                modified_labels(obj, None)
            }
            Operation::Update => {
                let old = attrs.old_object.unwrap_or(&Value::Null);
                if let Some(source) = config_source(obj)
                    && Some(&source) != config_source(old).as_ref()
                {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "node {node:?} is not allowed to update configSource to a new non-nil configSource"
                        ),
                    ));
                }
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

    async fn admit_pod(
        &self,
        node: &str,
        attrs: &Attributes<'_>,
        obj: &Value,
    ) -> Result<(), Status> {
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
                self.check_mirror_pod_owner(node, attrs, obj).await?;
                if let Some(resource) = api_object_reference(obj) {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} can not create pods that reference {resource}"),
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
                let old = attrs.old_object;
                let unchanged = |p: &str| obj.pointer(p) == old.and_then(|o| o.pointer(p));
                if !unchanged("/status/resourceClaimStatuses") {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} cannot update resource claim statues"),
                    ));
                }
                if !unchanged("/status/extendedResourceClaimStatus") {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} cannot update extended resource claim status"),
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

impl NodeRestriction {
    /// An object of the core group, from the watch cache and then storage.
    async fn get(&self, resource: &str, namespace: &str, name: &str) -> Result<Value, Status> {
        self.get_in("", "v1", resource, namespace, name).await
    }

    /// An object of any served group, from the watch cache and then storage.
    async fn get_in(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, Status> {
        let store = self
            .api
            .get()
            .and_then(|a| a.get(group, version, resource))
            .ok_or_else(|| Status::internal(format!("{resource} are not served")))?;
        let object = match store.get(namespace, name, ResourceVersion::Any).await {
            Err(s) if s.code == 404 => store.get(namespace, name, ResourceVersion::Unset).await,
            other => other,
        }?;
        object.value().map_err(Status::internal)
    }

    /// A mirror pod has one controller owner reference, to the kubelet's own Node (by uid).
    async fn check_mirror_pod_owner(
        &self,
        node: &str,
        attrs: &Attributes<'_>,
        pod: &Value,
    ) -> Result<(), Status> {
        let owners = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let [owner] = owners.as_slice() else {
            return Err(forbidden(
                attrs,
                if owners.is_empty() {
                    format!(
                        "node {node:?} can only create pods with an owner reference set to itself"
                    )
                } else {
                    format!(
                        "node {node:?} can only create pods with a single owner reference set to itself"
                    )
                },
            ));
        };
        let text = |f: &str| owner.get(f).and_then(Value::as_str).unwrap_or("");
        if text("apiVersion") != "v1" || text("kind") != "Node" || text("name") != node {
            return Err(forbidden(
                attrs,
                format!("node {node:?} can only create pods with an owner reference set to itself"),
            ));
        }
        if owner.get("controller").and_then(Value::as_bool) != Some(true) {
            return Err(forbidden(
                attrs,
                format!(
                    "node {node:?} can only create pods with a controller owner reference set to itself"
                ),
            ));
        }
        if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
            return Err(forbidden(
                attrs,
                format!("node {node:?} must not set blockOwnerDeletion on an owner reference"),
            ));
        }
        let found = match self.get("nodes", "", node).await {
            Ok(n) => n,
            Err(s) if s.code == 404 => return Err(s),
            Err(s) => {
                return Err(forbidden(
                    attrs,
                    format!("error looking up node {node} to verify uid: {}", s.message),
                ));
            }
        };
        if text("uid") != found.uid() {
            return Err(forbidden(
                attrs,
                format!(
                    "node {node} UID mismatch: expected {} got {}",
                    text("uid"),
                    found.uid()
                ),
            ));
        }
        Ok(())
    }

    /// `admitPVCStatus`: only the status' capacity, conditions and allocated resources change.
    fn admit_pvc_status(
        &self,
        node: &str,
        attrs: &Attributes<'_>,
        obj: &Value,
    ) -> Result<(), Status> {
        if attrs.operation != Operation::Update {
            return Err(forbidden(
                attrs,
                format!("unexpected operation {:?}", attrs.operation.as_str()),
            ));
        }
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
                meta.remove("managedFields");
            }
            if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
                for f in [
                    "capacity",
                    "conditions",
                    "allocatedResourceStatuses",
                    "allocatedResources",
                ] {
                    status.remove(f);
                }
            }
            v
        };
        let (old, new) = (strip(attrs.old_object.unwrap_or(&Value::Null)), strip(obj));
        if old == new {
            return Ok(());
        }
        let render = |v: &Value| {
            go_struct_json("core.v1.PersistentVolumeClaim", v, GoStyle::Internal)
                .unwrap_or_else(|| v.to_string())
        };
        Err(forbidden(
            attrs,
            format!(
                "node {node:?} is not allowed to update fields other than status.quantity and status.conditions: {}",
                crate::strategies::godiff::go_diff(&render(&old), &render(&new))
            ),
        ))
    }

    /// `admitServiceAccount`: a node asks tokens only bound to a pod of its own, for an audience
    /// the pod mounts or one it is authorized to ask for.
    async fn admit_token_request(
        &self,
        node: &str,
        attrs: &Attributes<'_>,
        obj: &Value,
    ) -> Result<(), Status> {
        if attrs.operation != Operation::Create || attrs.subresource != "token" {
            return Ok(());
        }
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let bound = spec.get("boundObjectRef").filter(|r| r.is_object());
        let text = |f: &str| {
            bound
                .and_then(|r| r.get(f))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        if bound.is_none()
            || text("apiVersion") != "v1"
            || text("kind") != "Pod"
            || text("name").is_empty()
        {
            return Err(forbidden(
                attrs,
                "node requested token not bound to a pod".into(),
            ));
        }
        if text("uid").is_empty() {
            return Err(forbidden(
                attrs,
                "node requested token with a pod binding without a uid".into(),
            ));
        }
        let pod = match self.get("pods", attrs.namespace, text("name")).await {
            Ok(p) => p,
            Err(s) if s.code == 404 => return Err(s),
            Err(s) => return Err(forbidden(attrs, s.message)),
        };
        if text("uid") != pod.uid() {
            return Err(forbidden(
                attrs,
                format!(
                    "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                    text("uid")
                ),
            ));
        }
        if node_name_of(Some(&pod)) != node {
            return Err(forbidden(
                attrs,
                "node requested token bound to a pod scheduled on a different node".into(),
            ));
        }
        // ServiceAccountNodeAudienceRestriction (on by default since v1.33).
        let audiences = crate::strategies::fields::strs_at(spec, "audiences");
        let audience = match audiences.as_slice() {
            [] => "",
            [one] => *one,
            _ => {
                return Err(forbidden(
                    attrs,
                    "node may only request 0 or 1 audiences".into(),
                ));
            }
        };
        match self.pod_references_audience(&pod, audience).await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => {
                return Err(forbidden(
                    attrs,
                    format!("error validating audience {audience:?}: {e}"),
                ));
            }
        }
        let request = RequestInfo {
            is_resource_request: true,
            verb: "request-serviceaccounts-token-audience".into(),
            api_version: "v1".into(),
            namespace: attrs.namespace.to_string(),
            resource: audience.to_string(),
            name: attrs.name.to_string(),
            ..RequestInfo::default()
        };
        if self
            .authorizer
            .authorize(attrs.user, &request)
            .await
            .is_allowed()
        {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            format!(
                "audience {audience:?} not found in pod spec volume, {} is not authorized to request tokens for this audience",
                attrs.user.name
            ),
        ))
    }
}

impl NodeRestriction {
    /// `podReferencesAudience`: whether a volume of the pod asks tokens for `audience`, by a
    /// projected service-account token or through the CSI driver behind it (pod → CSI volume,
    /// pod → claim → volume, pod → ephemeral claim → volume, in-tree volumes by the driver they
    /// migrate to) whose `tokenRequests` name it. Lookups that fail are the error when no
    /// volume matches, joined as Go's aggregate joins them.
    async fn pod_references_audience(&self, pod: &Value, audience: &str) -> Result<bool, String> {
        let mut errors = Vec::new();
        let volumes = pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for volume in volumes {
            let mounts = volume
                .pointer("/projected/sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.get("serviceAccountToken"))
                .any(|t| t.get("audience").and_then(Value::as_str).unwrap_or("") == audience);
            if mounts {
                return Ok(true);
            }
            let text = |path: &str| volume.pointer(path).and_then(Value::as_str).unwrap_or("");
            let driver = if volume.pointer("/ephemeral/volumeClaimTemplate").is_some() {
                // The claim an ephemeral volume makes is named `<pod>-<volume>`.
                let claim = format!("{}-{}", pod.name(), text("/name"));
                self.csi_driver_of_claim(pod.namespace(), &claim).await
            } else if volume.get("persistentVolumeClaim").is_some() {
                self.csi_driver_of_claim(pod.namespace(), text("/persistentVolumeClaim/claimName"))
                    .await
            } else if volume.get("csi").is_some() {
                Ok(text("/csi/driver").to_string())
            } else {
                Ok(migrated_driver(volume).unwrap_or_default().to_string())
            };
            let driver = match driver {
                Ok(d) => d,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            if driver.is_empty() {
                continue;
            }
            match self.csi_driver_has_audience(&driver, audience).await {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.as_slice() {
            [] => Ok(false),
            [one] => Err(one.clone()),
            many => Err(format!("[{}]", many.join(", "))),
        }
    }

    /// `getCSIFromPVC`: the CSI driver of the volume a claim is bound to (empty when none).
    async fn csi_driver_of_claim(&self, namespace: &str, claim: &str) -> Result<String, String> {
        let claim = self
            .get("persistentvolumeclaims", namespace, claim)
            .await
            .map_err(|s| lister_error(s, "persistentvolumeclaim", claim))?;
        let volume_name = claim
            .pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let volume = self
            .get("persistentvolumes", "", volume_name)
            .await
            .map_err(|s| lister_error(s, "persistentvolume", volume_name))?;
        let spec = volume.get("spec").unwrap_or(&Value::Null);
        if let Some(driver) = spec.pointer("/csi/driver").and_then(Value::as_str) {
            return Ok(driver.to_string());
        }
        Ok(migrated_driver(spec).unwrap_or_default().to_string())
    }

    /// `csiDriverHasAudience`: whether the CSIDriver asks tokens for `audience`.
    async fn csi_driver_has_audience(&self, driver: &str, audience: &str) -> Result<bool, String> {
        let object = self
            .get_in("storage.k8s.io", "v1", "csidrivers", "", driver)
            .await
            .map_err(|s| lister_error(s, "csidriver", driver))?;
        Ok(object
            .pointer("/spec/tokenRequests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|t| t.get("audience").and_then(Value::as_str).unwrap_or("") == audience))
    }
}

/// An informer lister's error: its not-found message names the resource in the singular.
fn lister_error(status: Status, singular: &str, name: &str) -> String {
    if status.code == 404 {
        format!("{singular} {name:?} not found")
    } else {
        status.message
    }
}

/// The CSI driver an in-tree volume source (of a pod's volume or a PersistentVolume's spec)
/// migrates to, as csi-translation-lib names them.
fn migrated_driver(source: &Value) -> Option<&'static str> {
    const IN_TREE: &[(&str, &str)] = &[
        ("gcePersistentDisk", "pd.csi.storage.gke.io"),
        ("awsElasticBlockStore", "ebs.csi.aws.com"),
        ("cinder", "cinder.csi.openstack.org"),
        ("azureDisk", "disk.csi.azure.com"),
        ("azureFile", "file.csi.azure.com"),
        ("vsphereVolume", "csi.vsphere.vmware.com"),
        ("portworxVolume", "pxd.portworx.com"),
    ];
    IN_TREE
        .iter()
        .find(|(field, _)| source.get(*field).is_some_and(|v| !v.is_null()))
        .map(|(_, driver)| *driver)
}

/// Upstream's `HasAPIObjectReference`: what other API object a (mirror) pod names, if any.
fn api_object_reference(pod: &Value) -> Option<&'static str> {
    let spec = pod.get("spec")?;
    if spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
    {
        return Some("serviceaccounts");
    }
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten();
    let mut secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let mut configmaps = false;
    for c in containers {
        for env in c.get("env").and_then(Value::as_array).into_iter().flatten() {
            secrets |= env.pointer("/valueFrom/secretKeyRef").is_some();
            configmaps |= env.pointer("/valueFrom/configMapKeyRef").is_some();
        }
        for from in c
            .get("envFrom")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            secrets |= from.get("secretRef").is_some();
            configmaps |= from.get("configMapRef").is_some();
        }
    }
    let volumes: Vec<&Value> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    // Volume sources whose secret references upstream's VisitPodSecretNames follows.
    for v in &volumes {
        secrets |= v.get("secret").is_some()
            || v.get("azureFile").is_some()
            || [
                "cephfs",
                "cinder",
                "flexVolume",
                "iscsi",
                "rbd",
                "scaleIO",
                "storageos",
            ]
            .iter()
            .any(|k| v.get(*k).and_then(|s| s.get("secretRef")).is_some())
            || v.pointer("/csi/nodePublishSecretRef").is_some()
            || v.pointer("/projected/sources")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|s| s.get("secret").is_some()));
        configmaps |= v.get("configMap").is_some()
            || v.pointer("/projected/sources")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|s| s.get("configMap").is_some()));
    }
    if secrets {
        return Some("secrets");
    }
    if configmaps {
        return Some("configmaps");
    }
    if spec
        .get("resourceClaims")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        return Some("resourceclaims");
    }
    for v in volumes {
        let has = |k: &str| v.get(k).is_some_and(|s| !s.is_null());
        if has("configMap") {
            return Some("configmaps (via configmap volumes)");
        }
        if has("secret") {
            return Some("secrets (via secret volumes)");
        }
        if has("csi") {
            return Some("csidrivers (via CSI volumes)");
        }
        if has("glusterfs") {
            return Some("endpoints (via glusterFS volumes)");
        }
        if has("persistentVolumeClaim") {
            return Some("persistentvolumeclaims");
        }
        if has("ephemeral") {
            return Some("persistentvolumeclaims (via ephemeral volumes)");
        }
        if has("azureFile") {
            return Some("secrets (via azureFile volumes)");
        }
        for source in v
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let has = |k: &str| source.get(k).is_some_and(|s| !s.is_null());
            if has("configMap") {
                return Some("configmaps (via projected volumes)");
            }
            if has("secret") {
                return Some("secrets (via projected volumes)");
            }
            if has("serviceAccountToken") {
                return Some("serviceaccounts (via projected volumes)");
            }
            if has("clusterTrustBundle") {
                return Some("clustertrustbundles");
            }
            if has("podCertificate") {
                return Some("podcertificates");
            }
        }
    }
    None
}

/// A name check shared by leases and CSINodes: on create the object's name, else the request's.
fn own_name(attrs: &Attributes<'_>, obj: &Value) -> String {
    if attrs.operation == Operation::Create {
        obj.name().to_string()
    } else {
        attrs.name.to_string()
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
        let resource = (
            attrs.resource.group.as_str(),
            attrs.resource.resource.as_str(),
        );
        let handled = matches!(
            resource,
            (
                "",
                "nodes" | "pods" | "persistentvolumeclaims" | "serviceaccounts"
            ) | ("coordination.k8s.io", "leases")
                | ("storage.k8s.io", "csinodes")
                | ("resource.k8s.io", "resourceslices")
                | ("certificates.k8s.io", "certificatesigningrequests")
        );
        if !handled {
            return Ok(());
        }
        if node.is_empty() {
            return Err(forbidden(
                attrs,
                format!("could not determine node from user {:?}", attrs.user.name),
            ));
        }
        match resource {
            (_, "nodes") => self.admit_node(node, attrs, obj),
            (_, "pods") => self.admit_pod(node, attrs, obj).await,
            (_, "persistentvolumeclaims") => match attrs.subresource {
                "status" => self.admit_pvc_status(node, attrs, obj),
                _ => Err(forbidden(attrs, "may only update PVC status".into())),
            },
            (_, "serviceaccounts") => self.admit_token_request(node, attrs, obj).await,
            (_, "leases") => {
                if attrs.namespace != NODE_LEASE_NAMESPACE {
                    return Err(forbidden(
                        attrs,
                        format!(
                            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
                        ),
                    ));
                }
                if own_name(attrs, obj) != node {
                    return Err(forbidden(
                        attrs,
                        "can only access node lease with the same name as the requesting node"
                            .into(),
                    ));
                }
                Ok(())
            }
            (_, "csinodes") => {
                if own_name(attrs, obj) != node {
                    return Err(forbidden(
                        attrs,
                        "can only access CSINode with the same name as the requesting node".into(),
                    ));
                }
                Ok(())
            }
            (_, "resourceslices") => {
                let slice_node = |v: Option<&Value>| {
                    v.and_then(|v| v.pointer("/spec/nodeName"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                match attrs.operation {
                    Operation::Create if slice_node(Some(obj)).as_deref() != Some(node) => {
                        Err(forbidden(
                            attrs,
                            "can only create ResourceSlice with the same NodeName as the requesting node"
                                .into(),
                        ))
                    }
                    Operation::Delete if slice_node(attrs.old_object).as_deref() != Some(node) => {
                        Err(forbidden(
                            attrs,
                            "can only delete ResourceSlice with the same NodeName as the requesting node"
                                .into(),
                        ))
                    }
                    _ => Ok(()),
                }
            }
            _ => {
                // CertificateSigningRequests: a node asks kubelet certificates for itself only.
                if attrs.operation != Operation::Create {
                    return Ok(());
                }
                let signer = obj
                    .pointer("/spec/signerName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !matches!(
                    signer,
                    "kubernetes.io/kubelet-serving" | "kubernetes.io/kube-apiserver-client-kubelet"
                ) {
                    return Ok(());
                }
                let request = obj
                    .pointer("/spec/request")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let cn = crate::strategies::certificates::csr_common_name(request)
                    .map_err(|e| forbidden(attrs, format!("unable to parse csr: {e}")))?;
                if cn != format!("system:node:{node}") {
                    return Err(forbidden(
                        attrs,
                        format!("can only create a node CSR with CN=system:node:{node}"),
                    ));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_pods_may_name_no_other_api_object() {
        let pod = |spec: Value| serde_json::json!({"spec": spec});
        let c = |extra: Value| {
            let mut c = serde_json::json!({"name": "c", "image": "i"});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            serde_json::json!([c])
        };
        assert_eq!(
            api_object_reference(&pod(
                serde_json::json!({"containers": c(serde_json::json!({}))})
            )),
            None
        );
        assert_eq!(
            api_object_reference(&pod(serde_json::json!({"serviceAccountName": "x"}))),
            Some("serviceaccounts")
        );
        assert_eq!(
            api_object_reference(&pod(serde_json::json!({"containers": c(serde_json::json!(
                {"envFrom": [{"configMapRef": {"name": "m"}}]}))}))),
            Some("configmaps")
        );
        assert_eq!(
            api_object_reference(&pod(
                serde_json::json!({"volumes": [{"name": "v", "hostPath": {"path": "/"}},
                {"name": "w", "persistentVolumeClaim": {"claimName": "c"}}]})
            )),
            Some("persistentvolumeclaims")
        );
        assert_eq!(
            api_object_reference(&pod(
                serde_json::json!({"volumes": [{"name": "v", "projected": {"sources":
                [{"downwardAPI": {}}, {"serviceAccountToken": {"path": "t"}}]}}]})
            )),
            Some("serviceaccounts (via projected volumes)")
        );
    }

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
