//! The endpoints, EndpointSlice and EndpointSlice mirroring controllers, end to end with
//! kubectl: Endpoints and EndpointSlices follow a Service and pods whose IPs and Ready
//! conditions the test writes through `/status`, as a kubelet would; a selectorless Service's
//! hand-written Endpoints are mirrored into a slice.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{Value, json};

/// How long a controller may take to catch up with a change.
const DEADLINE: Duration = Duration::from_secs(10);

fn server() -> Server {
    let version = std::process::Command::new(common::kubectl_path())
        .args(["version", "--client"])
        .output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "these tests need kubectl (on PATH or in $KUBECTL)"
    );
    Server::start()
}

/// Polls `f` until it gives `Some`, failing with `what` and the last value seen at the deadline.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("{what}: {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(25)),
        }
    }
}

fn get_json(s: &Server, args: &[&str]) -> Option<Value> {
    let mut full = args.to_vec();
    full.extend(["-o", "json"]);
    let out = s.kubectl_output(&full);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl prints JSON"))
}

fn namespace_with_default_account(s: &Server, ns: &str) {
    s.kubectl(&["create", "namespace", ns]);
    eventually("the default service account", || {
        get_json(s, &["-n", ns, "get", "serviceaccount", "default"])
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    });
}

/// A pod on `node` whose container names `port` `http`.
fn create_pod(s: &Server, ns: &str, name: &str, app: &str, node: &str, port: u16) {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "ports": [{"name": "http", "containerPort": port}]}]},
    });
    s.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
}

/// What a kubelet reports: the pod runs with `ip`, ready or not.
fn set_status(s: &Server, ns: &str, name: &str, ip: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": status}],
    }});
    s.kubectl(&[
        "-n",
        ns,
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
}

fn ips(list: &Value) -> Vec<String> {
    let mut ips: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["ip"].as_str().map(str::to_string))
        .collect();
    ips.sort();
    ips
}

/// The Endpoints' ready and not-ready IPs once they are `ready` and `not_ready`.
fn wait_for_endpoints(
    s: &Server,
    ns: &str,
    name: &str,
    ready: &[&str],
    not_ready: &[&str],
) -> Value {
    eventually(&format!("endpoints {ns}/{name}"), || {
        let ep = get_json(s, &["-n", ns, "get", "endpoints", name]).ok_or("no endpoints")?;
        let subsets = ep["subsets"].as_array().cloned().unwrap_or_default();
        let all = |field: &str| {
            let mut v: Vec<String> = subsets.iter().flat_map(|ss| ips(&ss[field])).collect();
            v.sort();
            v
        };
        if all("addresses") == ready && all("notReadyAddresses") == not_ready {
            Ok(ep)
        } else {
            Err(ep.to_string())
        }
    })
}

/// The slices of a Service, by name.
fn slices_of(s: &Server, ns: &str, service: &str) -> Vec<Value> {
    let selector = format!("kubernetes.io/service-name={service}");
    let list = get_json(s, &["-n", ns, "get", "endpointslices", "-l", &selector])
        .expect("endpointslices list");
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string());
    items
}

