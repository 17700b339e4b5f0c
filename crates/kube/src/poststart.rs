//! Post-start hooks that create and keep what kube-apiserver's own hooks create, beside the
//! `default` namespace and the `kubernetes` Service of `bootstrap`. Each function is one
//! upstream hook, named after it (`HOOKS`), and reports ready once its objects exist or its
//! controller runs:
//!
//! - `start-system-namespaces-controller`: `kube-system`, `kube-public` and `kube-node-lease`,
//!   created at once and again within a minute of being deleted;
//! - `rbac/bootstrap-roles`: upstream's bootstrap RBAC policy, reconciled (`rbac::bootstrap`);
//! - `scheduling/bootstrap-system-priority-classes`: the `system-node-critical` and
//!   `system-cluster-critical` PriorityClasses (pkg/apis/scheduling/v1 `SystemPriorityClasses`);
//! - `start-kube-apiserver-identity-lease-controller`: this server's identity Lease in
//!   `kube-system`, named from the hostname as upstream names it and renewed every 10 s;
//! - `start-kube-apiserver-identity-lease-garbage-collector`: deletes the identity Leases of
//!   servers that stopped renewing theirs, at start and every hour;
//! - `start-cluster-authentication-info-controller`: the `extension-apiserver-authentication`
//!   ConfigMap that extension servers read the client CA from;
//! - `start-legacy-token-tracking-controller`: the `kube-apiserver-legacy-service-account-token-
//!   tracking` ConfigMap with the date tracking began.
//!
//! Objects that exist are left alone (upstream's hooks create what is missing); objects are
//! written through the registry like any client's, so they are validated and defaulted.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::Requester;
use serde_json::{Value, json};
use storage::ResourceVersion;

use crate::controllers::controller_user;

/// The upstream names of the hooks, in the order they run: the system namespaces first, since
/// the others write into `kube-system`.
pub const HOOKS: &[&str] = &[
    SYSTEM_NAMESPACES_HOOK,
    BOOTSTRAP_ROLES_HOOK,
    "scheduling/bootstrap-system-priority-classes",
    "start-kube-apiserver-identity-lease-controller",
    "start-kube-apiserver-identity-lease-garbage-collector",
    "start-cluster-authentication-info-controller",
    "start-legacy-token-tracking-controller",
];

pub const SYSTEM_NAMESPACES_HOOK: &str = "start-system-namespaces-controller";

/// Registered only when RBAC is one of the authorization modes, as upstream disables it
/// otherwise.
pub const BOOTSTRAP_ROLES_HOOK: &str = "rbac/bootstrap-roles";

/// The namespaces upstream's system namespaces controller keeps (`default` is the
/// `kubernetes` Service's, made by `bootstrap`).
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// How often they are looked for (upstream's controller interval).
const SYSTEM_NAMESPACES_INTERVAL: Duration = Duration::from_secs(60);

/// How often expired identity leases are collected (upstream's `IdentityLeaseGCPeriod`).
const IDENTITY_LEASE_GC_PERIOD: Duration = Duration::from_secs(3600);

/// The label every kube-apiserver's identity lease carries, and its value.
const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
const IDENTITY_COMPONENT: &str = "kube-apiserver";

/// How long an identity lease lasts and how often it is renewed (upstream's
/// `IdentityLeaseDurationSeconds` and `IdentityLeaseRenewIntervalPeriod`).
const IDENTITY_LEASE_DURATION_SECONDS: i64 = 3600;
const IDENTITY_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);

/// Creates `obj` unless an object of that name exists.
async fn ensure(
    api: &ApiResources,
    group: &str,
    version: &str,
    resource: &str,
    obj: Value,
) -> Result<(), String> {
    let store = api
        .get(group, version, resource)
        .ok_or_else(|| format!("{resource} are not served"))?;
    let user = controller_user();
    let namespace = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match store
        .create(
            &Requester { user: &user },
            &namespace,
            obj,
            &api.internal_write(store, crate::bootstrap::API_SERVER_MANAGER),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if s.code == 409 => Ok(()),
        Err(s) => Err(format!("creating {resource}: {}", s.message)),
    }
}

