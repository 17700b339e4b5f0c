//! Where Services get their cluster IPs and node ports, as upstream's service REST storage
//! (`pkg/registry/core/service/storage/alloc.go`) with its IP and port allocators
//! (`pkg/registry/core/service/ipallocator`, `portallocator`):
//!
//! - `ServiceIpAllocator` holds what is taken, in memory: addresses of
//!   `--service-cluster-ip-range` and ports of `--service-node-port-range`. It is rebuilt from
//!   stored Services and IPAddress objects at start (`bootstrap`), and refuses to allocate until
//!   then.
//! - Every allocated cluster IP is an `IPAddress` object (networking.k8s.io/v1) named by the
//!   address, whose parentRef names the Service, as v1.36's allocator keeps them: creating it is
//!   what takes the address (a name that exists is an address already allocated), deleting it
//!   releases the address.
//! - `begin_create` / `begin_update` are upstream's `allocateCreate` / `allocateUpdate`:
//!   IP family fields initialized and pre-validated, cluster IPs and node ports allocated, the
//!   ones no longer held released once the write is stored (or the new ones when it is not).
//!   A dry run allocates nothing and answers as upstream: the range's network address
//!   (`10.0.0.0`) and node ports counted from 32769.
//! - Several servers on one etcd (`share_node_ports`): node ports are also taken in the stored
//!   bitmap every replica reads, upstream's `RangeAllocation` at `<prefix>/ranges/servicenodeports`
//!   written with a compare-and-swap (upstream's etcd-backed allocator), so that two replicas never
//!   hand out one port; and the in-memory view of cluster IPs follows every replica's IPAddress
//!   objects (`follow_ip_addresses`), while a create that meets an existing IPAddress still moves
//!   on to another address, as upstream's allocator does.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use apimachinery::Status;
use apimachinery::validation::{FieldError, FieldPath, invalid_status};
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, Finish, Requester};
use rand::Rng;
use serde_json::{Value, json};

use super::service::{
    cluster_ips, ip_families, needs_cluster_ip, needs_health_check, needs_node_port, spec_str,
    svc_type, validate_cluster_ips_related_fields,
};

/// `ipaddress.kubernetes.io/managed-by` of the addresses Services hold (upstream's
/// `ipallocator.ControllerName`).
pub const IPALLOCATOR_MANAGER: &str = "ipallocator.k8s.io";
const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";
const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";

/// How long an allocation waits for the allocator to be rebuilt at start before failing as
/// upstream's not-ready allocator does.
const READY_WAIT: Duration = Duration::from_secs(30);

/// The part of a range kept for static allocation, which dynamic allocation uses last
/// (upstream's `calculateRangeOffset`: `min(max(min, size/step), max)`, none for small ranges).
fn range_offset(size: u64, min: u64, step: u64, max: u64) -> u64 {
    if size <= min {
        return 0;
    }
    (size / step).clamp(min, max)
}

pub struct ServiceIpAllocator {
    /// The range as given, e.g. `10.0.0.0/24`, for messages and the default ServiceCIDR.
    cidr: String,
    network: u32,
    /// The first and last assignable addresses: the network and broadcast addresses are not.
    first: u32,
    last: u32,
    /// Where dynamic allocation starts (the lower band is kept for static requests).
    dynamic_first: u32,
    ips: Mutex<BTreeSet<u32>>,
    port_range: (u16, u16),
    dynamic_port_first: u16,
    node_ports: Mutex<BTreeSet<u16>>,
    ready: AtomicBool,
    ready_notify: tokio::sync::Notify,
    /// The node-port bitmap in storage, when several servers share the store.
    shared_ports: OnceLock<SharedPorts>,
    /// Whether the IPAddress follower has been started (it runs once per process).
    following: AtomicBool,
}

