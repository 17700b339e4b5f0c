//! Rows of the `apps` kinds: Deployment, ReplicaSet, StatefulSet, DaemonSet and ControllerRevision.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, int_at, list_at, map_at, str_at};
use super::format::{
    age, container_cells, format_label_selector, format_labels, label_selector_string,
};

const CONTAINERS: &[&str] = &["spec", "template", "spec", "containers"];

/// Name, Ready "ready/desired", Up-to-date, Available, Age, Containers, Images, Selector.
pub(super) fn deployment(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(list_at(obj, CONTAINERS));
    // Unlike the other workloads, upstream prints the selector's bare text here: "" when empty,
    // "<invalid>" when it cannot be converted.
    let selector = label_selector_string(at(obj, &["spec", "selector"]))
        .unwrap_or_else(|| "<invalid>".to_string());
    cells![
        obj.name(),
        format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            int_at(obj, &["spec", "replicas"])
        ),
        int_at(obj, &["status", "updatedReplicas"]),
        int_at(obj, &["status", "availableReplicas"]),
        age(obj, now),
        names,
        images,
        selector,
    ]
}

/// Name, Desired, Current, Ready, Age, Containers, Images, Selector.
pub(super) fn replica_set(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(list_at(obj, CONTAINERS));
    cells![
        obj.name(),
        int_at(obj, &["spec", "replicas"]),
        int_at(obj, &["status", "replicas"]),
        int_at(obj, &["status", "readyReplicas"]),
        age(obj, now),
        names,
        images,
        format_label_selector(at(obj, &["spec", "selector"])),
    ]
}

/// Name, Ready "ready/desired", Age, Containers, Images.
pub(super) fn stateful_set(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(list_at(obj, CONTAINERS));
    cells![
        obj.name(),
        format!(
            "{}/{}",
            int_at(obj, &["status", "readyReplicas"]),
            int_at(obj, &["spec", "replicas"])
        ),
        age(obj, now),
        names,
        images,
    ]
}

/// Name, Desired, Current, Ready, Up-to-date, Available, Node Selector, Age, Containers, Images,
/// Selector.
pub(super) fn daemon_set(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(list_at(obj, CONTAINERS));
    cells![
        obj.name(),
        int_at(obj, &["status", "desiredNumberScheduled"]),
        int_at(obj, &["status", "currentNumberScheduled"]),
        int_at(obj, &["status", "numberReady"]),
        int_at(obj, &["status", "updatedNumberScheduled"]),
        int_at(obj, &["status", "numberAvailable"]),
        format_labels(map_at(obj, &["spec", "template", "spec", "nodeSelector"])),
        age(obj, now),
        names,
        images,
        format_label_selector(at(obj, &["spec", "selector"])),
    ]
}

/// Name, Controller ("kind.group/name" of the controlling owner, or "<none>"), Revision, Age.
pub(super) fn controller_revision(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let controller = match obj.controller_ref() {
        None => "<none>".to_string(),
        Some(r) => {
            let api_version = str_at(r, &["apiVersion"]);
            // The group is what precedes the version ("apps/v1" → "apps", "v1" → "").
            let group = api_version.split_once('/').map_or("", |(g, _)| g);
            let kind = str_at(r, &["kind"]);
            let name = str_at(r, &["name"]);
            match (group, kind) {
                ("", "") => name.to_string(),
                ("", kind) => format!("{}/{name}", kind.to_lowercase()),
                (group, kind) => format!("{}/{name}", format!("{kind}.{group}").to_lowercase()),
            }
        }
    };
    cells![
        obj.name(),
        controller,
        int_at(obj, &["revision"]),
        age(obj, now)
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

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [
            {"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}})
    }

    #[test]
    fn deployments() {
        let d = json!({
            "metadata": {"name": "d1", "creationTimestamp": "2025-06-01T08:50:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}}, "template": template()},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        assert_eq!(
            deployment(&d, now()),
            vec![
                json!("d1"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("3h10m"),
                json!("web,log"),
                json!("nginx:1.27,busybox"),
                json!("app=x")
            ]
        );
        let bare = deployment(&json!({}), now());
        assert_eq!((&bare[1], &bare[7]), (&json!("0/0"), &json!("")));
        let bad = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}});
        assert_eq!(deployment(&bad, now())[7], json!("<invalid>"));
    }

    #[test]
    fn replica_sets_stateful_sets_daemon_sets() {
        let rs = json!({"metadata": {"name": "rs"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
            "template": template()}, "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            replica_set(&rs, now()),
            vec![
                json!("rs"),
                json!(2),
                json!(2),
                json!(1),
                json!("<unknown>"),
                json!("web,log"),
                json!("nginx:1.27,busybox"),
                json!("app=x")
            ]
        );
        assert_eq!(replica_set(&json!({}), now())[7], json!("<none>"));
        let sts = json!({"metadata": {"name": "db"}, "spec": {"replicas": 1, "template": template()}, "status": {}});
        assert_eq!(stateful_set(&sts, now())[1], json!("0/1"));
        let ds = json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
            "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "a", "image": "b"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                       "updatedNumberScheduled": 3, "numberAvailable": 2}});
        assert_eq!(
            daemon_set(&ds, now()),
            vec![
                json!("ds"),
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux"),
                json!("<unknown>"),
                json!("a"),
                json!("b"),
                json!("app=x")
            ]
        );
    }

    #[test]
    fn controller_revisions() {
        let cr = |refs: Value| json!({"metadata": {"name": "cr", "ownerReferences": refs}, "revision": 4});
        let owned = cr(
            json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": true}]),
        );
        assert_eq!(
            controller_revision(&owned, now()),
            vec![
                json!("cr"),
                json!("statefulset.apps/db"),
                json!(4),
                json!("<unknown>")
            ]
        );
        let core =
            cr(json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": true}]));
        assert_eq!(controller_revision(&core, now())[1], json!("pod/p"));
        let not_controller =
            cr(json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}]));
        assert_eq!(
            controller_revision(&not_controller, now())[1],
            json!("<none>")
        );
    }
}
