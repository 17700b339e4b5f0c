//! Quota of DRA ResourceClaims (upstream: pkg/quota/v1/evaluator/core/resource_claims.go, and
//! the DeviceClass mapping of dynamic-resource-allocation's `extendedresourcecache`).
//!
//! A claim uses one `count/resourceclaims.resource.k8s.io` and, per device class, the devices
//! its requests may be given (`<class>.deviceclass.resource.k8s.io/devices`, the worst case of a
//! `firstAvailable` list). With `DRAExtendedResource` (beta, on in v1.36) the same devices also
//! count under the extended resource names a Pod would have requested them by:
//! `requests.deviceclass.resource.kubernetes.io/<class>` and, when the class names one,
//! `requests.<spec.extendedResourceName>`. Those names need the DeviceClasses, which
//! [`ExtendedResources`] keeps from a reflector. The claims the scheduler makes for a Pod that
//! asked for such a resource (annotated `resource.kubernetes.io/extended-resource-claim`) would
//! then count what the Pod already counts, so the owning Pod's usage is taken off
//! ([`verified_pod_usage`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::RegistryStore;
use apiserver::registry::reflector::{self, Delta, Listed, Synced};
use chrono::{DateTime, Utc};
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use super::evaluators::Evaluator;
use super::{ResourceList, count};

/// `corev1.ResourceClaimsPerClass`: a claim's devices by device class.
pub const CLAIMS_PER_CLASS: &str = ".deviceclass.resource.k8s.io/devices";
/// `ObjectCountQuotaResourceNameFor` of resourceclaims.
pub const CLAIM_COUNT: &str = "count/resourceclaims.resource.k8s.io";
/// `resourceapi.ResourceDeviceClassPrefix`: the implicit extended resource name of every class.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// `corev1.ResourceImplicitExtendedClaimsPerClass`.
const IMPLICIT_PER_CLASS: &str = "requests.deviceclass.resource.kubernetes.io/";
/// `resourceapi.ExtendedResourceClaimAnnotation`: a claim the scheduler made for a Pod's
/// extended resources.
const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";
/// `resourceapi.AllocationResultsMaxSize`: what a request for all devices of a class counts.
const ALLOCATION_RESULTS_MAX_SIZE: i64 = 32;

/// A DeviceClass as the mapping needs it.
#[derive(Clone, Debug)]
struct Class {
    name: String,
    created: Option<DateTime<Utc>>,
    extended_resource_name: Option<String>,
}

impl Class {
    fn of(v: &Value) -> Class {
        Class {
            name: v.name().to_string(),
            created: v
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc)),
            extended_resource_name: v
                .pointer("/spec/extendedResourceName")
                .and_then(Value::as_str)
                .map(String::from),
        }
    }
}

#[derive(Default)]
struct Maps {
    /// Extended resource name (explicit, or the implicit `deviceclass.resource.kubernetes.io/
    /// <class>`) to the class that provides it.
    resource_to_class: HashMap<String, Class>,
    /// Class name to its explicit extended resource name.
    class_to_resource: HashMap<String, String>,
}

impl Maps {
    /// `updateResourceName2class` and `updateClass2ResourceName`.
    fn upsert(&mut self, new: Class, old: Option<&Class>) {
        self.set_resource_names(&new, old);
        match &new.extended_resource_name {
            Some(r) => {
                self.class_to_resource.insert(new.name.clone(), r.clone());
            }
            None => {
                self.class_to_resource.remove(&new.name);
            }
        }
    }

    fn set_resource_names(&mut self, new: &Class, old: Option<&Class>) {
        // Two classes may name the same extended resource while users move from one to the
        // other. The newer class wins, the lower name between equals; and a class that loses
        // leaves the mapping as it was, its own implicit name included, as upstream returns
        // early there.
        if let Some(current) = new
            .extended_resource_name
            .as_ref()
            .and_then(|r| self.resource_to_class.get(r))
        {
            match new.created.cmp(&current.created) {
                std::cmp::Ordering::Less => return,
                std::cmp::Ordering::Equal if new.name >= current.name => return,
                _ => {}
            }
        }
        if let Some(old) = old {
            self.resource_to_class
                .remove(&format!("{DEVICE_CLASS_PREFIX}{}", old.name));
            if let Some(r) = &old.extended_resource_name {
                self.resource_to_class.remove(r);
            }
        }
        if let Some(r) = &new.extended_resource_name {
            self.resource_to_class.insert(r.clone(), new.clone());
        }
        self.resource_to_class
            .insert(format!("{DEVICE_CLASS_PREFIX}{}", new.name), new.clone());
    }

