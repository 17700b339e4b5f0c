//! DefaultTolerationSeconds (upstream: plugin/pkg/admission/defaulttolerationseconds): a Pod
//! created or updated without a toleration of the `not-ready` or `unreachable` NoExecute taints
//! gets one for 300 seconds, so that its node going away evicts it after five minutes.

use apimachinery::Status;
use apiserver::admission::{Attributes, MutatingPlugin, Operation};
use async_trait::async_trait;
use serde_json::{Value, json};

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`.
const TOLERATION_SECONDS: i64 = 300;

pub struct DefaultTolerationSeconds;

#[async_trait]
impl MutatingPlugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if !matches!(attrs.operation, Operation::Create | Operation::Update)
            || !attrs.subresource.is_empty()
            || !attrs.resource.group.is_empty()
            || attrs.resource.resource != "pods"
        {
            return Ok(());
        }
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let existing = spec.get("tolerations").and_then(Value::as_array);
        // A toleration with no key or no effect tolerates these too.
        let tolerates = |key: &str| {
            existing.into_iter().flatten().any(|t| {
                let k = t.get("key").and_then(Value::as_str).unwrap_or("");
                let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
                (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
            })
        };
        let missing: Vec<&str> = [NOT_READY, UNREACHABLE]
            .into_iter()
            .filter(|k| !tolerates(k))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let list = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        for key in missing {
            list.as_array_mut()
                .expect("tolerations is a list")
                .push(json!({
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": TOLERATION_SECONDS,
                }));
        }
        Ok(())
    }
}
