//! Pod volumes (pkg/apis/core/validation `ValidateVolumes`, `validateVolumeSource` and the
//! per-source validators): one source per volume, checked in the order of upstream's internal
//! `VolumeSource` struct, with upstream's paths (typos included: a second source after a
//! downward API one is reported at `downwarAPI`, a GCE disk's fields under `persistentDisk`).
//! Also the downward API field selectors and the local path rules that volume mounts share.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, is_dns1123_label, is_dns1123_subdomain,
    is_qualified_name, validate_annotations, validate_label_selector, validate_labels,
};
use serde_json::Value;

use super::util::{
    flag, int, items, list, map, object, opt_int, opt_text, present, quantity, text,
};
pub(super) use crate::strategies::volume_sources::no_backsteps;
use crate::strategies::volume_sources::{
    azure_disk, fc, flocker, host_path, nfs, quobyte, required_text, requireds,
};

const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Volume names and their sources, for the mount and device checks of containers. Only volumes
/// without errors are listed, as upstream's map.
pub(super) type VolumeMap<'a> = BTreeMap<String, &'a Value>;

/// `ValidateVolumes`. `pod_name` is the pod's name for the checks of generic ephemeral volumes,
/// `None` for templates.
pub(super) fn validate_volumes<'a>(
    spec: &'a Value,
    pod_name: Option<&str>,
    path: &FieldPath,
) -> (VolumeMap<'a>, Vec<FieldError>) {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    let mut vols = VolumeMap::new();
    let created_pvcs: BTreeSet<String> = match pod_name.filter(|n| !n.is_empty()) {
        Some(pod) => items(spec, "volumes")
            .filter(|(_, v)| present(v, "ephemeral"))
            .map(|(_, v)| format!("{pod}-{}", text(v, "name")))
            .collect(),
        None => BTreeSet::new(),
    };
    for (i, vol) in items(spec, "volumes") {
        let p = path.index(i);
        let name = text(vol, "name");
        let mut el = validate_source(vol, &p, name, pod_name);
        if name.is_empty() {
            el.push(FieldError::required(&p.child("name"), ""));
        } else {
            el.extend(
                is_dns1123_label(name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("name"), name, m)),
            );
        }
        if names.contains(name) {
            el.push(FieldError::duplicate(&p.child("name"), name));
        }
        if el.is_empty() {
            names.insert(name.to_string());
            vols.insert(name.to_string(), vol);
        } else {
            errs.extend(el);
        }
        if let Some(claim) = object(vol, "persistentVolumeClaim") {
            let claim_name = text(claim, "claimName");
            if created_pvcs.contains(claim_name) {
                errs.push(FieldError::invalid(
                    &p.child("persistentVolumeClaim").child("claimName"),
                    claim_name,
                    "must not reference a PVC that gets created for an ephemeral volume",
                ));
            }
        }
    }
    (vols, errs)
}

type SourceCheck = fn(&Value, &FieldPath) -> Vec<FieldError>;

/// The sources in upstream's order: JSON field, the name a second source is reported under,
/// the name the source's own errors are reported under, and its validator.
const SOURCES: &[(&str, &str, &str, SourceCheck)] = &[
    ("emptyDir", "emptyDir", "emptyDir", empty_dir),
    ("hostPath", "hostPath", "hostPath", host_path),
    ("gitRepo", "gitRepo", "gitRepo", git_repo),
    (
        "gcePersistentDisk",
        "gcePersistentDisk",
        "persistentDisk",
        gce_pd,
    ),
    (
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        "awsElasticBlockStore",
        aws_ebs,
    ),
    ("secret", "secret", "secret", secret),
    ("nfs", "nfs", "nfs", nfs),
    ("iscsi", "iscsi", "iscsi", iscsi),
    ("glusterfs", "glusterfs", "glusterfs", glusterfs),
    ("flocker", "flocker", "flocker", flocker),
    (
        "persistentVolumeClaim",
        "persistentVolumeClaim",
        "persistentVolumeClaim",
        pvc,
    ),
    ("rbd", "rbd", "rbd", rbd),
    ("cinder", "cinder", "cinder", cinder),
    ("cephfs", "cephFS", "cephfs", cephfs),
    ("quobyte", "quobyte", "quobyte", quobyte),
    ("downwardAPI", "downwarAPI", "downwardAPI", downward_api),
    ("fc", "fc", "fc", fc),
    ("flexVolume", "flexVolume", "flexVolume", flex),
    ("configMap", "configMap", "configMap", config_map),
    ("azureFile", "azureFile", "azureFile", azure_file),
    ("vsphereVolume", "vsphereVolume", "vsphereVolume", vsphere),
    (
        "photonPersistentDisk",
        "photonPersistentDisk",
        "photonPersistentDisk",
        photon,
    ),
    (
        "portworxVolume",
        "portworxVolume",
        "portworxVolume",
        portworx,
    ),
    ("azureDisk", "azureDisk", "azureDisk", azure_disk),
    ("storageos", "storageos", "storageos", storageos),
    ("projected", "projected", "projected", projected),
    ("scaleIO", "scaleIO", "scaleIO", scale_io),
    ("csi", "csi", "csi", csi),
    ("ephemeral", "ephemeral", "ephemeral", ephemeral),
    ("image", "image", "image", image),
];

