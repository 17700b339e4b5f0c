//! Upstream's CRD controllers in one reconcile loop over every CustomResourceDefinition:
//!
//! - naming (`NamingConditionController`): the names a CRD asks for are accepted unless another
//!   CRD of its group holds them; `status.acceptedNames` and the `NamesAccepted` condition;
//! - establishing: a CRD whose names are accepted is served, then marked `Established`, so that
//!   a client who sees the condition finds the resource (upstream takes seconds; this takes the
//!   time of one status write);
//! - the served table of `CrdHandler`, rebuilt from the established CRDs;
//! - finalizer (`CRDFinalizer`): a deleted CRD's custom resources are deleted, then its
//!   `customresourcecleanup.apiextensions.k8s.io` finalizer is removed and the CRD goes.
//!
//! Every change of a CRD runs the whole loop; CRDs are few, and the list comes from the cache.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::registry::{DeleteOptions, RegistryStore, Requester, UpdateOptions};
use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use storage::{
    Cacher, CacherOptions, KvStore, ListOptions, Object, ResourceVersion, Store, WatchOptions,
};

use crate::handler::{CrdHandler, Entry, Served};
use crate::registration::{self, CrdFacts, strings};

/// The finalizer that keeps a deleted CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// How often a CRD that still waits for its instances to go is looked at again.
const RETRY: Duration = Duration::from_millis(500);

fn controller_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        uid: String::new(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
        extra: Default::default(),
    }
}

