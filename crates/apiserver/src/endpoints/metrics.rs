//! The request metrics of the endpoints (upstream: k8s.io/apiserver/pkg/endpoints/metrics):
//! `apiserver_request_total`, `apiserver_request_duration_seconds`,
//! `apiserver_request_sli_duration_seconds`, `apiserver_response_sizes`,
//! `apiserver_longrunning_requests`, `apiserver_selfrequest_total`, and the watch events'
//! `apiserver_watch_events_total` / `apiserver_watch_events_sizes`, with upstream's names,
//! labels and buckets.
//!
//! Upstream records a request where a route served it (`InstrumentRouteFunc`), so requests that a
//! filter refused (401, 403) or that no route matched (404 outside a served resource) are not
//! counted; the same here: [`Monitor`] is made by the server for what a delegate served, and for
//! the few non-resource handlers upstream instruments (health, discovery, OpenAPI v3). Its labels
//! are upstream's: the verb as `cleanVerb` reports it (`POST` for create, `PUT` for update,
//! `APPLY` for an apply patch, `WATCH`, `CONNECT` for the connect subresources), the scope
//! (`resource`, `namespace`, `cluster`), `dry_run`, and `system_client` from the User-Agent.
//! The time is taken from when the request met the first filter, so it counts the filters too. A
//! watch is long-running: it is in `apiserver_longrunning_requests` while it streams, and is
//! recorded when its stream ends. Requests that flow control refuses are counted with code 429
//! (`record_dropped`), and `apiserver_current_inflight_requests` keeps the most requests
//! executing at once since the last scrape ([`Executing`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use http_body::Body as _;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

use super::response::Response;
use crate::metrics::{
    Stability, counter_vec as counter, exponential_buckets, gauge_vec as gauge,
    histogram_vec as histogram, register, unbuildable,
};
use crate::request::RequestInfo;

/// Upstream's `APIServerComponent`: every route of the server chain reports it.
pub const COMPONENT: &str = "apiserver";

const REQUEST_LABELS: &[&str] = &[
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];
const ROUTE_LABELS: &[&str] = &[
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];
const GVR_LABELS: &[&str] = &["group", "version", "resource"];

/// Upstream's latency buckets, in seconds.
const LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
const SLI_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];

static REQUEST_TOTAL: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let mut labels = REQUEST_LABELS.to_vec();
    labels.extend(["code", "system_client"]);
    counter(
        "apiserver_request_total",
        Stability::Stable,
        "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
        &labels,
    )
});
static REQUEST_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "apiserver_request_duration_seconds",
        Stability::Stable,
        "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
        REQUEST_LABELS,
        LATENCY_BUCKETS.to_vec(),
    )
});
static REQUEST_SLI_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "apiserver_request_sli_duration_seconds",
        Stability::Alpha,
        "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
        ROUTE_LABELS,
        SLI_BUCKETS.to_vec(),
    )
});
static RESPONSE_SIZES: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "apiserver_response_sizes",
        Stability::Stable,
        "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
        ROUTE_LABELS,
        exponential_buckets(1000.0, 10.0, 7),
    )
});
static LONGRUNNING: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge(
        "apiserver_longrunning_requests",
        Stability::Stable,
        "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
        ROUTE_LABELS,
    )
});
static REQUEST_TERMINATIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let mut labels = ROUTE_LABELS.to_vec();
    labels.push("code");
    counter(
        "apiserver_request_terminations_total",
        Stability::Alpha,
        "Number of requests which apiserver terminated in self-defense.",
        &labels,
    )
});
static SELF_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "apiserver_selfrequest_total",
        Stability::Alpha,
        "Counter of apiserver self-requests broken out for each verb, API resource and subresource.",
        &["verb", "group", "resource", "subresource"],
    )
});
static WATCH_EVENTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "apiserver_watch_events_total",
        Stability::Alpha,
        "Number of events sent in watch clients",
        GVR_LABELS,
    )
});
static WATCH_EVENT_SIZES: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "apiserver_watch_events_sizes",
        Stability::Alpha,
        "Watch event size distribution in bytes",
        GVR_LABELS,
        exponential_buckets(1024.0, 2.0, 8),
    )
});

/// `apiserver_current_inflight_requests`: the most requests of each kind (`readOnly`,
/// `mutating`) that were executing at once since the last scrape. Upstream publishes each
/// second's high-water mark; publishing at the scrape keeps the peak between two scrapes,
/// which a one-second window would lose, and needs no timer.
#[derive(Clone)]
struct InflightWatermarks {
    gauge: IntGaugeVec,
    /// Shared by the registered clone and the requests that count themselves.
    counts: Arc<InflightCounts>,
}

