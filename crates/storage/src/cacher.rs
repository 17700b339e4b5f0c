//! The `Cacher`: the watch cache of one resource (upstream's `cacher` package). It is a `Store`
//! that wraps another `Store`.
//!
//! It owns an in-memory copy of every object under its prefix (a `BTreeMap` by key, so lists come
//! out in key order), a window of recent events, and the watchers it serves. A background task
//! (the reflector) lists the inner store, then watches it from the list's revision; every event
//! updates the map, enters the window and is handed to the watchers. It never re-encodes objects:
//! the `Object`s from the inner store are shared (their bytes are reference-counted), and each
//! event is built once and shared by every watcher. So is each encoding of it, while they take
//! it: a live event's object is a copy that keeps what `Object::shared_encoding` makes until
//! every watcher it was queued to has moved past it (upstream's `cachingObject`), so a write
//! watched by 1,000 protobuf informers is encoded once, not 1,000 times.
//!
//! What it serves, following upstream's `CacheDelegator`:
//! - GET with resourceVersion unset goes to the inner store (a quorum read); `"0"` and exact
//!   versions are served from memory once the cache has reached the requested revision (waiting
//!   up to [`CacherOptions::fresh_wait`], then `TooLargeResourceVersion`).
//! - LIST with resourceVersion unset is a consistent read from the cache: the cache waits until it
//!   has caught up with the inner store's current revision, then answers from memory; if it does
//!   not catch up within `fresh_wait` the inner store answers. Continue tokens, `resourceVersionMatch
//!   =Exact` and legacy paginated lists at an exact version go to the inner store.
//! - Writes go to the inner store; their answer returns as soon as the inner write succeeded.
//! - WATCH is served from memory: from an exact version by replaying the window (410 Expired as
//!   an ERROR event when the version is older than the window), from unset or `"0"` with synthetic
//!   ADDED events for the current state, with `sendInitialEvents` and bookmarks.
//!
//! The window keeps the events of the last [`CacherOptions::window_fresh`] (75 s, upstream's
//! `DefaultEventFreshDuration`: a bookmark a minute plus a margin, so that a watcher that lost
//! its connection can resume from its last bookmark), at least [`CacherOptions::window_min`]
//! (100, upstream's lower bound) and at most [`CacherOptions::window_capacity`] (10,000 by
//! default). Each event keeps the object's previous version alive, so a fixed count would hold
//! minutes of old versions of a busy resource: at 20 pod updates a second, 10,000 events are
//! over eight minutes and some 40 MB of old pods. Upstream sizes its caches by the same time,
//! doubling and halving a capacity; trimming by each event's age keeps the same history.
//!
//! A slow watcher never holds anyone up: each watcher has a bounded queue, and a watcher whose
//! queue overflows is closed (its client re-watches from the last version it saw), as upstream
//! does. It must not block the reflector, so no lock is held across an await.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::errors::StorageError;
use crate::kv::prefix_end;
use crate::metrics::ResourceMetrics;
use crate::store::{
    AttrsFn, GetOptions, ListOptions, ListResult, Object, ResourceVersion, ResourceVersionMatch,
    Store, WatchEvent, WatchOptions, WatchScope, WatchStream, decode_continue, encode_continue,
    filter_event, list_prefix, matches,
};

/// Tunables of a [`Cacher`]; `Default` gives the production values.
#[derive(Clone, Debug)]
pub struct CacherOptions {
    /// The most recent events the window keeps for watches that start at an exact version.
    pub window_capacity: usize,
    /// Events older than this leave the window, down to `window_min` events.
    pub window_fresh: Duration,
    /// The fewest events the window keeps, however old.
    pub window_min: usize,
    /// How long a read waits for the cache to reach a requested revision (upstream: 3s).
    pub fresh_wait: Duration,
    /// A watcher that asked for bookmarks gets one after this long without any event.
    pub bookmark_interval: Duration,
    /// How many events may queue for one watcher before it is closed as too slow.
    pub watcher_buffer: usize,
    /// The resource's metrics (events, revision, object count, LISTs from the cache).
    pub metrics: Option<Arc<ResourceMetrics>>,
}

impl Default for CacherOptions {
    fn default() -> Self {
        Self {
            window_capacity: 10_000,
            window_fresh: Duration::from_secs(75),
            window_min: 100,
            fresh_wait: Duration::from_secs(3),
            bookmark_interval: Duration::from_secs(5),
            watcher_buffer: 1000,
            metrics: None,
        }
    }
}

/// Upstream sends every watcher that allows bookmarks one at least this often.
const MAX_BOOKMARK_GAP: Duration = Duration::from_secs(60);
/// The published revision while the cache is (re)initializing.
const NOT_READY: i64 = -1;

/// The watch cache of one resource. See the module documentation.
pub struct Cacher {
    shared: Arc<Shared>,
    reflector: tokio::task::JoinHandle<()>,
}

struct Shared {
    inner: Arc<dyn Store>,
    prefix: String,
    attrs: AttrsFn,
    options: CacherOptions,
    state: RwLock<State>,
    /// The revision the cache has reached, published only after every event up to it has been
    /// handed to the watchers (bookmarks rely on that order); `NOT_READY` while (re)initializing.
    progress: watch::Sender<i64>,
}

#[derive(Default)]
struct State {
    ready: bool,
    /// The revision the cache reflects.
    revision: i64,
    objects: BTreeMap<Arc<str>, Object>,
    /// The bytes of `objects`, for the size estimate API Priority and Fairness reads.
    bytes: usize,
    window: VecDeque<Arc<CachedEvent>>,
    /// Every event after this revision is in the window (upstream's "oldest - 1"): a watch from an
    /// older version is too old.
    window_from: i64,
    watchers: HashMap<u64, WatcherHandle>,
    next_watcher: u64,
}

