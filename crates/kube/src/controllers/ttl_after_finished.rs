//! The TTL-after-finished controller (upstream: pkg/controller/ttlafterfinished): a Job with
//! `spec.ttlSecondsAfterFinished` is deleted, with its pods in the foreground, that many seconds
//! after it finished — the `lastTransitionTime` of its `Complete` or `Failed` condition with
//! status `True`. A Job being deleted is left alone; a changed TTL is read again before the
//! delete.

use std::sync::Arc;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::expiry::{self, Expiring};

/// When `job` is to be deleted, if it has a TTL and has finished.
fn expires(job: &Value) -> Option<DateTime<Utc>> {
    if job.deletion_timestamp().is_some() {
        return None;
    }
    let ttl = job.pointer("/spec/ttlSecondsAfterFinished")?.as_i64()?;
    let finished = job
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| {
            matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True"
        })?;
    let at = expiry::parse_time(finished["lastTransitionTime"].as_str()?)?;
    Some(at + chrono::Duration::seconds(ttl))
}

/// Runs until the process ends.
pub async fn run(api: Arc<ApiResources>) {
    let Some(jobs) = api.get("batch", "v1", "jobs").cloned() else {
        return;
    };
    expiry::run(Expiring {
        store: jobs,
        expires,
        propagation: Some("Foreground"),
        user: super::kube_system_account("ttl-after-finished-controller"),
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_job_expires_its_ttl_after_the_condition() {
        let job = |ttl: Value, status: &str, deleting: bool| {
            let mut j = json!({
                "metadata": {"name": "j"},
                "spec": {"ttlSecondsAfterFinished": ttl},
                "status": {"conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Complete", "status": status, "lastTransitionTime": "2026-01-01T00:00:05Z"},
                ]},
            });
            if deleting {
                j["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:06Z");
            }
            j
        };
        assert_eq!(
            expires(&job(json!(10), "True", false)).map(|t| t.to_rfc3339()),
            Some("2026-01-01T00:00:15+00:00".to_string())
        );
        assert_eq!(
            expires(&job(json!(10), "False", false)),
            None,
            "not finished"
        );
        assert_eq!(expires(&job(Value::Null, "True", false)), None, "no TTL");
        assert_eq!(
            expires(&job(json!(10), "True", true)),
            None,
            "being deleted"
        );
    }
}