/// Executing now, and the highest since the last scrape: readOnly, mutating.
#[derive(Default)]
struct InflightCounts {
    executing: [AtomicI64; 2],
    highest: [AtomicI64; 2],
}

impl Collector for InflightWatermarks {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        for (i, kind) in ["readOnly", "mutating"].into_iter().enumerate() {
            let now = self.counts.executing[i].load(Ordering::Relaxed);
            let highest = self.counts.highest[i].swap(now, Ordering::Relaxed).max(now);
            self.gauge.with_label_values(&[kind]).set(highest);
        }
        self.gauge.collect()
    }
}

static INFLIGHT: LazyLock<InflightWatermarks> = LazyLock::new(|| {
    let gauge = IntGaugeVec::new(
        crate::metrics::opts(
            "apiserver_current_inflight_requests",
            Stability::Stable,
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
        ),
        &["request_kind"],
    )
    .unwrap_or_else(|e| unbuildable("apiserver_current_inflight_requests", e));
    register(InflightWatermarks {
        gauge,
        counts: Arc::default(),
    })
});

/// A request executing, counted in `apiserver_current_inflight_requests` until dropped.
pub struct Executing(usize);

impl Executing {
    /// A request of `verb` starts executing: read-only for get, list and watch (upstream's
    /// non-mutating verbs), mutating otherwise.
    pub fn start(verb: &str) -> Executing {
        let i = usize::from(!matches!(verb, "get" | "list" | "watch" | "head"));
        let now = INFLIGHT.counts.executing[i].fetch_add(1, Ordering::Relaxed) + 1;
        INFLIGHT.counts.highest[i].fetch_max(now, Ordering::Relaxed);
        Executing(i)
    }
}

impl Drop for Executing {
    fn drop(&mut self) {
        INFLIGHT.counts.executing[self.0].fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request that flow control turned away with 429 (upstream's `RecordDroppedRequest`): in
/// `apiserver_request_total` as routes count theirs, though no route saw it.
pub fn record_dropped(info: &RequestInfo, query: &str, headers: &http::HeaderMap) {
    let verb = reported_verb(info, headers);
    let dry_run = dry_run(query);
    let scope = clean_scope(info);
    let (group, version, resource) = if info.is_resource_request {
        (
            info.api_group.as_str(),
            info.api_version.as_str(),
            info.resource.as_str(),
        )
    } else {
        ("", "", "")
    };
    REQUEST_TOTAL
        .with_label_values(&[
            verb,
            &dry_run,
            group,
            version,
            resource,
            &info.subresource,
            scope,
            COMPONENT,
            "429",
            "",
        ])
        .inc();
}

/// A request that `component` answered itself in self-defense with `code` (upstream's
/// `RecordRequestTermination`, which the aggregator's proxy calls for its own error answers).
/// Its verb is read from the HTTP method as upstream reads it there: `GET` of a collection is
/// `LIST`, `WATCH` with a true `watch` parameter, `APPLY`, `CONNECT`, else the method (so a
/// collection's DELETE is `DELETE`); a non-resource request puts its path in `subresource`.
pub fn record_termination(
    info: &RequestInfo,
    method: &http::Method,
    query: &str,
    headers: &http::HeaderMap,
    component: &str,
    code: u16,
) {
    let scope = clean_scope(info);
    let verb = termination_verb(info, method, query, headers, scope);
    let code = code.to_string();
    let labels: [&str; 8] = if info.is_resource_request {
        [
            verb,
            &info.api_group,
            &info.api_version,
            &info.resource,
            &info.subresource,
            scope,
            component,
            &code,
        ]
    } else {
        [verb, "", "", "", &info.path, scope, component, &code]
    };
    REQUEST_TERMINATIONS.with_label_values(&labels).inc();
}

/// Upstream's `cleanVerb(CanonicalVerb(method, scope), "", req, requestInfo)`.
fn termination_verb(
    info: &RequestInfo,
    method: &http::Method,
    query: &str,
    headers: &http::HeaderMap,
    scope: &str,
) -> &'static str {
    let mut verb = match *method {
        http::Method::GET | http::Method::HEAD if scope != "resource" && !scope.is_empty() => {
            "LIST"
        }
        http::Method::GET | http::Method::HEAD => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        _ => "other",
    };
    // `watch` as Go reads a bool query parameter: its first value, anything but 0 or false.
    let watch = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| {
            let v = v.to_ascii_lowercase();
            v != "0" && v != "false"
        });
    if (*method == http::Method::GET) && watch {
        verb = "WATCH";
    }
    if verb == "PATCH"
        && headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes() == b"application/apply-patch+yaml")
    {
        verb = "APPLY";
    }
    if info.is_resource_request && CONNECT_SUBRESOURCES.contains(&info.subresource.as_str()) {
        verb = "CONNECT";
    }
    verb
}

