//! The resource quota controller (upstream: pkg/controller/resourcequota), in-process: a new
//! quota, or one whose `spec.hard` changed, gets `status.hard` from `spec.hard` and
//! `status.used` counted from what its namespace holds; a deletion of something a quota tracks
//! (and a pod that ended) has the namespace's quotas counted again, so usage goes down; every
//! quota is counted again every five minutes (`--resource-quota-sync-period`). Writes go
//! through the same per-namespace lock and resourceVersion condition as the ResourceQuota
//! admission plugin's.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::RegistryStore;
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};
use tokio::sync::mpsc;

use crate::controllers::ExtraStores;
use crate::quota::evaluators::Evaluator;
use crate::quota::resource_claims::verified_pod_usage;
use crate::quota::{Quotas, ResourceList, add, equals, from_json, mask, scope_selectors, to_json};

/// A full recount of every quota this often (upstream's default sync period).
const RESYNC: Duration = Duration::from_secs(300);
/// Resources a quota names that are not served yet are looked for again this often (upstream's
/// discovery resync).
const DISCOVERY: Duration = Duration::from_secs(30);

enum Trigger {
    Quota(String, String),
    Namespace(String),
}

struct Controller {
    api: Arc<ApiResources>,
    extra: ExtraStores,
    quotas: Quotas,
    store: Arc<RegistryStore>,
    tx: mpsc::UnboundedSender<Trigger>,
    /// The resources watched for deletions.
    watched: Mutex<HashSet<(String, String)>>,
}

/// Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, extra: ExtraStores, quotas: Quotas) {
    let Some(store) = api.get("", "v1", "resourcequotas").cloned() else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctl = Arc::new(Controller {
        api,
        extra,
        quotas,
        store,
        tx,
        watched: Mutex::new(HashSet::new()),
    });
    tokio::spawn(ctl.clone().watch_quotas());
    let mut discovery = tokio::time::interval(DISCOVERY);
    let mut resync = tokio::time::interval(RESYNC);
    resync.tick().await;
    loop {
        let mut quotas: BTreeSet<(String, String)> = BTreeSet::new();
        let mut namespaces: BTreeSet<String> = BTreeSet::new();
        tokio::select! {
            t = rx.recv() => match t {
                Some(Trigger::Quota(ns, name)) => { quotas.insert((ns, name)); }
                Some(Trigger::Namespace(ns)) => { namespaces.insert(ns); }
                None => return,
            },
            _ = discovery.tick() => {
                // Resources that were not served when a quota named them.
                ctl.watched.lock().unwrap_or_else(|e| e.into_inner()).clear();
                namespaces.extend(ctl.namespaces_with_quotas().await);
                for ns in &namespaces {
                    ctl.watch_tracked_in(ns).await;
                }
                namespaces.clear();
            }
            _ = resync.tick() => namespaces.extend(ctl.namespaces_with_quotas().await),
        }
        // What else arrived meanwhile is done in the same pass.
        while let Ok(t) = rx.try_recv() {
            match t {
                Trigger::Quota(ns, name) => {
                    quotas.insert((ns, name));
                }
                Trigger::Namespace(ns) => {
                    namespaces.insert(ns);
                }
            }
        }
        for ns in namespaces {
            let names = match ctl.quotas.list(&ctl.store, &ns, true).await {
                Ok(l) => l.iter().map(|q| q.name().to_string()).collect(),
                Err(_) => Vec::new(),
            };
            for name in names {
                quotas.insert((ns.clone(), name));
            }
        }
        for (ns, name) in quotas {
            if let Err(e) = ctl.sync(&ns, &name).await {
                tracing::debug!(namespace = %ns, quota = %name, error = %e.message,
                    "quota sync failed; retrying");
                let tx = ctl.tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let _ = tx.send(Trigger::Quota(ns, name));
                });
            }
        }
    }
}

