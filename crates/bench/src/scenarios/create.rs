//! The `create` scenario: concurrent clients creating small ConfigMaps with `generateName`.
//!
//! It owns the create loop and its stop rule (a duration or a count, and always the hard time
//! cap). It reports creates per second and create latency. It must not reuse names: every object
//! is new, so the figure is the cost of a create, never of a conflict.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::Method;

use super::{
    ClientConfig, CommonOptions, MAX_CONCURRENCY, MAX_COUNT, MAX_DURATION, Meter, Tally, Workspace,
    check_common, check_duration, check_range, configmap_body,
};
use crate::error::BenchError;
use crate::progress::{Counters, Progress};
use crate::report::{Row, ScenarioResult};
use crate::stats::Histogram;

#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// Concurrent clients.
    pub concurrency: usize,
    /// Run for this long...
    pub duration: Option<Duration>,
    /// ...or until this many creates were sent (exactly one of the two).
    pub count: Option<u64>,
    pub common: CommonOptions,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            concurrency: 8,
            duration: None,
            count: Some(1000),
            common: CommonOptions::default(),
        }
    }
}

impl CreateOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("concurrency", self.concurrency, 1, MAX_CONCURRENCY)?;
        match (self.duration, self.count) {
            (Some(d), None) => check_duration("duration", d, MAX_DURATION),
            (None, Some(n)) => check_range("count", n, 1, MAX_COUNT),
            _ => Err(BenchError::InvalidArgument(
                "give exactly one of --duration and --count".to_string(),
            )),
        }
    }
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &CreateOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &CreateOptions,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let tally = Arc::new(Tally::new(client.server()));
    let counters = Arc::new(Counters::default());
    let issued = Arc::new(AtomicU64::new(0));
    // generateName makes every create a new object, so all workers can send the same bytes.
    let body = configmap_body(
        None,
        "bench-",
        "create",
        &[],
        "",
        options.common.value_bytes(),
    );
    let path = workspace.configmaps_path();
    let planned = options.duration;
    let bar = Progress::start(
        options.common.progress,
        "create",
        counters.clone(),
        options.count,
        planned,
    );
    let meter = Meter::start(options.common.server_pid);
    let deadline = Instant::now() + planned.unwrap_or(MAX_DURATION);
    let count = options.count;

    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..options.concurrency {
        let client = client.clone();
        let tally = tally.clone();
        let counters = counters.clone();
        let issued = issued.clone();
        let body = body.clone();
        let path = path.clone();
        workers.spawn(async move {
            let mut histogram = Histogram::new();
            let mut errors = 0u64;
            loop {
                if Instant::now() >= deadline || tally.stopped() {
                    break;
                }
                if let Some(n) = count
                    && issued.fetch_add(1, Ordering::Relaxed) >= n
                {
                    break;
                }
                let start = Instant::now();
                let outcome = client
                    .send_on(worker, Method::POST, &path, Some(body.clone()))
                    .await;
                match &outcome {
                    Ok(r) if r.is_success() => {
                        histogram.record_duration(start.elapsed());
                        counters.done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        errors += 1;
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        tally.failed(&Method::POST, &path, &outcome);
                    }
                }
            }
            (histogram, errors)
        });
    }
    let mut histogram = Histogram::new();
    let mut errors = 0;
    while let Some(joined) = workers.join_next().await {
        let (h, e) = joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
        histogram.merge(&h);
        errors += e;
    }
    let elapsed = meter.elapsed();
    bar.finish();
    if let Some(fatal) = tally.take_fatal() {
        return Err(fatal);
    }

    let mut result = ScenarioResult::new("create", client.server(), client.http2());
    result.param("concurrency", options.concurrency);
    if let Some(d) = options.duration {
        result.param("duration_s", d.as_secs_f64());
    }
    if let Some(n) = options.count {
        result.param("count", n);
    }
    result.param("connections", client.connections());
    result.param("value_bytes", options.common.value_bytes());
    result
        .rows
        .push(Row::from_histogram("create", &histogram, errors, elapsed));
    meter.finish(&mut result, histogram.count() + errors);
    result.error_samples = tally.samples();
    Ok(result)
}