impl ServiceIpAllocator {
    /// `cidr` like `10.0.0.0/24` (IPv4: Ironplane serves single-stack IPv4 clusters), `ports`
    /// like `30000-32767`.
    pub fn new(cidr: &str, ports: &str) -> Result<Self, String> {
        let (addr, bits) = cidr
            .split_once('/')
            .ok_or_else(|| format!("invalid CIDR {cidr:?}"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("invalid CIDR {cidr:?}: only IPv4 ranges are supported"))?;
        let bits: u32 = bits
            .parse()
            .ok()
            .filter(|b| (8..=30).contains(b))
            .ok_or_else(|| format!("invalid prefix length in {cidr:?}"))?;
        let size = 1u64 << (32 - bits);
        let network = u32::from(addr) & !((size - 1) as u32);
        let first = network + 1;
        let last = network + (size - 2) as u32;
        let offset = range_offset(size, 16, 16, 256) as u32;
        let (lo, hi) = ports
            .split_once('-')
            .ok_or_else(|| format!("invalid port range {ports:?}"))?;
        let parse = |p: &str| {
            p.trim()
                .parse::<u16>()
                .map_err(|_| format!("invalid port range {ports:?}"))
        };
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi {
            return Err(format!("invalid port range {ports:?}"));
        }
        let port_offset = range_offset(u64::from(hi - lo) + 1, 16, 32, 128) as u16;
        Ok(Self {
            cidr: format!("{}/{bits}", Ipv4Addr::from(network)),
            network,
            first,
            last,
            dynamic_first: (first + offset).min(last),
            ips: Mutex::new(BTreeSet::new()),
            port_range: (lo, hi),
            dynamic_port_first: lo.saturating_add(port_offset).min(hi),
            node_ports: Mutex::new(BTreeSet::new()),
            ready: AtomicBool::new(false),
            ready_notify: tokio::sync::Notify::new(),
            shared_ports: OnceLock::new(),
            following: AtomicBool::new(false),
        })
    }

    /// Node ports are taken in the bitmap stored under `prefix` as well as in memory, and the
    /// cluster IPs in memory follow the stored IPAddress objects: for servers sharing one etcd.
    /// The bitmap is written in `codec`'s media type (the server's `--storage-media-type`, so
    /// protobuf on etcd as kube-apiserver writes it) and read in any.
    pub fn share_node_ports(
        &self,
        kv: Arc<dyn storage::Kv>,
        prefix: &str,
        codec: Arc<dyn storage::StorageCodec>,
    ) {
        let _ = self.shared_ports.set(SharedPorts {
            kv,
            codec,
            key: format!("{}/ranges/servicenodeports", prefix.trim_end_matches('/')),
            range: self.port_range_string(),
            first: self.port_range.0,
        });
    }

    /// Whether other servers allocate from the same store (see `share_node_ports`).
    pub fn is_shared(&self) -> bool {
        self.shared_ports.get().is_some()
    }

    /// Takes `port` in the stored bitmap too, when it is shared: `Ok(false)` when another server
    /// holds it (it stays taken in memory).
    async fn take_shared_port(&self, port: u16) -> Result<bool, String> {
        let Some(shared) = self.shared_ports.get() else {
            return Ok(true);
        };
        shared.update(&[port], true).await
    }

    /// Releases `port` in the stored bitmap too, when it is shared.
    async fn release_shared_port(&self, port: u16) {
        if let Some(shared) = self.shared_ports.get()
            && let Err(error) = shared.update(&[port], false).await
        {
            tracing::warn!(port, %error, "releasing a node port in storage");
        }
    }

    /// Records in the stored bitmap the node ports that stored Services hold (upstream's node
    /// port repair, which keeps the bitmap a superset of what Services hold).
    pub async fn repair_shared_ports(&self) -> Result<(), String> {
        let Some(shared) = self.shared_ports.get() else {
            return Ok(());
        };
        let held: Vec<u16> = self
            .node_ports
            .lock()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        shared.update(&held, true).await.map(|_| ())
    }

    /// Replaces the in-memory node ports with the stored bitmap (the ports other servers
    /// released become free here too); used when the in-memory view looks full.
    async fn reload_shared_ports(&self) -> Result<(), String> {
        let Some(shared) = self.shared_ports.get() else {
            return Ok(());
        };
        let (stored, _) = shared.read().await?;
        let ports: BTreeSet<u16> = shared.ports(&stored).collect();
        if let Ok(mut s) = self.node_ports.lock() {
            *s = ports;
        }
        Ok(())
    }

    /// Keeps the in-memory cluster IPs in step with the stored IPAddress objects, which other
    /// servers on the same store create and delete, until the process ends. Started once.
    pub fn follow_ip_addresses(self: &Arc<Self>, api: &ApiResources) {
        let Some(store) = api.get("networking.k8s.io", "v1", "ipaddresses").cloned() else {
            return;
        };
        if self.following.swap(true, Ordering::SeqCst) {
            return;
        }
        let this = self.clone();
        tokio::spawn(apiserver::registry::reflector::run(store, move |delta| {
            let ip_of = |o: &Value| {
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .and_then(|n| n.parse::<Ipv4Addr>().ok())
                    .filter(|ip| this.contains(*ip))
            };
            match delta {
                // Only additions: an address this server is allocating may not be stored yet.
                apiserver::registry::reflector::Delta::Replace(all) => {
                    for ip in all.iter().filter_map(ip_of) {
                        this.reserve_ip(ip);
                    }
                }
                apiserver::registry::reflector::Delta::Upsert(o) => {
                    if let Some(ip) = ip_of(&o) {
                        this.reserve_ip(ip);
                    }
                }
                // A late deletion may free an address this server has allocated again since:
                // creating its IPAddress would then fail, and the allocation moves on.
                apiserver::registry::reflector::Delta::Deleted(o) => {
                    if let Some(ip) = ip_of(&o) {
                        this.release_ip(ip);
                    }
                }
            }
        }));
    }

    /// The range, in canonical form (`10.0.0.0/24`).
    pub fn cidr(&self) -> &str {
        &self.cidr
    }

    /// The first address of the range, which upstream gives the `kubernetes` Service.
    pub fn first_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.first)
    }

    /// What a dry run answers for an address it does not allocate: the range's network address.
    fn dry_run_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network)
    }

    /// Whether an address may be assigned at all (within the range, not its network or
    /// broadcast address).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        (self.first..=self.last).contains(&u32::from(ip))
    }

    /// Takes an address; false when it is taken already.
    pub fn reserve_ip(&self, ip: Ipv4Addr) -> bool {
        self.ips
            .lock()
            .map(|mut s| s.insert(u32::from(ip)))
            .unwrap_or(false)
    }

    pub fn release_ip(&self, ip: Ipv4Addr) {
        if let Ok(mut s) = self.ips.lock() {
            s.remove(&u32::from(ip));
        }
    }

    /// A free address, taken: from a random point of the upper band first, then of the
    /// lower band, as upstream's `allocateNextService`.
    pub fn allocate_ip(&self) -> Option<Ipv4Addr> {
        let mut ips = self.ips.lock().ok()?;
        // Half-open bands.
        let bands = [
            (self.dynamic_first, self.last + 1),
            (self.first, self.dynamic_first),
        ];
        for (lo, hi) in bands {
            let span = hi.saturating_sub(lo);
            if span == 0 {
                continue;
            }
            let start = rand::rng().random_range(0..span);
            if let Some(n) = (0..span)
                .map(|i| lo + (start + i) % span)
                .find(|n| ips.insert(*n))
            {
                return Some(Ipv4Addr::from(n));
            }
        }
        None
    }

    /// `30000-32767`, as upstream prints the range in its errors.
    fn port_range_string(&self) -> String {
        format!("{}-{}", self.port_range.0, self.port_range.1)
    }

    fn port_in_range(&self, port: i64) -> Option<u16> {
        u16::try_from(port)
            .ok()
            .filter(|p| (self.port_range.0..=self.port_range.1).contains(p))
    }

    fn port_taken(&self, port: i64) -> bool {
        u16::try_from(port).is_ok_and(|p| self.node_ports.lock().is_ok_and(|s| s.contains(&p)))
    }

    /// Takes a port; false when it is taken already.
    pub fn reserve_port(&self, port: u16) -> bool {
        self.node_ports
            .lock()
            .map(|mut s| s.insert(port))
            .unwrap_or(false)
    }

    pub fn release_port(&self, port: u16) {
        if let Ok(mut s) = self.node_ports.lock() {
            s.remove(&port);
        }
    }

    /// A free port, taken: upper band first, as upstream's port allocator.
    pub fn allocate_port(&self) -> Option<u16> {
        let mut ports = self.node_ports.lock().ok()?;
        let (lo, hi) = (u32::from(self.port_range.0), u32::from(self.port_range.1));
        let mid = u32::from(self.dynamic_port_first);
        for (from, to) in [(mid, hi + 1), (lo, mid)] {
            let span = to.saturating_sub(from);
            if span == 0 {
                continue;
            }
            let start = rand::rng().random_range(0..span);
            if let Some(p) = (0..span)
                .filter_map(|i| u16::try_from(from + (start + i) % span).ok())
                .find(|p| ports.insert(*p))
            {
                return Some(p);
            }
        }
        None
    }

    /// Records what a stored Service holds, when the allocator is rebuilt at start.
    pub fn observe(&self, svc: &Value) {
        for ip in held_ips(svc) {
            if self.contains(ip) {
                self.reserve_ip(ip);
            }
        }
        for p in held_ports(svc) {
            if let Some(p) = self.port_in_range(p) {
                self.reserve_port(p);
            }
        }
    }

    /// The allocator holds everything stored: allocations may start.
    pub fn mark_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
        self.ready_notify.notify_waiters();
    }

    /// Returns once the allocator holds everything stored (the first repair pass is done).
    pub async fn until_ready(&self) {
        loop {
            let notified = self.ready_notify.notified();
            if self.ready.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    async fn wait_ready(&self) -> bool {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        loop {
            let notified = self.ready_notify.notified();
            if self.ready.load(Ordering::SeqCst) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.ready.load(Ordering::SeqCst);
            }
        }
    }
}

/// Upstream's `RangeAllocation` of node ports in storage: `data` is a bitmap, bit `i` for port
/// `first + i`, as the bytes of a big-endian integer (Go's `big.Int.Bytes`). Written in the
/// server's storage media type and read in any (kube-apiserver writes it in protobuf); a stored
/// value that does not decode fails the allocation rather than being overwritten. The bitmap
/// decides: the in-memory set only spares the store the ports this server already knows are
/// taken.
struct SharedPorts {
    kv: Arc<dyn storage::Kv>,
    codec: Arc<dyn storage::StorageCodec>,
    key: String,
    range: String,
    first: u16,
}

