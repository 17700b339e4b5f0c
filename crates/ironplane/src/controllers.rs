//! The controllers kube-controller-manager would run, in this process (`--controllers` selects
//! them), and where they run: on the embedded store (one process) or with `--leader-elect=false`
//! they start with the server; on etcd, where several servers share the state, they run only on
//! the server holding the election's Lease (`ironplane_kube::leader_election`).
//!
//! kube-apiserver's own loops (the `kubernetes` endpoints, the default ServiceCIDR, the
//! post-start hooks, the apiextensions controllers) are not here: they run on every server, as
//! upstream runs them in every kube-apiserver.
//!
//! Under an election the controllers run in a Tokio runtime of their own, so that losing the
//! Lease stops every task they started (reflectors, workers, event sinks), however deep, by
//! shutting that runtime down; the server's runtime and what it serves are untouched.

use std::sync::Arc;
use std::time::Duration;

use apiserver::GenericApiServer;
use apiserver::authorization::Authorizer;
use apiserver::endpoints::ApiResources;
use apiserver::health::Check;
use ironplane_kube::controllers::ExtraStores;
use ironplane_kube::controllers::selection::Selection;

/// Everything the controllers are started with; cloned into each start, since a server that
/// loses and regains the Lease starts them again.
#[derive(Clone)]
pub struct Controllers {
    pub resources: Arc<ApiResources>,
    pub custom_resources: ExtraStores,
    pub selection: Selection,
    pub quotas: ironplane_kube::quota::Quotas,
    pub tokens: Arc<ironplane_kube::serviceaccount::Tokens>,
    /// The cluster CA: published in `kube-root-ca.crt`, and the csrsigning controller's signer
    /// when `signing_key_pem` is set.
    pub ca_cert_pem: String,
    pub signing_key_pem: Option<String>,
    pub cluster_signing_duration: Duration,
    pub legacy_token_clean_up_period: Duration,
    pub authorizer: Arc<dyn Authorizer>,
    pub server: Arc<GenericApiServer>,
    /// `rbac/bootstrap-roles`, which the aggregation controller waits for.
    pub bootstrap_roles: Option<Check>,
}

