//! `RegistryStore`: the generic store every resource is served by. It owns the order of the
//! object lifecycle — defaults, mutating admission, strategy preparation, system fields,
//! validation, validating admission, storage — and turns storage errors into `metav1.Status`.
//! It never names a kind: whatever differs between kinds is asked of the `Strategy` or read from
//! the `ResourceInfo` row.

use std::sync::Arc;

use apimachinery::object::ObjectExt;
use apimachinery::validation::{
    FieldError, FieldPath, invalid_status, validate_kube_finalizer_names,
    validate_object_meta_update, validate_object_meta_with,
};
use apimachinery::{GroupResource, Status};
use bytes::Bytes;
use chrono::{SecondsFormat, Utc};
use rand::Rng;
use serde_json::Value;
use storage::{
    GetOptions, ListOptions, ListResult, Object, ResourceVersion, StorageError, Store,
    WatchOptions, WatchStream,
};

use super::fieldmanager::ManagedFieldsRequest;
use super::{Conversion, ResourceInfo, Strategy};
use crate::admission::{Admission, Attributes, Operation};
use crate::authentication::UserInfo;

/// How many generated names are tried before giving up, as upstream retries `generateName`.
const MAX_GENERATE_NAME_RETRIES: usize = 8;

/// Who is asking; admission plugins and defaults may depend on it.
#[derive(Clone, Copy)]
pub struct Requester<'a> {
    pub user: &'a UserInfo,
}

#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// The request's field manager: the write's changes are recorded in `managedFields`.
    /// `None` for writes made inside the server, and for applies, which record their own.
    pub managed_fields: Option<ManagedFieldsRequest>,
}

#[derive(Clone, Debug, Default)]
pub struct UpdateOptions {
    pub write: WriteOptions,
    /// `""` for the main resource, `status` for `/status`.
    pub subresource: String,
    /// The update is a PUT (a full object), which may create the object when the strategy allows.
    pub is_put: bool,
    /// The update creates a missing object whatever the strategy says (server-side apply).
    pub force_allow_create: bool,
}

#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation_policy: Option<String>,
    pub grace_period_seconds: Option<i64>,
    /// `ignoreStoreReadErrorWithClusterBreakingPotential`: an object whose stored bytes cannot
    /// be decoded is removed without reading it (no finalizers, no admission), as upstream's
    /// unsafe deletion of malformed objects does. A readable object is deleted as usual.
    pub ignore_store_read_error: bool,
}

impl DeleteOptions {
    /// Upstream's check of `propagationPolicy` (`ValidateDeleteOptions`): unset, or one of the
    /// three policies.
    pub fn propagation_policy_error(&self) -> Option<FieldError> {
        let policy = self.propagation_policy.as_deref()?;
        (!matches!(policy, "Orphan" | "Background" | "Foreground")).then(|| {
            FieldError::not_supported(
                &FieldPath::new("propagationPolicy"),
                Value::from(policy),
                &["Foreground", "Background", "Orphan", "nil"],
            )
        })
    }
}

/// What a DELETE did.
pub enum DeleteOutcome {
    /// The object is gone; this is its last state.
    Deleted(Object),
    /// An undecodable object was removed without reading it: there is no last state to show.
    DeletedUnreadable,
    /// The object is marked for deletion and waits for finalizers or a controller.
    Pending(Object),
}

pub struct RegistryStore {
    pub info: Arc<ResourceInfo>,
    pub strategy: Arc<dyn Strategy>,
    pub storage: Arc<dyn Store>,
    pub admission: Admission,
    key_root: String,
    /// How this version's objects become the storage version's and back (`None`: this is the
    /// storage version).
    conversion: Option<Arc<dyn Conversion>>,
    /// The kind's zero object, made on first use (see `fieldmanager`).
    pub(super) zero: std::sync::OnceLock<Value>,
}

pub(super) fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Upstream's alphabet for generated name suffixes: no vowels (no words) and no look-alikes.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A name for `generateName` (upstream's `SimpleNameGenerator`, also used by admission plugins
/// that name what they add): generated names stay within 63 characters, the base cut to 58 and
/// 5 random characters appended.
/// The delete preconditions as upstream's `rest.BeforeDelete` checks them against the object it
/// read, before admission: a conflict named by the object's kind (`ConfigMap`,
/// `Deployment.apps`), not its resource, in BeforeDelete's words. (A race lost after that check
/// is storage's own "Precondition failed" conflict.)
pub fn before_delete_preconditions(
    kind: &GroupResource,
    obj: &Value,
    uid: Option<&str>,
    resource_version: Option<&str>,
) -> Result<(), Status> {
    if let Some(uid) = uid
        && uid != obj.uid()
    {
        return Err(Status::conflict(
            kind,
            obj.name(),
            format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                obj.uid()
            ),
        ));
    }
    if let Some(rv) = resource_version
        && rv != obj.resource_version()
    {
        return Err(Status::conflict(
            kind,
            obj.name(),
            format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                obj.resource_version()
            ),
        ));
    }
    Ok(())
}

