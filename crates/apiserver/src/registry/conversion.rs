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
    /// Whether a converted object may be kept and given again for the same stored revision
    /// (in-process conversions: yes; a webhook is asked every time, as upstream asks it).
    fn cacheable(&self) -> bool {
        true
    }
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
    converter: Arc<Converter>,
}

/// Watch events buffered between the shared stream and a converted one.
const WATCH_BUFFER: usize = 256;

/// Converted objects kept, at most this many and this many bytes: past either bound the cache
/// starts over.
const CACHE_OBJECTS: usize = 100_000;
const CACHE_BYTES: usize = 256 << 20;

/// The conversion of one served version, with the objects it converted: a stored object does
/// not change for a given revision, so a list or a watch converts each object once rather than
/// on every read (upstream's watch cache likewise holds objects decoded, defaulted and pruned
/// once).
struct Converter {
    conversion: Arc<dyn Conversion>,
    attrs: AttrsFn,
    cache: std::sync::Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    by_key: std::collections::HashMap<Arc<str>, Object>,
    bytes: usize,
}

impl Converter {
    fn cached(&self, o: &Object) -> Option<Object> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .by_key
            .get(&o.key)
            .filter(|c| c.resource_version == o.resource_version)
            .cloned()
    }

    fn keep(&self, converted: &[Object]) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for o in converted {
            if cache.by_key.len() >= CACHE_OBJECTS || cache.bytes >= CACHE_BYTES {
                cache.by_key.clear();
                cache.bytes = 0;
            }
            cache.bytes += o.bytes.len();
            if let Some(old) = cache.by_key.insert(o.key.clone(), o.clone()) {
                cache.bytes = cache.bytes.saturating_sub(old.bytes.len());
            }
        }
    }

    /// Stored objects in the served version, each re-encoded with its attributes.
    async fn out(&self, objs: Vec<Object>, list: bool) -> Result<Vec<Object>, StorageError> {
        let cacheable = self.conversion.cacheable();
        let mut done: Vec<Option<Object>> = if cacheable {
            objs.iter().map(|o| self.cached(o)).collect()
        } else {
            vec![None; objs.len()]
        };
        let pending: Vec<&Object> = objs
            .iter()
            .zip(&done)
            .filter(|(_, d)| d.is_none())
            .map(|(o, _)| o)
            .collect();
        if !pending.is_empty() {
            let values = pending
                .iter()
                .map(|o| o.value())
                .collect::<Result<Vec<_>, _>>()?;
            let converted = self.conversion.to_served(values, list).await?;
            if converted.len() != pending.len() {
                return Err(StorageError::Internal(format!(
                    "conversion returned {} objects for {}",
                    converted.len(),
                    pending.len()
                )));
            }
            let fresh = pending
                .into_iter()
                .zip(converted)
                .map(|(o, converted)| {
                    // A custom resource, written as upstream writes one (members sorted).
                    let bytes = apimachinery::gojson::to_vec(&converted);
                    Ok(Object::new(
                        o.key.clone(),
                        bytes.into(),
                        o.resource_version,
                        Arc::new((self.attrs)(&converted)),
                    ))
                })
                .collect::<Result<Vec<Object>, StorageError>>()?;
            if cacheable {
                self.keep(&fresh);
            }
            let mut fresh = fresh.into_iter();
            for slot in done.iter_mut().filter(|d| d.is_none()) {
                *slot = fresh.next();
            }
        }
        Ok(done.into_iter().flatten().collect())
    }

    async fn one(&self, o: Object) -> Result<Object, StorageError> {
        self.out(vec![o], false)
            .await?
            .pop()
            .ok_or_else(|| StorageError::Internal("conversion returned no object".into()))
    }
}

impl ConvertingStore {
    pub fn new(inner: Arc<dyn Store>, conversion: Arc<dyn Conversion>, attrs: AttrsFn) -> Self {
        Self {
            inner,
            converter: Arc::new(Converter {
                conversion,
                attrs,
                cache: Default::default(),
            }),
        }
    }

    async fn convert(&self, o: Object) -> Result<Object, StorageError> {
        self.converter.one(o).await
    }

    /// A write's error with the object it gives back (a write refused as too large or as
    /// already existing) in the version it was written in, as the writer tries it again from
    /// there; without it when it cannot be converted back.
    async fn refused_as_served(&self, mut err: StorageError) -> StorageError {
        let Some(rejected) = err.take_rejected() else {
            return err;
        };
        let served = self
            .converter
            .conversion
            .to_served(vec![rejected], false)
            .await;
        err.with_rejected(served.ok().and_then(|mut v| v.pop()))
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
        result.items = self.converter.out(items, true).await?;
        Ok(result)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        let stored = self
            .inner
            .create(key, self.converter.conversion.to_storage(obj).await?)
            .await;
        match stored {
            Ok(stored) => self.convert(stored).await,
            Err(e) => Err(self.refused_as_served(e).await),
        }
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
                self.converter.conversion.to_storage(obj).await?,
                expected_resource_version,
            )
            .await;
        match stored {
            Ok(stored) => self.convert(stored).await,
            Err(e) => Err(self.refused_as_served(e).await),
        }
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
        let converter = self.converter.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let convert = |o| converter.one(o);
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
        Ok(rx.into())
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        self.inner.current_revision().await
    }

    fn request_progress(&self) {
        self.inner.request_progress();
    }

    fn rewrites_unchanged(&self) -> bool {
        self.inner.rewrites_unchanged()
    }
}
