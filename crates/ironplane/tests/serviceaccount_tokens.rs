//! Service-account tokens end to end: `kubectl create token`, the token used by kubectl under
//! RBAC, and (python/sa_tokens.py) TokenRequest answers, bound tokens, and forged or stale
//! tokens refused with 401.

use crate::common;

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
    assert_eq!(
        s.whoami(token).username(),
        "system:serviceaccount:apps:deployer"
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

/// `--service-account-signing-key-file` with an RSA key: tokens are RS256 under the key's id,
/// `--service-account-key-file` keys verify them and appear in the served key set, and
/// `--service-account-jwks-uri` is what the discovery document points at.
#[test]
fn rsa_signing_and_verifying_key_files() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("sa.key");
    let public = dir.path().join("sa.pub");
    let other = dir.path().join("other.pub");
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("this test needs the openssl command (scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let path = |p: &std::path::Path| p.display().to_string();
    openssl(&["genrsa", "-traditional", "-out", &path(&key), "2048"]);
    openssl(&["rsa", "-in", &path(&key), "-pubout", "-out", &path(&public)]);
    // A second, unrelated key: also trusted, so the key set has two entries.
    let other_key = dir.path().join("other.key");
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        &path(&other_key),
    ]);
    openssl(&[
        "ec",
        "-in",
        &path(&other_key),
        "-pubout",
        "-out",
        &path(&other),
    ]);
    let s = Server::start_with(&[
        &format!("--service-account-signing-key-file={}", path(&key)),
        &format!("--service-account-key-file={}", path(&public)),
        &format!("--service-account-key-file={}", path(&other)),
        "--service-account-jwks-uri=https://keys.example/jwks",
    ]);
    s.kubectl(&["create", "serviceaccount", "robot"]);
    let token = s.kubectl(&["create", "token", "robot"]);
    let token = token.trim();
    let header: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            token.split('.').next().unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "RS256");
    let jwks: serde_json::Value =
        serde_json::from_str(&s.kubectl(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{jwks}");
    assert_eq!(keys[0]["kty"], "RSA");
    assert_eq!(keys[0]["kid"], header["kid"]);
    assert_eq!(keys[1]["kty"], "EC");
    let discovery: serde_json::Value =
        serde_json::from_str(&s.kubectl(&["get", "--raw", "/.well-known/openid-configuration"]))
            .unwrap();
    assert_eq!(discovery["jwks_uri"], "https://keys.example/jwks");
    assert_eq!(
        discovery["id_token_signing_alg_values_supported"],
        serde_json::json!(["ES256", "RS256"])
    );
    // The token authenticates.
    assert_eq!(
        s.whoami(token).username(),
        "system:serviceaccount:default:robot"
    );
}

/// Legacy secret-based tokens: the tokens controller fills in a `kubernetes.io/service-account-
/// token` secret; its token authenticates while the secret and account live, marks the secret
/// as used, and stops when the secret is marked invalid; secrets of missing or deleted accounts
/// are deleted.
#[test]
fn legacy_secret_tokens_are_filled_in_and_checked_against_their_secret() {
    let audit = tempfile::tempdir().unwrap();
    let (policy, log) = (
        audit.path().join("policy.yaml"),
        audit.path().join("audit.log"),
    );
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: authentication.k8s.io, resources: [selfsubjectreviews]}]\n",
    )
    .unwrap();
    let s = Server::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    let wait = |what: &str, check: &mut dyn FnMut() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !check() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never happened"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let secret = |name: &str, account: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  annotations: {{kubernetes.io/service-account.name: {account}}}\ntype: kubernetes.io/service-account-token\n"
        )
    };
    s.kubectl(&["create", "serviceaccount", "legacy"]);
    s.kubectl_stdin(&["apply", "-f", "-"], &secret("legacy-token", "legacy"));
    let get = |name: &str| -> serde_json::Value {
        let out = s.kubectl_output(&["get", "secret", name, "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    wait("the token filled in", &mut || {
        get("legacy-token")["data"]["token"].is_string()
    });
    let filled = get("legacy-token");
    let decode = |v: &serde_json::Value| {
        String::from_utf8(
            base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                v.as_str().unwrap(),
            )
            .unwrap(),
        )
        .unwrap()
    };
    let token = decode(&filled["data"]["token"]);
    assert_eq!(decode(&filled["data"]["namespace"]), "default");
    assert!(decode(&filled["data"]["ca.crt"]).contains("BEGIN CERTIFICATE"));
    let account_uid = s.kubectl(&["get", "sa", "legacy", "-o", "jsonpath={.metadata.uid}"]);
    assert_eq!(
        filled["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
        account_uid.trim()
    );
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            token.split('.').nth(1).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["iss"], "kubernetes/serviceaccount");
    assert_eq!(
        claims["kubernetes.io/serviceaccount/secret.name"],
        "legacy-token"
    );
    assert!(claims.get("exp").is_none());

    assert_eq!(
        s.whoami(&token).username(),
        "system:serviceaccount:default:legacy"
    );
    // An auto-generated secret (one its account lists) brings upstream's warning.
    s.kubectl(&[
        "patch",
        "serviceaccount",
        "legacy",
        "-p",
        r#"{"secrets":[{"name":"legacy-token"}]}"#,
    ]);
    wait("the auto-generated secret's warning", &mut || {
        s.whoami(&token).stderr.contains(
            "Warning: Use tokens from the TokenRequest API or manually created secret-based tokens instead of auto-generated secret-based tokens.",
        )
    });
    // Authentication's audit annotations reach the request's event.
    let events = std::fs::read_to_string(&log).unwrap();
    let annotated = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == "system:serviceaccount:default:legacy")
        .map(|e| e["annotations"].clone())
        .collect::<Vec<_>>();
    assert!(
        annotated
            .iter()
            .any(|a| a["authentication.k8s.io/legacy-token-manual-secret"] == "legacy-token"),
        "{annotated:?}"
    );
    assert!(
        annotated.iter().any(
            |a| a["authentication.k8s.io/legacy-token-autogenerated-secret"] == "legacy-token"
        ),
        "{annotated:?}"
    );
    wait("the last-used label", &mut || {
        get("legacy-token")["metadata"]["labels"]["kubernetes.io/legacy-token-last-used"]
            .is_string()
    });
    // Marked invalid: refused until the label goes.
    s.kubectl(&[
        "label",
        "secret",
        "legacy-token",
        "kubernetes.io/legacy-token-invalid-since=2024-01-01",
    ]);
    wait("the invalid mark", &mut || s.whoami(&token).user.is_err());
    s.kubectl(&[
        "label",
        "secret",
        "legacy-token",
        "kubernetes.io/legacy-token-invalid-since-",
    ]);
    wait("the mark removed", &mut || s.whoami(&token).user.is_ok());

    // A secret for an account that does not exist is deleted.
    s.kubectl_stdin(&["apply", "-f", "-"], &secret("orphan-token", "nobody"));
    wait("the orphan deleted", &mut || {
        !s.kubectl_output(&["get", "secret", "orphan-token"])
            .status
            .success()
    });
    // Deleting the account deletes its secrets, and the token stops working.
    s.kubectl(&["delete", "serviceaccount", "legacy"]);
    wait("the account's secret deleted", &mut || {
        !s.kubectl_output(&["get", "secret", "legacy-token"])
            .status
            .success()
    });
    wait("the token refused", &mut || s.whoami(&token).user.is_err());
}