/// Each endpoint of the slices as (address, ready).
fn slice_endpoints(slices: &[Value]) -> Vec<(String, bool)> {
    let mut eps: Vec<(String, bool)> = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            (
                e["addresses"][0].as_str().unwrap_or("").to_string(),
                e["conditions"]["ready"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    eps.sort();
    eps
}

fn wait_for_slices(s: &Server, ns: &str, service: &str, want: &[(&str, bool)]) -> Vec<Value> {
    let want: Vec<(String, bool)> = want.iter().map(|(a, r)| (a.to_string(), *r)).collect();
    eventually(&format!("slices of {ns}/{service}"), || {
        let slices = slices_of(s, ns, service);
        if slice_endpoints(&slices) == want {
            Ok(slices)
        } else {
            Err(serde_json::to_string(&slices).unwrap_or_default())
        }
    })
}

#[test]
fn endpoints_and_slices_follow_the_pods_of_a_service() {
    let s = server();
    let ns = "shop";
    namespace_with_default_account(&s, ns);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-1"}}})
        .to_string(),
    );
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": ns, "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
        .to_string(),
    );
    let svc_uid = get_json(&s, &["-n", ns, "get", "service", "web"]).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // A Service without pods: empty Endpoints, and one empty placeholder slice.
    let ep = wait_for_endpoints(&s, ns, "web", &[], &[]);
    assert_eq!(
        ep["metadata"]["labels"],
        json!({"tier": "front", "endpoints.kubernetes.io/managed-by": "endpoint-controller"})
    );
    assert!(
        ep["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"]
            .is_string(),
        "{ep}"
    );
    let placeholder = eventually("a placeholder slice", || {
        match &slices_of(&s, ns, "web")[..] {
            [one] if one["endpoints"].as_array().is_none_or(Vec::is_empty) => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    });

    create_pod(&s, ns, "p1", "web", "node-a", 8080);
    create_pod(&s, ns, "p2", "web", "node-a", 8080);
    // Pods without IPs are nowhere yet.
    set_status(&s, ns, "p1", "10.1.0.1", true);
    set_status(&s, ns, "p2", "10.1.0.2", false);

    let ep = wait_for_endpoints(&s, ns, "web", &["10.1.0.1"], &["10.1.0.2"]);
    let subset = &ep["subsets"][0];
    assert_eq!(
        subset["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
        "the named targetPort resolves to the container port"
    );
    let address = &subset["addresses"][0];
    assert_eq!(address["nodeName"], "node-a");
    assert_eq!(address["targetRef"]["kind"], "Pod");
    assert_eq!(address["targetRef"]["name"], "p1");

    let slices = wait_for_slices(&s, ns, "web", &[("10.1.0.1", true), ("10.1.0.2", false)]);
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(
        slice["metadata"]["name"], placeholder["metadata"]["name"],
        "the placeholder is filled in place"
    );
    assert!(
        slice["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("web-")
    );
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"tier": "front", "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"})
    );
    assert_eq!(
        slice["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": svc_uid,
            "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    let p1 = slice["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["addresses"] == json!(["10.1.0.1"]))
        .unwrap();
    assert_eq!(
        p1["conditions"],
        json!({"ready": true, "serving": true, "terminating": false})
    );
    assert_eq!(p1["nodeName"], "node-a");
    assert_eq!(p1["zone"], "zone-1");
    assert_eq!(p1["targetRef"]["name"], "p1");

    // p2 becomes ready.
    set_status(&s, ns, "p2", "10.1.0.2", true);
    wait_for_endpoints(&s, ns, "web", &["10.1.0.1", "10.1.0.2"], &[]);
    let slices = wait_for_slices(&s, ns, "web", &[("10.1.0.1", true), ("10.1.0.2", true)]);
    assert_eq!(
        slices[0]["metadata"]["name"],
        placeholder["metadata"]["name"]
    );

    // A change that does not concern endpoints writes nothing: once a later change to another
    // Service is published, web's objects are as they were.
    let ep_rv = get_json(&s, &["-n", ns, "get", "endpoints", "web"]).unwrap()["metadata"]
        ["resourceVersion"]
        .clone();
    let slice_rv = slices[0]["metadata"]["resourceVersion"].clone();
    s.kubectl(&["-n", ns, "annotate", "pod", "p1", "note=irrelevant"]);
    s.kubectl(&["-n", ns, "annotate", "service", "web", "note=irrelevant"]);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "other", "namespace": ns},
            "spec": {"selector": {"app": "other"}, "ports": [{"port": 80}]}})
        .to_string(),
    );
    create_pod(&s, ns, "o1", "other", "node-a", 8080);
    set_status(&s, ns, "o1", "10.1.0.9", true);
    wait_for_endpoints(&s, ns, "other", &["10.1.0.9"], &[]);
    wait_for_slices(&s, ns, "other", &[("10.1.0.9", true)]);
    let ep_rv_after = get_json(&s, &["-n", ns, "get", "endpoints", "web"]).unwrap()["metadata"]
        ["resourceVersion"]
        .clone();
    assert_eq!(ep_rv, ep_rv_after, "the Endpoints were not written again");
    assert_eq!(
        slice_rv,
        slices_of(&s, ns, "web")[0]["metadata"]["resourceVersion"],
        "the slice was not written again"
    );

    // A pod whose named port is another number serves another port set: a slice of its own.
    create_pod(&s, ns, "p3", "web", "node-a", 9090);
    set_status(&s, ns, "p3", "10.1.0.3", true);
    let slices = wait_for_slices(
        &s,
        ns,
        "web",
        &[("10.1.0.1", true), ("10.1.0.2", true), ("10.1.0.3", true)],
    );
    assert_eq!(slices.len(), 2);
    let ep = wait_for_endpoints(&s, ns, "web", &["10.1.0.1", "10.1.0.2", "10.1.0.3"], &[]);
    assert_eq!(
        ep["subsets"].as_array().unwrap().len(),
        2,
        "one subset per port set: {ep}"
    );
    // When it goes, its slice is deleted; the other stays.
    s.kubectl(&[
        "-n",
        ns,
        "delete",
        "pod",
        "p3",
        "--force",
        "--grace-period=0",
    ]);
    let slices = wait_for_slices(&s, ns, "web", &[("10.1.0.1", true), ("10.1.0.2", true)]);
    eventually("the stale slice deleted", || {
        match slices_of(&s, ns, "web").len() {
            1 => Ok(()),
            n => Err(format!("{n} slices")),
        }
    });
    assert_eq!(
        slices[0]["metadata"]["name"],
        placeholder["metadata"]["name"]
    );

    // A terminating pod (no kubelet finishes its graceful deletion) leaves the Endpoints and
    // stays in its slice as terminating, no longer ready but still serving.
    s.kubectl(&["-n", ns, "delete", "pod", "p1", "--wait=false"]);
    wait_for_endpoints(&s, ns, "web", &["10.1.0.2"], &[]);
    let slices = wait_for_slices(&s, ns, "web", &[("10.1.0.1", false), ("10.1.0.2", true)]);
    let p1 = slices[0]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["addresses"] == json!(["10.1.0.1"]))
        .unwrap();
    assert_eq!(
        p1["conditions"],
        json!({"ready": false, "serving": true, "terminating": true})
    );
    // Gone, it leaves both.
    s.kubectl(&[
        "-n",
        ns,
        "delete",
        "pod",
        "p1",
        "--force",
        "--grace-period=0",
    ]);
    wait_for_slices(&s, ns, "web", &[("10.1.0.2", true)]);

    // A deleted Endpoints object comes back.
    s.kubectl(&["-n", ns, "delete", "endpoints", "web"]);
    wait_for_endpoints(&s, ns, "web", &["10.1.0.2"], &[]);

    // The Service's Endpoints go with it (its slices are the garbage collector's).
    s.kubectl(&["-n", ns, "delete", "service", "web"]);
    eventually(
        "the endpoints deleted with their service",
        || match get_json(&s, &["-n", ns, "get", "endpoints", "web"]) {
            None => Ok(()),
            Some(ep) => Err(ep.to_string()),
        },
    );
}

