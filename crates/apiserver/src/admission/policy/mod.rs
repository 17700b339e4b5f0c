//! CEL admission policies (upstream: admission/plugin/policy): the MutatingAdmissionPolicy and
//! ValidatingAdmissionPolicy plugins. Policies and their bindings are kept current from the store
//! (`admission::informer`); each policy is compiled once when it changes (`compiled`,
//! `validating`, `mutating`). A request is matched against each policy's `matchConstraints`,
//! then each binding's `matchResources` (`matching`); the binding's params are found (`paramRef`
//! by name or selector, in the store of the param kind), and the policy runs once per param.
//! Configuration errors, denials, warnings and mutations become upstream's answers.
//!
//! Expressions' `authorizer` checks go to the server's authorizer (`Shared::evaluate`).
//!
//! Audit annotations (`auditAnnotations`, the `Audit` validation action) go to the request's
//! audit event through `audit::add_annotation`.
//!
//! `typechecking` checks a ValidatingAdmissionPolicy's expressions against the kinds it matches,
//! for the status controller; admission never looks at its answers.
//!
//! Expressions are charged their runtime cost as upstream charges it (`compiled::Input`): match
//! conditions against `RuntimeCELCostBudgetMatchConditions`, a binding's validations and then
//! its message expressions against `RuntimeCELCostBudget`, audit annotations and each mutation
//! against a budget of their own, each evaluation against `PerCallLimit`. The cost is
//! `cel::runtime_cost`'s estimate with the sizes of the values bound (`object`, `oldObject`,
//! `params`, `request`, `namespaceObject`, `variables`), an upper bound of cel-go's count.

pub mod compiled;
pub mod matching;
pub mod mutating;
pub mod typechecking;
pub mod validating;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::labels::Selector;
use apimachinery::object::ObjectExt;
use apimachinery::{Reason, Status, StatusCause};
use async_trait::async_trait;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use self::compiled::{Core, Input};
use self::matching::{Matched, NamespaceLabels};
use self::mutating::{Gvk, MutatingPolicy, MutationError};
use self::validating::{Annotation, Decision, ValidatingPolicy};
use super::informer::{Derived, Informer, Objects};
use super::rules::{self, Kept, Versions, text};
use super::webhook::review::{Invocation, request_fields};
use super::{
    Attributes, MutatingPlugin, Operation, Reinvocation, ServedResources, ValidatingPlugin,
};
use crate::authentication::UserInfo;
use crate::authorization::{Authorizer, Decision as AuthzDecision};
use crate::cel::authz;
use crate::cel::eval::{Vars, json_to_cel};
use crate::registry::RegistryStore;
use crate::request::RequestInfo;

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
    validating: Source<ValidatingPolicy>,
    mutating: Source<MutatingPolicy>,
    resources: OnceLock<Arc<dyn ServedResources>>,
    namespaces: OnceLock<Arc<RegistryStore>>,
    /// What `authorizer` checks in expressions are put to.
    authorizer: OnceLock<Arc<dyn Authorizer>>,
}

/// A policy kind: how it compiles, and its common part.
trait PolicyKind: Send + Sync + 'static {
    fn compile(policy: &Value) -> Self;
    fn core(&self) -> &Core;
}

impl PolicyKind for ValidatingPolicy {
    fn compile(policy: &Value) -> Self {
        ValidatingPolicy::compile(policy)
    }
    fn core(&self) -> &Core {
        &self.core
    }
}

impl PolicyKind for MutatingPolicy {
    fn compile(policy: &Value) -> Self {
        MutatingPolicy::compile(policy)
    }
    fn core(&self) -> &Core {
        &self.core
    }
}

/// The policies of one kind and their bindings, kept from the store.
struct Source<P> {
    policies: Arc<Informer>,
    bindings: Arc<Informer>,
    hooks: Derived<Vec<Hook<P>>>,
}

impl<P> Default for Source<P> {
    fn default() -> Self {
        Source {
            policies: Arc::default(),
            bindings: Arc::default(),
            hooks: Derived::default(),
        }
    }
}

/// A policy with the bindings that name it (`PolicyHook`), policies in name order and bindings
/// in name order within each; a policy no binding names is left out (it never runs).
struct Hook<P> {
    policy: P,
    bindings: Vec<Binding>,
}

struct Binding {
    name: String,
    match_resources: Option<matching::MatchResources>,
    param_ref: Option<Value>,
    /// `validationActions` (validating bindings only).
    actions: Vec<String>,
}

