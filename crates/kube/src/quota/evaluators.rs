//! Quota evaluators (upstream: pkg/quota/v1/evaluator/core and quota/v1/generic): for a kind,
//! which requests it charges, which quota resource names it tracks, which quota scopes an
//! object falls in, what an object uses, and what a Pod must state to be admitted by a quota on
//! compute resources. Pods, Services, PersistentVolumeClaims and DRA ResourceClaims (the last in
//! `resource_claims`) have their own; every other resource is an object count
//! (`count/<resource>[.<group>]`, and the legacy names of configmaps, secrets,
//! replicationcontrollers and resourcequotas).

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::quantity::Quantity;
use apiserver::admission::Operation;
use serde_json::Value;

use super::resource_claims::{self, DEVICE_CLASS_PREFIX, ExtendedResources};
use super::{ResourceList, ScopeSelector, count, from_json, zero};

/// Resources quota admission never evaluates (`DefaultIgnoredResources`).
const IGNORED: &[(&str, &str)] = &[
    ("", "bindings"),
    ("", "componentstatuses"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("", "events"),
    ("events.k8s.io", "events"),
];

/// The core object counts that also have a legacy quota name (`legacyObjectCountAliases`).
const LEGACY_ALIASES: &[&str] = &[
    "configmaps",
    "resourcequotas",
    "replicationcontrollers",
    "secrets",
];

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
const POD_RESOURCE_PREFIXES: &[&str] = &["hugepages-", "requests.hugepages-"];
/// What a Pod's containers must all state when a quota limits it (`validationSet`).
const POD_VALIDATION_SET: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];
const SERVICE_RESOURCES: &[&str] = &[
    "count/services",
    "services",
    "services.nodeports",
    "services.loadbalancers",
];
const PVC_RESOURCES: &[&str] = &["persistentvolumeclaims", "requests.storage"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// `ObjectCountQuotaResourceNameFor`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// What evaluates one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluator {
    Pods,
    Services,
    PersistentVolumeClaims,
    /// DRA ResourceClaims (`claimEvaluator`): the claim, its devices by device class, and the
    /// extended resource names the DeviceClasses give those devices.
    ResourceClaims(ExtendedResources),
    /// One for every object, under these names.
    ObjectCount {
        group: String,
        resource: String,
        names: Vec<String>,
    },
}

/// The evaluator of a resource (the registry, with upstream's object count evaluator made on
/// first use for any resource it lacks); None for the ignored ones. `classes` is the registry's
/// DeviceClass mapping.
pub fn for_resource(group: &str, resource: &str, classes: &ExtendedResources) -> Option<Evaluator> {
    if IGNORED.contains(&(group, resource)) {
        return None;
    }
    Some(match (group, resource) {
        ("", "pods") => Evaluator::Pods,
        ("", "services") => Evaluator::Services,
        ("", "persistentvolumeclaims") => Evaluator::PersistentVolumeClaims,
        ("resource.k8s.io", "resourceclaims") => Evaluator::ResourceClaims(classes.clone()),
        _ => {
            let mut names = vec![object_count_name(group, resource)];
            if group.is_empty() && LEGACY_ALIASES.contains(&resource) {
                names.push(resource.to_string());
            }
            Evaluator::ObjectCount {
                group: group.into(),
                resource: resource.into(),
                names,
            }
        }
    })
}