/// `validateVolumeSource`: exactly one source, and that source valid.
fn validate_source(
    vol: &Value,
    path: &FieldPath,
    vol_name: &str,
    pod_name: Option<&str>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut count = 0;
    for (field, second, own, check) in SOURCES {
        let Some(src) = vol.get(*field).filter(|v| !v.is_null()) else {
            continue;
        };
        if count > 0 {
            errs.push(FieldError::forbidden(
                &path.child(second),
                "may not specify more than 1 volume type",
            ));
        } else {
            count += 1;
            errs.extend(check(src, &path.child(own)));
            if *field == "ephemeral" {
                errs.extend(ephemeral_pvc_name(path, vol_name, pod_name));
            }
        }
        if *field == "iscsi"
            && opt_text(src, "initiatorName").is_some()
            && vol_name.len() + 1 + text(src, "targetPortal").len() > 64
        {
            errs.push(FieldError::invalid(
                &path.child("name"),
                vol_name,
                "Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.",
            ));
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a volume type"));
    }
    errs
}

/// The PVC a generic ephemeral volume creates is named `<pod>-<volume>`: that must be a name.
fn ephemeral_pvc_name(path: &FieldPath, vol_name: &str, pod_name: Option<&str>) -> Vec<FieldError> {
    let Some(pod) = pod_name.filter(|p| !p.is_empty()) else {
        return Vec::new();
    };
    if vol_name.is_empty() {
        return Vec::new();
    }
    let pvc_name = format!("{pod}-{vol_name}");
    is_dns1123_subdomain(&pvc_name)
        .into_iter()
        .map(|m| {
            FieldError::invalid(
                &path.child("name"),
                vol_name,
                format!(
                    "PVC name {}: {m}",
                    apimachinery::validation::go_quote(&pvc_name)
                ),
            )
        })
        .collect()
}

fn empty_dir(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    match src.get("sizeLimit").and_then(quantity) {
        Some(q) if q.sign() < 0 => vec![FieldError::forbidden(
            &path.child("sizeLimit"),
            "SizeLimit field must be a valid resource quantity",
        )],
        _ => Vec::new(),
    }
}

fn git_repo(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = required_text(src, "repository", path).into_iter().collect();
    errs.extend(local_descending_path(
        text(src, "directory"),
        &path.child("directory"),
    ));
    errs
}

fn partition(src: &Value, path: &FieldPath) -> Option<FieldError> {
    let p = int(src, "partition");
    (!(0..=255).contains(&p)).then(|| {
        FieldError::invalid(
            &path.child("partition"),
            p,
            apimachinery::validation::inclusive_range_error(1, 255),
        )
    })
}

fn gce_pd(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["pdName"], path);
    errs.extend(partition(src, path));
    errs
}

fn aws_ebs(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["volumeID"], path);
    errs.extend(partition(src, path));
    errs
}

fn file_mode(src: &Value, field: &str, path: &FieldPath) -> Option<FieldError> {
    let mode = opt_int(src, field)?;
    (!(0..=0o777).contains(&mode))
        .then(|| FieldError::invalid(&path.child(field), mode, FILE_MODE_ERROR))
}

