//! Keeps a consumer in step with one resource of the registry by a list and then a watch, listing
//! again whenever the watch ends (upstream: client-go's Reflector, as in-process informers use
//! it). What the consumer builds from the changes — a name map, an index — is its own, and so is
//! how much of each stored object it reads: `run` hands over whole values, `run_projected` the
//! members a consumer names, `run_decoded` what a consumer's own decoding makes of the stored
//! bytes (the garbage collector reads only metadata).
//!
//! [`Synced`] is upstream's `HasSynced` for a consumer kept from several reflectors: it counts
//! each source once, at its first list, and says when all of them have been listed (what the
//! `informer-sync` readiness check and the requests that wait for a consumer ask).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use apimachinery::projection::Projection;
use serde_json::Value;
use storage::{ListOptions, Object, ResourceVersion, WatchEvent, WatchOptions};

use super::RegistryStore;

/// One change, in the order the store made them, of objects as the consumer decodes them
/// (whole values unless it says otherwise).
pub enum Delta<T = Value> {
    /// A fresh list: everything the consumer held before is replaced.
    Replace(Vec<T>),
    /// Added or modified.
    Upsert(T),
    Deleted(T),
}

/// Whether every source of a consumer (a reflector each, or a resource that is not served) has
/// been listed once. Cheap to clone: clones share the count.
#[derive(Clone, Debug)]
pub struct Synced {
    sources: usize,
    listed: Arc<AtomicUsize>,
}

impl Synced {
    /// Waits for `sources` sources, each marked through its own [`Listed`] from [`source`].
    ///
    /// [`source`]: Synced::source
    pub fn new(sources: usize) -> Synced {
        Synced {
            sources,
            listed: Arc::default(),
        }
    }

    /// One source and its mark: a consumer fed by a single reflector.
    pub fn single() -> (Synced, Listed) {
        let synced = Synced::new(1);
        let listed = synced.source();
        (synced, listed)
    }

    /// The mark of one source.
    pub fn source(&self) -> Listed {
        Listed {
            marked: AtomicBool::new(false),
            listed: self.listed.clone(),
        }
    }

    /// Every source has been marked listed.
    pub fn has_synced(&self) -> bool {
        self.listed.load(Ordering::Acquire) >= self.sources
    }
}

/// One source's mark in a [`Synced`]. Only the first [`mark`](Listed::mark) counts, so a
/// consumer marks after every delta it applies and the first one — the list — is what counts.
#[derive(Debug)]
pub struct Listed {
    marked: AtomicBool,
    listed: Arc<AtomicUsize>,
}

impl Listed {
    /// Counts the source as listed, the first time only. Called after the delta is applied, so
    /// that whoever sees `has_synced` also sees what the list brought (the count is released
    /// after it, and read with acquire).
    pub fn mark(&self) {
        // The plain load keeps every later delta's mark to a read.
        if !self.marked.load(Ordering::Relaxed) && !self.marked.swap(true, Ordering::AcqRel) {
            self.listed.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Lists and watches every namespace of `store` until the process ends, handing each change to
/// `apply` as whole values. A failed list is retried after 200 ms; a watch that ends is followed
/// by a new list.
pub async fn run(store: Arc<RegistryStore>, apply: impl FnMut(Delta) + Send) {
    run_decoded(store, |o: &Object| o.value().ok(), apply).await
}

/// `run`, with each object decoded to only the members `projection` keeps (see
/// [`Projection`]): what a consumer that reads a few fields of large objects hands over.
/// Reflectors of one resource that give the same `name` (which must then always come with the
/// same projection) decode each watch event once between them.
pub async fn run_projected(
    store: Arc<RegistryStore>,
    name: &'static str,
    projection: &'static Projection,
    apply: impl FnMut(Delta<Arc<Value>>) + Send,
) {
    let decode = |o: &Object| {
        o.shared_decoding(name, |o| projection.decode(&o.bytes))
            .ok()
    };
    run_decoded(store, decode, apply).await
}

/// `run`, with each object read by `decode`; an object it gives `None` for is left out (an
/// object that cannot be decoded is skipped, as a list skips it). Generic, so that a consumer's
/// decoding costs no more than writing it out here.
pub async fn run_decoded<T>(
    store: Arc<RegistryStore>,
    decode: impl Fn(&Object) -> Option<T> + Send,
    mut apply: impl FnMut(Delta<T>) + Send,
) {
    loop {
        let listed = store
            .list(
                "",
                &ListOptions {
                    resource_version: ResourceVersion::Unset,
                    ..Default::default()
                },
            )
            .await;
        let list = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(resource = %store.info.resource, error = %e.message, "cannot list; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let items = list.items.iter().filter_map(&decode).collect();
        apply(Delta::Replace(items));
        let watched = store
            .watch(
                "",
                &WatchOptions {
                    resource_version: ResourceVersion::Exact(list.resource_version),
                    send_initial_events: None,
                    allow_bookmarks: false,
                    predicate: None,
                },
            )
            .await;
        let Ok(mut events) = watched else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while let Some(event) = events.recv().await {
            match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    if let Some(v) = decode(&o) {
                        apply(Delta::Upsert(v));
                    }
                }
                WatchEvent::Deleted(o) => {
                    if let Some(v) = decode(&o) {
                        apply(Delta::Deleted(v));
                    }
                }
                WatchEvent::Bookmark { .. } => {}
                WatchEvent::Error(_) => break,
            }
        }
        // The watch ended (compaction, a closed stream): list again, not in a tight loop.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_that_marks_twice_counts_once() {
        let synced = Synced::new(2);
        let pods = synced.source();
        pods.mark();
        pods.mark();
        assert!(!synced.has_synced());
    }

    #[test]
    fn synced_only_once_every_source_is_listed() {
        let synced = Synced::new(3);
        let sources: Vec<Listed> = (0..3).map(|_| synced.source()).collect();
        assert!(!synced.has_synced());
        sources[0].mark();
        sources[2].mark();
        assert!(!synced.has_synced());
        // A clone asks the same count: the one a readiness check holds.
        let check = synced.clone();
        sources[1].mark();
        assert!(synced.has_synced());
        assert!(check.has_synced());
        sources[1].mark();
        assert!(synced.has_synced());
    }

    #[test]
    fn nothing_to_wait_for_is_synced() {
        assert!(Synced::new(0).has_synced());
    }
}
