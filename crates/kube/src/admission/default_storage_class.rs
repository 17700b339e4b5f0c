//! DefaultStorageClass (upstream: plugin/pkg/admission/storage/storageclass/setdefault): a
//! PersistentVolumeClaim created without a class gets the default StorageClass (the newest of
//! those annotated `storageclass.kubernetes.io/is-default-class: "true"`), if there is one.

use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apiserver::admission::{Attributes, MutatingPlugin, Operation};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;

pub struct DefaultStorageClass {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

#[async_trait]
impl MutatingPlugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if attrs.operation != Operation::Create
            || !attrs.subresource.is_empty()
            || !attrs.resource.group.is_empty()
            || attrs.resource.resource != "persistentvolumeclaims"
        {
            return Ok(());
        }
        // `PersistentVolumeClaimHasClass`: a class field (even empty) or the beta annotation.
        let has_class = obj
            .pointer("/spec/storageClassName")
            .is_some_and(|v| !v.is_null())
            || obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"))
                .is_some();
        if has_class {
            return Ok(());
        }
        let default = super::newest_default(
            &self.api,
            ("storage.k8s.io", "v1", "storageclasses"),
            &[
                "storageclass.kubernetes.io/is-default-class",
                "storageclass.beta.kubernetes.io/is-default-class",
            ],
        )
        .await?;
        if let (Some(name), Some(spec)) =
            (default, obj.get_mut("spec").and_then(Value::as_object_mut))
        {
            spec.insert("storageClassName".into(), Value::from(name));
        }
        Ok(())
    }
}