/// Runs until the process ends: reconciles on every CRD change, and again while a deleted CRD
/// waits for its instances. `synced` is called once the CRDs found at start are served
/// (upstream's `crd-informer-synced` readiness: a ready server serves every stored CRD).
pub async fn run(handler: Arc<CrdHandler>, synced: Box<dyn FnOnce() + Send>) {
    let mut synced = Some(synced);
    let mut known = Known::new();
    loop {
        let watch = handler
            .crds
            .watch(
                "",
                &WatchOptions {
                    resource_version: ResourceVersion::Unset,
                    send_initial_events: None,
                    allow_bookmarks: false,
                    predicate: None,
                },
            )
            .await;
        let mut events = match watch {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e.message, "CRD controller cannot watch; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut pending = reconcile(&handler, &mut known).await;
        if let Some(done) = synced.take() {
            done();
        }
        loop {
            let next = if pending {
                tokio::time::timeout(RETRY, events.recv()).await.ok()
            } else {
                Some(events.recv().await)
            };
            if let Some(None) = next {
                break;
            }
            pending = reconcile(&handler, &mut known).await;
        }
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    crd.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn condition_true(crd: &Value, kind: &str) -> bool {
    condition(crd, kind)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

/// Upstream's `SetCRDCondition`: replaces the condition of that type, keeping its transition
/// time when its status does not change; a new type is appended.
fn set_condition(crd: &mut Value, kind: &str, status: &str, reason: &str, message: &str) {
    let old_time = condition(crd, kind)
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned());
    let cond = json!({
        "type": kind, "status": status,
        "lastTransitionTime": old_time.unwrap_or_else(|| json!(now())),
        "reason": reason, "message": message,
    });
    if !crd.get("status").is_some_and(Value::is_object) {
        crd["status"] = json!({});
    }
    let status_obj = &mut crd["status"];
    if !status_obj.get("conditions").is_some_and(Value::is_array) {
        status_obj["conditions"] = json!([]);
    }
    if let Some(list) = status_obj["conditions"].as_array_mut() {
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        {
            Some(c) => *c = cond,
            None => list.push(cond),
        }
    }
}

/// `equalToAcceptedOrFresh`: a name may be taken if it is already this CRD's or nobody's.
fn check_name(requested: &str, accepted: &str, used: &HashSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        Ok(())
    } else {
        Err(format!("{requested:?} is already in use"))
    }
}

/// The naming controller's answer for one CRD: its new status (accepted names and the
/// `NamesAccepted` and `Established` conditions), given the names other CRDs of its group hold.
fn names_and_conditions(crd: &Value, others: &[&Value]) -> Value {
    let mut resources = HashSet::new();
    let mut kinds = HashSet::new();
    for o in others {
        let accepted = o.pointer("/status/acceptedNames");
        resources.insert(text(o, "/status/acceptedNames/plural").to_string());
        resources.insert(text(o, "/status/acceptedNames/singular").to_string());
        resources.extend(strings(accepted.and_then(|a| a.get("shortNames"))));
        kinds.insert(text(o, "/status/acceptedNames/kind").to_string());
        kinds.insert(text(o, "/status/acceptedNames/listKind").to_string());
    }
    resources.remove("");
    kinds.remove("");
    let mut out = crd.clone();
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let accepted = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut names = accepted.clone();
    if !names.is_object() {
        names = json!({});
    }
    let mut failure: Option<(&str, String)> = None;
    let mut fail = |reason: &'static str, message: String| {
        failure = Some((reason, message));
    };
    for (field, reason, used) in [
        ("plural", "PluralConflict", &resources),
        ("singular", "SingularConflict", &resources),
    ] {
        let want = text(&requested, &format!("/{field}"));
        match check_name(want, text(&accepted, &format!("/{field}")), used) {
            Ok(()) if !want.is_empty() => names[field] = json!(want),
            Ok(()) => {}
            Err(m) => fail(reason, m),
        }
    }
    let want_short = strings(requested.get("shortNames"));
    let have_short = strings(accepted.get("shortNames"));
    if want_short != have_short {
        let errors: Vec<String> = want_short
            .iter()
            .filter(|s| !have_short.contains(s))
            .filter_map(|s| check_name(s, "", &resources).err())
            .collect();
        if errors.is_empty() {
            if want_short.is_empty() {
                if let Some(m) = names.as_object_mut() {
                    m.remove("shortNames");
                }
            } else {
                names["shortNames"] = json!(want_short);
            }
        } else {
            // Go's aggregate error: one message, or several in brackets.
            let message = if errors.len() == 1 {
                errors[0].clone()
            } else {
                format!("[{}]", errors.join(", "))
            };
            fail("ShortNamesConflict", message);
        }
    }
    for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        let want = text(&requested, &format!("/{field}"));
        match check_name(want, text(&accepted, &format!("/{field}")), &kinds) {
            Ok(()) if !want.is_empty() => names[field] = json!(want),
            Ok(()) => {}
            Err(m) => fail(reason, m),
        }
    }
    match requested.get("categories") {
        Some(c) if c.as_array().is_some_and(|a| !a.is_empty()) => names["categories"] = c.clone(),
        _ => {
            if let Some(m) = names.as_object_mut() {
                m.remove("categories");
            }
        }
    }
    if !out.get("status").is_some_and(Value::is_object) {
        out["status"] = json!({});
    }
    out["status"]["acceptedNames"] = names;
    let accepted_ok = failure.is_none();
    match failure {
        None => set_condition(
            &mut out,
            "NamesAccepted",
            "True",
            "NoConflicts",
            "no conflicts found",
        ),
        Some((reason, message)) => {
            set_condition(&mut out, "NamesAccepted", "False", reason, &message)
        }
    }
    let terminating = crd.deletion_timestamp().is_some();
    if accepted_ok && !terminating {
        if !condition_true(&out, "Established") {
            set_condition(
                &mut out,
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            );
        }
    } else if condition(&out, "Established").is_none() {
        set_condition(
            &mut out,
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
        );
    }
    out
}

/// The CRDs as last read: for each, its resourceVersion, its light view (parsed once per
/// resourceVersion, so a pass re-reads only the CRDs that changed, however many there are) and
/// its stored object, whose bytes (shared with the watch cache) are parsed again only when the
/// CRD's served entry is rebuilt or its finalizer runs. Keeping no parsed copy of the schemas
/// here is what keeps the memory of many CRDs down.
type Known = HashMap<String, (i64, Arc<Value>, Object)>;

/// The whole CRD, parsed from its stored bytes.
fn full_crd(o: &Object) -> Option<Value> {
    o.value().ok()
}

