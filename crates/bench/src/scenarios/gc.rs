//! The `gc` scenario: a soak of the garbage collector. N owner ConfigMaps, each with D dependent
//! ConfigMaps naming it in `ownerReferences`, are created; the owners are deleted at once (one
//! DELETE of their collection); the scenario waits until the collector has deleted every
//! dependent. It runs the cycle `rounds` times, reading the server's RSS (with
//! `--server-pid`) idle, after each round's creates and after each round's collection, so that
//! a leak shows as growth from round to round.
//!
//! It measures the server's collector, which must exist: kube-apiserver alone never collects
//! (kube-controller-manager does), and the wait then ends at `--max-wait` with an error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use super::{
    ClientConfig, CommonOptions, MANAGED_BY_LABEL, MANAGED_BY_VALUE, MAX_CONCURRENCY, MAX_OBJECTS,
    SET_LABEL, Tally, Workspace, check_common, check_duration, check_range, encode_query,
};
use crate::error::BenchError;
use crate::report::{Row, ScenarioResult};
use crate::stats::{Histogram, sample_process};

const MIB: f64 = 1024.0 * 1024.0;

#[derive(Clone, Debug)]
pub struct GcOptions {
    pub owners: u64,
    pub dependents: u64,
    pub rounds: u32,
    pub concurrency: usize,
    /// The longest wait for the collector to finish one round.
    pub max_wait: Duration,
    /// The pause before each RSS reading.
    pub settle: Duration,
    pub common: CommonOptions,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            owners: 10_000,
            dependents: 3,
            rounds: 2,
            concurrency: 32,
            max_wait: Duration::from_secs(300),
            settle: Duration::from_secs(2),
            common: CommonOptions::default(),
        }
    }
}

impl GcOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("owners", self.owners, 1, MAX_OBJECTS)?;
        check_range("dependents", self.dependents, 1, 100)?;
        check_range(
            "owners × dependents",
            self.owners * self.dependents,
            1,
            MAX_OBJECTS * 10,
        )?;
        check_range("rounds", self.rounds, 1, 10)?;
        check_range("concurrency", self.concurrency, 1, MAX_CONCURRENCY)?;
        check_duration("max-wait", self.max_wait, super::MAX_DURATION)?;
        check_duration("settle", self.settle, Duration::from_secs(60))
    }
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &GcOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

/// The server's RSS after `settle` (the last of five samples), when its pid is known.
async fn settled_rss(pid: Option<u32>, settle: Duration) -> Option<f64> {
    let pid = pid?;
    let mut last = None;
    for _ in 0..5 {
        tokio::time::sleep(settle / 5).await;
        if let Some(s) = sample_process(&pid.to_string()) {
            last = Some(s.rss_bytes as f64 / MIB);
        }
    }
    last
}

fn configmap(name: &str, set: &str, owner: Option<(&str, &str)>) -> Bytes {
    let mut body = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, SET_LABEL: set},
        },
        "data": {"k": "v"},
    });
    if let Some((owner_name, uid)) = owner {
        body["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner_name, "uid": uid,
            "controller": true, "blockOwnerDeletion": true,
        }]);
    }
    Bytes::from(body.to_string())
}

/// Creates `count` objects with `concurrency` workers; `body(i)` is the i-th. Returns the
/// latency histogram, the uid of each object (empty where the create failed) and the errors.
async fn create_all(
    workspace: &Workspace,
    count: u64,
    concurrency: usize,
    tally: &Arc<Tally>,
    body: Arc<dyn Fn(u64) -> Bytes + Send + Sync>,
) -> Result<(Histogram, Vec<String>, u64), BenchError> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let client = workspace.client.clone();
        let path = workspace.configmaps_path();
        let next = next.clone();
        let tally = tally.clone();
        let body = body.clone();
        workers.spawn(async move {
            let mut histogram = Histogram::new();
            let mut uids = Vec::new();
            let mut errors = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || tally.stopped() {
                    break;
                }
                let start = Instant::now();
                let outcome = client
                    .send_on(worker, Method::POST, &path, Some(body(i)))
                    .await;
                match &outcome {
                    Ok(r) if r.is_success() => {
                        histogram.record_duration(start.elapsed());
                        let uid = serde_json::from_slice::<Value>(&r.body)
                            .ok()
                            .and_then(|v| v["metadata"]["uid"].as_str().map(str::to_string))
                            .unwrap_or_default();
                        uids.push((i, uid));
                    }
                    _ => {
                        errors += 1;
                        tally.failed(&Method::POST, &path, &outcome);
                    }
                }
            }
            (histogram, uids, errors)
        });
    }
    let mut histogram = Histogram::new();
    let mut uids = vec![String::new(); count as usize];
    let mut errors = 0;
    while let Some(joined) = workers.join_next().await {
        let (h, u, e) = joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
        histogram.merge(&h);
        for (i, uid) in u {
            uids[i as usize] = uid;
        }
        errors += e;
    }
    if let Some(fatal) = tally.take_fatal() {
        return Err(fatal);
    }
    Ok((histogram, uids, errors))
}