/// `start-system-namespaces-controller`: creates the system namespaces that are missing, then
/// looks again every minute for as long as the process runs (upstream's controller syncs at
/// start and on its interval). A namespace still terminating counts as present, as it does in
/// upstream's lister; it is made again once it is gone.
pub async fn start_system_namespaces(api: Arc<ApiResources>) -> Result<(), String> {
    ensure_system_namespaces(&api).await?;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SYSTEM_NAMESPACES_INTERVAL).await;
            if let Err(e) = ensure_system_namespaces(&api).await {
                tracing::warn!(error = %e, "unable to create required kubernetes system Namespace");
            }
        }
    });
    Ok(())
}

/// One pass: a read per namespace, and a create only for those not found, so that the pass
/// that finds them all costs no write. The namespaces are looked at side by side (each read
/// and write waits on the store).
async fn ensure_system_namespaces(api: &ApiResources) -> Result<(), String> {
    let store = api
        .get("", "v1", "namespaces")
        .ok_or("namespaces are not served")?;
    let ensure_one = |name: &'static str| async move {
        match store.get("", name, ResourceVersion::Unset).await {
            Ok(_) => return Ok(()),
            Err(s) if s.code == 404 => {}
            Err(s) => return Err(format!("reading namespace {name}: {}", s.message)),
        }
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        ensure(api, "", "v1", "namespaces", ns).await
    };
    futures_util::future::try_join_all(SYSTEM_NAMESPACES.iter().map(|name| ensure_one(name)))
        .await?;
    Ok(())
}

/// `scheduling/bootstrap-system-priority-classes`.
pub async fn bootstrap_system_priority_classes(api: &ApiResources) -> Result<(), String> {
    const SYSTEM_CRITICAL: i64 = 2_000_000_000;
    for (name, value, description) in [
        (
            "system-node-critical",
            SYSTEM_CRITICAL + 1000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            SYSTEM_CRITICAL,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    ] {
        let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description});
        ensure(api, "scheduling.k8s.io", "v1", "priorityclasses", pc).await?;
    }
    Ok(())
}

/// The host's name, as Go's `os.Hostname` reads it on Linux.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// RFC 4648 base32 without padding, lower case.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0);
    for &b in bytes {
        buffer = (buffer << 8) | b as u32;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// Upstream's `APIServerID`: `apiserver-` and the base32 of the first 16 bytes of the SHA-256
/// of the hostname and the identity `kube-apiserver`, each with a two-byte length prefix.
pub fn api_server_id(hostname: &str) -> String {
    let mut data = Vec::new();
    for part in [hostname, "kube-apiserver"] {
        data.extend_from_slice(&(part.len() as u16).to_be_bytes());
        data.extend_from_slice(part.as_bytes());
    }
    let hash = ring::digest::digest(&ring::digest::SHA256, &data);
    format!("apiserver-{}", base32_lower(&hash.as_ref()[..16]))
}

/// A `metav1.MicroTime` as it is serialized: RFC 3339 with microseconds.
pub(crate) fn micro_time_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `start-kube-apiserver-identity-lease-controller`: creates or renews this server's lease, and
/// keeps it renewed in the background for as long as the process runs.
pub async fn start_identity_lease(api: Arc<ApiResources>) -> Result<(), String> {
    let host = hostname();
    let name = api_server_id(&host);
    let holder = format!("{name}_{}", uuid::Uuid::new_v4());
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-system",
            "labels": {IDENTITY_LABEL: IDENTITY_COMPONENT, "kubernetes.io/hostname": host}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": IDENTITY_LEASE_DURATION_SECONDS,
            "renewTime": micro_time_now()}});
    // Renewed now, not only made when missing: a lease left by this host's earlier run may have
    // expired, and the collector, which runs next, would delete it.
    renew_lease(&api, &lease, &holder).await?;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDENTITY_LEASE_RENEW_INTERVAL).await;
            if let Err(e) = renew_lease(&api, &lease, &holder).await {
                tracing::warn!(error = %e, "renewing the identity lease failed");
            }
        }
    });
    Ok(())
}

