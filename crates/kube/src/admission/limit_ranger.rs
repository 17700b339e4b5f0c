//! LimitRanger (upstream: plugin/pkg/admission/limitranger): the LimitRanges of a namespace
//! give the containers of a Pod created there their default requests and limits (recorded in
//! the `kubernetes.io/limit-ranger` annotation), and bound what Pods, their containers and
//! PersistentVolumeClaims ask for (min, max, max limit/request ratio). A refusal lists every
//! bound broken, in upstream's words.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::quantity::Quantity;
use apiserver::admission::{Attributes, MutatingPlugin, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use storage::{ListOptions, Predicate, ResourceVersion};

use super::forbidden;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";
/// `resource.MaxMilliValue`: above it, values are compared whole instead of in thousandths.
const MAX_MILLI_VALUE: i64 = i64::MAX / 1000;

pub struct LimitRanger {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

type Resources = BTreeMap<String, Quantity>;

fn resources(v: Option<&Value>) -> Resources {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), Quantity::parse(q.as_str()?).ok()?)))
        .collect()
}

/// `SupportsAttributes`: pods on create (and their resize), claims on create and update.
fn supports(attrs: &Attributes<'_>) -> Option<&'static str> {
    if !attrs.resource.group.is_empty() {
        return None;
    }
    match (
        attrs.resource.resource.as_str(),
        attrs.subresource,
        attrs.operation,
    ) {
        ("pods", "resize", Operation::Update) => Some("pods"),
        ("pods", "", Operation::Create) => Some("pods"),
        ("persistentvolumeclaims", "", Operation::Create | Operation::Update) => {
            Some("persistentvolumeclaims")
        }
        _ => None,
    }
}

impl LimitRanger {
    /// The namespace's LimitRanges, in name order.
    async fn limit_ranges(&self, namespace: &str) -> Result<Vec<Value>, Status> {
        let Some(store) = self.api.get().and_then(|a| a.get("", "v1", "limitranges")) else {
            return Ok(Vec::new());
        };
        let opts = ListOptions {
            resource_version: ResourceVersion::Any,
            predicate: Predicate::default(),
            ..Default::default()
        };
        let list = store.list(namespace, &opts).await?;
        let mut out = Vec::with_capacity(list.items.len());
        for item in list.items {
            out.push(item.value().map_err(Status::internal)?);
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(out)
    }

    /// Whether the request applies, with the namespace's LimitRanges (`runLimitFunc`: nothing
    /// for an object already being deleted).
    async fn ranges_for(&self, attrs: &Attributes<'_>) -> Result<Vec<Value>, Status> {
        if supports(attrs).is_none()
            || attrs
                .old_object
                .is_some_and(|o| o.deletion_timestamp().is_some())
        {
            return Ok(Vec::new());
        }
        self.limit_ranges(attrs.namespace).await
    }
}

/// The limits of one type (`Container`, `Pod`, `PersistentVolumeClaim`) of a LimitRange.
fn limits_of<'a>(range: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |l| l.get("type").and_then(Value::as_str) == Some(kind))
}

#[async_trait]
impl MutatingPlugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    /// `PodMutateLimitFunc`: each LimitRange's container defaults fill what a container lacks.
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if supports(attrs) != Some("pods") {
            return Ok(());
        }
        for range in self.ranges_for(attrs).await? {
            let (mut requests, mut limits) = (Map::new(), Map::new());
            for limit in limits_of(&range, "Container") {
                if let Some(d) = limit.get("defaultRequest").and_then(Value::as_object) {
                    requests.extend(d.clone());
                }
                if let Some(d) = limit.get("default").and_then(Value::as_object) {
                    limits.extend(d.clone());
                }
            }
            let mut notes = Vec::new();
            for (list, what) in [
                ("containers", "container"),
                ("initContainers", "init container"),
            ] {
                let Some(containers) = obj
                    .pointer_mut(&format!("/spec/{list}"))
                    .and_then(Value::as_array_mut)
                else {
                    continue;
                };
                for c in containers {
                    let name = c
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let set_limits = fill(c, "limits", &limits);
                    let set_requests = fill(c, "requests", &requests);
                    if !set_requests.is_empty() {
                        notes.push(format!(
                            "{} request for {what} {name}",
                            set_requests.join(", ")
                        ));
                    }
                    if !set_limits.is_empty() {
                        notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
                    }
                }
            }
            if !notes.is_empty() {
                let meta = obj.metadata_mut();
                let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations[ANNOTATION] =
                    Value::from(format!("LimitRanger plugin set: {}", notes.join("; ")));
            }
        }
        Ok(())
    }
}

