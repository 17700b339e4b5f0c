//! The controllers that publish where a Service's pods are, as kube-controller-manager's
//! `endpoints-controller`, `endpointslice-controller` and `endpointslice-mirroring-controller`
//! do (upstream: pkg/controller/endpoint, pkg/controller/endpointslice,
//! pkg/controller/endpointslicemirroring and the k8s.io/endpointslice library):
//!
//! - `endpoint`: one Endpoints object per Service with a selector, its subsets packed from the
//!   selected pods;
//! - `slices`: the EndpointSlices of every Service with a selector, at most 100 endpoints each,
//!   updated in place;
//! - `mirroring`: the Endpoints a user writes for a Service without a selector, mirrored into
//!   EndpointSlices.
//!
//! Each keeps its own index of what it watches (`model`: Services, Pods and Nodes reduced to
//! what the controllers read; `runtime::Objects`: the objects it writes, which its own writes
//! update at once) and works a queue of keys; the Endpoints and EndpointSlice controllers share
//! one reflector of the Pods, which decodes each Pod once for both; nothing is listed again per event. The two slice
//! controllers plan their changes to the slices they manage as a `managed_slices::Plan` and
//! write it with `managed_slices::apply_plan`. None of them
//! touches the `kubernetes` Service's Endpoints and EndpointSlice, which the server itself
//! writes (`bootstrap`): the Service has no selector, its Endpoints carry
//! `endpointslice.kubernetes.io/skip-mirror`, and its slice has no `managed-by` label.
//!
//! Failures and left-out addresses are recorded as upstream's Events (`controllers::events`).
//! Left out, compared to upstream: topology-aware hints and `trafficDistribution` hints (and
//! the hint Events), metrics, and the controllers' flags (`--max-endpoints-per-slice` and the
//! batch periods are upstream's defaults).

use apiserver::endpoints::ApiResources;

mod endpoint;
mod managed_slices;
mod mirroring;
mod model;
mod runtime;
mod slices;
mod subsets;

pub use endpoint::run as run_endpoints_controller;
pub use mirroring::run as run_endpointslice_mirroring_controller;
pub use runtime::SharedPodInformer;
pub use slices::run as run_endpointslice_controller;

/// The Pods' informer of the Endpoints and EndpointSlice controllers, for `subscribers` of
/// them (those that run): it starts once each has subscribed, or withdrawn.
pub fn pod_informer(api: &ApiResources, subscribers: usize) -> SharedPodInformer {
    SharedPodInformer::new(api.get("", "v1", "pods").cloned(), subscribers)
}

/// `endpointslice.kubernetes.io/managed-by`.
const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `kubernetes.io/service-name`.
const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `service.kubernetes.io/headless`: on the Endpoints and slices of a Service without a
/// cluster IP.
const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// `endpoints.kubernetes.io/last-change-trigger-time`.
const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// The annotation a leader-election record on an Endpoints object carries; such Endpoints are
/// neither cleaned up nor mirrored.
const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
