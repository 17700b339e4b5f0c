//! EndpointSlices, as upstream's pkg/apis/discovery and pkg/registry/discovery/endpointslice:
//! a port is TCP unless it says otherwise and has a name, empty by default
//! (`SetDefaults_EndpointPort`); `ValidateEndpointSlice` on create and update (address type
//! immutable); the generation follows label changes too; FQDN slices are deprecated.

use apimachinery::validation::{
    FieldError, FieldPath, NameValidator, is_fully_qualified_domain_name, is_valid_ip,
    is_valid_ip_for_legacy_field, is_valid_label_value, validate_labels,
};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::service::{
    PORT_PROTOCOLS, ip_warnings, validate_dns1123_label, validate_non_special_ip,
};
use super::set_default;
use crate::strategies::fields::{list_at as list, str_at as str_of};

pub struct EndpointSliceStrategy;

const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_HINTS: usize = 8;
/// Upstream's `supportedAddressTypes`, sorted as its messages list them.
const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];

fn too_many(path: &FieldPath, n: usize, max: usize) -> FieldError {
    FieldError::too_many(path, Some(n as i64), Some(max as i64))
}

/// One address of the slice's type (`validateEndpoints`): the format errors at the address's
/// index, the family mismatch at the `addresses` list, then the special ranges
/// (`ValidateEndpointIP`) at the index again. IPv4 addresses are a legacy field (any form
/// StrictIPCIDRValidation admits), IPv6 ones must be canonical.
fn validate_address(
    address: &str,
    address_type: &str,
    list_path: &FieldPath,
    index: usize,
) -> Vec<FieldError> {
    let at = list_path.index(index);
    let (mut errs, want_v6, family) = match address_type {
        "IPv4" => (
            is_valid_ip_for_legacy_field(&at, address, true, &[]),
            false,
            "must be an IPv4 address",
        ),
        "IPv6" => (is_valid_ip(&at, address), true, "must be an IPv6 address"),
        "FQDN" => return is_fully_qualified_domain_name(&at, address),
        _ => return Vec::new(),
    };
    if !errs.is_empty() {
        return errs;
    }
    // `netutils.IsIPv4String` / `IsIPv6String`: an IPv4-mapped IPv6 text is IPv4.
    let is_v4 = address.parse::<std::net::IpAddr>().map_or_else(
        |_| !address.contains(':'),
        |ip| match ip {
            std::net::IpAddr::V4(_) => true,
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some(),
        },
    );
    if is_v4 == want_v6 {
        errs.push(FieldError::invalid(list_path, address, family));
    }
    errs.extend(validate_non_special_ip(address, &at));
    errs
}

/// `validateHints`: at most 8 zones and nodes, no repeats, valid names; too many zones ends
/// the check before the nodes.
fn validate_hints(hints: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, zone) in [("forZones", true), ("forNodes", false)] {
        let items = list(hints, field);
        let p = path.child(field);
        if items.len() > MAX_HINTS {
            errs.push(too_many(&p, items.len(), MAX_HINTS));
            return errs;
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let name = str_of(item, "name");
            let name_path = p.index(i).child("name");
            if seen.contains(&name) {
                errs.push(FieldError::duplicate(&name_path, name));
            } else {
                seen.push(name);
            }
            let msgs = if zone {
                is_valid_label_value(name)
            } else {
                NameValidator::Dns1123Subdomain.validate(name, false)
            };
            errs.extend(
                msgs.into_iter()
                    .map(|m| FieldError::invalid(&name_path, name, m)),
            );
        }
    }
    errs
}

/// `validateAddressType`.
fn validate_address_type(address_type: &str) -> Vec<FieldError> {
    let type_path = FieldPath::new("addressType");
    if address_type.is_empty() {
        vec![FieldError::required(&type_path, "")]
    } else if !ADDRESS_TYPES.contains(&address_type) {
        vec![FieldError::not_supported(
            &type_path,
            address_type,
            ADDRESS_TYPES,
        )]
    } else {
        Vec::new()
    }
}

/// `validatePorts`.
fn validate_ports(ports: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ports_path = FieldPath::new("ports");
    if ports.len() > MAX_PORTS {
        errs.push(too_many(&ports_path, ports.len(), MAX_PORTS));
        return errs;
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let p = ports_path.index(i);
        let name = str_of(port, "name");
        if !name.is_empty() {
            errs.extend(validate_dns1123_label(name, &p.child("name")));
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(&p.child("name"), name));
        } else {
            names.push(name);
        }
        match port.get("protocol").and_then(Value::as_str) {
            None => errs.push(FieldError::required(&p.child("protocol"), "")),
            Some(proto) if !PORT_PROTOCOLS.contains(&proto) => errs.push(
                FieldError::not_supported(&p.child("protocol"), proto, PORT_PROTOCOLS),
            ),
            _ => {}
        }
        if let Some(app) = port.get("appProtocol").and_then(Value::as_str) {
            errs.extend(
                apimachinery::validation::is_qualified_name(app)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("appProtocol"), app, m)),
            );
        }
    }
    errs
}

