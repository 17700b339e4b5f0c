//! Rows of the `networking.k8s.io` kinds (Ingress, IngressClass, NetworkPolicy, ServiceCIDR,
//! IPAddress) and of `discovery.k8s.io` EndpointSlice.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, list_at, opt_int, opt_str, str_at, strings_at};
use super::format::{age, format_label_selector, list_with_more, load_balancer_ingress};

/// Name, Class, Hosts, Address, Ports, Age.
pub(super) fn ingress(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let ports = if list_at(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    cells![
        obj.name(),
        opt_str(obj, &["spec", "ingressClassName"]).unwrap_or("<none>"),
        ingress_hosts(list_at(obj, &["spec", "rules"])),
        load_balancer_ingress(list_at(obj, &["status", "loadBalancer", "ingress"])),
        ports,
        age(obj, now),
    ]
}

/// Up to three rule hosts, "+ N more..." counting every further rule, or "*" when no rule names a
/// host.
fn ingress_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_string();
    }
    let joined = list.join(",");
    if more {
        // Upstream subtracts from the number of rules, hostless ones included.
        format!("{joined} + {} more...", rules.len().saturating_sub(MAX))
    } else {
        joined
    }
}

/// Name, Controller, Parameters ("Kind.group/name" or "<none>"), Age.
pub(super) fn ingress_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let parameters = match at(obj, &["spec", "parameters"]) {
        None => "<none>".to_string(),
        Some(p) => {
            let kind = str_at(p, &["kind"]);
            let name = str_at(p, &["name"]);
            match opt_str(p, &["apiGroup"]) {
                Some(group) => format!("{kind}.{group}/{name}"),
                None => format!("{kind}/{name}"),
            }
        }
    };
    cells![
        obj.name(),
        str_at(obj, &["spec", "controller"]),
        parameters,
        age(obj, now)
    ]
}

/// Name, Pod-Selector, Age.
pub(super) fn network_policy(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        format_label_selector(at(obj, &["spec", "podSelector"])),
        age(obj, now),
    ]
}

/// Name, CIDRs, Age.
pub(super) fn service_cidr(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        strings_at(obj, &["spec", "cidrs"]).join(","),
        age(obj, now)
    ]
}

/// Name, ParentRef ("resource.group/namespace/name" or "<none>"), and an Age cell that upstream
/// writes although the table has no Age column.
pub(super) fn ip_address(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let parent = match at(obj, &["spec", "parentRef"]) {
        None => "<none>".to_string(),
        Some(r) => {
            let resource = str_at(r, &["resource"]);
            let mut text = match str_at(r, &["group"]) {
                "" => resource.to_lowercase(),
                group => format!("{resource}.{group}").to_lowercase(),
            };
            let namespace = str_at(r, &["namespace"]);
            if !namespace.is_empty() {
                text.push('/');
                text.push_str(namespace);
            }
            text.push('/');
            text.push_str(str_at(r, &["name"]));
            text
        }
    };
    cells![obj.name(), parent, age(obj, now)]
}

/// Name, AddressType, Ports, Endpoints, Age.
pub(super) fn endpoint_slice(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        str_at(obj, &["addressType"]),
        discovery_ports(list_at(obj, &["ports"])),
        discovery_endpoints(list_at(obj, &["endpoints"])),
        age(obj, now),
    ]
}

/// Up to three port numbers (or names, or "*"), then "+ N more...", or "<unset>".
fn discovery_ports(ports: &[Value]) -> String {
    const MAX: usize = 3;
    let list: Vec<String> = ports
        .iter()
        .take(MAX)
        .map(|p| match (opt_int(p, &["port"]), opt_str(p, &["name"])) {
            (Some(port), _) => port.to_string(),
            (None, Some(name)) => name.to_string(),
            (None, None) => "*".to_string(),
        })
        .collect();
    list_with_more(&list, ports.len() > MAX, ports.len(), MAX)
}

