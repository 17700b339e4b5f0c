//! The service account controller (upstream: pkg/controller/serviceaccount,
//! `ServiceAccountsController`): every namespace whose phase is `Active` has a ServiceAccount
//! named `default`. A namespace is synced when it is added or changes and when one of its
//! ServiceAccounts is deleted, so a deleted `default` comes back; a terminating namespace is left
//! alone. A sync that fails is retried.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, WriteOptions};
use serde_json::{Value, json};
use storage::{ResourceVersion, WatchEvent, WatchOptions, WatchStream};

/// The ServiceAccounts every active namespace gets (`DefaultServiceAccountsControllerOptions`).
const ENSURED: &[&str] = &["default"];

/// How long a failed sync waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The identity upstream's controller acts as.
fn user() -> UserInfo {
    super::kube_system_account("service-account-controller")
}

/// Watches namespaces and ServiceAccounts and keeps the `default` ServiceAccount of every
/// active namespace. Runs until the process ends.
pub async fn run_serviceaccount_controller(api: Arc<ApiResources>) {
    let (Some(namespaces), Some(accounts)) = (
        api.get("", "v1", "namespaces").cloned(),
        api.get("", "v1", "serviceaccounts").cloned(),
    ) else {
        return;
    };
    let write = api.internal_write(&accounts, super::CONTROLLER_MANAGER);
    loop {
        let (Some(mut ns_events), Some(mut sa_events)) =
            (watch(&namespaces).await, watch(&accounts).await)
        else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        // Namespaces to sync now, and those whose last sync failed.
        let mut queue: BTreeSet<String> = BTreeSet::new();
        let mut failed: BTreeSet<String> = BTreeSet::new();
        loop {
            let retry = !failed.is_empty();
            tokio::select! {
                e = ns_events.recv() => match e {
                    Some(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                        if let Ok(v) = o.value() {
                            queue.insert(v.name().to_string());
                        }
                    }
                    Some(WatchEvent::Deleted(_) | WatchEvent::Bookmark { .. }) => {}
                    Some(WatchEvent::Error(_)) | None => break,
                },
                e = sa_events.recv() => match e {
                    Some(WatchEvent::Deleted(o)) => {
                        if let Ok(v) = o.value() {
                            queue.insert(v.namespace().to_string());
                        }
                    }
                    Some(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Bookmark { .. }) => {}
                    Some(WatchEvent::Error(_)) | None => break,
                },
                _ = tokio::time::sleep(RETRY), if retry => {
                    queue.append(&mut failed);
                }
            }
            for ns in std::mem::take(&mut queue) {
                if let Err(e) = sync_namespace(&namespaces, &accounts, &ns, &write).await {
                    tracing::debug!(namespace = %ns, error = %e, "service account sync failed; retrying");
                    failed.insert(ns);
                }
            }
        }
    }
}

async fn watch(store: &RegistryStore) -> Option<WatchStream> {
    let opts = WatchOptions {
        resource_version: ResourceVersion::Unset,
        send_initial_events: None,
        allow_bookmarks: false,
        predicate: None,
    };
    match store.watch("", &opts).await {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e.message, resource = %store.info.resource, "service account controller cannot watch; retrying");
            None
        }
    }
}

/// `syncNamespace`: creates the ensured ServiceAccounts an active namespace lacks. A namespace
/// that is gone or not active is done; a create that finds the account already there is done.
async fn sync_namespace(
    namespaces: &RegistryStore,
    accounts: &RegistryStore,
    ns: &str,
    write: &WriteOptions,
) -> Result<(), String> {
    let namespace = match namespaces.get("", ns, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => return Ok(()),
        Err(s) => return Err(s.message),
    };
    if namespace.pointer("/status/phase").and_then(Value::as_str) != Some("Active") {
        return Ok(());
    }
    let user = user();
    let requester = Requester { user: &user };
    for name in ENSURED {
        match accounts.get(ns, name, ResourceVersion::Unset).await {
            Ok(_) => continue,
            Err(s) if s.code == 404 => {}
            Err(s) => return Err(s.message),
        }
        let account = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns},
        });
        match accounts.create(&requester, ns, account, write).await {
            Ok(_) => {}
            Err(s) if s.code == 409 => {}
            Err(s) => return Err(s.message),
        }
    }
    Ok(())
}
