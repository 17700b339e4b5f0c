//! Per-kind behaviour of the built-in kinds: one `Strategy` per kind that has any, looked up by
//! group and resource. Kinds not listed here use `GenericStrategy`.

mod admissionregistration;
mod apiservice;
mod batch;
pub(crate) mod certificates;
mod configmap;
mod coordination;
mod dra;
mod dra_cel;
mod endpoints;
mod endpointslice;
mod events;
pub(crate) mod fields;
mod flowcontrol;
pub(crate) mod godiff;
mod hpa;
mod limitrange;
mod namespace;
mod networking;
mod node;
mod nodeselection;
mod pod;
mod rbac;
mod resourcequota;
mod resources;
pub(crate) mod review;
mod runtimeclass;
mod scheduling;
mod secret;
mod service;
pub(crate) mod service_alloc;
mod serviceaccount;
mod storage;
mod volume_sources;
mod volumes;
mod workloads;

use std::sync::Arc;

use serde_json::Value;

use apiserver::authentication::Authenticator;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{Conversion, GenericStrategy, ResourceInfo, Strategy};

/// What the quota evaluators read of a Pod: its QoS class and aggregated container resources.
pub(crate) use pod::{aggregate_containers, compute_qos};
pub use service::ServiceIpAllocator;

/// What strategies may need besides their own kind: allocators, the authenticators, and the
/// served resources (filled in once they exist).
pub struct StrategyContext {
    pub services: Arc<ServiceIpAllocator>,
    pub authenticator: Arc<dyn Authenticator>,
    pub api: Arc<std::sync::OnceLock<Arc<ApiResources>>>,
    /// Service-account tokens, for the TokenRequest subresource.
    pub tokens: Option<Arc<crate::serviceaccount::Tokens>>,
    /// The server's authorizer, for the access reviews.
    pub authorizer: Arc<dyn apiserver::authorization::Authorizer>,
    /// RBAC's escalation checks, for the policy-based RBAC kinds.
    pub escalation: crate::rbac::escalation::Escalation,
}

/// Sets `field` of an object unless it holds a value: how upstream's `SetDefaults_*` functions
/// fill unset pointers and empty strings alike.
pub(crate) fn set_default(obj: &mut Value, field: &str, value: serde_json::Value) {
    // Only objects have fields (the Go type check keeps other values out of struct places).
    if obj.is_object()
        && obj
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        obj[field] = value;
    }
}

/// A non-pointer struct field of the Go type: always there for defaulting, as Go's zero value
/// is, so made an empty object when the JSON leaves it out or sends `null`. `None` when `obj`
/// is not an object or the field holds something else (the decoder's type checks refuse such
/// bodies before defaulting). Defaults inside an absent struct thus apply as upstream's do (a
/// Deployment without a template still gets its pod spec's defaults, so its errors are only
/// the ones upstream reports).
pub(crate) fn struct_field<'a>(obj: &'a mut Value, field: &str) -> Option<&'a mut Value> {
    let map = obj.as_object_mut()?;
    let v = map.entry(field).or_insert(Value::Null);
    if v.is_null() {
        *v = Value::Object(serde_json::Map::new());
    }
    v.is_object().then_some(v)
}

