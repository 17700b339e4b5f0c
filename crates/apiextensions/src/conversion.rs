//! Conversion of custom resources by a CRD's conversion webhook (upstream: apiextensions-apiserver
//! pkg/apiserver/conversion/webhook_converter.go). Objects not already in the wanted version go
//! to the webhook in one `ConversionReview` (the first of the CRD's `conversionReviewVersions`
//! this server speaks); the answer is checked as upstream checks it (review kind, uid, result,
//! count, each object's apiVersion, kind, name, namespace and uid), and the objects keep their
//! own metadata except labels and annotations, which the webhook may change. Every failure is
//! `conversion webhook for <gvk> failed: ...`, answered as a 500 without a reason, and nothing
//! is written.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::validation::{
    FieldPath, aggregate_message, go_quote, validate_annotations, validate_labels,
};
use apiserver::registry::{Conversion, SyncConversion};
use apiserver::util::webhook::{ClientConfig, ServiceResolver, post_json};
use async_trait::async_trait;
use serde_json::{Value, json};
use storage::StorageError;

use crate::strategy::go_type;

/// Upstream's conversion webhooks wait 30 seconds.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The webhook of a CRD, and how its objects read and write between one served version and the
/// storage version.
pub struct WebhookConversion<L> {
    /// The in-process part: apiVersion, pruning and defaults by the served schema.
    pub local: L,
    pub group: String,
    pub served_version: String,
    pub storage_version: String,
    pub kind: String,
    pub list_kind: String,
    pub client: ClientConfig,
    /// `apiextensions.k8s.io/v1` or `/v1beta1`: the first review version the CRD lists that this
    /// server speaks.
    pub review_api_version: Option<&'static str>,
    pub resolver: Option<Arc<dyn ServiceResolver>>,
}

/// The review version a CRD's list names first among those this server speaks.
pub fn review_api_version(versions: &[String]) -> Option<&'static str> {
    versions.iter().find_map(|v| match v.as_str() {
        "v1" => Some("apiextensions.k8s.io/v1"),
        "v1beta1" => Some("apiextensions.k8s.io/v1beta1"),
        _ => None,
    })
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

impl<L: SyncConversion> WebhookConversion<L> {
    fn gvk(&self, version: &str, kind: &str) -> String {
        format!("{}/{version}, Kind={kind}", self.group)
    }

    /// Converts `objs` (all of `from_version`) to `to_version` through the webhook; `list`
    /// names the list kind in errors, as upstream converts the list object.
    async fn call(
        &self,
        mut objs: Vec<Value>,
        from_version: &str,
        to_version: &str,
        list: bool,
    ) -> Result<Vec<Value>, StorageError> {
        let desired = format!("{}/{to_version}", self.group);
        let gvk = self.gvk(
            from_version,
            if list { &self.list_kind } else { &self.kind },
        );
        let failed = |why: String| {
            StorageError::Unknown(format!("conversion webhook for {gvk} failed: {why}"))
        };
        let pending: Vec<usize> = (0..objs.len())
            .filter(|i| text(&objs[*i], "/apiVersion") != desired)
            .collect();
        if pending.is_empty() {
            return Ok(objs);
        }
        let Some(review_api_version) = self.review_api_version else {
            return Err(StorageError::Unknown(
                "no supported conversion review versions".into(),
            ));
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": review_api_version,
            "request": {
                "uid": uid,
                "desiredAPIVersion": desired,
                "objects": pending.iter().map(|i| objs[*i].clone()).collect::<Vec<_>>(),
            },
            "response": {"uid": "", "convertedObjects": null, "result": {"metadata": {}}},
        });
        let answer = post_json(&self.client, self.resolver.as_ref(), &review, TIMEOUT)
            .await
            .map_err(|e| failed(e.client_text()))?;
        let converted = converted_objects(&answer, review_api_version, &uid).map_err(failed)?;
        if converted.len() != pending.len() {
            return Err(StorageError::Unknown(format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                pending.len()
            )));
        }
        for (n, (i, mut out)) in pending.into_iter().zip(converted).enumerate() {
            let original = &objs[i];
            let invalid = |why: String| {
                StorageError::Unknown(if list {
                    format!(
                        "conversion webhook for {gvk} returned invalid converted object at index {n}: {why}"
                    )
                } else {
                    format!(
                        "conversion webhook for {gvk} returned invalid object at index 0: {why}"
                    )
                })
            };
            if !out.is_object() {
                return Err(invalid("not an object".into()));
            }
            let got = text(&out, "/apiVersion");
            if got != desired {
                return Err(invalid(format!(
                    "invalid groupVersion (expected {desired}, received {got})"
                )));
            }
            let (want_kind, got_kind) = (text(original, "/kind"), text(&out, "/kind"));
            if want_kind != got_kind {
                return Err(invalid(format!(
                    "invalid kind (expected {want_kind}, received {got_kind})"
                )));
            }
            for (field, what) in [
                ("/metadata/name", "name"),
                ("/metadata/namespace", "namespace"),
                ("/metadata/uid", "UID"),
            ] {
                let (a, b) = (text(original, field), text(&out, field));
                if a != b {
                    let why = format!("must have the same {what}: {a} != {b}");
                    return Err(StorageError::Unknown(if list {
                        format!(
                            "conversion webhook for {gvk} returned invalid converted object at index {n}: {why}"
                        )
                    } else {
                        format!("conversion webhook for {gvk} returned invalid object: {why}")
                    }));
                }
            }
            restore_object_meta(original, &mut out).map_err(|why| {
                StorageError::Unknown(if list {
                    format!(
                        "conversion webhook for {gvk} returned invalid metadata in object at index {n}: {why}"
                    )
                } else {
                    format!("conversion webhook for {gvk} returned invalid metadata: {why}")
                })
            })?;
            objs[i] = out;
        }
        Ok(objs)
    }
}

