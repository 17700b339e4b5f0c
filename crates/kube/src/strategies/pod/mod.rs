//! Pods and pod templates (pkg/registry/core/pod, pkg/registry/core/podtemplate): the pod
//! strategy (defaults, status on create, validation of creates, updates and the
//! `ephemeralcontainers`, `resize` and `status` subresources, graceful deletion, warnings), the
//! `binding` and `eviction` subresources, and the entry points workload kinds use for their
//! templates: `default_pod_spec`, `validate_pod_spec`, `validate_pod_template_spec`,
//! `template_warnings`.

mod binding;
mod containers;
mod defaults;
mod eviction;
mod gates;
mod resize;
mod resources;
mod scheduling;
mod security;
mod spec;
mod status;
mod update;
mod util;
mod volumes;
mod warnings;

use apimachinery::Status;
use apimachinery::object::{JsonPointer, ObjectExt};
use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label};
use std::sync::Arc;

use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::Strategy;
use async_trait::async_trait;
use serde_json::{Value, json};

pub use defaults::default_pod_spec;
pub use gates::{drop_disabled_fields, drop_disabled_template_fields};
pub(crate) use resources::aggregate_containers;
pub use resources::compute_qos;
pub use spec::validate_template_metadata;
pub(crate) use volumes::validate_template_object_meta;
pub use warnings::{pod_warnings, template_warnings};

/// `ValidatePodTemplateSpec` of the template (metadata and spec) at `path`: labels,
/// annotations, the pod spec, annotation/field consistency, no ephemeral containers.
pub fn validate_pod_template_spec(template: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    spec::validate_template_spec(template, path)
}

pub struct PodStrategy {
    pub api: Arc<std::sync::OnceLock<Arc<ApiResources>>>,
}

/// PodTemplates: the template's pod spec gets the pod spec's defaults and validation.
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = crate::strategies::template_pod_spec(obj) {
            default_pod_spec(spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        drop_disabled_template_fields(obj, "/template", None);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        drop_disabled_template_fields(new, "/template", Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_template_spec(obj.get("template"), &FieldPath::new("template"))
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        template_warnings(obj.get("template"), &FieldPath::new("template"))
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        if new.get("template") == old.get("template") {
            return Vec::new();
        }
        template_warnings(new.get("template"), &FieldPath::new("template"))
    }
}

/// `bindings`: the older way to bind a pod, a create in the pod's namespace that is never
/// stored; it updates the pod as `pods/binding` does.
pub struct BindingStrategy {
    pub api: Arc<std::sync::OnceLock<Arc<ApiResources>>>,
}

#[async_trait]
impl Strategy for BindingStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        _user: &UserInfo,
        dry_run: bool,
    ) -> Option<Result<Value, Status>> {
        let api = self.api.get()?.clone();
        Some(binding::create_binding(&api, obj.namespace(), obj.name(), obj, dry_run).await)
    }
}

#[async_trait]
impl Strategy for PodStrategy {
    async fn serve_subresource_create(
        &self,
        subresource: &str,
        namespace: &str,
        name: &str,
        body: &Value,
        user: &UserInfo,
        dry_run: bool,
    ) -> Option<Result<Value, Status>> {
        let api = self.api.get()?.clone();
        match subresource {
            "eviction" => Some(eviction::evict(&api, namespace, name, body, user, dry_run).await),
            "binding" => Some(binding::create_binding(&api, namespace, name, body, dry_run).await),
            _ => None,
        }
    }

    /// `priority` and `preemptionPolicy` are no defaults: the Priority admission plugin sets
    /// them, after the create's managed fields are taken.
    fn default(&self, obj: &mut Value) {
        defaults::default_pod(obj);
    }

    /// A new pod is pending, with the QoS class of its resources (a class the client sent is
    /// kept, as upstream reads it before resetting the status); gated pods say why they wait;
    /// affinity label keys join their selectors.
    fn prepare_for_create(&self, obj: &mut Value) {
        let qos = obj
            .at("/status/qosClass")
            .and_then(Value::as_str)
            .filter(|q| !q.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| compute_qos(obj.get("spec").unwrap_or(&Value::Null)).to_string());
        let mut status = json!({"phase": "Pending", "qosClass": qos});
        let gated = obj
            .at("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        if gated {
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            status["conditions"] = json!([{"type": "PodScheduled", "status": "False",
                "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": null, "lastTransitionTime": now}]);
        }
        obj["status"] = status;
        if let Some(spec) = obj.get_mut("spec") {
            drop_disabled_fields(spec, None);
        }
        scheduling::merge_affinity_label_keys(obj);
        scheduling::merge_spread_label_keys(obj);
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        match subresource {
            "ephemeralcontainers" => update::prepare_ephemeral_update(new, old),
            "resize" => resize::prepare_resize(new, old),
            _ => {}
        }
        if let Some(spec) = new.get_mut("spec") {
            drop_disabled_fields(spec, old.get("spec"));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        spec::validate_pod_create(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        update::validate_pod_update(new, old)
    }

    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        match subresource {
            "ephemeralcontainers" => update::validate_ephemeral_update(new, old),
            "resize" => resize::validate_resize(new, old),
            _ => self.validate_update(new, old),
        }
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        status::validate_status_update(new, old)
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // The store keeps the spec and metadata of a status write, and the status of an
        // update of the pod.
        status::prepare_status_update(new, old);
        if let Some(spec) = new.get_mut("spec") {
            drop_disabled_fields(spec, old.get("spec"));
        }
    }

    /// The status strategy's `WarningsOnUpdate`: IPs in non-standard form. (Updates of the
    /// pod itself and of its other subresources warn about nothing, as upstream skips them.)
    fn warnings_on_status_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        status::status_warnings(new)
    }

    /// The pod's name becomes its hostname, so a name that is no DNS label earns a warning;
    /// then the pod spec's own warnings.
    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let mut w = Vec::new();
        let msgs = is_dns1123_label(obj.name());
        if !msgs.is_empty() {
            w.push(format!(
                "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [{}]",
                msgs.join(" ")
            ));
        }
        w.extend(pod_warnings(obj));
        w
    }

    /// `CheckGracefulDelete`: the requested grace period, else the pod's; at once for a pod
    /// that no node runs or that has finished; a negative period is 1.
    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let mut period = requested
            .or_else(|| {
                obj.at("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(0);
        let unscheduled = obj
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        let finished = matches!(
            obj.at("/status/phase").and_then(Value::as_str),
            Some("Failed" | "Succeeded")
        );
        if unscheduled || finished {
            period = 0;
        }
        if period < 0 {
            period = 1;
        }
        Some(period)
    }
}