/// Sets each default a container's `resources.<field>` lacks; the names set, sorted.
fn fill(container: &mut Value, field: &str, defaults: &Map<String, Value>) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    let Some(c) = container.as_object_mut() else {
        return Vec::new();
    };
    let resources = c.entry("resources").or_insert_with(|| json!({}));
    if !resources.is_object() {
        *resources = json!({});
    }
    let list = resources
        .as_object_mut()
        .expect("resources is an object")
        .entry(field)
        .or_insert_with(|| json!({}));
    if !list.is_object() {
        *list = json!({});
    }
    let list = list.as_object_mut().expect("a resource list");
    let mut set = Vec::new();
    for (k, v) in defaults {
        if !list.contains_key(k) {
            list.insert(k.clone(), v.clone());
            set.push(k.clone());
        }
    }
    set.sort();
    set
}

/// `requestLimitEnforcedValues`: whole values, or thousandths when all three fit.
fn values(req: Option<&Quantity>, lim: Option<&Quantity>, enforced: &Quantity) -> (i64, i64, i64) {
    let zero = Quantity::parse("0").expect("zero");
    let (r, l) = (req.unwrap_or(&zero), lim.unwrap_or(&zero));
    if r.value() <= MAX_MILLI_VALUE
        && l.value() <= MAX_MILLI_VALUE
        && enforced.value() <= MAX_MILLI_VALUE
    {
        (r.milli_value(), l.milli_value(), enforced.milli_value())
    } else {
        (r.value(), l.value(), enforced.value())
    }
}

fn min_constraint(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, ev) = values(r, l, enforced);
    let Some(r) = r else {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    if rv < ev {
        return Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but request is {r}"
        ));
    }
    match l {
        Some(l) if lv < ev => Some(format!(
            "minimum {name} usage per {kind} is {enforced}, but limit is {l}"
        )),
        _ => None,
    }
}

fn max_request_constraint(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    req: &Resources,
) -> Option<String> {
    let r = req.get(name);
    let (rv, _, ev) = values(r, None, enforced);
    let Some(r) = r else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No request is specified"
        ));
    };
    (rv > ev).then(|| format!("maximum {name} usage per {kind} is {enforced}, but request is {r}"))
}

fn max_constraint(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, ev) = values(r, l, enforced);
    let Some(l) = l else {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}.  No limit is specified"
        ));
    };
    if lv > ev {
        return Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but limit is {l}"
        ));
    }
    match r {
        Some(r) if rv > ev => Some(format!(
            "maximum {name} usage per {kind} is {enforced}, but request is {r}"
        )),
        _ => None,
    }
}

fn ratio_constraint(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    req: &Resources,
    lim: &Resources,
) -> Option<String> {
    let (r, l) = (req.get(name), lim.get(name));
    let (rv, lv, _) = values(r, l, enforced);
    if r.is_none() || rv == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ));
    }
    if l.is_none() || lv == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ));
    }
    let shown = lv as f64 / rv as f64;
    let (observed, max) = if enforced.value() <= MAX_MILLI_VALUE {
        (shown * 1000.0, enforced.milli_value() as f64)
    } else {
        (shown, enforced.value() as f64)
    };
    (observed > max).then(|| {
        format!("{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {shown:.6}")
    })
}

