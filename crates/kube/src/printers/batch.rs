//! Rows of the `batch` kinds: Job and CronJob.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, int_at, len_at, list_at, opt_bool, opt_int, opt_str, str_at};
use super::format::{
    age, bool_ptr, container_cells, format_label_selector, human_duration, since, time_at,
};

/// Name, Status, Completions, Duration, Age, Containers, Images, Selector.
pub(super) fn job(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(obj, &["status", "succeeded"]);
    let completions = match opt_int(obj, &["spec", "completions"]) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match opt_int(obj, &["spec", "parallelism"]).unwrap_or(0) {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(obj, &["status", "startTime"]),
        time_at(obj, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    // The order is upstream's: a finished job reads Complete or Failed even while being deleted.
    let status = if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if obj.deletion_timestamp().is_some() {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) =
        container_cells(list_at(obj, &["spec", "template", "spec", "containers"]));
    cells![
        obj.name(),
        status,
        completions,
        duration,
        age(obj, now),
        names,
        images,
        format_label_selector(at(obj, &["spec", "selector"])),
    ]
}

/// Whether the first condition of this type is True.
fn has_condition(job: &Value, kind: &str) -> bool {
    list_at(job, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == kind)
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

/// Name, Schedule, Timezone, Suspend, Active, Last Schedule, Age, Containers, Images, Selector.
pub(super) fn cron_job(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let last_schedule = match at(obj, &["status", "lastScheduleTime"]) {
        None => "<none>".to_string(),
        Some(_) => since(time_at(obj, &["status", "lastScheduleTime"]), now),
    };
    let job_spec = &["spec", "jobTemplate", "spec"];
    let containers: Vec<&str> = job_spec
        .iter()
        .copied()
        .chain(["template", "spec", "containers"])
        .collect();
    let selector: Vec<&str> = job_spec.iter().copied().chain(["selector"]).collect();
    let (names, images) = container_cells(list_at(obj, &containers));
    cells![
        obj.name(),
        str_at(obj, &["spec", "schedule"]),
        opt_str(obj, &["spec", "timeZone"]).unwrap_or("<none>"),
        bool_ptr(opt_bool(obj, &["spec", "suspend"])),
        len_at(obj, &["status", "active"]) as i64,
        last_schedule,
        age(obj, now),
        names,
        images,
        format_label_selector(at(obj, &selector)),
    ]
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

    #[test]
    fn job_completions_duration_and_status() {
        let j = json!({
            "metadata": {"name": "pi", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"completions": 1, "parallelism": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
            "status": {"succeeded": 1, "startTime": "2025-06-01T11:00:00Z", "completionTime": "2025-06-01T11:00:42Z",
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}
        });
        assert_eq!(
            job(&j, now()),
            vec![
                json!("pi"),
                json!("Complete"),
                json!("1/1"),
                json!("42s"),
                json!("60m"),
                json!("pi"),
                json!("perl"),
                json!("batch.kubernetes.io/controller-uid=u")
            ]
        );
        let running = json!({"spec": {"parallelism": 3}, "status": {"startTime": "2025-06-01T11:55:00Z", "succeeded": 2}});
        let cells = job(&running, now());
        assert_eq!(
            (&cells[1], &cells[2], &cells[3]),
            (&json!("Running"), &json!("2/1 of 3"), &json!("5m"))
        );
        let pending = job(&json!({}), now());
        assert_eq!(
            (&pending[2], &pending[3], &pending[7]),
            (&json!("0/1"), &json!(""), &json!("<none>"))
        );
        let cond = |kind: &str| {
            json!({"metadata": {"deletionTimestamp": "2025-06-01T11:00:00Z"},
            "status": {"conditions": [{"type": kind, "status": "True"}]}})
        };
        assert_eq!(job(&cond("Failed"), now())[1], json!("Failed"));
        assert_eq!(job(&cond("Suspended"), now())[1], json!("Terminating"));
        let suspended =
            json!({"status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        assert_eq!(job(&suspended, now())[1], json!("Suspended"));
        let target =
            json!({"status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}});
        assert_eq!(job(&target, now())[1], json!("FailureTarget"));
    }

    #[test]
    fn cron_jobs() {
        let cj = json!({
            "metadata": {"name": "cj"},
            "spec": {"schedule": "*/5 * * * *", "suspend": false, "jobTemplate": {"spec": {
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "j1"}], "lastScheduleTime": "2025-06-01T11:55:00Z"}
        });
        assert_eq!(
            cron_job(&cj, now()),
            vec![
                json!("cj"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("5m"),
                json!("<unknown>"),
                json!("c"),
                json!("busybox"),
                json!("<none>")
            ]
        );
        let bare = cron_job(&json!({"spec": {"timeZone": "Etc/UTC"}}), now());
        assert_eq!(
            (&bare[2], &bare[3], &bare[4], &bare[5]),
            (
                &json!("Etc/UTC"),
                &json!("<unset>"),
                &json!(0),
                &json!("<none>")
            )
        );
    }
}