/// The resources whose evaluators track the quota resource `name`, as `(group, resource)`: the
/// controller lists those resources and adds up what they use. A DRA extended resource name is
/// both the Pods' and, when a DeviceClass provides it, the ResourceClaims'.
pub fn tracked_by(name: &str, classes: &ExtendedResources) -> Vec<(String, String)> {
    let core = |r: &str| (String::new(), r.to_string());
    let mut out = Vec::new();
    if matching(&Evaluator::Pods, name) {
        out.push(core("pods"));
    }
    if matching(&Evaluator::Services, name) {
        out.push(core("services"));
    }
    if matching(&Evaluator::PersistentVolumeClaims, name) {
        out.push(core("persistentvolumeclaims"));
    }
    if resource_claims::matches(classes, name) {
        out.push(("resource.k8s.io".into(), "resourceclaims".into()));
    }
    if !out.is_empty() {
        return out;
    }
    if LEGACY_ALIASES.contains(&name) {
        return vec![core(name)];
    }
    let Some(rest) = name.strip_prefix("count/") else {
        return out;
    };
    vec![match rest.split_once('.') {
        Some((resource, group)) => (group.to_string(), resource.to_string()),
        None => (String::new(), rest.to_string()),
    }]
}

/// `helper.IsNativeResource`: unprefixed, or in the kubernetes.io domain.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `isExtendedResourceNameForQuota`.
pub(super) fn is_extended_for_quota(name: &str) -> bool {
    let implicit = name.starts_with(&format!("requests.{DEVICE_CLASS_PREFIX}"));
    (!is_native(name) || implicit) && name.starts_with("requests.")
}

/// `IsDRAExtendedResourceName`: an extended resource a container may request.
fn is_extended_request(name: &str) -> bool {
    (!is_native(name) && !name.starts_with("requests.")) || name.starts_with(DEVICE_CLASS_PREFIX)
}

fn matching(e: &Evaluator, name: &str) -> bool {
    match e {
        Evaluator::Pods => {
            POD_RESOURCES.contains(&name)
                || POD_RESOURCE_PREFIXES.iter().any(|p| name.starts_with(p))
                || is_extended_for_quota(name)
        }
        Evaluator::Services => SERVICE_RESOURCES.contains(&name),
        Evaluator::PersistentVolumeClaims => {
            name == "count/persistentvolumeclaims"
                || PVC_RESOURCES.contains(&name)
                || PVC_RESOURCES
                    .iter()
                    .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        }
        Evaluator::ResourceClaims(classes) => resource_claims::matches(classes, name),
        Evaluator::ObjectCount { names, .. } => names.iter().any(|n| n == name),
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `IsTerminating`: a pod with an active deadline.
fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|d| d >= 0)
}

/// `QuotaV1Pod`: a pod that has ended, or whose grace period after deletion has passed, uses
/// no compute resources.
fn counts_compute(pod: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    if matches!(text(pod, "/status/phase"), "Failed" | "Succeeded") {
        return false;
    }
    let deleted = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    if let (Some(at), Some(grace)) = (deleted, grace) {
        return now <= at.with_timezone(&chrono::Utc) + chrono::Duration::seconds(grace);
    }
    true
}

/// `IsSupportedPodLevelResource`.
fn pod_level_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

fn pod_level(pod: &Value, list: &str) -> ResourceList {
    from_json(pod.pointer(&format!("/spec/resources/{list}")))
        .into_iter()
        .filter(|(k, _)| pod_level_resource(k))
        .collect()
}

/// `PodRequests` / `PodLimits`: the containers' aggregate, pod-level values where set, and
/// the overhead (for limits, only on what is limited).
fn pod_resources(pod: &Value, list: &str) -> ResourceList {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut out: ResourceList = crate::strategies::aggregate_containers(spec, list)
        .into_iter()
        .collect();
    out.extend(pod_level(pod, list));
    for (name, q) in from_json(spec.get("overhead")) {
        match out.get(&name) {
            Some(v) if list == "limits" && v.is_zero() => {}
            Some(v) => {
                let sum = super::go_add(v, &q);
                out.insert(name, sum);
            }
            None if list == "requests" => {
                out.insert(name, q);
            }
            None => {}
        }
    }
    out
}

