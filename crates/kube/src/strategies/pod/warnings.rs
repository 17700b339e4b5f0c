//! Warnings for pods and pod templates (pkg/api/pod/warnings.go `warningsForPodSpecAndMeta`):
//! deprecated node labels, annotations and volume plugins, duplicate names and env vars,
//! fractional byte quantities, overlapping ports, null selectors. A pod's paths start at
//! `spec`; a template's at its own path (`spec.template.spec...`).

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::object::JsonPointer;
use apimachinery::validation::{FieldPath, go_quote};
use serde_json::Value;

use super::security::{APPARMOR_PREFIX, SECCOMP_CONTAINER_PREFIX, SECCOMP_POD};
use super::util::{int, items, map, object, present, quantity, text, visit_containers};

/// `nodeapi.deprecatedNodeLabels`.
fn deprecated_node_label(key: &str) -> Option<&'static str> {
    Some(match key {
        "beta.kubernetes.io/arch" => r#"deprecated since v1.14; use "kubernetes.io/arch" instead"#,
        "beta.kubernetes.io/os" => r#"deprecated since v1.14; use "kubernetes.io/os" instead"#,
        "failure-domain.beta.kubernetes.io/region" => {
            r#"deprecated since v1.17; use "topology.kubernetes.io/region" instead"#
        }
        "failure-domain.beta.kubernetes.io/zone" => {
            r#"deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#
        }
        "beta.kubernetes.io/instance-type" => {
            r#"deprecated since v1.17; use "node.kubernetes.io/instance-type" instead"#
        }
        _ => return None,
    })
}

const DEPRECATED_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        r#"non-functional in v1.16+; use the "priorityClassName" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
];

