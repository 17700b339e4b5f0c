//! The endpoints controller (upstream: pkg/controller/endpoint, `endpoint-controller`): every
//! Service with a selector (and not of type ExternalName) has an Endpoints object of its name
//! listing the selected pods that have an IP and are not terminal — ready ones in `addresses`,
//! others in `notReadyAddresses` (all ready with `publishNotReadyAddresses`), terminating ones
//! left out — once per Service port, on the port its targetPort names, packed canonically.
//! The Endpoints carry the Service's labels, `endpoints.kubernetes.io/managed-by`,
//! `service.kubernetes.io/headless` for a headless Service, the last-change trigger time, and
//! `endpoints.kubernetes.io/over-capacity: truncated` past 1000 addresses. A Service's
//! Endpoints go when it goes; at start, Endpoints whose Service is gone are deleted. Nothing is
//! written when nothing changed. A failed create or update records upstream's Warning
//! (`FailedToCreateEndpoint`, `FailedToUpdateEndpoint`).
//!
//! One difference: upstream writes `nodeName: ""` for a pod that is not scheduled, which
//! validation refuses, so such a pod's Service gets no Endpoints; here the field is left out.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::Delta;
use serde_json::{Map, Value, json};

use super::model::{self, Key, Pod, Pods, Service, Services, TriggerTimes, key_of, rfc3339_nano};
use super::runtime::{
    Applied, Backoff, Inner, Objects, Shared, SharedPodInformer, Writer, namespace_closed,
};
use super::subsets::{self, Address, ObjectRef, Port, Subset};
use super::{ANNOTATION_LEADER, ANNOTATION_TRIGGER_TIME, LABEL_HEADLESS};
use crate::controllers::events::{ObjectReference, Recorder};

/// `endpoints.kubernetes.io/managed-by` and its value.
const LABEL_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
const CONTROLLER_NAME: &str = "endpoint-controller";
/// `endpoints.kubernetes.io/over-capacity`.
const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// The most addresses one Endpoints object holds (`maxCapacity`).
const MAX_CAPACITY: usize = 1000;

/// Upstream's default controller rate limiter: 5 ms doubled per failure, at most 1000 s.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(5),
    max: Duration::from_secs(1000),
};

#[derive(Default)]
struct State {
    services: Services,
    pods: Pods,
    endpoints: Objects,
    triggers: TriggerTimes,
    /// Whether the first list of Endpoints has been seen (it queues every one of them, to find
    /// those whose Service is gone: `checkLeftoverEndpoints`).
    listed_endpoints: bool,
}

/// Watches Services, Pods (through `pods`, shared with the EndpointSlice controller) and
/// Endpoints and keeps every selecting Service's Endpoints. Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, pods: SharedPodInformer) {
    let (Some(services), Some(endpoints)) = (
        api.get("", "v1", "services").cloned(),
        api.get("", "v1", "endpoints").cloned(),
    ) else {
        pods.withdraw();
        return;
    };
    let writer = Writer {
        write: api.internal_write(&endpoints, crate::controllers::CONTROLLER_MANAGER),
        store: endpoints.clone(),
        user: crate::controllers::kube_system_account("endpoint-controller"),
        events: Recorder::start(&api, CONTROLLER_NAME, "endpoint-controller"),
    };
    let shared = Shared::new(State::default(), &["services", "pods", "endpoints"]);
    shared.watch(services, "services", on_services);
    shared.watch_pods(&pods, "pods", |inner, delta| {
        let state = &mut inner.state;
        model::on_pods(&state.services, &mut state.pods, &mut inner.queue, delta);
    });
    shared.watch(endpoints, "endpoints", on_endpoints);
    let writer = Arc::new(writer);
    let worker = shared.clone();
    worker
        .work("endpoints", BACKOFF, move |key| {
            let (shared, writer) = (shared.clone(), writer.clone());
            async move { sync(&shared, &writer, &key).await }
        })
        .await;
}

fn on_services(inner: &mut Inner<State>, delta: Delta) {
    if matches!(delta, Delta::Replace(_)) {
        // Services gone while the watch was down: their Endpoints go too.
        for old in inner.state.services.all() {
            inner.queue.add(old.key());
        }
    }
    model::on_services(&mut inner.state.services, &mut inner.queue, delta);
}

