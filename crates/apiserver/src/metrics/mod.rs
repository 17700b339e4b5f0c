//! Prometheus metrics, served at `/metrics` (upstream: k8s.io/component-base/metrics and its
//! `legacyregistry`). One process-wide registry, as upstream's: the `prometheus` crate's default
//! registry, which every crate of the server can reach (storage records its own families without
//! depending on this one). Each layer defines its metric families next to the code that records
//! them — a `LazyLock` holding the family, registered through [`register`] the first time it is
//! touched — and records into them directly: an atomic add and, for labelled families, one lookup
//! of the label values.
//!
//! The text is Prometheus's exposition format 0.0.4 as client_golang writes it (the `prometheus`
//! crate's encoder), with client_golang's `process_*` collector (CPU seconds, resident and virtual
//! memory, file descriptors, start time), which the default registry carries on Linux.
//!
//! What it must not do: fail a scrape because one family is broken, or let two families take one
//! name (a second registration under a taken name is refused and logged; the family still
//! records, unseen).
//!
//! `/metrics/slis` is upstream's second registry: the health checks' results
//! (`kubernetes_healthcheck`, `kubernetes_healthchecks_total`) and the process start time.

use std::sync::LazyLock;

use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// The content type of upstream's answer to a scrape in the text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Registers a collector (a metric family, or several) in the process-wide registry and returns
/// it, so that a `LazyLock` defines and registers a family in one expression.
pub fn register<C: Collector + Clone + 'static>(collector: C) -> C {
    if let Err(e) = prometheus::default_registry().register(Box::new(collector.clone())) {
        tracing::warn!(error = %e, "a metric family is not registered");
    }
    collector
}

/// A counter family, registered.
pub fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    register(
        IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| unbuildable(name, e)),
    )
}

/// A counter without labels, registered.
pub fn counter(name: &str, help: &str) -> IntCounter {
    register(IntCounter::new(name, help).unwrap_or_else(|e| unbuildable(name, e)))
}

/// A gauge family, registered.
pub fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        IntGaugeVec::new(Opts::new(name, help), labels).unwrap_or_else(|e| unbuildable(name, e)),
    )
}

/// A histogram family with `buckets`, registered.
pub fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    register(HistogramVec::new(opts, labels).unwrap_or_else(|e| unbuildable(name, e)))
}

/// Upstream's `ExponentialBuckets`.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    prometheus::exponential_buckets(start, factor, count).unwrap_or_default()
}

#[track_caller]
fn unbuildable<T>(name: &str, e: prometheus::Error) -> T {
    // Families are built from constants (names, help texts, label names); one that cannot be
    // built is a bug that the first scrape in the tests shows.
    panic!("metric family {name} cannot be built: {e}")
}

/// Every registered family, in the text format.
pub fn encode() -> Vec<u8> {
    let families = prometheus::default_registry().gather();
    let mut out = Vec::with_capacity(64 * 1024);
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!(error = %e, "metrics could not be encoded");
    }
    out
}

/// The registry of `/metrics/slis` (upstream: component-base/metrics/prometheus/slis): the
/// health checks' results, each time a health endpoint runs them.
static SLIS: LazyLock<Slis> = LazyLock::new(|| {
    let registry = Registry::new();
    let healthcheck = IntGaugeVec::new(
        Opts::new(
            "kubernetes_healthcheck",
            "This metric records the result of a single healthcheck.",
        ),
        &["name", "type"],
    )
    .unwrap_or_else(|e| unbuildable("kubernetes_healthcheck", e));
    let total = IntCounterVec::new(
        Opts::new(
            "kubernetes_healthchecks_total",
            "This metric records the results of all healthcheck.",
        ),
        &["name", "type", "status"],
    )
    .unwrap_or_else(|e| unbuildable("kubernetes_healthchecks_total", e));
    for c in [
        Box::new(healthcheck.clone()) as Box<dyn Collector>,
        Box::new(total.clone()),
    ] {
        if let Err(e) = registry.register(c) {
            tracing::warn!(error = %e, "an SLI metric family is not registered");
        }
    }
    Slis {
        registry,
        healthcheck,
        total,
    }
});

struct Slis {
    registry: Registry,
    healthcheck: IntGaugeVec,
    total: IntCounterVec,
}

/// One health check's result, as `/livez`, `/readyz` or `/healthz` (`kind`) ran it.
pub fn observe_healthcheck(name: &str, kind: &str, ok: bool) {
    SLIS.healthcheck
        .with_label_values(&[name, kind])
        .set(i64::from(ok));
    let status = if ok { "success" } else { "error" };
    SLIS.total.with_label_values(&[name, kind, status]).inc();
}

/// `/metrics/slis`: the health checks' families and, as upstream's, the process start time.
pub fn encode_slis() -> Vec<u8> {
    let mut families = SLIS.registry.gather();
    families.extend(
        prometheus::default_registry()
            .gather()
            .into_iter()
            .filter(|f| f.name() == "process_start_time_seconds"),
    );
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!(error = %e, "SLI metrics could not be encoded");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_families_and_process_metrics_are_encoded() {
        let family = register(
            IntCounterVec::new(
                Opts::new("ironplane_test_total", "A family of this test."),
                &["verb"],
            )
            .unwrap(),
        );
        family.with_label_values(&["GET"]).inc_by(3);
        // A second family under the same name is refused, not served twice.
        register(
            IntCounterVec::new(Opts::new("ironplane_test_total", "Again."), &["verb"]).unwrap(),
        );
        let text = String::from_utf8(encode()).unwrap();
        assert!(
            text.contains("# TYPE ironplane_test_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("ironplane_test_total{verb=\"GET\"} 3\n"),
            "{text}"
        );
        assert_eq!(text.matches("# HELP ironplane_test_total").count(), 1);
        assert!(
            text.contains("# TYPE process_resident_memory_bytes gauge"),
            "{text}"
        );
        assert!(text.contains("process_start_time_seconds "), "{text}");
    }

    #[test]
    fn slis_carry_health_checks_and_the_start_time() {
        // A check of its own: the registry is the process's, and other tests run health checks
        // (`etcd` among them) in the same process under `cargo test`.
        observe_healthcheck("sli-test", "readyz", false);
        observe_healthcheck("sli-test", "readyz", true);
        let text = String::from_utf8(encode_slis()).unwrap();
        assert!(
            text.contains("kubernetes_healthcheck{name=\"sli-test\",type=\"readyz\"} 1\n"),
            "{text}"
        );
        for status in ["error", "success"] {
            let line = format!(
                "kubernetes_healthchecks_total{{name=\"sli-test\",status=\"{status}\",type=\"readyz\"}} 1\n"
            );
            assert!(text.contains(&line), "{text}");
        }
        assert!(text.contains("process_start_time_seconds "), "{text}");
        assert!(!text.contains("process_resident_memory_bytes"), "{text}");
    }
}
