//! Admission webhooks (upstream: apiserver/pkg/admission/plugin/webhook): the
//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins. Both read their
//! configurations from the store (`source`), pick the webhooks a request matches (`hook`:
//! rules, selectors, match conditions; `matchPolicy: Equivalent` finds another served version of
//! the resource and the object is converted to it), and send an AdmissionReview (`review`) over
//! the pooled client of `util::webhook`. Mutating webhooks run one after another and their
//! JSONPatches are applied in turn (with a second round for `reinvocationPolicy: IfNeeded`);
//! validating webhooks run all at once. What the audit event records of the calls comes as
//! upstream's annotations: a webhook's own `auditAnnotations` as `<webhook name>/<key>`, and
//! under `round_<r>_index_<i>` a webhook that failed open, whether a mutating one changed the
//! object and, at level Request, the patch it answered with.

mod hook;
pub(crate) mod review;
mod source;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::Status;
use async_trait::async_trait;
use serde_json::Value;

use self::hook::{Conditions, Hook};
use self::review::Invocation;
use self::source::Source;
use super::Reinvocation;
use super::rules::{self, Kept, Versions};
use super::{Attributes, MutatingPlugin, ServedResources, ValidatingPlugin};
use crate::cel::eval::{Vars, json_to_cel};
use crate::cel::runtime_cost::OUT_OF_BUDGET;
use crate::registry::RegistryStore;
use crate::util::webhook::{ServiceResolver, post_json};

/// How long a request waits for the configurations to be read at start-up (upstream's
/// `WaitForReady`) before it is refused.
const READY_WAIT: Duration = Duration::from_secs(10);

/// The two webhook plugins and what they share. Made before the API exists (the plugins go into
/// every resource's admission chain); `start` gives them the served resources.
#[derive(Clone, Default)]
pub struct Webhooks {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    mutating: Arc<Source>,
    validating: Arc<Source>,
    resources: OnceLock<Arc<dyn ServedResources>>,
    namespaces: OnceLock<Arc<RegistryStore>>,
    resolver: OnceLock<Arc<dyn ServiceResolver>>,
}

impl Webhooks {
    pub fn mutating(&self) -> Arc<dyn MutatingPlugin> {
        Arc::new(MutatingWebhook(self.shared.clone()))
    }

    pub fn validating(&self) -> Arc<dyn ValidatingPlugin> {
        Arc::new(ValidatingWebhook(self.shared.clone()))
    }

    /// Both kinds of configuration have been read once (for the `informer-sync` check).
    pub fn has_synced(&self) -> bool {
        self.shared.mutating.has_synced() && self.shared.validating.has_synced()
    }

    /// Starts reading the webhook configurations; until they are read, requests wait.
    pub fn start(
        &self,
        resources: Arc<dyn ServedResources>,
        resolver: Option<Arc<dyn ServiceResolver>>,
    ) {
        let stores = resources.stores();
        let find = |g: &str, v: &str, r: &str| {
            stores
                .iter()
                .find(|s| s.info.group == g && s.info.version == v && s.info.resource == r)
                .cloned()
        };
        if let Some(ns) = find("", "v1", "namespaces") {
            let _ = self.shared.namespaces.set(ns);
        }
        if let Some(r) = resolver {
            let _ = self.shared.resolver.set(r);
        }
        for (source, resource) in [
            (&self.shared.mutating, "mutatingwebhookconfigurations"),
            (&self.shared.validating, "validatingwebhookconfigurations"),
        ] {
            match find("admissionregistration.k8s.io", "v1", resource) {
                Some(store) => {
                    tokio::spawn(source.clone().run(store));
                }
                // Not served: no webhooks, and nothing for requests to wait for.
                None => source.mark_synced(),
            }
        }
        let _ = self.shared.resources.set(resources);
    }
}

/// Why a call did not give an answer to act on.
enum Failure {
    /// `ErrCallingWebhook`: the failure policy decides.
    Calling(String),
    /// An answer that refuses, or an error no policy excuses.
    Refused(Status),
}

