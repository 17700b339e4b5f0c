//! CEL admission policies (upstream: admission/plugin/policy): the ValidatingAdmissionPolicy
//! plugin. Policies and their bindings are kept current from the store (`informer`); each
//! policy is compiled once when it changes (`validating`); a request is matched against a
//! policy's `matchConstraints` and then each binding's `matchResources` (`matching`), the
//! binding's params are found (`paramRef` by name or selector, in the param kind's store), and
//! the policy is evaluated once per param. Denials, warnings and errors become upstream's answers.
//!
//! Not here yet: the `authorizer` variable, the runtime cost budget (the `cel` interpreter does
//! not count cost), publishing audit annotations (there is no audit log yet).

pub mod matching;
pub mod validating;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::labels::Selector;
use apimachinery::object::ObjectExt;
use apimachinery::{Reason, Status, StatusCause};
use async_trait::async_trait;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use self::matching::{Matched, NamespaceLabels};
use self::validating::{Annotation, Decision, Input, ValidatingPolicy};
use super::informer::{Derived, Informer, Objects};
use super::rules::{self, Versions, text};
use super::webhook::review::{Invocation, request_fields};
use super::{Attributes, Operation, ServedResources, ValidatingPlugin};
use crate::cel::eval::{Vars, json_to_cel};
use crate::registry::RegistryStore;

/// How long a request waits for the policies to be read at start-up before it is refused.
const READY_WAIT: Duration = Duration::from_secs(10);

/// The policy plugins and what they share. Made before the API exists; `start` gives them the
/// served resources.
#[derive(Clone, Default)]
pub struct Policies {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    validating: Arc<Informer>,
    validating_bindings: Arc<Informer>,
    hooks: Derived<Vec<Hook>>,
    resources: OnceLock<Arc<dyn ServedResources>>,
    namespaces: OnceLock<Arc<RegistryStore>>,
}

/// A policy with the bindings that name it (`PolicyHook`), policies in name order and bindings
/// in name order within each.
struct Hook {
    policy: ValidatingPolicy,
    bindings: Vec<Binding>,
}

struct Binding {
    name: String,
    match_resources: Option<matching::MatchResources>,
    param_ref: Option<Value>,
    actions: Vec<String>,
}

impl Policies {
    pub fn validating(&self) -> Arc<dyn ValidatingPlugin> {
        Arc::new(ValidatingAdmissionPolicy(self.shared.clone()))
    }

    /// Starts reading policies and bindings; until they are read, requests wait.
    pub fn start(&self, resources: Arc<dyn ServedResources>) {
        let find = |r: &str| {
            rules::find_store(
                resources.as_ref(),
                ("admissionregistration.k8s.io", "v1", r),
            )
        };
        if let Some(ns) = rules::find_store(resources.as_ref(), ("", "v1", "namespaces")) {
            let _ = self.shared.namespaces.set(ns);
        }
        for (informer, resource) in [
            (&self.shared.validating, "validatingadmissionpolicies"),
            (
                &self.shared.validating_bindings,
                "validatingadmissionpolicybindings",
            ),
        ] {
            match find(resource) {
                Some(store) => {
                    tokio::spawn(informer.clone().run(store));
                }
                None => informer.mark_synced(),
            }
        }
        let _ = self.shared.resources.set(resources);
    }
}

fn build_hooks(objects: &[Objects]) -> Vec<Hook> {
    let (policies, bindings) = (&objects[0], &objects[1]);
    let mut hooks: Vec<Hook> = Vec::new();
    for (name, policy) in policies.iter() {
        let bound: Vec<Binding> = bindings
            .values()
            .filter(|b| b.pointer("/spec/policyName").and_then(Value::as_str) == Some(name))
            .map(|b| {
                let spec = b.get("spec").unwrap_or(&Value::Null);
                Binding {
                    name: b.name().to_string(),
                    match_resources: spec
                        .get("matchResources")
                        .filter(|v| !v.is_null())
                        .map(matching::MatchResources::from_api),
                    param_ref: spec.get("paramRef").filter(|v| !v.is_null()).cloned(),
                    actions: rules::strings(spec.get("validationActions")),
                }
            })
            .collect();
        // A policy no binding names is never evaluated.
        if !bound.is_empty() {
            hooks.push(Hook {
                policy: ValidatingPolicy::compile(policy),
                bindings: bound,
            });
        }
    }
    hooks
}

