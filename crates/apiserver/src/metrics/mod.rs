//! Prometheus metrics, served at `/metrics` (upstream: k8s.io/component-base/metrics and its
//! `legacyregistry`). One process-wide registry, as upstream's: the `prometheus` crate's default
//! registry, which every crate of the server can reach (storage records its own families without
//! depending on this one, and defines the helpers re-exported here). Each layer defines its metric
//! families next to the code that records them — a `LazyLock` holding the family, registered
//! through [`register`] the first time it is touched — and records into them directly: an atomic
//! add and, for labelled families, one lookup of the label values.
//!
//! The text is Prometheus's exposition format 0.0.4 as client_golang writes it (the `prometheus`
//! crate's encoder), with client_golang's `process_*` collector (CPU seconds, resident and virtual
//! memory, file descriptors, start time), which the default registry carries on Linux.
//!
//! Every family is defined with upstream's stability level ([`Stability`], deprecated ones with
//! the release that deprecated them), and its HELP text is composed from that and upstream's
//! help as component-base composes it: `[STABLE] Counter of ...`, or
//! `[STABLE] (Deprecated since 1.34.0) ...`. client_golang's own `process_*` families carry no
//! level, as upstream's.
//!
//! What it must not do: fail a scrape because one family is broken, or let two families take one
//! name (a second registration under a taken name is refused and logged; the family still
//! records, unseen).
//!
//! `/metrics/slis` is upstream's second registry: the health checks' results
//! (`kubernetes_healthcheck`, `kubernetes_healthchecks_total`) and the process start time.

use std::sync::LazyLock;

use prometheus::core::Collector;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Registry, TextEncoder};
// The helpers are storage's, the lowest crate that registers families: one set, so that every
// family's HELP text is composed the same way wherever it is defined.
pub use storage::metrics::{
    Level, Stability, counter, counter_vec, exponential_buckets, gauge_vec, histogram_vec, opts,
    register, unbuildable,
};

/// The content type of upstream's answer to a scrape in the text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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
        opts(
            "kubernetes_healthcheck",
            Stability::Stable,
            "This metric records the result of a single healthcheck.",
        ),
        &["name", "type"],
    )
    .unwrap_or_else(|e| unbuildable("kubernetes_healthcheck", e));
    let total = IntCounterVec::new(
        opts(
            "kubernetes_healthchecks_total",
            Stability::Stable,
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
    // Upstream's start time here is component-base's ALPHA gauge, not client_golang's process
    // collector that `/metrics` serves: same value, but its HELP text carries the level.
    families.extend(
        prometheus::default_registry()
            .gather()
            .into_iter()
            .filter(|f| f.name() == "process_start_time_seconds")
            .map(|mut f| {
                let help = Level::from(Stability::Alpha).help(f.help());
                f.set_help(help);
                f
            }),
    );
    let mut out = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
        tracing::warn!(error = %e, "SLI metrics could not be encoded");
    }
    out
}

#[cfg(test)]
mod tests {
    use prometheus::Opts;

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
    fn help_text_is_composed_as_component_base_composes_it() {
        // The expectations of component-base's own tests: the level in brackets, and the
        // deprecation notice between it and the help.
        assert_eq!(
            Level::from(Stability::Alpha).help("alpha metric"),
            "[ALPHA] alpha metric"
        );
        assert_eq!(
            Level::from(Stability::Internal).help("internal metrics"),
            "[INTERNAL] internal metrics"
        );
        assert_eq!(
            Level::from(Stability::Beta).help("counter help"),
            "[BETA] counter help"
        );
        assert_eq!(
            Level::from(Stability::Stable).help("stable metrics"),
            "[STABLE] stable metrics"
        );
        assert_eq!(
            Stability::Beta
                .deprecated_since("1.15.0")
                .help("counter help"),
            "[BETA] (Deprecated since 1.15.0) counter help"
        );
        assert_eq!(
            Stability::Stable
                .deprecated_since("1.17.0")
                .help("stable deprecated metrics"),
            "[STABLE] (Deprecated since 1.17.0) stable deprecated metrics"
        );

        // Each helper writes the composed text into the family's HELP line.
        counter_vec(
            "ironplane_help_stable_total",
            Stability::Stable,
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            &["verb"],
        )
        .with_label_values(&["GET"])
        .inc();
        counter(
            "ironplane_help_alpha_total",
            Stability::Alpha,
            "alpha metric",
        )
        .inc();
        gauge_vec(
            "ironplane_help_deprecated",
            Stability::Stable.deprecated_since("1.17.0"),
            "stable deprecated metrics",
            &["name"],
        )
        .with_label_values(&["value"])
        .set(1);
        histogram_vec(
            "ironplane_help_beta_seconds",
            Stability::Beta,
            "gauge help",
            &["name"],
            vec![1.0],
        )
        .with_label_values(&["value"])
        .observe(0.5);
        let text = String::from_utf8(encode()).unwrap();
        for line in [
            "# HELP ironplane_help_stable_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n",
            "# HELP ironplane_help_alpha_total [ALPHA] alpha metric\n",
            "# HELP ironplane_help_deprecated [STABLE] (Deprecated since 1.17.0) stable deprecated metrics\n",
            "# HELP ironplane_help_beta_seconds [BETA] gauge help\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // client_golang's process collector is not component-base's: no level.
        assert!(
            text.contains(
                "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
            ),
            "{text}"
        );
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
        for line in [
            "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n",
            "# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n",
            "# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.\n",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
