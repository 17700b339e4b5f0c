//! The envtest drop-in: an asset directory made by `scripts/envtest-assets.sh` from this build,
//! driven by `tests/python/envtest.py` exactly as controller-runtime v0.24.1's envtest drives
//! `kube-apiserver` and `etcd` (the command lines, health checks, users and stops it builds in
//! `pkg/internal/testing/controlplane` and `pkg/internal/testing/process`; the script names each
//! file), then used through kubectl.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kubectl the replay uses (`KUBECTL` overrides, as for the other end-to-end tests).
fn kubectl() -> PathBuf {
    let path =
        PathBuf::from(std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into()));
    assert!(
        path.is_file(),
        "kubectl is missing at {}: the envtest replay drives the real kubectl (install it, or \
         set KUBECTL)",
        path.display()
    );
    path
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate sits two levels below the repository root")
        .to_path_buf()
}

/// One plain HTTP/1.1 GET; the whole answer, or `None` when nothing listens yet.
fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

#[test]
fn envtest_command_lines_and_checks_replayed() {
    let kubectl = kubectl();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let assets = tmp.path().join("assets");
    let made = Command::new("bash")
        .arg(repo_root().join("scripts/envtest-assets.sh"))
        .arg(&assets)
        .env("IRONPLANE_BIN", env!("CARGO_BIN_EXE_ironplane"))
        .env("KUBECTL", &kubectl)
        .output()
        .expect("bash runs");
    assert!(
        made.status.success(),
        "envtest-assets.sh failed: {}{}",
        String::from_utf8_lossy(&made.stdout),
        String::from_utf8_lossy(&made.stderr)
    );
    let made = String::from_utf8_lossy(&made.stdout);
    assert!(made.contains("Kubernetes v1.36."), "{made}");
    for name in ["ironplane", "kube-apiserver", "etcd", "kubectl"] {
        assert!(assets.join(name).is_file(), "{name} is missing from {made}");
    }

    // envtest's temporary directories (k8s_test_framework_*) go under the test's own.
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).expect("a scratch directory");
    let out = Command::new("python3")
        .arg(common::tests_dir().join("python/envtest.py"))
        .env("KUBEBUILDER_ASSETS", &assets)
        .env("TMPDIR", &scratch)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("envtest replay: ok"),
        "the envtest replay failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each process removed nothing of the test's but its own directory, as envtest's Stop does.
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .expect("the scratch directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn stand_in_etcd_answers_health_and_stops_on_sigint() {
    // The stand-in alone, as envtest starts it first: /health is 200, anything else 404, and
    // SIGINT (Ctrl-C in a terminal) stops it as SIGTERM does.
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let etcd = tmp.path().join("etcd");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ironplane"), &etcd).expect("a symlink");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("its address").port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(&etcd)
        .arg(format!("--listen-client-urls={url}"))
        .arg(format!("--data-dir={}", tmp.path().join("data").display()))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the stand-in starts");
    let get = |path: &str| http_get(&format!("127.0.0.1:{port}"), path);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let health = loop {
        if let Some(answer) = get("/health") {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stand-in never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(health.starts_with("HTTP/1.1 200 OK"), "{health}");
    assert!(
        health.ends_with(r#"{"health":"true","reason":""}"#),
        "{health}"
    );
    let other = get("/v3/kv/range").expect("an answer");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    assert!(
        !tmp.path().join("data").exists(),
        "the stand-in stores nothing, not even a data directory"
    );
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the stand-in did not stop on SIGINT"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
}
