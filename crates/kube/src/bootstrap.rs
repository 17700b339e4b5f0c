//! Bootstrap data created by post-start hooks, as upstream's controlplane does (v1.36): the
//! `default` namespace (the others are `poststart`'s system namespaces controller's); the Service allocator rebuilt from storage and its IPAddress objects
//! repaired (upstream's repair controllers); the `kubernetes` Service in `default` with its
//! Endpoints and EndpointSlice pointing at the advertise address (upstream's
//! `kubernetesservice` controller and endpoint reconciler). The default ServiceCIDR is
//! `default_service_cidr`'s, a controller of its own as upstream's is. Servers sharing one etcd
//! leave the endpoints to `endpoint_reconciler`, which lists every live server.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use chrono::{SecondsFormat, Utc};
use rand::Rng;
use serde_json::{Value, json};
use storage::{ListOptions, ResourceVersion};

use crate::strategies::ServiceIpAllocator;
use crate::strategies::service_alloc::{
    IPALLOCATOR_MANAGER, apiserver_user, held_ips, ip_address_object,
};

/// The namespace of the `kubernetes` Service, made with it as upstream's controller makes it.
const DEFAULT_NAMESPACE: &str = "default";

/// The name of the `kubernetes` Service, its Endpoints and slice.
const KUBERNETES: &str = "kubernetes";

/// Creates what is missing and brings the `kubernetes` endpoints up to date with
/// `advertise_address` (`None`: they are left to the lease reconciler, or to nobody with
/// `--endpoint-reconciler-type=none`); other existing objects are left as they are. Errors other
/// than "already exists" fail the hook (and so readiness); the hook is retried.
pub async fn run(
    api: &Arc<ApiResources>,
    allocator: &Arc<ServiceIpAllocator>,
    advertise_address: Option<IpAddr>,
    secure_port: u16,
) -> Result<(), String> {
    let user = apiserver_user();
    let requester = Requester { user: &user };
    // The `default` namespace needs no allocation: it is made while the allocations are read
    // back (each waits on the store).
    let namespaces = served(api, "", "namespaces")?;
    let obj =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_NAMESPACE}});
    let (restored, namespace) = tokio::join!(
        restore_allocations(api, allocator, &requester),
        create_unless_exists(api, namespaces, &requester, "", obj)
    );
    restored?;
    namespace?;
    if allocator.is_shared() {
        // Other servers on the store: what stored Services hold is in the shared node port
        // bitmap, and the cluster IPs they allocate from now on are seen here.
        allocator.repair_shared_ports().await?;
        allocator.follow_ip_addresses(api);
    }
    allocator.mark_ready();
    ensure_kubernetes_service(api, allocator, &requester, secure_port).await?;
    match advertise_address {
        Some(ip) => ensure_kubernetes_endpoints(api, &[ip], secure_port).await,
        None => Ok(()),
    }
}

fn served<'a>(
    api: &'a ApiResources,
    group: &str,
    resource: &str,
) -> Result<&'a Arc<RegistryStore>, String> {
    let version = "v1";
    api.get(group, version, resource)
        .ok_or_else(|| format!("{resource} are not served"))
}

/// The manager upstream's own writes are recorded under (its loopback clients' User-Agent).
pub(crate) const API_SERVER_MANAGER: &str = "kube-apiserver";

/// The options of the server's own update of `store`.
pub(crate) fn own_update(api: &ApiResources, store: &RegistryStore) -> UpdateOptions {
    UpdateOptions {
        write: api.internal_write(store, API_SERVER_MANAGER),
        ..UpdateOptions::default()
    }
}

async fn create_unless_exists(
    api: &ApiResources,
    store: &RegistryStore,
    req: &Requester<'_>,
    ns: &str,
    obj: Value,
) -> Result<bool, String> {
    let what = format!("{} {}", obj.kind(), obj.name());
    let write = api.internal_write(store, API_SERVER_MANAGER);
    match store.create(req, ns, obj, &write).await {
        Ok(_) => Ok(true),
        Err(s) if s.code == 409 => Ok(false),
        Err(s) => Err(format!("creating {what}: {}", s.message)),
    }
}

async fn list_values(store: &RegistryStore) -> Result<Vec<Value>, String> {
    let all = store
        .list("", &ListOptions::default())
        .await
        .map_err(|s| s.message)?;
    Ok(all.items.iter().filter_map(|o| o.value().ok()).collect())
}

