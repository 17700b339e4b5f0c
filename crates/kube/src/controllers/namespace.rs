//! The namespace controller (upstream: pkg/controller/namespace): when a namespace is marked for
//! deletion it deletes everything in it, then clears the `kubernetes` finalizer so the namespace
//! itself goes away.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, Requester, UpdateOptions};
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};

use super::{ExtraStores, controller_user};

/// Watches namespaces and finishes the deletion of terminating ones. Runs until the process ends;
/// a namespace whose content cannot be removed yet (finalizers) is retried.
pub async fn run_namespace_controller(api: Arc<ApiResources>, extra: ExtraStores) {
    let Some(namespaces) = api.get("", "v1", "namespaces").cloned() else {
        return;
    };
    loop {
        let mut events = match namespaces
            .watch(
                "",
                &WatchOptions {
                    resource_version: ResourceVersion::Unset,
                    send_initial_events: None,
                    allow_bookmarks: false,
                    predicate: None,
                },
            )
            .await
        {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e.message, "namespace controller cannot watch; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut pending: BTreeSet<String> = BTreeSet::new();
        loop {
            let next = tokio::time::timeout(Duration::from_millis(500), events.recv()).await;
            match next {
                Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    if let Ok(v) = o.value()
                        && v.deletion_timestamp().is_some()
                    {
                        pending.insert(v.name().to_string());
                    }
                }
                Ok(Some(WatchEvent::Deleted(o))) => {
                    if let Ok(v) = o.value() {
                        pending.remove(v.name());
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {}
            }
            let names: Vec<String> = pending.iter().cloned().collect();
            for ns in names {
                if finish(&api, &extra, &ns).await {
                    pending.remove(&ns);
                }
            }
        }
    }
}

/// Deletes the content of `ns`; when none is left, clears the finalizer. True when done.
async fn finish(api: &ApiResources, extra: &ExtraStores, ns: &str) -> bool {
    let user = controller_user();
    let requester = Requester { user: &user };
    let mut remaining = 0usize;
    let mut seen_keys = BTreeSet::new();
    for store in api.all().cloned().chain(extra.stores()) {
        let info = &store.info;
        if !info.namespaced || !info.has_verb("list") || !seen_keys.insert(store.prefix(ns)) {
            continue;
        }
        let list = match store.list(ns, &ListOptions::default()).await {
            Ok(l) => l,
            Err(_) => {
                remaining += 1;
                continue;
            }
        };
        // No kubelet will finish a pod's graceful termination here, so the controller asks
        // for none (as upstream's pod garbage collector does for pods no node runs).
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        for item in list.items {
            remaining += 1;
            let Ok(v) = item.value() else { continue };
            let graceful = v
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .is_some_and(|g| g > 0);
            if v.deletion_timestamp().is_none() || graceful {
                let _ = store.delete(&requester, ns, v.name(), &opts).await;
            }
        }
    }
    if remaining > 0 {
        return false;
    }
    let Some(namespaces) = api.get("", "v1", "namespaces") else {
        return true;
    };
    let mut updater = |current: Option<&Value>| {
        let mut v = current.cloned().unwrap_or(Value::Null);
        let left: Vec<Value> = v
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| *f != "kubernetes")
            .cloned()
            .collect();
        v["spec"]["finalizers"] = json!(left);
        v.remove_meta("resourceVersion");
        Ok(v)
    };
    let opts = UpdateOptions {
        write: api.internal_write(namespaces, super::CONTROLLER_MANAGER),
        subresource: "finalize".into(),
        ..Default::default()
    };
    match namespaces
        .update(&requester, "", ns, &mut updater, &opts)
        .await
    {
        Ok(_) => true,
        Err(s) => s.code == 404,
    }
}
