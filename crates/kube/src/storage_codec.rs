//! The storage codec of built-in kinds: the values kube-apiserver writes for them, chosen by
//! `--storage-media-type` (upstream: the storage codec `NewStorageCodec` builds over the
//! legacy scheme's serializers).
//!
//! Under `application/vnd.kubernetes.protobuf` (kube-apiserver's default) an object is stored as
//! upstream's protobuf serializer writes it: the `k8s\0` magic, then a `runtime.Unknown` whose
//! `typeMeta` is the storage version's apiVersion and kind and whose `raw` is the object's
//! message, with an empty `metadata.resourceVersion` (the store removes it before encoding, as
//! upstream's `PrepareObjectForStorage` does). So kube-apiserver reads what Ironplane writes on
//! the same etcd, and the other way round. `application/json` stores the JSON the store already
//! has (nothing is encoded twice); `application/yaml` stores YAML.
//!
//! Reads recognize every format whatever the flag says, as upstream's recognizing decoder does:
//! the store reads JSON itself and hands the rest here, where the `k8s\0` prefix marks protobuf
//! and anything else is read as YAML. Custom resources never come here: upstream stores them
//! as JSON whatever the flag says, and their stores keep the storage crate's JSON codec.
//!
//! A kind kube-apiserver stores in another version than the one Ironplane serves it in
//! (CustomResourceDefinitions, in v1beta1 JSON) has a `StoredVersion` row, handed in by its own
//! module at start-up: objects of that version are converted on every read, and the row may ask
//! that Ironplane write them in it too.

use std::sync::Arc;

use serde_json::Value;
use storage::{StorageCodec, StorageMediaType, StoredVersion};

/// The four bytes that open protobuf values (upstream's `protoEncodingPrefix`).
const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

/// Writes built-in objects in one media type and reads all of them.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinCodec {
    media_type: StorageMediaType,
    stored_versions: &'static [StoredVersion],
}

impl BuiltinCodec {
    /// The codec writing `media_type`, ready to hand to `storage::KvStore::with_codec`.
    pub fn shared(media_type: StorageMediaType) -> Arc<dyn StorageCodec> {
        Self::shared_with(media_type, &[])
    }

    /// [`BuiltinCodec::shared`] that also reads objects stored in `stored_versions`, and
    /// writes the kinds whose row says so in their stored version.
    pub fn shared_with(
        media_type: StorageMediaType,
        stored_versions: &'static [StoredVersion],
    ) -> Arc<dyn StorageCodec> {
        Arc::new(BuiltinCodec {
            media_type,
            stored_versions,
        })
    }

    /// The JSON of `obj` in the version kube-apiserver stores its kind in, when a
    /// [`StoredVersion`] row says Ironplane writes it so.
    fn stored_as_upstream(&self, obj: &Value) -> Result<Option<Vec<u8>>, String> {
        let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
        let Some((_, downgrade)) = self
            .stored_versions
            .iter()
            .filter(|v| v.kind == text("kind"))
            .find_map(|v| v.write.filter(|(kept, _)| *kept == text("apiVersion")))
        else {
            return Ok(None);
        };
        let mut stored = obj.clone();
        downgrade(&mut stored)?;
        serde_json::to_vec(&stored)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

impl StorageCodec for BuiltinCodec {
    fn encode(&self, obj: &Value) -> Result<Option<Vec<u8>>, String> {
        if let Some(stored) = self.stored_as_upstream(obj)? {
            return Ok(Some(stored));
        }
        match self.media_type {
            StorageMediaType::Json => Ok(None),
            StorageMediaType::Protobuf => {
                let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
                // Every built-in kind has a message; should a stored object ever have none (a
                // kind served without one), JSON keeps it readable rather than failing the
                // write.
                if !ironplane_protobuf::supports(text("apiVersion"), text("kind")) {
                    return Ok(None);
                }
                ironplane_protobuf::encode(obj)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
            StorageMediaType::Yaml => serde_yaml_ng::to_string(obj)
                .map(|text| Some(text.into_bytes()))
                .map_err(|e| e.to_string()),
        }
    }

    fn decode(&self, stored: &[u8]) -> Result<Value, String> {
        if stored.starts_with(PROTOBUF_MAGIC) {
            let mut obj = ironplane_protobuf::decode(stored).map_err(|e| e.to_string())?;
            restore_claim_template_type_meta(&mut obj);
            return Ok(obj);
        }
        apimachinery::yaml::to_json(stored)
            .map(|document| document.value)
            .map_err(|e| e.to_string())
    }

    /// Go's encoding of the kind's struct: members in declaration order.
    fn to_json(&self, obj: &Value) -> Vec<u8> {
        ironplane_protobuf::to_json(obj)
    }

    /// `ObjectMeta` declares `name`, `generateName`, `namespace`, `selfLink` and `uid` before
    /// `resourceVersion`.
    fn precedes_resource_version(&self, member: &[u8]) -> bool {
        matches!(
            member,
            b"name" | b"generateName" | b"namespace" | b"selfLink" | b"uid"
        )
    }

    fn upgrade(&self, obj: &mut Value) -> Result<bool, String> {
        if self.stored_versions.is_empty() {
            return Ok(false);
        }
        let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
        let Some(version) = self
            .stored_versions
            .iter()
            .find(|v| v.api_version == text("apiVersion") && v.kind == text("kind"))
        else {
            return Ok(false);
        };
        (version.upgrade)(obj)?;
        Ok(true)
    }
}

/// Sets the `apiVersion` and `kind` of a StatefulSet's claim templates, which protobuf has no
/// room for (a nested object's TypeMeta is not on the wire): upstream's conversion to apps/v1
/// sets them on every object it reads (`Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec`, kept
/// for clients of Kubernetes before 1.17), so a StatefulSet read from protobuf shows them as one
/// read from JSON does. No other stored kind nests an object with its own TypeMeta.
fn restore_claim_template_type_meta(obj: &mut Value) {
    if obj.get("apiVersion").and_then(Value::as_str) != Some("apps/v1")
        || obj.get("kind").and_then(Value::as_str) != Some("StatefulSet")
    {
        return;
    }
    let templates = obj
        .pointer_mut("/spec/volumeClaimTemplates")
        .and_then(Value::as_array_mut);
    for template in templates.into_iter().flatten() {
        if let Some(template) = template.as_object_mut() {
            template.insert("apiVersion".into(), Value::from("v1"));
            template.insert("kind".into(), Value::from("PersistentVolumeClaim"));
        }
    }
}

#[cfg(test)]
mod tests;
