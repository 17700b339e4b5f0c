//! StorageObjectInUseProtection (upstream:
//! plugin/pkg/admission/storage/storageobjectinuseprotection): a PersistentVolume, a
//! PersistentVolumeClaim or a VolumeAttributesClass created gets its protection finalizer
//! (`kubernetes.io/pv-protection`, `kubernetes.io/pvc-protection`, `kubernetes.io/vac-protection`,
//! the last because VolumeAttributesClass is GA and locked on in v1.36), so that it is not
//! removed while something uses it. Only creates of the resource itself.

use apimachinery::Status;
use apiserver::admission::{Attributes, MutatingPlugin, Operation};
use async_trait::async_trait;
use serde_json::Value;

pub struct StorageObjectInUseProtection;

/// The finalizer each protected resource gets, by (group, resource).
fn finalizer(group: &str, resource: &str) -> Option<&'static str> {
    match (group, resource) {
        ("", "persistentvolumes") => Some("kubernetes.io/pv-protection"),
        ("", "persistentvolumeclaims") => Some("kubernetes.io/pvc-protection"),
        ("storage.k8s.io", "volumeattributesclasses") => Some("kubernetes.io/vac-protection"),
        _ => None,
    }
}

#[async_trait]
impl MutatingPlugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if attrs.operation != Operation::Create || !attrs.subresource.is_empty() {
            return Ok(());
        }
        let Some(finalizer) = finalizer(&attrs.resource.group, &attrs.resource.resource) else {
            return Ok(());
        };
        let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let list = meta
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        if let Some(list) = list.as_array_mut()
            && !list.iter().any(|f| f == finalizer)
        {
            list.push(Value::from(finalizer));
        }
        Ok(())
    }
}
