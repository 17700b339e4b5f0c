//! The built-in API (upstream: pkg/apis, pkg/registry, pkg/controlplane): the catalog of
//! built-in resources, their strategies and table printers, the admission plugins that know
//! kinds, bootstrap data and the controllers Ironplane runs itself (namespace deletion, the
//! `default` ServiceAccount).

pub mod admission;
pub mod bootstrap;
pub mod bootstrap_token;
pub mod catalog;
mod componentstatus;
pub mod controllers;
pub mod default_service_cidr;
pub mod endpoint_reconciler;
pub mod flowcontrol_bootstrap;
pub mod leader_election;
pub mod node_authorizer;
pub mod openapi;
pub mod pod_fields;
pub mod poststart;
pub mod printers;
pub mod quota;
pub mod rbac;
pub mod resource_quota_controller;
pub mod service_resolver;
pub mod serviceaccount;
pub mod storage_codec;
pub mod strategies;
mod table;

use std::collections::HashMap;
use std::sync::Arc;

use apiserver::authentication::Authenticator;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{ConvertingStore, RegistryStore};
use storage::{Cacher, CacherOptions, Kv, KvStore, StorageCodec, Store};

pub use strategies::ServiceIpAllocator;

/// What `install` builds: the served resources and handles the controllers need.
pub struct BuiltinApi {
    pub resources: Arc<ApiResources>,
    pub allocator: Arc<ServiceIpAllocator>,
    /// Each stored resource's watch cache (none with a cache size of 0), named by its storage
    /// key, for the `storage-readiness` hook.
    pub watch_caches: Vec<(String, Arc<Cacher>)>,
}

/// What the kinds that authenticate or authorize need: TokenReview asks the authenticator, the
/// RBAC kinds' escalation checks read RBAC's index, ServiceAccounts issue tokens.
pub struct AuthSetup<'a> {
    pub authenticator: Arc<dyn Authenticator>,
    pub rbac: &'a rbac::Index,
    /// Service-account tokens, for the TokenRequest subresource (`None`: not served).
    pub tokens: Option<Arc<serviceaccount::Tokens>>,
}

/// The strategy of a kind the catalog stores for another layer of the chain (upstream serves it
/// from that layer's server): CustomResourceDefinitions, whose rules live in `apiextensions`.
pub struct LayeredStrategy {
    pub group: &'static str,
    pub resource: &'static str,
    pub strategy: Arc<dyn apiserver::registry::Strategy>,
}

/// A built-in resource kept in a store of its own (`--etcd-servers-overrides`).
#[derive(Clone)]
pub struct KvOverride {
    pub group: String,
    pub resource: String,
    pub kv: Arc<dyn Kv>,
}

/// Parses the two schema tables every write of a built-in object reads, each once per process:
/// the protobuf messages (the Go field order of the JSON written to storage) and the structural
/// schemas (managed fields, pruning, defaults). They are otherwise parsed at the first write.
pub fn load_schemas() {
    ironplane_protobuf::load_schema();
    if let Err(e) = openapi::shared_schemas() {
        tracing::warn!(error = %e, "the built-in structural schemas did not load");
    }
}

