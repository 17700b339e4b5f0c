//! Resource quota (upstream: k8s.io/apiserver/pkg/quota/v1 and pkg/quota/v1/evaluator/core):
//! what the ResourceQuota admission plugin and the quota controller share — resource lists and
//! their arithmetic (`resources.go`), the evaluators that say what an object uses
//! (`evaluators`; DRA ResourceClaims' in `resource_claims`), the admission check of one request
//! against a namespace's quotas (`check`), and `Quotas`, the per-namespace locks and the
//! look-aside copy of the quotas this server wrote last, through which every `status.used`
//! write goes, with the DeviceClass mapping both evaluate claims by.

pub mod check;
pub mod evaluators;
pub mod resource_claims;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::quantity::{Format, Quantity};
use apiserver::authentication::UserInfo;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use serde_json::{Map, Value};
use storage::{ListOptions, ResourceVersion};

/// A `corev1.ResourceList`: resource names to quantities, in name order.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Zero, as Go's `resource.Quantity{Format: DecimalSI}`.
pub fn zero() -> Quantity {
    Quantity::new(0, 0, Format::DecimalSI)
}

/// A whole count (`resource.NewQuantity(n, DecimalSI)`).
pub fn count(n: i64) -> Quantity {
    Quantity::new(n, 0, Format::DecimalSI)
}

/// Go's `Quantity.Add`: a zero takes the format of what is added to it.
fn go_add(a: &Quantity, b: &Quantity) -> Quantity {
    let mut sum = a.add(b);
    if a.is_zero() {
        sum.format = b.format;
    }
    sum
}

/// Reads a resource list from JSON (entries that are not quantities are left out).
pub fn from_json(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), Quantity::parse(q.as_str()?).ok()?)))
        .collect()
}

/// Writes a resource list as JSON, each quantity as Go marshals it.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), Value::from(q.canonical())))
            .collect::<Map<_, _>>(),
    )
}

/// `quota.Add`.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        let sum = match out.get(k) {
            Some(old) => go_add(old, q),
            None => q.clone(),
        };
        out.insert(k.clone(), sum);
    }
    out
}

/// `quota.SubtractWithNonNegativeResult`: `a - b`, with nothing below zero; names only in
/// `b` are zero.
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, q) in a {
        let diff = match b.get(k) {
            Some(other) => {
                let mut d = q.add(&other.neg());
                if q.is_zero() {
                    d.format = other.format;
                }
                d
            }
            None => q.clone(),
        };
        out.insert(k.clone(), if diff.sign() > 0 { diff } else { zero() });
    }
    for k in b.keys() {
        out.entry(k.clone()).or_insert_with(zero);
    }
    out
}

/// `quota.Mask`: only the entries named.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    let names: BTreeSet<&String> = names.into_iter().collect();
    list.iter()
        .filter(|(k, _)| names.contains(k))
        .map(|(k, q)| (k.clone(), q.clone()))
        .collect()
}

/// `quota.Equals`: the same names with equal values.
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k) == Some(q))
}

/// `quota.RemoveZeros`.
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(_, q)| !q.is_zero())
        .map(|(k, q)| (k.clone(), q.clone()))
        .collect()
}

/// `quota.LessThanOrEqual`: the names of `a` above their bound in `b`, sorted.
pub fn exceeding(a: &ResourceList, b: &ResourceList) -> Vec<String> {
    b.iter()
        .filter(|(k, bound)| a.get(*k).is_some_and(|v| v > *bound))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The admission plugin's `prettyPrint`: `name=value` pairs in name order, comma-separated.
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={}", q.canonical()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One `ScopedResourceSelectorRequirement`: a scope of `spec.scopes` is `Exists`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeSelector {
    pub scope: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl ScopeSelector {
    /// Whether the label set `{scope: value}` (empty when `value` is None) matches, as the
    /// label selector `ScopedResourceSelectorRequirementsAsSelector` makes would.
    pub fn matches_value(&self, value: Option<&str>) -> Result<bool, String> {
        match self.operator.as_str() {
            "In" => Ok(value.is_some_and(|v| self.values.iter().any(|x| x == v))),
            "NotIn" => Ok(value.is_none_or(|v| !self.values.iter().any(|x| x == v))),
            "Exists" => Ok(value.is_some()),
            "DoesNotExist" => Ok(value.is_none()),
            op => Err(format!("{op:?} is not a valid scope selector operator")),
        }
    }
}

/// The scopes of a quota as selectors (`getScopeSelectorsFromQuota`): each of `spec.scopes` as
/// `Exists`, then `spec.scopeSelector.matchExpressions`.
pub fn scope_selectors(quota: &Value) -> Vec<ScopeSelector> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let mut out: Vec<ScopeSelector> = strings(quota.pointer("/spec/scopes"))
        .into_iter()
        .map(|scope| ScopeSelector {
            scope,
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(ScopeSelector {
            scope: e
                .get("scopeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            operator: e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            values: strings(e.get("values")),
        });
    }
    out
}

/// The identity the server's own quota writes use (upstream's loopback client).
pub fn loopback_user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        uid: String::new(),
        groups: vec!["system:authenticated".into(), "system:masters".into()],
        extra: Default::default(),
    }
}

