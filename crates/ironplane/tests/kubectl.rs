//! kubectl against the real binary: the everyday commands a user runs, with their output checked.

use crate::common;

use std::time::Duration;

use common::{Server, wait_until};

const JOB_YAML: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: pi
  namespace: e2e
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pi
        image: perl:5.34
        command: ["perl", "-e", "print 1"]
"#;

const CM_YAML: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  namespace: e2e
data:
  a: "1"
"#;

#[test]
fn discovery_and_version() {
    let s = Server::start();
    let v = s.kubectl(&["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["serverVersion"]["minor"], "36");
    let res = s.kubectl(&["api-resources"]);
    for needle in [
        "deployments",
        "deploy",
        "apps/v1",
        "configmaps",
        "cm",
        "customresourcedefinitions",
        "apiservices",
    ] {
        assert!(res.contains(needle), "api-resources lacks {needle}:\n{res}");
    }
    let versions = s.kubectl(&["api-versions"]);
    for gv in [
        "v1",
        "apps/v1",
        "autoscaling/v2",
        "autoscaling/v1",
        "rbac.authorization.k8s.io/v1",
        "resource.k8s.io/v1",
    ] {
        assert!(
            versions.lines().any(|l| l == gv),
            "api-versions lacks {gv}:\n{versions}"
        );
    }
    let ns = s.kubectl(&["get", "ns"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(ns.contains(n), "get ns lacks {n}:\n{ns}");
    }
    assert!(ns.contains("Active"));
    let svc = s.kubectl(&[
        "get",
        "svc",
        "kubernetes",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    assert_eq!(svc, "10.0.0.1");
}

/// `/readyz?verbose` lists its checks in kube-apiserver v1.36's order (the order of registration
/// along aggregator → kube-apiserver → apiextensions). Upstream's list, read from its source,
/// with what this server does not have taken out, each for a reason, and its one addition put in.
#[test]
fn readyz_lists_upstreams_checks_in_upstreams_order() {
    let s = Server::start();
    let upstream = [
        "ping",
        "log",
        "etcd",
        "etcd-readiness",
        "informer-sync",
        "poststarthook/start-apiserver-admission-initializer",
        "poststarthook/generic-apiserver-start-informers",
        "poststarthook/priority-and-fairness-config-consumer",
        "poststarthook/priority-and-fairness-filter",
        "poststarthook/storage-object-count-tracker-hook",
        "poststarthook/start-apiextensions-informers",
        "poststarthook/start-apiextensions-controllers",
        "poststarthook/crd-informer-synced",
        "poststarthook/start-system-namespaces-controller",
        "poststarthook/peer-endpoint-reconciler-controller",
        "poststarthook/start-cluster-authentication-info-controller",
        "poststarthook/start-kube-apiserver-identity-lease-controller",
        "poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
        "poststarthook/storage-readiness",
        "poststarthook/start-legacy-token-tracking-controller",
        "poststarthook/start-service-ip-repair-controllers",
        "poststarthook/rbac/bootstrap-roles",
        "poststarthook/scheduling/bootstrap-system-priority-classes",
        "poststarthook/priority-and-fairness-config-producer",
        "poststarthook/bootstrap-controller",
        "poststarthook/start-kubernetes-service-cidr-controller",
        "poststarthook/aggregator-reload-proxy-client-cert",
        "poststarthook/start-kube-aggregator-informers",
        "poststarthook/apiservice-status-local-available-controller",
        "poststarthook/apiservice-status-remote-available-controller",
        "poststarthook/apiservice-registration-controller",
        "poststarthook/apiservice-wait-for-first-sync",
        "poststarthook/apiservice-discovery-controller",
        "poststarthook/kube-apiserver-autoregistration",
        "autoregister-completion",
        "poststarthook/apiservice-openapi-controller",
        "poststarthook/apiservice-openapiv3-controller",
        "shutdown",
    ];
    // Not here: no mixed-version peer proxy; and the proxy client certificate's reloader is
    // registered only with `--proxy-client-cert-file`, as upstream's is (aggregator.rs has it).
    let absent = [
        "poststarthook/peer-endpoint-reconciler-controller",
        "poststarthook/aggregator-reload-proxy-client-cert",
    ];
    let mut want: Vec<String> = upstream
        .iter()
        .filter(|c| !absent.contains(c))
        .map(|c| format!("[+]{c} ok"))
        .collect();
    // The controllers kube-controller-manager would run, in process here.
    let after = want
        .iter()
        .position(|l| l == "[+]poststarthook/start-kubernetes-service-cidr-controller ok")
        .unwrap();
    want.insert(
        after + 1,
        "[+]poststarthook/start-namespace-controller ok".into(),
    );
    want.push("readyz check passed".into());
    let ready = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert_eq!(ready.lines().collect::<Vec<_>>(), want, "{ready}");
}

/// Without RBAC among the authorization modes there is no bootstrap policy to reconcile, and
/// upstream disables the `rbac/bootstrap-roles` hook: it is not listed, and the server is ready.
#[test]
fn the_rbac_bootstrap_hook_is_registered_only_when_rbac_authorizes() {
    let s = Server::start_with(&["--authorization-mode=AlwaysAllow"]);
    let ready = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(ready.trim_end().ends_with("readyz check passed"), "{ready}");
    assert!(!ready.contains("rbac/bootstrap-roles"), "{ready}");
    assert!(
        ready.contains("[+]poststarthook/scheduling/bootstrap-system-priority-classes ok"),
        "{ready}"
    );
    // Nor is the policy written.
    s.kubectl_fails(&["get", "clusterrole", "cluster-admin"]);
}

#[test]
fn post_start_hooks_create_what_upstream_bootstraps() {
    let s = Server::start();
    let ready = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    for hook in [
        "start-kubernetes-service-cidr-controller",
        "scheduling/bootstrap-system-priority-classes",
        "start-kube-apiserver-identity-lease-controller",
        "start-cluster-authentication-info-controller",
        "start-legacy-token-tracking-controller",
    ] {
        assert!(
            ready.contains(&format!("[+]poststarthook/{hook} ok")),
            "{ready}"
        );
    }
    let classes = s.kubectl(&[
        "get",
        "priorityclasses",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.value} {end}",
    ]);
    assert_eq!(
        classes.trim(),
        "system-cluster-critical=2000000000 system-node-critical=2000001000"
    );
    let leases = s.kubectl(&[
        "get",
        "leases",
        "-n",
        "kube-system",
        "-l",
        "apiserver.kubernetes.io/identity=kube-apiserver",
        "-o",
        "jsonpath={.items[*].metadata.name} {.items[*].spec.leaseDurationSeconds}",
    ]);
    assert!(
        leases.starts_with("apiserver-") && leases.ends_with(" 3600"),
        "{leases}"
    );
    let ca = s.kubectl(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "extension-apiserver-authentication",
        "-o",
        "jsonpath={.data.client-ca-file}",
    ]);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let since = s.kubectl(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "kube-apiserver-legacy-service-account-token-tracking",
        "-o",
        "jsonpath={.data.since}",
    ]);
    assert_eq!(since.len(), "2006-01-02".len(), "{since}");
}

/// At start, the system namespaces controller makes again a system namespace that was deleted,
/// and the identity lease collector deletes the kube-apiserver identity leases that expired,
/// leaving held ones and other leases alone (upstream's `start-system-namespaces-controller` and
/// `start-kube-apiserver-identity-lease-garbage-collector`, which also run every minute and
/// every hour).
#[test]
fn a_restart_restores_system_namespaces_and_collects_expired_identity_leases() {
    let s = Server::start();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let lease = |name: &str, identity: bool, renewed: &str| {
        let labels = if identity {
            "labels: {apiserver.kubernetes.io/identity: kube-apiserver}"
        } else {
            "labels: {}"
        };
        format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\n\
             metadata: {{name: {name}, namespace: kube-system, {labels}}}\n\
             spec: {{holderIdentity: {name}_1, leaseDurationSeconds: 3600, renewTime: \"{renewed}\"}}\n---\n"
        )
    };
    let leases = [
        lease("apiserver-gone", true, "2020-01-01T00:00:00.000000Z"),
        lease("apiserver-held", true, &now),
        lease("not-an-apiserver", false, "2020-01-01T00:00:00.000000Z"),
    ]
    .concat();
    s.kubectl_stdin(&["apply", "-f", "-"], &leases);
    s.kubectl(&["delete", "namespace", "kube-node-lease", "--wait=true"]);
    s.kubectl_fails(&["get", "namespace", "kube-node-lease"]);

    let s = Server::start_in(s.stop());
    wait_until("the expired identity lease collected", 30, || {
        s.kubectl_output(&["get", "lease", "-n", "kube-system", "apiserver-gone"])
            .status
            .code()
            == Some(1)
    });
    let names = s.kubectl(&[
        "get",
        "leases",
        "-n",
        "kube-system",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let names: Vec<&str> = names.split_whitespace().collect();
    assert!(names.contains(&"apiserver-held"), "{names:?}");
    assert!(names.contains(&"not-an-apiserver"), "{names:?}");
    // This server's own lease, renewed.
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("apiserver-") && n.len() == 36),
        "{names:?}"
    );
    let phase = s.kubectl(&[
        "get",
        "namespace",
        "kube-node-lease",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(phase, "Active");
}

#[test]
fn create_get_modify_delete() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "e2e"]);
    // Generator commands send protobuf bodies.
    s.kubectl(&[
        "-n",
        "e2e",
        "create",
        "configmap",
        "cm1",
        "--from-literal=k=v",
    ]);
    s.kubectl(&[
        "-n",
        "e2e",
        "create",
        "secret",
        "generic",
        "sec1",
        "--from-literal=password=hunter2",
    ]);
    s.kubectl(&[
        "-n",
        "e2e",
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    s.kubectl(&[
        "-n",
        "e2e",
        "create",
        "service",
        "clusterip",
        "web",
        "--tcp=80:8080",
    ]);
    s.kubectl_stdin(&["create", "-f", "-"], JOB_YAML);

    assert_eq!(
        s.kubectl(&["-n", "e2e", "get", "cm", "cm1", "-o", "jsonpath={.data.k}"]),
        "v"
    );
    assert_eq!(
        s.kubectl(&[
            "-n",
            "e2e",
            "get",
            "secret",
            "sec1",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "aHVudGVyMg=="
    );
    let yaml = s.kubectl(&["-n", "e2e", "get", "deploy", "web", "-o", "yaml"]);
    assert!(
        yaml.contains("replicas: 2") && yaml.contains("generation: 1"),
        "{yaml}"
    );
    let json = s.kubectl(&["-n", "e2e", "get", "svc", "web", "-o", "json"]);
    let svc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .starts_with("10.0.0.")
    );
    let wide = s.kubectl(&["-n", "e2e", "get", "deploy", "-o", "wide"]);
    assert!(
        wide.contains("READY")
            && wide.contains("CONTAINERS")
            && wide.contains("nginx")
            && wide.contains("app=web"),
        "{wide}"
    );
    let table = s.kubectl(&["-n", "e2e", "get", "cm"]);
    assert!(table.contains("DATA") && table.contains("cm1"), "{table}");
    let describe = s.kubectl(&["-n", "e2e", "describe", "cm", "cm1"]);
    assert!(
        describe.contains("Name:") && describe.contains("cm1"),
        "{describe}"
    );

    // apply twice: the second is unchanged; a changed manifest is configured.
    assert!(
        s.kubectl_stdin(&["apply", "-f", "-"], CM_YAML)
            .contains("created")
    );
    assert!(
        s.kubectl_stdin(&["apply", "-f", "-"], CM_YAML)
            .contains("unchanged")
    );
    let changed = CM_YAML.replace("a: \"1\"", "a: \"2\"");
    assert!(
        s.kubectl_stdin(&["apply", "-f", "-"], &changed)
            .contains("configured")
    );
    assert_eq!(
        s.kubectl(&[
            "-n",
            "e2e",
            "get",
            "cm",
            "applied",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "2"
    );

    s.kubectl(&["-n", "e2e", "label", "cm", "cm1", "tier=gold"]);
    s.kubectl(&["-n", "e2e", "annotate", "cm", "cm1", "note=hi"]);
    assert_eq!(
        s.kubectl(&["-n", "e2e", "get", "cm", "-l", "tier=gold", "-o", "name"])
            .trim(),
        "configmap/cm1"
    );
    assert_eq!(
        s.kubectl(&[
            "-n",
            "e2e",
            "get",
            "cm",
            "-l",
            "tier!=gold,tier",
            "-o",
            "name"
        ])
        .trim(),
        ""
    );
    assert_eq!(
        s.kubectl(&[
            "-n",
            "e2e",
            "get",
            "cm",
            "--field-selector",
            "metadata.name=cm1",
            "-o",
            "name"
        ])
        .trim(),
        "configmap/cm1"
    );

    // The three patch types.
    s.kubectl(&[
        "-n",
        "e2e",
        "patch",
        "cm",
        "cm1",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ]);
    s.kubectl(&[
        "-n",
        "e2e",
        "patch",
        "cm",
        "cm1",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ]);
    s.kubectl(&[
        "-n",
        "e2e",
        "patch",
        "deploy",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}"#,
    ]);
    let cm = s.kubectl(&["-n", "e2e", "get", "cm", "cm1", "-o", "json"]);
    let cm: serde_json::Value = serde_json::from_str(&cm).unwrap();
    assert_eq!(
        (
            cm["data"]["k"].as_str(),
            cm["data"]["m"].as_str(),
            cm["data"]["j"].as_str()
        ),
        (Some("v"), Some("1"), Some("2"))
    );
    let image = s.kubectl(&[
        "-n",
        "e2e",
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image} {.metadata.generation}",
    ]);
    assert_eq!(
        image, "nginx:1.27 2",
        "strategic merge kept the container and bumped generation"
    );

    s.kubectl(&["-n", "e2e", "scale", "deploy", "web", "--replicas=5"]);
    assert_eq!(
        s.kubectl(&[
            "-n",
            "e2e",
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "5"
    );

    // replace with a stale resourceVersion is a Conflict.
    let stale = s.kubectl(&["-n", "e2e", "get", "cm", "cm1", "-o", "json"]);
    s.kubectl(&["-n", "e2e", "label", "cm", "cm1", "bump=1"]);
    let err = {
        use std::io::Write;
        let mut child = s
            .kubectl_cmd(&["replace", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stale.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(err.contains("the object has been modified"), "{err}");

    // Server-side dry run writes nothing.
    s.kubectl(&[
        "-n",
        "e2e",
        "create",
        "configmap",
        "dry",
        "--from-literal=a=b",
        "--dry-run=server",
    ]);
    assert!(
        s.kubectl_fails(&["-n", "e2e", "get", "cm", "dry"])
            .contains("NotFound")
    );

    // Chunked listing sees every object.
    for i in 0..7 {
        s.kubectl(&["-n", "e2e", "create", "configmap", &format!("chunk-{i}")]);
    }
    let names = s.kubectl(&["-n", "e2e", "get", "cm", "--chunk-size=2", "-o", "name"]);
    assert_eq!(
        names.lines().filter(|l| l.contains("chunk-")).count(),
        7,
        "{names}"
    );

    s.kubectl(&["-n", "e2e", "delete", "cm", "cm1"]);
    assert!(
        s.kubectl_fails(&["-n", "e2e", "get", "cm", "cm1"])
            .contains("NotFound")
    );

    // Deleting the namespace empties it and removes it.
    s.kubectl(&["delete", "ns", "e2e", "--wait=true", "--timeout=60s"]);
    assert!(s.kubectl_fails(&["get", "ns", "e2e"]).contains("NotFound"));
}

#[test]
fn watch_sees_later_changes_and_wait_for_delete() {
    let s = Server::start();
    s.kubectl(&["create", "configmap", "w1"]);
    let mut watch = s
        .kubectl_cmd(&["get", "cm", "-w", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s.kubectl(&["create", "configmap", "w2"]);
    let mut waiter = s
        .kubectl_cmd(&["wait", "--for=delete", "configmap/w1", "--timeout=30s"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s.kubectl(&["delete", "configmap", "w1"]);
    assert!(
        waiter.wait().unwrap().success(),
        "kubectl wait --for=delete succeeds"
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configmap/w1") && text.contains("configmap/w2"),
        "watch output: {text}"
    );
}

#[test]
fn errors_reach_kubectl_as_upstream_says_them() {
    let s = Server::start();
    let e = s.kubectl_fails(&["get", "cm", "nope"]);
    assert!(e.contains(r#"configmaps "nope" not found"#), "{e}");
    let e = s.kubectl_fails(&["-n", "missing", "create", "configmap", "x"]);
    assert!(e.contains(r#"namespaces "missing" not found"#), "{e}");
    let e = s.kubectl_fails(&["create", "configmap", "Bad_Name"]);
    assert!(e.contains("is invalid") && e.contains("RFC 1123"), "{e}");
    let e = s.kubectl_fails(&["delete", "ns", "default"]);
    assert!(e.contains("forbidden"), "{e}");
}

#[test]
fn edit_with_a_scripted_editor() {
    let s = Server::start();
    s.kubectl(&["create", "configmap", "ed", "--from-literal=a=1"]);
    let editor = s.dir.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/a: \"1\"/a: \"edited\"/' \"$1\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    let out = s
        .kubectl_cmd(&["edit", "configmap", "ed"])
        .env("KUBE_EDITOR", &editor)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        s.kubectl(&["get", "cm", "ed", "-o", "jsonpath={.data.a}"]),
        "edited"
    );
}

#[test]
fn diff_shows_a_change() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "e2e"]);
    s.kubectl_stdin(&["apply", "-f", "-"], CM_YAML);
    let changed = CM_YAML.replace("a: \"1\"", "a: \"3\"");
    let manifest = s.dir.path().join("cm.yaml");
    std::fs::write(&manifest, changed).unwrap();
    let out = s.kubectl_output(&["diff", "-f", manifest.to_str().unwrap()]);
    // kubectl diff exits 1 when there is a difference.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("+  a: \"3\""));
}

#[test]
fn sigterm_stops_cleanly() {
    let s = Server::start();
    s.kubectl(&["create", "configmap", "before-stop"]);
    // An open watch is ended by the server, not cut: kubectl sees the stream end and exits 0.
    let mut watch = s
        .kubectl_cmd(&["get", "configmaps", "-w"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let status = s.terminate();
    assert!(status.success(), "exit status {status:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let watch_status = loop {
        if let Some(st) = watch.try_wait().unwrap() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the watch did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        watch_status.success(),
        "kubectl's watch ended with {watch_status:?}"
    );
}

#[test]
fn orphan_and_foreground_deletes_wait_for_the_garbage_collector() {
    // As with kube-apiserver alone (no kube-controller-manager), the propagation finalizer
    // keeps the object, marked for deletion, until someone removes the finalizer: the
    // in-process collector (which would remove it at once) is turned off.
    let s = Server::start_with(&["--controllers=*,-garbage-collector-controller"]);
    s.kubectl(&["create", "configmap", "orphaned"]);
    s.kubectl(&["create", "configmap", "foreground"]);
    s.kubectl(&[
        "delete",
        "configmap",
        "orphaned",
        "--cascade=orphan",
        "--wait=false",
    ]);
    s.kubectl(&[
        "delete",
        "configmap",
        "foreground",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let get = |name: &str| {
        s.kubectl(&[
            "get",
            "configmap",
            name,
            "-o",
            "jsonpath={.metadata.finalizers} {.metadata.deletionTimestamp}",
        ])
    };
    let orphaned = get("orphaned");
    assert!(
        orphaned.starts_with(r#"["orphan"] "#) && orphaned.len() > 12,
        "{orphaned}"
    );
    let foreground = get("foreground");
    assert!(
        foreground.starts_with(r#"["foregroundDeletion"] "#),
        "{foreground}"
    );
    // Removing the finalizer (the collector's job) lets the delete finish.
    s.kubectl(&[
        "patch",
        "configmap",
        "orphaned",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    assert!(
        s.kubectl_fails(&["get", "configmap", "orphaned"])
            .contains("NotFound")
    );
    // A background delete of an object that waits only for the collector removes it at once.
    s.kubectl(&["delete", "configmap", "foreground", "--cascade=background"]);
    assert!(
        s.kubectl_fails(&["get", "configmap", "foreground"])
            .contains("NotFound")
    );
}

#[test]
fn impersonation_with_as_and_as_group() {
    let s = Server::start();
    let me = s.kubectl(&["auth", "whoami", "-o", "json"]);
    let me: serde_json::Value = serde_json::from_str(&me).unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], "kubernetes-admin");
    let as_jane = s.kubectl(&[
        "auth",
        "whoami",
        "-o",
        "json",
        "--as=jane",
        "--as-group=devs",
    ]);
    let as_jane: serde_json::Value = serde_json::from_str(&as_jane).unwrap();
    assert_eq!(as_jane["status"]["userInfo"]["username"], "jane");
    assert_eq!(
        as_jane["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );
}

#[test]
fn audit_log_records_what_the_policy_asks() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    let log = dir.path().join("audit.log");
    std::fs::write(
        &policy,
        r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
"#,
    )
    .unwrap();
    let s = Server::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    s.kubectl(&["create", "configmap", "audited", "--from-literal=k=v"]);
    s.kubectl_fails(&["get", "configmap", "missing"]);
    // jane holds no role: the list is refused, and the audit event says why.
    s.kubectl_fails(&["get", "namespaces", "--as=jane"]);
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["kind"] == "Event"
        && e["apiVersion"] == "audit.k8s.io/v1"
        && e["stage"] != "RequestReceived"));
    assert!(
        !events
            .iter()
            .any(|e| e["requestURI"].as_str().unwrap().starts_with("/readyz")),
        "level None is not recorded"
    );
    let create = events
        .iter()
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "configmaps")
        .expect("the create is audited");
    assert_eq!(create["level"], "RequestResponse");
    assert_eq!(create["stage"], "ResponseComplete");
    assert_eq!(create["responseStatus"]["code"], 201);
    assert_eq!(create["requestObject"]["data"]["k"], "v");
    assert_eq!(create["responseObject"]["metadata"]["name"], "audited");
    // The name comes from the request object (upstream's `LogRequestObject`), not the URL.
    assert_eq!(create["objectRef"]["name"], "audited");
    assert_eq!(create["user"]["username"], "kubernetes-admin");
    assert_eq!(
        create["annotations"],
        serde_json::json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );
    let missing = events
        .iter()
        .find(|e| e["objectRef"]["name"] == "missing")
        .expect("the failed get is audited");
    assert_eq!(
        (
            missing["responseStatus"]["code"].as_i64(),
            missing["responseStatus"]["reason"].as_str()
        ),
        (Some(404), Some("NotFound"))
    );
    let as_jane = events
        .iter()
        .find(|e| e["objectRef"]["resource"] == "namespaces" && e["verb"] == "list")
        .expect("the impersonated list is audited");
    assert_eq!(as_jane["level"], "Metadata");
    assert_eq!(as_jane["user"]["username"], "kubernetes-admin");
    assert_eq!(as_jane["impersonatedUser"]["username"], "jane");
    assert!(as_jane.get("responseObject").is_none());
    assert_eq!(as_jane["responseStatus"]["code"], 403);
    assert_eq!(
        as_jane["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
}

#[test]
fn bearer_tokens_anonymous_health_and_401() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cret,alice,uid-1,\"devs,ops\"\n").unwrap();
    let s = Server::start_with(&["--token-auth-file", tokens.to_str().unwrap()]);
    // A kubeconfig-free kubectl: only the server address and, where given, a token.
    let kubectl = |extra: &[&str]| {
        let mut args = vec!["--kubeconfig=/dev/null", "--insecure-skip-tls-verify=true"];
        let server = format!("--server={}", s.url);
        args.push(&server);
        args.extend_from_slice(extra);
        std::process::Command::new(common::kubectl_path())
            .args(&args)
            .output()
            .unwrap()
    };
    let who = kubectl(&[
        "--token=s3cret",
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
    ]);
    assert!(
        who.status.success(),
        "{}",
        String::from_utf8_lossy(&who.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        r#"alice ["devs","ops","system:authenticated"]"#
    );
    let wrong = kubectl(&["--token=nope", "get", "ns"]);
    assert!(
        !wrong.status.success()
            && String::from_utf8_lossy(&wrong.stderr)
                .contains("You must be logged in to the server")
    );
    // Without credentials (kubectl would prompt for a password): a plain HTTPS client.
    let anonymous = |path: &str| common::raw_https(&format!("{}{path}", s.url), "GET", &[], None);
    // Without credentials a request is anonymous, and RBAC gives anonymous users nothing but
    // health and version (the 401 is for credentials that do not authenticate).
    let denied = anonymous("/api/v1/namespaces");
    assert!(
        denied.starts_with("403 ") && denied.contains(r#""reason":"Forbidden""#),
        "{denied}"
    );
    // TokenReview asks the server's authenticators, as webhook token authenticators do. (Sent
    // raw, to read the answer's status directly.)
    let review = |token: &str| {
        let script = format!(
            "import sys,json\nsys.path.insert(0,'{}')\nfrom common import Raw\n\
             s,_,b=Raw().request('POST','/apis/authentication.k8s.io/v1/tokenreviews',\
             {{'apiVersion':'authentication.k8s.io/v1','kind':'TokenReview','spec':{{'token':'{token}'}}}})\n\
             print(s);print(b.decode())",
            common::tests_dir().join("python").display()
        );
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .env("KUBECONFIG", s.kubeconfig())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (code, body) = text.split_once('\n').unwrap_or(("", ""));
        assert_eq!(
            code,
            "201",
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(body).unwrap()["status"].clone()
    };
    let good = review("s3cret");
    assert_eq!(
        (
            good["authenticated"].as_bool(),
            good["user"]["username"].as_str(),
            good["user"]["uid"].as_str()
        ),
        (Some(true), Some("alice"), Some("uid-1"))
    );
    let bad = review("nope");
    assert!(bad.get("authenticated").is_none(), "{bad}");
    // Anonymous users may read the health and version endpoints.
    assert_eq!(anonymous("/readyz"), "200 ok");
    assert!(anonymous("/version").starts_with("200 {"));
}

const WORKLOADS_YAML: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: c
        image: nginx:1.27
        readinessProbe: {httpGet: {port: 80}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Secret
metadata: {name: plain}
stringData: {password: hunter2}
"#;

#[test]
fn workloads_come_back_defaulted_and_immutable_fields_stay() {
    let s = Server::start();
    s.kubectl_stdin(&["create", "-f", "-"], WORKLOADS_YAML);
    let field = |args: &[&str]| s.kubectl(args).trim().to_string();
    // Defaults as kube-apiserver sets them, read back through kubectl.
    assert_eq!(
        field(&[
            "get",
            "statefulset",
            "db",
            "-o",
            "jsonpath={.spec.podManagementPolicy} {.spec.updateStrategy.type} {.spec.revisionHistoryLimit} {.spec.persistentVolumeClaimRetentionPolicy.whenDeleted}"
        ]),
        "OrderedReady RollingUpdate 10 Retain"
    );
    assert_eq!(
        field(&[
            "get",
            "statefulset",
            "db",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].readinessProbe.periodSeconds} {.spec.template.spec.containers[0].readinessProbe.httpGet.scheme} {.spec.template.spec.containers[0].imagePullPolicy}"
        ]),
        "10 HTTP IfNotPresent"
    );
    assert_eq!(
        field(&[
            "get",
            "job",
            "once",
            "-o",
            "jsonpath={.spec.completions} {.spec.parallelism} {.spec.backoffLimit} {.spec.completionMode} {.spec.suspend} {.spec.template.metadata.labels.job-name}"
        ]),
        "1 1 6 NonIndexed false once"
    );
    assert_eq!(
        field(&[
            "get",
            "cronjob",
            "tick",
            "-o",
            "jsonpath={.spec.concurrencyPolicy} {.spec.successfulJobsHistoryLimit} {.spec.failedJobsHistoryLimit} {.spec.suspend}"
        ]),
        "Allow 3 1 false"
    );
    // stringData is merged into data and gone; a literal round-trips the same way.
    assert_eq!(
        field(&[
            "get",
            "secret",
            "plain",
            "-o",
            "jsonpath={.data.password}|{.stringData}"
        ]),
        "aHVudGVyMg==|"
    );
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "lit",
        "--from-literal=user=admin",
    ]);
    assert_eq!(
        field(&["get", "secret", "lit", "-o", "jsonpath={.data.user}"]),
        "YWRtaW4="
    );
    // A Job's selector is immutable, in upstream's words.
    let err = s.kubectl_fails(&[
        "patch",
        "job",
        "once",
        "--type=merge",
        "-p",
        r#"{"spec":{"selector":{"matchLabels":{"x":"y"}}}}"#,
    ]);
    assert!(
        err.contains("spec.selector: Invalid value:") && err.contains("field is immutable"),
        "{err}"
    );
}

/// A `kind: List` file: kubectl cannot ask the server to validate a List (no OpenAPI v3
/// operation names it), so with validation at its default (strict) it validates the items
/// itself against `/openapi/v2` fetched in protobuf, as it does against kube-apiserver.
#[test]
fn kubectl_validates_list_files_against_openapi_v2_protobuf() {
    let s = Server::start();
    let list = s.dir.path().join("list.yaml");
    std::fs::write(
        &list,
        r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed, namespace: default}
  data: {a: "1"}
- apiVersion: v1
  kind: Secret
  metadata: {name: listed, namespace: default}
  stringData: {password: hunter2}
"#,
    )
    .unwrap();
    let out = s.kubectl(&["create", "-f", list.to_str().unwrap()]);
    assert_eq!(out, "configmap/listed created\nsecret/listed created\n");
    assert_eq!(
        s.kubectl(&["get", "secret", "listed", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );
    // What kubectl fetched: the protobuf document, under upstream's media type.
    let verbose = s.kubectl_output(&["create", "-f", list.to_str().unwrap(), "-v=6"]);
    let log = String::from_utf8_lossy(&verbose.stderr);
    assert!(
        log.lines()
            .any(|l| l.contains("GET ") && l.contains("/openapi/v2") && l.contains(" 200 OK")),
        "{log}"
    );
}

/// Unknown fields in what kubectl validates itself (List items, review kinds) are refused by
/// kubectl before anything is sent, with the schema's names, as against kube-apiserver.
#[test]
fn kubectl_refuses_unknown_fields_it_validates_itself() {
    let s = Server::start();
    let write = |name: &str, text: &str| {
        let path = s.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let list = write(
        "bad-list.yaml",
        r#"apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: refused, namespace: default}
  data: {a: "1"}
  bogus: 1
"#,
    );
    let err = s.kubectl_fails(&["create", "-f", &list]);
    assert!(
        err.contains(r#"error validating data: ValidationError(ConfigMap): unknown field "bogus" in io.k8s.api.core.v1.ConfigMap"#),
        "{err}"
    );
    let missing = s.kubectl_fails(&["get", "configmap", "refused"]);
    assert!(missing.contains("NotFound"), "{missing}");
    let review = write(
        "bad-review.yaml",
        r#"apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: alice
  bogus: true
  resourceAttributes: {verb: get, resource: pods, namespace: default}
"#,
    );
    let err = s.kubectl_fails(&["create", "--validate=true", "-f", &review]);
    assert!(
        err.contains(r#"ValidationError(SubjectAccessReview.spec): unknown field "bogus" in io.k8s.api.authorization.v1.SubjectAccessReviewSpec"#),
        "{err}"
    );
}

/// Review kinds (create-only, answered in the response) validate against OpenAPI v2 too.
#[test]
fn kubectl_creates_review_kinds_with_validation_on() {
    let s = Server::start();
    let review = s.dir.path().join("review.yaml");
    std::fs::write(
        &review,
        r#"apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: alice
  resourceAttributes: {verb: get, resource: pods, namespace: default}
"#,
    )
    .unwrap();
    let out = s.kubectl(&[
        "create",
        "--validate=true",
        "-f",
        review.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "SubjectAccessReview");
    // alice holds no role: RBAC has no opinion, and no reason to give.
    assert_eq!(v["status"], serde_json::json!({"allowed": false}), "{v}");
}

#[test]
fn service_networking_objects_are_bootstrapped_and_follow_services() {
    let s = Server::start_with(&["--advertise-address", "192.0.2.10"]);
    let port = s.url.rsplit(':').next().unwrap_or_default().to_string();
    let out = s.kubectl(&[
        "get",
        "endpoints,endpointslices,servicecidrs,ipaddresses",
        "-A",
    ]);
    // The kubernetes Service's endpoints point at the advertise address and the secure port;
    // the default ServiceCIDR is the service range; its cluster IP is an IPAddress object.
    assert!(
        out.contains(&format!("endpoints/kubernetes   192.0.2.10:{port}")),
        "{out}"
    );
    assert!(
        out.contains("endpointslice.discovery.k8s.io/kubernetes   IPv4"),
        "{out}"
    );
    assert!(
        out.contains("servicecidr.networking.k8s.io/kubernetes   10.0.0.0/24"),
        "{out}"
    );
    assert!(
        out.contains("ipaddress.networking.k8s.io/10.0.0.1   services/default/kubernetes"),
        "{out}"
    );
    assert_eq!(
        s.kubectl(&[
            "get",
            "servicecidr",
            "kubernetes",
            "-o",
            "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}"
        ]),
        "Ready=True"
    );
    // A new Service's cluster IP gets its IPAddress, owned by the Service.
    s.kubectl(&["create", "service", "nodeport", "web", "--tcp=80:8080"]);
    let ip = s.kubectl(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let parent = s.kubectl(&[
        "get",
        "ipaddress",
        &ip,
        "-o",
        "jsonpath={.spec.parentRef.namespace}/{.spec.parentRef.name} {.metadata.labels.ipaddress\\.kubernetes\\.io/managed-by}",
    ]);
    assert_eq!(parent, "default/web ipallocator.k8s.io");
    // The address stays taken across a restart, whose endpoints follow the new advertise
    // address (the bind address here).
    let dir = s.stop();
    let s = Server::start_in(dir);
    let port = s.url.rsplit(':').next().unwrap_or_default().to_string();
    let err = s.kubectl_fails(&[
        "create",
        "service",
        "clusterip",
        "copy",
        "--tcp=80:80",
        &format!("--clusterip={ip}"),
    ]);
    assert!(err.contains("provided IP is already allocated"), "{err}");
    let endpoints = s.kubectl(&["get", "endpoints", "kubernetes"]);
    assert!(
        endpoints.contains(&format!("127.0.0.1:{port}")),
        "{endpoints}"
    );
    // Deleting the Service releases its address.
    s.kubectl(&["delete", "service", "web"]);
    let left = s.kubectl(&["get", "ipaddresses", "-o", "name"]);
    assert_eq!(
        left.trim(),
        "ipaddress.networking.k8s.io/10.0.0.1",
        "{left}"
    );
}

/// `kubectl get --sort-by` asks for Tables whose rows carry the whole object
/// (`includeObject=Object`) and sorts on a field outside metadata; `None` leaves the row's
/// object out, and an unknown value is upstream's 400.
#[test]
fn tables_carry_what_include_object_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "root-token,root,uid-0,\"system:masters\"\n").unwrap();
    let s = Server::start_with(&["--token-auth-file", tokens.to_str().unwrap()]);
    for (name, rank) in [("a", "3"), ("b", "1"), ("c", "2")] {
        s.kubectl(&[
            "create",
            "configmap",
            name,
            &format!("--from-literal=rank={rank}"),
        ]);
    }
    let sorted = s.kubectl(&[
        "get",
        "configmaps",
        "a",
        "b",
        "c",
        "--sort-by=.data.rank",
        "--no-headers",
        "-o",
        "custom-columns=NAME:.metadata.name",
    ]);
    assert_eq!(
        sorted.split_whitespace().collect::<Vec<_>>(),
        ["b", "c", "a"]
    );
    let plain = s.kubectl(&["get", "configmaps", "--sort-by=.data.rank", "--no-headers"]);
    let names: Vec<&str> = plain
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| ["a", "b", "c"].contains(n))
        .collect();
    assert_eq!(names, ["b", "c", "a"], "{plain}");

    let table = |include: &str| {
        let answer = common::raw_https(
            &format!(
                "{}/api/v1/namespaces/default/configmaps/a?includeObject={include}",
                s.url
            ),
            "GET",
            &[
                ("Authorization", "Bearer root-token"),
                ("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
            ],
            None,
        );
        let (code, body) = answer.split_once(' ').expect("a status and a body");
        (
            code.to_string(),
            serde_json::from_str::<serde_json::Value>(body).unwrap(),
        )
    };
    let (code, t) = table("Object");
    assert_eq!(code, "200");
    let row = &t["rows"][0]["object"];
    assert_eq!(row["kind"], "ConfigMap");
    assert_eq!(row["apiVersion"], "v1");
    assert_eq!(row["data"]["rank"], "3");
    let (_, t) = table("Metadata");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(t["rows"][0]["object"].get("data").is_none());
    let (_, t) = table("None");
    assert_eq!(t["rows"][0]["object"], serde_json::Value::Null);
    let (code, status) = table("Everything");
    assert_eq!(code, "400");
    assert_eq!(
        status["message"],
        "unrecognized includeObject value: \"Everything\""
    );
    assert_eq!(status["reason"], "BadRequest");
}