impl Shared {
    /// The configurations of `source`, once read (`None`: the webhooks are not started, as in
    /// servers built without them).
    async fn hooks(
        &self,
        source: &Source,
        attrs: &Attributes<'_>,
    ) -> Result<Option<Arc<Vec<Arc<Hook>>>>, Status> {
        if self.resources.get().is_none() {
            return Ok(None);
        }
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        while !source.has_synced() {
            if tokio::time::Instant::now() > deadline {
                return Err(Status::forbidden(
                    &attrs.resource.group_resource(),
                    attrs.name,
                    "not yet ready to handle request",
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(Some(source.hooks()))
    }

    /// The labels of the request's namespace (`GetNamespaceLabels`).
    async fn namespace_labels(
        &self,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Result<Option<serde_json::Map<String, Value>>, Status> {
        let ns = rules::request_namespace(self.namespaces.get(), attrs, obj).await?;
        Ok(ns
            .as_ref()
            .and_then(|n| n.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .cloned())
    }

    /// `ShouldCallHook`: the invocation if `hook` applies to the request.
    async fn should_call(
        &self,
        hook: &Hook,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
        old: Option<&Value>,
        versions: &Versions<'_>,
    ) -> Result<Option<(Invocation, Option<Arc<RegistryStore>>)>, Status> {
        let info = attrs.resource;
        let ns_match: Result<bool, Status> = async {
            if rules::cluster_scoped(attrs) {
                return Ok(true);
            }
            let selector = hook
                .namespace_selector()
                .as_ref()
                .map_err(Status::internal)?;
            if selector.is_empty() {
                return Ok(true);
            }
            let labels = self.namespace_labels(attrs, obj).await?;
            Ok(selector.matches_json(labels.as_ref()))
        }
        .await;
        if matches!(ns_match, Ok(false)) {
            return Ok(None);
        }
        let obj_match = hook
            .object_selector_matches(obj, old)
            .map_err(Status::internal);
        if matches!(obj_match, Ok(false)) {
            return Ok(None);
        }
        let own = (
            info.group.as_str(),
            info.version.as_str(),
            info.resource.as_str(),
        );
        let invocation = if hook.rules_match(attrs, own) {
            Some((Invocation::of(info, attrs.subresource), None))
        } else if hook.equivalent() {
            versions.others().iter().find_map(|s| {
                let i = &s.info;
                hook.rules_match(attrs, (&i.group, &i.version, &i.resource))
                    .then(|| (Invocation::of(i, attrs.subresource), Some(s.clone())))
            })
        } else {
            None
        };
        let Some(invocation) = invocation else {
            return Ok(None);
        };
        ns_match?;
        obj_match?;
        Ok(Some(invocation))
    }

    /// The match conditions (`matchConditions`): all true calls the webhook, one false skips
    /// it, and errors follow the failure policy (Fail refuses the request). All of them are
    /// evaluated first, against `RuntimeCELCostBudgetMatchConditions`; running out of it is an
    /// error of its own.
    fn conditions_match(
        hook: &Hook,
        attrs: &Attributes<'_>,
        inv: &Invocation,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<bool, Status> {
        if hook.match_conditions.is_empty() {
            return Ok(true);
        }
        let request = Value::Object(review::request_fields(attrs, inv));
        let vars = Vars::default()
            .bind_json("object", obj)
            .bind_json("oldObject", old)
            .bind("request", json_to_cel(&request));
        let mut errors = match hook::evaluate_conditions(&hook.match_conditions, &vars) {
            Conditions::Match => return Ok(true),
            Conditions::NoMatch => return Ok(false),
            _ if hook.fail_open => return Ok(false),
            Conditions::OutOfBudget => {
                return Err(rules::forbidden(attrs, OUT_OF_BUDGET.to_string()));
            }
            Conditions::Errors(errors) => errors,
        };
        let why = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        Err(rules::forbidden(attrs, why))
    }

    /// One call, recorded in the webhook metrics: the answer's code is 200 when the webhook
    /// allowed, the refusal's code when it refused, 0 when no answer came.
    async fn call(
        &self,
        hook: &Hook,
        attrs: &Attributes<'_>,
        inv: &Invocation,
        obj: Option<&Value>,
        old: Option<&Value>,
        mutating: bool,
    ) -> Result<review::Answer, Failure> {
        let start = std::time::Instant::now();
        let result = self.call_once(hook, attrs, inv, obj, old, mutating).await;
        let (rejected, code) = match &result {
            Ok(_) => (false, 200),
            Err(Failure::Refused(s)) => (true, s.code),
            Err(Failure::Calling(_)) => (true, 0),
        };
        crate::admission::metrics::observe_webhook(
            &hook.name,
            mutating,
            attrs.operation,
            start,
            rejected,
            code,
        );
        result
    }

    /// One call: the review out, the answer checked, its warnings kept.
    async fn call_once(
        &self,
        hook: &Hook,
        attrs: &Attributes<'_>,
        inv: &Invocation,
        obj: Option<&Value>,
        old: Option<&Value>,
        mutating: bool,
    ) -> Result<review::Answer, Failure> {
        if attrs.dry_run {
            match hook::dry_run_allowed(hook.side_effects.as_deref()) {
                None => return Err(Failure::Calling("Webhook SideEffects is nil".into())),
                Some(false) => {
                    return Err(Failure::Refused(review::dry_run_unsupported(&hook.name)));
                }
                Some(true) => {}
            }
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let (version, body) = review::request(&hook.review_versions, &uid, attrs, inv, obj, old)
            .map_err(|e| Failure::Calling(format!("could not create admission objects: {e}")))?;
        let answer = post_json(&hook.client, self.resolver.get(), &body, hook.timeout)
            .await
            .map_err(|e| {
                Failure::Calling(format!("failed to call webhook: {}", e.context_text()))
            })?;
        let answer = review::verify(version, &uid, mutating, &answer)
            .map_err(|e| Failure::Calling(format!("received invalid webhook response: {e}")))?;
        for (key, value) in &answer.audit_annotations {
            add_admission_annotation(format!("{}/{key}", hook.name), value.clone());
        }
        crate::warning::add_all(answer.warnings.iter().cloned());
        if !answer.allowed {
            return Err(Failure::Refused(review::denied(
                &hook.name,
                answer.result.as_ref(),
            )));
        }
        Ok(answer)
    }
}

/// An annotation as admission adds it to the audit event (upstream's
/// `attributesRecord.AddAnnotationWithLevel`): the key must be a qualified name with a prefix
/// (`<prefix>/<name>`), or it is dropped with a warning in the log.
fn add_admission_annotation_with_level(key: String, value: String, level: crate::audit::Level) {
    if key.split('/').count() != 2 || !apimachinery::validation::is_qualified_name(&key).is_empty()
    {
        tracing::warn!(%key, "admission audit annotation key has invalid format, dropped");
        return;
    }
    crate::audit::add_annotation_with_level(key, value, level);
}

fn add_admission_annotation(key: String, value: String) {
    add_admission_annotation_with_level(key, value, crate::audit::Level::Metadata);
}

/// Where audit annotations of a webhook call land: `<prefix>round_<round>_index_<index>`, the
/// round 1 for a reinvocation and the index the webhook's place among the ones considered.
struct Annotator<'a> {
    hook: &'a Hook,
    suffix: String,
}

impl<'a> Annotator<'a> {
    fn new(hook: &'a Hook, round: usize, index: usize) -> Self {
        Annotator {
            hook,
            suffix: format!("round_{round}_index_{index}"),
        }
    }

    /// `failed-open.<kind>.webhook.admission.k8s.io/...`: the webhook's name.
    fn failed_open(&self, kind: &str) {
        add_admission_annotation(
            format!(
                "failed-open.{kind}.webhook.admission.k8s.io/{}",
                self.suffix
            ),
            self.hook.name.clone(),
        );
    }

    /// `mutation.webhook.admission.k8s.io/...`: whether a called mutating webhook changed the
    /// object (Go's `MutationAuditAnnotation`, fields in its order).
    fn mutation(&self, mutated: bool) {
        let value = format!(
            "{{\"configuration\":{},\"webhook\":{},\"mutated\":{mutated}}}",
            Value::from(self.hook.configuration.as_str()),
            Value::from(self.hook.name.as_str()),
        );
        add_admission_annotation(
            format!("mutation.webhook.admission.k8s.io/{}", self.suffix),
            value,
        );
    }

    /// `patch.webhook.admission.k8s.io/...`: the patch a webhook answered with, recorded only
    /// by events of level Request and above since it may carry the object's data.
    fn patch(&self, patch: &Value) {
        let value = format!(
            "{{\"configuration\":{},\"webhook\":{},\"patch\":{patch},\"patchType\":\"JSONPatch\"}}",
            Value::from(self.hook.configuration.as_str()),
            Value::from(self.hook.name.as_str()),
        );
        add_admission_annotation_with_level(
            format!("patch.webhook.admission.k8s.io/{}", self.suffix),
            value,
            crate::audit::Level::Request,
        );
    }
}

/// What a failed call means for the request: a webhook that could not be called fails open
/// with `failurePolicy: Ignore` (noted in the audit event) and closed otherwise; a refusal
/// always refuses.
fn settle(
    hook: &Hook,
    failure: Failure,
    annotator: &Annotator<'_>,
    kind: &str,
) -> Result<(), Status> {
    match failure {
        Failure::Calling(why) if hook.fail_open => {
            tracing::warn!(configuration = %hook.configuration, webhook = %hook.name, error = %why, "failed calling webhook, failing open");
            annotator.failed_open(kind);
            Ok(())
        }
        Failure::Calling(why) => Err(review::calling_failed(&hook.name, why)),
        Failure::Refused(s) => Err(s),
    }
}

const MUTATING: &str = "MutatingAdmissionWebhook";

pub struct MutatingWebhook(Arc<Shared>);

impl MutatingWebhook {
    async fn dispatch(
        &self,
        attrs: &Attributes<'_>,
        mut obj: Option<&mut Value>,
    ) -> Result<(), Status> {
        let shared = &self.0;
        if rules::exempt_from_webhooks(attrs) {
            return Ok(());
        }
        let Some(hooks) = shared.hooks(&shared.mutating, attrs).await? else {
            return Ok(());
        };
        if hooks.is_empty() {
            return Ok(());
        }
        let state = &attrs.state;
        let reinvoking = state.is_reinvoke();
        if reinvoking {
            let current = obj.as_deref().cloned();
            state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                if r.last_output != current {
                    r.require_reinvoking_previous();
                }
            });
        }
        let old = attrs.old_object;
        let versions = Versions::new(shared.resources.get(), attrs);
        // The object as the last webhook left it, in the version that webhook asked for.
        let mut versioned: Option<(String, Option<Arc<RegistryStore>>, Value)> = None;
        let mut dirty = false;
        let round = usize::from(reinvoking);
        for (index, hook) in hooks.iter().enumerate() {
            let current = match &versioned {
                Some((_, _, v)) => Some(v.clone()),
                None => obj.as_deref().cloned(),
            };
            let Some((inv, target)) = shared
                .should_call(hook, attrs, current.as_ref(), old, &versions)
                .await?
            else {
                continue;
            };
            if reinvoking
                && !state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                    r.reinvoke.contains(&hook.uid)
                })
            {
                continue;
            }
            // The object in the version this webhook asked for.
            let versioned_obj = match (&versioned, current) {
                (Some((version, _, v)), _) if *version == inv.version => Some(v.clone()),
                (Some((_, store, v)), _) => {
                    let from = store.clone().or_else(|| versions.own().cloned());
                    let to = target.clone().or_else(|| versions.own().cloned());
                    match (from, to) {
                        (Some(f), Some(t)) => Some(f.convert_to(v.clone(), &t).await?),
                        _ => Some(v.clone()),
                    }
                }
                (None, current) => versions.convert(target.as_ref(), current.as_ref()).await?,
            };
            let versioned_old = versions
                .convert_kept(Kept::OldObject, target.as_ref(), old)
                .await?;
            if !Shared::conditions_match(
                hook,
                attrs,
                &inv,
                versioned_obj.as_ref(),
                versioned_old.as_ref(),
            )? {
                continue;
            }
            let call_obj = if hook::is_delete(attrs.operation) {
                None
            } else {
                versioned_obj.as_ref()
            };
            let annotator = Annotator::new(hook, round, index);
            let result = shared
                .call(hook, attrs, &inv, call_obj, versioned_old.as_ref(), true)
                .await;
            let mut changed = false;
            let outcome: Result<(), Failure> = match result {
                Ok(answer) => match answer.patch {
                    None => Ok(()),
                    Some(patch) => match apply_patch(hook, &answer.patch_type, &patch, call_obj) {
                        Ok(Some((ops, patched))) => {
                            annotator.patch(&ops);
                            changed = Some(&patched) != versioned_obj.as_ref();
                            versioned = Some((inv.version.clone(), target.clone(), patched));
                            dirty = true;
                            Ok(())
                        }
                        Ok(None) => Ok(()),
                        Err(f) => Err(f),
                    },
                },
                Err(f) => Err(f),
            };
            annotator.mutation(changed);
            if changed {
                state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                    r.require_reinvoking_previous()
                });
                state.request_reinvocation();
            }
            if hook.reinvoke_if_needed {
                state.with_plugin(MUTATING, |r: &mut Reinvocation| {
                    r.previously_invoked.insert(hook.uid.clone());
                });
            }
            if let Err(f) = outcome {
                settle(hook, f, &annotator, "mutation")?;
            }
        }
        // The last version back into the request's version.
        if dirty && let (Some((_, store, v)), Some(obj)) = (versioned, obj.as_deref_mut()) {
            *obj = match (store, versions.own()) {
                (Some(from), Some(to)) => from.convert_to(v, to).await?,
                _ => v,
            };
            attrs.state.mark_patched();
        }
        let output = obj.as_deref().cloned();
        state.with_plugin(MUTATING, |r: &mut Reinvocation| r.last_output = output);
        Ok(())
    }
}

/// Applies a webhook's patch: `Ok(None)` for an empty one, else the operations and the patched
/// object.
fn apply_patch(
    hook: &Hook,
    patch_type: &str,
    patch: &[u8],
    obj: Option<&Value>,
) -> Result<Option<(Value, Value)>, Failure> {
    let ops: Value = serde_json::from_slice(patch).map_err(|e| {
        Failure::Calling(format!(
            "received undecodable patch in webhook response: {e}"
        ))
    })?;
    if !ops.is_array() {
        return Err(Failure::Calling(
            "received undecodable patch in webhook response: json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    }
    if ops.as_array().is_some_and(Vec::is_empty) {
        return Ok(None);
    }
    let Some(obj) = obj else {
        return Err(Failure::Refused(Status::internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        ))));
    };
    if patch_type != "JSONPatch" {
        return Err(Failure::Calling(format!(
            "unsupported patch type {patch_type:?}"
        )));
    }
    apimachinery::patch::apply_json_patch(obj, patch)
        .map(|patched| Some((ops, patched)))
        .map_err(|e| Failure::Refused(Status::internal(e.message)))
}

#[async_trait]
impl MutatingPlugin for MutatingWebhook {
    fn name(&self) -> &'static str {
        MUTATING
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        self.dispatch(attrs, Some(obj)).await
    }

    async fn admit_delete(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        self.dispatch(attrs, None).await
    }
}

pub struct ValidatingWebhook(Arc<Shared>);

#[async_trait]
impl ValidatingPlugin for ValidatingWebhook {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let shared = &self.0;
        if rules::exempt_from_webhooks(attrs) {
            return Ok(());
        }
        let Some(hooks) = shared.hooks(&shared.validating, attrs).await? else {
            return Ok(());
        };
        if hooks.is_empty() {
            return Ok(());
        }
        // A delete's object is the stored one, which webhooks see as `oldObject`.
        let obj = (!hook::is_delete(attrs.operation)).then_some(obj);
        let old = attrs.old_object;
        let versions = Versions::new(shared.resources.get(), attrs);
        let mut calls = Vec::new();
        for hook in hooks.iter() {
            let Some((inv, target)) = shared.should_call(hook, attrs, obj, old, &versions).await?
            else {
                continue;
            };
            let versioned_obj = versions
                .convert_kept(Kept::Object, target.as_ref(), obj)
                .await?;
            let versioned_old = versions
                .convert_kept(Kept::OldObject, target.as_ref(), old)
                .await?;
            if !Shared::conditions_match(
                hook,
                attrs,
                &inv,
                versioned_obj.as_ref(),
                versioned_old.as_ref(),
            )? {
                continue;
            }
            calls.push((hook.clone(), inv, versioned_obj, versioned_old));
        }
        let results =
            futures_util::future::join_all(calls.iter().map(|(hook, inv, o, old)| async move {
                let result = shared
                    .call(hook, attrs, inv, o.as_ref(), old.as_ref(), false)
                    .await;
                (hook, result)
            }))
            .await;
        // Every webhook that failed open is noted, then the first refusal answers. A
        // validating webhook's index is its place among the webhooks called.
        let mut refusal = Ok(());
        for (index, (hook, result)) in results.into_iter().enumerate() {
            if let Err(f) = result {
                let settled = settle(hook, f, &Annotator::new(hook, 0, index), "validating");
                if refusal.is_ok() {
                    refusal = settled;
                }
            }
        }
        refusal
    }
}
