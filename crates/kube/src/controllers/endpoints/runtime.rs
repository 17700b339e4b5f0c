//! What the three controllers share to run: the state a controller keeps behind one lock, fed
//! by reflectors (the Pods' one reflector shared by the controllers that read them,
//! [`SharedPodInformer`]); a queue of keys with delays and backoff (upstream's rate-limited
//! work queue); the index of the objects a controller writes, which its own writes update at
//! once; and the writes themselves.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apimachinery::status::Status;
use apiserver::authentication::UserInfo;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{
    DeleteOptions, DeleteOutcome, RegistryStore, Requester, UpdateOptions, WriteOptions,
};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::model::{Key, key_of};
use crate::controllers::events::Recorder;
use crate::pod_fields;

/// A change to Pods, each decoded once for every reader (`pod_fields`).
pub(super) type PodDelta = Delta<Arc<Value>>;

type PodHandler = Box<dyn FnMut(&PodDelta) + Send>;

/// One reflector of the Pods for the controllers that read them, as kube-controller-manager's
/// controllers share one informer per resource: each Pod is decoded once (to the members
/// `pod_fields` names, a decoding the Node authorizer's reflector shares) and its change handed
/// to every subscriber in turn. The reflector starts when the last of the `subscribers` it was
/// made for has subscribed, so that none misses the first list.
#[derive(Clone)]
pub struct SharedPodInformer {
    inner: Arc<Mutex<Pending>>,
}

struct Pending {
    store: Option<Arc<RegistryStore>>,
    expected: usize,
    handlers: Vec<PodHandler>,
}

impl SharedPodInformer {
    /// An informer of `store` for `subscribers` controllers.
    pub(super) fn new(store: Option<Arc<RegistryStore>>, subscribers: usize) -> SharedPodInformer {
        SharedPodInformer {
            inner: Arc::new(Mutex::new(Pending {
                store,
                expected: subscribers,
                handlers: Vec::new(),
            })),
        }
    }

    /// Adds a subscriber; the last one starts the reflector. Without Pods served nothing is
    /// ever handed over.
    fn subscribe(&self, handler: impl FnMut(&PodDelta) + Send + 'static) {
        let mut pending = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        pending.handlers.push(Box::new(handler));
        pending.start_if_complete();
    }

    /// A controller it was made for that will not subscribe (it found its own resources not
    /// served): the others need not wait for it.
    pub(super) fn withdraw(&self) {
        let mut pending = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        pending.expected = pending.expected.saturating_sub(1);
        pending.start_if_complete();
    }
}

impl Pending {
    fn start_if_complete(&mut self) {
        if self.handlers.is_empty() || self.handlers.len() < self.expected {
            return;
        }
        let Some(store) = self.store.take() else {
            return;
        };
        let mut handlers = std::mem::take(&mut self.handlers);
        tokio::spawn(reflector::run_projected(
            store,
            pod_fields::NAME,
            &pod_fields::POD_FIELDS,
            move |delta| {
                for handler in &mut handlers {
                    handler(&delta);
                }
            },
        ));
    }
}

/// Keys to sync, each when it is due, and how often each has failed in a row.
#[derive(Default)]
pub(super) struct Queue {
    due: BTreeMap<Key, Instant>,
    failures: HashMap<Key, u32>,
}

impl Queue {
    /// Syncs `key` now.
    pub fn add(&mut self, key: Key) {
        self.add_after(key, Duration::ZERO);
    }

    /// Syncs `key` after `delay`, or earlier if it is already due earlier.
    pub fn add_after(&mut self, key: Key, delay: Duration) {
        let at = Instant::now() + delay;
        self.due
            .entry(key)
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }

    /// A sync failed: tried again after `base` doubled per failure in a row, at most `max`.
    fn retry(&mut self, key: Key, base: Duration, max: Duration) {
        let n = self.failures.entry(key.clone()).or_default();
        let delay = base.saturating_mul(1 << (*n).min(20)).min(max);
        *n += 1;
        self.add_after(key, delay);
    }