/// The pod spec of `holder.template`, both non-pointer structs (workloads, jobs, pod templates).
pub(crate) fn template_pod_spec(holder: &mut Value) -> Option<&mut Value> {
    struct_field(struct_field(holder, "template")?, "spec")
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
        ("", "services") => Arc::new(service::ServiceStrategy::new(
            ctx.services.clone(),
            ctx.api.clone(),
        )),
        ("apps", "deployments") => Arc::new(workloads::DeploymentStrategy),
        ("apps", "replicasets") => Arc::new(workloads::ReplicaSetStrategy),
        ("apps", "statefulsets") => Arc::new(workloads::StatefulSetStrategy),
        ("apps", "daemonsets") => Arc::new(workloads::DaemonSetStrategy),
        ("apps", "controllerrevisions") => Arc::new(workloads::ControllerRevisionStrategy),
        ("", "replicationcontrollers") => Arc::new(workloads::ReplicationControllerStrategy),
        ("policy", "poddisruptionbudgets") => Arc::new(workloads::PodDisruptionBudgetStrategy),
        ("", "limitranges") => Arc::new(limitrange::LimitRangeStrategy),
        ("", "podtemplates") => Arc::new(pod::PodTemplateStrategy),
        ("", "persistentvolumes") => Arc::new(volumes::PersistentVolumeStrategy),
        ("", "persistentvolumeclaims") => Arc::new(volumes::PersistentVolumeClaimStrategy),
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => Arc::new(rbac::RoleStrategy {
            namespaced: info.resource == "roles",
            escalation: ctx.escalation.clone(),
        }),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            Arc::new(rbac::BindingStrategy {
                namespaced: info.resource == "rolebindings",
                escalation: ctx.escalation.clone(),
            })
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            Arc::new(admissionregistration::WebhookConfigurationStrategy { mutating: false })
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            Arc::new(admissionregistration::WebhookConfigurationStrategy { mutating: true })
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            Arc::new(admissionregistration::PolicyStrategy { mutating: false })
        }
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies") => {
            Arc::new(admissionregistration::PolicyStrategy { mutating: true })
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            Arc::new(admissionregistration::PolicyBindingStrategy { mutating: false })
        }
        ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings") => {
            Arc::new(admissionregistration::PolicyBindingStrategy { mutating: true })
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            Arc::new(flowcontrol::FlowSchemaStrategy)
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            Arc::new(flowcontrol::PriorityLevelStrategy)
        }
        ("apiregistration.k8s.io", "apiservices") => Arc::new(apiservice::ApiServiceStrategy),
        ("certificates.k8s.io", "certificatesigningrequests") => {
            Arc::new(certificates::CsrStrategy)
        }
        ("coordination.k8s.io", "leases") => Arc::new(coordination::LeaseStrategy),
        ("discovery.k8s.io", "endpointslices") => Arc::new(endpointslice::EndpointSliceStrategy),
        ("storage.k8s.io", "storageclasses") => Arc::new(storage::StorageClassStrategy),
        ("storage.k8s.io", "csidrivers") => Arc::new(storage::CsiDriverStrategy),
        ("storage.k8s.io", "csinodes") => Arc::new(storage::CsiNodeStrategy),
        ("storage.k8s.io", "volumeattachments") => Arc::new(storage::VolumeAttachmentStrategy),
        ("storage.k8s.io", "volumeattributesclasses") => {
            Arc::new(storage::VolumeAttributesClassStrategy)
        }
        ("storage.k8s.io", "csistoragecapacities") => Arc::new(storage::CsiStorageCapacityStrategy),
        ("", "nodes") => Arc::new(node::NodeStrategy),
        ("", "serviceaccounts") => Arc::new(serviceaccount::ServiceAccountStrategy {
            tokens: ctx.tokens.clone(),
        }),
        ("", "resourcequotas") => Arc::new(resourcequota::ResourceQuotaStrategy),
        ("", "events") => Arc::new(events::EventStrategy { events_api: false }),
        ("events.k8s.io", "events") => Arc::new(events::EventStrategy { events_api: true }),
        ("node.k8s.io", "runtimeclasses") => Arc::new(runtimeclass::RuntimeClassStrategy),
        ("resource.k8s.io", "resourceclaims") => {
            Arc::new(dra::ResourceClaimStrategy { template: false })
        }
        ("resource.k8s.io", "resourceclaimtemplates") => {
            Arc::new(dra::ResourceClaimStrategy { template: true })
        }
        ("resource.k8s.io", "deviceclasses") => Arc::new(dra::DeviceClassStrategy),
        ("resource.k8s.io", "resourceslices") => Arc::new(dra::ResourceSliceStrategy),
        ("batch", "jobs") => Arc::new(batch::JobStrategy),
        ("batch", "cronjobs") => Arc::new(batch::CronJobStrategy),
        ("networking.k8s.io", "networkpolicies") => Arc::new(networking::NetworkPolicyStrategy),
        ("networking.k8s.io", "ingresses") => Arc::new(networking::IngressStrategy),
        ("networking.k8s.io", "ingressclasses") => Arc::new(networking::IngressClassStrategy),
        ("networking.k8s.io", "servicecidrs") => Arc::new(networking::ServiceCidrStrategy),
        ("networking.k8s.io", "ipaddresses") => Arc::new(networking::IpAddressStrategy),
        ("", "endpoints") => Arc::new(endpoints::EndpointsStrategy),
        ("scheduling.k8s.io", "priorityclasses") => Arc::new(scheduling::PriorityClassStrategy),
        ("authorization.k8s.io", _) => Arc::new(review::AccessReviewStrategy {
            authorizer: ctx.authorizer.clone(),
        }),
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
        // events.k8s.io/v1 reads and writes core/v1's events.
        ("events.k8s.io", "events", "v1", Some("v1")) => Some(Arc::new(events::EventsV1Conversion)),
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
