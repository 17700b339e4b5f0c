//! `componentstatuses` (core/v1, deprecated since v1.19): a read-only view of the control plane's
//! health that nothing stores, as upstream's componentstatus REST computes it on every request.
//!
//! Upstream probes the scheduler, the controller manager and each etcd server. Ironplane is one
//! process with an embedded store, so it reports what it has: the store (`storage`), healthy when
//! it answers. Components Ironplane does not run are not invented. This module is a `Store`
//! that the generic registry serves like any other; it refuses writes and watches, which the
//! resource's data row does not offer anyway.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{Value, json};
use storage::{
    GetOptions, ListOptions, ListResult, Object, StorageError, Store, WatchOptions, WatchStream,
};

/// The components and how each is checked.
pub struct ComponentStatusStore {
    /// The store whose health is reported.
    pub storage: Arc<dyn Store>,
    /// The key prefix of `componentstatuses` (`/registry/componentstatuses/`).
    pub prefix: String,
}

impl ComponentStatusStore {
    async fn component(&self, name: &str) -> Option<Object> {
        let condition = match name {
            "storage" => match self.storage.current_revision().await {
                Ok(_) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
                Err(e) => json!({"type": "Healthy", "status": "False", "error": e.to_string()}),
            },
            _ => return None,
        };
        let obj: Value = json!({"kind": "ComponentStatus", "apiVersion": "v1",
            "metadata": {"name": name}, "conditions": [condition]});
        let key = format!("{}{name}", self.prefix);
        Some(Object {
            key: Arc::from(key.as_str()),
            bytes: Bytes::from(obj.to_string()),
            resource_version: 0,
            attrs: Arc::new(storage::Attrs {
                labels: Default::default(),
                fields: [
                    ("metadata.name".to_string(), name.to_string()),
                    ("metadata.namespace".to_string(), String::new()),
                ]
                .into(),
            }),
        })
    }
}

const COMPONENTS: &[&str] = &["storage"];

#[async_trait]
impl Store for ComponentStatusStore {
    async fn get(&self, key: &str, _opts: &GetOptions) -> Result<Object, StorageError> {
        let name = key.rsplit('/').next().unwrap_or_default();
        self.component(name)
            .await
            .ok_or_else(|| StorageError::NotFound { key: key.into() })
    }

    async fn list(&self, _prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let mut items = Vec::new();
        for name in COMPONENTS {
            if let Some(o) = self.component(name).await
                && storage::matches(&opts.predicate, &o.attrs)
            {
                items.push(o);
            }
        }
        Ok(ListResult {
            items,
            resource_version: 0,
            continue_token: None,
            remaining_item_count: None,
        })
    }

    async fn create(&self, key: &str, _obj: Value) -> Result<Object, StorageError> {
        Err(read_only(key))
    }

    async fn update(&self, key: &str, _obj: Value, _rv: i64) -> Result<Object, StorageError> {
        Err(read_only(key))
    }

    async fn delete(&self, key: &str, _rv: Option<i64>) -> Result<Object, StorageError> {
        Err(read_only(key))
    }

    async fn watch(&self, key: &str, _opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        Err(read_only(key))
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        Ok(0)
    }
}

fn read_only(key: &str) -> StorageError {
    StorageError::Internal(format!(
        "{key}: component statuses are computed, not stored"
    ))
}
