//! Security settings of pods and containers (pkg/apis/core/validation
//! `validatePodSpecSecurityContext`, `ValidateSecurityContext`, seccomp and AppArmor profiles,
//! Windows options, sysctls), the OS-specific rules (`validateOS`, `validateLinux`,
//! `validateWindows`, `validateWindowsHostProcessPod`), user namespaces (`validateHostUsers`)
//! and the pod annotations that carry security settings (`ValidatePodSpecificAnnotations`,
//! the seccomp and AppArmor annotation/field consistency on create).
//!
//! In v1 JSON the host namespaces (`hostNetwork`, `hostPID`, `hostIPC`, `hostUsers`,
//! `shareProcessNamespace`) sit on the pod spec; upstream's internal types keep them in the
//! security context, which is why some of its paths name the spec and some the context.

use std::collections::BTreeSet;

use apimachinery::object::JsonPointer;
use apimachinery::validation::{
    FieldError, FieldPath, go_quote, is_dns1123_subdomain, is_valid_group_id, is_valid_user_id,
};
use serde_json::Value;

use super::util::{flag, items, map, object, opt_int, opt_text, present, text, visit_containers};
use super::volumes::local_descending_path;

fn go_struct(ty: &str, v: &Value) -> String {
    ironplane_protobuf::go_struct_json(ty, v, ironplane_protobuf::GoStyle::Internal)
        .unwrap_or_else(|| apimachinery::validation::go_json(v))
}

fn id_errors(v: &Value, field: &str, path: &FieldPath, group: bool) -> Vec<FieldError> {
    let Some(id) = opt_int(v, field) else {
        return Vec::new();
    };
    let msgs = if group {
        is_valid_group_id(id)
    } else {
        is_valid_user_id(id)
    };
    msgs.into_iter()
        .map(|m| FieldError::invalid(&path.child(field), id, m))
        .collect()
}

/// `validatePodSpecSecurityContext`.
pub(super) fn validate_pod_security_context(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(sc) = object(spec, "securityContext") else {
        return Vec::new();
    };
    let mut errs = id_errors(sc, "fsGroup", path, true);
    errs.extend(id_errors(sc, "runAsUser", path, false));
    errs.extend(id_errors(sc, "runAsGroup", path, true));
    for (g, gid) in items(sc, "supplementalGroups") {
        let id = gid.as_i64().unwrap_or(0);
        errs.extend(
            is_valid_group_id(id)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("supplementalGroups").index(g), id, m)),
        );
    }
    if spec.get("shareProcessNamespace").and_then(Value::as_bool) == Some(true)
        && flag(spec, "hostPID")
    {
        errs.push(FieldError::invalid(
            &path.child("shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    if !super::util::list(sc, "sysctls").is_empty() {
        errs.extend(validate_sysctls(spec, sc, &path.child("sysctls")));
    }
    if let Some(p) = opt_text(sc, "fsGroupChangePolicy")
        && !matches!(p, "Always" | "OnRootMismatch")
    {
        errs.push(FieldError::not_supported(
            &path.child("fsGroupChangePolicy"),
            p,
            &["Always", "OnRootMismatch"],
        ));
    }
    errs.extend(seccomp_profile(
        sc.get("seccompProfile"),
        &path.child("seccompProfile"),
    ));
    errs.extend(windows_options(
        sc.get("windowsOptions"),
        &path.child("windowsOptions"),
    ));
    errs.extend(apparmor_profile(
        sc.get("appArmorProfile"),
        &path.child("appArmorProfile"),
    ));
    if let Some(p) = opt_text(sc, "supplementalGroupsPolicy")
        && !matches!(p, "Merge" | "Strict")
    {
        errs.push(FieldError::not_supported(
            &path.child("supplementalGroupsPolicy"),
            p,
            &["Merge", "Strict"],
        ));
    }
    if let Some(p) = opt_text(sc, "seLinuxChangePolicy")
        && !matches!(p, "MountOption" | "Recursive")
    {
        errs.push(FieldError::not_supported(
            &path.child("seLinuxChangePolicy"),
            p,
            &["MountOption", "Recursive"],
        ));
    }
    errs
}

/// A sysctl name: dot- or slash-separated segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`, at
/// most 253 characters (`IsValidSysctlName`).
fn is_valid_sysctl_name(name: &str) -> bool {
    if name.len() > 253 || name.is_empty() {
        return false;
    }
    name.split(['.', '/']).all(|seg| {
        let b = seg.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-' || *c == b'_')
    })
}

const SYSCTL_REGEX: &str =
    r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";

/// The namespace a sysctl belongs to (`utilsysctl.GetNamespace`).
fn sysctl_namespace(name: &str) -> Option<&'static str> {
    let name = name.replace('/', ".");
    if name == "kernel.sem"
        || name.starts_with("kernel.shm")
        || name.starts_with("kernel.msg")
        || name.starts_with("fs.mqueue.")
    {
        Some("ipc")
    } else if name.starts_with("net.") {
        Some("net")
    } else {
        None
    }
}

/// `validateSysctls`.
fn validate_sysctls(spec: &Value, sc: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, s) in items(sc, "sysctls") {
        let np = path.index(i).child("name");
        let name = text(s, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&np, ""));
        } else if !is_valid_sysctl_name(name) {
            errs.push(FieldError::invalid(
                &np,
                name,
                format!("must have at most 253 characters and match regex {SYSCTL_REGEX}"),
            ));
        } else if names.contains(name) {
            errs.push(FieldError::duplicate(&np, name));
        }
        match sysctl_namespace(name) {
            Some("net") if flag(spec, "hostNetwork") => errs.push(FieldError::invalid(
                &np,
                name,
                "may not be specified when 'hostNetwork' is true",
            )),
            Some("ipc") if flag(spec, "hostIPC") => errs.push(FieldError::invalid(
                &np,
                name,
                "may not be specified when 'hostIPC' is true",
            )),
            _ => {}
        }
        names.insert(name);
    }
    errs
}

