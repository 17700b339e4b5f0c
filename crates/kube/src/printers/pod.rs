//! The Pod row: readiness "ready/total", the aggregate status reason (Init:..., CrashLoopBackOff,
//! Completed, Terminating, ...), restarts with the time of the last one, and the wide columns.
//!
//! The rules follow upstream's `printPod` step by step, because kubectl users read these words and
//! scripts match on them. This module only reads the Pod.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, bool_at, int_at, list_at, opt_bool, str_at};
use super::format::{age, since, time_at};

/// The cells of a Pod: Name, Ready, Status, Restarts, Age, IP, Node, Nominated Node, Readiness
/// Gates.
pub(super) fn pod(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = PodStatus::of(obj);
    let restarts = if status.restarts != 0
        && let Some(last) = status.last_restart
    {
        format!("{} ({} ago)", status.restarts, since(Some(last), now))
    } else {
        status.restarts.to_string()
    };
    cells![
        obj.name(),
        format!("{}/{}", status.ready, status.total),
        status.reason,
        restarts,
        age(obj, now),
        pod_ip(obj),
        or_none(str_at(obj, &["spec", "nodeName"])),
        or_none(str_at(obj, &["status", "nominatedNodeName"])),
        readiness_gates(obj),
    ]
}

/// The row conditions upstream attaches to a finished pod's row: `Completed`, with the phase as
/// reason, so that clients may show it with less emphasis.
pub(super) fn pod_row_conditions(obj: &Value) -> Option<Value> {
    let message = match str_at(obj, &["status", "phase"]) {
        "Succeeded" => "The pod has completed successfully.",
        "Failed" => "The pod failed.",
        _ => return None,
    };
    Some(serde_json::json!([{
        "type": "Completed",
        "status": "True",
        "reason": str_at(obj, &["status", "phase"]),
        "message": message,
    }]))
}

/// What the Ready, Status and Restarts columns summarize.
#[derive(Debug, PartialEq)]
struct PodStatus {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

impl PodStatus {
    fn of(pod: &Value) -> PodStatus {
        let phase = str_at(pod, &["status", "phase"]);
        let mut reason = match str_at(pod, &["status", "reason"]) {
            "" => phase.to_string(),
            r => r.to_string(),
        };
        if conditions(pod).any(|c| {
            str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
        }) {
            reason = "SchedulingGated".to_string();
        }

        let init_containers = list_at(pod, &["spec", "initContainers"]);
        let is_sidecar = |name: &str| {
            init_containers
                .iter()
                .find(|c| str_at(c, &["name"]) == name)
                .is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
        };
        let total = list_at(pod, &["spec", "containers"]).len()
            + init_containers
                .iter()
                .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
                .count();
        let mut ready = 0;
        let mut restarts = 0;
        let mut last_restart = None;
        let mut sidecar_restarts = 0;
        let mut last_sidecar_restart = None;

        // Init containers run in order: the first one that has not finished decides the status.
        let mut initializing = false;
        for (i, container) in list_at(pod, &["status", "initContainerStatuses"])
            .iter()
            .enumerate()
        {
            let count = int_at(container, &["restartCount"]);
            let finished = time_at(container, &["lastState", "terminated", "finishedAt"]);
            restarts += count;
            last_restart = later(last_restart, finished);
            let sidecar = is_sidecar(str_at(container, &["name"]));
            if sidecar {
                sidecar_restarts += count;
                last_sidecar_restart = later(last_sidecar_restart, finished);
            }
            let terminated = at(container, &["state", "terminated"]);
            let waiting_reason = str_at(container, &["state", "waiting", "reason"]);
            if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
                continue;
            }
            if sidecar && opt_bool(container, &["started"]) == Some(true) {
                if bool_at(container, &["ready"]) {
                    ready += 1;
                }
                continue;
            }
            reason = if let Some(t) = terminated {
                match str_at(t, &["reason"]) {
                    "" => match int_at(t, &["signal"]) {
                        0 => format!("Init:ExitCode:{}", int_at(t, &["exitCode"])),
                        signal => format!("Init:Signal:{signal}"),
                    },
                    r => format!("Init:{r}"),
                }
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{i}/{}", init_containers.len())
            };
            initializing = true;
            break;
        }

