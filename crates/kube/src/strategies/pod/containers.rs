//! Containers as upstream validates them (pkg/apis/core/validation `validateContainers`,
//! `validateInitContainers`, `validateEphemeralContainers`, `validateContainerCommon`): name,
//! image, termination message policy, ports, environment, mounts, devices, pull policy,
//! resources, resize policy and security context for every kind of container; then the rules of
//! each kind (probes and lifecycle handlers for regular containers and sidecars, restart policy
//! of init containers, the short list of fields an ephemeral container may set).

use std::collections::BTreeSet;

use apimachinery::object::JsonPointer;
use apimachinery::validation::{
    FieldError, FieldPath, is_config_map_key, is_dns1123_label, is_http_header_name,
    is_relaxed_env_var_name, is_valid_port_name, is_valid_port_num, validate_nonnegative_field,
};
use serde_json::Value;

use super::resources::{Level, validate_requirements};
use super::security::validate_security_context;
use super::util::{flag, int, items, object, opt_int, present, text};
use super::volumes::{
    VolumeMap, local_descending_path, no_backsteps, object_field_selector, resource_field_selector,
};

/// What every container check needs to know about its pod.
pub(super) struct PodContext<'a> {
    pub volumes: &'a VolumeMap<'a>,
    pub claims: &'a BTreeSet<String>,
    pub grace_period: Option<i64>,
    pub restart_policy: &'a str,
    pub host_users: bool,
}

/// `validateContainers`: regular containers; at least one.
pub(super) fn validate_containers(
    spec: &Value,
    ctx: &PodContext,
    path: &FieldPath,
) -> Vec<FieldError> {
    let containers = super::util::list(spec, "containers");
    if containers.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_common(c, ctx, &p));
        let name = text(c, "name");
        if !names.insert(name) {
            errs.push(FieldError::duplicate(&p.child("name"), name));
        }
        errs.extend(validate_handlers_and_probes(c, ctx, &p));
        // ContainerRestartRules (beta, on in v1.36): a regular container may set its own
        // restart policy and rules.
        errs.extend(validate_container_restart_policy(c, &p));
    }
    errs.extend(host_port_conflicts(containers, path));
    errs
}

