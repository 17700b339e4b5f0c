//! The storage layer's Prometheus metrics, with upstream's names, labels, buckets, help texts and
//! stability levels (k8s.io/apiserver/pkg/storage/etcd3/metrics and storage/cacher/metrics):
//!
//! - the backend's requests — `etcd_request_duration_seconds`, `etcd_requests_total`,
//!   `etcd_request_errors_total` by operation, group and resource — for whichever backend is in
//!   use (the embedded store answers the same calls), and the LISTs served from it:
//!   `apiserver_storage_list_{total,fetched_objects_total,evaluated_objects_total,returned_objects_total}`;
//! - the watch cache's: `apiserver_watch_cache_{events_received_total,events_dispatched_total,
//!   resource_version,initializations_total}`, `apiserver_terminated_watchers_total` (watchers
//!   closed for not keeping up), the LISTs it serves
//!   (`apiserver_cache_list_{total,fetched_objects_total,returned_objects_total}`), and the
//!   object counts upstream takes from etcd every minute (`apiserver_storage_objects`,
//!   `apiserver_resource_objects`, and `apiserver_resource_size_estimate_bytes`), kept exact
//!   here by the cache at each change.
//!
//! The same counts and sizes are what API Priority and Fairness estimates a LIST's seats from
//! (upstream's object-count tracker, fed by the same poll): [`stats`] reads them by group and
//! resource.
//!
//! The families live in the `prometheus` crate's default registry, the process-wide one that
//! `/metrics` serves (this crate sits below the server, so it registers there itself). A store
//! or cache is given its group and resource once ([`ResourceMetrics`]): the labelled children are
//! looked up then, so recording is an atomic add.
//!
//! The helpers that define and register a family ([`register`], [`opts`], [`counter_vec`] and
//! the others) are here for the same reason: this is the lowest crate that registers families,
//! so every crate above builds its own through these (`apiserver::metrics` re-exports them), and
//! each family's HELP text is composed one way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, RwLock};
use std::time::Instant;

use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};

/// A metric family's stability level, as upstream's component-base declares it. Every family of
/// the server has one (upstream defaults an unset level to ALPHA), and its HELP text begins with
/// it. Defined here, beneath every crate that registers families, so that each states its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stability {
    Internal,
    Alpha,
    Beta,
    Stable,
}

impl Stability {
    /// The level as the HELP text writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stability::Internal => "INTERNAL",
            Stability::Alpha => "ALPHA",
            Stability::Beta => "BETA",
            Stability::Stable => "STABLE",
        }
    }

    /// This level, for a family that upstream deprecated in `version` (written as upstream
    /// writes it, e.g. `1.34.0`: the HELP text quotes it as it is).
    pub const fn deprecated_since(self, version: &'static str) -> Level {
        Level {
            stability: self,
            deprecated_since: Some(version),
        }
    }
}

/// What a family's definition declares besides its name, help and labels: its stability level
/// and, if upstream deprecated it, the release that did.
///
/// Upstream marks a family deprecated only once the running release has reached that version,
/// and hides one deprecated for longer than its level's grace period; a family here carries the
/// version only while the release it follows still serves it as deprecated, so neither is
/// decided at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub stability: Stability,
    pub deprecated_since: Option<&'static str>,
}

impl From<Stability> for Level {
    fn from(stability: Stability) -> Level {
        Level {
            stability,
            deprecated_since: None,
        }
    }
}

impl Level {
    /// The HELP text that component-base makes of a family's `help`: the deprecation notice goes
    /// in front of the help first, and the level in front of both, so that scrapers and people
    /// read the level first.
    pub fn help(self, help: &str) -> String {
        let level = self.stability.as_str();
        match self.deprecated_since {
            Some(version) => format!("[{level}] (Deprecated since {version}) {help}"),
            None => format!("[{level}] {help}"),
        }
    }
}

/// Registers a collector (a metric family, or several) in the process-wide registry and returns
/// it, so that a `LazyLock` defines and registers a family in one expression.
pub fn register<C: Collector + Clone + 'static>(collector: C) -> C {
    if let Err(e) = prometheus::default_registry().register(Box::new(collector.clone())) {
        tracing::warn!(error = %e, "a metric family is not registered");
    }
    collector
}

/// The options of a family: its name, and its HELP text composed of `level` and `help`. For
/// families that the helpers below do not build (other value types, a namespace and subsystem,
/// a collector of their own).
pub fn opts(name: &str, level: impl Into<Level>, help: &str) -> Opts {
    Opts::new(name, level.into().help(help))
}

/// A counter family, registered.
pub fn counter_vec(
    name: &str,
    level: impl Into<Level>,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    register(
        IntCounterVec::new(opts(name, level, help), labels)
            .unwrap_or_else(|e| unbuildable(name, e)),
    )
}