/// How often a compare-and-swap of the bitmap is retried before the allocation fails.
const SHARED_RETRIES: usize = 256;

impl SharedPorts {
    /// The stored bitmap and the revision to compare against (`None`: no bitmap stored yet).
    async fn read(&self) -> Result<(Vec<u8>, Option<i64>), String> {
        use base64::Engine as _;
        let (found, _) = self
            .kv
            .get(&self.key)
            .await
            .map_err(|e| format!("reading {}: {e}", self.key))?;
        let Some(kv) = found else {
            return Ok((Vec::new(), None));
        };
        let (obj, _) = storage::read_stored(self.codec.as_ref(), &kv.value)
            .map_err(|e| format!("reading {}: {e}", self.key))?;
        let range = obj.get("range").and_then(Value::as_str).unwrap_or("");
        if range != self.range {
            return Err(format!(
                "the stored node port range {range:?} is not --service-node-port-range {:?}",
                self.range
            ));
        }
        let data = obj.get("data").and_then(Value::as_str).unwrap_or("");
        let data = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("reading {}: {e}", self.key))?;
        Ok((data, Some(kv.mod_revision)))
    }

    fn ports<'a>(&'a self, data: &'a [u8]) -> impl Iterator<Item = u16> + 'a {
        data.iter().rev().enumerate().flat_map(move |(byte, bits)| {
            (0..8)
                .filter(move |b| (*bits >> *b) & 1 == 1)
                .filter_map(move |b| u16::try_from(byte * 8 + b).ok())
                .filter_map(move |i| self.first.checked_add(i))
        })
    }

    /// Sets (`take`) or clears the bits of `ports` with a compare-and-swap, retried on
    /// conflicts. Taking answers false, writing nothing, when one of them is set already.
    async fn update(&self, ports: &[u16], take: bool) -> Result<bool, String> {
        use base64::Engine as _;
        for _ in 0..SHARED_RETRIES {
            let (mut data, revision) = self.read().await?;
            let mut changed = false;
            for port in ports {
                let Some(i) = port.checked_sub(self.first).map(usize::from) else {
                    continue;
                };
                let is_set = bit(&data, i);
                if take && is_set {
                    if ports.len() == 1 {
                        return Ok(false);
                    }
                    continue;
                }
                if is_set != take {
                    set_bit(&mut data, i, take);
                    changed = true;
                }
            }
            if !changed {
                return Ok(true);
            }
            let obj = json!({
                "kind": "RangeAllocation",
                "apiVersion": "v1",
                "metadata": {"creationTimestamp": null},
                "range": self.range,
                "data": base64::engine::general_purpose::STANDARD.encode(&data),
            });
            let value = match self.codec.encode(&obj) {
                Ok(Some(encoded)) => bytes::Bytes::from(encoded),
                Ok(None) => bytes::Bytes::from(obj.to_string()),
                Err(e) => return Err(format!("writing {}: {e}", self.key)),
            };
            let written = match revision {
                None => self.kv.create(&self.key, value).await,
                Some(rev) => self.kv.update(&self.key, value, rev).await,
            }
            .map_err(|e| format!("writing {}: {e}", self.key))?;
            if let storage::TxnOutcome::Succeeded { .. } = written {
                return Ok(true);
            }
        }
        Err(format!("writing {}: too many conflicts", self.key))
    }
}

/// Bit `i` of a big-endian integer's bytes.
fn bit(data: &[u8], i: usize) -> bool {
    let byte = i / 8;
    byte < data.len() && (data[data.len() - 1 - byte] >> (i % 8)) & 1 == 1
}

/// Sets or clears bit `i`, keeping the bytes minimal as Go's `big.Int.Bytes` (no leading zeros).
fn set_bit(data: &mut Vec<u8>, i: usize, on: bool) {
    let byte = i / 8;
    if byte >= data.len() {
        if !on {
            return;
        }
        let mut grown = vec![0u8; byte + 1 - data.len()];
        grown.append(data);
        *data = grown;
    }
    let at = data.len() - 1 - byte;
    if on {
        data[at] |= 1 << (i % 8);
    } else {
        data[at] &= !(1 << (i % 8));
    }
    let zeros = data.iter().take_while(|b| **b == 0).count();
    data.drain(..zeros);
}

/// The cluster IPs a stored Service holds (IPv4 addresses, `None` aside).
pub fn held_ips(svc: &Value) -> Vec<Ipv4Addr> {
    if svc_type(svc) == "ExternalName" {
        return Vec::new();
    }
    let mut ips: Vec<Ipv4Addr> = cluster_ips(svc)
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    if ips.is_empty()
        && let Ok(ip) = spec_str(svc, "clusterIP").parse()
    {
        ips.push(ip);
    }
    ips
}

/// The node ports a stored Service holds, its health check node port included.
pub fn held_ports(svc: &Value) -> Vec<i64> {
    let mut ports: Vec<i64> = ports_of(svc)
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|p| *p != 0)
        .collect();
    if let Some(hc) = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .filter(|p| *p != 0)
    {
        ports.push(hc);
    }
    ports
}

fn ports_of(svc: &Value) -> &[Value] {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The identity in-process writers of IPAddress objects act as (upstream's loopback client).
pub fn apiserver_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        uid: String::new(),
        groups: vec!["system:authenticated".into(), "system:masters".into()],
        extra: Default::default(),
    }
}

/// The IPAddress object an allocated cluster IP is: named by the address, owned by the Service.
pub fn ip_address_object(ip: Ipv4Addr, namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip.to_string(),
            "labels": {LABEL_IP_FAMILY: "IPv4", LABEL_MANAGED_BY: IPALLOCATOR_MANAGER},
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": namespace, "name": name}},
    })
}

/// Creates and deletes the IPAddress objects of allocated addresses.
#[derive(Clone)]
pub struct IpAddresses {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

/// Why an IPAddress could not be created.
enum CreateFailure {
    /// The address is held already (the object exists).
    Taken,
    Other(Status),
}

impl IpAddresses {
    fn store(&self) -> Option<&Arc<apiserver::registry::RegistryStore>> {
        self.api
            .get()?
            .get("networking.k8s.io", "v1", "ipaddresses")
    }

    async fn create(&self, ip: Ipv4Addr, namespace: &str, name: &str) -> Result<(), CreateFailure> {
        let (Some(api), Some(store)) = (self.api.get(), self.store()) else {
            // Served without the networking group: the in-memory allocator alone decides.
            return Ok(());
        };
        let user = apiserver_user();
        // Upstream's allocator writes through the loopback client: its objects carry the
        // `kube-apiserver` Update entry.
        let write = api.internal_write(store, crate::bootstrap::API_SERVER_MANAGER);
        match store
            .create(
                &Requester { user: &user },
                "",
                ip_address_object(ip, namespace, name),
                &write,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code == 409 => Err(CreateFailure::Taken),
            Err(s) => Err(CreateFailure::Other(s)),
        }
    }

