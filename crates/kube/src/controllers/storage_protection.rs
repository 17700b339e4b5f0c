//! The storage protection controllers (upstream: pkg/controller/volume/pvprotection,
//! pvcprotection and vacprotection), the other half of the StorageObjectInUseProtection
//! admission plugin: a PersistentVolume, PersistentVolumeClaim or VolumeAttributesClass being
//! deleted keeps its protection finalizer while something uses it and loses it (so the delete
//! finishes) once nothing does. A PV is in use while its phase is `Bound`; a PVC while a
//! scheduled pod mounts it (directly, or as the generic ephemeral volume that pod owns and is
//! not shut down); a VolumeAttributesClass while a PV or PVC names it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};

/// The protected resources: (group, resource, finalizer).
const PROTECTED: [(&str, &str, &str); 3] = [
    ("", "persistentvolumes", "kubernetes.io/pv-protection"),
    ("", "persistentvolumeclaims", "kubernetes.io/pvc-protection"),
    (
        "storage.k8s.io",
        "volumeattributesclasses",
        "kubernetes.io/vac-protection",
    ),
];

/// How often objects still in use are looked at again.
const RECHECK: Duration = Duration::from_millis(500);

fn user() -> UserInfo {
    super::kube_system_account("pvc-protection-controller")
}

/// An object waiting for its finalizer to be removed: which of `PROTECTED`, namespace, name.
type Pending = (usize, String, String);

/// The upstream controller of each row of [`PROTECTED`], for `--controllers`.
pub const CONTROLLER_NAMES: [&str; 3] = [
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "volumeattributesclass-protection-controller",
];

/// Watches the protected resources and removes the finalizer of deleted objects nothing uses,
/// for the rows whose controller `enabled[i]` says runs. Runs until the process ends.
pub async fn run_storage_protection_controller(api: Arc<ApiResources>, enabled: [bool; 3]) {
    let stores: Vec<Arc<RegistryStore>> = PROTECTED
        .iter()
        .filter_map(|(g, r, _)| api.get(g, "v1", r).cloned())
        .collect();
    if stores.len() != PROTECTED.len() {
        return;
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Pending>(1024);
    for (i, store) in stores.iter().enumerate() {
        if !enabled[i] {
            continue;
        }
        tokio::spawn(watch_deletions(store.clone(), i, tx.clone()));
    }
    drop(tx);
    let mut pending: BTreeSet<Pending> = BTreeSet::new();
    loop {
        match tokio::time::timeout(RECHECK, rx.recv()).await {
            Ok(Some(p)) => {
                pending.insert(p);
            }
            Ok(None) => return,
            Err(_) => {}
        }
        for p in pending.clone() {
            match process(&api, &stores[p.0], &p).await {
                Ok(true) => {
                    pending.remove(&p);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(name = %p.2, error = %e.message, "storage protection: retrying")
                }
            }
        }
    }
}

/// Sends every object of `store` that is being deleted and still has its finalizer.
async fn watch_deletions(
    store: Arc<RegistryStore>,
    which: usize,
    tx: tokio::sync::mpsc::Sender<Pending>,
) {
    let finalizer = PROTECTED[which].2;
    loop {
        let opts = WatchOptions {
            resource_version: ResourceVersion::Unset,
            send_initial_events: None,
            allow_bookmarks: false,
            predicate: None,
        };
        let mut events = match store.watch("", &opts).await {
            Ok(w) => w,
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(e) = events.recv().await {
            let (WatchEvent::Added(o) | WatchEvent::Modified(o)) = e else {
                continue;
            };
            let Ok(v) = o.value() else { continue };
            if v.deletion_timestamp().is_some() && has_finalizer(&v, finalizer) {
                let p = (which, v.namespace().to_string(), v.name().to_string());
                if tx.send(p).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn has_finalizer(v: &Value, finalizer: &str) -> bool {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Removes the finalizer when the object is no longer used; true when nothing is left to do.
async fn process(api: &ApiResources, store: &RegistryStore, p: &Pending) -> Result<bool, Status> {
    let (which, ns, name) = p;
    let finalizer = PROTECTED[*which].2;
    let current = match store.get(ns, name, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(Status::internal)?,
        Err(s) if s.code == 404 => return Ok(true),
        Err(s) => return Err(s),
    };
    if current.deletion_timestamp().is_none() || !has_finalizer(&current, finalizer) {
        return Ok(true);
    }
    let used = match which {
        0 => current.pointer("/status/phase").and_then(Value::as_str) == Some("Bound"),
        1 => claim_in_use(api, &current).await?,
        _ => class_in_use(api, name).await?,
    };
    if used {
        return Ok(false);
    }
    let user = user();
    let requester = Requester { user: &user };
    let mut updater = |cur: Option<&Value>| {
        let mut v = cur.cloned().unwrap_or(Value::Null);
        let left: Vec<Value> = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        v["metadata"]["finalizers"] = json!(left);
        v.remove_meta("resourceVersion");
        Ok(v)
    };
    match store
        .update(
            &requester,
            ns,
            name,
            &mut updater,
            &UpdateOptions {
                write: api.internal_write(store, super::CONTROLLER_MANAGER),
                ..UpdateOptions::default()
            },
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(s) if s.code == 404 => Ok(true),
        Err(s) => Err(s),
    }
}

async fn list(api: &ApiResources, resource: &str, ns: &str) -> Result<Vec<Value>, Status> {
    let Some(store) = api.get("", "v1", resource) else {
        return Ok(Vec::new());
    };
    store
        .list(ns, &ListOptions::default())
        .await?
        .items
        .into_iter()
        .map(|o| o.value().map_err(Status::internal))
        .collect()
}

/// `podUsesPVCForDeletion` over the claim's namespace.
async fn claim_in_use(api: &ApiResources, claim: &Value) -> Result<bool, Status> {
    let name = claim.name();
    for pod in list(api, "pods", claim.namespace()).await? {
        let scheduled = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !scheduled {
            continue;
        }
        // Killed by the kubelet or force-deleted: only waiting to be collected.
        let shut_down = pod.deletion_timestamp().is_some()
            && pod
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                == Some(0);
        let pod_uid = pod.pointer("/metadata/uid").and_then(Value::as_str);
        let owned_by_pod = pod_uid.is_some()
            && claim
                .controller_ref()
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                == pod_uid;
        for volume in pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let direct = volume
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
                == Some(name);
            let ephemeral = !shut_down
                && volume.get("ephemeral").is_some_and(|e| !e.is_null())
                && owned_by_pod
                && format!(
                    "{}-{}",
                    pod.name(),
                    volume.get("name").and_then(Value::as_str).unwrap_or("")
                ) == name;
            if direct || ephemeral {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// A PV or PVC names the class (spec, current status, or a modification's target).
async fn class_in_use(api: &ApiResources, class: &str) -> Result<bool, Status> {
    let named = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str) == Some(class);
    for pv in list(api, "persistentvolumes", "").await? {
        if named(&pv, "/spec/volumeAttributesClassName") {
            return Ok(true);
        }
    }
    for pvc in list(api, "persistentvolumeclaims", "").await? {
        if named(&pvc, "/spec/volumeAttributesClassName")
            || named(&pvc, "/status/currentVolumeAttributesClassName")
            || named(
                &pvc,
                "/status/modifyVolumeStatus/targetVolumeAttributesClassName",
            )
        {
            return Ok(true);
        }
    }
    Ok(false)
}