/// When the request met the first filter (upstream's `ReceivedTimestamp`), put in its
/// extensions by the request-info filter.
#[derive(Clone, Copy, Debug)]
pub struct Received(pub Instant);

/// The subresources whose requests upstream reports as `CONNECT` (`validConnectRequests`).
const CONNECT_SUBRESOURCES: &[&str] = &["log", "exec", "portforward", "attach", "proxy"];

/// One request to be recorded: its labels, fixed when it is routed.
pub struct Monitor {
    verb: &'static str,
    dry_run: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
    system_client: &'static str,
    received: Instant,
}

impl Monitor {
    /// A resource request served by a route.
    pub fn resource(
        info: &RequestInfo,
        query: &str,
        headers: &http::HeaderMap,
        received: Instant,
    ) -> Monitor {
        let scope = clean_scope(info);
        let verb = reported_verb(info, headers);
        let system_client = system_client(headers);
        Monitor {
            verb,
            dry_run: dry_run(query),
            group: info.api_group.clone(),
            version: info.api_version.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            scope,
            component: COMPONENT,
            system_client,
            received,
        }
    }

    /// A non-resource handler that upstream instruments: `GET`, the path as the subresource
    /// label, the component upstream gives that handler.
    pub fn non_resource(path: &str, component: &'static str, received: Instant) -> Monitor {
        Monitor {
            verb: "GET",
            dry_run: String::new(),
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: path.to_string(),
            scope: "",
            component,
            system_client: "",
            received,
        }
    }

    /// Records the response; a watch's stream is recorded when it ends, and counted as
    /// long-running until then.
    pub fn finish(self, response: Response) -> Response {
        if self.verb != "WATCH" {
            let size = response.body().size_hint().exact();
            self.record(response.status().as_u16(), size);
            return response;
        }
        let code = response.status().as_u16();
        if !response.status().is_success() {
            self.record(code, None);
            return response;
        }
        let running = LONGRUNNING.with_label_values(&self.route_labels());
        running.inc();
        let (parts, body) = response.into_parts();
        let body = super::response::completing(
            body,
            Box::new(move || {
                running.dec();
                self.record(code, None);
            }),
        );
        http::Response::from_parts(parts, body)
    }

    fn route_labels(&self) -> [&str; 7] {
        [
            self.verb,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            self.component,
        ]
    }

    fn record(&self, code: u16, size: Option<u64>) {
        let elapsed = self.received.elapsed().as_secs_f64();
        let code = code.to_string();
        let code = code.as_str();
        let request = [
            self.verb,
            &self.dry_run,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            self.component,
        ];
        let mut total = [""; 10];
        total[..8].copy_from_slice(&request);
        total[8] = code;
        total[9] = self.system_client;
        REQUEST_TOTAL.with_label_values(&total).inc();
        REQUEST_DURATION
            .with_label_values(&request)
            .observe(elapsed);
        let route = self.route_labels();
        if self.dry_run.is_empty() {
            // Upstream takes webhook and queue waits out of this one; Ironplane records no such
            // waits yet, so the SLI is the whole latency.
            REQUEST_SLI_DURATION
                .with_label_values(&route)
                .observe(elapsed);
        }
        if matches!(self.verb, "GET" | "LIST")
            && let Some(size) = size
        {
            RESPONSE_SIZES
                .with_label_values(&route)
                .observe(size as f64);
        }
        if self.system_client == "kube-apiserver" {
            SELF_REQUESTS
                .with_label_values(&[self.verb, &self.group, &self.resource, &self.subresource])
                .inc();
        }
    }
}

/// The verb as upstream's metrics and request log report it (`NormalizedVerb`): `POST` for
/// create, `PUT` for update, `APPLY` for an apply patch, `WATCH`, `CONNECT` for the connect
/// subresources; a non-resource request's HTTP method; `other` for anything else.
pub fn reported_verb(info: &RequestInfo, headers: &http::HeaderMap) -> &'static str {
    if !info.is_resource_request {
        return match info.verb.as_str() {
            "get" => "GET",
            "head" => "HEAD",
            "post" => "POST",
            "put" => "PUT",
            "patch" => "PATCH",
            "delete" => "DELETE",
            _ => "other",
        };
    }
    let apply = headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/apply-patch+yaml");
    match info.verb.as_str() {
        "watch" => "WATCH",
        _ if CONNECT_SUBRESOURCES.contains(&info.subresource.as_str()) => "CONNECT",
        "get" => "GET",
        "list" => "LIST",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "deletecollection" => "DELETECOLLECTION",
        _ => "other",
    }
}

