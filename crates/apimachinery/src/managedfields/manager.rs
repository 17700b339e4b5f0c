//! Who owns which fields of an object, and how a write moves ownership (upstream:
//! structured-merge-diff's `merge.Updater` under the field-manager chain of
//! k8s.io/apimachinery/pkg/util/managedfields/internal).
//!
//! An update (create, PUT, JSON/merge/strategic patch, a subresource write) gives its manager
//! the fields it added or changed and takes them from everybody else; an apply gives its
//! manager exactly the fields it sent, refuses to change fields others own unless forced,
//! and removes the fields the manager applied last time, stopped sending, and nobody else owns.
//! What the chain adds around that: the manager named `{manager, operation, apiVersion,
//! subresource}`, metadata that nobody owns stripped, Update managers of one identity merged,
//! more than ten folded into `ancient-changes`, and an object that never had managed fields
//! left untracked until its first apply (`before-first-apply` then owns what is there).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::fieldpath::{Path, PathElement, Set};
use super::typed::{self, Comparison, Ty};
use crate::object::ObjectExt;
use crate::schema::Schemas;
use crate::status::{Reason, Status, StatusCause, StatusDetails};

/// Upstream's `DefaultMaxUpdateManagers`.
pub const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
const CURRENT_OPERATION: &str = "current-operation";
/// The longest field manager name (`FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// A manager's identity (upstream's manager identifier: the entry without its fields and time,
/// and without the apiVersion for appliers, who keep one identity whatever version they use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerId {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        ManagerId {
            manager: manager.to_string(),
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_string(),
            },
            subresource: subresource.to_string(),
        }
    }

    /// The identifier as upstream writes it (Go's JSON of the entry), which orders managers in
    /// conflict messages.
    fn identifier(&self) -> String {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let mut parts = Vec::new();
        if !self.manager.is_empty() {
            parts.push(format!("\"manager\":{}", q(&self.manager)));
        }
        parts.push(format!("\"operation\":{}", q(self.operation.as_str())));
        if !self.api_version.is_empty() {
            parts.push(format!("\"apiVersion\":{}", q(&self.api_version)));
        }
        if !self.subresource.is_empty() {
            parts.push(format!("\"subresource\":{}", q(&self.subresource)));
        }
        format!("{{{}}}", parts.join(","))
    }

    /// As conflicts name the manager (`"kubectl"`, `"m" with subresource "status"`,
    /// `"m" using v1`).
    fn describe(&self) -> String {
        let mut s = crate::validation::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                crate::validation::go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// One manager's fields.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: ManagerId,
    pub set: Set,
    pub api_version: String,
    pub applied: bool,
    pub time: Option<String>,
}

/// All managers of an object.
#[derive(Clone, Debug, Default)]
pub struct Managed {
    pub entries: Vec<Entry>,
}

impl Managed {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, id: &ManagerId) -> Option<usize> {
        self.entries.iter().position(|e| &e.id == id)
    }

    pub(crate) fn get(&self, id: &ManagerId) -> Option<&Entry> {
        self.position(id).map(|i| &self.entries[i])
    }

    fn remove(&mut self, id: &ManagerId) -> Option<Entry> {
        self.position(id).map(|i| self.entries.remove(i))
    }

    pub(crate) fn put(&mut self, entry: Entry) {
        match self.position(&entry.id) {
            Some(i) => self.entries[i] = entry,
            None => self.entries.push(entry),
        }
    }

    /// Reads `metadata.managedFields` (upstream's `DecodeManagedFields`).
    pub fn decode(entries: &Value) -> Result<Managed, String> {
        let mut managed = Managed::default();
        let Some(list) = entries.as_array() else {
            return Ok(managed);
        };
        for (i, e) in list.iter().enumerate() {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
            let operation = match s("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            if s("apiVersion").is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match s("fieldsType") {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => {
                    return Err(format!(
                        "invalid fieldsType {other:?} in managed fields entry {i}"
                    ));
                }
            }
            let set = match e.get("fieldsV1") {
                Some(v) if !v.is_null() => Set::from_fields_v1(v)
                    .map_err(|err| format!("error decoding versioned set: {err}"))?,
                _ => Set::new(),
            };
            managed.put(Entry {
                id: ManagerId::new(s("manager"), operation, s("apiVersion"), s("subresource")),
                set,
                api_version: s("apiVersion").to_string(),
                applied: operation == Operation::Apply,
                time: e.get("time").and_then(Value::as_str).map(str::to_string),
            });
        }
        Ok(managed)
    }

    /// `metadata.managedFields` in upstream's order: appliers first, then by time, manager,
    /// apiVersion and subresource. `None` when nobody manages anything.
    pub fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        let op = |e: &Entry| {
            if e.applied {
                "Apply"
            } else {
                e.id.operation.as_str()
            }
        };
        entries.sort_by(|p, q| {
            op(p)
                .cmp(op(q))
                .then_with(|| seconds(&p.time).cmp(&seconds(&q.time)))
                .then_with(|| p.id.manager.cmp(&q.id.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.id.subresource.cmp(&q.id.subresource))
        });
        Some(Value::Array(
            entries
                .into_iter()
                .map(|e| {
                    let mut m = Map::new();
                    if !e.id.manager.is_empty() {
                        m.insert("manager".into(), e.id.manager.clone().into());
                    }
                    m.insert("operation".into(), op(e).into());
                    m.insert("apiVersion".into(), e.api_version.clone().into());
                    if let Some(t) = &e.time {
                        m.insert("time".into(), t.clone().into());
                    }
                    m.insert("fieldsType".into(), "FieldsV1".into());
                    m.insert("fieldsV1".into(), e.set.to_fields_v1());
                    if !e.id.subresource.is_empty() {
                        m.insert("subresource".into(), e.id.subresource.clone().into());
                    }
                    Value::Object(m)
                })
                .collect(),
        ))
    }
}

