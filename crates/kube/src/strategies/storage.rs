//! The storage.k8s.io kinds (upstream: pkg/apis/storage/v1/defaults.go, pkg/apis/storage/validation,
//! pkg/registry/storage/*/strategy.go, pkg/api/storage/util.go): StorageClass, CSIDriver,
//! CSINode, VolumeAttachment, VolumeAttributesClass and CSIStorageCapacity. A StorageClass
//! deletes its volumes and binds them at once unless it says otherwise; a CSIDriver's
//! capabilities default as upstream has them; classes and drivers keep what volumes were made
//! with (provisioner, parameters, attach behaviour) for good.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, NameValidator, go_json,
    is_qualified_name, validate_label_selector,
};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::nodeselection::{
    deprecated_node_label, items, label_selector_node_warnings, str_of, strings,
    validate_topology_selector_term,
};
use super::object_at;
use super::resources::{quantity, validate_nonnegative_quantity};
use super::volumes::{
    default_inline_pv_spec, default_unset, validate_csi_driver_name, validate_inline_pv_spec,
};

pub struct StorageClassStrategy;
pub struct CsiDriverStrategy;
pub struct CsiNodeStrategy;
pub struct VolumeAttachmentStrategy;
pub struct VolumeAttributesClassStrategy;
pub struct CsiStorageCapacityStrategy;

const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: i64 = 256 * 1024;
const MAX_ATTACH_METADATA_SIZE: i64 = 256 * 1024;
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
const CSI_NODE_ID_MAX: usize = 256;

fn root(name: &str) -> FieldPath {
    FieldPath::new(name)
}

fn rendered_invalid(path: &FieldPath, go_type: &str, value: &Value, detail: &str) -> FieldError {
    let err = FieldError::invalid(path, value.clone(), detail);
    match go_struct_json(go_type, value, GoStyle::Internal) {
        Some(r) => err.with_rendered_value(r),
        None => err,
    }
}

/// `validateProvisioner`: required, and a qualified name once lowercased (the lowercased name
/// is the value upstream prints).
fn validate_provisioner(provisioner: &str, path: &FieldPath) -> Vec<FieldError> {
    if provisioner.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let lower = provisioner.to_lowercase();
    is_qualified_name(&lower)
        .into_iter()
        .map(|m| FieldError::invalid(path, lower.as_str(), m))
        .collect()
}

/// `validateParameters`: at most 512 entries of at most 256 kB together, no empty key, and
/// (for VolumeAttributesClass) at least one.
fn validate_parameters(
    params: Option<&Value>,
    allow_empty: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let map = params.and_then(Value::as_object);
    let len = map.map_or(0, |m| m.len());
    if len > MAX_PARAMETERS {
        return vec![FieldError::too_long(path, "", MAX_PARAMETERS as i64)];
    }
    let mut errs = Vec::new();
    let mut size = 0i64;
    for (k, v) in map.into_iter().flatten() {
        if k.is_empty() {
            errs.push(FieldError::invalid(path, "", "field can not be empty."));
        }
        size += (k.len() + v.as_str().map_or(0, str::len)) as i64;
    }
    if size > MAX_PARAMETERS_SIZE {
        errs.push(FieldError::too_long(path, "", MAX_PARAMETERS_SIZE));
    }
    if !allow_empty && len == 0 {
        errs.push(FieldError::required(
            path,
            "must contain at least one key/value pair",
        ));
    }
    errs
}

/// `validateAllowedTopologies`. Upstream compares each term with a list that starts with as
/// many empty terms as there are terms, so an empty term is reported that many times (and once
/// more for each empty term before it).
fn validate_allowed_topologies(topologies: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<BTreeMap<String, BTreeSet<String>>> = vec![BTreeMap::new(); topologies.len()];
    for (i, term) in topologies.iter().enumerate() {
        let (exprs, term_errs) = validate_topology_selector_term(term, &path.index(i));
        errs.extend(term_errs);
        for t in &seen {
            if *t == exprs {
                errs.push(FieldError::duplicate(
                    &path.index(i).child("matchLabelExpressions"),
                    "",
                ));
            }
        }
        seen.push(exprs);
    }
    errs
}