/// Upstream's `CleanScope`: `resource` for a named object or a create, `namespace` inside one,
/// `cluster` for other resource requests, nothing for non-resource ones.
fn clean_scope(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// Upstream's `cleanDryRun`: empty without the parameter, `invalid` for a value other than
/// `All`, else the distinct values sorted and joined.
fn dry_run(query: &str) -> String {
    if !query.contains("dryRun") {
        return String::new();
    }
    let mut values: Vec<String> = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.into_owned())
        .collect();
    if values.iter().any(|v| v != "All") {
        return "invalid".into();
    }
    values.dedup();
    values.join(",")
}

/// The `system_client` label: the program name of the User-Agent when it is one of the control
/// plane's own.
fn system_client(headers: &http::HeaderMap) -> &'static str {
    let Some(agent) = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    else {
        return "";
    };
    let Some((program, _)) = agent.split_once('/') else {
        return "";
    };
    match program {
        "kube-apiserver" => "kube-apiserver",
        "kube-controller-manager" => "kube-controller-manager",
        "kube-scheduler" => "kube-scheduler",
        "cluster-policy-controller" => "cluster-policy-controller",
        _ => "",
    }
}

/// The counters of one watch's events: looked up once when the watch starts, so that each event
/// costs two atomic adds.
pub struct WatchEventMetrics {
    count: prometheus::IntCounter,
    size: prometheus::Histogram,
}

impl WatchEventMetrics {
    pub fn new(group: &str, version: &str, resource: &str) -> WatchEventMetrics {
        let labels = [group, version, resource];
        WatchEventMetrics {
            count: WATCH_EVENTS.with_label_values(&labels),
            size: WATCH_EVENT_SIZES.with_label_values(&labels),
        }
    }

    /// One event sent, `size` bytes as encoded.
    pub fn sent(&self, size: usize) {
        self.count.inc();
        self.size.observe(size as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(verb: &str, ns: &str, name: &str, sub: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            path: String::new(),
            verb: verb.into(),
            api_prefix: "api".into(),
            api_group: String::new(),
            api_version: "v1".into(),
            namespace: ns.into(),
            resource: "metricstest".into(),
            subresource: sub.into(),
            name: name.into(),
            parts: vec![],
            field_selector: String::new(),
            namespace_in_path: !ns.is_empty(),
        }
    }

    fn count(labels: &[&str]) -> u64 {
        REQUEST_TOTAL.with_label_values(labels).get()
    }

    #[test]
    fn a_termination_is_counted_with_upstreams_verb_and_labels() {
        use http::Method;
        let none = http::HeaderMap::new();
        let verb =
            |i: &RequestInfo, m: Method, q: &str| termination_verb(i, &m, q, &none, clean_scope(i));
        assert_eq!(verb(&info("list", "ns", "", ""), Method::GET, ""), "LIST");
        assert_eq!(verb(&info("get", "ns", "a", ""), Method::GET, ""), "GET");
        assert_eq!(
            verb(&info("watch", "ns", "", ""), Method::GET, "watch=1"),
            "WATCH"
        );
        assert_eq!(
            verb(&info("list", "ns", "", ""), Method::GET, "watch=false"),
            "LIST"
        );
        // Upstream reads the method here: a collection's delete is DELETE.
        assert_eq!(
            verb(&info("deletecollection", "ns", "", ""), Method::DELETE, ""),
            "DELETE"
        );
        assert_eq!(
            verb(&info("get", "ns", "a", "exec"), Method::POST, ""),
            "CONNECT"
        );
        assert_eq!(
            verb(&info("get", "ns", "a", ""), Method::OPTIONS, ""),
            "other"
        );
        let mut apply = http::HeaderMap::new();
        apply.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/apply-patch+yaml"),
        );
        let i = info("patch", "ns", "a", "");
        assert_eq!(
            termination_verb(&i, &Method::PATCH, "", &apply, clean_scope(&i)),
            "APPLY"
        );

        let mut i = info("list", "ns", "", "");
        i.resource = "terminationtest".into();
        let labels = [
            "LIST",
            "",
            "v1",
            "terminationtest",
            "",
            "namespace",
            "aggregator",
            "503",
        ];
        let before = REQUEST_TERMINATIONS.with_label_values(&labels).get();
        record_termination(&i, &Method::GET, "", &none, "aggregator", 503);
        assert_eq!(
            REQUEST_TERMINATIONS.with_label_values(&labels).get(),
            before + 1
        );
        // A non-resource request: its path as the subresource, no scope.
        let path = RequestInfo {
            path: "/apis/terminationtest.example.com/v1".into(),
            verb: "get".into(),
            ..Default::default()
        };
        record_termination(&path, &Method::GET, "", &none, "aggregator", 503);
        assert_eq!(
            REQUEST_TERMINATIONS
                .with_label_values(&[
                    "GET",
                    "",
                    "",
                    "",
                    "/apis/terminationtest.example.com/v1",
                    "",
                    "aggregator",
                    "503"
                ])
                .get(),
            1
        );
    }