fn seconds(t: &Option<String>) -> i64 {
    t.as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
        .unwrap_or(0)
}

/// The manager `kubectl apply --server-side` uses, whose applies keep client-side apply's
/// annotation in step.
const KUBECTL: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// After kubectl's server-side apply, an object that carries the last-applied annotation gets
/// the applied configuration there (without the annotation itself), so that a later
/// client-side apply diffs against it; dropped when the annotations would grow too large
/// (upstream's `lastAppliedUpdater`).
fn update_last_applied(obj: &mut Value, config: &Value) {
    let has = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !has {
        return;
    }
    let mut applied = config.clone();
    if let Some(a) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    // Go's encoder writes a trailing newline.
    let text = format!("{applied}\n");
    let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    annotations.insert(LAST_APPLIED.into(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > crate::validation::TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        annotations.remove(LAST_APPLIED);
    }
}

/// One field another manager owns that a write would change.
#[derive(Clone, Debug)]
pub struct Conflict {
    pub manager: ManagerId,
    pub path: Path,
}

/// Upstream's 409 for an apply that conflicts (`NewConflictError`).
pub fn conflict_status(conflicts: &[Conflict]) -> Status {
    let causes = conflicts
        .iter()
        .map(|c| StatusCause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {}", c.manager.describe()),
            field: c.path.to_string(),
        })
        .collect();
    let message = if let [c] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager.describe(),
            c.path
        )
    } else {
        let mut managers: Vec<(String, &ManagerId)> = Vec::new();
        for c in conflicts {
            if !managers.iter().any(|(_, m)| *m == &c.manager) {
                managers.push((c.manager.identifier(), &c.manager));
            }
        }
        managers.sort_by(|a, b| a.0.cmp(&b.0));
        let mut lines = Vec::new();
        for (_, m) in managers {
            lines.push(format!("conflicts with {}:", m.describe()));
            for c in conflicts.iter().filter(|c| &c.manager == m) {
                lines.push(format!("- {}", c.path));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    Status::new(409, Reason::Conflict, message).with_details(StatusDetails {
        causes,
        ..Default::default()
    })
}

/// The metadata no manager owns (upstream's strip-meta manager).
static STRIP_SET: std::sync::LazyLock<Set> = std::sync::LazyLock::new(|| {
    let mut s = Set::new();
    for p in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ] {
        s.insert(&Path::fields(p).0);
    }
    s
});

/// The kind's objects in its other versions, for managers who wrote in another version than the
/// request's (upstream's `merge.Converter` over the scheme's or the CRD's conversion).
pub trait VersionConverter {
    /// `obj` (which carries its own `apiVersion`) in `api_version`; `Ok(None)` when the kind has
    /// no such version (upstream's missing-version error: the managers of that version are
    /// dropped); `Err` when the conversion itself failed.
    fn convert(&self, obj: &Value, api_version: &str) -> Result<Option<Value>, String>;
}

/// The converter of a kind served in one version: any other version is missing.
pub struct OneVersion;

impl VersionConverter for OneVersion {
    fn convert(&self, obj: &Value, api_version: &str) -> Result<Option<Value>, String> {
        Ok(
            (obj.get("apiVersion").and_then(Value::as_str) == Some(api_version))
                .then(|| obj.clone()),
        )
    }
}

/// A comparison in one version, with what it added or modified (what other managers of that
/// version lose, or conflict on).
struct VersionedComparison {
    api_version: String,
    cmp: Comparison,
    changed: Set,
}

/// The field manager of one endpoint: a kind in one version, the main resource or a
/// subresource, with the fields its strategy resets.
pub struct FieldManager<'a> {
    pub schemas: &'a Schemas,
    pub root: Ty,
    /// `v1`, `apps/v1`.
    pub api_version: &'a str,
    pub kind: &'a str,
    pub subresource: &'a str,
    /// The strategy's reset fields: changes there are nobody's.
    pub reset: &'a Set,
    /// The time written on entries this write touches.
    pub now: &'a str,
    /// The kind's zero object (upstream's `New()` of the versioned type, in Go's JSON form):
    /// what a create is compared against, and what an untracked object's first apply
    /// attributes its fields against.
    pub zero: &'a Value,
    /// The kind in its other versions.
    pub converter: &'a dyn VersionConverter,
}