/// Only deletions concern the controller (a deleted Endpoints of a Service is written again);
/// the index keeps the rest to compare against.
fn on_endpoints(inner: &mut Inner<State>, delta: Delta) {
    match delta {
        Delta::Replace(items) => {
            let old = inner.state.endpoints.replace(items);
            let first = !std::mem::replace(&mut inner.state.listed_endpoints, true);
            let keys: Vec<Key> = if first {
                inner
                    .state
                    .endpoints
                    .keys()
                    .filter(|k| {
                        inner.state.endpoints.get(k).is_some_and(|v| {
                            v.pointer("/metadata/annotations")
                                .and_then(Value::as_object)
                                .is_none_or(|a| !a.contains_key(ANNOTATION_LEADER))
                        })
                    })
                    .cloned()
                    .collect()
            } else {
                old.into_keys()
                    .filter(|k| inner.state.endpoints.get(k).is_none())
                    .collect()
            };
            for key in keys {
                inner.queue.add(key);
            }
        }
        Delta::Upsert(v) => {
            let _: Applied = inner.state.endpoints.upsert(v);
        }
        Delta::Deleted(v) => {
            if inner.state.endpoints.remove(&v).is_some() {
                inner.queue.add(key_of(&v));
            }
        }
    }
}

/// What one sync decided.
enum Action {
    None,
    Delete,
    Create(Value),
    Update(Value),
}

async fn sync(shared: &Shared<State>, writer: &Writer, key: &Key) -> Result<(), String> {
    let action = shared.update(|inner| plan(&mut inner.state, key));
    match action {
        Action::None => Ok(()),
        Action::Delete => match writer.delete(key).await {
            Ok(Some(rv)) => {
                shared.update(|inner| inner.state.endpoints.deleted(key.clone(), rv));
                Ok(())
            }
            // Already gone: the index may still hold it until the deletion event arrives.
            Ok(None) => {
                shared.update(|inner| inner.state.endpoints.forget(key));
                Ok(())
            }
            Err(s) => Err(s.message),
        },
        Action::Create(obj) => {
            // Upstream's new Endpoints carry no namespace (the create names it in the path),
            // so the Event's reference has none and the Event lands in `default`.
            let mut object = ObjectReference::to("v1", "Endpoints", &obj);
            object.namespace.clear();
            match writer.create(&key.0, obj).await {
                Ok(created) => {
                    shared.update(|inner| inner.state.endpoints.wrote(created));
                    Ok(())
                }
                Err(s) if namespace_closed(&s) => Ok(()),
                Err(s) => {
                    writer.events.warning(
                        &object,
                        "FailedToCreateEndpoint",
                        format!(
                            "Failed to create endpoint for service {}/{}: {}",
                            key.0, key.1, s.message
                        ),
                    );
                    Err(format!("creating endpoints: {}", s.message))
                }
            }
        }
        Action::Update(obj) => {
            let object = ObjectReference::to("v1", "Endpoints", &obj);
            match writer.update(obj).await {
                Ok(updated) => {
                    shared.update(|inner| inner.state.endpoints.wrote(updated));
                    Ok(())
                }
                Err(s) => {
                    writer.events.warning(
                        &object,
                        "FailedToUpdateEndpoint",
                        format!(
                            "Failed to update endpoint {}/{}: {}",
                            key.0, key.1, s.message
                        ),
                    );
                    Err(format!("updating endpoints: {}", s.message))
                }
            }
        }
    }
}

