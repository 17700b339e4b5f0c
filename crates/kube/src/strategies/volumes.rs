//! PersistentVolumes and PersistentVolumeClaims (upstream: pkg/apis/core/v1/defaults.go,
//! pkg/apis/core/validation `ValidatePersistentVolume*` and `ValidatePersistentVolumeClaim*`,
//! pkg/registry/core/persistentvolume{,claim}/strategy.go, pkg/api/persistentvolume{,claim}).
//!
//! A volume is retained and a filesystem unless it says otherwise, and both kinds start
//! `Pending`. Exactly one volume source; the source never changes after creation, and a claim's
//! spec only grows its storage request once bound: both refusals embed upstream's diff of the
//! internal Go structs ([`super::godiff`]).

use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, NameValidator, go_json,
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    validate_label_selector,
};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Map, Value, json};

use super::godiff::go_diff;
use super::nodeselection::{
    has_invalid_label_value_in_terms, items, node_selector_term_warnings, str_of, strings,
    validate_node_selector,
};
use super::resources::{
    entries, quantity, round_up_resource_list, validate_basic_resource, validate_positive_quantity,
    validate_resource_quantity,
};
use super::volume_sources::{azure_disk, fc, flocker, host_path, nfs, no_backsteps, quobyte};
use super::{object_at, set_default};

pub struct PersistentVolumeStrategy;
pub struct PersistentVolumeClaimStrategy;

const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
const DEPRECATED_STORAGE_CLASS_MSG: &str =
    "deprecated since v1.8; use \"storageClassName\" attribute instead";
const MOUNT_OPTIONS: &str = "volume.beta.kubernetes.io/mount-options";
/// The sources that take mount options (pkg/volume/validation `checkMountOption`).
const MOUNTABLE_SOURCES: &[&str] = &[
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "iscsi",
    "cinder",
    "cephfs",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
];
const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

type SourceValidator = fn(&Value, &str, &FieldPath) -> Vec<FieldError>;

/// A persistent volume source: its JSON field, the path its "more than one" refusal names, the
/// path its own errors use (upstream's spellings, e.g. `persistentDisk`), and its validation.
struct Source {
    field: &'static str,
    forbidden_at: &'static str,
    validated_at: &'static str,
    validate: SourceValidator,
}

macro_rules! source {
    ($field:literal, $forbidden:literal, $validated:literal, $f:expr) => {
        Source {
            field: $field,
            forbidden_at: $forbidden,
            validated_at: $validated,
            validate: $f,
        }
    };
}

/// The sources in the order `ValidatePersistentVolumeSpec` checks them.
const SOURCES: &[Source] = &[
    source!("hostPath", "hostPath", "hostPath", |s, _, p| host_path(
        s, p
    )),
    source!(
        "gcePersistentDisk",
        "gcePersistentDisk",
        "persistentDisk",
        |s, _, p| disk(s, "pdName", p)
    ),
    source!(
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        |s, _, p| disk(s, "volumeID", p)
    ),
    source!("glusterfs", "glusterfs", "glusterfs", |s, _, p| glusterfs(
        s, p
    )),
    source!("flocker", "flocker", "flocker", |s, _, p| flocker(s, p)),
    source!("nfs", "nfs", "nfs", |s, _, p| nfs(s, p)),
    source!("rbd", "rbd", "rbd", |s, _, p| {
        required_fields(s, &[("monitors", "monitors"), ("image", "image")], p)
    }),
    source!("quobyte", "quobyte", "quobyte", |s, _, p| quobyte(s, p)),
    source!("cephfs", "cephFS", "cephfs", |s, _, p| {
        required_fields(s, &[("monitors", "monitors")], p)
    }),
    source!("iscsi", "iscsi", "iscsi", iscsi),
    source!("cinder", "cinder", "cinder", |s, _, p| cinder(s, p)),
    source!("fc", "fc", "fc", |s, _, p| fc(s, p)),
    source!("flexVolume", "", "flexVolume", |s, _, p| flex(s, p)),
    source!("azureFile", "azureFile", "azureFile", |s, _, p| azure_file(
        s, p
    )),
    source!(
        "vsphereVolume",
        "vsphereVolume",
        "vsphereVolume",
        |s, _, p| { required_fields(s, &[("volumePath", "volumePath")], p) }
    ),
    source!(
        "photonPersistentDisk",
        "photonPersistentDisk",
        "photonPersistentDisk",
        |s, _, p| required_fields(s, &[("pdID", "pdID")], p)
    ),
    source!(
        "portworxVolume",
        "portworxVolume",
        "portworxVolume",
        |s, _, p| required_fields(s, &[("volumeID", "volumeID")], p)
    ),
    source!("azureDisk", "azureDisk", "azureDisk", |s, _, p| azure_disk(
        s, p
    )),
    source!("scaleIO", "scaleIO", "scaleIO", |s, _, p| {
        required_fields(
            s,
            &[
                ("gateway", "gateway"),
                ("system", "system"),
                ("volumeName", "volumeName"),
            ],
            p,
        )
    }),
    source!("local", "local", "local", |s, _, p| local(s, p)),
    source!("storageos", "storageos", "storageos", |s, _, p| storageos(
        s, p
    )),
    source!("csi", "csi", "csi", |s, _, p| csi_source(s, p)),
];

/// The internal `core.PersistentVolumeSource` as Go lays it out: field name, JSON field, and the
/// Go type its value prints as (the versioned type, whose fields match the internal one).
const INTERNAL_SOURCE_FIELDS: &[(&str, &str, &str)] = &[
    (
        "GCEPersistentDisk",
        "gcePersistentDisk",
        "GCEPersistentDiskVolumeSource",
    ),
    (
        "AWSElasticBlockStore",
        "awsElasticBlockStore",
        "AWSElasticBlockStoreVolumeSource",
    ),
    ("HostPath", "hostPath", "HostPathVolumeSource"),
    ("Glusterfs", "glusterfs", "GlusterfsPersistentVolumeSource"),
    ("NFS", "nfs", "NFSVolumeSource"),
    ("RBD", "rbd", "RBDPersistentVolumeSource"),
    ("Quobyte", "quobyte", "QuobyteVolumeSource"),
    ("ISCSI", "iscsi", "ISCSIPersistentVolumeSource"),
    ("FlexVolume", "flexVolume", "FlexPersistentVolumeSource"),
    ("Cinder", "cinder", "CinderPersistentVolumeSource"),
    ("CephFS", "cephfs", "CephFSPersistentVolumeSource"),
    ("FC", "fc", "FCVolumeSource"),
    ("Flocker", "flocker", "FlockerVolumeSource"),
    ("AzureFile", "azureFile", "AzureFilePersistentVolumeSource"),
    (
        "VsphereVolume",
        "vsphereVolume",
        "VsphereVirtualDiskVolumeSource",
    ),
    ("AzureDisk", "azureDisk", "AzureDiskVolumeSource"),
    (
        "PhotonPersistentDisk",
        "photonPersistentDisk",
        "PhotonPersistentDiskVolumeSource",
    ),
    ("PortworxVolume", "portworxVolume", "PortworxVolumeSource"),
    ("ScaleIO", "scaleIO", "ScaleIOPersistentVolumeSource"),
    ("Local", "local", "LocalVolumeSource"),
    ("StorageOS", "storageos", "StorageOSPersistentVolumeSource"),
    ("CSI", "csi", "CSIPersistentVolumeSource"),
];

