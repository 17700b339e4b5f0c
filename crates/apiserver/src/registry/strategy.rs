//! `Strategy`: what differs between kinds in the object lifecycle. Every method has the default
//! that most kinds want, so a kind writes only what is its own.

use std::future::Future;
use std::pin::Pin;

use apimachinery::validation::{FieldError, NameValidator};
use serde_json::Value;

/// What a [`Strategy::begin_create`] or [`Strategy::begin_update`] reserved is finished once the
/// write is known to have been stored (`true`: commit) or not (`false`: revert), as upstream's
/// `FinishFunc`.
pub type Finish = Box<dyn FnOnce(bool) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

#[async_trait::async_trait]
pub trait Strategy: Send + Sync {
    /// Fills defaults, as upstream's scheme defaulters do after decoding (create and update).
    fn default(&self, _obj: &mut Value) {}

    /// Upstream's `BeginCreate` hook: runs once system fields and the name are set, before
    /// `prepare_for_create` and validation, to reserve what the object will hold from a shared
    /// pool (a Service's cluster IPs and node ports). An error fails the create as it is; the
    /// returned [`Finish`] learns whether the object was stored.
    async fn begin_create(
        &self,
        _obj: &mut Value,
        _dry_run: bool,
    ) -> Result<Option<Finish>, apimachinery::Status> {
        Ok(None)
    }

    /// Upstream's `BeginUpdate` hook, for writes to the main resource: runs after defaults and
    /// mutating admission, before `prepare_for_update` and validation.
    async fn begin_update(
        &self,
        _new: &mut Value,
        _old: &Value,
        _dry_run: bool,
    ) -> Result<Option<Finish>, apimachinery::Status> {
        Ok(None)
    }

    /// Upstream's policy-based storage (RBAC's escalation checks): may `user` write `new` (over
    /// `old` on an update of the main resource)? Runs after mutating admission, before the
    /// object is prepared and validated; an error refuses the write as it is.
    async fn authorize_write(
        &self,
        _user: &crate::authentication::UserInfo,
        _namespace: &str,
        _new: &Value,
        _old: Option<&Value>,
    ) -> Result<(), apimachinery::Status> {
        Ok(())
    }

    /// Clears or sets fields before a create, e.g. status reset to its initial value.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// `prepare_for_create` for kinds that record who asked (upstream reads the user from the
    /// request context, e.g. a CertificateSigningRequest's requester).
    fn prepare_for_create_by(&self, obj: &mut Value, _user: &crate::authentication::UserInfo) {
        self.prepare_for_create(obj);
    }

    /// Adjusts an update before validation, e.g. keeps fields clients may not change.
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    /// Like `prepare_for_update`, for writes through another subresource (e.g. a namespace's
    /// `finalize`), which change only what that subresource owns.
    fn prepare_for_subresource_update(&self, _subresource: &str, _new: &mut Value, _old: &Value) {}

    /// Kind-specific validation on create; metadata is validated by the store.
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// The errors of a create in upstream's order, given the store's checks of the object's
    /// metadata (`meta`). Most kinds' `Validate` starts with `ValidateObjectMeta`, so by default
    /// the metadata's errors come first; a kind whose `Validate` checks its metadata elsewhere,
    /// or leaves it to the generic check that runs only once `Validate` passed, says so here.
    fn create_errors(&self, obj: &Value, meta: Vec<FieldError>) -> Vec<FieldError> {
        let mut errs = meta;
        errs.extend(self.validate(obj));
        errs
    }

    /// Kind-specific validation on update (immutable fields, ...).
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Warnings for a create that passed validation (upstream's `WarningsOnCreate`): deprecated
    /// fields, values that will not do what the client may think.
    fn warnings_on_create(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Warnings for an update that passed validation (upstream's `WarningsOnUpdate`).
    fn warnings_on_update(&self, _new: &Value, _old: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Validation of a write through `/status`.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Warnings for a write through `/status` that passed validation (the status strategy's
    /// `WarningsOnUpdate`).
    fn warnings_on_status_update(&self, _new: &Value, _old: &Value) -> Vec<String> {
        Vec::new()
    }

    /// The group of upstream's internal type when it is not the served one (events.k8s.io's
    /// events are core events inside): 422 answers name the internal kind.
    fn internal_group(&self) -> Option<&'static str> {
        None
    }

    /// How `metadata.name` is checked.
    fn name_validator(&self) -> NameValidator {
        NameValidator::Dns1123Subdomain
    }

    /// Messages about `name` (or a `generateName` prefix) that depend on the object itself,
    /// added after the [`Self::name_validator`] ones (a CRD's name is `<plural>.<group>`).
    fn object_name_errors(&self, _obj: &Value, _name: &str) -> Vec<String> {
        Vec::new()
    }

    /// Finalizer names must be standard (`kubernetes`, `orphan`, `foregroundDeletion`) or
    /// domain-qualified, as the core validation of built-in kinds has it; custom resources only
    /// get warnings for them.
    fn checks_kube_finalizer_names(&self) -> bool {
        true
    }

    /// PUT on a missing object creates it (upstream allows it for a few kinds only).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// PUT without `metadata.resourceVersion` is allowed (last write wins).
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// Called on DELETE before anything is removed. Returning true keeps the object, marked with
    /// `deletionTimestamp`, for a controller to finish (namespaces); objects with finalizers are
    /// kept by the store whatever this says.
    fn delete_is_graceful(&self, _obj: &mut Value) -> bool {
        false
    }

    /// For kinds that are never stored (access reviews, token reviews, `bindings`): the answer
    /// to a create; a dry run changes nothing.
    async fn create_without_storage(
        &self,
        _obj: &Value,
        _user: &crate::authentication::UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, apimachinery::Status>> {
        None
    }

    /// Called after an object left storage, to release what it held (allocated IPs, ports).
    async fn after_delete(&self, _obj: &Value) {}

    /// A create on a subresource of an existing object (a pod's `binding`): the object as
    /// that create changes it, given the request body. Kinds without such subresources keep
    /// the default, which refuses.
    fn create_on_subresource(
        &self,
        _subresource: &str,
        _body: &Value,
        _current: &Value,
    ) -> Result<Value, apimachinery::Status> {
        Err(apimachinery::Status::method_not_allowed())
    }

    /// A create on a subresource that the strategy answers itself instead of changing the
    /// object through `create_on_subresource` (a pod's eviction, which deletes the pod): the
    /// answer, or `None` for the update path.
    async fn serve_subresource_create(
        &self,
        _subresource: &str,
        _namespace: &str,
        _name: &str,
        _body: &Value,
        _user: &crate::authentication::UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, apimachinery::Status>> {
        None
    }

    /// Validation of an update through a subresource other than `status` (a pod's
    /// `ephemeralcontainers` or `resize`); by default the update's.
    fn validate_subresource_update(
        &self,
        _subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        self.validate_update(new, old)
    }

    /// Graceful deletion (upstream's `CheckGracefulDelete`): the grace period, in seconds, an
    /// object gets before it is removed, given the one the client asked for; `None` for kinds
    /// without graceful deletion. A positive period keeps the object, marked with
    /// `deletionTimestamp` (now plus the period) and `deletionGracePeriodSeconds`.
    fn graceful_delete_period(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether an object marked for deletion may now be removed from storage: by default once
    /// `metadata.finalizers` is empty.
    fn ready_to_remove(&self, obj: &Value) -> bool {
        obj.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    }
}

/// The strategy of a kind with no behaviour of its own.
pub struct GenericStrategy;

impl Strategy for GenericStrategy {}