/// The min, max and ratio bounds of one limit against requests and limits.
fn check_bounds(
    limit: &Value,
    kind: &str,
    req: &Resources,
    lim: &Resources,
    errs: &mut Vec<String>,
) {
    for (k, v) in resources(limit.get("min")) {
        errs.extend(min_constraint(kind, &k, &v, req, lim));
    }
    for (k, v) in resources(limit.get("max")) {
        errs.extend(max_constraint(kind, &k, &v, req, lim));
    }
    for (k, v) in resources(limit.get("maxLimitRequestRatio")) {
        errs.extend(ratio_constraint(kind, &k, &v, req, lim));
    }
}

fn add(list: &mut Resources, other: &Resources) {
    for (k, q) in other {
        let sum = match list.get(k) {
            Some(v) => v.add(q),
            None => q.clone(),
        };
        list.insert(k.clone(), sum);
    }
}

fn max_into(list: &mut Resources, other: &Resources) {
    for (k, q) in other {
        if list.get(k).is_none_or(|v| q > v) {
            list.insert(k.clone(), q.clone());
        }
    }
}

/// `podRequests`/`podLimits`: containers summed, sidecars added, the largest init container
/// (with the sidecars started before it) as a floor, pod-level cpu and memory overriding.
fn pod_total(pod: &Value, field: &str) -> Resources {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let of = |c: &Value| resources(c.pointer(&format!("/resources/{field}")));
    let mut total = Resources::new();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(&mut total, &of(c));
    }
    let (mut sidecars, mut init) = (Resources::new(), Resources::new());
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let own = of(c);
        let effective = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut tmp = own;
            add(&mut tmp, &sidecars);
            tmp
        };
        max_into(&mut init, &effective);
    }
    max_into(&mut total, &init);
    for (k, q) in resources(spec.pointer(&format!("/resources/{field}"))) {
        if matches!(k.as_str(), "cpu" | "memory") {
            total.insert(k, q);
        }
    }
    total
}

#[async_trait]
impl ValidatingPlugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        let Some(kind) = supports(attrs) else {
            return Ok(());
        };
        for range in self.ranges_for(attrs).await? {
            let mut errs = Vec::new();
            if kind == "persistentvolumeclaims" {
                let requests = resources(obj.pointer("/spec/resources/requests"));
                for limit in limits_of(&range, "PersistentVolumeClaim") {
                    for (k, v) in resources(limit.get("min")) {
                        errs.extend(min_constraint(
                            "PersistentVolumeClaim",
                            &k,
                            &v,
                            &requests,
                            &Resources::new(),
                        ));
                    }
                    for (k, v) in resources(limit.get("max")) {
                        errs.extend(max_request_constraint(
                            "PersistentVolumeClaim",
                            &k,
                            &v,
                            &requests,
                        ));
                    }
                }
            } else {
                for limit in range
                    .pointer("/spec/limits")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match limit.get("type").and_then(Value::as_str) {
                        Some("Container") => {
                            for list in ["containers", "initContainers"] {
                                for c in obj
                                    .pointer(&format!("/spec/{list}"))
                                    .and_then(Value::as_array)
                                    .into_iter()
                                    .flatten()
                                {
                                    let req = resources(c.pointer("/resources/requests"));
                                    let lim = resources(c.pointer("/resources/limits"));
                                    check_bounds(limit, "Container", &req, &lim, &mut errs);
                                }
                            }
                        }
                        Some("Pod") => {
                            let req = pod_total(obj, "requests");
                            let lim = pod_total(obj, "limits");
                            check_bounds(limit, "Pod", &req, &lim, &mut errs);
                        }
                        _ => {}
                    }
                }
            }
            match errs.len() {
                0 => {}
                1 => return Err(forbidden(attrs, obj, errs.remove(0))),
                _ => return Err(forbidden(attrs, obj, format!("[{}]", errs.join(", ")))),
            }
        }
        Ok(())
    }
}
