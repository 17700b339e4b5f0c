//! REST endpoints: one handler per verb (`get`, `list`, `create`, `update`, `patch`, `delete`,
//! `watch`), chosen from a table of verb × subresource, over a set of resources served by
//! `RegistryStore`s. Decoding and encoding sit at the edges (`decode`, `response`); the handlers
//! in between speak only JSON objects.

mod create;
pub mod decode;
mod delete;
pub mod discovery;
mod get;
mod list;
pub mod metrics;
pub mod negotiation;
mod patch;
pub mod query;
pub mod response;
pub(crate) mod scale;
pub mod table;
mod update;
mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::Status;
use apimachinery::schema::Schemas;
use bytes::Bytes;

use crate::authentication::UserInfo;
use crate::registry::{RegistryStore, ResourceInfo, WriteOptions};
use crate::request::RequestInfo;
pub use response::{Body, Response};
pub use table::{DefaultTableConvertor, TableConvertor};

/// A request as handlers see it: parsed, authenticated, body read.
pub struct ApiRequest {
    pub method: http::Method,
    pub headers: http::HeaderMap,
    pub query: String,
    pub info: RequestInfo,
    pub user: UserInfo,
    pub body: Bytes,
}

/// The field manager of a write request (see `registry::fieldmanager`): the `fieldManager`
/// parameter or the User-Agent's prefix; `None` when the server has no schemas.
pub(crate) fn managed_fields(
    api: &ApiResources,
    req: &ApiRequest,
    field_manager: Option<&str>,
) -> Option<crate::registry::ManagedFieldsRequest> {
    let user_agent = req
        .headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let info = &req.info;
    Some(crate::registry::ManagedFieldsRequest {
        schemas: api.shared_schemas()?,
        manager: apimachinery::managedfields::manager_or_user_agent(field_manager, user_agent),
        versions: api.other_versions(&info.api_group, &info.resource, &info.api_version),
    })
}

/// Gives the built-in kinds' schemas (shared, so that a process serving several servers parses
/// them once).
pub type SchemaLoader = fn() -> Result<Arc<Schemas>, String>;

/// Served resources by group, version and resource, plus what handlers need beside storage.
pub struct ApiResources {
    /// The stores by group, then resource, then version: every request looks its store up here,
    /// and a write its resource's other versions (for managed fields), so nested keys let a
    /// lookup borrow the request's strings instead of building a key.
    stores: HashMap<String, HashMap<String, Vec<Arc<RegistryStore>>>>,
    order: Vec<Arc<RegistryStore>>,
    pub tables: Arc<dyn TableConvertor>,
    /// OpenAPI schemas of the served kinds, for dropping unknown fields and strategic merge
    /// patches: parsed once, on first use (start-up warms them off the request path, but a
    /// request never proceeds without them).
    schemas: std::sync::OnceLock<Option<Arc<Schemas>>>,
    schema_loader: Option<SchemaLoader>,
    /// Flipped at shutdown: open watches end cleanly instead of being cut.
    pub shutdown: tokio::sync::watch::Sender<bool>,
}

impl ApiResources {
    pub fn new(tables: Arc<dyn TableConvertor>) -> Self {
        Self {
            stores: HashMap::new(),
            order: Vec::new(),
            tables,
            schemas: std::sync::OnceLock::new(),
            schema_loader: None,
            shutdown: tokio::sync::watch::channel(false).0,
        }
    }

    /// Where `schemas()` gets its schemas from.
    pub fn set_schema_loader(&mut self, loader: SchemaLoader) {
        self.schema_loader = Some(loader);
    }

    /// Gives the schemas at once instead of through a loader (a custom resource's come from its
    /// CustomResourceDefinition). Schemas already given or loaded are kept.
    pub fn set_schemas(&self, schemas: Arc<Schemas>) {
        let _ = self.schemas.set(Some(schemas));
    }

    /// The schemas, loading them on the first call (which blocks its caller for the parse). A
    /// loader that fails is logged once and leaves the server without schemas.
    pub fn schemas(&self) -> Option<&Schemas> {
        self.loaded_schemas().as_deref()
    }