fn key_to_paths(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, kp) in items(src, "items") {
        errs.extend(key_to_path(kp, &path.child("items").index(i)));
    }
    errs
}

/// `validateKeyToPath`.
fn key_to_path(kp: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(kp, &["key", "path"], path);
    errs.extend(local_non_reserved_path(
        text(kp, "path"),
        &path.child("path"),
    ));
    errs.extend(file_mode(kp, "mode", path));
    errs
}

fn secret(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["secretName"], path);
    errs.extend(file_mode(src, "defaultMode", path));
    errs.extend(key_to_paths(src, path));
    errs
}

fn config_map(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["name"], path);
    errs.extend(file_mode(src, "defaultMode", path));
    errs.extend(key_to_paths(src, path));
    errs
}

/// An iSCSI qualified name, as the PersistentVolume rules check it (one implementation of
/// upstream's patterns for both).
fn iqn_format_ok(name: &str) -> bool {
    crate::strategies::volumes::iscsi_name_ok(name)
}

fn iscsi(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["targetPortal"], path);
    let iqn = text(src, "iqn");
    if iqn.is_empty() {
        errs.push(FieldError::required(&path.child("iqn"), ""));
    } else if !["iqn", "eui", "naa"].iter().any(|p| iqn.starts_with(p)) {
        errs.push(FieldError::invalid(
            &path.child("iqn"),
            iqn,
            "must be valid format starting with iqn, eui, or naa",
        ));
    } else if !iqn_format_ok(iqn) {
        errs.push(FieldError::invalid(
            &path.child("iqn"),
            iqn,
            "must be valid format",
        ));
    }
    let lun = int(src, "lun");
    if !(0..=255).contains(&lun) {
        errs.push(FieldError::invalid(
            &path.child("lun"),
            lun,
            apimachinery::validation::inclusive_range_error(0, 255),
        ));
    }
    if (flag(src, "chapAuthDiscovery") || flag(src, "chapAuthSession"))
        && !present(src, "secretRef")
    {
        errs.push(FieldError::required(&path.child("secretRef"), ""));
    }
    if let Some(init) = opt_text(src, "initiatorName") {
        let p = path.child("initiatorname");
        if !["iqn", "eui", "naa"].iter().any(|x| init.starts_with(x)) {
            errs.push(FieldError::invalid(
                &p,
                init,
                "must be valid format starting with iqn, eui, or naa",
            ));
        } else if !iqn_format_ok(init) {
            errs.push(FieldError::invalid(&p, init, "must be valid format"));
        }
    }
    errs
}

fn glusterfs(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["endpoints", "path"], path)
}

fn pvc(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["claimName"], path)
}

fn rbd(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if list(src, "monitors").is_empty() {
        errs.push(FieldError::required(&path.child("monitors"), ""));
    }
    errs.extend(requireds(src, &["image"], path));
    errs
}

fn cinder(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["volumeID"], path);
    if let Some(r) = object(src, "secretRef")
        && text(r, "name").is_empty()
    {
        errs.push(FieldError::required(
            &path.child("secretRef").child("name"),
            "",
        ));
    }
    errs
}

fn cephfs(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    if list(src, "monitors").is_empty() {
        vec![FieldError::required(&path.child("monitors"), "")]
    } else {
        Vec::new()
    }
}

const VOLUME_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// `validateDownwardAPIVolumeFile`; its errors are reported at the source's path, not the
/// item's, as upstream does.
fn downward_file(file: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(file, &["path"], path);
    errs.extend(local_non_reserved_path(
        text(file, "path"),
        &path.child("path"),
    ));
    match (object(file, "fieldRef"), object(file, "resourceFieldRef")) {
        (Some(f), r) => {
            errs.extend(object_field_selector(
                f,
                VOLUME_FIELD_PATHS,
                &path.child("fieldRef"),
            ));
            if r.is_some() {
                errs.push(FieldError::invalid(
                    path,
                    "resource",
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                ));
            }
        }
        (None, Some(r)) => errs.extend(resource_field_selector(
            r,
            &path.child("resourceFieldRef"),
            true,
        )),
        (None, None) => errs.push(FieldError::required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        )),
    }
    errs.extend(file_mode(file, "mode", path));
    errs
}

