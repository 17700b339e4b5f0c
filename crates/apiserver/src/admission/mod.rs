//! The admission framework: mutating plugins run first, in order, then the object is defaulted
//! and validated by its strategy, then validating plugins run (upstream:
//! k8s.io/apiserver/pkg/admission). When a plugin asks for it (a webhook whose patch changed the
//! object), the mutating plugins run once more, as upstream's reinvoker runs them. Plugins that
//! need to know kinds (e.g. namespace lifecycle) live with the kinds, in crate
//! `ironplane-kube`; the ones that know no kind (webhooks) live here.

pub mod compile;
pub mod informer;
pub mod metrics;
pub mod policy;
pub mod rules;
pub mod webhook;

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use metrics::Step;

use apimachinery::Status;
use async_trait::async_trait;
use serde_json::Value;

use crate::authentication::UserInfo;
use crate::registry::{RegistryStore, ResourceInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What an admission plugin sees of a request.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceInfo,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub user: &'a UserInfo,
    pub dry_run: bool,
    pub old_object: Option<&'a Value>,
    /// What the plugins of one request share.
    pub state: RequestState,
}

impl Attributes<'_> {
    /// The kind the request sends and receives (upstream's `GetKind`): the resource's, or a
    /// subresource's own (`autoscaling/v1 Scale`).
    pub fn kind(&self) -> (&str, &str, &str) {
        kind_for(self.resource, self.subresource)
    }
}

/// The kind a resource or one of its subresources sends and receives (upstream's `KindFor`):
/// a subresource with a kind of its own has it (`deployments/scale` is `autoscaling/v1
/// Scale`), any other the resource's.
pub fn kind_for<'a>(info: &'a ResourceInfo, subresource: &str) -> (&'a str, &'a str, &'a str) {
    match info
        .subresources
        .iter()
        .find(|s| !subresource.is_empty() && s.name == subresource && !s.kind.is_empty())
    {
        Some(s) => (&s.group, &s.version, &s.kind),
        None => (&info.group, &info.version, &info.kind),
    }
}

/// What the plugins of one request share (upstream's reinvocation context and
/// `VersionedAttributes.Dirty`): whether the mutating plugins run a second time, whether an
/// object changed by a patch needs defaulting again, and each plugin's own bookkeeping.
#[derive(Default)]
pub struct RequestState {
    inner: Mutex<StateInner>,
}

#[derive(Default)]
struct StateInner {
    reinvoking: bool,
    reinvoke_requested: bool,
    patched: bool,
    plugins: HashMap<&'static str, Box<dyn Any + Send>>,
}

impl RequestState {
    fn lock(&self) -> std::sync::MutexGuard<'_, StateInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this is the second run of the mutating plugins.
    pub fn is_reinvoke(&self) -> bool {
        self.lock().reinvoking
    }

    /// Asks for a second run of the mutating plugins once this one ends.
    pub fn request_reinvocation(&self) {
        self.lock().reinvoke_requested = true;
    }

    /// Says a plugin replaced the object with a patched one that was not defaulted.
    pub fn mark_patched(&self) {
        self.lock().patched = true;
    }

    /// Whether a plugin patched the object since the last call (and forgets it).
    pub fn take_patched(&self) -> bool {
        std::mem::take(&mut self.lock().patched)
    }

    /// Runs `f` on the bookkeeping of plugin `name`, made on first use.
    pub fn with_plugin<T: Default + Send + 'static, R>(
        &self,
        name: &'static str,
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        let mut inner = self.lock();
        let entry = inner
            .plugins
            .entry(name)
            .or_insert_with(|| Box::new(T::default()));
        if entry.downcast_ref::<T>().is_none() {
            *entry = Box::new(T::default());
        }
        f(entry.downcast_mut::<T>().expect("replaced above"))
    }
}

/// What one request's mutating webhooks or policies remember between the two rounds of the
/// mutating plugins (`webhookReinvokeContext`, `policyReinvokeContext`): the object they left,
/// the invocations that asked to be run again if something changes after them, and those to
/// run again.
#[derive(Default)]
pub(crate) struct Reinvocation {
    pub last_output: Option<Value>,
    pub previously_invoked: std::collections::HashSet<String>,
    pub reinvoke: std::collections::HashSet<String>,
}

