//! The objects of one resource kept current by a list and a watch of its store (upstream: a
//! shared informer's cache), for the admission plugins that act on configuration objects:
//! webhook configurations, admission policies and their bindings. Readers take the whole set as
//! one `Arc`; the generation tells them when to rebuild what they derive from it.

use apimachinery::object::ObjectExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::registry::RegistryStore;
use crate::registry::reflector::{self, Delta, Listed, Synced};

/// Objects by name (cluster-scoped resources only: every admission configuration kind is).
pub type Objects = Arc<BTreeMap<String, Value>>;

pub struct Informer {
    objects: RwLock<Objects>,
    generation: AtomicU64,
    /// Its one source, the store, and that source's mark.
    synced: Synced,
    listed: Listed,
}

impl Default for Informer {
    fn default() -> Self {
        let (synced, listed) = Synced::single();
        Informer {
            objects: RwLock::default(),
            generation: AtomicU64::default(),
            synced,
            listed,
        }
    }
}

impl Informer {
    /// The current objects and the generation they belong to.
    pub fn snapshot(&self) -> (u64, Objects) {
        let objects = self.objects.read().unwrap_or_else(|e| e.into_inner());
        (self.generation.load(Ordering::Acquire), objects.clone())
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn has_synced(&self) -> bool {
        self.synced.has_synced()
    }

    /// Says there is nothing to read (the resource is not served): no objects.
    pub fn mark_synced(&self) {
        self.listed.mark();
    }

    fn publish(&self, objects: &BTreeMap<String, Value>) {
        let mut slot = self.objects.write().unwrap_or_else(|e| e.into_inner());
        *slot = Arc::new(objects.clone());
        // Under the lock, so that a reader never pairs a new generation with old objects.
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Lists and watches `store` until the process ends, publishing after every change.
    pub async fn run(self: Arc<Self>, store: Arc<RegistryStore>) {
        let mut objects = BTreeMap::new();
        reflector::run(store, move |delta| {
            match delta {
                Delta::Replace(items) => {
                    objects = items
                        .into_iter()
                        .map(|v| (v.name().to_string(), v))
                        .collect();
                }
                Delta::Upsert(v) => {
                    objects.insert(v.name().to_string(), v);
                }
                Delta::Deleted(v) => {
                    objects.remove(v.name());
                }
            }
            self.publish(&objects);
            self.listed.mark();
        })
        .await
    }
}

/// Something derived from the objects of informers (compiled webhooks, policies with their
/// bindings), rebuilt only when one of them changed.
pub struct Derived<T> {
    cached: RwLock<Option<(Vec<u64>, Arc<T>)>>,
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived {
            cached: RwLock::new(None),
        }
    }
}

impl<T> Derived<T> {
    /// The value for the informers' current generations, built by `build` from their objects
    /// when they moved on since the last call.
    pub fn get(&self, informers: &[&Informer], build: impl FnOnce(&[Objects]) -> T) -> Arc<T> {
        let generations: Vec<u64> = informers.iter().map(|i| i.generation()).collect();
        if let Some((g, v)) = &*self.cached.read().unwrap_or_else(|e| e.into_inner())
            && *g == generations
        {
            return v.clone();
        }
        let snapshots: Vec<(u64, Objects)> = informers.iter().map(|i| i.snapshot()).collect();
        let generations: Vec<u64> = snapshots.iter().map(|(g, _)| *g).collect();
        let objects: Vec<Objects> = snapshots.into_iter().map(|(_, o)| o).collect();
        let value = Arc::new(build(&objects));
        *self.cached.write().unwrap_or_else(|e| e.into_inner()) =
            Some((generations, value.clone()));
        value
    }
}
