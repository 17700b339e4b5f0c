//! `ResourceInfo`: the data row of a served resource — names, scope, verbs, subresources and the
//! facts the generic store needs (generation tracking, selectable fields, storage key).

use std::collections::BTreeMap;

use apimachinery::{GroupResource, GroupVersionKind, GroupVersionResource};
use serde_json::Value;

/// A subresource served under `<resource>/<name>/<subresource>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubresourceInfo {
    pub name: String,
    /// The kind exchanged on the subresource, e.g. `Scale` in group `autoscaling`.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub verbs: Vec<String>,
}

/// A field a field selector may name, and where it lives in the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectableField {
    pub name: String,
    pub path: Vec<String>,
    /// What a missing field reads as; upstream fills some (e.g. a pod's `spec.nodeName` is "").
    pub default: String,
    /// Read when `path` is missing or empty (an event's `source` falls back to its reporting
    /// controller).
    pub fallback: Vec<String>,
    /// The name the stored object's attributes index this field under, when it is not `name`:
    /// a version served over another's storage selects on the storage version's attributes
    /// (events.k8s.io's `regarding.kind` is core's `involvedObject.kind`).
    pub indexed_as: Option<String>,
}

/// A field that an update may not change, and how upstream words the refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImmutableField {
    /// Where the field is, as a JSON pointer (`/spec/selector`).
    pub pointer: &'static str,
    /// The field path upstream reports (`spec.selector`; upstream's own spelling, typos kept).
    pub path: &'static str,
    pub refusal: Refusal,
}

/// How an update of an [`ImmutableField`] is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `Invalid value: <new value>: <detail>` (`field is immutable`, `cannot change roleRef`).
    Invalid(&'static str),
    /// `Invalid value: <new value>: <detail>`, the value printed as upstream's internal Go type
    /// of that name prints (`rbac.v1.RoleRef` → `{"APIGroup":...,"Kind":...,"Name":...}`).
    InvalidGo(&'static str, &'static str),
    /// `Forbidden: <detail>`, without the value.
    Forbidden(&'static str),
}

/// Where the `scale` subresource reads and writes a custom resource's replicas (a CRD's
/// `subresources.scale`), as JSON pointers. Built-in kinds use `spec.replicas`,
/// `status.replicas` and `spec.selector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    /// A string-form label selector, e.g. `/status/selector`.
    pub label_selector: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    pub subresources: Vec<SubresourceInfo>,
    /// `metadata.generation` is set on create and bumped on every change outside metadata and
    /// status, as upstream does for kinds with a spec (Deployment, Pod, ...) but not others.
    pub tracks_generation: bool,
    /// `metadata.generation` is 1 from the create on and never moves (upstream's PriorityClass
    /// strategy sets it on create and has no update rule for it).
    pub generation_fixed: bool,
    /// The metadata a write through `/status` cannot change (upstream: each kind's status
    /// strategy `PrepareForUpdate`). Most kinds take the client's labels, annotations, finalizers
    /// and owner references there; some keep a few as stored (Deployment its labels, Pod its
    /// owner references), and those that reset metadata for status writes keep all four
    /// ([`STATUS_RESETS_METADATA`]).
    pub status_keeps_metadata: &'static [&'static str],
    /// Delete answers with the deleted object rather than a `Status` of success.
    pub return_deleted_object: bool,
    /// Field selectors beyond `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<SelectableField>,
    /// Upstream's message for a field label the kind's own conversion does not support, when
    /// it is not core's `field label not supported: <label>`; `{field}` stands for the label.
    pub field_label_message: Option<String>,
    /// Fields an update may not change (checked by the store before the strategy's rules).
    pub immutable_fields: &'static [ImmutableField],
    /// The key below the storage prefix, e.g. `configmaps` in `/registry/configmaps/ns/name`.
    pub storage_key: String,
    /// The version whose storage this resource shares when it is served in several versions.
    pub storage_version: Option<String>,
    /// Upstream's `storageVersionHash` in discovery, for clients that detect storage migrations.
    pub storage_version_hash: Option<String>,
    /// For a deprecated API, the warning every request to the resource (not its subresources)
    /// gets, in upstream's words (`v1 Endpoints is deprecated in v1.33+; use ...`).
    pub deprecation_warning: Option<String>,
    /// The resource a NotFound names when upstream's REST names another than the plural
    /// (`componentstatus "x" not found`).
    pub not_found_resource: Option<String>,
    /// The replica paths of a custom resource's `scale` subresource.
    pub scale_paths: Option<ScalePaths>,
    /// Served as unstructured JSON (custom resources): no protobuf in or out, and no strategic
    /// merge patch, which needs Go struct tags that such kinds do not have.
    pub unstructured: bool,
    /// The fields each strategy resets, by subresource (`""` for the main resource): changes
    /// there belong to no manager (upstream's `GetResetFields`).
    pub reset_fields: Vec<(String, apimachinery::managedfields::Set)>,
}

/// What `ResetObjectMetaForStatus` keeps as stored, and what custom resources keep: every
/// metadata field a client may write.
pub const STATUS_RESETS_METADATA: &[&str] =
    &["labels", "annotations", "finalizers", "ownerReferences"];

impl ResourceInfo {
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new(self.group.clone(), self.version.clone(), self.kind.clone())
    }

    pub fn gvr(&self) -> GroupVersionResource {
        GroupVersionResource::new(
            self.group.clone(),
            self.version.clone(),
            self.resource.clone(),
        )
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.resource.clone())
    }

    pub fn api_version(&self) -> String {
        self.gvk().api_version()
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    pub fn subresource(&self, name: &str) -> Option<&SubresourceInfo> {
        self.subresources.iter().find(|s| s.name == name)
    }

    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// The names field selectors may use, in upstream's order for its error message. A
    /// cluster-scoped kind with field labels of its own (nodes, namespaces, CSRs) does not list
    /// `metadata.namespace` in its conversion function, so upstream refuses it there.
    pub fn field_selector_names(&self) -> Vec<&str> {
        let mut names = vec!["metadata.name"];
        if self.namespaced || self.selectable_fields.is_empty() {
            names.push("metadata.namespace");
        }
        names.extend(self.selectable_fields.iter().map(|f| f.name.as_str()));
        names
    }

    /// The attribute a selector on field label `name` reads (see `SelectableField::indexed_as`).
    pub fn field_index(&self, name: &str) -> String {
        self.selectable_fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.indexed_as.clone())
            .unwrap_or_else(|| name.to_string())
    }

    /// Labels and selectable fields of an object, as the storage layer indexes them.
    pub fn attrs(&self, obj: &Value) -> storage::Attrs {
        let meta = obj.get("metadata");
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let mut fields = BTreeMap::new();
        let meta_str = |f: &str| {
            meta.and_then(|m| m.get(f))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        fields.insert("metadata.name".to_string(), meta_str("name"));
        fields.insert("metadata.namespace".to_string(), meta_str("namespace"));
        for f in &self.selectable_fields {
            let read = |p: &[String]| {
                let p: Vec<&str> = p.iter().map(String::as_str).collect();
                apimachinery::object::get_path_string(obj, &p).filter(|v| !v.is_empty())
            };
            let value = read(&f.path)
                .or_else(|| {
                    (!f.fallback.is_empty())
                        .then(|| read(&f.fallback))
                        .flatten()
                })
                .unwrap_or_else(|| f.default.clone());
            fields.insert(
                f.indexed_as.clone().unwrap_or_else(|| f.name.clone()),
                value,
            );
        }
        storage::Attrs { labels, fields }
    }
}