/// What naming needs of a CRD, without its schemas: metadata, group, names and status.
fn light(crd: &Value) -> Value {
    let meta = |f: &str| {
        crd.pointer(&format!("/metadata/{f}"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    json!({
        "metadata": {
            "name": meta("name"), "uid": meta("uid"), "generation": meta("generation"),
            "creationTimestamp": meta("creationTimestamp"),
            "deletionTimestamp": meta("deletionTimestamp"), "finalizers": meta("finalizers"),
        },
        "spec": {"group": crd.pointer("/spec/group"), "names": crd.pointer("/spec/names")},
        "status": crd.get("status").cloned().unwrap_or_else(|| json!({})),
    })
}

/// One pass over every CRD. True when a deleted CRD still waits for its instances.
async fn reconcile(handler: &Arc<CrdHandler>, known: &mut Known) -> bool {
    let list = match handler.crds.list("", &ListOptions::default()).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e.message, "CRD controller cannot list CRDs");
            return true;
        }
    };
    let mut next = Known::with_capacity(list.items.len());
    let mut crds: Vec<(Arc<Value>, Object)> = Vec::with_capacity(list.items.len());
    for o in list.items {
        let name = o.key.rsplit('/').next().unwrap_or("").to_string();
        let view = match known.get(&name) {
            Some((rv, v, _)) if *rv == o.resource_version => v.clone(),
            _ => match o.value() {
                Ok(v) => Arc::new(light(&v)),
                Err(_) => continue,
            },
        };
        next.insert(name, (o.resource_version, view.clone(), o.clone()));
        crds.push((view, o));
    }
    *known = next;
    // Older CRDs keep their names against newer ones asking for the same.
    crds.sort_by(|(a, _), (b, _)| {
        text(a, "/metadata/creationTimestamp")
            .cmp(text(b, "/metadata/creationTimestamp"))
            .then(a.name().cmp(b.name()))
    });
    let lights: Vec<Value> = crds.iter().map(|(v, _)| (**v).clone()).collect();

    // Naming and establishing, in memory first.
    let mut desired: Vec<Value> = Vec::with_capacity(lights.len());
    for i in 0..lights.len() {
        let group = text(&lights[i], "/spec/group");
        let others: Vec<&Value> = desired
            .iter()
            .chain(lights[i + 1..].iter())
            .filter(|o| text(o, "/spec/group") == group)
            .collect();
        let next = names_and_conditions(&lights[i], &others);
        desired.push(next);
    }

    // Serve what is established before anyone can read the condition.
    install(handler, &crds, &desired);

    let user = controller_user();
    let requester = Requester { user: &user };
    for (old, new) in lights.iter().zip(&desired) {
        if old.get("status") != new.get("status") {
            write_status(handler, &requester, old.name(), new.get("status").cloned()).await;
        }
    }

    // Finalizers of deleted CRDs.
    let mut pending = false;
    for ((_, stored), want) in crds.iter().zip(&desired) {
        if want.deletion_timestamp().is_none()
            || !strings(want.pointer("/metadata/finalizers"))
                .iter()
                .any(|f| f == CLEANUP_FINALIZER)
        {
            continue;
        }
        let Some(mut full) = full_crd(stored) else {
            continue;
        };
        full["status"] = want["status"].clone();
        if !finalize(handler, &requester, &full).await {
            pending = true;
        }
    }
    pending
}

async fn write_status(
    handler: &CrdHandler,
    requester: &Requester<'_>,
    name: &str,
    status: Option<Value>,
) {
    let mut updater = |current: Option<&Value>| {
        let mut v = current.cloned().unwrap_or(Value::Null);
        v["status"] = status.clone().unwrap_or(json!({}));
        v.remove_meta("resourceVersion");
        Ok(v)
    };
    let opts = UpdateOptions {
        subresource: "status".into(),
        ..Default::default()
    };
    if let Err(e) = handler
        .crds
        .update(requester, "", name, &mut updater, &opts)
        .await
        && e.code != 404
    {
        tracing::warn!(crd = name, error = %e.message, "cannot write CRD status");
    }
}

