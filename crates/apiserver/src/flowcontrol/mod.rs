//! API Priority and Fairness (upstream: k8s.io/apiserver/pkg/util/flowcontrol and
//! server/filters/priority-and-fairness.go): what the filter chain asks, for each request, in
//! place of max-in-flight when `--enable-priority-and-fairness` is on.
//!
//! `FlowControl` owns the configuration in effect (`config::Digest`, rebuilt from the stored
//! FlowSchemas and PriorityLevelConfigurations that `run` keeps through reflectors) and one
//! `queueset::QueueSet` per priority level, holding that level's share of the server's
//! concurrency limit (`--max-requests-inflight` + `--max-mutating-requests-inflight`, shared by
//! nominal concurrency shares). `admit` classifies a request (the first matching FlowSchema by
//! precedence then name), estimates its seats (`width`), and waits for its level to dispatch
//! it, at most a quarter of the request's deadline (upstream's `getRequestWaitContext`).
//! `run` also writes each FlowSchema's `Dangling` condition to `/status`, as upstream's config
//! controller does. The `debug` module renders the `/debug/api_priority_and_fairness` dumps.
//!
//! What it must not do: hold a request without a bound, or keep seats of a request whose client
//! went away. Levels whose queuing changes get a fresh queue set; requests holding seats of the
//! old one give them back to it (upstream's quiescing, without its wait).
//!
//! Every 10 s seats move between levels (`adjust_borrowing`, upstream's `updateBorrowing`):
//! each level's highest seat demand of the period, smoothed as upstream smooths it, is its
//! target; a level keeps at least its nominal seats less what it may lend (and what it used,
//! up to its nominal seats), and gets at most its nominal seats plus its borrowing limit.
//! Upstream's target adds the demand's standard deviation to its mean; here the period's high
//! watermark stands for both.
//!
//! A request's seats are upstream's work estimate (`width`): LISTs by the bytes they hold,
//! writes by the watches they send events to (`watch_tracker`, kept by the filter), bounded per
//! level as upstream's max-seats tracker bounds them. A turned-away request's `Retry-After` grows
//! with its level's drops (`dropped_requests`).

pub mod bootstrap;
pub mod config;
pub mod debug;
pub mod dropped_requests;
pub mod metrics;
pub mod queueset;
pub mod watch_tracker;
pub mod width;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::authentication::UserInfo;
use crate::endpoints::ApiResources;
use crate::registry::reflector::{self, Delta};
use crate::request::RequestInfo;
use config::{Digest, LimitResponse, PriorityLevel, Seats};
use queueset::{Admission, QueueSet, Queuing, RequestDump, Ticket};

/// The response headers that name the matched schema and level by UID (names stay private).
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// The field manager of the `Dangling` condition writes (upstream's config consumer).
pub const FIELD_MANAGER: &str = "api-priority-and-fairness-config-consumer-v1";

/// The longest a request waits in a queue, whatever its deadline.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often seats move between levels (upstream's `borrowingAdjustmentPeriod`).
const BORROWING_PERIOD: Duration = Duration::from_secs(10);

/// One priority level in effect.
pub struct Level {
    pub config: PriorityLevel,
    pub seats: Seats,
    pub queues: Arc<QueueSet>,
    /// The most seats one request's estimate may take here; 0 for no bound of the level's own.
    pub max_seats: u64,
}

#[derive(Default)]
struct InEffect {
    digest: Digest,
    levels: BTreeMap<String, Arc<Level>>,
    /// Each flow schema's metric children, by schema name.
    flow_metrics: HashMap<String, Arc<metrics::FlowMetrics>>,
}

pub struct FlowControl {
    server_limit: u64,
    /// Each level's smoothed seat demand, for borrowing.
    smoothed_demand: Mutex<HashMap<String, f64>>,
    in_effect: RwLock<Arc<InEffect>>,
    /// Object counts and sizes for the LIST estimate.
    object_stats: RwLock<Arc<dyn width::ObjectStats>>,
    watches: Arc<watch_tracker::WatchTracker>,
    dropped: dropped_requests::DroppedRequests,
}

