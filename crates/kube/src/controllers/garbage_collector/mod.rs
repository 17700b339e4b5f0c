//! The garbage collector (upstream: pkg/controller/garbagecollector, kube-controller-manager's
//! `garbage-collector-controller`): objects whose owners are gone are deleted, owners deleted
//! in the foreground wait for their blocking dependents, and owners deleted with the `orphan`
//! finalizer release their dependents first.
//!
//! - `graph`: the dependency graph, kept from a watch of every resource that can be listed,
//!   watched and deleted (built-in and custom; Events excluded, as upstream excludes them),
//!   never by re-listing.
//! - `worker`: what is done to one item, reading the live object and its owners.
//! - This module: the monitors (one reflector per stored resource, reading only metadata,
//!   custom resources joining and leaving as their CRDs do), the two work queues with upstream's semantics (an
//!   item queued once, an item changed while worked on queued again, failures retried with
//!   exponential backoff), up to [`WORKERS`] items worked on at once, and the Warning
//!   `OwnerRefInvalidNamespace` recorded on a dependent whose owner reference names an object
//!   the graph has seen in another namespace.

mod graph;
mod worker;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use apiserver::endpoints::ApiResources;
use apiserver::registry::RegistryStore;
use apiserver::registry::reflector::{self, Delta};
use storage::Object;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ExtraStores;
use super::events::{ObjectReference, Recorder};
use graph::{DeletionState, Graph, Identity, InvalidOwnerRef, Observed, Uid, Work};
use worker::{Client, Meta, Outcome};

/// Upstream's event source, and the service account the collector writes as.
const COMPONENT: &str = "garbage-collector-controller";
const ACCOUNT: &str = "generic-garbage-collector";

/// Items worked on at once (kube-controller-manager's `--concurrent-gc-syncs` default).
const WORKERS: usize = 20;

/// How often the set of watched resources is compared with the served ones (custom resources
/// come and go with their CRDs).
const RESYNC_RESOURCES: Duration = Duration::from_secs(1);

/// Backoff of an item that failed: 5 ms doubling per failure, at most a minute.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// A change a monitor saw.
enum Change {
    Replace {
        api_version: String,
        kind: String,
        items: Vec<Observed>,
    },
    Upsert(Observed),
    Deleted(Uid),
}