/// The deprecated in-tree plugins a PV warns about (`warningsForPersistentVolumeSpecAndMeta`).
const DEPRECATED_PLUGINS: &[(&str, &str, &str)] = &[
    (
        "cephfs",
        "cephfs",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
    (
        "photonPersistentDisk",
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    (
        "scaleIO",
        "scaleIO",
        "deprecated in v1.16, non-functional in v1.22+",
    ),
    (
        "storageos",
        "storageOS",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "glusterfs",
        "glusterfs",
        "deprecated in v1.25, non-functional in v1.26+",
    ),
    (
        "rbd",
        "rbd",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
];

/// Sets `field` of an object when it is missing or null: upstream's defaults of pointer fields,
/// which leave an empty string alone (validation refuses it where it must).
pub(super) fn default_unset(obj: &mut Value, field: &str, value: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(field).is_none_or(Value::is_null)
    {
        m.insert(field.into(), value);
    }
}

fn present(obj: &Value, field: &str) -> Option<Value> {
    obj.get(field).filter(|v| !v.is_null()).cloned()
}

fn non_empty(obj: &Value, field: &str) -> bool {
    match obj.get(field) {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    }
}

/// Fields that must not be empty, each an error at its own path.
fn required_fields(src: &Value, fields: &[(&str, &str)], path: &FieldPath) -> Vec<FieldError> {
    fields
        .iter()
        .filter(|(field, _)| !non_empty(src, field))
        .map(|(_, at)| FieldError::required(&path.child(at), ""))
        .collect()
}

/// GCE and AWS disks: an id, and a partition within 0..255.
fn disk(src: &Value, id: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(src, &[(id, id)], path);
    let partition = src.get("partition").and_then(Value::as_i64).unwrap_or(0);
    if !(0..=255).contains(&partition) {
        errs.push(FieldError::invalid(
            &path.child("partition"),
            partition,
            inclusive_range_error(1, 255),
        ));
    }
    errs
}

fn glusterfs(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(src, &[("endpoints", "endpoints"), ("path", "path")], path);
    if let Some(Value::String(ns)) = src.get("endpointsNamespace") {
        let at = path.child("endpointsNamespace");
        if ns.is_empty() {
            errs.push(FieldError::invalid(
                &at,
                "",
                "if the endpointnamespace is set, it must be a valid namespace name",
            ));
        } else {
            for m in is_dns1123_label(ns) {
                errs.push(FieldError::invalid(&at, ns.as_str(), m));
            }
        }
    }
    errs
}

/// `iqn\.\d{4}-\d{2}\.([[:alnum:]-.]+)(:[^,;*&$|\s]+)$` matched at the start of `s`.
fn iqn_at(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("iqn.") else {
        return false;
    };
    let b = rest.as_bytes();
    if b.len() < 9
        || !b[..4].iter().all(u8::is_ascii_digit)
        || b[4] != b'-'
        || !b[5..7].iter().all(u8::is_ascii_digit)
        || b[7] != b'.'
    {
        return false;
    }
    let tail = &rest[8..];
    // The domain part cannot hold ':', so the first colon ends it.
    let Some(colon) = tail.find(':') else {
        return false;
    };
    colon > 0
        && tail[..colon]
            .bytes()
            .all(|d| d.is_ascii_alphanumeric() || d == b'-' || d == b'.')
        && tail.len() > colon + 1
        && tail[colon + 1..]
            .chars()
            .all(|d| !matches!(d, ',' | ';' | '*' | '&' | '$' | '|') && !d.is_ascii_whitespace())
}

/// `^<prefix>.[[:alnum:]]{n}$`: the prefix, any one character but a newline, `n` ASCII
/// letters or digits.
fn prefixed_alnum(name: &str, prefix: &str, n: usize) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let mut chars = rest.chars();
    let any = chars.next().is_some_and(|c| c != '\n');
    let tail = chars.as_str();
    any && tail.len() == n && tail.bytes().all(|c| c.is_ascii_alphanumeric())
}

/// An iSCSI qualified name (`iqn.`, `eui.` or `naa.` forms). The iqn pattern is not anchored
/// at its start, so it may match anywhere in the name.
pub(crate) fn iscsi_name_ok(name: &str) -> bool {
    if name.starts_with("iqn") {
        return name.match_indices("iqn.").any(|(i, _)| iqn_at(&name[i..]));
    }
    if name.starts_with("eui") {
        return prefixed_alnum(name, "eui", 16);
    }
    if name.starts_with("naa") {
        return prefixed_alnum(name, "naa", 32);
    }
    false
}

fn iscsi_name(name: &str, path: &FieldPath) -> Option<FieldError> {
    let known = ["iqn", "eui", "naa"].iter().any(|p| name.starts_with(p));
    if !known || !iscsi_name_ok(name) {
        Some(FieldError::invalid(path, name, "must be valid format"))
    } else {
        None
    }
}

fn iscsi(src: &Value, pv_name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(src, &[("targetPortal", "targetPortal")], path);
    let portal = str_of(src, "targetPortal");
    let initiator = src.get("initiatorName").and_then(Value::as_str);
    if initiator.is_some() && pv_name.len() + 1 + portal.len() > 64 {
        errs.push(FieldError::invalid(
            &path.child("targetportal"),
            portal,
            "Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.",
        ));
    }
    let iqn = str_of(src, "iqn");
    if iqn.is_empty() {
        errs.push(FieldError::required(&path.child("iqn"), ""));
    } else {
        errs.extend(iscsi_name(iqn, &path.child("iqn")));
    }
    let lun = src.get("lun").and_then(Value::as_i64).unwrap_or(0);
    if !(0..=255).contains(&lun) {
        errs.push(FieldError::invalid(
            &path.child("lun"),
            lun,
            inclusive_range_error(0, 255),
        ));
    }
    let chap = |f: &str| src.get(f).and_then(Value::as_bool).unwrap_or(false);
    let secret = src.get("secretRef").filter(|s| !s.is_null());
    if (chap("chapAuthDiscovery") || chap("chapAuthSession")) && secret.is_none() {
        errs.push(FieldError::required(&path.child("secretRef"), ""));
    }
    if let Some(secret) = secret
        && str_of(secret, "name").is_empty()
    {
        errs.push(FieldError::required(
            &path.child("secretRef").child("name"),
            "",
        ));
    }
    if let Some(initiator) = initiator {
        errs.extend(iscsi_name(initiator, &path.child("initiatorname")));
    }
    errs
}

fn secret_ref_required(src: &Value, with_namespace: bool, path: &FieldPath) -> Vec<FieldError> {
    let Some(secret) = src.get("secretRef").filter(|s| !s.is_null()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if str_of(secret, "name").is_empty() {
        errs.push(FieldError::required(
            &path.child("secretRef").child("name"),
            "",
        ));
    }
    if with_namespace && str_of(secret, "namespace").is_empty() {
        errs.push(FieldError::required(
            &path.child("secretRef").child("namespace"),
            "",
        ));
    }
    errs
}

fn cinder(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(src, &[("volumeID", "volumeID")], path);
    errs.extend(secret_ref_required(src, true, path));
    errs
}

fn flex(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(src, &[("driver", "driver")], path);
    if let Some(options) = src.get("options").and_then(Value::as_object) {
        for k in options.keys() {
            let namespace = k.split_once('/').map_or(k.as_str(), |(ns, _)| ns);
            let normalized = format!(".{}", namespace.to_lowercase());
            if normalized.ends_with(".kubernetes.io") || normalized.ends_with(".k8s.io") {
                errs.push(FieldError::invalid(
                    &path.child("options").key(k),
                    k.as_str(),
                    "kubernetes.io and k8s.io namespaces are reserved",
                ));
            }
        }
    }
    errs
}

fn azure_file(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = required_fields(
        src,
        &[("secretName", "secretName"), ("shareName", "shareName")],
        path,
    );
    if let Some(Value::String(ns)) = src.get("secretNamespace")
        && ns.is_empty()
    {
        errs.push(FieldError::required(&path.child("secretNamespace"), ""));
    }
    errs
}

fn local(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let p = str_of(src, "path");
    if p.is_empty() {
        return vec![FieldError::required(&path.child("path"), "")];
    }
    no_backsteps(p, &path.child("path"))
}

fn storageos(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(src, "volumeName");
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("volumeName"), ""));
    } else {
        for m in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&path.child("volumeName"), name, m));
        }
    }
    let ns = str_of(src, "volumeNamespace");
    if !ns.is_empty() {
        for m in is_dns1123_label(ns) {
            errs.push(FieldError::invalid(&path.child("volumeNamespace"), ns, m));
        }
    }
    errs.extend(secret_ref_required(src, true, path));
    errs
}

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain once lowercased.
pub fn validate_csi_driver_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, "", 63));
    }
    for m in is_dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(path, name, m));
    }
    errs
}

