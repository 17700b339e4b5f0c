//! Priority (upstream: plugin/pkg/admission/priority): a Pod created gets the priority and
//! preemption policy of its PriorityClass, or of the global default class, or 0 and
//! `PreemptLowerPriority` when there is none; a class that does not exist, or a priority or
//! policy the pod states that differs from its class's, is refused. An update keeps what was
//! computed at create. Only one PriorityClass may be the global default.

use std::sync::{Arc, OnceLock};

use apimachinery::object::{JsonPointer, ObjectExt};
use apimachinery::{GroupResource, Status};
use apiserver::admission::{Attributes, MutatingPlugin, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use super::forbidden;

pub struct Priority {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

/// A PriorityClass, as the plugin reads it: decoded from the stored JSON with nothing else
/// built (every Pod create reads every class).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Class {
    #[serde(default)]
    metadata: ClassMeta,
    #[serde(default)]
    value: i64,
    #[serde(default)]
    preemption_policy: Option<String>,
    #[serde(default)]
    global_default: Option<bool>,
}

#[derive(Default, serde::Deserialize)]
struct ClassMeta {
    #[serde(default)]
    name: String,
}

impl Priority {
    /// Every PriorityClass, from the watch cache (upstream reads its informer's lister).
    async fn classes(&self) -> Result<Vec<Class>, Status> {
        let Some(store) = self
            .api
            .get()
            .and_then(|a| a.get("scheduling.k8s.io", "v1", "priorityclasses"))
        else {
            return Ok(Vec::new());
        };
        let opts = ListOptions {
            resource_version: ResourceVersion::Any,
            ..Default::default()
        };
        let list = store.list("", &opts).await?;
        list.items
            .iter()
            .map(|item| serde_json::from_slice(&item.bytes).map_err(Status::internal))
            .collect()
    }

    /// `getDefaultPriorityClass`: of the classes marked global default, the lowest.
    async fn default_class(&self) -> Result<Option<Class>, Status> {
        Ok(self
            .classes()
            .await?
            .into_iter()
            .filter(|c| c.global_default == Some(true))
            .min_by_key(|c| c.value))
    }
}

#[async_trait]
impl MutatingPlugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if !attrs.subresource.is_empty()
            || !attrs.resource.group.is_empty()
            || attrs.resource.resource != "pods"
        {
            return Ok(());
        }
        match attrs.operation {
            Operation::Update => {
                let Some(old) = attrs.old_object.and_then(|o| o.get("spec")) else {
                    return Ok(());
                };
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    for field in ["priority", "preemptionPolicy"] {
                        if spec.get(field).is_none_or(Value::is_null)
                            && let Some(v) = old.get(field).filter(|v| !v.is_null())
                        {
                            spec.insert(field.to_string(), v.clone());
                        }
                    }
                }
                Ok(())
            }
            Operation::Create => self.admit_create(attrs, obj).await,
            _ => Ok(()),
        }
    }
}

impl Priority {
    async fn admit_create(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        let requested = obj
            .at("/spec/priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        // `establishPriority`: the named class, or the default one, or none.
        let (class_name, value, policy) = if requested.is_empty() {
            match self.default_class().await? {
                Some(c) => (c.metadata.name, c.value, c.preemption_policy),
                None => (String::new(), 0, Some("PreemptLowerPriority".to_string())),
            }
        } else {
            let classes = self.classes().await?;
            match classes.into_iter().find(|c| c.metadata.name == requested) {
                Some(c) => (requested, c.value, c.preemption_policy),
                None => {
                    return Err(forbidden(
                        attrs,
                        obj,
                        format!("no PriorityClass with name {requested} was found"),
                    ));
                }
            }
        };
        // What the pod states is checked before anything is set, so that a refusal shows the
        // pod as it came.
        if let Some(stated) = obj.at("/spec/priority").and_then(Value::as_i64)
            && stated != value
        {
            return Err(forbidden(
                attrs,
                obj,
                format!(
                    "the integer value of priority ({stated}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
                ),
            ));
        }
        if let Some(policy) = &policy
            && let Some(stated) = obj.at("/spec/preemptionPolicy").and_then(Value::as_str)
            && stated != policy
        {
            return Err(forbidden(
                attrs,
                obj,
                format!(
                    "the string value of PreemptionPolicy ({stated}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                ),
            ));
        }
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if class_name.is_empty() {
            spec.remove("priorityClassName");
        } else {
            spec.insert("priorityClassName".into(), Value::from(class_name));
        }
        spec.insert("priority".into(), Value::from(value));
        if let Some(policy) = policy {
            spec.insert("preemptionPolicy".into(), Value::from(policy));
        }
        Ok(())
    }
}

#[async_trait]
impl ValidatingPlugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    /// `validatePriorityClass`: a class marked global default while another one is.
    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !attrs.subresource.is_empty()
            || attrs.resource.group != "scheduling.k8s.io"
            || attrs.resource.resource != "priorityclasses"
            || !matches!(attrs.operation, Operation::Create | Operation::Update)
            || obj.get("globalDefault") != Some(&Value::Bool(true))
        {
            return Ok(());
        }
        if let Some(existing) = self.default_class().await?
            && (attrs.operation == Operation::Create || existing.metadata.name != obj.name())
        {
            let name = if attrs.name.is_empty() {
                obj.name()
            } else {
                attrs.name
            };
            return Err(Status::forbidden(
                &GroupResource::new("scheduling.k8s.io", "priorityclasses"),
                name,
                format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    existing.metadata.name
                ),
            ));
        }
        Ok(())
    }
}