/// What the ResourceQuota plugin and the quota controller of one server share: a lock per
/// namespace, so that the read, check and write of its quotas is one step at a time, and the
/// quotas as this server last wrote them (upstream's `updatedQuotas` look-aside cache), newer
/// than the watch cache for a moment after each write.
#[derive(Clone, Default)]
pub struct Quotas {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    written: Mutex<HashMap<(String, String), (i64, Value)>>,
    /// One mapping for the plugin and the controller, as upstream's evaluator registry has one
    /// (upstream's two live in two processes).
    classes: resource_claims::ExtendedResources,
}

fn rv_of(v: &Value) -> i64 {
    v.resource_version().parse().unwrap_or(0)
}

impl Quotas {
    /// The evaluator of `group`/`resource` (see `evaluators::for_resource`).
    pub fn evaluator(&self, group: &str, resource: &str) -> Option<evaluators::Evaluator> {
        evaluators::for_resource(group, resource, &self.inner.classes)
    }

    /// The resources that track quota resource `name` (see `evaluators::tracked_by`).
    pub fn tracked_by(&self, name: &str) -> Vec<(String, String)> {
        evaluators::tracked_by(name, &self.inner.classes)
    }

    /// The DeviceClass mapping, to start and to wait for.
    pub fn extended_resources(&self) -> &resource_claims::ExtendedResources {
        &self.inner.classes
    }

    /// Holds the quotas of `namespace` until the guard is dropped.
    pub async fn lock(&self, namespace: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.inner.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks
                .entry(namespace.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        lock.lock_owned().await
    }

    /// The quotas of `namespace`, by name: from the watch cache (`fresh`: a consistent read),
    /// each replaced by this server's own later write when there is one.
    pub async fn list(
        &self,
        store: &RegistryStore,
        namespace: &str,
        fresh: bool,
    ) -> Result<Vec<Value>, Status> {
        let opts = ListOptions {
            resource_version: if fresh {
                ResourceVersion::Unset
            } else {
                ResourceVersion::Any
            },
            ..Default::default()
        };
        let list = store.list(namespace, &opts).await?;
        let mut out = Vec::with_capacity(list.items.len());
        let mut written = self.inner.written.lock().unwrap_or_else(|e| e.into_inner());
        for item in list.items {
            let mut v = item.value().map_err(Status::internal)?;
            let key = (namespace.to_string(), v.name().to_string());
            if let Some((rv, mine)) = written.get(&key) {
                if *rv > rv_of(&v) {
                    v = mine.clone();
                } else {
                    written.remove(&key);
                }
            }
            out.push(v);
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(out)
    }

    /// Writes `quota` through `/status`, on the condition that it is still at the
    /// resourceVersion it carries (a 409 otherwise), and remembers what was stored.
    pub async fn write_status(&self, store: &RegistryStore, quota: Value) -> Result<(), Status> {
        let user = loopback_user();
        let requester = Requester { user: &user };
        let (namespace, name) = (quota.namespace().to_string(), quota.name().to_string());
        let mut updater = |_: Option<&Value>| Ok(quota.clone());
        let opts = UpdateOptions {
            subresource: "status".into(),
            ..Default::default()
        };
        let (stored, _) = store
            .update(&requester, &namespace, &name, &mut updater, &opts)
            .await?;
        let v = stored.value().map_err(Status::internal)?;
        self.inner
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((namespace, name), (stored.resource_version, v));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn arithmetic_as_upstream() {
        let a = list(&[("cpu", "500m"), ("pods", "1")]);
        let b = list(&[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(pretty(&add(&a, &b)), "cpu=1500m,memory=1Gi,pods=1");
        // A zero takes the format of what is added to it.
        let z = list(&[("memory", "0")]);
        assert_eq!(pretty(&add(&z, &b)), "cpu=1,memory=1Gi");
        assert_eq!(
            pretty(&subtract_non_negative(&a, &b)),
            "cpu=0,memory=0,pods=1"
        );
        assert_eq!(
            pretty(&subtract_non_negative(&b, &a)),
            "cpu=500m,memory=1Gi,pods=0"
        );
        assert_eq!(
            exceeding(&list(&[("cpu", "2"), ("pods", "3")]), &b),
            vec!["cpu"]
        );
        assert!(equals(&list(&[("cpu", "1000m")]), &list(&[("cpu", "1")])));
        assert_eq!(
            pretty(&remove_zeros(&subtract_non_negative(&a, &b))),
            "pods=1"
        );
    }

    #[test]
    fn scope_selectors_match_as_label_selectors() {
        let q = serde_json::json!({"spec": {"scopes": ["BestEffort"], "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn",
                                  "values": ["low"]}]}}});
        let s = scope_selectors(&q);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].scope.as_str(), s[0].operator.as_str()),
            ("BestEffort", "Exists")
        );
        assert_eq!(s[1].matches_value(None), Ok(true));
        assert_eq!(s[1].matches_value(Some("low")), Ok(false));
        assert_eq!(s[1].matches_value(Some("high")), Ok(true));
    }
}