/// Rebuilds the served table from the CRDs' desired state, keeping the entries (and storage)
/// of CRDs whose spec (generation), accepted names and deletion did not change.
fn install(handler: &CrdHandler, crds: &[(Arc<Value>, Object)], desired: &[Value]) {
    let current = handler.served();
    let mut served = Served::default();
    let mut caches = handler.caches.lock().unwrap_or_else(|e| e.into_inner());
    let mut used_keys = HashSet::new();
    for ((_, stored), want) in crds.iter().zip(desired) {
        if !condition_true(want, "Established") {
            continue;
        }
        let group = text(want, "/spec/group");
        let plural = text(want, "/status/acceptedNames/plural");
        if plural.is_empty() || text(want, "/status/acceptedNames/kind").is_empty() {
            continue;
        }
        let terminating = want.deletion_timestamp().is_some();
        let fingerprint = format!(
            "{}/{}/{}/{terminating}",
            text(want, "/metadata/uid"),
            want.pointer("/metadata/generation").unwrap_or(&Value::Null),
            want.pointer("/status/acceptedNames")
                .unwrap_or(&Value::Null),
        );
        let key_root = format!(
            "{}/{group}/{plural}/",
            handler.storage.prefix.trim_end_matches('/')
        );
        used_keys.insert(key_root.clone());
        let entry = match current.by_crd.get(want.name()) {
            Some(e) if e.fingerprint == fingerprint => e.clone(),
            _ => {
                // Only a changed CRD is read whole, with the status it is about to have.
                let Some(mut full) = full_crd(stored) else {
                    continue;
                };
                full["status"] = want["status"].clone();
                let Some(facts) = CrdFacts::of(&full) else {
                    continue;
                };
                let storage = caches
                    .entry(key_root.clone())
                    .or_insert_with(|| new_storage(handler, &full, &facts, &key_root))
                    .clone();
                let (api, infos) = build(handler, &full, &facts, storage);
                Arc::new(Entry {
                    fingerprint,
                    api,
                    infos,
                    terminating,
                    group: facts.group.clone(),
                    plural: facts.plural.clone(),
                    facts,
                })
            }
        };
        served
            .by_resource
            .insert((entry.group.clone(), entry.plural.clone()), entry.clone());
        served.by_crd.insert(entry.facts.name.clone(), entry);
    }
    caches.retain(|k, _| used_keys.contains(k));
    drop(caches);
    handler.replace(served);
}

/// The REST of a CRD's versions over `storage`, with the handler's admission and settings.
fn build(
    handler: &CrdHandler,
    crd: &Value,
    facts: &CrdFacts,
    storage: Arc<dyn Store>,
) -> (
    Arc<apiserver::endpoints::ApiResources>,
    Vec<apiserver::registry::ResourceInfo>,
) {
    registration::build(
        crd,
        facts,
        storage,
        &handler.admission,
        &handler.storage.prefix,
        &handler.shutdown,
        handler.resolver.clone(),
    )
}

fn new_storage(
    handler: &CrdHandler,
    crd: &Value,
    facts: &CrdFacts,
    key_root: &str,
) -> Arc<dyn Store> {
    let info = facts
        .versions
        .first()
        .map(|v| registration::resource_info(crd, facts, v))
        .unwrap_or_default();
    let metrics = storage::ResourceMetrics::new(&info.group, &info.resource);
    let attrs: storage::AttrsFn = Arc::new(move |v| info.attrs(v));
    let inner: Arc<dyn Store> = Arc::new(
        KvStore::new(handler.storage.kv.clone(), attrs.clone()).with_metrics(metrics.clone()),
    );
    if handler.storage.watch_cache_size == 0 {
        return inner;
    }
    let options = CacherOptions {
        window_capacity: handler.storage.watch_cache_size,
        metrics: Some(metrics),
        ..Default::default()
    };
    let cache = Cacher::with_options(inner.clone(), key_root, attrs, options);
    storage::cached(handler.storage.kv.as_ref(), inner, cache)
}

/// The storage version's REST for a CRD that serves no version, so that its custom resources
/// can still be deleted (upstream's finalizer reaches them through the storage version whether
/// or not it is served).
fn cleanup_store(handler: &CrdHandler, crd: &Value) -> Option<Arc<RegistryStore>> {
    let mut serving = crd.clone();
    for v in serving.pointer_mut("/spec/versions")?.as_array_mut()? {
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            v["served"] = Value::Bool(true);
        }
    }
    let facts = CrdFacts::of(&serving)?;
    let key_root = format!(
        "{}/{}/{}/",
        handler.storage.prefix.trim_end_matches('/'),
        facts.group,
        facts.plural
    );
    let storage = handler
        .caches
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key_root.clone())
        .or_insert_with(|| new_storage(handler, &serving, &facts, &key_root))
        .clone();
    let (api, _) = build(handler, &serving, &facts, storage);
    api.all()
        .find(|s| s.info.storage_version.is_none())
        .cloned()
}

