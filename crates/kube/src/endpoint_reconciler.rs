//! The `kubernetes` Service's endpoints when several servers share one etcd: upstream's lease
//! endpoint reconciler (`--endpoint-reconciler-type=lease`, the default;
//! pkg/controlplane/reconcilers/lease.go). Every `INTERVAL` each server writes
//! `<prefix>/masterleases/<its advertise address>` attached to an etcd lease of `TTL`, lists the
//! addresses under `masterleases`, and sets the Endpoints and EndpointSlice `kubernetes` to all of
//! them: a server that stops (or is killed) drops out once its lease expires and another server
//! reconciles. At shutdown a server deletes its lease and rewrites the endpoints without it at
//! once (upstream's `RemoveEndpoints`).
//!
//! It owns the lease keys and the loop; the Service and how its endpoints are written are
//! `bootstrap`'s. It needs etcd's leases, so the embedded store keeps writing this server's
//! address alone (it serves one process anyway).
//!
//! `MasterCountReconciler` is upstream's deprecated `master-count` type
//! (pkg/controlplane/reconcilers/instancecount.go): every server adds its own address to the
//! Endpoints and trims them to `--apiserver-count`, on either backend.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use apiserver::endpoints::ApiResources;
use bytes::Bytes;
use serde_json::json;
use storage::{EtcdKv, Kv, prefix_end};
use tokio::sync::watch;

/// Upstream's `DefaultEndpointReconcilerInterval`.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Upstream's `DefaultEndpointReconcilerTTL`: a lease outlives one missed reconcile.
pub const TTL: Duration = Duration::from_secs(15);

/// One server's lease reconciler.
pub struct LeaseReconciler {
    pub etcd: Arc<EtcdKv>,
    /// `--etcd-prefix`.
    pub prefix: String,
    /// `--advertise-address`.
    pub advertise: IpAddr,
    /// The port the endpoints name (the secure port).
    pub port: u16,
}

impl LeaseReconciler {
    /// `<prefix>/masterleases/`, upstream's base key of the leases.
    fn base_key(&self) -> String {
        format!("{}/masterleases/", self.prefix.trim_end_matches('/'))
    }

    /// The addresses of every server holding a lease: the keys under the base key are named by
    /// the address (upstream's `path.Join(baseKey, ip)`).
    async fn leased_addresses(&self) -> Result<Vec<IpAddr>, String> {
        let base = self.base_key();
        let listed = self
            .etcd
            .range(&base, &prefix_end(&base), 0, 0)
            .await
            .map_err(|e| format!("listing {base}: {e}"))?;
        Ok(listed
            .kvs
            .iter()
            .filter_map(|kv| kv.key.get(base.len()..)?.parse().ok())
            .collect())
    }

    /// Renews this server's lease, then writes the endpoints of every server holding one
    /// (upstream's `ReconcileEndpoints`).
    pub async fn reconcile(&self, api: &ApiResources) -> Result<(), String> {
        let base = self.base_key();
        let ip = self.advertise.to_string();
        // The value is upstream's: an Endpoints named by the address, listing it.
        let value = json!({
            "kind": "Endpoints",
            "apiVersion": "v1",
            "metadata": {"name": ip, "creationTimestamp": null},
            "subsets": [{"addresses": [{"ip": ip}]}],
        });
        self.etcd
            .put_with_ttl(&format!("{base}{ip}"), Bytes::from(value.to_string()), TTL)
            .await
            .map_err(|e| format!("renewing the lease of {ip}: {e}"))?;
        let addresses = self.leased_addresses().await?;
        if addresses.is_empty() {
            return Err("no API server IP addresses were listed in storage, refusing to erase all endpoints for the kubernetes Service".into());
        }
        crate::bootstrap::ensure_kubernetes_endpoints(api, &addresses, self.port).await
    }

    /// Upstream's `RemoveEndpoints`: deletes this server's lease and writes the endpoints of
    /// the servers left, so that clients stop being sent here at once rather than when the
    /// lease expires. The last server leaves the endpoints as they are: there is no address
    /// left to write, and an Endpoints subset needs one.
    pub async fn remove(&self, api: &ApiResources) -> Result<(), String> {
        let base = self.base_key();
        let ip = self.advertise.to_string();
        self.etcd
            .delete(&format!("{base}{ip}"), None)
            .await
            .map_err(|e| format!("removing the lease of {ip}: {e}"))?;
        let addresses = self.leased_addresses().await?;
        if addresses.is_empty() {
            return Ok(());
        }
        crate::bootstrap::ensure_kubernetes_endpoints(api, &addresses, self.port).await
    }
}

/// One server's master-count reconciler: no leases, only the addresses listed in the Endpoints
/// and the number of servers every one of them is told (`--apiserver-count`).
pub struct MasterCountReconciler {
    /// `--advertise-address`.
    pub advertise: IpAddr,
    /// The port the endpoints name (the secure port).
    pub port: u16,
    /// `--apiserver-count`.
    pub count: usize,
}

impl MasterCountReconciler {
    /// Upstream's `ReconcileEndpoints` of this type.
    pub async fn reconcile(&self, api: &ApiResources) -> Result<(), String> {
        let listed = crate::bootstrap::kubernetes_endpoint_addresses(api).await?;
        let addresses = master_count_addresses(listed.as_deref(), self.advertise, self.count);
        crate::bootstrap::ensure_kubernetes_endpoints(api, &addresses, self.port).await
    }