fn storage_class_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_provisioner(str_of(obj, "provisioner"), &root("provisioner"));
    errs.extend(validate_parameters(
        obj.get("parameters"),
        true,
        &root("parameters"),
    ));
    // Both are pointers, printed as Go's JSON of their string.
    let policy = str_of(obj, "reclaimPolicy");
    if !policy.is_empty() && !["Delete", "Retain"].contains(&policy) {
        errs.push(
            FieldError::not_supported(&root("reclaimPolicy"), policy, &["Delete", "Retain"])
                .with_rendered_value(go_json(&json!(policy))),
        );
    }
    match obj.get("volumeBindingMode").and_then(Value::as_str) {
        None => errs.push(FieldError::required(&root("volumeBindingMode"), "")),
        Some(mode) if !["Immediate", "WaitForFirstConsumer"].contains(&mode) => {
            errs.push(
                FieldError::not_supported(
                    &root("volumeBindingMode"),
                    mode,
                    &["Immediate", "WaitForFirstConsumer"],
                )
                .with_rendered_value(go_json(&json!(mode))),
            );
        }
        Some(_) => {}
    }
    errs.extend(validate_allowed_topologies(
        items(obj.get("allowedTopologies")),
        &root("allowedTopologies"),
    ));
    errs
}

/// `GetWarningsForStorageClass`.
fn storage_class_warnings(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, term) in items(obj.get("allowedTopologies")).iter().enumerate() {
        for (j, expr) in items(term.get("matchLabelExpressions")).iter().enumerate() {
            if let Some(msg) = deprecated_node_label(str_of(expr, "key")) {
                let at = root("allowedTopologies")
                    .index(i)
                    .child("matchLabelExpressions")
                    .index(j)
                    .child("key");
                out.push(format!("{at}: {msg}"));
            }
        }
    }
    out
}

impl Strategy for StorageClassStrategy {
    fn default(&self, obj: &mut Value) {
        // Pointers: only a missing value is defaulted (an empty one is refused by validation).
        default_unset(obj, "reclaimPolicy", json!("Delete"));
        default_unset(obj, "volumeBindingMode", json!("Immediate"));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        storage_class_errors(obj)
    }

