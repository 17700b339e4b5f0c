//! What the collector does to one item (upstream: garbagecollector.go's `attemptToDeleteItem`,
//! `processDeletingDependentsItem`, `classifyReferences`, `isDangling` and
//! `attemptToOrphanWorker`). Every decision reads the live object and its owners from the
//! store, not the graph, so a graph that lags behind never deletes what still has an owner.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::status::Reason;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, RegistryStore, Requester, UpdateOptions, WriteOptions};
use serde::Deserialize;
use serde_json::Value;
use storage::ResourceVersion;

use super::graph::{FOREGROUND, Identity, ItemView, ORPHAN, OwnerRef, Uid};
use crate::controllers::ExtraStores;

/// Resources the collector neither watches nor deletes (upstream's `DefaultIgnoredResources`).
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// How many owners known to be absent are remembered (upstream's `absentOwnerCache` size).
const ABSENT_OWNERS: usize = 500;

/// The metadata the collector reads of an object.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub resource_version: String,
    #[serde(default)]
    pub owner_references: Option<Vec<OwnerRef>>,
    #[serde(default)]
    pub finalizers: Option<Vec<String>>,
    #[serde(default)]
    pub deletion_timestamp: Option<String>,
}

impl Meta {
    /// Reads `metadata` of a stored object's JSON, skipping everything else. Where the metadata
    /// starts is found by a scan of the members before it (type meta, in stored objects), and
    /// the parse stops at its end: the monitors read every write to every resource, and the
    /// rest of an object (a Pod's spec and status, a ConfigMap's data) is not theirs to read.
    pub fn read(bytes: &[u8]) -> Option<Meta> {
        if let Some(at) = storage::store::metadata_offset(bytes) {
            // Not `from_slice`, which would also check that nothing follows.
            let mut metadata = serde_json::Deserializer::from_slice(&bytes[at..]);
            return Meta::deserialize(&mut metadata).ok();
        }
        #[derive(Deserialize)]
        struct Envelope {
            #[serde(default)]
            metadata: Meta,
        }
        serde_json::from_slice::<Envelope>(bytes)
            .ok()
            .map(|e| e.metadata)
    }

    pub fn owners(&self) -> &[OwnerRef] {
        self.owner_references.as_deref().unwrap_or_default()
    }

    pub fn finalizers(&self) -> &[String] {
        self.finalizers.as_deref().unwrap_or_default()
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers().iter().any(|x| x == f)
    }
}

/// What became of an item.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing more to do now; the items listed are looked at next.
    Done(Vec<Uid>),
    /// Try again after the item's backoff.
    Requeue(String),
    /// The item does not exist: the graph learns so.
    VirtualDelete(Identity),
}

/// Owners found not to exist, by their coordinates and the namespace they were looked in.
#[derive(Default)]
pub struct AbsentOwners {
    set: HashSet<Identity>,
    order: VecDeque<Identity>,
}