#[test]
fn headless_service_publishing_not_ready_addresses() {
    let s = server();
    let ns = "db";
    namespace_with_default_account(&s, ns);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}}).to_string(),
    );
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "db", "namespace": ns},
            "spec": {"selector": {"app": "db"}, "clusterIP": "None",
                "publishNotReadyAddresses": true, "ports": [{"port": 5432}]}})
        .to_string(),
    );
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": ns, "labels": {"app": "db"}},
        "spec": {"nodeName": "node-b", "hostname": "db-0", "subdomain": "db",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    });
    s.kubectl_stdin(&["create", "-f", "-"], &pod.to_string());
    set_status(&s, ns, "db-0", "10.2.0.1", false);
    let ep = wait_for_endpoints(&s, ns, "db", &["10.2.0.1"], &[]);
    assert_eq!(
        ep["metadata"]["labels"]["service.kubernetes.io/headless"],
        ""
    );
    assert_eq!(ep["subsets"][0]["addresses"][0]["hostname"], "db-0");
    let slices = wait_for_slices(&s, ns, "db", &[("10.2.0.1", true)]);
    let endpoint = &slices[0]["endpoints"][0];
    assert_eq!(
        endpoint["conditions"],
        json!({"ready": true, "serving": false, "terminating": false})
    );
    assert_eq!(endpoint["hostname"], "db-0");
    assert!(endpoint.get("zone").is_none(), "node-b has no zone");
    assert_eq!(
        slices[0]["metadata"]["labels"]["service.kubernetes.io/headless"],
        ""
    );
}

