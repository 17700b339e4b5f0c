//! Test support: a real single-member etcd on loopback ports, started and stopped by the tests
//! that need one (the storage conformance suite on [`crate::EtcdKv`], the server's end-to-end
//! tests). It runs the installed `etcd` (Debian's `etcd-server`); when there is none it fails
//! loudly, never skips.
//!
//! Nothing in the server uses this module.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A running etcd; killed, and its data directory removed, on drop.
pub struct EtcdServer {
    child: Option<Child>,
    /// The client URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    client_port: u16,
    peer_port: u16,
    dir: PathBuf,
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

impl EtcdServer {
    /// Starts a fresh etcd in a new temporary directory and waits until it serves.
    pub fn start() -> Result<EtcdServer, String> {
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
        let mut server = EtcdServer {
            child: None,
            url: String::new(),
            client_port: 0,
            peer_port: 0,
            dir,
        };
        // Another process may take a port between our probe and etcd's bind: try again then.
        let mut last_error = String::new();
        for _ in 0..5 {
            server.client_port = free_port()?;
            server.peer_port = free_port()?;
            server.url = format!("http://127.0.0.1:{}", server.client_port);
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(err) => last_error = err,
            }
        }
        Err(last_error)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(self.dir.join("etcd.log")).map_err(|e| e.to_string())?;
        let child = Command::new(etcd_binary()?)
            .arg("--name=test")
            .arg(format!("--data-dir={}", self.dir.join("data").display()))
            .arg(format!("--listen-client-urls={}", self.url))
            .arg(format!("--advertise-client-urls={}", self.url))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting etcd: {e}"))?;
        self.child = Some(child);
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
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }

    /// Kills etcd (as `kill -9`); its data stays for [`EtcdServer::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports and data.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }

    /// Where etcd keeps its files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
