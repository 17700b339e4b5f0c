//! Hostile input, slow clients and faults (issue 6): the server never crashes, never corrupts,
//! never wedges. The request suites are Python scripts under `tests/python/hostile*.py`; each
//! prints every failing case with expected vs got and ends with `N passed, M failed`.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, tests_dir};

/// Waits up to `limit` for the child to exit; None if it is still running.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn assert_alive(s: &mut Server) {
    assert!(
        s.child.try_wait().expect("try_wait").is_none(),
        "the server process exited"
    );
}

#[test]
fn hostile_input_suite() {
    let mut s = Server::start();
    let out = s.python(&tests_dir().join("python/hostile.py"), &[]);
    assert!(out.contains(" 0 failed"), "{out}");
    assert_alive(&mut s);
    s.wait_ready();
}

#[test]
fn slow_clients_are_cut_off_and_kubectl_is_served() {
    let mut s = Server::start();
    let pid = s.child.id().to_string();
    let out = s.python(&tests_dir().join("python/hostile_slow.py"), &[&pid]);
    eprintln!("{out}");
    assert!(out.contains(" 0 failed"), "{out}");
    assert_alive(&mut s);
}

#[test]
fn concurrent_unconditional_writes_all_apply() {
    let mut s = Server::start();
    let out = s.python(&tests_dir().join("python/hostile_concurrency.py"), &[]);
    assert!(out.contains(" 0 failed"), "{out}");
    assert_alive(&mut s);
}

#[test]
fn sigterm_with_idle_connections_exits_promptly() {
    let mut s = Server::start();
    // 50 TCP-only connections (no ClientHello) and 50 TLS connections that never send a request.
    let mut holder = Command::new("python3")
        .arg(tests_dir().join("python/hostile_idle.py"))
        .arg("50")
        .env("IRONPLANE_URL", &s.url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the holder reports");
    assert_eq!(line.trim(), "ready", "the idle connections were not opened");
    let pid = s.child.id().to_string();
    let start = Instant::now();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    // --shutdown-delay-duration defaults to 0: the server stops accepting, closes idle
    // connections and drains at once; upstream exits long before its 60 s request deadline.
    let status = wait_exit(&mut s.child, Duration::from_secs(20));
    let _ = holder.kill();
    let _ = holder.wait();
    let status = status.unwrap_or_else(|| {
        panic!("the server did not exit within 20 s of SIGTERM with 100 idle connections open")
    });
    eprintln!(
        "exited with {status} {:.2} s after SIGTERM",
        start.elapsed().as_secs_f64()
    );
    assert!(status.success(), "the server exited with {status}");
}

#[test]
fn second_process_on_the_data_dir_refuses_to_start() {
    let s = Server::start();
    let first = s.child.id().to_string();
    let mut second = Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(s.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ironplane binary starts");
    let mut stderr = second.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = wait_exit(&mut second, Duration::from_secs(20));
    if status.is_none() {
        let _ = second.kill();
        let _ = second.wait();
    }
    let text = reader.join().expect("stderr reader");
    let status = status.unwrap_or_else(|| {
        panic!("a second server on the same --data-dir kept running; its stderr:\n{text}")
    });
    assert!(
        !status.success(),
        "a second server on the same --data-dir exited with success:\n{text}"
    );
    assert!(
        text.contains("pid") && text.contains(&first),
        "the refusal should name the holder's pid {first}; stderr was:\n{text}"
    );
    // The first server is unharmed.
    s.wait_ready();
}

/// Writes raw values into the embedded store of a stopped server, as disk corruption or an older
/// version would have left them.
fn write_raw(dir: &std::path::Path, entries: &[(&str, &[u8])]) {
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
args = sys.argv[2:]
for key, value in zip(args[0::2], args[1::2]):
    cur = db.execute("INSERT INTO kv (name, create_revision, prev_revision, deleted, value) VALUES (?, 0, 0, 0, ?)",
                     (key.encode(), bytes.fromhex(value)))
    db.execute("UPDATE kv SET create_revision = id WHERE id = ?", (cur.lastrowid,))
db.commit()
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).arg(dir.join("state.db"));
    for (key, value) in entries {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        cmd.arg(key).arg(hex);
    }
    let status = cmd.status().expect("python3 runs");
    assert!(status.success(), "writing raw values failed");
}

#[test]
fn undecodable_stored_objects_leave_the_collection_usable() {
    let s = Server::start();
    s.kubectl(&["create", "configmap", "good", "--from-literal=a=b"]);
    let dir = s.stop();
    let deep = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep","namespace":"default"}},"data":{{"a":{}{}}}}}"#,
        "[".repeat(130),
        "]".repeat(130)
    );
    write_raw(
        dir.path(),
        &[
            (
                "/registry/configmaps/default/corrupt",
                b"{\"metadata\": {\"name\": tru",
            ),
            ("/registry/configmaps/default/deep", deep.as_bytes()),
            (
                // Stored before type checks: Go cannot hold it, so it has no protobuf form.
                "/registry/configmaps/default/mistyped",
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mistyped","namespace":"default"},"data":{"a":5}}"#,
            ),
        ],
    );
    let s = Server::start_in(dir);
    // The list (JSON and protobuf, as kubectl asks for each) is served without them.
    let names = s.kubectl(&["get", "configmaps", "-o", "name"]);
    assert!(names.contains("configmap/good"), "{names}");
    assert!(
        !names.contains("corrupt") && !names.contains("configmap/deep"),
        "{names}"
    );
    // A protobuf list (what controllers read) leaves out the mistyped object alone; JSON still
    // shows it.
    assert!(names.contains("configmap/mistyped"), "{names}");
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from common import Raw
status, headers, body = Raw().request("GET", "/api/v1/namespaces/default/configmaps",
                                      headers={"Accept": "application/vnd.kubernetes.protobuf"})
print(status, headers.get("Content-Type"), b"good" in body, b"mistyped" in body)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(tests_dir().join("python"))
        .env("KUBECONFIG", s.kubeconfig())
        .output()
        .expect("python3 runs");
    let out = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.trim(),
        "200 application/vnd.kubernetes.protobuf True False",
        "{out}"
    );
    // Each one answers for itself.
    let err = s.kubectl_fails(&["get", "configmap", "corrupt"]);
    assert!(
        err.contains("not found") || err.contains("InternalError") || err.contains("decode"),
        "{err}"
    );
    // The unsafe deletion of malformed objects removes them; a readable object is untouched.
    for name in ["corrupt", "deep"] {
        let out = s.kubectl(&[
            "delete",
            "--raw",
            &format!("/api/v1/namespaces/default/configmaps/{name}?ignoreStoreReadErrorWithClusterBreakingPotential=true"),
        ]);
        assert!(out.contains("Success"), "{out}");
    }
    let err = s.kubectl_fails(&[
        "delete",
        "--raw",
        "/api/v1/namespaces/default/configmaps/good?ignoreStoreReadErrorWithClusterBreakingPotential=true&dryRun=All",
    ]);
    assert!(err.contains("cannot be set together"), "{err}");
    s.kubectl(&["create", "configmap", "corrupt", "--from-literal=c=d"]);
    let names = s.kubectl(&["get", "configmaps", "-o", "name"]);
    assert!(
        names.contains("configmap/good") && names.contains("configmap/corrupt"),
        "{names}"
    );
}