        if !initializing || condition_true(pod, "Initialized") {
            // Only sidecars keep counting once the pod is initialized.
            restarts = sidecar_restarts;
            last_restart = last_sidecar_restart;
            let mut has_running = false;
            // Walk backwards so that the first container's reason is the one that stays.
            for container in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
                restarts += int_at(container, &["restartCount"]);
                last_restart = later(
                    last_restart,
                    time_at(container, &["lastState", "terminated", "finishedAt"]),
                );
                let waiting_reason = str_at(container, &["state", "waiting", "reason"]);
                let terminated = at(container, &["state", "terminated"]);
                if !waiting_reason.is_empty() {
                    reason = waiting_reason.to_string();
                } else if let Some(t) = terminated {
                    reason = match str_at(t, &["reason"]) {
                        "" => match int_at(t, &["signal"]) {
                            0 => format!("ExitCode:{}", int_at(t, &["exitCode"])),
                            signal => format!("Signal:{signal}"),
                        },
                        r => r.to_string(),
                    };
                } else if bool_at(container, &["ready"])
                    && at(container, &["state", "running"]).is_some()
                {
                    has_running = true;
                    ready += 1;
                }
            }
            // A pod whose containers completed but one still runs is Running (or NotReady).
            if reason == "Completed" && has_running {
                let ready_condition = conditions(pod)
                    .any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
                reason = if ready_condition {
                    "Running".to_string()
                } else {
                    "NotReady".to_string()
                };
            }
        }

        if pod.deletion_timestamp().is_some() {
            if str_at(pod, &["status", "reason"]) == "NodeLost" {
                reason = "Unknown".to_string();
            } else if phase != "Failed" && phase != "Succeeded" {
                reason = "Terminating".to_string();
            }
        }
        PodStatus {
            ready,
            total,
            reason,
            restarts,
            last_restart,
        }
    }
}

fn conditions(pod: &Value) -> impl Iterator<Item = &Value> {
    list_at(pod, &["status", "conditions"]).iter()
}

