//! The etcd backend end to end: the real binary with `--etcd-servers` on a real etcd started
//! here (Debian's `etcd-server`; missing etcd fails the test), driven by kubectl. Objects are
//! written, read, listed, watched, updated and deleted; a second server on the same etcd with a
//! fresh data directory finds them; the raw keys in etcd are upstream's layout; the `etcd`
//! checks follow etcd going away and coming back.

use crate::common;

use std::time::Duration;

use common::{Server, wait_until};
use storage::testing::EtcdServer;

fn start(etcd: &EtcdServer) -> Server {
    let s = Server::start_with(&["--etcd-servers", &etcd.url]);
    s.wait_ready();
    s
}

fn resource_version(s: &Server, ns: &str, what: &str) -> String {
    s.kubectl(&[
        "-n",
        ns,
        "get",
        what,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ])
}

#[test]
fn objects_live_in_etcd_under_upstreams_keys() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let s = start(&etcd);

    s.kubectl(&["create", "namespace", "team"]);
    s.kubectl(&[
        "-n",
        "team",
        "create",
        "configmap",
        "settings",
        "--from-literal=a=1",
    ]);
    s.kubectl(&[
        "-n",
        "team",
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
    ]);
    s.kubectl(&["-n", "team", "create", "deployment", "app", "--image=nginx"]);
    let created = resource_version(&s, "team", "configmap/settings");

    // A live watch sees the writes that follow it.
    let watch = {
        let cmd = s.kubectl_cmd(&[
            "get",
            "--raw",
            "/api/v1/namespaces/team/configmaps?watch=1&timeoutSeconds=4",
        ]);
        std::thread::spawn(move || {
            let mut cmd = cmd;
            cmd.output().expect("kubectl runs")
        })
    };
    std::thread::sleep(Duration::from_millis(1000));
    s.kubectl(&[
        "-n",
        "team",
        "label",
        "configmap",
        "settings",
        "tier=backend",
    ]);
    s.kubectl(&[
        "-n",
        "team",
        "create",
        "configmap",
        "extra",
        "--from-literal=b=2",
    ]);
    s.kubectl(&["-n", "team", "delete", "configmap", "extra"]);
    let live = watch.join().expect("watch thread");
    let live = String::from_utf8_lossy(&live.stdout).into_owned();
    let events: Vec<(String, String)> = live
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .filter(|(_, name)| name != common::ROOT_CA)
        .collect();
    let added = events
        .iter()
        .position(|e| *e == ("ADDED".to_string(), "extra".to_string()));
    assert!(
        events.contains(&("MODIFIED".into(), "settings".into()))
            && added.is_some()
            && events[added.unwrap_or_default()..].contains(&("DELETED".into(), "extra".into())),
        "{live}"
    );

    // A watch from a resourceVersion replays what happened after it.
    let replay = s.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/team/configmaps?watch=1&resourceVersion={created}&timeoutSeconds=1"
        ),
    ]);
    let replayed: Vec<String> = replay
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or_default(),
                e["object"]["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .filter(|e| !e.ends_with(common::ROOT_CA))
        .collect();
    assert_eq!(
        replayed,
        ["MODIFIED settings", "ADDED extra", "DELETED extra"],
        "{replay}"
    );

    // Update, get and list.
    s.kubectl(&[
        "-n",
        "team",
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"a":"2"}}"#,
    ]);
    assert_eq!(
        s.kubectl(&[
            "-n",
            "team",
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "2"
    );
    let names = s.kubectl(&["-n", "team", "get", "configmaps,services", "-o", "name"]);
    assert!(
        names.contains("configmap/settings\n") && names.contains("service/web\n"),
        "{names}"
    );

    // Upstream's keys, under the default --etcd-prefix.
    let keys = etcd.raw_keys("/registry/").expect("etcd\'s keys");
    for key in [
        "/registry/namespaces/team",
        "/registry/configmaps/team/settings",
        "/registry/services/specs/team/web",
        "/registry/services/specs/default/kubernetes",
        "/registry/deployments/team/app",
        "/registry/clusterroles/cluster-admin",
        "/registry/priorityclasses/system-node-critical",
    ] {
        assert!(keys.contains(key), "{key} missing from {keys:#?}");
    }
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("/registry/services/team/")),
        "no key outside upstream's layout: {keys:#?}"
    );
    assert!(!keys.contains("/registry/configmaps/team/extra"));
    // On etcd built-in objects are stored as kube-apiserver stores them: protobuf in the `k8s\0`
    // envelope (--storage-media-type's default there).
    let values = etcd
        .raw_values("/registry/configmaps/team/")
        .expect("etcd\'s values");
    let stored = &values["/registry/configmaps/team/settings"];
    assert!(
        stored.starts_with(b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap"),
        "{:?}",
        String::from_utf8_lossy(stored)
    );

    // CustomResourceDefinitions as kube-apiserver stores them: v1beta1 JSON, the schema every
    // version shares at the top; served as v1.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}"#,
    );
    let values = etcd
        .raw_values("/registry/apiextensions.k8s.io/customresourcedefinitions/")
        .expect("etcd's values");
    let stored: serde_json::Value = serde_json::from_slice(
        &values["/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"],
    )
    .expect("stored as JSON");
    assert_eq!(stored["apiVersion"], "apiextensions.k8s.io/v1beta1");
    assert_eq!(stored["spec"]["version"], "v1");
    assert_eq!(
        stored["spec"]["validation"],
        serde_json::json!({"openAPIV3Schema": {"type": "object"}})
    );
    assert!(stored["spec"]["versions"][0].get("schema").is_none());
    let served = s
        .get_json("", "customresourcedefinition/widgets.example.com")
        .expect("the CRD");
    assert_eq!(served["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(
        served["spec"]["versions"][0]["schema"],
        serde_json::json!({"openAPIV3Schema": {"type": "object"}})
    );
    assert!(served["spec"].get("validation").is_none());

    // Another server with a fresh data directory on the same etcd finds everything.
    drop(s.kill9());
    let again = start(&etcd);
    assert_eq!(
        again.kubectl(&[
            "-n",
            "team",
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "2"
    );
    assert_eq!(
        again.kubectl(&[
            "-n",
            "team",
            "get",
            "deployment",
            "app",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ]),
        "nginx"
    );
    again.kubectl(&["-n", "team", "delete", "configmap", "settings"]);
    assert!(again.get_json("team", "configmap/settings").is_none());
    assert!(
        !etcd
            .raw_keys("/registry/configmaps/")
            .expect("etcd\'s keys")
            .contains("/registry/configmaps/team/settings")
    );
}

#[test]
fn etcd_checks_follow_etcd() {
    let mut etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let s = start(&etcd);
    assert_eq!(s.kubectl(&["get", "--raw", "/livez/etcd"]), "ok");
    assert_eq!(s.kubectl(&["get", "--raw", "/readyz/etcd-readiness"]), "ok");
    let ready = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        ready.contains("[+]etcd ok\n[+]etcd-readiness ok\n"),
        "{ready}"
    );
    let live = s.kubectl(&["get", "--raw", "/livez?verbose"]);
    assert!(
        live.contains("[+]etcd ok\n") && !live.contains("etcd-readiness"),
        "{live}"
    );

    etcd.kill();
    wait_until("/readyz to fail without etcd", 30, || {
        !s.kubectl_output(&["get", "--raw", "/readyz/etcd-readiness"])
            .status
            .success()
    });
    let verbose = s.kubectl_output(&["get", "--raw", "/readyz?verbose"]);
    let body = String::from_utf8_lossy(&verbose.stdout).into_owned()
        + &String::from_utf8_lossy(&verbose.stderr);
    assert!(!verbose.status.success(), "{body}");

    etcd.restart().expect("etcd starts again");
    wait_until("/readyz to pass with etcd back", 60, || {
        s.kubectl_output(&["get", "--raw", "/readyz"])
            .status
            .success()
    });
    // The server serves again without a restart.
    s.kubectl(&["create", "configmap", "after-outage", "--from-literal=x=1"]);
    assert!(s.get_json("default", "configmap/after-outage").is_some());
}