    /// `removeResourceName2class` and `removeClass2ResourceName`. The explicit name goes even
    /// when another class holds it, as upstream's cache drops it.
    fn remove(&mut self, class: &Class) {
        self.resource_to_class
            .remove(&format!("{DEVICE_CLASS_PREFIX}{}", class.name));
        if let Some(r) = &class.extended_resource_name {
            self.resource_to_class.remove(r);
        }
        self.class_to_resource.remove(&class.name);
    }
}

/// The extended resource names of the DeviceClasses (upstream's `ExtendedResourceCache`), kept
/// by a reflector. Cheap to clone; the clones share the mapping.
#[derive(Clone, Default)]
pub struct ExtendedResources {
    inner: Arc<Shared>,
}

struct Shared {
    maps: RwLock<Maps>,
    /// The classes as last seen, to give `upsert` the old class as an informer's update does.
    seen: RwLock<HashMap<String, Class>>,
    synced: Synced,
    /// The one source of `synced`: the DeviceClasses' reflector.
    listed: Listed,
    started: AtomicBool,
}

impl Default for Shared {
    fn default() -> Shared {
        let (synced, listed) = Synced::single();
        Shared {
            maps: RwLock::default(),
            seen: RwLock::default(),
            synced,
            listed,
            started: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for ExtendedResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtendedResources").finish_non_exhaustive()
    }
}

/// One mapping is one registry's: evaluators holding clones of it are the same evaluator.
impl PartialEq for ExtendedResources {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for ExtendedResources {}

impl ExtendedResources {
    /// Starts keeping the DeviceClasses of `api`, once; without `resource.k8s.io/v1`
    /// deviceclasses the mapping stays empty and counts as synced.
    pub fn start(&self, api: &ApiResources) {
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(store) = api.get("resource.k8s.io", "v1", "deviceclasses").cloned() else {
            self.inner.listed.mark();
            return;
        };
        let this = self.clone();
        tokio::spawn(reflector::run(store, move |delta| this.apply(delta)));
    }

    /// Whether the DeviceClasses have been listed once.
    pub fn has_synced(&self) -> bool {
        self.inner.synced.has_synced()
    }

    fn apply(&self, delta: Delta) {
        self.apply_delta(delta);
        self.inner.listed.mark();
    }

    fn apply_delta(&self, delta: Delta) {
        let mut maps = self.inner.maps.write().unwrap_or_else(|e| e.into_inner());
        let mut seen = self.inner.seen.write().unwrap_or_else(|e| e.into_inner());
        match delta {
            Delta::Replace(items) => {
                // The winner of a clash does not depend on the order classes are added in.
                *maps = Maps::default();
                seen.clear();
                for v in &items {
                    let class = Class::of(v);
                    maps.upsert(class.clone(), None);
                    seen.insert(class.name.clone(), class);
                }
            }
            Delta::Upsert(v) => {
                let class = Class::of(&v);
                let old = seen.insert(class.name.clone(), class.clone());
                maps.upsert(class, old.as_ref());
            }
            Delta::Deleted(v) => {
                let class = seen.remove(v.name()).unwrap_or_else(|| Class::of(&v));
                maps.remove(&class);
            }
        }
    }

    /// `GetDeviceClass(name) != nil`: some class provides the extended resource `name`.
    fn provides(&self, name: &str) -> bool {
        let maps = self.inner.maps.read().unwrap_or_else(|e| e.into_inner());
        maps.resource_to_class.contains_key(name)
    }

    /// `GetExtendedResource`: the explicit extended resource name of class `class`.
    fn extended_resource(&self, class: &str) -> Option<String> {
        let maps = self.inner.maps.read().unwrap_or_else(|e| e.into_inner());
        maps.class_to_resource.get(class).cloned()
    }