fn hard_of(v: Option<&Value>) -> ResourceList {
    from_json(v)
}

impl Controller {
    async fn namespaces_with_quotas(&self) -> BTreeSet<String> {
        let opts = ListOptions {
            resource_version: ResourceVersion::Any,
            ..Default::default()
        };
        match self.store.list("", &opts).await {
            Ok(l) => l
                .items
                .iter()
                .filter_map(|i| i.value().ok())
                .map(|v| v.namespace().to_string())
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    /// Starts the watches of what the quotas of `ns` track.
    async fn watch_tracked_in(self: &Arc<Self>, ns: &str) {
        if let Ok(list) = self.quotas.list(&self.store, ns, false).await {
            for q in list {
                self.watch_tracked(&q);
            }
        }
    }

    /// Watches quotas: new ones and changed limits are counted (upstream's `addQuota`).
    async fn watch_quotas(self: Arc<Self>) {
        let mut seen: HashMap<(String, String), ResourceList> = HashMap::new();
        loop {
            let mut events = match self.store.watch("", &watch_from_now()).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e.message, "quota controller cannot watch; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            while let Some(ev) = events.recv().await {
                match ev {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        let Ok(q) = o.value() else { continue };
                        let key = (q.namespace().to_string(), q.name().to_string());
                        let spec = hard_of(q.pointer("/spec/hard"));
                        let status = q.pointer("/status/hard").map(|h| from_json(Some(h)));
                        let used = from_json(q.pointer("/status/used"));
                        let changed = seen.get(&key).is_none_or(|old| !equals(old, &spec));
                        let pending = status.as_ref().is_none_or(|s| !equals(s, &spec))
                            || q.pointer("/status/used").is_none()
                            || spec
                                .keys()
                                .any(|k| !used.contains_key(k) && tracked(&self.quotas, k));
                        seen.insert(key.clone(), spec);
                        self.watch_tracked(&q);
                        if changed || pending {
                            let _ = self.tx.send(Trigger::Quota(key.0, key.1));
                        }
                    }
                    WatchEvent::Deleted(o) => {
                        if let Ok(q) = o.value() {
                            seen.remove(&(q.namespace().to_string(), q.name().to_string()));
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The store serving `group`/`resource`, built-in or custom.
    fn resolve(&self, group: &str, resource: &str) -> Option<Arc<RegistryStore>> {
        self.api
            .all()
            .cloned()
            .chain(self.extra.stores())
            .find(|s| {
                s.info.group == group && s.info.resource == resource && s.info.has_verb("list")
            })
    }

    /// Starts a watch of every resource `quota` tracks that is not watched yet.
    fn watch_tracked(self: &Arc<Self>, quota: &Value) {
        let hard = hard_of(quota.pointer("/spec/hard"));
        let tracked: BTreeSet<(String, String)> = hard
            .keys()
            .flat_map(|name| self.quotas.tracked_by(name))
            .collect();
        for (group, resource) in tracked {
            if self.quotas.evaluator(&group, &resource).is_none() {
                continue;
            }
            {
                let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
                if !watched.insert((group.clone(), resource.clone())) {
                    continue;
                }
            }
            let Some(store) = self.resolve(&group, &resource) else {
                continue;
            };
            let tx = self.tx.clone();
            let pods = group.is_empty() && resource == "pods";
            tokio::spawn(async move {
                loop {
                    let Ok(mut events) = store.watch("", &watch_from_now()).await else {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    };
                    while let Some(ev) = events.recv().await {
                        let ns = match &ev {
                            WatchEvent::Deleted(o) => o.value().ok(),
                            // A pod that ended gives its compute resources back.
                            WatchEvent::Modified(o) if pods => o.value().ok().filter(|p| {
                                matches!(
                                    p.pointer("/status/phase").and_then(Value::as_str),
                                    Some("Succeeded" | "Failed")
                                )
                            }),
                            _ => None,
                        };
                        if let Some(v) = ns
                            && tx
                                .send(Trigger::Namespace(v.namespace().to_string()))
                                .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    }

    /// `syncResourceQuota`: counts what the quota tracks and writes its status when it changed.
    async fn sync(&self, ns: &str, name: &str) -> Result<(), Status> {
        let _turn = self.quotas.lock(ns).await;
        let quota = match self.store.get(ns, name, ResourceVersion::Unset).await {
            Ok(o) => o.value().map_err(Status::internal)?,
            Err(s) if s.code == 404 => return Ok(()),
            Err(s) => return Err(s),
        };
        let hard = hard_of(quota.pointer("/spec/hard"));
        let old_used = quota.pointer("/status/used").map(|u| from_json(Some(u)));
        let mut used = old_used.clone().unwrap_or_default();
        used.extend(self.usage(ns, &quota, &hard).await);
        let used = mask(&used, hard.keys());
        let status_hard = quota.pointer("/status/hard").map(|h| from_json(Some(h)));
        let dirty = status_hard.is_none_or(|s| !equals(&s, &hard))
            || old_used.is_none_or(|u| !equals(&u, &used));
        if !dirty {
            return Ok(());
        }
        let mut next = quota.clone();
        next["status"] = json!({
            "hard": quota.pointer("/spec/hard").cloned().unwrap_or_else(|| json!({})),
            "used": to_json(&used),
        });
        self.quotas.write_status(&self.store, next).await
    }

    /// `CalculateUsage`: for each evaluator that tracks some of `hard`, the sum over the
    /// namespace's objects in the quota's scopes; the evaluators' sums added up (a DRA extended
    /// resource is both Pods' and ResourceClaims'), masked to what the quota limits.
    async fn usage(&self, ns: &str, quota: &Value, hard: &ResourceList) -> ResourceList {
        let mut by_resource: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for name in hard.keys() {
            for gr in self.quotas.tracked_by(name) {
                by_resource.entry(gr).or_default().push(name.clone());
            }
        }
        let selectors = scope_selectors(quota);
        let now = chrono::Utc::now();
        let mut usage = ResourceList::new();
        for ((group, resource), names) in by_resource {
            let Some(evaluator) = self.quotas.evaluator(&group, &resource) else {
                continue;
            };
            let matched = evaluator.matching_resources(&names);
            if matched.is_empty() {
                continue;
            }
            let Some(store) = self.resolve(&group, &resource) else {
                continue;
            };
            let Ok(list) = store.list(ns, &ListOptions::default()).await else {
                continue;
            };
            let claims = matches!(evaluator, Evaluator::ResourceClaims(_));
            let mut sum: ResourceList = matched
                .iter()
                .map(|n| (n.clone(), crate::quota::zero()))
                .collect();
            for item in list.items {
                let Ok(obj) = item.value() else { continue };
                if in_scopes(&evaluator, &selectors, &obj) {
                    let owner = match claims {
                        true => verified_pod_usage(&obj, &self.api, now).await,
                        false => None,
                    };
                    sum = add(&sum, &evaluator.usage(&obj, now, owner.as_ref()));
                }
            }
            usage = add(&usage, &mask(&sum, &matched));
        }
        usage
    }
}

/// Whether the quota resource `name` is one some evaluator counts.
fn tracked(quotas: &Quotas, name: &str) -> bool {
    !quotas.tracked_by(name).is_empty()
}

fn in_scopes(
    evaluator: &Evaluator,
    selectors: &[crate::quota::ScopeSelector],
    obj: &Value,
) -> bool {
    selectors
        .iter()
        .all(|s| evaluator.matches_scope(s, obj).unwrap_or(false))
}

fn watch_from_now() -> WatchOptions {
    WatchOptions {
        resource_version: ResourceVersion::Unset,
        send_initial_events: None,
        allow_bookmarks: false,
        predicate: None,
    }
}
