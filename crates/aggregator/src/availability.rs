//! The `Available` condition of every APIService (upstream: pkg/controllers/status/local and
//! .../remote). A local APIService is always available (`Local`). A remote one is checked as
//! upstream checks it, in this order: its Service exists (`ServiceNotFound`); a ClusterIP
//! Service has the port it names (`ServicePortError`); EndpointSlices of the Service exist
//! (`EndpointsNotFound`) and one of them has a ready address for that port's name
//! (`MissingEndpoints`); the extension server answers its group version's discovery document
//! within 5 s, to one of five attempts (`FailedDiscoveryCheck`); else `Passed`. What discovery
//! lists of it is `discovery_manager`'s, which asks again after every change of the APIService.
//!
//! A remote APIService is checked when it, its Service or its EndpointSlices change, every 30 s
//! after a pass, and after a failure again with the per-item exponential backoff of upstream's
//! queue (5 ms doubling, at most 30 s); up to five are checked at once, each by itself. The condition is written only when it changes (its
//! `lastTransitionTime` only when its status does), and the metrics follow every check:
//! `aggregator_unavailable_apiservice` (1 while unavailable) and
//! `aggregator_unavailable_apiservice_total` (transitions to unavailable, by reason).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::metrics::{Stability, unbuildable};
use apiserver::registry::{Requester, UpdateOptions};
use prometheus::{GaugeVec, IntCounterVec};
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion};

use crate::{Aggregator, ApiService, ServiceRef};

static UNAVAILABLE: LazyLock<GaugeVec> = LazyLock::new(|| {
    apiserver::metrics::register(
        GaugeVec::new(
            apiserver::metrics::opts(
                "aggregator_unavailable_apiservice",
                Stability::Alpha,
                "Gauge of APIServices which are marked as unavailable broken down by APIService name.",
            ),
            &["name"],
        )
        .unwrap_or_else(|e| unbuildable("aggregator_unavailable_apiservice", e)),
    )
});

static UNAVAILABLE_TOTAL: LazyLock<IntCounterVec> = LazyLock::new(|| {
    apiserver::metrics::register(
        IntCounterVec::new(
            apiserver::metrics::opts(
                "aggregator_unavailable_apiservice_total",
                Stability::Alpha,
                "Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
            ),
            &["name", "reason"],
        )
        .unwrap_or_else(|e| unbuildable("aggregator_unavailable_apiservice_total", e)),
    )
});

/// The `aggregator_unavailable_apiservice` family (registered on first use).
pub fn unavailable_gauge() -> &'static GaugeVec {
    &UNAVAILABLE
}

/// Drops a deleted APIService's series.
pub(crate) fn forget(name: &str) {
    let _ = UNAVAILABLE.remove_label_values(&[name]);
}

/// How long a passed check holds (upstream's resync period).
const RESYNC: Duration = Duration::from_secs(30);
/// How often the controller looks for changes.
const TICK: Duration = Duration::from_millis(500);

/// The `Available` condition a check arrives at.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Condition {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    fn new(status: &'static str, reason: &'static str, message: String) -> Condition {
        Condition {
            status,
            reason,
            message,
        }
    }
}

/// When a remote APIService is next checked, and what it was checked against.
#[derive(Default)]
struct Schedule {
    fingerprint: String,
    due: Option<Instant>,
    failures: u32,
    /// A check of it is under way (one at a time per APIService, as upstream's queue has it).
    running: bool,
}

type Schedules = Arc<Mutex<HashMap<String, Schedule>>>;

/// Remote checks under way at once at most: upstream's remote controller runs five workers, so
/// that one slow extension server (a discovery request waits up to 5 s) holds up only its own.
const WORKERS: usize = 5;

