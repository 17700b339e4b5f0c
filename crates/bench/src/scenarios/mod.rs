//! The scenarios, their options and hard limits, and what they share: the namespace they work in,
//! object bodies, error accounting, and the CPU and memory meters.
//!
//! It owns the rule that every loop is bounded in count and in time (the `MAX_*` limits below are
//! checked before anything is sent) and the rule that a 401 or 403 stops a run with a clear
//! error. It must not build URLs to anything but the client's server, and it must not leave
//! objects behind unless asked to (`keep`).

pub mod admission;
pub mod aggregator;
pub mod cluster;
pub mod crd;
pub mod create;
pub mod gc;
pub mod list;
pub mod memory;
pub mod mixed;
pub mod startup;
pub mod watch;

#[cfg(test)]
mod fake_tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde_json::json;

use crate::client::{ApiClient, ApiResponse, RequestError};
use crate::error::{BenchError, status_message};
use crate::progress::{Counters, Progress};
use crate::report::ScenarioResult;
use crate::stats::{ProcSample, sample_process};

pub use admission::AdmissionLoad;
pub use aggregator::AggregatorOptions;
pub use cluster::ClusterOptions;
pub use crd::CrdOptions;
pub use create::{CreateKind, CreateOptions};
pub use gc::GcOptions;
pub use list::ListOptions;
pub use memory::MemoryOptions;
pub use mixed::MixedOptions;
pub use startup::StartupOptions;
pub use watch::WatchOptions;

/// The longest measured phase any scenario runs.
pub const MAX_DURATION: Duration = Duration::from_secs(600);
/// The most objects any scenario creates or expects.
pub const MAX_OBJECTS: u64 = 100_000;
/// The most create requests of the `create` scenario.
pub const MAX_COUNT: u64 = 1_000_000;
/// The most concurrent clients.
pub const MAX_CONCURRENCY: usize = 4096;
/// The most connections (HTTP/2 connections, or HTTP/1.1 pools).
pub const MAX_CONNECTIONS: usize = 512;
/// The most concurrent watchers.
pub const MAX_WATCHERS: usize = 20_000;
/// The highest write rate of the watch scenario, per second.
pub const MAX_RATE: u32 = 10_000;
/// The most startup runs.
pub const MAX_RUNS: u32 = 1000;
/// The longest wait for one server start.
pub const MAX_STARTUP_WAIT: Duration = Duration::from_secs(300);
/// The largest ConfigMap value the tool writes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// The most LIST traversals per variant.
pub const MAX_ITERATIONS: u32 = 100_000;
/// How long cleanup (deleting the objects and the namespace) may take.
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(300);

/// The label every object the tool creates carries; cleanup deletes by it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "ironplane-bench";
/// The label that tells which scenario's set an object belongs to.
pub const SET_LABEL: &str = "ironplane-bench/set";

/// How to reach the server: the kubeconfig (read when the scenario starts, so that the startup
/// scenario can read one the server writes) and connection settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub kubeconfig: PathBuf,
    /// The kubeconfig context; its current context when `None`.
    pub context: Option<String>,
    /// Connections to spread requests over. With HTTP/2 each is one multiplexed connection.
    pub connections: usize,
    /// The time limit of one request (not of a watch).
    pub request_timeout: Duration,
}

