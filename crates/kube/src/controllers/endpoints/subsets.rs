//! Endpoints subsets: the typed form the endpoints and mirroring controllers compare and write,
//! upstream's canonical packing of them (pkg/api/v1/endpoints `RepackSubsets`: addresses
//! grouped by the exact set of ports they serve, an address not ready on any port not ready on
//! that port) and the 1000-address cap (`truncateEndpoints`).
//!
//! Upstream orders subsets and ports by a hash of their Go dump; here they are ordered by their
//! content, which is as stable and needs no hash. Addresses are ordered by IP, then pod UID, as
//! upstream does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `v1.ObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ObjectRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

impl ObjectRef {
    /// The reference to a pod the controllers write.
    pub fn pod(namespace: &str, name: &str, uid: &str) -> ObjectRef {
        ObjectRef {
            kind: "Pod".into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
            ..ObjectRef::default()
        }
    }

    /// Equal but for the resourceVersion, which changes with every pod write and is no reason to
    /// write endpoints again.
    pub fn same_target(&self, other: &ObjectRef) -> bool {
        ObjectRef {
            resource_version: String::new(),
            ..self.clone()
        } == ObjectRef {
            resource_version: String::new(),
            ..other.clone()
        }
    }
}

/// `v1.EndpointAddress`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Address {
    #[serde(default)]
    pub ip: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectRef>,
}

impl Address {
    /// The identity of an address in a packing: its IP and the UID of what it points at.
    fn identity(&self) -> (String, String) {
        let uid = self
            .target_ref
            .as_ref()
            .map(|r| r.uid.clone())
            .unwrap_or_default();
        (self.ip.clone(), uid)
    }

    fn same(&self, other: &Address) -> bool {
        self.ip == other.ip
            && self.hostname == other.hostname
            && self.node_name == other.node_name
            && match (&self.target_ref, &other.target_ref) {
                (Some(a), Some(b)) => a.same_target(b),
                (a, b) => a == b,
            }
    }
}

/// `v1.EndpointPort`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Port {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub port: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

/// `v1.EndpointSubset`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Subset {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Address>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready_addresses: Vec<Address>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
}

impl Subset {
    fn len(&self) -> usize {
        self.addresses.len() + self.not_ready_addresses.len()
    }
}

/// The subsets of an Endpoints object (none when they cannot be read).
pub(super) fn subsets_of(endpoints: &Value) -> Vec<Subset> {
    endpoints
        .get("subsets")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Subsets as JSON.
pub(super) fn to_value(subsets: &[Subset]) -> Value {
    serde_json::to_value(subsets).unwrap_or(Value::Null)
}

/// Whether two packings say the same (pods' resourceVersions aside).
pub(super) fn same(a: &[Subset], b: &[Subset]) -> bool {
    let same_addresses = |x: &[Address], y: &[Address]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.same(q))
    };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.ports == y.ports
                && same_addresses(&x.addresses, &y.addresses)
                && same_addresses(&x.not_ready_addresses, &y.not_ready_addresses)
        })
}

/// The number of addresses, ready or not.
pub(super) fn count(subsets: &[Subset]) -> usize {
    subsets.iter().map(Subset::len).sum()
}

/// One address serving `ports` (none: a headless Service without ports), ready or not: what
/// the endpoints controller adds per pod and Service port before packing.
pub(super) fn single(address: Address, ports: Vec<Port>, ready: bool) -> Subset {
    if ready {
        Subset {
            addresses: vec![address],
            not_ready_addresses: Vec::new(),
            ports,
        }
    } else {
        Subset {
            addresses: Vec::new(),
            not_ready_addresses: vec![address],
            ports,
        }
    }
}

/// `RepackSubsets`: the canonical form of `subsets`. Each address (by IP and target UID, its
/// first occurrence kept) is mapped to the ports it serves, not ready on a port if any subset
/// says so; ports serving exactly the same addresses with the same readiness form one subset.
pub(super) fn repack(subsets: &[Subset]) -> Vec<Subset> {
    type Identity = (String, String);
    let mut addresses: BTreeMap<Identity, Address> = BTreeMap::new();
    // `None` stands for "no ports", so that addresses of a subset without ports are kept.
    let mut by_port: BTreeMap<Option<Port>, BTreeMap<Identity, bool>> = BTreeMap::new();
    for subset in subsets {
        let ports: Vec<Option<Port>> = if subset.ports.is_empty() {
            vec![None]
        } else {
            subset.ports.iter().cloned().map(Some).collect()
        };
        let all = subset
            .addresses
            .iter()
            .map(|a| (a, true))
            .chain(subset.not_ready_addresses.iter().map(|a| (a, false)));
        for (address, ready) in all {
            let id = address.identity();
            addresses
                .entry(id.clone())
                .or_insert_with(|| address.clone());
            for port in &ports {
                by_port
                    .entry(port.clone())
                    .or_default()
                    .entry(id.clone())
                    .and_modify(|r| *r = *r && ready)
                    .or_insert(ready);
            }
        }
    }
    let mut groups: BTreeMap<BTreeMap<Identity, bool>, Vec<Port>> = BTreeMap::new();
    for (port, set) in by_port {
        let ports = groups.entry(set).or_default();
        ports.extend(port);
    }
    let mut packed: Vec<Subset> = groups
        .into_iter()
        .map(|(set, mut ports)| {
            ports.sort();
            let mut subset = Subset {
                ports,
                ..Subset::default()
            };
            for (id, ready) in set {
                let address = addresses[&id].clone();
                if ready {
                    subset.addresses.push(address);
                } else {
                    subset.not_ready_addresses.push(address);
                }
            }
            subset
        })
        .collect();
    packed.sort();
    packed
}