    #[cfg(test)]
    pub(crate) fn apply_for_test(&self, delta: Delta) {
        self.apply(delta)
    }
}

/// The claims evaluator's `MatchingResources` for one quota resource name.
pub fn matches(classes: &ExtendedResources, name: &str) -> bool {
    if name == CLAIM_COUNT || name.ends_with(CLAIMS_PER_CLASS) {
        return true;
    }
    // Upstream tests the implicit name of a class by its explicit one; a class without one
    // still matches below, through its implicit mapping.
    if let Some(class) = name.strip_prefix(IMPLICIT_PER_CLASS)
        && classes.extended_resource(class).is_some()
    {
        return true;
    }
    super::evaluators::is_extended_for_quota(name)
        && name
            .strip_prefix("requests.")
            .is_some_and(|r| classes.provides(r))
}

/// How many devices one request (or subrequest) of a claim asks for.
fn requested_devices(request: &Value) -> i64 {
    match request.get("allocationMode").and_then(Value::as_str) {
        Some("ExactCount") => request.get("count").and_then(Value::as_i64).unwrap_or(0),
        Some("All") => ALLOCATION_RESULTS_MAX_SIZE,
        // A mode this version does not know counts nothing, as after a downgrade upstream.
        _ => 0,
    }
}

/// The claims evaluator's `Usage`: the claim, its devices by class, and with a mapping the
/// extended resource names of those devices less what `pod_usage` (the owning Pod's, from
/// [`verified_pod_usage`]) already counts.
pub fn usage(
    claim: &Value,
    classes: &ExtendedResources,
    pod_usage: Option<&ResourceList>,
) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(CLAIM_COUNT.into(), count(1));
    let class = |r: &Value| {
        format!(
            "{}{CLAIMS_PER_CLASS}",
            r.get("deviceClassName")
                .and_then(Value::as_str)
                .unwrap_or("")
        )
    };
    let mut devices: BTreeMap<String, i64> = BTreeMap::new();
    for request in claim
        .pointer("/spec/devices/requests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let alternatives = request
            .get("firstAvailable")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty());
        if let Some(alternatives) = alternatives {
            // The most any alternative could take, per class.
            let mut most: BTreeMap<String, i64> = BTreeMap::new();
            for sub in alternatives {
                let m = most.entry(class(sub)).or_insert(0);
                *m = (*m).max(requested_devices(sub));
            }
            for (name, n) in most {
                *devices.entry(name).or_insert(0) += n;
            }
        } else if let Some(exactly) = request.get("exactly").filter(|e| e.is_object()) {
            *devices.entry(class(exactly)).or_insert(0) += requested_devices(exactly);
        }
    }
    out.extend(devices.into_iter().map(|(name, n)| (name, count(n))));
    add_extended_resources(&mut out, classes, pod_usage);
    out
}

/// `addExtendedResourceQuota`.
fn add_extended_resources(
    out: &mut ResourceList,
    classes: &ExtendedResources,
    pod_usage: Option<&ResourceList>,
) {
    let mut extended = ResourceList::new();
    for (name, q) in out.iter() {
        let Some(class) = name
            .strip_suffix(CLAIMS_PER_CLASS)
            .filter(|c| !c.is_empty())
        else {
            continue;
        };
        extended.insert(format!("{IMPLICIT_PER_CLASS}{class}"), q.clone());
        if let Some(resource) = classes.extended_resource(class) {
            extended.insert(format!("requests.{resource}"), q.clone());
        }
    }
    for (name, q) in extended {
        let left = match pod_usage.and_then(|p| p.get(&name)) {
            Some(counted) => q.add(&counted.neg()),
            None => q,
        };
        if left.sign() > 0 {
            out.insert(name, left);
        }
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The uid of the Pod that owns an extended resource claim, if `claim` is one.
fn owning_pod(claim: &Value) -> Option<(&str, &str)> {
    if claim
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM))
        .and_then(Value::as_str)
        != Some("true")
    {
        return None;
    }
    let owner = claim.controller_ref()?;
    if str_at(owner, "/kind") != "Pod" || str_at(owner, "/apiVersion") != "v1" {
        return None;
    }
    Some((str_at(owner, "/name"), str_at(owner, "/uid")))
}