/// Why an apply failed.
pub enum ApplyError {
    Conflicts(Vec<Conflict>),
    Status(Status),
}

impl From<Status> for ApplyError {
    fn from(s: Status) -> Self {
        ApplyError::Status(s)
    }
}

impl ApplyError {
    pub fn into_status(self) -> Status {
        match self {
            ApplyError::Conflicts(c) => conflict_status(&c),
            ApplyError::Status(s) => s,
        }
    }
}

fn take_managed(obj: &mut Value) -> Option<Value> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"))
}

fn set_managed(obj: &mut Value, managed: &Managed) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        match managed.encode() {
            Some(v) => m.insert("managedFields".into(), v),
            None => m.remove("managedFields"),
        };
    }
}

/// `managedFields: []` (or one empty entry): the client resets the managed fields.
fn is_reset(v: &Value) -> bool {
    match v.as_array() {
        Some(a) if a.is_empty() => true,
        Some(a) if a.len() == 1 => a[0].as_object().is_some_and(Map::is_empty),
        _ => false,
    }
}

impl FieldManager<'_> {
    /// Records an update's changes (create: `live` is the kind's zero object) in
    /// `new.metadata.managedFields` (upstream's `FieldManager.UpdateNoErrors`). `manager` is the
    /// request's `fieldManager`, or the prefix of its User-Agent. When the managers cannot be
    /// worked out (a conversion to another manager's version failed), the object loses its
    /// managed fields rather than keep wrong ones, as upstream does.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str) {
        let sent = take_managed(new);
        let live_managed = || {
            live.pointer("/metadata/managedFields")
                .map(Managed::decode)
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        // Subresources never take managed fields from the client; the main resource takes them
        // when they decode and are not empty, and resets them on `[]`.
        let managed = match sent {
            _ if !self.subresource.is_empty() => live_managed(),
            Some(v) if is_reset(&v) => Managed::default(),
            Some(v) => match Managed::decode(&v) {
                Ok(m) if !m.is_empty() => m,
                _ => live_managed(),
            },
            None => live_managed(),
        };
        // An existing object whose managed fields are gone stays untracked until an apply.
        if managed.is_empty() && !live.uid().is_empty() {
            return;
        }
        match self.update_managed(live, new, managed, manager) {
            Ok(managed) => set_managed(new, &managed),
            Err(_) => set_managed(new, &Managed::default()),
        }
    }

    /// The managers after `live` became `new` through an update by `manager`.
    fn update_managed(
        &self,
        live: &Value,
        new: &Value,
        mut managed: Managed,
        manager: &str,
    ) -> Result<Managed, Status> {
        let manager = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        let id = ManagerId::new(
            manager,
            Operation::Update,
            self.api_version,
            self.subresource,
        );
        let current = ManagerId::new(CURRENT_OPERATION, Operation::Update, "", "");
        self.reconcile_with_schema(&mut managed);
        let (mut managed, cmp) = match self.smd_update(live, new, managed, &current, true) {
            Ok(r) => r,
            Err(ApplyError::Status(s)) => return Err(s),
            Err(ApplyError::Conflicts(_)) => unreachable!("a forced update has no conflicts"),
        };
        let mut set = managed.remove(&current).map(|e| e.set).unwrap_or_default();
        set.subtract(&cmp.removed);
        set.absorb(cmp.modified);
        set.absorb(cmp.added);
        set.subtract_recursive(self.reset);
        set.subtract(&STRIP_SET);
        if !set.is_empty() {
            let merged = match managed.remove(&id) {
                Some(prev) => {
                    set.absorb(prev.set);
                    set
                }
                None => set,
            };
            managed.put(Entry {
                id,
                set: merged,
                api_version: self.api_version.to_string(),
                applied: false,
                time: Some(self.now.to_string()),
            });
        }
        cap_update_managers(&mut managed);
        Ok(managed)
    }

    /// The kind's type in `api_version`; `None` when the kind is not served in it.
    fn root_in(&self, api_version: &str) -> Option<Ty> {
        if api_version == self.api_version {
            return Some(self.root);
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.schemas
            .root_for(group, version, self.kind)
            .map(Ty::Schema)
    }

    /// `obj` in `api_version`, with the kind's type there; `None` when the kind has no such
    /// version.
    fn in_version<'v>(
        &self,
        obj: &'v Value,
        api_version: &str,
    ) -> Result<Option<(Cow<'v, Value>, Ty)>, Status> {
        let Some(root) = self.root_in(api_version) else {
            return Ok(None);
        };
        let from = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(self.api_version);
        if from == api_version {
            return Ok(Some((Cow::Borrowed(obj), root)));
        }
        match self.converter.convert(obj, api_version) {
            Ok(Some(v)) => Ok(Some((Cow::Owned(v), root))),
            Ok(None) => Ok(None),
            Err(e) => Err(Status::unknown(e)),
        }
    }

    /// Managed fields brought in line with the kind's schemas as they are now, before an update
    /// or apply reads them (upstream's `reconcileManagedFieldsWithSchemaChanges`): managers of
    /// versions the kind no longer has are dropped, and what the others owned inside a node that
    /// has become atomic (a CRD's schema changed) is owned as that whole node.
    fn reconcile_with_schema(&self, managed: &mut Managed) {
        managed
            .entries
            .retain_mut(|e| match self.root_in(&e.api_version) {
                None => false,
                Some(root) => {
                    if let Some(set) =
                        typed::reconcile_field_set_with_schema(self.schemas, root, &e.set)
                    {
                        e.set = set;
                    }
                    true
                }
            });
    }

    /// Managers of versions the kind no longer has are dropped (upstream's reconciliation of
    /// managed fields with the schema skips, and so forgets, them).
    fn drop_missing_versions(&self, managed: &mut Managed) {
        managed
            .entries
            .retain(|e| self.root_in(&e.api_version).is_some());
    }

    /// What changed from `live` to `new` seen in `api_version`; `None` when the kind has no
    /// such version.
    fn compare_in(
        &self,
        live: &Value,
        new: &Value,
        api_version: &str,
    ) -> Result<Option<VersionedComparison>, Status> {
        let (Some((old, root)), Some((new, _))) = (
            self.in_version(live, api_version)?,
            self.in_version(new, api_version)?,
        ) else {
            return Ok(None);
        };
        let cmp = typed::compare(self.schemas, root, &old, &new).exclude(self.reset);
        let mut changed = cmp.modified.clone();
        changed.absorb(cmp.added.clone());
        Ok(Some(VersionedComparison {
            api_version: api_version.to_string(),
            cmp,
            changed,
        }))
    }

    /// structured-merge-diff's `update`: other managers lose what changed (seen in the version
    /// each of them wrote in); without `force`, changes to what they own are conflicts.
    fn smd_update(
        &self,
        live: &Value,
        new: &Value,
        mut managed: Managed,
        workflow: &ManagerId,
        force: bool,
    ) -> Result<(Managed, Comparison), ApplyError> {
        self.drop_missing_versions(&mut managed);
        let cmp = typed::compare(self.schemas, self.root, live, new).exclude(self.reset);
        if managed.entries.iter().all(|e| &e.id == workflow) {
            // Nobody else to take fields from (every create).
            return Ok((managed, cmp));
        }
        let mut changed = cmp.modified.clone();
        changed.absorb(cmp.added.clone());
        let mut versions = vec![VersionedComparison {
            api_version: self.api_version.to_string(),
            cmp,
            changed,
        }];
        let mut conflicts = Vec::new();
        let mut ids: Vec<&ManagerId> = managed
            .entries
            .iter()
            .map(|e| &e.id)
            .filter(|id| *id != workflow)
            .collect();
        ids.sort_by_cached_key(|id| id.identifier());
        // (manager, what it conflicts on, the comparison of its version); `None`: its version
        // is gone.
        let mut lost: Vec<(ManagerId, Option<(Set, usize)>)> = Vec::new();
        for id in ids {
            let Some(entry) = managed.get(id) else {
                continue;
            };
            let at = match versions
                .iter()
                .position(|v| v.api_version == entry.api_version)
            {
                Some(i) => i,
                None => match self.compare_in(live, new, &entry.api_version)? {
                    Some(v) => {
                        versions.push(v);
                        versions.len() - 1
                    }
                    None => {
                        lost.push((id.clone(), None));
                        continue;
                    }
                },
            };
            let v = &versions[at];
            if !entry.set.intersects(&v.changed) && !entry.set.intersects(&v.cmp.removed) {
                continue;
            }
            let conflict = entry.set.intersection(&v.changed);
            for path in conflict.paths() {
                conflicts.push(Conflict {
                    manager: id.clone(),
                    path,
                });
            }
            lost.push((id.clone(), Some((conflict, at))));
        }
        if !force && !conflicts.is_empty() {
            return Err(ApplyError::Conflicts(conflicts));
        }
        for (id, lost) in lost {
            let Some(i) = managed.position(&id) else {
                continue;
            };
            match lost {
                Some((conflict, at)) => {
                    let e = &mut managed.entries[i];
                    e.set.subtract(&conflict);
                    e.set.subtract(&versions[at].cmp.removed);
                }
                None => {
                    managed.entries.remove(i);
                }
            }
        }
        managed.entries.retain(|e| !e.set.is_empty());
        Ok((managed, versions.swap_remove(0).cmp))
    }

    /// Server-side apply of `config` to `live` (the zero object when there is none) by
    /// `manager` (upstream's `FieldManager.Apply`). Returns the new object, with its managed
    /// fields; the caller defaults and validates it.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApplyError> {
        let api_version = config
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version != self.api_version || kind != self.kind {
            return Err(Status::bad_request(format!(
                "invalid object type: {}",
                crate::gvk::go_gvk_string(api_version, kind)
            ))
            .into());
        }
        if config.pointer("/metadata/managedFields").is_some() {
            return Err(Status::bad_request("metadata.managedFields must be nil").into());
        }
        let mut live = live.clone();
        let mut managed = take_managed(&mut live)
            .map(|v| Managed::decode(&v))
            .transpose()
            .map_err(|e| Status::unknown(format!("failed to decode managed fields: {e}")))?
            .unwrap_or_default();
        if managed.is_empty() {
            // What an untracked object holds belongs to `before-first-apply`.
            managed = self.update_managed(self.zero, &live, managed, BEFORE_FIRST_APPLY)?;
        }
        self.reconcile_with_schema(&mut managed);
        let id = ManagerId::new(
            manager,
            Operation::Apply,
            self.api_version,
            self.subresource,
        );
        let set = typed::applied_field_set(self.schemas, self.root, config).map_err(|e| {
            // Not a status upstream either: a 500 with the error's text alone.
            Status::unknown(format!(
                "failed to create typed patch object ({}/{}; {}): {e}",
                config
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                config
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                crate::gvk::go_gvk_string(self.api_version, self.kind),
            ))
        })?;
        let merged = crate::structured_merge::merge_typed(self.schemas, self.root, &live, config)
            .map_err(|e| Status::unknown(format!("failed to merge config: {e}")))?;
        let last = managed.get(&id).cloned();
        managed.put(Entry {
            id: id.clone(),
            set: set.recursive_difference(self.reset),
            api_version: self.api_version.to_string(),
            applied: true,
            time: last.as_ref().and_then(|e| e.time.clone()),
        });
        let new = match &last {
            Some(last) if !last.set.is_empty() => self
                .prune(&merged, &managed, last)
                .map_err(|e| Status::unknown(format!("failed to prune fields: {}", e.message)))?,
            _ => merged,
        };
        let (mut managed, _) = match self.smd_update(&live, &new, managed.clone(), &id, force) {
            Ok(r) => r,
            // kubectl's first server-side apply of an object it applied client-side owns what
            // its last-applied annotation says, as far as the object still holds it.
            Err(ApplyError::Conflicts(conflicts)) if manager == KUBECTL => {
                let allowed = self.allowed_by_last_applied(&live).unwrap_or_default();
                let left: Vec<Conflict> = conflicts
                    .into_iter()
                    .filter(|c| !allowed.has(&c.path.0))
                    .collect();
                if !left.is_empty() {
                    return Err(ApplyError::Conflicts(left));
                }
                self.smd_update(&live, &new, managed, &id, true)?
            }
            Err(e) => return Err(e),
        };
        let changed = new != live;
        if let Some(i) = managed.position(&id) {
            let e = &mut managed.entries[i];
            e.set.subtract(&STRIP_SET);
            if e.set.is_empty() {
                managed.entries.remove(i);
            } else if changed {
                e.time = Some(self.now.to_string());
            }
        }
        let mut out = if changed { new } else { live };
        if manager == KUBECTL {
            update_last_applied(&mut out, config);
        }
        set_managed(&mut out, &managed);
        Ok(out)
    }

    /// The fields kubectl's last-applied annotation on `live` names with the values `live`
    /// still has (upstream's `allowedConflictsFromLastApplied`); `None` without a usable one.
    fn allowed_by_last_applied(&self, live: &Value) -> Option<Set> {
        let text = live
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(LAST_APPLIED))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version) {
            return None;
        }
        let set = typed::to_field_set(self.schemas, self.root, &last).ok()?;
        let cmp = typed::compare(self.schemas, self.root, &last, live);
        Some(
            set.difference(&cmp.modified)
                .difference(&cmp.added)
                .difference(&cmp.removed),
        )
    }

    /// Removes what `manager` applied last time (`last`, in the version it applied in) and no
    /// longer applies, unless another manager owns it (upstream's `prune`, with its add-back
    /// steps, each done in the version of the sets it reads).
    fn prune(&self, merged: &Value, managed: &Managed, last: &Entry) -> Result<Value, Status> {
        let s = self.schemas;
        let Some((merged_last, ty)) = self.in_version(merged, &last.api_version)? else {
            return Ok(merged.clone());
        };
        let ensure = |ty: Ty, set: &Set| typed::ensure_named_fields_are_members(s, ty, set);
        let field_set = |ty: Ty, v: &Value| typed::to_field_set(s, ty, v).unwrap_or_default();
        let last_set = ensure(ty, &last.set);
        let mut pruned = typed::remove_items(s, ty, &merged_last, &last_set);
        // Add back what others (or this apply) still own, version by version, the pruned
        // version first.
        let mut owned: Vec<(&str, Set)> = vec![(last.api_version.as_str(), Set::new())];
        for e in &managed.entries {
            match owned.iter_mut().find(|(v, _)| *v == e.api_version) {
                Some((_, set)) => set.absorb(e.set.clone()),
                None => owned.push((&e.api_version, e.set.clone())),
            }
        }
        let mut merged_at: Cow<Value> = Cow::Borrowed(&*merged_last);
        for (version, owned) in &owned {
            let (Some((m, ty)), Some((p, _))) = (
                self.in_version(&merged_at, version)?,
                self.in_version(&pruned, version)?,
            ) else {
                continue;
            };
            let merged_set = ensure(ty, &field_set(ty, &m));
            let keep = ensure(ty, &field_set(ty, &p)).union(&ensure(ty, owned));
            let next = typed::remove_items(s, ty, &m, &merged_set.difference(&keep));
            merged_at = Cow::Owned(m.into_owned());
            pruned = next;
        }
        // Add back what was never the applier's to remove.
        let Some((pruned_last, _)) = self.in_version(&pruned, &last.api_version)? else {
            return Ok(merged.clone());
        };
        let merged_set = ensure(ty, &field_set(ty, &merged_last));
        let pruned_set = ensure(ty, &field_set(ty, &pruned_last));
        let out = typed::remove_items(
            s,
            ty,
            &merged_last,
            &merged_set.difference(&pruned_set).intersection(&last_set),
        );
        match self.in_version(&out, self.api_version)? {
            Some((v, _)) => Ok(v.into_owned()),
            None => Ok(merged.clone()),
        }
    }
}