impl ClientConfig {
    pub fn new(kubeconfig: impl Into<PathBuf>) -> ClientConfig {
        ClientConfig {
            kubeconfig: kubeconfig.into(),
            context: None,
            connections: 4,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Options every scenario shares.
#[derive(Clone, Debug, Default)]
pub struct CommonOptions {
    /// The namespace to work in; `bench-<random>` when `None`. Created if missing.
    pub namespace: Option<String>,
    /// Leave the objects (and a namespace the tool created) in place at the end.
    pub keep: bool,
    /// The server's process id, for its CPU and memory figures (read from `/proc`).
    pub server_pid: Option<u32>,
    /// A second process whose CPU and memory are reported beside the server's (its etcd), as the
    /// `etcd_*` figures.
    pub etcd_pid: Option<u32>,
    /// Print a progress line on stderr.
    pub progress: bool,
    /// Bytes of the value in each ConfigMap the tool writes; 64 when 0.
    pub value_bytes: usize,
}

impl CommonOptions {
    fn value_bytes(&self) -> usize {
        if self.value_bytes == 0 {
            64
        } else {
            self.value_bytes
        }
    }
}

/// One scenario with its options.
#[derive(Clone, Debug)]
pub enum Scenario {
    Startup(StartupOptions),
    Create(CreateOptions),
    Mixed(MixedOptions),
    List(ListOptions),
    Watch(WatchOptions),
    Memory(MemoryOptions),
    Crd(CrdOptions),
    Gc(GcOptions),
    Aggregator(AggregatorOptions),
    Cluster(ClusterOptions),
}

impl Scenario {
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Startup(_) => "startup",
            Scenario::Create(_) => "create",
            Scenario::Mixed(_) => "mixed",
            Scenario::List(_) => "list",
            Scenario::Watch(_) => "watch",
            Scenario::Memory(_) => "memory",
            Scenario::Crd(_) => "crd",
            Scenario::Gc(_) => "gc",
            Scenario::Aggregator(_) => "aggregator",
            Scenario::Cluster(_) => "cluster",
        }
    }

    /// Checks every bound before anything is sent.
    pub fn validate(&self) -> Result<(), BenchError> {
        match self {
            Scenario::Startup(o) => o.validate(),
            Scenario::Create(o) => o.validate(),
            Scenario::Mixed(o) => o.validate(),
            Scenario::List(o) => o.validate(),
            Scenario::Watch(o) => o.validate(),
            Scenario::Memory(o) => o.validate(),
            Scenario::Crd(o) => o.validate(),
            Scenario::Gc(o) => o.validate(),
            Scenario::Aggregator(o) => o.validate(),
            Scenario::Cluster(o) => o.validate(),
        }
    }
}

/// Runs one scenario against the kubeconfig's server and returns its figures.
pub async fn run_scenario(
    cfg: &ClientConfig,
    scenario: &Scenario,
) -> Result<ScenarioResult, BenchError> {
    scenario.validate()?;
    if cfg.connections == 0 || cfg.connections > MAX_CONNECTIONS {
        return Err(BenchError::InvalidArgument(format!(
            "connections must be between 1 and {MAX_CONNECTIONS}"
        )));
    }
    if cfg.request_timeout.is_zero() || cfg.request_timeout > MAX_DURATION {
        return Err(BenchError::InvalidArgument(format!(
            "request timeout must be between 1ms and {}s",
            MAX_DURATION.as_secs()
        )));
    }
    match scenario {
        Scenario::Startup(o) => startup::run(cfg, o).await,
        Scenario::Create(o) => create::run(cfg, o).await,
        Scenario::Mixed(o) => mixed::run(cfg, o).await,
        Scenario::List(o) => list::run(cfg, o).await,
        Scenario::Watch(o) => watch::run(cfg, o).await,
        Scenario::Memory(o) => memory::run(cfg, o).await,
        Scenario::Crd(o) => crd::run(cfg, o).await,
        Scenario::Gc(o) => gc::run(cfg, o).await,
        Scenario::Aggregator(o) => aggregator::run(cfg, o).await,
        Scenario::Cluster(o) => cluster::run(cfg, o).await,
    }
}

pub(crate) fn check_range<T: PartialOrd + std::fmt::Display>(
    name: &str,
    value: T,
    min: T,
    max: T,
) -> Result<(), BenchError> {
    if value < min || value > max {
        return Err(BenchError::InvalidArgument(format!(
            "{name} must be between {min} and {max}, not {value}"
        )));
    }
    Ok(())
}

pub(crate) fn check_duration(name: &str, value: Duration, max: Duration) -> Result<(), BenchError> {
    if value.is_zero() || value > max {
        return Err(BenchError::InvalidArgument(format!(
            "{name} must be more than 0 and at most {}s",
            max.as_secs()
        )));
    }
    Ok(())
}

pub(crate) fn check_common(common: &CommonOptions) -> Result<(), BenchError> {
    if let Some(ns) = &common.namespace
        && !is_dns_label(ns)
    {
        return Err(BenchError::InvalidArgument(format!(
            "namespace {ns:?} is not a valid name (lowercase letters, digits and '-', at most 63)"
        )));
    }
    if common.value_bytes > MAX_VALUE_BYTES {
        return Err(BenchError::InvalidArgument(format!(
            "value bytes must be at most {MAX_VALUE_BYTES}"
        )));
    }
    if let Some(pid) = common.server_pid
        && pid == 0
    {
        return Err(BenchError::InvalidArgument(
            "server pid must not be 0".to_string(),
        ));
    }
    if let Some(pid) = common.etcd_pid
        && pid == 0
    {
        return Err(BenchError::InvalidArgument(
            "etcd pid must not be 0".to_string(),
        ));
    }
    Ok(())
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A small fast random generator (xorshift64*), one per worker: the operation mix needs speed and
/// independence between workers, not quality.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut rng = Rng(seed ^ 0x9E37_79B9_7F4A_7C15 ^ random_seed());
        if rng.0 == 0 {
            rng.0 = 1;
        }
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A seed from the standard library's per-process random hash keys.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}

/// A short random suffix of lowercase letters and digits.
pub(crate) fn random_suffix(len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = Rng::new(0);
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// Encodes a query parameter value (label selectors hold `=`, `,` and `/`).
pub(crate) fn encode_query(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Encodes a path segment (object names are DNS names already; this is a guard).
pub(crate) fn encode_segment(value: &str) -> String {
    encode_query(value)
}

/// The JSON body of a ConfigMap the tool writes: `name` or, when `None`, `generateName`; the
/// tool's labels plus `labels`; one data key of `value_bytes` bytes that starts with `stamp` (so
/// that every update really changes the object: an update without changes is not written, and
/// no watch event follows).
pub(crate) fn configmap_body(
    name: Option<&str>,
    generate_name: &str,
    set: &str,
    labels: &[(&str, &str)],
    stamp: &str,
    value_bytes: usize,
) -> Bytes {
    let mut all_labels = serde_json::Map::new();
    all_labels.insert(MANAGED_BY_LABEL.to_string(), json!(MANAGED_BY_VALUE));
    all_labels.insert(SET_LABEL.to_string(), json!(set));
    for (k, v) in labels {
        all_labels.insert((*k).to_string(), json!(v));
    }
    let mut value = String::with_capacity(value_bytes.max(stamp.len()));
    value.push_str(stamp);
    while value.len() < value_bytes {
        value.push('x');
    }
    let metadata = match name {
        Some(name) => json!({"name": name, "labels": all_labels}),
        None => json!({"generateName": generate_name, "labels": all_labels}),
    };
    let body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"value": value},
    });
    Bytes::from(body.to_string())
}

/// Counts failures, keeps a few messages to show, and turns a 401 or 403 into a fatal error that
/// stops every worker.
pub(crate) struct Tally {
    server: String,
    samples: Mutex<Vec<String>>,
    sample_count: AtomicU64,
    fatal: Mutex<Option<BenchError>>,
    stop: AtomicBool,
}

const MAX_SAMPLES: u64 = 5;

impl Tally {
    pub fn new(server: &str) -> Tally {
        Tally {
            server: server.to_string(),
            samples: Mutex::new(Vec::new()),
            sample_count: AtomicU64::new(0),
            fatal: Mutex::new(None),
            stop: AtomicBool::new(false),
        }
    }