/// A counter without labels, registered.
pub fn counter(name: &str, level: impl Into<Level>, help: &str) -> IntCounter {
    register(
        IntCounter::with_opts(opts(name, level, help)).unwrap_or_else(|e| unbuildable(name, e)),
    )
}

/// A gauge family, registered.
pub fn gauge_vec(name: &str, level: impl Into<Level>, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        IntGaugeVec::new(opts(name, level, help), labels).unwrap_or_else(|e| unbuildable(name, e)),
    )
}

/// A histogram family with `buckets`, registered.
pub fn histogram_vec(
    name: &str,
    level: impl Into<Level>,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let opts = HistogramOpts::from(opts(name, level, help)).buckets(buckets);
    register(HistogramVec::new(opts, labels).unwrap_or_else(|e| unbuildable(name, e)))
}

/// Upstream's `ExponentialBuckets`.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    prometheus::exponential_buckets(start, factor, count).unwrap_or_default()
}

/// Panics for a family that cannot be built, naming it: what a family built without the helpers
/// above does with the error of its constructor (`.unwrap_or_else(|e| unbuildable(name, e))`).
#[track_caller]
pub fn unbuildable<T>(name: &str, e: prometheus::Error) -> T {
    // Families are built from constants (names, help texts, label names); one that cannot be
    // built is a bug that the first scrape in the tests shows.
    panic!("metric family {name} cannot be built: {e}")
}

const GR: &[&str] = &["group", "resource"];
const OP_GR: &[&str] = &["operation", "group", "resource"];

static ETCD_LATENCY: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "etcd_request_duration_seconds",
        Stability::Alpha,
        "Etcd request latency in seconds for each operation and object type.",
        OP_GR,
        vec![
            0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0,
            8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
        ],
    )
});
static ETCD_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "etcd_requests_total",
        Stability::Alpha,
        "Etcd request counts for each operation and object type.",
        OP_GR,
    )
});
static ETCD_ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "etcd_request_errors_total",
        Stability::Alpha,
        "Etcd failed request counts for each operation and object type.",
        OP_GR,
    )
});
static STORAGE_LIST: LazyLock<[IntCounterVec; 4]> = LazyLock::new(|| {
    [
        counter_vec(
            "apiserver_storage_list_total",
            Stability::Alpha,
            "Number of LIST requests served from storage",
            GR,
        ),
        counter_vec(
            "apiserver_storage_list_fetched_objects_total",
            Stability::Alpha,
            "Number of objects read from storage in the course of serving a LIST request",
            GR,
        ),
        counter_vec(
            "apiserver_storage_list_evaluated_objects_total",
            Stability::Alpha,
            "Number of objects tested in the course of serving a LIST request from storage",
            GR,
        ),
        counter_vec(
            "apiserver_storage_list_returned_objects_total",
            Stability::Alpha,
            "Number of objects returned for a LIST request from storage",
            GR,
        ),
    ]
});
static OBJECTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "apiserver_storage_objects",
        Stability::Stable.deprecated_since("1.34.0"),
        "[DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
        &["resource"],
    )
});
static RESOURCE_OBJECTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "apiserver_resource_objects",
        Stability::Alpha,
        "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
        GR,
    )
});
static RESOURCE_SIZE_ESTIMATE: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "apiserver_resource_size_estimate_bytes",
        Stability::Alpha,
        "Estimated size of stored objects in database. Estimate is based on sum of last observed sizes of serialized objects. In case of a fetching error, the value will be -1.",
        GR,
    )
});
static CACHE_EVENTS_RECEIVED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_watch_cache_events_received_total",
        Stability::Alpha,
        "Counter of events received in watch cache broken by resource type.",
        GR,
    )
});
static CACHE_EVENTS_DISPATCHED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_watch_cache_events_dispatched_total",
        Stability::Alpha,
        "Counter of events dispatched in watch cache broken by resource type.",
        GR,
    )
});
// Upstream's help says the value keeps the revision's 15 least significant digits (its gauges are
// floats); no store's revision comes near 10^15, so the whole revision recorded here is the same.
static CACHE_RESOURCE_VERSION: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge_vec(
        "apiserver_watch_cache_resource_version",
        Stability::Alpha,
        "Current resource version of watch cache broken by resource type. This is truncated to the 15 least significant digits.",
        GR,
    )
});
static TERMINATED_WATCHERS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_terminated_watchers_total",
        Stability::Alpha,
        "Counter of watchers closed due to unresponsiveness broken by resource type.",
        GR,
    )
});
static CACHE_INITIALIZATIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_watch_cache_initializations_total",
        Stability::Alpha,
        "Counter of watch cache initializations broken by resource type.",
        GR,
    )
});
static CACHE_LIST: LazyLock<[IntCounterVec; 2]> = LazyLock::new(|| {
    let labels = &["group", "resource", "index"];
    [
        counter_vec(
            "apiserver_cache_list_total",
            Stability::Alpha,
            "Number of LIST requests served from watch cache",
            labels,
        ),
        counter_vec(
            "apiserver_cache_list_fetched_objects_total",
            Stability::Alpha,
            "Number of objects read from watch cache in the course of serving a LIST request",
            labels,
        ),
    ]
});
static CACHE_LIST_RETURNED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_cache_list_returned_objects_total",
        Stability::Alpha,
        "Number of objects returned for a LIST request from watch cache",
        GR,
    )
});

