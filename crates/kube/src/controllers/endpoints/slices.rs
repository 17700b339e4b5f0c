//! The EndpointSlice controller (upstream: pkg/controller/endpointslice and the reconciler of
//! k8s.io/endpointslice, `endpointslice-controller.k8s.io`): every Service with a selector (and
//! not of type ExternalName) has EndpointSlices of each address type its IP families name,
//! grouped by the ports its pods serve, at most 100 endpoints each, holding every selected pod
//! that has an IP and is not terminal — terminating ones too, with `ready`, `serving` and
//! `terminating` conditions — with its node and the node's zone. A Service with no endpoints
//! keeps one empty placeholder slice. Slices are labelled with the Service's labels,
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`, named
//! `<service>-<random>` and owned by the Service (so the garbage collector removes them with it).
//!
//! Slices change in place: endpoints that stay keep their slice, new ones fill the slices being
//! updated first, then the unchanged slice closest to full, and only then new slices; a slice
//! that would be deleted while another is created is reused instead. Slices of this controller
//! that others change or delete are put back.
//!
//! A pod on a node that does not exist is left out (and its Service tried again later) unless
//! the Service publishes not-ready addresses, as upstream does: a pod needs `spec.nodeName`
//! naming a Node to be in a slice.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::Delta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::managed_slices::{Plan, apply_plan, on_slices, service_key_of};
use super::model::{self, Key, Pod, Pods, Service, Services, TriggerTimes, rfc3339_nano};
use super::runtime::{Backoff, Inner, Objects, Shared, SharedPodInformer, Writer};
use super::subsets::ObjectRef;
use super::{ANNOTATION_TRIGGER_TIME, LABEL_HEADLESS, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::controllers::events::Recorder;

/// The managed-by value of this controller's slices.
pub(super) const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// `--max-endpoints-per-slice`'s default.
const MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// Upstream's event source for this controller (its managed-by label differs).
const EVENT_SOURCE: &str = "endpoint-slice-controller";
/// How long a change to one of its slices by someone else waits before the Service is synced
/// (`endpointSliceChangeMinSyncDelay`), so that a burst of them is one sync.
const SLICE_CHANGE_DELAY: Duration = Duration::from_secs(1);
/// Upstream's rate limiter for this controller: 1 s doubled per failure, at most 1000 s.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(1000),
};

/// `discovery.v1.EndpointPort`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SlicePort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

/// `discovery.v1.EndpointConditions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Conditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// `discovery.v1.Endpoint` (hints are not written).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Endpoint {
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: Conditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// What identifies an endpoint across syncs (upstream's `hashEndpoint`): its sorted addresses,
/// hostname and target.
type EndpointId = (Vec<String>, String, String, String);

impl Endpoint {
    pub fn id(&self) -> EndpointId {
        let mut addresses = self.addresses.clone();
        addresses.sort();
        let (ns, name) = self
            .target_ref
            .as_ref()
            .map(|r| (r.namespace.clone(), r.name.clone()))
            .unwrap_or_default();
        (
            addresses,
            self.hostname.clone().unwrap_or_default(),
            ns,
            name,
        )
    }

    /// `EndpointsEqualBeyondHash`: the same node, zone, conditions and target (its
    /// resourceVersion aside).
    pub fn same_beyond_id(&self, other: &Endpoint) -> bool {
        self.node_name == other.node_name
            && self.zone == other.zone
            && self.conditions == other.conditions
            && match (&self.target_ref, &other.target_ref) {
                (Some(a), Some(b)) => a.same_target(b),
                (a, b) => a == b,
            }
    }
}

/// The endpoints a sync wants, by identity; taken out in identity order.
pub(super) type EndpointSet = BTreeMap<EndpointId, Endpoint>;

/// An EndpointSlice: its metadata as stored (or as it will be created), and its typed content.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Slice {
    pub meta: Map<String, Value>,
    pub address_type: String,
    pub endpoints: Vec<Endpoint>,
    pub ports: Vec<SlicePort>,
}

