//! [`TransformingKv`]: encryption at rest as a decorator over any [`Kv`] backend (upstream does
//! it inside its etcd3 store). Values are transformed to their stored form on the way in and back
//! on the way out — in gets, ranges, transaction outcomes and watch events, previous values
//! included — with the transformer of the resource the key belongs to and the key as the
//! authenticated data. Layers above see plaintext only; a value that does not decrypt gives
//! upstream's error.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::config::DynamicTransformers;
use super::{ENCRYPTED_PREFIX, GroupResource, Transformer};
use crate::kv::{KeyValue, Kv, KvError, KvEvent, RangeResponse, TxnOutcome};

/// Which resource a storage key belongs to: `<prefix>/<storage key root>/...`, where a root is
/// one path segment for built-in resources (`secrets`, `deployments`) or two for the resources of
/// other servers (`apiextensions.k8s.io/customresourcedefinitions`, and custom resources
/// `<group>/<plural>`).
#[derive(Clone, Default)]
pub struct KeyResources {
    prefix: String,
    roots: HashMap<String, GroupResource>,
}

impl KeyResources {
    /// `prefix` is `--etcd-prefix`; `roots` maps each storage root to the resource stored there.
    pub fn new(prefix: &str, roots: impl IntoIterator<Item = (String, GroupResource)>) -> Self {
        let mut map = HashMap::new();
        for (root, gr) in roots {
            // Resources served in several groups share storage under the first's name.
            map.entry(root).or_insert(gr);
        }
        Self {
            prefix: prefix.trim_end_matches('/').to_string(),
            roots: map,
        }
    }

    pub fn resource(&self, key: &str) -> Option<GroupResource> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('/')?;
        let mut segments = rest.splitn(3, '/');
        let first = segments.next()?;
        if let Some(gr) = self.roots.get(first) {
            return Some(gr.clone());
        }
        let second = segments.next()?;
        if let Some(gr) = self.roots.get(&format!("{first}/{second}")) {
            return Some(gr.clone());
        }
        // Custom resources live under `<group>/<plural>`.
        first
            .contains('.')
            .then(|| GroupResource::new(first, second))
    }
}

/// A `Kv` whose values are stored transformed. See the module documentation.
pub struct TransformingKv {
    inner: Arc<dyn Kv>,
    transformers: Arc<DynamicTransformers>,
    resources: KeyResources,
}

impl TransformingKv {
    pub fn new(
        inner: Arc<dyn Kv>,
        transformers: Arc<DynamicTransformers>,
        resources: KeyResources,
    ) -> Self {
        Self {
            inner,
            transformers,
            resources,
        }
    }

    /// The transformer of `key`'s resource, and the resource as the metrics name it.
    fn transformer(&self, key: &str) -> Option<(Arc<dyn Transformer>, String)> {
        let gr = self.resources.resource(key)?;
        let t = self.transformers.for_resource(&gr)?;
        Some((t, gr.display()))
    }

    /// The value of `key` as stored, and whether it is stale.
    async fn read(&self, key: &str, value: &Bytes) -> Result<(Bytes, bool), KvError> {
        match self.transformer(key) {
            Some((t, resource)) => t
                .transform_from_storage_for(value, key.as_bytes(), &resource)
                .await
                .map(|(out, stale)| (Bytes::from(out), stale))
                .map_err(|e| KvError::Transform(e.0)),
            // Identity: values pass untouched, but never an encrypted one as if it were plain.
            None if value.starts_with(ENCRYPTED_PREFIX) => Err(KvError::Transform(
                "identity transformer tried to read encrypted data".into(),
            )),
            None => Ok((value.clone(), false)),
        }
    }

    async fn read_kv(&self, kv: KeyValue) -> Result<KeyValue, KvError> {
        let (value, _) = self.read(&kv.key, &kv.value).await?;
        Ok(KeyValue { value, ..kv })
    }

    async fn read_opt(&self, kv: Option<KeyValue>) -> Result<Option<KeyValue>, KvError> {
        match kv {
            Some(kv) => self.read_kv(kv).await.map(Some),
            None => Ok(None),
        }
    }

    async fn write(&self, key: &str, value: Bytes) -> Result<Bytes, KvError> {
        match self.transformer(key) {
            Some((t, resource)) => t
                .transform_to_storage_for(&value, key.as_bytes(), &resource)
                .await
                .map(Bytes::from)
                .map_err(|e| KvError::Transform(e.0)),
            None => Ok(value),
        }
    }

    async fn outcome(&self, outcome: TxnOutcome) -> Result<TxnOutcome, KvError> {
        Ok(match outcome {
            TxnOutcome::Succeeded { revision, prev } => TxnOutcome::Succeeded {
                revision,
                prev: self.read_opt(prev).await?,
            },
            TxnOutcome::Failed { current } => TxnOutcome::Failed {
                current: self.read_opt(current).await?,
            },
        })
    }