impl AbsentOwners {
    pub fn add(&mut self, id: Identity) {
        if self.set.insert(id.clone()) {
            self.order.push_back(id);
            if self.order.len() > ABSENT_OWNERS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn has(&self, id: &Identity) -> bool {
        self.set.contains(id)
    }
}

/// The collector's access to the API: the stores of every served resource, as the identity
/// upstream's collector acts as.
pub struct Client {
    pub api: Arc<ApiResources>,
    pub extra: ExtraStores,
    pub absent: Mutex<AbsentOwners>,
    user: UserInfo,
}

impl Client {
    pub fn new(api: Arc<ApiResources>, extra: ExtraStores) -> Client {
        Client {
            api,
            extra,
            absent: Mutex::new(AbsentOwners::default()),
            user: crate::controllers::kube_system_account("generic-garbage-collector"),
        }
    }

    /// The store of every resource the collector watches: one per stored resource (the
    /// storage version's), which can be listed, watched and deleted.
    pub fn watched_stores(&self) -> Vec<Arc<RegistryStore>> {
        self.api
            .all()
            .filter(|s| s.info.storage_version.is_none())
            .cloned()
            .chain(self.extra.stores())
            .filter(|s| {
                let i = &s.info;
                ["list", "watch", "delete"].iter().all(|v| i.has_verb(v))
                    && !IGNORED.contains(&(i.group.as_str(), i.resource.as_str()))
            })
            .collect()
    }

    /// The store of `kind` in the group of `api_version` (any served version: the collector
    /// reads and writes metadata only).
    fn store_of(&self, api_version: &str, kind: &str) -> Result<Arc<RegistryStore>, String> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let matches = |s: &Arc<RegistryStore>| s.info.group == group && s.info.kind == kind;
        self.api
            .all()
            .filter(|s| matches(s))
            .min_by_key(|s| s.info.storage_version.is_some())
            .cloned()
            .or_else(|| self.extra.stores().into_iter().find(matches))
            .ok_or_else(|| format!("unable to find a resource for {api_version}, Kind={kind}"))
    }

    /// The object `id` names, if it exists (with any uid).
    async fn get(&self, id: &Identity) -> Result<Option<Meta>, String> {
        let store = self.store_of(&id.api_version, &id.kind)?;
        let ns = if store.info.namespaced {
            id.namespace.as_str()
        } else {
            ""
        };
        match store.get(ns, &id.name, ResourceVersion::Unset).await {
            Ok(o) => Ok(Meta::read(&o.bytes)),
            Err(s) if s.code == 404 => Ok(None),
            Err(s) => Err(s.message),
        }
    }

    /// The collector's writes are recorded in managed fields as upstream's patches through the
    /// API are: as `kube-controller-manager`, operation `Update`, custom resources with their
    /// CRD's schemas.
    fn write_options(&self, store: &RegistryStore) -> WriteOptions {
        let manager = crate::controllers::CONTROLLER_MANAGER;
        let i = &store.info;
        if self.api.get(&i.group, &i.version, &i.resource).is_some() {
            self.api.internal_write(store, manager)
        } else {
            self.extra
                .internal_write(store, manager)
                .unwrap_or_default()
        }
    }

    /// Changes the metadata of the object `id` names, if it is still that object. Gone is done.
    async fn update_meta(
        &self,
        id: &Identity,
        mut change: impl FnMut(&mut Value) + Send,
    ) -> Result<(), String> {
        let store = self.store_of(&id.api_version, &id.kind)?;
        let ns = if store.info.namespaced {
            id.namespace.as_str()
        } else {
            ""
        };
        let uid = id.uid.clone();
        let mut updater = move |current: Option<&Value>| {
            let gone = || Status::new(404, Reason::NotFound, "the object is gone");
            let mut v = current.cloned().ok_or_else(gone)?;
            if v.uid() != &*uid {
                return Err(gone());
            }
            change(&mut v);
            v.remove_meta("resourceVersion");
            Ok(v)
        };
        let opts = UpdateOptions {
            write: self.write_options(&store),
            ..Default::default()
        };
        let req = Requester { user: &self.user };
        match store.update(&req, ns, &id.name, &mut updater, &opts).await {
            Ok(_) => Ok(()),
            Err(s) if s.code == 404 => Ok(()),
            Err(s) => Err(s.message),
        }
    }

    /// Removes the owner references to `owners` (by uid).
    async fn remove_owner_refs(
        &self,
        id: &Identity,
        owners: &HashSet<String>,
    ) -> Result<(), String> {
        self.update_meta(id, |v| {
            let Some(refs) = v
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return;
            };
            refs.retain(|r| {
                !r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|u| owners.contains(u))
            });
            if refs.is_empty() {
                v.remove_meta("ownerReferences");
            }
        })
        .await
    }

    /// Sets `blockOwnerDeletion: false` on every reference that blocks.
    async fn unblock_owner_refs(&self, id: &Identity) -> Result<(), String> {
        self.update_meta(id, |v| {
            let Some(refs) = v
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return;
            };
            for r in refs {
                if r.get("blockOwnerDeletion") == Some(&Value::Bool(true)) {
                    r["blockOwnerDeletion"] = Value::Bool(false);
                }
            }
        })
        .await
    }

    async fn remove_finalizer(&self, id: &Identity, finalizer: &str) -> Result<(), String> {
        self.update_meta(id, |v| {
            let Some(list) = v
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            else {
                return;
            };
            list.retain(|f| f != finalizer);
            if list.is_empty() {
                v.remove_meta("finalizers");
            }
        })
        .await
    }

    /// Upstream's `deleteObject`: deletes `id` on its uid and, when given, the resourceVersion
    /// its owner references were read at. A conflict with unchanged references deletes
    /// unconditionally; changed references are looked at again.
    async fn delete(
        &self,
        id: &Identity,
        seen: Option<(&str, &[OwnerRef])>,
        policy: &str,
    ) -> Result<(), String> {
        let store = self.store_of(&id.api_version, &id.kind)?;
        let ns = if store.info.namespaced {
            id.namespace.as_str()
        } else {
            ""
        };
        let opts = DeleteOptions {
            precondition_uid: Some(id.uid.to_string()),
            precondition_resource_version: seen.map(|(rv, _)| rv.to_string()),
            propagation_policy: Some(policy.to_string()),
            ..Default::default()
        };
        let req = Requester { user: &self.user };
        match store.delete(&req, ns, &id.name, &opts).await {
            Ok(_) => Ok(()),
            Err(s) if s.code == 404 => Ok(()),
            Err(s) if s.code == 409 && seen.is_some() => {
                let Some(live) = self.get(id).await? else {
                    return Ok(());
                };
                if live.uid != *id.uid {
                    return Ok(());
                }
                if live.owners() == seen.map_or(&[][..], |(_, o)| o) {
                    Box::pin(self.delete(id, None, policy)).await
                } else {
                    Err("ownerReferences changed".into())
                }
            }
            Err(s) => Err(s.message),
        }
    }

    /// Upstream's `isDangling`: `Ok(None)` when the owner `r` names does not exist (or is
    /// another object now), else the owner's metadata.
    async fn owner(&self, r: &OwnerRef, item: &Identity) -> Result<Option<Meta>, Dangling> {
        let mut key = Identity {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            uid: Arc::from(r.uid.as_str()),
            namespace: String::new(),
        };
        {
            let absent = self.absent.lock().expect("not poisoned");
            if absent.has(&key) {
                return Ok(None);
            }
            key.namespace = item.namespace.clone();
            if absent.has(&key) {
                return Ok(None);
            }
        }
        let store = self
            .store_of(&r.api_version, &r.kind)
            .map_err(Dangling::Error)?;
        if !store.info.namespaced {
            key.namespace.clear();
        }
        if item.namespace.is_empty() && store.info.namespaced {
            return Err(Dangling::NamespacedOwnerOfClusterScopedObject);
        }
        let ns = if store.info.namespaced {
            item.namespace.as_str()
        } else {
            ""
        };
        let owner = match store.get(ns, &r.name, ResourceVersion::Unset).await {
            Ok(o) => Meta::read(&o.bytes),
            Err(s) if s.code == 404 => None,
            Err(s) => return Err(Dangling::Error(s.message)),
        };
        match owner {
            Some(o) if o.uid == r.uid => Ok(Some(o)),
            _ => {
                self.absent.lock().expect("not poisoned").add(key);
                Ok(None)
            }
        }
    }
}

