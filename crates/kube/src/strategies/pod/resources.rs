//! Compute resources of containers and pods (pkg/apis/core/validation `validateResourceRequirements`
//! and friends, pkg/apis/core/helper's resource-name predicates), pod-level resources, resource
//! claims, overhead, and the QoS class upstream derives from them (pkg/apis/core/helper/qos).
//!
//! Upstream iterates resource lists as Go maps, in no fixed order; here they come sorted by
//! name, which is one of the orders upstream may give.

use std::collections::BTreeSet;

use apimachinery::quantity::Quantity;
use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label};
use serde_json::Value;

use super::util::{items, map, object, quantity, text};

// The resource-name rules are the core helpers every kind shares (quotas, limit ranges, node
// capacity use them too).
pub(super) use crate::strategies::resources::is_hugepages;
use crate::strategies::resources::{
    HUGEPAGES_PREFIX, is_integer_resource, is_overcommit_allowed as overcommit_allowed,
    validate_container_resource_name, validate_resource_name,
};

/// `validatePodResourceName`: pod-level resources are cpu, memory and huge pages only.
fn validate_pod_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let errs = validate_resource_name(name, path);
    if !errs.is_empty() {
        return errs;
    }
    if matches!(name, "cpu" | "memory") || is_hugepages(name) {
        return errs;
    }
    vec![FieldError::not_supported(
        path,
        name,
        &["cpu", "hugepages-", "memory"],
    )]
}

/// `ValidateResourceQuantityValue`: not negative, and whole for integer resources.
pub(super) fn validate_quantity_value(
    name: &str,
    q: &Quantity,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if q.sign() < 0 {
        errs.push(FieldError::invalid(
            path,
            q.canonical(),
            "must be greater than or equal to 0",
        ));
    }
    if is_integer_resource(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(
            path,
            q.canonical(),
            "must be an integer",
        ));
    }
    errs
}

/// `IsHugePageResourceValueDivisible`: a whole number of pages of the size the name gives.
fn hugepages_divisible(name: &str, q: &Quantity) -> bool {
    let Some(page) = name
        .strip_prefix(HUGEPAGES_PREFIX)
        .and_then(|s| Quantity::parse(s).ok())
    else {
        return false;
    };
    if page.sign() <= 0 || page.milli_value() % 1000 != 0 {
        return false;
    }
    let size = page.value();
    size != 0 && q.value() % size == 0
}

/// Which names a resource list may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Container,
    Pod,
}

/// `validateResourceRequirements` of a container (or of the pod, or an overhead list as limits).
pub(super) fn validate_requirements(
    req: Option<&Value>,
    level: Level,
    pod_claims: &BTreeSet<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let empty = Value::Null;
    let req = req.unwrap_or(&empty);
    let name_fn = match level {
        Level::Container => validate_container_resource_name,
        Level::Pod => validate_pod_resource_name,
    };
    let mut errs = Vec::new();
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let (mut lim_cpu_mem, mut req_cpu_mem, mut lim_huge, mut req_huge) =
        (false, false, false, false);
    let limits = map(req, "limits");
    for (name, value) in limits {
        let p = lim_path.key(name);
        errs.extend(name_fn(name, &p));
        let Some(q) = quantity(value) else { continue };
        errs.extend(validate_quantity_value(name, &q, &p));
        if is_hugepages(name) {
            lim_huge = true;
            if !hugepages_divisible(name, &q) {
                errs.push(FieldError::invalid(
                    &p,
                    q.canonical(),
                    format!(
                        "{} is not positive integer multiple of {name}",
                        q.canonical()
                    ),
                ));
            }
        }
        if matches!(name.as_str(), "cpu" | "memory") {
            lim_cpu_mem = true;
        }
    }
    for (name, value) in map(req, "requests") {
        let p = req_path.key(name);
        errs.extend(name_fn(name, &p));
        let Some(q) = quantity(value) else { continue };
        errs.extend(validate_quantity_value(name, &q, &p));
        match limits.get(name).and_then(quantity) {
            Some(limit) => {
                if q != limit && !overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!("must be equal to {name} limit of {}", limit.canonical()),
                    ));
                } else if q > limit {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            limit.canonical()
                        ),
                    ));
                }
            }
            None if !overcommit_allowed(name) => errs.push(FieldError::required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
        if is_hugepages(name) {
            req_huge = true;
            if !hugepages_divisible(name, &q) {
                errs.push(FieldError::invalid(
                    &p,
                    q.canonical(),
                    format!(
                        "{} is not positive integer multiple of {name}",
                        q.canonical()
                    ),
                ));
            }
        }
        if matches!(name.as_str(), "cpu" | "memory") {
            req_cpu_mem = true;
        }
    }
    if !lim_cpu_mem && !req_cpu_mem && (req_huge || lim_huge) {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
    errs.extend(validate_claim_names(req, pod_claims, &path.child("claims")));
    errs
}