impl Slice {
    pub fn from_value(v: &Value) -> Slice {
        let typed = |field: &str| v.get(field).cloned().unwrap_or(Value::Null);
        Slice {
            meta: v.metadata().cloned().unwrap_or_default(),
            address_type: v
                .get("addressType")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            endpoints: serde_json::from_value(typed("endpoints")).unwrap_or_default(),
            ports: serde_json::from_value(typed("ports")).unwrap_or_default(),
        }
    }

    pub fn to_value(&self) -> Value {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": self.meta,
            "addressType": self.address_type,
            "endpoints": self.endpoints,
            "ports": self.ports,
        })
    }

    pub fn name(&self) -> &str {
        self.meta.get("name").and_then(Value::as_str).unwrap_or("")
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        model::string_map(self.meta.get("labels"))
    }

    pub fn set_labels(&mut self, labels: BTreeMap<String, String>) {
        self.meta.insert("labels".into(), json!(labels));
    }

    /// The ports in a canonical order: the key of the group of slices serving them.
    pub fn port_key(ports: &[SlicePort]) -> Vec<SlicePort> {
        let mut key = ports.to_vec();
        key.sort();
        key
    }

    /// Whether `owner` (a `kind` of `v1` with `uid`) is among the owners.
    pub fn owned_by(&self, kind: &str, uid: &str) -> bool {
        self.meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|o| {
                o.get("uid").and_then(Value::as_str) == Some(uid)
                    && o.get("kind").and_then(Value::as_str) == Some(kind)
                    && o.get("apiVersion").and_then(Value::as_str) == Some("v1")
            })
    }

    /// Sets or clears the last-change trigger time (`addTriggerTimeAnnotation`).
    pub fn set_trigger_time(&mut self, trigger: Option<&str>) {
        let annotations = self.meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        let map = annotations.as_object_mut().expect("an object");
        match trigger {
            Some(t) => {
                map.insert(ANNOTATION_TRIGGER_TIME.into(), t.into());
            }
            None => {
                map.remove(ANNOTATION_TRIGGER_TIME);
            }
        }
        if map.is_empty() {
            self.meta.remove("annotations");
        }
    }
}

/// The owner reference a controller sets (`metav1.NewControllerRef`).
pub(super) fn controller_ref(kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": uid,
           "controller": true, "blockOwnerDeletion": true})
}

/// The zone of each known node (`None`: a node without a zone label).
pub(super) type Nodes = HashMap<String, Option<String>>;

/// `getAddressTypesForService`: from the IP families, else the cluster IP's family, else both.
fn address_types(svc: &Service) -> BTreeSet<&'static str> {
    let mut types: BTreeSet<&'static str> = svc
        .ip_families
        .iter()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some("IPv4"),
            "IPv6" => Some("IPv6"),
            _ => None,
        })
        .collect();
    if !types.is_empty() {
        return types;
    }
    if !svc.headless() {
        let v6 = model::parse_ip_sloppy(&svc.cluster_ip).is_some_and(|ip| ip.is_ipv6());
        types.insert(if v6 { "IPv6" } else { "IPv4" });
        return types;
    }
    types.extend(["IPv4", "IPv6"]);
    types
}

