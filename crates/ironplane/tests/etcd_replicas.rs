//! Several Ironplane replicas on one etcd, end to end: two real binaries on a real etcd started
//! here (Debian's `etcd-server`; missing etcd fails the test), sharing their certificates and
//! keys as the API servers of one control plane do, each advertising its own loopback address.
//! A write on one is seen by a watch on the other; Services created concurrently on both get
//! unique cluster IPs and node ports; the `kubernetes` Endpoints and EndpointSlice list both
//! replicas and drop one that is killed once its lease expires.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Server;
use storage::testing::EtcdServer;

/// The node port range both replicas serve: small, so that two allocators that did not share
/// their node ports would hand out one port twice among 200 Services.
const NODE_PORTS: &str = "30000-30399";

/// Starts a replica on `etcd` with the certificates and keys in `pki`, advertising `advertise`.
fn replica(etcd: &EtcdServer, pki: &std::path::Path, advertise: &str) -> Server {
    let pki = pki.to_string_lossy().into_owned();
    Server::start_with(&[
        "--etcd-servers",
        &etcd.url,
        "--cert-dir",
        &pki,
        "--advertise-address",
        advertise,
        "--service-node-port-range",
        NODE_PORTS,
    ])
}

/// Polls `done` every half second (each poll runs kubectl) until it holds; panics naming `what`
/// after `secs` seconds.
fn poll(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn replicas_see_each_others_writes_and_allocate_uniquely() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let pki = tempfile::tempdir().expect("tempdir");
    let a = replica(&etcd, pki.path(), "127.0.0.1");
    let b = replica(&etcd, pki.path(), "127.0.0.2");

    // A watch on B sees a write on A.
    let watch = {
        let cmd = b.kubectl_cmd(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=4",
        ]);
        std::thread::spawn(move || {
            let mut cmd = cmd;
            cmd.output().expect("kubectl runs")
        })
    };
    std::thread::sleep(Duration::from_millis(1000));
    a.kubectl(&["create", "configmap", "from-a", "--from-literal=x=1"]);
    let live = watch.join().expect("watch thread");
    let live = String::from_utf8_lossy(&live.stdout).into_owned();
    let added: Vec<String> = live
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| e["type"] == "ADDED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert!(added.contains(&"from-a".to_string()), "{live}");
    // And a read on A finds a write on B.
    b.kubectl(&["create", "configmap", "from-b", "--from-literal=y=2"]);
    assert!(a.get_json("default", "configmap/from-b").is_some());

    // 200 NodePort Services created concurrently, 10 at a time by 20 clients spread across
    // both replicas.
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..20)
        .map(|client| {
            let server = if client % 2 == 0 { &a } else { &b };
            let items: Vec<serde_json::Value> = (0..10)
                .map(|i| {
                    serde_json::json!({
                        "apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": format!("svc-{client}-{i}")},
                        "spec": {"type": "NodePort", "selector": {"app": "x"},
                                 "ports": [{"port": 80, "targetPort": 8080}]},
                    })
                })
                .collect();
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            let mut cmd = server.kubectl_cmd(&["create", "-f", "-"]);
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().expect("kubectl runs");
            let mut stdin = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                use std::io::Write;
                stdin
                    .write_all(list.to_string().as_bytes())
                    .expect("write stdin");
            });
            child
        })
        .collect();
    for child in clients {
        let out = child.wait_with_output().expect("kubectl finishes");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!(
        "200 NodePort Services created through two replicas in {:?}",
        started.elapsed()
    );

    for (name, server) in [("a", &a), ("b", &b)] {
        let list = server.kubectl(&["get", "services", "-o", "json"]);
        let list: serde_json::Value = serde_json::from_str(&list).expect("JSON");
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 201, "200 Services and `kubernetes` on {name}");
        let ips: BTreeSet<&str> = items
            .iter()
            .filter_map(|s| s["spec"]["clusterIP"].as_str())
            .collect();
        assert_eq!(ips.len(), 201, "every cluster IP is unique: {ips:?}");
        let ports: Vec<i64> = items
            .iter()
            .filter_map(|s| s["spec"]["ports"][0]["nodePort"].as_i64())
            .collect();
        let unique: BTreeSet<i64> = ports.iter().copied().collect();
        assert_eq!(ports.len(), 200);
        assert_eq!(unique.len(), 200, "every node port is unique: {ports:?}");
    }
    // Every cluster IP is an IPAddress object, whichever replica allocated it.
    let addresses = a.kubectl(&["get", "ipaddresses", "-o", "name"]);
    assert_eq!(addresses.lines().count(), 201, "{addresses}");

    // A Service deleted through one replica (created through the other) releases its address.
    let ip = a.kubectl(&[
        "get",
        "service",
        "svc-1-0",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    a.kubectl(&["delete", "service", "svc-1-0"]);
    poll("the IPAddress to go", 10, || {
        b.get_json("", &format!("ipaddress/{ip}")).is_none()
    });
}

#[test]
fn the_kubernetes_endpoints_list_live_replicas() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let pki = tempfile::tempdir().expect("tempdir");
    let a = replica(&etcd, pki.path(), "127.0.0.1");
    let b = replica(&etcd, pki.path(), "127.0.0.2");

    let both = (
        "127.0.0.1 127.0.0.2".to_string(),
        "127.0.0.1 127.0.0.2".to_string(),
    );
    poll("both replicas in the kubernetes endpoints", 30, || {
        a.kubernetes_endpoints() == both
    });
    assert_eq!(b.kubernetes_endpoints(), both);
    // Each replica's lease, at upstream's key.
    let leases = etcd
        .raw_keys("/registry/masterleases/")
        .expect("etcd\'s keys");
    assert_eq!(
        leases,
        BTreeSet::from([
            "/registry/masterleases/127.0.0.1".to_string(),
            "/registry/masterleases/127.0.0.2".to_string()
        ])
    );

    // Killed without a word: its lease expires (15 s) and the next reconcile (every 10 s)
    // drops it.
    drop(b.kill9());
    let one = ("127.0.0.1".to_string(), "127.0.0.1".to_string());
    poll("the killed replica to drop out", 45, || {
        a.kubernetes_endpoints() == one
    });
    assert_eq!(
        etcd.raw_keys("/registry/masterleases/")
            .expect("etcd\'s keys"),
        BTreeSet::from(["/registry/masterleases/127.0.0.1".to_string()])
    );
}