/// Upstream's CRD finalizer: deletes the CRD's custom resources (through the REST lifecycle, so
/// their own finalizers hold them), and once none is left removes the cleanup finalizer. True
/// when the CRD is finished.
async fn finalize(handler: &CrdHandler, requester: &Requester<'_>, crd: &Value) -> bool {
    let name = crd.name().to_string();
    let entry = handler.served().by_crd.get(&name).cloned();
    let mut status = crd.clone();
    if let Some(entry) = entry {
        if !condition(crd, "Terminating").is_some_and(|c| {
            c.get("reason").and_then(Value::as_str) == Some("InstanceDeletionInProgress")
        }) {
            set_condition(
                &mut status,
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            );
            write_status(handler, requester, &name, status.get("status").cloned()).await;
        }
        let served = entry
            .api
            .all()
            .find(|s| s.info.storage_version.is_none())
            .cloned();
        let Some(store) = served.or_else(|| cleanup_store(handler, crd)) else {
            return false;
        };
        let items = match store.list("", &ListOptions::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                set_condition(
                    &mut status,
                    "Terminating",
                    "True",
                    "InstanceDeletionFailed",
                    &format!("could not list instances: {}", e.message),
                );
                write_status(handler, requester, &name, status.get("status").cloned()).await;
                return false;
            }
        };
        if !items.is_empty() {
            for item in items {
                let Ok(v) = item.value() else { continue };
                if v.deletion_timestamp().is_none() {
                    let ns = v.namespace().to_string();
                    let _ = store
                        .delete(requester, &ns, v.name(), &DeleteOptions::default())
                        .await;
                }
            }
            return false;
        }
        set_condition(
            &mut status,
            "Terminating",
            "False",
            "InstanceDeletionCompleted",
            "removed all instances",
        );
    } else {
        set_condition(
            &mut status,
            "Terminating",
            "False",
            "NeverEstablished",
            "resource was never established",
        );
    }
    write_status(handler, requester, &name, status.get("status").cloned()).await;
    let mut updater = |current: Option<&Value>| {
        let mut v = current.cloned().unwrap_or(Value::Null);
        let left: Vec<Value> = strings(v.pointer("/metadata/finalizers"))
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .map(Value::from)
            .collect();
        v["metadata"]["finalizers"] = json!(left);
        v.remove_meta("resourceVersion");
        Ok(v)
    };
    match handler
        .crds
        .update(
            requester,
            "",
            &name,
            &mut updater,
            &UpdateOptions::default(),
        )
        .await
    {
        Ok(_) => true,
        Err(e) => e.code == 404,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({
            "metadata": {"name": name},
            "spec": {"group": "example.com", "names": {
                "plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind,
                "listKind": format!("{kind}List"), "shortNames": short,
            }},
        })
    }

    fn accepted(crd: &Value) -> Value {
        names_and_conditions(crd, &[])
    }

    #[test]
    fn fresh_names_are_accepted_and_established() {
        let out = accepted(&crd("widgets.example.com", "widgets", "Widget", &["wd"]));
        assert_eq!(out["status"]["acceptedNames"]["plural"], "widgets");
        assert_eq!(out["status"]["acceptedNames"]["shortNames"], json!(["wd"]));
        assert!(condition_true(&out, "NamesAccepted"));
        assert!(condition_true(&out, "Established"));
        assert_eq!(
            condition(&out, "Established").unwrap()["reason"],
            "InitialNamesAccepted"
        );
    }

    #[test]
    fn names_another_crd_holds_conflict() {
        let first = accepted(&crd("widgets.example.com", "widgets", "Widget", &["wd"]));
        let second = crd("gadgets.example.com", "gadgets", "Widget", &["wd"]);
        let out = names_and_conditions(&second, &[&first]);
        let cond = condition(&out, "NamesAccepted").unwrap();
        assert_eq!(cond["status"], "False");
        // The last conflict found names the condition, as upstream's sequence of checks does.
        assert_eq!(cond["reason"], "ListKindConflict");
        assert_eq!(cond["message"], "\"WidgetList\" is already in use");
        assert_eq!(out["status"]["acceptedNames"]["plural"], "gadgets");
        assert!(out["status"]["acceptedNames"].get("kind").is_none());
        assert_eq!(
            condition(&out, "Established").unwrap()["reason"],
            "NotAccepted"
        );
    }
}
