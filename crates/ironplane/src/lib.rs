//! The `ironplane` binary as a library: options → validate → config → complete → server chain →
//! prepare → run, as kube-apiserver's start-up (cmd/kube-apiserver/app/server.go), and an
//! in-process test server built the same way.

mod auth;
mod backend;
pub mod certs;
pub mod chain;
mod controllers;
pub mod data_dir;
mod encryption;
pub mod kubeconfig;
#[cfg(test)]
mod layering;
pub mod logging;
pub mod options;
pub mod testing;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::endpoints::ApiResources;
use apiserver::health::{Check, Health};
use apiserver::{Config, GenericApiServer};
use ironplane_kube::ServiceIpAllocator;

pub use options::Options;

/// How long shutdown waits for the leader to release its Lease (etcd may be gone).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(20);

/// Upstream's default `--request-timeout`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A server that is listening; `shutdown` starts the graceful stop.
pub struct Running {
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
    /// The post-start hooks `/readyz` waits for, and its `informer-sync` check.
    hooks: Vec<Check>,
    shutdown: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Resolves once every post-start hook has finished, i.e. when `/readyz` answers 200.
    pub async fn ready(&self) {
        while !self.hooks.iter().all(Check::is_ok) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Stops accepting, ends watches, drains in-flight requests and closes the store.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(());
        let _ = self.done.await;
    }

    /// Waits until the server stops by itself (it does not, unless shut down).
    pub async fn wait(self) {
        let _ = self.done.await;
    }

    /// Starts the graceful stop and returns a future that resolves when it has finished.
    pub fn stop_handle(
        self,
    ) -> (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        (self.shutdown, self.done)
    }
}

fn version_info() -> serde_json::Value {
    serde_json::json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": concat!("v1.36.0-ironplane.", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else if cfg!(target_arch = "aarch64") { "arm64" } else { std::env::consts::ARCH }),
    })
}

/// Connection limits: upstream's timeouts, open connections bounded by the descriptors this
/// process may hold (a few hundred kept for the store, logs and outgoing connections), and
/// connections that have not yet sent a request bounded by the in-flight limits.
fn serving_limits(opts: &Options) -> apiserver::serving::ServingLimits {
    const RESERVED_DESCRIPTORS: u64 = 256;
    let descriptors = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    let max_connections = descriptors.saturating_sub(RESERVED_DESCRIPTORS).max(64);
    let max_pending_connections =
        if opts.max_requests_inflight == 0 || opts.max_mutating_requests_inflight == 0 {
            0
        } else {
            opts.max_requests_inflight + opts.max_mutating_requests_inflight
        };
    let defaults = apiserver::serving::ServingLimits::default();
    apiserver::serving::ServingLimits {
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
        max_pending_connections,
        http2_max_streams: match opts.http2_max_streams_per_connection {
            0 => defaults.http2_max_streams,
            n => n,
        },
        ..defaults
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The meta/v1 schemas that custom resources' OpenAPI documents refer to. They are a function of
/// embedded data only, so they are read once per process and shared: a process that starts
/// several servers (tests do) inflates and parses the core group's v3 document once, not at
/// every start, and holds one copy.
fn meta_schemas_v3() -> Arc<serde_json::Map<String, serde_json::Value>> {
    static SCHEMAS: std::sync::OnceLock<Arc<serde_json::Map<String, serde_json::Value>>> =
        std::sync::OnceLock::new();
    SCHEMAS
        .get_or_init(|| Arc::new(ironplane_kube::openapi::meta_schemas_v3()))
        .clone()
}

/// The schema tables' parse (about 40 million instructions, once per process) on a thread of
/// its own from the start, beside the store's opening and the certificates, rather than in the
/// start-up hooks' first write, on the way to ready.
fn load_schemas_aside() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("load-schemas".into())
            .spawn(ironplane_kube::load_schemas);
        // Without the thread, the first write loads them as before.
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "schemas left to load on first use");
        }
    });
}

