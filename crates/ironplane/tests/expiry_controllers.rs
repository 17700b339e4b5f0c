//! The controllers that act on time, against the real binary with kubectl: a finished Job is
//! deleted after its `ttlSecondsAfterFinished`; with `--controllers` naming them (they are off
//! by default, as in kube-controller-manager), expired bootstrap token Secrets are deleted and
//! `kube-public/cluster-info` is signed for every token allowed to sign, in the detached JWS
//! form `kubeadm join` verifies.

use crate::common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{Server, wait_until};
use serde_json::json;

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[test]
fn a_finished_job_goes_after_its_ttl() {
    let s = Server::start();
    let job = |name: &str, ttl: i64| {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ttlSecondsAfterFinished": ttl, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}},
        })
        .to_string()
    };
    s.kubectl_stdin(&["create", "-f", "-"], &job("short", 1));
    s.kubectl_stdin(&["create", "-f", "-"], &job("long", 3600));
    // Finish both, as the Job controller would.
    let now = rfc3339(chrono::Utc::now());
    let finished = json!({"status": {
    "startTime": now, "completionTime": now, "succeeded": 1,
    "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
        {"type": "Complete", "status": "True", "lastTransitionTime": now},
    ]}})
    .to_string();
    for name in ["short", "long"] {
        s.kubectl(&[
            "patch",
            "job",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &finished,
        ]);
    }
    wait_until("the finished Job to be deleted", 15, || {
        s.get_json("default", "job/short").is_none()
    });
    assert!(
        s.get_json("default", "job/long").is_some(),
        "a Job whose TTL has not passed stays"
    );
}

fn token_secret(id: &str, extra: &[(&str, &str)]) -> String {
    let mut data = serde_json::Map::new();
    data.insert("token-id".into(), json!(id));
    data.insert("token-secret".into(), json!("0123456789abcdef"));
    for (k, v) in extra {
        data.insert(k.to_string(), json!(v));
    }
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": data,
    })
    .to_string()
}

#[test]
fn bootstrap_tokens_expire_and_sign_cluster_info_when_the_controllers_are_named() {
    let s = Server::start_with(&["--controllers=*,tokencleaner,bootstrapsigner"]);
    let soon = rfc3339(chrono::Utc::now() + chrono::Duration::seconds(2));
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &token_secret("aaaaaa", &[("expiration", &soon)]),
    );
    s.kubectl_stdin(&["create", "-f", "-"], &token_secret("bbbbbb", &[]));
    wait_until("the expired token to be deleted", 15, || {
        s.get_json("kube-system", "secret/bootstrap-token-aaaaaa")
            .is_none()
    });
    assert!(
        s.get_json("kube-system", "secret/bootstrap-token-bbbbbb")
            .is_some()
    );

    // cluster-info, as kubeadm writes it, gets the signature of the token that may sign.
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n";
    s.kubectl(&[
        "-n",
        "kube-public",
        "create",
        "configmap",
        "cluster-info",
        &format!("--from-literal=kubeconfig={kubeconfig}"),
    ]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &token_secret("cccccc", &[("usage-bootstrap-signing", "true")]),
    );
    let mut signature = String::new();
    wait_until("cluster-info to be signed", 15, || {
        let cm = s
            .get_json("kube-public", "configmap/cluster-info")
            .expect("cluster-info");
        match cm["data"]["jws-kubeconfig-cccccc"].as_str() {
            Some(sig) => {
                signature = sig.to_string();
                true
            }
            None => false,
        }
    });
    let cm = s.get_json("kube-public", "configmap/cluster-info").unwrap();
    assert!(
        cm["data"].get("jws-kubeconfig-bbbbbb").is_none(),
        "a token without usage-bootstrap-signing does not sign: {}",
        cm["data"]
    );
    // Verify it as kubeadm does: HS256 over the header and the kubeconfig, keyed by the token.
    let (header, mac) = signature.split_once("..").expect("a detached JWS");
    assert_eq!(
        URL_SAFE_NO_PAD.decode(header).unwrap(),
        br#"{"alg":"HS256","kid":"cccccc"}"#
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
    let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(kubeconfig));
    ring::hmac::verify(
        &key,
        input.as_bytes(),
        &URL_SAFE_NO_PAD.decode(mac).unwrap(),
    )
    .expect("the signature verifies");
    // A deleted token's signature goes.
    s.kubectl(&[
        "-n",
        "kube-system",
        "delete",
        "secret",
        "bootstrap-token-cccccc",
    ]);
    wait_until("the signature to be removed", 15, || {
        let cm = s.get_json("kube-public", "configmap/cluster-info").unwrap();
        cm["data"].get("jws-kubeconfig-cccccc").is_none()
    });
}

#[test]
fn bootstrap_token_controllers_are_off_by_default() {
    let s = Server::start();
    let past = rfc3339(chrono::Utc::now() - chrono::Duration::seconds(60));
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &token_secret("dddddd", &[("expiration", &past)]),
    );
    // The TTL controller (on by default) is running; the token cleaner is not.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        s.get_json("kube-system", "secret/bootstrap-token-dddddd")
            .is_some()
    );
}
