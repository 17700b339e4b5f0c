//! Services: upstream's defaults (`SetDefaults_Service`), validation on create and update
//! (`ValidateService`, `ValidateServiceUpdate`, `ValidateServiceStatusUpdate` of
//! pkg/apis/core/validation), the strategy's handling of type changes
//! (`dropTypeDependentFields`) and warnings (`GetWarningsForService` of pkg/api/service).
//! Cluster IPs and node ports are allocated in `service_alloc`, before the object is prepared
//! and validated, as upstream's service storage does.

use crate::strategies::struct_field;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apimachinery::validation::{
    FieldError, FieldPath, NameValidator, is_dns1123_label, is_dns1123_subdomain,
    is_qualified_name, is_valid_cidr_for_legacy_field, is_valid_ip_for_legacy_field,
    is_valid_port_name, is_valid_port_num, validate_labels,
};
use apiserver::endpoints::ApiResources;
use apiserver::registry::{Finish, Strategy};
use serde_json::{Value, json};

pub use super::service_alloc::ServiceIpAllocator;
use super::service_alloc::{Allocation, IpAddresses};
use super::set_default;
use crate::strategies::fields::{int_at as int_of, str_at as str_of};

pub struct ServiceStrategy {
    pub allocator: Arc<ServiceIpAllocator>,
    pub addresses: IpAddresses,
}

impl ServiceStrategy {
    pub fn new(allocator: Arc<ServiceIpAllocator>, api: Arc<OnceLock<Arc<ApiResources>>>) -> Self {
        Self {
            allocator,
            addresses: IpAddresses { api },
        }
    }