/// A backend operation, as upstream labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Get,
    List,
    Create,
    Update,
    Delete,
}

impl Operation {
    fn label(self) -> &'static str {
        match self {
            Operation::Get => "get",
            Operation::List => "list",
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }
}

struct OperationMetrics {
    latency: Histogram,
    count: IntCounter,
}

/// One resource's children of every storage family. A child is made the first time something
/// is recorded in it, as upstream's vectors make theirs, so that `/metrics` carries only the
/// label sets in use (eagerly, every resource's histograms would be a megabyte of zeros).
pub struct ResourceMetrics {
    group: String,
    resource: String,
    operations: [OnceLock<OperationMetrics>; 5],
    errors: [OnceLock<IntCounter>; 5],
    storage_list: OnceLock<[IntCounter; 4]>,
    cache_list: OnceLock<[IntCounter; 3]>,
    events: OnceLock<[IntCounter; 2]>,
    initializations: OnceLock<IntCounter>,
    terminated_watchers: OnceLock<IntCounter>,
    objects: OnceLock<[IntGauge; 4]>,
    stats: OnceLock<Arc<StatsCell>>,
}

/// A resource's object count and the average size of its objects as the watch cache holds
/// them (upstream's `storage.Stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub object_count: i64,
    pub average_object_size: i64,
}

#[derive(Default)]
struct StatsCell {
    count: AtomicI64,
    bytes: AtomicI64,
}

/// Every cached resource's stats, by group then resource (two levels, so that a lookup by
/// borrowed names allocates nothing).
type StatsTable = HashMap<String, HashMap<String, Arc<StatsCell>>>;
static STATS: LazyLock<RwLock<StatsTable>> = LazyLock::new(Default::default);

/// The object count and average size of `resource` in `group`, when a watch cache keeps them.
pub fn stats(group: &str, resource: &str) -> Option<Stats> {
    let table = STATS.read().unwrap_or_else(|p| p.into_inner());
    let cell = table.get(group)?.get(resource)?;
    let object_count = cell.count.load(Ordering::Relaxed);
    let bytes = cell.bytes.load(Ordering::Relaxed);
    Some(Stats {
        object_count,
        average_object_size: if object_count > 0 {
            bytes / object_count
        } else {
            0
        },
    })
}

impl std::fmt::Debug for ResourceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResourceMetrics({}.{})", self.resource, self.group)
    }
}

impl ResourceMetrics {
    /// The metrics of `resource` in `group` (empty for the core group).
    pub fn new(group: &str, resource: &str) -> Arc<ResourceMetrics> {
        Arc::new(ResourceMetrics {
            group: group.to_string(),
            resource: resource.to_string(),
            operations: Default::default(),
            errors: Default::default(),
            storage_list: OnceLock::new(),
            cache_list: OnceLock::new(),
            events: OnceLock::new(),
            initializations: OnceLock::new(),
            terminated_watchers: OnceLock::new(),
            objects: OnceLock::new(),
            stats: OnceLock::new(),
        })
    }

    fn gr(&self) -> [&str; 2] {
        [&self.group, &self.resource]
    }

    /// Records one backend request that started at `start`.
    pub fn backend_request(&self, op: Operation, start: Instant, failed: bool) {
        let labels = [op.label(), &self.group, &self.resource];
        let m = self.operations[op as usize].get_or_init(|| OperationMetrics {
            latency: ETCD_LATENCY.with_label_values(&labels),
            count: ETCD_REQUESTS.with_label_values(&labels),
        });
        m.latency.observe(start.elapsed().as_secs_f64());
        m.count.inc();
        if failed {
            self.errors[op as usize]
                .get_or_init(|| ETCD_ERRORS.with_label_values(&labels))
                .inc();
        }
    }

    /// A LIST served from storage: objects read, tested by the predicate, returned.
    pub fn storage_list(&self, fetched: usize, evaluated: usize, returned: usize) {
        let [total, f, e, r] = self.storage_list.get_or_init(|| {
            STORAGE_LIST
                .each_ref()
                .map(|f| f.with_label_values(&self.gr()))
        });
        total.inc();
        f.inc_by(fetched as u64);
        e.inc_by(evaluated as u64);
        r.inc_by(returned as u64);
    }