    /// Deletes the object of an address (a missing one is fine).
    pub async fn delete(&self, ip: Ipv4Addr) {
        let Some(store) = self.store() else {
            return;
        };
        let user = apiserver_user();
        if let Err(s) = store
            .delete(
                &Requester { user: &user },
                "",
                &ip.to_string(),
                &DeleteOptions::default(),
            )
            .await
            && s.code != 404
        {
            tracing::warn!(%ip, error = %s.message, "releasing a cluster IP");
        }
    }
}

/// What one write reserved, and what it frees once stored.
#[derive(Default)]
struct Reservation {
    new_ips: Vec<Ipv4Addr>,
    new_ports: Vec<u16>,
    released_ips: Vec<Ipv4Addr>,
    released_ports: Vec<i64>,
}

/// Upstream's `PortAllocationOperation`: node ports a write asks for, with dry runs answering
/// from 32769 on without taking anything.
struct PortOp<'a> {
    alloc: &'a ServiceIpAllocator,
    dry_run: bool,
    /// Every port this operation handed out or took (dry runs too).
    allocated: Vec<i64>,
    /// Ports taken for real, released if the write fails.
    taken: Vec<u16>,
}

/// Upstream's port allocator errors.
const PORT_ALLOCATED: &str = "provided port is already allocated";

impl<'a> PortOp<'a> {
    fn new(alloc: &'a ServiceIpAllocator, dry_run: bool) -> Self {
        Self {
            alloc,
            dry_run,
            allocated: Vec::new(),
            taken: Vec::new(),
        }
    }

    fn not_in_range(&self) -> String {
        format!(
            "provided port is not in the valid range. The range of valid ports is {}",
            self.alloc.port_range_string()
        )
    }

    /// Takes a requested port; the error is upstream's message.
    async fn allocate(&mut self, port: i64) -> Result<(), String> {
        if self.dry_run {
            if self.alloc.port_taken(port) || self.allocated.contains(&port) {
                return Err(PORT_ALLOCATED.into());
            }
            self.allocated.push(port);
            return Ok(());
        }
        let Some(p) = self.alloc.port_in_range(port) else {
            return Err(self.not_in_range());
        };
        // Shared, the stored bitmap decides: a port taken here may have been released by
        // another server since.
        let free_here = self.alloc.reserve_port(p);
        if !free_here && !self.alloc.is_shared() {
            return Err(PORT_ALLOCATED.into());
        }
        match self.alloc.take_shared_port(p).await {
            Ok(true) => {}
            // Held by another server: it stays taken here.
            Ok(false) => return Err(PORT_ALLOCATED.into()),
            Err(e) => {
                if free_here {
                    self.alloc.release_port(p);
                }
                return Err(e);
            }
        }
        self.allocated.push(port);
        self.taken.push(p);
        Ok(())
    }

    /// Any free port; a dry run counts up from 32768 past what it handed out, as upstream.
    async fn allocate_next(&mut self) -> Result<i64, String> {
        if self.dry_run {
            let next = self.allocated.iter().copied().max().unwrap_or(32768) + 1;
            self.allocated.push(next);
            return Ok(next);
        }
        let mut reloaded = false;
        let p = loop {
            let Some(p) = self.alloc.allocate_port() else {
                // Full as this server sees it; other servers may have released ports since.
                if self.alloc.is_shared() && !reloaded {
                    reloaded = true;
                    self.alloc.reload_shared_ports().await?;
                    for p in &self.taken {
                        self.alloc.reserve_port(*p);
                    }
                    continue;
                }
                return Err("range is full".into());
            };
            match self.alloc.take_shared_port(p).await {
                Ok(true) => break p,
                // Another server holds it: it stays taken here; try another.
                Ok(false) => continue,
                Err(e) => {
                    self.alloc.release_port(p);
                    return Err(e);
                }
            }
        };
        self.allocated.push(i64::from(p));
        self.taken.push(p);
        Ok(i64::from(p))
    }
}

