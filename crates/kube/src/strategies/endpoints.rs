//! Endpoints (core/v1), as upstream: ports TCP unless they say otherwise
//! (`SetDefaults_EndpointPort`), `ValidateEndpoints` on create and update, PUT may create, and
//! the API's deprecation warning (v1 Endpoints is deprecated since v1.33) on every write.

use apimachinery::validation::{FieldError, FieldPath, is_valid_ip, is_valid_port_num};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::service::{
    PORT_PROTOCOLS, validate_dns1123_label, validate_non_special_ip, validate_qualified_name,
};
use super::set_default;
use crate::strategies::fields::{list_at as list, str_at as str_of};

pub struct EndpointsStrategy;

/// `validateEndpointAddress`.
fn validate_address(addr: &Value, path: &FieldPath) -> Vec<FieldError> {
    let ip = str_of(addr, "ip");
    let ip_path = path.child("ip");
    let mut errs = is_valid_ip(&ip_path, ip);
    let hostname = str_of(addr, "hostname");
    if !hostname.is_empty() {
        errs.extend(validate_dns1123_label(hostname, &path.child("hostname")));
    }
    if let Some(node) = addr.get("nodeName").and_then(Value::as_str) {
        errs.extend(
            apimachinery::validation::NameValidator::Dns1123Subdomain
                .validate(node, false)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("nodeName"), node, m)),
        );
    }
    errs.extend(validate_non_special_ip(ip, &ip_path));
    errs
}

/// `validateEndpointPort`.
fn validate_port(port: &Value, require_name: bool, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(port, "name");
    if require_name && name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else if !name.is_empty() {
        errs.extend(validate_dns1123_label(name, &path.child("name")));
    }
    let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
    errs.extend(
        is_valid_port_num(number)
            .into_iter()
            .map(|m| FieldError::invalid(&path.child("port"), json!(number), m)),
    );
    let protocol = str_of(port, "protocol");
    if protocol.is_empty() {
        errs.push(FieldError::required(&path.child("protocol"), ""));
    } else if !PORT_PROTOCOLS.contains(&protocol) {
        errs.push(FieldError::not_supported(
            &path.child("protocol"),
            protocol,
            PORT_PROTOCOLS,
        ));
    }
    if let Some(app) = port.get("appProtocol").and_then(Value::as_str) {
        errs.extend(validate_qualified_name(app, &path.child("appProtocol")));
    }
    errs
}

/// `validateEndpointSubsets`.
fn validate_subsets(obj: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("subsets");
    let mut errs = Vec::new();
    for (i, ss) in list(obj, "subsets").iter().enumerate() {
        let p = path.index(i);
        let ready = list(ss, "addresses");
        let not_ready = list(ss, "notReadyAddresses");
        if ready.is_empty() && not_ready.is_empty() {
            errs.push(FieldError::required(
                &p,
                "must specify `addresses` or `notReadyAddresses`",
            ));
        }
        for (j, a) in ready.iter().enumerate() {
            errs.extend(validate_address(a, &p.child("addresses").index(j)));
        }
        for (j, a) in not_ready.iter().enumerate() {
            errs.extend(validate_address(a, &p.child("notReadyAddresses").index(j)));
        }
        let ports = list(ss, "ports");
        for (j, port) in ports.iter().enumerate() {
            errs.extend(validate_port(
                port,
                ports.len() > 1,
                &p.child("ports").index(j),
            ));
        }
    }
    errs
}