/// Sets the lease's holder and renew time. A lease that is gone (another server's collector
/// found it expired, or someone deleted it) is made again, as upstream's lease controller
/// makes it.
async fn renew_lease(api: &ApiResources, template: &Value, holder: &str) -> Result<(), String> {
    let store = api
        .get("coordination.k8s.io", "v1", "leases")
        .ok_or("leases are not served")?;
    let name = template.name();
    let user = controller_user();
    let mut lease = match store.get("kube-system", name, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => {
            let mut fresh = template.clone();
            fresh["spec"]["renewTime"] = json!(micro_time_now());
            return ensure(api, "coordination.k8s.io", "v1", "leases", fresh).await;
        }
        Err(s) => return Err(s.message),
    };
    lease["spec"]["holderIdentity"] = json!(holder);
    lease["spec"]["leaseDurationSeconds"] = json!(IDENTITY_LEASE_DURATION_SECONDS);
    lease["spec"]["renewTime"] = json!(micro_time_now());
    let mut updater = |_: Option<&Value>| Ok(lease.clone());
    store
        .update(
            &Requester { user: &user },
            "kube-system",
            name,
            &mut updater,
            &crate::bootstrap::own_update(api, store),
        )
        .await
        .map(|_| ())
        .map_err(|s| s.message)
}

/// `start-kube-apiserver-identity-lease-garbage-collector`: collects expired identity leases
/// at once and then every hour for as long as the process runs, as upstream's collector does
/// from its informer.
pub async fn start_identity_lease_gc(api: Arc<ApiResources>) -> Result<(), String> {
    tokio::spawn(async move {
        loop {
            if let Err(e) = collect_expired_identity_leases(&api).await {
                tracing::warn!(error = %e, "collecting expired apiserver leases failed");
            }
            tokio::time::sleep(IDENTITY_LEASE_GC_PERIOD).await;
        }
    });
    Ok(())
}

/// Deletes every kube-apiserver identity lease in `kube-system` that has expired: no renew
/// time or duration, or renewed longer ago than its duration. Each is read again before it is
/// deleted, and deleted only at the version found expired, so a server that renews its lease
/// meanwhile keeps it. Returns the names deleted.
pub async fn collect_expired_identity_leases(api: &ApiResources) -> Result<Vec<String>, String> {
    let store = api
        .get("coordination.k8s.io", "v1", "leases")
        .ok_or("leases are not served")?;
    let listed = store
        .list("kube-system", &storage::ListOptions::default())
        .await
        .map_err(|s| s.message)?;
    let now = chrono::Utc::now();
    let user = controller_user();
    let mut deleted = Vec::new();
    for lease in listed.items.iter().filter_map(|o| o.value().ok()) {
        if lease
            .labels()
            .and_then(|l| l.get(IDENTITY_LABEL))
            .and_then(Value::as_str)
            != Some(IDENTITY_COMPONENT)
            || !identity_lease_expired(&lease, now)
        {
            continue;
        }
        let name = lease.name();
        let fresh = match store.get("kube-system", name, ResourceVersion::Unset).await {
            Ok(o) => o.value().map_err(|e| e.to_string())?,
            Err(s) if s.code == 404 => continue,
            Err(s) => return Err(s.message),
        };
        if !identity_lease_expired(&fresh, now) {
            continue;
        }
        let opts = apiserver::registry::DeleteOptions {
            precondition_uid: Some(fresh.uid().to_string()),
            precondition_resource_version: Some(fresh.resource_version().to_string()),
            ..Default::default()
        };
        match store
            .delete(&Requester { user: &user }, "kube-system", name, &opts)
            .await
        {
            Ok(_) => deleted.push(name.to_string()),
            // Gone already, or renewed since it was read.
            Err(s) if s.code == 404 || s.code == 409 => {}
            Err(s) => return Err(s.message),
        }
    }
    Ok(deleted)
}

