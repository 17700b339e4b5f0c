//! What the aggregated discovery documents list of each remote APIService (upstream:
//! kube-aggregator's discovery manager, handler_discovery.go). Every remote APIService's group
//! version is listed, available or not: with the extension server's own entry, `freshness:
//! Current`, when its discovery was fetched; with no resources and `freshness: Stale` when it
//! could not be (the APIService unavailable, no endpoint, an error or a timeout), which also
//! keeps the group in the legacy `/apis` list, as upstream builds that list from the APIServices
//! whatever their availability.
//!
//! The extension server is asked as upstream asks it, through the proxy's checks (an APIService
//! not marked available, or a Service without a ready endpoint, is a 503 without a request):
//! `GET /apis` with the aggregated v2 (and v2beta1) `Accept` header, as `system:kube-aggregator`
//! in `system:masters`, with `If-None-Match` when an `ETag` is kept for its Service; a 304 keeps
//! the document. An answer that is not an aggregated document (an extension server serving only
//! legacy discovery) falls back to `GET /apis/<group>/<version>` (`Accept: application/json`, as
//! `system:kube-aggregator` without groups), converted to an entry and not kept. One fetched
//! document serves every APIService of the same Service until one of them changes.
//!
//! Every remote APIService there when it starts is synced once (fetched or failed) before
//! `apiservice-discovery-controller` passes, as upstream's hook waits for the first sync. An
//! APIService is synced when it changes (its resourceVersion: its `Available` condition
//! included, so that one becoming available is fetched at once), every minute after a success,
//! and after a failure with upstream's backoff (500 ms doubling, at most a minute); two at once.
//!
//! What it must not do: fetch anything for a local APIService (those are this server's own
//! rows), or hold a lock across a request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::registry::ResourceInfo;
use serde_json::{Value, json};

use crate::{Aggregator, ApiService, Readiness, ServiceRef};

/// Upstream's `discoveryRefreshInterval`: how often a synced APIService is fetched again, and
/// the cap of the failure backoff.
const REFRESH: Duration = Duration::from_secs(60);
/// The first retry after a failure (upstream's rate limiter base), doubled per failure.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// How often the manager looks for changed or due APIServices.
const TICK: Duration = Duration::from_millis(250);
/// Upstream runs two workers.
const WORKERS: usize = 2;

/// The `Accept` of upstream's request for an extension server's aggregated document.
const ACCEPT_AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// What discovery lists of one remote APIService.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// Its `APIVersionDiscovery`, `freshness` set.
    pub entry: Value,
    /// The entry's resources as rows (none while stale).
    pub rows: Vec<ResourceInfo>,
}

/// The last aggregated document fetched from one Service (upstream's `cachedResult`).
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    versions: HashMap<(String, String), Value>,
    etag: String,
    /// Taken before the request was sent: the document is at least this fresh.
    fetched: Instant,
}

/// The manager's state, kept in the aggregator.
#[derive(Default)]
pub(crate) struct State {
    /// By APIService name.
    pub listed: HashMap<String, Listed>,
    cache: HashMap<ServiceRef, Cached>,
}

/// When each APIService is next synced.
struct Schedule {
    resource_version: String,
    /// When it was last seen changed (upstream's `lastMarkedDirty`): a kept document older than
    /// this is fetched again.
    dirty: Instant,
    due: Instant,
    failures: u32,
    running: bool,
    /// It has been synced at least once.
    synced: bool,
}