    /// The class's own rules, then what a class may never change (`ValidateStorageClassUpdate`):
    /// parameters, provisioner, reclaim policy and binding mode, each refused as an immutable
    /// field with its new value (an empty parameter map is the same as none).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = storage_class_errors(new);
        let params = |o: &Value| {
            o.get("parameters")
                .filter(|p| p.as_object().is_some_and(|m| !m.is_empty()))
                .cloned()
        };
        if params(new) != params(old) {
            errs.push(FieldError::invalid(
                &root("parameters"),
                params(new).unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        if str_of(new, "provisioner") != str_of(old, "provisioner") {
            errs.push(FieldError::invalid(
                &root("provisioner"),
                str_of(new, "provisioner"),
                "field is immutable",
            ));
        }
        for field in ["reclaimPolicy", "volumeBindingMode"] {
            let v = |o: &Value| o.get(field).cloned().unwrap_or(Value::Null);
            if v(new) != v(old) {
                // A pointer: Go's JSON of the string it points to, or null.
                let rendered = go_json(&v(new));
                errs.push(
                    FieldError::invalid(&root(field), v(new), "field is immutable")
                        .with_rendered_value(rendered),
                );
            }
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        storage_class_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        storage_class_warnings(new)
    }
}

fn csi_driver_spec_errors(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, at) in [
        ("attachRequired", "attachedRequired"),
        ("podInfoOnMount", "podInfoOnMount"),
        ("storageCapacity", "storageCapacity"),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            errs.push(FieldError::required(&path.child(at), ""));
        }
    }
    const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
    if let Some(Value::String(p)) = spec.get("fsGroupPolicy")
        && !FS_GROUP_POLICIES.contains(&p.as_str())
    {
        errs.push(FieldError::not_supported(
            &path.child("fsGroupPolicy"),
            p.as_str(),
            FS_GROUP_POLICIES,
        ));
    }
    let mut audiences = BTreeSet::new();
    for (i, req) in items(spec.get("tokenRequests")).iter().enumerate() {
        let at = path.child("tokenRequests").index(i);
        let audience = str_of(req, "audience");
        if !audiences.insert(audience) {
            errs.push(FieldError::duplicate(&at.child("audience"), audience));
            continue;
        }
        if let Some(secs) = req.get("expirationSeconds").and_then(Value::as_i64) {
            if secs < 600 {
                errs.push(FieldError::invalid(
                    &at.child("expirationSeconds"),
                    secs,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if secs > 1 << 32 {
                errs.push(FieldError::invalid(
                    &at.child("expirationSeconds"),
                    secs,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    for mode in strings(spec.get("volumeLifecycleModes")) {
        if !["Persistent", "Ephemeral"].contains(&mode) {
            errs.push(FieldError::not_supported(
                &path.child("volumeLifecycleModes"),
                mode,
                &["Persistent", "Ephemeral"],
            ));
        }
    }
    if spec.get("seLinuxMount").is_none_or(Value::is_null) {
        errs.push(FieldError::required(&path.child("seLinuxMount"), ""));
    }
    if let Some(period) = spec
        .get("nodeAllocatableUpdatePeriodSeconds")
        .and_then(Value::as_i64)
        && period < 10
    {
        errs.push(FieldError::invalid(
            &path.child("nodeAllocatableUpdatePeriodSeconds"),
            period,
            "must be greater than or equal to 10 seconds",
        ));
    }
    // `validateServiceAccountTokenInSecrets`: only meaningful with token requests.
    if let Some(in_secrets) = spec
        .get("serviceAccountTokenInSecrets")
        .filter(|v| !v.is_null())
        && items(spec.get("tokenRequests")).is_empty()
    {
        errs.push(FieldError::invalid(
            &path.child("serviceAccountTokenInSecrets"),
            in_secrets.clone(),
            "serviceAccountTokenInSecrets is set but no tokenRequests are specified",
        ));
    }
    // `preventPodSchedulingIfMissing` is required only with VolumeLimitScaling (off in v1.36).
    errs
}

const TOKEN_IN_SECRETS_RECOMMENDED: &str = "spec.serviceAccountTokenInSecrets is unset; if supported by this CSI driver, set to true to prevent possible logging of tokens in volume attributes";

fn unset(spec: &Value, field: &str) -> bool {
    spec.get(field).is_none_or(Value::is_null)
}

/// A list as Go's semantic equality sees it: nil and empty alike.
fn list_or_none(spec: &Value, field: &str) -> Option<Value> {
    spec.get(field)
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
}

impl Strategy for CsiDriverStrategy {
    /// A PUT must name the resourceVersion it replaces (upstream's `AllowUnconditionalUpdate`).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        if !obj.is_object() {
            return;
        }
        let spec = object_at(obj, "spec");
        default_unset(spec, "attachRequired", json!(true));
        default_unset(spec, "podInfoOnMount", json!(false));
        default_unset(spec, "storageCapacity", json!(false));
        default_unset(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        default_unset(spec, "requiresRepublish", json!(false));
        default_unset(spec, "seLinuxMount", json!(false));
        if spec
            .get("volumeLifecycleModes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec["volumeLifecycleModes"] = json!(["Persistent"]);
        }
    }

    /// `preventPodSchedulingIfMissing` belongs to VolumeLimitScaling, off in v1.36.
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("preventPodSchedulingIfMissing");
        }
    }

    /// The gated field is kept only where it was already set; any change of the spec moves the
    /// generation.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let null = Value::Null;
        let old_spec = old.get("spec").unwrap_or(&null);
        if unset(old_spec, "preventPodSchedulingIfMissing")
            && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.remove("preventPodSchedulingIfMissing");
        }
        let spec_of = |o: &Value| {
            let mut s = o.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(m) = s.as_object_mut() {
                m.retain(|_, v| !v.is_null() && !v.as_array().is_some_and(Vec::is_empty));
            }
            s
        };
        if spec_of(new) != spec_of(old) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        csi_driver_spec_errors(obj.get("spec").unwrap_or(&Value::Null), &root("spec"))
    }

    /// `ValidateCSIDriverUpdate`: the spec's rules, then what may not change.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let null = Value::Null;
        let spec = new.get("spec").unwrap_or(&null);
        let old_spec = old.get("spec").unwrap_or(&null);
        let mut errs = csi_driver_spec_errors(spec, &root("spec"));
        for (field, at) in [
            ("attachRequired", "attachedRequired"),
            ("volumeLifecycleModes", "volumeLifecycleModes"),
        ] {
            let v = |s: &Value| s.get(field).cloned().unwrap_or(Value::Null);
            if v(spec) != v(old_spec) {
                errs.push(FieldError::invalid(
                    &root("spec").child(at),
                    v(spec),
                    "field is immutable",
                ));
            }
        }
        errs
    }

    /// CSIServiceAccountTokenSecrets (on in v1.36): token requests without saying where the
    /// tokens go.
    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let null = Value::Null;
        let spec = obj.get("spec").unwrap_or(&null);
        if list_or_none(spec, "tokenRequests").is_some()
            && unset(spec, "serviceAccountTokenInSecrets")
        {
            vec![TOKEN_IN_SECRETS_RECOMMENDED.into()]
        } else {
            Vec::new()
        }
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        let null = Value::Null;
        let spec = new.get("spec").unwrap_or(&null);
        let old_spec = old.get("spec").unwrap_or(&null);
        if list_or_none(spec, "tokenRequests") != list_or_none(old_spec, "tokenRequests") {
            self.warnings_on_create(new)
        } else {
            Vec::new()
        }
    }
}

fn csi_node_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = root("spec").child("drivers");
    let mut names = BTreeSet::new();
    let max = CSI_NODE_ID_MAX;
    for (i, driver) in items(obj.pointer("/spec/drivers")).iter().enumerate() {
        let at = path.index(i);
        let name = str_of(driver, "name");
        errs.extend(validate_csi_driver_name(name, &at.child("name")));
        let node_id = str_of(driver, "nodeID");
        if node_id.is_empty() {
            errs.push(FieldError::required(&at.child("nodeID"), ""));
        }
        if node_id.len() > max {
            errs.push(FieldError::invalid(
                &at.child("nodeID"),
                node_id,
                format!("must be {max} characters or less"),
            ));
        }
        if let Some(count) = driver.pointer("/allocatable/count").and_then(Value::as_i64)
            && count < 0
        {
            errs.push(FieldError::invalid(
                &at.child("allocatable").child("count"),
                count,
                "must be greater than or equal to 0",
            ));
        }
        if !names.insert(name) {
            errs.push(FieldError::duplicate(&at.child("name"), name));
        }
        let mut keys = BTreeSet::new();
        for key in strings(driver.get("topologyKeys")) {
            if key.is_empty() {
                errs.push(FieldError::required(&at, ""));
            }
            if !keys.insert(key) {
                errs.push(FieldError::duplicate(&at, key));
            }
            for m in is_qualified_name(key) {
                errs.push(FieldError::invalid(&at, key, m));
            }
        }
    }
    errs
}

impl Strategy for CsiNodeStrategy {
    /// A PUT must name the resourceVersion it replaces (upstream's `AllowUnconditionalUpdate`).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        csi_node_errors(obj)
    }