impl<P: PolicyKind> Source<P> {
    fn synced(&self) -> bool {
        self.policies.has_synced() && self.bindings.has_synced()
    }

    fn hooks(&self) -> Arc<Vec<Hook<P>>> {
        self.hooks
            .get(&[&self.policies, &self.bindings], |objects| {
                build_hooks(&objects[0], &objects[1])
            })
    }

    fn start(&self, resources: &dyn ServedResources, (policies, bindings): (&str, &str)) {
        for (informer, resource) in [(&self.policies, policies), (&self.bindings, bindings)] {
            match rules::find_store(resources, ("admissionregistration.k8s.io", "v1", resource)) {
                Some(store) => {
                    tokio::spawn(informer.clone().run(store));
                }
                // Not served: no policies, and nothing for requests to wait for.
                None => informer.mark_synced(),
            }
        }
    }
}

fn build_hooks<P: PolicyKind>(policies: &Objects, bindings: &Objects) -> Vec<Hook<P>> {
    let mut hooks = Vec::new();
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
        if !bound.is_empty() {
            hooks.push(Hook {
                policy: P::compile(policy),
                bindings: bound,
            });
        }
    }
    hooks
}

impl Policies {
    /// Every kind of policy and binding has been read once (for the `informer-sync` check).
    pub fn has_synced(&self) -> bool {
        self.shared.validating.synced() && self.shared.mutating.synced()
    }

    pub fn validating(&self) -> Arc<dyn ValidatingPlugin> {
        Arc::new(ValidatingAdmissionPolicy(self.shared.clone()))
    }

    pub fn mutating(&self) -> Arc<dyn MutatingPlugin> {
        Arc::new(MutatingAdmissionPolicy(self.shared.clone()))
    }

    /// Starts reading policies and bindings; until they are read, requests wait. `authorizer`
    /// answers the expressions' `authorizer` checks.
    pub fn start(&self, resources: Arc<dyn ServedResources>, authorizer: Arc<dyn Authorizer>) {
        let _ = self.shared.authorizer.set(authorizer);
        if let Some(ns) = rules::find_store(resources.as_ref(), ("", "v1", "namespaces")) {
            let _ = self.shared.namespaces.set(ns);
        }
        self.shared.validating.start(
            resources.as_ref(),
            (
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
            ),
        );
        self.shared.mutating.start(
            resources.as_ref(),
            (
                "mutatingadmissionpolicies",
                "mutatingadmissionpolicybindings",
            ),
        );
        let _ = self.shared.resources.set(resources);
    }
}

/// A policy error on its way to the answer (`PolicyError`, `policyDecisionWithMetadata`).
struct Denied {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

impl Denied {
    /// A configuration error (`addConfigError`): `None` when the policy fails open.
    fn config(core: &Core, binding: Option<&str>, err: String) -> Option<Denied> {
        let message = match binding {
            None => format!("failed to configure policy: {err}"),
            Some(_) => format!("failed to configure binding: {err}"),
        };
        core.fails_closed().then(|| Denied {
            policy: core.name.clone(),
            binding: binding.map(str::to_string),
            message,
            reason: None,
        })
    }
}

/// One step of a request's policies, in order: a policy, binding and param to run, or a
/// configuration error met on the way.
enum Step<'h, P> {
    Run {
        hook: &'h Hook<P>,
        binding: &'h Binding,
        matched: Arc<Matched>,
        param: Option<Value>,
    },
    Error(Denied),
}

impl<'h, P> Step<'h, P> {
    /// The run, or `None` with a configuration error put into `errors`.
    #[allow(clippy::type_complexity)]
    fn run(
        self,
        errors: &mut Vec<Denied>,
    ) -> Option<(&'h Hook<P>, &'h Binding, Arc<Matched>, Option<Value>)> {
        match self {
            Step::Error(d) => {
                errors.push(d);
                None
            }
            Step::Run {
                hook,
                binding,
                matched,
                param,
            } => Some((hook, binding, matched, param)),
        }
    }
}