    /// A LIST served from the watch cache.
    pub fn cache_list(&self, fetched: usize, returned: usize) {
        let [total, f, r] = self.cache_list.get_or_init(|| {
            let index = [self.group.as_str(), self.resource.as_str(), ""];
            let [total, f] = CACHE_LIST.each_ref().map(|f| f.with_label_values(&index));
            [total, f, CACHE_LIST_RETURNED.with_label_values(&self.gr())]
        });
        total.inc();
        f.inc_by(fetched as u64);
        r.inc_by(returned as u64);
    }

    /// The watch cache's state after a change: its object count, the bytes of its objects, and
    /// its revision.
    pub fn cache_state(&self, objects: usize, bytes: usize, revision: i64) {
        let [o, ro, size, rv] = self.objects.get_or_init(|| {
            // `apiserver_storage_objects` names the resource as `resource.group`.
            let qualified = if self.group.is_empty() {
                self.resource.clone()
            } else {
                format!("{}.{}", self.resource, self.group)
            };
            [
                OBJECTS.with_label_values(&[qualified.as_str()]),
                RESOURCE_OBJECTS.with_label_values(&self.gr()),
                RESOURCE_SIZE_ESTIMATE.with_label_values(&self.gr()),
                CACHE_RESOURCE_VERSION.with_label_values(&self.gr()),
            ]
        });
        o.set(objects as i64);
        ro.set(objects as i64);
        size.set(bytes as i64);
        rv.set(revision);
        let cell = self.stats.get_or_init(|| {
            let cell = Arc::new(StatsCell::default());
            STATS
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(self.group.clone())
                .or_default()
                .insert(self.resource.clone(), cell.clone());
            cell
        });
        cell.count.store(objects as i64, Ordering::Relaxed);
        cell.bytes.store(bytes as i64, Ordering::Relaxed);
    }

    /// An event received from storage and dispatched to the cache's watchers.
    pub fn cache_event(&self) {
        let [received, dispatched] = self.events.get_or_init(|| {
            [
                CACHE_EVENTS_RECEIVED.with_label_values(&self.gr()),
                CACHE_EVENTS_DISPATCHED.with_label_values(&self.gr()),
            ]
        });
        received.inc();
        dispatched.inc();
    }

    /// A watcher closed because it did not keep up.
    pub fn watcher_terminated(&self) {
        self.terminated_watchers
            .get_or_init(|| TERMINATED_WATCHERS.with_label_values(&self.gr()))
            .inc();
    }

    /// The cache (re)built from a full list.
    pub fn cache_initialized(&self) {
        self.initializations
            .get_or_init(|| CACHE_INITIALIZATIONS.with_label_values(&self.gr()))
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_carry_upstreams_labels() {
        let m = ResourceMetrics::new("apps", "metricstests");
        m.backend_request(Operation::Update, Instant::now(), true);
        m.storage_list(5, 5, 2);
        m.cache_state(7, 7_000, 42);
        let text = {
            let mut out = Vec::new();
            prometheus::Encoder::encode(
                &prometheus::TextEncoder::new(),
                &prometheus::default_registry().gather(),
                &mut out,
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        for line in [
            "etcd_requests_total{group=\"apps\",operation=\"update\",resource=\"metricstests\"} 1",
            "etcd_request_errors_total{group=\"apps\",operation=\"update\",resource=\"metricstests\"} 1",
            "apiserver_storage_list_fetched_objects_total{group=\"apps\",resource=\"metricstests\"} 5",
            "apiserver_storage_list_returned_objects_total{group=\"apps\",resource=\"metricstests\"} 2",
            "apiserver_storage_objects{resource=\"metricstests.apps\"} 7",
            "apiserver_watch_cache_resource_version{group=\"apps\",resource=\"metricstests\"} 42",
            "apiserver_resource_size_estimate_bytes{group=\"apps\",resource=\"metricstests\"} 7000",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Upstream's deprecated STABLE family keeps its own "[DEPRECATED, ...]" words after
        // the notice that component-base adds.
        assert!(
            text.contains(
                "# HELP apiserver_storage_objects [STABLE] (Deprecated since 1.34.0) [DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("# HELP etcd_requests_total [ALPHA] Etcd request counts for each operation and object type.\n"),
            "{text}"
        );
        assert_eq!(
            stats("apps", "metricstests"),
            Some(Stats {
                object_count: 7,
                average_object_size: 1_000
            })
        );
        assert_eq!(stats("apps", "nothing"), None);
    }
}