/// `validateResourceClaimNames`: each claim a container names exists in the pod, once.
fn validate_claim_names(
    req: &Value,
    pod_claims: &BTreeSet<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (i, claim) in items(req, "claims") {
        let p = path.index(i);
        let name = text(claim, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&p, ""));
            continue;
        }
        if names.contains(name) {
            errs.push(FieldError::duplicate(&p, name));
        } else {
            let request = text(claim, "request");
            let mut key = name.to_string();
            if !request.is_empty() {
                for m in is_dns1123_label(request) {
                    errs.push(FieldError::invalid(&p.child("request"), request, m));
                }
                key = format!("{name}/{request}");
            }
            if names.contains(&key) {
                errs.push(FieldError::duplicate(&p, key.as_str()));
            } else if request.is_empty() {
                // Naming a whole claim after one of its requests overlaps that request.
                for other in &names {
                    if other.split_once('/').is_some_and(|(n, _)| n == name) {
                        errs.push(FieldError::duplicate(&p, name));
                    }
                }
            }
            names.insert(key);
        }
        if !pod_claims.contains(name) {
            let mut e = FieldError::not_found(&p, name);
            e.detail = if pod_claims.is_empty() {
                "must be one of the names in pod.spec.resourceClaims which is empty".into()
            } else {
                let all: Vec<&str> = pod_claims.iter().map(String::as_str).collect();
                format!(
                    "must be one of the names in pod.spec.resourceClaims: {}",
                    all.join(", ")
                )
            };
            errs.push(e);
        }
    }
    errs
}

/// `validatePodResources`: pod-level requirements, and containers within them.
pub(super) fn validate_pod_resources(
    spec: &Value,
    pod_claims: &BTreeSet<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let Some(res) = object(spec, "resources") else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    if res.get("claims").is_some_and(|c| !c.is_null()) {
        errs.push(FieldError::forbidden(
            &path.child("claims"),
            "claims cannot be set for Resources at pod-level",
        ));
    }
    errs.extend(validate_requirements(
        Some(res),
        Level::Pod,
        pod_claims,
        path,
    ));
    errs.extend(validate_pod_resource_consistency(spec, res, path));
    errs
}

/// The effective requests (or limits, `list`) of the containers: regular containers and
/// sidecars add up; a non-sidecar init container counts alone, with the sidecars started
/// before it (`AggregateContainerRequests`, `AggregateContainerLimits`).
pub(crate) fn aggregate_containers(spec: &Value, list: &str) -> Vec<(String, Quantity)> {
    let mut total: std::collections::BTreeMap<String, Quantity> = Default::default();
    let add = |acc: &mut std::collections::BTreeMap<String, Quantity>, c: &Value| {
        for (name, v) in map(c.get("resources").unwrap_or(&Value::Null), list) {
            if let Some(q) = quantity(v) {
                let sum = match acc.get(name) {
                    Some(old) => old.add(&q),
                    None => q,
                };
                acc.insert(name.clone(), sum);
            }
        }
    };
    for (_, c) in items(spec, "containers") {
        add(&mut total, c);
    }
    let mut sidecars: std::collections::BTreeMap<String, Quantity> = Default::default();
    let mut init_max: std::collections::BTreeMap<String, Quantity> = Default::default();
    for (_, c) in items(spec, "initContainers") {
        if text(c, "restartPolicy") == "Always" {
            add(&mut sidecars, c);
            add(&mut total, c);
            continue;
        }
        let mut one = sidecars.clone();
        add(&mut one, c);
        for (name, q) in one {
            if init_max.get(&name).is_none_or(|m| q > *m) {
                init_max.insert(name, q);
            }
        }
    }
    for (name, q) in init_max {
        if total.get(&name).is_none_or(|t| q > *t) {
            total.insert(name, q);
        }
    }
    total.into_iter().collect()
}

/// `validatePodResourceConsistency`: pod requests cover the containers' requests, and no
/// container's limit exceeds the pod's.
fn validate_pod_resource_consistency(
    spec: &Value,
    res: &Value,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pod_requests = map(res, "requests");
    for (name, ctr) in aggregate_containers(spec, "requests") {
        let pod = pod_requests
            .get(&name)
            .and_then(quantity)
            .unwrap_or_else(|| Quantity::new(0, 0, apimachinery::quantity::Format::DecimalSI));
        if ctr > pod {
            errs.push(FieldError::invalid(
                &path.child("requests").key(&name),
                pod.canonical(),
                format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    ctr.canonical()
                ),
            ));
        }
    }
    let pod_limits = map(res, "limits");
    for (i, c) in items(spec, "containers") {
        for (name, v) in map(c.get("resources").unwrap_or(&Value::Null), "limits") {
            let (Some(ctr), Some(pod)) = (quantity(v), pod_limits.get(name).and_then(quantity))
            else {
                continue;
            };
            if ctr > pod {
                errs.push(FieldError::invalid(
                    &path.child("containers").index(i).key(name).child("limits"),
                    ctr.canonical(),
                    format!(
                        "must be less than or equal to pod limits of {}",
                        pod.canonical()
                    ),
                ));
            }
        }
    }
    errs
}