/// Removed or deprecated volume plugins: JSON field, the name in the warning, the words.
const DEPRECATED_VOLUMES: &[(&str, &str, &str)] = &[
    (
        "photonPersistentDisk",
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    (
        "gitRepo",
        "gitRepo",
        "deprecated in v1.11, and disabled by default in v1.33+",
    ),
    (
        "scaleIO",
        "scaleIO",
        "deprecated in v1.16, non-functional in v1.22+",
    ),
    (
        "flocker",
        "flocker",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "storageos",
        "storageOS",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "quobyte",
        "quobyte",
        "deprecated in v1.22, non-functional in v1.25+",
    ),
    (
        "glusterfs",
        "glusterfs",
        "deprecated in v1.25, non-functional in v1.26+",
    ),
    ("ephemeral", "", ""),
    (
        "cephfs",
        "cephfs",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
    (
        "rbd",
        "rbd",
        "deprecated in v1.28, non-functional in v1.31+",
    ),
];

/// The warnings for a pod (`GetWarningsForPod`), paths from `spec`.
pub fn pod_warnings(pod: &Value) -> Vec<String> {
    let empty = Value::Null;
    spec_and_meta_warnings(
        None,
        pod.get("spec").unwrap_or(&empty),
        pod.get("metadata").unwrap_or(&empty),
    )
}

/// The warnings for a pod template (`GetWarningsForPodTemplate`) at `path` (the template's
/// path, e.g. `spec.template`), for workload kinds to return from their own warning hooks.
pub fn template_warnings(template: Option<&Value>, path: &FieldPath) -> Vec<String> {
    let Some(t) = template.filter(|t| t.is_object()) else {
        return Vec::new();
    };
    let empty = Value::Null;
    spec_and_meta_warnings(
        Some(path),
        t.get("spec").unwrap_or(&empty),
        t.get("metadata").unwrap_or(&empty),
    )
}

fn spec_and_meta_warnings(base: Option<&FieldPath>, spec: &Value, meta: &Value) -> Vec<String> {
    let child = |name: &str| match base {
        Some(b) => b.child(name),
        None => FieldPath::new(name),
    };
    let sp = child("spec");
    let annotations_path = child("metadata").child("annotations");
    let annotations = map(meta, "annotations");
    let mut w = Vec::new();
    for k in map(spec, "nodeSelector").keys() {
        if let Some(msg) = deprecated_node_label(k) {
            w.push(format!("{}: {msg}", sp.child("nodeSelector").key(k)));
        }
    }
    if let Some(na) = spec.at("/affinity/nodeAffinity").filter(|n| n.is_object()) {
        let np = sp.child("affinity").child("nodeAffinity");
        if let Some(req) = object(na, "requiredDuringSchedulingIgnoredDuringExecution") {
            let tp = np
                .child("requiredDuringSchedulingIgnoredDuringExecution")
                .child("nodeSelectorTerms");
            for (i, term) in items(req, "nodeSelectorTerms") {
                w.extend(node_selector_term_warnings(term, &tp.index(i)));
            }
        }
        let pp = np.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in items(na, "preferredDuringSchedulingIgnoredDuringExecution") {
            w.extend(node_selector_term_warnings(
                term.get("preference").unwrap_or(&Value::Null),
                &pp.index(i).child("preference"),
            ));
        }
    }
    for (i, t) in items(spec, "topologySpreadConstraints") {
        let tp = sp.child("topologySpreadConstraints").index(i);
        let key = text(t, "topologyKey");
        if let Some(msg) = deprecated_node_label(key) {
            w.push(format!("{}: {key} is {msg}", tp.child("topologyKey")));
        }
        if !present(t, "labelSelector") {
            w.push(format!(
                "{}: a null labelSelector results in matching no pod",
                tp.child("labelSelector")
            ));
        }
    }
    for (key, msg) in DEPRECATED_ANNOTATIONS {
        if annotations.contains_key(*key) {
            w.push(format!("{}: {msg}", annotations_path.key(key)));
        }
    }
    let vp = sp.child("volumes");
    for (i, v) in items(spec, "volumes") {
        for (field, name, msg) in DEPRECATED_VOLUMES {
            if !present(v, field) {
                continue;
            }
            if *field == "ephemeral" {
                // The claim template's own warnings (storage class annotations and the like)
                // belong to the PVC kind; none arise for a plain claim spec.
                continue;
            }
            w.push(format!("{}: {msg}", vp.index(i).child(name)));
        }
    }
    w.extend(token_path_warnings(spec, &vp));
    if items(spec, "hostAliases").count() > 1 {
        let mut seen = BTreeSet::new();
        for (i, a) in items(spec, "hostAliases") {
            let ip = text(a, "ip");
            if !seen.insert(ip) {
                w.push(format!(
                    "{}: duplicate ip {}",
                    sp.child("hostAliases").index(i).child("ip"),
                    go_quote(ip)
                ));
            }
        }
    }
    if items(spec, "imagePullSecrets").count() > 1 {
        let mut seen = BTreeSet::new();
        for (i, s) in items(spec, "imagePullSecrets") {
            let name = text(s, "name");
            if !seen.insert(name) {
                w.push(format!(
                    "{}: duplicate name {}",
                    sp.child("imagePullSecrets").index(i).child("name"),
                    go_quote(name)
                ));
            }
        }
    }
    for (i, s) in items(spec, "imagePullSecrets") {
        let name = text(s, "name");
        if name.is_empty() {
            w.push(format!(
                "{}: invalid empty name {}",
                sp.child("imagePullSecrets").index(i).child("name"),
                go_quote(name)
            ));
        }
    }
    for res in ["memory", "ephemeral-storage"] {
        if let Some(q) = map(spec, "overhead").get(res).and_then(quantity)
            && q.milli_value() % 1000 != 0
        {
            w.push(format!(
                "{}: fractional byte value {} is invalid, must be an integer",
                sp.child("overhead").key(res),
                go_quote(&q.canonical())
            ));
        }
    }
    if spec
        .at("/securityContext/seccompProfile")
        .is_none_or(Value::is_null)
        && annotations.contains_key(SECCOMP_POD)
    {
        w.push(format!(
            r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            annotations_path.key(SECCOMP_POD)
        ));
    }
    let pod_apparmor = spec
        .at("/securityContext/appArmorProfile")
        .is_some_and(|v| !v.is_null());
    for (c, cp) in visit_containers(spec, &sp) {
        let name = text(c, "name");
        let seccomp_key = format!("{SECCOMP_CONTAINER_PREFIX}{name}");
        if c.at("/securityContext/seccompProfile")
            .is_none_or(Value::is_null)
            && annotations.contains_key(&seccomp_key)
        {
            w.push(format!(
                r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
                annotations_path.key(&seccomp_key)
            ));
        }
        // Templates warn here; pods warn while their annotations are copied to the fields.
        let has_apparmor = pod_apparmor
            || c.at("/securityContext/appArmorProfile")
                .is_some_and(|v| !v.is_null());
        let apparmor_key = format!("{APPARMOR_PREFIX}{name}");
        if base.is_some() && !has_apparmor && annotations.contains_key(&apparmor_key) {
            w.push(format!(
                r#"{}: deprecated since v1.30; use the "appArmorProfile" field instead"#,
                annotations_path.key(&apparmor_key)
            ));
        }
        let res = c.get("resources").unwrap_or(&Value::Null);
        for (list, res_name) in [
            ("limits", "memory"),
            ("requests", "memory"),
            ("limits", "ephemeral-storage"),
            ("requests", "ephemeral-storage"),
        ] {
            if let Some(q) = map(res, list).get(res_name).and_then(quantity)
                && q.milli_value() % 1000 != 0
            {
                w.push(format!(
                    "{}: fractional byte value {} is invalid, must be an integer",
                    cp.child("resources").child(list).key(res_name),
                    go_quote(&q.canonical())
                ));
            }
        }
        w.extend(env_warnings(c, &cp));
    }
    w.extend(port_warnings(spec, &sp));
    if let Some(g) = spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        && g < 0
    {
        w.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            sp.child("terminationGracePeriodSeconds")
        ));
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(pa) = spec
            .at(&format!("/affinity/{kind}"))
            .filter(|v| v.is_object())
        else {
            continue;
        };
        let ap = sp.child("affinity").child(kind);
        let rp = ap.child("requiredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in items(pa, "requiredDuringSchedulingIgnoredDuringExecution") {
            if !present(t, "labelSelector") {
                w.push(format!(
                    "{}: a null labelSelector results in matching no pod",
                    rp.index(i).child("labelSelector")
                ));
            }
        }
        let pp = ap.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in items(pa, "preferredDuringSchedulingIgnoredDuringExecution") {
            let term = t.get("podAffinityTerm").unwrap_or(&Value::Null);
            if !present(term, "labelSelector") {
                w.push(format!(
                    "{}: a null labelSelector results in matching no pod",
                    pp.index(i).child("podAffinityTerm").child("labelSelector")
                ));
            }
        }
    }
    w
}

