//! Sysctls: only the namespaced ones that are isolated from other pods, a set that grew with
//! the policy versions (upstream: check_sysctls.go).

use super::{Check, Pod, Violation, list, rule, str_at};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[Check {
    id: "sysctls",
    level: Level::Baseline,
    rules: &[
        rule(0, |p| sysctls(p, 0)),
        rule(27, |p| sysctls(p, 27)),
        rule(29, |p| sysctls(p, 29)),
        rule(32, |p| sysctls(p, 32)),
    ],
}];

/// Each safe sysctl with the policy version that first allows it.
const SAFE: &[(&str, u64)] = &[
    ("kernel.shm_rmid_forced", 0),
    ("net.ipv4.ip_local_port_range", 0),
    ("net.ipv4.tcp_syncookies", 0),
    ("net.ipv4.ping_group_range", 0),
    ("net.ipv4.ip_unprivileged_port_start", 0),
    ("net.ipv4.ip_local_reserved_ports", 27),
    ("net.ipv4.tcp_keepalive_time", 29),
    ("net.ipv4.tcp_fin_timeout", 29),
    ("net.ipv4.tcp_keepalive_intvl", 29),
    ("net.ipv4.tcp_keepalive_probes", 29),
    ("net.ipv4.tcp_rmem", 32),
    ("net.ipv4.tcp_wmem", 32),
];

fn sysctls(pod: &Pod<'_>, minor: u64) -> Option<Violation> {
    let forbidden: Vec<&str> = list(pod.spec, &["securityContext", "sysctls"])
        .map(|s| str_at(s, &["name"]).unwrap_or(""))
        .filter(|name| {
            !SAFE
                .iter()
                .any(|(safe, since)| safe == name && *since <= minor)
        })
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", forbidden.join(", "))
}