/// How many objects of `set` are left (one LIST of at most one item, reading the count of the
/// rest).
async fn remaining(workspace: &Workspace, set: &str) -> Result<u64, BenchError> {
    let path = format!(
        "{}?limit=1&labelSelector={}",
        workspace.configmaps_path(),
        encode_query(&format!("{SET_LABEL}={set}"))
    );
    let body = workspace
        .client
        .expect_success(Method::GET, &path, None)
        .await?;
    let list: Value = serde_json::from_slice(&body)
        .map_err(|e| BenchError::Protocol(format!("a list that is not JSON: {e}")))?;
    let items = list["items"].as_array().map_or(0, Vec::len) as u64;
    let rest = list["metadata"]["remainingItemCount"].as_u64().unwrap_or(0);
    Ok(items + rest)
}

async fn measure(workspace: &Workspace, options: &GcOptions) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let tally = Arc::new(Tally::new(client.server()));
    let pid = options.common.server_pid;
    let mut result = ScenarioResult::new("gc", client.server(), client.http2());
    result.param("owners", options.owners);
    result.param("dependents_per_owner", options.dependents);
    result.param("rounds", options.rounds);
    result.param("concurrency", options.concurrency);
    if let Some(idle) = settled_rss(pid, options.settle).await {
        result.figure("server_rss_idle_mib", idle);
    }
    let total_dependents = options.owners * options.dependents;
    for round in 1..=options.rounds {
        let owner_set = format!("gc-owner-{round}");
        let dep_set = format!("gc-dependent-{round}");
        let owner_body = {
            let set = owner_set.clone();
            Arc::new(move |i: u64| configmap(&format!("gc{round}-owner-{i}"), &set, None))
        };
        let (owners_h, uids, owner_errors) = create_all(
            workspace,
            options.owners,
            options.concurrency,
            &tally,
            owner_body,
        )
        .await?;
        let uids = Arc::new(uids);
        let per_owner = options.dependents;
        let dep_body = {
            let set = dep_set.clone();
            let uids = uids.clone();
            Arc::new(move |i: u64| {
                let owner = i / per_owner;
                let owner_name = format!("gc{round}-owner-{owner}");
                configmap(
                    &format!("gc{round}-dep-{owner}-{}", i % per_owner),
                    &set,
                    Some((&owner_name, &uids[owner as usize])),
                )
            })
        };
        let (deps_h, _, dep_errors) = create_all(
            workspace,
            total_dependents,
            options.concurrency,
            &tally,
            dep_body,
        )
        .await?;
        if owner_errors + dep_errors > 0 {
            return Err(BenchError::Protocol(format!(
                "round {round}: {} creates failed: {}",
                owner_errors + dep_errors,
                tally.samples().join("; ")
            )));
        }
        if round == 1 {
            result.rows.push(Row::from_histogram(
                "create owner",
                &owners_h,
                0,
                Duration::ZERO,
            ));
            result.rows.push(Row::from_histogram(
                "create dependent",
                &deps_h,
                0,
                Duration::ZERO,
            ));
        }
        if let Some(rss) = settled_rss(pid, options.settle).await {
            result.figure(&format!("server_rss_after_create_{round}_mib"), rss);
        }
        // All owners at once.
        let started = Instant::now();
        let delete = format!(
            "{}?labelSelector={}",
            workspace.configmaps_path(),
            encode_query(&format!("{SET_LABEL}={owner_set}"))
        );
        client.expect_success(Method::DELETE, &delete, None).await?;
        let deleted_owners = started.elapsed();
        loop {
            let left = remaining(workspace, &dep_set).await?;
            if left == 0 {
                break;
            }
            if started.elapsed() > options.max_wait {
                return Err(BenchError::Protocol(format!(
                    "round {round}: {left} of {total_dependents} dependents still there after {:?} \
                     (is a garbage collector running?)",
                    options.max_wait
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let collected = started.elapsed();
        result.figure(
            &format!("delete_owners_{round}_s"),
            deleted_owners.as_secs_f64(),
        );
        result.figure(&format!("collect_{round}_s"), collected.as_secs_f64());
        result.figure(
            &format!("collect_{round}_dependents_per_s"),
            total_dependents as f64 / collected.as_secs_f64(),
        );
        if let Some(rss) = settled_rss(pid, options.settle).await {
            result.figure(&format!("server_rss_after_collect_{round}_mib"), rss);
        }
    }
    result.error_samples = tally.samples();
    Ok(result)
}
