//! Admission plugins that know built-in kinds (upstream: plugin/pkg/admission), one module
//! each, installed in upstream's order: mutating plugins run first (LimitRanger's defaults,
//! ServiceAccount, TaintNodesByCondition, Priority, DefaultTolerationSeconds,
//! DefaultStorageClass, StorageObjectInUseProtection, RuntimeClass, DefaultIngressClass), then
//! validating ones (NamespaceLifecycle, LimitRanger's bounds, ServiceAccount's checks,
//! PodSecurity, Priority's check of PriorityClasses, PersistentVolumeClaimResize,
//! RuntimeClass's check of the overhead, CertificateApproval, CertificateSigning,
//! CertificateSubjectRestriction), with the CEL admission policies and then the admission
//! webhooks last in each phase, as upstream orders them, and ResourceQuota after every other
//! validating plugin, so that only what would be stored is charged. The framework, the seam and the
//! webhooks are `apiserver::admission`; `config` reads `--admission-control-config-file` and
//! hands each plugin its configuration.

use std::sync::{Arc, OnceLock};

use apiserver::admission::{Admission, MutatingPlugin, ValidatingPlugin};
use apiserver::endpoints::ApiResources;

mod certificate_subject_restriction;
mod certificates;
pub mod config;
mod default_ingress_class;
mod default_storage_class;
mod default_toleration_seconds;
mod limit_ranger;
mod namespace_lifecycle;
mod node_restriction;
mod persistent_volume_claim_resize;
pub mod plugins;
pub mod pod_security;
mod priority;
mod resource_quota;
mod runtime_class;
mod service_account;
mod storage_object_in_use_protection;
mod taint_nodes_by_condition;

pub use namespace_lifecycle::{IMMORTAL_NAMESPACES, NamespaceLifecycle};

/// A plugin by its upstream name, with its mutating and validating halves.
type Plugin = (
    &'static str,
    Option<Arc<dyn MutatingPlugin>>,
    Option<Arc<dyn ValidatingPlugin>>,
);

/// The enabled plugins (`setup.enabled`, see `plugins`) that are built, in upstream's order
/// (`AllOrderedPlugins`): each phase runs the plugins that have a half for it. Plugins are
/// configured from `config` (`--admission-control-config-file`); a plugin whose configuration
/// is refused fails start-up with the reason.
pub fn default_plugins(
    api: Arc<OnceLock<Arc<ApiResources>>>,
    setup: &Setup<'_>,
) -> Result<Admission, String> {
    let (config, webhooks) = (setup.config, setup.webhooks);
    let on = |name: &str| setup.enabled.contains(&name);
    let pod_security: Option<Arc<dyn ValidatingPlugin>> = if on("PodSecurity") {
        Some(Arc::new(pod_security::PodSecurity {
            api: api.clone(),
            config: pod_security::Config::load(config.config_for("PodSecurity")?.as_ref())?,
        }))
    } else {
        None
    };
    let priority = Arc::new(priority::Priority { api: api.clone() });
    let runtime_class = Arc::new(runtime_class::RuntimeClass { api: api.clone() });
    let limit_ranger = Arc::new(limit_ranger::LimitRanger { api: api.clone() });
    let service_account = Arc::new(service_account::ServiceAccount { api: api.clone() });
    let api_for_quota = api.clone();
    let limited = if on("ResourceQuota") {
        resource_quota::limited_resources(config.config_for("ResourceQuota")?.as_ref())?
    } else {
        Vec::new()
    };
    let authorizer = &setup.authorizer;
    let all: Vec<Plugin> = vec![
        (
            "NamespaceLifecycle",
            None,
            Some(Arc::new(NamespaceLifecycle { api: api.clone() })),
        ),
        (
            "LimitRanger",
            Some(limit_ranger.clone()),
            Some(limit_ranger),
        ),
        (
            "ServiceAccount",
            Some(service_account.clone()),
            Some(service_account),
        ),
        (
            "NodeRestriction",
            None,
            Some(Arc::new(node_restriction::NodeRestriction {
                api: api.clone(),
                authorizer: authorizer.clone(),
            })),
        ),
        (
            "TaintNodesByCondition",
            Some(Arc::new(taint_nodes_by_condition::TaintNodesByCondition)),
            None,
        ),
        ("PodSecurity", None, pod_security),
        ("Priority", Some(priority.clone()), Some(priority)),
        (
            "DefaultTolerationSeconds",
            Some(Arc::new(
                default_toleration_seconds::DefaultTolerationSeconds,
            )),
            None,
        ),
        (
            "DefaultStorageClass",
            Some(Arc::new(default_storage_class::DefaultStorageClass {
                api: api.clone(),
            })),
            None,
        ),
        (
            "StorageObjectInUseProtection",
            Some(Arc::new(
                storage_object_in_use_protection::StorageObjectInUseProtection,
            )),
            None,
        ),
        (
            "PersistentVolumeClaimResize",
            None,
            Some(Arc::new(
                persistent_volume_claim_resize::PersistentVolumeClaimResize { api: api.clone() },
            )),
        ),
        (
            "RuntimeClass",
            Some(runtime_class.clone()),
            Some(runtime_class),
        ),
        (
            "CertificateApproval",
            None,
            Some(Arc::new(certificates::CertificateApproval {
                authorizer: authorizer.clone(),
            })),
        ),
        (
            "CertificateSigning",
            None,
            Some(Arc::new(certificates::CertificateSigning {
                authorizer: authorizer.clone(),
            })),
        ),
        (
            "CertificateSubjectRestriction",
            None,
            Some(Arc::new(
                certificate_subject_restriction::CertificateSubjectRestriction,
            )),
        ),
        (
            "DefaultIngressClass",
            Some(Arc::new(default_ingress_class::DefaultIngressClass { api })),
            None,
        ),
        (
            "MutatingAdmissionPolicy",
            Some(setup.policies.mutating()),
            None,
        ),
        ("MutatingAdmissionWebhook", Some(webhooks.mutating()), None),
        (
            "ValidatingAdmissionPolicy",
            None,
            Some(setup.policies.validating()),
        ),
        (
            "ValidatingAdmissionWebhook",
            None,
            Some(webhooks.validating()),
        ),
        (
            "ResourceQuota",
            None,
            Some(Arc::new(resource_quota::ResourceQuota {
                api: api_for_quota,
                quotas: setup.quota.clone(),
                limited,
            })),
        ),
    ];
    debug_assert!(
        all.iter()
            .map(|p| p.0)
            .eq(plugins::IMPLEMENTED.iter().map(|(n, _)| *n))
    );
    let mut admission = Admission::default();
    for (name, mutating, _) in all.iter().filter(|p| on(p.0)) {
        if let Some(m) = mutating {
            admission = admission.with_mutating(m.clone(), plugins::handles(name));
        }
    }
    for (name, _, validating) in all.into_iter().filter(|p| on(p.0)) {
        if let Some(v) = validating {
            admission = admission.with_validating(v, plugins::handles(name));
        }
    }
    Ok(admission)
}

