//! Services: upstream's defaults, port and cluster IP validation, and allocation of cluster IPs
//! (from `--service-cluster-ip-range`) and node ports (from `--service-node-port-range`).
//! The allocator lives in memory and is rebuilt from stored Services at start; upstream keeps
//! it in storage (IPAddress objects), which replicas sharing etcd will need too.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use rand::Rng;
use serde_json::{Value, json};

pub struct ServiceIpAllocator {
    base: u32,
    size: u32,
    ips: Mutex<BTreeSet<u32>>,
    node_ports: Mutex<BTreeSet<u16>>,
    port_range: (u16, u16),
}

impl ServiceIpAllocator {
    /// `cidr` like `10.0.0.0/24`, `ports` like `30000-32767`.
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
        let size = 1u32 << (32 - bits);
        let base = u32::from(addr) & !(size - 1);
        let (lo, hi) = ports
            .split_once('-')
            .ok_or_else(|| format!("invalid port range {ports:?}"))?;
        let lo: u16 = lo
            .trim()
            .parse()
            .map_err(|_| format!("invalid port range {ports:?}"))?;
        let hi: u16 = hi
            .trim()
            .parse()
            .map_err(|_| format!("invalid port range {ports:?}"))?;
        if lo > hi {
            return Err(format!("invalid port range {ports:?}"));
        }
        Ok(Self {
            base,
            size,
            ips: Mutex::new(BTreeSet::new()),
            node_ports: Mutex::new(BTreeSet::new()),
            port_range: (lo, hi),
        })
    }

    /// The first address of the range, which upstream gives the `kubernetes` Service.
    pub fn first_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1)
    }

    /// Marks an address taken (a stored Service, or an explicit `clusterIP`). False if it was.
    pub fn reserve_ip(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        if n < self.base || n >= self.base + self.size {
            return true;
        }
        self.ips.lock().map(|mut s| s.insert(n)).unwrap_or(false)
    }

    pub fn in_range(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        n > self.base && n < self.base + self.size - 1
    }

    /// A free address, chosen at random like upstream; skips the network, the first and the
    /// broadcast address.
    pub fn allocate_ip(&self) -> Option<Ipv4Addr> {
        let mut ips = self.ips.lock().ok()?;
        let usable = self.size.checked_sub(3)?;
        let start = rand::rng().random_range(0..usable.max(1));
        (0..usable)
            .map(|i| self.base + 2 + (start + i) % usable)
            .find(|n| ips.insert(*n))
            .map(Ipv4Addr::from)
    }

    pub fn release_ip(&self, ip: Ipv4Addr) {
        if let Ok(mut s) = self.ips.lock() {
            s.remove(&u32::from(ip));
        }
    }

    pub fn reserve_port(&self, port: u16) -> bool {
        self.node_ports
            .lock()
            .map(|mut s| s.insert(port))
            .unwrap_or(false)
    }

    pub fn allocate_port(&self) -> Option<u16> {
        let mut ports = self.node_ports.lock().ok()?;
        let (lo, hi) = self.port_range;
        let span = u32::from(hi - lo) + 1;
        let start = rand::rng().random_range(0..span);
        (0..span)
            .map(|i| lo + ((start + i) % span) as u16)
            .find(|p| ports.insert(*p))
    }

    pub fn release_port(&self, port: u16) {
        if let Ok(mut s) = self.node_ports.lock() {
            s.remove(&port);
        }
    }

    /// Records what a stored Service holds, when the allocator is rebuilt at start.
    pub fn observe(&self, svc: &Value) {
        let (ip, ports) = held(svc);
        if let Some(ip) = ip {
            self.reserve_ip(ip);
        }
        for p in ports {
            self.reserve_port(p);
        }
    }
}

/// The cluster IP and node ports a Service holds in the allocator.
fn held(svc: &Value) -> (Option<Ipv4Addr>, Vec<u16>) {
    let ip = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            p.get("nodePort")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok())
        })
        .collect();
    (ip, ports)
}

pub struct ServiceStrategy {
    pub allocator: std::sync::Arc<ServiceIpAllocator>,
}

