//! Rows of the core (`v1`) kinds other than Pod and Event: ConfigMap, Secret, ServiceAccount,
//! Namespace, Service, Endpoints, Node, PersistentVolume(Claim), ReplicationController, PodTemplate,
//! ResourceQuota and ComponentStatus.
//!
//! Each function fills the recorded columns of its resource in order, with upstream's words for
//! missing data. LimitRange keeps the default table and has no function here.

use std::collections::BTreeSet;

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, bool_at, int_at, len_at, list_at, map_at, opt_str, str_at, strings_at};
use super::format::{
    access_modes, age, container_cells, format_labels, join_host_port, load_balancer_ingress,
    quantity,
};

/// Name, Data (the number of `data` and `binaryData` keys), Age.
pub(super) fn config_map(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let count = len_at(obj, &["data"]) + len_at(obj, &["binaryData"]);
    cells![obj.name(), count as i64, age(obj, now)]
}

/// Name, Type, Data (the number of keys), Age.
pub(super) fn secret(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // Upstream counts the internal object's keys, where `stringData` has been merged into `data`.
    let keys: BTreeSet<&String> = ["data", "stringData"]
        .iter()
        .filter_map(|field| map_at(obj, &[field]))
        .flat_map(|m| m.keys())
        .collect();
    cells![
        obj.name(),
        str_at(obj, &["type"]),
        keys.len() as i64,
        age(obj, now)
    ]
}

/// Name, Age (v1.36 dropped the Secrets column).
pub(super) fn service_account(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), age(obj, now)]
}

/// Name, Status (the phase), Age.
pub(super) fn namespace(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), str_at(obj, &["status", "phase"]), age(obj, now)]
}

/// Name, Type, Cluster-IP, External-IP, Port(s), Age, Selector.
pub(super) fn service(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // Upstream reads `clusterIPs` only; the registry always fills it from `clusterIP`.
    let cluster_ip = match list_at(obj, &["spec", "clusterIPs"]).first() {
        Some(ip) => ip.as_str().unwrap_or(""),
        None => "<none>",
    };
    let mut ports = service_ports(list_at(obj, &["spec", "ports"]));
    if ports.is_empty() {
        ports = "<none>".to_string();
    }
    cells![
        obj.name(),
        str_at(obj, &["spec", "type"]),
        cluster_ip,
        service_external_ip(obj),
        ports,
        age(obj, now),
        format_labels(map_at(obj, &["spec", "selector"])),
    ]
}

/// "80/TCP,443:30001/TCP": each port, with its node port when one is allocated.
pub(super) fn service_ports(ports: &[Value]) -> String {
    ports
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let protocol = str_at(p, &["protocol"]);
            match int_at(p, &["nodePort"]) {
                node_port if node_port > 0 => format!("{port}:{node_port}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The External-IP cell: external IPs, load-balancer ingress points, "<pending>" for a load
/// balancer still waiting for one, the external name, or "<none>".
fn service_external_ip(obj: &Value) -> String {
    let external = strings_at(obj, &["spec", "externalIPs"]);
    match str_at(obj, &["spec", "type"]) {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let ingress =
                load_balancer_ingress(list_at(obj, &["status", "loadBalancer", "ingress"]));
            if !external.is_empty() {
                let mut all: Vec<&str> = Vec::new();
                if !ingress.is_empty() {
                    all.extend(ingress.split(','));
                }
                all.extend(external);
                all.join(",")
            } else if !ingress.is_empty() {
                ingress
            } else {
                "<pending>".to_string()
            }
        }
        "ExternalName" => str_at(obj, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// Name, Endpoints ("ip:port" for up to three, then "+ N more..."), Age.
pub(super) fn endpoints(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), format_endpoints(obj), age(obj, now)]
}

fn format_endpoints(obj: &Value) -> String {
    const MAX: usize = 3;
    let subsets = list_at(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for subset in subsets {
        let addresses = list_at(subset, &["addresses"]);
        let ports = list_at(subset, &["ports"]);
        if ports.is_empty() {
            // A headless service may have no ports: list the bare addresses.
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(address, &["ip"]).to_string());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(
                    str_at(address, &["ip"]),
                    int_at(port, &["port"]),
                ));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count.saturating_sub(MAX))
    } else {
        joined
    }
}

/// Name, Status, Roles, Age, Version, Internal-IP, External-IP, OS-Image, Kernel-Version,
/// Container-Runtime.
pub(super) fn node(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // Only the Ready condition shows; a later duplicate wins, as in upstream's map.
    let ready = list_at(obj, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == "Ready");
    let mut status: Vec<&str> = vec![match ready {
        None => "Unknown",
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
    }];
    if bool_at(obj, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let roles = node_roles(obj);
    let info = |field: &str| match str_at(obj, &["status", "nodeInfo", field]) {
        "" => "<unknown>",
        value => value,
    };
    cells![
        obj.name(),
        status.join(","),
        if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        },
        age(obj, now),
        str_at(obj, &["status", "nodeInfo", "kubeletVersion"]),
        node_address(obj, "InternalIP"),
        node_address(obj, "ExternalIP"),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
}

/// Roles from `node-role.kubernetes.io/<role>` label keys and the `kubernetes.io/role` label's
/// value, sorted and without duplicates.
fn node_roles(obj: &Value) -> Vec<&str> {
    let mut roles = BTreeSet::new();
    for (key, value) in obj.labels().into_iter().flatten() {
        if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role);
            }
        } else if key == "kubernetes.io/role"
            && let Some(role) = value.as_str().filter(|r| !r.is_empty())
        {
            roles.insert(role);
        }
    }
    roles.into_iter().collect()
}