/// Runs the garbage collector until the process ends.
pub async fn run(api: Arc<ApiResources>, extra: ExtraStores) {
    let events = Recorder::start(&api, COMPONENT, ACCOUNT);
    let client = Arc::new(Client::new(api, extra));
    let (tx, mut changes) = mpsc::unbounded_channel::<Change>();
    let mut monitors: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut graph = Graph::default();
    let mut deletes = Queue::default();
    let mut orphans = Queue::default();
    let mut jobs: JoinSet<(Kind, Uid, Outcome)> = JoinSet::new();
    let mut resync = tokio::time::interval(RESYNC_RESOURCES);
    loop {
        let next_due = deletes
            .next_due()
            .into_iter()
            .chain(orphans.next_due())
            .min();
        tokio::select! {
            Some(change) = changes.recv() => {
                let mut work = Work::default();
                apply(&mut graph, change, &mut work);
                // Take what else is waiting before starting work, as upstream's single graph
                // goroutine drains its queue.
                while let Ok(change) = changes.try_recv() {
                    apply(&mut graph, change, &mut work);
                }
                schedule(&client, &events, work, &mut deletes, &mut orphans);
            }
            Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                let Ok((kind, uid, outcome)) = done else { continue };
                let queue = match kind {
                    Kind::Delete => &mut deletes,
                    Kind::Orphan => &mut orphans,
                };
                let mut work = Work::default();
                match outcome {
                    Outcome::Done(next) => {
                        // An item that exists but has not been seen by a watch yet is looked
                        // at again until it is.
                        if kind == Kind::Delete && graph.contains(&uid) && !graph.is_observed(&uid) {
                            queue.done(&uid);
                            queue.retry(uid.clone());
                        } else {
                            queue.forget(&uid);
                            queue.done(&uid);
                        }
                        work.delete.extend(next);
                    }
                    Outcome::Requeue(why) => {
                        tracing::debug!(%uid, error = %why, "garbage collector: retrying");
                        queue.done(&uid);
                        queue.retry(uid);
                    }
                    Outcome::VirtualDelete(id) => {
                        queue.forget(&uid);
                        queue.done(&uid);
                        graph.virtual_delete(&id, &mut work);
                    }
                }
                schedule(&client, &events, work, &mut deletes, &mut orphans);
            }
            _ = resync.tick() => {
                sync_monitors(&client, &mut monitors, &tx);
            }
            _ = sleep_until(next_due), if next_due.is_some() => {
                deletes.promote();
                orphans.promote();
            }
        }
        // Start work while workers are free.
        while jobs.len() < WORKERS {
            let (kind, uid) = if let Some(uid) = orphans.pop() {
                (Kind::Orphan, uid)
            } else if let Some(uid) = deletes.pop() {
                (Kind::Delete, uid)
            } else {
                break;
            };
            let queue = match kind {
                Kind::Delete => &mut deletes,
                Kind::Orphan => &mut orphans,
            };
            // An item no longer in the graph is done with (upstream skips such nodes).
            let Some(view) = graph.view(&uid) else {
                queue.forget(&uid);
                queue.done(&uid);
                continue;
            };
            let client = client.clone();
            jobs.spawn(async move {
                let outcome = match kind {
                    Kind::Delete => worker::attempt_to_delete(&client, &view).await,
                    Kind::Orphan => worker::attempt_to_orphan(&client, &view).await,
                };
                (kind, uid, outcome)
            });
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Delete,
    Orphan,
}

fn apply(graph: &mut Graph, change: Change, work: &mut Work) {
    match change {
        Change::Replace {
            api_version,
            kind,
            items,
        } => graph.replace(&api_version, &kind, items, work),
        Change::Upsert(o) => graph.observe(o, work),
        Change::Deleted(uid) => graph.observed_deleted(&uid, work),
    }
}

fn schedule(
    client: &Client,
    events: &Recorder,
    work: Work,
    deletes: &mut Queue,
    orphans: &mut Queue,
) {
    for invalid in &work.invalid_namespace {
        report_invalid_namespace(events, invalid);
    }
    if !work.absent.is_empty() {
        let mut absent = client.absent.lock().expect("not poisoned");
        for id in work.absent {
            absent.add(id);
        }
    }
    for uid in work.delete {
        deletes.add(uid);
    }
    for uid in work.delete_later {
        deletes.retry(uid);
    }
    for uid in work.orphan {
        orphans.add(uid);
    }
}

/// `reportInvalidNamespaceOwnerRef`: the Warning upstream records on a dependent whose owner
/// reference names an object of another namespace. The message prints the reference's
/// coordinates with the dependent's namespace, as upstream's `objectReference` prints itself.
fn report_invalid_namespace(events: &Recorder, invalid: &InvalidOwnerRef) {
    let (dep, owner) = (&invalid.dependent, &invalid.owner);
    let object = ObjectReference {
        api_version: dep.api_version.clone(),
        kind: dep.kind.clone(),
        namespace: dep.namespace.clone(),
        name: dep.name.clone(),
        uid: dep.uid.to_string(),
        resource_version: String::new(),
    };
    let message = format!(
        "ownerRef [{}/{}, namespace: {}, name: {}, uid: {}] does not exist in namespace {}",
        owner.api_version,
        owner.kind,
        dep.namespace,
        owner.name,
        owner.uid,
        apimachinery::validation::go_quote(&dep.namespace),
    );
    events.warning(&object, "OwnerRefInvalidNamespace", message);
}

/// Starts a monitor for every watched resource that has none, and stops those of resources
/// no longer served (upstream's `resyncMonitors`).
fn sync_monitors(
    client: &Client,
    monitors: &mut HashMap<String, tokio::task::AbortHandle>,
    tx: &mpsc::UnboundedSender<Change>,
) {
    let mut wanted: HashSet<String> = HashSet::new();
    for store in client.watched_stores() {
        let key = store.prefix("");
        wanted.insert(key.clone());
        monitors
            .entry(key)
            .or_insert_with(|| tokio::spawn(monitor(store, tx.clone())).abort_handle());
    }
    monitors.retain(|key, handle| {
        let keep = wanted.contains(key);
        if !keep {
            handle.abort();
        }
        keep
    });
}

/// Lists, then watches, one resource, handing what it sees to the graph; lists again when the
/// watch ends. Only the metadata of each object is read from its stored bytes, not the whole
/// object: the monitors see every write to every resource. Ends once the graph is gone.
async fn monitor(store: Arc<RegistryStore>, tx: mpsc::UnboundedSender<Change>) {
    let info = store.info.clone();
    let api_version = if info.group.is_empty() {
        info.version.clone()
    } else {
        format!("{}/{}", info.group, info.version)
    };
    let observed = |o: &Object| -> Option<Observed> {
        let m = Meta::read(&o.bytes)?;
        if m.uid.is_empty() {
            return None;
        }
        let state = DeletionState::of(m.deletion_timestamp.is_some(), m.finalizers());
        Some(Observed {
            identity: Identity {
                api_version: api_version.clone(),
                kind: info.kind.clone(),
                name: m.name,
                uid: Arc::from(m.uid.as_str()),
                namespace: m.namespace,
            },
            owners: m.owner_references.unwrap_or_default(),
            state,
        })
    };
    let send = |delta: Delta<Observed>| {
        let change = match delta {
            Delta::Replace(items) => Change::Replace {
                api_version: api_version.clone(),
                kind: info.kind.clone(),
                items,
            },
            Delta::Upsert(o) => Change::Upsert(o),
            Delta::Deleted(o) => Change::Deleted(o.identity.uid),
        };
        // A send fails only once the graph is gone, which the `closed` below answers.
        let _ = tx.send(change);
    };
    tokio::select! {
        () = reflector::run_decoded(store.clone(), observed, send) => {}
        () = tx.closed() => {}
    }
}

/// A work queue with client-go's semantics: an item waits once however often it is added; an
/// item added while it is worked on waits again once that work ends; failures back off.
#[derive(Default)]
struct Queue {
    ready: VecDeque<Uid>,
    queued: HashSet<Uid>,
    running: HashSet<Uid>,
    dirty: HashSet<Uid>,
    delayed: BTreeMap<Instant, Vec<Uid>>,
    failures: HashMap<Uid, u32>,
}

impl Queue {
    fn add(&mut self, uid: Uid) {
        if self.running.contains(&uid) {
            self.dirty.insert(uid);
        } else if self.queued.insert(uid.clone()) {
            self.ready.push_back(uid);
        }
    }

    fn pop(&mut self) -> Option<Uid> {
        let uid = self.ready.pop_front()?;
        self.queued.remove(&uid);
        self.running.insert(uid.clone());
        Some(uid)
    }

    fn done(&mut self, uid: &Uid) {
        self.running.remove(uid);
        if self.dirty.remove(uid) {
            self.add(uid.clone());
        }
    }

    fn forget(&mut self, uid: &Uid) {
        self.failures.remove(uid);
    }

    /// Adds `uid` after its backoff.
    fn retry(&mut self, uid: Uid) {
        let n = self.failures.entry(uid.clone()).or_insert(0);
        let delay = BACKOFF_BASE
            .saturating_mul(1u32 << (*n).min(20))
            .min(BACKOFF_MAX);
        *n += 1;
        self.delayed
            .entry(Instant::now() + delay)
            .or_default()
            .push(uid);
    }

    fn next_due(&self) -> Option<Instant> {
        self.delayed.keys().next().copied()
    }

    /// Moves the items whose backoff is over to the ready ones.
    fn promote(&mut self) {
        let now = Instant::now();
        let later = self.delayed.split_off(&(now + Duration::from_nanos(1)));
        let due = std::mem::replace(&mut self.delayed, later);
        for uid in due.into_values().flatten() {
            self.add(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_read_the_same_wherever_it_stands() {
        let metadata = serde_json::json!({
            "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
            "finalizers": ["foregroundDeletion"], "deletionTimestamp": "2026-12-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "u-0", "controller": true, "blockOwnerDeletion": true}],
        });
        let spec = serde_json::json!({"containers": [{"name": "c", "image": "i"}]});
        let leading = serde_json::json!({"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec});
        // Here `metadata` comes before `spec` (sorted or in insertion order alike); the document
        // written by hand below has it last, after a `metadata` nested in `spec`.
        let trailing = format!(
            r#"{{"spec":{{"template":{{"metadata":{{"name":"inner","uid":"x"}}}}}},"metadata":{metadata}}}"#
        );
        for bytes in [
            serde_json::to_vec(&leading).expect("json"),
            trailing.into_bytes(),
        ] {
            let m = Meta::read(&bytes).expect("metadata");
            assert_eq!(
                (m.name.as_str(), m.namespace.as_str(), m.uid.as_str()),
                ("p", "ns", "u-1")
            );
            assert_eq!(m.resource_version, "7");
            assert_eq!(m.finalizers(), ["foregroundDeletion"]);
            assert!(m.deletion_timestamp.is_some());
            let owner = &m.owners()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
                ("ReplicaSet", "u-0", Some(true))
            );
        }
        assert_eq!(
            Meta::read(br#"{"kind":"X"}"#).map(|m| m.uid),
            Some(String::new())
        );
        assert!(Meta::read(br#"{"metadata":"x"}"#).is_none());
        assert!(Meta::read(br#"{"metadata":{"uid":1}}"#).is_none());
        assert!(Meta::read(b"not json").is_none());
    }

    #[test]
    fn an_item_waits_once_and_comes_back_if_added_while_running() {
        let mut q = Queue::default();
        let a: Uid = Arc::from("a");
        q.add(a.clone());
        q.add(a.clone());
        assert_eq!(q.pop().as_deref(), Some("a"));
        assert_eq!(q.pop(), None);
        q.add(a.clone());
        assert_eq!(q.pop(), None, "running: not handed out twice");
        q.done(&a);
        assert_eq!(q.pop().as_deref(), Some("a"));
        q.done(&a);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn failures_back_off_and_come_back() {
        let mut q = Queue::default();
        let a: Uid = Arc::from("a");
        let before = Instant::now();
        q.retry(a.clone());
        q.retry(a.clone());
        q.retry(a.clone());
        // 5 ms, 10 ms, 20 ms: each failure waits twice as long.
        let last = *q.delayed.keys().last().unwrap();
        assert!(
            last >= before + Duration::from_millis(20),
            "{:?}",
            last - before
        );
        assert_eq!(q.failures[&a], 3);
        std::thread::sleep(Duration::from_millis(30));
        q.promote();
        assert_eq!(q.pop().as_deref(), Some("a"));
        q.forget(&a);
        assert!(q.failures.is_empty());
    }
}