fn created(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(str_at(v, "/metadata/creationTimestamp"))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `getVerifiedPodUsage`: the usage of the Pod an extended resource claim was made for, when
/// that Pod exists with the claim's owner uid and the claim is the one it uses — the one its
/// status names, or without that the earliest of its claims (the lower name between equals).
/// Anything else (not such a claim, no such Pod, a lookup failing) is None: nothing is taken
/// off.
pub async fn verified_pod_usage(
    claim: &Value,
    api: &ApiResources,
    now: DateTime<Utc>,
) -> Option<ResourceList> {
    let (pod_name, uid) = owning_pod(claim)?;
    let namespace = claim.namespace();
    let pods = api.get("", "v1", "pods")?;
    // Fresh reads, here and of the claims: the claims of one Pod are made one after another,
    // and a cache a moment behind would take each for the first.
    let pod = pods
        .get(namespace, pod_name, ResourceVersion::Unset)
        .await
        .ok()?
        .value()
        .ok()?;
    if pod.uid() != uid {
        return None;
    }
    match pod.pointer("/status/extendedResourceClaimStatus") {
        Some(status) if !status.is_null() => {
            if str_at(status, "/resourceClaimName") != claim.name() {
                return None;
            }
        }
        _ => {
            let claims = api.get("resource.k8s.io", "v1", "resourceclaims")?;
            if !first_claim_of(claims, claim, uid).await? {
                return None;
            }
        }
    }
    Some(Evaluator::Pods.usage(&pod, now, None))
}

/// `verified_pod_usage` of a claim and of the claim it replaces: one lookup when both name the
/// same Pod, as they almost always do (an update rarely changes a claim's owner).
pub async fn verified_pod_usages(
    claim: &Value,
    old: Option<&Value>,
    api: &ApiResources,
    now: DateTime<Utc>,
) -> (Option<ResourceList>, Option<ResourceList>) {
    let usage = verified_pod_usage(claim, api, now).await;
    let old_usage = match old {
        None => None,
        Some(o) if o.name() == claim.name() && owning_pod(o) == owning_pod(claim) => usage.clone(),
        Some(o) => verified_pod_usage(o, api, now).await,
    };
    (usage, old_usage)
}

/// Whether `claim` is the first of the extended resource claims in its namespace owned by the
/// Pod `uid`; None when they cannot be listed.
async fn first_claim_of(claims: &RegistryStore, claim: &Value, uid: &str) -> Option<bool> {
    let opts = ListOptions {
        resource_version: ResourceVersion::Unset,
        ..Default::default()
    };
    let list = claims.list(claim.namespace(), &opts).await.ok()?;
    let (at, name) = (created(claim), claim.name());
    for item in list.items {
        let Ok(other) = item.value() else { continue };
        if owning_pod(&other).is_none_or(|(_, owner)| owner != uid) {
            continue;
        }
        match created(&other).cmp(&at) {
            std::cmp::Ordering::Less => return Some(false),
            std::cmp::Ordering::Equal if other.name() < name => return Some(false),
            _ => {}
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, created: &str, extended: Option<&str>) -> Value {
        let mut v = json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {}});
        if let Some(r) = extended {
            v["spec"]["extendedResourceName"] = json!(r);
        }
        v
    }

    fn pretty(list: &ResourceList) -> String {
        list.iter()
            .map(|(k, q)| format!("{k}={}", q.canonical()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn claim(class: &str, n: i64) -> Value {
        json!({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": n}}
        ]}}})
    }

    #[test]
    fn the_newer_class_wins_an_extended_resource_name_and_the_lower_name_between_equals() {
        let classes = ExtendedResources::default();
        classes.apply_for_test(Delta::Replace(vec![
            class("new", "2026-01-02T00:00:00Z", Some("example.com/gpu")),
            class("old", "2026-01-01T00:00:00Z", Some("example.com/gpu")),
        ]));
        let owner = |classes: &ExtendedResources| {
            let maps = classes.inner.maps.read().unwrap();
            maps.resource_to_class
                .get("example.com/gpu")
                .map(|c| c.name.clone())
        };
        assert_eq!(owner(&classes).as_deref(), Some("new"));
        // Both keep their own explicit name for the claims of their class.
        assert_eq!(
            classes.extended_resource("old").as_deref(),
            Some("example.com/gpu")
        );
        classes.apply_for_test(Delta::Upsert(class(
            "a",
            "2026-01-02T00:00:00Z",
            Some("example.com/gpu"),
        )));
        assert_eq!(owner(&classes).as_deref(), Some("a"));
        // Deleting a loser drops the name its winner holds, as upstream's cache does.
        classes.apply_for_test(Delta::Deleted(class(
            "old",
            "2026-01-01T00:00:00Z",
            Some("example.com/gpu"),
        )));
        assert_eq!(owner(&classes), None);
        assert!(classes.provides("deviceclass.resource.kubernetes.io/a"));
        assert!(!classes.provides("deviceclass.resource.kubernetes.io/old"));
    }

    #[test]
    fn a_renamed_extended_resource_moves() {
        let classes = ExtendedResources::default();
        classes.apply_for_test(Delta::Replace(vec![class(
            "gpu",
            "2026-01-01T00:00:00Z",
            Some("example.com/a"),
        )]));
        classes.apply_for_test(Delta::Upsert(class(
            "gpu",
            "2026-01-01T00:00:00Z",
            Some("example.com/b"),
        )));
        assert!(!classes.provides("example.com/a"));
        assert!(classes.provides("example.com/b"));
        assert!(matches(&classes, "requests.example.com/b"));
        assert!(!matches(&classes, "requests.example.com/a"));
        classes.apply_for_test(Delta::Upsert(class("gpu", "2026-01-01T00:00:00Z", None)));
        assert!(!matches(&classes, "requests.example.com/b"));
        assert_eq!(classes.extended_resource("gpu"), None);
    }

    #[test]
    fn matching_names_need_a_class_that_provides_them() {
        let classes = ExtendedResources::default();
        assert!(!classes.has_synced());
        classes.apply_for_test(Delta::Replace(vec![
            class("gpu", "2026-01-01T00:00:00Z", Some("example.com/gpu")),
            class("fpga", "2026-01-01T00:00:00Z", None),
        ]));
        assert!(classes.has_synced());
        for (name, want) in [
            (CLAIM_COUNT, true),
            ("gpu.deviceclass.resource.k8s.io/devices", true),
            ("requests.example.com/gpu", true),
            ("requests.example.com/other", false),
            ("requests.deviceclass.resource.kubernetes.io/gpu", true),
            ("requests.deviceclass.resource.kubernetes.io/fpga", true),
            ("requests.deviceclass.resource.kubernetes.io/none", false),
            ("example.com/gpu", false),
            ("requests.cpu", false),
        ] {
            assert_eq!(matches(&classes, name), want, "{name}");
        }
    }

    #[test]
    fn a_claims_devices_count_under_their_extended_resource_names_less_the_pods() {
        let classes = ExtendedResources::default();
        classes.apply_for_test(Delta::Replace(vec![class(
            "gpu",
            "2026-01-01T00:00:00Z",
            Some("example.com/gpu"),
        )]));
        assert_eq!(
            pretty(&usage(&claim("gpu", 3), &classes, None)),
            "count/resourceclaims.resource.k8s.io=1,gpu.deviceclass.resource.k8s.io/devices=3,\
             requests.deviceclass.resource.kubernetes.io/gpu=3,requests.example.com/gpu=3"
        );
        let pod: ResourceList = [("requests.example.com/gpu".to_string(), count(2))].into();
        assert_eq!(
            pretty(&usage(&claim("gpu", 3), &classes, Some(&pod))),
            "count/resourceclaims.resource.k8s.io=1,gpu.deviceclass.resource.k8s.io/devices=3,\
             requests.deviceclass.resource.kubernetes.io/gpu=3,requests.example.com/gpu=1"
        );
        let pod: ResourceList = [
            ("requests.example.com/gpu".to_string(), count(3)),
            (
                "requests.deviceclass.resource.kubernetes.io/gpu".to_string(),
                count(5),
            ),
        ]
        .into();
        assert_eq!(
            pretty(&usage(&claim("gpu", 3), &classes, Some(&pod))),
            "count/resourceclaims.resource.k8s.io=1,gpu.deviceclass.resource.k8s.io/devices=3"
        );
        // A class without an explicit name gives only the implicit one.
        assert_eq!(
            pretty(&usage(&claim("fpga", 2), &classes, None)),
            "count/resourceclaims.resource.k8s.io=1,fpga.deviceclass.resource.k8s.io/devices=2,\
             requests.deviceclass.resource.kubernetes.io/fpga=2"
        );
    }

    #[test]
    fn only_annotated_claims_controlled_by_a_v1_pod_have_an_owning_pod() {
        let mut c = claim("gpu", 1);
        assert_eq!(owning_pod(&c), None);
        c["metadata"]["annotations"] = json!({EXTENDED_RESOURCE_CLAIM: "true"});
        assert_eq!(owning_pod(&c), None);
        c["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "u0"},
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": true},
        ]);
        assert_eq!(owning_pod(&c), Some(("p", "u1")));
        c["metadata"]["ownerReferences"][1]["apiVersion"] = json!("apps/v1");
        assert_eq!(owning_pod(&c), None);
        c["metadata"]["ownerReferences"][1]["apiVersion"] = json!("v1");
        c["metadata"]["annotations"][EXTENDED_RESOURCE_CLAIM] = json!("True");
        assert_eq!(owning_pod(&c), None);
    }
}