/// Rebuilds the allocator from stored Services and IPAddress objects, then repairs the
/// IPAddress objects: every cluster IP a Service holds has one, and the allocator's objects
/// whose Service no longer holds their address are deleted (upstream's `RepairIPAddress`).
async fn restore_allocations(
    api: &ApiResources,
    allocator: &ServiceIpAllocator,
    req: &Requester<'_>,
) -> Result<(), String> {
    let services = served(api, "", "services")?;
    let addresses = api.get("networking.k8s.io", "v1", "ipaddresses");
    // Both lists at once: each may wait for its watch cache's first list.
    let (services, objects) = tokio::join!(list_values(services), async {
        match addresses {
            Some(store) => list_values(store).await.map(Some),
            None => Ok(None),
        }
    });
    let services = services?;
    let mut held: Vec<(Ipv4Addr, String, String)> = Vec::new();
    for svc in &services {
        allocator.observe(svc);
        for ip in held_ips(svc) {
            if allocator.contains(ip) {
                held.push((ip, svc.namespace().to_string(), svc.name().to_string()));
            }
        }
    }
    let (Some(addresses), Some(objects)) = (addresses, objects?) else {
        return Ok(());
    };
    let mut existing: BTreeSet<String> = BTreeSet::new();
    for obj in &objects {
        let name = obj.name().to_string();
        let parent = |f: &str| {
            obj.pointer(&format!("/spec/parentRef/{f}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let ours = obj
            .pointer("/metadata/labels/ipaddress.kubernetes.io~1managed-by")
            .and_then(Value::as_str)
            == Some(IPALLOCATOR_MANAGER);
        let owner_holds = held.iter().any(|(ip, ns, n)| {
            ip.to_string() == name && *ns == parent("namespace") && *n == parent("name")
        });
        if ours && parent("resource") == "services" && !owner_holds {
            // Left behind by a Service that is gone (or a write that did not finish).
            let gone = addresses.delete(req, "", &name, &Default::default()).await;
            if let Err(s) = gone
                && s.code != 404
            {
                return Err(format!("deleting IPAddress {name}: {}", s.message));
            }
            continue;
        }
        // Any other address object holds its address.
        if let Ok(ip) = name.parse::<Ipv4Addr>()
            && allocator.contains(ip)
        {
            allocator.reserve_ip(ip);
        }
        existing.insert(name);
    }
    for (ip, ns, name) in held {
        if !existing.contains(&ip.to_string()) {
            create_unless_exists(api, addresses, req, "", ip_address_object(ip, &ns, &name))
                .await?;
        }
    }
    Ok(())
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn kubernetes_ports(secure_port: u16) -> Value {
    json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}])
}

/// The `kubernetes` Service: the range's first address, port 443 to the secure port.
async fn ensure_kubernetes_service(
    api: &ApiResources,
    allocator: &ServiceIpAllocator,
    req: &Requester<'_>,
    secure_port: u16,
) -> Result<(), String> {
    let services = served(api, "", "services")?;
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": KUBERNETES, "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": allocator.first_ip().to_string(), "ports": kubernetes_ports(secure_port), "sessionAffinity": "None", "type": "ClusterIP"},
    });
    // Looked up first: creating it again would ask for its address again, which the
    // allocator refuses before the name's conflict is seen (as upstream's does).
    let stored = match services
        .get("default", KUBERNETES, ResourceVersion::Unset)
        .await
    {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => {
            create_unless_exists(api, services, req, "default", svc).await?;
            return Ok(());
        }
        Err(s) => return Err(s.message),
    };
    // Restarted on another port: the Service follows, as upstream's controller updates it.
    let wanted = kubernetes_ports(secure_port);
    if stored.pointer("/spec/ports") == Some(&wanted) {
        return Ok(());
    }
    let mut updater = |cur: Option<&Value>| {
        let mut obj = cur.cloned().unwrap_or(Value::Null);
        obj["spec"]["ports"] = wanted.clone();
        Ok(obj)
    };
    services
        .update(
            req,
            "default",
            KUBERNETES,
            &mut updater,
            &own_update(api, services),
        )
        .await
        .map(|_| ())
        .map_err(|s| format!("updating the kubernetes service: {}", s.message))
}