fn node_selector_term_warnings(term: &Value, path: &FieldPath) -> Vec<String> {
    items(term, "matchExpressions")
        .filter_map(|(i, e)| {
            let key = text(e, "key");
            deprecated_node_label(key).map(|msg| {
                format!(
                    "{}: {key} is {msg}",
                    path.child("matchExpressions").index(i).child("key")
                )
            })
        })
        .collect()
}

/// Files of projected volumes at the path of a service account token.
fn token_path_warnings(spec: &Value, vp: &FieldPath) -> Vec<String> {
    let token_paths: BTreeSet<&str> = items(spec, "volumes")
        .filter_map(|(_, v)| object(v, "projected"))
        .flat_map(|p| items(p, "sources").map(|(_, s)| s))
        .filter_map(|s| object(s, "serviceAccountToken"))
        .map(|t| text(t, "path"))
        .collect();
    let mut w = Vec::new();
    if token_paths.is_empty() {
        return w;
    }
    for (i, v) in items(spec, "volumes") {
        let Some(p) = object(v, "projected") else {
            continue;
        };
        let sp = vp.index(i).child("projected").child("sources");
        for (_, s) in items(p, "sources") {
            for (kind, name) in [
                ("configMap", "configMap"),
                ("secret", "secrets"),
                ("downwardAPI", "downwardAPI"),
            ] {
                let Some(src) = object(s, kind) else { continue };
                for (j, item) in items(src, "items") {
                    let path = text(item, "path");
                    if token_paths.contains(path) {
                        w.push(format!(
                            "{}: has duplicated path with ServiceAccountToken {}",
                            sp.child(name).index(j),
                            go_quote(path)
                        ));
                    }
                }
            }
            if let Some(b) = object(s, "clusterTrustBundle") {
                let path = text(b, "path");
                if token_paths.contains(path) {
                    w.push(format!(
                        "{}: has duplicated path with ServiceAccountToken {}",
                        sp.child("ClusterTrustBundle"),
                        go_quote(path)
                    ));
                }
            }
        }
    }
    w
}

