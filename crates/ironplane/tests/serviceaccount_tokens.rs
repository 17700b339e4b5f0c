//! Service-account tokens end to end: `kubectl create token`, the token used by kubectl under
//! RBAC, and (python/sa_tokens.py) TokenRequest answers, bound tokens, and forged or stale
//! tokens refused with 401.

mod common;

use common::{Server, tests_dir};

#[test]
fn kubectl_create_token_and_use_it() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "apps"]);
    s.kubectl(&["create", "serviceaccount", "deployer", "-n", "apps"]);
    let token = s.kubectl(&[
        "create",
        "token",
        "deployer",
        "-n",
        "apps",
        "--duration=20m",
    ]);
    let token = token.trim();
    let as_sa = |args: &[&str]| {
        let server = format!("--server={}", s.url);
        let auth = format!("--token={token}");
        let mut all = vec![
            "--kubeconfig=/dev/null",
            "--insecure-skip-tls-verify=true",
            server.as_str(),
            auth.as_str(),
        ];
        all.extend_from_slice(args);
        std::process::Command::new(common::kubectl_path())
            .args(&all)
            .output()
            .unwrap()
    };
    let who = as_sa(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        "system:serviceaccount:apps:deployer",
        "{}",
        String::from_utf8_lossy(&who.stderr)
    );
    // RBAC decides what the account may do.
    let denied = as_sa(&["get", "pods", "-n", "apps"]);
    assert!(!denied.status.success());
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr).trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:apps:deployer" cannot list resource "pods" in API group "" in the namespace "apps""#
    );
    s.kubectl(&[
        "create",
        "rolebinding",
        "deployer-view",
        "-n",
        "apps",
        "--clusterrole=view",
        "--serviceaccount=apps:deployer",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = as_sa(&["get", "pods", "-n", "apps"]);
        if out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the binding never applied"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // kubectl's own validation of --duration mirrors the server's.
    let err = s.kubectl_fails(&[
        "create",
        "token",
        "deployer",
        "-n",
        "apps",
        "--duration=100s",
    ]);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
}

#[test]
fn token_requests_bound_tokens_and_forged_tokens() {
    let s = Server::start();
    let out = s.python(
        &tests_dir().join("python/sa_tokens.py"),
        &[s.dir.path().to_str().unwrap()],
    );
    assert!(out.contains("sa tokens: 0 failed"), "{out}");
}
