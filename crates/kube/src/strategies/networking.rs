//! The networking.k8s.io kinds, as upstream's pkg/apis/networking (defaults, validation) and
//! pkg/registry/networking (strategies): NetworkPolicy, Ingress, IngressClass, ServiceCIDR and
//! IPAddress.

use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, NameValidator, is_dns1123_subdomain,
    is_path_segment_name, is_valid_cidr, is_valid_cidr_for_legacy_field, is_valid_ip,
    is_valid_port_name, is_valid_port_num, is_wildcard_dns1123_subdomain, regex_error,
    validate_label_selector,
};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn list_at<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn present<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|x| !x.is_null())
}

fn invalid_each(path: &FieldPath, value: &str, msgs: Vec<String>) -> Vec<FieldError> {
    msgs.into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// A CIDR of a family (for the "one CIDR per family" checks): `None` when unparseable.
fn cidr_is_v6(cidr: &str) -> Option<bool> {
    let (addr, _) = cidr.split_once('/')?;
    addr.parse::<std::net::IpAddr>().ok().map(|a| a.is_ipv6())
}

// ---------------------------------------------------------------------------------------------
// NetworkPolicy.
// ---------------------------------------------------------------------------------------------

pub struct NetworkPolicyStrategy;

/// A parsed IPv4/IPv6 network: address bits, prefix length, address width.
fn parse_network(cidr: &str) -> Option<(u128, u32, u32)> {
    let (addr, len) = cidr.split_once('/')?;
    let len: u32 = len.parse().ok()?;
    let (bits, width) = if addr.contains(':') {
        (u128::from(addr.parse::<std::net::Ipv6Addr>().ok()?), 128)
    } else {
        // Leading zeros are read as decimal, as Go's sloppy parser does.
        let mut n: u128 = 0;
        let parts: Vec<&str> = addr.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        for p in parts {
            let o: u32 = p.parse().ok()?;
            if o > 255 || p.is_empty() {
                return None;
            }
            n = (n << 8) | u128::from(o);
        }
        (n, 32)
    };
    if len > width {
        return None;
    }
    let mask = if len == 0 {
        0
    } else {
        (u128::MAX << (128 - len)) >> (128 - width)
    };
    Some((bits & mask, len, width))
}

/// `ValidateIPBlock`: CIDRs valid (values of the old object pass as they are), each `except`
/// strictly inside `cidr`.
fn validate_ip_block(block: &Value, path: &FieldPath, allowed: &[&str]) -> Vec<FieldError> {
    let cidr = str_at(block, "/cidr");
    if cidr.is_empty() {
        return vec![FieldError::required(&path.child("cidr"), "")];
    }
    let mut errs = is_valid_cidr_for_legacy_field(&path.child("cidr"), cidr, true, allowed);
    let Some((net, len, width)) = parse_network(cidr) else {
        return errs;
    };
    for (i, except) in list_at(block, "/except").iter().enumerate() {
        let except = except.as_str().unwrap_or("");
        let p = path.child("except").index(i);
        errs.extend(is_valid_cidr_for_legacy_field(&p, except, true, allowed));
        let Some((ex_net, ex_len, ex_width)) = parse_network(except) else {
            continue;
        };
        let mask = if len == 0 {
            0
        } else {
            (u128::MAX << (128 - len)) >> (128 - width)
        };
        let inside = ex_width == width && ex_net & mask == net;
        if !inside || len >= ex_len {
            errs.push(FieldError::invalid(
                &p,
                except,
                "must be a strict subset of `cidr`",
            ));
        }
    }
    errs
}

/// `ValidateNetworkPolicyPort`.
fn validate_np_port(port: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(proto) = present(port, "protocol").and_then(Value::as_str)
        && !matches!(proto, "TCP" | "UDP" | "SCTP")
    {
        errs.push(FieldError::not_supported(
            &path.child("protocol"),
            proto,
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end = present(port, "endPort").and_then(Value::as_i64);
    let end_path = path.child("endPort");
    match present(port, "port") {
        Some(Value::String(name)) => {
            if let Some(end) = end {
                errs.push(FieldError::invalid(
                    &end_path,
                    json!(end),
                    "may not be specified when `port` is non-numeric",
                ));
            }
            errs.extend(invalid_each(
                &path.child("port"),
                name,
                is_valid_port_name(name),
            ));
        }
        Some(n) => {
            let n = n.as_i64().unwrap_or(0);
            errs.extend(
                is_valid_port_num(n)
                    .into_iter()
                    .map(|m| FieldError::invalid(&path.child("port"), json!(n), m)),
            );
            if let Some(end) = end {
                if end < n {
                    // Upstream prints the port here, not the end port.
                    errs.push(FieldError::invalid(
                        &end_path,
                        json!(n),
                        "must be greater than or equal to `port`",
                    ));
                }
                errs.extend(
                    is_valid_port_num(end)
                        .into_iter()
                        .map(|m| FieldError::invalid(&end_path, json!(end), m)),
                );
            }
        }
        None => {
            if let Some(end) = end {
                errs.push(FieldError::invalid(
                    &end_path,
                    json!(end),
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
    errs
}

/// `ValidateNetworkPolicyPeer`: one kind of peer, an ipBlock alone.
fn validate_np_peer(
    peer: &Value,
    opts: LabelSelectorValidationOptions,
    allowed: &[&str],
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut peers = 0;
    for sel in ["podSelector", "namespaceSelector"] {
        if let Some(s) = present(peer, sel) {
            peers += 1;
            errs.extend(validate_label_selector(Some(s), opts, &path.child(sel)));
        }
    }
    let block = present(peer, "ipBlock");
    if let Some(b) = block {
        peers += 1;
        errs.extend(validate_ip_block(b, &path.child("ipBlock"), allowed));
    }
    if peers == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if peers > 1 && block.is_some() {
        errs.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
    errs
}

/// `ValidateNetworkPolicySpec`.
fn validate_np_spec(
    np: &Value,
    opts: LabelSelectorValidationOptions,
    allowed: &[&str],
) -> Vec<FieldError> {
    let spec = FieldPath::new("spec");
    let mut errs = validate_label_selector(
        np.pointer("/spec/podSelector"),
        opts,
        &spec.child("podSelector"),
    );
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in list_at(np, &format!("/spec/{direction}"))
            .iter()
            .enumerate()
        {
            let rule_path = spec.child(direction).index(i);
            for (j, port) in list_at(rule, "/ports").iter().enumerate() {
                errs.extend(validate_np_port(port, &rule_path.child("ports").index(j)));
            }
            for (j, peer) in list_at(rule, &format!("/{peers}")).iter().enumerate() {
                errs.extend(validate_np_peer(
                    peer,
                    opts,
                    allowed,
                    &rule_path.child(peers).index(j),
                ));
            }
        }
    }
    let types = list_at(np, "/spec/policyTypes");
    if types.len() > 2 {
        errs.push(FieldError::invalid(
            &spec.child("policyTypes"),
            Value::Array(types.to_vec()),
            "may not specify more than two policyTypes",
        ));
        return errs;
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or("");
        if !matches!(t, "Ingress" | "Egress") {
            errs.push(FieldError::not_supported(
                &spec.child("policyTypes").index(i),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
    errs
}

/// The CIDRs of a stored policy, which an update may keep even if they no longer validate.
fn np_cidrs(np: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for rule in list_at(np, &format!("/spec/{direction}")) {
            for peer in list_at(rule, &format!("/{peers}")) {
                if let Some(b) = present(peer, "ipBlock") {
                    out.push(str_at(b, "/cidr").to_string());
                    out.extend(
                        list_at(b, "/except")
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string),
                    );
                }
            }
        }
    }
    out
}

/// `networkPolicyWarnings`: ipBlock CIDRs in non-standard or ambiguous form.
fn np_warnings(np: &Value) -> Vec<String> {
    let mut w = Vec::new();
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in list_at(np, &format!("/spec/{direction}"))
            .iter()
            .enumerate()
        {
            for (j, peer) in list_at(rule, &format!("/{peers}")).iter().enumerate() {
                let Some(block) = present(peer, "ipBlock") else {
                    continue;
                };
                let base = format!("spec.{direction}[{i}].{peers}[{j}].ipBlock");
                w.extend(apimachinery::validation::get_warnings_for_cidr(
                    &format!("{base}.cidr"),
                    str_at(block, "/cidr"),
                ));
                for (k, except) in list_at(block, "/except").iter().enumerate() {
                    w.extend(apimachinery::validation::get_warnings_for_cidr(
                        &format!("{base}.except[{k}]"),
                        except.as_str().unwrap_or(""),
                    ));
                }
            }
        }
    }
    w
}

impl Strategy for NetworkPolicyStrategy {
    /// `SetDefaults_NetworkPolicy`: ports are TCP unless they say otherwise, and the policy
    /// types follow from the rules present.
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        for direction in ["ingress", "egress"] {
            for rule in spec
                .get_mut(direction)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for port in rule
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter(|p| p.is_object())
                {
                    if port.get("protocol").is_none_or(Value::is_null) {
                        port["protocol"] = json!("TCP");
                    }
                }
            }
        }
        // Ingress always (a policy isolates ingress unless it says otherwise), Egress when it
        // has egress rules.
        if spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            let mut types = vec![json!("Ingress")];
            if spec
                .get("egress")
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
            {
                types.push(json!("Egress"));
            }
            spec["policyTypes"] = Value::Array(types);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_np_spec(obj, LabelSelectorValidationOptions::default(), &[])
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        // A pod selector stored with invalid label values may keep them.
        let old_invalid = !validate_label_selector(
            old.pointer("/spec/podSelector"),
            LabelSelectorValidationOptions::default(),
            &FieldPath::new("spec"),
        )
        .is_empty();
        let opts = LabelSelectorValidationOptions {
            allow_invalid_label_value: old_invalid,
            ..Default::default()
        };
        let existing = np_cidrs(old);
        let allowed: Vec<&str> = existing.iter().map(String::as_str).collect();
        validate_np_spec(new, opts, &allowed)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        np_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        np_warnings(new)
    }
}

// ---------------------------------------------------------------------------------------------
// Ingress.
// ---------------------------------------------------------------------------------------------

pub struct IngressStrategy;

const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const INVALID_PATH_SEQUENCES: &[&str] = &["//", "/./", "/../", "%2f", "%2F"];
const INVALID_PATH_SUFFIXES: &[&str] = &["/..", "/."];

/// Relaxations an update keeps for values stored before a rule tightened.
#[derive(Default, Clone, Copy)]
struct IngressOpts {
    allow_invalid_secret_name: bool,
    allow_invalid_wildcard_host_rule: bool,
}

/// `validateIngressTypedLocalObjectReference`.
fn validate_typed_local_ref(r: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(group) = present(r, "apiGroup").and_then(Value::as_str) {
        errs.extend(invalid_each(
            &path.child("apiGroup"),
            group,
            is_dns1123_subdomain(group),
        ));
    }
    for f in ["kind", "name"] {
        let v = str_at(r, &format!("/{f}"));
        if v.is_empty() {
            errs.push(FieldError::required(&path.child(f), ""));
        } else {
            errs.extend(invalid_each(&path.child(f), v, is_path_segment_name(v)));
        }
    }
    errs
}

/// `validateIngressBackend`: a service (name and one of port name or number) or a resource.
fn validate_ingress_backend(backend: &Value, path: &FieldPath) -> Vec<FieldError> {
    let resource = present(backend, "resource");
    let service = present(backend, "service");
    match (resource, service) {
        (Some(_), Some(_)) => vec![FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )],
        (Some(r), None) => validate_typed_local_ref(r, &path.child("resource")),
        (None, Some(s)) => {
            let mut errs = Vec::new();
            let name = str_at(s, "/name");
            let name_path = path.child("service").child("name");
            if name.is_empty() {
                errs.push(FieldError::required(&name_path, ""));
            } else {
                // RelaxedServiceNameValidation (beta, on in v1.36): `NameIsDNSLabel`.
                errs.extend(invalid_each(
                    &name_path,
                    name,
                    NameValidator::Dns1123Label.validate(name, false),
                ));
            }
            let port_name = str_at(s, "/port/name");
            let number = s
                .pointer("/port/number")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let port_path = path.child("service").child("port");
            if !port_name.is_empty() && number != 0 {
                errs.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                ));
            } else if !port_name.is_empty() {
                errs.extend(invalid_each(
                    &port_path.child("name"),
                    port_name,
                    is_valid_port_name(port_name),
                ));
            } else if number != 0 {
                errs.extend(
                    is_valid_port_num(number)
                        .into_iter()
                        .map(|m| FieldError::invalid(&port_path.child("number"), json!(number), m)),
                );
            } else {
                errs.push(FieldError::required(
                    path,
                    "port name or number is required",
                ));
            }
            errs
        }
        (None, None) => vec![FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )],
    }
}

/// `validateHTTPIngressPath`.
fn validate_http_path(p: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(path_type) = present(p, "pathType").and_then(Value::as_str) else {
        return vec![FieldError::required(
            &path.child("pathType"),
            "pathType must be specified",
        )];
    };
    let value = str_at(p, "/path");
    let path_path = path.child("path");
    let mut errs = Vec::new();
    match path_type {
        "Exact" | "Prefix" => {
            if !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &path_path,
                    value,
                    "must be an absolute path",
                ));
            }
            if !value.is_empty() {
                for seq in INVALID_PATH_SEQUENCES {
                    if value.contains(seq) {
                        errs.push(FieldError::invalid(
                            &path_path,
                            value,
                            format!("must not contain '{seq}'"),
                        ));
                    }
                }
                for suffix in INVALID_PATH_SUFFIXES {
                    if value.ends_with(suffix) {
                        errs.push(FieldError::invalid(
                            &path_path,
                            value,
                            format!("cannot end with '{suffix}'"),
                        ));
                    }
                }
            }
        }
        "ImplementationSpecific" => {
            if !value.is_empty() && !value.starts_with('/') {
                errs.push(FieldError::invalid(
                    &path_path,
                    value,
                    "must be an absolute path",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("pathType"),
            other,
            &["Exact", "ImplementationSpecific", "Prefix"],
        )),
    }
    errs.extend(validate_ingress_backend(
        p.get("backend").unwrap_or(&Value::Null),
        &path.child("backend"),
    ));
    errs
}

fn validate_rule_value(rule: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(http) = present(rule, "http") else {
        return Vec::new();
    };
    let http_path = path.child("http");
    let paths = list_at(http, "/paths");
    let mut errs = Vec::new();
    if paths.is_empty() {
        errs.push(FieldError::required(&http_path.child("paths"), ""));
    }
    for (i, p) in paths.iter().enumerate() {
        errs.extend(validate_http_path(p, &http_path.child("paths").index(i)));
    }
    errs
}

/// Whether a host is an IP address (as Go's sloppy parser reads one).
fn looks_like_ip(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || host.split('.').count() == 4
            && host.split('.').all(|p| {
                !p.is_empty()
                    && p.bytes().all(|c| c.is_ascii_digit())
                    && p.parse::<u32>().is_ok_and(|n| n < 256)
            })
}

/// `ValidateIngressSpec`.
fn validate_ingress_spec(ing: &Value, opts: IngressOpts) -> Vec<FieldError> {
    let spec = FieldPath::new("spec");
    let rules = list_at(ing, "/spec/rules");
    let default_backend = ing.pointer("/spec/defaultBackend").filter(|b| !b.is_null());
    let mut errs = Vec::new();
    if rules.is_empty() && default_backend.is_none() {
        errs.push(FieldError::invalid(
            &spec,
            Value::Null,
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(b) = default_backend {
        errs.extend(validate_ingress_backend(b, &spec.child("defaultBackend")));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = spec.child("rules").index(i);
        let host = str_at(rule, "/host");
        let mut wildcard = false;
        if !host.is_empty() {
            if looks_like_ip(host) {
                errs.push(FieldError::invalid(
                    &rule_path.child("host"),
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            if host.contains('*') {
                errs.extend(invalid_each(
                    &rule_path.child("host"),
                    host,
                    is_wildcard_dns1123_subdomain(host),
                ));
                wildcard = true;
            } else {
                errs.extend(invalid_each(
                    &rule_path.child("host"),
                    host,
                    is_dns1123_subdomain(host),
                ));
            }
        }
        if !wildcard || !opts.allow_invalid_wildcard_host_rule {
            errs.extend(validate_rule_value(rule, &rule_path));
        }
    }
    for (t, tls) in list_at(ing, "/spec/tls").iter().enumerate() {
        let tls_path = spec.child("tls").index(t);
        for (i, host) in list_at(tls, "/hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            let msgs = if host.contains('*') {
                is_wildcard_dns1123_subdomain(host)
            } else {
                is_dns1123_subdomain(host)
            };
            errs.extend(invalid_each(&tls_path.child("hosts").index(i), host, msgs));
        }
        let secret = str_at(tls, "/secretName");
        if !opts.allow_invalid_secret_name && !secret.is_empty() {
            errs.extend(invalid_each(
                &tls_path.child("secretName"),
                secret,
                NameValidator::Dns1123Subdomain.validate(secret, false),
            ));
        }
    }
    if let Some(class) = ing
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
    {
        errs.extend(invalid_each(
            &spec.child("ingressClassName"),
            class,
            NameValidator::Dns1123Subdomain.validate(class, false),
        ));
    }
    errs
}

/// `ValidateIngressLoadBalancerStatus`.
fn validate_ingress_status(new: &Value, old: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("status")
        .child("loadBalancer")
        .child("ingress");
    let old_ips: Vec<&str> = list_at(old, "/status/loadBalancer/ingress")
        .iter()
        .map(|i| str_at(i, "/ip"))
        .filter(|ip| !ip.is_empty())
        .collect();
    let mut errs = Vec::new();
    for (i, ing) in list_at(new, "/status/loadBalancer/ingress")
        .iter()
        .enumerate()
    {
        let p = path.index(i);
        let ip = str_at(ing, "/ip");
        if !ip.is_empty() {
            errs.extend(apimachinery::validation::is_valid_ip_for_legacy_field(
                &p.child("ip"),
                ip,
                true,
                &old_ips,
            ));
        }
        let host = str_at(ing, "/hostname");
        if !host.is_empty() {
            errs.extend(invalid_each(
                &p.child("hostname"),
                host,
                is_dns1123_subdomain(host),
            ));
            if looks_like_ip(host) {
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

impl Strategy for IngressStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_ingress_spec(obj, IngressOpts::default());
        let annotation = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .and_then(Value::as_str);
        let class = obj
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str);
        if let (Some(a), Some(c)) = (annotation, class)
            && a != c
        {
            errs.push(FieldError::invalid(
                &FieldPath::new("annotations").child(INGRESS_CLASS_ANNOTATION),
                a,
                "must match `ingressClassName` when both are specified",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let opts = IngressOpts {
            allow_invalid_secret_name: list_at(old, "/spec/tls").iter().any(|t| {
                let s = str_at(t, "/secretName");
                !s.is_empty()
                    && !NameValidator::Dns1123Subdomain
                        .validate(s, false)
                        .is_empty()
            }),
            allow_invalid_wildcard_host_rule: list_at(old, "/spec/rules").iter().any(|r| {
                str_at(r, "/host").contains('*')
                    && !validate_rule_value(r, &FieldPath::nil()).is_empty()
            }),
        };
        validate_ingress_spec(new, opts)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_ingress_status(new, old)
    }

    /// The status strategy's `WarningsOnUpdate`: load balancer addresses in non-standard form.
    fn warnings_on_status_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        let mut w = Vec::new();
        for (i, ing) in list_at(new, "/status/loadBalancer/ingress")
            .iter()
            .enumerate()
        {
            let ip = str_at(ing, "/ip");
            if !ip.is_empty() {
                w.extend(apimachinery::validation::get_warnings_for_ip(
                    // Upstream names the ingress entry, not its `ip` field.
                    &format!("status.loadBalancer.ingress[{i}]"),
                    ip,
                ));
            }
        }
        w
    }

    /// The class annotation is deprecated; upstream warns only when `ingressClassName` is not
    /// set too.
    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let annotated = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .is_some();
        let class_set = obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|c| !c.is_null());
        if annotated && !class_set {
            vec![format!(
                "annotation \"{INGRESS_CLASS_ANNOTATION}\" is deprecated, please use 'spec.ingressClassName' instead"
            )]
        } else {
            Vec::new()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IngressClass.
// ---------------------------------------------------------------------------------------------

pub struct IngressClassStrategy;

const MAX_INGRESS_CLASS_CONTROLLER: usize = 250;
/// util/validation's `httpPathFmt`.
const HTTP_PATH_FMT: &str = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+";

fn http_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c)
}

/// `IsDomainPrefixedPath`: a DNS subdomain, `/`, and an HTTP path.
// candidate for apimachinery::validation
pub fn is_domain_prefixed_path(path: &FieldPath, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs = invalid_each(path, host, is_dns1123_subdomain(host));
    if !rest.chars().all(http_path_char) {
        errs.push(FieldError::invalid(
            path,
            rest,
            regex_error("Invalid path", HTTP_PATH_FMT, &[]),
        ));
    }
    errs
}

/// `validateIngressClassParametersReference`.
fn validate_class_parameters(params: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(group) = present(params, "apiGroup").and_then(Value::as_str) {
        errs.extend(invalid_each(
            &path.child("apiGroup"),
            group,
            is_dns1123_subdomain(group),
        ));
    }
    for f in ["kind", "name"] {
        let v = str_at(params, &format!("/{f}"));
        if v.is_empty() {
            errs.push(FieldError::required(&path.child(f), ""));
        } else {
            errs.extend(invalid_each(&path.child(f), v, is_path_segment_name(v)));
        }
    }
    let Some(scope) = present(params, "scope").and_then(Value::as_str) else {
        errs.push(FieldError::required(&path.child("scope"), ""));
        return errs;
    };
    let namespace = present(params, "namespace").and_then(Value::as_str);
    match scope {
        "Namespace" => match namespace {
            None => errs.push(FieldError::required(
                &path.child("namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => errs.extend(invalid_each(
                &path.child("namespace"),
                ns,
                NameValidator::Dns1123Label.validate(ns, false),
            )),
        },
        "Cluster" => {
            if namespace.is_some() {
                errs.push(FieldError::forbidden(
                    &path.child("namespace"),
                    "`parameters.scope` is set to 'Cluster'",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("scope"),
            other,
            &["Cluster", "Namespace"],
        )),
    }
    errs
}

impl Strategy for IngressClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = FieldPath::new("spec");
        let controller = str_at(obj, "/spec/controller");
        let mut errs = Vec::new();
        if controller.is_empty() {
            errs.push(FieldError::required(&spec.child("controller"), ""));
        } else {
            if controller.len() > MAX_INGRESS_CLASS_CONTROLLER {
                errs.push(FieldError::too_long(
                    &spec.child("controller"),
                    "",
                    MAX_INGRESS_CLASS_CONTROLLER as i64,
                ));
            }
            errs.extend(is_domain_prefixed_path(
                &spec.child("controller"),
                controller,
            ));
        }
        if let Some(params) = obj.pointer("/spec/parameters").filter(|p| !p.is_null()) {
            errs.extend(validate_class_parameters(params, &spec.child("parameters")));
        }
        errs
    }
}

// ---------------------------------------------------------------------------------------------
// ServiceCIDR.
// ---------------------------------------------------------------------------------------------

pub struct ServiceCidrStrategy;

/// `validateServiceCIDRSpec`: one or two canonical CIDRs, one per family.
fn validate_service_cidr_spec(obj: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("spec").child("cidrs");
    let cidrs = list_at(obj, "/spec/cidrs");
    if cidrs.is_empty() {
        return vec![FieldError::required(&path, "at least one CIDR required")];
    }
    if cidrs.len() > 2 {
        // The value is the internal `networking.ServiceCIDRSpec`, printed with Go's names.
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let mut err = FieldError::invalid(&path, spec.clone(), "may only hold up to 2 values");
        if let Some(r) = ironplane_protobuf::go_struct_json(
            "networking.v1.ServiceCIDRSpec",
            &spec,
            ironplane_protobuf::GoStyle::Internal,
        ) {
            err = err.with_rendered_value(r);
        }
        return vec![err];
    }
    let values: Vec<&str> = cidrs.iter().map(|c| c.as_str().unwrap_or("")).collect();
    let mut errs = Vec::new();
    for (i, c) in values.iter().enumerate() {
        errs.extend(is_valid_cidr(&path.index(i), c));
    }
    if values.len() == 2
        && let (Some(a), Some(b)) = (cidr_is_v6(values[0]), cidr_is_v6(values[1]))
        && a == b
    {
        errs.push(FieldError::invalid(
            &path,
            json!(values),
            "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64",
        ));
    }
    errs
}

impl Strategy for ServiceCidrStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_service_cidr_spec(obj)
    }

    /// `ValidateServiceCIDRUpdate`: CIDRs stay, except that a single-stack range may gain its
    /// other family.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let path = FieldPath::new("spec").child("cidrs");
        let olds = list_at(old, "/spec/cidrs");
        let news = list_at(new, "/spec/cidrs");
        let immutable = apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG;
        let mut errs = Vec::new();
        if olds.len() == news.len() {
            for (i, c) in olds.iter().enumerate() {
                if *c != news[i] {
                    errs.push(FieldError::invalid(
                        &path.index(i),
                        news[i].clone(),
                        immutable,
                    ));
                }
            }
        } else if olds.len() == 1 && news.len() == 2 {
            if news[0] != olds[0] {
                errs.push(FieldError::invalid(
                    &path.index(0),
                    news[0].clone(),
                    immutable,
                ));
            }
            errs.extend(validate_service_cidr_spec(new));
        } else {
            errs.push(FieldError::invalid(
                &path,
                Value::Array(news.to_vec()),
                immutable,
            ));
        }
        errs
    }
}

// ---------------------------------------------------------------------------------------------
// IPAddress.
// ---------------------------------------------------------------------------------------------

pub struct IpAddressStrategy;

impl Strategy for IpAddressStrategy {
    /// The name is checked in `validate` (it must be an IP address in canonical form).
    fn name_validator(&self) -> NameValidator {
        NameValidator::None
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = str_at(obj, "/metadata/name");
        let name_path = FieldPath::new("metadata").child("name");
        let mut errs: Vec<FieldError> = if name.is_empty() {
            Vec::new()
        } else {
            is_valid_ip(&FieldPath::nil(), name)
                .into_iter()
                .map(|e| FieldError::invalid(&name_path, name, e.detail))
                .collect()
        };
        let spec = FieldPath::new("spec");
        let Some(parent) = obj.pointer("/spec/parentRef").filter(|p| !p.is_null()) else {
            errs.push(FieldError::required(&spec.child("parentRef"), ""));
            return errs;
        };
        let path = spec.child("parentRef");
        let group = str_at(parent, "/group");
        if !group.is_empty() {
            errs.extend(invalid_each(
                &path.child("group"),
                group,
                is_dns1123_subdomain(group),
            ));
        }
        for f in ["resource", "name"] {
            let v = str_at(parent, &format!("/{f}"));
            if v.is_empty() {
                errs.push(FieldError::required(&path.child(f), ""));
            } else {
                errs.extend(invalid_each(&path.child(f), v, is_path_segment_name(v)));
            }
        }
        let ns = str_at(parent, "/namespace");
        if !ns.is_empty() {
            errs.extend(invalid_each(
                &path.child("namespace"),
                ns,
                is_path_segment_name(ns),
            ));
        }
        errs
    }

    /// `ValidateIPAddress` again, then the parent reference may not change (printed as the
    /// internal `networking.ParentReference`).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let parent = |v: &Value| v.pointer("/spec/parentRef").cloned().unwrap_or(Value::Null);
        let (n, o) = (parent(new), parent(old));
        if n != o {
            let mut err = FieldError::invalid(
                &FieldPath::new("spec").child("parentRef"),
                n.clone(),
                apimachinery::validation::FIELD_IMMUTABLE_ERROR_MSG,
            );
            if n.is_null() {
                err = err.with_rendered_value("null");
            } else if let Some(r) = ironplane_protobuf::go_struct_json(
                "networking.v1.ParentReference",
                &n,
                ironplane_protobuf::GoStyle::Internal,
            ) {
                err = err.with_rendered_value(r);
            }
            errs.push(err);
        }
        errs
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
    fn ports_are_tcp_and_policy_types_follow_the_rules() {
        let mut np = json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}});
        NetworkPolicyStrategy.default(&mut np);
        assert_eq!(
            np["spec"],
            json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}], "policyTypes": ["Ingress"]})
        );
        let mut both = json!({"spec": {"podSelector": {}, "egress": [{}]}});
        NetworkPolicyStrategy.default(&mut both);
        assert_eq!(both["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }

    #[test]
    fn except_must_be_inside_cidr() {
        let np = json!({"spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24", "192.168.0.0/24", "10.0.0.0/16"]}}]}]}});
        assert_eq!(
            messages(&NetworkPolicyStrategy.validate(&np)),
            vec![
                "spec.ingress[0].from[0].ipBlock.except[1]: Invalid value: \"192.168.0.0/24\": must be a strict subset of `cidr`",
                "spec.ingress[0].from[0].ipBlock.except[2]: Invalid value: \"10.0.0.0/16\": must be a strict subset of `cidr`",
            ]
        );
    }

    #[test]
    fn controllers_are_domain_prefixed_paths() {
        let p = FieldPath::new("c");
        assert!(is_domain_prefixed_path(&p, "example.com/ingress").is_empty());
        assert_eq!(
            messages(&is_domain_prefixed_path(&p, "example.com/a b")),
            vec![
                "c: Invalid value: \"a b\": Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"
            ]
        );
    }

    #[test]
    fn ip_address_names_are_canonical_addresses() {
        let obj = json!({"metadata": {"name": "10.0.0.010"}, "spec": {"parentRef": {"resource": "services", "name": "s"}}});
        assert_eq!(
            messages(&IpAddressStrategy.validate(&obj)),
            vec!["metadata.name: Invalid value: \"10.0.0.010\": must not have leading 0s"]
        );
    }
}
