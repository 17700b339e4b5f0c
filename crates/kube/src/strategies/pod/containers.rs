//! Container validation as upstream's `validateContainers` / `validateInitContainers` have it
//! (pkg/apis/core/validation), in upstream's order per container: name (an RFC 1123 label,
//! unique across regular and init containers), image, probes, ports, environment, pull policy.
//! What is not here yet (lifecycle handlers, volume mounts, resources, security contexts, the
//! pod-level rules) is issue 7's remaining work; this module must not refuse what upstream
//! accepts.

use std::collections::BTreeSet;

use apimachinery::validation::{
    FieldError, FieldPath, is_dns1123_label, is_relaxed_env_var_name, is_valid_port_name,
    is_valid_port_num, validate_nonnegative_field,
};
use serde_json::Value;

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

fn items<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    v.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// The containers and init containers of a pod spec at `path`.
pub fn validate_containers(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        let list_path = path.child(list);
        for (i, c) in items(spec, list) {
            errs.extend(validate_container(c, &list_path.index(i), &mut names));
        }
    }
    errs
}

fn validate_container(
    c: &Value,
    path: &FieldPath,
    names: &mut BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name_path = path.child("name");
    match text(c, "name").unwrap_or("") {
        "" => errs.push(FieldError::required(&name_path, "")),
        name => {
            for msg in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&name_path, name, msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&name_path, name));
            }
        }
    }
    let image = text(c, "image").unwrap_or("");
    if image.is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    } else if image != image.trim() {
        errs.push(FieldError::invalid(
            &path.child("image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get(probe).filter(|p| p.is_object()) {
            errs.extend(validate_probe(p, &path.child(probe), probe));
        }
    }
    errs.extend(validate_ports(c, &path.child("ports")));
    errs.extend(validate_env(c, &path.child("env")));
    if let Some(policy) = text(c, "imagePullPolicy")
        && !matches!(policy, "Always" | "IfNotPresent" | "Never")
    {
        errs.push(FieldError::not_supported(
            &path.child("imagePullPolicy"),
            policy,
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    errs
}

fn int(v: &Value, field: &str) -> i64 {
    v.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// `validateProbe` and the liveness/startup rule that success means one success.
fn validate_probe(probe: &Value, path: &FieldPath, which: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let handlers: Vec<&str> = ["exec", "httpGet", "tcpSocket", "grpc"]
        .into_iter()
        .filter(|h| probe.get(*h).is_some_and(|v| !v.is_null()))
        .collect();
    match handlers.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a handler type")),
        [one] => errs.extend(validate_handler(probe, one, path)),
        [first, rest @ ..] => {
            for extra in rest {
                errs.push(FieldError::forbidden(
                    &path.child(extra),
                    "may not specify more than 1 handler type",
                ));
            }
            errs.extend(validate_handler(probe, first, path));
        }
    }
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
    if let Some(grace) = probe
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        && grace <= 0
    {
        errs.push(FieldError::invalid(
            &path.child("terminationGracePeriodSeconds"),
            grace,
            "must be greater than 0",
        ));
    }
    let success = int(probe, "successThreshold");
    if matches!(which, "livenessProbe" | "startupProbe") && success != 1 {
        errs.push(FieldError::invalid(
            &path.child("successThreshold"),
            success,
            "must be 1",
        ));
    }
    errs
}

/// The port of an HTTP or TCP handler: a number in range, or a port name.
fn validate_handler(probe: &Value, handler: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(h) = probe.get(handler) else {
        return errs;
    };
    let path = path.child(handler);
    if matches!(handler, "httpGet" | "tcpSocket") {
        match h.get("port") {
            Some(Value::String(name)) => {
                for msg in is_valid_port_name(name) {
                    errs.push(FieldError::invalid(&path.child("port"), name.as_str(), msg));
                }
            }
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                for msg in is_valid_port_num(n) {
                    errs.push(FieldError::invalid(&path.child("port"), n, msg));
                }
            }
            _ => errs.push(FieldError::required(&path.child("port"), "")),
        }
    }
    if handler == "httpGet"
        && let Some(scheme) = text(h, "scheme")
        && !matches!(scheme, "HTTP" | "HTTPS")
    {
        errs.push(FieldError::not_supported(
            &path.child("scheme"),
            scheme,
            &["HTTP", "HTTPS"],
        ));
    }
    errs
}

/// `validateContainerPorts`: names unique and IANA service names, ports in range, a protocol
/// upstream knows.
fn validate_ports(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in items(c, "ports") {
        let p = path.index(i);
        if let Some(name) = text(port, "name").filter(|n| !n.is_empty()) {
            for msg in is_valid_port_name(name) {
                errs.push(FieldError::invalid(&p.child("name"), name, msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        let container_port = int(port, "containerPort");
        if container_port == 0 {
            errs.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            for msg in is_valid_port_num(container_port) {
                errs.push(FieldError::invalid(
                    &p.child("containerPort"),
                    container_port,
                    msg,
                ));
            }
        }
        let host_port = int(port, "hostPort");
        if host_port != 0 {
            for msg in is_valid_port_num(host_port) {
                errs.push(FieldError::invalid(&p.child("hostPort"), host_port, msg));
            }
        }
        match text(port, "protocol") {
            None | Some("") => errs.push(FieldError::required(&p.child("protocol"), "")),
            Some("TCP" | "UDP" | "SCTP") => {}
            Some(other) => errs.push(FieldError::not_supported(
                &p.child("protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    errs
}

/// `ValidateEnv`: names (the relaxed rule of v1.36), and at most one source in `valueFrom`.
fn validate_env(c: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, env) in items(c, "env") {
        let p = path.index(i);
        let name = text(env, "name").unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            for msg in is_relaxed_env_var_name(name) {
                errs.push(FieldError::invalid(&p.child("name"), name, msg));
            }
        }
        if let Some(from) = env.get("valueFrom").and_then(Value::as_object) {
            let sources = [
                "fieldRef",
                "resourceFieldRef",
                "configMapKeyRef",
                "secretKeyRef",
                "fileKeyRef",
            ]
            .into_iter()
            .filter(|s| from.get(*s).is_some_and(|v| !v.is_null()))
            .count();
            if sources > 1 {
                errs.push(FieldError::invalid(
                    &p.child("valueFrom"),
                    "",
                    "may not have more than one field specified at a time",
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(spec: Value) -> Vec<String> {
        validate_containers(&spec, &FieldPath::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_valid_spec_passes() {
        let spec = json!({"containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "livenessProbe": {"httpGet": {"port": "http", "path": "/"}, "successThreshold": 1, "periodSeconds": 10}}],
            "initContainers": [{"name": "init", "image": "busybox"}]});
        assert!(messages(spec).is_empty());
    }

    #[test]
    fn container_rules_answer_in_upstreams_words() {
        let cases = [
            (
                json!({"containers": [{"name": "c", "image": "i"}], "initContainers": [{"name": "c", "image": "i"}]}),
                r#"spec.initContainers[0].name: Duplicate value: "c""#,
            ),
            (
                json!({"containers": [{"name": "c", "image": " nginx"}]}),
                r#"spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace"#,
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 70000, "protocol": "TCP"}]}]}),
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}),
                r#"spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP""#,
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "valueFrom": {"fieldRef": {}, "secretKeyRef": {}}}]}]}),
                r#"spec.containers[0].env[0].valueFrom: Invalid value: "": may not have more than one field specified at a time"#,
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "livenessProbe": {"exec": {}, "tcpSocket": {"port": 80}, "successThreshold": 1}}]}),
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "livenessProbe": {"exec": {}, "successThreshold": 2}}]}),
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
            ),
            (
                json!({"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Sometimes"}]}),
                r#"spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never""#,
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(messages(spec.clone()), vec![expected.to_string()], "{spec}");
        }
    }
}
