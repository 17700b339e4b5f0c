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

/// Conversion between a served version and the storage version of one kind. It may call out
/// (a CRD's conversion webhook) and fail; a list converts in one call, as upstream sends all
/// the items of a list to a webhook in one request.
#[async_trait]
pub trait Conversion: Send + Sync {
    /// The served version's form of stored objects (apiVersion included), in their order;
    /// `list` says they are the items of a list (upstream converts the list object as one).
    async fn to_served(&self, objs: Vec<Value>, list: bool) -> Result<Vec<Value>, StorageError>;
    /// The stored form of an object written in the served version (apiVersion included).
    async fn to_storage(&self, obj: Value) -> Result<Value, StorageError>;
}

/// A conversion done in-process by functions that cannot fail (the built-in kinds' versions).
pub trait SyncConversion: Send + Sync {
    fn to_served(&self, obj: Value) -> Value;
    fn to_storage(&self, obj: Value) -> Value;
}

#[async_trait]
impl<T: SyncConversion> Conversion for T {
    async fn to_served(&self, objs: Vec<Value>, _list: bool) -> Result<Vec<Value>, StorageError> {
        Ok(objs
            .into_iter()
            .map(|o| SyncConversion::to_served(self, o))
            .collect())
    }

    async fn to_storage(&self, obj: Value) -> Result<Value, StorageError> {
        Ok(SyncConversion::to_storage(self, obj))
    }
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

    /// Stored objects in the served version, each re-encoded with its attributes.
    async fn out(
        conversion: &dyn Conversion,
        attrs: &AttrsFn,
        objs: Vec<Object>,
        list: bool,
    ) -> Result<Vec<Object>, StorageError> {
        let values = objs
            .iter()
            .map(Object::value)
            .collect::<Result<Vec<_>, _>>()?;
        let converted = conversion.to_served(values, list).await?;
        if converted.len() != objs.len() {
            return Err(StorageError::Internal(format!(
                "conversion returned {} objects for {}",
                converted.len(),
                objs.len()
            )));
        }
        objs.into_iter()
            .zip(converted)
            .map(|(o, converted)| {
                let bytes = serde_json::to_vec(&converted).map_err(|e| {
                    StorageError::InvalidObject(format!("cannot encode converted {}: {e}", o.key))
                })?;
                Ok(Object {
                    attrs: Arc::new(attrs(&converted)),
                    bytes: bytes.into(),
                    key: o.key,
                    resource_version: o.resource_version,
                })
            })
            .collect()
    }

    async fn convert(&self, o: Object) -> Result<Object, StorageError> {
        Self::out(self.conversion.as_ref(), &self.attrs, vec![o], false)
            .await?
            .pop()
            .ok_or_else(|| StorageError::Internal("conversion returned no object".into()))
    }
}

#[async_trait]
impl Store for ConvertingStore {
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
        self.convert(self.inner.get(key, opts).await?).await
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let mut result = self.inner.list(prefix, opts).await?;
        let items = std::mem::take(&mut result.items);
        result.items = Self::out(self.conversion.as_ref(), &self.attrs, items, true).await?;
        Ok(result)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        let stored = self
            .inner
            .create(key, self.conversion.to_storage(obj).await?)
            .await?;
        self.convert(stored).await
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
                self.conversion.to_storage(obj).await?,
                expected_resource_version,
            )
            .await?;
        self.convert(stored).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError> {
        self.convert(self.inner.delete(key, expected_resource_version).await?)
            .await
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
                let convert = |o| async {
                    Self::out(conversion.as_ref(), &attrs, vec![o], false)
                        .await?
                        .pop()
                        .ok_or_else(|| {
                            StorageError::Internal("conversion returned no object".into())
                        })
                };
                let converted = match event {
                    WatchEvent::Added(o) => convert(o).await.map(WatchEvent::Added),
                    WatchEvent::Modified(o) => convert(o).await.map(WatchEvent::Modified),
                    WatchEvent::Deleted(o) => convert(o).await.map(WatchEvent::Deleted),
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