    async fn event(&self, event: KvEvent) -> Result<KvEvent, KvError> {
        Ok(match event {
            KvEvent::Put { kv, prev } => KvEvent::Put {
                kv: self.read_kv(kv).await?,
                prev: self.read_opt(prev).await?,
            },
            KvEvent::Delete {
                key,
                mod_revision,
                prev,
            } => KvEvent::Delete {
                key,
                mod_revision,
                prev: self.read_opt(prev).await?,
            },
            progress @ KvEvent::Progress { .. } => progress,
        })
    }
}

#[async_trait]
impl Kv for TransformingKv {
    async fn get(&self, key: &str) -> Result<(Option<KeyValue>, i64), KvError> {
        let (kv, revision) = self.inner.get(key).await?;
        Ok((self.read_opt(kv).await?, revision))
    }

    async fn get_for_update(&self, key: &str) -> Result<(Option<KeyValue>, bool), KvError> {
        let (kv, _) = self.inner.get(key).await?;
        let Some(kv) = kv else {
            return Ok((None, false));
        };
        let (value, stale) = self.read(&kv.key, &kv.value).await?;
        Ok((Some(KeyValue { value, ..kv }), stale))
    }

    fn transforms_values(&self) -> bool {
        true
    }

    async fn range(
        &self,
        start: &str,
        end: &str,
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, KvError> {
        let mut resp = self.inner.range(start, end, revision, limit).await?;
        let mut kvs = Vec::with_capacity(resp.kvs.len());
        for kv in std::mem::take(&mut resp.kvs) {
            let key = kv.key.clone();
            // Upstream fails the whole list, naming the key.
            kvs.push(self.read_kv(kv).await.map_err(|e| match e {
                KvError::Transform(m) => {
                    KvError::Transform(format!("unable to transform key {key:?}: {m}"))
                }
                other => other,
            })?);
        }
        resp.kvs = kvs;
        Ok(resp)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<TxnOutcome, KvError> {
        let stored = self.write(key, value).await?;
        let outcome = self.inner.create(key, stored).await?;
        self.outcome(outcome).await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: i64,
    ) -> Result<TxnOutcome, KvError> {
        let stored = self.write(key, value).await?;
        let outcome = self
            .inner
            .update(key, stored, expected_mod_revision)
            .await?;
        self.outcome(outcome).await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<i64>,
    ) -> Result<TxnOutcome, KvError> {
        let outcome = self.inner.delete(key, expected_mod_revision).await?;
        self.outcome(outcome).await
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: i64,
    ) -> Result<mpsc::Receiver<Result<KvEvent, KvError>>, KvError> {
        let mut source = self.inner.watch(prefix, after_revision).await?;
        let (tx, rx) = mpsc::channel(256);
        let this = Self {
            inner: self.inner.clone(),
            transformers: self.transformers.clone(),
            resources: self.resources.clone(),
        };
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    next = source.recv() => next,
                };
                let Some(next) = next else { return };
                let item = match next {
                    Ok(event) => this.event(event).await,
                    Err(e) => Err(e),
                };
                let last = item.is_err();
                if tx.send(item).await.is_err() || last {
                    return;
                }
            }
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, KvError> {
        self.inner.current_revision().await
    }

    fn request_progress(&self) {
        self.inner.request_progress();
    }

    async fn compact(&self, revision: i64) -> Result<(), KvError> {
        self.inner.compact(revision).await
    }

    fn consistent_reads_from_cache(&self) -> bool {
        self.inner.consistent_reads_from_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::config::{DynamicTransformers, load};
    use crate::{KvStore, SqliteKv, Store, default_attrs};

    const KEY1: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=";
    const KEY2: &str = "YWJjZGVmZ2hpamtsbW5vcGFiY2RlZmdoaWprbG1ub3A=";

    fn config(dir: &std::path::Path, keys: &[(&str, &str)]) -> std::path::PathBuf {
        let keys: String = keys
            .iter()
            .map(|(n, s)| format!("      - {{name: {n}, secret: {s}}}\n"))
            .collect();
        let path = dir.join("enc.yaml");
        std::fs::write(
            &path,
            format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, '*.example.com']\n  providers:\n  - aescbc:\n      keys:\n{keys}  - identity: {{}}\n"),
        )
        .unwrap();
        path
    }

    fn resources() -> KeyResources {
        KeyResources::new(
            "/registry",
            [
                ("secrets".to_string(), GroupResource::parse("secrets")),
                ("configmaps".to_string(), GroupResource::parse("configmaps")),
            ],
        )
    }

    #[test]
    fn keys_resolve_to_resources() {
        let r = resources();
        assert_eq!(
            r.resource("/registry/secrets/ns/a"),
            Some(GroupResource::parse("secrets"))
        );
        assert_eq!(
            r.resource("/registry/stable.example.com/widgets/ns/a"),
            Some(GroupResource::new("stable.example.com", "widgets"))
        );
        assert_eq!(r.resource("/registry/unknown/a"), None);
        assert_eq!(r.resource("/other/secrets/a"), None);
    }

    #[tokio::test]
    async fn values_are_stored_encrypted_and_read_back_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let raw: Arc<dyn Kv> = SqliteKv::open(&dir.path().join("state.db")).unwrap();
        let dynamic = DynamicTransformers::new(
            load(&config(dir.path(), &[("key1", KEY1)]), false)
                .await
                .unwrap(),
        );
        let kv: Arc<dyn Kv> = Arc::new(TransformingKv::new(raw.clone(), dynamic, resources()));
        let mut watch = kv.watch("/registry/", 0).await.unwrap();
        let store = KvStore::new(kv.clone(), default_attrs());
        let obj = serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "djE="}});
        let created = store
            .create("/registry/secrets/ns/a", obj.clone())
            .await
            .unwrap();
        store
            .create("/registry/configmaps/ns/a", obj.clone())
            .await
            .unwrap();

        let (stored, _) = raw.get("/registry/secrets/ns/a").await.unwrap();
        let stored = stored.unwrap().value;
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"), "{stored:?}");
        assert!(!String::from_utf8_lossy(&stored).contains("djE="));
        let (plain, _) = raw.get("/registry/configmaps/ns/a").await.unwrap();
        assert!(
            plain.unwrap().value.starts_with(b"{"),
            "other resources stay plain"
        );

        let got = store
            .get("/registry/secrets/ns/a", &Default::default())
            .await
            .unwrap();
        assert_eq!(got.value().unwrap()["data"]["k"], "djE=");
        let list = store
            .list("/registry/secrets/", &Default::default())
            .await
            .unwrap();
        assert_eq!(list.items.len(), 1);
        assert_eq!(list.items[0].value().unwrap()["data"]["k"], "djE=");
        match watch.recv().await.unwrap().unwrap() {
            KvEvent::Put { kv, .. } => assert!(kv.value.starts_with(b"{")),
            other => panic!("{other:?}"),
        }
        let mut updated = created.value().unwrap();
        updated["data"]["k"] = "djI=".into();
        store
            .update("/registry/secrets/ns/a", updated, created.resource_version)
            .await
            .unwrap();
        let _ = watch.recv().await; // the configmap
        match watch.recv().await.unwrap().unwrap() {
            KvEvent::Put { kv, prev } => {
                assert!(kv.value.starts_with(b"{"));
                assert!(
                    prev.unwrap().value.starts_with(b"{"),
                    "prev values are decrypted"
                );
            }
            other => panic!("{other:?}"),
        }

        // A value that does not decrypt fails reads with upstream's errors.
        let current = raw.get("/registry/secrets/ns/a").await.unwrap().0.unwrap();
        raw.update(
            "/registry/secrets/ns/a",
            Bytes::from_static(b"k8s:enc:aescbc:v1:nokey:xxxx"),
            current.mod_revision,
        )
        .await
        .unwrap();
        let err = store
            .get("/registry/secrets/ns/a", &Default::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no matching key was found for the provided AES transformer"
        );
        let err = store
            .list("/registry/secrets/", &Default::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unable to transform key \"/registry/secrets/ns/a\": no matching key was found for the provided AES transformer"
        );
    }

    #[tokio::test]
    async fn unchanged_updates_rewrite_stale_values() {
        let dir = tempfile::tempdir().unwrap();
        let raw: Arc<dyn Kv> = SqliteKv::open(&dir.path().join("state.db")).unwrap();
        let old = DynamicTransformers::new(
            load(&config(dir.path(), &[("key1", KEY1)]), false)
                .await
                .unwrap(),
        );
        let store = KvStore::new(
            Arc::new(TransformingKv::new(raw.clone(), old, resources())),
            default_attrs(),
        );
        let obj = serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}});
        let created = store.create("/registry/secrets/ns/a", obj).await.unwrap();
        // Unchanged while the key is current: no write.
        let same = store
            .update(
                "/registry/secrets/ns/a",
                created.value().unwrap(),
                created.resource_version,
            )
            .await
            .unwrap();
        assert_eq!(same.resource_version, created.resource_version);

        // A new first key: the same unchanged update now writes, under key2.
        let rotated = DynamicTransformers::new(
            load(
                &config(dir.path(), &[("key2", KEY2), ("key1", KEY1)]),
                false,
            )
            .await
            .unwrap(),
        );
        let store = KvStore::new(
            Arc::new(TransformingKv::new(raw.clone(), rotated, resources())),
            default_attrs(),
        );
        let rewritten = store
            .update(
                "/registry/secrets/ns/a",
                created.value().unwrap(),
                created.resource_version,
            )
            .await
            .unwrap();
        assert!(rewritten.resource_version > created.resource_version);
        let stored = raw
            .get("/registry/secrets/ns/a")
            .await
            .unwrap()
            .0
            .unwrap()
            .value;
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key2:"), "{stored:?}");
        let again = store
            .update(
                "/registry/secrets/ns/a",
                rewritten.value().unwrap(),
                rewritten.resource_version,
            )
            .await
            .unwrap();
        assert_eq!(
            again.resource_version, rewritten.resource_version,
            "no longer stale"
        );
    }
}
