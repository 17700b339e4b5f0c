//! The root CA certificate publisher (upstream: pkg/controller/certificates/rootcacertpublisher):
//! every active namespace has a ConfigMap `kube-root-ca.crt` whose `ca.crt` is the CA that
//! verifies this server, with upstream's description annotation. Pods read it through the
//! `kube-api-access-*` volume the ServiceAccount admission plugin mounts. A namespace is synced
//! when it is added or changes and when its `kube-root-ca.crt` is changed or deleted, so an
//! edited or deleted copy is put back; a sync that fails is retried.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions, WriteOptions};
use serde_json::{Value, json};
use storage::{ResourceVersion, WatchEvent, WatchOptions, WatchStream};

/// `RootCACertConfigMapName`.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// How long a failed sync waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Keeps `kube-root-ca.crt` with `root_ca` (PEM) in every active namespace. Runs until the
/// process ends.
pub async fn run_root_ca_publisher(api: Arc<ApiResources>, root_ca: String) {
    let (Some(namespaces), Some(configmaps)) = (
        api.get("", "v1", "namespaces").cloned(),
        api.get("", "v1", "configmaps").cloned(),
    ) else {
        return;
    };
    let write = api.internal_write(&configmaps, super::CONTROLLER_MANAGER);
    loop {
        let (Some(mut ns_events), Some(mut cm_events)) = (
            watch(&namespaces, false).await,
            watch(&configmaps, true).await,
        ) else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
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
                e = cm_events.recv() => match e {
                    Some(WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                        if let Ok(v) = o.value() {
                            queue.insert(v.namespace().to_string());
                        }
                    }
                    Some(WatchEvent::Added(_) | WatchEvent::Bookmark { .. }) => {}
                    Some(WatchEvent::Error(_)) | None => break,
                },
                _ = tokio::time::sleep(RETRY), if retry => {
                    queue.append(&mut failed);
                }
            }
            for ns in std::mem::take(&mut queue) {
                if let Err(e) =
                    sync_namespace(&namespaces, &configmaps, &ns, &root_ca, &write).await
                {
                    tracing::debug!(namespace = %ns, error = %e, "root CA publish failed; retrying");
                    failed.insert(ns);
                }
            }
        }
    }
}

/// A watch from now; for ConfigMaps, only the published ones.
async fn watch(store: &RegistryStore, published_only: bool) -> Option<WatchStream> {
    let predicate: storage::Predicate = published_only.then(|| {
        Arc::new(|attrs: &storage::Attrs| {
            attrs.fields.get("metadata.name").map(String::as_str) == Some(ROOT_CA_CONFIGMAP)
        }) as Arc<dyn Fn(&storage::Attrs) -> bool + Send + Sync>
    });
    let opts = WatchOptions {
        resource_version: ResourceVersion::Unset,
        send_initial_events: None,
        allow_bookmarks: false,
        predicate,
    };
    match store.watch("", &opts).await {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e.message, resource = %store.info.resource, "root CA publisher cannot watch; retrying");
            None
        }
    }
}

/// `syncNamespace`: creates the ConfigMap an active namespace lacks, and puts back its data and
/// description when they were changed.
async fn sync_namespace(
    namespaces: &RegistryStore,
    configmaps: &RegistryStore,
    ns: &str,
    root_ca: &str,
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
    let user = super::kube_system_account("root-ca-cert-publisher");
    let requester = Requester { user: &user };
    let data = json!({"ca.crt": root_ca});
    let current = match configmaps
        .get(ns, ROOT_CA_CONFIGMAP, ResourceVersion::Unset)
        .await
    {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => {
            let cm = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns,
                             "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": data,
            });
            return match configmaps.create(&requester, ns, cm, write).await {
                // Gone or terminating namespaces, and a create that lost a race, are done.
                Ok(_) => Ok(()),
                Err(s) if matches!(s.code, 403 | 404 | 409) => Ok(()),
                Err(s) => Err(s.message),
            };
        }
        Err(s) => return Err(s.message),
    };
    let described = current
        .pointer(&format!(
            "/metadata/annotations/{}",
            DESCRIPTION_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .is_some_and(|d| !d.is_empty());
    if current.get("data") == Some(&data) && described {
        return Ok(());
    }
    let mut updated = current;
    updated["data"] = data;
    if !updated["metadata"]["annotations"].is_object() {
        updated["metadata"]["annotations"] = json!({});
    }
    updated["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
    let mut update = |_: Option<&Value>| Ok(updated.clone());
    configmaps
        .update(
            &requester,
            ns,
            ROOT_CA_CONFIGMAP,
            &mut update,
            &UpdateOptions {
                write: write.clone(),
                ..UpdateOptions::default()
            },
        )
        .await
        .map(|_| ())
        .map_err(|s| s.message)
}