/// `validateOverhead`: the container rules, for a list read as limits.
pub(super) fn validate_overhead(overhead: &Value, path: &FieldPath) -> Vec<FieldError> {
    let as_limits = serde_json::json!({ "limits": overhead });
    validate_requirements(Some(&as_limits), Level::Container, &BTreeSet::new(), path)
}

/// The QoS class upstream computes for a pod (`qos.ComputePodQOS`): from pod-level resources
/// when there are some, else from the cpu and memory of regular and init containers.
pub fn compute_qos(spec: &Value) -> &'static str {
    let positive = |v: &Value| quantity(v).filter(|q| q.sign() > 0);
    let mut requests: std::collections::BTreeMap<String, Quantity> = Default::default();
    let mut limits: std::collections::BTreeMap<String, Quantity> = Default::default();
    let mut guaranteed = true;
    let sum = |acc: &mut std::collections::BTreeMap<String, Quantity>, name: &str, q: Quantity| {
        let total = match acc.get(name) {
            Some(old) => q.add(old),
            None => q,
        };
        acc.insert(name.to_string(), total);
    };
    if let Some(res) = object(spec, "resources") {
        for (name, v) in map(res, "requests") {
            if let (true, Some(q)) = (matches!(name.as_str(), "cpu" | "memory"), positive(v)) {
                sum(&mut requests, name, q);
            }
        }
        let pod_limits = map(res, "limits");
        if !pod_limits.is_empty() {
            let mut found = BTreeSet::new();
            for (name, v) in pod_limits {
                if let (true, Some(q)) = (matches!(name.as_str(), "cpu" | "memory"), positive(v)) {
                    found.insert(name.as_str());
                    sum(&mut limits, name, q);
                }
            }
            if !(found.contains("cpu") && found.contains("memory")) {
                guaranteed = false;
            }
        }
    } else {
        for list in ["containers", "initContainers"] {
            for (_, c) in items(spec, list) {
                let res = c.get("resources").unwrap_or(&Value::Null);
                for (name, v) in map(res, "requests") {
                    if let (true, Some(q)) =
                        (matches!(name.as_str(), "cpu" | "memory"), positive(v))
                    {
                        sum(&mut requests, name, q);
                    }
                }
                let mut found = BTreeSet::new();
                for (name, v) in map(res, "limits") {
                    if let (true, Some(q)) =
                        (matches!(name.as_str(), "cpu" | "memory"), positive(v))
                    {
                        found.insert(name.clone());
                        sum(&mut limits, name, q);
                    }
                }
                if !(found.contains("cpu") && found.contains("memory")) {
                    guaranteed = false;
                }
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        guaranteed = requests
            .iter()
            .all(|(name, req)| limits.get(name).is_some_and(|l| l == req));
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(req: Value) -> Vec<String> {
        validate_requirements(
            Some(&req),
            Level::Container,
            &BTreeSet::new(),
            &FieldPath::new("r"),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn requests_within_limits_and_names_standard() {
        assert_eq!(
            msgs(json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})),
            vec![r#"r.requests: Invalid value: "2": must be less than or equal to cpu limit of 1"#]
        );
        assert_eq!(
            msgs(json!({"limits": {"widgets": "1"}})),
            vec![
                r#"r.limits[widgets]: Invalid value: "widgets": must be a standard resource type or fully qualified"#,
                r#"r.limits[widgets]: Invalid value: "widgets": must be a standard resource for containers"#
            ]
        );
        assert_eq!(
            msgs(json!({"limits": {"hugepages-2Mi": "2Mi"}})),
            vec!["r: Forbidden: HugePages require cpu or memory"]
        );
        assert_eq!(
            msgs(json!({"requests": {"example.com/gpu": "1"}})),
            vec!["r.limits: Required value: Limit must be set for non overcommitable resources"]
        );
        assert!(
            msgs(json!({"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}}))
                .is_empty()
        );
    }

    #[test]
    fn qos_classes() {
        let spec = |res: Value| json!({"containers": [{"name": "c", "resources": res}]});
        assert_eq!(compute_qos(&spec(json!({}))), "BestEffort");
        assert_eq!(
            compute_qos(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            compute_qos(&spec(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Guaranteed"
        );
    }
}
