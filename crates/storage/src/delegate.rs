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

    fn request_progress(&self) {
        self.storage.request_progress();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KvStore, SqliteKv, WatchEvent, default_attrs};
    use serde_json::json;

    /// A store holding one ConfigMap named `name`.
    async fn store_with(name: &str) -> (Arc<dyn Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let store: Arc<dyn Store> = Arc::new(KvStore::new(kv, default_attrs()));
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}});
        store
            .create(&format!("/registry/configmaps/ns/{name}"), object)
            .await
            .expect("create");
        (store, dir)
    }

    async fn names(store: &ConsistentReadsFromStorage, opts: &ListOptions) -> Vec<String> {
        let listed = store
            .list("/registry/configmaps/", opts)
            .await
            .expect("list");
        listed.items.iter().map(|o| o.key.to_string()).collect()
    }

    /// Two stores that disagree show which one answered.
    #[tokio::test]
    async fn consistent_reads_go_to_storage_and_the_rest_to_the_cache() {
        let (storage, _a) = store_with("from-storage").await;
        let (cache, _b) = store_with("from-cache").await;
        let store = ConsistentReadsFromStorage { cache, storage };
        assert_eq!(
            names(&store, &ListOptions::default()).await,
            ["/registry/configmaps/ns/from-storage"]
        );
        let any = ListOptions {
            resource_version: ResourceVersion::Any,
            ..Default::default()
        };
        assert_eq!(
            names(&store, &any).await,
            ["/registry/configmaps/ns/from-cache"]
        );
        let get = GetOptions {
            resource_version: ResourceVersion::Any,
        };
        assert!(
            store
                .get("/registry/configmaps/ns/from-cache", &get)
                .await
                .is_ok()
        );
        let first_added = |opts: WatchOptions| {
            let store = &store;
            async move {
                let mut events = store
                    .watch("/registry/configmaps/", &opts)
                    .await
                    .expect("watch");
                match events.recv().await {
                    Some(WatchEvent::Added(o)) => o.key.to_string(),
                    other => panic!("expected ADDED, got {other:?}"),
                }
            }
        };
        let watch_list = WatchOptions {
            send_initial_events: Some(true),
            allow_bookmarks: true,
            ..Default::default()
        };
        assert_eq!(
            first_added(watch_list).await,
            "/registry/configmaps/ns/from-storage"
        );
        assert_eq!(
            first_added(WatchOptions::default()).await,
            "/registry/configmaps/ns/from-cache"
        );
    }
}
