//! The webhooks of one configuration kind, derived from the configurations an `Informer` keeps
//! current (upstream: configuration/{mutating,validating}_webhook_manager.go). Configurations
//! are taken in name order and their webhooks in order, as upstream sorts them; a changed
//! configuration rebuilds the whole set, which readers take as one `Arc`.

use std::sync::Arc;

use serde_json::Value;

use super::hook::Hook;
use crate::admission::informer::{Derived, Informer};
use crate::registry::RegistryStore;

#[derive(Default)]
pub(super) struct Source {
    informer: Arc<Informer>,
    hooks: Derived<Vec<Arc<Hook>>>,
}

impl Source {
    pub fn hooks(&self) -> Arc<Vec<Arc<Hook>>> {
        self.hooks.get(&[&self.informer], |objects| {
            objects[0]
                .iter()
                .flat_map(|(name, c)| {
                    c.get("webhooks")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .map(move |(i, h)| Arc::new(Hook::from_api(name, i, h)))
                })
                .collect()
        })
    }

    pub fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }

    /// Says there is nothing to read (the configuration kind is not served): no webhooks.
    pub fn mark_synced(&self) {
        self.informer.mark_synced();
    }

    /// Lists and watches `store` until the process ends.
    pub async fn run(self: Arc<Self>, store: Arc<RegistryStore>) {
        self.informer.clone().run(store).await
    }
}