/// `truncateEndpoints`: keeps at most `max` addresses, ready ones first, each subset keeping
/// its share (rounded up, the last ones getting what is left). True when it cut.
pub(super) fn truncate(subsets: &mut [Subset], max: usize) -> bool {
    let ready: usize = subsets.iter().map(|s| s.addresses.len()).sum();
    let not_ready: usize = subsets.iter().map(|s| s.not_ready_addresses.len()).sum();
    if ready + not_ready <= max {
        return false;
    }
    let cut_ready = ready > max;
    let (room, total) = if cut_ready {
        (max, ready)
    } else {
        (max - ready, not_ready)
    };
    let mut left = room;
    for subset in subsets.iter_mut() {
        let list = if cut_ready {
            subset.not_ready_addresses.clear();
            &mut subset.addresses
        } else {
            &mut subset.not_ready_addresses
        };
        let share = (list.len() * room).div_ceil(total).min(left);
        list.truncate(share);
        left -= list.len();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: &str, uid: &str) -> Address {
        Address {
            ip: ip.into(),
            target_ref: Some(ObjectRef::pod("ns", uid, uid)),
            ..Address::default()
        }
    }

    fn port(name: &str, n: i64) -> Port {
        Port {
            name: name.into(),
            port: n,
            protocol: "TCP".into(),
            app_protocol: None,
        }
    }

    #[test]
    fn repack_groups_addresses_by_their_port_set() {
        // Two pods serve both ports, a third only `b`; the pod that is not ready on `a` is not
        // ready there only.
        let input = vec![
            single(addr("10.0.0.2", "p2"), vec![port("a", 80)], true),
            single(addr("10.0.0.2", "p2"), vec![port("b", 81)], true),
            single(addr("10.0.0.1", "p1"), vec![port("a", 80)], true),
            single(addr("10.0.0.1", "p1"), vec![port("b", 81)], true),
            single(addr("10.0.0.3", "p3"), vec![port("b", 81)], false),
        ];
        let packed = repack(&input);
        assert_eq!(
            packed,
            vec![
                Subset {
                    addresses: vec![addr("10.0.0.1", "p1"), addr("10.0.0.2", "p2")],
                    not_ready_addresses: vec![],
                    ports: vec![port("a", 80)],
                },
                Subset {
                    addresses: vec![addr("10.0.0.1", "p1"), addr("10.0.0.2", "p2")],
                    not_ready_addresses: vec![addr("10.0.0.3", "p3")],
                    ports: vec![port("b", 81)],
                },
            ]
        );
        // Packing is idempotent and does not depend on the input's order.
        assert_eq!(repack(&packed), packed);
        let mut reversed = input.clone();
        reversed.reverse();
        assert_eq!(repack(&reversed), packed);
    }

    #[test]
    fn repack_merges_ports_with_the_same_addresses_and_keeps_portless_ones() {
        let input = vec![
            single(addr("10.0.0.1", "p1"), vec![port("b", 81)], true),
            single(addr("10.0.0.1", "p1"), vec![port("a", 80)], true),
            single(addr("10.0.0.9", "p9"), vec![], true),
        ];
        let packed = repack(&input);
        assert_eq!(packed.len(), 2);
        assert_eq!(packed[0].ports, vec![port("a", 80), port("b", 81)]);
        assert_eq!(packed[1].ports, vec![]);
        assert_eq!(packed[1].addresses, vec![addr("10.0.0.9", "p9")]);
        // Not ready anywhere trumps ready on the same port.
        let packed = repack(&[
            single(addr("10.0.0.1", "p1"), vec![port("a", 80)], true),
            single(addr("10.0.0.1", "p1"), vec![port("a", 80)], false),
        ]);
        assert_eq!(packed[0].addresses, vec![]);
        assert_eq!(packed[0].not_ready_addresses, vec![addr("10.0.0.1", "p1")]);
    }

    #[test]
    fn truncation_keeps_ready_addresses_first_in_proportion() {
        let many = |n: usize, ready: bool, p: &str| {
            let list: Vec<Address> = (0..n)
                .map(|i| addr(&format!("10.1.{}.{}", i / 250, i % 250), &format!("{p}{i}")))
                .collect();
            if ready {
                Subset {
                    addresses: list,
                    ports: vec![port(p, 1)],
                    ..Subset::default()
                }
            } else {
                Subset {
                    not_ready_addresses: list,
                    ports: vec![port(p, 1)],
                    ..Subset::default()
                }
            }
        };
        let mut subsets = vec![many(600, true, "a"), many(600, false, "b")];
        assert!(truncate(&mut subsets, 1000));
        assert_eq!(subsets[0].addresses.len(), 600);
        assert_eq!(subsets[1].not_ready_addresses.len(), 400);
        let mut subsets = vec![
            many(900, true, "a"),
            many(300, true, "b"),
            many(10, false, "c"),
        ];
        assert!(truncate(&mut subsets, 1000));
        assert_eq!(
            subsets.iter().map(|s| s.len()).collect::<Vec<_>>(),
            [750, 250, 0]
        );
        let mut small = vec![many(3, true, "a")];
        assert!(!truncate(&mut small, 1000));
        assert_eq!(count(&small), 3);
    }

    #[test]
    fn comparison_ignores_pod_resource_versions() {
        let mut a = vec![single(addr("10.0.0.1", "p1"), vec![port("a", 80)], true)];
        let b = a.clone();
        a[0].addresses[0]
            .target_ref
            .as_mut()
            .unwrap()
            .resource_version = "42".into();
        assert!(same(&a, &b));
        a[0].addresses[0].node_name = Some("n".into());
        assert!(!same(&a, &b));
    }
}