/// Why an owner reference could not be classified.
pub enum Dangling {
    /// A cluster-scoped object names a namespaced owner: invalid, never retried.
    NamespacedOwnerOfClusterScopedObject,
    Error(String),
}

/// Upstream's `attemptToDeleteItem`.
pub async fn attempt_to_delete(c: &Client, item: &ItemView) -> Outcome {
    if item.being_deleted && !item.deleting_dependents {
        return Outcome::Done(Vec::new());
    }
    let latest = match c.get(&item.identity).await {
        Ok(Some(m)) if m.uid == *item.identity.uid => m,
        Ok(_) => return Outcome::VirtualDelete(item.identity.clone()),
        Err(e) => return Outcome::Requeue(e),
    };
    if item.deleting_dependents {
        return deleting_dependents(c, item).await;
    }
    let refs = latest.owners();
    if refs.is_empty() {
        return Outcome::Done(Vec::new());
    }
    let mut solid = 0usize;
    let mut dangling = Vec::new();
    let mut waiting = Vec::new();
    for r in refs {
        match c.owner(r, &item.identity).await {
            Ok(None) => dangling.push(r.uid.clone()),
            Ok(Some(owner)) => {
                if owner.deletion_timestamp.is_some() && owner.has_finalizer(FOREGROUND) {
                    waiting.push(r.uid.clone());
                } else {
                    solid += 1;
                }
            }
            Err(Dangling::NamespacedOwnerOfClusterScopedObject) => {
                tracing::info!(item = ?item.identity, owner = %r.name, "a cluster-scoped object names a namespaced owner; not collected");
                return Outcome::Done(Vec::new());
            }
            Err(Dangling::Error(e)) => return Outcome::Requeue(e),
        }
    }
    let done = |r: Result<(), String>| match r {
        Ok(()) => Outcome::Done(Vec::new()),
        Err(e) => Outcome::Requeue(e),
    };
    if solid > 0 {
        if dangling.is_empty() && waiting.is_empty() {
            return Outcome::Done(Vec::new());
        }
        // Owners that are gone or waiting for their dependents are no longer this item's.
        let gone: HashSet<String> = dangling.into_iter().chain(waiting).collect();
        return done(c.remove_owner_refs(&item.identity, &gone).await);
    }
    let policy = if !waiting.is_empty() && item.dependents > 0 {
        // An owner waits for this item, which has dependents of its own: it goes in the
        // foreground too. When one of those is itself waiting, this item's references stop
        // blocking first, so that the two waits cannot deadlock.
        if item.a_dependent_deletes_dependents
            && let Err(e) = c.unblock_owner_refs(&item.identity).await
        {
            return Outcome::Requeue(e);
        }
        "Foreground"
    } else if latest.has_finalizer(ORPHAN) {
        "Orphan"
    } else if latest.has_finalizer(FOREGROUND) {
        "Foreground"
    } else {
        "Background"
    };
    done(
        c.delete(
            &item.identity,
            Some((&latest.resource_version, latest.owners())),
            policy,
        )
        .await,
    )
}