fn downward_api(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = file_mode(src, "defaultMode", path).into_iter().collect();
    for (_, file) in items(src, "items") {
        errs.extend(downward_file(file, path));
    }
    errs
}

fn flex(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["driver"], path);
    for k in map(src, "options").keys() {
        let ns = k.split_once('/').map(|(n, _)| n).unwrap_or(k);
        let normalized = format!(".{}", ns.to_lowercase());
        if normalized.ends_with(".kubernetes.io") || normalized.ends_with(".k8s.io") {
            errs.push(FieldError::invalid(
                &path.child("options").key(k),
                k.as_str(),
                "kubernetes.io and k8s.io namespaces are reserved",
            ));
        }
    }
    errs
}

fn azure_file(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["secretName", "shareName"], path)
}

fn vsphere(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["volumePath"], path)
}

fn photon(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["pdID"], path)
}

fn portworx(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["volumeID"], path)
}

fn dns_label_errors(value: &str, path: &FieldPath) -> Vec<FieldError> {
    is_dns1123_label(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

fn storageos(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = text(src, "volumeName");
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("volumeName"), ""));
    } else {
        errs.extend(dns_label_errors(name, &path.child("volumeName")));
    }
    let ns = text(src, "volumeNamespace");
    if !ns.is_empty() {
        errs.extend(dns_label_errors(ns, &path.child("volumeNamespace")));
    }
    if let Some(r) = object(src, "secretRef")
        && text(r, "name").is_empty()
    {
        errs.push(FieldError::required(
            &path.child("secretRef").child("name"),
            "",
        ));
    }
    errs
}

