//! Privilege: privileged containers, privilege escalation, capabilities and unmasked /proc
//! (upstream: check_privileged.go, check_allowPrivilegeEscalation.go,
//! check_capabilities_{baseline,restricted}.go, check_procMount_{baseline,restricted}.go).

use super::{
    Check, Pod, Rule, Sorted, Violation, at, bool_at, container_name, containers_phrase,
    join_quote, list, rule, str_at,
};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "privileged",
        level: Level::Baseline,
        rules: &[rule(0, privileged)],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        rules: &[
            rule(8, allow_privilege_escalation),
            rule(25, allow_privilege_escalation_unless_windows),
        ],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        rules: &[rule(0, capabilities_baseline)],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        rules: &[
            Rule {
                since: 22,
                check: capabilities_restricted,
                overrides: &["capabilities_baseline"],
            },
            Rule {
                since: 25,
                check: capabilities_restricted_unless_windows,
                overrides: &["capabilities_baseline"],
            },
        ],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        rules: &[
            rule(0, proc_mount),
            rule(35, proc_mount_unless_user_namespace),
        ],
    },
    // From v1.35 the baseline rule relaxes for user namespaces; restricted keeps the
    // unconditional one.
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        rules: &[Rule {
            since: 35,
            check: proc_mount,
            overrides: &["procMount"],
        }],
    },
];

/// The names of the containers `bad` picks, in visiting order.
fn containers_where(pod: &Pod<'_>, bad: impl Fn(&serde_json::Value) -> bool) -> Vec<String> {
    pod.containers()
        .filter(|c| bad(c))
        .map(|c| container_name(c).to_string())
        .collect()
}

fn privileged(pod: &Pod<'_>) -> Option<Violation> {
    let bad = containers_where(pod, |c| {
        bool_at(c, &["securityContext", "privileged"]) == Some(true)
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

fn allow_privilege_escalation(pod: &Pod<'_>) -> Option<Violation> {
    let bad = containers_where(pod, |c| {
        bool_at(c, &["securityContext", "allowPrivilegeEscalation"]) != Some(false)
    });
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

/// Windows pods cannot set the field (validation refuses it), so they pass.
fn allow_privilege_escalation_unless_windows(pod: &Pod<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    allow_privilege_escalation(pod)
}

/// The capabilities a container may add at baseline: the container runtimes' default set.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn added(c: &serde_json::Value) -> impl Iterator<Item = &str> {
    list(c, &["securityContext", "capabilities", "add"]).filter_map(|v| v.as_str())
}

fn capabilities_baseline(pod: &Pod<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut caps = Sorted::new();
    for c in pod.containers() {
        let extra: Vec<&str> = added(c)
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(cap))
            .collect();
        if !extra.is_empty() {
            bad.push(container_name(c));
            caps.extend(extra.into_iter().map(String::from));
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&caps)
        ),
    )
}

fn capabilities_restricted(pod: &Pod<'_>) -> Option<Violation> {
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut caps = Sorted::new();
    for c in pod.containers() {
        let name = container_name(c);
        if at(c, &["securityContext", "capabilities"]).is_none() {
            missing_drop_all.push(name);
            continue;
        }
        let drops_all = list(c, &["securityContext", "capabilities", "drop"])
            .any(|d| d.as_str() == Some("ALL"));
        if !drops_all {
            missing_drop_all.push(name);
        }
        let extra: Vec<&str> = added(c).filter(|cap| *cap != "NET_BIND_SERVICE").collect();
        if !extra.is_empty() {
            adding.push(name);
            caps.extend(extra.into_iter().map(String::from));
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&caps)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

fn capabilities_restricted_unless_windows(pod: &Pod<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    capabilities_restricted(pod)
}

fn proc_mount(pod: &Pod<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = Sorted::new();
    for c in pod.containers() {
        if let Some(t) = str_at(c, &["securityContext", "procMount"])
            && t != "Default"
        {
            bad.push(container_name(c));
            types.insert(t.to_string());
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quote(&types)
        ),
    )
}

fn proc_mount_unless_user_namespace(pod: &Pod<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    proc_mount(pod)
}