/// Validates options, builds the whole server, binds the port and starts serving.
pub async fn start(opts: Options) -> Result<Running, String> {
    let started = Instant::now();
    load_schemas_aside();
    opts.validate()?;
    std::fs::create_dir_all(&opts.data_dir)
        .map_err(|e| format!("creating {}: {e}", opts.data_dir.display()))?;
    // One process per data directory: two writers would corrupt each other's view of the store.
    let data_dir_lock = data_dir::lock(&opts.data_dir)?;

    // Config: storage, certificates, authentication.
    // The embedded store in --data-dir, or etcd with --etcd-servers.
    let backend::Backend {
        kv,
        health: etcd_check,
        readiness: etcd_readiness,
        etcd,
        mut overrides,
        etcd_clusters,
        override_health,
        override_readiness,
    } = backend::open(&opts).await?;
    // Encryption at rest, applied over the backend (--encryption-provider-config).
    let (kv, encryption) = encryption::setup(&opts, kv, &mut overrides).await?;
    let allocator = Arc::new(ServiceIpAllocator::new(
        &opts.service_cluster_ip_range,
        &opts.service_node_port_range,
    )?);
    // Several servers may share etcd: node ports are taken in the stored bitmap too, and the
    // cluster IPs other servers allocate are followed.
    if etcd.is_some() {
        let codec =
            ironplane_kube::storage_codec::BuiltinCodec::shared(opts.storage_media_type(true)?);
        allocator.share_node_ports(kv.clone(), &opts.etcd_prefix, codec);
    }
    let mut hosts = vec![allocator.first_ip().to_string()];
    if !opts.bind_address.is_unspecified() {
        hosts.push(opts.bind_address.to_string());
    }
    let pki = certs::load_or_create(&opts.cert_dir(), &hosts).map_err(|e| e.to_string())?;
    let (cert_pem, key_pem) = match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        (Some(c), Some(k)) => (read(c)?, read(k)?),
        _ => (
            pki.serving_cert_pem.clone().into_bytes(),
            pki.serving_key_pem.clone().into_bytes(),
        ),
    };
    let client_ca = match &opts.client_ca_file {
        Some(p) => read(p)?,
        None => pki.ca_cert_pem.clone().into_bytes(),
    };
    // Published for extension servers by the authentication-info post-start hook.
    let request_header = auth::request_header_config(&opts)?;
    let authentication_info = auth::authentication_info(
        &String::from_utf8_lossy(&client_ca),
        request_header.as_ref(),
    );
    // The handshake asks for certificates of the client CA and of the front proxies' CA.
    let mut accepted_cas = client_ca.clone();
    if let Some(rh) = &request_header {
        accepted_cas.push(b'\n');
        accepted_cas.extend_from_slice(&rh.client_ca_pem);
    }
    let tls = apiserver::serving::tls::server_config(&cert_pem, &key_pem, Some(&accepted_cas))
        .map_err(|e| e.to_string())?;
    // Service-account tokens, signed with --service-account-signing-key-file or the data
    // directory's key, verified with --service-account-key-file or the signing key.
    let signing_key = match &opts.service_account_signing_key_file {
        Some(path) => String::from_utf8_lossy(&read(path)?).into_owned(),
        None => pki.sa_key_pem.clone(),
    };
    let key_files = opts
        .service_account_key_file
        .iter()
        .map(|p| read(p).map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    let tokens = Arc::new(ironplane_kube::serviceaccount::Tokens::new(
        &signing_key,
        &key_files,
        opts.token_options(),
    )?);
    let bootstrap_tokens = opts
        .enable_bootstrap_token_auth
        .then(|| Arc::new(ironplane_kube::bootstrap_token::BootstrapTokenAuthenticator::default()));
    let (authenticator, anonymous) =
        auth::authenticator(&opts, &client_ca, tokens.clone(), bootstrap_tokens.clone())?;

    let admission_config = match &opts.admission_control_config_file {
        Some(path) => ironplane_kube::admission::config::AdmissionConfig::from_file(path)?,
        None => Default::default(),
    };

    // Complete and build the server chain.
    let webhooks = apiserver::admission::webhook::Webhooks::default();
    let policies = apiserver::admission::policy::Policies::default();
    let quotas = ironplane_kube::quota::Quotas::default();
    // One authorizer for the filter chain, the access reviews and the admission plugins that
    // authorize: `system:masters` first, then the modes in the order given.
    let rbac = ironplane_kube::rbac::RbacAuthorizer::default();
    let node_authorizer = ironplane_kube::node_authorizer::NodeAuthorizer::new();
    // The Node authorizer's graph is kept when the mode is on, or may come on with a new
    // --authorization-config.
    let node_mode = opts.authorization_config.is_some()
        || opts.authorization_modes().iter().any(|m| m == "Node");
    let authorizer = auth::authorizer(&opts, &rbac, &node_authorizer)?;
    // The CSR approving controller puts its access reviews to the same authorizer.
    let csr_authorizer = authorizer.clone();
    // Built-in objects are stored as --storage-media-type says: by default JSON on the embedded
    // store, and upstream's protobuf on etcd, so that kube-apiserver reads what Ironplane wrote.
    let on_etcd = !opts.etcd_servers.is_empty();
    let storage_codec = ironplane_kube::storage_codec::BuiltinCodec::shared_with(
        opts.storage_media_type(on_etcd)?,
        apiextensions::crd::STORED_VERSIONS,
    );
    let builtin = ironplane_kube::install(
        kv.clone(),
        &overrides,
        &etcd_clusters,
        storage_codec,
        &opts.etcd_prefix,
        allocator.clone(),
        opts.default_watch_cache_size,
        &ironplane_kube::AuthSetup {
            authenticator: authenticator.clone(),
            rbac: &rbac.index,
            tokens: Some(tokens.clone()),
        },
        &[ironplane_kube::LayeredStrategy {
            group: "apiextensions.k8s.io",
            resource: "customresourcedefinitions",
            strategy: Arc::new(apiextensions::crd::CustomResourceDefinitionStrategy),
        }],
        &ironplane_kube::admission::Setup {
            config: &admission_config,
            webhooks: &webhooks,
            policies: &policies,
            quota: &quotas,
            authorizer: authorizer.clone(),
            enabled: &opts.admission_plugins()?,
        },
    )
    .map_err(|e| format!("failed to initialize admission: {e}"))?;
    let resources: Arc<ApiResources> = builtin.resources.clone();
    let extensions = apiextensions::CrdHandler::new(
        &resources,
        apiextensions::StorageConfig {
            kv: kv.clone(),
            prefix: opts.etcd_prefix.clone(),
            watch_cache_size: opts.default_watch_cache_size,
        },
        meta_schemas_v3(),
        ironplane_kube::service_resolver::EndpointSliceResolver::new(&resources)
            .map(|r| r as Arc<dyn apiserver::util::webhook::ServiceResolver>),
    );
    let served: Arc<dyn apiserver::admission::ServedResources> = Arc::new(chain::ServedApi {
        builtin: resources.clone(),
        extensions: extensions.clone(),
    });
    rbac.start(&resources);
    if node_mode {
        node_authorizer.start(&resources);
    }
    tokens.set_api(resources.clone());
    if let Some(bootstrap) = &bootstrap_tokens {
        bootstrap.set_api(resources.clone());
    }
    policies.start(served.clone(), authorizer.clone());
    // Quota's DeviceClass mapping (DRA extended resource names), for the ResourceQuota plugin
    // and the quota controller alike.
    quotas.extended_resources().start(&resources);
    webhooks.start(
        served,
        ironplane_kube::service_resolver::EndpointSliceResolver::new(&resources)
            .map(|r| r as Arc<dyn apiserver::util::webhook::ServiceResolver>),
    );
    // `informer-sync`: the server's own informers (upstream: its shared informer factory's)
    // have each listed once. The controllers' are kube-controller-manager's, not counted.
    let informer_sync = Check::new("informer-sync", false);
    {
        let condition =
            |name: &str, synced: Box<dyn Fn() -> bool + Send + Sync>| (name.to_string(), synced);
        let (rbac, node, webhooks, policies, classes) = (
            rbac.clone(),
            node_authorizer.clone(),
            webhooks.clone(),
            policies.clone(),
            quotas.extended_resources().clone(),
        );
        let informers: Vec<apiserver::health::Condition> = [
            condition("rbac", Box::new(move || rbac.has_synced())),
            condition(
                "admission webhooks",
                Box::new(move || webhooks.has_synced()),
            ),
            condition(
                "admission policies",
                Box::new(move || policies.has_synced()),
            ),
            condition(
                "quota device classes",
                Box::new(move || classes.has_synced()),
            ),
        ]
        .into_iter()
        .chain(node_mode.then(|| condition("node graph", Box::new(move || node.has_synced()))))
        .collect();
        let check = informer_sync.clone();
        tokio::spawn(async move { check.pass_when_all(informers, None).await });
    }
    // The aggregation layer: APIServices registered for what this server serves, remote ones'
    // availability, and the proxy to extension servers.
    let proxy_cert = match (&opts.proxy_client_cert_file, &opts.proxy_client_key_file) {
        (Some(cert), Some(key)) => Some(aggregator::ProxyCertFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    let reloads_proxy_cert = proxy_cert.is_some();
    let aggregator = match ironplane_kube::service_resolver::EndpointSliceResolver::new(&resources)
    {
        Some(resolver) => {
            let crds = extensions.clone();
            Some(aggregator::Aggregator::new(
                resources.clone(),
                resolver,
                proxy_cert,
                aggregator::CustomVersions {
                    changed: crds.as_ref().map(|c| c.served_changes()),
                    list: Box::new(move || {
                        crds.as_ref()
                            .map(|c| {
                                apiserver::Delegate::resources(c.as_ref())
                                    .into_iter()
                                    .map(|i| (i.group, i.version))
                                    .collect()
                            })
                            .unwrap_or_default()
                    }),
                },
            )?)
        }
        None => None,
    };
    let chain = chain::build(resources.clone(), extensions.clone(), aggregator.clone());

    // Bind before anything is announced, so that port 0 resolves to the real port.
    let listener = apiserver::serving::bind(SocketAddr::new(opts.bind_address, opts.secure_port))
        .await
        .map_err(|e| format!("binding {}:{}: {e}", opts.bind_address, opts.secure_port))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let host = if opts.bind_address.is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        opts.bind_address.to_string()
    };
    let url_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let server_url = format!("https://{url_host}:{}", addr.port());

    // Prepare: health checks, post-start hooks, OpenAPI.
    let bootstrap_hook = Check::new("poststarthook/bootstrap-controller", false);
    let controllers_hook = Check::new("poststarthook/start-namespace-controller", false);
    let service_cidr_hook = Check::new(
        format!(
            "poststarthook/{}",
            ironplane_kube::default_service_cidr::HOOK
        ),
        false,
    );
    // Upstream's other object-creating hooks, each with its own readiness check; the RBAC
    // bootstrap policy only when RBAC authorizes (an `--authorization-config` may name it).
    let rbac_mode = opts.authorization_config.is_some()
        || opts.authorization_modes().iter().any(|m| m == "RBAC");
    let system_hooks: Vec<Check> = ironplane_kube::poststart::HOOKS
        .iter()
        .filter(|name| rbac_mode || **name != ironplane_kube::poststart::BOOTSTRAP_ROLES_HOOK)
        .map(|name| Check::new(format!("poststarthook/{name}"), false))
        .collect();
    // `storage-readiness`: every built-in resource's watch cache filled, or the wait given up
    // after --storage-initialization-timeout.
    let storage_readiness = Check::new("poststarthook/storage-readiness", false);
    {
        let (check, timeout) = (
            storage_readiness.clone(),
            opts.storage_initialization_timeout,
        );
        let caches: Vec<apiserver::health::Condition> = builtin
            .watch_caches
            .iter()
            .map(|(name, cache)| {
                let cache = cache.clone();
                let ready: Box<dyn Fn() -> bool + Send + Sync> = Box::new(move || cache.is_ready());
                (name.clone(), ready)
            })
            .collect();
        tokio::spawn(async move {
            let waiting = check.pass_when_all(caches, Some(timeout)).await;
            if !waiting.is_empty() {
                tracing::warn!(
                    ?waiting,
                    "Deadline exceeded while waiting for storage readiness... ignoring"
                );
            }
        });
    }
    // The apiextensions server's hooks: its informers and controllers start with the server;
    // readiness waits until the CRDs found in storage are served.
    let crd_hooks = [
        Check::new("poststarthook/start-apiextensions-informers", true),
        Check::new("poststarthook/start-apiextensions-controllers", true),
    ];
    let crd_synced = Check::new("poststarthook/crd-informer-synced", extensions.is_none());
    // The aggregator's hooks and its `autoregister-completion` check, registered last as
    // kube-apiserver registers them (the aggregator is the outermost server of the chain).
    let aggregator_readiness = Arc::new(aggregator::Readiness::new(
        aggregator.is_some(),
        aggregator.is_some() && reloads_proxy_cert,
    ));
    // API Priority and Fairness: its bootstrap objects' hook gates readiness when it is on.
    let apf_hook = Check::new(
        format!(
            "poststarthook/{}",
            ironplane_kube::flowcontrol_bootstrap::HOOK
        ),
        !opts.enable_priority_and_fairness,
    );
    // Its consumer: the stored configuration in effect.
    let apf_consumer_hook = Check::new(
        "poststarthook/priority-and-fairness-config-consumer",
        !opts.enable_priority_and_fairness,
    );
    // Upstream's generic-server hooks that only start work this server does not need started:
    // admission reads the live catalog (no RESTMapper to refresh), there is no shared informer
    // factory, `apiserver_current_inflight_requests` takes its watermark at each scrape (no
    // upkeep task for the filter's watermarks), and object counts come from the watch caches,
    // exact at every moment (no tracker to run). Upstream's pass as soon as theirs are started;
    // these pass at once.
    let passes_at_once = |name: &str| Check::new(format!("poststarthook/{name}"), true);
    let generic_hooks = [
        passes_at_once("start-apiserver-admission-initializer"),
        passes_at_once("generic-apiserver-start-informers"),
    ];
    let filter_hooks = [
        passes_at_once(if opts.enable_priority_and_fairness {
            "priority-and-fairness-filter"
        } else {
            "max-in-flight-filter"
        }),
        passes_at_once("storage-object-count-tracker-hook"),
    ];
    // Upstream's ClusterIP and NodePort repair controllers: ready after their first pass, which
    // here is the allocator rebuilt from storage (the `bootstrap-controller` hook's first step).
    let repair_hook = Check::new("poststarthook/start-service-ip-repair-controllers", false);
    {
        let (allocator, repair_hook) = (allocator.clone(), repair_hook.clone());
        tokio::spawn(async move {
            allocator.until_ready().await;
            repair_hook.set(true);
        });
    }
    let system_hook = |name: &str| {
        system_hooks
            .iter()
            .find(|c| c.name.strip_prefix("poststarthook/") == Some(name))
            .cloned()
    };
    let shutdown_check = Check::new("shutdown", true);
    let health = Health {
        common: vec![
            Check::new("ping", true),
            Check::new("log", true),
            etcd_check,
        ]
        .into_iter()
        .chain(override_health)
        .collect(),
        readyz: [etcd_readiness]
            .into_iter()
            .chain(override_readiness)
            .chain([informer_sync.clone()])
            .collect(),
        // In the order kube-apiserver lists them (the order of registration along its chain):
        // the generic server's, the apiextensions server's, the control plane's own, the
        // aggregator's. `start-namespace-controller` (the controllers kube-controller-manager
        // would run, in process here) has no upstream counterpart and comes after the control
        // plane's.
        post_start_hooks: generic_hooks
            .into_iter()
            .chain(
                opts.enable_priority_and_fairness
                    .then(|| apf_consumer_hook.clone()),
            )
            .chain(filter_hooks)
            .chain(crd_hooks)
            .chain([crd_synced.clone()])
            .chain(system_hook(
                ironplane_kube::poststart::SYSTEM_NAMESPACES_HOOK,
            ))
            .chain(system_hook("start-cluster-authentication-info-controller"))
            .chain(system_hook(
                "start-kube-apiserver-identity-lease-controller",
            ))
            .chain(system_hook(
                "start-kube-apiserver-identity-lease-garbage-collector",
            ))
            .chain([storage_readiness])
            .chain(system_hook("start-legacy-token-tracking-controller"))
            .chain([repair_hook])
            .chain(system_hook(ironplane_kube::poststart::BOOTSTRAP_ROLES_HOOK))
            .chain(system_hook("scheduling/bootstrap-system-priority-classes"))
            .chain(opts.enable_priority_and_fairness.then(|| apf_hook.clone()))
            .chain([
                bootstrap_hook.clone(),
                service_cidr_hook.clone(),
                controllers_hook.clone(),
            ])
            .chain(encryption.reload_hook.clone())
            .chain(aggregator_readiness.checks())
            .collect(),
        shutdown: Some(shutdown_check.clone()),
        not_livez: encryption.health.clone().into_iter().collect(),
    };
    let config = Config {
        authenticator,
        authorizer,
        anonymous_auth: anonymous.enabled,
        anonymous_paths: anonymous.paths,
        request_timeout: REQUEST_TIMEOUT,
        version: version_info(),
        openapi: ironplane_kube::openapi::documents(),
        external_address: format!("{url_host}:{}", addr.port()),
        max_requests_inflight: opts.max_requests_inflight,
        max_mutating_requests_inflight: opts.max_mutating_requests_inflight,
    };
    let mut server = GenericApiServer::new(config, chain, health);
    server.streaming = aggregator
        .clone()
        .map(|a| a as Arc<dyn apiserver::server::StreamingHandler>);
    // Upstream's server concurrency limit under priority and fairness: both in-flight limits.
    let flow_control = opts.enable_priority_and_fairness.then(|| {
        apiserver::flowcontrol::FlowControl::new(
            (opts.max_requests_inflight + opts.max_mutating_requests_inflight) as u64,
        )
    });
    if let Some(fc) = &flow_control {
        // LISTs without a resourceVersion cost what a read from storage costs where the watch
        // cache cannot serve consistent reads (etcd before progress requests).
        fc.set_object_stats(Arc::new(apiserver::flowcontrol::width::StorageStats {
            consistent_reads_from_cache: kv.consistent_reads_from_cache(),
        }));
    }
    server.flow_control = flow_control.clone();
    server.documents = tokens.discovery_documents(&format!("{url_host}:{}", addr.port()));
    // Upstream audits only with both a policy and a backend.
    if let (Some(policy), Some(log)) = (&opts.audit_policy_file, &opts.audit_log_path) {
        let policy = apiserver::audit::Policy::parse(&String::from_utf8_lossy(&read(policy)?))?;
        let sink = apiserver::audit::Sink::open(log)?;
        server.auditor = Some(Arc::new(apiserver::audit::Auditor { policy, sink }));
    }
    let server = Arc::new(server);

    let kubeconfig_path = opts.data_dir.join("kubeconfig");
    kubeconfig::write_admin(
        &kubeconfig_path,
        &server_url,
        pki.ca_cert_pem.as_bytes(),
        pki.admin_cert_pem.as_bytes(),
        pki.admin_key_pem.as_bytes(),
    )
    .map_err(|e| e.to_string())?;

    // Set at shutdown: the lease endpoint reconciler removes this server from the `kubernetes`
    // endpoints and says so on `endpoints_removed`; a leader stops its controllers and
    // releases the Lease.
    let (stopping, stop_requested) = tokio::sync::watch::channel(false);
    let (endpoints_removed, endpoints_removed_rx) = tokio::sync::oneshot::channel::<()>();
    // Post-start hooks.
    let bootstrap_roles_hook = system_hook(ironplane_kube::poststart::BOOTSTRAP_ROLES_HOOK);
    {
        let resources = resources.clone();
        let allocator = allocator.clone();
        let port = addr.port();
        // The `kubernetes` endpoints (--endpoint-reconciler-type): on etcd with `lease`, every
        // live server's address by the lease reconciler; with `master-count`, up to
        // --apiserver-count addresses, this server's among them; else this server's, written
        // once.
        use ironplane_kube::endpoint_reconciler::{
            EndpointReconciler, LeaseReconciler, MasterCountReconciler,
        };
        let reconciler = match (&etcd, opts.endpoint_reconciler_type.as_str()) {
            (Some(etcd), "lease") => Some(EndpointReconciler::Lease(LeaseReconciler {
                etcd: etcd.clone(),
                prefix: opts.etcd_prefix.clone(),
                advertise: opts.advertise_address(),
                port,
            })),
            (_, "master-count") => {
                if opts.apiserver_count.is_some() {
                    tracing::warn!(
                        "Flag --apiserver-count has been deprecated, apiserver-count is deprecated and will be removed in a future version."
                    );
                }
                Some(EndpointReconciler::MasterCount(MasterCountReconciler {
                    advertise: opts.advertise_address(),
                    port,
                    count: usize::try_from(opts.apiserver_count.unwrap_or(1)).unwrap_or(1),
                }))
            }
            _ => None,
        };
        let advertise = (reconciler.is_none() && opts.endpoint_reconciler_type != "none")
            .then(|| opts.advertise_address());
        let resources_for_reconciler = resources.clone();
        let system_resources = resources.clone();
        let reconciler_stop = stop_requested.clone();
        let bootstrap = async move {
            let mut delay = Duration::from_millis(10);
            loop {
                match ironplane_kube::bootstrap::run(&resources, &allocator, advertise, port).await
                {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "bootstrap failed; retrying");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(5));
                    }
                }
            }
            match reconciler {
                Some(reconciler) => {
                    tokio::spawn(async move {
                        reconciler
                            .run(resources_for_reconciler, reconciler_stop)
                            .await;
                        let _ = endpoints_removed.send(());
                    });
                }
                None => drop(endpoints_removed),
            }
            bootstrap_hook.set(true);
        };
        // Beside the bootstrap controller, as upstream runs each post-start hook in a
        // goroutine of its own: none of them needs the `default` namespace or the
        // `kubernetes` Service.
        let system = run_system_hooks(system_resources, system_hooks, authentication_info);
        tokio::spawn(async move {
            tokio::join!(bootstrap, system);
        });
    }
    // Priority and fairness: the configuration read from storage, and its bootstrap objects
    // (`priority-and-fairness-config-producer`) written and kept up to date.
    if let Some(fc) = flow_control {
        tokio::spawn(fc.run(resources.clone(), move || apf_consumer_hook.set(true)));
        tokio::spawn(ironplane_kube::flowcontrol_bootstrap::run(
            resources.clone(),
            move || apf_hook.set(true),
        ));
    }
    // kube-apiserver's own controller of the default ServiceCIDR: its hook passes once the
    // first sync has succeeded.
    tokio::spawn(ironplane_kube::default_service_cidr::run(
        resources.clone(),
        vec![allocator.cidr().to_string()],
        move || service_cidr_hook.set(true),
    ));
    let custom_resources = match &extensions {
        Some(e) => {
            let e = e.clone();
            ironplane_kube::controllers::ExtraStores::new(move || e.apis())
        }
        None => ironplane_kube::controllers::ExtraStores::none(),
    };
    // The controllers kube-controller-manager would run, as `--controllers` selects them: on
    // etcd only on the server that holds the election's Lease, else here and now.
    let in_process = controllers::Controllers {
        resources: resources.clone(),
        custom_resources,
        selection: opts.controller_selection()?,
        quotas,
        tokens: tokens.clone(),
        ca_cert_pem: pki.ca_cert_pem.clone(),
        signing_key_pem: opts
            .client_ca_file
            .is_none()
            .then(|| pki.ca_key_pem.clone()),
        cluster_signing_duration: opts.cluster_signing_duration,
        legacy_token_clean_up_period: opts.legacy_service_account_token_clean_up_period,
        authorizer: csr_authorizer,
        server: server.clone(),
        bootstrap_roles: bootstrap_roles_hook,
    };
    let election = match opts.leader_election()? {
        Some(config) if on_etcd => Some(tokio::spawn(
            ironplane_kube::leader_election::LeaderElector::new(resources.clone(), config)
                .run(in_process, stop_requested),
        )),
        _ => {
            in_process.spawn();
            None
        }
    };
    // Upstream's CRD naming, establishing and finalizer controllers.
    if let Some(extensions) = extensions {
        tokio::spawn(apiextensions::run_controller(
            extensions,
            Box::new(move || crd_synced.set(true)),
        ));
    }
    if let Some(aggregator) = aggregator {
        tokio::spawn(aggregator.run(aggregator_readiness));
    }
    controllers_hook.set(true);

    // Run.
    let limits = serving_limits(&opts);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let delay = opts.shutdown_delay_duration;
    let watches = resources.shutdown.clone();
    let served = server.clone();
    let done = tokio::spawn(async move {
        let stop = async move {
            let _ = rx.await;
            // Fail /readyz first so that load balancers stop sending, then stop accepting.
            shutdown_check.set(false);
            // Upstream's pre-shutdown work, beside the delay: this server leaves the `kubernetes`
            // endpoints, and a leader's controllers stop and the Lease is released, so that
            // clients and another server move on at once.
            let _ = stopping.send(true);
            let pre_shutdown = async move {
                let release = async move {
                    if let Some(election) = election {
                        let _ = tokio::time::timeout(RELEASE_TIMEOUT, election).await;
                    }
                };
                // Bounded by the reconciler itself, and here for a server still bootstrapping
                // (one without a reconciler has dropped the sender).
                let removal = async move {
                    let _ = tokio::time::timeout(RELEASE_TIMEOUT, endpoints_removed_rx).await;
                };
                tokio::join!(release, removal);
            };
            tokio::join!(tokio::time::sleep(delay), pre_shutdown);
            let _ = watches.send(true);
        };
        if let Err(e) = apiserver::serving::serve(listener, tls, served, limits, stop).await {
            tracing::error!(error = %e, "serving failed");
        }
        drop(kv);
        // The store is closed: another process may have the directory now.
        drop(data_dir_lock);
    });
    tracing::info!(address = %addr, elapsed_ms = started.elapsed().as_millis() as u64, "serving");
    Ok(Running {
        addr,
        kubeconfig: kubeconfig_path,
        hooks: server
            .health
            .post_start_hooks
            .iter()
            .cloned()
            .chain([informer_sync])
            .collect(),
        shutdown: tx,
        done,
    })
}