    /// A driver of the same name keeps its registration, except its allocatable count
    /// (MutableCSINodeAllocatableCount).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = csi_node_errors(new);
        let without_allocatable = |d: &Value| {
            let mut d = d.clone();
            if let Some(m) = d.as_object_mut() {
                m.remove("allocatable");
            }
            d
        };
        for old_driver in items(old.pointer("/spec/drivers")) {
            for new_driver in items(new.pointer("/spec/drivers")) {
                if str_of(old_driver, "name") != str_of(new_driver, "name") {
                    continue;
                }
                let (n, o) = (
                    without_allocatable(new_driver),
                    without_allocatable(old_driver),
                );
                if n != o {
                    errs.push(rendered_invalid(
                        &root("spec").child("drivers"),
                        "storage.v1.CSINodeDriver",
                        &n,
                        "field is immutable",
                    ));
                }
            }
        }
        errs
    }
}

fn volume_attachment_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec_path = root("spec");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    errs.extend(validate_csi_driver_name(
        str_of(spec, "attacher"),
        &spec_path.child("attacher"),
    ));
    let source_path = spec_path.child("source");
    let pv_name = spec
        .pointer("/source/persistentVolumeName")
        .and_then(Value::as_str);
    let inline = spec
        .pointer("/source/inlineVolumeSpec")
        .filter(|v| !v.is_null());
    const ONE_OF: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (inline, pv_name) {
        (None, None) => errs.push(FieldError::required(&source_path, ONE_OF)),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden(&source_path, ONE_OF)),
        (None, Some("")) => errs.push(FieldError::required(
            &source_path.child("persistentVolumeName"),
            "must specify non empty persistentVolumeName",
        )),
        (Some(spec), None) => errs.extend(validate_inline_pv_spec(
            spec,
            &source_path.child("inlineVolumeSpec"),
        )),
        _ => {}
    }
    let node = str_of(spec, "nodeName");
    for m in NameValidator::Dns1123Subdomain.validate(node, false) {
        errs.push(FieldError::invalid(&spec_path.child("nodeName"), node, m));
    }
    let status_path = root("status");
    let status = obj.get("status").unwrap_or(&null);
    if let Some(meta) = status.get("attachmentMetadata").and_then(Value::as_object) {
        let size: usize = meta
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size as i64 > MAX_ATTACH_METADATA_SIZE {
            errs.push(FieldError::too_long(
                &status_path.child("attachmentMetadata"),
                "",
                MAX_ATTACH_METADATA_SIZE,
            ));
        }
    }
    for field in ["attachError", "detachError"] {
        let Some(e) = status.get(field).filter(|e| !e.is_null()) else {
            continue;
        };
        let at = status_path.child(field);
        if str_of(e, "message").len() > MAX_VOLUME_ERROR_MESSAGE {
            // Upstream reports the metadata limit here.
            errs.push(FieldError::too_long(
                &at.child("message"),
                "",
                MAX_ATTACH_METADATA_SIZE,
            ));
        }
        if let Some(code) = e.get("errorCode").and_then(Value::as_i64)
            && code < 0
        {
            errs.push(FieldError::invalid(
                &at.child("errorCode"),
                code,
                apimachinery::validation::inclusive_range_error(0, i64::from(i32::MAX)),
            ));
        }
    }
    if let Some(pv) = pv_name {
        for m in NameValidator::Dns1123Subdomain.validate(pv, false) {
            errs.push(FieldError::invalid(
                &FieldPath::new("spec.source.persistentVolumeName"),
                pv,
                m,
            ));
        }
    }
    errs
}