fn service_name(svc: &Value) -> &str {
    svc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn service_namespace(svc: &Value) -> &str {
    svc.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn invalid(svc: &Value, errs: &[FieldError]) -> Status {
    invalid_status("", "Service", service_name(svc), errs)
}

fn spec_mut(svc: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    svc.get_mut("spec").and_then(Value::as_object_mut)
}

/// Upstream's `NormalizeClusterIPs`: keeps `clusterIP` and `clusterIPs` in step for clients
/// that set only the singular field.
pub fn normalize_cluster_ips(old: Option<&Value>, new: &mut Value) {
    let new_ip = spec_str(new, "clusterIP").to_string();
    let new_ips = cluster_ips(new);
    let Some(spec) = spec_mut(new) else {
        return;
    };
    let Some(old) = old else {
        if !new_ip.is_empty() && new_ips.is_empty() {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
        return;
    };
    let old_ip = spec_str(old, "clusterIP");
    let old_ips = cluster_ips(old);
    let mut ips = new_ips;
    // An old client patched something else and left clusterIPs out.
    if !old_ips.is_empty() && ips.is_empty() && old_ip == new_ip {
        ips = old_ips.clone();
        spec.insert("clusterIPs".into(), json!(ips));
    }
    if old_ip != new_ip {
        if !old_ip.is_empty() && new_ip.is_empty() {
            // Clearing clusterIP clears clusterIPs when those were left as they were.
            if old_ips == ips {
                spec.remove("clusterIPs");
            }
        } else if old_ips == ips {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
    }
}

/// Upstream's `patchAllocatedValues`: values the server allocated stay when a client resubmits
/// the object without them.
pub fn patch_allocated_values(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        let old_ip = spec_str(old, "clusterIP").to_string();
        let old_ips = old.pointer("/spec/clusterIPs").cloned();
        let empty_ips = cluster_ips(new).is_empty();
        if let Some(spec) = spec_mut(new) {
            if spec
                .get("clusterIP")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
                && !old_ip.is_empty()
            {
                spec.insert("clusterIP".into(), json!(old_ip));
            }
            if empty_ips && let Some(ips) = old_ips {
                spec.insert("clusterIPs".into(), ips);
            }
        }
    }
    if needs_node_port(old) && needs_node_port(new) {
        // Node ports by port name: the client may have changed other properties of the port.
        let by_name: Vec<(String, i64)> = ports_of(old)
            .iter()
            .map(|p| {
                (
                    p.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
                )
            })
            .collect();
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter(|p| p.is_object()) {
                if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0 {
                    let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                    if let Some((_, np)) = by_name.iter().find(|(n, _)| n == name)
                        && *np != 0
                    {
                        p["nodePort"] = json!(np);
                    }
                }
            }
        }
    }
    if needs_health_check(old)
        && needs_health_check(new)
        && new
            .pointer("/spec/healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
        && let Some(hc) = old.pointer("/spec/healthCheckNodePort").cloned()
        && let Some(spec) = spec_mut(new)
    {
        spec.insert("healthCheckNodePort".into(), hc);
    }
}

fn ip_family_policy(svc: &Value) -> Option<&str> {
    svc.pointer("/spec/ipFamilyPolicy").and_then(Value::as_str)
}

/// A PreferDualStack Service updated without touching its IP fields is left as it is
/// (upstream's `isMatchingPreferDualStackClusterIPFields`).
fn is_matching_prefer_dual_stack(new: &Value, old: Option<&Value>) -> bool {
    let Some(old) = old else {
        return false;
    };
    ip_family_policy(new) == Some("PreferDualStack")
        && ip_family_policy(old).is_none_or(|p| p == "PreferDualStack")
        && svc_type(old) == svc_type(new)
        && matches!(svc_type(new), "ClusterIP" | "NodePort" | "LoadBalancer")
        && spec_str(old, "clusterIP") == spec_str(new, "clusterIP")
        && cluster_ips(old) == cluster_ips(new)
        && ip_families(old) == ip_families(new)
}

/// The family of a (valid) address.
fn family_of(ip: &str) -> &'static str {
    if ip.contains(':') { "IPv6" } else { "IPv4" }
}

/// Upstream's `initIPFamilyFields` for a single-stack IPv4 cluster: defaults `ipFamilyPolicy`
/// and `ipFamilies`, pre-validates the cluster IP fields, and refuses what the cluster cannot
/// serve. Visible on dry runs too.
pub fn init_ip_family_fields(new: &mut Value, old: Option<&Value>) -> Result<(), Status> {
    if svc_type(new) == "ExternalName" || is_matching_prefer_dual_stack(new, old) {
        return Ok(());
    }
    if ip_family_policy(new).is_none() {
        // An update keeps the old policy; a headless Service without a selector asks for
        // both families; anything else is single-stack.
        let selectorless = new
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .is_none_or(serde_json::Map::is_empty);
        let policy = match old.and_then(ip_family_policy) {
            Some(p) => p.to_string(),
            None if spec_str(new, "clusterIP") == "None" && selectorless => {
                "RequireDualStack".to_string()
            }
            None => "SingleStack".to_string(),
        };
        if let Some(spec) = spec_mut(new) {
            spec.insert("ipFamilyPolicy".into(), json!(policy));
        }
    }
    let errs = validate_cluster_ips_related_fields(new, old);
    if !errs.is_empty() {
        return Err(invalid(new, &errs));
    }
    let spec_path = FieldPath::new("spec");
    let policy_path = spec_path.child("ipFamilyPolicy");
    let policy = ip_family_policy(new).unwrap_or("").to_string();
    let mut errs = Vec::new();
    if let Some(old) = old {
        if policy == "SingleStack" {
            // A single-stack policy with IP fields left as they were is clear intent.
            let ips = cluster_ips(new);
            if cluster_ips(old) == ips
                && spec_str(old, "clusterIP") == spec_str(new, "clusterIP")
                && ips.len() > 1
                && let Some(spec) = spec_mut(new)
            {
                spec.insert("clusterIPs".into(), json!(ips[..1]));
            }
            let fams = ip_families(new);
            if ip_families(old) == fams
                && fams.len() > 1
                && let Some(spec) = spec_mut(new)
            {
                spec.insert("ipFamilies".into(), json!(fams[..1]));
            }
        } else {
            let reduced = |new_len: usize, old_len: usize| new_len < old_len && old_len > 1;
            if reduced(cluster_ips(new).len(), cluster_ips(old).len()) {
                errs.push(FieldError::invalid(
                    &policy_path,
                    json!(policy),
                    "must be 'SingleStack' to release the secondary cluster IP",
                ));
            }
            if reduced(ip_families(new).len(), ip_families(old).len()) {
                errs.push(FieldError::invalid(
                    &policy_path,
                    json!(policy),
                    "must be 'SingleStack' to release the secondary IP family",
                ));
            }
        }
    }
    if policy == "SingleStack" {
        if cluster_ips(new).len() == 2 {
            errs.push(FieldError::invalid(
                &policy_path,
                json!(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if ip_families(new).len() == 2 {
            errs.push(FieldError::invalid(
                &policy_path,
                json!(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
        }
    }
    // Families follow from the addresses asked for.
    let ips = cluster_ips(new);
    let mut families = ip_families(new);
    for (i, ip) in ips.iter().enumerate() {
        if ip == "None" {
            break;
        }
        if i >= families.len() {
            let fam = family_of(ip);
            if fam == "IPv4" {
                families.push(fam.to_string());
            } else {
                errs.push(FieldError::invalid(
                    &spec_path.child("clusterIPs").index(i),
                    json!(ips),
                    format!("{fam} is not configured on this cluster"),
                ));
            }
        }
    }
    if !errs.is_empty() {
        return Err(invalid(new, &errs));
    }
    let set_families = |svc: &mut Value, fams: &[String]| {
        if let Some(spec) = spec_mut(svc) {
            spec.insert("ipFamilies".into(), json!(fams));
        }
    };
    if !families.is_empty() {
        set_families(new, &families);
    }
    // Headless without a selector may ask for any families.
    let headless = spec_str(new, "clusterIP") == "None";
    let no_selector = new
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .is_none_or(serde_json::Map::is_empty);
    if headless && no_selector {
        if families.is_empty() {
            families.push("IPv4".into());
        }
        if policy == "SingleStack" {
            families.truncate(1);
        } else if families.len() == 1 {
            let other = if families[0] == "IPv4" {
                "IPv6"
            } else {
                "IPv4"
            };
            families.push(other.into());
        }
        set_families(new, &families);
        return Ok(());
    }
    let mut errs = Vec::new();
    if policy == "RequireDualStack" {
        errs.push(FieldError::invalid(
            &policy_path,
            json!(policy),
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, fam) in families.iter().enumerate() {
        if fam != "IPv4" {
            errs.push(FieldError::invalid(
                &spec_path.child("ipFamilies").index(i),
                json!(fam),
                "not configured on this cluster",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(invalid(new, &errs));
    }
    if families.is_empty() {
        set_families(new, &["IPv4".to_string()]);
    }
    Ok(())
}

/// The allocation side of the Service strategy.
pub struct Allocation<'a> {
    pub allocator: &'a Arc<ServiceIpAllocator>,
    pub addresses: &'a IpAddresses,
}

impl Allocation<'_> {
    fn finish(&self, res: Reservation) -> Option<Finish> {
        if res.new_ips.is_empty()
            && res.new_ports.is_empty()
            && res.released_ips.is_empty()
            && res.released_ports.is_empty()
        {
            return None;
        }
        let allocator = self.allocator.clone();
        let addresses = self.addresses.clone();
        Some(Box::new(move |stored: bool| {
            Box::pin(async move {
                let (ips, ports) = if stored {
                    (res.released_ips, res.released_ports)
                } else {
                    (
                        res.new_ips,
                        res.new_ports.into_iter().map(i64::from).collect(),
                    )
                };
                release(&allocator, &addresses, &ips, &ports).await;
            })
        }))
    }

    /// Undoes a reservation that failed half way.
    async fn revert(&self, res: Reservation) {
        let ports: Vec<i64> = res.new_ports.iter().copied().map(i64::from).collect();
        release(self.allocator, self.addresses, &res.new_ips, &ports).await;
    }

    /// Upstream's `allocateCreate`.
    pub async fn begin_create(
        &self,
        svc: &mut Value,
        dry_run: bool,
    ) -> Result<Option<Finish>, Status> {
        normalize_cluster_ips(None, svc);
        init_ip_family_fields(svc, None)?;
        let mut res = Reservation::default();
        if let Err(e) = self.alloc_all(svc, dry_run, &mut res).await {
            self.revert(res).await;
            return Err(e);
        }
        Ok(self.finish(res))
    }

    async fn alloc_all(
        &self,
        svc: &mut Value,
        dry_run: bool,
        res: &mut Reservation,
    ) -> Result<(), Status> {
        self.alloc_cluster_ips(svc, dry_run, res).await?;
        let mut op = PortOp::new(self.allocator, dry_run);
        let result = self.alloc_node_ports(svc, &mut op).await;
        res.new_ports.append(&mut op.taken);
        result?;
        if needs_health_check(svc) {
            let result = alloc_health_check_port(svc, &mut op).await;
            res.new_ports.append(&mut op.taken);
            result.map_err(Status::internal)?;
        }
        Ok(())
    }

    /// Upstream's `allocateUpdate`.
    pub async fn begin_update(
        &self,
        new: &mut Value,
        old: &Value,
        dry_run: bool,
    ) -> Result<Option<Finish>, Status> {
        patch_allocated_values(new, old);
        normalize_cluster_ips(Some(old), new);
        init_ip_family_fields(new, Some(old))?;
        let mut res = Reservation::default();
        if let Err(e) = self.update_all(new, old, dry_run, &mut res).await {
            self.revert(res).await;
            return Err(e);
        }
        if dry_run {
            return Ok(None);
        }
        Ok(self.finish(res))
    }

    async fn update_all(
        &self,
        new: &mut Value,
        old: &Value,
        dry_run: bool,
        res: &mut Reservation,
    ) -> Result<(), Status> {
        // Cluster IPs (single-stack: no upgrade or downgrade between families).
        if !is_matching_prefer_dual_stack(new, Some(old)) {
            let old_external = svc_type(old) == "ExternalName";
            let new_external = svc_type(new) == "ExternalName";
            let old_headless = cluster_ips(old).first().is_some_and(|ip| ip == "None");
            if old_external && !new_external {
                self.alloc_cluster_ips(new, dry_run, res).await?;
            } else if !old_headless && !old_external && new_external {
                res.released_ips.extend(held_ips(old));
            }
        }
        // Node ports.
        let mut op = PortOp::new(self.allocator, dry_run);
        if needs_node_port(old) && matches!(svc_type(new), "ExternalName" | "ClusterIP") {
            res.released_ports.extend(
                ports_of(old)
                    .iter()
                    .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                    .filter(|p| *p != 0),
            );
        }
        if needs_node_port(new) {
            let result = self.update_node_ports(new, old, &mut op, res).await;
            res.new_ports.append(&mut op.taken);
            result?;
        }
        // The health check node port of LoadBalancer Services with externalTrafficPolicy Local.
        match (needs_health_check(old), needs_health_check(new)) {
            (false, true) => {
                let result = alloc_health_check_port(new, &mut op).await;
                res.new_ports.append(&mut op.taken);
                result.map_err(Status::internal)?;
            }
            (true, false) => {
                if let Some(hc) = old
                    .pointer("/spec/healthCheckNodePort")
                    .and_then(Value::as_i64)
                    .filter(|p| *p != 0)
                {
                    res.released_ports.push(hc);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Upstream's `allocClusterIPs`: the addresses asked for, or free ones, for every family.
    async fn alloc_cluster_ips(
        &self,
        svc: &mut Value,
        dry_run: bool,
        res: &mut Reservation,
    ) -> Result<(), Status> {
        if !needs_cluster_ip(svc) {
            return Ok(());
        }
        let mut ips = cluster_ips(svc);
        if ips.first().is_some_and(|ip| ip == "None") {
            return Ok(());
        }
        let families = ip_families(svc);
        for i in 0..families.len() {
            match ips.get(i).cloned() {
                Some(ip) if !ip.is_empty() => self.alloc_ip(svc, &ip, dry_run, res).await?,
                _ => {
                    let ip = self.alloc_next_ip(svc, dry_run, res).await?;
                    ips.push(ip.to_string());
                }
            }
        }
        if let Some(spec) = spec_mut(svc) {
            if let Some(first) = ips.first() {
                spec.insert("clusterIP".into(), json!(first));
            }
            spec.insert("clusterIPs".into(), json!(ips));
        }
        Ok(())
    }

    async fn alloc_ip(
        &self,
        svc: &Value,
        ip: &str,
        dry_run: bool,
        res: &mut Reservation,
    ) -> Result<(), Status> {
        let fail = |why: String| {
            let errs = [FieldError::invalid(
                &FieldPath::new("spec").child("clusterIPs"),
                json!(cluster_ips(svc)),
                format!("failed to allocate IP {ip}: {why}"),
            )];
            invalid(svc, &errs)
        };
        let Ok(addr) = ip.parse::<Ipv4Addr>() else {
            return Err(Status::internal(format!(
                "failed to parse service IP {}",
                apimachinery::validation::go_quote(ip)
            )));
        };
        if !self.allocator.contains(addr) {
            return Err(fail(format!(
                "the provided IP ({addr}) is not in the valid range. The range of valid IPs is {}",
                self.allocator.cidr()
            )));
        }
        if dry_run {
            return Ok(());
        }
        if !self.allocator.wait_ready().await {
            return Err(Status::internal(format!(
                "failed to allocate IP {ip}: allocator not ready"
            )));
        }
        if !self.allocator.reserve_ip(addr) {
            return Err(fail("provided IP is already allocated".into()));
        }
        match self
            .addresses
            .create(addr, service_namespace(svc), service_name(svc))
            .await
        {
            Ok(()) => {
                res.new_ips.push(addr);
                Ok(())
            }
            // Held by an IPAddress object the allocator did not know of: it stays taken.
            Err(CreateFailure::Taken) => Err(fail("provided IP is already allocated".into())),
            Err(CreateFailure::Other(s)) => {
                self.allocator.release_ip(addr);
                Err(s)
            }
        }
    }

    async fn alloc_next_ip(
        &self,
        svc: &Value,
        dry_run: bool,
        res: &mut Reservation,
    ) -> Result<Ipv4Addr, Status> {
        if dry_run {
            return Ok(self.allocator.dry_run_ip());
        }
        let full = || Status::internal("failed to allocate a serviceIP: range is full");
        if !self.allocator.wait_ready().await {
            return Err(Status::internal(
                "failed to allocate a serviceIP: allocator not ready",
            ));
        }
        loop {
            let addr = self.allocator.allocate_ip().ok_or_else(full)?;
            match self
                .addresses
                .create(addr, service_namespace(svc), service_name(svc))
                .await
            {
                Ok(()) => {
                    res.new_ips.push(addr);
                    return Ok(addr);
                }
                // Someone holds it without the allocator knowing: keep it taken, try another.
                Err(CreateFailure::Taken) => continue,
                Err(CreateFailure::Other(s)) => {
                    self.allocator.release_ip(addr);
                    return Err(s);
                }
            }
        }
    }

    /// Upstream's `initNodePorts`: requested ports are taken, the others allocated; ports
    /// sharing a port number share a node port.
    async fn alloc_node_ports(&self, svc: &mut Value, op: &mut PortOp<'_>) -> Result<(), Status> {
        if !needs_node_port(svc) {
            return Ok(());
        }
        let allocate_new = should_allocate_node_ports(svc);
        let name = service_name(svc).to_string();
        let snapshot: Vec<(i64, i64)> = ports_of(svc)
            .iter()
            .map(|p| (port_number(p), node_port(p)))
            .collect();
        let mut by_port: Vec<(i64, i64)> = Vec::new();
        let mut assigned: Vec<Option<i64>> = vec![None; snapshot.len()];
        for (i, &(port, np)) in snapshot.iter().enumerate() {
            if np == 0 && !allocate_new {
                continue;
            }
            let path = FieldPath::new("spec")
                .child("ports")
                .index(i)
                .child("nodePort");
            let bad = |value: i64, why: String| {
                invalid_status(
                    "",
                    "Service",
                    &name,
                    &[FieldError::invalid(&path, json!(value), why)],
                )
            };
            match by_port.iter().find(|(p, _)| *p == port).map(|(_, n)| *n) {
                None => {
                    // The first port with this number: a node port asked for on any port with
                    // this number, else a new one.
                    let requested = snapshot
                        .iter()
                        .find(|(p, n)| *p == port && *n != 0)
                        .map(|(_, n)| *n);
                    let n = match requested {
                        Some(n) => {
                            op.allocate(n).await.map_err(|why| bad(n, why))?;
                            n
                        }
                        None => op.allocate_next().await.map_err(|why| {
                            Status::internal(format!("failed to allocate a nodePort: {why}"))
                        })?,
                    };
                    assigned[i] = Some(n);
                    by_port.push((port, n));
                }
                Some(shared) if np != shared => {
                    if np == 0 {
                        assigned[i] = Some(shared);
                    } else {
                        op.allocate(np).await.map_err(|why| bad(np, why))?;
                    }
                }
                Some(_) => {}
            }
        }
        set_node_ports(svc, &assigned);
        Ok(())
    }

    /// Upstream's `updateNodePorts`: ports the old Service held stay, new ones are taken or
    /// allocated, and the old ones no longer used are released once the update is stored.
    async fn update_node_ports(
        &self,
        new: &mut Value,
        old: &Value,
        op: &mut PortOp<'_>,
        res: &mut Reservation,
    ) -> Result<(), Status> {
        let old_ports: Vec<i64> = ports_of(old)
            .iter()
            .map(node_port)
            .filter(|p| *p != 0)
            .collect();
        let allocate_new = should_allocate_node_ports(new);
        let name = service_name(new).to_string();
        let snapshot: Vec<i64> = ports_of(new).iter().map(node_port).collect();
        let mut assigned: Vec<Option<i64>> = vec![None; snapshot.len()];
        let mut taken_here: BTreeSet<i64> = BTreeSet::new();
        for (i, &np) in snapshot.iter().enumerate() {
            if np == 0 && !allocate_new {
                continue;
            }
            if np != 0 {
                if !old_ports.contains(&np) && !taken_here.contains(&np) {
                    op.allocate(np).await.map_err(|why| {
                        let path = FieldPath::new("spec")
                            .child("ports")
                            .index(i)
                            .child("nodePort");
                        invalid_status(
                            "",
                            "Service",
                            &name,
                            &[FieldError::invalid(&path, json!(np), why)],
                        )
                    })?;
                    taken_here.insert(np);
                }
            } else {
                let n = op.allocate_next().await.map_err(|why| {
                    Status::internal(format!("failed to allocate a nodePort: {why}"))
                })?;
                assigned[i] = Some(n);
            }
        }
        set_node_ports(new, &assigned);
        let now: Vec<i64> = ports_of(new).iter().map(node_port).collect();
        res.released_ports
            .extend(old_ports.into_iter().filter(|p| !now.contains(p)));
        Ok(())
    }

    /// Releases everything a deleted Service held.
    pub async fn release_all(&self, svc: &Value) {
        release(
            self.allocator,
            self.addresses,
            &held_ips(svc),
            &held_ports(svc),
        )
        .await;
    }
}

async fn release(
    allocator: &ServiceIpAllocator,
    addresses: &IpAddresses,
    ips: &[Ipv4Addr],
    ports: &[i64],
) {
    for ip in ips {
        if allocator.contains(*ip) {
            addresses.delete(*ip).await;
            allocator.release_ip(*ip);
        }
    }
    for p in ports {
        if let Ok(p) = u16::try_from(*p) {
            allocator.release_shared_port(p).await;
            allocator.release_port(p);
        }
    }
}

fn port_number(p: &Value) -> i64 {
    p.get("port").and_then(Value::as_i64).unwrap_or(0)
}

fn node_port(p: &Value) -> i64 {
    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0)
}

fn set_node_ports(svc: &mut Value, assigned: &[Option<i64>]) {
    if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for (p, n) in ports.iter_mut().zip(assigned) {
            if let (Some(n), Some(p)) = (n, p.as_object_mut()) {
                p.insert("nodePort".into(), json!(n));
            }
        }
    }
}

/// NodePort Services always get node ports; LoadBalancers unless they opted out.
fn should_allocate_node_ports(svc: &Value) -> bool {
    match svc_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc
            .pointer("/spec/allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

/// Upstream's `allocHealthCheckNodePort`; the error is wrapped as an internal error.
async fn alloc_health_check_port(svc: &mut Value, op: &mut PortOp<'_>) -> Result<(), String> {
    let requested = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if requested != 0 {
        return op.allocate(requested).await.map_err(|e| {
            format!("failed to allocate requested HealthCheck NodePort {requested}: {e}")
        });
    }
    let n = op
        .allocate_next()
        .await
        .map_err(|e| format!("failed to allocate a HealthCheck NodePort 0: {e}"))?;
    if let Some(spec) = spec_mut(svc) {
        spec.insert("healthCheckNodePort".into(), json!(n));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_skip_network_and_broadcast_and_keep_a_static_band() {
        let a = ServiceIpAllocator::new("10.0.0.0/24", "30000-32767").unwrap();
        assert_eq!(a.cidr(), "10.0.0.0/24");
        assert_eq!(a.first_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert!(!a.contains(Ipv4Addr::new(10, 0, 0, 0)));
        assert!(!a.contains(Ipv4Addr::new(10, 0, 0, 255)));
        assert!(a.contains(Ipv4Addr::new(10, 0, 0, 254)));
        // Dynamic allocation starts above the static band (10.0.0.1-16).
        for _ in 0..50 {
            let ip = a.allocate_ip().unwrap();
            assert!(
                u32::from(ip) >= u32::from(Ipv4Addr::new(10, 0, 0, 17)),
                "{ip}"
            );
        }
        let p = a.allocate_port().unwrap();
        assert!(p >= 30086, "{p}");
    }

    #[test]
    fn a_small_range_fills_up() {
        let a = ServiceIpAllocator::new("10.0.0.0/29", "30000-30001").unwrap();
        let ips: BTreeSet<_> = (0..6).map(|_| a.allocate_ip().unwrap()).collect();
        assert_eq!(ips.len(), 6);
        assert!(ips.iter().all(|ip| a.contains(*ip)));
        assert_eq!(a.allocate_ip(), None, "the range is full");
        assert!(a.allocate_port().is_some() && a.allocate_port().is_some());
        assert_eq!(a.allocate_port(), None);
    }

    #[tokio::test]
    async fn dry_run_node_ports_count_from_32769() {
        let a = ServiceIpAllocator::new("10.0.0.0/24", "30000-32767").unwrap();
        let mut op = PortOp::new(&a, true);
        assert_eq!(op.allocate_next().await, Ok(32769));
        assert_eq!(op.allocate_next().await, Ok(32770));
        let mut real = PortOp::new(&a, false);
        assert_eq!(
            real.allocate(80).await.unwrap_err(),
            "provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
        assert_eq!(real.allocate(30080).await, Ok(()));
        assert_eq!(real.allocate(30080).await.unwrap_err(), PORT_ALLOCATED);
    }

    #[test]
    fn bitmaps_are_big_endian_integers() {
        let mut data = Vec::new();
        set_bit(&mut data, 0, true);
        set_bit(&mut data, 9, true);
        assert_eq!(data, [0x02, 0x01]);
        assert!(bit(&data, 9) && bit(&data, 0) && !bit(&data, 8) && !bit(&data, 200));
        set_bit(&mut data, 9, false);
        assert_eq!(data, [0x01], "no leading zero bytes, as Go's big.Int.Bytes");
        set_bit(&mut data, 0, false);
        assert!(data.is_empty());
    }

    /// Two allocators on one store, as two servers on one etcd: a port one holds is refused to
    /// the other, and one it releases becomes free for the other.
    #[tokio::test]
    async fn servers_sharing_a_store_never_hand_out_one_port() {
        let dir = tempfile::tempdir().unwrap();
        let kv: Arc<dyn storage::Kv> =
            storage::SqliteKv::open(&dir.path().join("state.db")).unwrap();
        let a = ServiceIpAllocator::new("10.0.0.0/24", "30000-30015").unwrap();
        let b = ServiceIpAllocator::new("10.0.0.0/24", "30000-30015").unwrap();
        let json: Arc<dyn storage::StorageCodec> = Arc::new(storage::JsonCodec);
        a.share_node_ports(kv.clone(), "/registry", json.clone());
        b.share_node_ports(kv.clone(), "/registry/", json);
        let mut held = BTreeSet::new();
        for alloc in [&a, &b].into_iter().cycle().take(16) {
            let mut op = PortOp::new(alloc, false);
            let p = op.allocate_next().await.unwrap();
            assert!(held.insert(p), "{p} handed out twice");
        }
        let mut op = PortOp::new(&b, false);
        assert_eq!(op.allocate_next().await.unwrap_err(), "range is full");
        assert_eq!(op.allocate(30003).await.unwrap_err(), PORT_ALLOCATED);
        // Released by one, free for the other (which reloads the stored bitmap when it looks
        // full).
        a.release_shared_port(30003).await;
        a.release_port(30003);
        let mut op = PortOp::new(&b, false);
        assert_eq!(op.allocate_next().await, Ok(30003));
        let (stored, _) = kv.get("/registry/ranges/servicenodeports").await.unwrap();
        let stored: Value = serde_json::from_slice(&stored.unwrap().value).unwrap();
        assert_eq!(stored["kind"], "RangeAllocation");
        assert_eq!(stored["range"], "30000-30015");
        assert_eq!(stored["data"], "//8=", "all 16 ports taken");
    }

    /// A server storing protobuf (kube-apiserver's default on etcd) and one storing JSON read
    /// each other's bitmap, and the protobuf one writes upstream's `k8s\0` envelope.
    #[tokio::test]
    async fn shared_bitmaps_are_read_in_any_media_type() {
        let dir = tempfile::tempdir().unwrap();
        let kv: Arc<dyn storage::Kv> =
            storage::SqliteKv::open(&dir.path().join("state.db")).unwrap();
        let proto = ServiceIpAllocator::new("10.0.0.0/24", "30000-30015").unwrap();
        let json = ServiceIpAllocator::new("10.0.0.0/24", "30000-30015").unwrap();
        proto.share_node_ports(
            kv.clone(),
            "/registry",
            crate::storage_codec::BuiltinCodec::shared(storage::StorageMediaType::Protobuf),
        );
        json.share_node_ports(
            kv.clone(),
            "/registry",
            crate::storage_codec::BuiltinCodec::shared(storage::StorageMediaType::Json),
        );
        assert_eq!(PortOp::new(&proto, false).allocate(30001).await, Ok(()));
        let (stored, _) = kv.get("/registry/ranges/servicenodeports").await.unwrap();
        assert!(stored.unwrap().value.starts_with(b"k8s\0"));
        let mut op = PortOp::new(&json, false);
        assert_eq!(op.allocate(30001).await.unwrap_err(), PORT_ALLOCATED);
        assert_eq!(op.allocate(30002).await, Ok(()));
        let (stored, _) = kv.get("/registry/ranges/servicenodeports").await.unwrap();
        assert!(stored.unwrap().value.starts_with(b"{"));
        let mut op = PortOp::new(&proto, false);
        assert_eq!(op.allocate(30002).await.unwrap_err(), PORT_ALLOCATED);
    }

    /// The bitmap as kube-apiserver v1.36 stored it on etcd (read back raw) after allocating
    /// node port 31832 for a Service: a server sharing that etcd finds the port taken.
    #[tokio::test]
    async fn kube_apiservers_stored_bitmap_is_read() {
        use base64::Engine as _;
        let mut recorded = b"k8s\0\n\x15\n\x02v1\x12\x0fRangeAllocation\x12\x88\x02\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x0b30000-32767\x1a\xe6\x01\x01".to_vec();
        recorded.extend([0u8; 229]);
        recorded.extend(b"\x1a\x00\"\x00");
        assert_eq!(recorded.len(), 298, "the recorded value's length");
        let dir = tempfile::tempdir().unwrap();
        let kv: Arc<dyn storage::Kv> =
            storage::SqliteKv::open(&dir.path().join("state.db")).unwrap();
        let key = "/registry/ranges/servicenodeports";
        kv.create(key, recorded.into()).await.unwrap();
        let alloc = ServiceIpAllocator::new("10.0.0.0/24", "30000-32767").unwrap();
        let codec = crate::storage_codec::BuiltinCodec::shared(storage::StorageMediaType::Protobuf);
        alloc.share_node_ports(kv.clone(), "/registry", codec.clone());
        let mut op = PortOp::new(&alloc, false);
        assert_eq!(op.allocate(31832).await.unwrap_err(), PORT_ALLOCATED);
        assert_eq!(op.allocate(30000).await, Ok(()));
        let (stored, _) = kv.get(key).await.unwrap();
        let stored = codec.decode(&stored.unwrap().value).unwrap();
        assert_eq!(stored["range"], "30000-32767");
        let data = base64::engine::general_purpose::STANDARD
            .decode(stored["data"].as_str().unwrap())
            .unwrap();
        assert!(bit(&data, 1832) && bit(&data, 0) && !bit(&data, 1));
    }

    #[test]
    fn single_stack_families_are_defaulted_and_checked() {
        let mut svc = json!({"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "selector": {"a": "b"}}});
        init_ip_family_fields(&mut svc, None).unwrap();
        assert_eq!(svc["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(svc["spec"]["ipFamilyPolicy"], json!("SingleStack"));
        let mut v6 = json!({"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "ipFamilies": ["IPv6"]}});
        let err = init_ip_family_fields(&mut v6, None).unwrap_err();
        assert!(
            err.message.contains(
                "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"
            ),
            "{}",
            err.message
        );
    }
}
