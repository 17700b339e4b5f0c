//! Deleting objects when a time they carry has passed, the shape two of upstream's controllers
//! share: `ttl_after_finished` (finished Jobs past `ttlSecondsAfterFinished`) and `bootstrap`'s
//! token cleaner (bootstrap token Secrets past their `expiration`). Objects are kept by a list
//! and a watch; each is looked at again when its time comes, read fresh from the store (its
//! time may have moved), and deleted on its uid.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{DeleteOptions, RegistryStore, Requester};
use chrono::{DateTime, Utc};
use serde_json::Value;
use storage::ResourceVersion;

/// When a failed delete is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// What one controller deletes.
pub struct Expiring {
    pub store: Arc<RegistryStore>,
    /// When the object expires, if it is one to delete (not for objects being deleted).
    pub expires: fn(&Value) -> Option<DateTime<Utc>>,
    /// The delete's propagation policy (`None`: the kind's default).
    pub propagation: Option<&'static str>,
    pub user: UserInfo,
}

type Key = (String, String);

/// Runs until the process ends.
pub async fn run(e: Expiring) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Delta>();
    tokio::spawn(reflector::run(e.store.clone(), move |d| {
        let _ = tx.send(d);
    }));
    // When each object is due, and the objects by time.
    let mut due: HashMap<Key, DateTime<Utc>> = HashMap::new();
    let mut by_time: BTreeMap<(DateTime<Utc>, Key), ()> = BTreeMap::new();
    let key_of = |v: &Value| (v.namespace().to_string(), v.name().to_string());
    loop {
        let next = by_time.keys().next().map(|(t, _)| *t);
        let wait = next.map(|t| (t - Utc::now()).to_std().unwrap_or(Duration::ZERO));
        tokio::select! {
            d = rx.recv() => match d {
                Some(Delta::Replace(items)) => {
                    due.clear();
                    by_time.clear();
                    for v in items {
                        schedule(&mut due, &mut by_time, key_of(&v), (e.expires)(&v));
                    }
                }
                Some(Delta::Upsert(v)) => schedule(&mut due, &mut by_time, key_of(&v), (e.expires)(&v)),
                Some(Delta::Deleted(v)) => schedule(&mut due, &mut by_time, key_of(&v), None),
                None => return,
            },
            _ = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600))), if wait.is_some() => {
                let now = Utc::now();
                let ready: Vec<Key> = by_time
                    .keys()
                    .take_while(|(t, _)| *t <= now)
                    .map(|(_, k)| k.clone())
                    .collect();
                for key in ready {
                    let next = match delete_if_expired(&e, &key).await {
                        Ok(later) => later,
                        Err(why) => {
                            tracing::debug!(name = %key.1, error = %why, "expired object not deleted; retrying");
                            Some(Utc::now() + chrono::Duration::from_std(RETRY).unwrap_or_default())
                        }
                    };
                    schedule(&mut due, &mut by_time, key, next);
                }
            }
        }
    }
}

fn schedule(
    due: &mut HashMap<Key, DateTime<Utc>>,
    by_time: &mut BTreeMap<(DateTime<Utc>, Key), ()>,
    key: Key,
    at: Option<DateTime<Utc>>,
) {
    if let Some(old) = due.remove(&key) {
        by_time.remove(&(old, key.clone()));
    }
    if let Some(at) = at {
        due.insert(key.clone(), at);
        by_time.insert((at, key), ());
    }
}

/// Reads the object again and deletes it if it has expired. `Ok(Some(t))`: not yet, look
/// again at `t`.
async fn delete_if_expired(
    e: &Expiring,
    (ns, name): &Key,
) -> Result<Option<DateTime<Utc>>, String> {
    let fresh = match e.store.get(ns, name, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => return Ok(None),
        Err(s) => return Err(s.message),
    };
    match (e.expires)(&fresh) {
        None => return Ok(None),
        Some(t) if t > Utc::now() => return Ok(Some(t)),
        Some(_) => {}
    }
    let opts = DeleteOptions {
        precondition_uid: Some(fresh.uid().to_string()),
        propagation_policy: e.propagation.map(str::to_string),
        ..Default::default()
    };
    let req = Requester { user: &e.user };
    match e.store.delete(&req, ns, name, &opts).await {
        Ok(_) => Ok(None),
        Err(s) if s.code == 404 || s.code == 409 => Ok(None),
        Err(s) => Err(s.message),
    }
}

/// An RFC 3339 time.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