impl Strategy for VolumeAttachmentStrategy {
    /// An inline volume spec gets the defaults of its sources and capacity.
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.pointer_mut("/spec/source/inlineVolumeSpec") {
            default_inline_pv_spec(spec);
        }
    }

    /// A PUT must name the resourceVersion it replaces (upstream's `AllowUnconditionalUpdate`).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    /// Status is the attacher's: a new attachment starts with none.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    /// `ValidateVolumeAttachment`: the attacher (a CSI driver name), one source, the node, the
    /// status, then the persistent volume's name.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        volume_attachment_errors(obj)
    }

    /// `ValidateVolumeAttachmentUpdate`: the same rules, then the spec may not change.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = volume_attachment_errors(new);
        let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
        if spec(new) != spec(old) {
            errs.push(rendered_invalid(
                &root("spec"),
                "storage.v1.VolumeAttachmentSpec",
                &spec(new),
                "field is immutable",
            ));
        }
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        volume_attachment_errors(new)
            .into_iter()
            .filter(|e| e.field.starts_with("status"))
            .collect()
    }
}

fn vac_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_provisioner(str_of(obj, "driverName"), &root("driverName"));
    errs.extend(validate_parameters(
        obj.get("parameters"),
        false,
        &root("parameters"),
    ));
    errs
}

