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
    /// `system:unauthenticated`), for the authorizer to judge; `false` answers them 401
    /// (default true; not with an `anonymous` section in --authentication-config).
    #[arg(long, action = clap::ArgAction::Set)]
    pub anonymous_auth: Option<bool>,
    /// CA (PEM) of the client certificates of front proxies, whose requests name their user in
    /// the `--requestheader-*-headers` headers.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// Common names a front proxy's certificate may have (any, when empty).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers that name the user, first non-empty wins (kubeadm: X-Remote-User).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_username_headers: Vec<String>,
    /// Headers that name the user's uid (kubeadm: X-Remote-Uid).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers that name the user's groups (kubeadm: X-Remote-Group).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_group_headers: Vec<String>,
    /// Prefixes of headers that give the user's extra (kubeadm: X-Remote-Extra-).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// Client certificate (PEM) the aggregation proxy presents to extension API servers, which
    /// trust it through --requestheader-client-ca-file; with --proxy-client-key-file.
    #[arg(long)]
    pub proxy_client_cert_file: Option<PathBuf>,
    /// The key of --proxy-client-cert-file.
    #[arg(long)]
    pub proxy_client_key_file: Option<PathBuf>,
    /// Accepted for kube-apiserver's command lines: Ironplane always proxies to an endpoint of
    /// the APIService's Service (nothing routes cluster IPs here).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_aggregator_routing: bool,
    /// Bootstrap tokens (`<id>.<secret>`, Secrets `bootstrap-token-<id>` of type
    /// `bootstrap.kubernetes.io/token` in kube-system) authenticate, as kubeadm's TLS
    /// bootstrapping uses them.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_bootstrap_token_auth: bool,
    /// Structured authentication configuration (`AuthenticationConfiguration`,
    /// apiserver.config.k8s.io/v1): JWT issuers with claim mappings and validation rules in CEL,
    /// anonymous settings. Not with the --oidc-* flags.
    #[arg(long)]
    pub authentication_config: Option<String>,
    /// The URL of an OpenID issuer (https) whose ID tokens authenticate; with --oidc-client-id.
    #[arg(long, default_value = "")]
    pub oidc_issuer_url: String,
    /// The audience the issuer's tokens must name.
    #[arg(long, default_value = "")]
    pub oidc_client_id: String,
    /// CA certificates (PEM) that sign the issuer's serving certificate (default: the system's).
    #[arg(long, default_value = "")]
    pub oidc_ca_file: String,
    /// The claim that names the user; claims other than `email` are prefixed with
    /// `<issuer>#` unless --oidc-username-prefix says otherwise.
    #[arg(long, default_value = "sub")]
    pub oidc_username_claim: String,
    /// Prefix of user names (`-`: none).
    #[arg(long, default_value = "")]
    pub oidc_username_prefix: String,
    /// The claim that lists the user's groups (a string or a list of strings).
    #[arg(long, default_value = "")]
    pub oidc_groups_claim: String,
    /// Prefix of group names.
    #[arg(long, default_value = "")]
    pub oidc_groups_prefix: String,
    /// Accepted signing algorithms (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "RS256")]
    pub oidc_signing_algs: Vec<String>,
    /// `claim=value` a token must carry (repeatable).
    #[arg(long)]
    pub oidc_required_claim: Vec<String>,
    /// Kubeconfig of a webhook that authenticates bearer tokens (TokenReview).
    #[arg(long)]
    pub authentication_token_webhook_config_file: Option<String>,
    /// The TokenReview version sent to the webhook: `v1` or `v1beta1`.
    #[arg(long, default_value = "v1beta1")]
    pub authentication_token_webhook_version: String,
    /// How long the webhook's answers are cached.
    #[arg(long, default_value = "2m0s", value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// Authorizers asked in order, comma-separated: `Node`, `RBAC`, `ABAC`, `Webhook`,
    /// `AlwaysAllow`, `AlwaysDeny`. Members of `system:masters` are always allowed.
    /// The default is a kubeadm cluster's, `Node,RBAC`. Not with --authorization-config.
    #[arg(long, value_delimiter = ',')]
    pub authorization_mode: Vec<String>,
    /// The `ABAC` mode's policies: one JSON `Policy` per line.
    #[arg(long)]
    pub authorization_policy_file: Option<String>,
    /// Structured authorization configuration (`AuthorizationConfiguration`,
    /// apiserver.config.k8s.io/v1): ordered authorizers, webhooks with match conditions in CEL,
    /// caching and failure policy.
    #[arg(long)]
    pub authorization_config: Option<String>,
    /// Kubeconfig of the `Webhook` mode's SubjectAccessReview webhook.
    #[arg(long)]
    pub authorization_webhook_config_file: Option<String>,
    /// The SubjectAccessReview version sent to the webhook: `v1` or `v1beta1`.
    #[arg(long)]
    pub authorization_webhook_version: Option<String>,
    /// How long the webhook's allowed answers are cached (default 5m0s).
    #[arg(long, value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Option<Duration>,
    /// How long the webhook's other answers are cached (default 30s).
    #[arg(long, value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Option<Duration>,
    /// The issuers of service-account tokens (repeatable or comma-separated): the first one
    /// signs, all are accepted.
    #[arg(long, value_delimiter = ',', default_value = ironplane_kube::serviceaccount::DEFAULT_ISSUER)]
    pub service_account_issuer: Vec<String>,
    /// The private key (PEM: RSA, or ECDSA P-256/P-384) that signs service-account tokens
    /// (default: the data directory's generated P-256 key).
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Files of public keys (PEM: public keys, certificates or private keys) that verify
    /// service-account tokens (repeatable; default: the signing key's public half).
    #[arg(long)]
    pub service_account_key_file: Vec<PathBuf>,
    /// The key set's address in the issuer's discovery document (default: this server's
    /// `/openid/v1/jwks`).
    #[arg(long)]
    pub service_account_jwks_uri: Option<String>,
    /// Audiences the API accepts in tokens (default: the issuers).
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
    /// The longest lifetime a TokenRequest gets (0: as asked).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub service_account_max_token_expiration: Duration,
    /// Pod-bound tokens the kubelet asks for (3607 s) last a year, warning after their time.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub service_account_extend_token_expiration: bool,
    /// The longest lifetime of certificates the in-process csrsigning controller issues, and the
    /// lifetime of those whose request asks none (kube-controller-manager's flag).
    #[arg(long, default_value = "8760h0m0s", value_parser = parse_duration)]
    pub cluster_signing_duration: Duration,
    /// How long an auto-generated legacy service account token goes unused before the
    /// in-process legacy token cleaner marks it invalid, and how long it stays invalid before
    /// it is deleted (kube-controller-manager's flag; a year by default).
    #[arg(long, default_value = "8760h0m0s", value_parser = parse_duration)]
    pub legacy_service_account_token_clean_up_period: Duration,
    /// The controllers Ironplane runs in-process, with kube-controller-manager's syntax and
    /// names: `*` (every controller on by default), `name` (on), `-name` (off), comma-separated.
    /// Every kube-controller-manager name is accepted; controllers Ironplane does not implement
    /// (workloads, nodes, volumes) are left to a kube-controller-manager beside it.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Start a leader election client and gain leadership before running the in-process
    /// controllers (kube-controller-manager's flag). Only on etcd, where several servers may
    /// run: the embedded store serves one process, which runs them without an election.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership renewal
    /// until attempting to acquire leadership of a led but unrenewed leader slot.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// The interval between attempts by the acting master to renew a leadership slot before it
    /// stops leading. This must be less than the lease duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// The duration the clients should wait between attempting acquisition and renewal of a
    /// leadership.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// The type of resource object that is used for locking during leader election. Supported
    /// options are 'leases'.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// The name of the Lease the in-process controllers elect on: not kube-controller-manager's
    /// `kube-controller-manager`, so that a real controller manager beside Ironplane is not
    /// kept waiting by it.
    #[arg(long, default_value = ironplane_kube::leader_election::DEFAULT_RESOURCE_NAME)]
    pub leader_elect_resource_name: String,
    /// The namespace of the Lease.
    #[arg(long, default_value = ironplane_kube::leader_election::DEFAULT_RESOURCE_NAMESPACE)]
    pub leader_elect_resource_namespace: String,
    /// The range Service cluster IPs come from.
    #[arg(long, default_value = "10.0.0.0/24")]
    pub service_cluster_ip_range: String,
    /// The range Service node ports come from.
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,
    /// The most recent events each resource's watch cache keeps for watches that resume from a
    /// resourceVersion; older ones get 410 Expired. Within it the cache keeps the last 75 s of
    /// events (at least 100), as upstream sizes its caches by time. 0 disables the watch cache
    /// (reads and watches go to storage).
    #[arg(long, default_value_t = 10_000)]
    pub default_watch_cache_size: usize,
    /// How long readiness waits for the watch caches to be filled before it stops waiting
    /// (the `storage-readiness` hook).
    #[arg(long, default_value = "1m0s", value_parser = parse_duration)]
    pub storage_initialization_timeout: Duration,
    /// The limit that the server gives to clients for the maximum number of streams in an
    /// HTTP/2 connection. Zero means kube-apiserver's default, 100 (what Go's clients assume
    /// before the server's settings arrive).
    #[arg(long, default_value_t = 0)]
    pub http2_max_streams_per_connection: u32,
    /// Read-only requests served at once beyond which the server answers 429 (0: no limit);
    /// watches and system:masters are exempt.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Writes served at once beyond which the server answers 429 (0: no limit).
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// If true, replace the max-in-flight handler with an enhanced one that queues and
    /// dispatches with priority and fairness (then --max-requests-inflight plus
    /// --max-mutating-requests-inflight is the server's concurrency limit, shared by the
    /// priority levels).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub enable_priority_and_fairness: bool,
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
    /// The media type built-in objects are stored in: application/json, application/yaml or
    /// application/vnd.kubernetes.protobuf (kube-apiserver's default). Custom resources are
    /// always stored as JSON, and values of every media type are read whatever this says.
    /// Default: protobuf on etcd, so that kube-apiserver reads the same data; JSON on the
    /// embedded store, where it was measured faster (BENCHMARKS.md).
    #[arg(long)]
    pub storage_media_type: Option<String>,
    /// How often the store's history is compacted: revisions older than the previous interval
    /// become too old to read or watch from (410). 0 turns compaction off.
    #[arg(long, default_value = "5m0s", value_parser = parse_duration)]
    pub etcd_compaction_interval: Duration,
    /// The etcd servers to keep the state in (comma-separated `http(s)://host:port`), instead
    /// of the embedded store in --data-dir. Keys are upstream's (`<--etcd-prefix>/<resource>/
    /// <namespace>/<name>`), so several servers can share one etcd cluster.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Per-resource etcd servers overrides, comma separated. The individual override format:
    /// group/resource#servers, where servers are URLs, semicolon separated. Note that this
    /// applies only to built-in resources. e.g. "/pods#http://etcd4:2379;http://etcd5:2379,
    /// /events#http://etcd6:2379"
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers_overrides: Vec<String>,
    /// How the `kubernetes` Service's endpoints are kept: `lease` (on etcd, every server sharing
    /// it, each keeping a lease under `<--etcd-prefix>/masterleases/`; on the embedded store,
    /// this server), `master-count` (upstream's deprecated reconciler: each server adds its
    /// address and trims the list to --apiserver-count), or `none` (not written).
    #[arg(long, default_value = "lease", value_parser = ["master-count", "lease", "none"])]
    pub endpoint_reconciler_type: String,
    /// The number of apiservers running in the cluster, must be a positive number. (In use when
    /// --endpoint-reconciler-type=master-count is enabled.) Deprecated upstream.
    #[arg(long, allow_hyphen_values = true)]
    pub apiserver_count: Option<i64>,
    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// The timeout to use when checking etcd health (the `etcd` check of /livez and /readyz).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub etcd_healthcheck_timeout: Duration,
    /// The timeout to use when checking etcd readiness (the `etcd-readiness` check of /readyz).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub etcd_readycheck_timeout: Duration,
    /// The file containing configuration for encryption providers to be used for storing
    /// secrets (an `EncryptionConfiguration`, apiserver.config.k8s.io/v1), in either backend.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,
    /// Determines if the file set by --encryption-provider-config should be automatically
    /// reloaded if the disk contents change. Setting this to true disables the ability to
    /// uniquely identify distinct KMS plugins via the API server healthz endpoints.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub encryption_provider_config_automatic_reload: bool,
    /// How often the automatic reload reads the file (upstream's one minute; its integration
    /// tests shorten it, as ours do with this hidden flag).
    #[arg(long, hide = true, default_value = "1m0s", value_parser = parse_duration)]
    pub encryption_provider_config_reload_interval: Duration,
    /// After SIGTERM, how long /readyz fails before the server stops accepting (e.g. 5s).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay_duration: Duration,
    /// Log verbosity, as kube-apiserver's -v: 0-1 info, 2-4 debug, 5+ trace; request lines
    /// (httplog) from 3.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
    /// How logs are written: `text` (klog's lines) or `json` (component-base's JSON lines).
    #[arg(long, value_enum, default_value = "text")]
    pub logging_format: crate::logging::Format,
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
        if self.enable_priority_and_fairness
            && self.max_requests_inflight + self.max_mutating_requests_inflight == 0
        {
            return Err(format!(
                "invalid configuration: MaxRequestsInFlight={} and MaxMutatingRequestsInFlight={}; they must add up to something positive",
                self.max_requests_inflight, self.max_mutating_requests_inflight
            ));
        }
        if let Some(count) = self.apiserver_count.filter(|c| *c <= 0) {
            return Err(format!(
                "--apiserver-count should be a positive number, but value '{count}' provided"
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            return Err("--tls-cert-file and --tls-private-key-file must be given together".into());
        }
        if self.proxy_client_cert_file.is_some() != self.proxy_client_key_file.is_some() {
            return Err(
                "--proxy-client-cert-file and --proxy-client-key-file must be given together"
                    .into(),
            );
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
        self.storage_media_type(false)?;
        if self.encryption_provider_config_automatic_reload
            && self.encryption_provider_config.is_none()
        {
            return Err("--encryption-provider-config-automatic-reload must be set with --encryption-provider-config".into());
        }
        if self
            .controller_selection()?
            .enabled("legacy-serviceaccount-token-cleaner-controller")
        {
            ironplane_kube::controllers::legacy_token_cleaner::check_period(
                self.legacy_service_account_token_clean_up_period,
            )?;
        }
        self.validate_authorization()?;
        self.validate_authentication()?;
        self.leader_election()?;
        self.etcd_servers_overrides()?;
        Ok(())
    }

    /// `--etcd-servers-overrides` as upstream parses it: `(group, resource, servers)` each.
    pub fn etcd_servers_overrides(&self) -> Result<Vec<(String, String, Vec<String>)>, String> {
        const INVALID: &str = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated";
        let mut overrides = Vec::new();
        for o in &self.etcd_servers_overrides {
            let tokens: Vec<&str> = o.split('#').collect();
            let [resource, servers] = tokens[..] else {
                return Err(INVALID.into());
            };
            let Some((group, resource)) = resource.split_once('/') else {
                return Err(INVALID.into());
            };
            if resource.contains('/') {
                return Err(INVALID.into());
            }
            let servers: Vec<String> = servers.split(';').map(String::from).collect();
            if servers.iter().any(String::is_empty) {
                return Err(INVALID.into());
            }
            overrides.push((group.to_string(), resource.to_string(), servers));
        }
        if !overrides.is_empty() && self.etcd_servers.is_empty() {
            return Err("--etcd-servers must be specified".into());
        }
        Ok(overrides)
    }

    /// The in-process controllers' leader election, `None` when they run without one
    /// (--leader-elect=false, or the embedded store). The flags are checked as
    /// kube-controller-manager checks them: component-base's configuration checks, then
    /// client-go's lock type and `NewLeaderElector`'s.
    pub fn leader_election(
        &self,
    ) -> Result<Option<ironplane_kube::leader_election::Config>, String> {
        if !self.leader_elect {
            return Ok(None);
        }
        let mut errors = Vec::new();
        let path = "leaderElection";
        for (field, value) in [
            ("leaseDuration", self.leader_elect_lease_duration),
            ("renewDeadline", self.leader_elect_renew_deadline),
            ("retryPeriod", self.leader_elect_retry_period),
        ] {
            if value.is_zero() {
                errors.push(format!(
                    "{path}.{field}: Invalid value: \"{}\": must be greater than zero",
                    apimachinery::duration::go_string(value)
                ));
            }
        }
        if self.leader_elect_lease_duration <= self.leader_elect_renew_deadline {
            errors.push(format!(
                "{path}.leaseDuration: Invalid value: \"{}\": must be greater than `RenewDeadline`",
                apimachinery::duration::go_string(self.leader_elect_renew_deadline)
            ));
        }
        for (field, value) in [
            ("resourceLock", &self.leader_elect_resource_lock),
            ("resourceNamespace", &self.leader_elect_resource_namespace),
            ("resourceName", &self.leader_elect_resource_name),
        ] {
            if value.is_empty() {
                errors.push(format!("{path}.{field}: Required value"));
            }
        }
        match errors.len() {
            0 => {}
            1 => return Err(errors.remove(0)),
            _ => return Err(format!("[{}]", errors.join(", "))),
        }
        match self.leader_elect_resource_lock.as_str() {
            "leases" => {}
            lock @ ("endpoints" | "configmaps" | "endpointsleases") => {
                return Err(format!("{lock} lock is removed, migrate to leases"));
            }
            "configmapsleases" => {
                return Err("configmapsleases lock is removed, migrated to leases".into());
            }
            other => return Err(format!("Invalid lock-type {other}")),
        }
        let config = ironplane_kube::leader_election::Config {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            namespace: self.leader_elect_resource_namespace.clone(),
            name: self.leader_elect_resource_name.clone(),
            identity: ironplane_kube::leader_election::identity(),
        };
        config.validate()?;
        Ok(Some(config))
    }

    /// `--storage-media-type`, checked as upstream checks it, or the backend's default when it
    /// is not given: upstream's protobuf on etcd (`on_etcd`), so that kube-apiserver can read
    /// what Ironplane writes, and JSON on the embedded store.
    pub fn storage_media_type(&self, on_etcd: bool) -> Result<storage::StorageMediaType, String> {
        match &self.storage_media_type {
            Some(value) => storage::StorageMediaType::parse(value),
            None if on_etcd => Ok(storage::StorageMediaType::Protobuf),
            None => Ok(storage::StorageMediaType::Json),
        }
    }

    /// `--controllers`, checked as kube-controller-manager checks it.
    pub fn controller_selection(
        &self,
    ) -> Result<ironplane_kube::controllers::selection::Selection, String> {
        ironplane_kube::controllers::selection::Selection::parse(&self.controllers)
            .map_err(|errs| errs.join(", "))
    }

    /// `--authorization-mode` (default `Node,RBAC`).
    pub fn authorization_modes(&self) -> Vec<String> {
        if self.authorization_mode.is_empty() {
            vec!["Node".into(), "RBAC".into()]
        } else {
            self.authorization_mode.clone()
        }
    }

    fn authorization_webhook_flags_set(&self) -> bool {
        self.authorization_webhook_config_file.is_some()
            || self.authorization_webhook_version.is_some()
            || self.authorization_webhook_cache_authorized_ttl.is_some()
            || self.authorization_webhook_cache_unauthorized_ttl.is_some()
    }

    /// Upstream's checks of the authorization flags.
    fn validate_authorization(&self) -> Result<(), String> {
        if self.authorization_config.is_some() {
            if !self.authorization_mode.is_empty() {
                return Err(
                    "--authorization-config can not be passed together with --authorization-mode"
                        .into(),
                );
            }
            if self.authorization_webhook_flags_set() {
                return Err("--authorization-config can not be passed together with --authorization-webhook-* flags".into());
            }
            return Ok(());
        }
        let modes = self.authorization_modes();
        apiserver::authorization::validate_modes(&modes)?;
        let abac = modes.iter().any(|m| m == "ABAC");
        if abac && self.authorization_policy_file.is_none() {
            return Err("authorization-mode ABAC's authorization policy file not passed".into());
        }
        if !abac && self.authorization_policy_file.is_some() {
            return Err("cannot specify --authorization-policy-file without mode ABAC".into());
        }
        let webhook = modes.iter().any(|m| m == "Webhook");
        if webhook && self.authorization_webhook_config_file.is_none() {
            return Err("authorization-mode Webhook's authorization config file not passed".into());
        }
        if !webhook && self.authorization_webhook_config_file.is_some() {
            return Err(
                "cannot specify --authorization-webhook-config-file without mode Webhook".into(),
            );
        }
        Ok(())
    }

    fn oidc_flags_set(&self) -> bool {
        !self.oidc_issuer_url.is_empty()
            || !self.oidc_client_id.is_empty()
            || !self.oidc_ca_file.is_empty()
            || self.oidc_username_claim != "sub"
            || !self.oidc_username_prefix.is_empty()
            || !self.oidc_groups_claim.is_empty()
            || !self.oidc_groups_prefix.is_empty()
            || self.oidc_signing_algs != ["RS256"]
            || !self.oidc_required_claim.is_empty()
    }

    /// Upstream's checks of the authentication flags.
    fn validate_authentication(&self) -> Result<(), String> {
        if self.authentication_config.is_some() {
            if self.oidc_flags_set() {
                return Err(
                    "authentication-config file and oidc-* flags are mutually exclusive".into(),
                );
            }
        } else if self.oidc_flags_set()
            && (self.oidc_issuer_url.is_empty() || self.oidc_client_id.is_empty())
        {
            return Err("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set".into());
        }
        for alg in &self.oidc_signing_algs {
            if !apiserver::authentication::jwt::keys::ALL_ALGORITHMS.contains(&alg.as_str()) {
                return Err(format!("oidc: unsupported signing alg: {alg:?}"));
            }
        }
        if let Some(bad) = self.oidc_required_claim.iter().find(|c| !c.contains('=')) {
            return Err(format!(
                "invalid argument {bad:?} for \"--oidc-required-claim\" flag: {bad} must be formatted as key=value"
            ));
        }
        Ok(())
    }

    /// What the `--oidc-*` flags say.
    pub fn oidc_flags(&self) -> apiserver::authentication::jwt::config::OidcFlags {
        apiserver::authentication::jwt::config::OidcFlags {
            issuer_url: self.oidc_issuer_url.clone(),
            client_id: self.oidc_client_id.clone(),
            ca_file: self.oidc_ca_file.clone(),
            username_claim: self.oidc_username_claim.clone(),
            username_prefix: self.oidc_username_prefix.clone(),
            groups_claim: self.oidc_groups_claim.clone(),
            groups_prefix: self.oidc_groups_prefix.clone(),
            required_claims: self
                .oidc_required_claim
                .iter()
                .filter_map(|c| c.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
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
            jwks_uri: self.service_account_jwks_uri.clone(),
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
    fn etcd_servers_overrides_as_upstream_parses_them() {
        let parse = |v: &str| {
            Options::try_parse_from([
                "ironplane",
                "--etcd-servers",
                "http://a:2379",
                "--etcd-servers-overrides",
                v,
            ])
            .unwrap()
            .etcd_servers_overrides()
        };
        assert_eq!(
            parse("/events#http://e:2379,apps/deployments#http://d1:2379;http://d2:2379"),
            Ok(vec![
                ("".into(), "events".into(), vec!["http://e:2379".into()]),
                (
                    "apps".into(),
                    "deployments".into(),
                    vec!["http://d1:2379".into(), "http://d2:2379".into()]
                ),
            ])
        );
        let invalid = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated";
        for bad in [
            "events#http://e:2379",
            "/events",
            "/events#",
            "/events#a;;b",
            "a/b/c#x",
            "/e#x#y",
        ] {
            assert_eq!(
                parse(bad).as_deref().map_err(String::as_str),
                Err(invalid),
                "{bad}"
            );
        }
        let alone = Options::try_parse_from(["ironplane", "--etcd-servers-overrides", "/events#x"])
            .unwrap();
        assert_eq!(
            alone.validate(),
            Err("--etcd-servers must be specified".to_string())
        );
    }

    #[test]
    fn leader_election_flags_as_kube_controller_manager_checks_them() {
        let parse = |args: &[&str]| {
            let mut all = vec!["ironplane"];
            all.extend_from_slice(args);
            Options::try_parse_from(all).unwrap().leader_election()
        };
        let config = parse(&[]).unwrap().expect("on by default");
        assert_eq!(config.name, "ironplane-controller-manager");
        assert_eq!(config.namespace, "kube-system");
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert!(parse(&["--leader-elect=false"]).unwrap().is_none());
        assert_eq!(
            parse(&["--leader-elect-lease-duration", "10s"]).unwrap_err(),
            "leaderElection.leaseDuration: Invalid value: \"10s\": must be greater than `RenewDeadline`"
        );
        assert_eq!(
            parse(&["--leader-elect-retry-period", "9s"]).unwrap_err(),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        assert_eq!(
            parse(&["--leader-elect-resource-lock", "endpoints"]).unwrap_err(),
            "endpoints lock is removed, migrate to leases"
        );
        assert_eq!(
            parse(&["--leader-elect-resource-lock", "x"]).unwrap_err(),
            "Invalid lock-type x"
        );
        assert_eq!(
            parse(&["--leader-elect-resource-name", ""]).unwrap_err(),
            "leaderElection.resourceName: Required value"
        );
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