/// `podComputeUsageHelper`: what requests and limits count as.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert("pods".into(), count(1));
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(name) {
            out.insert(name.into(), q.clone());
            out.insert(format!("requests.{name}"), q.clone());
        }
        if let Some(q) = limits.get(name) {
            out.insert(format!("limits.{name}"), q.clone());
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            out.insert(name.clone(), q.clone());
            out.insert(format!("requests.{name}"), q.clone());
        }
        if is_extended_request(name) {
            out.insert(format!("requests.{name}"), q.clone());
        }
    }
    out
}

fn affinity_terms_cross_namespace(terms: Option<&Value>, weighted: bool) -> bool {
    terms
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| {
            let term = if weighted {
                t.get("podAffinityTerm").unwrap_or(&Value::Null)
            } else {
                t
            };
            term.get("namespaces")
                .and_then(Value::as_array)
                .is_some_and(|n| !n.is_empty())
                || term.get("namespaceSelector").is_some_and(|s| !s.is_null())
        })
}

/// `usesCrossNamespacePodAffinity`.
fn cross_namespace_affinity(pod: &Value) -> bool {
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(a) = pod.pointer(&format!("/spec/affinity/{kind}")) else {
            return false;
        };
        affinity_terms_cross_namespace(
            a.get("requiredDuringSchedulingIgnoredDuringExecution"),
            false,
        ) || affinity_terms_cross_namespace(
            a.get("preferredDuringSchedulingIgnoredDuringExecution"),
            true,
        )
    })
}

/// The VolumeAttributesClasses a claim refers to (`getReferencedVolumeAttributesClassNames`).
fn attribute_classes(pvc: &Value) -> BTreeSet<String> {
    [
        "/spec/volumeAttributesClassName",
        "/status/currentVolumeAttributesClassName",
        "/status/modifyVolumeStatus/targetVolumeAttributesClassName",
    ]
    .iter()
    .map(|p| text(pvc, p))
    .filter(|s| !s.is_empty())
    .map(String::from)
    .collect()
}

/// `GetPersistentVolumeClaimClass`: the beta annotation first, then the field.
fn storage_class(pvc: &Value) -> &str {
    match pvc
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
    {
        Some(c) => c,
        None => text(pvc, "/spec/storageClassName"),
    }
}

/// A quantity rounded up to a whole number (`RoundUp(0)`).
fn round_up(q: Quantity) -> Quantity {
    if q.is_integer() {
        q
    } else {
        Quantity::new(q.value(), 0, q.format)
    }
}

/// `getStorageUsage`: the claim's request, or what was allocated if more.
fn storage_usage(pvc: &Value) -> Option<Quantity> {
    let requested = from_json(pvc.pointer("/spec/resources/requests"))
        .remove("storage")
        .map(round_up)?;
    let allocated = from_json(pvc.pointer("/status/allocatedResources")).remove("storage");
    Some(match allocated {
        Some(a) if a > requested => round_up(a),
        _ => requested,
    })
}

impl Evaluator {
    /// `Handles`: whether a request is charged.
    pub fn handles(
        &self,
        op: Operation,
        subresource: &str,
        obj: &Value,
        old: Option<&Value>,
    ) -> bool {
        match self {
            Evaluator::Pods => match subresource {
                "" => {
                    op == Operation::Create
                        || (op == Operation::Update
                            && old.is_some_and(|o| is_terminating(o) != is_terminating(obj)))
                }
                "resize" => op == Operation::Update,
                _ => false,
            },
            Evaluator::Services => {
                subresource.is_empty() && matches!(op, Operation::Create | Operation::Update)
            }
            Evaluator::PersistentVolumeClaims => match subresource {
                "" => matches!(op, Operation::Create | Operation::Update),
                "status" => old.is_some_and(|old| {
                    let storage = |v: &Value| {
                        from_json(v.pointer("/status/allocatedResources")).remove("storage")
                    };
                    storage(old) != storage(obj) || attribute_classes(old) != attribute_classes(obj)
                }),
                _ => false,
            },
            Evaluator::ResourceClaims(_) => {
                subresource.is_empty() && matches!(op, Operation::Create | Operation::Update)
            }
            Evaluator::ObjectCount { .. } => subresource.is_empty() && op == Operation::Create,
        }
    }