    /// Whether workers must stop now (credentials rejected).
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Notes a failed operation with a message.
    pub fn note(&self, message: String) {
        if self.sample_count.load(Ordering::Relaxed) >= MAX_SAMPLES {
            return;
        }
        if let Ok(mut samples) = self.samples.lock()
            && (samples.len() as u64) < MAX_SAMPLES
            && !samples.contains(&message)
        {
            samples.push(message);
            self.sample_count
                .store(samples.len() as u64, Ordering::Relaxed);
        }
    }

    /// Records the outcome of a request that did not succeed as expected.
    pub fn failed(&self, method: &Method, path: &str, outcome: &Result<ApiResponse, RequestError>) {
        match outcome {
            Ok(response) => {
                let code = response.status.as_u16();
                if (code == 401 || code == 403)
                    && let Ok(mut fatal) = self.fatal.lock()
                    && fatal.is_none()
                {
                    *fatal = Some(BenchError::from_status(
                        &self.server,
                        method.as_str(),
                        path,
                        code,
                        &response.body,
                    ));
                    self.stop.store(true, Ordering::Relaxed);
                }
                self.note(format!(
                    "{method} {}: {code} {}",
                    strip_query(path),
                    status_message(&response.body)
                ));
            }
            Err(error) => self.note(format!("{method} {}: {error}", strip_query(path))),
        }
    }

