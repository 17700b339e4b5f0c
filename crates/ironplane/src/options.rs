//! Command-line options, with kube-apiserver's flag names where one exists, and their
//! validation. Options say what the user asked; `config` turns them into a server.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "ironplane",
    version,
    about = "A Kubernetes API server: kubectl and client libraries talk to it as to kube-apiserver"
)]
pub struct Options {
    /// Where the embedded store, certificates and the admin kubeconfig live.
    #[arg(long, default_value = "./ironplane-data")]
    pub data_dir: PathBuf,
    /// The port to serve HTTPS on (0 picks a free one).
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// The address the `kubernetes` Service's endpoints advertise to the cluster (default:
    /// --bind-address, or 127.0.0.1 when that is unspecified).
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// Where generated certificates go when --tls-cert-file is not given (default: <data-dir>/pki).
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
    /// Serving certificate (PEM); with --tls-private-key-file replaces the generated one.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA that signs client certificates (default: the generated CA).
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// CSV of static bearer tokens: token,user,uid,"group1,group2".
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Requests without credentials are served as `system:anonymous` (group
    /// `system:unauthenticated`), for the authorizer to judge; `false` answers them 401.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// Authorizers asked in order, comma-separated: `Node`, `RBAC`, `AlwaysAllow`, `AlwaysDeny`
    /// (`ABAC` and `Webhook` are not built yet). Members of `system:masters` are always
    /// allowed. The default is a kubeadm cluster's.
    #[arg(long, value_delimiter = ',', default_value = "Node,RBAC")]
    pub authorization_mode: Vec<String>,
    /// The issuers of service-account tokens (repeatable or comma-separated): the first one
    /// signs, all are accepted.
    #[arg(long, value_delimiter = ',', default_value = ironplane_kube::serviceaccount::DEFAULT_ISSUER)]
    pub service_account_issuer: Vec<String>,
    /// Audiences the API accepts in tokens (default: the issuers).
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// The longest lifetime a TokenRequest gets (0: as asked).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub service_account_max_token_expiration: Duration,
    /// Pod-bound tokens the kubelet asks for (3607 s) last a year, warning after their time.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub service_account_extend_token_expiration: bool,
    /// The range Service cluster IPs come from.
    #[arg(long, default_value = "10.0.0.0/24")]
    pub service_cluster_ip_range: String,
    /// The range Service node ports come from.
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,
    /// Recent events each resource's watch cache keeps for watches that resume from a
    /// resourceVersion; older ones get 410 Expired. 0 disables the watch cache (reads and
    /// watches go to storage). Upstream sizes its caches by time; this is a fixed count.
    #[arg(long, default_value_t = 10_000)]
    pub default_watch_cache_size: usize,
    /// Read-only requests served at once beyond which the server answers 429 (0: no limit);
    /// watches and system:masters are exempt.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Writes served at once beyond which the server answers 429 (0: no limit).
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// Audit policy (`audit.k8s.io/v1` Policy, YAML); with --audit-log-path, requests are
    /// audited at the levels it gives.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// Where audit events go, one JSON line each (`-` is standard output).
    #[arg(long)]
    pub audit_log_path: Option<String>,
    /// Admission plugins' configuration (`AdmissionConfiguration`, apiserver.config.k8s.io/v1
    /// or apiserver.k8s.io/v1alpha1, YAML or JSON): per plugin, an inline `configuration` or a
    /// `path` to a file. PodSecurity reads its `PodSecurityConfiguration` from it.
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
    /// Admission plugins to turn on besides the default ones (comma-separated upstream names,
    /// e.g. `NamespaceLifecycle,LimitRanger`). The order does not matter: plugins always run
    /// in upstream's order.
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// Admission plugins to turn off, even default ones (comma-separated upstream names).
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
    /// The prefix of every storage key.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
    /// How often the store's history is compacted: revisions older than the previous interval
    /// become too old to read or watch from (410). 0 turns compaction off.
    #[arg(long, default_value = "5m0s", value_parser = parse_duration)]
    pub etcd_compaction_interval: Duration,
    /// After SIGTERM, how long /readyz fails before the server stops accepting (e.g. 5s).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay_duration: Duration,
    /// Log verbosity, as kube-apiserver's -v: 0-1 info, 2-4 debug, 5+ trace.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

/// Go-style durations: `500ms`, `5s`, `2m`, `1h`, or combinations like `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest == "0" {
        return Ok(total);
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("missing unit in duration {s:?}"))?;
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += Duration::from_secs_f64(secs);
        rest = tail;
    }
    Ok(total)
}

impl Options {
    /// Checks what can be checked before anything is created.
    pub fn validate(&self) -> Result<(), String> {
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            return Err("--tls-cert-file and --tls-private-key-file must be given together".into());
        }
        if !self.etcd_prefix.starts_with('/') {
            return Err(format!(
                "--etcd-prefix must start with '/': {:?}",
                self.etcd_prefix
            ));
        }
        ironplane_kube::ServiceIpAllocator::new(
            &self.service_cluster_ip_range,
            &self.service_node_port_range,
        )?;
        self.admission_plugins()?;
        apiserver::authorization::validate_modes(&self.authorization_mode)?;
        if let Some(mode) = self
            .authorization_mode
            .iter()
            .find(|m| matches!(m.as_str(), "ABAC" | "Webhook"))
        {
            return Err(format!(
                "authorization-mode {mode:?} is not supported by this server yet"
            ));
        }
        Ok(())
    }

    /// The admission plugins that run, in upstream's order, from `--enable-admission-plugins`
    /// and `--disable-admission-plugins`.
    pub fn admission_plugins(&self) -> Result<Vec<&'static str>, String> {
        ironplane_kube::admission::plugins::enabled_plugins(
            &self.enable_admission_plugins,
            &self.disable_admission_plugins,
        )
    }

    /// The service-account token options.
    pub fn token_options(&self) -> ironplane_kube::serviceaccount::TokenOptions {
        let audiences = if self.api_audiences.is_empty() {
            self.service_account_issuer.clone()
        } else {
            self.api_audiences.clone()
        };
        ironplane_kube::serviceaccount::TokenOptions {
            issuers: self.service_account_issuer.clone(),
            api_audiences: audiences,
            max_expiration: Some(self.service_account_max_token_expiration)
                .filter(|d| !d.is_zero()),
            extend_expiration: self.service_account_extend_token_expiration,
        }
    }

    /// `--advertise-address`, else the bind address, else loopback.
    pub fn advertise_address(&self) -> IpAddr {
        match self.advertise_address {
            Some(a) if !a.is_unspecified() => a,
            _ if !self.bind_address.is_unspecified() => self.bind_address,
            _ => IpAddr::from([127, 0, 0, 1]),
        }
    }

    pub fn cert_dir(&self) -> PathBuf {
        self.cert_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("pki"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5").is_err());
    }

    #[test]
    fn flags_keep_upstream_names() {
        let o = Options::try_parse_from([
            "ironplane",
            "--secure-port",
            "0",
            "--service-cluster-ip-range",
            "10.96.0.0/16",
            "-v",
            "2",
        ])
        .unwrap();
        assert_eq!(o.secure_port, 0);
        assert_eq!(o.verbosity, 2);
        o.validate().unwrap();
        let bad = Options::try_parse_from(["ironplane", "--tls-cert-file", "x"]).unwrap();
        assert!(bad.validate().is_err());
    }
}
