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

use prometheus::core::Collector;
use prometheus::{Encoder, TextEncoder};

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

/// Every registered family, in the text format.
pub fn encode() -> Vec<u8> {
    let families = prometheus::default_registry().gather();
    let mut out = Vec::with_capacity(64 * 1024);
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!(error = %e, "metrics could not be encoded");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{IntCounterVec, Opts};

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
}