/// Upstream's `processDeletingDependentsItem`: an owner deleted in the foreground loses its
/// `foregroundDeletion` finalizer once no dependent blocks it; until then its blocking
/// dependents are looked at.
async fn deleting_dependents(c: &Client, item: &ItemView) -> Outcome {
    if item.blocking.is_empty() {
        return match c.remove_finalizer(&item.identity, FOREGROUND).await {
            Ok(()) => Outcome::Done(Vec::new()),
            Err(e) => Outcome::Requeue(e),
        };
    }
    Outcome::Done(
        item.blocking
            .iter()
            .filter(|(_, deleting)| !deleting)
            .map(|(uid, _)| uid.clone())
            .collect(),
    )
}

/// Upstream's `attemptToOrphanWorker`: the owner's dependents stop naming it, then its
/// `orphan` finalizer is removed.
pub async fn attempt_to_orphan(c: &Client, owner: &ItemView) -> Outcome {
    let this: HashSet<String> = [owner.identity.uid.to_string()].into();
    let mut failed = Vec::new();
    for dep in &owner.all_dependents {
        if let Err(e) = c.remove_owner_refs(dep, &this).await {
            failed.push(format!("{}: {e}", dep.name));
        }
    }
    if !failed.is_empty() {
        return Outcome::Requeue(failed.join("; "));
    }
    match c.remove_finalizer(&owner.identity, ORPHAN).await {
        Ok(()) => Outcome::Done(Vec::new()),
        Err(e) => Outcome::Requeue(e),
    }
}