/// `validateProjectionSources` (under the `projected` path): one source per entry, and no two
/// files at the same path.
fn projected(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = file_mode(src, "defaultMode", path).into_iter().collect();
    let mut paths: BTreeSet<String> = BTreeSet::new();
    let mut claim = |p: &str, errs: &mut Vec<FieldError>, bad: &str| {
        if !paths.insert(p.to_string()) {
            errs.push(FieldError::invalid(
                path,
                bad,
                "conflicting duplicate paths",
            ));
        }
    };
    for (i, source) in items(src, "sources") {
        let sp = path.child("sources").index(i);
        let mut n = 0;
        for kind in ["secret", "configMap"] {
            let Some(s) = object(source, kind) else {
                continue;
            };
            n += 1;
            let pp = sp.child(kind);
            if text(s, "name").is_empty() {
                errs.push(FieldError::required(&pp.child("name"), ""));
            }
            for (j, kp) in items(s, "items") {
                errs.extend(key_to_path(kp, &pp.child("items").index(j)));
                let p = text(kp, "path");
                if !p.is_empty() {
                    claim(p, &mut errs, text(s, "name"));
                }
            }
        }
        if let Some(d) = object(source, "downwardAPI") {
            n += 1;
            let pp = sp.child("downwardAPI");
            for (_, file) in items(d, "items") {
                errs.extend(downward_file(file, &pp));
                let p = text(file, "path");
                if !p.is_empty() {
                    claim(p, &mut errs, p);
                }
            }
        }
        if let Some(t) = object(source, "serviceAccountToken") {
            n += 1;
            let pp = sp.child("serviceAccountToken");
            let exp = int(t, "expirationSeconds");
            if exp < 600 {
                errs.push(FieldError::invalid(
                    &pp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if exp > 1 << 32 {
                errs.push(FieldError::invalid(
                    &pp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            let p = text(t, "path");
            if p.is_empty() {
                errs.push(FieldError::required(&path.child("path"), ""));
            } else {
                errs.extend(local_non_reserved_path(p, &path.child("path")));
            }
        }
        if let Some(b) = object(source, "clusterTrustBundle") {
            n += 1;
            errs.extend(cluster_trust_bundle(b, &sp.child("clusterTrustBundle")));
            let p = text(b, "path");
            claim(p, &mut errs, p);
        }
        if object(source, "podCertificate").is_some() {
            n += 1;
        }
        if n > 1 {
            errs.push(FieldError::forbidden(
                &sp,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
    errs
}

fn cluster_trust_bundle(b: &Value, pp: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (opt_text(b, "name"), opt_text(b, "signerName")) {
        (Some(_), Some(_)) => errs.push(
            FieldError::invalid(pp, b.clone(), "only one of name and signerName may be used")
                .with_rendered_value(go_struct("core.v1.ClusterTrustBundleProjection", b)),
        ),
        (Some(name), None) => {
            if name.is_empty() {
                errs.push(FieldError::required(
                    &pp.child("name"),
                    "must be a valid object name",
                ));
            }
            if present(b, "labelSelector") {
                errs.push(
                    FieldError::invalid(
                        &pp.child("labelSelector"),
                        b["labelSelector"].clone(),
                        "labelSelector must be unset if name is specified",
                    )
                    .with_rendered_value(go_struct("meta.v1.LabelSelector", &b["labelSelector"])),
                );
            }
        }
        (None, Some(signer)) => {
            if signer.is_empty() {
                errs.push(FieldError::required(
                    &pp.child("signerName"),
                    "must be a valid signer name",
                ));
            }
            errs.extend(validate_label_selector(
                b.get("labelSelector"),
                LabelSelectorValidationOptions::default(),
                &pp.child("labelSelector"),
            ));
        }
        (None, None) => errs.push(FieldError::required(
            pp,
            "either name or signerName must be specified",
        )),
    }
    if text(b, "path").is_empty() {
        errs.push(FieldError::required(&pp.child("path"), ""));
    }
    errs.extend(local_non_reserved_path(text(b, "path"), &pp.child("path")));
    errs
}

fn go_struct(ty: &str, v: &Value) -> String {
    ironplane_protobuf::go_struct_json(ty, v, ironplane_protobuf::GoStyle::Internal)
        .unwrap_or_else(|| apimachinery::validation::go_json(v))
}

fn scale_io(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    requireds(src, &["gateway", "system", "volumeName"], path)
}

/// `ValidateCSIDriverName` as v1.36 answers: an empty name is only required.
pub(super) fn csi_driver_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, "", 63));
    }
    errs.extend(
        is_dns1123_subdomain(&name.to_lowercase())
            .into_iter()
            .map(|m| FieldError::invalid(path, name, m)),
    );
    errs
}

fn csi(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = csi_driver_name(text(src, "driver"), &path.child("driver"));
    if let Some(r) = object(src, "nodePublishSecretRef") {
        let name = text(r, "name");
        if name.is_empty() {
            errs.push(FieldError::required(
                &path.child("nodePublishSecretRef").child("name"),
                "",
            ));
        } else {
            errs.extend(
                is_dns1123_subdomain(name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&path.child("name"), name, m)),
            );
        }
    }
    errs
}

fn ephemeral(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    match object(src, "volumeClaimTemplate") {
        None => vec![FieldError::required(&path.child("volumeClaimTemplate"), "")],
        Some(t) => pvc_template(t, &path.child("volumeClaimTemplate")),
    }
}

/// Metadata fields a template may not set, in `ObjectMeta`'s order, with the names upstream
/// derives from the Go field names (`UID` becomes `uID`).
const TEMPLATE_META_FORBIDDEN: &[(&str, &str)] = &[
    ("name", "name"),
    ("generateName", "generateName"),
    ("namespace", "namespace"),
    ("selfLink", "selfLink"),
    ("uid", "uID"),
    ("resourceVersion", "resourceVersion"),
    ("generation", "generation"),
    ("creationTimestamp", "creationTimestamp"),
    ("deletionTimestamp", "deletionTimestamp"),
    ("deletionGracePeriodSeconds", "deletionGracePeriodSeconds"),
    ("ownerReferences", "ownerReferences"),
    ("finalizers", "finalizers"),
    ("managedFields", "managedFields"),
];

/// `ValidatePersistentVolumeClaimTemplate`: labels and annotations only, and a valid claim spec.
/// `ValidateTemplateObjectMeta`: a template's metadata carries labels and annotations only
/// (ephemeral volume claim templates here, ResourceClaimTemplates in DRA).
pub(crate) fn validate_template_object_meta(meta: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_annotations(meta.get("annotations"), &path.child("annotations"));
    errs.extend(validate_labels(meta.get("labels"), &path.child("labels")));
    for (field, name) in TEMPLATE_META_FORBIDDEN {
        let set = match meta.get(*field) {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Number(n)) => n.as_i64() != Some(0),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if set {
            errs.push(FieldError::forbidden(&path.child(name), "cannot be set"));
        }
    }
    errs
}

fn pvc_template(t: &Value, path: &FieldPath) -> Vec<FieldError> {
    let meta = t.get("metadata").unwrap_or(&Value::Null);
    let mut errs = validate_template_object_meta(meta, &path.child("metadata"));
    errs.extend(pvc_spec(
        t.get("spec").unwrap_or(&Value::Null),
        &path.child("spec"),
    ));
    errs
}

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// `ValidatePersistentVolumeClaimSpec`, as a generic ephemeral volume's template uses it.
fn pvc_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let modes = list(spec, "accessModes");
    if modes.is_empty() {
        errs.push(FieldError::required(
            &path.child("accessModes"),
            "at least 1 access mode is required",
        ));
    }
    if present(spec, "selector") {
        errs.extend(validate_label_selector(
            spec.get("selector"),
            LabelSelectorValidationOptions::default(),
            &path.child("selector"),
        ));
    }
    let (mut rwop, mut other) = (false, false);
    for m in modes.iter().filter_map(Value::as_str) {
        if !ACCESS_MODES.contains(&m) {
            errs.push(FieldError::not_supported(
                &path.child("accessModes"),
                m,
                ACCESS_MODES,
            ));
        }
        if m == "ReadWriteOncePod" {
            rwop = true;
        } else if ACCESS_MODES.contains(&m) {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            &path.child("accessModes"),
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    let storage_path = path.child("resources").key("storage");
    let requests = spec
        .get("resources")
        .map(|r| map(r, "requests"))
        .and_then(|m| m.get("storage"));
    match requests.and_then(quantity) {
        None => errs.push(FieldError::required(&storage_path, "")),
        Some(q) if q.sign() <= 0 => {
            errs.push(FieldError::invalid(
                &storage_path,
                q.canonical(),
                "must be greater than zero",
            ));
        }
        Some(q) => errs.extend(super::resources::validate_quantity_value(
            "storage",
            &q,
            &storage_path,
        )),
    }
    if let Some(class) = opt_text(spec, "storageClassName").filter(|c| !c.is_empty()) {
        errs.extend(
            is_dns1123_subdomain(class)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("storageClassName"), class, m)),
        );
    }
    if let Some(mode) = opt_text(spec, "volumeMode")
        && !matches!(mode, "Block" | "Filesystem")
    {
        errs.push(FieldError::not_supported(
            &path.child("volumeMode"),
            mode,
            &["Block", "Filesystem"],
        ));
    }
    for (field, has_namespace) in [("dataSource", false), ("dataSourceRef", true)] {
        let Some(ds) = object(spec, field) else {
            continue;
        };
        let dp = path.child(field);
        errs.extend(requireds(ds, &["name", "kind"], &dp));
        let group = text(ds, "apiGroup");
        let kind = text(ds, "kind");
        if group.is_empty() && kind != "PersistentVolumeClaim" {
            errs.push(FieldError::invalid(
                &dp,
                kind,
                "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
            ));
        }
        if !group.is_empty() {
            errs.extend(
                is_dns1123_subdomain(group)
                    .into_iter()
                    .map(|m| FieldError::invalid(&dp.child("apiGroup"), group, m)),
            );
        }
        if has_namespace && let Some(ns) = opt_text(ds, "namespace").filter(|n| !n.is_empty()) {
            errs.extend(
                is_dns1123_label(ns)
                    .into_iter()
                    .map(|m| FieldError::invalid(&dp.child("namespace"), ns, m)),
            );
        }
    }
    let ds = object(spec, "dataSource");
    let dsr = object(spec, "dataSourceRef");
    if let Some(r) = dsr
        && opt_text(r, "namespace").is_some_and(|n| !n.is_empty())
    {
        if ds.is_some() {
            errs.push(FieldError::invalid(
                path,
                path.child("dataSource").to_string(),
                "may not be specified when dataSourceRef.namespace is specified",
            ));
        }
    } else if let (Some(a), Some(b)) = (ds, dsr)
        && (opt_text(a, "apiGroup") != opt_text(b, "apiGroup")
            || text(a, "kind") != text(b, "kind")
            || text(a, "name") != text(b, "name"))
    {
        errs.push(FieldError::invalid(
            path,
            path.child("dataSource").to_string(),
            "must match dataSourceRef",
        ));
    }
    if let Some(class) = opt_text(spec, "volumeAttributesClassName").filter(|c| !c.is_empty()) {
        errs.extend(
            is_dns1123_subdomain(class)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("volumeAttributesClassName"), class, m)),
        );
    }
    errs
}

fn image(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["reference"], path);
    errs.extend(super::containers::validate_pull_policy(
        text(src, "pullPolicy"),
        &path.child("pullPolicy"),
    ));
    errs
}

// ---------------------------------------------------------------------------------------------
// Paths and field selectors, shared with containers.
// ---------------------------------------------------------------------------------------------

/// `validateLocalDescendingPath`: relative, without `..`.
pub(super) fn local_descending_path(target: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    errs.extend(no_backsteps(target, path));
    errs
}

/// `ValidateLocalNonReservedPath`: also not starting with `..` (unless `../`, already caught).
pub(super) fn local_non_reserved_path(target: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = local_descending_path(target, path);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            path,
            target,
            "must not start with '..'",
        ));
    }
    errs
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['key']` → (`metadata.labels`, `key`).
pub(super) fn split_subscript(p: &str) -> Option<(&str, &str)> {
    let s = p.strip_suffix("']")?;
    let (head, sub) = s.split_once("['")?;
    (!head.is_empty()).then_some((head, sub))
}

/// The pod fields the downward API knows in v1 (`ConvertDownwardAPIFieldLabel`).
const DOWNWARD_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `validateObjectFieldSelector` against the paths `allowed` (sorted, as upstream lists them).
pub(super) fn object_field_selector(
    fs: &Value,
    allowed: &[&str],
    path: &FieldPath,
) -> Vec<FieldError> {
    let version = text(fs, "apiVersion");
    if version.is_empty() {
        return vec![FieldError::required(&path.child("apiVersion"), "")];
    }
    let fp = text(fs, "fieldPath");
    if fp.is_empty() {
        return vec![FieldError::required(&path.child("fieldPath"), "")];
    }
    let converted = if version != "v1" {
        Err(format!("unsupported pod version: {version}"))
    } else if let Some((head, _)) = split_subscript(fp) {
        if matches!(head, "metadata.annotations" | "metadata.labels") {
            Ok(fp.to_string())
        } else {
            Err(format!("field label does not support subscript: {fp}"))
        }
    } else if fp == "spec.host" {
        Ok("spec.nodeName".to_string())
    } else if DOWNWARD_FIELDS.contains(&fp) {
        Ok(fp.to_string())
    } else {
        Err(format!("field label not supported: {fp}"))
    };
    let internal = match converted {
        Ok(p) => p,
        Err(e) => {
            return vec![FieldError::invalid(
                &path.child("fieldPath"),
                fp,
                format!("error converting fieldPath: {e}"),
            )];
        }
    };
    let qualified = |v: &str| -> Vec<FieldError> {
        is_qualified_name(v)
            .into_iter()
            .map(|m| FieldError::invalid(path, v, m))
            .collect()
    };
    if let Some((head, sub)) = split_subscript(&internal) {
        return match head {
            "metadata.annotations" => qualified(&sub.to_lowercase()),
            "metadata.labels" => qualified(sub),
            other => vec![FieldError::invalid(
                path,
                other,
                "does not support subscript",
            )],
        };
    }
    if !allowed.contains(&internal.as_str()) {
        return vec![FieldError::not_supported(
            &path.child("fieldPath"),
            internal.as_str(),
            allowed,
        )];
    }
    Vec::new()
}

/// The container resources a `resourceFieldRef` may name (sorted), besides huge pages.
pub(super) const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

const BYTE_DIVISORS: &[&str] = &[
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
];

/// `validateContainerResourceFieldSelector`; a volume's selector must name its container.
pub(super) fn resource_field_selector(
    fs: &Value,
    path: &FieldPath,
    volume: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let resource = text(fs, "resource");
    if volume && text(fs, "containerName").is_empty() {
        errs.push(FieldError::required(&path.child("containerName"), ""));
    } else if resource.is_empty() {
        errs.push(FieldError::required(&path.child("resource"), ""));
    } else if !RESOURCE_FIELD_PATHS.contains(&resource)
        && !resource.starts_with("limits.hugepages-")
        && !resource.starts_with("requests.hugepages-")
    {
        errs.push(FieldError::not_supported(
            &path.child("resource"),
            resource,
            RESOURCE_FIELD_PATHS,
        ));
    }
    if let Some(divisor) = fs
        .get("divisor")
        .and_then(quantity)
        .filter(|q| !q.is_zero())
    {
        let d = divisor.canonical();
        let msg = match resource {
            "limits.cpu" | "requests.cpu" if !matches!(d.as_str(), "1m" | "1") => {
                Some("only divisor's values 1m and 1 are supported with the cpu resource")
            }
            "limits.memory" | "requests.memory" if !BYTE_DIVISORS.contains(&d.as_str()) => Some(
                "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource",
            ),
            "limits.ephemeral-storage" | "requests.ephemeral-storage"
                if !BYTE_DIVISORS.contains(&d.as_str()) =>
            {
                Some(
                    "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource",
                )
            }
            _ => None,
        };
        if let Some(m) = msg {
            errs.push(FieldError::invalid(&path.child("divisor"), resource, m));
        }
        if (resource.starts_with("requests.hugepages-")
            || resource.starts_with("limits.hugepages-"))
            && !BYTE_DIVISORS.contains(&d.as_str())
        {
            errs.push(FieldError::invalid(
                &path.child("divisor"),
                resource,
                "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages resource",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(vols: Value) -> Vec<String> {
        let spec = json!({ "volumes": vols });
        validate_volumes(&spec, Some("p"), &FieldPath::new("spec").child("volumes"))
            .1
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn one_source_per_volume_in_upstreams_words() {
        assert_eq!(
            msgs(json!([{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}])),
            vec!["spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"]
        );
        assert_eq!(
            msgs(json!([{"name": "v", "secret": {"secretName": "s"}, "downwardAPI": {}}])),
            vec!["spec.volumes[0].downwarAPI: Forbidden: may not specify more than 1 volume type"]
        );
        assert_eq!(
            msgs(json!([{"name": "v"}])),
            vec!["spec.volumes[0]: Required value: must specify a volume type"]
        );
    }

    #[test]
    fn source_rules() {
        assert_eq!(
            msgs(json!([{"name": "v", "projected": {"sources": [
                {"configMap": {"name": "a", "items": [{"key": "k", "path": "x"}]}},
                {"secret": {"name": "b", "items": [{"key": "k", "path": "x"}]}}]}}])),
            vec![r#"spec.volumes[0].projected: Invalid value: "b": conflicting duplicate paths"#]
        );
        assert_eq!(
            msgs(
                json!([{"name": "v", "downwardAPI": {"items": [{"path": "p", "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}]}}])
            ),
            vec![
                r#"spec.volumes[0].downwardAPI.fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid""#
            ]
        );
        assert_eq!(
            msgs(json!([{"name": "v", "gitRepo": {"repository": "r", "directory": "../x"}}])),
            vec![
                r#"spec.volumes[0].gitRepo.directory: Invalid value: "../x": must not contain '..'"#
            ]
        );
        assert_eq!(
            msgs(
                json!([{"name": "v", "ephemeral": {"volumeClaimTemplate": {"metadata": {"name": "n"}, "spec": {"accessModes": ["ReadWriteOnce"]}}}}])
            ),
            vec![
                "spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set",
                "spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources[storage]: Required value"
            ]
        );
        assert!(iqn_format_ok("iqn.2015-02.example.com:test"));
        assert!(!iqn_format_ok("iqn.2015-02.example.com"));
        assert!(iqn_format_ok("eui.02004567A425678D"));
    }
}