/// Lifecycle hooks and probes, for regular containers and sidecars.
fn validate_handlers_and_probes(c: &Value, ctx: &PodContext, p: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(l) = object(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = object(l, hook) {
                errs.extend(validate_handler(
                    h,
                    ctx,
                    &p.child("lifecycle").child(hook),
                    true,
                ));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(pr) = object(c, probe) {
            errs.extend(validate_probe(pr, ctx, &p.child(probe), probe));
        }
    }
    errs
}

/// `validateInitContainers`: names unique among regular and init containers, restart policy
/// `Always` (a sidecar) or none, and hooks and probes only for sidecars.
pub(super) fn validate_init_containers(
    spec: &Value,
    ctx: &PodContext,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: BTreeSet<&str> = items(spec, "containers")
        .map(|(_, c)| text(c, "name"))
        .collect();
    for (i, c) in items(spec, "initContainers") {
        let p = path.index(i);
        errs.extend(validate_common(c, ctx, &p));
        // `validateInitContainerRestartPolicy` with ContainerRestartRules and
        // RestartAllContainersOnContainerExits (both on in v1.36): any container restart policy,
        // with rules, sidecars included.
        let policy = c.get("restartPolicy").and_then(Value::as_str);
        if policy.is_some() {
            errs.extend(validate_container_restart_policy(c, &p));
        } else if !super::util::list(c, "restartPolicyRules").is_empty() {
            errs.push(FieldError::required(
                &p.child("restartPolicy"),
                "must specify restartPolicy when restart rules are used",
            ));
        }
        let sidecar = policy == Some("Always");
        let name = text(c, "name");
        if names.contains(name) {
            errs.push(FieldError::duplicate(&p.child("name"), name));
        } else if !name.is_empty() {
            names.insert(name);
        }
        // Each init container runs alone: its ports conflict only among themselves (and
        // upstream reports them at index 0, the container's index in a one-element list).
        errs.extend(host_port_conflicts(std::slice::from_ref(c), path));
        if sidecar {
            errs.extend(validate_handlers_and_probes(c, ctx, &p));
        } else {
            for field in [
                "lifecycle",
                "livenessProbe",
                "readinessProbe",
                "startupProbe",
            ] {
                if present(c, field) {
                    errs.push(FieldError::forbidden(
                        &p.child(field),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
        // A non-sidecar init container runs once: no resize may restart it (new pods have
        // no `AllowExistingRestartContainerForNonSidecarInitContainer`).
        if !sidecar {
            for (j, rp) in items(c, "resizePolicy") {
                let policy = text(rp, "restartPolicy");
                if policy == "RestartContainer" {
                    errs.push(FieldError::invalid(
                        &p.child("resizePolicy").index(j).child("restartPolicy"),
                        policy,
                        "must not be set to 'RestartContainer' for non-sidecar initContainers",
                    ));
                }
            }
        }
    }
    errs
}

/// `validateContainerRestartPolicy`: a container restart policy of `Always`, `Never` or
/// `OnFailure` (required with rules), at most 20 rules, each with a supported action
/// (`RestartAllContainers` too, RestartAllContainersOnContainerExits being on) and exit codes
/// (`In`/`NotIn`, at most 255 values).
fn validate_container_restart_policy(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules = super::util::list(c, "restartPolicyRules");
    let policy_path = path.child("restartPolicy");
    match c.get("restartPolicy").and_then(Value::as_str) {
        None if rules.is_empty() => return errs,
        None => errs.push(FieldError::required(
            &policy_path,
            "must specify restartPolicy when restart rules are used",
        )),
        Some("Always" | "Never" | "OnFailure") => {}
        Some(other) => errs.push(FieldError::not_supported(
            &policy_path,
            other,
            &["Always", "Never", "OnFailure"],
        )),
    }
    let rules_path = path.child("restartPolicyRules");
    if rules.len() > 20 {
        errs.push(FieldError::too_many(
            &rules_path,
            Some(rules.len() as i64),
            Some(20),
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = rules_path.index(i);
        let action = text(rule, "action");
        if !matches!(action, "Restart" | "RestartAllContainers") {
            errs.push(FieldError::not_supported(
                &rp.child("action"),
                action,
                &["Restart", "RestartAllContainers"],
            ));
        }
        match object(rule, "exitCodes") {
            Some(codes) => {
                let cp = rp.child("exitCodes");
                let op = text(codes, "operator");
                if !matches!(op, "In" | "NotIn") {
                    errs.push(FieldError::not_supported(
                        &cp.child("operator"),
                        op,
                        &["In", "NotIn"],
                    ));
                }
                let values = super::util::list(codes, "values");
                if values.len() > 255 {
                    errs.push(FieldError::too_many(
                        &cp.child("values"),
                        Some(values.len() as i64),
                        Some(255),
                    ));
                }
            }
            None => errs.push(FieldError::required(
                &rp.child("exitCodes"),
                "must be specified",
            )),
        }
    }
    errs
}

/// The fields of `EphemeralContainerCommon` in Go's order, and whether an ephemeral container
/// may set them (upstream's `allowedEphemeralContainerFields`; fields it does not list are
/// refused too).
const EPHEMERAL_FIELDS: &[(&str, bool)] = &[
    ("name", true),
    ("image", true),
    ("command", true),
    ("args", true),
    ("workingDir", true),
    ("ports", false),
    ("envFrom", true),
    ("env", true),
    ("resources", false),
    ("resizePolicy", false),
    ("restartPolicy", false),
    ("restartPolicyRules", false),
    ("volumeMounts", true),
    ("volumeDevices", true),
    ("livenessProbe", false),
    ("readinessProbe", false),
    ("startupProbe", false),
    ("lifecycle", false),
    ("terminationMessagePath", true),
    ("terminationMessagePolicy", true),
    ("imagePullPolicy", true),
    ("securityContext", true),
    ("stdin", true),
    ("stdinOnce", true),
    ("tty", true),
];

/// Whether a JSON value differs from its Go zero value (an empty struct is zero, an empty but
/// present map or list is not).
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) => true,
        Value::Object(o) => o.values().any(|x| !x.is_null()),
    }
}

/// `validateEphemeralContainers`.
pub(super) fn validate_ephemeral_containers(
    spec: &Value,
    ctx: &PodContext,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let others: BTreeSet<&str> = items(spec, "containers")
        .chain(items(spec, "initContainers"))
        .map(|(_, c)| text(c, "name"))
        .collect();
    let mut all = others.clone();
    for (i, ec) in items(spec, "ephemeralContainers") {
        let p = path.index(i);
        errs.extend(validate_common(ec, ctx, &p));
        errs.extend(image_whitespace(ec, &p));
        let name = text(ec, "name");
        if !all.insert(name) {
            errs.push(FieldError::duplicate(&p.child("name"), name));
        }
        let target = text(ec, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            errs.push(FieldError::not_found(
                &p.child("targetContainerName"),
                target,
            ));
        }
        for (field, allowed) in EPHEMERAL_FIELDS {
            if !allowed && ec.get(*field).is_some_and(is_set) {
                errs.push(FieldError::forbidden(
                    &p.child(field),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        for (j, m) in items(ec, "volumeMounts") {
            for field in ["subPath", "subPathExpr"] {
                if !text(m, field).is_empty() {
                    errs.push(FieldError::forbidden(
                        &p.child("volumeMounts").index(j).child(field),
                        "cannot be set for an Ephemeral Container",
                    ));
                }
            }
        }
    }
    errs
}

/// `validateContainerOnlyForPod`: pods (not templates) refuse an image with surrounding spaces.
pub(super) fn image_whitespace(c: &Value, path: &FieldPath) -> Option<FieldError> {
    let image = text(c, "image");
    (image.len() != image.trim().len()).then(|| {
        FieldError::invalid(
            &path.child("image"),
            image,
            "must not have leading or trailing whitespace",
        )
    })
}

/// `validateContainerCommon`, in upstream's order.
fn validate_common(c: &Value, ctx: &PodContext, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = text(c, "name");
    let name_path = path.child("name");
    if name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        errs.extend(
            is_dns1123_label(name)
                .into_iter()
                .map(|m| FieldError::invalid(&name_path, name, m)),
        );
    }
    if text(c, "image").is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    }
    match text(c, "terminationMessagePolicy") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            &path.child("terminationMessagePolicy"),
            "",
        )),
        other => errs.push(FieldError::not_supported(
            &path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    errs.extend(validate_ports(c, &path.child("ports")));
    errs.extend(validate_env(c, &path.child("env")));
    errs.extend(validate_env_from(c, &path.child("envFrom")));
    errs.extend(validate_mounts(c, ctx.volumes, &path.child("volumeMounts")));
    errs.extend(validate_devices(
        c,
        ctx.volumes,
        &path.child("volumeDevices"),
    ));
    errs.extend(validate_pull_policy(
        text(c, "imagePullPolicy"),
        &path.child("imagePullPolicy"),
    ));
    errs.extend(validate_requirements(
        c.get("resources"),
        Level::Container,
        ctx.claims,
        &path.child("resources"),
    ));
    errs.extend(validate_resize_policy(
        c,
        ctx.restart_policy,
        &path.child("resizePolicy"),
    ));
    errs.extend(validate_security_context(
        c.get("securityContext"),
        &path.child("securityContext"),
        ctx.host_users,
    ));
    errs
}

/// `validatePullPolicy`.
pub(super) fn validate_pull_policy(policy: &str, path: &FieldPath) -> Vec<FieldError> {
    match policy {
        "Always" | "IfNotPresent" | "Never" => Vec::new(),
        "" => vec![FieldError::required(path, "")],
        other => vec![FieldError::not_supported(
            path,
            other,
            &["Always", "IfNotPresent", "Never"],
        )],
    }
}

/// `validateResizePolicy`.
fn validate_resize_policy(c: &Value, pod_restart: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, p) in items(c, "resizePolicy") {
        let name = text(p, "resourceName");
        if !seen.insert(name) {
            errs.push(FieldError::duplicate(&path.index(i), name));
        }
        match name {
            "cpu" | "memory" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(path, other, &["cpu", "memory"])),
        }
        let policy = text(p, "restartPolicy");
        match policy {
            "NotRequired" | "RestartContainer" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(
                path,
                other,
                &["NotRequired", "RestartContainer"],
            )),
        }
        if pod_restart == "Never" && policy != "NotRequired" {
            errs.push(FieldError::invalid(
                path,
                policy,
                "must be 'NotRequired' when pod `restartPolicy` is 'Never'",
            ));
        }
    }
    errs
}

/// `validateProbe` and the rules of each kind of probe.
fn validate_probe(
    probe: &Value,
    ctx: &PodContext,
    path: &FieldPath,
    which: &str,
) -> Vec<FieldError> {
    let mut errs = validate_handler(probe, ctx, path, false);
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        errs.extend(validate_nonnegative_field(
            int(probe, field),
            &path.child(field),
        ));
    }
    let grace = opt_int(probe, "terminationGracePeriodSeconds");
    if let Some(g) = grace
        && g <= 0
    {
        errs.push(FieldError::invalid(
            &path.child("terminationGracePeriodSeconds"),
            g,
            "must be greater than 0",
        ));
    }
    match which {
        "readinessProbe" => {
            if let Some(g) = grace {
                errs.push(FieldError::invalid(
                    &path.child("terminationGracePeriodSeconds"),
                    g,
                    "must not be set for readinessProbes",
                ));
            }
        }
        _ => {
            let success = int(probe, "successThreshold");
            if success != 1 {
                errs.push(FieldError::invalid(
                    &path.child("successThreshold"),
                    success,
                    "must be 1",
                ));
            }
        }
    }
    errs
}

/// `validateHandler`: exactly one action; `sleep` only in lifecycle hooks.
fn validate_handler(
    h: &Value,
    ctx: &PodContext,
    path: &FieldPath,
    lifecycle: bool,
) -> Vec<FieldError> {
    let kinds: &[&str] = if lifecycle {
        &["exec", "httpGet", "tcpSocket", "sleep"]
    } else {
        &["exec", "httpGet", "tcpSocket", "grpc"]
    };
    let mut errs = Vec::new();
    let mut n = 0;
    for kind in kinds {
        let Some(action) = object(h, kind) else {
            continue;
        };
        let p = path.child(kind);
        if n > 0 {
            errs.push(FieldError::forbidden(
                &p,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        n += 1;
        match *kind {
            "exec" => {
                if super::util::list(action, "command").is_empty() {
                    errs.push(FieldError::required(&p.child("command"), ""));
                }
            }
            "httpGet" => {
                if text(action, "path").is_empty() {
                    errs.push(FieldError::required(&p.child("path"), ""));
                }
                errs.extend(port_num_or_name(action.get("port"), &p.child("port")));
                let scheme = text(action, "scheme");
                if !matches!(scheme, "HTTP" | "HTTPS") {
                    errs.push(FieldError::not_supported(
                        &p.child("scheme"),
                        scheme,
                        &["HTTP", "HTTPS"],
                    ));
                }
                for (_, header) in items(action, "httpHeaders") {
                    let name = text(header, "name");
                    for m in is_http_header_name(name) {
                        errs.push(FieldError::invalid(&p.child("httpHeaders"), name, m));
                    }
                }
            }
            "tcpSocket" => errs.extend(port_num_or_name(action.get("port"), &p.child("port"))),
            "grpc" => {
                let port = int(action, "port");
                errs.extend(
                    is_valid_port_num(port)
                        .into_iter()
                        .map(|m| FieldError::invalid(&p.child("port"), port, m)),
                );
            }
            _ => {
                // sleep: zero is allowed (PodLifecycleSleepActionAllowZero is on in v1.36).
                let secs = int(action, "seconds");
                if let Some(g) = ctx.grace_period
                    && (secs < 0 || secs > g)
                {
                    errs.push(FieldError::invalid(
                        &p,
                        secs,
                        format!(
                            "must be non-negative and less than terminationGracePeriodSeconds ({g})"
                        ),
                    ));
                }
            }
        }
    }
    if n == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    errs
}

/// `ValidatePortNumOrName`: a number in range, or a port name. An absent port is the number 0.
pub(super) fn port_num_or_name(port: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    match port {
        Some(Value::String(name)) => is_valid_port_name(name)
            .into_iter()
            .map(|m| FieldError::invalid(path, name.as_str(), m))
            .collect(),
        other => {
            let n = other.and_then(Value::as_i64).unwrap_or(0);
            is_valid_port_num(n)
                .into_iter()
                .map(|m| FieldError::invalid(path, n, m))
                .collect()
        }
    }
}

/// `validateContainerPorts`.
fn validate_ports(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in items(c, "ports") {
        let p = path.index(i);
        let name = text(port, "name");
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                errs.extend(
                    msgs.into_iter()
                        .map(|m| FieldError::invalid(&p.child("name"), name, m)),
                );
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        let container_port = int(port, "containerPort");
        if container_port == 0 {
            errs.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            errs.extend(
                is_valid_port_num(container_port)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("containerPort"), container_port, m)),
            );
        }
        let host_port = int(port, "hostPort");
        if host_port != 0 {
            errs.extend(
                is_valid_port_num(host_port)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("hostPort"), host_port, m)),
            );
        }
        match text(port, "protocol") {
            "" => errs.push(FieldError::required(&p.child("protocol"), "")),
            "TCP" | "UDP" | "SCTP" => {}
            other => errs.push(FieldError::not_supported(
                &p.child("protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    errs
}

/// `checkHostPortConflicts`: one host port per protocol and host IP across `containers`.
fn host_port_conflicts(containers: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in items(c, "ports") {
            let host_port = int(port, "hostPort");
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host_port}",
                text(port, "protocol"),
                text(port, "hostIP")
            );
            if seen.contains(&key) {
                errs.push(FieldError::duplicate(
                    &path.index(ci).child("ports").index(pi).child("hostPort"),
                    key,
                ));
            } else {
                seen.insert(key);
            }
        }
    }
    errs
}

/// The pod fields an environment variable may read (`validEnvDownwardAPIFieldPathExpressions`).
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `ValidateEnv` with the relaxed names of v1.36.
fn validate_env(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut sorted_fields: Vec<&str> = ENV_FIELD_PATHS.to_vec();
    sorted_fields.sort_unstable();
    for (i, env) in items(c, "env") {
        let p = path.index(i);
        let name = text(env, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            errs.extend(
                is_relaxed_env_var_name(name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("name"), name, m)),
            );
        }
        let Some(from) = object(env, "valueFrom") else {
            continue;
        };
        let fp = p.child("valueFrom");
        let mut sources = 0;
        if let Some(f) = object(from, "fieldRef") {
            sources += 1;
            errs.extend(object_field_selector(
                f,
                &sorted_fields,
                &fp.child("fieldRef"),
            ));
        }
        if let Some(r) = object(from, "resourceFieldRef") {
            sources += 1;
            errs.extend(resource_field_selector(
                r,
                &fp.child("resourceFieldRef"),
                false,
            ));
        }
        for kind in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(s) = object(from, kind) {
                sources += 1;
                errs.extend(key_selector(s, &fp.child(kind)));
            }
        }
        if let Some(f) = object(from, "fileKeyRef") {
            sources += 1;
            errs.extend(file_key_selector(f, &fp.child("fileKeyRef")));
        }
        if sources == 0 {
            // v1.36 turns on `AllowEnvFilesValidation` (EnvFiles is beta, on), which names
            // `fileKeyRef` among the choices.
            errs.push(FieldError::invalid(
                &fp,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`",
            ));
        } else if !text(env, "value").is_empty() {
            errs.push(FieldError::invalid(
                &fp,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                &fp,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

/// `validateFileKeySelector`: a relaxed environment variable name as key, a DNS label as volume
/// name, a path without backsteps.
fn file_key_selector(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let key = text(s, "key");
    if key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    } else {
        errs.extend(
            is_relaxed_env_var_name(key)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("key"), key, m)),
        );
    }
    let volume = text(s, "volumeName");
    if volume.is_empty() {
        errs.push(FieldError::required(&path.child("volumeName"), ""));
    } else {
        errs.extend(
            is_dns1123_label(volume)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("volumeName"), volume, m)),
        );
    }
    let file = text(s, "path");
    if file.is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    } else {
        errs.extend(no_backsteps(file, &path.child("path")));
    }
    errs
}

/// `validateFileKeyRefVolumes`: an environment variable read from a file names one of the
/// pod's volumes, an `emptyDir` (checked after the rest of the spec).
pub(super) fn file_key_ref_volumes(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let volumes: Vec<(&str, &Value)> = items(spec, "volumes")
        .map(|(_, v)| (text(v, "name"), v))
        .collect();
    for (c, cp) in super::util::visit_containers(spec, path) {
        for (j, env) in items(c, "env") {
            let Some(f) = env.at("/valueFrom/fileKeyRef").filter(|f| f.is_object()) else {
                continue;
            };
            let name = text(f, "volumeName");
            let vp = cp
                .child("env")
                .index(j)
                .child("valueFrom")
                .child("fileKeyRef")
                .child("volumeName");
            // Go keeps the last volume of a name in its map.
            match volumes.iter().rev().find(|(n, _)| *n == name) {
                None => errs.push(FieldError::not_found(&vp, name)),
                Some((_, v)) if object(v, "emptyDir").is_none() => errs.push(FieldError::invalid(
                    &vp,
                    name,
                    "referenced volume must be of type emptyDir",
                )),
                Some(_) => {}
            }
        }
    }
    errs
}

/// `validateConfigMapKeySelector` / `validateSecretKeySelector`.
fn key_selector(s: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = text(s, "name");
    errs.extend(
        apimachinery::validation::NameValidator::Dns1123Subdomain
            .validate(name, false)
            .into_iter()
            .map(|m| FieldError::invalid(&path.child("name"), name, m)),
    );
    let key = text(s, "key");
    if key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    } else {
        errs.extend(
            is_config_map_key(key)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("key"), key, m)),
        );
    }
    errs
}

/// `ValidateEnvFrom`.
fn validate_env_from(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in items(c, "envFrom") {
        let p = path.index(i);
        let prefix = text(ev, "prefix");
        if !prefix.is_empty() {
            errs.extend(
                is_relaxed_env_var_name(prefix)
                    .into_iter()
                    .map(|m| FieldError::invalid(&p.child("prefix"), prefix, m)),
            );
        }
        let mut sources = 0;
        for kind in ["configMapRef", "secretRef"] {
            let Some(r) = object(ev, kind) else { continue };
            sources += 1;
            let name = text(r, "name");
            let np = p.child(kind).child("name");
            if name.is_empty() {
                errs.push(FieldError::required(&np, ""));
            } else {
                errs.extend(
                    apimachinery::validation::NameValidator::Dns1123Subdomain
                        .validate(name, true)
                        .into_iter()
                        .map(|m| FieldError::invalid(&np, name, m)),
                );
            }
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            ));
        }
    }
    errs
}

/// `ValidateVolumeMounts`. Some paths are not indexed (`volumeMounts.subPath`), as upstream's.
fn validate_mounts(c: &Value, volumes: &VolumeMap, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = BTreeSet::new();
    let devices: Vec<(&str, &str)> = items(c, "volumeDevices")
        .map(|(_, d)| (text(d, "name"), text(d, "devicePath")))
        .collect();
    let privileged = c
        .get("securityContext")
        .is_some_and(|s| flag(s, "privileged"));
    for (i, m) in items(c, "volumeMounts") {
        let p = path.index(i);
        let name = text(m, "name");
        let mount_path = text(m, "mountPath");
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        }
        if !volumes.contains_key(name) {
            errs.push(FieldError::not_found(&p.child("name"), name));
        }
        if mount_path.is_empty() {
            errs.push(FieldError::required(&p.child("mountPath"), ""));
        }
        if !mount_points.insert(mount_path) {
            errs.push(FieldError::invalid(
                &p.child("mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        if devices.iter().any(|(n, _)| *n == name) {
            errs.push(FieldError::invalid(
                &p.child("name"),
                name,
                "must not already exist in volumeDevices",
            ));
        }
        if devices.iter().any(|(_, d)| *d == mount_path) {
            errs.push(FieldError::invalid(
                &p.child("mountPath"),
                mount_path,
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = text(m, "subPath");
        let sub_expr = text(m, "subPathExpr");
        if volumes.get(name).is_some_and(|v| present(v, "image")) {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("subPath"),
                    sub_path,
                    "not allowed in image volume sources",
                ));
            }
            if !sub_expr.is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("subPathExpr"),
                    sub_expr,
                    "not allowed in image volume sources",
                ));
            }
        }
        if !sub_path.is_empty() {
            errs.extend(local_descending_path(sub_path, &path.child("subPath")));
        }
        if !sub_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("subPathExpr"),
                    sub_expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            errs.extend(local_descending_path(sub_expr, &path.child("subPathExpr")));
        }
        let propagation = m.get("mountPropagation").and_then(Value::as_str);
        if let Some(prop) = propagation {
            let pp = path.child("mountPropagation");
            if !matches!(prop, "Bidirectional" | "HostToContainer" | "None") {
                errs.push(FieldError::not_supported(
                    &pp,
                    prop,
                    &["Bidirectional", "HostToContainer", "None"],
                ));
            }
            if prop == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &pp,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
        if let Some(rro) = m.get("recursiveReadOnly").and_then(Value::as_str) {
            let rp = path.child("recursiveReadOnly");
            match rro {
                "Disabled" => {}
                "Enabled" | "IfPossible" => {
                    if !flag(m, "readOnly") {
                        errs.push(FieldError::forbidden(
                            &rp,
                            "may only be specified when readOnly is true",
                        ));
                    }
                    if propagation.is_some_and(|p| p != "None") {
                        errs.push(FieldError::forbidden(
                            &rp,
                            "may only be specified when mountPropagation is None or not specified",
                        ));
                    }
                }
                other => errs.push(FieldError::not_supported(
                    &rp,
                    other,
                    &["Disabled", "Enabled", "IfPossible"],
                )),
            }
        }
    }
    errs
}

/// `ValidateVolumeDevices`: block devices come from claims (or generic ephemeral volumes).
fn validate_devices(c: &Value, volumes: &VolumeMap, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mounts: Vec<(&str, &str)> = items(c, "volumeMounts")
        .map(|(_, m)| (text(m, "name"), text(m, "mountPath")))
        .collect();
    let mut paths = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, d) in items(c, "volumeDevices") {
        let p = path.index(i);
        let name = text(d, "name");
        let dev_path = text(d, "devicePath");
        let source = volumes.get(name);
        let is_pvc =
            source.is_some_and(|v| present(v, "persistentVolumeClaim") || present(v, "ephemeral"));
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        }
        if names.contains(name) {
            errs.push(FieldError::invalid(
                &p.child("name"),
                name,
                "must be unique",
            ));
        }
        if source.is_some() && !is_pvc {
            errs.push(FieldError::invalid(
                &p.child("name"),
                name,
                "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            ));
        }
        if source.is_none() {
            errs.push(FieldError::not_found(&p.child("name"), name));
        }
        if dev_path.is_empty() {
            errs.push(FieldError::required(&p.child("devicePath"), ""));
        }
        if paths.contains(dev_path) {
            errs.push(FieldError::invalid(
                &p.child("devicePath"),
                dev_path,
                "must be unique",
            ));
        }
        if !dev_path.is_empty() && !no_backsteps(dev_path, &p).is_empty() {
            errs.push(FieldError::invalid(
                &p.child("devicePath"),
                dev_path,
                "can not contain backsteps ('..')",
            ));
        } else {
            paths.insert(dev_path);
        }
        if mounts.iter().any(|(n, _)| *n == name) {
            errs.push(FieldError::invalid(
                &p.child("name"),
                name,
                "must not already exist in volumeMounts",
            ));
        }
        if mounts.iter().any(|(_, m)| *m == dev_path) {
            errs.push(FieldError::invalid(
                &p.child("devicePath"),
                dev_path,
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !name.is_empty() {
            names.insert(name);
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(spec: Value) -> Vec<String> {
        let (vols, _) = super::super::volumes::validate_volumes(&spec, None, &FieldPath::new("v"));
        let claims = BTreeSet::new();
        let ctx = PodContext {
            volumes: &vols,
            claims: &claims,
            grace_period: Some(30),
            restart_policy: "Always",
            host_users: true,
        };
        let path = FieldPath::new("spec");
        let mut errs = validate_containers(&spec, &ctx, &path.child("containers"));
        errs.extend(validate_init_containers(
            &spec,
            &ctx,
            &path.child("initContainers"),
        ));
        errs.iter().map(ToString::to_string).collect()
    }

    fn c(extra: Value) -> Value {
        let mut base = json!({"name": "c", "image": "i", "imagePullPolicy": "Always",
            "terminationMessagePolicy": "File"});
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    }

    #[test]
    fn container_rules_answer_in_upstreams_words() {
        let cases = [
            (
                json!({"containers": [c(json!({}))], "initContainers": [c(json!({}))]}),
                r#"spec.initContainers[0].name: Duplicate value: "c""#,
            ),
            (
                json!({"containers": [c(json!({"ports": [{"containerPort": 70000, "protocol": "TCP"}]}))]}),
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                json!({"containers": [c(json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}, "secretKeyRef": {"name": "s", "key": "k"}}}]}))]}),
                r#"spec.containers[0].env[0].valueFrom: Invalid value: "": may not have more than one field specified at a time"#,
            ),
            (
                json!({"containers": [c(json!({"livenessProbe": {"exec": {"command": ["x"]}, "tcpSocket": {"port": 80}, "successThreshold": 1}}))]}),
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            ),
            (
                json!({"containers": [c(json!({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}))]}),
                r#"spec.containers[0].volumeMounts[0].name: Not found: "nope""#,
            ),
            (
                json!({"containers": [c(json!({"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]})),
                                      c(json!({"name": "b", "ports": [{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}]}))]}),
                r#"spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080""#,
            ),
            (
                json!({"containers": [c(json!({}))], "initContainers": [c(json!({"name": "i", "startupProbe": {"exec": {"command": ["x"]}}}))]}),
                "spec.initContainers[0].startupProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(messages(spec.clone()), vec![expected.to_string()], "{spec}");
        }
    }
}