/// Runs the manager until the process ends; sets `apiservice-discovery-controller` once every
/// remote APIService there at start has been synced.
pub(crate) async fn run(agg: Arc<Aggregator>, readiness: Arc<Readiness>) {
    let schedules: Arc<Mutex<HashMap<String, Schedule>>> = Arc::default();
    let workers = Arc::new(tokio::sync::Semaphore::new(WORKERS));
    let mut awaiting: Option<Vec<String>> = None;
    loop {
        let now = Instant::now();
        let remote: Vec<Arc<ApiService>> = agg
            .snapshot()
            .into_iter()
            .filter(|s| s.service.is_some())
            .collect();
        {
            // An APIService deleted, or made local, is no longer listed from here; a Service no
            // APIService names any more loses its document (upstream's `removeUnusedServices`).
            let mut state = agg.discovery.write().unwrap_or_else(|e| e.into_inner());
            state
                .listed
                .retain(|name, _| remote.iter().any(|s| &s.name == name));
            state
                .cache
                .retain(|key, _| remote.iter().any(|s| s.service.as_ref() == Some(key)));
        }
        let mut due = Vec::new();
        {
            let mut schedules = schedules.lock().unwrap_or_else(|e| e.into_inner());
            schedules.retain(|name, _| remote.iter().any(|s| &s.name == name));
            for apiservice in &remote {
                let rv = apiservice.object.resource_version();
                let schedule =
                    schedules
                        .entry(apiservice.name.clone())
                        .or_insert_with(|| Schedule {
                            resource_version: String::new(),
                            dirty: now,
                            due: now,
                            failures: 0,
                            running: false,
                            synced: false,
                        });
                if schedule.resource_version != rv {
                    schedule.resource_version = rv.to_string();
                    schedule.dirty = now;
                    schedule.due = now;
                }
                if !schedule.running && schedule.due <= now {
                    schedule.running = true;
                    due.push((apiservice.clone(), schedule.dirty));
                }
            }
            let awaiting =
                awaiting.get_or_insert_with(|| remote.iter().map(|s| s.name.clone()).collect());
            if !awaiting.is_empty() || !readiness.discovery.is_ok() {
                // A deleted one is no longer waited for.
                awaiting.retain(|name| schedules.get(name).is_some_and(|s| !s.synced));
                if awaiting.is_empty() {
                    readiness.discovery.set(true);
                }
            }
        }
        for (apiservice, dirty) in due {
            let (agg, schedules, workers) = (agg.clone(), schedules.clone(), workers.clone());
            tokio::spawn(async move {
                // The semaphore is never closed; were it, the sync would run without a worker.
                let _worker = workers.acquire_owned().await.ok();
                let ok = sync(&agg, &apiservice, dirty).await;
                let mut schedules = schedules.lock().unwrap_or_else(|e| e.into_inner());
                let Some(schedule) = schedules.get_mut(&apiservice.name) else {
                    return;
                };
                schedule.running = false;
                schedule.synced = true;
                // Changed while it was fetched: due at once, as the change set it.
                if schedule.dirty > dirty {
                    return;
                }
                let now = Instant::now();
                if ok {
                    schedule.failures = 0;
                    // Upstream marks it dirty again, so that the next sync fetches.
                    schedule.dirty = now;
                    schedule.due = now + REFRESH;
                } else {
                    schedule.due = now + backoff(schedule.failures);
                    schedule.failures = schedule.failures.saturating_add(1);
                }
            });
        }
        tokio::time::sleep(TICK).await;
    }
}

/// The wait before the retry after `failures` earlier failures in a row.
fn backoff(failures: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1u32 << failures.min(16))
        .min(REFRESH)
}

/// Lists one APIService's group version from a fresh (or fresh enough) document; false when it
/// could not be fetched (it is then listed as stale).
async fn sync(agg: &Aggregator, apiservice: &ApiService, dirty: Instant) -> bool {
    let fetched = fetch(agg, apiservice, dirty).await;
    let key = (apiservice.group.clone(), apiservice.version.clone());
    let (mut entry, ok) = match &fetched {
        Ok(versions) => (
            versions
                .get(&key)
                .cloned()
                // Fetched, but the extension server does not list this group version.
                .unwrap_or_else(|| json!({"version": apiservice.version})),
            true,
        ),
        Err(e) => {
            tracing::debug!(apiservice = %apiservice.name, error = %e, "aggregated discovery not fetched");
            (json!({"version": apiservice.version}), false)
        }
    };
    entry["freshness"] = json!(if ok { "Current" } else { "Stale" });
    let rows = crate::discovery::rows(&apiservice.group, &apiservice.version, &entry);
    agg.discovery
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .listed
        .insert(apiservice.name.clone(), Listed { entry, rows });
    ok
}