/// `validateEndpoints`.
fn validate_endpoints(endpoints: &[Value], address_type: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let eps_path = FieldPath::new("endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(too_many(&eps_path, endpoints.len(), MAX_ENDPOINTS));
        return errs;
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let p = eps_path.index(i);
        let addr_path = p.child("addresses");
        let addresses = list(ep, "addresses");
        if addresses.is_empty() {
            errs.push(FieldError::required(
                &addr_path,
                "must contain at least 1 address",
            ));
        } else if addresses.len() > MAX_ADDRESSES {
            errs.push(too_many(&addr_path, addresses.len(), MAX_ADDRESSES));
        }
        for (j, a) in addresses.iter().enumerate() {
            errs.extend(validate_address(
                a.as_str().unwrap_or(""),
                address_type,
                &addr_path,
                j,
            ));
        }
        if let Some(node) = ep.get("nodeName").and_then(Value::as_str) {
            // `ValidateNodeName`: a DNS subdomain.
            let nn_path = p.child("nodeName");
            errs.extend(
                NameValidator::Dns1123Subdomain
                    .validate(node, false)
                    .into_iter()
                    .map(|m| FieldError::invalid(&nn_path, node, m)),
            );
        }
        let topo_path = p.child("deprecatedTopology");
        if let Some(topology) = ep.get("deprecatedTopology").and_then(Value::as_object) {
            if topology.len() > MAX_TOPOLOGY_LABELS {
                errs.push(too_many(&topo_path, topology.len(), MAX_TOPOLOGY_LABELS));
            }
            errs.extend(validate_labels(ep.get("deprecatedTopology"), &topo_path));
        }
        if let Some(host) = ep.get("hostname").and_then(Value::as_str) {
            errs.extend(validate_dns1123_label(host, &p.child("hostname")));
        }
        if let Some(hints) = ep.get("hints").filter(|h| !h.is_null()) {
            errs.extend(validate_hints(hints, &p.child("hints")));
        }
    }
    errs
}

/// `ValidateEndpointSlice` without metadata: address type, ports, then endpoints, whose errors
/// an update that leaves the endpoints as they were does not report.
fn validate_slice(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let address_type = str_of(obj, "addressType");
    let mut errs = validate_address_type(address_type);
    errs.extend(validate_ports(list(obj, "ports")));
    let endpoints = list(obj, "endpoints");
    let endpoint_errs = validate_endpoints(endpoints, address_type);
    if !(old.is_some_and(|o| list(o, "endpoints") == endpoints)) {
        errs.extend(endpoint_errs);
    }
    errs
}

impl Strategy for EndpointSliceStrategy {
    fn default(&self, obj: &mut Value) {
        for port in obj
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|p| p.is_object())
        {
            set_default(port, "protocol", json!("TCP"));
            set_default(port, "name", json!(""));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_deprecated_topology(obj);
    }

    /// Upstream bumps the generation when anything but metadata changed (the store compares
    /// Go's forms), or the labels did, comparing before `dropTopologyOnV1`: a topology that
    /// is about to be dropped counts as a change.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let labels = |v: &Value| {
            v.pointer("/metadata/labels")
                .cloned()
                .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        };
        let endpoints_changed = new.get("endpoints") != old.get("endpoints");
        let drops_topology = endpoints_changed
            && list(new, "endpoints")
                .iter()
                .any(|ep| ep.get("deprecatedTopology").is_some_and(|t| !t.is_null()));
        if drops_topology || labels(new) != labels(old) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
        if endpoints_changed {
            drop_deprecated_topology(new);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_slice(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_slice(new, Some(old));
        let (n, o) = (str_of(new, "addressType"), str_of(old, "addressType"));
        if n != o {
            errs.push(FieldError::invalid(
                &FieldPath::new("addressType"),
                n,
                apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
            ));
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let mut w = fqdn_warning(obj);
        w.extend(bad_ip_warnings(obj));
        w
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        bad_ip_warnings(new)
    }
}

/// v1 writes silently clear `deprecatedTopology` (upstream's `dropTopologyOnV1`; on update only
/// when the endpoints changed).
fn drop_deprecated_topology(obj: &mut Value) {
    for ep in obj
        .get_mut("endpoints")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        ep.remove("deprecatedTopology");
    }
}

/// `warnOnBadIPs`: non-standard addresses, except in slices the controllers manage.
fn bad_ip_warnings(obj: &Value) -> Vec<String> {
    let managed_by = obj
        .pointer("/metadata/labels/endpointslice.kubernetes.io~1managed-by")
        .and_then(Value::as_str);
    if matches!(
        managed_by,
        Some("endpointslice-controller.k8s.io" | "endpointslicemirroring-controller.k8s.io")
    ) {
        return Vec::new();
    }
    let mut w = Vec::new();
    for (i, ep) in list(obj, "endpoints").iter().enumerate() {
        for (j, a) in list(ep, "addresses").iter().enumerate() {
            w.extend(ip_warnings(
                &format!("endpoints[{i}].addresses[{j}]"),
                a.as_str().unwrap_or(""),
            ));
        }
    }
    w
}

fn fqdn_warning(obj: &Value) -> Vec<String> {
    if str_of(obj, "addressType") == "FQDN" {
        vec!["spec.addressType: FQDN endpoints are deprecated".into()]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_the_address_type() {
        let obj = json!({"addressType": "IPv4", "endpoints": [{"addresses": ["fd00::1"]}, {"addresses": []}], "ports": [{"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "TCP"}]});
        let msgs: Vec<String> = validate_slice(&obj, None)
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message()))
            .collect();
        assert_eq!(
            msgs,
            vec![
                "ports[1].name: Duplicate value: \"a\"",
                "endpoints[0].addresses: Invalid value: \"fd00::1\": must be an IPv4 address",
                "endpoints[1].addresses: Required value: must contain at least 1 address",
            ]
        );
    }
}
