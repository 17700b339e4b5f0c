//! Endpoints (core/v1), as upstream: ports TCP unless they say otherwise
//! (`SetDefaults_EndpointPort`), `ValidateEndpoints` on create and update (unchanged subsets
//! pass), warnings for non-standard addresses, PUT may create, and the API's deprecation
//! warning (v1 Endpoints is deprecated since v1.33) on every write. Subsets are stored as sent.

use apimachinery::validation::{
    FieldError, FieldPath, is_valid_ip_for_legacy_field, is_valid_port_num,
};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::service::{
    PORT_PROTOCOLS, ip_warnings, validate_dns1123_label, validate_non_special_ip,
    validate_qualified_name,
};
use super::set_default;
use crate::strategies::fields::{list_at as list, str_at as str_of};

pub struct EndpointsStrategy;

/// `validateEndpointAddress`: `ip` is a legacy field (any form StrictIPCIDRValidation admits),
/// checked again for special ranges after the hostname and node name.
fn validate_address(addr: &Value, path: &FieldPath) -> Vec<FieldError> {
    let ip = str_of(addr, "ip");
    let ip_path = path.child("ip");
    let mut errs = is_valid_ip_for_legacy_field(&ip_path, ip, true, &[]);
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

/// `endpointsWarnings`: addresses in non-standard form, except in Endpoints the endpoints
/// controller manages.
fn address_warnings(obj: &Value) -> Vec<String> {
    if obj
        .pointer("/metadata/labels/endpoints.kubernetes.io~1managed-by")
        .and_then(Value::as_str)
        == Some("endpoint-controller")
    {
        return Vec::new();
    }
    let mut w = Vec::new();
    for (i, ss) in list(obj, "subsets").iter().enumerate() {
        for field in ["addresses", "notReadyAddresses"] {
            for (j, a) in list(ss, field).iter().enumerate() {
                w.extend(ip_warnings(
                    &format!("subsets[{i}].{field}[{j}].ip"),
                    str_of(a, "ip"),
                ));
            }
        }
    }
    w
}

/// Upstream v1.36's strategy prepares nothing and its `Canonicalize` is empty: subsets are
/// stored as sent (the controllers repack their own).
impl Strategy for EndpointsStrategy {
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

    /// `ValidateEndpoints` on update: subsets left as they were are not checked again.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        if list(new, "subsets") == list(old, "subsets") {
            return Vec::new();
        }
        validate_subsets(new)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        address_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        address_warnings(new)
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
