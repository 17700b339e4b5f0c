//! The end-to-end harness: starts the real `ironplane` binary on an ephemeral loopback port
//! with a fresh data directory, waits for `/readyz`, and drives it with the installed kubectl
//! and the Python client. Each test owns its server, so tests run in parallel.

#![allow(dead_code)]

pub mod hook_server;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The ConfigMap the root CA publisher puts in every namespace.
pub const ROOT_CA: &str = "kube-root-ca.crt";

pub struct Server {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub url: String,
    /// Every line the server has written to stderr so far (its log).
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// Polls `done` every 50 ms until it holds; panics naming `what` after `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What `Server::whoami` saw.
pub struct WhoAmI {
    /// `status.userInfo` of the SelfSubjectReview, or kubectl's error (its stderr, trimmed).
    pub user: Result<serde_json::Value, String>,
    pub stderr: String,
}

impl WhoAmI {
    /// The authenticated user's name; panics with kubectl's error when authentication failed.
    pub fn username(&self) -> String {
        match &self.user {
            Ok(u) => u["username"].as_str().unwrap_or_default().to_string(),
            Err(e) => panic!("whoami failed: {e}"),
        }
    }
}

pub fn kubectl_path() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Starts with extra flags.
    pub fn start_with(args: &[&str]) -> Server {
        Self::start_in_with(tempfile::tempdir().expect("a temporary directory"), args)
    }

    /// Starts on an existing data directory (a restart).
    pub fn start_in(dir: tempfile::TempDir) -> Server {
        Self::start_in_with(dir, &[])
    }

    /// Starts on an existing data directory with extra flags.
    pub fn start_in_with(dir: tempfile::TempDir, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ironplane"))
            .args(["--secure-port", "0", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("the ironplane binary starts");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        std::thread::spawn({
            let log = log.clone();
            move || {
                let mut sent = false;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    // Keep draining after the address line so the server never blocks on a full
                    // pipe.
                    if !sent && let Some(url) = line.strip_prefix("Ironplane is serving on ") {
                        let _ = tx.send(url.trim().to_string());
                        sent = true;
                    }
                    log.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server announces its address");
        let s = Server {
            child,
            dir,
            url,
            log,
        };
        s.wait_ready();
        s
    }

    /// Runs kubectl with a bearer token and no client certificate (the server's certificate is
    /// not checked).
    pub fn kubectl_with_token(&self, token: &str, args: &[&str]) -> Output {
        Command::new(kubectl_path())
            .arg("--kubeconfig=/dev/null")
            .arg("--insecure-skip-tls-verify=true")
            .arg(format!("--server={}", self.url))
            .arg(format!("--token={token}"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// `kubectl auth whoami -o json` with a bearer token: the user the server authenticated
    /// (its `status.userInfo`) or kubectl's error, and kubectl's stderr either way (warnings).
    pub fn whoami(&self, token: &str) -> WhoAmI {
        let out = self.kubectl_with_token(token, &["auth", "whoami", "-o", "json"]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let user = if out.status.success() {
            let review: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("kubectl prints JSON");
            Ok(review["status"]["userInfo"].clone())
        } else {
            Err(stderr.trim().to_string())
        };
        WhoAmI { user, stderr }
    }

    /// The lines of the server's log so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let out = self.kubectl_output(&["get", "--raw", "/readyz"]);
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("/readyz did not become ready");
    }

    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(kubectl_path());
        c.env("KUBECONFIG", self.kubeconfig()).args(args);
        c
    }

    pub fn kubectl_output(&self, args: &[&str]) -> Output {
        self.kubectl_cmd(args)
            .output()
            .expect("kubectl runs (is it installed?)")
    }

    /// The addresses of the `kubernetes` Endpoints and of its EndpointSlice, as this server
    /// serves them (space-separated).
    pub fn kubernetes_endpoints(&self) -> (String, String) {
        let endpoints = self.kubectl(&[
            "-n",
            "default",
            "get",
            "endpoints",
            "kubernetes",
            "-o",
            "jsonpath={.subsets[*].addresses[*].ip}",
        ]);
        let slice = self.kubectl(&[
            "-n",
            "default",
            "get",
            "endpointslice",
            "kubernetes",
            "-o",
            "jsonpath={.endpoints[*].addresses[*]}",
        ]);
        (endpoints, slice)
    }

    /// Runs kubectl and returns stdout; panics with stderr when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_output(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl get <what> -o json` in `ns` ("" for cluster-scoped): the object, or `None` when
    /// it is not found (any other failure panics).
    pub fn get_json(&self, ns: &str, what: &str) -> Option<serde_json::Value> {
        let out = self.kubectl_output(&["-n", ns, "get", what, "-o", "json"]);
        if out.status.success() {
            Some(serde_json::from_slice(&out.stdout).expect("kubectl prints JSON"))
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("NotFound"), "kubectl get {what}: {err}");
            None
        }
    }

    /// Waits until the root CA publisher has put `kube-root-ca.crt` in the namespace (as every
    /// cluster does), so a test that counts the namespace's ConfigMaps knows every one of them.
    pub fn wait_for_root_ca(&self, ns: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self
            .kubectl_output(&["-n", ns, "get", "configmap", ROOT_CA])
            .status
            .success()
        {
            assert!(Instant::now() < deadline, "{ns} has no {ROOT_CA}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn kubectl_fails(&self, args: &[&str]) -> String {
        let out = self.kubectl_output(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should fail but printed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs kubectl with `input` on stdin, whatever its outcome.
    pub fn kubectl_stdin_output(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .kubectl_cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("kubectl finishes")
    }

    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_stdin_output(args, input);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a Python test script with the server's kubeconfig and URL in its environment.
    pub fn python(&self, script: &Path, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg(script)
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("IRONPLANE_URL", &self.url)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{} failed:\n{}\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn kill9(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }

    /// SIGTERM, waits for the exit, and hands back the data directory (for a restart).
    pub fn stop(mut self) -> tempfile::TempDir {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }

    /// SIGTERM, and the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("the server exits")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// A request over HTTPS without a client certificate (the server's certificate is not checked),
/// made with Python's urllib so that nothing of kubectl's gets in the way: `"<status> <body>"`.
pub fn raw_https(url: &str, method: &str, headers: &[(&str, &str)], body: Option<&str>) -> String {
    const SCRIPT: &str = "import json,ssl,sys,urllib.request\n\
ctx=ssl.create_default_context();ctx.check_hostname=False;ctx.verify_mode=ssl.CERT_NONE\n\
body=sys.argv[4].encode() if sys.argv[4] else None\n\
req=urllib.request.Request(sys.argv[1],data=body,method=sys.argv[2],headers=json.loads(sys.argv[3]))\n\
try:\n r=urllib.request.urlopen(req,context=ctx);print(r.status,r.read().decode())\n\
except urllib.error.HTTPError as e:\n print(e.code,e.read().decode())\n";
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let out = Command::new("python3")
        .args(["-c", SCRIPT, url, method])
        .arg(serde_json::Value::Object(headers).to_string())
        .arg(body.unwrap_or(""))
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
