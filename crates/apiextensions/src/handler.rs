//! The delegate that serves custom resources (upstream: apiextensions-apiserver's
//! `crdHandler`). Requests find their CRD in a table keyed by group and plural; the controller
//! replaces the whole table when CRDs change, so serving never waits for a rebuild.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use apimachinery::Status;
use apimachinery::status::{Reason, StatusDetails};
use apiserver::Delegate;
use apiserver::admission::Admission;
use apiserver::endpoints::{ApiRequest, ApiResources, Response};
use apiserver::registry::{RegistryStore, ResourceInfo};
use apiserver::util::webhook::ServiceResolver;
use async_trait::async_trait;
use storage::{Kv, Store};

use crate::registration::CrdFacts;

/// Where custom resources are stored.
pub struct StorageConfig {
    pub kv: Arc<dyn Kv>,
    /// The key prefix (`--etcd-prefix`).
    pub prefix: String,
    /// Events kept per watch cache; 0 serves from storage without a cache.
    pub watch_cache_size: usize,
}

/// What one established CRD serves.
pub(crate) struct Entry {
    /// The CRD facts the entry was built from; a CRD whose fingerprint is unchanged keeps its
    /// entry (and open watches).
    pub fingerprint: String,
    pub api: Arc<ApiResources>,
    pub infos: Vec<ResourceInfo>,
    /// The CRD is being deleted: its resources are listed, read and deleted, never created.
    pub terminating: bool,
    pub facts: CrdFacts,
    pub group: String,
    pub plural: String,
}

/// The served table: by CRD name (in name order, for discovery) and by group and plural.
#[derive(Default)]
pub(crate) struct Served {
    pub by_crd: BTreeMap<String, Arc<Entry>>,
    pub by_resource: HashMap<(String, String), Arc<Entry>>,
}

pub struct CrdHandler {
    /// The CustomResourceDefinition store of the built-in catalog.
    pub(crate) crds: Arc<RegistryStore>,
    pub(crate) storage: StorageConfig,
    pub(crate) admission: Admission,
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
    served: RwLock<Arc<Served>>,
    /// Ticks each time the served table is replaced (the aggregator's autoregistration keeps
    /// the custom group versions' APIServices in step with it, as upstream's crdregistration
    /// controller follows its CRD informer).
    served_changed: tokio::sync::watch::Sender<()>,
    /// One storage (watch cache) per `<group>/<plural>`, kept while a CRD names it.
    pub(crate) caches: Mutex<HashMap<String, Arc<dyn Store>>>,
    /// The `meta/v1` schemas that custom resources' OpenAPI documents refer to (shared: they
    /// are the same for every server of the process).
    pub(crate) meta_schemas: Arc<serde_json::Map<String, serde_json::Value>>,
    /// Finds the endpoint of a conversion webhook named by its Service.
    pub(crate) resolver: Option<Arc<dyn ServiceResolver>>,
    /// The last `/openapi/v2` fragment and the fingerprint of the table it was built from.
    v2_fragment: Mutex<Option<(String, Arc<serde_json::Value>)>>,
}

impl CrdHandler {
    /// The handler over the built-in catalog's CRD store; `None` when the catalog does not serve
    /// CustomResourceDefinitions.
    pub fn new(
        builtin: &ApiResources,
        storage: StorageConfig,
        meta_schemas: Arc<serde_json::Map<String, serde_json::Value>>,
        resolver: Option<Arc<dyn ServiceResolver>>,
    ) -> Option<Arc<Self>> {
        let crds = builtin
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")?
            .clone();
        Some(Arc::new(Self {
            admission: crds.admission.clone(),
            crds,
            storage,
            shutdown: builtin.shutdown.clone(),
            served: RwLock::new(Arc::new(Served::default())),
            served_changed: tokio::sync::watch::Sender::new(()),
            caches: Mutex::new(HashMap::new()),
            meta_schemas,
            resolver,
            v2_fragment: Mutex::new(None),
        }))
    }

    /// What serves each served custom resource, one `ApiResources` per CRD with its stores and
    /// schemas (for the controllers: the namespace controller deletes a namespace's custom
    /// resources with the rest, the garbage collector writes their metadata).
    pub fn apis(&self) -> Vec<Arc<ApiResources>> {
        self.served()
            .by_crd
            .values()
            .map(|e| e.api.clone())
            .collect()
    }

