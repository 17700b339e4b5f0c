//! Controllers Ironplane runs in-process, doing what upstream needs kube-controller-manager for:
//! the namespace controller (`namespace`: a terminating namespace's content is deleted, then its
//! finalizer cleared), the service account controller (`serviceaccount`: every active
//! namespace has its `default` ServiceAccount), the root CA publisher (`root_ca_publisher`:
//! every active namespace has the `kube-root-ca.crt` ConfigMap) and the storage protection
//! controllers
//! (`storage_protection`: the finalizers StorageObjectInUseProtection adds are removed from deleted
//! volumes, claims and volume attributes classes nothing uses), and the tokens controller
//! (`serviceaccount_tokens`: `kubernetes.io/service-account-token` secrets filled in with legacy
//! tokens), the endpoints, EndpointSlice and EndpointSlice mirroring controllers
//! (`endpoints`: where each Service's pods are, as Endpoints and EndpointSlices; a selectorless
//! Service's hand-written Endpoints mirrored into EndpointSlices), the garbage collector (`garbage_collector`: objects whose owners are gone are
//! deleted; foreground and orphan deletion), the TTL-after-finished controller
//! (`ttl_after_finished`: finished Jobs deleted after their TTL) and the bootstrap token
//! controllers (`bootstrap`: the token cleaner and the `cluster-info` signer), the last two over
//! `expiry` (objects deleted when a time they carry has passed), and the CSR approving and
//! cleaner controllers (`csr_approving`: kubelet client requests approved after an access
//! review of their requester; `csr_cleaner`: old requests deleted), the
//! validatingadmissionpolicy-status controller (`validatingadmissionpolicy_status`: a policy's
//! `status.typeChecking` and `observedGeneration` for each new generation), the ServiceCIDR
//! controller (`service_cidr`: every ServiceCIDR's finalizer and `Ready` condition, its deletion
//! held while allocated addresses would be left outside every range) and the legacy service
//! account token cleaner (`legacy_token_cleaner`: unused auto-generated token Secrets marked
//! invalid, then deleted). `events` is their event recorder: the Events upstream's namesakes
//! record, written as client-go's recorder writes them. `selection` is `--controllers`: which
//! of them run, by kube-controller-manager's names; `rate_limiter` is client-go's default
//! controller rate limiter, the delays of a controller's retries.

/// The manager upstream's controllers write as (kube-controller-manager's User-Agent prefix).
pub(crate) const CONTROLLER_MANAGER: &str = "kube-controller-manager";

pub mod bootstrap;
pub mod clusterrole_aggregation;
pub mod csr_approving;
pub mod csr_cleaner;
pub mod csr_signing;
mod endpoints;
pub(crate) mod events;
mod expiry;
pub mod garbage_collector;
pub mod legacy_token_cleaner;
mod namespace;
mod rate_limiter;
mod root_ca_publisher;
pub mod selection;
pub mod service_cidr;
mod serviceaccount;
pub mod serviceaccount_tokens;
pub mod storage_protection;
pub mod ttl_after_finished;
pub mod validatingadmissionpolicy_status;

use std::sync::Arc;

use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, WriteOptions};

pub use endpoints::{
    SharedPodInformer, pod_informer, run_endpoints_controller, run_endpointslice_controller,
    run_endpointslice_mirroring_controller,
};
pub use namespace::run_namespace_controller;
pub use root_ca_publisher::{ROOT_CA_CONFIGMAP, run_root_ca_publisher};
pub use serviceaccount::run_serviceaccount_controller;
pub use storage_protection::run_storage_protection_controller;

/// The identity the controllers act as.
pub fn controller_user() -> UserInfo {
    UserInfo {
        name: "system:serviceaccount:kube-system:namespace-controller".into(),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:authenticated".into(),
        ],
        extra: Default::default(),
    }
}

/// The identity of upstream's controller `name`, a service account of `kube-system` (the
/// controller manager's `--use-service-account-credentials`).
fn kube_system_account(name: &str) -> UserInfo {
    UserInfo {
        name: format!("system:serviceaccount:kube-system:{name}"),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:kube-system".into(),
            "system:authenticated".into(),
        ],
        extra: Default::default(),
    }
}

/// Resources served by other servers of the chain (custom resources: each CustomResourceDefinition
/// served by its own `ApiResources`, which holds the CRD's schemas), asked for at each use
/// because they come and go at run time.
#[derive(Clone)]
pub struct ExtraStores(Arc<dyn Fn() -> Vec<Arc<ApiResources>> + Send + Sync>);

impl ExtraStores {
    pub fn new(served: impl Fn() -> Vec<Arc<ApiResources>> + Send + Sync + 'static) -> Self {
        Self(Arc::new(served))
    }

    /// No other server in the chain.
    pub fn none() -> Self {
        Self::new(Vec::new)
    }

    /// The storage-version store of every served resource (one per CRD).
    pub fn stores(&self) -> Vec<Arc<RegistryStore>> {
        (self.0)()
            .iter()
            .filter_map(|api| {
                api.all()
                    .find(|s| s.info.storage_version.is_none())
                    .cloned()
            })
            .collect()
    }

    /// The options of a controller's write to `store`, one of these resources' stores: its
    /// changes recorded in managed fields under `manager` with the CRD's schemas, as the REST
    /// handlers record a client's writes to it. `None` when no served resource is `store`'s
    /// (its CRD is gone: the write finds nothing to change).
    pub fn internal_write(&self, store: &RegistryStore, manager: &str) -> Option<WriteOptions> {
        let i = &store.info;
        (self.0)()
            .into_iter()
            .find(|api| api.get(&i.group, &i.version, &i.resource).is_some())
            .map(|api| api.internal_write(store, manager))
    }
}