/// Runs the local and remote availability controllers until the process ends.
pub(crate) async fn run(agg: Arc<Aggregator>) {
    let schedules: Schedules = Arc::default();
    let workers = Arc::new(tokio::sync::Semaphore::new(WORKERS));
    loop {
        let now = Instant::now();
        let all = agg.snapshot();
        lock(&schedules).retain(|name, _| all.iter().any(|s| &s.name == name));
        for apiservice in &all {
            let Some(service) = &apiservice.service else {
                let local = Condition::new(
                    "True",
                    "Local",
                    "Local APIServices are always available".into(),
                );
                record(&agg, apiservice, &local).await;
                continue;
            };
            let fingerprint = fingerprint(&agg, apiservice, service).await;
            {
                let mut schedules = lock(&schedules);
                let schedule = schedules.entry(apiservice.name.clone()).or_default();
                let changed = fingerprint != schedule.fingerprint;
                if schedule.running || (!changed && schedule.due.is_some_and(|due| now < due)) {
                    continue;
                }
                schedule.fingerprint = fingerprint;
                schedule.running = true;
            }
            tokio::spawn(check_and_record(
                agg.clone(),
                apiservice.clone(),
                schedules.clone(),
                workers.clone(),
            ));
        }
        tokio::time::sleep(TICK).await;
    }
}

fn lock(schedules: &Schedules) -> std::sync::MutexGuard<'_, HashMap<String, Schedule>> {
    schedules.lock().unwrap_or_else(|e| e.into_inner())
}

/// One remote APIService's check, on one of the workers: the condition written, the OpenAPI
/// documents kept, and when to check it again.
async fn check_and_record(
    agg: Arc<Aggregator>,
    apiservice: Arc<ApiService>,
    schedules: Schedules,
    workers: Arc<tokio::sync::Semaphore>,
) {
    // The semaphore is never closed; were it, the check would run without a worker.
    let _worker = workers.acquire_owned().await.ok();
    let Some(service) = &apiservice.service else {
        return;
    };
    let condition = check(&agg, &apiservice, service).await;
    if condition.status == "True" {
        crate::openapi::refresh(&agg, &apiservice).await;
    }
    let written = record(&agg, &apiservice, &condition).await;
    let mut schedules = lock(&schedules);
    let Some(schedule) = schedules.get_mut(&apiservice.name) else {
        return;
    };
    schedule.running = false;
    if condition.status == "True" && written {
        schedule.failures = 0;
        schedule.due = Some(Instant::now() + RESYNC);
    } else {
        // Upstream's queue: 5 ms doubling per failure of this item, at most 30 s.
        schedule.failures = schedule.failures.saturating_add(1);
        let backoff = Duration::from_millis(5)
            .saturating_mul(1u32 << schedule.failures.min(20))
            .min(RESYNC);
        schedule.due = Some(Instant::now() + backoff);
    }
}

/// What a remote APIService's check depends on, as resourceVersions: a change is a reason to
/// check again at once (upstream's informer events).
async fn fingerprint(agg: &Aggregator, apiservice: &ApiService, service: &ServiceRef) -> String {
    let mut out = apiservice.object.resource_version().to_string();
    if let Some(store) = agg.api.get("", "v1", "services")
        && let Ok(o) = store
            .get(&service.namespace, &service.name, ResourceVersion::Any)
            .await
        && let Ok(v) = o.value()
    {
        out.push('/');
        out.push_str(v.resource_version());
    }
    for slice in slices(agg, service).await.unwrap_or_default() {
        out.push('/');
        out.push_str(slice.resource_version());
    }
    out
}

/// The EndpointSlices of the Service (labelled with its name), as a lister would give them.
async fn slices(agg: &Aggregator, service: &ServiceRef) -> Result<Vec<Value>, String> {
    let store = agg
        .api
        .get("discovery.k8s.io", "v1", "endpointslices")
        .ok_or("endpointslices are not served")?;
    let list = store
        .list(
            &service.namespace,
            &ListOptions {
                resource_version: ResourceVersion::Any,
                ..Default::default()
            },
        )
        .await
        .map_err(|s| s.message)?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| o.value().ok())
        .filter(|s| {
            s.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(service.name.as_str())
        })
        .collect())
}

/// Whether the Service has a ready endpoint for the port the APIService names, read from the
/// watch caches as upstream's proxy reads its listers: the proxy's per-request check (the dial
/// itself resolves through the server's resolver, only for new connections).
pub(crate) async fn has_endpoint(agg: &Aggregator, service: &ServiceRef) -> bool {
    let Some(services) = agg.api.get("", "v1", "services") else {
        return false;
    };
    let Ok(svc) = services
        .get(&service.namespace, &service.name, ResourceVersion::Any)
        .await
        .and_then(|o| o.value().map_err(Status::internal))
    else {
        return false;
    };
    let Some(port) = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(i64::from(service.port)))
    else {
        return false;
    };
    let port_name = port.get("name").and_then(Value::as_str).unwrap_or("");
    slices(agg, service)
        .await
        .is_ok_and(|s| has_available_endpoint(port_name, &s))
}