/// `getEndpointPorts`: each Service port the pod serves, on the port its targetPort names.
fn endpoint_ports(svc: &Service, pod: &Pod) -> Vec<SlicePort> {
    svc.ports
        .iter()
        .filter_map(|sp| {
            let number = pod.find_port(sp)?;
            Some(SlicePort {
                name: Some(sp.name.clone()),
                protocol: Some(sp.protocol.clone()),
                port: Some(number),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// `podToEndpoint`.
fn pod_endpoint(pod: &Pod, zone: Option<&str>, svc: &Service, address_type: &str) -> Endpoint {
    let serving = pod.ready;
    let terminating = pod.deleting;
    Endpoint {
        addresses: pod.ips_of_family(address_type == "IPv6"),
        conditions: Conditions {
            // Never ready while terminating, unless not-ready addresses are published.
            ready: Some(svc.publish_not_ready || (serving && !terminating)),
            serving: Some(serving),
            terminating: Some(terminating),
        },
        hostname: pod.hostname_for(svc).map(str::to_string),
        target_ref: Some(ObjectRef::pod(&pod.namespace, &pod.name, &pod.uid)),
        node_name: (!pod.node_name.is_empty()).then(|| pod.node_name.clone()),
        zone: zone.filter(|z| !z.is_empty()).map(str::to_string),
    }
}

/// The labels of a Service's slices (`setEndpointSliceLabels`), and whether the Service's own
/// labels differ from those `slice` has.
fn slice_labels(slice: Option<&Slice>, svc: &Service) -> (BTreeMap<String, String>, bool) {
    let reserved =
        |k: &str| k == LABEL_SERVICE_NAME || k == LABEL_MANAGED_BY || k == LABEL_HEADLESS;
    let have: BTreeMap<String, String> = slice
        .map(Slice::labels)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !reserved(k))
        .collect();
    let mut want: BTreeMap<String, String> = svc
        .labels
        .iter()
        .filter(|(k, _)| !reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let changed = have != want;
    if svc.headless() {
        want.insert(LABEL_HEADLESS.into(), String::new());
    }
    want.insert(LABEL_SERVICE_NAME.into(), svc.name.clone());
    want.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    (want, changed)
}

/// `newEndpointSlice`: an empty slice of the Service, to be created under a generated name.
fn new_slice(svc: &Service, ports: Vec<SlicePort>, address_type: &str) -> Slice {
    let mut meta = Map::new();
    meta.insert("generateName".into(), format!("{}-", svc.name).into());
    meta.insert("namespace".into(), svc.namespace.clone().into());
    meta.insert(
        "ownerReferences".into(),
        json!([controller_ref("Service", &svc.name, &svc.uid)]),
    );
    let mut slice = Slice {
        meta,
        address_type: address_type.to_string(),
        endpoints: Vec::new(),
        ports,
    };
    slice.set_labels(slice_labels(None, svc).0);
    slice
}

/// `Reconcile`: the changes that bring `existing` (this controller's slices of the Service) to
/// what its `pods` say.
pub(super) fn reconcile(
    svc: &Service,
    pods: &[&Pod],
    nodes: &Nodes,
    existing: Vec<Slice>,
    max: usize,
) -> Plan {
    let types = address_types(svc);
    let mut plan = Plan::default();
    let mut unsupported = Vec::new();
    let mut by_type: BTreeMap<String, Vec<Slice>> = BTreeMap::new();
    for slice in existing {
        if types.contains(slice.address_type.as_str()) {
            by_type
                .entry(slice.address_type.clone())
                .or_default()
                .push(slice);
        } else {
            unsupported.push(slice);
        }
    }
    for address_type in types {
        let existing = by_type.remove(address_type).unwrap_or_default();
        let part = reconcile_address_type(svc, pods, nodes, existing, address_type, max);
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
        plan.errors.extend(part.errors);
    }
    plan.delete.extend(unsupported);
    plan
}

/// `reconcileByAddressType`, with `finalize`'s reuse of slices to delete for slices to create.
fn reconcile_address_type(
    svc: &Service,
    pods: &[&Pod],
    nodes: &Nodes,
    mut existing: Vec<Slice>,
    address_type: &str,
    max: usize,
) -> Plan {
    existing.sort_by(|a, b| a.name().cmp(b.name()));
    let mut plan = Plan::default();
    let mut existing_by_ports: BTreeMap<Vec<SlicePort>, Vec<Slice>> = BTreeMap::new();
    for slice in &existing {
        if slice.owned_by("Service", &svc.uid) {
            existing_by_ports
                .entry(Slice::port_key(&slice.ports))
                .or_default()
                .push(slice.clone());
        } else {
            plan.delete.push(slice.clone());
        }
    }
    // The desired endpoints by port set, with the ports in the Service's order.
    let mut desired: BTreeMap<Vec<SlicePort>, (Vec<SlicePort>, EndpointSet)> = BTreeMap::new();
    for pod in pods {
        if !pod.in_endpoints(true) {
            continue;
        }
        let ports = if svc.ports.is_empty() && svc.cluster_ip == "None" {
            Vec::new()
        } else {
            endpoint_ports(svc, pod)
        };
        let group = desired
            .entry(Slice::port_key(&ports))
            .or_insert_with(|| (ports, EndpointSet::new()));
        let zone = match nodes.get(&pod.node_name) {
            Some(zone) => zone.as_deref(),
            None if svc.publish_not_ready => None,
            None => {
                plan.errors.push(format!(
                    "skipping Pod {} for Service {}/{}: Node {} Not Found",
                    pod.name, svc.namespace, svc.name, pod.node_name
                ));
                continue;
            }
        };
        let endpoint = pod_endpoint(pod, zone, svc, address_type);
        if !endpoint.addresses.is_empty() {
            group.1.insert(endpoint.id(), endpoint);
        }
    }
    for (key, (ports, set)) in desired.iter_mut() {
        let slices = existing_by_ports.get(key).cloned().unwrap_or_default();
        let part = reconcile_ports(svc, slices, set, ports, address_type, max);
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
    }
    for (key, slices) in existing_by_ports {
        if !desired.contains_key(&key) {
            plan.delete.extend(slices);
        }
    }
    // A Service without endpoints keeps one empty slice.
    if existing.len() == plan.delete.len() && plan.create.is_empty() {
        let placeholder = new_slice(svc, Vec::new(), address_type);
        if plan.delete.len() == 1 && is_placeholder(&plan.delete[0], &placeholder) {
            plan.delete.clear();
        } else {
            plan.create.push(placeholder);
        }
    }
    // Slices to delete are reused for slices to create (those of this Service only: a slice
    // of an earlier Service of the same name is left to the garbage collector).
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        let reusable = plan.delete[i].address_type == address_type
            && plan.delete[i].owned_by("Service", &svc.uid);
        if reusable {
            let old = plan.delete.remove(i);
            let mut slice = plan.create.pop().expect("a slice to create");
            reuse_name(&mut slice, &old);
            plan.update.push(slice);
        } else {
            i += 1;
        }
    }
    plan
}

/// A slice to create written over `old` instead: its name, and its resourceVersion so that
/// the update fails if `old` changed meanwhile.
fn reuse_name(slice: &mut Slice, old: &Slice) {
    slice.meta.remove("generateName");
    for field in ["name", "resourceVersion"] {
        if let Some(v) = old.meta.get(field) {
            slice.meta.insert(field.into(), v.clone());
        }
    }
}

/// Whether `slice` already is the placeholder: same namespace and labels, no endpoints, no ports.
fn is_placeholder(slice: &Slice, placeholder: &Slice) -> bool {
    slice.meta.get("namespace") == placeholder.meta.get("namespace")
        && slice.labels() == placeholder.labels()
        && slice.address_type == placeholder.address_type
        && slice.endpoints.is_empty()
        && slice.ports.is_empty()
}

/// `reconcileByPortMapping`: the slices of one port set. Existing slices keep the endpoints
/// still wanted (updated where they changed) and lose the others; what is left to place goes to
/// the slices being updated, fullest first, then to the unchanged slice it fills best, then to
/// new slices.
fn reconcile_ports(
    svc: &Service,
    existing: Vec<Slice>,
    desired: &mut EndpointSet,
    ports: &[SlicePort],
    address_type: &str,
    max: usize,
) -> Plan {
    let mut by_name: BTreeMap<String, Slice> = BTreeMap::new();
    let mut unchanged: BTreeSet<String> = BTreeSet::new();
    let mut to_update: BTreeSet<String> = BTreeSet::new();
    let mut to_delete: BTreeSet<String> = BTreeSet::new();
    for slice in existing {
        let name = slice.name().to_string();
        let mut kept = Vec::new();
        let mut changed = false;
        for endpoint in &slice.endpoints {
            if let Some(want) = desired.remove(&endpoint.id()) {
                changed |= !want.same_beyond_id(endpoint);
                kept.push(want);
            }
        }
        let (labels, labels_changed) = slice_labels(Some(&slice), svc);
        if changed || kept.len() != slice.endpoints.len() {
            if kept.is_empty() {
                to_delete.insert(name.clone());
                by_name.insert(name, slice);
            } else {
                let mut updated = slice;
                updated.endpoints = kept;
                updated.set_labels(labels);
                to_update.insert(name.clone());
                by_name.insert(name, updated);
            }
        } else if labels_changed {
            let mut updated = slice;
            updated.set_labels(labels);
            to_update.insert(name.clone());
            by_name.insert(name, updated);
        } else {
            unchanged.insert(name.clone());
            by_name.insert(name, slice);
        }
    }
    // Fill the slices being updated, fullest first.
    if !desired.is_empty() && !to_update.is_empty() {
        let mut names: Vec<&String> = to_update.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(by_name[*n].endpoints.len()));
        for name in names {
            let slice = by_name.get_mut(name).expect("a slice");
            while slice.endpoints.len() < max {
                let Some((_, endpoint)) = desired.pop_first() else {
                    break;
                };
                slice.endpoints.push(endpoint);
            }
        }
    }
    let mut create = Vec::new();
    while !desired.is_empty() {
        let mut fill: Option<Slice> = None;
        if desired.len() < max && !unchanged.is_empty() {
            fill =
                slice_to_fill(unchanged.iter().map(|n| &by_name[n]), desired.len(), max).cloned();
        }
        let mut slice = fill.unwrap_or_else(|| new_slice(svc, ports.to_vec(), address_type));
        while slice.endpoints.len() < max {
            let Some((_, endpoint)) = desired.pop_first() else {
                break;
            };
            slice.endpoints.push(endpoint);
        }
        if slice.name().is_empty() {
            create.push(slice);
        } else {
            let name = slice.name().to_string();
            unchanged.remove(&name);
            to_update.insert(name.clone());
            by_name.insert(name, slice);
        }
    }
    Plan {
        create,
        update: to_update.iter().map(|n| by_name[n].clone()).collect(),
        delete: to_delete.iter().map(|n| by_name[n].clone()).collect(),
        ..Plan::default()
    }
}

/// `getSliceToFill`: the slice that `count` more endpoints bring closest to `max`, if any
/// has room for them all.
fn slice_to_fill<'a>(
    slices: impl Iterator<Item = &'a Slice>,
    count: usize,
    max: usize,
) -> Option<&'a Slice> {
    let mut best: Option<(&Slice, usize)> = None;
    for slice in slices {
        let after = count + slice.endpoints.len();
        if after > max {
            continue;
        }
        let room = max - after;
        if best.is_none_or(|(_, r)| room < r) {
            best = Some((slice, room));
            if room == 0 {
                break;
            }
        }
    }
    best.map(|(s, _)| s)
}

#[derive(Default)]
struct State {
    services: Services,
    pods: Pods,
    nodes: Nodes,
    /// This controller's slices (labelled as managed by it).
    slices: Objects,
    triggers: TriggerTimes,
}

/// Watches Services, Pods (through `pods`, shared with the Endpoints controller), Nodes and
/// EndpointSlices and keeps the slices of every selecting Service. Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, pods: SharedPodInformer) {
    let (Some(services), Some(nodes), Some(slices)) = (
        api.get("", "v1", "services").cloned(),
        api.get("", "v1", "nodes").cloned(),
        api.get("discovery.k8s.io", "v1", "endpointslices").cloned(),
    ) else {
        pods.withdraw();
        return;
    };
    let writer = Arc::new(Writer {
        write: api.internal_write(&slices, crate::controllers::CONTROLLER_MANAGER),
        store: slices.clone(),
        user: crate::controllers::kube_system_account("endpointslice-controller"),
        events: Recorder::start(&api, EVENT_SOURCE, "endpointslice-controller"),
    });
    let shared = Shared::new(
        State::default(),
        &["services", "pods", "nodes", "endpointslices"],
    );
    shared.watch(services, "services", |inner, delta| {
        model::on_services(&mut inner.state.services, &mut inner.queue, delta);
    });
    shared.watch_pods(&pods, "pods", |inner, delta| {
        let state = &mut inner.state;
        model::on_pods(&state.services, &mut state.pods, &mut inner.queue, delta);
    });
    shared.watch(nodes, "nodes", on_nodes);
    shared.watch(slices, "endpointslices", |inner, delta| {
        let (slices, queue) = (&mut inner.state.slices, &mut inner.queue);
        on_slices(slices, queue, CONTROLLER_NAME, SLICE_CHANGE_DELAY, delta);
    });
    let worker = shared.clone();
    worker
        .work("endpointslice", BACKOFF, move |key| {
            let (shared, writer) = (shared.clone(), writer.clone());
            async move { sync(&shared, &writer, &key).await }
        })
        .await;
}