    /// The stores of `group/resource` in its served versions other than `version`.
    fn other_versions(
        &self,
        group: &str,
        resource: &str,
        version: &str,
    ) -> Vec<Arc<RegistryStore>> {
        self.versions(group, resource)
            .iter()
            .filter(|s| s.info.version != version)
            .cloned()
            .collect()
    }

    /// The options of a write the server makes itself to `store`, its changes recorded in
    /// managed fields under `manager`, as upstream records its loopback clients
    /// (`kube-apiserver`) and the controller manager's (`kube-controller-manager`).
    pub fn internal_write(&self, store: &RegistryStore, manager: &str) -> WriteOptions {
        let info = &store.info;
        WriteOptions {
            dry_run: false,
            managed_fields: self.shared_schemas().map(|schemas| {
                crate::registry::ManagedFieldsRequest {
                    schemas,
                    manager: manager.to_string(),
                    versions: self.other_versions(&info.group, &info.resource, &info.version),
                }
            }),
        }
    }

    /// A controller's server-side apply of `config` to the `/status` of the cluster-scoped
    /// object `name`, as `manager` and forced, as upstream's controllers call `ApplyStatus`; an
    /// object deleted meanwhile is a 404.
    pub async fn apply_status(
        &self,
        store: &Arc<RegistryStore>,
        manager: &str,
        user: &UserInfo,
        name: &str,
        config: &serde_json::Value,
    ) -> Result<(), Status> {
        use crate::registry::{Requester, UpdateOptions};
        let mf = self
            .internal_write(store, manager)
            .managed_fields
            .ok_or_else(|| Status::internal("server-side apply needs the OpenAPI schemas"))?;
        let mut updater = |current: Option<&serde_json::Value>| {
            let current =
                current.ok_or_else(|| Status::not_found(&store.info.group_resource(), name))?;
            store.apply(&mf, "status", Some(current), config, true)
        };
        let opts = UpdateOptions {
            // An apply records its own managed fields.
            write: WriteOptions::default(),
            subresource: "status".into(),
            ..UpdateOptions::default()
        };
        store
            .update(&Requester { user }, "", name, &mut updater, &opts)
            .await
            .map(|_| ())
    }

    /// The schemas as a shared handle (for those that keep them past a request).
    pub fn shared_schemas(&self) -> Option<Arc<Schemas>> {
        self.loaded_schemas().clone()
    }

    fn loaded_schemas(&self) -> &Option<Arc<Schemas>> {
        self.schemas.get_or_init(|| {
            let loader = self.schema_loader?;
            loader()
                .map_err(|e| tracing::error!(error = %e, "cannot load OpenAPI schemas"))
                .ok()
        })
    }

    pub fn add(&mut self, store: Arc<RegistryStore>) {
        let i = &store.info;
        let versions = self
            .stores
            .entry(i.group.clone())
            .or_default()
            .entry(i.resource.clone())
            .or_default();
        // A version added again replaces the one served before.
        versions.retain(|s| s.info.version != i.version);
        versions.push(store.clone());
        self.order.push(store);
    }

    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<RegistryStore>> {
        self.versions(group, resource)
            .iter()
            .find(|s| s.info.version == version)
    }

    /// The stores of `group/resource` in every version served.
    fn versions(&self, group: &str, resource: &str) -> &[Arc<RegistryStore>] {
        self.stores
            .get(group)
            .and_then(|g| g.get(resource))
            .map_or(&[], Vec::as_slice)
    }

    /// Every served resource, in registration order (the order discovery lists them in).
    pub fn all(&self) -> impl Iterator<Item = &Arc<RegistryStore>> {
        self.order.iter()
    }

    pub fn infos(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.order.iter().map(|s| s.info.as_ref())
    }