/// Whether the first condition of this type is True (upstream stops at the first match).
fn condition_true(pod: &Value, kind: &str) -> bool {
    conditions(pod)
        .find(|c| str_at(c, &["type"]) == kind)
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

/// The later of two times, an unset time being earlier than any (Go's zero time).
fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The first pod IP; upstream's internal type fills `podIPs` from `podIP` when only that is set.
fn pod_ip(pod: &Value) -> String {
    let ip = list_at(pod, &["status", "podIPs"])
        .first()
        .map(|p| str_at(p, &["ip"]))
        .unwrap_or_else(|| str_at(pod, &["status", "podIP"]));
    or_none(ip)
}

/// "true/total" over the pod's readiness gates, or "<none>".
fn readiness_gates(pod: &Value) -> String {
    let gates = list_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let true_count = gates
        .iter()
        .filter(|g| condition_true(pod, str_at(g, &["conditionType"])))
        .count();
    format!("{true_count}/{}", gates.len())
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn status_of(pod: Value) -> (String, String, String) {
        let cells = super::pod(&pod, now());
        let text = |i: usize| cells[i].as_str().unwrap_or_default().to_string();
        (text(1), text(2), text(3))
    }

    fn running(name: &str, ready: bool) -> Value {
        json!({"name": name, "ready": ready, "restartCount": 0, "state": {"running": {"startedAt": "2025-06-01T11:00:00Z"}}})
    }

    #[test]
    fn full_row_of_a_running_pod() {
        let pod = json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:55:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}],
                     "readinessGates": [{"conditionType": "x/ok"}, {"conditionType": "x/other"}]},
            "status": {"phase": "Running", "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}],
                       "conditions": [{"type": "x/ok", "status": "True"}],
                       "containerStatuses": [running("a", true), running("b", false)]}
        });
        assert_eq!(
            super::pod(&pod, now()),
            vec![
                json!("web"),
                json!("1/2"),
                json!("Running"),
                json!("0"),
                json!("5m"),
                json!("10.1.0.5"),
                json!("n1"),
                json!("<none>"),
                json!("1/2")
            ]
        );
    }

    #[test]
    fn finished_pods_carry_a_completed_row_condition() {
        let done = json!({"status": {"phase": "Succeeded"}});
        assert_eq!(
            pod_row_conditions(&done),
            Some(
                json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                "message": "The pod has completed successfully."}])
            )
        );
        let failed = pod_row_conditions(&json!({"status": {"phase": "Failed"}}));
        assert_eq!(failed.unwrap()[0]["message"], "The pod failed.");
        assert_eq!(
            pod_row_conditions(&json!({"status": {"phase": "Running"}})),
            None
        );
    }

    #[test]
    fn minimal_pod() {
        let cells = super::pod(&json!({"metadata": {"name": "p"}}), now());
        assert_eq!(
            cells,
            vec![
                json!("p"),
                json!("0/0"),
                json!(""),
                json!("0"),
                json!("<unknown>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn pending_and_scheduling_gated() {
        let pod = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        assert_eq!(status_of(pod).1, "Pending");
        let gated = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert_eq!(status_of(gated).1, "SchedulingGated");
    }

    #[test]
    fn crash_loop_with_last_restart() {
        let pod = json!({
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "name": "a", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2025-06-01T11:55:00Z"}}
            }]}
        });
        assert_eq!(
            status_of(pod),
            ("0/1".into(), "CrashLoopBackOff".into(), "3 (5m ago)".into())
        );
    }

    #[test]
    fn restarts_without_termination_time_are_plain() {
        let pod = json!({"status": {"containerStatuses": [{"name": "a", "restartCount": 2, "state": {}}]}});
        assert_eq!(status_of(pod).2, "2");
    }

    #[test]
    fn init_container_reasons() {
        let spec = json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]});
        let with = |statuses: Value| json!({"spec": spec.clone(), "status": {"phase": "Pending", "initContainerStatuses": statuses}});
        let done =
            json!({"name": "i1", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
        let cases = [
            (
                json!([done.clone(), {"name": "i2", "state": {"running": {}}}]),
                "Init:1/2",
            ),
            (
                json!([{"name": "i1", "state": {"waiting": {"reason": "PodInitializing"}}}]),
                "Init:0/2",
            ),
            (
                json!([{"name": "i1", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]),
                "Init:ImagePullBackOff",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]),
                "Init:Error",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 2}}}]),
                "Init:ExitCode:2",
            ),
            (
                json!([{"name": "i1", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]),
                "Init:Signal:9",
            ),
            (json!([done.clone(), done]), "Pending"),
        ];
        for (statuses, want) in cases {
            assert_eq!(status_of(with(statuses.clone())).1, want, "{statuses}");
        }
    }

    #[test]
    fn sidecars_count_as_containers() {
        let pod = json!({
            "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "side", "started": true, "ready": true, "restartCount": 1,
                    "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2025-06-01T10:00:00Z"}}}],
                "containerStatuses": [running("a", true)]}
        });
        assert_eq!(
            status_of(pod),
            ("2/2".into(), "Running".into(), "1 (120m ago)".into())
        );
    }

    #[test]
    fn completed_and_still_running() {
        let completed =
            json!({"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}});
        let pod = json!({"status": {"phase": "Running", "containerStatuses": [completed.clone(), running("b", true)]}});
        assert_eq!(status_of(pod).1, "NotReady");
        let pod = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [completed.clone(), running("b", true)]}});
        assert_eq!(status_of(pod).1, "Running");
        let pod = json!({"status": {"phase": "Succeeded", "containerStatuses": [completed]}});
        assert_eq!(status_of(pod).1, "Completed");
        let pod = json!({"status": {"containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 0, "signal": 15}}}]}});
        assert_eq!(status_of(pod).1, "Signal:15");
        let pod = json!({"status": {"containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 3}}}]}});
        assert_eq!(status_of(pod).1, "ExitCode:3");
    }

    #[test]
    fn deletion_reasons() {
        let deleting = |phase: &str, reason: &str| json!({"metadata": {"deletionTimestamp": "2025-06-01T11:59:00Z"}, "status": {"phase": phase, "reason": reason}});
        assert_eq!(status_of(deleting("Running", "")).1, "Terminating");
        assert_eq!(status_of(deleting("Running", "NodeLost")).1, "Unknown");
        assert_eq!(status_of(deleting("Succeeded", "")).1, "Succeeded");
        assert_eq!(status_of(deleting("Failed", "Evicted")).1, "Evicted");
    }
}