#[test]
fn endpoints_of_a_selectorless_service_are_mirrored() {
    let s = server();
    let ns = "ext";
    namespace_with_default_account(&s, ns);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "db", "namespace": ns},
            "spec": {"ports": [{"name": "pg", "port": 5432}]}})
        .to_string(),
    );
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "db", "namespace": ns, "labels": {"team": "data"}},
            "subsets": [{"addresses": [{"ip": "192.168.10.1"}],
                "notReadyAddresses": [{"ip": "192.168.10.2"}],
                "ports": [{"name": "pg", "port": 5432}]}]})
        .to_string(),
    );
    let endpoints_uid =
        get_json(&s, &["-n", ns, "get", "endpoints", "db"]).unwrap()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
    let slices = wait_for_slices(
        &s,
        ns,
        "db",
        &[("192.168.10.1", true), ("192.168.10.2", false)],
    );
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"team": "data", "kubernetes.io/service-name": "db",
            "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io"})
    );
    assert_eq!(
        slice["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Endpoints", "name": "db", "uid": endpoints_uid,
            "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "pg", "port": 5432, "protocol": "TCP"}])
    );
    // The hand-written Endpoints are left as they are: no endpoints controller owns them.
    let ep = get_json(&s, &["-n", ns, "get", "endpoints", "db"]).unwrap();
    assert!(
        ep["metadata"]["labels"]
            .get("endpoints.kubernetes.io/managed-by")
            .is_none()
    );

    // A change to the Endpoints updates the same slice.
    s.kubectl(&[
        "-n",
        ns,
        "patch",
        "endpoints",
        "db",
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/subsets/0/addresses/-", "value": {"ip": "192.168.10.3"}}]"#,
    ]);
    let updated = wait_for_slices(
        &s,
        ns,
        "db",
        &[
            ("192.168.10.1", true),
            ("192.168.10.2", false),
            ("192.168.10.3", true),
        ],
    );
    assert_eq!(updated.len(), 1);
    assert_eq!(updated[0]["metadata"]["name"], slice["metadata"]["name"]);

    // Labelled to skip mirroring, the Endpoints lose their slice.
    s.kubectl(&[
        "-n",
        ns,
        "label",
        "endpoints",
        "db",
        "endpointslice.kubernetes.io/skip-mirror=true",
    ]);
    eventually("the mirrored slice deleted", || {
        match slices_of(&s, ns, "db").len() {
            0 => Ok(()),
            n => Err(format!("{n} slices")),
        }
    });

    // The server's own `kubernetes` Endpoints are neither mirrored nor taken over.
    let default = slices_of(&s, "default", "kubernetes");
    assert_eq!(default.len(), 1, "{default:?}");
    assert_eq!(default[0]["metadata"]["name"], "kubernetes");
    assert!(
        default[0]["metadata"]["labels"]
            .get("endpointslice.kubernetes.io/managed-by")
            .is_none()
    );
    let ep = get_json(&s, &["-n", "default", "get", "endpoints", "kubernetes"]).unwrap();
    assert!(
        ep["metadata"]["labels"]
            .get("endpoints.kubernetes.io/managed-by")
            .is_none()
    );
}

/// `--endpoint-reconciler-type=master-count`: the server adds its own address to the
/// `kubernetes` Endpoints and trims them to `--apiserver-count` as upstream's reconciler does
/// (sorted, dropping the addresses after its own, wrapping around), every ten seconds; the
/// EndpointSlice follows. A count that is not positive is refused with upstream's message.
#[test]
fn master_count_keeps_this_server_among_apiserver_count_addresses() {
    let s = Server::start_with(&[
        "--endpoint-reconciler-type",
        "master-count",
        "--apiserver-count",
        "2",
    ]);
    let addresses = |s: &Server| -> Result<Vec<String>, String> {
        let ep = get_json(s, &["get", "endpoints", "kubernetes", "-n", "default"])
            .ok_or("no Endpoints")?;
        let ips = ep["subsets"][0]["addresses"]
            .as_array()
            .ok_or(format!("{ep}"))?
            .iter()
            .filter_map(|a| a["ip"].as_str().map(str::to_string))
            .collect();
        Ok(ips)
    };
    eventually("this server listed", || {
        addresses(&s).and_then(|ips| {
            (ips == ["127.0.0.1"])
                .then_some(())
                .ok_or(format!("{ips:?}"))
        })
    });
    // Two other servers' addresses, as other replicas would have written them.
    let out = s.kubectl_output(&[
        "patch", "endpoints", "kubernetes", "-n", "default", "--type=json", "-p",
        r#"[{"op": "replace", "path": "/subsets/0/addresses", "value": [{"ip": "10.9.9.8"}, {"ip": "10.9.9.9"}]}]"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(25);
    loop {
        let ips = addresses(&s).unwrap_or_default();
        let slice = get_json(
            &s,
            &["get", "endpointslices", "kubernetes", "-n", "default"],
        )
        .unwrap_or_default();
        let slice_ips: Vec<&str> = slice["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["addresses"][0].as_str())
            .collect();
        if ips == ["10.9.9.9", "127.0.0.1"] && slice_ips == ["10.9.9.9", "127.0.0.1"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reconciler did not re-add this server: {ips:?} {slice_ips:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .args(["--apiserver-count", "0"])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--apiserver-count should be a positive number, but value '0' provided"),
        "{stderr}"
    );
}