    /// Serves a resource request, or gives it back when no resource here matches, so that the
    /// next server in the delegation chain may try.
    pub async fn serve(&self, req: ApiRequest) -> Result<Result<Response, Status>, ApiRequest> {
        let i = &req.info;
        let Some(store) = self.get(&i.api_group, &i.api_version, &i.resource).cloned() else {
            return Err(req);
        };
        // Upstream's REST routes have no HEAD (its request info still calls it a get); the CRD
        // handler serves it as a get.
        if req.method == http::Method::HEAD && !store.info.unstructured {
            return Ok(Err(Status::method_not_allowed()));
        }
        // A cluster-scoped resource has no route under a namespace (upstream installs none), so
        // the request goes on to the not-found answer. A namespace's own path names it there.
        let names_namespace = i.api_group.is_empty() && i.resource == "namespaces";
        if !store.info.namespaced && !i.namespace.is_empty() && !names_namespace {
            return Err(req);
        }
        // An empty namespace segment (`/api/v1/namespaces//configmaps`) still takes upstream's
        // namespaced routes: a list or watch then sees every namespace, a create gets the empty
        // namespace (which validation refuses), and whatever names an object, or deletes the
        // collection, needs the namespace first.
        if store.info.namespaced && i.namespace.is_empty() && i.namespace_in_path {
            if !matches!(i.verb.as_str(), "list" | "watch" | "create") || !i.name.is_empty() {
                return Ok(Err(Status::bad_request("Namespace parameter required.")));
            }
            return Ok(self.dispatch(&store, req).await);
        }
        // A namespaced resource outside a namespace has only upstream's all-namespaces list and
        // watch routes: an object or a subresource there is not found, and any other verb on
        // the collection is not allowed (a create, or a delete of every namespace's objects).
        if store.info.namespaced && i.namespace.is_empty() {
            let listing = matches!(i.verb.as_str(), "list" | "watch")
                && i.parts.len() < 2
                && i.subresource.is_empty();
            // The CRD handler passes anything else on to the mux's plain-text 404.
            if store.info.unstructured && !listing {
                return Ok(Ok(response::raw(
                    http::StatusCode::NOT_FOUND,
                    "text/plain; charset=utf-8",
                    "404 page not found\n",
                )));
            }
            if i.parts.len() >= 2 || !i.subresource.is_empty() {
                return Err(req);
            }
            if !listing {
                return Ok(Err(Status::method_not_allowed()));
            }
        }
        Ok(self.dispatch(&store, req).await)
    }

    /// The route table: verb × subresource → handler. A verb the resource does not list in its
    /// data row answers 405, as upstream does for routes it never installed.
    async fn dispatch(
        &self,
        store: &Arc<RegistryStore>,
        mut req: ApiRequest,
    ) -> Result<Response, Status> {
        if store.info.unstructured {
            negotiation::without_protobuf(&mut req)?;
        }
        let info = &req.info;
        let verb = info.verb.as_str();
        let sub = info.subresource.as_str();
        // Upstream's deprecation filter: every request to a deprecated resource is told so.
        if sub.is_empty()
            && let Some(w) = &store.info.deprecation_warning
        {
            crate::warning::add(w.clone());
        }
        if !sub.is_empty() {
            let Some(sr) = store.info.subresource(sub) else {
                return Err(Status::path_not_found());
            };
            if !sr.verbs.iter().any(|v| v == verb) {
                return Err(Status::method_not_allowed());
            }
            return match (sub, verb) {
                ("scale", "get") => scale::get(self, store, req).await,
                ("scale", "update" | "patch") => scale::update(self, store, req).await,
                (_, "get") => get::handle(self, store, req).await,
                (_, "update") => update::handle(self, store, req).await,
                (_, "patch") => patch::handle(self, store, req).await,
                (_, "create") => create::handle_subresource(self, store, req).await,
                _ => Err(Status::method_not_allowed()),
            };
        }
        // Whether the path names an object; a watch's name may come from its field selector.
        let path_has_name = info.parts.len() >= 2;
        let names_one = matches!(verb, "get" | "update" | "patch" | "delete");
        if !store.info.has_verb(verb) || (verb != "watch" && names_one != path_has_name) {
            return Err(Status::method_not_allowed());
        }
        match verb {
            "get" => get::handle(self, store, req).await,
            "list" => list::handle(self, store, req).await,
            "watch" => watch::handle(self, store, req).await,
            "create" => create::handle(self, store, req).await,
            "update" => update::handle(self, store, req).await,
            "patch" => patch::handle(self, store, req).await,
            "delete" => delete::handle(self, store, req).await,
            "deletecollection" => delete::handle_collection(self, store, req).await,
            _ => Err(Status::method_not_allowed()),
        }
    }
}
