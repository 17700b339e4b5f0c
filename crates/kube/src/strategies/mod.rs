//! Per-kind behaviour of the built-in kinds: one `Strategy` per kind that has any, looked up by
//! group and resource. Kinds not listed here use `GenericStrategy`.

mod configmap;
mod deployment;
mod namespace;
mod pod;
mod review;
mod secret;
mod service;

use std::sync::Arc;

use apiserver::registry::{GenericStrategy, Strategy};

pub use service::ServiceIpAllocator;

/// The strategy of a built-in resource.
pub fn for_resource(
    group: &str,
    resource: &str,
    services: &Arc<ServiceIpAllocator>,
) -> Arc<dyn Strategy> {
    match (group, resource) {
        ("", "namespaces") => Arc::new(namespace::NamespaceStrategy),
        ("", "configmaps") => Arc::new(configmap::ConfigMapStrategy),
        ("", "secrets") => Arc::new(secret::SecretStrategy),
        ("", "pods") => Arc::new(pod::PodStrategy),
        ("", "services") => Arc::new(service::ServiceStrategy {
            allocator: services.clone(),
        }),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            Arc::new(deployment::WorkloadStrategy)
        }
        ("authorization.k8s.io", _) => Arc::new(review::AccessReviewStrategy),
        ("authentication.k8s.io", "selfsubjectreviews") => {
            Arc::new(review::SelfSubjectReviewStrategy)
        }
        _ => Arc::new(GenericStrategy),
    }
}