/// `syncService`, up to the write.
fn plan(state: &mut State, key: &Key) -> Action {
    let Some(svc) = state.services.get(key) else {
        state.triggers.forget(key);
        return Action::Delete;
    };
    if !svc.selects_pods() {
        return Action::None;
    }
    let pods: Vec<&Pod> = state.pods.selected_by(svc).collect();
    let trigger = state.triggers.compute(svc, pods.iter().copied());
    let desired = desired_subsets(svc, &pods);
    let current = state.endpoints.get(key);
    if let Some(current) = current {
        let have = subsets::subsets_of(current);
        let unchanged =
            subsets::same(&have, &desired) || subsets::same(&subsets::repack(&have), &desired);
        if unchanged
            && labels_correct(current, &svc.labels)
            && capacity_annotation_correct(current, &have)
        {
            return Action::None;
        }
    }
    let mut obj = current.cloned().unwrap_or_else(|| {
        json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": svc.name, "namespace": svc.namespace},
        })
    });
    let mut subsets = desired;
    let truncated = subsets::truncate(&mut subsets, MAX_CAPACITY);
    let meta = obj.metadata_mut();
    let mut annotations = meta
        .get("annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match trigger {
        Some(t) => {
            annotations.insert(ANNOTATION_TRIGGER_TIME.into(), rfc3339_nano(t).into());
        }
        None => {
            annotations.remove(ANNOTATION_TRIGGER_TIME);
        }
    }
    if truncated {
        annotations.insert(ANNOTATION_OVER_CAPACITY.into(), "truncated".into());
    } else {
        annotations.remove(ANNOTATION_OVER_CAPACITY);
    }
    set_map(meta, "annotations", annotations);
    let mut labels: Map<String, Value> = svc
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    if svc.headless() {
        labels.insert(LABEL_HEADLESS.into(), "".into());
    } else {
        labels.remove(LABEL_HEADLESS);
    }
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    set_map(meta, "labels", labels);
    let obj_map = obj.as_object_mut().expect("an object");
    if subsets.is_empty() {
        obj_map.remove("subsets");
    } else {
        obj_map.insert("subsets".into(), subsets::to_value(&subsets));
    }
    if current.is_some() {
        Action::Update(obj)
    } else {
        Action::Create(obj)
    }
}

fn set_map(meta: &mut Map<String, Value>, field: &str, map: Map<String, Value>) {
    if map.is_empty() {
        meta.remove(field);
    } else {
        meta.insert(field.into(), Value::Object(map));
    }
}

/// The packed subsets of a Service over the pods it selects.
fn desired_subsets(svc: &Service, pods: &[&Pod]) -> Vec<Subset> {
    let mut subsets = Vec::new();
    for pod in pods {
        if !pod.in_endpoints(svc.publish_not_ready) {
            continue;
        }
        let Some(address) = address_for(svc, pod) else {
            continue;
        };
        let ready = svc.publish_not_ready || pod.ready;
        if svc.ports.is_empty() {
            // A headless Service may have no ports; others without ports get no addresses.
            if svc.cluster_ip == "None" {
                subsets.push(subsets::single(address, Vec::new(), ready));
            }
            continue;
        }
        for sp in &svc.ports {
            let Some(number) = pod.find_port(sp) else {
                continue;
            };
            let port = Port {
                name: sp.name.clone(),
                port: number,
                protocol: sp.protocol.clone(),
                app_protocol: sp.app_protocol.clone(),
            };
            subsets.push(subsets::single(address.clone(), vec![port], ready));
        }
    }
    subsets::repack(&subsets)
}

/// `podToEndpointAddressForService`: the pod's IP of the Service's family, its node, its
/// hostname when the Service is its subdomain, and a reference to it.
fn address_for(svc: &Service, pod: &Pod) -> Option<Address> {
    let ip = pod
        .ips_of_family(svc.endpoints_family_v6(pod))
        .into_iter()
        .next()?;
    Some(Address {
        ip,
        hostname: pod.hostname_for(svc).unwrap_or_default().to_string(),
        node_name: (!pod.node_name.is_empty()).then(|| pod.node_name.clone()),
        target_ref: Some(ObjectRef::pod(&pod.namespace, &pod.name, &pod.uid)),
    })
}

/// `labelsCorrectForEndpoints`: the Service's labels, the headless label aside, and the
/// managed-by label.
fn labels_correct(
    endpoints: &Value,
    svc_labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let labels = model::string_map(endpoints.pointer("/metadata/labels"));
    if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(CONTROLLER_NAME) {
        return false;
    }
    let own: Vec<_> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != LABEL_HEADLESS && k.as_str() != LABEL_MANAGED_BY)
        .collect();
    own.len() == svc_labels.len() && own.iter().all(|(k, v)| svc_labels.get(*k) == Some(*v))
}

