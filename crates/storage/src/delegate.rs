//! Which reads a resource's watch cache serves and which go to storage, where that depends on the
//! backend (upstream: the `CacheDelegator`'s `ShouldDelegateConsistentRead`).
//!
//! A consistent read (LIST or a watch-list without a resourceVersion) may come from the cache only
//! when the cache learns promptly that it has caught up with storage's current revision; for a
//! resource without recent writes only a progress notification tells it. Upstream serves such
//! reads from etcd when etcd cannot answer progress requests correctly (before 3.4.31 / 3.5.13),
//! and so does [`cached`]: on such a backend it puts [`ConsistentReadsFromStorage`] in front of
//! the cache. Everything else still goes to the cache. The cache itself is unchanged.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::errors::StorageError;
use crate::kv::Kv;
use crate::store::{
    GetOptions, ListOptions, ListResult, Object, ResourceVersion, Store, WatchOptions, WatchStream,
};

/// The store a resource is served from: `cache` itself where `kv` lets it serve consistent reads,
/// else the cache with consistent reads going to `storage` (the store the cache wraps).
pub fn cached(kv: &dyn Kv, storage: Arc<dyn Store>, cache: Arc<dyn Store>) -> Arc<dyn Store> {
    if kv.consistent_reads_from_cache() {
        cache
    } else {
        Arc::new(ConsistentReadsFromStorage { cache, storage })
    }
}

/// A cache whose consistent reads are quorum reads from storage. See the module documentation.
pub struct ConsistentReadsFromStorage {
    cache: Arc<dyn Store>,
    storage: Arc<dyn Store>,
}

impl ConsistentReadsFromStorage {
    /// Upstream's rule: resourceVersion unset and no continue token (a continued list reads at the
    /// token's revision, which the cache checks itself).
    fn consistent_list(opts: &ListOptions) -> bool {
        opts.resource_version == ResourceVersion::Unset && opts.continue_token.is_none()
    }
}

#[async_trait]
impl Store for ConsistentReadsFromStorage {
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
        // The cache already sends an unversioned GET to storage.
        self.cache.get(key, opts).await
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        if Self::consistent_list(opts) {
            self.storage.list(prefix, opts).await
        } else {
            self.cache.list(prefix, opts).await
        }
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Object, StorageError> {
        self.cache.create(key, obj).await
    }

    async fn update(
        &self,
        key: &str,
        obj: Value,
        expected_resource_version: i64,
    ) -> Result<Object, StorageError> {
        self.cache.update(key, obj, expected_resource_version).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_resource_version: Option<i64>,
    ) -> Result<Object, StorageError> {
        self.cache.delete(key, expected_resource_version).await
    }

    async fn watch(
        &self,
        prefix_or_key: &str,
        opts: &WatchOptions,
    ) -> Result<WatchStream, StorageError> {
        // A watch-list without a version starts from a consistent snapshot: storage's.
        if opts.send_initial_events == Some(true) && opts.resource_version == ResourceVersion::Unset
        {
            self.storage.watch(prefix_or_key, opts).await
        } else {
            self.cache.watch(prefix_or_key, opts).await
        }
    }

    async fn current_revision(&self) -> Result<i64, StorageError> {
        self.storage.current_revision().await
    }
}