/// Whether a slice has a ready address serving the port named `port_name` (upstream's
/// `hasAvailableEndpoint`: a missing ready condition counts as ready).
fn has_available_endpoint(port_name: &str, slices: &[Value]) -> bool {
    slices.iter().any(|slice| {
        let has_port = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|p| {
                p.get("name").and_then(Value::as_str).unwrap_or("") == port_name
                    && p.get("port").is_some_and(|p| !p.is_null())
            });
        has_port
            && slice
                .get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|e| {
                    e.pointer("/conditions/ready") != Some(&Value::Bool(false))
                        && e.get("addresses")
                            .and_then(Value::as_array)
                            .is_some_and(|a| !a.is_empty())
                })
    })
}

/// Upstream's checks of a remote APIService, in its order and words.
async fn check(agg: &Aggregator, apiservice: &ApiService, service: &ServiceRef) -> Condition {
    let (ns, name) = (&service.namespace, &service.name);
    let Some(services) = agg.api.get("", "v1", "services") else {
        return Condition::new(
            "Unknown",
            "ServiceAccessError",
            format!("service/{name} in {ns:?} cannot be checked due to: services are not served"),
        );
    };
    let svc = match services.get(ns, name, ResourceVersion::Any).await {
        Ok(o) => o.value().unwrap_or(Value::Null),
        Err(s) if s.code == 404 => {
            return Condition::new(
                "False",
                "ServiceNotFound",
                format!("service/{name} in {ns:?} is not present"),
            );
        }
        Err(s) => {
            return Condition::new(
                "Unknown",
                "ServiceAccessError",
                format!(
                    "service/{name} in {ns:?} cannot be checked due to: {}",
                    s.message
                ),
            );
        }
    };
    let service_type = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if service_type == "ClusterIP" {
        let port = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(i64::from(service.port)));
        let Some(port) = port else {
            return Condition::new(
                "False",
                "ServicePortError",
                format!(
                    "service/{name} in {ns:?} is not listening on port {}",
                    service.port
                ),
            );
        };
        let port_name = port.get("name").and_then(Value::as_str).unwrap_or("");
        let slices = match slices(agg, service).await {
            Ok(s) => s,
            Err(e) => {
                return Condition::new(
                    "Unknown",
                    "EndpointsAccessError",
                    format!("service/{name} in {ns:?} cannot be checked due to: {e}"),
                );
            }
        };
        if slices.is_empty() {
            return Condition::new(
                "False",
                "EndpointsNotFound",
                format!("cannot find endpointslices for service/{name} in {ns:?}"),
            );
        }
        if !has_available_endpoint(port_name, &slices) {
            return Condition::new(
                "False",
                "MissingEndpoints",
                format!(
                    "endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"
                ),
            );
        }
    }
    let path = if apiservice.name == "v1." {
        format!("/api/{}", apiservice.version)
    } else {
        format!("/apis/{}/{}", apiservice.group, apiservice.version)
    };
    // Five attempts at once; one success is enough.
    let attempts = (0..5).map(|_| agg.transports.get(apiservice, &path));
    let results = futures_util::future::join_all(attempts).await;
    let mut last_error = String::new();
    for result in results {
        match result {
            Ok(_) => return Condition::new("True", "Passed", "all checks passed".into()),
            Err(e) => last_error = e,
        }
    }
    Condition::new("False", "FailedDiscoveryCheck", last_error)
}

/// The system user the server's own writes are made as (its loopback client's).
fn apiserver_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    }
}

