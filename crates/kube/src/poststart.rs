//! Post-start hooks that create what kube-apiserver's own hooks create, beside the namespaces
//! and the `kubernetes` Service of `bootstrap`. Each function is one upstream hook, named after
//! it (`HOOKS`), and reports ready once its objects exist:
//!
//! - `rbac/bootstrap-roles`: upstream's bootstrap RBAC policy, reconciled (`rbac::bootstrap`);
//! - `scheduling/bootstrap-system-priority-classes`: the `system-node-critical` and
//!   `system-cluster-critical` PriorityClasses (pkg/apis/scheduling/v1 `SystemPriorityClasses`);
//! - `start-kube-apiserver-identity-lease-controller`: this server's identity Lease in
//!   `kube-system`, named from the hostname as upstream names it and renewed every 10 s;
//! - `start-cluster-authentication-info-controller`: the `extension-apiserver-authentication`
//!   ConfigMap that extension servers read the client CA from;
//! - `start-legacy-token-tracking-controller`: the `kube-apiserver-legacy-service-account-token-
//!   tracking` ConfigMap with the date tracking began.
//!
//! Objects that exist are left alone (upstream's hooks create what is missing); objects are
//! written through the registry like any client's, so they are validated and defaulted.

use std::sync::Arc;
use std::time::Duration;

use apiserver::endpoints::ApiResources;
use apiserver::registry::Requester;
use serde_json::{Value, json};
use storage::ResourceVersion;

use crate::controllers::controller_user;

/// The upstream names of the hooks, in the order they run.
pub const HOOKS: &[&str] = &[
    "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes",
    "start-kube-apiserver-identity-lease-controller",
    "start-cluster-authentication-info-controller",
    "start-legacy-token-tracking-controller",
];

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

/// `start-kube-apiserver-identity-lease-controller`: creates this server's lease and keeps it
/// renewed in the background for as long as the process runs.
pub async fn start_identity_lease(api: Arc<ApiResources>) -> Result<(), String> {
    let host = hostname();
    let name = api_server_id(&host);
    let holder = format!("{name}_{}", uuid::Uuid::new_v4());
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-system",
            "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver", "kubernetes.io/hostname": host}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": IDENTITY_LEASE_DURATION_SECONDS,
            "renewTime": micro_time_now()}});
    ensure(&api, "coordination.k8s.io", "v1", "leases", lease).await?;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDENTITY_LEASE_RENEW_INTERVAL).await;
            if let Err(e) = renew_lease(&api, &name, &holder).await {
                tracing::warn!(error = %e, "renewing the identity lease failed");
            }
        }
    });
    Ok(())
}

/// Sets the lease's holder and renew time, recreating it if it was deleted.
async fn renew_lease(api: &ApiResources, name: &str, holder: &str) -> Result<(), String> {
    let store = api
        .get("coordination.k8s.io", "v1", "leases")
        .ok_or("leases are not served")?;
    let user = controller_user();
    let current = store
        .get("kube-system", name, ResourceVersion::Unset)
        .await
        .ok()
        .and_then(|o| o.value().ok());
    let Some(mut lease) = current else {
        return Err(format!("lease {name} is gone"));
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
    fn api_server_ids_are_hashes_of_the_hostname() {
        let id = api_server_id("node-1");
        assert!(id.starts_with("apiserver-"));
        // 16 bytes are 26 base32 characters.
        assert_eq!(id.len(), "apiserver-".len() + 26);
        assert_ne!(id, api_server_id("node-2"));
        assert_eq!(id, api_server_id("node-1"));
    }
}