/// `validatePVSecretReference`.
fn pv_secret_reference(secret: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(secret, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        for m in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid(&path.child("name"), name, m));
        }
    }
    let ns = str_of(secret, "namespace");
    if ns.is_empty() {
        errs.push(FieldError::required(&path.child("namespace"), ""));
    } else {
        for m in is_dns1123_label(ns) {
            errs.push(FieldError::invalid(&path.child("namespace"), ns, m));
        }
    }
    errs
}

fn csi_source(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_csi_driver_name(str_of(src, "driver"), &path.child("driver"));
    errs.extend(required_fields(
        src,
        &[("volumeHandle", "volumeHandle")],
        path,
    ));
    for field in [
        "controllerPublishSecretRef",
        "controllerExpandSecretRef",
        "nodePublishSecretRef",
        "nodeExpandSecretRef",
    ] {
        if let Some(secret) = src.get(field).filter(|s| !s.is_null()) {
            errs.extend(pv_secret_reference(secret, &path.child(field)));
        }
    }
    errs
}

/// Access modes of a PV or claim: supported, and `ReadWriteOncePod` alone.
fn access_modes(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (mut rwop, mut others) = (false, false);
    for mode in strings(spec.get("accessModes")) {
        if !ACCESS_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(
                &path.child("accessModes"),
                mode,
                ACCESS_MODES,
            ));
        }
        if mode == "ReadWriteOncePod" {
            rwop = true;
        } else if ACCESS_MODES.contains(&mode) {
            others = true;
        }
    }
    if rwop && others {
        errs.push(FieldError::forbidden(
            &path.child("accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errs
}

fn class_name(value: &str, path: &FieldPath) -> Vec<FieldError> {
    NameValidator::Dns1123Subdomain
        .validate(value, false)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `ValidatePersistentVolumeSpec` for a PersistentVolume, or (`inline`) for a VolumeAttachment's
/// inline volume spec, which must be a CSI volume without capacity, claim, node affinity or
/// class, retained, and a filesystem.
fn validate_pv_spec(
    spec: &Value,
    pv_name: &str,
    allow_invalid_affinity_values: bool,
    inline: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    const INLINE: &str = "may not be specified in the context of inline volumes";
    let mut errs = Vec::new();
    if inline {
        if present(spec, "claimRef").is_some() {
            errs.push(FieldError::forbidden(&path.child("claimRef"), INLINE));
        }
        if non_empty(spec, "capacity") {
            errs.push(FieldError::forbidden(&path.child("capacity"), INLINE));
        }
        if present(spec, "csi").is_none() {
            errs.push(FieldError::required(
                &path.child("csi"),
                "has to be specified in the context of inline volumes",
            ));
        }
    }
    if !non_empty(spec, "accessModes") {
        errs.push(FieldError::required(&path.child("accessModes"), ""));
    }
    errs.extend(access_modes(spec, path));
    if !inline {
        errs.extend(pv_capacity(spec, path));
    }
    let policy = str_of(spec, "persistentVolumeReclaimPolicy");
    if inline && !policy.is_empty() && policy != "Retain" {
        errs.push(FieldError::forbidden(
            &path.child("persistentVolumeReclaimPolicy"),
            "may only be Retain in the context of inline volumes",
        ));
    } else if !inline && !policy.is_empty() && !RECLAIM_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            &path.child("persistentVolumeReclaimPolicy"),
            policy,
            RECLAIM_POLICIES,
        ));
    }
    let mut affinity_set = false;
    if let Some(affinity) = spec.get("nodeAffinity").filter(|a| !a.is_null()) {
        if inline {
            errs.push(FieldError::forbidden(&path.child("nodeAffinity"), INLINE));
        } else {
            affinity_set = true;
            let at = path.child("nodeAffinity");
            match affinity.get("required").filter(|r| !r.is_null()) {
                Some(required) => errs.extend(validate_node_selector(
                    required,
                    allow_invalid_affinity_values,
                    &at.child("required"),
                )),
                None => errs.push(FieldError::required(
                    &at.child("required"),
                    "must specify required node constraints",
                )),
            }
        }
    }
    errs.extend(pv_sources(spec, pv_name, affinity_set, policy, path));
    let class = str_of(spec, "storageClassName");
    if !class.is_empty() {
        if inline {
            errs.push(FieldError::forbidden(
                &path.child("storageClassName"),
                INLINE,
            ));
        } else {
            errs.extend(class_name(class, &path.child("storageClassName")));
        }
    }
    if let Some(Value::String(mode)) = spec.get("volumeMode") {
        if inline && mode != "Filesystem" {
            errs.push(FieldError::forbidden(
                &path.child("volumeMode"),
                "may not specify volumeMode other than Filesystem in the context of inline volumes",
            ));
        } else if !inline && !VOLUME_MODES.contains(&mode.as_str()) {
            errs.push(FieldError::not_supported(
                &path.child("volumeMode"),
                mode.as_str(),
                VOLUME_MODES,
            ));
        }
    }
    if let Some(Value::String(vac)) = spec.get("volumeAttributesClassName") {
        let at = path.child("volumeAttributesClassName");
        if vac.is_empty() {
            errs.push(FieldError::required(&at, "an empty string is disallowed"));
        } else {
            errs.extend(class_name(vac, &at));
        }
        if spec.get("csi").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                &path.child("csi"),
                "has to be specified when using volumeAttributesClassName",
            ));
        }
    }
    errs
}

