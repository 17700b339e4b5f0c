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

/// The operations a plugin is called for (upstream's `admission.Handler`, made with
/// `NewHandler(ops...)`): the chain skips a plugin for any other, and records no metric for it,
/// as upstream's chain asks each plugin's `Handles` first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operations(u8);

impl Operations {
    pub const ALL: Operations = Operations::of(&[
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Connect,
    ]);

    pub const fn of(operations: &[Operation]) -> Operations {
        let mut bits = 0;
        let mut i = 0;
        while i < operations.len() {
            bits |= operations[i].bit();
            i += 1;
        }
        Operations(bits)
    }

    pub fn contains(self, operation: Operation) -> bool {
        self.0 & operation.bit() != 0
    }
}

impl Operation {
    const fn bit(self) -> u8 {
        match self {
            Operation::Create => 1,
            Operation::Update => 2,
            Operation::Delete => 4,
            Operation::Connect => 8,
        }
    }

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
    mutating: Vec<Installed<dyn MutatingPlugin>>,
    validating: Vec<Installed<dyn ValidatingPlugin>>,
}

/// The plugins of `phase` that are called for `operation`, in order.
fn handling<P: ?Sized>(
    phase: &[Installed<P>],
    operation: Operation,
) -> impl Iterator<Item = &Installed<P>> {
    phase.iter().filter(move |p| p.handles.contains(operation))
}

/// A plugin in the chain, with its metrics and the operations it is called for.
struct Installed<P: ?Sized> {
    plugin: Arc<P>,
    metrics: Arc<metrics::PluginMetrics>,
    handles: Operations,
}

impl<P: ?Sized> Clone for Installed<P> {
    fn clone(&self) -> Self {
        Installed {
            plugin: self.plugin.clone(),
            metrics: self.metrics.clone(),
            handles: self.handles,
        }
    }
}

impl Admission {
    /// Adds a mutating plugin, called for `handles`.
    pub fn with_mutating(mut self, p: Arc<dyn MutatingPlugin>, handles: Operations) -> Self {
        let metrics = Arc::new(metrics::PluginMetrics::new(p.name()));
        self.mutating.push(Installed {
            plugin: p,
            metrics,
            handles,
        });
        self
    }

    /// Adds a validating plugin, called for `handles`.
    pub fn with_validating(mut self, p: Arc<dyn ValidatingPlugin>, handles: Operations) -> Self {
        let metrics = Arc::new(metrics::PluginMetrics::new(p.name()));
        self.validating.push(Installed {
            plugin: p,
            metrics,
            handles,
        });
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
        for p in handling(&self.mutating, attrs.operation) {
            let r = p.plugin.admit(attrs, obj).await;
            start = p
                .metrics
                .observe(Step::Admit, attrs.operation, start, r.is_err());
            r?;
        }
        Ok(())
    }

    pub async fn admit_delete(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        let step = Instant::now();
        let mut result = Ok(());
        let mut start = step;
        for p in handling(&self.mutating, attrs.operation) {
            result = p.plugin.admit_delete(attrs).await;
            start = p
                .metrics
                .observe(Step::Admit, attrs.operation, start, result.is_err());
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
        for p in handling(&self.validating, attrs.operation) {
            result = p.plugin.validate(attrs, obj).await;
            start = p
                .metrics
                .observe(Step::Validate, attrs.operation, start, result.is_err());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A plugin with a mutating and a validating half that counts its calls.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    const NAME: &str = "HandlesTestUpdatesOnly";

    #[async_trait]
    impl MutatingPlugin for Counting {
        fn name(&self) -> &'static str {
            NAME
        }
        async fn admit(&self, _: &Attributes<'_>, _: &mut Value) -> Result<(), Status> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn admit_delete(&self, _: &Attributes<'_>) -> Result<(), Status> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[async_trait]
    impl ValidatingPlugin for Counting {
        fn name(&self) -> &'static str {
            NAME
        }
        async fn validate(&self, _: &Attributes<'_>, _: &Value) -> Result<(), Status> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// As upstream's chain asks `Handles` first: a plugin made for updates is not called for a
    /// create or a delete, and no sample of its duration is recorded for them.
    #[tokio::test]
    async fn a_plugin_is_called_and_measured_only_for_the_operations_it_handles() {
        let plugin = Arc::new(Counting::default());
        let updates = Operations::of(&[Operation::Update]);
        let admission = Admission::default()
            .with_mutating(plugin.clone(), updates)
            .with_validating(plugin.clone(), updates);
        let (info, user) = (ResourceInfo::default(), UserInfo::default());
        let attrs = |operation| Attributes {
            operation,
            resource: &info,
            subresource: "",
            namespace: "",
            name: "x",
            user: &user,
            dry_run: false,
            old_object: None,
            state: RequestState::default(),
        };
        let samples = |step: &str, op: Operation| {
            metrics::CONTROLLER
                .with_label_values(&[NAME, step, op.as_str(), "false"])
                .get_sample_count()
        };
        let mut obj = serde_json::json!({});
        admission
            .admit(&attrs(Operation::Create), &mut obj)
            .await
            .unwrap();
        admission
            .validate(&attrs(Operation::Create), &obj)
            .await
            .unwrap();
        admission
            .admit_delete(&attrs(Operation::Delete))
            .await
            .unwrap();
        admission
            .validate(&attrs(Operation::Delete), &obj)
            .await
            .unwrap();
        assert_eq!(plugin.0.load(Ordering::SeqCst), 0);
        for op in [Operation::Create, Operation::Delete] {
            assert_eq!((samples("admit", op), samples("validate", op)), (0, 0));
        }
        admission
            .admit(&attrs(Operation::Update), &mut obj)
            .await
            .unwrap();
        admission
            .validate(&attrs(Operation::Update), &obj)
            .await
            .unwrap();
        assert_eq!(plugin.0.load(Ordering::SeqCst), 2);
        assert_eq!(
            (
                samples("admit", Operation::Update),
                samples("validate", Operation::Update)
            ),
            (1, 1)
        );
        assert!(Operations::ALL.contains(Operation::Connect));
    }
}