/// The conditions after setting `want` (upstream's `SetAPIServiceCondition`: the transition
/// time moves only when the status does).
fn with_condition(status: &Value, want: &Condition, now: &str) -> Value {
    let mut status = if status.is_object() {
        status.clone()
    } else {
        json!({})
    };
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let existing = conditions.iter_mut().find(|c| c["type"] == "Available");
    let transition = match &existing {
        Some(c) if c["status"] == want.status => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now)),
        _ => json!(now),
    };
    let mut condition = json!({
        "type": "Available",
        "status": want.status,
        "lastTransitionTime": transition,
        "reason": want.reason,
    });
    if !want.message.is_empty() {
        condition["message"] = json!(want.message);
    }
    match existing {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
    status["conditions"] = json!(conditions);
    status
}

/// Sets the metrics and writes the condition when it changed; false when the write failed (a
/// conflict with a newer object included: the next pass sees that one).
async fn record(agg: &Aggregator, apiservice: &ApiService, want: &Condition) -> bool {
    UNAVAILABLE
        .with_label_values(&[apiservice.name.as_str()])
        .set(if want.status == "True" { 0.0 } else { 1.0 });
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let current = apiservice
        .object
        .get("status")
        .cloned()
        .unwrap_or(Value::Null);
    let status = with_condition(&current, want, &now);
    if current == status {
        return true;
    }
    let Some(store) = agg.api.get("apiregistration.k8s.io", "v1", "apiservices") else {
        return false;
    };
    let rv = apiservice.object.resource_version().to_string();
    let mut updater = |cur: Option<&Value>| -> Result<Value, Status> {
        let mut obj = cur.cloned().ok_or_else(|| Status::internal("gone"))?;
        obj["status"] = status.clone();
        // Pinned to what was checked: a newer APIService is checked again instead.
        obj.set_meta("resourceVersion", rv.as_str());
        Ok(obj)
    };
    let opts = UpdateOptions {
        write: agg.api.internal_write(store, "kube-apiserver"),
        subresource: "status".into(),
        ..UpdateOptions::default()
    };
    let user = apiserver_user();
    match store
        .update(
            &Requester { user: &user },
            "",
            &apiservice.name,
            &mut updater,
            &opts,
        )
        .await
    {
        Ok(_) => {
            if want.status != "True" && apiservice.available {
                UNAVAILABLE_TOTAL
                    .with_label_values(&[apiservice.name.as_str(), want.reason])
                    .inc();
            }
            if apiservice.available != (want.status == "True") {
                tracing::info!(apiservice = %apiservice.name, status = want.status, reason = want.reason, message = %want.message, "changing APIService availability");
            }
            true
        }
        Err(s) => {
            if s.code != 409 && s.code != 404 {
                tracing::warn!(apiservice = %apiservice.name, error = %s.message, "cannot write APIService availability");
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let before = json!({"conditions": [{"type": "Available", "status": "False",
            "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "MissingEndpoints", "message": "x"}]});
        let still_down = Condition::new("False", "FailedDiscoveryCheck", "y".into());
        let after = with_condition(&before, &still_down, "2030-01-01T00:00:00Z");
        assert_eq!(
            after["conditions"][0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(after["conditions"][0]["reason"], "FailedDiscoveryCheck");
        let up = Condition::new("True", "Passed", "all checks passed".into());
        let after = with_condition(&before, &up, "2030-01-01T00:00:00Z");
        assert_eq!(
            after["conditions"][0]["lastTransitionTime"],
            "2030-01-01T00:00:00Z"
        );
        assert_eq!(after["conditions"].as_array().unwrap().len(), 1);
        // The same condition again is no change at all: nothing is written.
        assert_eq!(with_condition(&after, &up, "2040-01-01T00:00:00Z"), after);
    }

    #[test]
    fn only_a_ready_address_on_the_named_port_counts() {
        let slice = |port: &str, ready: Value| {
            json!({"ports": [{"name": port, "port": 8443}],
                   "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": ready}}]})
        };
        assert!(has_available_endpoint(
            "https",
            &[slice("https", Value::Null)]
        ));
        assert!(has_available_endpoint(
            "https",
            &[slice("https", json!(true))]
        ));
        assert!(!has_available_endpoint(
            "https",
            &[slice("https", json!(false))]
        ));
        assert!(!has_available_endpoint(
            "https",
            &[slice("other", json!(true))]
        ));
        assert!(!has_available_endpoint(
            "",
            &[json!({"ports": [{"port": 1}], "endpoints": []})]
        ));
    }
}