/// A volume's capacity: storage, and nothing else.
fn pv_capacity(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let capacity = spec.get("capacity").filter(|c| !c.is_null());
    let cap_map = capacity.and_then(Value::as_object);
    let cap_path = path.child("capacity");
    if cap_map.is_none_or(Map::is_empty) {
        errs.push(FieldError::required(&cap_path, ""));
    }
    if cap_map.is_none_or(|m| !m.contains_key("storage") || m.len() > 1) {
        // Go's JSON of the resource list: each quantity in its canonical form.
        let rendered = capacity.map_or_else(
            || "null".to_string(),
            |c| match c.as_object() {
                Some(m) => go_json(&Value::Object(
                    m.iter()
                        .map(|(k, v)| (k.clone(), json!(quantity(v).canonical())))
                        .collect(),
                )),
                None => go_json(c),
            },
        );
        errs.push(
            FieldError::not_supported(&cap_path, Value::Null, &["storage"])
                .with_rendered_value(rendered),
        );
    }
    for (name, q) in entries(capacity) {
        errs.extend(validate_basic_resource(&q, &cap_path.key(name)));
        errs.extend(validate_positive_quantity(&q, &cap_path.key(name)));
    }
    errs
}

/// Exactly one volume source, each checked by its own rules; a hostPath of `/` is not recycled.
fn pv_sources(
    spec: &Value,
    pv_name: &str,
    affinity_set: bool,
    policy: &str,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut sources = 0;
    for source in SOURCES {
        let Some(src) = spec.get(source.field).filter(|s| !s.is_null()) else {
            continue;
        };
        if sources > 0 && !source.forbidden_at.is_empty() {
            errs.push(FieldError::forbidden(
                &path.child(source.forbidden_at),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        sources += 1;
        errs.extend((source.validate)(
            src,
            pv_name,
            &path.child(source.validated_at),
        ));
        if source.field == "local" && !affinity_set {
            errs.push(FieldError::required(
                &path.child("nodeAffinity"),
                "Local volume requires node affinity",
            ));
        }
    }
    if sources == 0 {
        errs.push(FieldError::required(path, "must specify a volume type"));
    }
    if let Some(hp) = spec.get("hostPath").filter(|h| !h.is_null())
        && clean_path(str_of(hp, "path")) == "/"
        && policy == "Recycle"
    {
        errs.push(FieldError::forbidden(
            &path.child("persistentVolumeReclaimPolicy"),
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    errs
}

/// A VolumeAttachment's inline volume spec: upstream's `ValidatePersistentVolumeSpec` in the
/// context of inline volumes (no volume name).
pub(super) fn validate_inline_pv_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    validate_pv_spec(spec, "", false, true, path)
}

/// The defaults of a VolumeAttachment's inline volume spec (its generated defaulters): the
/// capacity rounded and the sources' defaults, but none of a PersistentVolume's own.
pub(super) fn default_inline_pv_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    round_up_resource_list(spec.get_mut("capacity"));
    default_sources(spec);
}

/// Go's `path.Clean` for the one question asked of it: is this the root?
fn clean_path(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// The internal `core.PersistentVolumeSource` of a spec as Go's compact JSON.
fn internal_source_json(spec: &Value) -> String {
    let mut out = String::from("{");
    for (i, (go_name, field, ty)) in INTERNAL_SOURCE_FIELDS.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("\"{go_name}\":"));
        match spec.get(*field).filter(|v| !v.is_null()) {
            Some(v) => out.push_str(
                &go_struct_json(&format!("core.v1.{ty}"), v, GoStyle::Internal)
                    .unwrap_or_else(|| go_json(v)),
            ),
            None => out.push_str("null"),
        }
    }
    out.push('}');
    out
}

/// The source of a spec: the fields of [`SOURCES`].
fn source_of(spec: &Value) -> Map<String, Value> {
    SOURCES
        .iter()
        .filter_map(|s| Some((s.field.to_string(), present(spec, s.field)?)))
        .collect()
}

/// A node affinity as upstream compares it on update: beta topology keys moved to their GA
/// names count as unchanged (`validatePvNodeAffinity`).
fn affinity_with_ga_keys(new: &Value, old: &Value) -> Value {
    const BETA_TO_GA: &[(&str, &str)] = &[
        (
            "failure-domain.beta.kubernetes.io/zone",
            "topology.kubernetes.io/zone",
        ),
        (
            "failure-domain.beta.kubernetes.io/region",
            "topology.kubernetes.io/region",
        ),
        ("beta.kubernetes.io/os", "kubernetes.io/os"),
        ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
        (
            "beta.kubernetes.io/instance-type",
            "node.kubernetes.io/instance-type",
        ),
    ];
    let mut old = old.clone();
    let new_terms = items(new.pointer("/required/nodeSelectorTerms"));
    if let Some(terms) = old
        .pointer_mut("/required/nodeSelectorTerms")
        .and_then(Value::as_array_mut)
    {
        // Every NodeSelectorRequirement, of matchExpressions and matchFields alike.
        for (t, term) in terms.iter_mut().enumerate() {
            for list in ["matchExpressions", "matchFields"] {
                let Some(exprs) = term.get_mut(list).and_then(Value::as_array_mut) else {
                    continue;
                };
                for (e, expr) in exprs.iter_mut().enumerate() {
                    let new_key = new_terms
                        .get(t)
                        .map(|nt| items(nt.get(list)))
                        .and_then(|ne| ne.get(e))
                        .map(|ne| str_of(ne, "key"))
                        .unwrap_or("");
                    let old_key = str_of(expr, "key");
                    if BETA_TO_GA
                        .iter()
                        .any(|(beta, ga)| *beta == old_key && *ga == new_key)
                    {
                        expr["key"] = Value::from(new_key);
                    }
                }
            }
        }
    }
    old
}

/// Sources' defaults (`SetDefaults_HostPathVolumeSource`, `..._ISCSIPersistentVolumeSource`,
/// `..._RBDPersistentVolumeSource`, `..._AzureDiskVolumeSource`, `..._ScaleIOPersistentVolumeSource`).
fn default_sources(spec: &mut Value) {
    if let Some(hp) = spec.get_mut("hostPath").filter(|v| v.is_object())
        && hp.get("type").is_none_or(Value::is_null)
    {
        hp["type"] = json!("");
    }
    if let Some(iscsi) = spec.get_mut("iscsi").filter(|v| v.is_object()) {
        set_default(iscsi, "iscsiInterface", json!("default"));
    }
    if let Some(rbd) = spec.get_mut("rbd").filter(|v| v.is_object()) {
        set_default(rbd, "pool", json!("rbd"));
        set_default(rbd, "user", json!("admin"));
        set_default(rbd, "keyring", json!("/etc/ceph/keyring"));
    }
    if let Some(disk) = spec.get_mut("azureDisk").and_then(Value::as_object_mut) {
        for (field, value) in [
            ("cachingMode", json!("ReadWrite")),
            ("kind", json!("Shared")),
            ("fsType", json!("ext4")),
            ("readOnly", json!(false)),
        ] {
            if disk.get(field).is_none_or(Value::is_null) {
                disk.insert(field.into(), value);
            }
        }
    }
    if let Some(sio) = spec.get_mut("scaleIO").filter(|v| v.is_object()) {
        set_default(sio, "storageMode", json!("ThinProvisioned"));
        set_default(sio, "fsType", json!("xfs"));
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

impl Strategy for PersistentVolumeStrategy {
    fn default(&self, obj: &mut Value) {
        if !obj.is_object() {
            return;
        }
        let spec = object_at(obj, "spec");
        set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        default_unset(spec, "volumeMode", json!("Filesystem"));
        round_up_resource_list(spec.get_mut("capacity"));
        default_sources(spec);
        set_default(object_at(obj, "status"), "phase", json!("Pending"));
    }

    /// A new volume is `Pending` since now, whatever status the client sent.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": now()});
    }

    /// Status writes move `lastPhaseTransitionTime` with the phase (upstream's status strategy;
    /// for spec writes the store keeps the stored status, so the phase never moves there).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let old_phase = old.pointer("/status/phase").cloned();
        let old_time = old.pointer("/status/lastPhaseTransitionTime").cloned();
        let Some(status) = new.get_mut("status").filter(|s| s.is_object()) else {
            return;
        };
        let new_time = status
            .get("lastPhaseTransitionTime")
            .filter(|t| !t.is_null())
            .cloned();
        if status.get("phase").cloned() == old_phase {
            if new_time.is_none()
                && let Some(t) = old_time
            {
                status["lastPhaseTransitionTime"] = t;
            }
        } else if new_time.is_none() || new_time == old_time {
            status["lastPhaseTransitionTime"] = json!(now());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let mut errs = validate_pv_spec(spec, name, false, false, &FieldPath::new("spec"));
        errs.extend(mount_option_errors(obj));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let name = new
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let null = Value::Null;
        let new_spec = new.get("spec").unwrap_or(&null);
        let old_spec = old.get("spec").unwrap_or(&null);
        let allow_invalid = has_invalid_label_value_in_terms(items(
            old_spec.pointer("/nodeAffinity/required/nodeSelectorTerms"),
        ));
        // The strategy validates the volume, then its mount options, then
        // `ValidatePersistentVolumeUpdate` validates the volume again before the update rules.
        let spec_errs = validate_pv_spec(
            new_spec,
            name,
            allow_invalid,
            false,
            &FieldPath::new("spec"),
        );
        let mut errs = spec_errs.clone();
        errs.extend(mount_option_errors(new));
        errs.extend(spec_errs);
        // A controllerExpandSecretRef may be added to a CSI volume that had none.
        let mut new_source = Value::Object(source_of(new_spec));
        let old_source = Value::Object(source_of(old_spec));
        let old_has_ref = old_source
            .pointer("/csi/controllerExpandSecretRef")
            .is_some_and(|r| !r.is_null());
        if old_source.get("csi").is_some()
            && !old_has_ref
            && let Some(csi) = new_source.get_mut("csi").and_then(Value::as_object_mut)
        {
            csi.remove("controllerExpandSecretRef");
        }
        if new_source != old_source {
            let diff = go_diff(
                &internal_source_json(&old_source),
                &internal_source_json(&new_source),
            );
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("persistentvolumesource"),
                format!("spec.persistentvolumesource is immutable after creation\n{diff}"),
            ));
        }
        let mode = |s: &Value| s.get("volumeMode").cloned().unwrap_or(Value::Null);
        if mode(new_spec) != mode(old_spec) {
            errs.push(FieldError::invalid(
                &FieldPath::new("volumeMode"),
                mode(new_spec),
                "field is immutable",
            ));
        }
        if let Some(old_affinity) = old_spec.get("nodeAffinity").filter(|a| !a.is_null()) {
            let new_affinity = new_spec.get("nodeAffinity").unwrap_or(&null);
            if *new_affinity != affinity_with_ga_keys(new_affinity, old_affinity) {
                let mut err = FieldError::invalid(
                    &FieldPath::new("nodeAffinity"),
                    new_affinity.clone(),
                    "field is immutable, except for updating from beta label to GA",
                );
                if let Some(r) = go_struct_json(
                    "core.v1.VolumeNodeAffinity",
                    new_affinity,
                    GoStyle::Internal,
                ) {
                    err = err.with_rendered_value(r);
                }
                errs.push(err);
            }
        }
        if old_spec
            .get("volumeAttributesClassName")
            .is_some_and(|v| !v.is_null())
            && new_spec
                .get("volumeAttributesClassName")
                .is_none_or(Value::is_null)
        {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("volumeAttributesClassName"),
                "update from non-nil value to nil is forbidden",
            ));
        }
        errs
    }

    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        pv_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        pv_warnings(new)
    }
}