/// Folds the oldest Update managers into `ancient-changes` (one per apiVersion) when there are
/// more than [`MAX_UPDATE_MANAGERS`].
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<usize> = (0..managed.entries.len())
        .filter(|i| !managed.entries[*i].applied)
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|a, b| {
        let (p, q) = (&managed.entries[*a], &managed.entries[*b]);
        seconds(&p.time)
            .cmp(&seconds(&q.time))
            .then_with(|| p.id.identifier().cmp(&q.id.identifier()))
    });
    let order: Vec<ManagerId> = updaters
        .iter()
        .map(|i| managed.entries[*i].id.clone())
        .collect();
    let mut length = order.len();
    let mut first_of_version: Vec<(String, ManagerId)> = Vec::new();
    for id in order {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managed.get(&id).cloned() else {
            continue;
        };
        let version = entry.api_version.clone();
        let bucket = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &version, "");
        match first_of_version.iter().find(|(v, _)| *v == version) {
            Some((_, first)) => {
                if managed.get(&bucket).is_none()
                    && let Some(mut f) = managed.remove(first)
                {
                    f.id = bucket.clone();
                    managed.put(f);
                }
                let set = managed
                    .get(&bucket)
                    .map(|b| entry.set.union(&b.set))
                    .unwrap_or(entry.set.clone());
                managed.remove(&id);
                managed.put(Entry {
                    id: bucket,
                    set,
                    api_version: version,
                    applied: entry.applied,
                    time: entry.time,
                });
                length -= 1;
            }
            None => first_of_version.push((version, id)),
        }
    }
}