/// What the filter learns of a request: the matched schema and level, and the outcome.
pub struct Classification {
    pub flow_schema: String,
    pub flow_schema_uid: String,
    pub priority_level: String,
    pub priority_level_uid: String,
}

pub enum Outcome {
    /// Run it; the seats come back when the `Execution` drops.
    Execute(Classification, Execution),
    /// Answer 429.
    Reject(Classification),
    /// No schema matches (a user in neither `system:authenticated` nor
    /// `system:unauthenticated`): upstream rejects it too.
    Unclassified,
}

/// A running request's hold on its level.
pub struct Execution {
    _ticket: Ticket,
    _gauges: GaugeGuard,
}

/// Keeps `current_executing_requests` and `current_executing_seats` while the request runs.
struct GaugeGuard {
    metrics: Arc<metrics::FlowMetrics>,
    seats: i64,
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        let [requests, seats] = self.metrics.executing();
        requests.dec();
        seats.sub(self.seats);
    }
}

impl FlowControl {
    /// Flow control over `server_limit` seats, with the mandatory configuration in effect
    /// until `run` reads the stored one.
    pub fn new(server_limit: u64) -> Arc<Self> {
        metrics::register_all();
        let this = Arc::new(Self {
            server_limit,
            smoothed_demand: Mutex::new(HashMap::new()),
            in_effect: RwLock::new(Arc::new(InEffect::default())),
            object_stats: RwLock::new(Arc::new(width::StorageStats {
                consistent_reads_from_cache: true,
            })),
            watches: Arc::default(),
            dropped: Default::default(),
        });
        this.update(&[], &[]);
        this
    }

    /// Where LIST estimates read object counts and sizes (the watch caches' by default).
    pub fn set_object_stats(&self, stats: Arc<dyn width::ObjectStats>) {
        *self.object_stats.write().unwrap_or_else(|p| p.into_inner()) = stats;
    }

    /// Registers a watch that flow control let run, until the registration drops.
    pub fn track_watch(&self, info: &RequestInfo) -> Option<watch_tracker::Registration> {
        self.watches.register(info)
    }

    /// Notes a request of `priority_level` turned away; the `Retry-After` to answer with.
    pub fn record_dropped(&self, priority_level: &str) -> i64 {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.dropped.record(priority_level, now)
    }

