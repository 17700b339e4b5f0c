//! Versions and conversion: a resource served in several versions is stored once, in its
//! storage version; `ConvertingStore` serves another version by wrapping the shared store and
//! converting every object on the way out and on the way in (upstream: the scheme's conversion
//! functions, applied by the codec between storage and the handlers). It is a `Store` itself, so
//! the registry above it does not know it is there. The storage version's own path never passes
//! through it and keeps its bytes unconverted.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use storage::{
    AttrsFn, GetOptions, ListOptions, ListResult, Object, StorageError, Store, WatchEvent,
    WatchOptions, WatchStream,
};

/// Conversion between a served version and the storage version of one kind.
pub trait Conversion: Send + Sync {
    /// The served version's form of a stored object (apiVersion included).
    fn to_served(&self, obj: Value) -> Value;
    /// The stored form of an object written in the served version (apiVersion included).
    fn to_storage(&self, obj: Value) -> Value;
}

pub struct ConvertingStore {
    inner: Arc<dyn Store>,
    conversion: Arc<dyn Conversion>,
    attrs: AttrsFn,
}

/// Watch events buffered between the shared stream and a converted one.
const WATCH_BUFFER: usize = 256;

impl ConvertingStore {
    pub fn new(inner: Arc<dyn Store>, conversion: Arc<dyn Conversion>, attrs: AttrsFn) -> Self {
        Self {
            inner,
            conversion,
            attrs,
        }
    }

    fn out(
        conversion: &dyn Conversion,
        attrs: &AttrsFn,
        o: Object,
    ) -> Result<Object, StorageError> {
        let converted = conversion.to_served(o.value()?);
        let bytes = serde_json::to_vec(&converted).map_err(|e| {
            StorageError::InvalidObject(format!("cannot encode converted {}: {e}", o.key))
        })?;
        Ok(Object {
            attrs: Arc::new(attrs(&converted)),
            bytes: bytes.into(),
            key: o.key,
            resource_version: o.resource_version,
        })
    }

    fn convert(&self, o: Object) -> Result<Object, StorageError> {
        Self::out(self.conversion.as_ref(), &self.attrs, o)
    }
}

#[async_trait]
impl Store for ConvertingStore {
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
        self.convert(self.inner.get(key, opts).await?)
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let mut result = self.inner.list(prefix, opts).await?;
        result.items = result
            .items
            .into_iter()
            .map(|o| self.convert(o))
            .collect::<Result<_, _>>()?;
        Ok(result)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        let stored = self
            .inner
            .create(key, self.conversion.to_storage(obj))
            .await?;
        self.convert(stored)
    }

    async fn update(
        &self,
        key: &str,
        obj: Value,
        expected_resource_version: i64,
    ) -> Result<Object, StorageError> {
        let stored = self
            .inner
            .update(
                key,
                self.conversion.to_storage(obj),
                expected_resource_version,
            )
            .await?;
        self.convert(stored)
    }

    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError> {
        self.convert(self.inner.delete(key, expected_resource_version).await?)
    }

    async fn watch(
        &self,
        prefix_or_key: &str,
        opts: &WatchOptions,
    ) -> Result<WatchStream, StorageError> {
        let mut events = self.inner.watch(prefix_or_key, opts).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(WATCH_BUFFER);
        let conversion = self.conversion.clone();
        let attrs = self.attrs.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let convert = |o| Self::out(conversion.as_ref(), &attrs, o);
                let converted = match event {
                    WatchEvent::Added(o) => convert(o).map(WatchEvent::Added),
                    WatchEvent::Modified(o) => convert(o).map(WatchEvent::Modified),
                    WatchEvent::Deleted(o) => convert(o).map(WatchEvent::Deleted),
                    other => Ok(other),
                };
                let event = converted.unwrap_or_else(WatchEvent::Error);
                let last = matches!(event, WatchEvent::Error(_));
                if tx.send(event).await.is_err() || last {
                    break;
                }
            }
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        self.inner.current_revision().await
    }
}