/// `capacityAnnotationSetCorrectly`: within capacity and not marked over it.
fn capacity_annotation_correct(endpoints: &Value, subsets: &[Subset]) -> bool {
    subsets::count(subsets) <= MAX_CAPACITY
        && endpoints
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_none_or(|a| !a.contains_key(ANNOTATION_OVER_CAPACITY))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec: Value) -> Service {
        Service::from_value(&json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"}},
            "spec": spec,
        }))
    }

    fn pod(name: &str, ip: &str, ready: bool) -> Pod {
        Pod::from_value(&json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
                "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "containers": [{"ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"podIP": ip, "phase": "Running", "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" },
                 "lastTransitionTime": "2026-01-01T00:01:00Z"}]},
        }))
    }

    fn state_with(svc: Service, pods: Vec<Pod>) -> State {
        let mut state = State::default();
        state.services.insert(svc);
        state.pods.replace(pods);
        state
    }

    fn key() -> Key {
        ("ns".into(), "web".into())
    }

    #[test]
    fn ready_and_not_ready_pods_on_the_named_target_port() {
        let svc = service(
            json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10",
            "ipFamilies": ["IPv4"],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]}),
        );
        let mut state = state_with(
            svc,
            vec![
                pod("b", "10.0.0.2", false),
                pod("a", "10.0.0.1", true),
                pod("c", "", true),
            ],
        );
        let Action::Create(obj) = plan(&mut state, &key()) else {
            panic!("a create")
        };
        assert_eq!(
            obj["subsets"],
            json!([{
                "addresses": [{"ip": "10.0.0.1", "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "a-uid"}}],
                "notReadyAddresses": [{"ip": "10.0.0.2", "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": "ns", "name": "b", "uid": "b-uid"}}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            }])
        );
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"app": "web", "endpoints.kubernetes.io/managed-by": "endpoint-controller"})
        );
        assert_eq!(
            obj["metadata"]["annotations"][ANNOTATION_TRIGGER_TIME],
            "2026-01-01T00:00:00Z"
        );
        // Written as planned, the next sync has nothing to do.
        let mut written = obj.clone();
        written["metadata"]["resourceVersion"] = json!("5");
        state.endpoints.wrote(written);
        assert!(matches!(plan(&mut state, &key()), Action::None));
    }

    #[test]
    fn publish_not_ready_terminating_and_headless() {
        let svc = service(json!({"selector": {"app": "web"}, "clusterIP": "None",
            "publishNotReadyAddresses": true}));
        let mut deleting = pod("d", "10.0.0.4", true);
        deleting.deleting = true;
        let mut state = state_with(svc, vec![pod("b", "10.0.0.2", false), deleting]);
        let Action::Create(obj) = plan(&mut state, &key()) else {
            panic!("a create")
        };
        // Headless without ports: addresses without ports; not ready published as ready;
        // terminating pods kept only because not-ready addresses are published.
        let subsets = &obj["subsets"];
        assert_eq!(subsets.as_array().unwrap().len(), 1);
        assert_eq!(subsets[0]["addresses"].as_array().unwrap().len(), 2);
        assert!(subsets[0].get("ports").is_none());
        assert_eq!(obj["metadata"]["labels"][LABEL_HEADLESS], "");
    }

    #[test]
    fn no_selector_no_endpoints_and_gone_service_deletes() {
        let mut state = state_with(service(json!({"ports": [{"port": 80}]})), vec![]);
        assert!(matches!(plan(&mut state, &key()), Action::None));
        let mut state = State::default();
        assert!(matches!(plan(&mut state, &key()), Action::Delete));
    }

    #[test]
    fn over_capacity_is_truncated_and_marked() {
        let svc = service(
            json!({"selector": {"app": "web"}, "clusterIP": "10.96.0.10",
            "ports": [{"port": 80, "targetPort": 8080}]}),
        );
        let pods = (0..1005)
            .map(|i| {
                pod(
                    &format!("p{i}"),
                    &format!("10.1.{}.{}", i / 250, i % 250 + 1),
                    true,
                )
            })
            .collect();
        let mut state = state_with(svc, pods);
        let Action::Create(obj) = plan(&mut state, &key()) else {
            panic!("a create")
        };
        assert_eq!(
            obj["subsets"][0]["addresses"].as_array().unwrap().len(),
            1000
        );
        assert_eq!(
            obj["metadata"]["annotations"][ANNOTATION_OVER_CAPACITY],
            "truncated"
        );
    }

    #[test]
    fn labels_follow_the_service() {
        let ep = json!({"metadata": {"labels": {"app": "web", LABEL_HEADLESS: "",
            LABEL_MANAGED_BY: CONTROLLER_NAME}}});
        let svc_labels = [("app".to_string(), "web".to_string())].into();
        assert!(labels_correct(&ep, &svc_labels));
        assert!(!labels_correct(&ep, &Default::default()));
        let unmanaged = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(!labels_correct(&unmanaged, &svc_labels));
    }
}
