//! `componentstatuses` (core/v1, deprecated since v1.19): a read-only view of the control plane's
//! health that nothing stores, as upstream's componentstatus REST computes it on every request.
//!
//! Upstream probes the scheduler, the controller manager and each etcd cluster it stores in
//! (`etcd-0` for `--etcd-servers`, then one per `--etcd-servers-overrides` entry), each with a
//! read of `<prefix>/health`. Ironplane reports the etcd clusters as upstream names them, or
//! on the embedded store the store itself (`storage`), healthy when it answers. Components
//! Ironplane does not run are not invented. This module is a `Store` that the generic registry
//! serves like any other; it refuses writes and watches, which the resource's data row does
//! not offer anyway.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{Value, json};
use storage::{
    EtcdKv, GetOptions, ListOptions, ListResult, Object, StorageError, Store, WatchOptions,
    WatchStream,
};

/// The components and how each is checked.
pub struct ComponentStatusStore {
    /// The store whose health is reported.
    pub storage: Arc<dyn Store>,
    /// The key prefix of `componentstatuses` (`/registry/componentstatuses/`).
    pub prefix: String,
    /// The etcd clusters, `etcd-<n>` in this order; empty on the embedded store.
    pub etcd: Vec<Arc<EtcdKv>>,
    /// `--etcd-prefix`, under which the probes read `health`.
    pub etcd_prefix: String,
}

/// Upstream's `probeTimeOut` of component status probes.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

impl ComponentStatusStore {
    async fn component(&self, name: &str) -> Option<Object> {
        let etcd = name
            .strip_prefix("etcd-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| n.to_string() == name["etcd-".len()..])
            .and_then(|n| self.etcd.get(n));
        let condition = match (name, etcd) {
            (_, Some(etcd)) => match etcd.check(&self.etcd_prefix, PROBE_TIMEOUT).await {
                Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
                Err(e) => json!({"type": "Healthy", "status": "False", "error": e}),
            },
            ("storage", None) if self.etcd.is_empty() => {
                match self.storage.current_revision().await {
                    Ok(_) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
                    Err(e) => json!({"type": "Healthy", "status": "False", "error": e.to_string()}),
                }
            }
            _ => return None,
        };
        let obj: Value = json!({"kind": "ComponentStatus", "apiVersion": "v1",
            "metadata": {"name": name}, "conditions": [condition]});
        let key = format!("{}{name}", self.prefix);
        Some(Object::new(
            Arc::from(key.as_str()),
            Bytes::from(obj.to_string()),
            0,
            Arc::new(storage::Attrs {
                labels: Default::default(),
                fields: [
                    ("metadata.name".to_string(), name.to_string()),
                    ("metadata.namespace".to_string(), String::new()),
                ]
                .into(),
            }),
        ))
    }
}

impl ComponentStatusStore {
    /// The components listed, in order.
    fn components(&self) -> Vec<String> {
        if self.etcd.is_empty() {
            return vec!["storage".into()];
        }
        (0..self.etcd.len()).map(|n| format!("etcd-{n}")).collect()
    }
}

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
        for name in &self.components() {
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

    /// Nothing is watched: the statuses are computed when read.
    fn request_progress(&self) {}
}

fn read_only(key: &str) -> StorageError {
    StorageError::Internal(format!(
        "{key}: component statuses are computed, not stored"
    ))
}
