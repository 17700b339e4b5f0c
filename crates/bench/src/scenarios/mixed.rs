//! The `mixed` scenario: a read-heavy, controller-like mix over a pre-created set of ConfigMaps.
//!
//! It owns the mix: GET 60 %, LIST with a label selector 10 %, UPDATE 20 %, CREATE and DELETE
//! 10 % together (each worker deletes objects it created itself, so deletes never race with each
//! other). Updates are unconditional PUTs (no resourceVersion, which ConfigMaps allow) that change
//! the data, so no request fails on a conflict between workers. With `updates_only` every request
//! is such an update (the server's CPU per update alone). It must not touch objects outside its
//! set.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::Method;

use super::{
    ClientConfig, CommonOptions, GROUP_LABEL, MAX_CONCURRENCY, MAX_DURATION, MAX_OBJECTS, Meter,
    ObjectSpec, Rng, Tally, Workspace, check_common, check_duration, check_range, configmap_body,
    encode_query, object_name,
};
use crate::error::BenchError;
use crate::progress::{Counters, Progress};
use crate::report::{Row, ScenarioResult};
use crate::stats::Histogram;

/// Label groups of the set: a LIST with a selector returns a tenth of it.
const GROUPS: u64 = 10;
/// Concurrency of the set's creation (not measured).
const SETUP_CONCURRENCY: usize = 32;

#[derive(Clone, Debug)]
pub struct MixedOptions {
    pub concurrency: usize,
    pub duration: Duration,
    /// Size of the pre-created set.
    pub objects: u64,
    /// Every request is an UPDATE.
    pub updates_only: bool,
    pub common: CommonOptions,
}

impl Default for MixedOptions {
    fn default() -> Self {
        MixedOptions {
            concurrency: 16,
            duration: Duration::from_secs(10),
            objects: 1000,
            updates_only: false,
            common: CommonOptions::default(),
        }
    }
}

impl MixedOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("concurrency", self.concurrency, 1, MAX_CONCURRENCY)?;
        check_duration("duration", self.duration, MAX_DURATION)?;
        check_range("objects", self.objects, 1, MAX_OBJECTS)
    }
}

#[derive(Clone, Copy)]
enum Verb {
    Get,
    List,
    Update,
    Create,
    Delete,
}

const VERBS: [(Verb, &str); 5] = [
    (Verb::Get, "get"),
    (Verb::List, "list"),
    (Verb::Update, "update"),
    (Verb::Create, "create"),
    (Verb::Delete, "delete"),
];

#[derive(Default)]
struct VerbStats {
    histograms: [Histogram; 5],
    errors: [u64; 5],
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &MixedOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &MixedOptions,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let tally = Arc::new(Tally::new(client.server()));
    let value_bytes = options.common.value_bytes();
    let spec = ObjectSpec {
        name_prefix: Some("mixed-".to_string()),
        generate_name: String::new(),
        count: options.objects,
        set: "mixed".to_string(),
        groups: GROUPS,
        value_bytes,
    };
    let (_, setup_errors, _) = workspace
        .create_objects(spec, SETUP_CONCURRENCY, options.common.progress, &tally)
        .await?;
    if setup_errors > 0 {
        return Err(BenchError::Protocol(format!(
            "{setup_errors} of {} objects of the set could not be created: {}",
            options.objects,
            tally.samples().join("; ")
        )));
    }