/// `checkMountOption` (pkg/volume/validation): mount options by annotation only for the
/// sources that take them.
fn mount_option_errors(pv: &Value) -> Vec<FieldError> {
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    if MOUNTABLE_SOURCES.iter().any(|f| present(spec, f).is_some())
        || annotation_present(pv, MOUNT_OPTIONS).is_none()
    {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        &FieldPath::new("metadata")
            .child("annotations")
            .child(MOUNT_OPTIONS),
        "may not specify mount options for this volume type",
    )]
}

fn annotation_present<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .filter(|v| !v.is_null())
}

/// `GetWarningsForPersistentVolume`.
fn pv_warnings(pv: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (key, msg) in [
        (BETA_STORAGE_CLASS, DEPRECATED_STORAGE_CLASS_MSG),
        (
            MOUNT_OPTIONS,
            "deprecated since v1.31; use \"mountOptions\" attribute instead",
        ),
    ] {
        if annotation_present(pv, key).is_some() {
            out.push(format!("metadata.annotations[{key}]: {msg}"));
        }
    }
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    if str_of(spec, "persistentVolumeReclaimPolicy") == "Recycle" {
        out.push("spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.".into());
    }
    let terms_path = FieldPath::new("spec")
        .child("nodeAffinity")
        .child("required")
        .child("nodeSelectorTerms");
    for (i, term) in items(spec.pointer("/nodeAffinity/required/nodeSelectorTerms"))
        .iter()
        .enumerate()
    {
        out.extend(node_selector_term_warnings(term, &terms_path.index(i)));
    }
    for (field, at, msg) in DEPRECATED_PLUGINS {
        if spec.get(*field).is_some_and(|s| !s.is_null()) {
            out.push(format!("spec.{at}: {msg}"));
        }
    }
    out
}

