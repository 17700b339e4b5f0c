//! TaintNodesByCondition (upstream: plugin/pkg/admission/nodetaint): a Node is created with the
//! `node.kubernetes.io/not-ready:NoSchedule` taint, so nothing is scheduled to it before its
//! kubelet reports it ready.

use apimachinery::Status;
use apiserver::admission::{Attributes, MutatingPlugin, Operation};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct TaintNodesByCondition;

#[async_trait]
impl MutatingPlugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        "TaintNodesByCondition"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if attrs.operation != Operation::Create
            || !attrs.subresource.is_empty()
            || !attrs.resource.group.is_empty()
            || attrs.resource.resource != "nodes"
        {
            return Ok(());
        }
        let Some(spec) = obj
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        else {
            return Ok(());
        };
        let taints = spec.entry("taints").or_insert_with(|| json!([]));
        if !taints.is_array() {
            *taints = json!([]);
        }
        let list = taints.as_array_mut().expect("taints is a list");
        // `MatchTaint`: the same key and effect.
        let present = list.iter().any(|t| {
            t.get("key").and_then(Value::as_str) == Some("node.kubernetes.io/not-ready")
                && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
        });
        if !present {
            list.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
        }
        Ok(())
    }
}
