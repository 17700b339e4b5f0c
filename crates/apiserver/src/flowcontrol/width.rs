//! How much work a request is (upstream: k8s.io/apiserver/pkg/util/flowcontrol/request,
//! `WorkEstimate`): the seats it takes while it runs, and for a write the seats it keeps for a
//! while after it ends, for the watch events it causes.
//!
//! - **LIST, and a WATCH that begins with a list** (`sendInitialEvents=true`, or a legacy watch
//!   from resourceVersion "" or "0"): upstream's size-based estimate (`SizeBasedListCostEstimate`,
//!   on by default since v1.34) — a seat for every 100 kB the request holds in memory at once:
//!   one object for a single named object; the page (or everything) from the watch cache, at
//!   most 1 MB since the cache streams; from storage, the page, or with a selector at least half
//!   of everything. At most 100 seats, and at most the level's own bound (below).
//! - **create, update, patch, delete**: one seat while it runs; then, when at least 10 watches
//!   are interested in the object, a seat for every 10 of them is held for the 5 ms of event work
//!   each seat stands for, bounded by the level (upstream's mutating estimator).
//! - everything else: one seat.
//!
//! The object counts and sizes come from an [`ObjectStats`] (the watch caches' exact ones:
//! [`StorageStats`]); a resource it does not know costs the minimum seat, as upstream's estimator
//! treats a resource its tracker has not counted (an aggregated one, most often). The watch
//! counts come from `watch_tracker`.

use std::time::Duration;

use crate::request::RequestInfo;

const MINIMUM_SEATS: u64 = 1;
/// Upstream's `MaximumListSeatsLimit` with the size-based estimate on.
const MAXIMUM_LIST_SEATS: u64 = 100;
/// Upstream's `MaximumMutatingSeatsLimit`.
const MAXIMUM_MUTATING_SEATS: u64 = 10;
const BYTES_PER_SEAT: i64 = 100_000;
/// What a LIST from the watch cache holds at once at most: the cache streams the rest.
const CACHE_STREAMING_MAX_MEMORY: i64 = 1_000_000;
/// The size assumed for objects whose size is unknown (etcd's request limit).
const MAX_OBJECT_SIZE: i64 = 1_500_000;
const WATCHES_PER_SEAT: f64 = 10.0;
/// The work of sending one seat's share of watch events.
const EVENT_ADDITIONAL_DURATION: Duration = Duration::from_millis(5);

/// The count and average stored size of a resource's objects (upstream's `storage.Stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub object_count: i64,
    pub average_object_size: i64,
}

/// Where the estimate reads each resource's objects, by API group and resource.
pub trait ObjectStats: Send + Sync {
    fn stats(&self, group: &str, resource: &str) -> Option<Stats>;
    /// Whether a LIST without a resourceVersion is served from the watch cache (upstream's
    /// `ConsistentReadSupported`: consistent reads from the cache, on a store that can prove
    /// the cache fresh).
    fn consistent_reads_from_cache(&self) -> bool {
        true
    }
}

/// The watch caches' exact counts and sizes (`storage::metrics::stats`).
pub struct StorageStats {
    pub consistent_reads_from_cache: bool,
}

impl ObjectStats for StorageStats {
    fn stats(&self, group: &str, resource: &str) -> Option<Stats> {
        storage::metrics::stats(group, resource).map(|s| Stats {
            object_count: s.object_count,
            average_object_size: s.average_object_size,
        })
    }

    fn consistent_reads_from_cache(&self) -> bool {
        self.consistent_reads_from_cache
    }
}

/// A request's work (upstream's `WorkEstimate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkEstimate {
    /// Seats while the request runs.
    pub initial_seats: u64,
    /// Seats held for `additional_latency` after it ends (0: none).
    pub final_seats: u64,
    pub additional_latency: Duration,
}

impl WorkEstimate {
    pub const fn seats(initial_seats: u64) -> Self {
        Self {
            initial_seats,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// The seats the request occupies from its start to the end of its additional latency.
    pub fn max_seats(&self) -> u64 {
        self.initial_seats.max(self.final_seats)
    }
}

struct ListOptions {
    limit: i64,
    resource_version: String,
    resource_version_match: String,
    continue_token: bool,
    selector: bool,
    send_initial_events: bool,
}

fn list_options(query: &str) -> ListOptions {
    let mut o = ListOptions {
        limit: 0,
        resource_version: String::new(),
        resource_version_match: String::new(),
        continue_token: false,
        selector: false,
        send_initial_events: false,
    };
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "limit" => o.limit = v.parse().unwrap_or(0),
            "resourceVersion" => o.resource_version = v.into_owned(),
            "resourceVersionMatch" => o.resource_version_match = v.into_owned(),
            "continue" => o.continue_token = !v.is_empty(),
            "labelSelector" | "fieldSelector" => o.selector |= !v.is_empty(),
            "sendInitialEvents" => o.send_initial_events = v == "true",
            _ => {}
        }
    }
    o
}