impl Strategy for VolumeAttributesClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        vac_errors(obj)
    }

    /// `ValidateVolumeAttributesClassUpdate`: what may not change, then the class's own rules.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if str_of(new, "driverName") != str_of(old, "driverName") {
            errs.push(FieldError::forbidden(
                &root("driverName"),
                "updates to driverName are forbidden.",
            ));
        }
        let params = |o: &Value| o.get("parameters").filter(|p| !p.is_null()).cloned();
        if params(new) != params(old) {
            errs.push(FieldError::forbidden(
                &root("parameters"),
                "updates to parameters are forbidden.",
            ));
        }
        errs.extend(vac_errors(new));
        errs
    }
}

fn capacity_errors(obj: &Value, allow_invalid_labels: bool) -> Vec<FieldError> {
    let mut errs = validate_label_selector(
        obj.get("nodeTopology").filter(|t| !t.is_null()),
        LabelSelectorValidationOptions {
            allow_invalid_label_value: allow_invalid_labels,
            ..Default::default()
        },
        &root("nodeTopology"),
    );
    let class = str_of(obj, "storageClassName");
    for m in NameValidator::Dns1123Subdomain.validate(class, false) {
        errs.push(FieldError::invalid(&root("storageClassName"), class, m));
    }
    if let Some(c) = obj.get("capacity").filter(|c| !c.is_null()) {
        errs.extend(validate_nonnegative_quantity(
            &quantity(c),
            &root("capacity"),
        ));
    }
    errs
}

