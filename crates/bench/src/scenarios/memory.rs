//! The `memory` scenario: the server's resident memory idle and after N more objects.
//!
//! It owns the measuring order: RSS idle (after the namespace exists, the last of a few samples),
//! then N ConfigMaps created, a settle pause, and RSS again. It must not guess: without
//! `--server-pid` there is nothing to measure, and it says so before creating anything.

use std::sync::Arc;
use std::time::Duration;

use super::{
    ClientConfig, CommonOptions, MAX_OBJECTS, Meter, ObjectSpec, Tally, Workspace, check_common,
    check_duration, check_range,
};
use crate::error::BenchError;
use crate::report::{Row, ScenarioResult};
use crate::stats::sample_process;

const SETUP_CONCURRENCY: usize = 32;
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Clone, Debug)]
pub struct MemoryOptions {
    pub objects: u64,
    /// The pause before each RSS reading, for the server's allocator and caches to settle.
    pub settle: Duration,
    /// Concurrent creates.
    pub concurrency: usize,
    pub common: CommonOptions,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            objects: 10_000,
            settle: Duration::from_secs(2),
            concurrency: SETUP_CONCURRENCY,
            common: CommonOptions::default(),
        }
    }
}

impl MemoryOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        if self.common.server_pid.is_none() {
            return Err(BenchError::InvalidArgument(
                "the memory scenario needs --server-pid".to_string(),
            ));
        }
        check_range("objects", self.objects, 1, MAX_OBJECTS)?;
        check_range("concurrency", self.concurrency, 1, super::MAX_CONCURRENCY)?;
        check_duration("settle", self.settle, Duration::from_secs(60))
    }
}

/// The server's RSS after `settle`: the last of five samples taken over that pause.
async fn settled_rss(pid: u32, settle: Duration) -> Result<u64, BenchError> {
    let mut last = None;
    for _ in 0..5 {
        tokio::time::sleep(settle / 5).await;
        if let Some(sample) = sample_process(&pid.to_string()) {
            last = Some(sample.rss_bytes);
        }
    }
    last.ok_or_else(|| BenchError::InvalidArgument(format!("process {pid} is gone")))
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &MemoryOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &MemoryOptions,
) -> Result<ScenarioResult, BenchError> {
    let pid = options.common.server_pid.ok_or_else(|| {
        BenchError::InvalidArgument("the memory scenario needs --server-pid".to_string())
    })?;
    let client = workspace.client.clone();
    let tally = Arc::new(Tally::new(client.server()));
    let idle = settled_rss(pid, options.settle).await?;
    let meter = Meter::start(&options.common);
    let spec = ObjectSpec {
        name_prefix: None,
        generate_name: "memory-".to_string(),
        count: options.objects,
        set: "memory".to_string(),
        groups: 0,
        value_bytes: options.common.value_bytes(),
    };
    let (histogram, errors, elapsed) = workspace
        .create_objects(spec, options.concurrency, options.common.progress, &tally)
        .await?;
    let after = settled_rss(pid, options.settle).await?;

    let mut result = ScenarioResult::new("memory", client.server(), client.http2());
    result.param("objects", options.objects);
    result.param("value_bytes", options.common.value_bytes());
    result.param("concurrency", options.concurrency);
    result
        .rows
        .push(Row::from_histogram("create", &histogram, errors, elapsed));
    meter.finish(&mut result, histogram.count() + errors);
    result.figure("server_rss_idle_mib", idle as f64 / MIB);
    result.figure("server_rss_after_mib", after as f64 / MIB);
    let delta = after as f64 - idle as f64;
    result.figure("server_rss_delta_mib", delta / MIB);
    if histogram.count() > 0 {
        result.figure(
            "server_rss_bytes_per_object",
            delta / histogram.count() as f64,
        );
    }
    result.error_samples = tally.samples();
    Ok(result)
}
