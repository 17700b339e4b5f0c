//! Keeps a consumer in step with one resource of the registry by a list and then a watch, listing
//! again whenever the watch ends (upstream: client-go's Reflector, as in-process informers use
//! it). What the consumer builds from the changes — a name map, an index — is its own.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};

use super::RegistryStore;

/// One change, in the order the store made them.
pub enum Delta {
    /// A fresh list: everything the consumer held before is replaced.
    Replace(Vec<Value>),
    /// Added or modified.
    Upsert(Value),
    Deleted(Value),
}

/// Lists and watches every namespace of `store` until the process ends, handing each change to
/// `apply`. A failed list is retried after 200 ms; a watch that ends is followed by a new list.
pub async fn run(store: Arc<RegistryStore>, mut apply: impl FnMut(Delta) + Send) {
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
        let items = list.items.iter().filter_map(|o| o.value().ok()).collect();
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
                    if let Ok(v) = o.value() {
                        apply(Delta::Upsert(v));
                    }
                }
                WatchEvent::Deleted(o) => {
                    if let Ok(v) = o.value() {
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