/// A page read from memory, and how many cached objects were looked at for it.
struct Page {
    result: ListResult,
    fetched: usize,
}

/// One change, built once and shared by every watcher.
struct CachedEvent {
    event: WatchEvent,
    revision: i64,
    /// The object before the change (for predicate transitions).
    prev: Option<Object>,
    /// When the cache took it in (the window keeps events by age).
    recorded: Instant,
    /// The previous content at this event's revision: what a watcher whose predicate the object
    /// stops matching receives as DELETED. Built on first use.
    prev_at_event: OnceLock<Option<Object>>,
}

impl CachedEvent {
    fn key(&self) -> Option<&str> {
        self.object().map(|o| &*o.key)
    }

    /// One more watcher was handed this event from its queue (see `Object::for_fanout`).
    fn hold(&self) {
        if let Some(o) = self.object() {
            o.hold_fanout();
        }
    }

    /// A watcher is done with this event: it was not for it, or it was taken and encoded.
    fn release(&self) {
        if let Some(o) = self.object() {
            o.release_fanout();
        }
    }

    fn object(&self) -> Option<&Object> {
        match &self.event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(o),
            _ => None,
        }
    }

    /// This event as the watcher with `predicate` sees it.
    fn for_watcher(&self, predicate: &crate::store::Predicate) -> Option<WatchEvent> {
        filter_event(
            predicate,
            &self.event,
            self.prev.as_ref().map(|p| &*p.attrs),
            || {
                self.prev_at_event
                    .get_or_init(|| {
                        self.prev
                            .as_ref()
                            .and_then(|p| p.with_resource_version(self.revision).ok())
                    })
                    .clone()
            },
        )
    }
}

struct WatcherHandle {
    scope: WatchScope,
    input: mpsc::Sender<Arc<CachedEvent>>,
}

