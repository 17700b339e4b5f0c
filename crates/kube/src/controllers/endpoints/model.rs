//! Services, Pods and Nodes as the endpoint controllers read them: each object reduced once,
//! when its watch event arrives, to the fields that decide endpoints (upstream reads the same
//! fields from its informers' typed objects). Also the rules upstream's k8s.io/endpointslice
//! `util` shares between the controllers: which pods count, readiness, hostnames, ports, the
//! Services a pod change concerns, and the last-change trigger time. The two controllers that
//! select pods keep their Service and Pod indexes, and queue the Services to sync, with the same
//! watch handlers (`on_services`, `on_pods`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use apimachinery::object::{JsonPointer, ObjectExt};
use apiserver::registry::reflector::Delta;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::runtime::{PodDelta, Queue};
use crate::controllers::events::ObjectReference;

/// A namespace and a name.
pub(super) type Key = (String, String);

/// The key of an object.
pub(super) fn key_of(v: &Value) -> Key {
    (v.namespace().to_string(), v.name().to_string())
}

fn text(v: &Value, pointer: &str) -> String {
    v.at(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A string map (labels, a selector); entries that are not strings are skipped.
pub(super) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

fn time(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    let t = v.at(pointer)?.as_str()?;
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A time as Go's `time.RFC3339Nano` prints it in UTC (fractional seconds without trailing
/// zeros, none when whole).
pub(super) fn rfc3339_nano(t: DateTime<Utc>) -> String {
    let mut s = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// An IP as Go's `netutils.ParseIPSloppy` reads it: IPv4 octets may have leading zeros (read as
/// decimal), and an IPv4-mapped IPv6 address is the IPv4 address.
pub(super) fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)),
        Ok(ip) => Some(ip),
        Err(_) => {
            let octets: Vec<u8> = s
                .split('.')
                .map(|o| {
                    if o.is_empty() || o.len() > 3 || !o.bytes().all(|b| b.is_ascii_digit()) {
                        return None;
                    }
                    o.parse::<u8>().ok()
                })
                .collect::<Option<_>>()?;
            let [a, b, c, d] = octets[..] else {
                return None;
            };
            Some(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
        }
    }
}

/// A Service port: what endpoints copy (name, protocol, appProtocol) and where the pods listen.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ServicePort {
    pub name: String,
    pub protocol: String,
    pub app_protocol: Option<String>,
    pub target: TargetPort,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum TargetPort {
    Number(i64),
    /// A named container port.
    Name(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Service {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// What an Event about the Service names (`involvedObject.resourceVersion`).
    pub resource_version: String,
    pub created: Option<DateTime<Utc>>,
    pub deleting: bool,
    pub labels: BTreeMap<String, String>,
    /// `None` for a Service without a selector: its endpoints are written by someone else. An
    /// empty selector is none (it does not survive the round trip through storage upstream).
    pub selector: Option<BTreeMap<String, String>>,
    pub external_name: bool,
    pub cluster_ip: String,
    pub ip_families: Vec<String>,
    pub publish_not_ready: bool,
    pub ports: Vec<ServicePort>,
}

impl Service {
    pub fn from_value(v: &Value) -> Service {
        let selector = string_map(v.at("/spec/selector"));
        let ports = v
            .at("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                let target = match p.get("targetPort") {
                    Some(Value::String(name)) => TargetPort::Name(name.clone()),
                    Some(t) => match t.as_i64() {
                        Some(n) if n != 0 => TargetPort::Number(n),
                        _ => TargetPort::Number(port),
                    },
                    None => TargetPort::Number(port),
                };
                ServicePort {
                    name: text(p, "/name"),
                    protocol: match text(p, "/protocol") {
                        p if p.is_empty() => "TCP".to_string(),
                        p => p,
                    },
                    app_protocol: p
                        .get("appProtocol")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    target,
                }
            })
            .collect();
        Service {
            namespace: v.namespace().to_string(),
            name: v.name().to_string(),
            uid: v.uid().to_string(),
            resource_version: v.resource_version().to_string(),
            created: time(v, "/metadata/creationTimestamp"),
            deleting: v.deletion_timestamp().is_some(),
            labels: string_map(v.at("/metadata/labels")),
            selector: (!selector.is_empty()).then_some(selector),
            external_name: text(v, "/spec/type") == "ExternalName",
            cluster_ip: text(v, "/spec/clusterIP"),
            ip_families: v
                .at("/spec/ipFamilies")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect(),
            publish_not_ready: v
                .at("/spec/publishNotReadyAddresses")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            ports,
        }
    }

    pub fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }

    /// The Service as an Event's `involvedObject`.
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
        }
    }

    /// `IsServiceIPSet`: a Service without a cluster IP is headless.
    pub fn headless(&self) -> bool {
        self.cluster_ip.is_empty() || self.cluster_ip == "None"
    }

    /// Whether the selector matches `labels` (a Service without one matches nothing).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
    }

    /// Whether the Service's endpoints are computed from pods: it has a selector and is not an
    /// ExternalName Service.
    pub fn selects_pods(&self) -> bool {
        self.selector.is_some() && !self.external_name
    }

    /// The IP family the Endpoints of this Service hold: its first family, else its cluster
    /// IP's, else the pod's (`podToEndpointAddressForService`).
    pub fn endpoints_family_v6(&self, pod: &Pod) -> bool {
        if let Some(f) = self.ip_families.first() {
            return f == "IPv6";
        }
        if !self.headless() {
            return parse_ip_sloppy(&self.cluster_ip).is_some_and(|ip| ip.is_ipv6());
        }
        pod.ips
            .first()
            .and_then(|ip| parse_ip_sloppy(ip))
            .is_some_and(|ip| ip.is_ipv6())
    }
}