/// An env var that hides an earlier one of the same name, unless it builds on it.
fn env_warnings(c: &Value, cp: &FieldPath) -> Vec<String> {
    let mut w = Vec::new();
    if items(c, "env").count() < 2 {
        return w;
    }
    let mut seen = BTreeSet::new();
    for (i, e) in items(c, "env") {
        let name = text(e, "name");
        if seen.insert(name) {
            continue;
        }
        let value = text(e, "value");
        let reference = format!("$({name})");
        if present(e, "valueFrom") || value == reference || !value.contains(&reference) {
            w.push(format!(
                "{}: hides previous definition of {}, which may be dropped when using apply",
                cp.child("env").index(i),
                go_quote(name)
            ));
        }
    }
    w
}

/// `%+v` of an internal `ContainerPort`.
fn port_struct(p: &Value) -> String {
    format!(
        "{{Name:{} HostPort:{} ContainerPort:{} Protocol:{} HostIP:{}}}",
        text(p, "name"),
        int(p, "hostPort"),
        int(p, "containerPort"),
        text(p, "protocol"),
        text(p, "hostIP")
    )
}

/// Host IPs without host ports, and ports defined twice across containers.
fn port_warnings(spec: &Value, sp: &FieldPath) -> Vec<String> {
    let mut w = Vec::new();
    let mut all: BTreeMap<String, Vec<(FieldPath, &Value)>> = BTreeMap::new();
    for (c, cp) in visit_containers(spec, sp) {
        for (i, port) in items(c, "ports") {
            let here = cp.child("ports").index(i);
            let (host_ip, host_port) = (text(port, "hostIP"), int(port, "hostPort"));
            if !host_ip.is_empty() && host_port == 0 {
                w.push(format!(
                    "{here}: hostIP set without hostPort: {}",
                    port_struct(port)
                ));
            }
            let key = format!("{}/{}", int(port, "containerPort"), text(port, "protocol"));
            let others = all.entry(key).or_default();
            for (other_path, other) in others.iter() {
                let (oip, oport) = (text(other, "hostIP"), int(other, "hostPort"));
                if host_ip == oip && host_port == oport {
                    w.push(format!(
                        "{here}: duplicate port definition with {other_path}"
                    ));
                } else if host_port == 0 || oport == 0 {
                    w.push(format!(
                        "{here}: overlapping port definition with {other_path}"
                    ));
                } else if host_port == oport && (host_ip.is_empty() != oip.is_empty()) {
                    w.push(format!(
                        "{here}: dangerously ambiguous port definition with {other_path}"
                    ));
                }
            }
            others.push((here, port));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn warnings_in_upstreams_words() {
        let pod = json!({"metadata": {}, "spec": {
            "volumes": [{"name": "g", "gitRepo": {"repository": "r"}}],
            "imagePullSecrets": [{"name": "r"}, {"name": "r"}, {"name": ""}],
            "containers": [
                {"name": "a", "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
                 "ports": [{"containerPort": 80, "protocol": "TCP", "hostIP": "10.0.0.1"}]},
                {"name": "b", "ports": [{"containerPort": 80, "protocol": "TCP", "hostIP": "10.0.0.1"}]}]}});
        assert_eq!(
            pod_warnings(&pod),
            vec![
                "spec.volumes[0].gitRepo: deprecated in v1.11, and disabled by default in v1.33+",
                r#"spec.imagePullSecrets[1].name: duplicate name "r""#,
                r#"spec.imagePullSecrets[2].name: invalid empty name """#,
                r#"spec.containers[0].env[1]: hides previous definition of "A", which may be dropped when using apply"#,
                "spec.containers[0].ports[0]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:80 Protocol:TCP HostIP:10.0.0.1}",
                "spec.containers[1].ports[0]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:80 Protocol:TCP HostIP:10.0.0.1}",
                "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]",
            ]
        );
        let t = json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}]}});
        assert_eq!(
            template_warnings(Some(&t), &FieldPath::new("spec").child("template")),
            vec![
                "spec.template.spec.topologySpreadConstraints[0].labelSelector: a null labelSelector results in matching no pod"
            ]
        );
    }
}