fn service_type(obj: &Value) -> &str {
    obj.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

impl Strategy for ServiceStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        if spec.get("type").is_none() {
            spec["type"] = json!("ClusterIP");
        }
        if spec.get("sessionAffinity").is_none() {
            spec["sessionAffinity"] = json!("None");
        }
        let ty = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
        if ty != "ExternalName" {
            if spec.get("internalTrafficPolicy").is_none() {
                spec["internalTrafficPolicy"] = json!("Cluster");
            }
            if matches!(ty.as_str(), "NodePort" | "LoadBalancer")
                && spec.get("externalTrafficPolicy").is_none()
            {
                spec["externalTrafficPolicy"] = json!("Cluster");
            }
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                if p.get("protocol").is_none() {
                    p["protocol"] = json!("TCP");
                }
                if p.get("targetPort").is_none() {
                    p["targetPort"] = p.get("port").cloned().unwrap_or(Value::Null);
                }
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"loadBalancer": {}});
        let ty = service_type(obj).to_string();
        if ty == "ExternalName" {
            return;
        }
        let spec = &mut obj["spec"];
        let requested = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if requested.is_empty() {
            if let Some(ip) = self.allocator.allocate_ip() {
                spec["clusterIP"] = json!(ip.to_string());
            }
        } else if let Ok(ip) = requested.parse::<Ipv4Addr>() {
            self.allocator.reserve_ip(ip);
        }
        let cip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        if spec.get("clusterIPs").is_none() && cip.is_string() {
            spec["clusterIPs"] = json!([cip]);
        }
        if cip != json!("None") && spec.get("ipFamilies").is_none() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec.get("ipFamilyPolicy").is_none() {
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
        if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
            for p in spec
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                match p
                    .get("nodePort")
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok())
                {
                    Some(n) => {
                        self.allocator.reserve_port(n);
                    }
                    None => {
                        if let Some(n) = self.allocator.allocate_port() {
                            p["nodePort"] = json!(n);
                        }
                    }
                }
            }
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // Allocated values stay when the client leaves them out (e.g. a `kubectl replace` of a
        // manifest without clusterIP).
        for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if new.pointer(&format!("/spec/{f}")).is_none()
                && let (Some(v), Some(spec)) = (
                    old.pointer(&format!("/spec/{f}")),
                    new.get_mut("spec").filter(|s| s.is_object()),
                )
            {
                spec[f] = v.clone();
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = FieldPath::new("spec");
        let mut errs = Vec::new();
        let ty = service_type(obj);
        let ports = obj.pointer("/spec/ports").and_then(Value::as_array);
        let headless = obj.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
        if ty != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(&spec.child("ports"), ""));
        }
        for (i, p) in ports.into_iter().flatten().enumerate() {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&port) {
                errs.push(FieldError::invalid(
                    &spec.child("ports").index(i).child("port"),
                    json!(port),
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
        // The addresses asked for: `clusterIPs` when given, else the legacy `clusterIP`,
        // reported at `clusterIPs[i]` either way, as upstream does.
        let requested: Vec<&str> = match obj.pointer("/spec/clusterIPs").and_then(Value::as_array) {
            Some(ips) => ips.iter().map(|ip| ip.as_str().unwrap_or("")).collect(),
            None => obj
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .into_iter()
                .collect(),
        };
        for (i, ip) in requested.into_iter().enumerate() {
            if ip != "None" && ip.parse::<std::net::IpAddr>().is_err() {
                errs.push(FieldError::invalid(
                    &spec.child("clusterIPs").index(i),
                    json!(ip),
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                ));
            }
        }
        errs
    }

    fn after_delete(&self, obj: &Value) {
        let (ip, ports) = held(obj);
        if let Some(ip) = ip {
            self.allocator.release_ip(ip);
        }
        for p in ports {
            self.allocator.release_port(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_distinct_addresses_in_range() {
        let a = ServiceIpAllocator::new("10.0.0.0/29", "30000-30001").unwrap();
        assert_eq!(a.first_ip(), Ipv4Addr::new(10, 0, 0, 1));
        let ips: BTreeSet<_> = (0..5).map(|_| a.allocate_ip().unwrap()).collect();
        assert_eq!(ips.len(), 5);
        assert!(ips.iter().all(|ip| a.in_range(*ip) && *ip != a.first_ip()));
        assert_eq!(a.allocate_ip(), None, "the range is full");
        assert!(a.allocate_port().is_some() && a.allocate_port().is_some());
        assert_eq!(a.allocate_port(), None);
    }
}
