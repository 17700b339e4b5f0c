//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` package
//! with its `LeaseLock` runs it for kube-controller-manager: servers that share etcd run the
//! controllers kube-controller-manager would run on one of them at a time, the one holding the
//! Lease.
//!
//! The Lease is read and written through this server's own registry (validated, defaulted,
//! recorded in managed fields as `kube-controller-manager`), each write conditional on the
//! resourceVersion last read, so two candidates never both win a race. A candidate judges a
//! holder's lease expired by its own clock: `leaseDurationSeconds` after it last *saw the
//! record change*, never by the `renewTime` another machine wrote (client-go's
//! `observedTime`). The leader renews every retry period and gives up when a renewal has not
//! succeeded within the renew deadline, which is shorter than the lease duration, so it has
//! stopped before another candidate may take over.
//!
//! What leading starts is the caller's (`Leading`); this module owns only the Lease and the
//! loop. Unlike kube-controller-manager, which exits when it loses the Lease, the loop stops
//! what it started and competes again: the process is also an API server, which must keep
//! serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use serde_json::{Value, json};
use storage::ResourceVersion;
use tokio::sync::watch;

use crate::controllers::events::{EventType, ObjectReference, Recorder};

/// client-go's `JitterFactor`: an acquisition attempt waits the retry period and up to 1.2
/// times more, so that candidates started together spread out.
const JITTER_FACTOR: f64 = 1.2;

/// kube-controller-manager's defaults (component-base's `LeaderElectionConfiguration`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The Lease Ironplane's in-process controllers elect on. Not kube-controller-manager's
/// `kube-controller-manager`: a real kube-controller-manager may run beside Ironplane (for the
/// controllers Ironplane does not implement: workloads, nodes, volumes), and sharing its Lease
/// would let an Ironplane replica hold it and keep that controller manager, and every controller
/// only it runs, waiting for as long as Ironplane serves.
pub const DEFAULT_RESOURCE_NAME: &str = "ironplane-controller-manager";
pub const DEFAULT_RESOURCE_NAMESPACE: &str = "kube-system";

/// What the election is run with (`--leader-elect-*`).
#[derive(Clone, Debug)]
pub struct Config {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// The Lease's namespace and name.
    pub namespace: String,
    pub name: String,
    /// This candidate's `holderIdentity`: kube-controller-manager's `<hostname>_<uuid>`.
    pub identity: String,
}

impl Config {
    /// A config with kube-controller-manager's defaults and a fresh identity.
    pub fn new() -> Config {
        Config {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            namespace: DEFAULT_RESOURCE_NAMESPACE.into(),
            name: DEFAULT_RESOURCE_NAME.into(),
            identity: identity(),
        }
    }

    /// client-go's `NewLeaderElector` checks, with its messages.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        if self.lease_duration.is_zero() {
            return Err("leaseDuration must be greater than zero".into());
        }
        if self.renew_deadline.is_zero() {
            return Err("renewDeadline must be greater than zero".into());
        }
        if self.retry_period.is_zero() {
            return Err("retryPeriod must be greater than zero".into());
        }
        if self.identity.is_empty() {
            return Err("Lock identity is empty".into());
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

/// kube-controller-manager's identity: the hostname, `_`, and a fresh UUID, so that two
/// processes on one host are two candidates.
pub fn identity() -> String {
    format!("{}_{}", crate::poststart::hostname(), uuid::Uuid::new_v4())
}

/// What leading runs: started when the Lease is acquired, stopped (dropped) when it is lost or
/// at shutdown.
pub trait Leading: Send + 'static {
    type Running: Send + 'static;
    fn start(&mut self) -> Self::Running;
}

/// The spec client-go's `LeaderElectionRecord` becomes (`LeaderElectionRecordToLeaseSpec`).
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: String,
    lease_duration_seconds: i64,
    acquire_time: Value,
    renew_time: Value,
    transitions: i64,
}

impl Record {
    fn of(spec: &Value) -> Record {
        Record {
            holder: spec["holderIdentity"].as_str().unwrap_or("").to_string(),
            lease_duration_seconds: spec["leaseDurationSeconds"].as_i64().unwrap_or(0),
            acquire_time: spec["acquireTime"].clone(),
            renew_time: spec["renewTime"].clone(),
            transitions: spec["leaseTransitions"].as_i64().unwrap_or(0),
        }
    }

    fn spec(&self) -> Value {
        json!({
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        })
    }
}

/// One candidate: its view of the Lease (client-go's observed record and time) and the Lease
/// object last read or written, whose resourceVersion conditions the next write.
pub struct LeaderElector {
    api: Arc<ApiResources>,
    config: Config,
    observed: Option<Record>,
    observed_time: Instant,
    lease: Option<Value>,
    events: Option<Recorder>,
}

