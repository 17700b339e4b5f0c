//! Bootstrap data created by post-start hooks, as upstream's controlplane does: the system
//! namespaces and the `kubernetes` Service in `default`.

use std::sync::Arc;

use apiserver::endpoints::ApiResources;
use apiserver::registry::{Requester, WriteOptions};
use serde_json::json;
use storage::ListOptions;

use crate::controllers::controller_user;
use crate::strategies::ServiceIpAllocator;

pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates what is missing; existing objects are left as they are. Errors other than "already
/// exists" fail the hook (and so readiness).
pub async fn run(
    api: &Arc<ApiResources>,
    allocator: &ServiceIpAllocator,
    secure_port: u16,
) -> Result<(), String> {
    let user = controller_user();
    let requester = Requester { user: &user };
    // Rebuild the allocator from what is stored before anything allocates.
    if let Some(services) = api.get("", "v1", "services") {
        let all = services
            .list("", &ListOptions::default())
            .await
            .map_err(|s| s.message)?;
        for item in all.items {
            if let Ok(v) = item.value() {
                allocator.observe(&v);
            }
        }
    }
    let namespaces = api
        .get("", "v1", "namespaces")
        .ok_or("namespaces are not served")?;
    for ns in SYSTEM_NAMESPACES {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match namespaces
            .create(&requester, "", obj, &WriteOptions::default())
            .await
        {
            Ok(_) => {}
            Err(s) if s.code == 409 => {}
            Err(s) => return Err(format!("creating namespace {ns}: {}", s.message)),
        }
    }
    let services = api
        .get("", "v1", "services")
        .ok_or("services are not served")?;
    let ip = allocator.first_ip().to_string();
    allocator.reserve_ip(allocator.first_ip());
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": ip, "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}], "sessionAffinity": "None", "type": "ClusterIP"},
    });
    match services
        .create(&requester, "default", svc, &WriteOptions::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if s.code == 409 => Ok(()),
        Err(s) => Err(format!("creating the kubernetes service: {}", s.message)),
    }
}
