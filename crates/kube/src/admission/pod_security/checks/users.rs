//! Users: containers run as non-root, and never as uid 0, unless the pod is in a user
//! namespace from v1.35 (upstream: check_runAsNonRoot.go, check_runAsUser.go).

use serde_json::Value;

use super::{Check, Pod, Violation, at, bool_at, container_name, containers_phrase, rule};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        rules: &[
            rule(0, run_as_non_root),
            rule(35, run_as_non_root_unless_user_namespace),
        ],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        rules: &[
            rule(23, run_as_user),
            rule(35, run_as_user_unless_user_namespace),
        ],
    },
];

fn context(c: &Value) -> Option<&Value> {
    at(c, &["securityContext"])
}

fn run_as_non_root(pod: &Pod<'_>) -> Option<Violation> {
    let pod_value = pod
        .pod_context(&[])
        .and_then(|c| bool_at(c, &["runAsNonRoot"]));
    let mut setters = Vec::new();
    if pod_value == Some(false) {
        setters.push("pod".to_string());
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in pod.containers() {
        match context(c).and_then(|s| bool_at(s, &["runAsNonRoot"])) {
            Some(false) => explicit.push(container_name(c)),
            Some(true) => {}
            None if pod_value != Some(true) => implicit.push(container_name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if !implicit.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

fn run_as_non_root_unless_user_namespace(pod: &Pod<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_non_root(pod)
}

fn is_root(ctx: Option<&Value>) -> bool {
    ctx.and_then(|c| at(c, &["runAsUser"]))
        .and_then(Value::as_i64)
        == Some(0)
}

fn run_as_user(pod: &Pod<'_>) -> Option<Violation> {
    let mut setters = Vec::new();
    if is_root(pod.pod_context(&[])) {
        setters.push("pod".to_string());
    }
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| is_root(context(c)))
        .map(container_name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

fn run_as_user_unless_user_namespace(pod: &Pod<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_user(pod)
}