impl Shared {
    async fn hooks<P: PolicyKind>(
        &self,
        source: &Source<P>,
        attrs: &Attributes<'_>,
    ) -> Result<Option<Arc<Vec<Hook<P>>>>, Status> {
        if self.resources.get().is_none() {
            return Ok(None);
        }
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        while !source.synced() {
            if tokio::time::Instant::now() > deadline {
                return Err(rules::forbidden(attrs, "not yet ready to handle request"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(Some(source.hooks()))
    }

    /// The store that serves a policy's `paramKind`.
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
                let gvk = Gvk {
                    group,
                    version,
                    kind,
                };
                format!("failed to find resource referenced by paramKind: '{gvk}'")
            })
    }

    /// The policies, bindings and params that apply to the request, with the configuration
    /// errors met on the way (`policyDispatcher.Dispatch` up to the delegate).
    async fn steps<'h, P: PolicyKind>(
        &self,
        hooks: &'h [Hook<P>],
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
        versions: &Versions<'_>,
    ) -> Vec<Step<'h, P>> {
        let mut ns_labels = NamespaceLabels::new(self.namespaces.get());
        let mut steps = Vec::new();
        for hook in hooks {
            let core = hook.policy.core();
            let matched = match &core.constraints {
                None => Err("policy contained no match constraints, a required field".to_string()),
                Some(c) => c.matches(attrs, obj, &mut ns_labels, versions).await,
            };
            let matched = match matched {
                Ok(Some(m)) => Arc::new(m),
                Ok(None) => continue,
                Err(e) => {
                    steps.extend(Denied::config(core, None, e).map(Step::Error));
                    continue;
                }
            };
            let param_store = match &core.param_kind {
                None => None,
                Some(kind) => match self.param_store(kind) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        steps.extend(Denied::config(core, None, e).map(Step::Error));
                        continue;
                    }
                },
            };
            for binding in &hook.bindings {
                let binding_match = match &binding.match_resources {
                    None => Ok(true),
                    Some(m) => m
                        .matches(attrs, obj, &mut ns_labels, versions)
                        .await
                        .map(|m| m.is_some()),
                };
                match binding_match {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        steps.extend(Denied::config(core, Some(&binding.name), e).map(Step::Error));
                        continue;
                    }
                }
                match collect_params(
                    param_store.as_ref(),
                    binding.param_ref.as_ref(),
                    attrs.namespace,
                )
                .await
                {
                    Ok(params) => steps.extend(params.into_iter().map(|param| Step::Run {
                        hook,
                        binding,
                        matched: matched.clone(),
                        param,
                    })),
                    Err(e) => {
                        steps.extend(Denied::config(core, Some(&binding.name), e).map(Step::Error))
                    }
                }
            }
        }
        steps
    }

    /// What policies see of the request's namespace: nothing for cluster-scoped objects and for
    /// the Namespace object itself.
    async fn namespace(&self, attrs: &Attributes<'_>) -> Result<Option<Value>, Status> {
        let (_, _, kind) = attrs.kind();
        let is_namespace = kind == "Namespace" && attrs.resource.group.is_empty();
        match (attrs.namespace, is_namespace, self.namespaces.get()) {
            ("", _, _) | (_, true, _) | (_, _, None) => Ok(None),
            (name, false, Some(store)) => Ok(Some(namespace_object(
                &rules::read_namespace(store, name).await?,
            ))),
        }
    }
}

/// The variables every expression of one run sees.
fn base_vars(
    attrs: &Attributes<'_>,
    matched: &Matched,
    obj: Option<&Value>,
    old: Option<&Value>,
    namespace: Option<&Value>,
    param: Option<&Value>,
) -> Vars {
    let inv = Invocation {
        group: matched.group.clone(),
        version: matched.version.clone(),
        resource: matched.resource.clone(),
        kind_group: matched.kind_group.clone(),
        kind_version: matched.kind_version.clone(),
        kind: matched.kind.clone(),
    };
    let request = Value::Object(request_fields(attrs, &inv));
    let user = attrs.user;
    let subject = authz::Subject {
        name: user.name.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
    };
    let info = attrs.resource;
    let request_resource = authz::Check {
        subject: subject.clone(),
        path: None,
        group: info.group.clone(),
        resource: info.resource.clone(),
        subresource: attrs.subresource.to_string(),
        namespace: attrs.namespace.to_string(),
        name: attrs.name.to_string(),
        verb: String::new(),
    };
    Vars::default()
        .bind_json("object", obj)
        .bind_json("oldObject", old)
        .bind("request", json_to_cel(&request))
        .bind_json("namespaceObject", namespace)
        .bind_json("params", param)
        .bind(
            "authorizer",
            authz::authorizer_value(subject, Some(request_resource)),
        )
}