    fn forget(&mut self, key: &Key) {
        self.failures.remove(key);
    }

    fn pop_due(&mut self, now: Instant) -> Vec<Key> {
        let due: Vec<Key> = self
            .due
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            self.due.remove(k);
        }
        due
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }
}

/// A controller's state and queue, and the resources whose first list it still waits for.
pub(super) struct Inner<S> {
    pub state: S,
    pub queue: Queue,
    unsynced: BTreeSet<&'static str>,
}

pub(super) struct Shared<S> {
    inner: Mutex<Inner<S>>,
    wake: Notify,
}

/// How long a failed sync waits: `base` doubled per failure, at most `max`.
#[derive(Clone, Copy)]
pub(super) struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl<S: Send + 'static> Shared<S> {
    /// A controller that syncs nothing until each of `resources` has been listed once
    /// (upstream's `WaitForNamedCacheSync`).
    pub fn new(state: S, resources: &[&'static str]) -> Arc<Self> {
        Arc::new(Shared {
            inner: Mutex::new(Inner {
                state,
                queue: Queue::default(),
                unsynced: resources.iter().copied().collect(),
            }),
            wake: Notify::new(),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, Inner<S>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state, then wakes the worker.
    pub fn update<R>(&self, f: impl FnOnce(&mut Inner<S>) -> R) -> R {
        let r = f(&mut self.lock());
        self.wake.notify_one();
        r
    }

    /// Lists and watches `store` for the rest of the process, handing each change to `apply`.
    pub fn watch(
        self: &Arc<Self>,
        store: Arc<RegistryStore>,
        resource: &'static str,
        apply: impl FnMut(&mut Inner<S>, Delta) + Send + 'static,
    ) {
        tokio::spawn(reflector::run(store, self.applier(resource, apply)));
    }

    /// Takes the Pods' changes from `pods` (marking `resource` synced at their first list).
    pub fn watch_pods(
        self: &Arc<Self>,
        pods: &SharedPodInformer,
        resource: &'static str,
        mut apply: impl FnMut(&mut Inner<S>, &PodDelta) + Send + 'static,
    ) {
        let shared = self.clone();
        pods.subscribe(move |delta| {
            shared.update(|inner| {
                if matches!(delta, Delta::Replace(_)) {
                    inner.unsynced.remove(resource);
                }
                apply(inner, delta);
            });
        });
    }

    /// Hands each change to `apply` under the lock, marking `resource` synced at its first list.
    fn applier(
        self: &Arc<Self>,
        resource: &'static str,
        mut apply: impl FnMut(&mut Inner<S>, Delta) + Send + 'static,
    ) -> impl FnMut(Delta) + Send + 'static {
        let shared = self.clone();
        move |delta| {
            shared.update(|inner| {
                if matches!(delta, Delta::Replace(_)) {
                    inner.unsynced.remove(resource);
                }
                apply(inner, delta);
            });
        }
    }

    /// Syncs queued keys as they fall due, one at a time, for the rest of the process; a failed
    /// sync is retried with `backoff`, and any event that queues its key again runs it at once.
    pub async fn work<F, Fut>(self: Arc<Self>, name: &'static str, backoff: Backoff, sync: F)
    where
        F: Fn(Key) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        loop {
            let (keys, next) = {
                let mut inner = self.lock();
                if inner.unsynced.is_empty() {
                    let keys = inner.queue.pop_due(Instant::now());
                    (keys, inner.queue.next_due())
                } else {
                    (Vec::new(), None)
                }
            };
            if keys.is_empty() {
                match next {
                    Some(at) => {
                        tokio::select! {
                            _ = self.wake.notified() => {}
                            _ = tokio::time::sleep_until(at) => {}
                        }
                    }
                    None => self.wake.notified().await,
                }
                continue;
            }
            for key in keys {
                let result = sync(key.clone()).await;
                let mut inner = self.lock();
                match result {
                    Ok(()) => inner.queue.forget(&key),
                    Err(e) => {
                        tracing::debug!(controller = name, namespace = %key.0, name = %key.1, error = %e, "sync failed; retrying");
                        inner.queue.retry(key, backoff.base, backoff.max);
                    }
                }
            }
        }
    }
}

/// How an event changed the index of written objects.
pub(super) enum Applied {
    /// Older than what the index holds (the controller's own write got there first): ignored.
    Stale,
    /// The index already holds this version: the echo of the controller's own write.
    Echo,
    /// A change made by someone else, with the version it replaced.
    Changed(Option<Value>),
}

fn rv(v: &Value) -> i64 {
    v.resource_version().parse().unwrap_or(0)
}

/// The objects a controller writes (Endpoints, EndpointSlices), by namespace and name. The
/// controller's own writes go in at once, so the next sync sees them before their watch events
/// arrive; events older than what is held are ignored, by resourceVersion (upstream's
/// `EndpointSliceTracker` and stale-endpoints tracker guard against the same lag).
#[derive(Default)]
pub(super) struct Objects {
    by_key: BTreeMap<Key, Value>,
    /// Objects this controller deleted whose deletion event has not arrived yet, with the
    /// resourceVersion at which they were deleted.
    deleted: HashMap<Key, i64>,
}

impl Objects {
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.by_key.get(key)
    }

    pub fn in_namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Value> {
        self.by_key
            .range((ns.to_string(), String::new())..)
            .take_while(move |((n, _), _)| n == ns)
            .map(|(_, v)| v)
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.by_key.keys()
    }

    /// A fresh list; returns what was held before.
    pub fn replace(&mut self, items: impl IntoIterator<Item = Value>) -> BTreeMap<Key, Value> {
        self.deleted.clear();
        let fresh = items.into_iter().map(|v| (key_of(&v), v)).collect();
        std::mem::replace(&mut self.by_key, fresh)
    }

    /// An added or modified object from the watch.
    pub fn upsert(&mut self, v: Value) -> Applied {
        let key = key_of(&v);
        let version = rv(&v);
        if self.deleted.get(&key).is_some_and(|gone| version <= *gone) {
            return Applied::Stale;
        }
        if let Some(held) = self.by_key.get(&key) {
            let held = rv(held);
            if version < held {
                return Applied::Stale;
            }
            if version == held {
                return Applied::Echo;
            }
        }
        Applied::Changed(self.by_key.insert(key, v))
    }

    /// A deleted object from the watch: `None` when the controller deleted it itself (or holds
    /// something newer), else what was held.
    pub fn remove(&mut self, v: &Value) -> Option<Option<Value>> {
        let key = key_of(v);
        if self.deleted.remove(&key).is_some() {
            return None;
        }
        if self.by_key.get(&key).is_some_and(|held| rv(held) > rv(v)) {
            return None;
        }
        Some(self.by_key.remove(&key))
    }

    /// Forgets an object without waiting for its deletion event (it left the controller's
    /// concern, e.g. another manager took a slice over).
    pub fn forget(&mut self, key: &Key) -> Option<Value> {
        self.by_key.remove(key)
    }

    /// The controller wrote `v`.
    pub fn wrote(&mut self, v: Value) {
        let key = key_of(&v);
        self.deleted.remove(&key);
        self.by_key.insert(key, v);
    }

    /// The controller deleted `key` at resourceVersion `at`.
    pub fn deleted(&mut self, key: Key, at: i64) {
        self.by_key.remove(&key);
        self.deleted.insert(key, at);
    }
}

/// The controllers' writes, as `user` with the controller manager's field manager, and the
/// Events the controller records.
pub(super) struct Writer {
    pub store: Arc<RegistryStore>,
    pub write: WriteOptions,
    pub user: UserInfo,
    pub events: Recorder,
}

impl Writer {
    pub async fn create(&self, ns: &str, obj: Value) -> Result<Value, Status> {
        let requester = Requester { user: &self.user };
        let created = self.store.create(&requester, ns, obj, &self.write).await?;
        created.value().map_err(Status::internal)
    }

    /// Replaces the object, on the condition that it is still at the resourceVersion `obj`
    /// carries.
    pub async fn update(&self, obj: Value) -> Result<Value, Status> {
        let requester = Requester { user: &self.user };
        let (ns, name) = key_of(&obj);
        let mut updater = |_: Option<&Value>| Ok(obj.clone());
        let opts = UpdateOptions {
            write: self.write.clone(),
            ..UpdateOptions::default()
        };
        let (updated, _) = self
            .store
            .update(&requester, &ns, &name, &mut updater, &opts)
            .await?;
        updated.value().map_err(Status::internal)
    }

    /// Deletes the object; `Some(resourceVersion)` of its last state when it went (or is going)
    /// away, `None` when it was not there.
    pub async fn delete(&self, key: &Key) -> Result<Option<i64>, Status> {
        let requester = Requester { user: &self.user };
        match self
            .store
            .delete(&requester, &key.0, &key.1, &DeleteOptions::default())
            .await
        {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => {
                Ok(Some(o.resource_version))
            }
            Ok(DeleteOutcome::DeletedUnreadable) => Ok(Some(0)),
            Err(s) if s.code == 404 => Ok(None),
            Err(s) => Err(s),
        }
    }
}

/// A create refused because the namespace is terminating (upstream drops the key, and records
/// nothing, on the `NamespaceTerminating` cause) or gone (upstream's Event could not be
/// written there either). Anything else refused, by a quota or an admission webhook, is a
/// failure: recorded and retried.
pub(super) fn namespace_closed(s: &Status) -> bool {
    let terminating = s
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"));
    s.code == 404 || (s.code == 403 && terminating)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, rv: i64) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string()}})
    }

    #[test]
    fn own_writes_win_over_late_events() {
        let mut objects = Objects::default();
        objects.replace([obj("a", 5)]);
        objects.wrote(obj("a", 7));
        assert!(matches!(objects.upsert(obj("a", 6)), Applied::Stale));
        assert!(matches!(objects.upsert(obj("a", 7)), Applied::Echo));
        assert!(matches!(
            objects.upsert(obj("a", 8)),
            Applied::Changed(Some(_))
        ));
        // A deletion of its own: late events do not bring the object back, and its deletion
        // event is no news.
        objects.deleted(("ns".into(), "a".into()), 8);
        assert!(matches!(objects.upsert(obj("a", 8)), Applied::Stale));
        assert!(objects.remove(&obj("a", 9)).is_none());
        assert!(objects.get(&("ns".into(), "a".into())).is_none());
        // Someone else's deletion is.
        objects.wrote(obj("b", 10));
        assert!(matches!(objects.remove(&obj("b", 11)), Some(Some(_))));
        assert_eq!(objects.in_namespace("ns").count(), 0);
    }

    #[tokio::test]
    async fn queue_delays_and_backs_off() {
        let mut q = Queue::default();
        let k: Key = ("ns".into(), "s".into());
        q.add_after(k.clone(), Duration::from_secs(60));
        assert!(q.pop_due(Instant::now()).is_empty());
        // An event runs it at once.
        q.add(k.clone());
        assert_eq!(q.pop_due(Instant::now()), vec![k.clone()]);
        q.retry(k.clone(), Duration::from_secs(1), Duration::from_secs(3));
        q.retry(k.clone(), Duration::from_secs(1), Duration::from_secs(3));
        q.retry(k.clone(), Duration::from_secs(1), Duration::from_secs(3));
        let wait = q.next_due().unwrap() - Instant::now();
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
        q.pop_due(Instant::now() + Duration::from_secs(5));
        q.retry(k.clone(), Duration::from_secs(1), Duration::from_secs(3));
        let wait = q.next_due().unwrap() - Instant::now();
        assert!(wait > Duration::from_secs(2), "{wait:?}");
        q.forget(&k);
        assert!(q.failures.is_empty());
    }
}