impl Shared {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (updates are single inserts), so
        // a poisoned lock is still usable.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the cache has reached `revision` (at least ready for 0), for `fresh_wait`.
    async fn wait_fresh(&self, revision: i64) -> Result<(), StorageError> {
        let mut progress = self.progress.subscribe();
        let wanted = revision.max(0);
        if *progress.borrow() < wanted {
            // The store's watch may hear of no write under this prefix up to `revision`: it
            // vouches for that only when asked (upstream's cacher asks etcd the same way).
            self.inner.request_progress();
        }
        let reached =
            tokio::time::timeout(self.options.fresh_wait, progress.wait_for(|r| *r >= wanted))
                .await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(StorageError::TooLargeResourceVersion {
                requested: revision,
                current: self.read().revision,
            }),
        }
    }

    /// Waits for the cache to be initialized.
    async fn wait_ready(&self) -> Result<(), StorageError> {
        self.wait_fresh(0)
            .await
            .map_err(|_| StorageError::Internal("storage is (re)initializing".into()))
    }

    fn publish(&self, revision: i64) {
        self.progress.send_replace(revision);
    }

    /// Replaces the whole state after a (re)list. Watchers are closed: the events between what
    /// they saw and the new list are unknown, so they must re-watch (upstream does the same).
    fn replace(&self, items: Vec<Object>, revision: i64) {
        let mut state = self.write();
        state.bytes = items.iter().map(|o| o.bytes.len()).sum();
        state.objects = items.into_iter().map(|o| (o.key.clone(), o)).collect();
        state.window.clear();
        state.window_from = revision;
        state.revision = revision;
        state.ready = true;
        state.watchers.clear();
        if let Some(m) = &self.options.metrics {
            m.cache_initialized();
            m.cache_state(state.objects.len(), state.bytes, revision);
        }
        drop(state);
        self.publish(revision);
    }

    fn apply(&self, event: WatchEvent) {
        let mut state = self.write();
        let (object, deleted) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
            WatchEvent::Deleted(o) => (o, true),
            WatchEvent::Bookmark {
                resource_version, ..
            } => {
                state.revision = state.revision.max(resource_version);
                let revision = state.revision;
                drop(state);
                self.publish(revision);
                return;
            }
            WatchEvent::Error(_) => return,
        };
        let revision = object.resource_version;
        let prev = if deleted {
            state.objects.remove(&object.key)
        } else {
            state.bytes += object.bytes.len();
            state.objects.insert(object.key.clone(), object.clone())
        };
        if let Some(p) = &prev {
            state.bytes = state.bytes.saturating_sub(p.bytes.len());
        }
        // Watchers get a copy that shares its encodings among them while they take it.
        let object = if state.watchers.is_empty() {
            object
        } else {
            object.for_fanout()
        };
        // The type comes from the cache's own state, so that it is consistent with what its
        // watchers have seen.
        let event = match (&prev, deleted) {
            (_, true) => WatchEvent::Deleted(object),
            (Some(_), false) => WatchEvent::Modified(object),
            (None, false) => WatchEvent::Added(object),
        };
        let cached = Arc::new(CachedEvent {
            event,
            revision,
            prev,
            recorded: Instant::now(),
            prev_at_event: OnceLock::new(),
        });
        state.window.push_back(cached.clone());
        let options = &self.options;
        let stale =
            |e: &CachedEvent| cached.recorded.duration_since(e.recorded) > options.window_fresh;
        while state.window.len() > options.window_capacity.max(1)
            || (state.window.len() > options.window_min.max(1)
                && state.window.front().is_some_and(|e| stale(e)))
        {
            state.window.pop_front();
            if let Some(front) = state.window.front() {
                state.window_from = front.revision - 1;
            }
        }
        state.revision = state.revision.max(revision);
        let key = cached.key().unwrap_or_default();
        state.watchers.retain(|id, watcher| {
            if !watcher.scope.contains(key) {
                return true;
            }
            // Held before it is queued: the watcher may take it, and release it, at once.
            cached.hold();
            match watcher.input.try_send(cached.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    cached.release();
                    tracing::info!(watcher = id, prefix = %self.prefix, "closing a watcher that is too slow");
                    if let Some(m) = &self.options.metrics {
                        m.watcher_terminated();
                    }
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    cached.release();
                    false
                }
            }
        });
        // The dispatcher's own hold (see `Object::for_fanout`).
        cached.release();
        let revision = state.revision;
        if let Some(m) = &self.options.metrics {
            m.cache_event();
            m.cache_state(state.objects.len(), state.bytes, revision);
        }
        drop(state);
        self.publish(revision);
    }

    fn list_from_memory(
        &self,
        prefix: &str,
        opts: &ListOptions,
    ) -> Result<ListResult, StorageError> {
        let state = self.read();
        let page = Self::page(&state, prefix, prefix, opts)?;
        drop(state);
        if let Some(m) = &self.options.metrics {
            m.cache_list(page.fetched, page.result.items.len());
        }
        Ok(page.result)
    }

    /// The next page of a paginated list whose snapshot is `revision`, when the cache is still
    /// at exactly that revision: its state then is that snapshot. `None` otherwise (the caller
    /// reads the snapshot from storage).
    fn continue_from_memory(
        &self,
        prefix: &str,
        start: &str,
        revision: i64,
        opts: &ListOptions,
    ) -> Result<Option<ListResult>, StorageError> {
        let state = self.read();
        if !state.ready || state.revision != revision {
            return Ok(None);
        }
        let page = Self::page(&state, prefix, start, opts)?;
        drop(state);
        if let Some(m) = &self.options.metrics {
            m.cache_list(page.fetched, page.result.items.len());
        }
        Ok(Some(page.result))
    }

    /// A page of the objects under `prefix`, from `start` (inclusive) on.
    fn page(
        state: &State,
        prefix: &str,
        start: &str,
        opts: &ListOptions,
    ) -> Result<Page, StorageError> {
        // The range ends where keys stop starting with `prefix`, found once as the range is
        // made: checking each key instead would read every key's own allocation.
        // A start outside the prefix is clamped into it, so that the range is never inverted.
        let end = prefix_end(prefix);
        let start = start.max(prefix);
        let mut range = match end.as_str() {
            "" => state
                .objects
                .range::<str, _>((Bound::Included(start), Bound::Unbounded)),
            end => state
                .objects
                .range::<str, _>((Bound::Included(start.min(end)), Bound::Excluded(end))),
        };
        let mut items = Vec::new();
        let mut has_more = false;
        let mut fetched = 0;
        for (_, object) in range.by_ref() {
            fetched += 1;
            if !matches(&opts.predicate, &object.attrs) {
                continue;
            }
            if opts.limit > 0 && items.len() as i64 >= opts.limit {
                has_more = true;
                break;
            }
            items.push(object.clone());
        }
        let mut result = ListResult {
            items,
            resource_version: state.revision,
            continue_token: None,
            remaining_item_count: None,
        };
        if has_more && let Some(last) = result.items.last() {
            // The next pages are read at this same revision — from memory while the cache has not
            // moved, else from the inner store — so the whole list is one snapshot.
            result.continue_token = Some(encode_continue(
                &format!("{}\0", last.key),
                prefix,
                state.revision,
            )?);
            if opts.predicate.is_none() {
                // The item that set `has_more` plus whatever follows it.
                result.remaining_item_count = Some(1 + range.count() as i64);
            }
        }
        Ok(Page { result, fetched })
    }
}

impl Cacher {
    /// A cache of everything under `prefix` (e.g. `/registry/configmaps/`) in `inner`, with the
    /// default options. Must be called within a Tokio runtime: it starts the reflector task.
    pub fn new(inner: Arc<dyn Store>, prefix: &str, attrs: AttrsFn) -> Arc<Cacher> {
        Self::with_options(inner, prefix, attrs, CacherOptions::default())
    }

    pub fn with_options(
        inner: Arc<dyn Store>,
        prefix: &str,
        attrs: AttrsFn,
        options: CacherOptions,
    ) -> Arc<Cacher> {
        let (progress, _) = watch::channel(NOT_READY);
        let shared = Arc::new(Shared {
            inner,
            prefix: list_prefix(prefix),
            attrs,
            options,
            state: RwLock::new(State::default()),
            progress,
        });
        let reflector = tokio::spawn(reflect(shared.clone()));
        Arc::new(Cacher { shared, reflector })
    }

    /// Whether the cache has been initialized (for readiness checks).
    pub fn is_ready(&self) -> bool {
        self.shared.read().ready
    }

    /// The revision the cache reflects.
    pub fn revision(&self) -> i64 {
        self.shared.read().revision
    }

    /// The attrs function of this resource.
    pub fn attrs(&self) -> &AttrsFn {
        &self.shared.attrs
    }

    /// Whether `key_or_prefix` is under this cache's prefix (else requests go to the inner store).
    fn covers(&self, key_or_prefix: &str) -> bool {
        key_or_prefix.starts_with(self.shared.prefix.as_str())
    }
}

impl Drop for Cacher {
    fn drop(&mut self) {
        self.reflector.abort();
        // Dropping the watchers' queues ends their tasks.
        self.shared.write().watchers.clear();
    }
}

