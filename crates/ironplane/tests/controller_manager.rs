//! What the stock kube-controller-manager and kube-scheduler (v1.36) depend on when they run
//! beside Ironplane, found by running them against it (issue 12): one test per behaviour they
//! rely on that Ironplane once got wrong.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;

fn wait_for_default_account(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s
        .kubectl_output(&["-n", "default", "get", "serviceaccount", "default"])
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "no default ServiceAccount");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const POD: &str = r#"{"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "p", "namespace": "default"},
  "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}}"#;

/// The endpoints and endpoint-slice controllers read a pod's addresses from `status.podIPs`.
/// A kubelet (or a test standing in for one) that writes only the single `podIP` still gets
/// `podIPs`, because upstream's v1 conversion fills the internal list from the single field;
/// and a status with only `podIPs` reads back with `podIP`, the list's first address. Without
/// this, a Service over such pods had no endpoints.
#[test]
fn pod_ip_and_pod_ips_follow_each_other() {
    let s = Server::start();
    wait_for_default_account(&s);
    s.kubectl_stdin(&["create", "-f", "-"], POD);
    let ips = |s: &Server| {
        s.kubectl(&[
            "-n",
            "default",
            "get",
            "pod",
            "p",
            "-o",
            "jsonpath={.status.podIP} {.status.podIPs}",
        ])
    };
    s.kubectl(&[
        "-n",
        "default",
        "patch",
        "pod",
        "p",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"phase": "Running", "podIP": "10.2.0.7"}}"#,
    ]);
    assert_eq!(ips(&s).trim(), r#"10.2.0.7 [{"ip":"10.2.0.7"}]"#);

    // A new single address replaces a list that starts elsewhere, as it does upstream.
    s.kubectl(&[
        "-n",
        "default",
        "patch",
        "pod",
        "p",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"podIP": "10.2.0.8"}}"#,
    ]);
    assert_eq!(ips(&s).trim(), r#"10.2.0.8 [{"ip":"10.2.0.8"}]"#);

    // Only the list: the single field is its first address.
    s.kubectl(&[
        "-n",
        "default",
        "patch",
        "pod",
        "p",
        "--subresource=status",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/status/podIP"},
            {"op": "replace", "path": "/status/podIPs", "value": [{"ip": "10.2.0.9"}]}]"#,
    ]);
    assert_eq!(ips(&s).trim(), r#"10.2.0.9 [{"ip":"10.2.0.9"}]"#);
}

/// A create in a namespace being deleted is refused with upstream's `NamespaceTerminating`
/// cause. kube-controller-manager's replica set, job, daemon set, stateful set, deployment,
/// cron job and endpoints controllers look for that cause to stop retrying (and reporting
/// `FailedCreate`) while the namespace controller empties the namespace.
#[test]
fn creates_in_a_terminating_namespace_carry_the_namespace_terminating_cause() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "root-token,root,uid-0,\"system:masters\"\n").unwrap();
    let s = Server::start_with(&["--token-auth-file", tokens.to_str().unwrap()]);
    s.kubectl(&["create", "namespace", "doomed"]);
    // A finalizer holds the namespace in Terminating for as long as the test needs.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "held", "namespace": "doomed", "finalizers": ["example.com/hold"]}}"#,
    );
    s.kubectl(&["delete", "namespace", "doomed", "--wait=false"]);
    let answer = common::raw_https(
        &format!("{}/api/v1/namespaces/doomed/configmaps", s.url),
        "POST",
        &[
            ("Authorization", "Bearer root-token"),
            ("Content-Type", "application/json"),
        ],
        Some(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}"#),
    );
    let (code, body) = answer.split_once(' ').expect("a status and a body");
    assert_eq!(code, "403", "{answer}");
    let status: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        status,
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "late", "kind": "configmaps", "causes": [{
                "reason": "NamespaceTerminating",
                "message": "namespace doomed is being terminated",
                "field": "metadata.namespace"}]},
            "code": 403})
    );
    s.kubectl(&[
        "-n",
        "doomed",
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata": {"finalizers": null}}"#,
    ]);
}
