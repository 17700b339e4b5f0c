//! The registry's field manager: `metadata.managedFields` kept on every write that comes
//! through the REST handlers, and server-side apply (upstream: the `FieldManager` each
//! endpoint's `RequestScope` carries, k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager).
//!
//! The machinery is `apimachinery::managedfields`; this module hands it what a resource knows:
//! the kind's schema, the fields its strategy resets per subresource, and the kind's zero
//! object in Go's form (what a create is compared against, as upstream compares with `New()`).
//! Writes made inside the server name their manager as upstream's writers are named
//! (`ApiResources::internal_write`: kube-apiserver, kube-controller-manager). Writes upstream
//! makes on a store directly, past its handlers, record nothing here either (an eviction's
//! DisruptionTarget condition on the pod).

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::managedfields::scale::{self, ReplicasPath, ScaleHandler};
use apimachinery::managedfields::{
    ApplyError, FieldManager, OneVersion, Set, Ty, VersionConverter,
};
use apimachinery::object::ObjectExt;
use apimachinery::schema::Schemas;
use serde_json::Value;

use super::RegistryStore;

/// Who writes, for the managed fields of one request.
#[derive(Clone)]
pub struct ManagedFieldsRequest {
    pub schemas: Arc<Schemas>,
    /// The `fieldManager` parameter, or the User-Agent's prefix.
    pub manager: String,
    /// The kind's stores in its other served versions, to see a write as the managers who
    /// wrote in another version see it.
    pub versions: Vec<Arc<RegistryStore>>,
}

impl std::fmt::Debug for ManagedFieldsRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedFieldsRequest")
            .field("manager", &self.manager)
            .field(
                "versions",
                &self
                    .versions
                    .iter()
                    .map(|s| &s.info.version)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Converts through the stores of the kind's served versions (their `Conversion`s: the built-in
/// kinds' functions, or a CRD's schema or webhook).
struct StoreVersions<'a> {
    own: &'a RegistryStore,
    others: &'a [Arc<RegistryStore>],
}

impl StoreVersions<'_> {
    fn find(&self, api_version: &str) -> Option<&RegistryStore> {
        served_in(self.own, self.others, api_version)
    }
}

/// The store of `own`'s kind that serves `api_version`: `own` or one of `others`.
fn served_in<'a>(
    own: &'a RegistryStore,
    others: &'a [Arc<RegistryStore>],
    api_version: &str,
) -> Option<&'a RegistryStore> {
    std::iter::once(own)
        .chain(others.iter().map(|s| &**s))
        .find(|s| s.info.gvk().api_version() == api_version)
}

impl VersionConverter for StoreVersions<'_> {
    fn convert(&self, obj: &Value, api_version: &str) -> Result<Option<Value>, String> {
        let from_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let (Some(from), Some(to)) = (self.find(from_version), self.find(api_version)) else {
            return Ok(None);
        };
        let mut converting = Box::pin(from.convert_to(obj.clone(), to));
        // The built-in kinds and CRDs without a webhook convert without waiting; a conversion
        // webhook is waited for on this worker thread, as upstream's field manager waits.
        let done = match futures_util::FutureExt::now_or_never(&mut converting) {
            Some(done) => done,
            None => {
                let handle = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
                if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
                    return Err("a conversion webhook cannot be waited for here".into());
                }
                tokio::task::block_in_place(|| handle.block_on(converting))
            }
        };
        done.map(Some).map_err(|s| s.message)
    }
}

static NO_RESET: std::sync::LazyLock<Set> = std::sync::LazyLock::new(Set::new);

/// The zero `autoscaling/v1 Scale` in Go's form.
static SCALE_ZERO: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    let mut zero = serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale"});
    super::store::go_form(&mut zero);
    zero
});

/// What a write through `/scale` does to the Scale.
pub enum ScaleChange<'a> {
    /// The Scale after a PUT or a patch.
    Update(Value),
    /// Server-side apply of a Scale configuration.
    Apply { config: &'a Value, force: bool },
}

impl RegistryStore {
    /// The kind's zero object as upstream's `New()` gives it, in Go's JSON form (`status: {}`,
    /// `metadata.creationTimestamp: null`); only `apiVersion` and `kind` for custom resources.
    pub(crate) fn zero_object(&self) -> &Value {
        self.zero.get_or_init(|| {
            let mut zero = serde_json::json!({
                "apiVersion": self.info.gvk().api_version(),
                "kind": self.info.kind,
            });
            super::store::go_form(&mut zero);
            zero
        })
    }

