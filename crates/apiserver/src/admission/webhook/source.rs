//! The webhooks of one configuration kind, kept current by a list and a watch of the stored
//! configurations (upstream: configuration/{mutating,validating}_webhook_manager.go, over an
//! informer). Configurations are taken in name order and their webhooks in order, as upstream
//! sorts them; a changed configuration replaces the whole set, which readers take as one `Arc`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use apimachinery::object::ObjectExt;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};

use super::hook::Hook;
use crate::registry::RegistryStore;

#[derive(Default)]
pub(super) struct Source {
    hooks: RwLock<Arc<Vec<Arc<Hook>>>>,
    synced: AtomicBool,
}

impl Source {
    pub fn hooks(&self) -> Arc<Vec<Arc<Hook>>> {
        self.hooks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Says there is nothing to read (the configuration kind is not served): no webhooks.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    fn publish(&self, configs: &BTreeMap<String, Value>) {
        let hooks = configs
            .iter()
            .flat_map(|(name, c)| {
                c.get("webhooks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .map(move |(i, h)| Arc::new(Hook::from_api(name, i, h)))
            })
            .collect();
        *self.hooks.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(hooks);
    }

    /// Lists and watches `store` until the process ends, starting over after a failed watch.
    pub async fn run(self: Arc<Self>, store: Arc<RegistryStore>) {
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
                    tracing::warn!(resource = %store.info.resource, error = %e.message, "cannot list webhook configurations; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let mut configs = BTreeMap::new();
            for item in list.items {
                if let Ok(v) = item.value() {
                    configs.insert(v.name().to_string(), v);
                }
            }
            self.publish(&configs);
            self.synced.store(true, Ordering::Release);
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
                            configs.insert(v.name().to_string(), v);
                        }
                    }
                    WatchEvent::Deleted(o) => {
                        if let Ok(v) = o.value() {
                            configs.remove(v.name());
                        }
                    }
                    WatchEvent::Bookmark { .. } => continue,
                    WatchEvent::Error(_) => break,
                }
                self.publish(&configs);
            }
            // The watch ended (compaction, a closed stream): list again, not in a tight loop.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
