//! The EndpointSlice mirroring controller (upstream: pkg/controller/endpointslicemirroring,
//! `endpointslicemirroring-controller.k8s.io`): the Endpoints of a Service without a selector —
//! written by hand or by another controller — are mirrored into EndpointSlices, one per
//! address type and port set of the packed subsets, at most 1000 addresses per subset, with
//! the Endpoints' labels and annotations (but the trigger time and kubectl's last applied
//! configuration) and an owner reference to the Endpoints. Mirrored slices are deleted when the
//! Endpoints or the Service goes, when the Service gains a selector, and when the Endpoints are
//! labelled `endpointslice.kubernetes.io/skip-mirror: "true"` (as the `kubernetes` Service's
//! are) or hold a leader-election record. Addresses left out are reported as upstream does, by
//! the Warnings `InvalidIPAddress` and `TooManyAddressesToMirror` on the Endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::Delta;
use serde_json::{Map, Value, json};

use super::managed_slices::{Plan, apply_plan, on_slices, service_key_of};
use super::model::{Key, key_of, parse_ip_sloppy, string_map};
use super::runtime::{Applied, Backoff, Inner, Objects, Shared, Writer};
use super::slices::{Conditions, Endpoint, EndpointSet, Slice, SlicePort, controller_ref};
use super::subsets::{self, Address};
use super::{ANNOTATION_LEADER, ANNOTATION_TRIGGER_TIME, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::controllers::events::{ObjectReference, Recorder};

/// The managed-by value of mirrored slices.
const CONTROLLER_NAME: &str = "endpointslicemirroring-controller.k8s.io";
/// `endpointslice.kubernetes.io/skip-mirror`.
const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// kubectl's `kubectl.kubernetes.io/last-applied-configuration`, not mirrored.
const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// `--mirroring-max-endpoints-per-subset`'s default.
const MAX_ENDPOINTS_PER_SUBSET: usize = 1000;
/// Upstream's rate limiter for this controller: 1 s doubled per failure, at most 100 s.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(100),
};

/// `shouldMirror`: not labelled to skip, and no leader-election record.
fn should_mirror(endpoints: &Value) -> bool {
    let skip = endpoints
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_SKIP_MIRROR))
        .and_then(Value::as_str)
        == Some("true");
    let leader = endpoints
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(ANNOTATION_LEADER));
    !skip && !leader
}

/// `addressToEndpoint`: the address's IP in canonical form and its family, `None` for an
/// address that is no IP.
fn address_endpoint(address: &Address, ready: bool) -> Option<(Endpoint, &'static str)> {
    let ip = parse_ip_sloppy(&address.ip)?;
    let endpoint = Endpoint {
        addresses: vec![ip.to_string()],
        conditions: Conditions {
            ready: Some(ready),
            ..Conditions::default()
        },
        hostname: (!address.hostname.is_empty()).then(|| address.hostname.clone()),
        target_ref: address.target_ref.clone(),
        node_name: address.node_name.clone(),
        zone: None,
    };
    Some((endpoint, if ip.is_ipv6() { "IPv6" } else { "IPv4" }))
}

/// The labels and annotations mirrored slices carry: the Endpoints' own, less the annotations
/// that are not mirrored.
fn mirrored_meta(endpoints: &Value) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let labels = string_map(endpoints.pointer("/metadata/labels"));
    let mut annotations = string_map(endpoints.pointer("/metadata/annotations"));
    annotations.remove(ANNOTATION_TRIGGER_TIME);
    annotations.remove(ANNOTATION_LAST_APPLIED);
    (labels, annotations)
}

/// `newEndpointSlice`: a slice of the Endpoints with `ports` and `address_type`, named `name`
/// or to be named by the server.
fn new_slice(
    endpoints: &Value,
    ports: &[SlicePort],
    address_type: &str,
    name: Option<&Value>,
) -> Slice {
    let (mut labels, annotations) = mirrored_meta(endpoints);
    labels.insert(LABEL_SERVICE_NAME.into(), endpoints.name().to_string());
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    let mut meta = Map::new();
    match name {
        Some(name) => meta.insert("name".into(), name.clone()),
        None => meta.insert(
            "generateName".into(),
            format!("{}-", endpoints.name()).into(),
        ),
    };
    meta.insert("namespace".into(), endpoints.namespace().into());
    meta.insert("labels".into(), json!(labels));
    if !annotations.is_empty() {
        meta.insert("annotations".into(), json!(annotations));
    }
    meta.insert(
        "ownerReferences".into(),
        json!([controller_ref(
            "Endpoints",
            endpoints.name(),
            endpoints.uid()
        )]),
    );
    Slice {
        meta,
        address_type: address_type.to_string(),
        endpoints: Vec::new(),
        ports: ports.to_vec(),
    }
}