    fn allocation(&self) -> Allocation<'_> {
        Allocation {
            allocator: &self.allocator,
            addresses: &self.addresses,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a Service (absent fields read as Go's zero values).
// ---------------------------------------------------------------------------------------------

/// A string field of `spec`, "" when absent.
pub fn spec_str<'a>(svc: &'a Value, field: &str) -> &'a str {
    svc.get("spec")
        .and_then(|s| s.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn svc_type(svc: &Value) -> &str {
    spec_str(svc, "type")
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub fn cluster_ips(svc: &Value) -> Vec<String> {
    string_list(svc.pointer("/spec/clusterIPs"))
}

pub fn ip_families(svc: &Value) -> Vec<String> {
    string_list(svc.pointer("/spec/ipFamilies"))
}

fn external_ips(svc: &Value) -> Vec<String> {
    string_list(svc.pointer("/spec/externalIPs"))
}

fn ports(svc: &Value) -> &[Value] {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Every type but ExternalName has cluster IPs (upstream's `needsClusterIP`).
pub fn needs_cluster_ip(svc: &Value) -> bool {
    svc_type(svc) != "ExternalName"
}

pub fn needs_node_port(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

/// A LoadBalancer keeping client addresses needs a health check node port
/// (`NeedsHealthCheck`).
pub fn needs_health_check(svc: &Value) -> bool {
    svc_type(svc) == "LoadBalancer" && spec_str(svc, "externalTrafficPolicy") == "Local"
}

/// Reachable from outside the cluster (`ExternallyAccessible`): NodePort, LoadBalancer, or a
/// ClusterIP Service with external IPs.
pub fn externally_accessible(svc: &Value) -> bool {
    match svc_type(svc) {
        "NodePort" | "LoadBalancer" => true,
        "ClusterIP" => !external_ips(svc).is_empty(),
        _ => false,
    }
}

/// Headless as validation sees it: `clusterIPs` is exactly `["None"]`.
fn is_headless(svc: &Value) -> bool {
    let ips = cluster_ips(svc);
    ips.len() == 1 && ips[0] == "None"
}

// ---------------------------------------------------------------------------------------------
// Defaults.
// ---------------------------------------------------------------------------------------------

/// Upstream's `DefaultClientIPServiceAffinitySeconds` and `MaxClientIPServiceAffinitySeconds`.
const DEFAULT_AFFINITY_TIMEOUT: i64 = 10800;
const MAX_AFFINITY_TIMEOUT: i64 = 86400;

fn is_nil(v: Option<&Value>) -> bool {
    v.is_none_or(Value::is_null)
}

/// `SetDefaults_Service`.
fn set_defaults(svc: &mut Value) {
    let accessible_before_type = {
        let Some(spec) = struct_field(svc, "spec") else {
            return;
        };
        set_default(spec, "sessionAffinity", json!("None"));
        match spec["sessionAffinity"].as_str() {
            Some("None") => {
                if let Some(m) = spec.as_object_mut() {
                    m.remove("sessionAffinityConfig");
                }
            }
            Some("ClientIP") => {
                let timeout_set = spec
                    .pointer("/sessionAffinityConfig/clientIP/timeoutSeconds")
                    .is_some_and(|t| !t.is_null());
                if !timeout_set {
                    spec["sessionAffinityConfig"] =
                        json!({"clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_TIMEOUT}});
                }
            }
            _ => {}
        }
        set_default(spec, "type", json!("ClusterIP"));
        for p in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|p| p.is_object())
        {
            set_default(p, "protocol", json!("TCP"));
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                _ => false,
            };
            if unset {
                p["targetPort"] = json!(int_of(p, "port"));
            }
        }
        true
    };
    if !accessible_before_type {
        return;
    }
    let accessible = externally_accessible(svc);
    let ty = svc_type(svc).to_string();
    let Some(spec) = svc.get_mut("spec") else {
        return;
    };
    if accessible {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if is_nil(spec.get("internalTrafficPolicy"))
        && matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP")
    {
        spec["internalTrafficPolicy"] = json!("Cluster");
    }
    if ty == "LoadBalancer" {
        if is_nil(spec.get("allocateLoadBalancerNodePorts")) {
            spec["allocateLoadBalancerNodePorts"] = json!(true);
        }
        // A load balancer address without a mode is a VIP (LoadBalancerIPMode).
        for ing in svc
            .pointer_mut("/status/loadBalancer/ingress")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|i| i.is_object())
        {
            if !str_of(ing, "ip").is_empty() && is_nil(ing.get("ipMode")) {
                ing["ipMode"] = json!("VIP");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Type changes on update (`dropTypeDependentFields`).
// ---------------------------------------------------------------------------------------------

fn field_eq(a: &Value, b: &Value, field: &str) -> bool {
    let get = |v: &Value| {
        v.get("spec")
            .and_then(|s| s.get(field))
            .filter(|x| !x.is_null())
            .cloned()
    };
    get(a) == get(b)
}

fn node_port_set(svc: &Value) -> std::collections::BTreeSet<i64> {
    ports(svc)
        .iter()
        .map(|p| int_of(p, "nodePort"))
        .filter(|n| *n != 0)
        .collect()
}

/// Fields the old type had and the new one does not are cleared, when the client left them as
/// they were (a changed value fails validation instead); allocated ones are released by the
/// allocation side. A Service that is not a LoadBalancer loses its load balancer status.
fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let mut remove: Vec<&str> = Vec::new();
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        if spec_str(old, "clusterIP") == spec_str(new, "clusterIP")
            && cluster_ips(old) == cluster_ips(new)
        {
            remove.extend(["clusterIP", "clusterIPs"]);
        }
        if ip_families(old) == ip_families(new) {
            remove.push("ipFamilies");
        }
        if spec_str(old, "ipFamilyPolicy") == spec_str(new, "ipFamilyPolicy") {
            remove.push("ipFamilyPolicy");
        }
    }
    let clear_node_ports = needs_node_port(old)
        && !needs_node_port(new)
        && node_port_set(new).is_subset(&node_port_set(old));
    if needs_health_check(old)
        && !needs_health_check(new)
        && field_eq(old, new, "healthCheckNodePort")
    {
        remove.push("healthCheckNodePort");
    }
    if svc_type(old) == "LoadBalancer"
        && svc_type(new) != "LoadBalancer"
        && old.pointer("/spec/allocateLoadBalancerNodePorts").is_some()
        && field_eq(old, new, "allocateLoadBalancerNodePorts")
    {
        remove.push("allocateLoadBalancerNodePorts");
    }
    if svc_type(old) == "LoadBalancer"
        && svc_type(new) != "LoadBalancer"
        && field_eq(old, new, "loadBalancerClass")
    {
        remove.push("loadBalancerClass");
    }
    if externally_accessible(old)
        && !externally_accessible(new)
        && spec_str(old, "externalTrafficPolicy") == spec_str(new, "externalTrafficPolicy")
    {
        remove.push("externalTrafficPolicy");
    }
    if svc_type(new) != "LoadBalancer"
        && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
    {
        status.insert("loadBalancer".into(), json!({}));
    }
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for f in remove {
        spec.remove(f);
    }
    if clear_node_ports {
        for p in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            p.remove("nodePort");
        }
    }
}

/// Upstream keeps a valid `internalTrafficPolicy` of an ExternalName Service in storage but
/// drops it on every read (`defaultOnReadInternalTrafficPolicy` of the service REST storage);
/// without a read decorator the field is not stored. A value validation refuses stays, to be
/// refused.
fn drop_external_name_internal_traffic_policy(svc: &mut Value) {
    if svc_type(svc) == "ExternalName"
        && matches!(spec_str(svc, "internalTrafficPolicy"), "Cluster" | "Local")
        && let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("internalTrafficPolicy");
    }
}

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------

/// Upstream's `supportedPortProtocols`, sorted as its messages list them.
pub const PORT_PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn invalid_each(path: &FieldPath, value: &str, msgs: Vec<String>) -> Vec<FieldError> {
    msgs.into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `ValidateDNS1123Label`.
pub fn validate_dns1123_label(value: &str, path: &FieldPath) -> Vec<FieldError> {
    invalid_each(path, value, is_dns1123_label(value))
}

/// `ValidateQualifiedName`.
pub fn validate_qualified_name(value: &str, path: &FieldPath) -> Vec<FieldError> {
    invalid_each(path, value, is_qualified_name(value))
}

/// `ValidatePortNumOrName`: a port number, or an IANA service name.
pub fn validate_port_num_or_name(value: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    match value {
        Some(Value::String(s)) => invalid_each(path, s, is_valid_port_name(s)),
        other => {
            let n = other.and_then(Value::as_i64).unwrap_or(0);
            is_valid_port_num(n)
                .into_iter()
                .map(|m| FieldError::invalid(path, json!(n), m))
                .collect()
        }
    }
}

/// Go's `net.ParseIP` leniency (`netutils.ParseIPSloppy`): IPv4 octets may carry leading
/// zeros. Enough for the special-range checks below, which run on validated addresses.
// candidate for apimachinery::validation
fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        return s.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for o in &mut octets {
        let p = parts.next()?;
        let digits = p.trim_start_matches('0');
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) || digits.len() > 3 {
            return None;
        }
        *o = if digits.is_empty() {
            0
        } else {
            digits
                .parse::<u16>()
                .ok()
                .and_then(|n| u8::try_from(n).ok())?
        };
    }
    parts
        .next()
        .is_none()
        .then_some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// `ValidateNonSpecialIP` (and `ValidateEndpointIP`): no unspecified, loopback, link-local or
/// link-local multicast addresses where endpoints and external IPs go.
// candidate for apimachinery::validation
pub fn validate_non_special_ip(value: &str, path: &FieldPath) -> Vec<FieldError> {
    let Some(ip) = parse_ip_sloppy(value) else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a valid IP address",
        )];
    };
    let (unspecified, loopback, link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                v4.is_unspecified(),
                v4.is_loopback(),
                o[0] == 169 && o[1] == 254,
                o[0] == 224 && o[1] == 0 && o[2] == 0,
            )
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => {
                let o = v4.octets();
                (
                    v4.is_unspecified(),
                    v4.is_loopback(),
                    o[0] == 169 && o[1] == 254,
                    o[0] == 224 && o[1] == 0 && o[2] == 0,
                )
            }
            None => {
                let s = v6.segments();
                (
                    v6.is_unspecified(),
                    v6.is_loopback(),
                    s[0] & 0xffc0 == 0xfe80,
                    s[0] & 0xff0f == 0xff02,
                )
            }
        },
    };
    let mut errs = Vec::new();
    if unspecified {
        errs.push(FieldError::invalid(
            path,
            value,
            format!("may not be unspecified ({value})"),
        ));
    }
    if loopback {
        errs.push(FieldError::invalid(
            path,
            value,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        errs.push(FieldError::invalid(
            path,
            value,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path,
            value,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

/// `ValidateServiceClusterIPsRelatedFields`: `clusterIP` and `clusterIPs` agree, families and
/// policy are known values, addresses are valid (a legacy field: any form StrictIPCIDRValidation
/// admits, or one the old object held) and match their families. Also the allocator's
/// pre-validation.
pub fn validate_cluster_ips_related_fields(svc: &Value, old: Option<&Value>) -> Vec<FieldError> {
    if svc_type(svc) == "ExternalName" {
        return Vec::new();
    }
    let spec = FieldPath::new("spec");
    let ips_path = spec.child("clusterIPs");
    let families_path = spec.child("ipFamilies");
    let cluster_ip = spec_str(svc, "clusterIP");
    let ips = cluster_ips(svc);
    let families = ip_families(svc);
    let mut errs = Vec::new();
    if !cluster_ip.is_empty() {
        if ips.is_empty() {
            errs.push(FieldError::required(&ips_path, ""));
        } else if ips[0] != cluster_ip {
            errs.push(FieldError::invalid(
                &ips_path,
                json!(ips),
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        errs.push(FieldError::invalid(
            &ips_path,
            json!(ips),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, fam) in families.iter().enumerate() {
        if fam != "IPv4" && fam != "IPv6" {
            errs.push(FieldError::not_supported(
                &families_path.index(i),
                fam.as_str(),
                &["IPv4", "IPv6"],
            ));
        }
        if seen.contains(&fam.as_str()) {
            errs.push(FieldError::duplicate(&families_path.index(i), fam.as_str()));
        }
        seen.push(fam);
    }
    if let Some(policy) = svc.pointer("/spec/ipFamilyPolicy").and_then(Value::as_str)
        && !matches!(
            policy,
            "SingleStack" | "PreferDualStack" | "RequireDualStack"
        )
    {
        errs.push(FieldError::not_supported(
            &spec.child("ipFamilyPolicy"),
            policy,
            &["PreferDualStack", "RequireDualStack", "SingleStack"],
        ));
    }
    let old_ips = old.map(cluster_ips).unwrap_or_default();
    let existing: Vec<&str> = old_ips.iter().map(String::as_str).collect();
    let mut has_invalid = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                has_invalid = true;
                errs.push(FieldError::invalid(
                    &ips_path,
                    json!(ips),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let ip_errs = is_valid_ip_for_legacy_field(&ips_path.index(i), ip, true, &existing);
        has_invalid |= !ip_errs.is_empty();
        errs.extend(ip_errs);
    }
    if ips.len() > 2 {
        errs.push(FieldError::invalid(
            &ips_path,
            json!(ips),
            "may only hold up to 2 values",
        ));
    }
    if has_invalid {
        return errs;
    }
    if ips.len() > 1 {
        let v6 = ips.iter().filter(|ip| ip.contains(':')).count();
        if ips.len() != 2 || v6 != 1 {
            errs.push(FieldError::invalid(
                &ips_path,
                json!(ips),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !is_headless(svc) {
        for (i, (ip, fam)) in ips.iter().zip(families.iter()).enumerate() {
            let is_v6 = ip.contains(':');
            if fam == "IPv4" && is_v6 {
                errs.push(FieldError::invalid(
                    &ips_path.index(i),
                    ip.as_str(),
                    format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if fam == "IPv6" && !is_v6 {
                errs.push(FieldError::invalid(
                    &ips_path.index(i),
                    ip.as_str(),
                    format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    errs
}

/// The (protocol, port) key upstream compares ports by, printed as its internal
/// `core.ServicePort` struct prints (Go field names and order, zero values included).
fn service_port_key(protocol: &str, port: i64) -> (Value, String) {
    let rendered = format!(
        "{{\"Name\":\"\",\"Protocol\":{},\"AppProtocol\":null,\"Port\":{port},\"TargetPort\":0,\"NodePort\":0}}",
        apimachinery::validation::go_json(&json!(protocol))
    );
    (json!({"protocol": protocol, "port": port}), rendered)
}

/// `validateServicePort`.
fn validate_service_port(
    port: &Value,
    require_name: bool,
    names: &mut Vec<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(port, "name");
    if require_name && name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else if !name.is_empty() {
        errs.extend(validate_dns1123_label(name, &path.child("name")));
        if names.iter().any(|n| n == name) {
            errs.push(FieldError::duplicate(&path.child("name"), name));
        } else {
            names.push(name.to_string());
        }
    }
    let number = int_of(port, "port");
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
    errs.extend(validate_port_num_or_name(
        port.get("targetPort"),
        &path.child("targetPort"),
    ));
    if let Some(app) = port.get("appProtocol").and_then(Value::as_str) {
        errs.extend(validate_qualified_name(app, &path.child("appProtocol")));
    }
    errs
}

/// `validateClientIPAffinityConfig`.
fn validate_client_ip_affinity(config: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let why = "when session affinity type is ClientIP";
    let Some(config) = config.filter(|c| !c.is_null()) else {
        return vec![FieldError::required(path, why)];
    };
    let Some(client_ip) = config.get("clientIP").filter(|c| !c.is_null()) else {
        return vec![FieldError::required(&path.child("clientIP"), why)];
    };
    let timeout_path = path.child("clientIP").child("timeoutSeconds");
    let Some(timeout) = client_ip.get("timeoutSeconds").and_then(Value::as_i64) else {
        return vec![FieldError::required(&timeout_path, why)];
    };
    if timeout <= 0 || timeout > MAX_AFFINITY_TIMEOUT {
        return vec![FieldError::invalid(
            &timeout_path,
            json!(timeout),
            format!("must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT}"),
        )];
    }
    Vec::new()
}

/// `validateLoadBalancerClassField`, for create (`old` None) and update.
fn validate_load_balancer_class(old: Option<&Value>, svc: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("spec").child("loadBalancerClass");
    let class = svc
        .pointer("/spec/loadBalancerClass")
        .filter(|c| !c.is_null());
    let mut errs = Vec::new();
    if let Some(old) = old
        && svc_type(old) == "LoadBalancer"
        && svc_type(svc) == "LoadBalancer"
        && !field_eq(old, svc, "loadBalancerClass")
    {
        errs.push(FieldError::invalid(
            &path,
            class.cloned().unwrap_or(Value::Null),
            "may not change once set",
        ));
    }
    if svc_type(svc) == "LoadBalancer" {
        if let Some(c) = class.and_then(Value::as_str) {
            errs.extend(validate_qualified_name(c, &path));
        }
    } else if class.is_some() {
        errs.push(FieldError::forbidden(
            &path,
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    errs
}

/// `validateServiceExternalTrafficPolicy`.
fn validate_external_traffic_policy(svc: &Value) -> Vec<FieldError> {
    let spec = FieldPath::new("spec");
    let etp = spec_str(svc, "externalTrafficPolicy");
    let mut errs = Vec::new();
    if !externally_accessible(svc) {
        if !etp.is_empty() {
            errs.push(FieldError::invalid(
                &spec.child("externalTrafficPolicy"),
                etp,
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        errs.push(FieldError::required(
            &spec.child("externalTrafficPolicy"),
            "",
        ));
    } else if !matches!(etp, "Cluster" | "Local") {
        errs.push(FieldError::not_supported(
            &spec.child("externalTrafficPolicy"),
            etp,
            &["Cluster", "Local"],
        ));
    }
    let hc = svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let hc_path = spec.child("healthCheckNodePort");
    if !needs_health_check(svc) {
        if hc != 0 {
            errs.push(FieldError::invalid(
                &hc_path,
                json!(hc),
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ));
        }
    } else if hc == 0 {
        errs.push(FieldError::required(&hc_path, ""));
    } else {
        errs.extend(
            is_valid_port_num(hc)
                .into_iter()
                .map(|m| FieldError::invalid(&hc_path, json!(hc), m)),
        );
    }
    errs
}

/// `validateService` (the store checks metadata); `old` on update lets values the old object
/// held pass the legacy address checks.
fn validate_service(svc: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let spec = FieldPath::new("spec");
    let mut errs = Vec::new();
    let annotations = svc.pointer("/metadata/annotations");
    let hints = annotations
        .and_then(|a| a.get("service.kubernetes.io/topology-aware-hints"))
        .and_then(Value::as_str);
    let mode = annotations
        .and_then(|a| a.get("service.kubernetes.io/topology-mode"))
        .and_then(Value::as_str);
    if let (Some(hints), Some(mode)) = (hints, mode)
        && hints != mode
    {
        errs.push(FieldError::invalid(
            &FieldPath::new("metadata")
                .child("annotations")
                .key("service.kubernetes.io/topology-mode"),
            mode,
            "must match annotations[service.kubernetes.io/topology-aware-hints] when both are specified",
        ));
    }
    let ty = svc_type(svc);
    let headless = is_headless(svc);
    let svc_ports = ports(svc);
    if svc_ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required(&spec.child("ports"), ""));
    }
    let first_ip = cluster_ips(svc).into_iter().next().unwrap_or_default();
    match ty {
        "LoadBalancer" | "NodePort" if headless => {
            errs.push(FieldError::invalid(
                &spec.child("clusterIPs").index(0),
                first_ip.as_str(),
                format!("may not be set to 'None' for {ty} services"),
            ));
        }
        "ExternalName" => {
            let forbidden = "may not be set for ExternalName services";
            if !cluster_ips(svc).is_empty() {
                errs.push(FieldError::forbidden(&spec.child("clusterIPs"), forbidden));
            }
            if !ip_families(svc).is_empty() {
                errs.push(FieldError::forbidden(&spec.child("ipFamilies"), forbidden));
            }
            if !is_nil(svc.pointer("/spec/ipFamilyPolicy")) {
                errs.push(FieldError::forbidden(
                    &spec.child("ipFamilyPolicy"),
                    forbidden,
                ));
            }
            // A trailing dot marks a fully qualified CNAME.
            let cname = spec_str(svc, "externalName");
            let cname = cname.strip_suffix('.').unwrap_or(cname);
            if cname.is_empty() {
                errs.push(FieldError::required(&spec.child("externalName"), ""));
            } else {
                errs.extend(invalid_each(
                    &spec.child("externalName"),
                    cname,
                    is_dns1123_subdomain(cname),
                ));
            }
        }
        _ => {}
    }
    let ports_path = spec.child("ports");
    let mut names = Vec::new();
    for (i, p) in svc_ports.iter().enumerate() {
        errs.extend(validate_service_port(
            p,
            svc_ports.len() > 1,
            &mut names,
            &ports_path.index(i),
        ));
    }
    if let Some(selector) = svc.pointer("/spec/selector").filter(|s| !s.is_null()) {
        errs.extend(validate_labels(Some(selector), &spec.child("selector")));
    }
    let affinity = spec_str(svc, "sessionAffinity");
    if affinity.is_empty() {
        errs.push(FieldError::required(&spec.child("sessionAffinity"), ""));
    } else if !matches!(affinity, "ClientIP" | "None") {
        errs.push(FieldError::not_supported(
            &spec.child("sessionAffinity"),
            affinity,
            &["ClientIP", "None"],
        ));
    }
    if affinity == "ClientIP" {
        errs.extend(validate_client_ip_affinity(
            svc.pointer("/spec/sessionAffinityConfig"),
            &spec.child("sessionAffinityConfig"),
        ));
    } else if affinity == "None" && !is_nil(svc.pointer("/spec/sessionAffinityConfig")) {
        errs.push(FieldError::forbidden(
            &spec.child("sessionAffinityConfig"),
            "must not be set when session affinity is None",
        ));
    }
    errs.extend(validate_cluster_ips_related_fields(svc, old));
    let old_externals = old.map(external_ips).unwrap_or_default();
    let old_externals: Vec<&str> = old_externals.iter().map(String::as_str).collect();
    for (i, ip) in external_ips(svc).iter().enumerate() {
        let path = spec.child("externalIPs").index(i);
        let ip_errs = is_valid_ip_for_legacy_field(&path, ip, true, &old_externals);
        if ip_errs.is_empty() {
            errs.extend(validate_non_special_ip(ip, &path));
        } else {
            errs.extend(ip_errs);
        }
    }
    if ty.is_empty() {
        errs.push(FieldError::required(&spec.child("type"), ""));
    } else if !matches!(
        ty,
        "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort"
    ) {
        errs.push(FieldError::not_supported(
            &spec.child("type"),
            ty,
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        ));
    }
    if ty == "ClusterIP" {
        for (i, p) in svc_ports.iter().enumerate() {
            if int_of(p, "nodePort") != 0 {
                errs.push(FieldError::forbidden(
                    &ports_path.index(i).child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    // Node ports and ports are unique per protocol.
    let mut node_ports: Vec<(&str, i64)> = Vec::new();
    for (i, p) in svc_ports.iter().enumerate() {
        let np = int_of(p, "nodePort");
        if np == 0 {
            continue;
        }
        let key = (str_of(p, "protocol"), np);
        if node_ports.contains(&key) {
            errs.push(FieldError::duplicate(
                &ports_path.index(i).child("nodePort"),
                json!(np),
            ));
        }
        node_ports.push(key);
    }
    let mut seen: Vec<(&str, i64)> = Vec::new();
    for (i, p) in svc_ports.iter().enumerate() {
        let key = (str_of(p, "protocol"), int_of(p, "port"));
        if seen.contains(&key) {
            let (value, rendered) = service_port_key(key.0, key.1);
            errs.push(
                FieldError::duplicate(&ports_path.index(i), value).with_rendered_value(rendered),
            );
        }
        seen.push(key);
    }
    let ranges = string_list(svc.pointer("/spec/loadBalancerSourceRanges"));
    let lb_only = "may only be used when `type` is 'LoadBalancer'";
    if !ranges.is_empty() {
        // Upstream's path for this field is capitalized.
        let path = spec.child("LoadBalancerSourceRanges");
        if ty != "LoadBalancer" {
            errs.push(FieldError::forbidden(&path, lb_only));
        }
        // Existing values pass; values may be space-padded.
        let old_ranges: Vec<String> = old
            .map(|o| string_list(o.pointer("/spec/loadBalancerSourceRanges")))
            .unwrap_or_default()
            .iter()
            .map(|r| r.trim().to_string())
            .collect();
        let old_ranges: Vec<&str> = old_ranges.iter().map(String::as_str).collect();
        for (i, r) in ranges.iter().enumerate() {
            errs.extend(is_valid_cidr_for_legacy_field(
                &path.index(i),
                r.trim(),
                true,
                &old_ranges,
            ));
        }
    } else if let Some(val) = annotations
        .and_then(|a| a.get("service.beta.kubernetes.io/load-balancer-source-ranges"))
        .and_then(Value::as_str)
    {
        let path = FieldPath::new("metadata")
            .child("annotations")
            .key("service.beta.kubernetes.io/load-balancer-source-ranges");
        if ty != "LoadBalancer" {
            errs.push(FieldError::forbidden(&path, lb_only));
        }
        // Checked only when new or changed.
        let old_val = old
            .and_then(|o| {
                o.pointer(
                    "/metadata/annotations/service.beta.kubernetes.io~1load-balancer-source-ranges",
                )
            })
            .and_then(Value::as_str);
        let trimmed = val.trim();
        if old_val.is_none_or(|o| o != val) && !trimmed.is_empty() {
            for r in trimmed.split(',') {
                errs.extend(is_valid_cidr_for_legacy_field(&path, r.trim(), true, &[]));
            }
        }
    }
    let allocate = svc.pointer("/spec/allocateLoadBalancerNodePorts");
    if !is_nil(allocate) && ty != "LoadBalancer" {
        errs.push(FieldError::forbidden(
            &spec.child("allocateLoadBalancerNodePorts"),
            lb_only,
        ));
    }
    if ty == "LoadBalancer" && is_nil(allocate) {
        // Upstream reports this one without the `spec.` prefix.
        errs.push(FieldError::required(
            &FieldPath::new("allocateLoadBalancerNodePorts"),
            "",
        ));
    }
    errs.extend(validate_load_balancer_class(None, svc));
    errs.extend(validate_external_traffic_policy(svc));
    // internalTrafficPolicy: required for the types that route inside the cluster.
    let itp = svc
        .pointer("/spec/internalTrafficPolicy")
        .and_then(Value::as_str);
    match itp {
        None if matches!(ty, "NodePort" | "LoadBalancer" | "ClusterIP") => {
            errs.push(FieldError::required(
                &spec.child("internalTrafficPolicy"),
                "",
            ));
        }
        Some(p) if !matches!(p, "Cluster" | "Local") => {
            errs.push(FieldError::not_supported(
                &spec.child("internalTrafficPolicy"),
                p,
                &["Cluster", "Local"],
            ));
        }
        _ => {}
    }
    if let Some(td) = svc
        .pointer("/spec/trafficDistribution")
        .and_then(Value::as_str)
        && !matches!(td, "PreferClose" | "PreferSameZone" | "PreferSameNode")
    {
        // Upstream's order of the supported values, which the message lists unsorted.
        errs.push(FieldError::not_supported(
            &spec.child("trafficDistribution"),
            td,
            &["PreferClose", "PreferSameZone", "PreferSameNode"],
        ));
    }
    errs
}

/// `validateUpgradeDowngradeClusterIPs`: the primary address stays.
fn validate_upgrade_downgrade_cluster_ips(old: &Value, new: &Value) -> Vec<FieldError> {
    if svc_type(new) == "ExternalName" || svc_type(old) == "ExternalName" {
        return Vec::new();
    }
    if is_headless(old) && is_headless(new) {
        return Vec::new();
    }
    let (old_ips, new_ips) = (cluster_ips(old), cluster_ips(new));
    let path = FieldPath::new("spec").child("clusterIPs");
    let changed = || FieldError::invalid(&path.index(0), json!(new_ips), "may not change once set");
    let mut errs = Vec::new();
    if old_ips.len() == new_ips.len() {
        for (i, ip) in old_ips.iter().enumerate() {
            if *ip != new_ips[i] {
                errs.push(FieldError::invalid(
                    &path.index(i),
                    json!(new_ips),
                    "may not change once set",
                ));
            }
        }
    } else if old_ips.len() > new_ips.len() {
        if new_ips.is_empty() {
            errs.push(FieldError::invalid(
                &path.index(0),
                json!(new_ips),
                "primary clusterIP can not be unset",
            ));
        }
        if !old_ips.is_empty() && !new_ips.is_empty() && new_ips[0] != old_ips[0] {
            errs.push(changed());
        }
        if new_ips.len() == 1 && spec_str(new, "ipFamilyPolicy") != "SingleStack" {
            errs.push(FieldError::invalid(
                &FieldPath::new("spec").child("ipFamilyPolicy"),
                new.pointer("/spec/ipFamilyPolicy")
                    .cloned()
                    .unwrap_or(Value::Null),
                "must be set to 'SingleStack' when releasing the secondary clusterIP",
            ));
        }
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errs.push(changed());
    }
    errs
}

/// `validateUpgradeDowngradeIPFamilies`: the primary family stays.
fn validate_upgrade_downgrade_ip_families(old: &Value, new: &Value) -> Vec<FieldError> {
    if svc_type(new) == "ExternalName" || svc_type(old) == "ExternalName" {
        return Vec::new();
    }
    if is_headless(old) || is_headless(new) {
        return Vec::new();
    }
    let (old_f, new_f) = (ip_families(old), ip_families(new));
    let path = FieldPath::new("spec").child("ipFamilies").index(0);
    let mut errs = Vec::new();
    if old_f.len() == new_f.len() {
        for (i, f) in old_f.iter().enumerate() {
            if *f != new_f[i] {
                errs.push(FieldError::invalid(
                    &path,
                    json!(new_f),
                    "may not change once set",
                ));
            }
        }
    } else if old_f.len() > new_f.len() {
        if cluster_ips(new).is_empty() {
            errs.push(FieldError::invalid(
                &path,
                json!(new_f),
                "primary ipFamily can not be unset",
            ));
        }
        if !new_f.is_empty() && new_f[0] != old_f[0] {
            errs.push(FieldError::invalid(
                &path,
                json!(cluster_ips(new)),
                "may not change once set",
            ));
        }
        if new_f.len() == 1 && spec_str(new, "ipFamilyPolicy") != "SingleStack" {
            errs.push(FieldError::invalid(
                &FieldPath::new("spec").child("ipFamilyPolicy"),
                new.pointer("/spec/ipFamilyPolicy")
                    .cloned()
                    .unwrap_or(Value::Null),
                "must be set to 'SingleStack' when releasing the secondary ipFamily",
            ));
        }
    } else if !old_f.is_empty() && !new_f.is_empty() && new_f[0] != old_f[0] {
        errs.push(FieldError::invalid(
            &path,
            json!(cluster_ips(new)),
            "may not change once set",
        ));
    }
    errs
}

/// `ValidateLoadBalancerStatus`.
fn validate_load_balancer_status(svc: &Value, old: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("status")
        .child("loadBalancer")
        .child("ingress");
    let ingress = svc
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if svc_type(svc) != "LoadBalancer" && !ingress.is_empty() {
        return vec![FieldError::forbidden(
            &path,
            "may only be used when `spec.type` is 'LoadBalancer'",
        )];
    }
    let old_ips: Vec<String> = old
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|i| str_of(i, "ip").to_string())
        .filter(|ip| !ip.is_empty())
        .collect();
    let old_refs: Vec<&str> = old_ips.iter().map(String::as_str).collect();
    let mut errs = Vec::new();
    for (i, ing) in ingress.iter().enumerate() {
        let p = path.index(i);
        let ip = str_of(ing, "ip");
        if !ip.is_empty() {
            errs.extend(is_valid_ip_for_legacy_field(
                &p.child("ip"),
                ip,
                true,
                &old_refs,
            ));
        }
        match ing.get("ipMode").and_then(Value::as_str) {
            None if !ip.is_empty() => errs.push(FieldError::required(
                &p.child("ipMode"),
                "must be specified when `ip` is set",
            )),
            Some(_) if ip.is_empty() => errs.push(FieldError::forbidden(
                &p.child("ipMode"),
                "may not be specified when `ip` is not set",
            )),
            Some(mode) if !matches!(mode, "Proxy" | "VIP") => errs.push(FieldError::not_supported(
                &p.child("ipMode"),
                mode,
                &["Proxy", "VIP"],
            )),
            _ => {}
        }
        let host = str_of(ing, "hostname");
        if !host.is_empty() {
            errs.extend(invalid_each(
                &p.child("hostname"),
                host,
                is_dns1123_subdomain(host),
            ));
            if parse_ip_sloppy(host).is_some() {
                errs.push(FieldError::invalid(
                    &p.child("hostname"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Warnings.
// ---------------------------------------------------------------------------------------------

/// `GetWarningsForIP`.
pub fn ip_warnings(path: &str, value: &str) -> Vec<String> {
    apimachinery::validation::get_warnings_for_ip(path, value)
}

/// `GetWarningsForService`.
fn service_warnings(svc: &Value) -> Vec<String> {
    let mut w = Vec::new();
    let ty = svc_type(svc);
    if svc
        .pointer("/metadata/annotations/service.kubernetes.io~1topology-aware-hints")
        .is_some()
    {
        w.push("annotation service.kubernetes.io/topology-aware-hints is deprecated, please use service.kubernetes.io/topology-mode instead".into());
    }
    let cluster_ip = spec_str(svc, "clusterIP");
    if !cluster_ip.is_empty() && cluster_ip != "None" {
        for (i, ip) in cluster_ips(svc).iter().enumerate() {
            w.extend(ip_warnings(&format!("spec.clusterIPs[{i}]"), ip));
        }
    }
    // The warnings' own notion of headless: a ClusterIP Service with clusterIP None.
    let headless = ty == "ClusterIP" && cluster_ip == "None";
    let externals = external_ips(svc);
    if headless {
        if !spec_str(svc, "loadBalancerIP").is_empty() {
            w.push("spec.loadBalancerIP is ignored for headless services".into());
        }
        if !externals.is_empty() {
            w.push("spec.externalIPs is ignored for headless services".into());
        }
        if spec_str(svc, "sessionAffinity") != "None" {
            w.push("spec.SessionAffinity is ignored for headless services".into());
        }
    }
    for (i, ip) in externals.iter().enumerate() {
        w.extend(ip_warnings(&format!("spec.externalIPs[{i}]"), ip));
    }
    if !externals.is_empty() && !headless && ty != "ExternalName" {
        w.push(
            "spec.externalIPs is deprecated and may no longer be implemented in some clusters"
                .into(),
        );
    }
    let lb_ip = spec_str(svc, "loadBalancerIP");
    if !lb_ip.is_empty() {
        w.extend(ip_warnings("spec.loadBalancerIP", lb_ip));
    }
    for (i, cidr) in string_list(svc.pointer("/spec/loadBalancerSourceRanges"))
        .iter()
        .enumerate()
    {
        w.extend(apimachinery::validation::get_warnings_for_cidr(
            &format!("spec.loadBalancerSourceRanges[{i}]"),
            cidr,
        ));
    }
    if ty == "ExternalName" && !externals.is_empty() {
        w.push("spec.externalIPs is ignored when spec.type is \"ExternalName\"".into());
    }
    if ty != "ExternalName" && !spec_str(svc, "externalName").is_empty() {
        w.push("spec.externalName is ignored when spec.type is not \"ExternalName\"".into());
    }
    if spec_str(svc, "trafficDistribution") == "PreferClose" {
        w.push(
            "spec.trafficDistribution: \"PreferClose\" is deprecated; use \"PreferSameZone\""
                .into(),
        );
    }
    w
}

#[async_trait::async_trait]
impl Strategy for ServiceStrategy {
    fn default(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    async fn begin_create(&self, obj: &mut Value, dry_run: bool) -> Result<Option<Finish>, Status> {
        self.allocation().begin_create(obj, dry_run).await
    }

    async fn begin_update(
        &self,
        new: &mut Value,
        old: &Value,
        dry_run: bool,
    ) -> Result<Option<Finish>, Status> {
        self.allocation().begin_update(new, old, dry_run).await
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // A new Service has no status yet.
        obj["status"] = json!({"loadBalancer": {}});
        super::service_alloc::normalize_cluster_ips(None, obj);
        drop_external_name_internal_traffic_policy(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_type_dependent_fields(new, old);
        drop_external_name_internal_traffic_policy(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_service(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_upgrade_downgrade_cluster_ips(old, new);
        errs.extend(validate_upgrade_downgrade_ip_families(old, new));
        errs.extend(validate_load_balancer_class(Some(old), new));
        if needs_health_check(old)
            && needs_health_check(new)
            && !field_eq(old, new, "healthCheckNodePort")
        {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("healthCheckNodePort"),
                "field is immutable",
            ));
        }
        errs.extend(validate_service(new, Some(old)));
        errs
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_load_balancer_status(new, old)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        service_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        service_warnings(new)
    }

    /// The status strategy's `WarningsOnUpdate`: load balancer addresses in non-standard form.
    fn warnings_on_status_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        let mut w = Vec::new();
        for (i, ing) in new
            .pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let ip = str_of(ing, "ip");
            if !ip.is_empty() {
                // Upstream names the ingress entry, not its `ip` field.
                w.extend(ip_warnings(
                    &format!("status.loadBalancer.ingress[{i}]"),
                    ip,
                ));
            }
        }
        w
    }

    /// `ValidateServiceCreate`: RelaxedServiceNameValidation (beta, on in v1.36) checks names
    /// as DNS-1123 labels (`NameIsDNSLabel`), a leading digit allowed.
    fn name_validator(&self) -> NameValidator {
        NameValidator::Dns1123Label
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    async fn after_delete(&self, obj: &Value) {
        self.allocation().release_all(obj).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.message()))
            .collect()
    }

    #[test]
    fn defaults_follow_the_type() {
        let mut svc = json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}], "externalIPs": ["192.0.2.1"], "sessionAffinity": "ClientIP"}});
        set_defaults(&mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(
            svc["spec"]["externalTrafficPolicy"], "Cluster",
            "external IPs make it accessible"
        );
        assert_eq!(svc["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(svc["spec"]["ports"][1]["targetPort"], "dns");
        assert_eq!(
            svc["spec"]["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
        let mut lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
        set_defaults(&mut lb);
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        let mut en = json!({"spec": {"type": "ExternalName", "externalName": "a.b"}});
        set_defaults(&mut en);
        assert!(en["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn duplicate_ports_print_the_internal_struct() {
        let mut svc = json!({"spec": {"selector": {"a": "b"}, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}], "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}});
        set_defaults(&mut svc);
        assert_eq!(
            messages(&validate_service(&svc, None)),
            vec![
                r#"spec.ports[1]: Duplicate value: {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}"#
            ]
        );
    }

    #[test]
    fn external_name_rules() {
        let svc = json!({"spec": {"type": "ExternalName", "clusterIPs": ["10.0.0.9"], "clusterIP": "10.0.0.9", "sessionAffinity": "None"}});
        assert_eq!(
            messages(&validate_service(&svc, None)),
            vec![
                "spec.clusterIPs: Forbidden: may not be set for ExternalName services",
                "spec.externalName: Required value",
            ]
        );
    }

    #[test]
    fn special_addresses_are_refused() {
        let p = FieldPath::new("x");
        assert_eq!(
            messages(&validate_non_special_ip("127.0.0.1", &p)),
            vec![
                "x: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"
            ]
        );
        assert!(validate_non_special_ip("192.0.2.1", &p).is_empty());
        assert_eq!(validate_non_special_ip("fe80::1", &p).len(), 1);
    }

    #[test]
    fn type_change_to_external_name_drops_what_the_client_left() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.3", "clusterIPs": ["10.0.0.3"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"}});
        let mut new = json!({"spec": {"type": "ExternalName", "externalName": "x.example.com", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"}});
        drop_type_dependent_fields(&mut new, &old);
        drop_external_name_internal_traffic_policy(&mut new);
        assert_eq!(
            new["spec"],
            json!({"type": "ExternalName", "externalName": "x.example.com"})
        );
    }

    #[test]
    fn cidr_and_ip_warnings_as_get_warnings_for_cidr() {
        use apimachinery::validation::get_warnings_for_cidr as w;
        assert_eq!(
            w("p", "10.0.0.1/24"),
            vec![
                "p: CIDR value \"10.0.0.1/24\" is ambiguous in this context (should be \"10.0.0.0/24\" or \"10.0.0.1/32\"?)"
            ]
        );
        assert_eq!(
            w("p", "010.0.0.0/8"),
            vec!["p: non-standard CIDR value \"010.0.0.0/8\" is invalid: use \"10.0.0.0/8\""]
        );
        assert!(w("p", "10.0.0.0/8").is_empty());
        assert_eq!(
            ip_warnings("p", "010.0.0.1"),
            vec!["p: non-standard IP address \"010.0.0.1\" is invalid: use \"10.0.0.1\""]
        );
    }

    #[test]
    fn warnings_of_upstream() {
        let svc = json!({"metadata": {"annotations": {"service.kubernetes.io/topology-aware-hints": "auto"}}, "spec": {"type": "ClusterIP", "clusterIP": "None", "sessionAffinity": "ClientIP", "externalIPs": ["2001:DB8::1"]}});
        assert_eq!(
            service_warnings(&svc),
            vec![
                "annotation service.kubernetes.io/topology-aware-hints is deprecated, please use service.kubernetes.io/topology-mode instead",
                "spec.externalIPs is ignored for headless services",
                "spec.SessionAffinity is ignored for headless services",
                "spec.externalIPs[0]: IPv6 address \"2001:DB8::1\" should be in RFC 5952 canonical format (\"2001:db8::1\")",
            ]
        );
    }
}