/// What the plugins are built from: the configuration file's content, the webhooks and the CEL
/// policies (made before the API, started once it is served), the quota bookkeeping shared with
/// the quota controller, and the server's authorizer, which plugins that authorize on their own
/// ask (upstream's `WantsAuthorizer` initializer).
pub struct Setup<'a> {
    pub config: &'a config::AdmissionConfig,
    pub webhooks: &'a apiserver::admission::webhook::Webhooks,
    pub policies: &'a apiserver::admission::policy::Policies,
    /// What the ResourceQuota plugin shares with the quota controller.
    pub quota: &'a crate::quota::Quotas,
    pub authorizer: Arc<dyn apiserver::authorization::Authorizer>,
    /// The plugins to run (`plugins::enabled_plugins`), by upstream name.
    pub enabled: &'a [&'static str],
}

/// `admission.NewForbidden`: a 403 on the request's resource, named by the request or, on a
/// create, by the object.
fn forbidden(
    attrs: &apiserver::admission::Attributes<'_>,
    obj: &serde_json::Value,
    why: String,
) -> apimachinery::Status {
    use apimachinery::object::ObjectExt;
    let name = if attrs.name.is_empty() {
        obj.name()
    } else {
        attrs.name
    };
    apimachinery::Status::forbidden(&attrs.resource.group_resource(), name, why)
}

/// `GetDefaultClass`: of the objects of `resource` annotated `"true"` under one of
/// `annotations`, the newest (the first by name among equally new ones).
async fn newest_default(
    api: &Arc<OnceLock<Arc<ApiResources>>>,
    (group, version, resource): (&str, &str, &str),
    annotations: &[&str],
) -> Result<Option<String>, apimachinery::Status> {
    use apimachinery::object::ObjectExt;
    let Some(store) = api.get().and_then(|a| a.get(group, version, resource)) else {
        return Ok(None);
    };
    let opts = storage::ListOptions {
        resource_version: storage::ResourceVersion::Any,
        ..Default::default()
    };
    let mut defaults = Vec::new();
    for item in store.list("", &opts).await?.items {
        let v = item.value().map_err(apimachinery::Status::internal)?;
        let marked = annotations.iter().any(|a| {
            v.pointer("/metadata/annotations")
                .and_then(|m| m.get(*a))
                .and_then(serde_json::Value::as_str)
                == Some("true")
        });
        if marked {
            let created = v
                .pointer("/metadata/creationTimestamp")
                .and_then(serde_json::Value::as_str)
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_nanos_opt().unwrap_or(0))
                .unwrap_or(0);
            defaults.push((std::cmp::Reverse(created), v.name().to_string()));
        }
    }
    defaults.sort();
    Ok(defaults.into_iter().next().map(|(_, name)| name))
}