/// The first address of this type, or "<none>".
fn node_address<'a>(obj: &'a Value, kind: &str) -> &'a str {
    list_at(obj, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == kind)
        .map_or("<none>", |a| str_at(a, &["address"]))
}

/// The beta storage-class annotation, which takes precedence over `storageClassName` upstream.
fn beta_storage_class(obj: &Value) -> Option<&str> {
    obj.annotations()?
        .get("volume.beta.kubernetes.io/storage-class")
        .map(|v| v.as_str().unwrap_or(""))
}

/// Name, Capacity, Access Modes, Reclaim Policy, Status, Claim, StorageClass,
/// VolumeAttributesClass, Reason, Age, VolumeMode.
pub(super) fn persistent_volume(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let claim = match at(obj, &["spec", "claimRef"]) {
        Some(r) => format!("{}/{}", str_at(r, &["namespace"]), str_at(r, &["name"])),
        None => String::new(),
    };
    let phase = if obj.deletion_timestamp().is_some() {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"])
    };
    let class =
        beta_storage_class(obj).unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]));
    cells![
        obj.name(),
        quantity(at(obj, &["spec", "capacity", "storage"])).unwrap_or_else(|| "0".to_string()),
        access_modes(list_at(obj, &["spec", "accessModes"])),
        str_at(obj, &["spec", "persistentVolumeReclaimPolicy"]),
        phase,
        claim,
        class,
        opt_str(obj, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>"),
        str_at(obj, &["status", "reason"]),
        age(obj, now),
        opt_str(obj, &["spec", "volumeMode"]).unwrap_or("<unset>"),
    ]
}

/// Name, Status, Volume, Capacity, Access Modes, StorageClass, VolumeAttributesClass, Age,
/// VolumeMode. Capacity and access modes show only once the claim is bound to a volume.
pub(super) fn persistent_volume_claim(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let phase = if obj.deletion_timestamp().is_some() {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"])
    };
    let volume = str_at(obj, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(at(obj, &["status", "capacity", "storage"]))
                .unwrap_or_else(|| "0".to_string()),
            access_modes(list_at(obj, &["status", "accessModes"])),
        )
    };
    let class = beta_storage_class(obj)
        .or_else(|| opt_str(obj, &["spec", "storageClassName"]))
        .unwrap_or("");
    cells![
        obj.name(),
        phase,
        volume,
        capacity,
        modes,
        class,
        opt_str(obj, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>"),
        age(obj, now),
        opt_str(obj, &["spec", "volumeMode"]).unwrap_or("<unset>"),
    ]
}

/// Name, Desired, Current, Ready, Age, Containers, Images, Selector.
pub(super) fn replication_controller(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) =
        container_cells(list_at(obj, &["spec", "template", "spec", "containers"]));
    cells![
        obj.name(),
        int_at(obj, &["spec", "replicas"]),
        int_at(obj, &["status", "replicas"]),
        int_at(obj, &["status", "readyReplicas"]),
        age(obj, now),
        names,
        images,
        format_labels(map_at(obj, &["spec", "selector"])),
    ]
}

/// Name, Containers, Images, Pod Labels.
pub(super) fn pod_template(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(list_at(obj, &["template", "spec", "containers"]));
    cells![
        obj.name(),
        names,
        images,
        format_labels(map_at(obj, &["template", "metadata", "labels"])),
    ]
}

/// Name, Request, Limit, Age: "resource: used/hard" for each hard limit, sorted by resource name,
/// `limits.*` resources in the Limit column and all others in Request.
pub(super) fn resource_quota(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut resources: Vec<&String> = map_at(obj, &["status", "hard"])
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    resources.sort();
    let mut request: Vec<String> = Vec::new();
    let mut limit: Vec<String> = Vec::new();
    for resource in resources {
        let used =
            quantity(at(obj, &["status", "used", resource])).unwrap_or_else(|| "0".to_string());
        let hard =
            quantity(at(obj, &["status", "hard", resource])).unwrap_or_else(|| "0".to_string());
        let text = format!("{resource}: {used}/{hard}");
        let mut pieces = resource.split('.');
        if pieces.next() == Some("limits") && pieces.next().is_some() {
            limit.push(text);
        } else {
            request.push(text);
        }
    }
    cells![
        obj.name(),
        request.join(", "),
        limit.join(", "),
        age(obj, now)
    ]
}