/// `reconcile`: the changes that bring `existing` (the slices mirrored for these Endpoints) to
/// what the Endpoints say.
fn reconcile(endpoints: &Value, mut existing: Vec<Slice>, max: usize) -> Plan {
    existing.sort_by(|a, b| a.name().cmp(b.name()));
    type GroupKey = (String, Vec<SlicePort>);
    // Every subset's port set gets a (possibly empty) group of each address type, so that
    // slices of a family no longer present are deleted.
    let mut desired: BTreeMap<GroupKey, (Vec<SlicePort>, EndpointSet)> = BTreeMap::new();
    // Addresses left out for not being IPs, and left out at all (past `max` too).
    let (mut invalid, mut skipped) = (0, 0);
    for subset in subsets::repack(&subsets::subsets_of(endpoints)) {
        let ports: Vec<SlicePort> = subset
            .ports
            .iter()
            .map(|p| SlicePort {
                name: Some(p.name.clone()),
                protocol: Some(p.protocol.clone()),
                port: Some(p.port),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        let key = Slice::port_key(&ports);
        for family in ["IPv4", "IPv6"] {
            desired
                .entry((family.to_string(), key.clone()))
                .or_insert_with(|| (ports.clone(), EndpointSet::new()));
        }
        let mut added = 0;
        let all = subset
            .addresses
            .iter()
            .map(|a| (a, true))
            .chain(subset.not_ready_addresses.iter().map(|a| (a, false)));
        for (address, ready) in all {
            if added >= max {
                break;
            }
            let Some((endpoint, family)) = address_endpoint(address, ready) else {
                invalid += 1;
                continue;
            };
            if let Some((_, set)) = desired.get_mut(&(family.to_string(), key.clone())) {
                set.insert(endpoint.id(), endpoint);
            }
            added += 1;
        }
        skipped += subset.addresses.len() + subset.not_ready_addresses.len() - added;
    }
    let mut warnings = Vec::new();
    if invalid > 0 {
        warnings.push((
            "InvalidIPAddress",
            format!("Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices"),
        ));
    }
    if skipped > invalid {
        warnings.push((
            "TooManyAddressesToMirror",
            format!(
                "A max of {max} addresses can be mirrored to EndpointSlices per Endpoints subset. {skipped} addresses were skipped"
            ),
        ));
    }
    let mut existing_by_key: BTreeMap<GroupKey, Vec<Slice>> = BTreeMap::new();
    for slice in existing {
        existing_by_key
            .entry((slice.address_type.clone(), Slice::port_key(&slice.ports)))
            .or_default()
            .push(slice);
    }
    let mut plan = Plan::default();
    for (key, (ports, set)) in desired.iter_mut() {
        let slices = existing_by_key.remove(key).unwrap_or_default();
        reconcile_group(endpoints, slices, set, ports, &key.0, max, &mut plan);
    }
    for slices in existing_by_key.into_values() {
        plan.delete.extend(slices);
    }
    recycle(&mut plan);
    plan.warnings = warnings;
    plan
}

/// `reconcileByPortMapping`: one slice per group. The first existing slice is kept if it says
/// exactly what the Endpoints say, else rewritten whole; any others are deleted.
fn reconcile_group(
    endpoints: &Value,
    mut existing: Vec<Slice>,
    desired: &mut EndpointSet,
    ports: &[SlicePort],
    address_type: &str,
    max: usize,
    plan: &mut Plan,
) {
    if desired.is_empty() {
        plan.delete.extend(existing);
        return;
    }
    let first = if existing.is_empty() {
        None
    } else {
        let first = existing.remove(0);
        plan.delete.append(&mut existing);
        Some(first)
    };
    if let Some(first) = &first {
        let (labels, annotations) = mirrored_meta(endpoints);
        let mut have_labels = first.labels();
        have_labels.remove(LABEL_MANAGED_BY);
        have_labels.remove(LABEL_SERVICE_NAME);
        let have_annotations = string_map(first.meta.get("annotations"));
        let same_endpoints = first.endpoints.len() == desired.len()
            && first.endpoints.iter().all(|e| {
                desired
                    .get(&e.id())
                    .is_some_and(|want| want.same_beyond_id(e))
            });
        // A slice owned by earlier Endpoints of the same name is rebuilt (`needRebuildExistingSlices`).
        let stale_owner = first
            .meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|o| {
                o.get("kind").and_then(Value::as_str) == Some("Endpoints")
                    && o.get("name").and_then(Value::as_str) == Some(endpoints.name())
                    && o.get("uid").and_then(Value::as_str) != Some(endpoints.uid())
            });
        if same_endpoints
            && have_labels == labels
            && have_annotations == annotations
            && !stale_owner
        {
            return;
        }
    }
    let mut slice = new_slice(
        endpoints,
        ports,
        address_type,
        first.as_ref().and_then(|f| f.meta.get("name")),
    );
    if let Some(rv) = first.as_ref().and_then(|f| f.meta.get("resourceVersion")) {
        slice.meta.insert("resourceVersion".into(), rv.clone());
    }
    while slice.endpoints.len() < max {
        let Some((_, endpoint)) = desired.pop_first() else {
            break;
        };
        slice.endpoints.push(endpoint);
    }
    if first.is_some() {
        plan.update.push(slice);
    } else {
        plan.create.push(slice);
    }
}

/// `recycleSlices`: a slice to delete is rewritten as a slice to create of its address type.
fn recycle(plan: &mut Plan) {
    let mut i = 0;
    while i < plan.create.len() {
        let address_type = plan.create[i].address_type.clone();
        match plan
            .delete
            .iter()
            .position(|d| d.address_type == address_type)
        {
            Some(j) => {
                let old = plan.delete.remove(j);
                let mut slice = plan.create.remove(i);
                slice.meta.remove("generateName");
                for field in ["name", "resourceVersion"] {
                    if let Some(v) = old.meta.get(field) {
                        slice.meta.insert(field.into(), v.clone());
                    }
                }
                plan.update.push(slice);
            }
            None => i += 1,
        }
    }
}

#[derive(Default)]
struct State {
    endpoints: Objects,
    /// Services by key, with whether each has a selector.
    services: BTreeMap<Key, bool>,
    /// The slices this controller mirrored.
    slices: Objects,
}

fn has_selector(svc: &Value) -> bool {
    svc.pointer("/spec/selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty())
}

/// Watches Endpoints, Services and EndpointSlices and keeps the mirrored slices. Runs until
/// the process ends.
pub async fn run(api: Arc<ApiResources>) {
    let (Some(services), Some(endpoints), Some(slices)) = (
        api.get("", "v1", "services").cloned(),
        api.get("", "v1", "endpoints").cloned(),
        api.get("discovery.k8s.io", "v1", "endpointslices").cloned(),
    ) else {
        return;
    };
    let writer = Arc::new(Writer {
        write: api.internal_write(&slices, crate::controllers::CONTROLLER_MANAGER),
        store: slices.clone(),
        user: crate::controllers::kube_system_account("endpointslicemirroring-controller"),
        events: Recorder::start(
            &api,
            "endpoint-slice-mirroring-controller",
            "endpointslicemirroring-controller",
        ),
    });
    let shared = Shared::new(
        State::default(),
        &["services", "endpoints", "endpointslices"],
    );
    shared.watch(services, "services", on_services);
    shared.watch(endpoints, "endpoints", on_endpoints);
    // Changes someone else made to mirrored slices sync their Endpoints again at once.
    shared.watch(slices, "endpointslices", |inner, delta| {
        let (slices, queue) = (&mut inner.state.slices, &mut inner.queue);
        on_slices(slices, queue, CONTROLLER_NAME, Duration::ZERO, delta);
    });
    let worker = shared.clone();
    worker
        .work("endpointslice-mirroring", BACKOFF, move |key| {
            let (shared, writer) = (shared.clone(), writer.clone());
            async move { sync(&shared, &writer, &key).await }
        })
        .await;
}

/// A Service matters when it has no selector, or stops or starts having one.
fn on_services(inner: &mut Inner<State>, delta: Delta) {
    let services = &mut inner.state.services;
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    match delta {
        Delta::Replace(items) => {
            let fresh: BTreeMap<Key, bool> =
                items.iter().map(|v| (key_of(v), has_selector(v))).collect();
            for (k, selector) in services.iter().chain(fresh.iter()) {
                if !selector || fresh.get(k) != services.get(k) {
                    keys.insert(k.clone());
                }
            }
            *services = fresh;
        }
        Delta::Upsert(v) => {
            let key = key_of(&v);
            let selector = has_selector(&v);
            let old = services.insert(key.clone(), selector);
            if old.map_or(!selector, |old| old != selector) {
                keys.insert(key);
            }
        }
        Delta::Deleted(v) => {
            let key = key_of(&v);
            if services.remove(&key) == Some(false) {
                keys.insert(key);
            }
        }
    }
    for key in keys {
        inner.queue.add(key);
    }
}

fn on_endpoints(inner: &mut Inner<State>, delta: Delta) {
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    let endpoints = &mut inner.state.endpoints;
    match delta {
        Delta::Replace(items) => {
            let old = endpoints.replace(items);
            for (k, v) in &old {
                if should_mirror(v) || endpoints.get(k).is_some_and(should_mirror) {
                    keys.insert(k.clone());
                }
            }
            keys.extend(
                endpoints
                    .keys()
                    .filter(|k| endpoints.get(k).is_some_and(should_mirror))
                    .cloned(),
            );
        }
        Delta::Upsert(v) => {
            let key = key_of(&v);
            let now = should_mirror(&v);
            if let Applied::Changed(old) = endpoints.upsert(v)
                && (now || old.as_ref().is_some_and(should_mirror))
            {
                keys.insert(key);
            }
        }
        Delta::Deleted(v) => {
            if endpoints.remove(&v).is_some() && should_mirror(&v) {
                keys.insert(key_of(&v));
            }
        }
    }
    for key in keys {
        inner.queue.add(key);
    }
}

async fn sync(shared: &Shared<State>, writer: &Writer, key: &Key) -> Result<(), String> {
    let (mut plan, deleting, object) = shared.update(|inner| {
        let state = &inner.state;
        let mirrored: Vec<Slice> = state
            .slices
            .in_namespace(&key.0)
            .filter(|v| service_key_of(v).as_ref() == Some(key))
            .map(Slice::from_value)
            .collect();
        let endpoints = state.endpoints.get(key);
        let wanted =
            endpoints.is_some_and(should_mirror) && state.services.get(key) == Some(&false);
        match endpoints {
            Some(endpoints) if wanted => (
                reconcile(endpoints, mirrored, MAX_ENDPOINTS_PER_SUBSET),
                endpoints.deletion_timestamp().is_some(),
                Some(ObjectReference::to("v1", "Endpoints", endpoints)),
            ),
            _ => (
                Plan {
                    delete: mirrored,
                    ..Plan::default()
                },
                false,
                None,
            ),
        }
    });
    // Upstream records what it left out at every reconcile, before writing.
    if let Some(object) = &object {
        for (reason, message) in std::mem::take(&mut plan.warnings) {
            writer.events.warning(object, reason, message);
        }
    }
    // No new slices for Endpoints being deleted.
    if deleting {
        plan.create.clear();
    }
    apply_plan(shared, writer, ("Endpoints", key), plan, |state| {
        &mut state.slices
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(subsets: Value) -> Value {
        json!({
            "metadata": {"name": "ext", "namespace": "ns", "uid": "ep-uid",
                "labels": {"team": "a"},
                "annotations": {"note": "x", ANNOTATION_TRIGGER_TIME: "2026-01-01T00:00:00Z"}},
            "subsets": subsets,
        })
    }

    fn named(mut plan: Plan) -> Vec<Slice> {
        for (i, s) in plan.create.iter_mut().enumerate() {
            s.meta.insert("name".into(), format!("ext-{i}").into());
            s.meta.insert("resourceVersion".into(), "1".into());
        }
        plan.create
    }

    #[test]
    fn endpoints_are_mirrored_by_family_and_ports() {
        let ep = endpoints(json!([
            {"addresses": [{"ip": "192.168.0.1", "nodeName": "n1"}, {"ip": "fd00::1"}],
             "notReadyAddresses": [{"ip": "192.168.0.2", "hostname": "h"}],
             "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
            {"addresses": [{"ip": "not-an-ip"}, {"ip": "192.168.0.9"}],
             "ports": [{"port": 53, "protocol": "UDP"}]},
        ]));
        let plan = reconcile(&ep, Vec::new(), 1000);
        assert!(plan.update.is_empty() && plan.delete.is_empty());
        let mut created: Vec<Value> = plan.create.iter().map(Slice::to_value).collect();
        created.sort_by_key(|v| (v["addressType"].to_string(), v["ports"].to_string()));
        assert_eq!(created.len(), 3);
        let v4 = created
            .iter()
            .find(|v| v["addressType"] == "IPv4" && v["ports"][0]["port"] == 443)
            .unwrap();
        assert_eq!(
            v4["metadata"]["labels"],
            json!({"team": "a", LABEL_SERVICE_NAME: "ext", LABEL_MANAGED_BY: CONTROLLER_NAME})
        );
        assert_eq!(v4["metadata"]["annotations"], json!({"note": "x"}));
        assert_eq!(v4["metadata"]["generateName"], "ext-");
        assert_eq!(
            v4["metadata"]["ownerReferences"][0],
            json!({"apiVersion": "v1", "kind": "Endpoints", "name": "ext", "uid": "ep-uid",
                "controller": true, "blockOwnerDeletion": true})
        );
        assert_eq!(
            v4["endpoints"],
            json!([
                {"addresses": ["192.168.0.1"], "conditions": {"ready": true}, "nodeName": "n1"},
                {"addresses": ["192.168.0.2"], "conditions": {"ready": false}, "hostname": "h"},
            ])
        );
        assert_eq!(
            v4["ports"],
            json!([{"name": "https", "protocol": "TCP", "port": 443}])
        );
        let dns = created
            .iter()
            .find(|v| v["ports"][0]["port"] == 53)
            .unwrap();
        assert_eq!(dns["endpoints"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn unchanged_endpoints_write_nothing_and_changes_update_in_place() {
        let ep = endpoints(json!([{"addresses": [{"ip": "192.168.0.1"}],
            "ports": [{"name": "p", "port": 80, "protocol": "TCP"}]}]));
        let stored = named(reconcile(&ep, Vec::new(), 1000));
        assert_eq!(stored.len(), 1);
        let plan = reconcile(&ep, stored.clone(), 1000);
        assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty());
        let mut relabelled = ep.clone();
        relabelled["metadata"]["labels"]["team"] = json!("b");
        let plan = reconcile(&relabelled, stored.clone(), 1000);
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].name(), "ext-0");
        assert_eq!(plan.update[0].labels()["team"], "b");
        // A new port set: the old slice is rewritten for it rather than deleted.
        let moved = endpoints(json!([{"addresses": [{"ip": "192.168.0.1"}],
            "ports": [{"name": "p", "port": 8080, "protocol": "TCP"}]}]));
        let plan = reconcile(&moved, stored.clone(), 1000);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update[0].name(), "ext-0");
        assert_eq!(plan.update[0].ports[0].port, Some(8080));
        // No addresses left: the slice goes.
        let empty = endpoints(json!([]));
        let plan = reconcile(&empty, stored, 1000);
        assert_eq!(plan.delete.len(), 1);
    }

    #[test]
    fn at_most_max_addresses_per_subset() {
        let addresses: Vec<Value> = (0..20)
            .map(|i| json!({"ip": format!("192.168.1.{}", i + 1)}))
            .collect();
        let ep = endpoints(
            json!([{"addresses": addresses, "ports": [{"port": 80, "protocol": "TCP"}]}]),
        );
        let plan = reconcile(&ep, Vec::new(), 5);
        assert_eq!(plan.create.len(), 1);
        assert_eq!(plan.create[0].endpoints.len(), 5);
        assert_eq!(
            plan.warnings,
            vec![(
                "TooManyAddressesToMirror",
                "A max of 5 addresses can be mirrored to EndpointSlices per Endpoints subset. 15 addresses were skipped".to_string()
            )]
        );
        assert!(reconcile(&ep, Vec::new(), 1000).warnings.is_empty());
    }

    #[test]
    fn addresses_that_are_no_ips_are_reported() {
        let ep = endpoints(
            json!([{"addresses": [{"ip": "192.168.0.1"}, {"ip": "nope"}],
            "notReadyAddresses": [{"ip": "10.0.0.300"}],
            "ports": [{"port": 80, "protocol": "TCP"}]}]),
        );
        let plan = reconcile(&ep, Vec::new(), 1000);
        assert_eq!(plan.create[0].endpoints.len(), 1);
        // Invalid addresses count as skipped too, so there is no second Warning.
        assert_eq!(
            plan.warnings,
            vec![(
                "InvalidIPAddress",
                "Skipped 2 invalid IP addresses when mirroring to EndpointSlices".to_string()
            )]
        );
    }

    #[test]
    fn skip_mirror_and_leader_records_are_not_mirrored() {
        let mut ep = endpoints(json!([]));
        assert!(should_mirror(&ep));
        ep["metadata"]["labels"][LABEL_SKIP_MIRROR] = json!("true");
        assert!(!should_mirror(&ep));
        let mut ep = endpoints(json!([]));
        ep["metadata"]["annotations"][ANNOTATION_LEADER] = json!("{}");
        assert!(!should_mirror(&ep));
    }
}