/// `getConvertedObjectsFromResponse`.
fn converted_objects(answer: &Value, api_version: &str, uid: &str) -> Result<Vec<Value>, String> {
    let (got_version, got_kind) = (text(answer, "/apiVersion"), text(answer, "/kind"));
    if api_version == "apiextensions.k8s.io/v1"
        && (got_version != api_version || got_kind != "ConversionReview")
    {
        let shown = apimachinery::gvk::go_gvk_string;
        return Err(format!(
            "expected webhook response of {}, got {}",
            shown(api_version, "ConversionReview"),
            shown(got_version, got_kind)
        ));
    }
    let Some(response) = answer.get("response").filter(|r| r.is_object()) else {
        return Err("no response provided".into());
    };
    if api_version == "apiextensions.k8s.io/v1" {
        let got = text(response, "/uid");
        if got != uid {
            return Err(format!(
                "expected response.uid={}, got {}",
                go_quote(uid),
                go_quote(got)
            ));
        }
    }
    let status = text(response, "/result/status");
    if status != "Success" {
        let message = text(response, "/result/message");
        if !message.is_empty() {
            return Err(message.to_string());
        }
        return Err(format!(
            "response.result.status was '{status}', not 'Success'"
        ));
    }
    Ok(response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// `restoreObjectMeta`: the original metadata stays, but for labels and annotations, which the
/// webhook may change (valid ones only).
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), String> {
    let response_meta = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ));
        }
    };
    let mut meta = original
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        let Some(response_field) = response_meta.get(field).filter(|v| !v.is_null()) else {
            meta.remove(field);
            continue;
        };
        let Some(response_map) = response_field.as_object() else {
            return Err(format!(
                "invalid metadata.{field} of type {} in converted object",
                go_type(response_field)
            ));
        };
        let original_map = meta
            .get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut changed = original_map.len() != response_map.len();
        for (k, v) in response_map {
            if !v.is_string() {
                return Err(format!(
                    "metadata.{field}[{k}] must be a string, but is {} in converted object",
                    go_type(v)
                ));
            }
            changed |= original_map.get(k) != Some(v);
        }
        if changed {
            let as_value = Value::Object(response_map.clone());
            let errs = if field == "labels" {
                validate_labels(Some(&as_value), &FieldPath::new("metadata").child("labels"))
            } else {
                validate_annotations(
                    Some(&as_value),
                    &FieldPath::new("metadata").child("annotation"),
                )
            };
            if !errs.is_empty() {
                return Err(aggregate_message(&errs));
            }
        }
        meta.insert(field.to_string(), Value::Object(response_map.clone()));
    }
    converted["metadata"] = Value::Object(meta);
    Ok(())
}

#[async_trait]
impl<L: SyncConversion> Conversion for WebhookConversion<L> {
    async fn to_served(&self, objs: Vec<Value>, list: bool) -> Result<Vec<Value>, StorageError> {
        let objs = if self.served_version == self.storage_version {
            objs
        } else {
            self.call(objs, &self.storage_version, &self.served_version, list)
                .await?
        };
        Ok(objs.into_iter().map(|o| self.local.to_served(o)).collect())
    }

    /// The webhook is asked on every read, as upstream asks it; the storage version never
    /// calls it.
    fn cacheable(&self) -> bool {
        self.served_version == self.storage_version
    }

    async fn to_storage(&self, obj: Value) -> Result<Value, StorageError> {
        if self.served_version == self.storage_version {
            return Ok(self.local.to_storage(obj));
        }
        let mut out = self
            .call(
                vec![obj],
                &self.served_version,
                &self.storage_version,
                false,
            )
            .await?;
        out.pop()
            .ok_or_else(|| StorageError::Internal("conversion returned no object".into()))
    }
}
