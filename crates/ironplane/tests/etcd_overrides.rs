//! `--etcd-servers-overrides`, end to end: Events kept in a second etcd cluster, as
//! kube-apiserver keeps them with `/events#<servers>`, both clusters real etcds started here
//! (Debian's `etcd-server`; missing etcd fails the test). Events are written to and read from
//! the second cluster only, everything else from the first; each cluster has its checks, and
//! `componentstatuses` probes each (`etcd-0`, `etcd-1`).

use crate::common;

use common::Server;
use storage::testing::EtcdServer;

#[test]
fn events_live_in_their_own_etcd() {
    let main = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let events = EtcdServer::start().expect("a second etcd");
    let s = Server::start_with(&[
        "--etcd-servers",
        &main.url,
        "--etcd-servers-overrides",
        &format!("/events#{}", events.url),
    ]);
    let event = serde_json::json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "hello", "namespace": "default"},
        "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
        "reason": "Testing", "message": "kept apart", "type": "Normal",
    });
    s.kubectl_stdin(&["create", "-f", "-"], &event.to_string());
    s.kubectl(&["create", "configmap", "c"]);

    let key = "/registry/events/default/hello".to_string();
    assert!(
        events
            .raw_keys("/registry/events/")
            .expect("etcd's keys")
            .contains(&key)
    );
    assert!(
        !main
            .raw_keys("/registry/events/")
            .expect("etcd's keys")
            .contains(&key)
    );
    assert!(
        main.raw_keys("/registry/configmaps/default/")
            .expect("etcd's keys")
            .contains("/registry/configmaps/default/c")
    );
    assert!(
        events
            .raw_keys("/registry/configmaps/")
            .expect("etcd's keys")
            .is_empty()
    );
    // Read back through both versions the Events are served in.
    let got = s.get_json("default", "event/hello").expect("the Event");
    assert_eq!(got["message"], "kept apart");
    let v1 = s.kubectl(&[
        "get",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events/hello",
    ]);
    assert!(v1.contains("kept apart"), "{v1}");

    // Upstream's checks for the second cluster.
    let livez = s.kubectl(&["get", "--raw", "/livez?verbose"]);
    assert!(livez.contains("[+]etcd-override-0 ok"), "{livez}");
    let readyz = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        readyz.contains("[+]etcd-override-readiness-0 ok"),
        "{readyz}"
    );

    // componentstatuses probes each cluster, named as upstream names them.
    let statuses = s.kubectl(&[
        "get",
        "componentstatuses",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.conditions[0].status}:{.conditions[0].message} {end}",
    ]);
    assert_eq!(statuses.trim(), "etcd-0=True:ok etcd-1=True:ok");
    drop(events);
    let down = s.get_json("", "componentstatus/etcd-1").expect("etcd-1");
    assert_eq!(down["conditions"][0]["status"], "False", "{down}");
    assert!(
        down["conditions"][0]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{down}"
    );
    let up = s.get_json("", "componentstatus/etcd-0").expect("etcd-0");
    assert_eq!(up["conditions"][0]["status"], "True", "{up}");
}

#[test]
fn malformed_overrides_are_refused_as_upstream_refuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .args([
            "--etcd-servers",
            "http://127.0.0.1:1",
            "--etcd-servers-overrides",
            "events#http://127.0.0.1:2",
        ])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated"),
        "{stderr}"
    );
}