    /// `MatchingResources`: the names of `input` this evaluator tracks, sorted.
    pub fn matching_resources<'a>(
        &self,
        input: impl IntoIterator<Item = &'a String>,
    ) -> Vec<String> {
        let set: BTreeSet<String> = input
            .into_iter()
            .filter(|n| matching(self, n))
            .cloned()
            .collect();
        set.into_iter().collect()
    }

    /// Whether an object falls in a scope (`podMatchesScopeFunc`, `pvcMatchesScopeFunc`; other
    /// kinds are in none).
    pub fn matches_scope(&self, sel: &ScopeSelector, obj: &Value) -> Result<bool, String> {
        match self {
            Evaluator::Pods => Ok(match sel.scope.as_str() {
                "Terminating" => is_terminating(obj),
                "NotTerminating" => !is_terminating(obj),
                "BestEffort" => best_effort(obj),
                "NotBestEffort" => !best_effort(obj),
                "PriorityClass" => {
                    let class = text(obj, "/spec/priorityClassName");
                    if sel.operator == "Exists" {
                        !class.is_empty()
                    } else {
                        sel.matches_value((!class.is_empty()).then_some(class))?
                    }
                }
                "CrossNamespacePodAffinity" => cross_namespace_affinity(obj),
                _ => false,
            }),
            Evaluator::PersistentVolumeClaims if sel.scope == "VolumeAttributesClass" => {
                let classes = attribute_classes(obj);
                if sel.operator == "Exists" {
                    return Ok(!classes.is_empty());
                }
                if classes.is_empty() {
                    return sel.matches_value(None);
                }
                for c in &classes {
                    if sel.matches_value(Some(c))? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// `generic.Matches`: the quota limits something this evaluator tracks, and the object is
    /// in every scope of the quota.
    pub fn matches(&self, quota: &Value, obj: &Value) -> Result<bool, String> {
        let hard = from_json(quota.pointer("/status/hard"));
        if self.matching_resources(hard.keys()).is_empty() {
            return Ok(false);
        }
        for sel in super::scope_selectors(quota) {
            if !self.matches_scope(&sel, obj)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `Constraints`: a Pod limited on compute resources must state them for every container.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        if *self != Evaluator::Pods {
            return Ok(());
        }
        let pod_level_set = ["requests", "limits"]
            .iter()
            .any(|l| !pod_level(obj, l).is_empty());
        if pod_level_set {
            return Ok(());
        }
        let required: BTreeSet<&str> = required
            .iter()
            .map(String::as_str)
            .filter(|r| POD_VALIDATION_SET.contains(r))
            .collect();
        let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for list in ["containers", "initContainers"] {
            for c in obj
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let usage = compute_usage(
                    &from_json(c.pointer("/resources/requests")),
                    &from_json(c.pointer("/resources/limits")),
                );
                for r in &required {
                    if !usage.contains_key(*r) {
                        missing
                            .entry(r)
                            .or_default()
                            .insert(text(c, "/name").to_string());
                    }
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> = missing
            .iter()
            .map(|(r, names)| {
                format!(
                    "{r} for: {}",
                    names.iter().cloned().collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        Err(format!("must specify {}", parts.join("; ")))
    }

    /// `Usage`: what the object uses. `owner` is what the object's owner already counts, taken
    /// off where upstream takes it off: the owning Pod's usage for a DRA extended resource
    /// claim (`resource_claims::verified_pod_usage`); ignored for other kinds.
    pub fn usage(
        &self,
        obj: &Value,
        now: chrono::DateTime<chrono::Utc>,
        owner: Option<&ResourceList>,
    ) -> ResourceList {
        let mut out = ResourceList::new();
        match self {
            Evaluator::Pods => {
                out.insert("count/pods".into(), count(1));
                if counts_compute(obj, now) {
                    let usage = compute_usage(
                        &pod_resources(obj, "requests"),
                        &pod_resources(obj, "limits"),
                    );
                    out = super::add(&out, &usage);
                }
            }
            Evaluator::Services => {
                let ports = obj
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                out.insert("count/services".into(), count(1));
                out.insert("services".into(), count(1));
                out.insert("services.loadbalancers".into(), zero());
                out.insert("services.nodeports".into(), zero());
                match text(obj, "/spec/type") {
                    "NodePort" => {
                        out.insert("services.nodeports".into(), count(ports.len() as i64));
                    }
                    "LoadBalancer" => {
                        let allocate = obj
                            .pointer("/spec/allocateLoadBalancerNodePorts")
                            .and_then(Value::as_bool);
                        let node_ports = if allocate == Some(false) {
                            ports
                                .iter()
                                .filter(|p| {
                                    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0
                                })
                                .count()
                        } else {
                            ports.len()
                        };
                        out.insert("services.nodeports".into(), count(node_ports as i64));
                        out.insert("services.loadbalancers".into(), count(1));
                    }
                    _ => {}
                }
            }
            Evaluator::PersistentVolumeClaims => {
                out.insert("persistentvolumeclaims".into(), count(1));
                out.insert("count/persistentvolumeclaims".into(), count(1));
                let class = storage_class(obj);
                if !class.is_empty() {
                    out.insert(
                        format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
                        count(1),
                    );
                }
                if let Some(storage) = storage_usage(obj) {
                    if !class.is_empty() {
                        out.insert(
                            format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                            storage.clone(),
                        );
                    }
                    out.insert("requests.storage".into(), storage);
                }
            }
            Evaluator::ResourceClaims(classes) => {
                out = resource_claims::usage(obj, classes, owner);
            }
            Evaluator::ObjectCount { names, .. } => {
                for n in names {
                    out.insert(n.clone(), count(1));
                }
            }
        }
        out
    }
}

/// `isBestEffort`: the QoS class the pod would get.
fn best_effort(pod: &Value) -> bool {
    crate::strategies::compute_qos(pod.get("spec").unwrap_or(&Value::Null)) == "BestEffort"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }

    fn pretty(e: &Evaluator, obj: &Value) -> String {
        super::super::pretty(&e.usage(obj, now(), None))
    }

    fn for_resource(group: &str, resource: &str) -> Option<Evaluator> {
        super::for_resource(group, resource, &ExtendedResources::default())
    }

    fn tracked_by(name: &str) -> Vec<(String, String)> {
        super::tracked_by(name, &ExtendedResources::default())
    }

    #[test]
    fn resource_claims_count_devices_by_class() {
        let claims = for_resource("resource.k8s.io", "resourceclaims").unwrap();
        let claim = json!({"spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "c", "firstAvailable": [
                {"name": "big", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 4},
                {"name": "small", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 1},
                {"name": "other", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]}}});
        assert_eq!(
            pretty(&claims, &claim),
            "count/resourceclaims.resource.k8s.io=1,fpga.deviceclass.resource.k8s.io/devices=4,gpu.deviceclass.resource.k8s.io/devices=35,\
             requests.deviceclass.resource.kubernetes.io/fpga=4,requests.deviceclass.resource.kubernetes.io/gpu=35"
        );
        assert_eq!(
            tracked_by("gpu.deviceclass.resource.k8s.io/devices"),
            [("resource.k8s.io".into(), "resourceclaims".into())]
        );
        let names = [
            "gpu.deviceclass.resource.k8s.io/devices".to_string(),
            "count/resourceclaims.resource.k8s.io".to_string(),
            "requests.cpu".to_string(),
        ];
        assert_eq!(
            claims.matching_resources(&names),
            [
                "count/resourceclaims.resource.k8s.io",
                "gpu.deviceclass.resource.k8s.io/devices"
            ]
        );
        assert!(claims.handles(Operation::Update, "", &claim, Some(&claim)));
        assert!(!claims.handles(Operation::Update, "status", &claim, Some(&claim)));
    }

    #[test]
    fn registry_names_object_counts_and_ignores_reviews() {
        assert_eq!(for_resource("", "events"), None);
        assert_eq!(
            for_resource("authorization.k8s.io", "subjectaccessreviews"),
            None
        );
        let cm = for_resource("", "configmaps").unwrap();
        assert_eq!(pretty(&cm, &json!({})), "configmaps=1,count/configmaps=1");
        let deploy = for_resource("apps", "deployments").unwrap();
        assert_eq!(pretty(&deploy, &json!({})), "count/deployments.apps=1");
        assert_eq!(
            tracked_by("count/widgets.example.com"),
            [("example.com".into(), "widgets".into())]
        );
        assert_eq!(tracked_by("requests.cpu"), [(String::new(), "pods".into())]);
        assert_eq!(
            tracked_by("gold.storageclass.storage.k8s.io/requests.storage"),
            [(String::new(), "persistentvolumeclaims".into())]
        );
        assert!(tracked_by("secrets.example.com/other").is_empty());
        assert!(cm.handles(Operation::Create, "", &json!({}), None));
        assert!(!cm.handles(Operation::Update, "", &json!({}), Some(&json!({}))));
    }

    #[test]
    fn pod_usage_counts_requests_limits_and_init_containers() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                            "limits": {"cpu": "200m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "300m"}}}],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "10m"}}});
        assert_eq!(
            pretty(&Evaluator::Pods, &pod),
            "count/pods=1,cpu=1010m,limits.cpu=210m,memory=64Mi,pods=1,requests.cpu=1010m,requests.memory=64Mi"
        );
        let done = json!({"spec": pod["spec"].clone(), "status": {"phase": "Succeeded"}});
        assert_eq!(pretty(&Evaluator::Pods, &done), "count/pods=1");
    }

    #[test]
    fn pod_constraints_name_the_containers() {
        let pod = json!({"spec": {"containers": [
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
            {"name": "a"}]}});
        let required = vec![
            "limits.cpu".to_string(),
            "requests.cpu".to_string(),
            "pods".into(),
        ];
        assert_eq!(
            Evaluator::Pods.constraints(&required, &pod),
            Err("must specify limits.cpu for: a,b; requests.cpu for: a".into())
        );
    }

    #[test]
    fn pod_scopes() {
        let best = json!({"spec": {"containers": [{"name": "c"}], "priorityClassName": "high"}});
        let sel = |scope: &str, op: &str, values: &[&str]| ScopeSelector {
            scope: scope.into(),
            operator: op.into(),
            values: values.iter().map(|s| s.to_string()).collect(),
        };
        let e = Evaluator::Pods;
        assert_eq!(
            e.matches_scope(&sel("BestEffort", "Exists", &[]), &best),
            Ok(true)
        );
        assert_eq!(
            e.matches_scope(&sel("NotTerminating", "Exists", &[]), &best),
            Ok(true)
        );
        assert_eq!(
            e.matches_scope(&sel("PriorityClass", "In", &["high"]), &best),
            Ok(true)
        );
        assert_eq!(
            e.matches_scope(&sel("PriorityClass", "NotIn", &["high"]), &best),
            Ok(false)
        );
        let quota = json!({"status": {"hard": {"pods": "1"}}, "spec": {"scopes": ["Terminating"]}});
        assert_eq!(e.matches(&quota, &best), Ok(false));
    }

    #[test]
    fn services_and_claims() {
        let lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(
            pretty(&Evaluator::Services, &lb),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
        );
        let pvc = json!({"spec": {"storageClassName": "gold",
                                  "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            pretty(&Evaluator::PersistentVolumeClaims, &pvc),
            "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,requests.storage=1Gi"
        );
    }
}