/// How many times an evaluation runs to learn the answers to its authorization checks (each
/// run asks what the one before could not know; expressions rarely chain checks on answers).
const AUTHZ_ROUNDS: usize = 4;

impl Shared {
    /// Runs `f` (evaluations) until the authorizer answered every check it makes
    /// (`authz::with_session`).
    async fn evaluate<R>(&self, mut f: impl FnMut() -> R) -> R {
        let mut known = HashMap::new();
        for _ in 1..AUTHZ_ROUNDS {
            let (result, asked) = authz::with_session(&known, &mut f);
            let Some(authorizer) = self.authorizer.get().filter(|_| !asked.is_empty()) else {
                return result;
            };
            for check in asked {
                let answer = ask(authorizer.as_ref(), &check).await;
                known.insert(check, answer);
            }
        }
        authz::with_session(&known, f).0
    }
}

const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// The `validation.policy.admission.k8s.io/validation_failure` value: a list of one failure, its
/// fields in upstream's struct order, each encoded as Go's encoder does.
fn validation_failure(
    core: &compiled::Core,
    binding: &Binding,
    index: usize,
    message: &str,
) -> String {
    use apimachinery::validation::go_json;
    let actions: Vec<Value> = binding
        .actions
        .iter()
        .map(|a| Value::from(a.as_str()))
        .collect();
    format!(
        "[{{\"message\":{},\"policy\":{},\"binding\":{},\"expressionIndex\":{index},\"validationActions\":{}}}]",
        go_json(&Value::from(message)),
        go_json(&Value::from(core.name.as_str())),
        go_json(&Value::from(binding.name.as_str())),
        go_json(&Value::Array(actions)),
    )
}

/// One check put to the server's authorizer.
async fn ask(authorizer: &dyn Authorizer, check: &authz::Check) -> authz::Answer {
    let user = UserInfo {
        name: check.subject.name.clone(),
        uid: check.subject.uid.clone(),
        groups: check.subject.groups.clone(),
        extra: Default::default(),
    };
    let request = RequestInfo {
        is_resource_request: check.path.is_none(),
        path: check.path.clone().unwrap_or_default(),
        verb: check.verb.clone(),
        api_prefix: String::new(),
        api_group: check.group.clone(),
        api_version: "*".into(),
        namespace: check.namespace.clone(),
        resource: check.resource.clone(),
        subresource: check.subresource.clone(),
        name: check.name.clone(),
        ..Default::default()
    };
    match authorizer.authorize(&user, &request).await {
        AuthzDecision::Allow(reason) => authz::Answer {
            allowed: true,
            reason,
            error: None,
        },
        AuthzDecision::Deny(reason) | AuthzDecision::NoOpinion(reason) => authz::Answer {
            allowed: false,
            reason,
            error: None,
        },
    }
}

/// The request's objects as the matched version sees them, converted once per version.
struct Converted<'a> {
    versions: &'a Versions<'a>,
    cache: Vec<(String, Option<Value>, Option<Value>)>,
}