/// A container port a Service's named targetPort can find.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ContainerPort {
    pub name: String,
    pub protocol: String,
    pub port: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub node_name: String,
    pub hostname: String,
    pub subdomain: String,
    /// `status.podIPs`, with `status.podIP` authoritative as upstream's conversion makes it.
    pub ips: Vec<String>,
    /// Succeeded or Failed.
    pub terminal: bool,
    pub deleting: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// The `Ready` condition's lastTransitionTime.
    pub ready_changed: Option<DateTime<Utc>>,
    /// The ports of the containers, then of the sidecars (init containers that always restart),
    /// in the order `FindPort` looks at them.
    pub ports: Vec<ContainerPort>,
}

impl Pod {
    pub fn from_value(v: &Value) -> Pod {
        let pod_ip = text(v, "/status/podIP");
        let mut ips: Vec<String> = v
            .at("/status/podIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|ip| text(ip, "/ip"))
            .collect();
        if !pod_ip.is_empty() && ips.first() != Some(&pod_ip) {
            ips = vec![pod_ip];
        }
        let ready_condition = v
            .at("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
        let containers = v
            .at("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let sidecars = v
            .at("/spec/initContainers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"));
        let ports = containers
            .chain(sidecars)
            .flat_map(|c| {
                c.get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .map(|p| ContainerPort {
                name: text(p, "/name"),
                protocol: match text(p, "/protocol") {
                    p if p.is_empty() => "TCP".to_string(),
                    p => p,
                },
                port: p.get("containerPort").and_then(Value::as_i64).unwrap_or(0),
            })
            .collect();
        let phase = text(v, "/status/phase");
        Pod {
            namespace: v.namespace().to_string(),
            name: v.name().to_string(),
            uid: v.uid().to_string(),
            labels: string_map(v.at("/metadata/labels")),
            node_name: text(v, "/spec/nodeName"),
            hostname: text(v, "/spec/hostname"),
            subdomain: text(v, "/spec/subdomain"),
            ips,
            terminal: phase == "Succeeded" || phase == "Failed",
            deleting: v.deletion_timestamp().is_some(),
            ready: ready_condition.is_some_and(|c| c.get("status") == Some(&"True".into())),
            ready_changed: ready_condition.and_then(|c| time(c, "/lastTransitionTime")),
            ports,
        }
    }

    /// `ShouldPodBeInEndpoints`: not terminal, has an IP, and not terminating unless
    /// `include_terminating`.
    pub fn in_endpoints(&self, include_terminating: bool) -> bool {
        !self.terminal && !self.ips.is_empty() && (include_terminating || !self.deleting)
    }

    /// `ShouldSetHostname`: the pod's hostname is published when its subdomain is the Service.
    pub fn hostname_for(&self, svc: &Service) -> Option<&str> {
        (!self.hostname.is_empty() && self.subdomain == svc.name && self.namespace == svc.namespace)
            .then_some(self.hostname.as_str())
    }

    /// `FindPort`: the port a Service port reaches on this pod — its number, or the container
    /// port of that name and protocol.
    pub fn find_port(&self, port: &ServicePort) -> Option<i64> {
        match &port.target {
            TargetPort::Number(n) => Some(*n),
            TargetPort::Name(name) => self
                .ports
                .iter()
                .find(|p| &p.name == name && p.protocol == port.protocol)
                .map(|p| p.port),
        }
    }

    /// The pod's IPs of one family, in Go's canonical form.
    pub fn ips_of_family(&self, v6: bool) -> Vec<String> {
        self.ips
            .iter()
            .filter_map(|ip| parse_ip_sloppy(ip))
            .filter(|ip| ip.is_ipv6() == v6)
            .map(|ip| ip.to_string())
            .collect()
    }
}

/// Services by namespace and name.
#[derive(Default)]
pub(super) struct Services(BTreeMap<String, BTreeMap<String, Service>>);

impl Services {
    pub fn get(&self, key: &Key) -> Option<&Service> {
        self.0.get(&key.0)?.get(&key.1)
    }

    pub fn insert(&mut self, svc: Service) -> Option<Service> {
        self.0
            .entry(svc.namespace.clone())
            .or_default()
            .insert(svc.name.clone(), svc)
    }

    pub fn remove(&mut self, key: &Key) -> Option<Service> {
        let ns = self.0.get_mut(&key.0)?;
        let removed = ns.remove(&key.1);
        if ns.is_empty() {
            self.0.remove(&key.0);
        }
        removed
    }

    pub fn replace(&mut self, items: impl IntoIterator<Item = Service>) {
        self.0.clear();
        for svc in items {
            self.insert(svc);
        }
    }

    pub fn all(&self) -> impl Iterator<Item = &Service> {
        self.0.values().flat_map(BTreeMap::values)
    }

    /// `getServicesForPod`: the Services of `ns` whose selector matches `labels`.
    pub fn selecting(&self, ns: &str, labels: &BTreeMap<String, String>) -> BTreeSet<Key> {
        self.0
            .get(ns)
            .into_iter()
            .flat_map(BTreeMap::values)
            .filter(|s| s.selects(labels))
            .map(Service::key)
            .collect()
    }
}

/// Pods by namespace and name.
#[derive(Default)]
pub(super) struct Pods(BTreeMap<String, BTreeMap<String, Pod>>);

impl Pods {
    pub fn insert(&mut self, pod: Pod) -> Option<Pod> {
        self.0
            .entry(pod.namespace.clone())
            .or_default()
            .insert(pod.name.clone(), pod)
    }

    pub fn remove(&mut self, key: &Key) -> Option<Pod> {
        let ns = self.0.get_mut(&key.0)?;
        let removed = ns.remove(&key.1);
        if ns.is_empty() {
            self.0.remove(&key.0);
        }
        removed
    }

    pub fn replace(&mut self, items: impl IntoIterator<Item = Pod>) {
        self.0.clear();
        for pod in items {
            self.insert(pod);
        }
    }

    /// The pods a Service selects, by name.
    pub fn selected_by<'a>(&'a self, svc: &'a Service) -> impl Iterator<Item = &'a Pod> {
        self.0
            .get(&svc.namespace)
            .into_iter()
            .flat_map(BTreeMap::values)
            .filter(|p| svc.selects(&p.labels))
    }
}

/// The Services whose endpoints a pod's change may change (`GetPodUpdateProjectionKey` and
/// `GetServicesToUpdate`): those selecting it before or after; when only its labels changed,
/// those that selected it on one side only.
pub(super) fn services_for_pod_change(
    services: &Services,
    old: Option<&Pod>,
    new: Option<&Pod>,
) -> BTreeSet<Key> {
    match (old, new) {
        (None, None) => BTreeSet::new(),
        (None, Some(p)) | (Some(p), None) => services.selecting(&p.namespace, &p.labels),
        (Some(old), Some(new)) => {
            let labels_changed = old.labels != new.labels
                || old.hostname != new.hostname
                || old.subdomain != new.subdomain;
            let mut old_labels = old.clone();
            old_labels.labels = new.labels.clone();
            old_labels.hostname = new.hostname.clone();
            old_labels.subdomain = new.subdomain.clone();
            let pod_changed = old_labels != *new;
            let now = services.selecting(&new.namespace, &new.labels);
            if !labels_changed {
                return if pod_changed { now } else { BTreeSet::new() };
            }
            let before = services.selecting(&old.namespace, &old.labels);
            if pod_changed {
                now.union(&before).cloned().collect()
            } else {
                now.symmetric_difference(&before).cloned().collect()
            }
        }
    }
}

/// A change to Services: the index follows it, and the Service is synced (a deleted one too,
/// so that what was written for it goes).
pub(super) fn on_services(services: &mut Services, queue: &mut Queue, delta: Delta) {
    match delta {
        Delta::Replace(items) => {
            let fresh: Vec<Service> = items.iter().map(Service::from_value).collect();
            for svc in &fresh {
                queue.add(svc.key());
            }
            services.replace(fresh);
        }
        Delta::Upsert(v) => {
            let svc = Service::from_value(&v);
            queue.add(svc.key());
            services.insert(svc);
        }
        Delta::Deleted(v) => {
            let key = key_of(&v);
            services.remove(&key);
            queue.add(key);
        }
    }
}

/// A change to Pods: the index follows it, and the Services whose endpoints it may change are
/// synced (every Service after a fresh list).
pub(super) fn on_pods(services: &Services, pods: &mut Pods, queue: &mut Queue, delta: &PodDelta) {
    let keys = match delta {
        Delta::Replace(items) => {
            pods.replace(items.iter().map(|v| Pod::from_value(v)));
            services.all().map(Service::key).collect()
        }
        Delta::Upsert(v) => {
            let pod = Pod::from_value(v);
            let old = pods.insert(pod.clone());
            services_for_pod_change(services, old.as_ref(), Some(&pod))
        }
        Delta::Deleted(v) => {
            let old = pods.remove(&key_of(v));
            services_for_pod_change(services, old.as_ref(), None)
        }
    };
    for key in keys {
        queue.add(key);
    }
}

/// Upstream's `TriggerTimeTracker`: the time of the earliest change (a pod's readiness
/// transition, the Service's creation) that the next endpoints write publishes, in the
/// `endpoints.kubernetes.io/last-change-trigger-time` annotation.
#[derive(Default)]
pub(super) struct TriggerTimes(HashMap<Key, TriggerState>);

#[derive(Default)]
struct TriggerState {
    service: Option<DateTime<Utc>>,
    pods: HashMap<String, DateTime<Utc>>,
}

impl TriggerTimes {
    /// The trigger time of a sync of `svc` over `pods` (every pod it selects), remembering what
    /// this sync saw. The Service's creation the first time; later the earliest change since the
    /// last sync, `None` when nothing triggered this one.
    pub fn compute<'a>(
        &mut self,
        svc: &Service,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Option<DateTime<Utc>> {
        let key = svc.key();
        let known = self.0.contains_key(&key);
        let state = self.0.entry(key).or_default();
        let mut earliest: Option<DateTime<Utc>> = None;
        let mut seen = HashMap::new();
        for pod in pods {
            if let Some(t) = pod.ready_changed {
                seen.insert(pod.name.clone(), t);
                if state.pods.get(&pod.name).is_none_or(|last| t > *last) {
                    earliest = Some(earliest.map_or(t, |e| e.min(t)));
                }
            }
        }
        if let Some(t) = svc.created
            && state.service.is_none_or(|last| t > last)
        {
            earliest = Some(earliest.map_or(t, |e| e.min(t)));
        }
        state.pods = seen;
        state.service = svc.created;
        if !known {
            return svc.created;
        }
        earliest
    }

    pub fn forget(&mut self, key: &Key) {
        self.0.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Pod {
        Pod::from_value(&v)
    }

    /// The controllers' pod watches decode through `pod_fields::POD_FIELDS`: a pod with every
    /// member `Pod::from_value` reads set (and more) must give the same `Pod` projected as whole.
    #[test]
    fn pod_fields_hold_every_member_from_value_reads() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "a"},
                "annotations": {"x": "y"}, "deletionTimestamp": "2026-01-02T03:04:05Z",
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"nodeName": "n1", "hostname": "h", "subdomain": "sub",
                "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}],
                    "ports": [{"name": "http", "containerPort": 80},
                              {"containerPort": 53, "protocol": "UDP"}]}],
                "initContainers": [
                    {"name": "side", "image": "i", "restartPolicy": "Always",
                     "ports": [{"name": "metrics", "containerPort": 9090}]},
                    {"name": "once", "image": "i", "ports": [{"containerPort": 1}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"}]},
        });
        let whole = pod(v.clone());
        // Every field is set, so a member missing from the projection shows as a difference.
        assert!(whole.deleting && whole.ready && whole.ready_changed.is_some());
        assert_eq!(whole.ips.len(), 2);
        assert_eq!(whole.ports.len(), 3);
        assert!(
            ![
                &whole.uid,
                &whole.node_name,
                &whole.hostname,
                &whole.subdomain
            ]
            .iter()
            .any(|s| s.is_empty())
        );
        let projected = crate::pod_fields::POD_FIELDS
            .decode(&serde_json::to_vec(&v).unwrap())
            .unwrap();
        assert_eq!(pod(projected), whole);
    }

    #[test]
    fn readiness_comes_from_the_ready_condition() {
        let p = pod(json!({"metadata": {"name": "p"}, "status": {"conditions": [
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}));
        assert!(!p.ready);
        assert_eq!(
            rfc3339_nano(p.ready_changed.unwrap()),
            "2026-01-02T03:04:05Z"
        );
        let p = pod(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        assert!(p.ready);
        let p = pod(json!({"status": {"phase": "Running"}}));
        assert!(!p.ready);
    }

    #[test]
    fn which_pods_count() {
        let with_ip = json!({"status": {"podIP": "10.0.0.1", "phase": "Running"}});
        assert!(pod(with_ip.clone()).in_endpoints(false));
        assert!(!pod(json!({"status": {"phase": "Running"}})).in_endpoints(true));
        let mut done = with_ip.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert!(!pod(done).in_endpoints(true));
        let mut deleting = with_ip;
        deleting["metadata"] = json!({"deletionTimestamp": "2026-01-01T00:00:00Z"});
        assert!(!pod(deleting.clone()).in_endpoints(false));
        assert!(pod(deleting).in_endpoints(true));
    }

    #[test]
    fn pod_ip_is_authoritative_over_pod_ips() {
        let p = pod(json!({"status": {"podIP": "10.0.0.1"}}));
        assert_eq!(p.ips, ["10.0.0.1"]);
        let p = pod(json!({"status": {"podIP": "10.0.0.1",
            "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}}));
        assert_eq!(p.ips, ["10.0.0.1", "fd00::1"]);
        assert_eq!(p.ips_of_family(true), ["fd00::1"]);
        let p = pod(json!({"status": {"podIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.1"}]}}));
        assert_eq!(p.ips, ["10.0.0.2"]);
    }

    #[test]
    fn target_ports_by_number_and_by_name_and_protocol() {
        let svc = Service::from_value(&json!({"spec": {"ports": [
            {"name": "web", "port": 80, "targetPort": "http"},
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"},
            {"name": "plain", "port": 8080},
            {"name": "num", "port": 81, "targetPort": 9090}]}}));
        let p = pod(json!({"spec": {
            "containers": [{"ports": [
                {"name": "dns", "containerPort": 5353, "protocol": "TCP"},
                {"name": "http", "containerPort": 8000}]}],
            "initContainers": [
                {"restartPolicy": "Always", "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}));
        let found: Vec<_> = svc.ports.iter().map(|sp| p.find_port(sp)).collect();
        assert_eq!(found, [Some(8000), Some(53), Some(8080), Some(9090)]);
        // An init container that does not restart is no sidecar.
        let p = pod(json!({"spec": {"initContainers": [
            {"ports": [{"name": "http", "containerPort": 1}]}]}}));
        assert_eq!(p.find_port(&svc.ports[0]), None);
    }

    #[test]
    fn hostname_only_for_the_subdomain_service() {
        let svc = Service::from_value(&json!({"metadata": {"name": "db", "namespace": "ns"}}));
        let p = pod(
            json!({"metadata": {"namespace": "ns"}, "spec": {"hostname": "h", "subdomain": "db"}}),
        );
        assert_eq!(p.hostname_for(&svc), Some("h"));
        let p = pod(
            json!({"metadata": {"namespace": "ns"}, "spec": {"hostname": "h", "subdomain": "x"}}),
        );
        assert_eq!(p.hostname_for(&svc), None);
    }

    #[test]
    fn sloppy_ips() {
        assert_eq!(
            parse_ip_sloppy("010.001.0.1").unwrap().to_string(),
            "10.1.0.1"
        );
        assert_eq!(
            parse_ip_sloppy("::ffff:1.2.3.4").unwrap().to_string(),
            "1.2.3.4"
        );
        assert_eq!(parse_ip_sloppy("FD00:0::1").unwrap().to_string(), "fd00::1");
        assert!(parse_ip_sloppy("1.2.3").is_none());
        assert!(parse_ip_sloppy("1.2.3.256").is_none());
    }

    #[test]
    fn pod_changes_select_services() {
        let mut services = Services::default();
        for (name, sel) in [("a", json!({"app": "a"})), ("b", json!({"app": "b"}))] {
            services.insert(Service::from_value(&json!({
                "metadata": {"name": name, "namespace": "ns"}, "spec": {"selector": sel}})));
        }
        let p = |app: &str, ip: &str| {
            pod(
                json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": app}},
                "status": {"podIP": ip}}),
            )
        };
        let keys = |s: BTreeSet<Key>| s.into_iter().map(|k| k.1).collect::<Vec<_>>();
        assert_eq!(
            keys(services_for_pod_change(&services, None, Some(&p("a", "")))),
            ["a"]
        );
        // Nothing that matters changed.
        assert!(
            services_for_pod_change(
                &services,
                Some(&p("a", "1.1.1.1")),
                Some(&p("a", "1.1.1.1"))
            )
            .is_empty()
        );
        assert_eq!(
            keys(services_for_pod_change(
                &services,
                Some(&p("a", "")),
                Some(&p("a", "1.1.1.1"))
            )),
            ["a"]
        );
        // Moved from one Service to the other.
        assert_eq!(
            keys(services_for_pod_change(
                &services,
                Some(&p("a", "")),
                Some(&p("b", ""))
            )),
            ["a", "b"]
        );
    }

    #[test]
    fn trigger_time_is_the_earliest_change_since_the_last_sync() {
        let svc = Service::from_value(&json!({"metadata": {"name": "s", "namespace": "ns",
            "creationTimestamp": "2026-01-01T00:00:00Z"}}));
        let ready_at = |t: &str| {
            pod(json!({"metadata": {"name": "p"}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": t}]}}))
        };
        let mut times = TriggerTimes::default();
        let first = times.compute(&svc, [&ready_at("2026-01-01T00:00:05Z")]);
        assert_eq!(rfc3339_nano(first.unwrap()), "2026-01-01T00:00:00Z");
        assert_eq!(
            times.compute(&svc, [&ready_at("2026-01-01T00:00:05Z")]),
            None
        );
        let later = times.compute(&svc, [&ready_at("2026-01-01T00:00:09Z")]);
        assert_eq!(rfc3339_nano(later.unwrap()), "2026-01-01T00:00:09Z");
        times.forget(&svc.key());
        let again = times.compute(&svc, []);
        assert_eq!(rfc3339_nano(again.unwrap()), "2026-01-01T00:00:00Z");
    }

    #[test]
    fn nano_format_trims_zeros() {
        let t = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.500+01:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(rfc3339_nano(t), "2025-12-31T23:00:00.5Z");
    }
}