/// Serves every built-in resource from `kv` (or the store `overrides` names for it; the etcd
/// clusters behind them, `etcd_clusters`, are what `componentstatuses` probes), its values written by `codec`
/// (`storage_codec::BuiltinCodec` for `--storage-media-type`), under `prefix` (`--etcd-prefix`),
/// each behind a watch cache keeping `watch_cache_size` recent events
/// (`--default-watch-cache-size`; 0 serves straight from storage, as upstream's 0 disables the
/// cache).
/// Admission plugins are configured from `admission_setup`; a configuration they refuse is
/// the error.
// The backend, the codec and the prefix stay separate arguments: the server chooses each from
// its own options.
#[allow(clippy::too_many_arguments)]
pub fn install(
    kv: Arc<dyn Kv>,
    overrides: &[KvOverride],
    etcd_clusters: &[Arc<storage::EtcdKv>],
    codec: Arc<dyn StorageCodec>,
    prefix: &str,
    allocator: Arc<ServiceIpAllocator>,
    watch_cache_size: usize,
    auth: &AuthSetup<'_>,
    layered: &[LayeredStrategy],
    admission_setup: &admission::Setup<'_>,
) -> Result<BuiltinApi, String> {
    let mut resources = ApiResources::new(Arc::new(table::BuiltinTables));
    resources.set_schema_loader(openapi::shared_schemas);
    let lookup: Arc<std::sync::OnceLock<Arc<ApiResources>>> = Arc::new(std::sync::OnceLock::new());
    let admission = admission::default_plugins(lookup.clone(), admission_setup)?;
    let ctx = strategies::StrategyContext {
        services: allocator.clone(),
        authenticator: auth.authenticator.clone(),
        api: lookup.clone(),
        authorizer: admission_setup.authorizer.clone(),
        tokens: auth.tokens.clone(),
        escalation: rbac::escalation::Escalation {
            index: auth.rbac.clone(),
            authorizer: admission_setup.authorizer.clone(),
            api: lookup.clone(),
        },
    };
    // One cache per stored resource, shared by every version it is served in.
    let mut caches: HashMap<String, Arc<dyn Store>> = HashMap::new();
    let mut watch_caches = Vec::new();
    for info in catalog::builtin_resources() {
        let key_root = format!("{}/{}/", prefix.trim_end_matches('/'), info.storage_key);
        let attrs_info = info.clone();
        // Resources sharing a storage root share the store of the first one listed (core
        // Events before events.k8s.io's), as upstream's cohabitating resources do.
        let kv = overrides
            .iter()
            .find(|o| o.group == info.group && o.resource == info.resource)
            .map_or(&kv, |o| &o.kv);
        let store = caches
            .entry(key_root.clone())
            .or_insert_with(|| {
                let attrs: storage::AttrsFn = Arc::new(move |v| attrs_info.attrs(v));
                // Resources sharing a store are counted as the first one, as upstream's
                // cohabitating resources share one store.
                let metrics = storage::ResourceMetrics::new(&info.group, &info.resource);
                let inner: Arc<dyn Store> = Arc::new(
                    KvStore::with_codec(kv.clone(), attrs.clone(), codec.clone())
                        .with_metrics(metrics.clone()),
                );
                if watch_cache_size == 0 {
                    return inner;
                }
                let options = CacherOptions {
                    window_capacity: watch_cache_size,
                    metrics: Some(metrics),
                    ..Default::default()
                };
                let cache = Cacher::with_options(inner.clone(), &key_root, attrs, options);
                watch_caches.push((info.storage_key.to_string(), cache.clone()));
                storage::cached(kv.as_ref(), inner, cache)
            })
            .clone();
        // Component statuses are computed on request, from the health of the store.
        let store: Arc<dyn Store> = if info.group.is_empty() && info.resource == "componentstatuses"
        {
            Arc::new(componentstatus::ComponentStatusStore {
                storage: store,
                prefix: key_root.clone(),
                etcd: etcd_clusters.to_vec(),
                etcd_prefix: prefix.to_string(),
            })
        } else {
            store
        };
        let strategy = layered
            .iter()
            .find(|l| l.group == info.group && l.resource == info.resource)
            .map(|l| l.strategy.clone())
            .unwrap_or_else(|| strategies::for_resource(&info, &ctx));
        // Another version of a stored resource reads and writes through a conversion.
        let conversion = strategies::conversion_for(&info);
        let store: Arc<dyn Store> = match &conversion {
            Some(conversion) => {
                let attrs_info = info.clone();
                let attrs: storage::AttrsFn = Arc::new(move |v| attrs_info.attrs(v));
                Arc::new(ConvertingStore::new(store, conversion.clone(), attrs))
            }
            None => store,
        };
        let registry = RegistryStore::new(info, strategy, store, admission.clone(), prefix);
        resources.add(Arc::new(match conversion {
            Some(c) => registry.with_conversion(c),
            None => registry,
        }));
    }
    let resources = Arc::new(resources);
    let _ = lookup.set(resources.clone());
    Ok(BuiltinApi {
        resources,
        allocator,
        watch_caches,
    })
}