/// An address's identity when subsets are merged: its IP and its target's UID.
fn address_key(addr: &Value) -> (String, String) {
    (
        str_of(addr, "ip").to_string(),
        addr.pointer("/targetRef/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    )
}

/// The addresses a port is offered on: (index into the de-duplicated addresses, ready).
type AddressSet = Vec<(usize, bool)>;

/// Upstream's `RepackSubsets` (pkg/api/endpoints), its `Canonicalize`: every (port, address)
/// pair is expanded, addresses de-duplicated by IP and target UID (not ready wins over ready),
/// ports offering the same addresses grouped into one subset, addresses sorted by IP then
/// UID. Upstream orders ports and subsets by an MD5 of Go's debug printing of them, which is
/// not reproduced: they keep the order they first appear in.
fn repack_subsets(subsets: &[Value]) -> Vec<Value> {
    // Addresses in first-seen form, and for each port the (address index, ready) it offers.
    let mut addresses: Vec<((String, String), Value)> = Vec::new();
    let mut by_port: Vec<(Value, AddressSet)> = Vec::new();
    // Addresses of a subset without ports are kept under a sentinel port (`null`).
    let sentinel = [Value::Null];
    for ss in subsets {
        let ports = match list(ss, "ports") {
            [] => &sentinel[..],
            ports => ports,
        };
        for port in ports {
            let ready = list(ss, "addresses").iter().map(|a| (a, true));
            let not_ready = list(ss, "notReadyAddresses").iter().map(|a| (a, false));
            for (addr, is_ready) in ready.chain(not_ready) {
                let key = address_key(addr);
                let idx = match addresses.iter().position(|(k, _)| *k == key) {
                    Some(i) => i,
                    None => {
                        addresses.push((key, addr.clone()));
                        addresses.len() - 1
                    }
                };
                let slot = match by_port.iter().position(|(p, _)| p == port) {
                    Some(i) => i,
                    None => {
                        by_port.push((port.clone(), Vec::new()));
                        by_port.len() - 1
                    }
                };
                let set = &mut by_port[slot].1;
                match set.iter_mut().find(|(i, _)| *i == idx) {
                    // Not ready trumps ready.
                    Some(entry) => entry.1 = entry.1 && is_ready,
                    None => set.push((idx, is_ready)),
                }
            }
        }
    }
    // Ports offering the same set of addresses share a subset.
    let mut groups: Vec<(AddressSet, Vec<Value>)> = Vec::new();
    for (port, mut set) in by_port {
        set.sort_unstable();
        match groups.iter_mut().find(|(s, _)| *s == set) {
            Some((_, ports)) => ports.push(port),
            None => groups.push((set, vec![port])),
        }
    }
    let sorted = |idxs: Vec<usize>| {
        let mut v: Vec<&((String, String), Value)> = idxs.iter().map(|i| &addresses[*i]).collect();
        v.sort_by(|a, b| {
            a.0.0
                .as_bytes()
                .cmp(b.0.0.as_bytes())
                .then(a.0.1.cmp(&b.0.1))
        });
        v.into_iter()
            .map(|(_, a)| a.clone())
            .collect::<Vec<Value>>()
    };
    groups
        .into_iter()
        .map(|(set, ports)| {
            let ready = sorted(set.iter().filter(|(_, r)| *r).map(|(i, _)| *i).collect());
            let not_ready = sorted(set.iter().filter(|(_, r)| !*r).map(|(i, _)| *i).collect());
            let mut ss = serde_json::Map::new();
            if !ready.is_empty() {
                ss.insert("addresses".into(), Value::Array(ready));
            }
            if !not_ready.is_empty() {
                ss.insert("notReadyAddresses".into(), Value::Array(not_ready));
            }
            let ports: Vec<Value> = ports.into_iter().filter(|p| !p.is_null()).collect();
            if !ports.is_empty() {
                ss.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(ss)
        })
        .collect()
}

/// Canonicalizes a valid object's subsets (upstream does it after validation, so errors name
/// the subsets as the client sent them).
fn canonicalize(obj: &mut Value) {
    if !validate_subsets(obj).is_empty() {
        return;
    }
    let Some(subsets) = obj.get("subsets").and_then(Value::as_array) else {
        return;
    };
    let repacked = repack_subsets(subsets);
    if let Some(m) = obj.as_object_mut() {
        if repacked.is_empty() {
            m.remove("subsets");
        } else {
            m.insert("subsets".into(), Value::Array(repacked));
        }
    }
}

impl Strategy for EndpointsStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        canonicalize(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        canonicalize(new);
    }

    fn default(&self, obj: &mut Value) {
        for ss in obj
            .get_mut("subsets")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for port in ss
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter(|p| p.is_object())
            {
                set_default(port, "protocol", json!("TCP"));
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_subsets(obj)
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_are_repacked() {
        let subsets = vec![
            json!({"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}], "ports": [{"name": "a", "port": 80, "protocol": "TCP"}]}),
            json!({"notReadyAddresses": [{"ip": "10.0.0.2"}], "addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "a", "port": 80, "protocol": "TCP"}]}),
            json!({"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "b", "port": 81, "protocol": "TCP"}]}),
            json!({"addresses": [{"ip": "10.0.0.7"}]}),
        ];
        assert_eq!(
            repack_subsets(&subsets),
            vec![
                json!({"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.2"}], "ports": [{"name": "a", "port": 80, "protocol": "TCP"}]}),
                json!({"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "b", "port": 81, "protocol": "TCP"}]}),
                json!({"addresses": [{"ip": "10.0.0.7"}]}),
            ]
        );
    }

    #[test]
    fn addresses_and_ports_are_checked() {
        let obj = json!({"subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": 0, "protocol": "TCP"}]}, {}]});
        let msgs: Vec<String> = EndpointsStrategy
            .validate(&obj)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message()))
            .collect();
        assert_eq!(
            msgs,
            vec![
                "subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
            ]
        );
    }
}