/// The work of a request of a level whose estimates are bounded by `level_max_seats` (0: no
/// bound of its own), with `watches` interested in what it changes.
pub fn estimate(
    info: &RequestInfo,
    query: &str,
    stats: Option<&dyn ObjectStats>,
    level_max_seats: u64,
    watches: usize,
) -> WorkEstimate {
    if !info.is_resource_request {
        return WorkEstimate::seats(MINIMUM_SEATS);
    }
    let bound = |limit: u64| {
        if level_max_seats == 0 || level_max_seats > limit {
            limit
        } else {
            level_max_seats
        }
    };
    match info.verb.as_str() {
        "list" | "watch" => {
            WorkEstimate::seats(list_seats(info, query, stats, bound(MAXIMUM_LIST_SEATS)))
        }
        "create" | "update" | "patch" | "delete" => {
            mutating(info, bound(MAXIMUM_MUTATING_SEATS), watches)
        }
        _ => WorkEstimate::seats(MINIMUM_SEATS),
    }
}

fn list_seats(
    info: &RequestInfo,
    query: &str,
    stats: Option<&dyn ObjectStats>,
    max_seats: u64,
) -> u64 {
    let o = list_options(query);
    // A watch that does not begin with a list only registers.
    if info.verb == "watch"
        && !o.send_initial_events
        && !(o.resource_version.is_empty() || o.resource_version == "0")
    {
        return MINIMUM_SEATS;
    }
    let Some(stats) = stats else {
        return MINIMUM_SEATS;
    };
    let Some(mut s) = stats.stats(&info.api_group, &info.resource) else {
        return MINIMUM_SEATS;
    };
    // Upstream's delegation rule, as the estimator applies it (without the cache's snapshots):
    // an exact revision, a continuation or an unknown match reads storage; a consistent read
    // does where the cache cannot serve one.
    let from_storage = match o.resource_version_match.as_str() {
        "Exact" => true,
        "NotOlderThan" => false,
        "" if o.continue_token => true,
        "" if o.limit > 0 && !o.resource_version.is_empty() && o.resource_version != "0" => true,
        "" if o.resource_version.is_empty() => !stats.consistent_reads_from_cache(),
        "" => false,
        _ => true,
    };
    let from_cache = info.verb == "watch" || !from_storage;
    if s.average_object_size <= 0 && s.object_count != 0 {
        s.average_object_size = MAX_OBJECT_SIZE;
    }
    let limited = if o.limit > 0 && o.limit < s.object_count {
        o.limit
    } else {
        s.object_count
    };
    let in_memory = if !info.name.is_empty() {
        1
    } else if from_cache {
        limited
    } else if o.selector {
        limited.max(s.object_count / 2)
    } else {
        limited
    };
    let mut bytes = in_memory.saturating_mul(s.average_object_size);
    if from_cache {
        bytes = bytes.min(CACHE_STREAMING_MAX_MEMORY);
    }
    let seats = (bytes.max(0) as u64).div_ceil(BYTES_PER_SEAT as u64);
    seats.clamp(MINIMUM_SEATS, max_seats.max(MINIMUM_SEATS))
}

fn mutating(info: &RequestInfo, max_seats: u64, watches: usize) -> WorkEstimate {
    // A token request changes nothing anybody watches.
    if info.resource == "serviceaccounts" && info.subresource == "token" {
        return WorkEstimate::seats(MINIMUM_SEATS);
    }
    if (watches as f64) < WATCHES_PER_SEAT {
        return WorkEstimate::seats(MINIMUM_SEATS);
    }
    let needed = (watches as f64 / WATCHES_PER_SEAT).ceil() as u64;
    let final_seats = needed.min(max_seats.max(MINIMUM_SEATS));
    // The same seat-seconds over fewer seats take longer.
    let work = EVENT_ADDITIONAL_DURATION.as_secs_f64() * needed as f64;
    WorkEstimate {
        initial_seats: MINIMUM_SEATS,
        final_seats,
        additional_latency: Duration::from_secs_f64(work / final_seats as f64),
    }
}

