//! Test support: real etcd members on loopback ports, started and stopped by the tests that need
//! them (the storage conformance suite on [`crate::EtcdKv`], the server's end-to-end tests): one
//! member ([`EtcdServer::start`]) or a cluster of several ([`EtcdServer::start_cluster`]), each
//! of which a test may kill, freeze ([`EtcdServer::pause`]) and bring back on the same data and
//! ports. It runs the installed `etcd` (Debian's `etcd-server`); when there is none it fails
//! loudly, never skips.
//!
//! Nothing in the server uses this module.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::etcd::{EtcdKv, EtcdOptions};
use crate::kv::{Kv, prefix_end};

/// A running etcd member; killed, and its data directory removed, on drop.
pub struct EtcdServer {
    child: Option<Child>,
    /// The client URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    client_port: u16,
    /// The member's name and its peer URL in `--initial-cluster`.
    name: String,
    peer_url: String,
    /// `--initial-cluster`: every member's `name=peer-url`.
    initial_cluster: String,
    dir: PathBuf,
    /// Flags beyond the ones every member gets (e.g. `--max-request-bytes=…`).
    extra_args: Vec<String>,
}

/// The etcd binary: `$ETCD_BIN`, else `etcd` on the PATH.
fn etcd_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("ETCD_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            "etcd is not installed (the etcd tests need a real etcd: apt-get install -y etcd-server)"
                .to_string()
        })
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding a port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// A new, empty directory for one member's files.
fn member_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // Memory-backed when the machine has one: etcd fsyncs every commit.
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!(
        "ironplane-etcd-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

impl EtcdServer {
    /// Starts a fresh single-member etcd in a new temporary directory and waits until it serves.
    pub fn start() -> Result<EtcdServer, String> {
        Ok(Self::start_cluster(1)?.remove(0))
    }

    /// As [`EtcdServer::start`], with etcd flags of the test's own.
    pub fn start_with(extra_args: &[&str]) -> Result<EtcdServer, String> {
        Ok(Self::start_members(1, extra_args)?.remove(0))
    }

    /// Starts a fresh cluster of `size` members on loopback (`--initial-cluster` naming them
    /// all) and waits until every member serves, which needs a leader elected by a quorum.
    pub fn start_cluster(size: usize) -> Result<Vec<EtcdServer>, String> {
        Self::start_members(size, &[])
    }

    fn start_members(size: usize, extra_args: &[&str]) -> Result<Vec<EtcdServer>, String> {
        // Another process may take a port between our probe and etcd's bind: try again then.
        let mut last_error = String::new();
        for _ in 0..5 {
            let mut members = Vec::with_capacity(size);
            for index in 0..size {
                let client_port = free_port()?;
                members.push(EtcdServer {
                    child: None,
                    url: format!("http://127.0.0.1:{client_port}"),
                    client_port,
                    name: format!("member{index}"),
                    peer_url: format!("http://127.0.0.1:{}", free_port()?),
                    initial_cluster: String::new(),
                    dir: member_dir()?,
                    extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
                });
            }
            let initial_cluster = members
                .iter()
                .map(|m| format!("{}={}", m.name, m.peer_url))
                .collect::<Vec<_>>()
                .join(",");
            let mut started = Ok(());
            for member in &mut members {
                member.initial_cluster = initial_cluster.clone();
                started = started.and_then(|()| member.launch());
            }
            match started.and_then(|()| {
                members
                    .iter_mut()
                    .try_for_each(|member| member.wait_healthy())
            }) {
                Ok(()) => return Ok(members),
                Err(err) => last_error = err,
            }
        }
        Err(last_error)
    }

    /// Spawns the member's process (it serves once a quorum of the cluster runs).
    fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.join("etcd.log")).map_err(|e| e.to_string())?;
        let child = Command::new(etcd_binary()?)
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.dir.join("data").display()))
            .arg(format!("--listen-client-urls={}", self.url))
            .arg(format!("--advertise-client-urls={}", self.url))
            .arg(format!("--listen-peer-urls={}", self.peer_url))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer_url))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg("--initial-cluster-token=ironplane-test")
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting etcd: {e}"))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits up to 20 s for the member to serve; kills it when it does not.
    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
                return Err(format!("etcd exited with {status}: {log}"));
            }
            if self.healthy() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        Err("etcd did not become healthy within 20s".into())
    }

    /// etcd's `/health` endpoint answers `"health":"true"` once it has a leader.
    fn healthy(&self) -> bool {
        self.http("GET /health", "")
            .is_some_and(|answer| answer.contains("\"health\":\"true\""))
    }

    /// Whether this member is the cluster's leader (its status, read through etcd's JSON
    /// gateway, names itself as leader).
    pub fn is_leader(&self) -> bool {
        let Some(answer) = self.http("POST /v3/maintenance/status", "{}") else {
            return false;
        };
        let Some((_, body)) = answer.split_once("\r\n\r\n") else {
            return false;
        };
        let Ok(status) = serde_json::from_str::<serde_json::Value>(body) else {
            return false;
        };
        let member = &status["header"]["member_id"];
        !member.is_null() && *member == status["leader"]
    }

    /// One plain HTTP/1.0 request to the member's client port (`"<method> <path>"`): the whole
    /// answer, or `None` when it cannot be reached.
    fn http(&self, request_line: &str, body: &str) -> Option<String> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.client_port)).ok()?;
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!(
            "{request_line} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        Some(answer)
    }

    /// Kills the member (as `kill -9`); its data stays for [`EtcdServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A frozen process dies of SIGKILL too.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the member (SIGSTOP): its sockets stay open and accept connections, but nothing
    /// answers, as a hung machine does, until [`EtcdServer::resume`].
    pub fn pause(&self) -> Result<(), String> {
        self.signal("-STOP")
    }

    /// Thaws a member frozen by [`EtcdServer::pause`] (SIGCONT).
    pub fn resume(&self) -> Result<(), String> {
        self.signal("-CONT")
    }

    fn signal(&self, signal: &str) -> Result<(), String> {
        let child = self.child.as_ref().ok_or("etcd is not running")?;
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .map_err(|e| format!("kill {signal}: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("kill {signal} failed: {status}"))
    }

    /// Starts the member again on the same ports and data, and waits until it serves (in a
    /// cluster: until it has a leader again).
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.launch()?;
        self.wait_healthy()
    }

    /// Where the member keeps its files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every key and value stored under `prefix`, read with the etcd client (a quorum read
    /// through this member). For synchronous tests: it runs its own runtime.
    pub fn raw_values(&self, prefix: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime: {e}"))?;
        runtime.block_on(async {
            let options = EtcdOptions {
                servers: vec![self.url.clone()],
                ..Default::default()
            };
            let kv = EtcdKv::connect(&options)
                .await
                .map_err(|e| format!("connecting to etcd: {e}"))?;
            let found = kv
                .range(prefix, &prefix_end(prefix), 0, 0)
                .await
                .map_err(|e| format!("reading {prefix}: {e}"))?;
            Ok(found
                .kvs
                .into_iter()
                .map(|kv| (kv.key, kv.value.to_vec()))
                .collect())
        })
    }

    /// Every key stored under `prefix` (see [`EtcdServer::raw_values`]).
    pub fn raw_keys(&self, prefix: &str) -> Result<BTreeSet<String>, String> {
        Ok(self.raw_values(prefix)?.into_keys().collect())
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