impl Reinvocation {
    pub fn require_reinvoking_previous(&mut self) {
        let previous = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(previous);
    }
}

/// Every resource the server serves, across the layers of the chain (built-in groups and
/// custom resources): what webhooks need to find the versions of a resource and convert between
/// them (upstream's `EquivalentResourceMapper` and object convertor).
pub trait ServedResources: Send + Sync {
    fn stores(&self) -> Vec<Arc<RegistryStore>>;

    /// The schemas that describe `kind` of `group/version` (what mutating policies merge
    /// ApplyConfigurations by).
    fn schemas_for(
        &self,
        _group: &str,
        _version: &str,
        _kind: &str,
    ) -> Option<Arc<apimachinery::schema::Schemas>> {
        None
    }
}

#[async_trait]
pub trait MutatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status>;
    /// A delete, with the stored object in `attrs.old_object`: nothing to mutate, but webhooks
    /// are called (and may refuse).
    async fn admit_delete(&self, _attrs: &Attributes<'_>) -> Result<(), Status> {
        Ok(())
    }
}

#[async_trait]
pub trait ValidatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// `obj` is the new object for create and update, the stored one for delete.
    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status>;
}

/// The configured plugins, in the order they run.
#[derive(Clone, Default)]
pub struct Admission {
    mutating: Vec<(Arc<dyn MutatingPlugin>, Arc<metrics::PluginMetrics>)>,
    validating: Vec<(Arc<dyn ValidatingPlugin>, Arc<metrics::PluginMetrics>)>,
}

impl Admission {
    pub fn with_mutating(mut self, p: Arc<dyn MutatingPlugin>) -> Self {
        let m = Arc::new(metrics::PluginMetrics::new(p.name()));
        self.mutating.push((p, m));
        self
    }

    pub fn with_validating(mut self, p: Arc<dyn ValidatingPlugin>) -> Self {
        let m = Arc::new(metrics::PluginMetrics::new(p.name()));
        self.validating.push((p, m));
        self
    }

    pub async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        let start = Instant::now();
        let result = self.admit_all(attrs, obj).await;
        let end = Instant::now();
        metrics::observe_step(Step::Admit, attrs.operation, start, end, result.is_err());
        result
    }

    async fn admit_all(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        self.run_mutating(attrs, obj).await?;
        let again = std::mem::take(&mut attrs.state.lock().reinvoke_requested);
        if again {
            attrs.state.lock().reinvoking = true;
            self.run_mutating(attrs, obj).await?;
        }
        Ok(())
    }

    /// One run of the mutating plugins, each recorded in the plugin metrics.
    async fn run_mutating(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        let mut start = Instant::now();
        for (p, m) in &self.mutating {
            let r = p.admit(attrs, obj).await;
            start = m.observe(Step::Admit, attrs.operation, start, r.is_err());
            r?;
        }
        Ok(())
    }

    pub async fn admit_delete(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let step = Instant::now();
        let mut result = Ok(());
        let mut start = step;
        for (p, m) in &self.mutating {
            result = p.admit_delete(attrs).await;
            start = m.observe(Step::Admit, attrs.operation, start, result.is_err());
            if result.is_err() {
                break;
            }
        }
        // The last plugin's end, already read, is the step's.
        metrics::observe_step(Step::Admit, attrs.operation, step, start, result.is_err());
        result
    }

    pub async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let step = Instant::now();
        let mut result = Ok(());
        let mut start = step;
        for (p, m) in &self.validating {
            result = p.validate(attrs, obj).await;
            start = m.observe(Step::Validate, attrs.operation, start, result.is_err());
            if result.is_err() {
                break;
            }
        }
        // The last plugin's end, already read, is the step's.
        metrics::observe_step(
            Step::Validate,
            attrs.operation,
            step,
            start,
            result.is_err(),
        );
        result
    }
}