    /// The fatal error, if a worker met one.
    pub fn take_fatal(&self) -> Option<BenchError> {
        self.fatal.lock().ok().and_then(|mut f| f.take())
    }

    pub fn samples(&self) -> Vec<String> {
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn strip_query(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// Samples the server's RSS in the background, for its peak and mean during a phase.
pub(crate) struct RssSampler {
    task: tokio::task::JoinHandle<()>,
    peak: Arc<AtomicU64>,
    sum: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let sum = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let (p, s, n) = (peak.clone(), sum.clone(), samples.clone());
        let pid = pid.to_string();
        let task = tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(100));
            // The sampler runs for as long as the phase; the phase is bounded.
            loop {
                ticker.tick().await;
                if let Some(sample) = sample_process(&pid) {
                    p.fetch_max(sample.rss_bytes, Ordering::Relaxed);
                    s.fetch_add(sample.rss_bytes / 1024, Ordering::Relaxed);
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        RssSampler {
            task,
            peak,
            sum,
            samples,
        }
    }

    /// Stops sampling; returns (peak, mean) in bytes.
    pub fn finish(self) -> (u64, u64) {
        self.task.abort();
        let n = self.samples.load(Ordering::Relaxed);
        let mean = self
            .sum
            .load(Ordering::Relaxed)
            .checked_div(n)
            .map_or(0, |kib| kib * 1024);
        (self.peak.load(Ordering::Relaxed), mean)
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// CPU of the tool itself, of the server and of its etcd over a measured phase, and the server's
/// RSS.
pub(crate) struct Meter {
    started: Instant,
    own: Option<ProcSample>,
    server_pid: Option<u32>,
    server: Option<ProcSample>,
    rss: Option<RssSampler>,
    /// The etcd pid and its CPU seconds at the start.
    etcd: Option<(u32, f64)>,
}

impl Meter {
    pub fn start(common: &CommonOptions) -> Meter {
        let server_pid = common.server_pid;
        Meter {
            started: Instant::now(),
            own: sample_process("self"),
            server_pid,
            server: server_pid.and_then(|pid| sample_process(&pid.to_string())),
            rss: server_pid.map(RssSampler::start),
            etcd: CpuSpan::start(common).etcd,
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Adds the CPU and memory figures for a phase of `requests` requests to `result`:
    /// `bench_cpu_percent` (100 = one core busy; the machine has `bench_cores`),
    /// `server_cpu_percent`, `server_cpu_ms_per_request`, and the server's RSS at the end, at its
    /// peak and on average; with an etcd pid, `etcd_cpu_seconds`, `etcd_cpu_percent`,
    /// `etcd_cpu_ms_per_request` and `etcd_rss_mib`.
    pub fn finish(self, result: &mut ScenarioResult, requests: u64) {
        let wall = self.started.elapsed().as_secs_f64();
        if let Some((pid, before)) = self.etcd
            && let Some(after) = sample_process(&pid.to_string())
        {
            let cpu = after.cpu_seconds - before;
            result.figure("etcd_cpu_seconds", cpu);
            result.figure(
                "etcd_cpu_percent",
                if wall > 0.0 { cpu / wall * 100.0 } else { 0.0 },
            );
            if requests > 0 {
                result.figure("etcd_cpu_ms_per_request", cpu * 1000.0 / requests as f64);
            }
            result.figure("etcd_rss_mib", after.rss_bytes as f64 / MIB);
        }
        result.figure("wall_seconds", wall);
        if let (Some(before), Some(after)) = (self.own, sample_process("self")) {
            let cpu = after.cpu_seconds - before.cpu_seconds;
            result.figure("bench_cpu_seconds", cpu);
            result.figure(
                "bench_cpu_percent",
                if wall > 0.0 { cpu / wall * 100.0 } else { 0.0 },
            );
            result.figure(
                "bench_cores",
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1) as f64,
            );
        }
        let rss = self.rss.map(RssSampler::finish);
        if let Some(pid) = self.server_pid
            && let (Some(before), Some(after)) = (self.server, sample_process(&pid.to_string()))
        {
            let cpu = after.cpu_seconds - before.cpu_seconds;
            result.figure("server_cpu_seconds", cpu);
            result.figure(
                "server_cpu_percent",
                if wall > 0.0 { cpu / wall * 100.0 } else { 0.0 },
            );
            if requests > 0 {
                result.figure("server_cpu_ms_per_request", cpu * 1000.0 / requests as f64);
            }
            result.figure("server_rss_mib", after.rss_bytes as f64 / MIB);
            if let Some((peak, mean)) = rss {
                result.figure(
                    "server_rss_peak_mib",
                    peak.max(after.rss_bytes) as f64 / MIB,
                );
                if mean > 0 {
                    result.figure("server_rss_mean_mib", mean as f64 / MIB);
                }
            }
        }
    }
}

/// The CPU seconds the server and its etcd had used at the start of a span of work, for figures of
/// one part of a scenario (one LIST variant) beside the whole phase's [`Meter`].
pub(crate) struct CpuSpan {
    server: Option<(u32, f64)>,
    etcd: Option<(u32, f64)>,
}

impl CpuSpan {
    pub fn start(common: &CommonOptions) -> CpuSpan {
        let read = |pid: Option<u32>| {
            pid.and_then(|pid| sample_process(&pid.to_string()).map(|s| (pid, s.cpu_seconds)))
        };
        CpuSpan {
            server: read(common.server_pid),
            etcd: read(common.etcd_pid),
        }
    }

    /// Adds `server_cpu_ms_per_<unit>_<part>` and `etcd_cpu_ms_per_<unit>_<part>`: each process's
    /// CPU since the start over `count` operations (`part` is made a figure name: `full/cache`
    /// becomes `full_cache`).
    pub fn finish(self, result: &mut ScenarioResult, unit: &str, part: &str, count: u64) {
        if count == 0 {
            return;
        }
        let part: String = part
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        for (process, span) in [("server", self.server), ("etcd", self.etcd)] {
            if let Some((pid, before)) = span
                && let Some(after) = sample_process(&pid.to_string())
            {
                result.figure(
                    &format!("{process}_cpu_ms_per_{unit}_{part}"),
                    (after.cpu_seconds - before) * 1000.0 / count as f64,
                );
            }
        }
    }
}

/// The namespace a scenario works in, and the client it uses.
pub(crate) struct Workspace {
    pub client: Arc<ApiClient>,
    pub namespace: String,
    created_namespace: bool,
    keep: bool,
    /// Collections besides ConfigMaps that a scenario wrote to (`/api/v1/namespaces/x/pods`),
    /// emptied by the cleanup too.
    pub extra_collections: std::sync::Mutex<Vec<String>>,
}

impl Workspace {
    /// Reads the kubeconfig, connects, and makes sure the namespace exists. A 401 or 403 here is
    /// the clear "credentials rejected" error.
    pub async fn open(cfg: &ClientConfig, common: &CommonOptions) -> Result<Workspace, BenchError> {
        let context = crate::kubeconfig::load(&cfg.kubeconfig, cfg.context.as_deref())?;
        let client = ApiClient::connect(&context, cfg.connections, cfg.request_timeout).await?;
        for (pid, flag) in [
            (common.server_pid, "--server-pid"),
            (common.etcd_pid, "--etcd-pid"),
        ] {
            if let Some(pid) = pid
                && sample_process(&pid.to_string()).is_none()
            {
                return Err(BenchError::InvalidArgument(format!(
                    "no process {pid} to measure ({flag})"
                )));
            }
        }
        let namespace = common
            .namespace
            .clone()
            .unwrap_or_else(|| format!("bench-{}", random_suffix(6)));
        let path = format!("/api/v1/namespaces/{}", encode_segment(&namespace));
        let response = client
            .send(Method::GET, &path, None)
            .await
            .map_err(|e| client.unreachable(e))?;
        let created_namespace = match response.status.as_u16() {
            200 => false,
            404 => {
                let body = json!({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}});
                let response = client
                    .send(
                        Method::POST,
                        "/api/v1/namespaces",
                        Some(Bytes::from(body.to_string())),
                    )
                    .await
                    .map_err(|e| client.unreachable(e))?;
                match response.status.as_u16() {
                    // 409: someone created it between our GET and POST; it exists, which is all
                    // we need, but it is not ours to delete.
                    200..=299 => true,
                    409 => false,
                    code => {
                        return Err(BenchError::from_status(
                            client.server(),
                            "POST",
                            "/api/v1/namespaces",
                            code,
                            &response.body,
                        ));
                    }
                }
            }
            code => {
                return Err(BenchError::from_status(
                    client.server(),
                    "GET",
                    &path,
                    code,
                    &response.body,
                ));
            }
        };
        let workspace = Workspace {
            client: Arc::new(client),
            namespace,
            created_namespace,
            keep: common.keep,
            extra_collections: Default::default(),
        };
        // Listing ConfigMaps checks the permission the scenarios need, before any load.
        let list = format!("{}?limit=1", workspace.configmaps_path());
        if let Err(e) = workspace
            .client
            .expect_success(Method::GET, &list, None)
            .await
        {
            workspace.cleanup().await;
            return Err(e);
        }
        Ok(workspace)
    }

    /// `/api/v1/namespaces/<ns>/configmaps`
    pub fn configmaps_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/configmaps",
            encode_segment(&self.namespace)
        )
    }

    /// Deletes what the tool created, unless `keep`: the ConfigMaps it labelled, then the
    /// namespace if the tool created it. Returns a message when that failed; failures here never
    /// hide the figures.
    pub async fn cleanup(&self) -> Option<String> {
        if self.keep {
            return None;
        }
        let selector = encode_query(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
        // Deleting the objects first leaves nothing behind even on a server without a namespace
        // controller (a bare kube-apiserver keeps a deleted namespace's objects until
        // kube-controller-manager removes them).
        let mut collections = vec![self.configmaps_path()];
        collections.extend(
            self.extra_collections
                .lock()
                .map(|c| c.clone())
                .unwrap_or_default(),
        );
        let mut problem = None;
        for collection in collections {
            let path = format!("{collection}?labelSelector={selector}");
            match self
                .client
                .send_with_timeout(0, Method::DELETE, &path, None, CLEANUP_TIMEOUT)
                .await
            {
                Ok(r) if r.is_success() => {}
                Ok(r) => {
                    problem.get_or_insert(format!(
                        "cleanup: DELETE {}: {} {}",
                        strip_query(&path),
                        r.status.as_u16(),
                        status_message(&r.body)
                    ));
                }
                Err(e) => {
                    problem.get_or_insert(format!("cleanup: DELETE {}: {e}", strip_query(&path)));
                }
            }
        }
        if self.created_namespace {
            let path = format!("/api/v1/namespaces/{}", encode_segment(&self.namespace));
            match self
                .client
                .send_with_timeout(0, Method::DELETE, &path, None, CLEANUP_TIMEOUT)
                .await
            {
                Ok(r) if r.is_success() || r.status.as_u16() == 404 => {}
                Ok(r) => {
                    problem.get_or_insert(format!(
                        "cleanup: DELETE {path}: {} {}",
                        r.status.as_u16(),
                        status_message(&r.body)
                    ));
                }
                Err(e) => {
                    problem.get_or_insert(format!("cleanup: DELETE {path}: {e}"));
                }
            }
        }
        problem
    }

    /// Finishes a scenario: cleans up, and returns the result (with a cleanup problem noted) or
    /// the scenario's error.
    pub async fn close(
        &self,
        outcome: Result<ScenarioResult, BenchError>,
    ) -> Result<ScenarioResult, BenchError> {
        let problem = self.cleanup().await;
        let mut result = outcome?;
        result.param("namespace", &self.namespace);
        if let Some(problem) = problem {
            result.error_samples.push(problem);
        }
        Ok(result)
    }

    /// Creates ConfigMaps with `concurrency` clients: named `names` when given, else `count`
    /// objects with `generateName`. An existing name (409) counts as created. Returns the
    /// latency histogram and the error count.
    pub async fn create_objects(
        &self,
        objects: ObjectSpec,
        concurrency: usize,
        progress: bool,
        tally: &Arc<Tally>,
    ) -> Result<(crate::stats::Histogram, u64, Duration), BenchError> {
        let total = objects.count();
        let counters = Arc::new(Counters::default());
        let bar = Progress::start(
            progress,
            &format!("creating {total} objects"),
            counters.clone(),
            Some(total),
            None,
        );
        let next = Arc::new(AtomicU64::new(0));
        let objects = Arc::new(objects);
        let deadline = Instant::now() + MAX_DURATION;
        let started = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for worker in 0..concurrency.max(1) {
            let client = self.client.clone();
            let path = self.configmaps_path();
            let next = next.clone();
            let objects = objects.clone();
            let counters = counters.clone();
            let tally = tally.clone();
            workers.spawn(async move {
                let mut histogram = crate::stats::Histogram::new();
                let mut errors = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || Instant::now() >= deadline || tally.stopped() {
                        break;
                    }
                    let body = objects.body(i);
                    let start = Instant::now();
                    let outcome = client
                        .send_on(worker, Method::POST, &path, Some(body))
                        .await;
                    match &outcome {
                        Ok(r) if r.is_success() || r.status.as_u16() == 409 => {
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
        let mut histogram = crate::stats::Histogram::new();
        let mut errors = 0;
        while let Some(joined) = workers.join_next().await {
            let (h, e) = joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
            histogram.merge(&h);
            errors += e;
        }
        bar.finish();
        if let Some(fatal) = tally.take_fatal() {
            return Err(fatal);
        }
        Ok((histogram, errors, started.elapsed()))
    }
}

/// Which ConfigMaps to create.
pub(crate) struct ObjectSpec {
    /// `Some(prefix)`: objects `<prefix><i>`; `None`: `generateName`.
    pub name_prefix: Option<String>,
    pub generate_name: String,
    pub count: u64,
    pub set: String,
    /// A label `ironplane-bench/group=g<i % groups>` when `groups` > 0.
    pub groups: u64,
    pub value_bytes: usize,
}

/// The label that splits the mixed scenario's set into groups for LIST with a selector.
pub const GROUP_LABEL: &str = "ironplane-bench/group";

impl ObjectSpec {
    fn count(&self) -> u64 {
        self.count
    }

    pub fn name(&self, i: u64) -> Option<String> {
        self.name_prefix.as_ref().map(|p| format!("{p}{i}"))
    }

    fn body(&self, i: u64) -> Bytes {
        let name = self.name(i);
        let group = if self.groups > 0 {
            format!("g{}", i % self.groups)
        } else {
            String::new()
        };
        let labels: Vec<(&str, &str)> = if self.groups > 0 {
            vec![(GROUP_LABEL, group.as_str())]
        } else {
            Vec::new()
        };
        configmap_body(
            name.as_deref(),
            &self.generate_name,
            &self.set,
            &labels,
            &format!("v{i}-"),
            self.value_bytes,
        )
    }
}

/// Reads `metadata.resourceVersion` of an object or list body.
pub(crate) fn resource_version(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Meta>,
    }
    serde_json::from_slice::<Object>(body)
        .ok()?
        .metadata?
        .resource_version
        .filter(|rv| !rv.is_empty())
}

/// Reads `metadata.name` of an object body.
pub(crate) fn object_name(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        name: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Meta>,
    }
    serde_json::from_slice::<Object>(body).ok()?.metadata?.name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_encoding() {
        assert_eq!(
            encode_query("app.kubernetes.io/managed-by=ironplane-bench,a=b"),
            "app.kubernetes.io%2Fmanaged-by%3Dironplane-bench%2Ca%3Db"
        );
    }

    #[test]
    fn configmap_bodies() {
        let body = configmap_body(None, "bench-", "create", &[("k", "v")], "s1-", 10);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["metadata"]["generateName"], "bench-");
        assert_eq!(
            value["metadata"]["labels"][MANAGED_BY_LABEL],
            MANAGED_BY_VALUE
        );
        assert_eq!(value["metadata"]["labels"][SET_LABEL], "create");
        assert_eq!(value["metadata"]["labels"]["k"], "v");
        assert_eq!(value["data"]["value"], "s1-xxxxxxx");
        let named = configmap_body(Some("a"), "bench-", "s", &[], "", 0);
        let value: serde_json::Value = serde_json::from_slice(&named).unwrap();
        assert_eq!(value["metadata"]["name"], "a");
        assert!(value["metadata"].get("generateName").is_none());
    }

    #[test]
    fn metadata_readers() {
        let body = br#"{"metadata":{"name":"x","resourceVersion":"42"},"items":[]}"#;
        assert_eq!(resource_version(body).as_deref(), Some("42"));
        assert_eq!(object_name(body).as_deref(), Some("x"));
        assert_eq!(resource_version(b"{}"), None);
        assert_eq!(resource_version(b"nope"), None);
    }

    #[test]
    fn names_and_random() {
        assert!(is_dns_label("bench-abc1"));
        assert!(!is_dns_label("Bench"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label(&"a".repeat(64)));
        let suffix = random_suffix(6);
        assert_eq!(suffix.len(), 6);
        assert!(is_dns_label(&suffix));
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| rng.below(7) < 7));
    }

    #[test]
    fn bounds_are_checked() {
        assert!(check_range("concurrency", 0usize, 1, 10).is_err());
        assert!(check_range("concurrency", 11usize, 1, 10).is_err());
        assert!(check_range("concurrency", 5usize, 1, 10).is_ok());
        assert!(check_duration("duration", Duration::ZERO, MAX_DURATION).is_err());
        assert!(check_duration("duration", Duration::from_secs(601), MAX_DURATION).is_err());
        let common = CommonOptions {
            namespace: Some("Bad_Name".to_string()),
            ..Default::default()
        };
        assert!(check_common(&common).is_err());
    }
}