/// `ValidateSecurityContext` of a container.
pub(super) fn validate_security_context(
    sc: Option<&Value>,
    path: &FieldPath,
    host_users: bool,
) -> Vec<FieldError> {
    let Some(sc) = sc.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut errs = id_errors(sc, "runAsUser", path, false);
    errs.extend(id_errors(sc, "runAsGroup", path, true));
    if let Some(pm) = opt_text(sc, "procMount") {
        if !matches!(pm, "Default" | "Unmasked") {
            errs.push(FieldError::not_supported(
                &path.child("procMount"),
                pm,
                &["Default", "Unmasked"],
            ));
        }
        if host_users && pm == "Unmasked" {
            errs.push(FieldError::invalid(
                &path.child("procMount"),
                pm,
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    errs.extend(seccomp_profile(
        sc.get("seccompProfile"),
        &path.child("seccompProfile"),
    ));
    if sc.get("allowPrivilegeEscalation").and_then(Value::as_bool) == Some(false) {
        let rendered = || go_struct("core.v1.SecurityContext", sc);
        if flag(sc, "privileged") {
            errs.push(
                FieldError::invalid(
                    path,
                    sc.clone(),
                    "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
                )
                .with_rendered_value(rendered()),
            );
        }
        if let Some(caps) = object(sc, "capabilities") {
            for cap in super::util::strings(caps, "add") {
                if cap == "CAP_SYS_ADMIN" {
                    errs.push(
                        FieldError::invalid(
                            path,
                            sc.clone(),
                            "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
                        )
                        .with_rendered_value(rendered()),
                    );
                }
            }
        }
    }
    errs.extend(windows_options(
        sc.get("windowsOptions"),
        &path.child("windowsOptions"),
    ));
    errs.extend(apparmor_profile(
        sc.get("appArmorProfile"),
        &path.child("appArmorProfile"),
    ));
    errs
}

/// `validateSeccompProfileField`.
fn seccomp_profile(sp: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(sp) = sp.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let ty = text(sp, "type");
    match ty {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errs.push(FieldError::required(
            &path.child("type"),
            "type is required when seccompProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    let profile = opt_text(sp, "localhostProfile");
    if ty == "Localhost" {
        match profile {
            None => errs.push(FieldError::required(
                &path.child("localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(p) => errs.extend(local_descending_path(p, &path.child("localhostProfile"))),
        }
    } else if profile.is_some() {
        errs.push(
            FieldError::invalid(
                &path.child("localhostProfile"),
                sp.clone(),
                "can only be set when seccomp type is Localhost",
            )
            .with_rendered_value(go_struct("core.v1.SeccompProfile", sp)),
        );
    }
    errs
}

/// `ValidateAppArmorProfileField`.
fn apparmor_profile(profile: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(p) = profile.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let local = opt_text(p, "localhostProfile");
    match text(p, "type") {
        "Localhost" => match local {
            None => errs.push(FieldError::required(
                &path.child("localhostProfile"),
                "must be set when AppArmor type is Localhost",
            )),
            Some(l) => {
                if l.trim() != l {
                    errs.push(FieldError::invalid(
                        &path.child("localhostProfile"),
                        l,
                        "must not be padded with whitespace",
                    ));
                } else if l.is_empty() {
                    errs.push(FieldError::required(
                        &path.child("localhostProfile"),
                        "must be set when AppArmor type is Localhost",
                    ));
                }
                if l.len() > 4095 {
                    errs.push(FieldError::too_long(
                        &path.child("localhostProfile"),
                        "",
                        4095,
                    ));
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(l) = local {
                errs.push(FieldError::invalid(
                    &path.child("localhostProfile"),
                    l,
                    "can only be set when AppArmor type is Localhost",
                ));
            }
        }
        "" => errs.push(FieldError::required(
            &path.child("type"),
            "type is required when appArmorProfile is set",
        )),
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    errs
}

/// A NetBIOS domain: 1 to 15 characters, none of `\ / : * ? " < > |`, not starting with a dot.
fn is_netbios_domain(d: &str) -> bool {
    let bad = |c: char| matches!(c, '\\' | '/' | ':' | '*' | '?' | '"' | '<' | '>' | '|');
    let n = d.chars().count();
    (1..=15).contains(&n) && !d.starts_with('.') && !d.chars().any(bad)
}

/// A DNS domain of `[a-zA-Z0-9](-…){0,61}` labels separated by dots.
fn is_dns_domain(d: &str) -> bool {
    !d.is_empty()
        && d.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `validateWindowsSecurityContextOptions`.
fn windows_options(opts: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(o) = opts.filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if let Some(name) = opt_text(o, "gmsaCredentialSpecName") {
        errs.extend(
            is_dns1123_subdomain(name)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("gmsaCredentialSpecName"), name, m)),
        );
    }
    if let Some(spec) = opt_text(o, "gmsaCredentialSpec") {
        if spec.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("gmsaCredentialSpec"),
                spec,
                "gmsaCredentialSpec cannot be an empty string",
            ));
        } else if spec.len() > 64 * 1024 {
            errs.push(FieldError::invalid(
                &path.child("gmsaCredentialSpec"),
                spec,
                "gmsaCredentialSpec size must be under 64 KiB",
            ));
        }
    }
    if let Some(user) = opt_text(o, "runAsUserName") {
        let p = path.child("runAsUserName");
        let bad = |m: &str| FieldError::invalid(&p, user, m);
        let parts: Vec<&str> = user.split('\\').collect();
        if user.is_empty() {
            errs.push(bad("runAsUserName cannot be an empty string"));
        } else if user.chars().any(char::is_control) {
            errs.push(bad("runAsUserName cannot contain control characters"));
        } else if parts.len() > 2 {
            errs.push(bad("runAsUserName cannot contain more than one backslash"));
        } else {
            let (domain, name, has_domain) = match parts.as_slice() {
                [d, u] => (*d, *u, true),
                _ => ("", user, false),
            };
            if domain.len() >= 256 {
                errs.push(bad(
                    "runAsUserName's Domain length must be under 256 characters",
                ));
            }
            if has_domain && !(is_netbios_domain(domain) || is_dns_domain(domain)) {
                errs.push(bad(
                    "runAsUserName's Domain doesn't match the NetBios nor the DNS format",
                ));
            }
            if name.is_empty() {
                errs.push(bad("runAsUserName's User cannot be empty"));
            } else if name.len() > 104 {
                errs.push(bad(
                    "runAsUserName's User length must not be longer than 104 characters",
                ));
            }
            if !name.is_empty() && name.chars().all(|c| c == '.' || c == ' ') {
                errs.push(bad(
                    "runAsUserName's User cannot contain only periods or spaces",
                ));
            }
            if name.chars().any(|c| "\"/\\:;|=,+*?<>@[]".contains(c)) {
                errs.push(bad(
                    "runAsUserName's User cannot contain the following characters: \"/\\:;|=,+*?<>@[]",
                ));
            }
        }
    }
    errs
}

/// `validateWindowsHostProcessPod`: all containers or none are host processes, and host
/// process pods use the host network.
pub(super) fn validate_host_process(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pod_hp = spec
        .at("/securityContext/windowsOptions/hostProcess")
        .and_then(Value::as_bool);
    let (mut count, mut hp_count) = (0, 0);
    for (c, cp) in visit_containers(spec, path) {
        count += 1;
        let c_hp = c
            .at("/securityContext/windowsOptions/hostProcess")
            .and_then(Value::as_bool);
        if let (Some(p), Some(ch)) = (pod_hp, c_hp)
            && p != ch
        {
            errs.push(FieldError::invalid(
                &cp.child("securityContext")
                    .child("windowsOptions")
                    .child("hostProcess"),
                ch,
                format!("pod hostProcess value must be identical if both are specified, was {p}"),
            ));
        }
        if c_hp == Some(true) || (c_hp.is_none() && pod_hp == Some(true)) {
            hp_count += 1;
        }
    }
    if hp_count > 0 {
        if hp_count != count {
            errs.push(FieldError::invalid(
                path,
                "",
                "If pod contains any hostProcess containers then all containers must be HostProcess containers",
            ));
        }
        if !flag(spec, "hostNetwork") {
            errs.push(FieldError::invalid(
                &path.child("hostNetwork"),
                false,
                "hostNetwork must be true if pod contains any hostProcess containers",
            ));
        }
    }
    errs
}

/// `validateHostUsers`: a pod in its own user namespace shares no host namespace (v1.36's
/// words).
pub(super) fn validate_host_users(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    if spec.get("hostUsers").and_then(Value::as_bool) != Some(false) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    // Upstream names the internal struct's fields for the host PID and IPC namespaces
    // (`HostPID`, `HostIPC`), the JSON name for the network one.
    for (field, path_name) in [
        ("hostNetwork", "hostNetwork"),
        ("hostPID", "HostPID"),
        ("hostIPC", "HostIPC"),
    ] {
        if flag(spec, field) {
            errs.push(FieldError::forbidden(
                &path.child(path_name),
                "when `hostUsers` is false",
            ));
        }
    }
    // Volume devices can't be id-mapped (`AllowUserNamespacesWithVolumeDevices` is off for new
    // pods).
    for (c, cp) in super::util::visit_containers(spec, path) {
        if !super::util::list(c, "volumeDevices").is_empty() {
            errs.push(FieldError::forbidden(
                &cp.child("volumeDevices"),
                "when `hostUsers` is false",
            ));
        }
    }
    errs
}

/// `validatePodHostName`: a hostname override (HostnameOverride, beta and on in v1.36) is a
/// DNS subdomain of at most 64 bytes, not with `setHostnameAsFQDN` nor on the host's network.
pub(super) fn validate_hostname_override(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(name) = spec.get("hostnameOverride").and_then(Value::as_str) else {
        return Vec::new();
    };
    let p = path.child("hostnameOverride");
    let mut errs = Vec::new();
    if flag(spec, "setHostnameAsFQDN") {
        errs.push(FieldError::forbidden(
            &p,
            "may not be specified when setHostnameAsFQDN is true",
        ));
    }
    if flag(spec, "hostNetwork") {
        errs.push(FieldError::forbidden(
            &p,
            "may not be specified when hostNetwork is true",
        ));
    }
    if name.len() > 64 {
        errs.push(FieldError::too_long(&p, "", 64));
    }
    errs.extend(
        apimachinery::validation::is_dns1123_subdomain(name)
            .into_iter()
            .map(|m| FieldError::invalid(&p, name, m)),
    );
    errs
}

/// `validateOS`, then the rules of the OS it names.
pub(super) fn validate_os(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let Some(os) = object(spec, "os") else {
        return Vec::new();
    };
    let op = path.child("os");
    match text(os, "name") {
        "" => vec![FieldError::required(&op.child("name"), "")],
        "linux" => validate_linux(spec, path),
        "windows" => validate_windows(spec, path),
        other => vec![FieldError::not_supported(&op, other, &["linux", "windows"])],
    }
}

fn validate_linux(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    const MSG: &str = "windows options cannot be set for a linux pod";
    if spec
        .at("/securityContext/windowsOptions")
        .is_some_and(|w| !w.is_null())
    {
        errs.push(FieldError::forbidden(
            &path.child("securityContext").child("windowsOptions"),
            MSG,
        ));
    }
    for (c, cp) in visit_containers(spec, path) {
        if c.at("/securityContext/windowsOptions")
            .is_some_and(|w| !w.is_null())
        {
            errs.push(FieldError::forbidden(
                &cp.child("securityContext").child("windowsOptions"),
                MSG,
            ));
        }
    }
    errs
}

fn validate_windows(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    const MSG: &str = "cannot be set for a windows pod";
    let mut errs = Vec::new();
    let scp = path.child("securityContext");
    if let Some(sc) = object(spec, "securityContext") {
        let checks: [(bool, FieldPath); 15] = [
            (present(sc, "appArmorProfile"), scp.child("appArmorProfile")),
            (present(sc, "seLinuxOptions"), scp.child("seLinuxOptions")),
            (present(spec, "hostUsers"), path.child("hostUsers")),
            (flag(spec, "hostPID"), path.child("hostPID")),
            (flag(spec, "hostIPC"), path.child("hostIPC")),
            (present(sc, "seccompProfile"), scp.child("seccompProfile")),
            (present(sc, "fsGroup"), scp.child("fsGroup")),
            (
                present(sc, "fsGroupChangePolicy"),
                scp.child("fsGroupChangePolicy"),
            ),
            (
                !super::util::list(sc, "sysctls").is_empty(),
                scp.child("sysctls"),
            ),
            (
                present(spec, "shareProcessNamespace"),
                path.child("shareProcessNamespace"),
            ),
            (present(sc, "runAsUser"), scp.child("runAsUser")),
            (present(sc, "runAsGroup"), scp.child("runAsGroup")),
            (
                present(sc, "supplementalGroups"),
                scp.child("supplementalGroups"),
            ),
            (
                present(sc, "supplementalGroupsPolicy"),
                scp.child("supplementalGroupsPolicy"),
            ),
            (
                present(sc, "seLinuxChangePolicy"),
                scp.child("seLinuxChangePolicy"),
            ),
        ];
        for (set, p) in checks {
            if set {
                errs.push(FieldError::forbidden(&p, MSG));
            }
        }
    }
    for (c, cp) in visit_containers(spec, path) {
        let Some(sc) = object(c, "securityContext") else {
            continue;
        };
        let p = cp.child("securityContext");
        for field in [
            "appArmorProfile",
            "seLinuxOptions",
            "seccompProfile",
            "capabilities",
            "readOnlyRootFilesystem",
            "privileged",
            "allowPrivilegeEscalation",
            "procMount",
            "runAsUser",
            "runAsGroup",
        ] {
            if present(sc, field) {
                errs.push(FieldError::forbidden(&p.child(field), MSG));
            }
        }
    }
    errs
}

const MIRROR_POD: &str = "kubernetes.io/config.mirror";
const TOLERATIONS_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/tolerations";
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
pub(super) const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
pub(super) const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
pub(super) const APPARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `ValidatePodSpecificAnnotations` at `path` (the annotations' path).
pub(super) fn validate_pod_annotations(
    meta: &Value,
    spec: &Value,
    path: &FieldPath,
) -> Vec<FieldError> {
    let annotations = map(meta, "annotations");
    let get = |k: &str| annotations.get(k).and_then(Value::as_str);
    let mut errs = Vec::new();
    if let Some(v) = get(MIRROR_POD)
        && text(spec, "nodeName").is_empty()
    {
        errs.push(FieldError::invalid(
            &path.key(MIRROR_POD),
            v,
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    if let Some(t) = get(TOLERATIONS_ANNOTATION).filter(|t| !t.is_empty()) {
        match serde_json::from_str::<Value>(t) {
            Ok(Value::Array(list)) => {
                let holder = serde_json::json!({ "tolerations": list });
                errs.extend(super::scheduling::validate_tolerations(
                    &holder,
                    &path.child(TOLERATIONS_ANNOTATION),
                ));
            }
            Ok(Value::Null) => {}
            Ok(other) => errs.push(FieldError::invalid(
                path,
                TOLERATIONS_ANNOTATION,
                format!(
                    "json: cannot unmarshal {} into Go value of type []core.Toleration",
                    json_kind(&other)
                ),
            )),
            Err(e) => errs.push(FieldError::invalid(
                path,
                TOLERATIONS_ANNOTATION,
                e.to_string(),
            )),
        }
    }
    if let Some(v) = get(DELETION_COST)
        && !is_int32_string(v)
    {
        errs.push(FieldError::invalid(
            &path.key(DELETION_COST),
            v,
            "must be a 32bit integer",
        ));
    }
    if let Some(p) = get(SECCOMP_POD) {
        errs.extend(validate_seccomp_annotation(p, &path.child(SECCOMP_POD)));
    }
    for (k, v) in annotations {
        if k.starts_with(SECCOMP_CONTAINER_PREFIX) {
            errs.extend(validate_seccomp_annotation(
                v.as_str().unwrap_or(""),
                &path.child(k),
            ));
        }
    }
    let names: BTreeSet<&str> = visit_containers(spec, &FieldPath::new("spec"))
        .into_iter()
        .map(|(c, _)| text(c, "name"))
        .collect();
    for (k, v) in annotations {
        let Some(container) = k.strip_prefix(APPARMOR_PREFIX) else {
            continue;
        };
        if !names.contains(container) {
            errs.push(FieldError::invalid(
                &path.key(k),
                container,
                "container not found",
            ));
        }
        let profile = v.as_str().unwrap_or("");
        if !(profile.is_empty()
            || profile == "runtime/default"
            || profile == "unconfined"
            || profile.starts_with("localhost/"))
        {
            errs.push(FieldError::invalid(
                &path.key(k),
                profile,
                format!("invalid AppArmor profile name: {}", go_quote(profile)),
            ));
        }
    }
    errs
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Object(_) => "object",
        _ => "array",
    }
}

/// What `GetDeletionCostFromPodAnnotations` accepts: a 32-bit integer written canonically (no
/// `+`, no leading zeros).
fn is_int32_string(v: &str) -> bool {
    v.parse::<i32>().is_ok_and(|n| n.to_string() == v)
}

/// `ValidateSeccompProfile` of an annotation value.
fn validate_seccomp_annotation(p: &str, path: &FieldPath) -> Vec<FieldError> {
    if matches!(p, "runtime/default" | "docker/default" | "unconfined") {
        return Vec::new();
    }
    if let Some(rest) = p.strip_prefix("localhost/") {
        return local_descending_path(rest, path);
    }
    vec![FieldError::invalid(
        path,
        p,
        "must be a valid seccomp profile",
    )]
}

/// `validateSeccompAnnotationsAndFieldsMatch`.
fn seccomp_match(annotation: &str, field: &Value, path: &FieldPath) -> Option<FieldError> {
    let mismatch = || {
        Some(FieldError::forbidden(
            &path.child("type"),
            "seccomp type in annotation and field must match",
        ))
    };
    match text(field, "type") {
        "Unconfined" if annotation != "unconfined" => mismatch(),
        "RuntimeDefault" if !matches!(annotation, "runtime/default" | "docker/default") => {
            mismatch()
        }
        "Localhost" => match annotation.strip_prefix("localhost/") {
            None => mismatch(),
            Some(rest) if opt_text(field, "localhostProfile") != Some(rest) => {
                Some(FieldError::forbidden(
                    &path.child("localhostProfile"),
                    "seccomp profile in annotation and field must match",
                ))
            }
            Some(_) => None,
        },
        _ => None,
    }
}

/// `validateSeccompAnnotationsAndFields` and `validateAppArmorAnnotationsAndFieldsMatchOnCreate`
/// at `spec_path`.
pub(super) fn validate_annotations_match_fields(
    meta: &Value,
    spec: &Value,
    spec_path: &FieldPath,
) -> Vec<FieldError> {
    let annotations = map(meta, "annotations");
    let get = |k: &str| annotations.get(k).and_then(Value::as_str);
    let mut errs = Vec::new();
    if let Some(field) = spec
        .at("/securityContext/seccompProfile")
        .filter(|v| v.is_object())
        && let Some(a) = get(SECCOMP_POD)
    {
        errs.extend(seccomp_match(
            a,
            field,
            &spec_path.child("securityContext").child("seccompProfile"),
        ));
    }
    for (c, cp) in visit_containers(spec, spec_path) {
        let Some(field) = c
            .at("/securityContext/seccompProfile")
            .filter(|v| v.is_object())
        else {
            continue;
        };
        if let Some(a) = get(&format!("{SECCOMP_CONTAINER_PREFIX}{}", text(c, "name"))) {
            errs.extend(seccomp_match(
                a,
                field,
                &cp.child("securityContext").child("seccompProfile"),
            ));
        }
    }
    if spec.at("/os/name").and_then(Value::as_str) == Some("windows") {
        return errs;
    }
    let pod_profile = spec
        .at("/securityContext/appArmorProfile")
        .filter(|v| v.is_object());
    for (c, cp) in visit_containers(spec, spec_path) {
        let profile = c
            .at("/securityContext/appArmorProfile")
            .filter(|v| v.is_object())
            .or(pod_profile);
        let Some(profile) = profile else { continue };
        let Some(a) = get(&format!("{APPARMOR_PREFIX}{}", text(c, "name"))) else {
            continue;
        };
        let ap = cp.child("securityContext").child("appArmorProfile");
        let type_mismatch = || {
            FieldError::forbidden(
                &ap.child("type"),
                "apparmor type in annotation and field must match",
            )
        };
        match text(profile, "type") {
            "Unconfined" if a != "unconfined" => errs.push(type_mismatch()),
            "RuntimeDefault" if a != "runtime/default" => errs.push(type_mismatch()),
            "Localhost" => match a.strip_prefix("localhost/") {
                None => errs.push(type_mismatch()),
                Some(rest) if opt_text(profile, "localhostProfile") != Some(rest) => {
                    errs.push(FieldError::forbidden(
                        &ap.child("localhostProfile"),
                        "apparmor profile in annotation and field must match",
                    ));
                }
                Some(_) => {}
            },
            _ => {}
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn security_rules_in_upstreams_words() {
        let errs = validate_security_context(
            Some(
                &json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}),
            ),
            &FieldPath::new("c"),
            true,
        );
        assert_eq!(
            errs[0].to_string(),
            r#"c.seccompProfile.localhostProfile: Invalid value: {"Type":"RuntimeDefault","LocalhostProfile":"p.json"}: can only be set when seccomp type is Localhost"#
        );
        let spec = json!({"os": {"name": "windows"}, "securityContext": {"seLinuxOptions": {"level": "s0"}}});
        assert_eq!(
            validate_os(&spec, &FieldPath::new("spec"))[0].to_string(),
            "spec.securityContext.seLinuxOptions: Forbidden: cannot be set for a windows pod"
        );
        let spec = json!({"hostUsers": false, "hostNetwork": true});
        assert_eq!(
            validate_host_users(&spec, &FieldPath::new("spec"))[0].to_string(),
            "spec.hostNetwork: Forbidden: when `hostUsers` is false"
        );
        assert!(is_valid_sysctl_name("net.ipv4.ip_forward"));
        assert!(is_valid_sysctl_name("kernel/shm_rmid_forced"));
        assert!(!is_valid_sysctl_name("Net.x"));
        assert!(is_int32_string("-5") && !is_int32_string("+5") && !is_int32_string("007"));
    }
}