/// Runs upstream's object-creating post-start hooks (`ironplane_kube::poststart`), retrying
/// each until it succeeds, and marks each one's readiness check as it completes. The system
/// namespaces come first, since the others write into kube-system; then the rest run at once,
/// as upstream starts each hook in a goroutine of its own.
async fn run_system_hooks(
    resources: Arc<ApiResources>,
    checks: Vec<Check>,
    authentication_info: serde_json::Map<String, serde_json::Value>,
) {
    let is_namespaces = |check: &&Check| {
        check.name.strip_prefix("poststarthook/")
            == Some(ironplane_kube::poststart::SYSTEM_NAMESPACES_HOOK)
    };
    for check in checks.iter().filter(is_namespaces) {
        run_system_hook(&resources, check, &authentication_info).await;
    }
    let others = checks
        .iter()
        .filter(|c| !is_namespaces(c))
        .map(|check| run_system_hook(&resources, check, &authentication_info));
    futures_util::future::join_all(others).await;
}

/// One hook of `run_system_hooks`, retried with a growing pause until it succeeds.
async fn run_system_hook(
    resources: &Arc<ApiResources>,
    check: &Check,
    authentication_info: &serde_json::Map<String, serde_json::Value>,
) {
    use ironplane_kube::poststart as hooks;
    let name = check
        .name
        .strip_prefix("poststarthook/")
        .unwrap_or(&check.name);
    let mut delay = Duration::from_millis(10);
    loop {
        let result = match name {
            hooks::SYSTEM_NAMESPACES_HOOK => {
                hooks::start_system_namespaces(resources.clone()).await
            }
            hooks::BOOTSTRAP_ROLES_HOOK => {
                ironplane_kube::rbac::bootstrap::reconcile(resources).await
            }
            "scheduling/bootstrap-system-priority-classes" => {
                hooks::bootstrap_system_priority_classes(resources).await
            }
            "start-kube-apiserver-identity-lease-controller" => {
                hooks::start_identity_lease(resources.clone()).await
            }
            "start-kube-apiserver-identity-lease-garbage-collector" => {
                hooks::start_identity_lease_gc(resources.clone()).await
            }
            "start-cluster-authentication-info-controller" => {
                hooks::cluster_authentication_info(resources, authentication_info).await
            }
            "start-legacy-token-tracking-controller" => {
                hooks::legacy_token_tracking(resources).await
            }
            // A name in `HOOKS` without a function here: its check stays failing, which
            // `/readyz` shows, rather than retried for ever.
            other => {
                tracing::error!(hook = other, "no post-start hook has this name");
                return;
            }
        };
        match result {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(hook = name, error = %e, "post-start hook failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
    check.set(true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// kube-apiserver gives each HTTP/2 connection 100 streams unless
    /// `--http2-max-streams-per-connection` says otherwise (0 means the default).
    #[test]
    fn http2_connections_get_kube_apiservers_stream_limit_unless_the_flag_sets_one() {
        let streams = |args: &[&str]| {
            let opts =
                Options::try_parse_from(std::iter::once("ironplane").chain(args.iter().copied()))
                    .expect("flags parse");
            serving_limits(&opts).http2_max_streams
        };
        assert_eq!(streams(&[]), 100);
        assert_eq!(streams(&["--http2-max-streams-per-connection", "0"]), 100);
        assert_eq!(
            streams(&["--http2-max-streams-per-connection", "1000"]),
            1000
        );
    }
}