/// The bound a queuing level puts on any one request's seats (upstream's max-seats tracker):
/// 15 % of its nominal seats, at most its seats over its hand size, at least one.
pub fn level_max_seats(nominal: u64, hand_size: usize) -> u64 {
    let share = (nominal as f64 * 0.15).ceil() as u64;
    let per_hand = nominal / (hand_size.max(1) as u64);
    share.min(per_hand).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pods {
        count: i64,
        size: i64,
        consistent_from_cache: bool,
    }
    impl ObjectStats for Pods {
        fn stats(&self, group: &str, resource: &str) -> Option<Stats> {
            (group.is_empty() && resource == "pods").then_some(Stats {
                object_count: self.count,
                average_object_size: self.size,
            })
        }
        fn consistent_reads_from_cache(&self) -> bool {
            self.consistent_from_cache
        }
    }

    fn seats_of(method: &str, path: &str, query: &str, pods: &Pods) -> u64 {
        let info = RequestInfo::parse(&method.parse().unwrap(), path, query);
        let w = estimate(&info, query, Some(pods), 0, 0);
        assert_eq!(w.final_seats, 0);
        w.initial_seats
    }

    #[test]
    fn lists_and_initial_watches_cost_by_the_bytes_they_hold() {
        // 5,000 pods of 4 kB: 20 MB stored.
        let pods = Pods {
            count: 5_000,
            size: 4_000,
            consistent_from_cache: true,
        };
        let seats = |path: &str, query: &str| seats_of("GET", path, query, &pods);
        // From the cache (a consistent read where the cache serves those, or resourceVersion
        // 0): the cache streams, so at most 1 MB is held: 10 seats.
        assert_eq!(seats("/api/v1/pods", ""), 10);
        assert_eq!(seats("/api/v1/pods", "resourceVersion=0"), 10);
        // A page of 100 from the cache: 400 kB.
        assert_eq!(seats("/api/v1/pods", "resourceVersion=0&limit=100"), 4);
        // From storage: a page at an exact revision; a continuation.
        assert_eq!(seats("/api/v1/pods", "resourceVersion=7&limit=500"), 20);
        assert_eq!(seats("/api/v1/pods", "limit=500&continue=abc"), 20);
        // With a selector, at least half of everything: 2,500 × 4 kB = 100 seats, the most.
        assert_eq!(
            seats(
                "/api/v1/pods",
                "labelSelector=a%3Db&limit=50&resourceVersion=7&resourceVersionMatch=Exact"
            ),
            100
        );
        // A named object reads one; a small page from the cache takes the minimum.
        assert_eq!(seats("/api/v1/pods", "fieldSelector=x&limit=10"), 1);
        assert_eq!(seats("/api/v1/namespaces/a/pods/p", ""), 1);
        // A legacy watch lists first; one from a revision does not.
        assert_eq!(seats("/api/v1/pods", "watch=true"), 10);
        assert_eq!(seats("/api/v1/pods", "watch=true&resourceVersion=12"), 1);
        assert_eq!(
            seats(
                "/api/v1/pods",
                "watch=true&resourceVersion=12&sendInitialEvents=true"
            ),
            10
        );
        // Where the cache cannot serve consistent reads, one without a revision reads
        // storage: everything, 20 MB, bounded at 100.
        let old_etcd = Pods {
            consistent_from_cache: false,
            ..pods
        };
        assert_eq!(seats_of("GET", "/api/v1/pods", "", &old_etcd), 100);
        // Unknown sizes count as etcd's largest object.
        let unknown = Pods {
            count: 3,
            size: 0,
            consistent_from_cache: true,
        };
        assert_eq!(seats_of("GET", "/api/v1/pods", "", &unknown), 10);
        // Everything else, and resources without stats, take one seat.
        assert_eq!(seats("/api/v1/configmaps", ""), 1);
        assert_eq!(seats("/healthz", ""), 1);
        assert_eq!(seats_of("POST", "/api/v1/namespaces/a/pods", "", &pods), 1);
    }

    #[test]
    fn a_level_bounds_the_seats_of_one_request() {
        let pods = Pods {
            count: 5_000,
            size: 4_000,
            consistent_from_cache: false,
        };
        let info = RequestInfo::parse(&http::Method::GET, "/api/v1/pods", "");
        assert_eq!(estimate(&info, "", Some(&pods), 0, 0).initial_seats, 100);
        assert_eq!(estimate(&info, "", Some(&pods), 7, 0).initial_seats, 7);
        // Upstream's default levels: 600 seats by shares give workload-low 245 nominal seats
        // (hand size 6), global-default 49 (hand size 6), node-high 98 (hand size 6).
        assert_eq!(level_max_seats(245, 6), 37);
        assert_eq!(level_max_seats(49, 6), 8);
        assert_eq!(level_max_seats(3, 6), 1);
    }

    #[test]
    fn writes_hold_seats_for_the_events_they_cause() {
        let update =
            RequestInfo::parse(&http::Method::PUT, "/api/v1/namespaces/a/configmaps/c", "");
        // Fewer than 10 interested watches: nothing after the write.
        assert_eq!(estimate(&update, "", None, 0, 9), WorkEstimate::seats(1));
        // 35 watches: 4 seats for 5 ms each.
        assert_eq!(
            estimate(&update, "", None, 0, 35),
            WorkEstimate {
                initial_seats: 1,
                final_seats: 4,
                additional_latency: Duration::from_millis(5),
            }
        );
        // 1,000 watches: 100 seats' work on at most 10 seats, so ten times as long.
        let w = estimate(&update, "", None, 0, 1_000);
        assert_eq!((w.initial_seats, w.final_seats), (1, 10));
        assert_eq!(w.additional_latency, Duration::from_millis(50));
        assert_eq!(w.max_seats(), 10);
        // The level's bound applies.
        assert_eq!(estimate(&update, "", None, 2, 1_000).final_seats, 2);
        // Token requests and reads cause no events.
        let token = RequestInfo::parse(
            &http::Method::POST,
            "/api/v1/namespaces/a/serviceaccounts/default/token",
            "",
        );
        assert_eq!(estimate(&token, "", None, 0, 1_000), WorkEstimate::seats(1));
        let get = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/a/configmaps/c", "");
        assert_eq!(estimate(&get, "", None, 0, 1_000), WorkEstimate::seats(1));
    }
}