/// Upstream's `isLeaseExpired`.
fn identity_lease_expired(lease: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    let renewed = lease
        .pointer("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let duration = lease
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64);
    match (renewed, duration) {
        (Some(renewed), Some(seconds)) => renewed + chrono::Duration::seconds(seconds) < now,
        _ => true,
    }
}

/// `start-cluster-authentication-info-controller`: the client CA that extension API servers
/// trust, published in `kube-system/extension-apiserver-authentication`.
pub async fn cluster_authentication_info(
    api: &ApiResources,
    data: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": data});
    ensure(api, "", "v1", "configmaps", cm).await?;
    // Kept current at every start, as upstream's controller keeps it: the CAs or request-header
    // settings may have changed since the map was made.
    let store = api
        .get("", "v1", "configmaps")
        .ok_or("configmaps are not served")?;
    let user = controller_user();
    let mut updater = |current: Option<&Value>| -> Result<Value, apimachinery::Status> {
        let mut cm = current.cloned().unwrap_or(Value::Null);
        cm["data"] = Value::Object(data.clone());
        Ok(cm)
    };
    let current = store
        .get(
            "kube-system",
            "extension-apiserver-authentication",
            storage::ResourceVersion::Unset,
        )
        .await
        .map_err(|s| s.message)?;
    if current.value().ok().and_then(|v| v.get("data").cloned())
        == Some(Value::Object(data.clone()))
    {
        return Ok(());
    }
    store
        .update(
            &Requester { user: &user },
            "kube-system",
            "extension-apiserver-authentication",
            &mut updater,
            &crate::bootstrap::own_update(api, store),
        )
        .await
        .map(|_| ())
        .map_err(|s| format!("updating extension-apiserver-authentication: {}", s.message))
}

/// `start-legacy-token-tracking-controller`: the day from which the use of legacy
/// service-account tokens is tracked, in Go's `2006-01-02` form.
pub async fn legacy_token_tracking(api: &ApiResources) -> Result<(), String> {
    let since = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-apiserver-legacy-service-account-token-tracking", "namespace": "kube-system"},
        "data": {"since": since}});
    ensure(api, "", "v1", "configmaps", cm).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_is_rfc4648_lower_without_padding() {
        assert_eq!(base32_lower(b""), "");
        assert_eq!(base32_lower(b"f"), "my");
        assert_eq!(base32_lower(b"fo"), "mzxq");
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
    }

    #[test]
    fn an_identity_lease_expires_its_duration_after_its_last_renewal() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .to_utc();
        let lease = |renew: Option<&str>, seconds: Option<i64>| {
            let mut spec = serde_json::Map::new();
            if let Some(r) = renew {
                spec.insert("renewTime".into(), json!(r));
            }
            if let Some(s) = seconds {
                spec.insert("leaseDurationSeconds".into(), json!(s));
            }
            json!({"spec": spec})
        };
        // Renewed 59 minutes ago with an hour's duration: still held.
        assert!(!identity_lease_expired(
            &lease(Some("2026-11-30T11:01:00.000000Z"), Some(3600)),
            now
        ));
        // Renewed 61 minutes ago: expired.
        assert!(identity_lease_expired(
            &lease(Some("2026-11-30T10:59:00.000000Z"), Some(3600)),
            now
        ));
        // Without a renew time or a duration, upstream counts it expired.
        assert!(identity_lease_expired(&lease(None, Some(3600)), now));
        assert!(identity_lease_expired(
            &lease(Some("2026-11-30T11:59:00.000000Z"), None),
            now
        ));
    }

    #[test]
    fn api_server_ids_are_hashes_of_the_hostname() {
        let id = api_server_id("node-1");
        assert!(id.starts_with("apiserver-"));
        // 16 bytes are 26 base32 characters.
        assert_eq!(id.len(), "apiserver-".len() + 26);
        assert_ne!(id, api_server_id("node-2"));
        assert_eq!(id, api_server_id("node-1"));
    }
}
