//! An in-process Ironplane for tests: a fresh data directory, an ephemeral loopback port, the
//! admin kubeconfig, and a clean stop when dropped.

use std::path::PathBuf;

use clap::Parser;

use crate::{Options, Running};

pub struct TestServer {
    pub kubeconfig: PathBuf,
    pub url: String,
    pub data_dir: PathBuf,
    running: Option<Running>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server and waits until `/readyz` would answer 200.
    pub async fn start() -> TestServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut args: Vec<std::ffi::OsString> = ["ironplane", "--secure-port", "0", "--data-dir"]
            .map(Into::into)
            .into();
        args.push(dir.path().into());
        let opts = Options::parse_from(args);
        let running = crate::start(opts).await.expect("the test server starts");
        tokio::time::timeout(std::time::Duration::from_secs(30), running.ready())
            .await
            .expect("the post-start hooks finish within 30 s");
        let url = format!("https://{}", running.addr);
        TestServer {
            kubeconfig: running.kubeconfig.clone(),
            url,
            data_dir: dir.path().to_path_buf(),
            running: Some(running),
            _dir: dir,
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}