/// Up to three endpoint addresses, then "+ N more...", or "<unset>".
fn discovery_endpoints(endpoints: &[Value]) -> String {
    const MAX: usize = 3;
    let addresses: Vec<&str> = endpoints
        .iter()
        .flat_map(|e| strings_at(e, &["addresses"]))
        .collect();
    let list: Vec<String> = addresses.iter().take(MAX).map(|a| a.to_string()).collect();
    list_with_more(&list, addresses.len() > MAX, addresses.len(), MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn ingresses() {
        let ing = json!({
            "metadata": {"name": "web"},
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                     "rules": [{"host": "a.example"}, {}, {"host": "b.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.0.10"}]}}
        });
        assert_eq!(
            ingress(&ing, now()),
            vec![
                json!("web"),
                json!("nginx"),
                json!("a.example,b.example"),
                json!("192.168.0.10"),
                json!("80, 443"),
                json!("<unknown>")
            ]
        );
        let bare = ingress(&json!({}), now());
        assert_eq!(
            (&bare[1], &bare[2], &bare[3], &bare[4]),
            (&json!("<none>"), &json!("*"), &json!(""), &json!("80"))
        );
        let many = json!([{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}, {}]);
        assert_eq!(ingress_hosts(many.as_array().unwrap()), "a,b,c + 2 more...");
    }

    #[test]
    fn ingress_classes_and_policies() {
        let ic = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        assert_eq!(
            ingress_class(&ic, now()),
            vec![
                json!("nginx"),
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/p"),
                json!("<unknown>")
            ]
        );
        let core = json!({"spec": {"parameters": {"kind": "ConfigMap", "name": "c"}}});
        assert_eq!(ingress_class(&core, now())[2], json!("ConfigMap/c"));
        assert_eq!(ingress_class(&json!({}), now())[2], json!("<none>"));
        let np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}}});
        assert_eq!(network_policy(&np, now())[1], json!("<none>"));
        let np = json!({"spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
        assert_eq!(network_policy(&np, now())[1], json!("role=db"));
    }

    #[test]
    fn service_cidrs_and_ip_addresses() {
        let sc = json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.0.0.0/24", "fd00::/108"]}});
        assert_eq!(service_cidr(&sc, now())[1], json!("10.0.0.0/24,fd00::/108"));
        let ip = json!({"metadata": {"name": "10.0.0.1"}, "spec": {"parentRef": {
            "group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}});
        assert_eq!(
            ip_address(&ip, now()),
            vec![
                json!("10.0.0.1"),
                json!("services/default/kubernetes"),
                json!("<unknown>")
            ]
        );
        let ip = json!({"spec": {"parentRef": {"group": "gateway.networking.k8s.io", "resource": "Gateways", "name": "g"}}});
        assert_eq!(
            ip_address(&ip, now())[1],
            json!("gateways.gateway.networking.k8s.io/g")
        );
        assert_eq!(ip_address(&json!({}), now())[1], json!("<none>"));
    }

    #[test]
    fn endpoint_slices() {
        let es = json!({
            "metadata": {"name": "kubernetes"}, "addressType": "IPv4",
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["192.168.1.2"]}]
        });
        assert_eq!(
            endpoint_slice(&es, now()),
            vec![
                json!("kubernetes"),
                json!("IPv4"),
                json!("6443"),
                json!("192.168.1.2"),
                json!("<unknown>")
            ]
        );
        let empty = endpoint_slice(&json!({"addressType": "IPv6"}), now());
        assert_eq!(
            (&empty[2], &empty[3]),
            (&json!("<unset>"), &json!("<unset>"))
        );
        let ports = json!([{"name": "a"}, {}, {"port": 1}, {"port": 2}, {"port": 3}]);
        assert_eq!(
            discovery_ports(ports.as_array().unwrap()),
            "a,*,1 + 2 more..."
        );
        let eps = json!([{"addresses": ["1", "2"]}, {"addresses": ["3", "4"]}]);
        assert_eq!(
            discovery_endpoints(eps.as_array().unwrap()),
            "1,2,3 + 1 more..."
        );
    }
}