/// The manager a request writes as: its `fieldManager`, else the User-Agent up to the first
/// `/`, printable characters only, at most [`FIELD_MANAGER_MAX_LENGTH`] bytes.
pub fn manager_or_user_agent(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The set of the dotted field paths `paths` (`metadata.labels`), the form reset-field tables
/// are written in.
pub fn reset_set(paths: &[&str]) -> Set {
    let mut s = Set::new();
    for p in paths {
        let elements: Vec<PathElement> = p.split('.').map(PathElement::field).collect();
        s.insert(&elements);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Schemas {
        Schemas::from_openapi_v2(&json!({"definitions": {
            "ConfigMap": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object", "properties": {
                        "name": {"type": "string"}, "uid": {"type": "string"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                        "managedFields": {"type": "array", "items": {"type": "object"}}}},
                    "data": {"type": "object", "additionalProperties": {"type": "string"}}
                }
            }
        }}))
    }

    fn manager<'a>(
        s: &'a Schemas,
        reset: &'a Set,
        zero: &'a Value,
        now: &'a str,
    ) -> FieldManager<'a> {
        FieldManager {
            schemas: s,
            root: Ty::Schema(s.root_for("", "v1", "ConfigMap").unwrap()),
            api_version: "v1",
            kind: "ConfigMap",
            subresource: "",
            reset,
            now,
            zero,
            converter: &OneVersion,
        }
    }

    fn entries(obj: &Value) -> Vec<(String, String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap_or("").to_string(),
                            e["operation"].as_str().unwrap_or("").to_string(),
                            e["fieldsV1"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn creates_and_updates_move_ownership() {
        let s = schemas();
        let (reset, zero) = (
            Set::new(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        );
        let fm = manager(&s, &reset, &zero, "2026-01-01T00:00:00Z");
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}});
        fm.update(&zero, &mut obj, "creator");
        assert_eq!(
            entries(&obj),
            vec![(
                "creator".into(),
                "Update".into(),
                json!({"f:data": {".": {}, "f:x": {}, "f:y": {}},
                         "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
            )]
        );
        obj["metadata"]["uid"] = json!("u");
        let mut next = obj.clone();
        next["data"]["y"] = json!("3");
        fm.update(&obj, &mut next, "editor");
        let e = entries(&next);
        assert_eq!(e[0].2["f:data"], json!({".": {}, "f:x": {}}));
        assert_eq!(
            e[1],
            (
                "editor".into(),
                "Update".into(),
                json!({"f:data": {"f:y": {}}})
            )
        );
        // `managedFields: []` resets; an existing object without any stays untracked.
        let mut reset_obj = next.clone();
        reset_obj["metadata"]["managedFields"] = json!([]);
        fm.update(&next, &mut reset_obj, "editor");
        assert!(reset_obj["metadata"].get("managedFields").is_none());
        let mut again = reset_obj.clone();
        again["data"]["z"] = json!("9");
        fm.update(&reset_obj, &mut again, "editor");
        assert!(again["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn applies_conflict_share_force_and_prune() {
        let s = schemas();
        let (reset, zero) = (
            Set::new(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        );
        let fm = manager(&s, &reset, &zero, "2026-01-01T00:00:00Z");
        let cfg = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
        let obj = fm
            .apply(&zero, &cfg(json!({"a": "1", "b": "2"})), "one", false)
            .ok()
            .unwrap();
        assert_eq!(
            entries(&obj),
            vec![(
                "one".into(),
                "Apply".into(),
                json!({"f:data": {"f:a": {}, "f:b": {}}})
            )]
        );
        // Same value: shared, no conflict.
        let obj = fm
            .apply(&obj, &cfg(json!({"a": "1"})), "two", false)
            .ok()
            .unwrap();
        assert_eq!(entries(&obj).len(), 2);
        // Another value: a conflict naming the field and the manager.
        let Err(ApplyError::Conflicts(c)) = fm.apply(&obj, &cfg(json!({"b": "9"})), "two", false)
        else {
            panic!("expected a conflict");
        };
        let status = conflict_status(&c);
        assert_eq!(status.code, 409);
        assert_eq!(
            status.message,
            "Apply failed with 1 conflict: conflict with \"one\": .data.b"
        );
        // `one` stops sending `a` (shared: stays) and `b` (its own: goes).
        let obj = fm
            .apply(&obj, &cfg(json!({"c": "3"})), "one", false)
            .ok()
            .unwrap();
        assert_eq!(obj["data"], json!({"a": "1", "c": "3"}));
        // Forced, `two` takes `c` from `one`, which is left with nothing and disappears.
        let obj = fm
            .apply(&obj, &cfg(json!({"a": "1", "c": "4"})), "two", true)
            .ok()
            .unwrap();
        assert_eq!(
            entries(&obj),
            vec![(
                "two".into(),
                "Apply".into(),
                json!({"f:data": {"f:a": {}, "f:c": {}}})
            )]
        );
        // The wrong kind is refused.
        let wrong = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}});
        let Err(ApplyError::Status(s)) = fm.apply(&obj, &wrong, "two", false) else {
            panic!("expected a refusal");
        };
        assert_eq!(s.message, "invalid object type: /v1, Kind=Secret");
    }

    #[test]
    fn managers_of_versions_the_kind_lacks_are_dropped() {
        let s = schemas();
        let (reset, zero) = (
            Set::new(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        );
        let fm = manager(&s, &reset, &zero, "2026-01-01T00:00:00Z");
        let entry = |version: &str| {
            json!({"manager": format!("m-{version}"), "operation": "Update", "apiVersion": version,
                   "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}}})
        };
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "c", "uid": "u",
                                       "managedFields": [entry("v1"), entry("v9")]},
                          "data": {"x": "1"}});
        let mut next = live.clone();
        next["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        next["data"]["y"] = json!("2");
        fm.update(&live, &mut next, "editor");
        let names: Vec<String> = entries(&next).into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["m-v1", "editor"]);
    }

    #[test]
    fn many_updaters_fold_into_ancient_changes() {
        let s = schemas();
        let (reset, zero) = (
            Set::new(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
        );
        let mut obj =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        let times: Vec<String> = (0..12)
            .map(|i| format!("2026-01-01T00:00:{i:02}Z"))
            .collect();
        manager(&s, &reset, &zero, &times[0]).update(&zero, &mut obj, "m0");
        obj["metadata"]["uid"] = json!("u");
        for (i, t) in times.iter().enumerate().skip(1) {
            let mut next = obj.clone();
            next["data"][format!("k{i}")] = json!("v");
            manager(&s, &reset, &zero, t).update(&obj, &mut next, &format!("m{i}"));
            obj = next;
        }
        let names: Vec<String> = entries(&obj).into_iter().map(|e| e.0).collect();
        assert_eq!(names.len(), MAX_UPDATE_MANAGERS, "{names:?}");
        assert!(names.contains(&ANCIENT_CHANGES.to_string()), "{names:?}");
        assert!(!names.contains(&"m1".to_string()), "{names:?}");
        assert!(names.contains(&"m11".to_string()), "{names:?}");
    }

    #[test]
    fn user_agents_become_managers() {
        assert_eq!(
            manager_or_user_agent(None, "kubectl/v1.32.4 (linux/amd64)"),
            "kubectl"
        );
        assert_eq!(manager_or_user_agent(Some("mine"), "kubectl/v1"), "mine");
        assert_eq!(manager_or_user_agent(Some(""), "a\u{7}b/1"), "ab");
        assert_eq!(
            manager_or_user_agent(None, &"x".repeat(200)).len(),
            FIELD_MANAGER_MAX_LENGTH
        );
    }
}
