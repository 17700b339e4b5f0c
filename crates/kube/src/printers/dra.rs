//! Rows of the `resource.k8s.io` kinds (dynamic resource allocation): DeviceClass, ResourceClaim,
//! ResourceClaimTemplate and ResourceSlice.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, list_at, str_at};
use super::format::age;

/// Name, Age.
pub(super) fn device_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), age(obj, now)]
}

/// Name, Age.
pub(super) fn resource_claim_template(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), age(obj, now)]
}

/// Name, State ("pending", "allocated,reserved", "deleted,allocated", ...), Age.
pub(super) fn resource_claim(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let deleted = obj.deletion_timestamp().is_some();
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if at(obj, &["status", "allocation"]).is_none() {
        if !deleted {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if !list_at(obj, &["status", "reservedFor"]).is_empty() {
            states.push("reserved");
        }
    }
    cells![obj.name(), states.join(","), age(obj, now)]
}

/// Name, Node, Driver, Pool, Age.
pub(super) fn resource_slice(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        str_at(obj, &["spec", "nodeName"]),
        str_at(obj, &["spec", "driver"]),
        str_at(obj, &["spec", "pool", "name"]),
        age(obj, now),
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
    fn claim_states() {
        let state = |claim: Value| resource_claim(&claim, now())[1].clone();
        assert_eq!(state(json!({})), json!("pending"));
        assert_eq!(
            state(json!({"status": {"allocation": {}}})),
            json!("allocated")
        );
        assert_eq!(
            state(json!({"status": {"allocation": {}, "reservedFor": [{"name": "p"}]}})),
            json!("allocated,reserved")
        );
        assert_eq!(
            state(json!({"metadata": {"deletionTimestamp": "2025-06-01T11:00:00Z"}})),
            json!("deleted")
        );
        assert_eq!(
            state(
                json!({"metadata": {"deletionTimestamp": "2025-06-01T11:00:00Z"}, "status": {"allocation": {}}})
            ),
            json!("deleted,allocated")
        );
    }

    #[test]
    fn slices() {
        let s = json!({"metadata": {"name": "n1-gpu"}, "spec": {"nodeName": "n1", "driver": "gpu.example.com", "pool": {"name": "n1"}}});
        assert_eq!(
            resource_slice(&s, now()),
            vec![
                json!("n1-gpu"),
                json!("n1"),
                json!("gpu.example.com"),
                json!("n1"),
                json!("<unknown>")
            ]
        );
        assert_eq!(
            device_class(&json!({"metadata": {"name": "gpu"}}), now()),
            vec![json!("gpu"), json!("<unknown>")]
        );
    }
}
