//! Per-kind behaviour of the built-in kinds: one `Strategy` per kind that has any, looked up by
//! group and resource. Kinds not listed here use `GenericStrategy`.

mod batch;
mod configmap;
mod deployment;
mod endpointslice;
mod hpa;
mod limitrange;
mod namespace;
mod networking;
mod pod;
mod rbac;
mod review;
mod scheduling;
mod secret;
mod service;
mod storage;
mod volumes;

use std::sync::Arc;

use serde_json::Value;

use apiserver::authentication::Authenticator;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{Conversion, GenericStrategy, ResourceInfo, Strategy};

pub use service::ServiceIpAllocator;

/// What strategies may need besides their own kind: allocators, the authenticators, and the
/// served resources (filled in once they exist).
pub struct StrategyContext {
    pub services: Arc<ServiceIpAllocator>,
    pub authenticator: Arc<dyn Authenticator>,
    pub api: Arc<std::sync::OnceLock<Arc<ApiResources>>>,
}

/// Sets `field` of an object unless it holds a value: how upstream's `SetDefaults_*` functions
/// fill unset pointers and empty strings alike.
pub(crate) fn set_default(obj: &mut Value, field: &str, value: serde_json::Value) {
    if obj
        .get(field)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        obj[field] = value;
    }
}

/// The object at `field` of `obj` (itself an object), made an empty object first when absent or
/// not an object: where defaulting fills a nested struct that Go would have allocated.
pub(crate) fn object_at<'a>(obj: &'a mut Value, field: &str) -> &'a mut Value {
    if !obj.get(field).is_some_and(Value::is_object) {
        obj[field] = Value::Object(serde_json::Map::new());
    }
    &mut obj[field]
}

/// The strategy of a built-in resource.
pub fn for_resource(info: &ResourceInfo, ctx: &StrategyContext) -> Arc<dyn Strategy> {
    match (info.group.as_str(), info.resource.as_str()) {
        ("autoscaling", "horizontalpodautoscalers") => Arc::new(hpa::HpaStrategy {
            v2: info.version == "v2",
        }),
        ("", "namespaces") => Arc::new(namespace::NamespaceStrategy),
        ("", "configmaps") => Arc::new(configmap::ConfigMapStrategy),
        ("", "secrets") => Arc::new(secret::SecretStrategy),
        ("", "pods") => Arc::new(pod::PodStrategy {
            api: ctx.api.clone(),
        }),
        ("", "bindings") => Arc::new(pod::BindingStrategy {
            api: ctx.api.clone(),
        }),
        ("", "services") => Arc::new(service::ServiceStrategy {
            allocator: ctx.services.clone(),
        }),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            Arc::new(deployment::WorkloadStrategy)
        }
        ("", "limitranges") => Arc::new(limitrange::LimitRangeStrategy),
        ("", "podtemplates") => Arc::new(pod::PodTemplateStrategy),
        ("", "persistentvolumes") => Arc::new(volumes::PersistentVolumeStrategy),
        ("", "persistentvolumeclaims") => Arc::new(volumes::PersistentVolumeClaimStrategy),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            Arc::new(rbac::BindingStrategy)
        }
        ("discovery.k8s.io", "endpointslices") => Arc::new(endpointslice::EndpointSliceStrategy),
        ("storage.k8s.io", "storageclasses") => Arc::new(storage::StorageClassStrategy),
        ("storage.k8s.io", "csidrivers") => Arc::new(storage::CsiDriverStrategy),
        ("batch", "jobs") => Arc::new(batch::JobStrategy),
        ("batch", "cronjobs") => Arc::new(batch::CronJobStrategy),
        ("networking.k8s.io", "networkpolicies") => Arc::new(networking::NetworkPolicyStrategy),
        ("scheduling.k8s.io", "priorityclasses") => Arc::new(scheduling::PriorityClassStrategy),
        ("authorization.k8s.io", _) => Arc::new(review::AccessReviewStrategy),
        ("authentication.k8s.io", "tokenreviews") => Arc::new(review::TokenReviewStrategy {
            authenticator: ctx.authenticator.clone(),
        }),
        ("authentication.k8s.io", "selfsubjectreviews") => {
            Arc::new(review::SelfSubjectReviewStrategy)
        }
        _ => Arc::new(GenericStrategy),
    }
}

/// How a version that is not the storage version converts to and from it.
pub fn conversion_for(info: &ResourceInfo) -> Option<Arc<dyn Conversion>> {
    match (
        info.group.as_str(),
        info.resource.as_str(),
        info.version.as_str(),
        info.storage_version.as_deref(),
    ) {
        ("autoscaling", "horizontalpodautoscalers", "v1", Some("v2")) => {
            Some(Arc::new(hpa::HpaV1Conversion))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_served_in_several_versions_converts() {
        for info in crate::catalog::builtin_resources() {
            if info.storage_version.is_some() {
                assert!(
                    conversion_for(&info).is_some(),
                    "{}/{} {} has no conversion",
                    info.group,
                    info.resource,
                    info.version
                );
            }
        }
    }
}
