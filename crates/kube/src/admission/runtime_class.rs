//! RuntimeClass (upstream: plugin/pkg/admission/runtimeclass): a Pod created with a
//! `runtimeClassName` must name an existing RuntimeClass; it gets the class's overhead (a
//! different one it states is refused) and the class's node selector and tolerations merged
//! into its own (a conflicting selector is refused). A Pod with an overhead its class does not
//! define is refused.

use std::cmp::Ordering;
use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apimachinery::object::JsonPointer;
use apimachinery::quantity::Quantity;
use apiserver::admission::{Attributes, MutatingPlugin, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::{Map, Value};
use storage::ResourceVersion;

use super::forbidden;

pub struct RuntimeClass {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

fn applies(attrs: &Attributes<'_>) -> bool {
    attrs.operation == Operation::Create
        && attrs.subresource.is_empty()
        && attrs.resource.group.is_empty()
        && attrs.resource.resource == "pods"
}

impl RuntimeClass {
    /// `prepareObjects`: the pod's RuntimeClass, `None` when it names none.
    async fn class_of(&self, attrs: &Attributes<'_>, pod: &Value) -> Result<Option<Value>, Status> {
        let Some(name) = pod.at("/spec/runtimeClassName").and_then(Value::as_str) else {
            return Ok(None);
        };
        let Some(store) = self
            .api
            .get()
            .and_then(|a| a.get("node.k8s.io", "v1", "runtimeclasses"))
        else {
            return Ok(None);
        };
        // The cache first; a miss is confirmed with a read, as upstream asks its client.
        let found = match store.get("", name, ResourceVersion::Any).await {
            Ok(o) => Some(o),
            Err(s) if s.code == 404 => match store.get("", name, ResourceVersion::Unset).await {
                Ok(o) => Some(o),
                Err(s) if s.code == 404 => None,
                Err(s) => return Err(s),
            },
            Err(s) => return Err(s),
        };
        match found {
            Some(o) => Ok(Some(o.value().map_err(Status::internal)?)),
            None => Err(forbidden(
                attrs,
                pod,
                format!("pod rejected: RuntimeClass {} not found", go_quote(name)),
            )),
        }
    }
}

fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Two resource lists hold the same amounts (Go's semantic equality of quantities).
fn same_resources(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = Map::new();
    let a = a.and_then(Value::as_object).unwrap_or(&empty);
    let b = b.and_then(Value::as_object).unwrap_or(&empty);
    a.len() == b.len()
        && a.iter().all(|(k, v)| {
            let parse = |v: &Value| v.as_str().and_then(|s| Quantity::parse(s).ok());
            match (parse(v), b.get(k).and_then(parse)) {
                (Some(x), Some(y)) => x.cmp(&y) == Ordering::Equal,
                _ => Some(v) == b.get(k),
            }
        })
}

/// A toleration as Go compares it: absent fields are empty.
#[derive(PartialEq)]
struct Toleration<'a> {
    key: &'a str,
    operator: &'a str,
    value: &'a str,
    effect: &'a str,
    seconds: Option<i64>,
}

impl<'a> Toleration<'a> {
    fn of(t: &'a Value) -> Toleration<'a> {
        let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
        Toleration {
            key: s("key"),
            operator: s("operator"),
            value: s("value"),
            effect: s("effect"),
            seconds: t.get("tolerationSeconds").and_then(Value::as_i64),
        }
    }

    /// `isSuperset`: `self` tolerates everything `t` does.
    fn covers(&self, t: &Toleration<'_>) -> bool {
        if self == t {
            return true;
        }
        if t.key != self.key && (!self.key.is_empty() || self.operator != "Exists") {
            return false;
        }
        if t.effect != self.effect && !self.effect.is_empty() {
            return false;
        }
        if self.effect == "NoExecute"
            && let Some(mine) = self.seconds
            && t.seconds.is_none_or(|theirs| theirs > mine)
        {
            return false;
        }
        match self.operator {
            "Equal" | "" => t.operator == "Equal" && t.value == self.value,
            "Exists" => true,
            _ => false,
        }
    }
}

/// `MergeTolerations`: both lists, without the tolerations another one already covers.
fn merge_tolerations(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<&Value> = first.iter().chain(second).collect();
    let mut merged: Vec<&Value> = Vec::new();
    'next: for (i, t) in all.iter().enumerate() {
        let tol = Toleration::of(t);
        if merged.iter().any(|m| Toleration::of(m).covers(&tol)) {
            continue;
        }
        for later in &all[i + 1..] {
            let l = Toleration::of(later);
            if l != tol && l.covers(&tol) {
                continue 'next;
            }
        }
        merged.push(t);
    }
    merged.into_iter().cloned().collect()
}

#[async_trait]
impl MutatingPlugin for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if !applies(attrs) {
            return Ok(());
        }
        let Some(class) = self.class_of(attrs, obj).await? else {
            return Ok(());
        };
        let shown = obj.clone();
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        // `setOverhead`.
        if let Some(fixed) = class.at("/overhead/podFixed") {
            let stated = spec
                .get("overhead")
                .filter(|o| o.as_object().is_some_and(|m| !m.is_empty()));
            if stated.is_some() && !same_resources(stated, Some(fixed)) {
                return Err(forbidden(
                    attrs,
                    &shown,
                    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
                        .into(),
                ));
            }
            spec.insert("overhead".into(), fixed.clone());
        }
        // `setScheduling`.
        if let Some(scheduling) = class.get("scheduling").filter(|s| s.is_object()) {
            let class_selector = scheduling.get("nodeSelector").and_then(Value::as_object);
            match spec.get_mut("nodeSelector").and_then(Value::as_object_mut) {
                Some(pod_selector) => {
                    for (k, v) in class_selector.into_iter().flatten() {
                        if let Some(theirs) = pod_selector.get(k)
                            && theirs != v
                        {
                            let show = |v: &Value| v.as_str().unwrap_or_default().to_string();
                            return Err(forbidden(
                                attrs,
                                &shown,
                                format!(
                                    "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                                    show(v),
                                    show(theirs)
                                ),
                            ));
                        }
                        pod_selector.insert(k.clone(), v.clone());
                    }
                }
                None => {
                    if let Some(sel) = class_selector {
                        spec.insert("nodeSelector".into(), Value::Object(sel.clone()));
                    }
                }
            }
            let empty = Vec::new();
            let pod_tolerations = spec
                .get("tolerations")
                .and_then(Value::as_array)
                .unwrap_or(&empty);
            let class_tolerations = scheduling
                .get("tolerations")
                .and_then(Value::as_array)
                .unwrap_or(&empty);
            let merged = merge_tolerations(pod_tolerations, class_tolerations);
            if merged.is_empty() {
                spec.remove("tolerations");
            } else {
                spec.insert("tolerations".into(), Value::Array(merged));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ValidatingPlugin for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    /// `validateOverhead`.
    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !applies(attrs) {
            return Ok(());
        }
        let class = self.class_of(attrs, obj).await?;
        let stated = obj.at("/spec/overhead").filter(|o| !o.is_null());
        match class.as_ref().and_then(|c| c.at("/overhead/podFixed")) {
            Some(fixed) if !same_resources(Some(fixed), stated) => Err(forbidden(
                attrs,
                obj,
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into(),
            )),
            Some(_) => Ok(()),
            None if stated.is_some() => Err(forbidden(
                attrs,
                obj,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tolerations_covered_by_another_are_merged_away() {
        let pod = vec![json!({"key": "a", "operator": "Exists"})];
        let class = vec![
            json!({"key": "a", "operator": "Equal", "value": "x"}),
            json!({"key": "b", "operator": "Exists", "effect": "NoSchedule"}),
        ];
        assert_eq!(
            merge_tolerations(&pod, &class),
            vec![
                json!({"key": "a", "operator": "Exists"}),
                json!({"key": "b", "operator": "Exists", "effect": "NoSchedule"})
            ]
        );
    }

    #[test]
    fn quantities_compare_by_amount() {
        assert!(same_resources(
            Some(&json!({"cpu": "1000m"})),
            Some(&json!({"cpu": "1"}))
        ));
        assert!(!same_resources(
            Some(&json!({"cpu": "1"})),
            Some(&json!({"cpu": "2"}))
        ));
    }
}