    fn current(&self) -> Arc<InEffect> {
        self.in_effect
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The levels in effect, by name.
    pub fn levels(&self) -> Vec<Arc<Level>> {
        self.current().levels.values().cloned().collect()
    }

    /// Puts a new configuration in effect: levels whose queuing is unchanged keep their queues
    /// (with the new limit), the others start afresh.
    pub fn update(&self, flow_schemas: &[Value], priority_levels: &[Value]) {
        let digest = Digest::new(flow_schemas, priority_levels);
        let seats = config::allocate(self.server_limit, &digest.priority_levels);
        let old = self.current();
        let mut levels = BTreeMap::new();
        for (pl, seats) in digest.priority_levels.iter().zip(seats) {
            let max_seats = match pl.limit_response {
                LimitResponse::Queue { hand_size, .. } if !pl.exempt => {
                    width::level_max_seats(seats.nominal, hand_size)
                }
                _ => 0,
            };
            let (limit, queuing) = if pl.exempt {
                (None, None)
            } else {
                let queuing = match pl.limit_response {
                    LimitResponse::Reject => None,
                    LimitResponse::Queue {
                        queues,
                        hand_size,
                        queue_length_limit,
                    } => Some(Queuing {
                        queues,
                        hand_size,
                        queue_length_limit,
                    }),
                };
                (Some(seats.nominal), queuing)
            };
            let queues = match old.levels.get(&pl.name) {
                Some(level)
                    if level.config.exempt == pl.exempt && level.queues.queuing() == queuing =>
                {
                    level.queues.set_limit(limit);
                    level.queues.clone()
                }
                _ => QueueSet::new(limit, queuing),
            };
            metrics::NOMINAL_LIMIT_SEATS
                .with_label_values(&[pl.name.as_str()])
                .set(seats.nominal as i64);
            levels.insert(
                pl.name.clone(),
                Arc::new(Level {
                    config: pl.clone(),
                    seats,
                    queues,
                    max_seats,
                }),
            );
        }
        let flow_metrics = digest
            .flow_schemas
            .iter()
            .map(|fs| {
                let kept = old
                    .flow_metrics
                    .get(&fs.name)
                    .filter(|_| {
                        old.digest
                            .flow_schemas
                            .iter()
                            .any(|o| o.name == fs.name && o.priority_level == fs.priority_level)
                    })
                    .cloned();
                let m = kept.unwrap_or_else(|| {
                    Arc::new(metrics::FlowMetrics::new(&fs.priority_level, &fs.name))
                });
                (fs.name.clone(), m)
            })
            .collect();
        *self.in_effect.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(InEffect {
            digest,
            levels,
            flow_metrics,
        });
    }

    /// Moves seats from levels that do not need them to levels that do (upstream's
    /// `updateBorrowingLocked`, run every `BORROWING_PERIOD`).
    pub fn adjust_borrowing(&self) {
        /// Upstream's `seatDemandSmoothingCoefficient`.
        const SMOOTHING: f64 = 0.977;
        let levels = self.levels();
        let mut smoothed = self
            .smoothed_demand
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let nominal_sum: u64 = levels.iter().map(|l| l.seats.nominal).sum();
        let mut remaining = nominal_sum as f64;
        let mut limited = Vec::new();
        let mut items = Vec::new();
        let (mut min_sum, mut min_current_sum) = (0.0, 0.0);
        for level in &levels {
            let high = level.queues.take_demand_high_watermark() as f64;
            let s = smoothed.entry(level.config.name.clone()).or_insert(0.0);
            *s = high.max(*s * SMOOTHING + high * (1.0 - SMOOTHING));
            let nominal = level.seats.nominal as f64;
            let min_cl = nominal - level.seats.lendable.min(level.seats.nominal) as f64;
            if level.config.exempt {
                remaining -= min_cl.max(high);
                continue;
            }
            let min_current = min_cl.max(nominal.min(high));
            let upper = match level.seats.borrowing_limit {
                Some(b) => nominal + b as f64,
                None => (self.server_limit as f64).max(nominal),
            };
            items.push(config::AllocationItem {
                lower: min_current,
                upper,
                target: min_current.max(*s),
            });
            limited.push((level.clone(), min_cl, min_current));
            min_sum += min_cl;
            min_current_sum += min_current;
        }
        drop(smoothed);
        let limits: Vec<f64> = if remaining <= min_sum {
            limited.iter().map(|(_, min_cl, _)| *min_cl).collect()
        } else if remaining <= min_current_sum {
            let share = (remaining - min_sum) / (min_current_sum - min_sum);
            limited
                .iter()
                .map(|(_, min_cl, min_current)| min_cl + share * (min_current - min_cl))
                .collect()
        } else {
            config::allocate_concurrency(nominal_sum as f64, &items)
        };
        for ((level, _, _), limit) in limited.iter().zip(limits) {
            level.queues.set_limit(Some(limit.round().max(0.0) as u64));
        }
    }

    /// Classifies a request and waits for its level to run it. `query` is the request's query
    /// string (the width estimate reads its list options); `deadline` is the request's.
    pub async fn admit(
        &self,
        user: &UserInfo,
        info: &Arc<RequestInfo>,
        query: &str,
        received: Instant,
        deadline: Duration,
    ) -> Outcome {
        let in_effect = self.current();
        let Some((fs, pl)) = in_effect.digest.classify(user, info) else {
            return Outcome::Unclassified;
        };
        let classification = Classification {
            flow_schema: fs.name.clone(),
            flow_schema_uid: fs.uid.clone(),
            priority_level: pl.name.clone(),
            priority_level_uid: pl.uid.clone(),
        };
        let Some(level) = in_effect.levels.get(&pl.name).cloned() else {
            return Outcome::Reject(classification);
        };
        let stats = self
            .object_stats
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let work = width::estimate(
            info,
            query,
            Some(stats.as_ref()),
            level.max_seats,
            self.watches.interested(info),
        );
        let seats = work.max_seats();
        let distinguisher = fs.flow_distinguisher(user, info);
        let flow = queueset::flow_hash(&fs.name, &distinguisher);
        let dump = RequestDump {
            flow_schema: fs.name.clone(),
            distinguisher,
            user: user.name.clone(),
            info: Arc::clone(info),
            work,
            arrive: SystemTime::now(),
            start: None,
        };
        let flow_metrics = in_effect
            .flow_metrics
            .get(&fs.name)
            .cloned()
            .unwrap_or_else(|| Arc::new(metrics::FlowMetrics::new(&pl.name, &fs.name)));
        drop(in_effect);
        let arrived = Instant::now();
        let admitted = match level.queues.enqueue(flow, dump) {
            Admission::Dispatched(ticket) => Ok(ticket),
            Admission::Rejected(why) => Err(why),
            Admission::Queued(waiter) => {
                let inqueue = flow_metrics.inqueue();
                inqueue.inc();
                // A quarter of the request's time, at most a minute, counted from its arrival.
                let wait = (deadline / 4).min(MAX_WAIT);
                let result = waiter
                    .wait(tokio::time::Instant::from_std(received + wait))
                    .await;
                inqueue.dec();
                result
            }
        };
        let waited = arrived.elapsed().as_secs_f64();
        match admitted {
            Ok(ticket) => {
                flow_metrics.wait(true).observe(waited);
                flow_metrics.dispatched().inc();
                let [requests, executing_seats] = flow_metrics.executing();
                requests.inc();
                executing_seats.add(seats as i64);
                Outcome::Execute(
                    classification,
                    Execution {
                        _ticket: ticket,
                        _gauges: GaugeGuard {
                            metrics: flow_metrics,
                            seats: seats as i64,
                        },
                    },
                )
            }
            Err(why) => {
                flow_metrics.wait(false).observe(waited);
                flow_metrics.rejected(why.reason());
                Outcome::Reject(classification)
            }
        }
    }

    /// Keeps the configuration in step with the stored FlowSchemas and
    /// PriorityLevelConfigurations, and their `Dangling` conditions written, until the process
    /// ends. `on_synced` is called once the stored configuration is first in effect (upstream's
    /// `priority-and-fairness-config-consumer` hook).
    pub async fn run(self: Arc<Self>, api: Arc<ApiResources>, on_synced: impl FnOnce()) {
        const GROUP: &str = "flowcontrol.apiserver.k8s.io";
        let (Some(fs_store), Some(pl_store)) = (
            api.get(GROUP, "v1", "flowschemas").cloned(),
            api.get(GROUP, "v1", "prioritylevelconfigurations").cloned(),
        ) else {
            tracing::warn!(
                "flowcontrol.apiserver.k8s.io/v1 is not served; the mandatory configuration stays in effect"
            );
            return;
        };
        #[derive(Default)]
        struct Seen {
            flow_schemas: HashMap<String, Value>,
            priority_levels: HashMap<String, Value>,
            /// Each kind's first list received: the stored configuration is known once both
            /// are (the reflectors list at their own pace).
            flow_schemas_listed: bool,
            priority_levels_listed: bool,
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (changed, mut changes) = tokio::sync::watch::channel(());
        let name_of = |v: &Value| {
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let apply = |pick: fn(&mut Seen) -> (&mut HashMap<String, Value>, &mut bool)| {
            let seen = seen.clone();
            let changed = changed.clone();
            move |delta: Delta| {
                {
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    let (map, listed) = pick(&mut s);
                    if matches!(delta, Delta::Replace(_)) {
                        *listed = true;
                    }
                    match delta {
                        Delta::Replace(all) => {
                            map.clear();
                            map.extend(all.into_iter().map(|v| (name_of(&v), v)));
                        }
                        Delta::Upsert(v) => {
                            map.insert(name_of(&v), v);
                        }
                        Delta::Deleted(v) => {
                            map.remove(&name_of(&v));
                        }
                    }
                }
                let _ = changed.send(());
            }
        };
        tokio::spawn(reflector::run(
            fs_store.clone(),
            apply(|s| (&mut s.flow_schemas, &mut s.flow_schemas_listed)),
        ));
        tokio::spawn(reflector::run(
            pl_store,
            apply(|s| (&mut s.priority_levels, &mut s.priority_levels_listed)),
        ));
        {
            let this = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(BORROWING_PERIOD);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    this.adjust_borrowing();
                }
            });
        }
        let user = UserInfo {
            name: "system:apiserver".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        };
        let mut on_synced = Some(on_synced);
        loop {
            if changes.changed().await.is_err() {
                return;
            }
            let (flow_schemas, priority_levels) = {
                let s = seen.lock().unwrap_or_else(|p| p.into_inner());
                // Until both kinds are listed, one kind without the other would make every
                // FlowSchema look dangling: the configuration in effect (the mandatory one at
                // start) stays, and no condition is written. Upstream's config controller waits
                // for both informers' sync the same way. Before, at most restarts every FlowSchema
                // was marked dangling and then found again: two status writes each.
                if !(s.flow_schemas_listed && s.priority_levels_listed) {
                    continue;
                }
                (
                    s.flow_schemas.values().cloned().collect::<Vec<_>>(),
                    s.priority_levels.values().cloned().collect::<Vec<_>>(),
                )
            };
            self.update(&flow_schemas, &priority_levels);
            if let Some(f) = on_synced.take() {
                f();
            }
            for fs in &flow_schemas {
                let Some(config) = dangling_status(fs, &priority_levels) else {
                    continue;
                };
                let name = name_of(fs);
                if let Err(e) = api
                    .apply_status(&fs_store, FIELD_MANAGER, &user, &name, &config)
                    .await
                {
                    // The next change, or the next resync of the reflector, tries again.
                    tracing::debug!(flow_schema = %name, error = %e.message, "writing the Dangling condition");
                }
            }
        }
    }
}