/// The reflector: list, then watch from the list's revision. A watch that breaks (etcd gone,
/// frozen past its keepalive, a leader lost) is watched again from the last revision the cache
/// reached, keeping every watcher, so that clients' watches go on without a gap once storage is
/// back (upstream's reflector re-watches from its last resourceVersion, and etcd's client resumes
/// its watches itself). Only a watch whose history was compacted meanwhile (410) is followed by a
/// relist, which closes the watchers as upstream's cacher does: the events between what they saw
/// and the new list are unknown, and a client that re-watches from its version gets them from
/// the new window or a 410 of its own, never a duplicate or a missed delete.
async fn reflect(shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let listed = shared
            .inner
            .list(&shared.prefix, &ListOptions::default())
            .await;
        let list = match listed {
            Ok(list) => list,
            Err(err) => {
                tracing::warn!(prefix = %shared.prefix, error = %err, "watch cache: list failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let mut events = match shared
            .inner
            .watch(&shared.prefix, &follow_from(list.resource_version))
            .await
        {
            Ok(events) => events,
            Err(err) => {
                tracing::warn!(prefix = %shared.prefix, error = %err, "watch cache: watch failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        shared.replace(list.items, list.resource_version);
        backoff = Duration::from_millis(100);
        loop {
            match follow(&shared, &mut events).await {
                Some(StorageError::Expired(_)) | None => break,
                Some(err) => {
                    tracing::warn!(prefix = %shared.prefix, error = %err, "watch cache: watch broke; watching again from the last revision");
                }
            }
            let Some(again) = rewatch(&shared).await else {
                break;
            };
            events = again;
        }
        tracing::warn!(prefix = %shared.prefix, "watch cache: history lost; relisting");
        // Serve nothing stale as fresh while relisting.
        shared.write().ready = false;
        shared.publish(NOT_READY);
    }
}

/// The inner store's watch after `revision`, with bookmarks (progress notifications).
fn follow_from(revision: i64) -> WatchOptions {
    WatchOptions {
        resource_version: ResourceVersion::Exact(revision),
        send_initial_events: None,
        allow_bookmarks: true,
        predicate: None,
    }
}

/// Applies the watch's events to the cache until it ends: with the error that ended it, or
/// `None` when it closed without one.
async fn follow(shared: &Shared, events: &mut WatchStream) -> Option<StorageError> {
    while let Some(event) = events.recv().await {
        if let WatchEvent::Error(err) = event {
            return Some(err);
        }
        shared.apply(event);
    }
    None
}

/// Watches again from the cache's revision, retrying with a backoff while storage cannot be
/// reached; `None` when that revision's history is gone (a relist is needed).
async fn rewatch(shared: &Shared) -> Option<WatchStream> {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::time::sleep(backoff).await;
        let revision = shared.read().revision;
        match shared
            .inner
            .watch(&shared.prefix, &follow_from(revision))
            .await
        {
            Ok(events) => return Some(events),
            Err(StorageError::Expired(_)) => return None,
            Err(err) => {
                tracing::debug!(prefix = %shared.prefix, error = %err, "watch cache: watch failed; retrying");
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Where a new watcher starts.
enum Start {
    /// Synthetic ADDED events for the current state; `end_bookmark`: then the initial-events-end
    /// bookmark.
    Initial { end_bookmark: bool },
    /// Only what happens from now on.
    Now,
    /// The events after this revision.
    Since(i64),
}

#[async_trait]
impl Store for Cacher {
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
        if !self.covers(key) {
            return self.shared.inner.get(key, opts).await;
        }
        match opts.resource_version {
            // Upstream serves an unversioned GET from storage, for backward compatibility.
            ResourceVersion::Unset => return self.shared.inner.get(key, opts).await,
            ResourceVersion::Any if !self.is_ready() => {
                return self.shared.inner.get(key, opts).await;
            }
            ResourceVersion::Any => {}
            ResourceVersion::Exact(n) => self.shared.wait_fresh(n).await?,
        }
        self.shared
            .read()
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| StorageError::NotFound {
                key: key.to_string(),
            })
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let prefix = list_prefix(prefix);
        let exact_match = opts.resource_version_match == Some(ResourceVersionMatch::Exact);
        let legacy_exact = opts.resource_version_match.is_none()
            && opts.limit > 0
            && matches!(opts.resource_version, ResourceVersion::Exact(_));
        if let Some(token) = opts.continue_token.as_deref()
            && self.covers(&prefix)
            && opts.resource_version == ResourceVersion::Unset
        {
            let (start, revision) = decode_continue(token, &prefix)?;
            if let Some(page) = self
                .shared
                .continue_from_memory(&prefix, &start, revision, opts)?
            {
                return Ok(page);
            }
        }
        if !self.covers(&prefix) || opts.continue_token.is_some() || exact_match || legacy_exact {
            return self.shared.inner.list(&prefix, opts).await;
        }
        match opts.resource_version {
            ResourceVersion::Unset => {
                // Consistent read from cache: answer from memory once the cache has seen
                // everything the store had when the request arrived.
                let current = self.shared.inner.current_revision().await?;
                if self.shared.wait_fresh(current).await.is_err() {
                    return self.shared.inner.list(&prefix, opts).await;
                }
            }
            ResourceVersion::Any if !self.is_ready() => {
                return self.shared.inner.list(&prefix, opts).await;
            }
            ResourceVersion::Any => {}
            ResourceVersion::Exact(n) => self.shared.wait_fresh(n).await?,
        }
        self.shared.list_from_memory(&prefix, opts)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        self.shared.inner.create(key, obj).await
    }

    async fn update(
        &self,
        key: &str,
        obj: Value,
        expected_resource_version: i64,
    ) -> Result<Object, StorageError> {
        self.shared
            .inner
            .update(key, obj, expected_resource_version)
            .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError> {
        self.shared
            .inner
            .delete(key, expected_resource_version)
            .await
    }

    async fn watch(
        &self,
        prefix_or_key: &str,
        opts: &WatchOptions,
    ) -> Result<WatchStream, StorageError> {
        if !self.covers(prefix_or_key) {
            return self.shared.inner.watch(prefix_or_key, opts).await;
        }
        // The initial-events-end bookmark is sent only to a watch that allows bookmarks: without
        // them a `sendInitialEvents` watch gets its initial events and nothing marks their end
        // (upstream's `isListWatchRequest`).
        let start = match (opts.send_initial_events, opts.resource_version) {
            (Some(true), ResourceVersion::Unset) => {
                // The initial state of a consistent watch-list is as fresh as a quorum read.
                let current = self.shared.inner.current_revision().await?;
                self.shared.wait_fresh(current).await?;
                Start::Initial {
                    end_bookmark: opts.allow_bookmarks,
                }
            }
            (Some(true), ResourceVersion::Any) => {
                self.shared.wait_ready().await?;
                Start::Initial {
                    end_bookmark: opts.allow_bookmarks,
                }
            }
            (Some(true), ResourceVersion::Exact(n)) => {
                self.shared.wait_fresh(n).await?;
                Start::Initial {
                    end_bookmark: opts.allow_bookmarks,
                }
            }
            (None, ResourceVersion::Unset | ResourceVersion::Any) => {
                self.shared.wait_ready().await?;
                Start::Initial {
                    end_bookmark: false,
                }
            }
            (Some(false), ResourceVersion::Unset) => {
                // "From the most recent version": everything after the store's current revision,
                // whether or not the cache has seen it yet.
                let current = self.shared.inner.current_revision().await?;
                self.shared.wait_ready().await?;
                Start::Since(current)
            }
            (Some(false), ResourceVersion::Any) => {
                self.shared.wait_ready().await?;
                Start::Now
            }
            (_, ResourceVersion::Exact(n)) => {
                self.shared.wait_ready().await?;
                Start::Since(n)
            }
        };

        let scope = WatchScope::new(prefix_or_key);
        let (input, queue) = mpsc::channel(self.shared.options.watcher_buffer.max(1));
        // Snapshot and registration happen under one lock, so that the watcher gets every event
        // after its snapshot exactly once.
        let mut state = self.shared.write();
        let (initial, replay, skip_until, end_bookmark) = match start {
            Start::Initial { end_bookmark } => {
                let objects: Vec<Object> = match &scope {
                    WatchScope::Key(key) => state
                        .objects
                        .get(key.as_str())
                        .cloned()
                        .into_iter()
                        .collect(),
                    WatchScope::Prefix(prefix) => state
                        .objects
                        .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                        .take_while(|(key, _)| key.starts_with(prefix.as_str()))
                        .map(|(_, o)| o.clone())
                        .collect(),
                };
                (
                    objects,
                    Vec::new(),
                    state.revision,
                    end_bookmark.then_some(state.revision),
                )
            }
            Start::Now => (Vec::new(), Vec::new(), state.revision, None),
            Start::Since(n) => {
                if n < state.window_from {
                    // Upstream answers 200 and sends the 410 as the stream's only event.
                    let message = format!("too old resource version: {n} ({})", state.window_from);
                    drop(state);
                    let expired = WatchEvent::Error(StorageError::Expired(message));
                    return Ok(WatchStream::polled(futures_util::stream::iter([expired])));
                }
                let replay: Vec<Arc<CachedEvent>> = state
                    .window
                    .iter()
                    .filter(|e| e.revision > n && e.key().is_some_and(|k| scope.contains(k)))
                    .cloned()
                    .collect();
                (Vec::new(), replay, n, None)
            }
        };
        let id = state.next_watcher;
        state.next_watcher += 1;
        state.watchers.insert(id, WatcherHandle { scope, input });
        drop(state);

        let watcher = Watcher {
            shared: self.shared.clone(),
            id,
            predicate: opts.predicate.clone(),
            allow_bookmarks: opts.allow_bookmarks,
            last_revision: skip_until,
            initial: initial.into_iter(),
            end_bookmark,
            replay: replay.into_iter(),
            queue,
            taken: None,
            pending: VecDeque::new(),
            live: None,
        };
        Ok(WatchStream::polled(watcher))
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        self.shared.inner.current_revision().await
    }

    fn request_progress(&self) {
        self.shared.inner.request_progress();
    }

    fn rewrites_unchanged(&self) -> bool {
        self.shared.inner.rewrites_unchanged()
    }
}

/// One watcher of the cache, which does its work when its consumer polls it (no task of its own:
/// a task between the cache and the response would be one more wake-up per watcher and event).
/// It sends its initial events, then its queue, plus bookmarks. Dropping it unregisters it.
struct Watcher {
    shared: Arc<Shared>,
    id: u64,
    predicate: crate::store::Predicate,
    allow_bookmarks: bool,
    /// Events at or below this revision are not for this watcher (already seen, or before the
    /// version it asked for); bookmarks never go below it.
    last_revision: i64,
    initial: std::vec::IntoIter<Object>,
    end_bookmark: Option<i64>,
    replay: std::vec::IntoIter<Arc<CachedEvent>>,
    queue: mpsc::Receiver<Arc<CachedEvent>>,
    /// The event from the queue last handed out: released at the next call, once the consumer
    /// has encoded it, so that its encodings are shared until then.
    taken: Option<Arc<CachedEvent>>,
    /// Events a bookmark's drain of the queue took, and the bookmark after them.
    pending: VecDeque<WatchEvent>,
    /// Set once the initial events and the replay are out.
    live: Option<Live>,
}

/// The bookmark clock of a watcher that is past its initial events.
struct Live {
    last_sent: Instant,
    last_bookmark: Instant,
    /// Fires at most once per bookmark interval: when it fires early (events went out since it
    /// was set), it is moved to when the bookmark is due, rather than being reset per event.
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The waker the timer was last polled with. Polling a timer registers the waker again, so
    /// it is polled only when the queue is empty and the waker is new, the timer was moved, or it
    /// fired; otherwise it already knows whom to wake.
    timer_waker: Option<Waker>,
}

impl Live {
    fn bookmark_due(&self, interval: Duration) -> Instant {
        (self.last_sent + interval).min(self.last_bookmark + MAX_BOOKMARK_GAP)
    }

    /// Whether the timer fired, registering `cx`'s waker with it if it does not know it yet.
    fn timer_fired(&mut self, cx: &mut Context<'_>) -> bool {
        let known = self
            .timer_waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if known && !self.timer.is_elapsed() {
            return false;
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => true,
            Poll::Pending => {
                if !known {
                    self.timer_waker = Some(cx.waker().clone());
                }
                false
            }
        }
    }

    /// Moves the timer to `due`; it is polled again before the watcher waits.
    fn reset(&mut self, due: Instant) {
        self.timer.as_mut().reset(due);
        self.timer_waker = None;
    }
}

impl Stream for Watcher {
    type Item = WatchEvent;

    /// The next event for the consumer; `None` when the watch is over (the cache closed it). The
    /// queue is polled first: the bookmark timer is looked at only when the queue is empty.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        let this = self.get_mut();
        if let Some(taken) = this.taken.take() {
            taken.release();
        }
        if let Some(event) = this.pending.pop_front() {
            return Poll::Ready(Some(event));
        }
        for object in this.initial.by_ref() {
            if matches(&this.predicate, &object.attrs) {
                return Poll::Ready(Some(WatchEvent::Added(object)));
            }
        }
        if let Some(resource_version) = this.end_bookmark.take() {
            return Poll::Ready(Some(WatchEvent::Bookmark {
                resource_version,
                initial_events_end: true,
            }));
        }
        for event in this.replay.by_ref() {
            if let Some(out) = process(&this.predicate, &mut this.last_revision, &event) {
                return Poll::Ready(Some(out));
            }
        }
        let interval = this.shared.options.bookmark_interval;
        let live = this.live.get_or_insert_with(|| {
            let now = Instant::now();
            Live {
                last_sent: now,
                last_bookmark: now,
                timer: Box::pin(tokio::time::sleep_until(now + interval)),
                timer_waker: None,
            }
        });
        loop {
            match this.queue.poll_recv(cx) {
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(event)) => {
                    if let Some(out) = process(&this.predicate, &mut this.last_revision, &event) {
                        live.last_sent = Instant::now();
                        this.taken = Some(event);
                        return Poll::Ready(Some(out));
                    }
                    event.release();
                    continue;
                }
                Poll::Pending => {}
            }
            if !this.allow_bookmarks || !live.timer_fired(cx) {
                return Poll::Pending;
            }
            let due = live.bookmark_due(interval);
            if Instant::now() < due {
                live.reset(due);
                continue;
            }
            // Read the published revision first, then drain the queue: every event up to that
            // revision was queued before it was published, so after the drain the bookmark
            // promises nothing that was not delivered.
            let published = *this.shared.progress.borrow();
            while let Ok(event) = this.queue.try_recv() {
                if let Some(out) = process(&this.predicate, &mut this.last_revision, &event) {
                    this.pending.push_back(out);
                }
                // Not kept for the encoding: a rare path (a bookmark due with events queued),
                // which encodes its own.
                event.release();
            }
            let resource_version = published.max(this.last_revision);
            if resource_version > 0 {
                this.pending.push_back(WatchEvent::Bookmark {
                    resource_version,
                    initial_events_end: false,
                });
            }
            live.last_sent = Instant::now();
            live.last_bookmark = live.last_sent;
            let due = live.bookmark_due(interval);
            live.reset(due);
            if let Some(event) = this.pending.pop_front() {
                return Poll::Ready(Some(event));
            }
        }
    }
}

/// `event` as the watcher with `predicate` that has seen up to `last_revision` sees it. A free
/// function, not a method, so that `Watcher::next` can call it while it holds `live`.
fn process(
    predicate: &crate::store::Predicate,
    last_revision: &mut i64,
    event: &CachedEvent,
) -> Option<WatchEvent> {
    if event.revision <= *last_revision {
        return None;
    }
    *last_revision = event.revision;
    event.for_watcher(predicate)
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.write().watchers.remove(&self.id);
        // Nothing more is queued now; what was is released, so that other watchers' shared
        // encodings of it do not wait for this one.
        if let Some(taken) = self.taken.take() {
            taken.release();
        }
        self.queue.close();
        while let Ok(event) = self.queue.try_recv() {
            event.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KvStore, SqliteKv, default_attrs};
    use serde_json::json;

    /// A store whose watches the test breaks, as etcd going away breaks them: each open watch
    /// ends with an error when `broken` is bumped.
    struct Flaky {
        inner: Arc<dyn Store>,
        broken: watch::Sender<u64>,
    }

    #[async_trait]
    impl Store for Flaky {
        async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
            self.inner.get(key, opts).await
        }
        async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
            self.inner.list(prefix, opts).await
        }
        async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
            self.inner.create(key, obj).await
        }
        async fn update(&self, key: &str, obj: Value, rv: i64) -> Result<Object, StorageError> {
            self.inner.update(key, obj, rv).await
        }
        async fn delete(&self, key: &str, rv: Option<i64>) -> Result<Object, StorageError> {
            self.inner.delete(key, rv).await
        }
        async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
            let mut events = self.inner.watch(key, opts).await?;
            let mut broken = self.broken.subscribe();
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = broken.changed() => {
                            let gone = StorageError::Internal("etcd went away".into());
                            let _ = tx.send(WatchEvent::Error(gone)).await;
                            return;
                        }
                        event = events.recv() => {
                            let Some(event) = event else { return };
                            if tx.send(event).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            Ok(rx.into())
        }
        async fn current_revision(&self) -> Result<i64, StorageError> {
            self.inner.current_revision().await
        }
        fn request_progress(&self) {
            self.inner.request_progress();
        }
    }

    /// A client's watch of every ConfigMap from revision `from`.
    async fn watch_configmaps_from(cacher: &Cacher, from: i64) -> WatchStream {
        let opts = WatchOptions {
            resource_version: ResourceVersion::Exact(from),
            ..WatchOptions::default()
        };
        cacher
            .watch("/registry/configmaps/", &opts)
            .await
            .expect("watch")
    }

    fn configmap(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}})
    }

    /// A broken storage watch is watched again from the cache's revision: a client's watch
    /// opened before goes on and sees the writes made after, instead of being closed by a
    /// relist.
    #[tokio::test]
    async fn a_broken_storage_watch_keeps_the_clients_watches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let flaky = Arc::new(Flaky {
            inner: Arc::new(KvStore::new(kv, default_attrs())),
            broken: watch::channel(0).0,
        });
        let cacher = Cacher::new(flaky.clone(), "/registry/configmaps/", default_attrs());
        let first = cacher
            .create("/registry/configmaps/ns/a", configmap("a"))
            .await
            .expect("create a");
        let mut client = watch_configmaps_from(&cacher, first.resource_version).await;
        flaky.broken.send_modify(|n| *n += 1);
        for name in ["b", "c"] {
            cacher
                .create(&format!("/registry/configmaps/ns/{name}"), configmap(name))
                .await
                .expect("create");
        }
        for name in ["b", "c"] {
            let event = tokio::time::timeout(Duration::from_secs(5), client.recv()).await;
            match event {
                Ok(Some(WatchEvent::Added(o))) => {
                    assert_eq!(&*o.key, format!("/registry/configmaps/ns/{name}"))
                }
                other => panic!("expected ADDED {name}, got {other:?}"),
            }
        }
    }

    /// An event's watchers share each encoding of it while they take it, and the encodings are
    /// let go once every watcher has moved past the event; the object the cache keeps shares
    /// nothing.
    #[tokio::test]
    async fn watchers_share_an_events_encodings_until_each_has_moved_on() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let store = Arc::new(KvStore::new(kv, default_attrs()));
        let cacher = Cacher::new(store, "/registry/configmaps/", default_attrs());
        let first = cacher
            .create("/registry/configmaps/ns/a", configmap("a"))
            .await
            .expect("create a");
        let mut one = watch_configmaps_from(&cacher, first.resource_version).await;
        let mut two = watch_configmaps_from(&cacher, first.resource_version).await;
        let written = cacher
            .create("/registry/configmaps/ns/b", configmap("b"))
            .await
            .expect("create b");
        let encodes = AtomicUsize::new(0);
        let encode = |o: &Object| {
            encodes.fetch_add(1, Ordering::Relaxed);
            Ok::<_, ()>(bytes::Bytes::from(format!("frame of {}", o.key)))
        };
        let decodes = AtomicUsize::new(0);
        let decode = |o: &Object| {
            decodes.fetch_add(1, Ordering::Relaxed);
            Ok::<_, ()>(o.key.len())
        };
        let mut frames = Vec::new();
        let mut decoded = Vec::new();
        for watch in [&mut one, &mut two] {
            let Some(WatchEvent::Added(object)) = watch.recv().await else {
                panic!("expected the ADDED event");
            };
            assert_eq!(object.resource_version, written.resource_version);
            frames.push(object.shared_encoding("test", encode).expect("encode"));
            frames.push(object.shared_encoding("test", encode).expect("encode"));
            // Another encoding is made, and kept, on its own.
            object.shared_encoding("other", encode).expect("encode");
            // So is a decoding, which the watchers share as one value.
            decoded.push(
                object
                    .shared_decoding("test decoding", decode)
                    .expect("decode"),
            );
        }
        assert_eq!(encodes.load(Ordering::Relaxed), 2, "one per encoding");
        assert_eq!(decodes.load(Ordering::Relaxed), 1, "one decoding");
        assert!(Arc::ptr_eq(&decoded[0], &decoded[1]));
        assert_eq!(*decoded[0], "/registry/configmaps/ns/b".len());
        assert!(
            frames
                .iter()
                .all(|f| f == "frame of /registry/configmaps/ns/b")
        );
        // The cached object is not the event's copy: it keeps no encodings.
        let cached = cacher
            .get("/registry/configmaps/ns/b", &GetOptions::default())
            .await
            .expect("get");
        cached.shared_encoding("test", encode).expect("encode");
        cached.shared_encoding("test", encode).expect("encode");
        assert_eq!(encodes.load(Ordering::Relaxed), 4);

        // A third watcher, opened now, replays the event from the window while the two others
        // still hold it: it shares the encoding too.
        let mut late = watch_configmaps_from(&cacher, first.resource_version).await;
        let Some(WatchEvent::Added(replayed)) = late.recv().await else {
            panic!("expected the replayed ADDED event");
        };
        replayed.shared_encoding("test", encode).expect("encode");
        assert_eq!(encodes.load(Ordering::Relaxed), 4);

        // Once both watchers it was queued to have moved on (one asks for its next event, the
        // other is dropped), its encodings are gone and are not kept again.
        drop(two);
        let next = tokio::time::timeout(Duration::from_millis(50), one.recv()).await;
        assert!(next.is_err(), "no further event");
        replayed.shared_encoding("test", encode).expect("encode");
        replayed.shared_encoding("test", encode).expect("encode");
        assert_eq!(encodes.load(Ordering::Relaxed), 6);
    }

    /// The window keeps events by age: all of them while they are fresh, then, at the next
    /// event, only the fresh ones but never fewer than `window_min`; a watch from a revision
    /// before the window is then 410 Expired, one from inside it replays what follows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_keeps_fresh_events_and_at_least_its_minimum() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let inner: Arc<dyn Store> = Arc::new(KvStore::new(kv, default_attrs()));
        let fresh = Duration::from_secs(3);
        let options = CacherOptions {
            window_fresh: fresh,
            window_min: 5,
            ..CacherOptions::default()
        };
        let cacher = Cacher::with_options(inner, "/registry/configmaps/", default_attrs(), options);
        // Listed before the writes, so that every one of them is an event of the window (a list
        // after the first writes would hold them as its snapshot instead).
        while !cacher.is_ready() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // All at once, so that they commit in a batch or two: one at a time, twenty syncs of a
        // busy disk can take longer than the window keeps events fresh.
        let creates = (0..20).map(|i| {
            let name = format!("c{i:02}");
            let cacher = cacher.clone();
            async move {
                cacher
                    .create(&format!("/registry/configmaps/ns/{name}"), configmap(&name))
                    .await
                    .expect("create")
                    .resource_version
            }
        });
        let mut revisions = futures_util::future::join_all(creates).await;
        revisions.sort();
        let first_event_after = |from: i64| {
            let cacher = cacher.clone();
            async move {
                let mut events = watch_configmaps_from(&cacher, from).await;
                tokio::time::timeout(Duration::from_secs(5), events.recv())
                    .await
                    .expect("an event in time")
                    .expect("an event")
            }
        };
        // Fresh: every event is there.
        match first_event_after(revisions[0]).await {
            WatchEvent::Added(o) => assert_eq!(o.resource_version, revisions[1]),
            other => panic!("expected ADDED, got {other:?}"),
        }
        tokio::time::sleep(fresh + Duration::from_millis(500)).await;
        let last = cacher
            .create("/registry/configmaps/ns/last", configmap("last"))
            .await
            .expect("create");
        // A read at `last`'s revision waits until the cache has taken it in (and trimmed the
        // window): the watches below do not wait, and on this test's one thread the reflector
        // runs only when the test yields.
        let at_last = GetOptions {
            resource_version: ResourceVersion::Exact(last.resource_version),
        };
        cacher
            .get("/registry/configmaps/ns/last", &at_last)
            .await
            .expect("the cache reaches the last write");
        // Stale but for the minimum: the window is the last five events (16..19 and `last`).
        match first_event_after(revisions[15]).await {
            WatchEvent::Added(o) => assert_eq!(o.resource_version, revisions[16]),
            other => panic!("expected ADDED, got {other:?}"),
        }
        match first_event_after(revisions[14]).await {
            WatchEvent::Error(StorageError::Expired(message)) => assert!(
                message.starts_with(&format!("too old resource version: {}", revisions[14])),
                "{message}"
            ),
            other => panic!("expected 410 Expired, got {other:?}"),
        }
        match first_event_after(revisions[19]).await {
            WatchEvent::Added(o) => assert_eq!(o.resource_version, last.resource_version),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }

    /// The cache keeps its resource's object count and bytes for flow control's LIST estimate:
    /// exact after a list, creates, updates and deletes.
    #[tokio::test]
    async fn the_cache_keeps_its_resources_count_and_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let store: Arc<dyn Store> = Arc::new(KvStore::new(kv, default_attrs()));
        // One object before the cache starts: counted by its first list.
        let first = store
            .create("/registry/configmaps/ns/a", configmap("a"))
            .await
            .expect("create a");
        let options = CacherOptions {
            metrics: Some(ResourceMetrics::new("cachertests", "sizes")),
            ..Default::default()
        };
        let cacher = Cacher::with_options(store, "/registry/configmaps/", default_attrs(), options);
        let stats = || crate::metrics::stats("cachertests", "sizes");
        // `want`: the count and the total bytes, whose integer average the stats give.
        let wait_for = |(count, bytes): (i64, i64)| async move {
            let want = (count, bytes / count);
            for _ in 0..200 {
                if stats().map(|s| (s.object_count, s.average_object_size)) == Some(want) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("stats {:?}, wanted {want:?}", stats());
        };
        let a = first.bytes.len() as i64;
        wait_for((1, a)).await;
        let mut big = configmap("b");
        big["data"] = json!({"k": "x".repeat(1000)});
        let b = cacher
            .create("/registry/configmaps/ns/b", big.clone())
            .await
            .expect("create b");
        wait_for((2, a + b.bytes.len() as i64)).await;
        big["data"] = json!({"k": "y"});
        let b2 = cacher
            .update("/registry/configmaps/ns/b", big, b.resource_version)
            .await
            .expect("update b");
        wait_for((2, a + b2.bytes.len() as i64)).await;
        cacher
            .delete("/registry/configmaps/ns/a", None)
            .await
            .expect("delete a");
        wait_for((1, b2.bytes.len() as i64)).await;
    }
}
