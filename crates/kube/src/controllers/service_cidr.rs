//! The ServiceCIDR controller (upstream: pkg/controller/servicecidrs, kube-controller-manager's
//! `service-cidr-controller`): every ServiceCIDR carries the finalizer
//! `networking.k8s.io/service-cidr-finalizer` and a `Ready` condition. A live ServiceCIDR gets
//! the finalizer and `Ready=True`; a deleted one keeps the finalizer, with `Ready=False` and
//! reason `Terminating`, while an IPAddress of the service IP allocator inside its ranges would
//! be left without any other ServiceCIDR containing it, and loses it once none would (after a
//! grace period of 10 s from its deletion, so that allocators have seen the deletion before the
//! range goes).
//!
//! The roles are upstream's: the API server (`default_service_cidr`) creates the default
//! ServiceCIDR `kubernetes` (again every time it is gone) and marks it ready when its `Ready`
//! condition is missing or `Unknown` (as `kubernetes-service-cidr-controller`), and its allocator
//! writes the IPAddress objects (labelled `ipaddress.kubernetes.io/managed-by:
//! ipallocator.k8s.io`); this controller owns the finalizer of every ServiceCIDR, the default
//! one too, and rewrites `Ready` only when its status, reason or message differ from its own,
//! so neither undoes the other (the API server never touches a condition that is `True` or
//! `False`).
//!
//! What it must not do: judge IPAddress objects other allocators manage (upstream counts only
//! its own allocator's), or need a ServiceCIDR to be ready to cover another — upstream counts
//! any ServiceCIDR that contains the range or the address, terminating ones too.
//!
//! Writes are upstream's, made as the service account `kube-system/service-cidrs-controller`:
//! the finalizer is added and removed as kube-controller-manager (upstream patches it), the
//! condition is applied to `/status` with the field manager `service-cidr-controller` and
//! force. Ironplane's own care: each write is made on the resourceVersion the decision was read
//! at, a sync that loses a race or fails is tried again, and nothing is judged before both the
//! ServiceCIDRs and the IPAddresses have been listed. A failed write of `Ready=True` records
//! upstream's Warning `KubernetesServiceCIDRError` on the ServiceCIDR, unless it only lost that
//! race (a conflict, which upstream's unpinned apply never meets).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{RegistryStore, Requester, UpdateOptions, WriteOptions};
use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use storage::ResourceVersion;
use tokio::time::Instant;

use super::events::{ObjectReference, Recorder};
use crate::strategies::service_alloc::IPALLOCATOR_MANAGER;

/// `ServiceCIDRProtectionFinalizer`.
pub const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// Upstream's controller name: its field manager for the condition and its event source.
const CONTROLLER_NAME: &str = "service-cidr-controller";
/// The service account kube-controller-manager runs it as (`--use-service-account-credentials`;
/// the `system:controller:service-cidrs-controller` role of the bootstrap policy).
const ACCOUNT: &str = "service-cidrs-controller";
/// `deletionGracePeriod`: how long after its deletion a ServiceCIDR keeps its finalizer even
/// when nothing blocks it, so that allocators stop using the range first.
const DELETION_GRACE: Duration = Duration::from_secs(10);
/// How long a failed sync waits (upstream backs off from 5 ms; a fixed second is enough here).
const RETRY: Duration = Duration::from_secs(1);

const LABEL_MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const LABEL_IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";

const READY_MESSAGE: &str = "Kubernetes Service CIDR is ready";
/// The `KubernetesServiceCIDRError` Event's message, when `Ready=True` cannot be written.
const READY_ERROR_MESSAGE: &str = "The ServiceCIDR Status can not be set to Ready=True";
const TERMINATING_REASON: &str = "Terminating";
const TERMINATING_MESSAGE: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";

/// A CIDR of either family: the masked address as an integer and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prefix {
    v4: bool,
    network: u128,
    bits: u32,
}