/// The apply configuration of a FlowSchema's `Dangling` condition when the stored one says
/// otherwise (upstream's reasons and messages), or `None` when it is up to date.
pub fn dangling_status(fs: &Value, priority_levels: &[Value]) -> Option<Value> {
    let name = fs.pointer("/metadata/name").and_then(Value::as_str)?;
    let level = fs
        .pointer("/spec/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let exists = priority_levels
        .iter()
        .any(|pl| pl.pointer("/metadata/name").and_then(Value::as_str) == Some(level));
    let (status, reason, message) = if exists {
        (
            "False",
            "Found",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" and it exists"
            ),
        )
    } else {
        (
            "True",
            "NotFound",
            format!(
                "This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" but there is no such object"
            ),
        )
    };
    let current = fs
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Dangling"))
        });
    if let Some(c) = current
        && c.get("status").and_then(Value::as_str) == Some(status)
        && c.get("reason").and_then(Value::as_str) == Some(reason)
        && c.get("message").and_then(Value::as_str) == Some(message.as_str())
    {
        return None;
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Some(json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Dangling", "status": status,
            "lastTransitionTime": now, "reason": reason, "message": message}]},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangling_conditions_follow_the_levels() {
        let fs = json!({"metadata": {"name": "f"}, "spec": {
            "priorityLevelConfiguration": {"name": "mine"}}});
        let pl = json!({"metadata": {"name": "mine"}});
        let found = dangling_status(&fs, std::slice::from_ref(&pl)).unwrap();
        let c = &found["status"]["conditions"][0];
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("Found"))
        );
        let missing = dangling_status(&fs, &[]).unwrap();
        let c = &missing["status"]["conditions"][0];
        assert_eq!(
            (
                c["status"].as_str(),
                c["reason"].as_str(),
                c["message"].as_str()
            ),
            (
                Some("True"),
                Some("NotFound"),
                Some(
                    "This FlowSchema references the PriorityLevelConfiguration object named \"mine\" but there is no such object"
                )
            )
        );
        // Written once: an up-to-date condition is not written again.
        let mut written = fs.clone();
        written["status"] = found["status"].clone();
        assert!(dangling_status(&written, &[pl]).is_none());
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_busy_level_borrows_what_an_idle_one_lends() {
        let level = |name: &str, lendable: u64, response: Value| {
            json!({"metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 10, "lendablePercent": lendable,
                "limitResponse": response}}})
        };
        let queue = json!({"type": "Queue",
            "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 20}});
        let fs = json!({"metadata": {"name": "busy"}, "spec": {
            "priorityLevelConfiguration": {"name": "busy"}, "matchingPrecedence": 100,
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
        // 40 seats by 25 shares: catch-all 5 (8 seats), busy 10 (16), idle 10 (16, all of
        // them lendable).
        let fc = FlowControl::new(40);
        fc.update(
            &[fs],
            &[
                level("busy", 0, queue),
                level("idle", 100, json!({"type": "Reject"})),
            ],
        );
        let limit = |name: &str| {
            fc.levels()
                .iter()
                .find(|l| l.config.name == name)
                .and_then(|l| l.queues.limit())
        };
        assert_eq!((limit("busy"), limit("idle")), (Some(16), Some(16)));
        let jane = user("jane", &["system:authenticated"]);
        let info = Arc::new(RequestInfo::parse(&http::Method::GET, "/version", ""));
        let mut running = Vec::new();
        for _ in 0..16 {
            match fc
                .admit(&jane, &info, "", Instant::now(), Duration::from_secs(40))
                .await
            {
                Outcome::Execute(_, e) => running.push(e),
                _ => panic!("within the nominal seats"),
            }
        }
        // Ten more wait: the busy level asks for 26 seats.
        let waiting: Vec<_> = (0..10)
            .map(|_| {
                let (fc, jane, info) = (fc.clone(), jane.clone(), info.clone());
                tokio::spawn(async move {
                    matches!(
                        fc.admit(&jane, &info, "", Instant::now(), Duration::from_secs(40))
                            .await,
                        Outcome::Execute(..)
                    )
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(waiting.iter().all(|w| !w.is_finished()), "queued");
        fc.adjust_borrowing();
        // idle lends all of its seats; catch-all, which lends none, keeps its 8 and shares the
        // rest with busy by what each asks for: 40 × 26 / 34 ≈ 31 for busy.
        assert_eq!(
            (limit("busy"), limit("idle"), limit("catch-all")),
            (Some(31), Some(0), Some(9))
        );
        for w in waiting {
            assert!(w.await.unwrap(), "dispatched on borrowed seats");
        }
    }

    #[tokio::test]
    async fn the_mandatory_configuration_limits_everyone_but_masters() {
        // 13 seats: catch-all takes ⌈13 × 5 / 5⌉ = 13, exempt none.
        let fc = FlowControl::new(13);
        let info = Arc::new(RequestInfo::parse(&http::Method::GET, "/api/v1/pods", ""));
        let jane = user("jane", &["system:authenticated"]);
        let mut running = Vec::new();
        for _ in 0..13 {
            match fc
                .admit(&jane, &info, "", Instant::now(), Duration::from_secs(4))
                .await
            {
                Outcome::Execute(c, e) => {
                    assert_eq!(
                        (c.flow_schema.as_str(), c.priority_level.as_str()),
                        ("catch-all", "catch-all")
                    );
                    running.push(e);
                }
                _ => panic!("not admitted"),
            }
        }
        // catch-all rejects at once past its seats.
        assert!(matches!(
            fc.admit(&jane, &info, "", Instant::now(), Duration::from_secs(4))
                .await,
            Outcome::Reject(_)
        ));
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        assert!(matches!(
            fc.admit(&admin, &info, "", Instant::now(), Duration::from_secs(4))
                .await,
            Outcome::Execute(..)
        ));
        running.pop();
        assert!(matches!(
            fc.admit(&jane, &info, "", Instant::now(), Duration::from_secs(4))
                .await,
            Outcome::Execute(..)
        ));
    }
}