/// `validateDataSource` / `validateDataSourceRef`.
fn data_source(
    src: &Value,
    is_ref: bool,
    allow_invalid_api_group: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if str_of(src, "name").is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let kind = str_of(src, "kind");
    if kind.is_empty() {
        errs.push(FieldError::required(&path.child("kind"), ""));
    }
    let group = str_of(src, "apiGroup");
    if group.is_empty() && kind != "PersistentVolumeClaim" {
        errs.push(FieldError::invalid(
            path,
            kind,
            "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ));
    }
    if !group.is_empty() && !allow_invalid_api_group {
        for m in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid(&path.child("apiGroup"), group, m));
        }
    }
    if is_ref {
        let ns = str_of(src, "namespace");
        if !ns.is_empty() {
            for m in NameValidator::Dns1123Label.validate(ns, false) {
                errs.push(FieldError::invalid(&path.child("namespace"), ns, m));
            }
        }
    }
    errs
}

/// `ValidatePersistentVolumeClaimSpec`.
pub fn validate_pvc_spec(
    spec: &Value,
    allow_invalid_selector: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    validate_pvc_spec_with(spec, allow_invalid_selector, false, path)
}

/// `ValidatePersistentVolumeClaimSpec` with the options a claim's update may relax: label
/// values of the selector, and the API groups of data sources (`AllowInvalidAPIGroupInDataSourceOrRef`).
fn validate_pvc_spec_with(
    spec: &Value,
    allow_invalid_selector: bool,
    allow_invalid_api_group: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !non_empty(spec, "accessModes") {
        errs.push(FieldError::required(
            &path.child("accessModes"),
            "at least 1 access mode is required",
        ));
    }
    if let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) {
        errs.extend(validate_label_selector(
            Some(selector),
            LabelSelectorValidationOptions {
                allow_invalid_label_value: allow_invalid_selector,
                ..Default::default()
            },
            &path.child("selector"),
        ));
    }
    errs.extend(access_modes(spec, path));
    let storage_path = path.child("resources").key("storage");
    match spec.pointer("/resources/requests/storage") {
        None => errs.push(FieldError::required(&storage_path, "")),
        Some(v) => {
            let q = quantity(v);
            let positive = validate_positive_quantity(&q, &storage_path);
            if positive.is_empty() {
                errs.extend(validate_resource_quantity("storage", &q, &storage_path));
            } else {
                errs.extend(positive);
            }
        }
    }
    if let Some(Value::String(class)) = spec.get("storageClassName")
        && !class.is_empty()
    {
        errs.extend(class_name(class, &path.child("storageClassName")));
    }
    if let Some(Value::String(mode)) = spec.get("volumeMode")
        && !VOLUME_MODES.contains(&mode.as_str())
    {
        errs.push(FieldError::not_supported(
            &path.child("volumeMode"),
            mode.as_str(),
            VOLUME_MODES,
        ));
    }
    let ds = spec.get("dataSource").filter(|d| !d.is_null());
    let dsr = spec.get("dataSourceRef").filter(|d| !d.is_null());
    if let Some(ds) = ds {
        errs.extend(data_source(
            ds,
            false,
            allow_invalid_api_group,
            &path.child("dataSource"),
        ));
    }
    if let Some(dsr) = dsr {
        errs.extend(data_source(
            dsr,
            true,
            allow_invalid_api_group,
            &path.child("dataSourceRef"),
        ));
    }
    // The bad value is a *field.Path, which Go's encoder prints as `{}`.
    let ref_namespace = dsr.map(|r| str_of(r, "namespace")).unwrap_or("");
    if !ref_namespace.is_empty() {
        if ds.is_some() {
            errs.push(
                FieldError::invalid(
                    path,
                    Value::Null,
                    "may not be specified when dataSourceRef.namespace is specified",
                )
                .with_rendered_value("{}"),
            );
        }
    } else if let (Some(ds), Some(dsr)) = (ds, dsr) {
        let same = ds.get("apiGroup").filter(|g| !g.is_null())
            == dsr.get("apiGroup").filter(|g| !g.is_null())
            && str_of(ds, "kind") == str_of(dsr, "kind")
            && str_of(ds, "name") == str_of(dsr, "name");
        if !same {
            errs.push(
                FieldError::invalid(path, Value::Null, "must match dataSourceRef")
                    .with_rendered_value("{}"),
            );
        }
    }
    if let Some(Value::String(vac)) = spec.get("volumeAttributesClassName")
        && !vac.is_empty()
    {
        errs.extend(class_name(vac, &path.child("volumeAttributesClassName")));
    }
    errs
}

/// `EnforceDataSourceBackwardsCompatibility` then `NormalizeDataSources`: a dataSource other
/// than a claim or snapshot is dropped when no dataSourceRef asks for it; then whichever of the
/// two is missing mirrors the other.
fn normalize_data_sources(spec: &mut Value, old_spec: Option<&Value>) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    // `DropDisabledFields`: CrossNamespaceVolumeDataSource is off in v1.36, so a reference into
    // another namespace goes unless the old claim already had a reference.
    let old_ref = old_spec.is_some_and(|o| o.get("dataSourceRef").is_some_and(|v| !v.is_null()));
    let cross_namespace = spec
        .get("dataSourceRef")
        .is_some_and(|r| !str_of(r, "namespace").is_empty());
    if cross_namespace && !old_ref {
        spec.remove("dataSourceRef");
    }
    let set = |m: &Map<String, Value>, f: &str| m.get(f).is_some_and(|v| !v.is_null());
    let old_in_use = old_spec.is_some_and(|o| {
        o.get("dataSource").is_some_and(|v| !v.is_null())
            || o.get("dataSourceRef").is_some_and(|v| !v.is_null())
    });
    if !old_in_use && !set(spec, "dataSourceRef") {
        let keep = spec.get("dataSource").is_some_and(|ds| {
            let group = str_of(ds, "apiGroup");
            let kind = str_of(ds, "kind");
            (kind == "PersistentVolumeClaim" && group.is_empty())
                || (kind == "VolumeSnapshot" && group == "snapshot.storage.k8s.io")
        });
        if !keep {
            spec.remove("dataSource");
        }
    }
    let pick = |src: &Value| {
        let mut out = Map::new();
        if let Some(g) = src.get("apiGroup").filter(|g| !g.is_null()) {
            out.insert("apiGroup".into(), g.clone());
        }
        out.insert("kind".into(), json!(str_of(src, "kind")));
        out.insert("name".into(), json!(str_of(src, "name")));
        Value::Object(out)
    };
    match (set(spec, "dataSource"), set(spec, "dataSourceRef")) {
        (true, false) => {
            let v = pick(&spec["dataSource"]);
            spec.insert("dataSourceRef".into(), v);
        }
        (false, true) if str_of(&spec["dataSourceRef"], "namespace").is_empty() => {
            let v = pick(&spec["dataSourceRef"]);
            spec.insert("dataSource".into(), v);
        }
        _ => {}
    }
}

fn pvc_spec_json(spec: &Value) -> String {
    go_struct_json("core.v1.PersistentVolumeClaimSpec", spec, GoStyle::Internal)
        .unwrap_or_else(|| go_json(spec))
}

impl Strategy for PersistentVolumeClaimStrategy {
    fn default(&self, obj: &mut Value) {
        if !obj.is_object() {
            return;
        }
        let spec = object_at(obj, "spec");
        default_unset(spec, "volumeMode", json!("Filesystem"));
        round_up_resource_list(spec.pointer_mut("/resources/limits"));
        round_up_resource_list(spec.pointer_mut("/resources/requests"));
        let status = object_at(obj, "status");
        set_default(status, "phase", json!("Pending"));
        round_up_resource_list(status.get_mut("capacity"));
        round_up_resource_list(status.get_mut("allocatedResources"));
    }