impl Converted<'_> {
    async fn get(
        &mut self,
        matched: &Matched,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<(Option<Value>, Option<Value>), String> {
        if let Some((_, o, old)) = self.cache.iter().find(|(v, _, _)| *v == matched.version) {
            return Ok((o.clone(), old.clone()));
        }
        let versions = self.versions;
        let convert = |v| async move {
            versions
                .convert(matched.target.as_ref(), v)
                .await
                .map_err(|s| format!("failed to convert object version: {}", s.message))
        };
        let o = convert(obj).await?;
        let old = convert(old).await?;
        self.cache
            .push((matched.version.clone(), o.clone(), old.clone()));
        Ok((o, old))
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

pub struct ValidatingAdmissionPolicy(Arc<Shared>);

#[async_trait]
impl ValidatingPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let shared = &self.0;
        if excluded(attrs) {
            return Ok(());
        }
        let Some(hooks) = shared.hooks(&shared.validating, attrs).await? else {
            return Ok(());
        };
        if hooks.is_empty() {
            return Ok(());
        }
        // A delete's object is the stored one, which policies see as `oldObject`.
        let obj = (attrs.operation != Operation::Delete).then_some(obj);
        let old = attrs.old_object;
        let versions = Versions::new(shared.resources.get(), attrs);
        let steps = shared.steps(&hooks, attrs, obj, &versions).await;
        let mut converted = Converted {
            versions: &versions,
            cache: Vec::new(),
        };
        let mut namespace: Option<Option<Value>> = None;
        let mut denied: Vec<Denied> = Vec::new();
        let mut published: std::collections::BTreeMap<(String, String), Vec<String>> =
            Default::default();
        for step in steps {
            let Some((hook, binding, matched, param)) = step.run(&mut denied) else {
                continue;
            };
            let policy = &hook.policy;
            let core = &policy.core;
            let (vobj, vold) = match converted.get(&matched, obj, old).await {
                Ok(v) => v,
                Err(e) => {
                    denied.extend(Denied::config(core, Some(&binding.name), e));
                    continue;
                }
            };
            if namespace.is_none() {
                namespace = Some(shared.namespace(attrs).await?);
            }
            let vars = base_vars(
                attrs,
                &matched,
                vobj.as_ref(),
                vold.as_ref(),
                namespace.as_ref().and_then(Option::as_ref),
                param.as_ref(),
            );
            let outcome = shared
                .evaluate(|| policy.validate(&mut Input::new(core, vars.clone())))
                .await;
            for (index, decision) in outcome.decisions.into_iter().enumerate() {
                let Decision::Deny {
                    message, reason, ..
                } = decision
                else {
                    continue;
                };
                for action in &binding.actions {
                    match action.as_str() {
                        "Deny" => denied.push(Denied {
                            policy: core.name.clone(),
                            binding: Some(binding.name.clone()),
                            message: message.clone(),
                            reason: reason.clone(),
                        }),
                        "Warn" => crate::warning::add(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                            core.name, binding.name, message
                        )),
                        "Audit" => crate::audit::add_annotation(
                            "validation.policy.admission.k8s.io/validation_failure",
                            validation_failure(core, binding, index, &message),
                        ),
                        _ => {}
                    }
                }
            }
            for annotation in outcome.annotations {
                match annotation {
                    Annotation::Error(message) => denied.push(Denied {
                        policy: core.name.clone(),
                        binding: Some(binding.name.clone()),
                        message,
                        reason: None,
                    }),
                    Annotation::Publish(key, mut value) => {
                        // Upstream cuts a value at 10 KiB (at a byte; here at the last whole
                        // character before it).
                        if value.len() > MAX_AUDIT_ANNOTATION_VALUE_LENGTH {
                            let mut end = MAX_AUDIT_ANNOTATION_VALUE_LENGTH;
                            while !value.is_char_boundary(end) {
                                end -= 1;
                            }
                            value.truncate(end);
                        }
                        let values = published.entry((core.name.clone(), key)).or_default();
                        if !values.contains(&value) {
                            values.push(value);
                        }
                    }
                }
            }
        }
        // `auditAnnotationCollector.publish`: one annotation per policy and key, the distinct
        // values of its bindings and params joined.
        for ((policy, key), values) in published {
            crate::audit::add_annotation(format!("{policy}/{key}"), values.join(", "));
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
        add_cause(&mut status, message);
        Err(status)
    }
}

fn add_cause(status: &mut Status, message: String) {
    status
        .details
        .get_or_insert_with(Default::default)
        .causes
        .push(StatusCause {
            message,
            ..Default::default()
        });
}

const MUTATING: &str = "MutatingAdmissionPolicy";

pub struct MutatingAdmissionPolicy(Arc<Shared>);