/// The group versions' entries the extension server behind `apiservice` lists, as upstream's
/// `fetchFreshDiscoveryForService` finds them.
async fn fetch(
    agg: &Aggregator,
    apiservice: &ApiService,
    dirty: Instant,
) -> Result<HashMap<(String, String), Value>, String> {
    let Some(service) = &apiservice.service else {
        return Err("not a remote APIService".into());
    };
    let cached = agg
        .discovery
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .cache
        .get(service)
        .cloned();
    if let Some(c) = &cached
        && c.fetched > dirty
    {
        return Ok(c.versions.clone());
    }
    let unavailable = || {
        format!(
            "service {}/{}:{} returned non-success response code: 503",
            service.namespace, service.name, service.port
        )
    };
    // The proxy's own refusals, before any request.
    if !apiservice.available || !crate::availability::has_endpoint(agg, service).await {
        return Err(unavailable());
    }
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(ACCEPT_AGGREGATED),
    );
    let etag = cached.as_ref().map(|c| c.etag.clone()).unwrap_or_default();
    if !etag.is_empty()
        && let Ok(v) = http::HeaderValue::from_str(&etag)
    {
        headers.insert(http::header::IF_NONE_MATCH, v);
    }
    let aggregator = UserInfo {
        name: "system:kube-aggregator".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    };
    let started = Instant::now();
    // A failure to reach it is the proxy's 503.
    let (status, answer_headers, body) = agg
        .transports
        .request(apiservice, "/apis", &headers, &aggregator)
        .await
        .map_err(|_| unavailable())?;
    let content_type = answer_headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match status {
        http::StatusCode::NOT_MODIFIED => {
            // Kept as it was, fresh from now (a 304 to a request without `If-None-Match` keeps
            // nothing, as upstream's empty cache entry does).
            let versions = cached.map(|c| c.versions).unwrap_or_default();
            store(
                agg,
                service,
                Cached {
                    versions: versions.clone(),
                    etag: etag.clone(),
                    fetched: started,
                },
            );
            Ok(versions)
        }
        http::StatusCode::SERVICE_UNAVAILABLE => Err(unavailable()),
        http::StatusCode::OK if is_aggregated(content_type) => {
            let list: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            let versions = crate::discovery::entries(&list)?;
            let etag = answer_headers
                .get(http::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            store(
                agg,
                service,
                Cached {
                    versions: versions.clone(),
                    etag,
                    fetched: started,
                },
            );
            Ok(versions)
        }
        _ => legacy(agg, apiservice, &etag).await,
    }
}

fn store(agg: &Aggregator, service: &ServiceRef, cached: Cached) {
    agg.discovery
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .cache
        .insert(service.clone(), cached);
}

/// Upstream's fallback for an extension server without aggregated discovery: its group
/// version's `APIResourceList`, converted; not kept, as it covers one group version of what may
/// be several behind the Service.
async fn legacy(
    agg: &Aggregator,
    apiservice: &ApiService,
    etag: &str,
) -> Result<HashMap<(String, String), Value>, String> {
    if apiservice.version.is_empty() {
        return Err("not found".into());
    }
    let path = if apiservice.group.is_empty() {
        format!("/api/{}", apiservice.version)
    } else {
        format!("/apis/{}/{}", apiservice.group, apiservice.version)
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    );
    if !etag.is_empty()
        && let Ok(v) = http::HeaderValue::from_str(etag)
    {
        headers.insert(http::header::IF_NONE_MATCH, v);
    }
    // Upstream asks this one as the aggregator without its group.
    let aggregator = UserInfo {
        name: "system:kube-aggregator".into(),
        ..Default::default()
    };
    let (status, _, body) = agg
        .transports
        .request(apiservice, &path, &headers, &aggregator)
        .await?;
    if status != http::StatusCode::OK {
        return Err(format!(
            "failed to download legacy discovery for {path}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let list: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let entry = crate::discovery::entry_from_resource_list(&apiservice.version, &list)?;
    Ok(HashMap::from([(
        (apiservice.group.clone(), apiservice.version.clone()),
        entry,
    )]))
}

/// Whether a `Content-Type` is an aggregated discovery document (v2 or v2beta1), as client-go's
/// `ContentTypeIsGVK` reads the media type's parameters.
fn is_aggregated(content_type: &str) -> bool {
    let mut parts = content_type.split(';').map(str::trim);
    let base = parts.next().unwrap_or("");
    if !base.eq_ignore_ascii_case("application/json") {
        return false;
    }
    let (mut g, mut v, mut kind) = ("", "", "");
    for p in parts {
        match p.split_once('=') {
            Some(("g", x)) => g = x,
            Some(("v", x)) => v = x,
            Some(("as", x)) => kind = x,
            _ => {}
        }
    }
    g == "apidiscovery.k8s.io" && (v == "v2" || v == "v2beta1") && kind == "APIGroupDiscoveryList"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_aggregated_content_type_is_read_as_one() {
        assert!(is_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
        assert!(is_aggregated(
            "application/json; g=apidiscovery.k8s.io; v=v2beta1; as=APIGroupDiscoveryList"
        ));
        assert!(!is_aggregated("application/json"));
        assert!(!is_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
        ));
        assert!(!is_aggregated(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
    }

    #[test]
    fn retries_back_off_as_upstreams_queue_does() {
        assert_eq!(backoff(0), Duration::from_millis(500));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(6), Duration::from_secs(32));
        assert_eq!(backoff(7), REFRESH);
        assert_eq!(backoff(40), REFRESH);
    }
}