    /// A new claim is `Pending`, whatever status the client sent; its data sources mirror
    /// each other.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending"});
        if let Some(spec) = obj.get_mut("spec") {
            normalize_data_sources(spec, None);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let old_spec = old.get("spec");
        if let Some(spec) = new.get_mut("spec") {
            normalize_data_sources(spec, old_spec);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        validate_pvc_spec(spec, false, &FieldPath::new("spec"))
    }

    /// `ValidatePersistentVolumeClaimUpdate`: the claim's rules (relaxed where the old claim
    /// already broke them), then the update rules.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let null = Value::Null;
        let new_spec = new.get("spec").unwrap_or(&null);
        let old_spec = old.get("spec").unwrap_or(&null);
        let allow_invalid_selector = old_spec.get("selector").is_some_and(|s| {
            !validate_label_selector(
                Some(s),
                LabelSelectorValidationOptions::default(),
                &FieldPath::nil(),
            )
            .is_empty()
        });
        let allow_invalid_api_group = ["dataSource", "dataSourceRef"].iter().any(|f| {
            old_spec
                .get(*f)
                .and_then(|d| d.get("apiGroup"))
                .is_some_and(|g| !g.is_null())
        });
        let mut errs = validate_pvc_spec_with(
            new_spec,
            allow_invalid_selector,
            allow_invalid_api_group,
            &FieldPath::new("spec"),
        );
        errs.extend(pvc_update_rules(new, old));
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if !new.get("spec").is_some_and(|s| non_empty(s, "accessModes")) {
            errs.push(FieldError::required(
                &FieldPath::new("Spec").child("accessModes"),
                "",
            ));
        }
        let status = new.get("status").unwrap_or(&Value::Null);
        let cap_path = FieldPath::new("status").child("capacity");
        for (name, q) in entries(status.get("capacity")) {
            errs.extend(validate_basic_resource(&q, &cap_path.key(name)));
        }
        const RESIZE_STATUSES: &[&str] = &[
            "ControllerResizeInProgress",
            "ControllerResizeInfeasible",
            "NodeResizeInProgress",
            "NodeResizeInfeasible",
            "NodeResizePending",
        ];
        let resize_path = FieldPath::new("status").child("allocatedResourceStatuses");
        if let Some(statuses) = status
            .get("allocatedResourceStatuses")
            .and_then(Value::as_object)
        {
            for (k, v) in statuses {
                errs.extend(pvc_resource_key(k, &resize_path));
                if !RESIZE_STATUSES.contains(&v.as_str().unwrap_or("")) {
                    errs.push(FieldError::not_supported(
                        &resize_path,
                        k.as_str(),
                        RESIZE_STATUSES,
                    ));
                }
            }
        }
        let alloc_path = FieldPath::new("status").child("allocatedResources");
        for (name, q) in entries(status.get("allocatedResources")) {
            let key_errs = pvc_resource_key(name, &alloc_path);
            if !key_errs.is_empty() {
                errs.extend(key_errs);
                continue;
            }
            let basic = validate_basic_resource(&q, &alloc_path.key(name));
            if basic.is_empty() {
                errs.extend(validate_resource_quantity(
                    "storage",
                    &q,
                    &alloc_path.key(name),
                ));
            } else {
                errs.extend(basic);
            }
        }
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        pvc_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        pvc_warnings(new)
    }
}

/// `validatePersistentVolumeClaimResourceKey`: a qualified name; native names only `storage`.
fn pvc_resource_key(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    if super::resources::is_native(name) && name != "storage" {
        return vec![FieldError::not_supported(path, name, &["storage"])];
    }
    Vec::new()
}

