//! Admission's Prometheus metrics (upstream: k8s.io/apiserver/pkg/admission/metrics), with
//! upstream's names, labels and buckets: each phase of a request
//! (`apiserver_admission_step_admission_duration_seconds`, type `admit` or `validate`), each
//! plugin (`apiserver_admission_controller_admission_duration_seconds`, by plugin name) and each
//! webhook call (`apiserver_admission_webhook_admission_duration_seconds` and
//! `apiserver_admission_webhook_request_total`, type `admit` or `validating` as upstream's
//! dispatchers say it, the answer's code capped at 600).
//!
//! Not here: upstream's `_summary` twin of the step family (the `prometheus` crate has no
//! summaries; the histogram carries the same observations).

use std::sync::{LazyLock, OnceLock};
use std::time::Instant;

use prometheus::{Histogram, HistogramVec, IntCounterVec};

use super::Operation;
use crate::metrics::{Stability, counter_vec, histogram_vec};

const BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5];

static STEP: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "apiserver_admission_step_admission_duration_seconds",
        Stability::Stable,
        "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
        &["type", "operation", "rejected"],
        BUCKETS.to_vec(),
    )
});
pub(super) static CONTROLLER: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "apiserver_admission_controller_admission_duration_seconds",
        Stability::Stable,
        "Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
        &["name", "type", "operation", "rejected"],
        BUCKETS.to_vec(),
    )
});
static WEBHOOK: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram_vec(
        "apiserver_admission_webhook_admission_duration_seconds",
        Stability::Stable,
        "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
        &["name", "type", "operation", "rejected"],
        vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0],
    )
});
static WEBHOOK_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter_vec(
        "apiserver_admission_webhook_request_total",
        Stability::Alpha,
        "Admission webhook request total, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
        &["name", "type", "operation", "code", "rejected"],
    )
});

/// The phase a plugin runs in, as the step and controller families label it.
#[derive(Clone, Copy)]
pub enum Step {
    Admit,
    Validate,
}

impl Step {
    fn label(self) -> &'static str {
        match self {
            Step::Admit => "admit",
            Step::Validate => "validate",
        }
    }
}

fn flag(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// Where a (step, operation, outcome) child sits in a table of children: 2 × 4 × 2.
fn slot(step: Step, op: Operation, rejected: bool) -> usize {
    (step as usize) * 8 + (op as usize) * 2 + usize::from(rejected)
}

/// The step histogram's children, each looked up on first use and kept: every request records
/// two steps, and a lookup hashes the labels.
static STEP_CHILDREN: [OnceLock<Histogram>; 16] = [const { OnceLock::new() }; 16];

/// One phase of a request, from `start` to `end` (the end of its last plugin, already read).
pub fn observe_step(step: Step, op: Operation, start: Instant, end: Instant, rejected: bool) {
    STEP_CHILDREN[slot(step, op, rejected)]
        .get_or_init(|| STEP.with_label_values(&[step.label(), op.as_str(), flag(rejected)]))
        .observe(end.saturating_duration_since(start).as_secs_f64());
}

/// One plugin's children of the controller histogram, made on first use and kept with the
/// plugin, so that recording each plugin's part of each request does not hash its labels.
pub struct PluginMetrics {
    name: &'static str,
    children: [OnceLock<Histogram>; 16],
}

impl PluginMetrics {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            children: [const { OnceLock::new() }; 16],
        }
    }

    /// The plugin's part of a phase, started at `start`; gives back when it ended, which is
    /// when the next plugin starts (one clock read per plugin: a request runs about twenty).
    pub fn observe(&self, step: Step, op: Operation, start: Instant, rejected: bool) -> Instant {
        let end = Instant::now();
        self.children[slot(step, op, rejected)]
            .get_or_init(|| {
                CONTROLLER.with_label_values(&[
                    self.name,
                    step.label(),
                    op.as_str(),
                    flag(rejected),
                ])
            })
            .observe(end.saturating_duration_since(start).as_secs_f64());
        end
    }
}

/// One webhook call, started at `start`: `mutating` picks upstream's type label, `code` is the
/// answer's (0 when no answer came).
pub fn observe_webhook(
    name: &str,
    mutating: bool,
    op: Operation,
    start: Instant,
    rejected: bool,
    code: u16,
) {
    let step = if mutating { "admit" } else { "validating" };
    let code = code.min(600).to_string();
    WEBHOOK_REQUESTS
        .with_label_values(&[name, step, op.as_str(), &code, flag(rejected)])
        .inc();
    WEBHOOK
        .with_label_values(&[name, step, op.as_str(), flag(rejected)])
        .observe(start.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_carry_upstreams_labels() {
        let start = Instant::now();
        observe_step(
            Step::Validate,
            Operation::Create,
            start,
            Instant::now(),
            true,
        );
        let plugin = PluginMetrics::new("MetricsTest");
        plugin.observe(Step::Admit, Operation::Update, start, false);
        plugin.observe(Step::Admit, Operation::Update, start, false);
        plugin.observe(Step::Validate, Operation::Update, start, true);
        observe_webhook("m.example.com", false, Operation::Delete, start, true, 799);
        assert_eq!(
            STEP.with_label_values(&["validate", "CREATE", "true"])
                .get_sample_count(),
            1
        );
        assert_eq!(
            CONTROLLER
                .with_label_values(&["MetricsTest", "admit", "UPDATE", "false"])
                .get_sample_count(),
            2
        );
        assert_eq!(
            CONTROLLER
                .with_label_values(&["MetricsTest", "validate", "UPDATE", "true"])
                .get_sample_count(),
            1
        );
        assert_eq!(
            WEBHOOK_REQUESTS
                .with_label_values(&["m.example.com", "validating", "DELETE", "600", "true"])
                .get(),
            1
        );
    }
}
