//! Rows of the `storage.k8s.io` kinds: StorageClass, CSIDriver, CSINode, VolumeAttachment and
//! VolumeAttributesClass. CSIStorageCapacity keeps the default table and has no function here.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, bool_at, len_at, list_at, opt_bool, opt_str, str_at, strings_at};
use super::format::age;

/// Whether an annotation is exactly "true".
fn annotation_true(obj: &Value, key: &str) -> bool {
    obj.annotations()
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        == Some("true")
}

/// Name (with " (default)" for the default class), Provisioner, ReclaimPolicy, VolumeBindingMode,
/// AllowVolumeExpansion, Age.
pub(super) fn storage_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut name = obj.name().to_string();
    if annotation_true(obj, "storageclass.kubernetes.io/is-default-class")
        || annotation_true(obj, "storageclass.beta.kubernetes.io/is-default-class")
    {
        name.push_str(" (default)");
    }
    cells![
        name,
        str_at(obj, &["provisioner"]),
        opt_str(obj, &["reclaimPolicy"]).unwrap_or("Delete"),
        opt_str(obj, &["volumeBindingMode"]).unwrap_or("Immediate"),
        bool_at(obj, &["allowVolumeExpansion"]),
        age(obj, now),
    ]
}

/// Name, AttachRequired, PodInfoOnMount, StorageCapacity, TokenRequests, RequiresRepublish, Modes,
/// Age; unset booleans read as their API defaults.
pub(super) fn csi_driver(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let token_requests = match at(obj, &["spec", "tokenRequests"]) {
        None => "<unset>".to_string(),
        Some(_) => list_at(obj, &["spec", "tokenRequests"])
            .iter()
            .map(|t| str_at(t, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
    };
    let modes = strings_at(obj, &["spec", "volumeLifecycleModes"]).join(",");
    cells![
        obj.name(),
        opt_bool(obj, &["spec", "attachRequired"]).unwrap_or(true),
        bool_at(obj, &["spec", "podInfoOnMount"]),
        bool_at(obj, &["spec", "storageCapacity"]),
        token_requests,
        bool_at(obj, &["spec", "requiresRepublish"]),
        if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes
        },
        age(obj, now),
    ]
}

/// Name, Drivers (their number), Age.
pub(super) fn csi_node(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        len_at(obj, &["spec", "drivers"]) as i64,
        age(obj, now)
    ]
}

/// Name, Attacher, PV, Node, Attached, Age.
pub(super) fn volume_attachment(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        str_at(obj, &["spec", "attacher"]),
        str_at(obj, &["spec", "source", "persistentVolumeName"]),
        str_at(obj, &["spec", "nodeName"]),
        bool_at(obj, &["status", "attached"]),
        age(obj, now),
    ]
}

/// Name (with " (default)" for the default class), DriverName, Age.
pub(super) fn volume_attributes_class(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut name = obj.name().to_string();
    if annotation_true(
        obj,
        "volumeattributesclass.alpha.kubernetes.io/is-default-class",
    ) {
        name.push_str(" (default)");
    }
    cells![name, str_at(obj, &["driverName"]), age(obj, now)]
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
    fn storage_classes() {
        let sc = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": true});
        assert_eq!(
            storage_class(&sc, now()),
            vec![
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Retain"),
                json!("WaitForFirstConsumer"),
                json!(true),
                json!("<unknown>")
            ]
        );
        let bare = storage_class(&json!({"metadata": {"name": "s"}}), now());
        assert_eq!(
            bare[..5],
            [
                json!("s"),
                json!(""),
                json!("Delete"),
                json!("Immediate"),
                json!(false)
            ]
        );
    }

    #[test]
    fn csi_drivers_nodes_attachments() {
        let d = json!({"metadata": {"name": "csi.example.com"}, "spec": {"attachRequired": false, "podInfoOnMount": true,
            "tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(
            csi_driver(&d, now()),
            vec![
                json!("csi.example.com"),
                json!(false),
                json!(true),
                json!(false),
                json!("a,b"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("<unknown>")
            ]
        );
        let bare = csi_driver(&json!({}), now());
        assert_eq!(
            (&bare[1], &bare[4], &bare[6]),
            (&json!(true), &json!("<unset>"), &json!("<none>"))
        );
        let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(csi_node(&node, now())[1], json!(2));
        let va = json!({"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
            "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}});
        assert_eq!(
            volume_attachment(&va, now()),
            vec![
                json!("va"),
                json!("csi.example.com"),
                json!("pv1"),
                json!("n1"),
                json!(true),
                json!("<unknown>")
            ]
        );
        let vac = json!({"metadata": {"name": "gold", "annotations": {
            "volumeattributesclass.alpha.kubernetes.io/is-default-class": "true"}}, "driverName": "d"});
        assert_eq!(
            volume_attributes_class(&vac, now())[..2],
            [json!("gold (default)"), json!("d")]
        );
    }
}