/// The update rules of `ValidatePersistentVolumeClaimUpdate` after the claim's own validation.
fn pvc_update_rules(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let new_spec = new.get("spec").unwrap_or(&null);
    let old_spec = old.get("spec").unwrap_or(&null);
    let mut new_clone = new_spec.clone();
    let mut old_clone = old_spec.clone();
    if !old_clone.is_object() {
        old_clone = json!({});
    }
    if !new_clone.is_object() {
        new_clone = json!({});
    }
    // The volume may be bound once.
    if str_of(old_spec, "volumeName").is_empty()
        && let Some(m) = old_clone.as_object_mut()
    {
        match new_spec.get("volumeName") {
            Some(v) => m.insert("volumeName".into(), v.clone()),
            None => m.remove("volumeName"),
        };
    }
    let class = |s: &Value| s.get("storageClassName").filter(|c| !c.is_null()).cloned();
    let old_ann = annotation(old, BETA_STORAGE_CLASS);
    let new_ann = annotation(new, BETA_STORAGE_CLASS);
    let upgrade_from_annotation = old_ann.is_some()
        && class(old_spec).is_none()
        && class(new_spec).as_ref().and_then(Value::as_str) == old_ann
        && (new_ann.is_none() || new_ann == old_ann);
    if upgrade_from_annotation {
        if let Some(m) = new_clone.as_object_mut() {
            m.remove("storageClassName");
        }
    } else {
        if new_ann.unwrap_or("") != old_ann.unwrap_or("") {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata")
                    .child("annotations")
                    .child(BETA_STORAGE_CLASS),
                new_ann.unwrap_or(""),
                "field is immutable",
            ));
        }
        let upgrade_from_nil = class(new_spec).is_some()
            && class(old_spec).is_none()
            && (old_ann.is_none() || class(new_spec).as_ref().and_then(Value::as_str) == old_ann);
        if upgrade_from_nil && let Some(m) = new_clone.as_object_mut() {
            m.remove("storageClassName");
        }
    }
    let bound = new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound {
        if let Some(requests) = new_clone
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            match old_spec.pointer("/resources/requests/storage") {
                Some(v) => requests.insert("storage".into(), v.clone()),
                None => requests.remove("storage"),
            };
        }
        if let Some(m) = new_clone.as_object_mut() {
            match old_clone.get("volumeAttributesClassName") {
                Some(v) => m.insert("volumeAttributesClassName".into(), v.clone()),
                None => m.remove("volumeAttributesClassName"),
            };
        }
    }
    if new_clone != old_clone {
        let diff = go_diff(&pvc_spec_json(&old_clone), &pvc_spec_json(&new_clone));
        errs.push(FieldError::forbidden(
            &FieldPath::new("spec"),
            format!("spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{diff}"),
        ));
    }
    let size = |s: &Value, p: &str| quantity(s.pointer(p).unwrap_or(&json!("0")));
    let new_size = size(new_spec, "/resources/requests/storage");
    let old_size = size(old_spec, "/resources/requests/storage");
    let status_size = size(old, "/status/capacity/storage");
    // RecoverVolumeExpansionFailure is on: shrinking is allowed down to above the capacity.
    if new_size < old_size && new_size <= status_size {
        errs.push(FieldError::forbidden(
            &FieldPath::new("spec")
                .child("resources")
                .child("requests")
                .child("storage"),
            "field can not be less than status.capacity",
        ));
    }
    let mode = |s: &Value| s.get("volumeMode").cloned().unwrap_or(Value::Null);
    if mode(new_spec) != mode(old_spec) {
        errs.push(FieldError::invalid(
            &FieldPath::new("volumeMode"),
            mode(new_spec),
            "field is immutable",
        ));
    }
    // A class once applied (status.currentVolumeAttributesClassName) may change but not go.
    let vac = |s: &Value| {
        s.get("volumeAttributesClassName")
            .filter(|v| !v.is_null())
            .cloned()
    };
    let applied = old
        .pointer("/status/currentVolumeAttributesClassName")
        .is_some_and(|c| !c.is_null());
    if applied && vac(new_spec) != vac(old_spec) {
        let at = FieldPath::new("spec").child("volumeAttributesClassName");
        match vac(new_spec) {
            None => errs.push(FieldError::forbidden(
                &at,
                "update to nil is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some(v) if v.as_str() == Some("") => errs.push(FieldError::forbidden(
                &at,
                "update to empty string is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some(_) => {}
        }
    }
    errs
}

/// `GetWarningsForPersistentVolumeClaim`.
fn pvc_warnings(pvc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if annotation(pvc, BETA_STORAGE_CLASS).is_some() {
        out.push(format!(
            "metadata.annotations[{BETA_STORAGE_CLASS}]: {DEPRECATED_STORAGE_CLASS_MSG}"
        ));
    }
    for which in ["requests", "limits"] {
        if let Some(v) = pvc.pointer(&format!("/spec/resources/{which}/storage")) {
            let q = quantity(v);
            if q.milli_value() % 1000 != 0 {
                out.push(format!(
                    "spec.resources.{which}[storage]: fractional byte value \"{}\" is invalid, must be an integer",
                    q.canonical()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(spec: Value) -> Value {
        json!({"metadata": {"name": "pv"}, "spec": spec})
    }

    #[test]
    fn capacity_is_required_and_only_storage() {
        let errs = PersistentVolumeStrategy.validate(&pv(json!({
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv"}})));
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            vec![
                "spec.capacity: Required value",
                "spec.capacity: Unsupported value: null: supported values: \"storage\""
            ]
        );
    }

    #[test]
    fn one_source_only_and_one_required() {
        let errs = PersistentVolumeStrategy.validate(&pv(json!({
            "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "hostPath": {"path": "/x"}, "nfs": {"server": "a", "path": "/b"}})));
        assert_eq!(
            errs[0].to_string(),
            "spec.nfs: Forbidden: may not specify more than 1 volume type"
        );
        let errs = PersistentVolumeStrategy.validate(&pv(json!({
            "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}})));
        assert_eq!(
            errs[0].to_string(),
            "spec: Required value: must specify a volume type"
        );
    }

    #[test]
    fn source_change_embeds_the_internal_diff() {
        let old = pv(
            json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "5Gi"},
            "hostPath": {"path": "/srv/a", "type": ""}}),
        );
        let new = pv(
            json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "5Gi"},
            "hostPath": {"path": "/srv/b", "type": ""}}),
        );
        let errs = PersistentVolumeStrategy.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].message(),
            "Forbidden: spec.persistentvolumesource is immutable after creation\n@@ -2,7 +2,7 @@\n  \"GCEPersistentDisk\": null,\n  \"AWSElasticBlockStore\": null,\n  \"HostPath\": {\n-  \"Path\": \"/srv/a\",\n+  \"Path\": \"/srv/b\",\n   \"Type\": \"\"\n  },\n  \"Glusterfs\": null,\n"
        );
    }

    #[test]
    fn data_source_is_mirrored() {
        let mut pvc =
            json!({"spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}});
        PersistentVolumeClaimStrategy.prepare_for_create(&mut pvc);
        assert_eq!(
            pvc["spec"]["dataSourceRef"],
            json!({"kind": "PersistentVolumeClaim", "name": "src"})
        );
        let mut pvc = json!({"spec": {"dataSource": {"kind": "Widget", "name": "w"}}});
        PersistentVolumeClaimStrategy.prepare_for_create(&mut pvc);
        assert!(pvc["spec"].get("dataSource").is_none());
    }

    #[test]
    fn recycle_and_beta_labels_warn() {
        let w = pv_warnings(&pv(json!({"persistentVolumeReclaimPolicy": "Recycle"})));
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("spec.persistentVolumeReclaimPolicy: The Recycle"));
    }

    #[test]
    fn mount_options_need_a_source_that_takes_them() {
        let mut obj = pv(json!({"hostPath": {"path": "/srv"}}));
        obj["metadata"]["annotations"] = json!({MOUNT_OPTIONS: "ro"});
        assert_eq!(
            mount_option_errors(&obj)[0].to_string(),
            "metadata.annotations.volume.beta.kubernetes.io/mount-options: Forbidden: may not specify mount options for this volume type"
        );
        obj["spec"] = json!({"nfs": {"server": "a", "path": "/b"}});
        assert!(mount_option_errors(&obj).is_empty());
        assert_eq!(pv_warnings(&obj).len(), 1);
    }

    #[test]
    fn an_applied_attributes_class_may_not_go() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "volumeAttributesClassName": "gold",
            "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "currentVolumeAttributesClassName": "gold"}});
        let mut new = old.clone();
        new["spec"]
            .as_object_mut()
            .unwrap()
            .remove("volumeAttributesClassName");
        let msgs: Vec<String> = pvc_update_rules(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.volumeAttributesClassName: Forbidden: update to nil is forbidden when status.currentVolumeAttributesClassName is not nil"
            ]
        );
        new["spec"]["volumeAttributesClassName"] = json!("silver");
        assert!(pvc_update_rules(&new, &old).is_empty());
    }

    #[test]
    fn cross_namespace_references_are_dropped() {
        let mut pvc = json!({"spec": {"dataSourceRef": {"kind": "PersistentVolumeClaim",
            "name": "src", "namespace": "other"}}});
        PersistentVolumeClaimStrategy.prepare_for_create(&mut pvc);
        assert!(pvc["spec"].get("dataSourceRef").is_none());
    }

    #[test]
    fn iscsi_names_follow_upstreams_patterns() {
        assert!(iscsi_name_ok("iqn.2015-02.example.com:test"));
        assert!(iscsi_name_ok("iqnX-iqn.2015-02.example.com:test"));
        assert!(!iscsi_name_ok("iqn.2015-02.example.com"));
        assert!(!iscsi_name_ok("iqn.2015-02.example.com:a b"));
        assert!(iscsi_name_ok("eui.02004567A425678D"));
        assert!(iscsi_name_ok("euiX02004567A425678D"));
        assert!(!iscsi_name_ok("eui.02004567A425678"));
        assert!(iscsi_name_ok(&format!("naa.{}", "6".repeat(32))));
    }

    #[test]
    fn root_host_path_is_clean() {
        assert_eq!(clean_path("/a/.."), "/");
        assert_eq!(clean_path("//"), "/");
        assert_eq!(clean_path("/a"), "/a");
    }
}