/// Name, Status, Message, Error, from the Healthy condition.
pub(super) fn component_status(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let healthy = list_at(obj, &["conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Healthy");
    let (status, message, error) = match healthy {
        None => ("Unknown", "", ""),
        Some(c) => (
            if str_at(c, &["status"]) == "True" {
                "Healthy"
            } else {
                "Unhealthy"
            },
            str_at(c, &["message"]),
            str_at(c, &["error"]),
        ),
    };
    cells![obj.name(), status, message, error]
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

    const CREATED: &str = "2025-05-30T12:00:00Z";

    #[test]
    fn config_maps_and_secrets_count_keys_as_integers() {
        let cm = json!({"metadata": {"name": "c", "creationTimestamp": CREATED},
            "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(
            config_map(&cm, now()),
            vec![json!("c"), json!(3), json!("2d")]
        );
        let s = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "MQ=="}, "stringData": {"a": "1", "b": "2"}});
        assert_eq!(
            secret(&s, now()),
            vec![json!("s"), json!("Opaque"), json!(2), json!("<unknown>")]
        );
        let sa = json!({"metadata": {"name": "default", "creationTimestamp": CREATED}, "secrets": [{"name": "x"}]});
        assert_eq!(
            service_account(&sa, now()),
            vec![json!("default"), json!("2d")]
        );
        let ns = json!({"metadata": {"name": "golden"}, "status": {"phase": "Active"}});
        assert_eq!(namespace(&ns, now())[1], json!("Active"));
    }

    #[test]
    fn services() {
        let svc = json!({
            "metadata": {"name": "s2", "creationTimestamp": CREATED},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.10", "clusterIPs": ["10.0.0.10"],
                     "ports": [{"port": 80, "nodePort": 32769, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                     "selector": {"app": "x", "tier": "web"}}
        });
        assert_eq!(
            service(&svc, now()),
            vec![
                json!("s2"),
                json!("NodePort"),
                json!("10.0.0.10"),
                json!("<none>"),
                json!("80:32769/TCP,53/UDP"),
                json!("2d"),
                json!("app=x,tier=web")
            ]
        );
        let headless = json!({"metadata": {"name": "h"}, "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}});
        let cells = service(&headless, now());
        assert_eq!(
            (&cells[2], &cells[3], &cells[4], &cells[6]),
            (
                &json!("None"),
                &json!("<none>"),
                &json!("<none>"),
                &json!("<none>")
            )
        );
        let external = json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        let cells = service(&external, now());
        assert_eq!(
            (&cells[2], &cells[3]),
            (&json!("<none>"), &json!("db.example.com"))
        );
    }

    #[test]
    fn service_external_ips() {
        let lb = |ingress: Value, external: Value| json!({"spec": {"type": "LoadBalancer", "externalIPs": external}, "status": {"loadBalancer": {"ingress": ingress}}});
        assert_eq!(service_external_ip(&lb(json!([]), json!([]))), "<pending>");
        assert_eq!(
            service_external_ip(&lb(json!([{"ip": "1.2.3.4"}]), json!(null))),
            "1.2.3.4"
        );
        assert_eq!(
            service_external_ip(&lb(
                json!([{"hostname": "lb.example"}, {"ip": "1.2.3.4"}]),
                json!(["5.6.7.8"])
            )),
            "1.2.3.4,lb.example,5.6.7.8"
        );
        let cluster = json!({"spec": {"type": "ClusterIP", "externalIPs": ["1.1.1.1", "2.2.2.2"]}});
        assert_eq!(service_external_ip(&cluster), "1.1.1.1,2.2.2.2");
        assert_eq!(service_external_ip(&json!({"spec": {}})), "<unknown>");
    }

    #[test]
    fn service_port_strings() {
        let ports = json!([{"port": 80, "protocol": "TCP"}, {"port": 443, "nodePort": 30001, "protocol": "TCP"}]);
        assert_eq!(
            service_ports(ports.as_array().unwrap()),
            "80/TCP,443:30001/TCP"
        );
        assert_eq!(service_ports(&[]), "");
        let sctp = json!([{"port": 9, "protocol": "SCTP", "nodePort": 0}]);
        assert_eq!(service_ports(sctp.as_array().unwrap()), "9/SCTP");
    }

    #[test]
    fn endpoints_list_three_then_count() {
        assert_eq!(format_endpoints(&json!({})), "<none>");
        let ep = json!({"subsets": [{
            "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}],
            "ports": [{"port": 80}, {"port": 443}]
        }]});
        assert_eq!(
            format_endpoints(&ep),
            "10.0.0.1:80,10.0.0.2:80,[fd00::3]:80 + 3 more..."
        );
        let headless = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]});
        assert_eq!(format_endpoints(&headless), "10.0.0.1");
    }

    #[test]
    fn nodes() {
        let node_obj = json!({
            "metadata": {"name": "n1", "creationTimestamp": CREATED, "labels": {
                "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "",
                "kubernetes.io/role": "master", "kubernetes.io/hostname": "n1"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "192.168.1.2"}],
                       "nodeInfo": {"kubeletVersion": "v1.36.2", "osImage": "Debian", "kernelVersion": "6.1", "containerRuntimeVersion": ""}}
        });
        assert_eq!(
            node(&node_obj, now()),
            vec![
                json!("n1"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,master"),
                json!("2d"),
                json!("v1.36.2"),
                json!("192.168.1.2"),
                json!("<none>"),
                json!("Debian"),
                json!("6.1"),
                json!("<unknown>")
            ]
        );
        let bare = node(&json!({"metadata": {"name": "n"}}), now());
        assert_eq!((&bare[1], &bare[2]), (&json!("Unknown"), &json!("<none>")));
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(node(&not_ready, now())[1], json!("NotReady"));
    }

    #[test]
    fn persistent_volumes_and_claims() {
        let pv = json!({
            "metadata": {"name": "pv1", "creationTimestamp": CREATED},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": "golden", "name": "pvc1"}, "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}
        });
        assert_eq!(
            persistent_volume(&pv, now()),
            vec![
                json!("pv1"),
                json!("1Gi"),
                json!("RWO"),
                json!("Retain"),
                json!("Bound"),
                json!("golden/pvc1"),
                json!("standard"),
                json!("<unset>"),
                json!(""),
                json!("2d"),
                json!("Filesystem")
            ]
        );
        let pvc = json!({
            "metadata": {"name": "pvc1", "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
            "spec": {"storageClassName": "standard", "volumeName": "pv1", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "capacity": {"storage": "1Gi"}}
        });
        assert_eq!(
            persistent_volume_claim(&pvc, now()),
            vec![
                json!("pvc1"),
                json!("Bound"),
                json!("pv1"),
                json!("1Gi"),
                json!("RWO,ROX"),
                json!("beta"),
                json!("<unset>"),
                json!("<unknown>"),
                json!("Filesystem")
            ]
        );
        let pending = json!({"metadata": {"deletionTimestamp": CREATED}, "spec": {"resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}});
        let cells = persistent_volume_claim(&pending, now());
        assert_eq!(
            (&cells[1], &cells[3], &cells[4], &cells[5]),
            (&json!("Terminating"), &json!(""), &json!(""), &json!(""))
        );
        assert_eq!(persistent_volume(&json!({}), now())[1], json!("0"));
    }

    #[test]
    fn replication_controllers_and_templates() {
        let rc = json!({
            "metadata": {"name": "rc"}, "spec": {"replicas": 3, "selector": {"app": "x"},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}
        });
        assert_eq!(
            replication_controller(&rc, now()),
            vec![
                json!("rc"),
                json!(3),
                json!(2),
                json!(1),
                json!("<unknown>"),
                json!("c"),
                json!("nginx"),
                json!("app=x")
            ]
        );
        let pt = json!({"metadata": {"name": "pt"}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "j"}]}}});
        assert_eq!(
            pod_template(&pt, now()),
            vec![json!("pt"), json!("c,d"), json!("i,j"), json!("a=b")]
        );
    }

    #[test]
    fn resource_quotas_split_requests_and_limits() {
        let rq = json!({"metadata": {"name": "q"}, "status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "limits": "1"},
            "used": {"pods": "1", "limits.cpu": "500m"}}});
        assert_eq!(
            resource_quota(&rq, now()),
            vec![
                json!("q"),
                json!("limits: 0/1, pods: 1/10, requests.memory: 0/1Gi"),
                json!("limits.cpu: 500m/2"),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn component_statuses() {
        let cs = json!({"metadata": {"name": "etcd-0"}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(
            component_status(&cs, now()),
            vec![json!("etcd-0"), json!("Healthy"), json!("ok"), json!("")]
        );
        let cs = json!({"metadata": {"name": "x"}, "conditions": [{"type": "Healthy", "status": "False", "error": "boom"}]});
        assert_eq!(
            component_status(&cs, now())[1..],
            [json!("Unhealthy"), json!(""), json!("boom")]
        );
        assert_eq!(component_status(&json!({}), now())[1], json!("Unknown"));
    }
}
