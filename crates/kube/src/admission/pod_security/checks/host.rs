//! The host: its namespaces, paths, ports, probe and lifecycle hosts, and Windows host
//! processes (upstream: check_hostNamespaces.go, check_hostPathVolumes.go, check_hostPorts.go,
//! check_hostProbesAndhostLifecycle.go, check_windowsHostProcess.go).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{
    Check, Pod, Sorted, Violation, at, bool_at, container_name, containers_phrase, join_quote,
    list, plural, rule, str_at,
};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        rules: &[rule(0, host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        rules: &[rule(0, host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        rules: &[rule(0, host_ports)],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        rules: &[rule(34, probe_and_lifecycle_hosts)],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        rules: &[rule(0, windows_host_process)],
    },
];

fn host_namespaces(pod: &Pod<'_>) -> Option<Violation> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|f| bool_at(pod.spec, &[f]) == Some(true))
        .map(|f| format!("{f}=true"))
        .collect();
    if set.is_empty() {
        return None;
    }
    Violation::new("host namespaces", set.join(", "))
}

fn host_path_volumes(pod: &Pod<'_>) -> Option<Violation> {
    let bad: Vec<&str> = list(pod.spec, &["volumes"])
        .filter(|v| at(v, &["hostPath"]).is_some())
        .map(|v| str_at(v, &["name"]).unwrap_or(""))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "hostPath volumes",
        format!(
            "{} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    )
}

fn host_ports(pod: &Pod<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = Sorted::new();
    for c in pod.containers() {
        let used: Vec<i64> = list(c, &["ports"])
            .filter_map(|p| at(p, &["hostPort"]).and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .collect();
        if !used.is_empty() {
            bad.push(container_name(c));
            ports.extend(used.iter().map(i64::to_string));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            plural("uses", "use", bad.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// The hosts an HTTP GET or TCP socket action names (probes and lifecycle handlers alike).
fn action_hosts(handler: Option<&Value>) -> Vec<String> {
    let Some(h) = handler else {
        return Vec::new();
    };
    ["httpGet", "tcpSocket"]
        .into_iter()
        .filter_map(|a| str_at(h, &[a, "host"]))
        .filter(|host| !host.is_empty())
        .map(String::from)
        .collect()
}

fn probe_and_lifecycle_hosts(pod: &Pod<'_>) -> Option<Violation> {
    let mut bad = BTreeSet::new();
    let mut hosts = Sorted::new();
    for c in pod.containers() {
        let handlers = [
            at(c, &["livenessProbe"]),
            at(c, &["readinessProbe"]),
            at(c, &["startupProbe"]),
            at(c, &["lifecycle", "postStart"]),
            at(c, &["lifecycle", "preStop"]),
        ];
        for h in handlers {
            let found = action_hosts(h);
            if !found.is_empty() {
                bad.insert(container_name(c));
                hosts.extend(found);
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    let bad: Vec<&str> = bad.into_iter().collect();
    Violation::new(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            plural("uses", "use", bad.len()),
            plural(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
        ),
    )
}

fn windows_host_process(pod: &Pod<'_>) -> Option<Violation> {
    let host_process = |ctx: Option<&Value>| {
        ctx.and_then(|c| bool_at(c, &["windowsOptions", "hostProcess"])) == Some(true)
    };
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| host_process(at(c, &["securityContext"])))
        .map(container_name)
        .collect();
    let mut setters = Vec::new();
    if host_process(pod.pod_context(&[])) {
        setters.push("pod".to_string());
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}