/// The `kubernetes` Endpoints and EndpointSlice listing `addresses` (the API servers' advertise
/// addresses, of one family), as upstream's endpoint reconciler writes them (the Endpoints not
/// mirrored, the slice labelled with its Service, one endpoint per address).
pub(crate) async fn ensure_kubernetes_endpoints(
    api: &ApiResources,
    addresses: &[IpAddr],
    secure_port: u16,
) -> Result<(), String> {
    let user = apiserver_user();
    let req = &Requester { user: &user };
    let port = json!({"name": "https", "port": secure_port, "protocol": "TCP"});
    let ips: Vec<Value> = addresses
        .iter()
        .map(|ip| json!({"ip": ip.to_string()}))
        .collect();
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": KUBERNETES, "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": ips, "ports": [port.clone()]}],
    });
    ensure(
        api,
        served(api, "", "endpoints")?,
        req,
        endpoints,
        &["subsets"],
    )
    .await?;
    let address_type = if addresses.first().is_some_and(IpAddr::is_ipv6) {
        "IPv6"
    } else {
        "IPv4"
    };
    let slice_endpoints: Vec<Value> = addresses
        .iter()
        .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
        .collect();
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": KUBERNETES, "namespace": "default", "labels": {"kubernetes.io/service-name": KUBERNETES}},
        "addressType": address_type,
        "endpoints": slice_endpoints,
        "ports": [port],
    });
    ensure(
        api,
        served(api, "discovery.k8s.io", "endpointslices")?,
        req,
        slice,
        &["addressType", "endpoints", "ports"],
    )
    .await
}

/// The addresses the `kubernetes` Endpoints list, `None` when there are none or they are not
/// one subset (the form the endpoint reconcilers write).
pub(crate) async fn kubernetes_endpoint_addresses(
    api: &ApiResources,
) -> Result<Option<Vec<IpAddr>>, String> {
    let store = served(api, "", "endpoints")?;
    let endpoints = match store
        .get("default", KUBERNETES, ResourceVersion::Unset)
        .await
    {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => return Ok(None),
        Err(s) => return Err(s.message),
    };
    let Some([subset]) = endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    else {
        return Ok(None);
    };
    Ok(Some(
        subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip")?.as_str()?.parse().ok())
            .collect(),
    ))
}

/// Creates `desired`, or brings the `fields` of the stored object to it. Endpoints of a
/// loopback address (the default advertise address of a server bound to 127.0.0.1) fail
/// endpoint validation, which upstream's reconciler also meets; they are written to storage
/// as they are, so that the `kubernetes` Service still has its endpoints.
async fn ensure(
    api: &ApiResources,
    store: &RegistryStore,
    req: &Requester<'_>,
    desired: Value,
    fields: &[&str],
) -> Result<(), String> {
    let ns = desired.namespace().to_string();
    let name = desired.name().to_string();
    let current = match store.get(&ns, &name, ResourceVersion::Unset).await {
        Ok(o) => Some(o),
        Err(s) if s.code == 404 => None,
        Err(s) => return Err(s.message),
    };
    let Some(current) = current else {
        return match store
            .create(
                req,
                &ns,
                desired.clone(),
                &api.internal_write(store, API_SERVER_MANAGER),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code == 422 => store_as_is(store, desired, None).await,
            Err(s) if s.code == 409 => Ok(()),
            Err(s) => Err(format!("creating {} {name}: {}", desired.kind(), s.message)),
        };
    };
    let stored = current.value().map_err(|e| e.to_string())?;
    let mut wanted = stored.clone();
    for f in fields {
        if let Some(v) = desired.get(*f) {
            wanted[*f] = v.clone();
        }
    }
    if let Some(labels) = desired
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    {
        for (k, v) in labels {
            wanted["metadata"]["labels"][k] = v.clone();
        }
    }
    if wanted == stored {
        return Ok(());
    }
    let mut updater = |_: Option<&Value>| Ok(wanted.clone());
    let opts = own_update(api, store);
    match store.update(req, &ns, &name, &mut updater, &opts).await {
        Ok(_) => Ok(()),
        Err(s) if s.code == 422 => {
            store_as_is(store, wanted.clone(), Some(current.resource_version)).await
        }
        Err(s) => Err(format!("updating {} {name}: {}", desired.kind(), s.message)),
    }
}

/// A random (version 4) UUID, for objects written without the store's create.
fn uuid_v4() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Writes an object the store's validation refuses: system fields as the store would set them.
async fn store_as_is(
    store: &RegistryStore,
    mut obj: Value,
    resource_version: Option<i64>,
) -> Result<(), String> {
    let key = store.key(obj.namespace(), obj.name());
    store.strategy.default(&mut obj);
    let result = match resource_version {
        Some(rv) => store.storage.update(&key, obj, rv).await,
        None => {
            obj.set_meta("uid", uuid_v4());
            obj.set_meta("creationTimestamp", now());
            if store.info.tracks_generation {
                obj.set_meta("generation", 1);
            }
            store.storage.create(&key, obj).await
        }
    };
    match result {
        Ok(_) | Err(storage::StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(format!("writing {key}: {e}")),
    }
}