impl Strategy for CsiStorageCapacityStrategy {
    /// A PUT must name the resourceVersion it replaces (upstream's `AllowUnconditionalUpdate`).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        capacity_errors(obj, false)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let allow = old.get("nodeTopology").is_some_and(|t| {
            !validate_label_selector(
                Some(t),
                LabelSelectorValidationOptions::default(),
                &FieldPath::nil(),
            )
            .is_empty()
        });
        let mut errs = capacity_errors(new, allow);
        let topology = |o: &Value| o.get("nodeTopology").filter(|t| !t.is_null()).cloned();
        if topology(new) != topology(old) {
            // A *metav1.LabelSelector: its JSON tags, in declaration order.
            errs.push(match topology(new) {
                Some(t) => rendered_invalid(
                    &root("nodeTopology"),
                    "meta.v1.LabelSelector",
                    &t,
                    "field is immutable",
                ),
                None => {
                    FieldError::invalid(&root("nodeTopology"), Value::Null, "field is immutable")
                }
            });
        }
        if str_of(new, "storageClassName") != str_of(old, "storageClassName") {
            errs.push(FieldError::invalid(
                &root("storageClassName"),
                str_of(new, "storageClassName"),
                "field is immutable",
            ));
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        label_selector_node_warnings(obj.get("nodeTopology"), &root("nodeTopology"))
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        label_selector_node_warnings(new.get("nodeTopology"), &root("nodeTopology"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_class_rules() {
        let errs = StorageClassStrategy.validate(&json!({"volumeBindingMode": "Immediate"}));
        assert_eq!(errs[0].to_string(), "provisioner: Required value");
        let sc = json!({"provisioner": "Bad Provisioner!", "volumeBindingMode": "Immediate"});
        assert!(
            StorageClassStrategy.validate(&sc)[0]
                .to_string()
                .starts_with("provisioner: Invalid value: \"bad provisioner!\": name part")
        );
        let sc = json!({"provisioner": "a.b/c", "volumeBindingMode": "Immediate",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": []}]}]});
        assert_eq!(
            StorageClassStrategy.validate(&sc)[0].to_string(),
            "allowedTopologies[0].matchLabelExpressions[0].values: Required value"
        );
    }

    #[test]
    fn an_empty_topology_term_is_a_duplicate_of_upstreams_placeholders() {
        let errs = validate_allowed_topologies(&[json!({})], &root("allowedTopologies"));
        assert_eq!(
            errs[0].to_string(),
            "allowedTopologies[0].matchLabelExpressions: Duplicate value: \"\""
        );
    }

    #[test]
    fn csi_node_drivers_are_unique() {
        let node = json!({"spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "a"},
            {"name": "csi.example.com", "nodeID": "b"}]}});
        let errs = CsiNodeStrategy.validate(&node);
        assert_eq!(
            errs[0].to_string(),
            "spec.drivers[1].name: Duplicate value: \"csi.example.com\""
        );
    }

    #[test]
    fn storage_class_fields_are_immutable_fields() {
        let old = json!({"provisioner": "a.b/c", "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate", "parameters": {}});
        let new = json!({"provisioner": "a.b/c", "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate", "parameters": {"type": "ssd"}});
        let msgs: Vec<String> = StorageClassStrategy
            .validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "parameters: Invalid value: {\"type\":\"ssd\"}: field is immutable",
                "reclaimPolicy: Invalid value: \"Retain\": field is immutable",
            ]
        );
    }

    #[test]
    fn only_missing_class_pointers_are_defaulted() {
        let mut sc = json!({"reclaimPolicy": "", "volumeBindingMode": null});
        StorageClassStrategy.default(&mut sc);
        assert_eq!(
            sc,
            json!({"reclaimPolicy": "", "volumeBindingMode": "Immediate"})
        );
    }

    #[test]
    fn csi_driver_spec_changes_move_the_generation() {
        let old = json!({"metadata": {"name": "d"}, "spec": {"podInfoOnMount": false}});
        let mut new = json!({"metadata": {"name": "d"}, "spec": {"podInfoOnMount": true,
            "preventPodSchedulingIfMissing": true}});
        CsiDriverStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["metadata"]["generation"], json!(1));
        assert!(new["spec"].get("preventPodSchedulingIfMissing").is_none());
        let mut same = old.clone();
        CsiDriverStrategy.prepare_for_update(&mut same, &old);
        assert!(same["metadata"].get("generation").is_none());
    }

    #[test]
    fn csi_node_ids_reach_256_characters() {
        let node = |n: usize| json!({"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n".repeat(n)}]}});
        assert!(CsiNodeStrategy.validate(&node(256)).is_empty());
        assert!(
            CsiNodeStrategy.validate(&node(257))[0]
                .to_string()
                .ends_with("must be 256 characters or less")
        );
    }

    #[test]
    fn capacity_topology_prints_as_a_label_selector() {
        let old = json!({"storageClassName": "sc", "nodeTopology": {"matchLabels": {"a": "b"}}});
        let new = json!({"storageClassName": "sc", "nodeTopology": {
            "matchExpressions": [{"key": "k", "operator": "Exists"}], "matchLabels": {"a": "c"}}});
        assert_eq!(
            CsiStorageCapacityStrategy.validate_update(&new, &old)[0].to_string(),
            "nodeTopology: Invalid value: {\"matchLabels\":{\"a\":\"c\"},\"matchExpressions\":[{\"key\":\"k\",\"operator\":\"Exists\"}]}: field is immutable"
        );
    }

    #[test]
    fn an_inline_volume_spec_is_a_csi_volume_only() {
        let va = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n",
            "source": {"inlineVolumeSpec": {"accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/srv"},
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast"}}}});
        let msgs: Vec<String> = VolumeAttachmentStrategy
            .validate(&va)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.source.inlineVolumeSpec.capacity: Forbidden: may not be specified in the context of inline volumes",
                "spec.source.inlineVolumeSpec.csi: Required value: has to be specified in the context of inline volumes",
                "spec.source.inlineVolumeSpec.persistentVolumeReclaimPolicy: Forbidden: may only be Retain in the context of inline volumes",
                "spec.source.inlineVolumeSpec.storageClassName: Forbidden: may not be specified in the context of inline volumes",
            ]
        );
    }

    #[test]
    fn capacity_warns_on_beta_labels() {
        let cap = json!({"nodeTopology": {"matchLabels": {"failure-domain.beta.kubernetes.io/zone": "a"}}});
        assert_eq!(
            CsiStorageCapacityStrategy.warnings_on_create(&cap),
            vec![
                "nodeTopology.matchLabels.failure-domain.beta.kubernetes.io/zone: deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead"
            ]
        );
    }
}
