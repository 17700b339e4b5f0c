//! An in-process Ironplane for tests: a fresh data directory, an ephemeral loopback port, the
//! admin kubeconfig, and a clean stop when dropped.

use std::path::PathBuf;

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
        let opts = Options {
            data_dir: dir.path().to_path_buf(),
            secure_port: 0,
            bind_address: "127.0.0.1".parse().expect("an address"),
            advertise_address: None,
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            token_auth_file: None,
            anonymous_auth: true,
            service_account_issuer: vec![ironplane_kube::serviceaccount::DEFAULT_ISSUER.into()],
            api_audiences: Vec::new(),
            service_account_max_token_expiration: std::time::Duration::ZERO,
            service_account_extend_token_expiration: true,
            authorization_mode: vec!["Node".into(), "RBAC".into()],
            service_cluster_ip_range: "10.0.0.0/24".into(),
            service_node_port_range: "30000-32767".into(),
            etcd_prefix: "/registry".into(),
            etcd_compaction_interval: std::time::Duration::from_secs(300),
            default_watch_cache_size: 10_000,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            audit_policy_file: None,
            audit_log_path: None,
            admission_control_config_file: None,
            enable_admission_plugins: Vec::new(),
            disable_admission_plugins: Vec::new(),
            shutdown_delay_duration: std::time::Duration::ZERO,
            verbosity: 0,
        };
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
