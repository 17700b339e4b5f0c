//! Keeps a consumer in step with one resource of the registry by a list and then a watch, listing
//! again whenever the watch ends (upstream: client-go's Reflector, as in-process informers use
//! it). What the consumer builds from the changes — a name map, an index — is its own, and so is
//! how much of each stored object it reads: `run` hands over whole values, `run_projected` the
//! members a consumer names, `run_decoded` what a consumer's own decoding makes of the stored
//! bytes (the garbage collector reads only metadata).

use std::sync::Arc;
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

/// Lists and watches every namespace of `store` until the process ends, handing each change to
/// `apply` as whole values. A failed list is retried after 200 ms; a watch that ends is followed
/// by a new list.
pub async fn run(store: Arc<RegistryStore>, apply: impl FnMut(Delta) + Send) {
    run_decoded(store, |o: &Object| o.value().ok(), apply).await
}

/// `run`, with each object decoded to only the members `projection` keeps (see
/// [`Projection`]): what a consumer that reads a few fields of large objects hands over.
pub async fn run_projected(
    store: Arc<RegistryStore>,
    projection: &'static Projection,
    apply: impl FnMut(Delta) + Send,
) {
    run_decoded(store, |o: &Object| projection.decode(&o.bytes).ok(), apply).await
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