    /// Upstream's `RemoveEndpoints` of this type: this server's address taken out. The last
    /// server leaves the endpoints as they are, as the lease reconciler does.
    pub async fn remove(&self, api: &ApiResources) -> Result<(), String> {
        let Some(listed) = crate::bootstrap::kubernetes_endpoint_addresses(api).await? else {
            return Ok(());
        };
        let left: Vec<IpAddr> = listed
            .into_iter()
            .filter(|a| *a != self.advertise)
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        crate::bootstrap::ensure_kubernetes_endpoints(api, &left, self.port).await
    }
}

/// A server's reconciler of the `kubernetes` endpoints, of either type.
pub enum EndpointReconciler {
    Lease(LeaseReconciler),
    MasterCount(MasterCountReconciler),
}

impl EndpointReconciler {
    async fn reconcile(&self, api: &ApiResources) -> Result<(), String> {
        match self {
            Self::Lease(r) => r.reconcile(api).await,
            Self::MasterCount(r) => r.reconcile(api).await,
        }
    }

    async fn remove(&self, api: &ApiResources) -> Result<(), String> {
        match self {
            Self::Lease(r) => r.remove(api).await,
            Self::MasterCount(r) => r.remove(api).await,
        }
    }

    /// Reconciles now and every `INTERVAL` until `stop` turns true (or its sender goes);
    /// failures are logged and retried at the next tick, as upstream's controller does. Then,
    /// as upstream's controller at shutdown, stops reconciling and removes this server from the
    /// endpoints, giving up after two intervals when storage does not answer.
    pub async fn run(self, api: Arc<ApiResources>, mut stop: watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                break;
            }
            if let Err(error) = self.reconcile(&api).await {
                tracing::warn!(%error, "reconciling the kubernetes endpoints");
            }
            tokio::select! {
                _ = tokio::time::sleep(INTERVAL) => {}
                changed = stop.changed() => if changed.is_err() { break },
            }
        }
        tracing::info!("shutting down kubernetes service endpoint reconciler");
        match tokio::time::timeout(2 * INTERVAL, self.remove(&api)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::error!(%error, "unable to remove endpoints from kubernetes service")
            }
            Err(_) => tracing::warn!("RemoveEndpoints() timed out"),
        }
    }
}

/// The addresses the master-count rule writes, given those the Endpoints list (`None`: no
/// Endpoints, or not in the one-subset form, which upstream re-makes with this server alone).
/// Kept as they are when this server is listed and there are at most `count`; else this server
/// is added, the list sorted as upstream's `RepackSubsets` sorts it, and addresses after this
/// server's (wrapping around) are dropped until `count` are left — upstream's walk, whose index
/// does not follow a removal before it.
pub fn master_count_addresses(listed: Option<&[IpAddr]>, own: IpAddr, count: usize) -> Vec<IpAddr> {
    let Some(listed) = listed else {
        return vec![own];
    };
    if listed.contains(&own) && listed.len() <= count {
        return listed.to_vec();
    }
    let mut addresses: Vec<IpAddr> = listed.to_vec();
    addresses.push(own);
    addresses.sort_by_key(|a| a.to_string());
    addresses.dedup();
    if let Some(i) = addresses.iter().position(|a| *a == own) {
        while addresses.len() > count.max(1) {
            let remove = (i + 1) % addresses.len();
            addresses.remove(remove);
        }
    }
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// The cases of upstream's `TestMasterCountEndpointReconciler` that decide the addresses.
    #[test]
    fn master_count_follows_upstreams_rule() {
        let own: IpAddr = "1.2.3.4".parse().unwrap();
        let rule = |listed: Option<&[&str]>, count| {
            let listed = listed.map(ips);
            master_count_addresses(listed.as_deref(), own, count)
        };
        assert_eq!(rule(None, 1), ips(&["1.2.3.4"]), "no endpoints");
        assert_eq!(
            rule(Some(&["1.2.3.4"]), 1),
            ips(&["1.2.3.4"]),
            "exactly right"
        );
        assert_eq!(
            rule(Some(&["1.2.3.4", "4.3.2.1"]), 2),
            ips(&["1.2.3.4", "4.3.2.1"]),
            "both listed"
        );
        assert_eq!(
            rule(Some(&["4.3.2.1"]), 2),
            ips(&["1.2.3.4", "4.3.2.1"]),
            "this one added"
        );
        assert_eq!(rule(Some(&["4.3.2.1"]), 1), ips(&["1.2.3.4"]), "replaced");
        assert_eq!(
            rule(Some(&["1.2.3.4", "4.3.2.1", "4.3.2.2", "4.3.2.3"]), 2),
            ips(&["1.2.3.4", "4.3.2.3"]),
            "trimmed after ours"
        );
        assert_eq!(
            rule(Some(&["4.3.2.1", "1.2.3.4", "4.3.2.2"]), 2),
            ips(&["1.2.3.4", "4.3.2.2"]),
            "one extra"
        );
        assert_eq!(
            rule(Some(&["1.1.1.1", "2.2.2.2", "3.3.3.3"]), 1),
            ips(&["1.2.3.4"]),
            "others only"
        );
        // Upstream's "too many" cases, with their expected updates.
        assert_eq!(rule(Some(&["1.2.3.4", "4.3.2.1"]), 1), ips(&["1.2.3.4"]));
        let five = ["1.2.3.4", "4.3.2.1", "4.3.2.2", "4.3.2.3", "4.3.2.4"];
        assert_eq!(
            rule(Some(&five), 4),
            ips(&["1.2.3.4", "4.3.2.2", "4.3.2.3", "4.3.2.4"])
        );
        assert_eq!(
            master_count_addresses(Some(&ips(&five)), "4.3.2.4".parse().unwrap(), 4),
            ips(&["4.3.2.1", "4.3.2.2", "4.3.2.3", "4.3.2.4"]),
            "the first one goes when this server is last"
        );
    }
}