    let counters = Arc::new(Counters::default());
    let bar = Progress::start(
        options.common.progress,
        "mixed",
        counters.clone(),
        None,
        Some(options.duration),
    );
    let meter = Meter::start(&options.common);
    let deadline = Instant::now() + options.duration;
    let base = workspace.configmaps_path();
    let objects = options.objects;
    let updates_only = options.updates_only;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..options.concurrency {
        let client = client.clone();
        let tally = tally.clone();
        let counters = counters.clone();
        let base = base.clone();
        workers.spawn(async move {
            let mut stats = VerbStats::default();
            let mut rng = Rng::new(worker as u64);
            let mut own: std::collections::VecDeque<String> = std::collections::VecDeque::new();
            let mut sequence = 0u64;
            while Instant::now() < deadline && !tally.stopped() {
                let verb = match rng.below(100) {
                    _ if updates_only => Verb::Update,
                    0..60 => Verb::Get,
                    60..70 => Verb::List,
                    70..90 => Verb::Update,
                    // Half creates, half deletes of this worker's own earlier creates.
                    _ if own.is_empty() || rng.below(2) == 0 => Verb::Create,
                    _ => Verb::Delete,
                };
                sequence += 1;
                let (method, path, body) = match verb {
                    Verb::Get => (
                        Method::GET,
                        format!("{base}/mixed-{}", rng.below(objects)),
                        None,
                    ),
                    Verb::List => (
                        Method::GET,
                        format!(
                            "{base}?labelSelector={}",
                            encode_query(&format!("{GROUP_LABEL}=g{}", rng.below(GROUPS)))
                        ),
                        None,
                    ),
                    Verb::Update => {
                        let i = rng.below(objects);
                        let name = format!("mixed-{i}");
                        let group = format!("g{}", i % GROUPS);
                        let body = configmap_body(
                            Some(&name),
                            "",
                            "mixed",
                            &[(GROUP_LABEL, &group)],
                            &format!("w{worker}-{sequence}-"),
                            value_bytes,
                        );
                        (Method::PUT, format!("{base}/{name}"), Some(body))
                    }
                    Verb::Create => {
                        let body = configmap_body(
                            None,
                            "mixed-extra-",
                            "mixed-extra",
                            &[],
                            "",
                            value_bytes,
                        );
                        (Method::POST, base.clone(), Some(body))
                    }
                    Verb::Delete => {
                        let name = own.pop_front().unwrap_or_default();
                        (Method::DELETE, format!("{base}/{name}"), None)
                    }
                };
                let index = verb as usize;
                let start = Instant::now();
                let outcome = client.send_on(worker, method.clone(), &path, body).await;
                match &outcome {
                    Ok(r) if r.is_success() => {
                        stats.histograms[index].record_duration(start.elapsed());
                        counters.done.fetch_add(1, Ordering::Relaxed);
                        if let Verb::Create = verb
                            && let Some(name) = object_name(&r.body)
                        {
                            own.push_back(name);
                        }
                    }
                    _ => {
                        stats.errors[index] += 1;
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        tally.failed(&method, &path, &outcome);
                    }
                }
            }
            stats
        });
    }
    let mut total = VerbStats::default();
    while let Some(joined) = workers.join_next().await {
        let stats = joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
        for i in 0..VERBS.len() {
            total.histograms[i].merge(&stats.histograms[i]);
            total.errors[i] += stats.errors[i];
        }
    }
    let elapsed = meter.elapsed();
    bar.finish();
    if let Some(fatal) = tally.take_fatal() {
        return Err(fatal);
    }

    let mut result = ScenarioResult::new("mixed", client.server(), client.http2());
    result.param("concurrency", options.concurrency);
    result.param("duration_s", options.duration.as_secs_f64());
    result.param("objects", options.objects);
    result.param("connections", client.connections());
    result.param("value_bytes", value_bytes);
    let mut all = Histogram::new();
    let mut all_errors = 0;
    for (i, (_, label)) in VERBS.iter().enumerate() {
        result.rows.push(Row::from_histogram(
            label,
            &total.histograms[i],
            total.errors[i],
            elapsed,
        ));
        all.merge(&total.histograms[i]);
        all_errors += total.errors[i];
    }
    result
        .rows
        .push(Row::from_histogram("all", &all, all_errors, elapsed));
    meter.finish(&mut result, all.count() + all_errors);
    result.error_samples = tally.samples();
    Ok(result)
}