/// Resources no CEL policy sees: the policy kinds themselves (a broken policy can always be
/// removed) and the reviews that are never stored (`exclusion.Excluded`).
fn excluded(attrs: &Attributes<'_>) -> bool {
    let info = attrs.resource;
    match info.group.as_str() {
        "admissionregistration.k8s.io" => matches!(
            info.resource.as_str(),
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        ),
        "authentication.k8s.io" => {
            matches!(
                info.resource.as_str(),
                "selfsubjectreviews" | "tokenreviews"
            )
        }
        "authorization.k8s.io" => {
            info.resource.ends_with("subjectaccessreviews")
                || info.resource == "selfsubjectrulesreviews"
        }
        _ => false,
    }
}

/// A denial on its way to the answer (`policyDecisionWithMetadata`).
struct Denied {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

impl Shared {
    async fn hooks(&self, attrs: &Attributes<'_>) -> Result<Option<Arc<Vec<Hook>>>, Status> {
        if self.resources.get().is_none() {
            return Ok(None);
        }
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        while !(self.validating.has_synced() && self.validating_bindings.has_synced()) {
            if tokio::time::Instant::now() > deadline {
                return Err(rules::forbidden(attrs, "not yet ready to handle request"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(Some(self.hooks.get(
            &[&self.validating, &self.validating_bindings],
            build_hooks,
        )))
    }

    /// The store that serves a policy's `paramKind`, and whether its objects are namespaced.
    fn param_store(
        &self,
        (api_version, kind): &(String, String),
    ) -> Result<Arc<RegistryStore>, String> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.resources
            .get()
            .into_iter()
            .flat_map(|r| r.stores())
            .find(|s| s.info.group == group && s.info.version == version && s.info.kind == *kind)
            .ok_or_else(|| {
                let gvk = if group.is_empty() {
                    format!("{version}, Kind={kind}")
                } else {
                    format!("{group}/{version}, Kind={kind}")
                };
                format!("failed to find resource referenced by paramKind: '{gvk}'")
            })
    }
}

/// `CollectParams`: the params a binding gives the policy (`None`: evaluate without params).
async fn collect_params(
    store: Option<&Arc<RegistryStore>>,
    param_ref: Option<&Value>,
    namespace: &str,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(store), Some(param_ref)) = (store, param_ref) else {
        return Ok(vec![None]);
    };
    let ref_namespace = text(param_ref, "namespace");
    let params_namespace = if store.info.namespaced {
        if !ref_namespace.is_empty() {
            ref_namespace
        } else if namespace.is_empty() {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into(),
            );
        } else {
            namespace
        }
    } else if !ref_namespace.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        ""
    };
    let name = text(param_ref, "name");
    let selector = param_ref.get("selector").filter(|s| !s.is_null());
    let params: Vec<Option<Value>> = if !name.is_empty() {
        if selector.is_some() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        match store
            .get(params_namespace, name, ResourceVersion::Any)
            .await
        {
            Ok(o) => vec![Some(o.value().map_err(|e| e.to_string())?)],
            Err(s) if s.reason == Reason::NotFound => Vec::new(),
            Err(s) => return Err(s.message),
        }
    } else if let Some(selector) = selector {
        let selector = Selector::from_label_selector(selector)?;
        let opts = ListOptions {
            resource_version: ResourceVersion::Any,
            ..Default::default()
        };
        let listed = store
            .list(params_namespace, &opts)
            .await
            .map_err(|s| s.message)?;
        let mut found = Vec::new();
        for item in listed.items {
            let v = item.value().map_err(|e| e.to_string())?;
            if selector.matches_json(v.pointer("/metadata/labels").and_then(Value::as_object)) {
                found.push(Some(v));
            }
        }
        found
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() && text(param_ref, "parameterNotFoundAction") == "Deny" {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(params)
}

/// `CreateNamespaceObject`: what a policy sees of the request's namespace.
fn namespace_object(ns: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(meta) = ns.get("metadata").and_then(Value::as_object) {
        let kept: serde_json::Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "name"
                        | "generateName"
                        | "namespace"
                        | "uid"
                        | "resourceVersion"
                        | "generation"
                        | "creationTimestamp"
                        | "deletionTimestamp"
                        | "deletionGracePeriodSeconds"
                        | "labels"
                        | "annotations"
                        | "finalizers"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("metadata".into(), Value::Object(kept));
    }
    for field in ["spec", "status"] {
        if let Some(v) = ns.get(field) {
            out.insert(field.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// `reasonToCode`: the status code a policy's reason answers with.
fn reason_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

const PLUGIN: &str = "ValidatingAdmissionPolicy";

pub struct ValidatingAdmissionPolicy(Arc<Shared>);

impl ValidatingAdmissionPolicy {
    /// The request's objects as the matched version sees them, converted once per version.
    async fn versioned(
        versions: &Versions<'_>,
        cache: &mut Vec<(String, Option<Value>, Option<Value>)>,
        matched: &Matched,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(Option<Value>, Option<Value>), String> {
        if let Some((_, o, old)) = cache.iter().find(|(v, _, _)| *v == matched.version) {
            return Ok((o.clone(), old.clone()));
        }
        let o = versions
            .convert(matched.target.as_ref(), obj)
            .await
            .map_err(|s| format!("failed to convert object version: {}", s.message))?;
        let old = versions
            .convert(matched.target.as_ref(), old)
            .await
            .map_err(|s| format!("failed to convert object version: {}", s.message))?;
        cache.push((matched.version.clone(), o.clone(), old.clone()));
        Ok((o, old))
    }
}

#[async_trait]
impl ValidatingPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let shared = &self.0;
        if excluded(attrs) {
            return Ok(());
        }
        let Some(hooks) = shared.hooks(attrs).await? else {
            return Ok(());
        };
        if hooks.is_empty() {
            return Ok(());
        }
        // A delete's object is the stored one, which policies see as `oldObject`.
        let obj = (attrs.operation != Operation::Delete).then_some(obj);
        let old = attrs.old_object;
        let versions = Versions::new(shared.resources.get(), attrs);
        let mut ns_labels = NamespaceLabels::new(shared.namespaces.get());
        let mut converted = Vec::new();
        let mut namespace: Option<Option<Value>> = None;
        let mut denied: Vec<Denied> = Vec::new();
        let config_error = |policy: &ValidatingPolicy, binding: Option<&str>, err: String| {
            let message = match binding {
                None => format!("failed to configure policy: {err}"),
                Some(_) => format!("failed to configure binding: {err}"),
            };
            match policy.failure_policy.as_str() {
                "Ignore" => None,
                "Fail" => Some(Denied {
                    policy: policy.name.clone(),
                    binding: binding.map(str::to_string),
                    message,
                    reason: None,
                }),
                other => Some(Denied {
                    policy: policy.name.clone(),
                    binding: binding.map(str::to_string),
                    message: format!("unrecognized failure policy: '{other}'"),
                    reason: None,
                }),
            }
        };
        for hook in hooks.iter() {
            let policy = &hook.policy;
            let matched = match &policy.constraints {
                None => Err("policy contained no match constraints, a required field".to_string()),
                Some(c) => c.matches(attrs, obj, &mut ns_labels, &versions).await,
            };
            let matched = match matched {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    denied.extend(config_error(policy, None, e));
                    continue;
                }
            };
            let param_store = match &policy.param_kind {
                None => None,
                Some(kind) => match shared.param_store(kind) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        denied.extend(config_error(policy, None, e));
                        continue;
                    }
                },
            };
            for binding in &hook.bindings {
                let binding_match = match &binding.match_resources {
                    None => Ok(true),
                    Some(m) => m
                        .matches(attrs, obj, &mut ns_labels, &versions)
                        .await
                        .map(|m| m.is_some()),
                };
                match binding_match {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        denied.extend(config_error(policy, Some(&binding.name), e));
                        continue;
                    }
                }
                let params = match collect_params(
                    param_store.as_ref(),
                    binding.param_ref.as_ref(),
                    attrs.namespace,
                )
                .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        denied.extend(config_error(policy, Some(&binding.name), e));
                        continue;
                    }
                };
                if params.is_empty() {
                    continue;
                }
                let (vobj, vold) =
                    match Self::versioned(&versions, &mut converted, &matched, obj, old).await {
                        Ok(v) => v,
                        Err(e) => {
                            denied.extend(config_error(policy, Some(&binding.name), e));
                            continue;
                        }
                    };
                // The Namespace object is not in a namespace of its own, here.
                let (_, _, kind) = attrs.kind();
                let is_namespace = kind == "Namespace" && attrs.resource.group.is_empty();
                if namespace.is_none() {
                    namespace = Some(match (attrs.namespace, is_namespace) {
                        ("", _) | (_, true) => None,
                        (name, false) => match shared.namespaces.get() {
                            Some(store) => {
                                Some(namespace_object(&rules::read_namespace(store, name).await?))
                            }
                            None => None,
                        },
                    });
                }
                let inv = Invocation {
                    group: matched.group.clone(),
                    version: matched.version.clone(),
                    resource: matched.resource.clone(),
                    kind: matched.kind.clone(),
                };
                let request = Value::Object(request_fields(attrs, &inv));
                let base = Vars::default()
                    .bind_json("object", vobj.as_ref())
                    .bind_json("oldObject", vold.as_ref())
                    .bind("request", json_to_cel(&request))
                    .bind_json(
                        "namespaceObject",
                        namespace.as_ref().and_then(Option::as_ref),
                    );
                for param in &params {
                    let vars = base.clone().bind_json("params", param.as_ref());
                    let mut input = Input::new(policy, vars);
                    let outcome = policy.validate(&mut input);
                    for decision in outcome.decisions {
                        let Decision::Deny {
                            message, reason, ..
                        } = decision
                        else {
                            continue;
                        };
                        for action in &binding.actions {
                            match action.as_str() {
                                "Deny" => denied.push(Denied {
                                    policy: policy.name.clone(),
                                    binding: Some(binding.name.clone()),
                                    message: message.clone(),
                                    reason: reason.clone(),
                                }),
                                "Warn" => crate::warning::add(format!(
                                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                                    policy.name, binding.name, message
                                )),
                                // Audit: for the audit log, which is not built yet.
                                _ => {}
                            }
                        }
                    }
                    for annotation in outcome.annotations {
                        match annotation {
                            Annotation::Error(message) => denied.push(Denied {
                                policy: policy.name.clone(),
                                binding: Some(binding.name.clone()),
                                message,
                                reason: None,
                            }),
                            Annotation::Publish(key, value) => {
                                tracing::debug!(policy = %policy.name, %key, %value, "audit annotation");
                            }
                        }
                    }
                }
            }
        }
        let Some(first) = denied.into_iter().next() else {
            return Ok(());
        };
        let message = match &first.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                first.policy, b, first.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                first.policy, first.message
            ),
        };
        let mut status = rules::forbidden(attrs, &message);
        let reason = first.reason.unwrap_or_else(|| "Invalid".into());
        status.code = reason_code(&reason);
        status.reason = Reason::parse(&reason);
        status
            .details
            .get_or_insert_with(Default::default)
            .causes
            .push(StatusCause {
                message,
                ..Default::default()
            });
        Err(status)
    }
}