    fn field_manager<'a>(
        &'a self,
        schemas: &'a Schemas,
        converter: &'a dyn VersionConverter,
        subresource: &'a str,
        api_version: &'a str,
        now: &'a str,
    ) -> Option<FieldManager<'a>> {
        let root = schemas.root_for(&self.info.group, &self.info.version, &self.info.kind)?;
        let reset = self
            .info
            .reset_fields
            .iter()
            .find(|(s, _)| s == subresource)
            .map_or(&*NO_RESET, |(_, set)| set);
        Some(FieldManager {
            schemas,
            root: Ty::Schema(root),
            api_version,
            kind: &self.info.kind,
            subresource,
            reset,
            now,
            zero: self.zero_object(),
            converter,
        })
    }

    /// Records an update's (or a create's, with no `live`) changes in `new`'s managed fields.
    /// `new` is in the request's Go form (its caller brings it there first), as upstream compares
    /// decoded Go values: an empty map a client sent under `omitempty` is no field, a struct it
    /// left out is there empty.
    pub(crate) fn track_update(
        &self,
        mf: &ManagedFieldsRequest,
        subresource: &str,
        live: Option<&Value>,
        new: &mut Value,
    ) {
        let api_version = self.info.gvk().api_version();
        let now = super::store::now_rfc3339();
        let converter = StoreVersions {
            own: self,
            others: &mf.versions,
        };
        let Some(fm) = self.field_manager(&mf.schemas, &converter, subresource, &api_version, &now)
        else {
            return;
        };
        fm.update(live.unwrap_or(fm.zero), new, &mf.manager);
    }

    /// Server-side apply of `config` onto `live` (None: the object does not exist yet) by
    /// `manager`: the new object with its managed fields, or upstream's 409 for conflicts.
    pub fn apply(
        &self,
        mf: &ManagedFieldsRequest,
        subresource: &str,
        live: Option<&Value>,
        config: &Value,
        force: bool,
    ) -> Result<Value, Status> {
        let api_version = self.info.gvk().api_version();
        let now = super::store::now_rfc3339();
        let converter = StoreVersions {
            own: self,
            others: &mf.versions,
        };
        let fm = self
            .field_manager(&mf.schemas, &converter, subresource, &api_version, &now)
            .ok_or_else(|| {
                Status::internal(format!(
                    "no schema for {}.{}: server-side apply needs one",
                    self.info.kind, self.info.group
                ))
            })?;
        fm.apply(live.unwrap_or(fm.zero), config, &mf.manager, force)
            .map_err(ApplyError::into_status)
    }

    /// The replicas path of the kind in `api_version`, among the versions it is served in.
    fn replicas_path(&self, others: &[Arc<RegistryStore>], api_version: &str) -> ReplicasPath {
        let Some(store) = served_in(self, others, api_version) else {
            return ReplicasPath::UnknownVersion;
        };
        if store.info.subresource("scale").is_none() {
            return ReplicasPath::NoScale;
        }
        let pointer = store
            .info
            .scale_paths
            .as_ref()
            .map_or("/spec/replicas", |p| p.spec_replicas.as_str());
        ReplicasPath::At(scale::pointer_path(pointer))
    }

    /// A write through `/scale` of `current` (upstream's `scaleUpdatedObjectInfo` with the
    /// Scale's field manager): the Scale is tracked with the parent's managers of the replicas
    /// path, and they go back to the parent. Returns the new Scale and the parent's managed
    /// fields after the write.
    pub(crate) fn scale_write(
        &self,
        mf: Option<&ManagedFieldsRequest>,
        current: &Value,
        mut old_scale: Value,
        change: ScaleChange<'_>,
    ) -> Result<(Value, Option<Value>), Status> {
        let kept = || current.pointer("/metadata/managedFields").cloned();
        let Some(mf) = mf else {
            return match change {
                ScaleChange::Update(new) => Ok((new, kept())),
                ScaleChange::Apply { .. } => Err(Status::internal(
                    "server-side apply needs the OpenAPI schemas",
                )),
            };
        };
        // Custom resources' Scale has no schema among theirs: its fields are deduced from the
        // values, as upstream's custom resource handler reads it.
        let root = mf
            .schemas
            .root_for("autoscaling", "v1", "Scale")
            .map_or(Ty::Deduced, Ty::Schema);
        let parent = scale::managed_of(current);
        let api_version = self.info.gvk().api_version();
        let paths = |v: &str| self.replicas_path(&mf.versions, v);
        let handler = ScaleHandler {
            parent: &parent,
            api_version: &api_version,
            replicas_path: &paths,
        };
        super::store::go_form(&mut old_scale);
        if let Some(entries) = handler.to_subresource().encode() {
            old_scale.set_meta("managedFields", entries);
        }
        let now = super::store::now_rfc3339();
        let fm = FieldManager {
            schemas: &mf.schemas,
            root,
            api_version: "autoscaling/v1",
            kind: "Scale",
            subresource: "scale",
            reset: &NO_RESET,
            now: &now,
            zero: &SCALE_ZERO,
            converter: &OneVersion,
        };
        let new_scale = match change {
            ScaleChange::Update(mut new) => {
                super::store::go_form(&mut new);
                fm.update(&old_scale, &mut new, &mf.manager);
                new
            }
            ScaleChange::Apply { config, force } => fm
                .apply(&old_scale, config, &mf.manager, force)
                .map_err(ApplyError::into_status)?,
        };
        let managed = handler.to_parent(&scale::managed_of(&new_scale)).encode();
        Ok((new_scale, managed))
    }
}
