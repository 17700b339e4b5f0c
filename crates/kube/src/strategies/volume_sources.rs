//! Volume sources that pods and PersistentVolumes share: the validators upstream calls for a
//! pod's volume and for a PV's source alike (`validateHostPathVolumeSource`,
//! `validateNFSVolumeSource`, `validateFlockerVolumeSource`, `validateQuobyteVolumeSource`,
//! `validateFCVolumeSource`, `validateAzureDisk`, `validatePathNoBacksteps`). Sources whose PV
//! form differs (secret references with namespaces) stay with their kind.

use apimachinery::validation::{FieldError, FieldPath};
use serde_json::Value;

use crate::strategies::fields::{list_at as list, opt_int, opt_str as opt_text, str_at as text};

pub(crate) fn required_text(src: &Value, field: &str, path: &FieldPath) -> Option<FieldError> {
    text(src, field)
        .is_empty()
        .then(|| FieldError::required(&path.child(field), ""))
}

pub(crate) fn requireds(src: &Value, fields: &[&str], path: &FieldPath) -> Vec<FieldError> {
    fields
        .iter()
        .filter_map(|f| required_text(src, f, path))
        .collect()
}

const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

pub(crate) fn host_path(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let p = text(src, "path");
    if p.is_empty() {
        return vec![FieldError::required(&path.child("path"), "")];
    }
    let mut errs = no_backsteps(p, &path.child("path"));
    if let Some(t) = opt_text(src, "type")
        && !HOST_PATH_TYPES.contains(&t)
    {
        errs.push(FieldError::not_supported(
            &path.child("type"),
            t,
            HOST_PATH_TYPES,
        ));
    }
    errs
}

pub(crate) fn nfs(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["server", "path"], path);
    let p = text(src, "path");
    if !p.starts_with('/') {
        errs.push(FieldError::invalid(
            &path.child("path"),
            p,
            "must be an absolute path",
        ));
    }
    errs
}

pub(crate) fn flocker(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let (name, uuid) = (text(src, "datasetName"), text(src, "datasetUUID"));
    let mut errs = Vec::new();
    if name.is_empty() && uuid.is_empty() {
        errs.push(FieldError::required(
            path,
            "one of datasetName and datasetUUID is required",
        ));
    }
    if !name.is_empty() && !uuid.is_empty() {
        errs.push(FieldError::invalid(
            path,
            "resource",
            "datasetName and datasetUUID can not be specified simultaneously",
        ));
    }
    if name.contains('/') {
        errs.push(FieldError::invalid(
            &path.child("datasetName"),
            name,
            "must not contain '/'",
        ));
    }
    errs
}

pub(crate) fn quobyte(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let registry = text(src, "registry");
    const REGISTRY: &str = "must be a host:port pair or multiple pairs separated by commas";
    if registry.is_empty() {
        errs.push(FieldError::required(&path.child("registry"), REGISTRY));
    } else if text(src, "tenant").len() >= 65 {
        errs.push(FieldError::required(
            &path.child("tenant"),
            "must be a UUID and may not exceed a length of 64 characters",
        ));
    } else {
        for pair in registry.split(',') {
            if !host_port_ok(pair) {
                errs.push(FieldError::invalid(
                    &path.child("registry"),
                    registry,
                    REGISTRY,
                ));
            }
        }
    }
    errs.extend(requireds(src, &["volume"], path));
    errs
}

/// Go's `net.SplitHostPort` succeeds: `host:port` or `[host]:port`, one colon outside brackets.
fn host_port_ok(s: &str) -> bool {
    if let Some(rest) = s.strip_prefix('[') {
        return rest
            .split_once(']')
            .is_some_and(|(_, after)| after.starts_with(':') && !after[1..].contains(':'));
    }
    s.matches(':').count() == 1 && !s.contains('[') && !s.contains(']')
}

pub(crate) fn fc(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let (wwns, wwids) = (list(src, "targetWWNs"), list(src, "wwids"));
    let mut errs = Vec::new();
    if wwns.is_empty() && wwids.is_empty() {
        errs.push(FieldError::required(
            &path.child("targetWWNs"),
            "must specify either targetWWNs or wwids, but not both",
        ));
    }
    if !wwns.is_empty() && !wwids.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("targetWWNs"),
            Value::Array(wwns.to_vec()),
            "targetWWNs and wwids can not be specified simultaneously",
        ));
    }
    if !wwns.is_empty() {
        match opt_int(src, "lun") {
            None => errs.push(FieldError::required(
                &path.child("lun"),
                "lun is required if targetWWNs is specified",
            )),
            Some(lun) if !(0..=255).contains(&lun) => errs.push(FieldError::invalid(
                &path.child("lun"),
                lun,
                apimachinery::validation::inclusive_range_error(0, 255),
            )),
            Some(_) => {}
        }
    }
    errs
}

pub(crate) fn azure_disk(src: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = requireds(src, &["diskName", "diskURI"], path);
    if let Some(mode) = opt_text(src, "cachingMode")
        && !matches!(mode, "None" | "ReadOnly" | "ReadWrite")
    {
        errs.push(FieldError::not_supported(
            &path.child("cachingMode"),
            mode,
            &["None", "ReadOnly", "ReadWrite"],
        ));
    }
    let kind = opt_text(src, "kind");
    if let Some(k) = kind
        && !matches!(k, "Dedicated" | "Managed" | "Shared")
    {
        errs.push(FieldError::not_supported(
            &path.child("kind"),
            k,
            &["Dedicated", "Managed", "Shared"],
        ));
    }
    let uri = text(src, "diskURI");
    match kind {
        Some("Managed") if !uri.starts_with("/subscriptions/") => {
            errs.push(FieldError::not_supported(
                &path.child("diskURI"),
                uri,
                &["/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}"],
            ));
        }
        Some(k) if k != "Managed" && !uri.starts_with("https://") => {
            errs.push(FieldError::not_supported(
                &path.child("diskURI"),
                uri,
                &["https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd"],
            ));
        }
        _ => {}
    }
    errs
}

/// `validatePathNoBacksteps`: no `..` element (one error however many).
pub(crate) fn no_backsteps(target: &str, path: &FieldPath) -> Vec<FieldError> {
    if target.split('/').any(|e| e == "..") {
        vec![FieldError::invalid(path, target, "must not contain '..'")]
    } else {
        Vec::new()
    }
}
