//! The `apiserver_flowcontrol_*` metric families (upstream: k8s.io/apiserver/pkg/util/
//! flowcontrol/metrics), with upstream's names, labels, buckets, help texts and stability level
//! (all BETA). Registered in the process-wide registry the first time they are touched.

use std::sync::{LazyLock, OnceLock};

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
};

use crate::metrics::{Stability, register, unbuildable};

const PRIORITY_LEVEL: &str = "priority_level";
const FLOW_SCHEMA: &str = "flow_schema";

/// Upstream's `requestDurationSecondsBuckets`.
const REQUEST_DURATION_BUCKETS: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

fn opts(name: &str, level: Stability, help: &str) -> Opts {
    crate::metrics::opts(name, level, help)
        .namespace("apiserver")
        .subsystem("flowcontrol")
}

fn counter(name: &str, level: Stability, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        IntCounterVec::new(opts(name, level, help), labels)
            .unwrap_or_else(|e| unbuildable(name, e)),
    )
}

fn gauge(name: &str, level: Stability, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        IntGaugeVec::new(opts(name, level, help), labels).unwrap_or_else(|e| unbuildable(name, e)),
    )
}

pub static REJECTED_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "rejected_requests_total",
        Stability::Beta,
        "Number of requests rejected by API Priority and Fairness subsystem",
        &[PRIORITY_LEVEL, FLOW_SCHEMA, "reason"],
    )
});

pub static DISPATCHED_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "dispatched_requests_total",
        Stability::Beta,
        "Number of requests executed by API Priority and Fairness subsystem",
        &[PRIORITY_LEVEL, FLOW_SCHEMA],
    )
});

pub static CURRENT_INQUEUE_REQUESTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge(
        "current_inqueue_requests",
        Stability::Beta,
        "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
        &[PRIORITY_LEVEL, FLOW_SCHEMA],
    )
});

pub static CURRENT_EXECUTING_REQUESTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge(
        "current_executing_requests",
        Stability::Beta,
        "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
        &[PRIORITY_LEVEL, FLOW_SCHEMA],
    )
});

pub static CURRENT_EXECUTING_SEATS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge(
        "current_executing_seats",
        Stability::Beta,
        "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
        &[PRIORITY_LEVEL, FLOW_SCHEMA],
    )
});

pub static REQUEST_WAIT_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    let opts = HistogramOpts::from(opts(
        "request_wait_duration_seconds",
        Stability::Beta,
        "Length of time a request spent waiting in its queue",
    ))
    .buckets(REQUEST_DURATION_BUCKETS.to_vec());
    register(
        HistogramVec::new(opts, &[PRIORITY_LEVEL, FLOW_SCHEMA, "execute"])
            .unwrap_or_else(|e| unbuildable("request_wait_duration_seconds", e)),
    )
});

pub static NOMINAL_LIMIT_SEATS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    gauge(
        "nominal_limit_seats",
        Stability::Beta,
        "Nominal number of execution seats configured for each priority level",
        &[PRIORITY_LEVEL],
    )
});

/// Touches every family, so that a scrape lists them before the first request.
/// The children one flow schema's requests record, each looked up on its first use (so that
/// `/metrics` shows only label sets in use) and then kept: a request records without hashing
/// its labels again.
pub struct FlowMetrics {
    labels: [String; 2],
    wait_dispatched: OnceLock<Histogram>,
    wait_rejected: OnceLock<Histogram>,
    dispatched: OnceLock<IntCounter>,
    inqueue: OnceLock<IntGauge>,
    executing: OnceLock<[IntGauge; 2]>,
}

impl FlowMetrics {
    pub fn new(priority_level: &str, flow_schema: &str) -> Self {
        Self {
            labels: [priority_level.to_string(), flow_schema.to_string()],
            wait_dispatched: OnceLock::new(),
            wait_rejected: OnceLock::new(),
            dispatched: OnceLock::new(),
            inqueue: OnceLock::new(),
            executing: OnceLock::new(),
        }
    }

    fn labels(&self) -> [&str; 2] {
        [&self.labels[0], &self.labels[1]]
    }

    /// `apiserver_flowcontrol_request_wait_duration_seconds`, by whether it was executed.
    pub fn wait(&self, executed: bool) -> &Histogram {
        let [pl, fs] = self.labels();
        if executed {
            self.wait_dispatched
                .get_or_init(|| REQUEST_WAIT_DURATION.with_label_values(&[pl, fs, "true"]))
        } else {
            self.wait_rejected
                .get_or_init(|| REQUEST_WAIT_DURATION.with_label_values(&[pl, fs, "false"]))
        }
    }

    pub fn dispatched(&self) -> &IntCounter {
        self.dispatched
            .get_or_init(|| DISPATCHED_REQUESTS.with_label_values(&self.labels()))
    }

    pub fn inqueue(&self) -> &IntGauge {
        self.inqueue
            .get_or_init(|| CURRENT_INQUEUE_REQUESTS.with_label_values(&self.labels()))
    }

    /// `current_executing_requests` and `current_executing_seats`.
    pub fn executing(&self) -> &[IntGauge; 2] {
        self.executing.get_or_init(|| {
            [
                CURRENT_EXECUTING_REQUESTS.with_label_values(&self.labels()),
                CURRENT_EXECUTING_SEATS.with_label_values(&self.labels()),
            ]
        })
    }

    pub fn rejected(&self, reason: &str) {
        let [pl, fs] = self.labels();
        REJECTED_REQUESTS.with_label_values(&[pl, fs, reason]).inc();
    }
}

pub fn register_all() {
    LazyLock::force(&REJECTED_REQUESTS);
    LazyLock::force(&DISPATCHED_REQUESTS);
    LazyLock::force(&CURRENT_INQUEUE_REQUESTS);
    LazyLock::force(&CURRENT_EXECUTING_REQUESTS);
    LazyLock::force(&CURRENT_EXECUTING_SEATS);
    LazyLock::force(&REQUEST_WAIT_DURATION);
    LazyLock::force(&NOMINAL_LIMIT_SEATS);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_upstreams_names_and_labels() {
        register_all();
        REJECTED_REQUESTS
            .with_label_values(&["catch-all", "catch-all", "queue-full"])
            .inc();
        REQUEST_WAIT_DURATION
            .with_label_values(&["catch-all", "catch-all", "true"])
            .observe(0.01);
        // A family without children is not written, whichever other tests ran first.
        NOMINAL_LIMIT_SEATS.with_label_values(&["catch-all"]).set(5);
        let text = String::from_utf8(crate::metrics::encode()).unwrap();
        assert!(text.contains(
            "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"catch-all\",priority_level=\"catch-all\",reason=\"queue-full\"} "
        ), "{text}");
        assert!(text.contains(
            "apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute=\"true\",flow_schema=\"catch-all\",priority_level=\"catch-all\",le=\"0.02\"} "
        ), "{text}");
        assert!(text.contains("# HELP apiserver_flowcontrol_nominal_limit_seats [BETA] Nominal number of execution seats configured for each priority level\n"), "{text}");
    }
}