/// Nodes are read for their zones; upstream syncs no Service when they change (without hints).
fn on_nodes(inner: &mut Inner<State>, delta: Delta) {
    let zone = |v: &Value| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get("topology.kubernetes.io/zone"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let nodes = &mut inner.state.nodes;
    match delta {
        Delta::Replace(items) => {
            *nodes = items
                .iter()
                .map(|v| (v.name().to_string(), zone(v)))
                .collect();
        }
        Delta::Upsert(v) => {
            nodes.insert(v.name().to_string(), zone(&v));
        }
        Delta::Deleted(v) => {
            nodes.remove(v.name());
        }
    }
}

async fn sync(shared: &Shared<State>, writer: &Writer, key: &Key) -> Result<(), String> {
    let planned = shared.update(|inner| {
        let state = &mut inner.state;
        let Some(svc) = state.services.get(key) else {
            state.triggers.forget(key);
            return None;
        };
        if !svc.selects_pods() {
            return None;
        }
        let pods: Vec<&Pod> = state.pods.selected_by(svc).collect();
        let trigger = state.triggers.compute(svc, pods.iter().copied());
        let existing: Vec<Slice> = state
            .slices
            .in_namespace(&svc.namespace)
            .filter(|v| service_key_of(v).as_ref() == Some(key))
            // Slices being deleted are out of the picture (`dropEndpointSlicesPendingDeletion`).
            .filter(|v| v.deletion_timestamp().is_none())
            .map(Slice::from_value)
            .collect();
        let plan = reconcile(svc, &pods, &state.nodes, existing, MAX_ENDPOINTS_PER_SLICE);
        Some((
            plan,
            trigger.map(rfc3339_nano),
            svc.reference(),
            svc.deleting,
        ))
    });
    let Some((mut plan, trigger, service, deleting)) = planned else {
        return Ok(());
    };
    // No new slices for a Service being deleted: the garbage collector would race them.
    if deleting {
        plan.create.clear();
    }
    for slice in plan.create.iter_mut().chain(&mut plan.update) {
        slice.set_trigger_time(trigger.as_deref());
    }
    let result = apply_plan(shared, writer, ("Service", key), plan, |state| {
        &mut state.slices
    })
    .await;
    if let Err(e) = &result {
        writer.events.warning(
            &service,
            "FailedToUpdateEndpointSlices",
            format!(
                "Error updating Endpoint Slices for Service {}/{}: {e}",
                key.0, key.1
            ),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec: Value) -> Service {
        Service::from_value(&json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"tier": "front"}},
            "spec": spec,
        }))
    }

    fn web() -> Service {
        service(
            json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10",
            "ipFamilies": ["IPv4"],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]}),
        )
    }

    fn pod(i: usize, ready: bool) -> Pod {
        Pod::from_value(&json!({
            "metadata": {"name": format!("p{i}"), "namespace": "ns", "uid": format!("uid-{i}"),
                "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "containers": [{"ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"podIPs": [{"ip": format!("10.0.{}.{}", i / 200, i % 200 + 1)}],
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
    }

    fn nodes() -> Nodes {
        [("node-1".to_string(), Some("zone-a".to_string()))].into()
    }

    /// The plan's slices as stored: created ones named.
    fn apply(plan: Plan, existing: Vec<Slice>) -> Vec<Slice> {
        let mut by_name: BTreeMap<String, Slice> = existing
            .into_iter()
            .map(|s| (s.name().to_string(), s))
            .collect();
        for s in plan.delete {
            by_name.remove(s.name());
        }
        for s in plan.update {
            by_name.insert(s.name().to_string(), s);
        }
        for (i, mut s) in plan.create.into_iter().enumerate() {
            let name = format!("web-{}{i}", by_name.len());
            s.meta.insert("name".into(), name.clone().into());
            by_name.insert(name, s);
        }
        by_name.into_values().collect()
    }

    #[test]
    fn a_new_service_gets_one_slice_with_conditions_node_and_zone() {
        let svc = web();
        let mut terminating = pod(2, true);
        terminating.deleting = true;
        let pods = [pod(0, true), pod(1, false), terminating];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = reconcile(&svc, &refs, &nodes(), Vec::new(), 100);
        assert!(plan.update.is_empty() && plan.delete.is_empty() && plan.errors.is_empty());
        assert_eq!(plan.create.len(), 1);
        let v = plan.create[0].to_value();
        assert_eq!(v["metadata"]["generateName"], "web-");
        assert_eq!(
            v["metadata"]["labels"],
            json!({"tier": "front", LABEL_SERVICE_NAME: "web", LABEL_MANAGED_BY: CONTROLLER_NAME})
        );
        assert_eq!(
            v["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "svc-uid",
                "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(v["addressType"], "IPv4");
        assert_eq!(
            v["ports"],
            json!([{"name": "http", "protocol": "TCP", "port": 8080}])
        );
        let eps = v["endpoints"].as_array().unwrap();
        assert_eq!(eps.len(), 3);
        assert_eq!(
            eps[0],
            json!({"addresses": ["10.0.0.1"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "p0", "uid": "uid-0"},
                "nodeName": "node-1", "zone": "zone-a"})
        );
        assert_eq!(
            eps[1]["conditions"],
            json!({"ready": false, "serving": false, "terminating": false})
        );
        assert_eq!(
            eps[2]["conditions"],
            json!({"ready": false, "serving": true, "terminating": true})
        );
    }

    #[test]
    fn slices_hold_at_most_max_endpoints_and_change_in_place() {
        let svc = web();
        let pods: Vec<Pod> = (0..250).map(|i| pod(i, true)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = reconcile(&svc, &refs, &nodes(), Vec::new(), 100);
        assert_eq!(
            plan.create
                .iter()
                .map(|s| s.endpoints.len())
                .collect::<Vec<_>>(),
            [100, 100, 50]
        );
        let stored = apply(plan, Vec::new());
        // Nothing changed: nothing to do.
        let plan = reconcile(&svc, &refs, &nodes(), stored.clone(), 100);
        assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty());
        // One pod becomes not ready: only its slice is updated.
        let mut changed = pods.clone();
        changed[7] = pod(7, false);
        let refs: Vec<&Pod> = changed.iter().collect();
        let plan = reconcile(&svc, &refs, &nodes(), stored.clone(), 100);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].endpoints.len(), 100);
        // Pods gone: a slice left empty is deleted; the others shrink in place.
        let few: Vec<&Pod> = pods.iter().take(10).collect();
        let plan = reconcile(&svc, &few, &nodes(), stored.clone(), 100);
        assert!(plan.create.is_empty());
        assert_eq!(plan.update.len() + plan.delete.len(), 3);
        let after = apply(plan, stored);
        assert_eq!(after.iter().map(|s| s.endpoints.len()).sum::<usize>(), 10);
    }

    #[test]
    fn new_endpoints_fill_the_unchanged_slice_closest_to_full() {
        let svc = web();
        let pods: Vec<Pod> = (0..150).map(|i| pod(i, true)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let stored = apply(
            reconcile(&svc, &refs, &nodes(), Vec::new(), 100),
            Vec::new(),
        );
        let more: Vec<Pod> = (0..160).map(|i| pod(i, true)).collect();
        let refs: Vec<&Pod> = more.iter().collect();
        let plan = reconcile(&svc, &refs, &nodes(), stored, 100);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].endpoints.len(), 60);
    }

    #[test]
    fn placeholder_for_no_endpoints_and_reuse_instead_of_churn() {
        let svc = web();
        let plan = reconcile(&svc, &[], &nodes(), Vec::new(), 100);
        assert_eq!(plan.create.len(), 1);
        assert!(plan.create[0].endpoints.is_empty() && plan.create[0].ports.is_empty());
        let stored = apply(plan, Vec::new());
        // The placeholder is kept while there is nothing to publish...
        let plan = reconcile(&svc, &[], &nodes(), stored.clone(), 100);
        assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty());
        // ...and becomes the first real slice rather than being deleted and replaced.
        let pods = [pod(0, true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = reconcile(&svc, &refs, &nodes(), stored.clone(), 100);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].name(), stored[0].name());
        assert_eq!(plan.update[0].endpoints.len(), 1);
    }

    #[test]
    fn pods_on_unknown_nodes_wait_unless_not_ready_addresses_are_published() {
        let svc = web();
        let pods = [pod(0, true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = reconcile(&svc, &refs, &Nodes::new(), Vec::new(), 100);
        assert_eq!(plan.errors.len(), 1);
        assert_eq!(plan.create.len(), 1);
        assert!(plan.create[0].endpoints.is_empty());
        let mut publishing = web();
        publishing.publish_not_ready = true;
        let plan = reconcile(&publishing, &refs, &Nodes::new(), Vec::new(), 100);
        assert!(plan.errors.is_empty());
        assert_eq!(plan.create[0].endpoints.len(), 1);
        assert_eq!(plan.create[0].endpoints[0].zone, None);
    }

    #[test]
    fn address_types_follow_ip_families_and_others_are_deleted() {
        let dual = service(json!({"selector": {"app": "web"}, "clusterIP": "None",
            "ipFamilies": ["IPv4", "IPv6"]}));
        assert_eq!(address_types(&dual), BTreeSet::from(["IPv4", "IPv6"]));
        let legacy = service(json!({"selector": {"app": "web"}, "clusterIP": "fd00::10"}));
        assert_eq!(address_types(&legacy), BTreeSet::from(["IPv6"]));
        let svc = web();
        let mut old = new_slice(&svc, Vec::new(), "IPv6");
        old.meta.insert("name".into(), "web-old".into());
        let plan = reconcile(&svc, &[], &nodes(), vec![old], 100);
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.create.len(), 1);
        assert_eq!(plan.create[0].address_type, "IPv4");
    }

    #[test]
    fn service_labels_reach_existing_slices() {
        let svc = web();
        let stored = apply(reconcile(&svc, &[], &nodes(), Vec::new(), 100), Vec::new());
        let mut relabelled = web();
        relabelled.labels.insert("tier".into(), "back".into());
        let plan = reconcile(&relabelled, &[], &nodes(), stored, 100);
        // The placeholder differs in labels: it is replaced in place.
        assert!(plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].labels()["tier"], "back");
    }
}