impl Controllers {
    /// Spawns every selected controller on the current runtime.
    pub fn spawn(&self) {
        let resources = &self.resources;
        let custom_resources = &self.custom_resources;
        let on = |name: &str| self.selection.enabled(name);
        if on("namespace-controller") {
            tokio::spawn(ironplane_kube::controllers::run_namespace_controller(
                resources.clone(),
                custom_resources.clone(),
            ));
        }
        if on("resourcequota-controller") {
            tokio::spawn(ironplane_kube::resource_quota_controller::run(
                resources.clone(),
                custom_resources.clone(),
                self.quotas.clone(),
            ));
        }
        if on("garbage-collector-controller") {
            tokio::spawn(ironplane_kube::controllers::garbage_collector::run(
                resources.clone(),
                custom_resources.clone(),
            ));
        }
        if on("serviceaccount-controller") {
            tokio::spawn(ironplane_kube::controllers::run_serviceaccount_controller(
                resources.clone(),
            ));
        }
        // The CA the admin kubeconfig trusts, for pods' `kube-api-access-*` volumes.
        if on("root-ca-certificate-publisher-controller") {
            tokio::spawn(ironplane_kube::controllers::run_root_ca_publisher(
                resources.clone(),
                self.ca_cert_pem.clone(),
            ));
        }
        if on("serviceaccount-token-controller") {
            tokio::spawn(ironplane_kube::controllers::serviceaccount_tokens::run(
                resources.clone(),
                self.tokens.clone(),
                self.ca_cert_pem.clone(),
            ));
        }
        let protection = ironplane_kube::controllers::storage_protection::CONTROLLER_NAMES.map(on);
        if protection.contains(&true) {
            tokio::spawn(
                ironplane_kube::controllers::run_storage_protection_controller(
                    resources.clone(),
                    protection,
                ),
            );
        }
        if on("clusterrole-aggregation-controller") {
            // Its writes pass the RBAC escalation check through the controller's own bootstrap
            // role, so it starts once the bootstrap policy is stored and the authorizer grants
            // it (upstream's runs in another process, which starts after the server is ready).
            let roles_stored = self.bootstrap_roles.clone();
            let resources = resources.clone();
            let authorizer = self.authorizer.clone();
            tokio::spawn(async move {
                if let Some(hook) = roles_stored {
                    hook.passed().await;
                }
                ironplane_kube::controllers::clusterrole_aggregation::run(resources, authorizer)
                    .await;
            });
        }
        if on("certificatesigningrequest-approving-controller") {
            tokio::spawn(ironplane_kube::controllers::csr_approving::run(
                resources.clone(),
                self.authorizer.clone(),
            ));
        }
        if on("certificatesigningrequest-cleaner-controller") {
            tokio::spawn(ironplane_kube::controllers::csr_cleaner::run(
                resources.clone(),
            ));
        }
        if on("ttl-after-finished-controller") {
            tokio::spawn(ironplane_kube::controllers::ttl_after_finished::run(
                resources.clone(),
            ));
        }
        // Type checking reads what the whole chain serves (custom resources too), as upstream's
        // controller reads discovery and /openapi/v3.
        if on("validatingadmissionpolicy-status-controller") {
            tokio::spawn(
                ironplane_kube::controllers::validatingadmissionpolicy_status::run(
                    resources.clone(),
                    self.server.clone(),
                ),
            );
        }
        if on("service-cidr-controller") {
            tokio::spawn(ironplane_kube::controllers::service_cidr::run(
                resources.clone(),
            ));
        }
        if on("legacy-serviceaccount-token-cleaner-controller") {
            tokio::spawn(ironplane_kube::controllers::legacy_token_cleaner::run(
                resources.clone(),
                self.legacy_token_clean_up_period,
            ));
        }
        if on("token-cleaner-controller") {
            tokio::spawn(ironplane_kube::controllers::bootstrap::run_token_cleaner(
                resources.clone(),
            ));
        }
        if on("bootstrap-signer-controller") {
            tokio::spawn(
                ironplane_kube::controllers::bootstrap::run_bootstrap_signer(resources.clone()),
            );
        }
        // The two controllers that read Pods share one informer of them, as upstream's share
        // kube-controller-manager's.
        let (endpoints, slices) = (on("endpoints-controller"), on("endpointslice-controller"));
        let pods = ironplane_kube::controllers::pod_informer(
            resources,
            usize::from(endpoints) + usize::from(slices),
        );
        if endpoints {
            tokio::spawn(ironplane_kube::controllers::run_endpoints_controller(
                resources.clone(),
                pods.clone(),
            ));
        }
        if slices {
            tokio::spawn(ironplane_kube::controllers::run_endpointslice_controller(
                resources.clone(),
                pods,
            ));
        }
        if on("endpointslice-mirroring-controller") {
            tokio::spawn(
                ironplane_kube::controllers::run_endpointslice_mirroring_controller(
                    resources.clone(),
                ),
            );
        }
        // The csrsigning controller signs with the CA that verifies client certificates (the
        // generated one unless --client-ca-file names another, whose key this server lacks).
        if on("certificatesigningrequest-signing-controller")
            && let Some(key_pem) = &self.signing_key_pem
        {
            tokio::spawn(ironplane_kube::controllers::csr_signing::run(
                resources.clone(),
                ironplane_kube::controllers::csr_signing::ClusterCa {
                    cert_pem: self.ca_cert_pem.clone(),
                    key_pem: key_pem.clone(),
                    duration: self.cluster_signing_duration,
                },
            ));
        }
    }
}

/// The controllers running in their own runtime while this server leads; dropping it stops
/// them all.
pub struct Running(Option<tokio::runtime::Runtime>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            // Dropping a runtime waits for its blocking tasks, which an async context must not
            // do; the tasks are cancelled either way.
            runtime.shutdown_background();
        }
    }
}

impl ironplane_kube::leader_election::Leading for Controllers {
    type Running = Running;

    fn start(&mut self) -> Running {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(
                std::thread::available_parallelism()
                    .map(|n| n.get().min(4))
                    .unwrap_or(2),
            )
            .thread_name("controllers")
            .enable_all()
            .build();
        match runtime {
            Ok(runtime) => {
                // `tokio::spawn` inside `spawn` goes to the runtime entered.
                let entered = runtime.enter();
                self.spawn();
                drop(entered);
                Running(Some(runtime))
            }
            Err(error) => {
                // Running them on the server's runtime instead would leave them running after
                // the Lease is lost, beside the next leader's.
                tracing::error!(%error, "starting the controllers' runtime failed; the controllers do not run");
                Running(None)
            }
        }
    }
}