pub fn generated_name(generate_name: &str) -> String {
    let base: String = generate_name.chars().take(58).collect();
    format!("{base}{}", random_suffix())
}

/// The finalizers through which the garbage collector carries out a propagation policy.
const ORPHAN_FINALIZER: &str = "orphan";
const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Sets the garbage collector's finalizers for a delete's propagation policy, as upstream's
/// store does: `Orphan` and `Foreground` add theirs (and drop the other), `Background` drops
/// both, no policy leaves them. Without a garbage collector (as with kube-apiserver alone)
/// an object so marked waits, with its deletionTimestamp, for someone to remove the finalizer.
/// True when the finalizers changed.
fn set_gc_finalizers(obj: &mut Value, policy: Option<&str>) -> bool {
    let (add, drop): (Option<&str>, &[&str]) = match policy {
        Some("Orphan") => (Some(ORPHAN_FINALIZER), &[FOREGROUND_FINALIZER]),
        Some("Foreground") => (Some(FOREGROUND_FINALIZER), &[ORPHAN_FINALIZER]),
        Some("Background") => (None, &[ORPHAN_FINALIZER, FOREGROUND_FINALIZER]),
        _ => return false,
    };
    let before: Vec<String> = obj.finalizers().into_iter().map(str::to_string).collect();
    let mut after: Vec<String> = before
        .iter()
        .filter(|f| !drop.contains(&f.as_str()))
        .cloned()
        .collect();
    if let Some(a) = add
        && !after.iter().any(|f| f == a)
    {
        after.push(a.to_string());
    }
    if after == before {
        return false;
    }
    if after.is_empty() {
        obj.remove_meta("finalizers");
    } else {
        obj.set_meta("finalizers", after);
    }
    true
}

/// The object to write again when storage refused a write as too large: the one it gave back,
/// without managedFields, as upstream's create, update and patch handlers do
/// (`isTooLargeError`): managedFields can be large, and dropping them is safe, since the next
/// write starts them afresh. Only writes that
/// record managed fields as an update (`opts.managed_fields`) do: an apply's fields are its
/// result, and upstream retries no apply. Otherwise the error, as it came.
fn retry_without_managed_fields(
    mut err: StorageError,
    opts: &WriteOptions,
) -> Result<Value, StorageError> {
    if !matches!(err, StorageError::RequestTooLarge { .. }) || opts.managed_fields.is_none() {
        return Err(err);
    }
    match err.take_rejected() {
        Some(mut obj)
            if obj
                .metadata()
                .is_some_and(|m| m.contains_key("managedFields")) =>
        {
            obj.remove_meta("managedFields");
            Ok(obj)
        }
        back => Err(err.with_rejected(back)),
    }
}

fn parse_rv(rv: &str) -> Option<i64> {
    rv.parse::<i64>().ok().filter(|v| *v > 0)
}

/// The object with everything outside metadata and status, to tell a spec change (which bumps
/// `generation`) from a metadata-only one.
fn without_meta_and_status(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

/// Two objects that differ only in resourceVersion and the times of their managed fields are
/// the same write: upstream skips such no-op updates (reverting the times a no-op touched), and
/// so does not bump the resourceVersion.
fn same_object(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
                for e in entries.iter_mut().filter_map(Value::as_object_mut) {
                    e.remove("time");
                }
            }
        }
        v
    };
    strip(a) == strip(b)
}

impl RegistryStore {
    pub fn new(
        info: Arc<ResourceInfo>,
        strategy: Arc<dyn Strategy>,
        storage: Arc<dyn Store>,
        admission: Admission,
        prefix: &str,
    ) -> Self {
        let key_root = format!("{}/{}", prefix.trim_end_matches('/'), info.storage_key);
        Self {
            info,
            strategy,
            storage,
            admission,
            key_root,
            conversion: None,
            zero: std::sync::OnceLock::new(),
        }
    }

    /// Says how this version converts to and from the storage version (the same conversion its
    /// `ConvertingStore` uses), so that objects can be converted to another served version.
    pub fn with_conversion(mut self, conversion: Arc<dyn Conversion>) -> Self {
        self.conversion = Some(conversion);
        self
    }

    /// `obj`, written in this store's version, in the version `to` serves (upstream's
    /// `ConvertToVersion` through the internal version; here through the storage version).
    pub async fn convert_to(&self, obj: Value, to: &RegistryStore) -> Result<Value, Status> {
        if self.info.version == to.info.version {
            return Ok(obj);
        }
        let stored = match &self.conversion {
            Some(c) => c.to_storage(obj).await.map_err(|e| self.status_of(e, ""))?,
            None => obj,
        };
        match &to.conversion {
            Some(c) => c
                .to_served(vec![stored], false)
                .await
                .map_err(|e| to.status_of(e, ""))?
                .pop()
                .ok_or_else(|| Status::internal("conversion returned no object")),
            None => Ok(stored),
        }
    }