/// An address as an integer, with its family and width in bits.
fn address_bits(ip: IpAddr) -> (bool, u128, u32) {
    match ip {
        IpAddr::V4(a) => (true, u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (false, u128::from(a), 128),
    }
}

/// The mask of the first `bits` of a `width`-bit address.
fn mask(bits: u32, width: u32) -> u128 {
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    match bits {
        0 => 0,
        b if b >= width => all,
        b => all & !(all >> b),
    }
}

impl Prefix {
    fn parse(s: &str) -> Option<Prefix> {
        let (addr, bits) = s.split_once('/')?;
        let (v4, value, width) = address_bits(addr.parse().ok()?);
        let bits: u32 = bits.parse().ok().filter(|b| *b <= width)?;
        Some(Prefix {
            v4,
            network: value & mask(bits, width),
            bits,
        })
    }

    fn width(&self) -> u32 {
        if self.v4 { 32 } else { 128 }
    }

    /// netip's `Overlaps`: same family, and one contains the other's network.
    fn overlaps(&self, other: &Prefix) -> bool {
        let shorter = self.bits.min(other.bits);
        let m = mask(shorter, self.width());
        self.v4 == other.v4 && self.network & m == other.network & m
    }

    /// `PrefixContainsIP`: the address is inside, and is neither the network address nor, for
    /// IPv4, the broadcast address, which a ServiceCIDR never allocates.
    fn contains_address(&self, ip: IpAddr) -> bool {
        let (v4, value, width) = address_bits(ip);
        if v4 != self.v4 || value & mask(self.bits, width) != self.network {
            return false;
        }
        let broadcast = self.network | (!mask(self.bits, width) & mask(width, width));
        value != self.network && !(v4 && value == broadcast)
    }
}

/// The ranges of a ServiceCIDR (those that parse; the kind's validation refuses the others).
fn prefixes(cidr: &Value) -> Vec<Prefix> {
    cidr.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(Prefix::parse)
        .collect()
}

/// An IPAddress of the service IP allocator: its address and its family label.
#[derive(Clone, Debug)]
struct Address {
    ip: IpAddr,
    family: String,
}

/// What the controller knows of every ServiceCIDR and of the allocator's IPAddresses, kept by
/// reflectors (upstream's listers).
#[derive(Default)]
struct Cache {
    cidrs: BTreeMap<String, Vec<Prefix>>,
    addresses: BTreeMap<String, Address>,
    /// Whether each reflector has delivered its first list (upstream's informers' `HasSynced`).
    cidrs_listed: bool,
    addresses_listed: bool,
}

/// An IPAddress the allocator manages (`containingServiceCIDRs` looks at no other).
fn allocator_address(obj: &Value) -> Option<Address> {
    let labels = obj.labels()?;
    if labels.get(LABEL_MANAGED_BY).and_then(Value::as_str) != Some(IPALLOCATOR_MANAGER) {
        return None;
    }
    Some(Address {
        ip: obj.name().parse().ok()?,
        family: labels
            .get(LABEL_IP_FAMILY)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

impl Cache {
    /// `OverlapsPrefix` over every range given.
    fn overlapping(&self, ranges: &[Prefix]) -> BTreeSet<String> {
        self.cidrs
            .iter()
            .filter(|(_, theirs)| theirs.iter().any(|p| ranges.iter().any(|r| p.overlaps(r))))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `ContainsPrefix`: the ServiceCIDRs with a range that holds `prefix` (itself included),
    /// once per matching range as upstream lists them.
    fn containing_prefix(&self, prefix: &Prefix) -> Vec<&str> {
        let mut out = Vec::new();
        for (name, ranges) in &self.cidrs {
            for p in ranges {
                if p.overlaps(prefix) && p.bits <= prefix.bits {
                    out.push(name.as_str());
                }
            }
        }
        out
    }

    /// `ContainsAddress`.
    fn containing_address(&self, ip: IpAddr) -> Vec<&str> {
        let mut out = Vec::new();
        for (name, ranges) in &self.cidrs {
            for p in ranges {
                if p.contains_address(ip) {
                    out.push(name.as_str());
                }
            }
        }
        out
    }

    /// `canDeleteCIDR`: every range of `name` lies inside another ServiceCIDR, or no address of
    /// the allocator in its ranges has `name` as the only ServiceCIDR containing it.
    fn can_delete(&self, name: &str, ranges: &[Prefix]) -> bool {
        let only_self = |found: &[&str]| found.is_empty() || found == [name];
        let has_parent = ranges
            .iter()
            .all(|r| !only_self(&self.containing_prefix(r)));
        if has_parent {
            return true;
        }
        for range in ranges {
            let family = if range.v4 { "IPv4" } else { "IPv6" };
            for address in self.addresses.values().filter(|a| a.family == family) {
                if self.containing_address(address.ip) == [name] {
                    return false;
                }
            }
        }
        true
    }
}

/// One change seen by a reflector.
enum Change {
    Cidrs(Delta),
    Addresses(Delta),
}

impl Cache {
    /// Applies a change, adding to `queue` the ServiceCIDRs it may concern, as upstream's event
    /// handlers do: a new ServiceCIDR with the ones it overlaps (it may unblock a deletion), a
    /// changed or deleted one alone, and the ServiceCIDRs holding an added or deleted address.
    fn apply(&mut self, change: Change, queue: &mut BTreeSet<String>) {
        match change {
            Change::Cidrs(Delta::Replace(items)) => {
                self.cidrs_listed = true;
                self.cidrs = items
                    .iter()
                    .map(|v| (v.name().to_string(), prefixes(v)))
                    .collect();
                queue.extend(self.cidrs.keys().cloned());
            }
            Change::Cidrs(Delta::Upsert(v)) => {
                let ranges = prefixes(&v);
                let added = self
                    .cidrs
                    .insert(v.name().to_string(), ranges.clone())
                    .is_none();
                if added {
                    queue.extend(self.overlapping(&ranges));
                }
                queue.insert(v.name().to_string());
            }
            Change::Cidrs(Delta::Deleted(v)) => {
                self.cidrs.remove(v.name());
                queue.insert(v.name().to_string());
            }
            Change::Addresses(Delta::Replace(items)) => {
                self.addresses_listed = true;
                self.addresses = items
                    .iter()
                    .filter_map(|v| Some((v.name().to_string(), allocator_address(v)?)))
                    .collect();
                // A fresh list may have lost or gained anything: look at every ServiceCIDR.
                queue.extend(self.cidrs.keys().cloned());
            }
            Change::Addresses(Delta::Upsert(v)) => {
                if let Some(a) = allocator_address(&v) {
                    queue.extend(self.containing_address(a.ip).into_iter().map(String::from));
                    self.addresses.insert(v.name().to_string(), a);
                }
            }
            Change::Addresses(Delta::Deleted(v)) => {
                self.addresses.remove(v.name());
                if let Some(a) = allocator_address(&v) {
                    queue.extend(self.containing_address(a.ip).into_iter().map(String::from));
                }
            }
        }
    }
}

/// Runs until the process ends.
pub async fn run(api: Arc<ApiResources>) {
    let (Some(cidrs), Some(addresses)) = (
        api.get("networking.k8s.io", "v1", "servicecidrs").cloned(),
        api.get("networking.k8s.io", "v1", "ipaddresses").cloned(),
    ) else {
        return;
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Change>();
    let to_cidrs = tx.clone();
    tokio::spawn(reflector::run(cidrs.clone(), move |d| {
        let _ = to_cidrs.send(Change::Cidrs(d));
    }));
    tokio::spawn(reflector::run(addresses, move |d| {
        let _ = tx.send(Change::Addresses(d));
    }));
    let events = Recorder::start(&api, CONTROLLER_NAME, ACCOUNT);
    let mut cache = Cache::default();
    let mut queue: BTreeSet<String> = BTreeSet::new();
    // ServiceCIDRs to look at again later: in their grace period, or after a failed sync.
    let mut later: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        let next = later.values().min().copied();
        tokio::select! {
            change = rx.recv() => {
                let Some(change) = change else { return };
                cache.apply(change, &mut queue);
                // Take what else has arrived, so a burst is synced once.
                while let Ok(change) = rx.try_recv() {
                    cache.apply(change, &mut queue);
                }
            }
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                let due: Vec<String> = later
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in due {
                    later.remove(&name);
                    queue.insert(name);
                }
            }
        }
        // Nothing is judged before both lists are in (upstream waits for its caches): a
        // ServiceCIDR's deletion must not look unblocked for want of the addresses.
        if !(cache.cidrs_listed && cache.addresses_listed) {
            continue;
        }
        for name in std::mem::take(&mut queue) {
            later.remove(&name);
            match sync(&api, &cidrs, &cache, &events, &name).await {
                Ok(None) => {}
                Ok(Some(after)) => {
                    later.insert(name, Instant::now() + after);
                }
                Err(e) => {
                    tracing::debug!(servicecidr = %name, error = %e, "ServiceCIDR sync failed; retrying");
                    later.insert(name, Instant::now() + RETRY);
                }
            }
        }
    }
}

/// Upstream's `sync` of one ServiceCIDR. `Ok(Some(d))`: look again in `d` (the grace period).
async fn sync(
    api: &ApiResources,
    store: &RegistryStore,
    cache: &Cache,
    events: &Recorder,
    name: &str,
) -> Result<Option<Duration>, String> {
    let cidr = match store.get("", name, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => return Ok(None),
        Err(s) => return Err(s.message),
    };
    if let Some(deleted) = cidr.deletion_timestamp() {
        if !cache.can_delete(name, &prefixes(&cidr)) {
            // It is looked at again when a ServiceCIDR or an address that may unblock it
            // changes.
            let condition = Condition {
                status: "False",
                reason: Some(TERMINATING_REASON),
                message: TERMINATING_MESSAGE,
            };
            apply_ready(api, store, &cidr, &condition, CONTROLLER_NAME, &user())
                .await
                .map_err(|s| s.message)?;
            return Ok(None);
        }
        let since = super::expiry::parse_time(deleted)
            .map(|t| (Utc::now() - t).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(DELETION_GRACE);
        if let Some(left) = DELETION_GRACE.checked_sub(since).filter(|d| !d.is_zero()) {
            return Ok(Some(left));
        }
        set_finalizer(api, store, &cidr, false).await?;
        return Ok(None);
    }
    let read = cidr;
    let cidr = set_finalizer(api, store, &read, true).await?;
    let Some(cidr) = cidr else { return Ok(None) };
    let condition = Condition {
        status: "True",
        reason: Some(""),
        message: READY_MESSAGE,
    };
    if let Err(e) = apply_ready(api, store, &cidr, &condition, CONTROLLER_NAME, &user()).await {
        // A conflict is a race lost to another writer (the API server marking its default
        // ServiceCIDR ready, most often at start) on the resourceVersion this write is pinned
        // to: upstream's unpinned apply cannot meet it, so it is no failure to report, only a
        // sync to run again on what is stored now.
        if e.code == 409 {
            return Err(e.message);
        }
        // On the ServiceCIDR as the sync read it, as upstream's lister object.
        let object = ObjectReference::to("networking.k8s.io/v1", "ServiceCIDR", &read);
        events.warning(&object, "KubernetesServiceCIDRError", READY_ERROR_MESSAGE);
        return Err(e.message);
    }
    Ok(None)
}

/// The identity upstream's controller acts as.
fn user() -> UserInfo {
    super::kube_system_account(ACCOUNT)
}

/// A `Ready` condition to write. `reason: None` leaves the reason out of the applied
/// configuration (upstream's default ServiceCIDR controller sets none; this controller applies
/// its reason even when empty), so the field is not the manager's.
pub(crate) struct Condition {
    pub status: &'static str,
    pub reason: Option<&'static str>,
    pub message: &'static str,
}

/// Whether the object's `Ready` condition already says what `want` says (its time aside).
fn condition_matches(cidr: &Value, want: &Condition) -> bool {
    cidr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .is_some_and(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
            s("status") == want.status
                && s("reason") == want.reason.unwrap_or("")
                && s("message") == want.message
        })
}

/// The write's precondition: the resourceVersion the decision was read at.
fn pinned(mut v: Value, rv: &str) -> Value {
    v.set_meta("resourceVersion", Value::from(rv));
    v
}

/// `updateConditionIfNeeded`: applies the condition to `/status` as `manager`, forcing
/// conflicts, unless it is already there. The API server's default ServiceCIDR controller
/// (`default_service_cidr`) writes its condition the same way, as its own manager. A 409 is a
/// change since `cidr` was read.
pub(crate) async fn apply_ready(
    api: &ApiResources,
    store: &RegistryStore,
    cidr: &Value,
    want: &Condition,
    manager: &str,
    user: &UserInfo,
) -> Result<(), Status> {
    if condition_matches(cidr, want) {
        return Ok(());
    }
    let managed = api
        .internal_write(store, manager)
        .managed_fields
        .ok_or_else(|| Status::internal("server-side apply needs the OpenAPI schemas"))?;
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut condition = json!({
        "type": "Ready",
        "status": want.status,
        "message": want.message,
        "lastTransitionTime": now,
    });
    if let Some(reason) = want.reason {
        condition["reason"] = json!(reason);
    }
    let config = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": cidr.name()},
        "status": {"conditions": [condition]},
    });
    let rv = cidr.resource_version().to_string();
    let mut updater = |current: Option<&Value>| -> Result<Value, Status> {
        let applied = store.apply(&managed, "status", current, &config, true)?;
        Ok(pinned(applied, &rv))
    };
    let opts = UpdateOptions {
        // An apply records its own managed fields.
        write: WriteOptions::default(),
        subresource: "status".into(),
        ..UpdateOptions::default()
    };
    match store
        .update(&Requester { user }, "", cidr.name(), &mut updater, &opts)
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if s.code == 404 => Ok(()),
        Err(s) => Err(s),
    }
}

/// Adds (`on`) or removes the finalizer when needed. Returns the object as it now is (`None`
/// when it is gone).
async fn set_finalizer(
    api: &ApiResources,
    store: &RegistryStore,
    cidr: &Value,
    on: bool,
) -> Result<Option<Value>, String> {
    let has = cidr.finalizers().contains(&FINALIZER);
    if has == on {
        return Ok(Some(cidr.clone()));
    }
    let mut finalizers: Vec<Value> = cidr
        .finalizers()
        .into_iter()
        .filter(|f| *f != FINALIZER)
        .map(Value::from)
        .collect();
    if on {
        finalizers.push(Value::from(FINALIZER));
    }
    let mut changed = cidr.clone();
    changed["metadata"]["finalizers"] = Value::Array(finalizers);
    let mut updater = |_: Option<&Value>| Ok(changed.clone());
    let opts = UpdateOptions {
        write: api.internal_write(store, super::CONTROLLER_MANAGER),
        ..UpdateOptions::default()
    };
    let user = user();
    match store
        .update(
            &Requester { user: &user },
            "",
            cidr.name(),
            &mut updater,
            &opts,
        )
        .await
    {
        Ok((o, _)) => o.value().map(Some).map_err(|e| e.to_string()),
        Err(s) if s.code == 404 => Ok(None),
        Err(s) => Err(s.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::parse(s).unwrap()
    }

    fn cache(cidrs: &[(&str, &[&str])], ips: &[&str]) -> Cache {
        Cache {
            cidrs: cidrs
                .iter()
                .map(|(n, rs)| (n.to_string(), rs.iter().map(|r| p(r)).collect()))
                .collect(),
            addresses: ips
                .iter()
                .map(|ip| {
                    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
                    let a = Address {
                        ip: ip.parse().unwrap(),
                        family: family.into(),
                    };
                    (ip.to_string(), a)
                })
                .collect(),
            ..Cache::default()
        }
    }

    #[test]
    fn prefixes_contain_neither_their_network_nor_their_broadcast_address() {
        let r = p("10.96.0.0/28");
        assert!(r.contains_address("10.96.0.1".parse().unwrap()));
        assert!(r.contains_address("10.96.0.14".parse().unwrap()));
        assert!(!r.contains_address("10.96.0.0".parse().unwrap()));
        assert!(!r.contains_address("10.96.0.15".parse().unwrap()));
        assert!(!r.contains_address("10.96.0.16".parse().unwrap()));
        let v6 = p("2001:db8::/64");
        assert!(v6.contains_address("2001:db8::ffff:ffff:ffff:ffff".parse().unwrap()));
        assert!(!v6.contains_address("2001:db8::".parse().unwrap()));
        assert!(!v6.contains_address("10.96.0.1".parse().unwrap()));
        assert!(p("10.0.0.0/8").overlaps(&p("10.96.0.0/28")));
        assert!(p("10.96.0.0/28").overlaps(&p("10.0.0.0/8")));
        assert!(!p("10.96.0.0/28").overlaps(&p("10.96.0.16/28")));
        assert!(!p("10.0.0.0/8").overlaps(&p("2001:db8::/64")));
        assert_eq!(p("10.96.0.7/28"), p("10.96.0.0/28"), "masked as netip does");
    }

    #[test]
    fn a_range_with_an_address_no_other_range_holds_cannot_go() {
        let c = cache(
            &[
                ("kubernetes", &["10.0.0.0/24"]),
                ("extra", &["10.96.0.0/28"]),
            ],
            &["10.0.0.1", "10.96.0.5"],
        );
        assert!(!c.can_delete("extra", &[p("10.96.0.0/28")]));
        assert!(!c.can_delete("kubernetes", &[p("10.0.0.0/24")]));
        // Addresses outside the range, or of another family, do not hold it.
        let c = cache(&[("extra", &["10.96.0.0/28"])], &["10.96.0.20", "10.0.0.1"]);
        assert!(c.can_delete("extra", &[p("10.96.0.0/28")]));
    }

    #[test]
    fn a_range_inside_another_serviceccidr_can_go_whatever_it_holds() {
        let c = cache(
            &[("extra", &["10.96.0.0/28"]), ("wide", &["10.96.0.0/16"])],
            &["10.96.0.5"],
        );
        assert!(c.can_delete("extra", &[p("10.96.0.0/28")]));
        // The same range twice: each covers the other.
        let c = cache(
            &[("a", &["10.96.0.0/28"]), ("b", &["10.96.0.0/28"])],
            &["10.96.0.5"],
        );
        assert!(c.can_delete("a", &[p("10.96.0.0/28")]));
        // A narrower one does not contain the range, but holds the address.
        let c = cache(
            &[("extra", &["10.96.0.0/24"]), ("narrow", &["10.96.0.0/28"])],
            &["10.96.0.5", "10.96.0.100"],
        );
        assert!(!c.can_delete("extra", &[p("10.96.0.0/24")]), "10.96.0.100");
        let c = cache(
            &[("extra", &["10.96.0.0/24"]), ("narrow", &["10.96.0.0/28"])],
            &["10.96.0.5"],
        );
        assert!(c.can_delete("extra", &[p("10.96.0.0/24")]));
    }

    #[test]
    fn events_queue_the_servicecidrs_they_concern() {
        let mut c = cache(
            &[("extra", &["10.96.0.0/28"]), ("other", &["192.168.0.0/24"])],
            &[],
        );
        let mut q = BTreeSet::new();
        let new = json!({"metadata": {"name": "wide"}, "spec": {"cidrs": ["10.96.0.0/16"]}});
        c.apply(Change::Cidrs(Delta::Upsert(new.clone())), &mut q);
        assert_eq!(q, BTreeSet::from(["extra".into(), "wide".into()]));
        q.clear();
        c.apply(Change::Cidrs(Delta::Upsert(new)), &mut q);
        assert_eq!(q, BTreeSet::from(["wide".into()]), "an update: itself");
        q.clear();
        let ours = json!({"metadata": {"name": "10.96.0.5", "labels": {LABEL_MANAGED_BY: IPALLOCATOR_MANAGER, LABEL_IP_FAMILY: "IPv4"}}});
        c.apply(Change::Addresses(Delta::Upsert(ours.clone())), &mut q);
        assert_eq!(q, BTreeSet::from(["extra".into(), "wide".into()]));
        q.clear();
        let theirs = json!({"metadata": {"name": "10.96.0.6", "labels": {LABEL_MANAGED_BY: "someone-else"}}});
        c.apply(Change::Addresses(Delta::Upsert(theirs)), &mut q);
        assert!(q.is_empty(), "another allocator's address is not counted");
        assert_eq!(c.addresses.len(), 1);
        c.apply(Change::Addresses(Delta::Deleted(ours)), &mut q);
        assert_eq!(q, BTreeSet::from(["extra".into(), "wide".into()]));
        assert!(c.addresses.is_empty());
    }

    #[test]
    fn both_lists_must_be_in_before_anything_is_judged() {
        let mut c = Cache::default();
        let mut q = BTreeSet::new();
        let cidr = json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.96.0.0/28"]}});
        c.apply(Change::Cidrs(Delta::Replace(vec![cidr])), &mut q);
        assert!(c.cidrs_listed && !c.addresses_listed);
        c.apply(Change::Addresses(Delta::Replace(vec![])), &mut q);
        assert!(c.cidrs_listed && c.addresses_listed);
        assert_eq!(q, BTreeSet::from(["extra".into()]));
    }

    #[test]
    fn the_condition_is_rewritten_only_when_it_says_something_else() {
        let ready = Condition {
            status: "True",
            reason: Some(""),
            message: READY_MESSAGE,
        };
        let with = |c: Value| json!({"status": {"conditions": [c]}});
        assert!(condition_matches(
            &with(
                json!({"type": "Ready", "status": "True", "message": READY_MESSAGE, "lastTransitionTime": "2026-01-01T00:00:00Z"})
            ),
            &ready
        ));
        // The API server's own message on the default ServiceCIDR is replaced, as upstream's
        // controller replaces it.
        assert!(!condition_matches(
            &with(
                json!({"type": "Ready", "status": "True", "reason": "", "message": "Kubernetes default Service CIDR is ready"})
            ),
            &ready
        ));
        assert!(!condition_matches(&json!({}), &ready));
    }
}