    #[test]
    fn labels_are_upstreams() {
        let h = http::HeaderMap::new();
        let now = Instant::now();
        let ok = || http::Response::new(super::super::response::full("abc"));
        Monitor::resource(&info("list", "ns", "", ""), "", &h, now).finish(ok());
        Monitor::resource(&info("create", "ns", "", ""), "dryRun=All", &h, now).finish(ok());
        Monitor::resource(&info("get", "", "x", "log"), "", &h, now).finish(ok());
        let mut apply = http::HeaderMap::new();
        apply.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/apply-patch+yaml"),
        );
        apply.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static("kube-controller-manager/v1.36.2 (linux/amd64)"),
        );
        Monitor::resource(&info("patch", "", "x", ""), "", &apply, now).finish(ok());
        Monitor::resource(&info("list", "", "", ""), "dryRun=x", &h, now).finish(ok());

        let l = |verb, dry, scope, sub, code, client| {
            count(&[
                verb,
                dry,
                "",
                "v1",
                "metricstest",
                sub,
                scope,
                "apiserver",
                code,
                client,
            ])
        };
        assert_eq!(l("LIST", "", "namespace", "", "200", ""), 1);
        assert_eq!(l("POST", "All", "resource", "", "200", ""), 1);
        assert_eq!(l("CONNECT", "", "resource", "log", "200", ""), 1);
        assert_eq!(
            l(
                "APPLY",
                "",
                "resource",
                "",
                "200",
                "kube-controller-manager"
            ),
            1
        );
        assert_eq!(l("LIST", "invalid", "cluster", "", "200", ""), 1);
        // The LIST's size is observed; the create's is not.
        let sizes = RESPONSE_SIZES.with_label_values(&[
            "LIST",
            "",
            "v1",
            "metricstest",
            "",
            "namespace",
            "apiserver",
        ]);
        assert_eq!(sizes.get_sample_count(), 1);
        assert_eq!(sizes.get_sample_sum(), 3.0);
    }

    #[test]
    fn the_inflight_gauge_keeps_the_peak_since_the_last_scrape() {
        let gauge = || INFLIGHT.gauge.with_label_values(&["mutating"]).get();
        let a = Executing::start("create");
        let b = Executing::start("delete");
        drop(a);
        drop(b);
        // Other tests run in parallel: the peak is at least the two of this one.
        INFLIGHT.collect();
        assert!(gauge() >= 2, "{}", gauge());
        // Once scraped, the mark falls back to what executes now.
        let _c = Executing::start("patch");
        INFLIGHT.collect();
        assert!(gauge() >= 1);
        let mut i = info("list", "ns", "", "");
        i.resource = "metricsdropped".into();
        record_dropped(&i, "", &http::HeaderMap::new());
        assert_eq!(
            count(&[
                "LIST",
                "",
                "",
                "v1",
                "metricsdropped",
                "",
                "namespace",
                "apiserver",
                "429",
                ""
            ]),
            1
        );
    }

    #[test]
    fn a_watch_is_long_running_until_its_stream_ends() {
        let h = http::HeaderMap::new();
        let mut i = info("watch", "w", "", "");
        i.resource = "metricswatch".into();
        let r = Monitor::resource(&i, "", &h, Instant::now())
            .finish(http::Response::new(super::super::response::full("x")));
        let labels = [
            "WATCH",
            "",
            "v1",
            "metricswatch",
            "",
            "namespace",
            "apiserver",
        ];
        assert_eq!(LONGRUNNING.with_label_values(&labels).get(), 1);
        let total = || {
            count(&[
                "WATCH",
                "",
                "",
                "v1",
                "metricswatch",
                "",
                "namespace",
                "apiserver",
                "200",
                "",
            ])
        };
        assert_eq!(total(), 0);
        drop(r);
        assert_eq!(LONGRUNNING.with_label_values(&labels).get(), 0);
        assert_eq!(total(), 1);
    }
}
