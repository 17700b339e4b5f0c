//! PersistentVolumeClaimResize (upstream: plugin/pkg/admission/storage/persistentvolume/resize):
//! a claim may grow only once bound, and only when its StorageClass (the same before and after)
//! allows volume expansion.

use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::quantity::Quantity;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;
use storage::ResourceVersion;

pub struct PersistentVolumeClaimResize {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

fn storage_request(pvc: &Value) -> Quantity {
    pvc.pointer("/spec/resources/requests/storage")
        .and_then(Value::as_str)
        .and_then(|s| Quantity::parse(s).ok())
        .unwrap_or_else(|| Quantity::parse("0").expect("zero"))
}

/// `GetPersistentVolumeClaimClass`: the beta annotation, else the field.
fn class_of(pvc: &Value) -> &str {
    pvc.pointer("/metadata/annotations")
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
        .or_else(|| pvc.pointer("/spec/storageClassName"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[async_trait]
impl ValidatingPlugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        "PersistentVolumeClaimResize"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if attrs.operation != Operation::Update
            || !attrs.subresource.is_empty()
            || !attrs.resource.group.is_empty()
            || attrs.resource.resource != "persistentvolumeclaims"
        {
            return Ok(());
        }
        let Some(old) = attrs.old_object else {
            return Ok(());
        };
        if storage_request(obj) <= storage_request(old) {
            return Ok(());
        }
        let refuse = |why: &str| {
            Status::forbidden(
                &attrs.resource.group_resource(),
                obj.name(),
                why.to_string(),
            )
        };
        if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
            return Err(refuse(
                "Only bound persistent volume claims can be expanded",
            ));
        }
        let (class, old_class) = (class_of(obj), class_of(old));
        let mut allowed = false;
        if !class.is_empty()
            && class == old_class
            && let Some(store) = self
                .api
                .get()
                .and_then(|a| a.get("storage.k8s.io", "v1", "storageclasses"))
            && let Ok(sc) = store.get("", class, ResourceVersion::Any).await
            && let Ok(sc) = sc.value()
        {
            allowed = sc.get("allowVolumeExpansion") == Some(&Value::Bool(true));
        }
        if !allowed {
            return Err(refuse(
                "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
            ));
        }
        Ok(())
    }
}