/// The user kube-controller-manager's client is.
fn controller_manager_user() -> UserInfo {
    UserInfo {
        name: "system:kube-controller-manager".into(),
        uid: String::new(),
        groups: vec!["system:authenticated".into()],
        extra: Default::default(),
    }
}

fn micro_time_now() -> Value {
    Value::String(crate::poststart::micro_time_now())
}

/// Sleeps `d` unless `stop` comes first; says whether it did (a dropped sender is a stop).
async fn stopped_during(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        changed = stop.changed() => changed.is_err() || *stop.borrow(),
    }
}

/// `wait.Jitter(d, JitterFactor)`.
fn jittered(d: Duration) -> Duration {
    d + d.mul_f64(rand::random::<f64>() * JITTER_FACTOR)
}

impl LeaderElector {
    pub fn new(api: Arc<ApiResources>, config: Config) -> LeaderElector {
        LeaderElector {
            api,
            config,
            observed: None,
            observed_time: Instant::now(),
            lease: None,
            events: None,
        }
    }

    fn store(&self) -> Result<Arc<RegistryStore>, String> {
        self.api
            .get("coordination.k8s.io", "v1", "leases")
            .cloned()
            .ok_or_else(|| "leases are not served".to_string())
    }

    /// `IsLeader`: the last record this candidate saw names it.
    pub fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|r| r.holder == self.config.identity)
    }

    /// `isLeaseValid`: the observed record was seen less than its lease duration ago.
    fn lease_valid(&self, now: Instant) -> bool {
        let seconds = self
            .observed
            .as_ref()
            .map_or(0, |r| r.lease_duration_seconds.max(0));
        self.observed_time + Duration::from_secs(seconds as u64) > now
    }

    fn set_observed(&mut self, record: Record) {
        self.observed = Some(record);
        self.observed_time = Instant::now();
    }

    async fn get(&mut self) -> Result<Option<Value>, String> {
        let store = self.store()?;
        match store
            .get(
                &self.config.namespace,
                &self.config.name,
                ResourceVersion::Unset,
            )
            .await
        {
            Ok(object) => {
                let lease = object.value().map_err(|e| e.to_string())?;
                self.lease = Some(lease.clone());
                Ok(Some(lease))
            }
            Err(status) if status.code == 404 => Ok(None),
            Err(status) => Err(status.message),
        }
    }

    async fn create(&mut self, record: &Record) -> Result<(), String> {
        let store = self.store()?;
        let user = controller_manager_user();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": record.spec(),
        });
        let created = store
            .create(
                &Requester { user: &user },
                &self.config.namespace,
                lease,
                &self
                    .api
                    .internal_write(&store, crate::controllers::CONTROLLER_MANAGER),
            )
            .await
            .map_err(|s| s.message)?;
        self.lease = Some(created.value().map_err(|e| e.to_string())?);
        Ok(())
    }

    /// `LeaseLock.Update`: the Lease last read, with its resourceVersion, and the new spec; a
    /// write that lost a race is a conflict, never applied.
    async fn update(&mut self, record: &Record) -> Result<(), String> {
        let store = self.store()?;
        let Some(mut lease) = self.lease.clone() else {
            return Err("lease not initialized, call get or create first".into());
        };
        lease["spec"] = record.spec();
        let user = controller_manager_user();
        let mut updater = |_: Option<&Value>| Ok(lease.clone());
        let (updated, _) = store
            .update(
                &Requester { user: &user },
                &self.config.namespace,
                &self.config.name,
                &mut updater,
                &UpdateOptions {
                    write: self
                        .api
                        .internal_write(&store, crate::controllers::CONTROLLER_MANAGER),
                    is_put: true,
                    ..UpdateOptions::default()
                },
            )
            .await
            .map_err(|s| s.message)?;
        self.lease = Some(updated.value().map_err(|e| e.to_string())?);
        Ok(())
    }

    /// `tryAcquireOrRenew`: takes the Lease if it is free, expired or ours, and says whether
    /// this candidate holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        match self.try_acquire_or_renew_inner().await {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(%error, lease = %self.describe(), "acquiring or renewing the lease failed");
                false
            }
        }
    }

    async fn try_acquire_or_renew_inner(&mut self) -> Result<bool, String> {
        let now = micro_time_now();
        let mut record = Record {
            holder: self.config.identity.clone(),
            lease_duration_seconds: self.config.lease_duration.as_secs() as i64,
            acquire_time: now.clone(),
            renew_time: now,
            transitions: 0,
        };
        // The fast path: the leader renews over the Lease it last wrote.
        if self.is_leader()
            && self.lease_valid(Instant::now())
            && let Some(observed) = self.observed.clone()
        {
            record.acquire_time = observed.acquire_time;
            record.transitions = observed.transitions;
            match self.update(&record).await {
                Ok(()) => {
                    self.set_observed(record);
                    return Ok(true);
                }
                Err(error) => {
                    tracing::debug!(%error, "failed to update lease optimistically, falling back to slow path");
                }
            }
        }
        let Some(lease) = self.get().await? else {
            self.create(&record).await?;
            self.set_observed(record);
            return Ok(true);
        };
        let current = Record::of(&lease["spec"]);
        if self.observed.as_ref() != Some(&current) {
            self.set_observed(current.clone());
        }
        if !current.holder.is_empty() && self.lease_valid(Instant::now()) && !self.is_leader() {
            return Ok(false);
        }
        if self.is_leader() {
            record.acquire_time = current.acquire_time;
            record.transitions = current.transitions;
        } else {
            record.transitions = current.transitions + 1;
        }
        self.update(&record).await?;
        self.set_observed(record);
        Ok(true)
    }

    /// `release`: a leader leaving clears the holder and shortens the lease to a second, so
    /// that another candidate takes over at its next attempt instead of after the lease
    /// duration (ReleaseOnCancel).
    async fn release(&mut self) -> Result<(), String> {
        if self.get().await?.is_none() || !self.is_leader() {
            return Ok(());
        }
        let now = micro_time_now();
        let record = Record {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: now.clone(),
            renew_time: now,
            transitions: self.observed.as_ref().map_or(0, |r| r.transitions),
        };
        self.update(&record).await?;
        self.set_observed(record);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// `RecordEvent`: a Normal `LeaderElection` Event on the Lease, `<identity> <what>`.
    fn record_event(&mut self, what: &str) {
        let Some(lease) = &self.lease else { return };
        let events = self.events.get_or_insert_with(|| {
            Recorder::start_as(
                &self.api,
                crate::controllers::CONTROLLER_MANAGER,
                controller_manager_user(),
                crate::controllers::CONTROLLER_MANAGER,
            )
        });
        events.event(
            &ObjectReference::to("coordination.k8s.io/v1", "Lease", lease),
            EventType::Normal,
            "LeaderElection",
            format!("{} {what}", self.config.identity),
        );
    }

    /// Tries every retry period (jittered) until the Lease is held; `false` when `stop` came
    /// first.
    async fn acquire(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        tracing::info!(lease = %self.describe(), "attempting to acquire leader lease");
        loop {
            if *stop.borrow() {
                return false;
            }
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew());
            if attempt.await.unwrap_or(false) {
                self.record_event("became leader");
                tracing::info!(lease = %self.describe(), identity = %self.config.identity, "successfully acquired lease");
                return true;
            }
            if stopped_during(jittered(self.config.retry_period), stop).await {
                return false;
            }
        }
    }

    /// Renews every retry period while renewals succeed within the renew deadline; returns
    /// `false` when one did not (the Lease is lost), `true` when `stop` came.
    async fn renew(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        loop {
            let deadline = Instant::now() + self.config.renew_deadline;
            let renewed = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if let Ok(true) = tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                    break true;
                }
                if Instant::now() + self.config.retry_period >= deadline {
                    break false;
                }
                if stopped_during(self.config.retry_period, stop).await {
                    return true;
                }
            };
            if !renewed {
                tracing::info!(lease = %self.describe(), "failed to renew lease");
                return false;
            }
            if stopped_during(self.config.retry_period, stop).await {
                return true;
            }
        }
    }

    /// Runs the election until `stop` turns true: what `leading` starts runs while this
    /// candidate holds the Lease and is dropped when it loses it, after which it competes
    /// again. At `stop` a leader stops what it started, then releases the Lease.
    pub async fn run<L: Leading>(mut self, mut leading: L, mut stop: watch::Receiver<bool>) {
        loop {
            if !self.acquire(&mut stop).await {
                return;
            }
            let running = leading.start();
            let stopped = self.renew(&mut stop).await;
            drop(running);
            self.record_event("stopped leading");
            if stopped {
                let release = tokio::time::timeout(self.config.renew_deadline, self.release());
                match release.await {
                    Ok(Ok(())) => tracing::info!(lease = %self.describe(), "released the lease"),
                    Ok(Err(error)) => {
                        tracing::warn!(%error, lease = %self.describe(), "failed to release lease")
                    }
                    Err(_) => {
                        tracing::warn!(lease = %self.describe(), "releasing the lease timed out")
                    }
                }
                return;
            }
            tracing::error!(lease = %self.describe(), "leaderelection lost; the controllers stopped, competing again");
        }
    }
}