#[async_trait]
impl MutatingPlugin for MutatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        MUTATING
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        let shared = &self.0;
        if excluded(attrs) {
            return Ok(());
        }
        let Some(hooks) = shared.hooks(&shared.mutating, attrs).await? else {
            return Ok(());
        };
        if hooks.is_empty() {
            return Ok(());
        }
        let old = attrs.old_object;
        let versions = Versions::new(shared.resources.get(), attrs);
        let steps = shared.steps(&hooks, attrs, Some(obj), &versions).await;
        if steps.is_empty() {
            return Ok(());
        }
        let state = &attrs.state;
        let reinvoking = state.is_reinvoke();
        if reinvoking {
            let current = obj.clone();
            state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                if r.last_output.as_ref() != Some(&current) {
                    r.require_reinvoking_previous();
                }
            });
        }
        let namespace = if steps.iter().any(|s| matches!(s, Step::Run { .. })) {
            shared.namespace(attrs).await?
        } else {
            None
        };
        let (mut config_errors, mut run_errors) = (Vec::new(), Vec::new());
        // The object as the last policy left it, in the version that policy matched.
        let mut current: Option<(Arc<Matched>, Value)> = None;
        let mut dirty = false;
        for step in steps {
            let Some((hook, binding, matched, param)) = step.run(&mut config_errors) else {
                continue;
            };
            let policy = &hook.policy;
            let core = &policy.core;
            let run_error = |message: String| Denied {
                policy: core.name.clone(),
                binding: Some(binding.name.clone()),
                message,
                reason: Some("Invalid".into()),
            };
            let mut value = match &current {
                Some((m, v)) if m.version == matched.version => v.clone(),
                Some((m, v)) => {
                    let from = m.target.clone().or_else(|| versions.own().cloned());
                    let to = matched.target.clone().or_else(|| versions.own().cloned());
                    match (from, to) {
                        (Some(f), Some(t)) => f.convert_to(v.clone(), &t).await?,
                        _ => v.clone(),
                    }
                }
                None => versions
                    .convert(matched.target.as_ref(), Some(obj))
                    .await?
                    .unwrap_or(Value::Null),
            };
            let vold = versions
                .convert_kept(Kept::OldObject, matched.target.as_ref(), old)
                .await?;
            let vars = |o: &Value| {
                base_vars(
                    attrs,
                    &matched,
                    Some(o),
                    vold.as_ref(),
                    namespace.as_ref(),
                    param.as_ref(),
                )
            };
            let conditions = shared
                .evaluate(|| core.conditions_match(&mut Input::new(core, vars(&value))))
                .await;
            match conditions {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    run_errors.push(run_error(e));
                    continue;
                }
            }
            let key = format!(
                "{}/{}/{}/{}",
                core.name,
                binding.name,
                param.as_ref().map(|p| p.namespace()).unwrap_or(""),
                param.as_ref().map(|p| p.name()).unwrap_or("")
            );
            if reinvoking
                && !state.with_plugin(MUTATING, |r: &mut Reinvocation| r.reinvoke.contains(&key))
            {
                continue;
            }
            let before = value.clone();
            let gvk = Gvk {
                group: &matched.kind_group,
                version: &matched.kind_version,
                kind: &matched.kind,
            };
            let schemas = shared.resources.get().and_then(|r| {
                r.schemas_for(&matched.kind_group, &matched.kind_version, &matched.kind)
            });
            for mutation in &policy.mutations {
                let applied = shared
                    .evaluate(|| {
                        let mut input = Input::new(core, vars(&value));
                        mutation.apply(&mut input, &value, &gvk, schemas.as_deref())
                    })
                    .await;
                match applied {
                    Ok(next) => {
                        value = next;
                        dirty = true;
                    }
                    Err(MutationError::Status(s)) => return Err(s),
                    Err(MutationError::Policy(e)) => run_errors.push(run_error(e)),
                }
            }
            if value != before {
                state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                    r.require_reinvoking_previous()
                });
                state.request_reinvocation();
            }
            if policy.reinvoke_if_needed {
                state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                    r.previously_invoked.insert(key.clone());
                });
            }
            current = Some((matched, value));
        }
        // The last version back into the request's version; it is defaulted again.
        if dirty && let Some((m, v)) = current {
            *obj = match (&m.target, versions.own()) {
                (Some(from), Some(to)) => from.convert_to(v, to).await?,
                _ => v,
            };
            state.mark_patched();
            state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                r.require_reinvoking_previous()
            });
            state.request_reinvocation();
        }
        let output = obj.clone();
        state.with_plugin(MUTATING, |r: &mut Reinvocation| {
            r.last_output = Some(output)
        });
        // Errors of policies that fail open are dropped (`filteredErrors`).
        let errors: Vec<Denied> = config_errors
            .into_iter()
            .chain(run_errors.into_iter().filter(|d| {
                hooks
                    .iter()
                    .find(|h| h.policy.core.name == d.policy)
                    .is_none_or(|h| h.policy.core.fails_closed())
            }))
            .collect();
        let Some(first) = errors.first() else {
            return Ok(());
        };
        let text = |d: &Denied| match &d.binding {
            Some(b) => format!(
                "policy '{}' with binding '{}' denied request: {}",
                d.policy, b, d.message
            ),
            None => format!("policy {:?} denied request: {}", d.policy, d.message),
        };
        let mut status = rules::forbidden(attrs, "admission request denied by policy");
        status.message = text(first);
        if let Some(reason) = &first.reason {
            status.reason = Reason::parse(reason);
        }
        for d in &errors {
            add_cause(&mut status, text(d));
        }
        Err(status)
    }
}