    /// The store of every served version of every custom resource (for admission webhooks,
    /// which convert objects to the version a webhook asks for).
    pub fn all_stores(&self) -> Vec<Arc<RegistryStore>> {
        self.served()
            .by_crd
            .values()
            .flat_map(|e| e.api.all().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// The schemas of the custom resource `kind` of `group/version`, if it is served.
    pub fn schemas_for(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<Arc<apimachinery::schema::Schemas>> {
        self.served().by_crd.values().find_map(|e| {
            e.api
                .all()
                .any(|s| s.info.group == group && s.info.version == version && s.info.kind == kind)
                .then(|| e.api.shared_schemas())
                .flatten()
        })
    }

    pub(crate) fn served(&self) -> Arc<Served> {
        self.served
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn replace(&self, served: Served) {
        *self.served.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(served);
        self.served_changed.send_replace(());
    }

    /// Marked changed each time what is served changes (CRDs established, changed or gone).
    pub fn served_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.served_changed.subscribe()
    }
}

#[async_trait]
impl Delegate for CrdHandler {
    async fn serve(&self, req: ApiRequest) -> Result<Result<Response, Status>, ApiRequest> {
        let served = self.served();
        let key = (req.info.api_group.clone(), req.info.resource.clone());
        let Some(entry) = served.by_resource.get(&key).cloned() else {
            return Err(req);
        };
        if entry.terminating && req.info.verb == "create" {
            // Upstream's MethodNotSupported with its own message.
            return Ok(Err(Status::new(
                405,
                Reason::MethodNotAllowed,
                "create not allowed while custom resource definition is terminating",
            )
            .with_details(StatusDetails {
                group: entry.group.clone(),
                kind: entry.plural.clone(),
                ..Default::default()
            })));
        }
        entry.api.serve(req).await
    }

    /// A document per served group version, its hash from the fingerprints of the CRDs in it
    /// (a CRD's spec or names changing changes it), so the index costs nothing to list.
    fn openapi_v3_paths(&self) -> Vec<(String, String)> {
        let mut by_path: BTreeMap<String, String> = BTreeMap::new();
        for e in self.served().by_crd.values() {
            for v in &e.facts.versions {
                let version = v
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("");
                by_path
                    .entry(format!("apis/{}/{version}", e.group))
                    .or_default()
                    .push_str(&e.fingerprint);
            }
        }
        by_path
            .into_iter()
            .map(|(p, f)| (p, apiserver::openapi::content_hash(f.as_bytes())))
            .collect()
    }

    fn openapi_v3_doc(&self, path: &str) -> Option<bytes::Bytes> {
        let served = self.served();
        let prefix = |e: &Entry| format!("apis/{}/", e.group);
        let facts: Vec<&CrdFacts> = served
            .by_crd
            .values()
            .filter(|e| path.starts_with(&prefix(e)))
            .map(|e| &e.facts)
            .collect();
        crate::openapi::documents(&facts, &self.meta_schemas)
            .remove(path)
            .map(bytes::Bytes::from)
    }

    /// The CRDs' part of `/openapi/v2`, built once per served table.
    fn openapi_v2_fragment(&self) -> Option<(String, Arc<serde_json::Value>)> {
        let served = self.served();
        if served.by_crd.is_empty() {
            return None;
        }
        let fingerprint: String = served
            .by_crd
            .values()
            .map(|e| e.fingerprint.as_str())
            .collect();
        let fingerprint = apiserver::openapi::content_hash(fingerprint.as_bytes());
        let mut cached = self.v2_fragment.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, doc)) = cached.as_ref()
            && *f == fingerprint
        {
            return Some((f.clone(), doc.clone()));
        }
        let facts: Vec<&CrdFacts> = served.by_crd.values().map(|e| &e.facts).collect();
        let doc = Arc::new(crate::openapi::v2_fragment(&facts));
        *cached = Some((fingerprint.clone(), doc.clone()));
        Some((fingerprint, doc))
    }

    /// Upstream's aggregator lists CRD groups (all of the same priority) by name, after the
    /// built-in ones, and a group's versions by version priority across its CRDs.
    fn resources(&self) -> Vec<ResourceInfo> {
        let mut infos: Vec<ResourceInfo> = self
            .served()
            .by_crd
            .values()
            .flat_map(|e| e.infos.iter().cloned())
            .collect();
        infos.sort_by(|a, b| {
            a.group
                .cmp(&b.group)
                .then_with(|| crate::version::compare(&a.version, &b.version))
        });
        infos
    }
}