    /// The storage key of an object: `<prefix>/<resource>/<namespace>/<name>` (or without the
    /// namespace for cluster-scoped kinds), upstream's etcd layout.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        if self.info.namespaced {
            format!("{}/{}/{}", self.key_root, namespace, name)
        } else {
            format!("{}/{}", self.key_root, name)
        }
    }

    /// The key prefix of a collection: one namespace, or all of them when `namespace` is empty.
    pub fn prefix(&self, namespace: &str) -> String {
        if self.info.namespaced && !namespace.is_empty() {
            format!("{}/{}/", self.key_root, namespace)
        } else {
            format!("{}/", self.key_root)
        }
    }

    fn resource(&self) -> GroupResource {
        self.info.group_resource()
    }

    /// Turns a storage error into what the client sees (storage's own mapping), logging the
    /// ones that are the server's fault.
    pub fn status_of(&self, err: StorageError, name: &str) -> Status {
        if matches!(
            err,
            StorageError::Internal(_) | StorageError::InvalidObject(_)
        ) {
            tracing::error!(resource = %self.resource(), name, error = %err, "storage failure");
        }
        if let (StorageError::NotFound { .. }, Some(resource)) =
            (&err, &self.info.not_found_resource)
        {
            return Status::not_found(&GroupResource::new(&self.info.group, resource), name);
        }
        err.to_status(&self.resource(), name)
    }

    // The admission attributes are this many facts; a struct for the arguments would only
    // rename them.
    #[allow(clippy::too_many_arguments)]
    fn attributes<'a>(
        &'a self,
        req: &Requester<'a>,
        op: Operation,
        ns: &'a str,
        name: &'a str,
        sub: &'a str,
        dry_run: bool,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        Attributes {
            operation: op,
            resource: &self.info,
            subresource: sub,
            namespace: ns,
            name,
            user: req.user,
            dry_run,
            old_object: old,
            state: Default::default(),
        }
    }

    /// Admission of a create that is not stored here (reviews, `bindings`, a pod's `binding`
    /// or `eviction`): mutating then validating, as upstream's create handler runs them before
    /// the REST create. `name` is the object's, or the parent's for a subresource.
    pub async fn admit_create_without_storage(
        &self,
        req: &Requester<'_>,
        namespace: &str,
        name: &str,
        subresource: &str,
        obj: &mut Value,
        dry_run: bool,
    ) -> Result<(), Status> {
        let attrs = self.attributes(
            req,
            Operation::Create,
            namespace,
            name,
            subresource,
            dry_run,
            None,
        );
        self.admission.admit(&attrs, obj).await?;
        self.admission.validate(&attrs, obj).await
    }

    fn invalid(&self, obj: &Value, errs: &[apimachinery::validation::FieldError]) -> Status {
        let group = self.strategy.internal_group().unwrap_or(&self.info.group);
        // Upstream names the object's own kind: a custom resource sent with another kind is
        // "Gadget.g is invalid: kind: ... must be Widget" (built-in kinds never differ here).
        let kind = match obj.kind() {
            k if self.info.unstructured && !k.is_empty() => k,
            _ => &self.info.kind,
        };
        invalid_status(group, kind, obj.name(), errs)
    }

    /// An object that was not stored (dry run), shaped like a stored one.
    fn unstored(&self, obj: &Value) -> Result<Object, Status> {
        let bytes = ironplane_protobuf::to_json(obj);
        Ok(Object::new(
            Arc::from(self.key(obj.namespace(), obj.name())),
            Bytes::from(bytes),
            parse_rv(obj.resource_version()).unwrap_or(0),
            Arc::new(self.info.attrs(obj)),
        ))
    }

    /// The stored object as of now (a consistent read, never the cache's possibly older copy),
    /// which every read-modify-write starts from.
    async fn current(&self, key: &str, name: &str) -> Result<Option<Object>, Status> {
        match self
            .storage
            .get(
                key,
                &GetOptions {
                    resource_version: ResourceVersion::Unset,
                },
            )
            .await
        {
            Ok(o) => Ok(Some(o)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.status_of(e, name)),
        }
    }

    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
        rv: ResourceVersion,
    ) -> Result<Object, Status> {
        self.storage
            .get(
                &self.key(namespace, name),
                &GetOptions {
                    resource_version: rv,
                },
            )
            .await
            .map_err(|e| self.status_of(e, name))
    }

    pub async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, Status> {
        self.storage
            .list(&self.prefix(namespace), opts)
            .await
            .map_err(|e| self.status_of(e, ""))
    }

    pub async fn watch(&self, namespace: &str, opts: &WatchOptions) -> Result<WatchStream, Status> {
        self.storage
            .watch(&self.prefix(namespace), opts)
            .await
            .map_err(|e| self.status_of(e, ""))
    }

    /// Sets namespace and system fields, runs the create half of the lifecycle and stores.
    pub async fn create(
        &self,
        req: &Requester<'_>,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Object, Status> {
        if self.info.namespaced {
            match obj.namespace() {
                "" => obj.set_meta("namespace", namespace),
                // An empty request namespace clears the object's (upstream's
                // `EnsureObjectNamespaceMatchesRequestNamespace`); validation then asks for one.
                _ if namespace.is_empty() => obj.set_meta("namespace", ""),
                ns if ns != namespace => {
                    return Err(Status::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {}
            }
        } else {
            obj.remove_meta("namespace");
        }
        self.strategy.default(&mut obj);
        // From here on the object is in the form Go's JSON decoder gives upstream's handler:
        // field management compares it so, and admission and validation see what upstream's
        // see. Storage's form follows before it is stored.
        request_form(&mut obj);
        if let Some(mf) = &opts.managed_fields {
            self.track_update(mf, "", None, &mut obj);
        }
        {
            // Admission names the object being created, as upstream's create handler does.
            let name = obj.name().to_string();
            let attrs = self.attributes(
                req,
                Operation::Create,
                namespace,
                &name,
                "",
                opts.dry_run,
                None,
            );
            self.admission.admit(&attrs, &mut obj).await?;
            if attrs.state.take_patched() {
                self.strategy.default(&mut obj);
            }
        }
        self.strategy
            .authorize_write(req.user, namespace, &obj, None)
            .await?;
        // System fields first, as upstream's store fills them before the strategy prepares the
        // object (a Job's generated selector names its uid).
        let meta = obj.metadata_mut();
        meta.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        for f in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(f);
        }
        // The name is generated before the strategy's begin hook, as upstream's store does, so
        // that what it reserves can name its owner.
        let generate = obj.name().is_empty() && !obj.generate_name().is_empty();
        if generate {
            obj.set_meta("name", generated_name(obj.generate_name()));
        }
        let finish = self.strategy.begin_create(&mut obj, opts.dry_run).await?;
        let result = self
            .create_prepared(req, namespace, obj, opts, generate)
            .await;
        if let Some(finish) = finish {
            finish(result.is_ok()).await;
        }
        result
    }

    /// The create half of the lifecycle after the strategy's begin hook: prepare, validate,
    /// validating admission, store (retrying a generated name that is taken).
    async fn create_prepared(
        &self,
        req: &Requester<'_>,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOptions,
        generate: bool,
    ) -> Result<Object, Status> {
        self.strategy.prepare_for_create_by(&mut obj, req.user);
        let meta = obj.metadata_mut();
        if self.info.tracks_generation {
            meta.insert("generation".into(), 1.into());
        } else {
            meta.remove("generation");
        }
        for attempt in 0..MAX_GENERATE_NAME_RETRIES {
            if generate && attempt > 0 {
                obj.set_meta("name", generated_name(obj.generate_name()));
            }
            let errs = self.strategy.create_errors(&obj, self.validate_meta(&obj));
            if !errs.is_empty() {
                return Err(self.invalid(&obj, &errs));
            }
            crate::warning::add_all(self.strategy.warnings_on_create(&obj));
            let name = obj.name().to_string();
            {
                let attrs = self.attributes(
                    req,
                    Operation::Create,
                    namespace,
                    &name,
                    "",
                    opts.dry_run,
                    None,
                );
                self.admission.validate(&attrs, &obj).await?;
            }
            self.stored_form(&mut obj);
            let key = self.key(namespace, &name);
            // A dry run stores nothing but still fails on a name that is taken, as upstream's
            // dry-run storage reads the key first.
            let outcome = if opts.dry_run {
                match self.current(&key, &name).await? {
                    Some(_) => Err(StorageError::AlreadyExists {
                        key,
                        rejected: Some(Box::new(obj)),
                    }),
                    None => return self.unstored(&obj),
                }
            } else {
                // The object is handed over, not copied: a refused write gives it back.
                match self.storage.create(&key, obj).await {
                    Err(e) => match retry_without_managed_fields(e, opts) {
                        Ok(obj) => self.storage.create(&key, obj).await,
                        Err(e) => Err(e),
                    },
                    done => done,
                }
            };
            match outcome {
                Ok(o) => return Ok(o),
                Err(mut e @ StorageError::AlreadyExists { .. })
                    if generate && attempt + 1 < MAX_GENERATE_NAME_RETRIES =>
                {
                    match e.take_rejected() {
                        Some(back) => obj = back,
                        None => return Err(self.status_of(e, &name)),
                    }
                }
                Err(e) => return Err(self.status_of(e, &name)),
            }
        }
        Err(Status::internal("could not generate a unique name"))
    }

    /// PUT and PATCH. `updater` computes the new object from the current one (None when it does
    /// not exist); it runs again after a lost compare-and-swap race, unless the client pinned a
    /// resourceVersion, in which case the race is the client's conflict. As upstream's
    /// `GuaranteedUpdate`, an unconditional write retries until it applies: every lost race
    /// means another writer won, and the request deadline bounds the wait.
    pub async fn update(
        &self,
        req: &Requester<'_>,
        namespace: &str,
        name: &str,
        updater: &mut (dyn FnMut(Option<&Value>) -> Result<Value, Status> + Send),
        opts: &UpdateOptions,
    ) -> Result<(Object, bool), Status> {
        let key = self.key(namespace, name);
        // A write through /scale updates the parent through the parent's own strategy, as
        // upstream's scale REST updates through the parent's store; admission alone sees it as
        // the subresource's `autoscaling/v1 Scale` (object and oldObject).
        let through_scale = opts.subresource == "scale" && self.info.subresource("scale").is_some();
        let sub = if through_scale {
            ""
        } else {
            opts.subresource.as_str()
        };
        let scale_of = |obj: &Value| crate::endpoints::scale::scale_of(&self.info, obj);
        loop {
            let Some(current) = self.current(&key, name).await? else {
                // Subresources never create (upstream's status REST passes no force either).
                if sub.is_empty()
                    && ((opts.is_put && self.strategy.allow_create_on_update())
                        || opts.force_allow_create)
                {
                    let obj = updater(None)?;
                    return Ok((self.create(req, namespace, obj, &opts.write).await?, true));
                }
                return Err(Status::not_found(&self.resource(), name));
            };
            let old = current.value().map_err(Status::internal)?;
            let mut new = updater(Some(&old))?;
            let pinned = match new.resource_version() {
                // Zero pins nothing, as an unset resourceVersion (upstream's versioner reads
                // both as 0, an unconditional update).
                "" => None,
                rv if rv.bytes().all(|b| b == b'0') => None,
                rv => match parse_rv(rv) {
                    Some(v) => Some(v),
                    // Storage's own parse error, passed on as upstream's update passes it: a
                    // 500 without a reason, in Go's `strconv.ParseUint` words.
                    None => {
                        let why = if rv.bytes().all(|b| b.is_ascii_digit()) {
                            "value out of range"
                        } else {
                            "invalid syntax"
                        };
                        return Err(Status::unknown(format!(
                            "strconv.ParseUint: parsing {rv:?}: {why}"
                        )));
                    }
                },
            };
            if let Some(rv) = pinned {
                if rv != current.resource_version {
                    return Err(Status::stale_resource_version(&self.resource(), name));
                }
            } else if opts.is_put && !self.strategy.allow_unconditional_update() {
                let errs = [apimachinery::validation::FieldError::invalid(
                    &FieldPath::new("metadata").child("resourceVersion"),
                    Value::from(0),
                    "must be specified for an update",
                )];
                // Upstream names the resource here, not the kind (`leases.coordination.k8s.io
                // "l" is invalid`, details.kind `leases`).
                return Err(invalid_status(
                    &self.info.group,
                    &self.info.resource,
                    new.name(),
                    &errs,
                ));
            }
            if sub == "status" {
                // A write through /status changes status and the metadata the kind lets it
                // change; the spec and everything else stay as stored.
                let mut merged = old.clone();
                match new.get("status") {
                    Some(s) => merged["status"] = s.clone(),
                    None => {
                        if let Some(m) = merged.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                let sent = new.metadata().cloned().unwrap_or_default();
                let meta = merged.metadata_mut();
                // An apply through /status brings its managed fields; an update's are taken
                // again below, from the stored ones.
                match sent.get("managedFields") {
                    Some(v) => meta.insert("managedFields".into(), v.clone()),
                    None => meta.remove("managedFields"),
                };
                for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if self.info.status_keeps_metadata.contains(&field) {
                        continue;
                    }
                    match sent.get(field) {
                        Some(v) => meta.insert(field.to_string(), v.clone()),
                        None => meta.remove(field),
                    };
                }
                new = merged;
            } else if sub.is_empty() && self.info.has_status() {
                // Status is written only through /status for kinds that have it (other
                // subresources, such as a pod's binding, decide for themselves).
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            // System fields come from storage, whatever the client sent.
            {
                let old_meta = old.metadata();
                let meta = new.metadata_mut();
                for f in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "name",
                ] {
                    match old_meta.and_then(|m| m.get(f)) {
                        Some(v) => meta.insert(f.to_string(), v.clone()),
                        None => meta.remove(f),
                    };
                }
                if self.info.namespaced {
                    meta.insert("namespace".into(), namespace.into());
                } else {
                    meta.remove("namespace");
                }
                meta.remove("resourceVersion");
            }
            self.strategy.default(&mut new);
            request_form(&mut new);
            if let Some(mf) = &opts.write.managed_fields {
                self.track_update(mf, sub, Some(&old), &mut new);
            }
            // The same attributes serve mutating and validating admission.
            let old_scale = through_scale.then(|| scale_of(&old));
            let attrs = self.attributes(
                req,
                Operation::Update,
                namespace,
                name,
                opts.subresource.as_str(),
                opts.write.dry_run,
                Some(old_scale.as_ref().unwrap_or(&old)),
            );
            if through_scale {
                let mut scale = scale_of(&new);
                self.admission.admit(&attrs, &mut scale).await?;
                // A Scale has no defaults to apply again.
                attrs.state.take_patched();
                crate::endpoints::scale::apply_scale(&self.info, name, &mut new, &scale)?;
            } else {
                self.admission.admit(&attrs, &mut new).await?;
                if attrs.state.take_patched() {
                    self.strategy.default(&mut new);
                }
            }
            if sub.is_empty() {
                self.strategy
                    .authorize_write(req.user, namespace, &new, Some(&old))
                    .await?;
            }
            // The strategy reserves what the new object needs (upstream's `BeginUpdate`) and learns
            // at the end whether the write was stored.
            let finish = if sub.is_empty() {
                self.strategy
                    .begin_update(&mut new, &old, opts.write.dry_run)
                    .await?
            } else {
                None
            };
            // `None`: a lost race, tried again with a fresh read.
            let step: Result<Option<(Object, bool)>, Status> = async {
                if sub.is_empty() || sub == "status" {
                    self.strategy.prepare_for_update(&mut new, &old);
                } else {
                    self.strategy
                        .prepare_for_subresource_update(sub, &mut new, &old);
                }
                // Compared, validated and stored in Go's form, as upstream compares decoded Go
                // values: a field a client left out is the same as its zero value.
                self.stored_form(&mut new);
                if self.info.tracks_generation
                    && !self.info.generation_fixed
                    && without_meta_and_status(&new) != without_meta_and_status(&old)
                {
                    new.set_meta("generation", old.generation() + 1);
                }
                // Validation sees the version being replaced, as upstream's store fills it in for
                // unconditional updates before validating.
                new.set_meta("resourceVersion", current.resource_version.to_string());
                let mut errs = validate_object_meta_update(
                    new.get("metadata").unwrap_or(&Value::Null),
                    old.get("metadata").unwrap_or(&Value::Null),
                    &FieldPath::new("metadata"),
                );
                if errs.is_empty() {
                    errs.extend(self.validate_meta(&new));
                }
                if sub != "status" {
                    errs.extend(self.immutable_field_errors(&new, &old));
                }
                errs.extend(match sub {
                    "status" => self.strategy.validate_status_update(&new, &old),
                    "" => self.strategy.validate_update(&new, &old),
                    _ => self.strategy.validate_subresource_update(sub, &new, &old),
                });
                if !errs.is_empty() {
                    return Err(self.invalid(&new, &errs));
                }
                if sub.is_empty() {
                    crate::warning::add_all(self.strategy.warnings_on_update(&new, &old));
                } else if sub == "status" {
                    crate::warning::add_all(self.strategy.warnings_on_status_update(&new, &old));
                }
                if through_scale {
                    self.admission.validate(&attrs, &scale_of(&new)).await?;
                } else {
                    self.admission.validate(&attrs, &new).await?;
                }
                if same_object(&new, &old) {
                    // Nothing changed; but a value stored under an old encryption key must still
                    // be rewritten (upstream's GuaranteedUpdate writes stale values), so the
                    // object goes down as it is and the store decides.
                    if !self.storage.rewrites_unchanged() || opts.write.dry_run {
                        return Ok(Some((current, false)));
                    }
                    new = old.clone();
                }
                if opts.write.dry_run {
                    return Ok(Some((self.unstored(&new)?, false)));
                }
                // The last finalizer of an object marked for deletion is gone: remove it for good.
                let removing =
                    new.deletion_timestamp().is_some() && self.strategy.ready_to_remove(&new);
                let result = if removing {
                    let r = self
                        .storage
                        .delete(&key, Some(current.resource_version))
                        .await;
                    if r.is_ok() {
                        self.strategy.after_delete(&new).await;
                    }
                    r
                } else {
                    match self
                        .storage
                        .update(&key, new, current.resource_version)
                        .await
                    {
                        Err(e) => match retry_without_managed_fields(e, &opts.write) {
                            Ok(new) => {
                                self.storage
                                    .update(&key, new, current.resource_version)
                                    .await
                            }
                            Err(e) => Err(e),
                        },
                        done => done,
                    }
                };
                match result {
                    Ok(o) => Ok(Some((o, false))),
                    Err(StorageError::Conflict { .. }) if pinned.is_none() => Ok(None),
                    Err(StorageError::NotFound { .. }) => {
                        Err(Status::not_found(&self.resource(), name))
                    }
                    Err(e) => Err(self.status_of(e, name)),
                }
            }
            .await;
            if let Some(finish) = finish {
                finish(matches!(step, Ok(Some(_)))).await;
            }
            match step {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// DELETE. Like [`update`](Self::update), a lost race with another writer re-reads the object
    /// and tries again; the client's preconditions are checked on every try.
    pub async fn delete(
        &self,
        req: &Requester<'_>,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, Status> {
        if let Some(e) = opts.propagation_policy_error() {
            return Err(invalid_status("meta.k8s.io", "DeleteOptions", "", &[e]));
        }
        let key = self.key(namespace, name);
        loop {
            let current = match self.current(&key, name).await {
                Ok(Some(current)) => current,
                // The watch cache leaves undecodable objects out, so the object may be there
                // although the cache says it is not: only the store itself can tell.
                Ok(None) | Err(_) if opts.ignore_store_read_error => {
                    return self.delete_unreadable(&key, name).await;
                }
                Ok(None) => return Err(Status::not_found(&self.resource(), name)),
                Err(e) => return Err(e),
            };
            let mut obj = current.value().map_err(Status::internal)?;
            before_delete_preconditions(
                &GroupResource::new(&self.info.group, &self.info.kind),
                &obj,
                opts.precondition_uid.as_deref(),
                opts.precondition_resource_version.as_deref(),
            )?;
            {
                let attrs = self.attributes(
                    req,
                    Operation::Delete,
                    namespace,
                    name,
                    "",
                    opts.dry_run,
                    Some(&obj),
                );
                self.admission.admit_delete(&attrs).await?;
                self.admission.validate(&attrs, &obj).await?;
            }
            let gc_changed = set_gc_finalizers(&mut obj, opts.propagation_policy.as_deref());
            let already_deleting = obj.deletion_timestamp().is_some();
            // A kind with graceful deletion keeps the object for its grace period.
            let grace = if already_deleting {
                None
            } else {
                self.strategy
                    .graceful_delete_period(&obj, opts.grace_period_seconds)
            };
            // A graceful deletion already under way ends now when the client asks for a
            // period of zero (upstream's `BeforeDelete` on a pending graceful delete).
            let grace_pending = already_deleting
                && obj
                    .get("metadata")
                    .and_then(|m| m.get("deletionGracePeriodSeconds"))
                    .and_then(Value::as_i64)
                    .is_some_and(|g| g > 0);
            let cut_short = grace_pending && opts.grace_period_seconds == Some(0);
            let graceful = if already_deleting {
                (grace_pending && !cut_short) || !self.strategy.ready_to_remove(&obj)
            } else {
                let kept_by_strategy = self.strategy.delete_is_graceful(&mut obj);
                kept_by_strategy
                    || grace.is_some_and(|g| g > 0)
                    || !self.strategy.ready_to_remove(&obj)
            };
            if graceful {
                if already_deleting && !gc_changed && !cut_short {
                    return Ok(DeleteOutcome::Pending(current));
                }
                if cut_short {
                    obj.set_meta("deletionTimestamp", now_rfc3339());
                    obj.set_meta("deletionGracePeriodSeconds", 0);
                }
                if !already_deleting {
                    // Controllers of an object being deleted change what they do: upstream bumps
                    // its generation, if it has one, as the deletionTimestamp is first set.
                    let generation = obj.generation();
                    if generation > 0 {
                        obj.set_meta("generation", generation + 1);
                    }
                    let period = grace.unwrap_or(0).max(0);
                    let at = Utc::now() + chrono::Duration::seconds(period);
                    obj.set_meta(
                        "deletionTimestamp",
                        at.to_rfc3339_opts(SecondsFormat::Secs, true),
                    );
                    obj.set_meta("deletionGracePeriodSeconds", period);
                }
                if opts.dry_run {
                    return Ok(DeleteOutcome::Pending(self.unstored(&obj)?));
                }
                match self
                    .storage
                    .update(&key, obj, current.resource_version)
                    .await
                {
                    Ok(o) => return Ok(DeleteOutcome::Pending(o)),
                    Err(StorageError::Conflict { .. }) => continue,
                    Err(e) => return Err(self.status_of(e, name)),
                }
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(current));
            }
            match self
                .storage
                .delete(&key, Some(current.resource_version))
                .await
            {
                Ok(o) => {
                    self.strategy.after_delete(&obj).await;
                    return Ok(DeleteOutcome::Deleted(o));
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(self.status_of(e, name)),
            }
        }
    }
}

/// The object as upstream stores it: what Go's JSON encoder writes for the Go struct the object
/// decodes into. Structs that are not pointers are always there (a Pod's `status: {}`, a pod
/// template's `metadata: {}`), fields without `omitempty` show their zero values, empty
/// `omitempty` maps and lists go (`labels: {}` after the last label is removed). The protobuf
/// transcoder knows exactly these Go facts, so a round trip through it gives that form
/// (`ironplane_protobuf::go_form` walks the JSON to the same answer); objects it has no Go type
/// for (custom resources) are left as they are. The walk cannot fail on what the decoder took;
/// were it to, the object is logged and stored as far as the walk got.
pub(super) fn go_form(obj: &mut Value) {
    walk_in_place(obj, ironplane_protobuf::go_form_in_place);
}

/// The request's Go form of `obj` (see [`go_form`]): what Go's JSON decoder and encoder make
/// of it, where empty lists and maps that storage makes `null` are still empty.
pub(crate) fn request_form(obj: &mut Value) {
    walk_in_place(obj, ironplane_protobuf::request_form_in_place);
}

/// Brings a built-in object to a Go form with `walk`, where it lies: what is in that form
/// already is only visited, not built again.
fn walk_in_place(
    obj: &mut Value,
    walk: fn(&mut Value) -> Result<(), ironplane_protobuf::ProtobufError>,
) {
    if !ironplane_protobuf::supports(obj.api_version(), obj.kind()) {
        return;
    }
    if let Err(e) = walk(obj) {
        tracing::warn!(error = %e, kind = obj.kind(), "object has no Go form");
    }
}

impl RegistryStore {
    /// The object as upstream would read it back: Go's form, then the kind's defaults once more,
    /// as upstream's storage decoder defaults every object it reads. Defaults are idempotent;
    /// this pass restores what defaulting sets but Go's form cannot hold (the `apiVersion` and
    /// `kind` of a StatefulSet's claim templates, whose Go type has no room for them on the
    /// wire).
    fn stored_form(&self, obj: &mut Value) {
        go_form(obj);
        self.strategy.default(obj);
    }

    /// Object metadata as upstream validates it for this kind: the generic rules, then the
    /// finalizer names built-in kinds insist on.
    fn validate_meta(&self, obj: &Value) -> Vec<FieldError> {
        let meta = obj.get("metadata").unwrap_or(&Value::Null);
        let path = FieldPath::new("metadata");
        let validator = self.strategy.name_validator();
        let name_errors = |name: &str, prefix: bool| {
            let mut msgs = validator.validate(name, prefix);
            msgs.extend(self.strategy.object_name_errors(obj, name));
            msgs
        };
        let mut errs = validate_object_meta_with(meta, self.info.namespaced, &name_errors, &path);
        if self.strategy.checks_kube_finalizer_names() {
            errs.extend(validate_kube_finalizer_names(meta, &path));
        }
        errs
    }

    /// The fields of this kind's data row that an update may not change.
    fn immutable_field_errors(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        if self.info.immutable_fields.is_empty() {
            return Vec::new();
        }
        // The stored object may predate Go's form; `new` is in it already.
        let mut old = old.clone();
        self.stored_form(&mut old);
        self.info
            .immutable_fields
            .iter()
            .filter(|f| new.pointer(f.pointer) != old.pointer(f.pointer))
            .map(|f| {
                let path = FieldPath::new(f.path);
                match f.refusal {
                    super::Refusal::Invalid(detail) => FieldError::invalid(
                        &path,
                        new.pointer(f.pointer).cloned().unwrap_or(Value::Null),
                        detail,
                    ),
                    super::Refusal::InvalidGo(go_type, detail) => {
                        let value = new.pointer(f.pointer).cloned().unwrap_or(Value::Null);
                        let rendered = ironplane_protobuf::go_struct_json(
                            go_type,
                            &value,
                            ironplane_protobuf::GoStyle::Internal,
                        );
                        let err = FieldError::invalid(&path, value, detail);
                        match rendered {
                            Some(r) => err.with_rendered_value(r),
                            None => err,
                        }
                    }
                    super::Refusal::Forbidden(detail) => FieldError::forbidden(&path, detail),
                }
            })
            .collect()
    }

    /// The unsafe deletion of an object that cannot be read (see
    /// [`DeleteOptions::ignore_store_read_error`]): delete the key unconditionally.
    async fn delete_unreadable(&self, key: &str, name: &str) -> Result<DeleteOutcome, Status> {
        match self.storage.delete(key, None).await {
            Ok(object) => Ok(DeleteOutcome::Deleted(object)),
            Err(StorageError::InvalidObject(why)) => {
                tracing::warn!(%key, %why, "deleted an undecodable object without reading it");
                Ok(DeleteOutcome::DeletedUnreadable)
            }
            Err(StorageError::NotFound { .. }) => Err(Status::not_found(&self.resource(), name)),
            Err(e) => Err(self.status_of(e, name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn propagation_policies_set_the_collectors_finalizers() {
        let mut o = json!({"metadata": {"finalizers": ["example.com/keep"]}});
        assert!(!set_gc_finalizers(&mut o, None));
        assert!(set_gc_finalizers(&mut o, Some("Orphan")));
        assert_eq!(o.finalizers(), vec!["example.com/keep", "orphan"]);
        assert!(!set_gc_finalizers(&mut o, Some("Orphan")), "already there");
        assert!(set_gc_finalizers(&mut o, Some("Foreground")));
        assert_eq!(
            o.finalizers(),
            vec!["example.com/keep", "foregroundDeletion"]
        );
        assert!(set_gc_finalizers(&mut o, Some("Background")));
        assert_eq!(o.finalizers(), vec!["example.com/keep"]);
        let mut bare = json!({"metadata": {"finalizers": ["orphan"]}});
        assert!(set_gc_finalizers(&mut bare, Some("Background")));
        assert!(bare.pointer("/metadata/finalizers").is_none());
    }
}
