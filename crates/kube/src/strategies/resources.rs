//! Resource names and quantities as the core validation checks them for quotas, limit ranges,
//! node capacity, PV capacity and RuntimeClass overhead: which names are standard, which count
//! in integers, which may be overcommitted, and the quantity checks (upstream:
//! pkg/apis/core/helper/helpers.go and `validateResourceName`, `ValidateResourceQuantityValue`,
//! `ValidateNonnegativeQuantity` of pkg/apis/core/validation).
//!
//! Pod resource requirements (`pod::resources`) use the same predicates.

use apimachinery::quantity::Quantity;
use apimachinery::validation::{FieldError, FieldPath, is_qualified_name};
use serde_json::Value;

pub const IS_NEGATIVE: &str = "must be greater than or equal to 0";
pub const IS_NOT_INTEGER: &str = "must be an integer";
pub const IS_NOT_POSITIVE: &str = "must be greater than zero";

pub const HUGEPAGES_PREFIX: &str = "hugepages-";
const REQUESTS_HUGEPAGES_PREFIX: &str = "requests.hugepages-";
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
const REQUESTS_PREFIX: &str = "requests.";

/// Names every resource list may use (`standardResources`).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// Names a quota tracks (`standardQuotaResources`).
const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// Names counted in whole units (`integerResources`).
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

const STANDARD_CONTAINER_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

pub fn is_hugepages(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
}

fn is_quota_hugepages(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX) || name.starts_with(REQUESTS_HUGEPAGES_PREFIX)
}

/// Unprefixed names and names under `kubernetes.io/` are Kubernetes' own (`IsNativeResource`).
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

/// `IsExtendedResourceName`: not native, not `requests.`-prefixed, and a qualified name once
/// prefixed with `requests.`.
pub fn is_extended(name: &str) -> bool {
    if is_native(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    is_qualified_name(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// `IsOvercommitAllowed`: native and not hugepages.
pub fn is_overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_hugepages(name)
}

pub fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name) || is_quota_hugepages(name)
}

pub fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name) || is_quota_hugepages(name)
}

pub fn is_integer_resource(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended(name)
}

fn is_standard_container_resource(name: &str) -> bool {
    STANDARD_CONTAINER_RESOURCES.contains(&name) || is_hugepages(name)
}

/// A resource name (`validateResourceName`): a qualified name; unprefixed ones standard.
pub fn validate_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    if !name.contains('/') && !is_standard_resource(name) {
        return vec![FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        )];
    }
    Vec::new()
}

/// A container resource name (`validateContainerResourceName`).
pub fn validate_container_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_resource_name(name, path);
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

/// A resource name a quota may hold (`ValidateResourceQuotaResourceName`).
pub fn validate_quota_resource_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_resource_name(name, path);
    if !name.contains('/') && !is_standard_quota_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource for quota",
        ));
    }
    errs
}

/// A quantity of a resource list as upstream reads it; a value the decoder let through that
/// does not parse reads as zero, as an unset Go quantity.
pub fn quantity(v: &Value) -> Quantity {
    let parsed = match v {
        Value::String(s) => Quantity::parse(s),
        Value::Number(n) => Quantity::parse(&n.to_string()),
        _ => Quantity::parse("0"),
    };
    parsed.unwrap_or_else(|_| Quantity::new(0, 0, apimachinery::quantity::Format::DecimalSI))
}

/// `SetDefaults_ResourceList`: every quantity of a resource list rounded up to a thousandth
/// (Go's `RoundUp(-3)`); a value that needs rounding is written again in its canonical form.
/// Values too large to need it are left alone.
pub(crate) fn round_up_resource_list(list: Option<&mut Value>) {
    let Some(map) = list.and_then(Value::as_object_mut) else {
        return;
    };
    const LIMIT: i64 = i64::MAX / 1000;
    for v in map.values_mut() {
        if !(v.is_string() || v.is_number()) {
            continue;
        }
        let q = quantity(v);
        if q.cmp_int64(LIMIT).is_ge() || q.cmp_int64(-LIMIT).is_le() {
            continue;
        }
        let rounded = Quantity::new(q.milli_value(), -3, q.format);
        if rounded != q {
            *v = Value::String(rounded.canonical());
        }
    }
}

/// `ValidateNonnegativeQuantity`.
pub fn validate_nonnegative_quantity(q: &Quantity, path: &FieldPath) -> Vec<FieldError> {
    if q.sign() < 0 {
        vec![FieldError::invalid(path, q.canonical(), IS_NEGATIVE)]
    } else {
        Vec::new()
    }
}

/// `ValidatePositiveQuantityValue`.
pub fn validate_positive_quantity(q: &Quantity, path: &FieldPath) -> Vec<FieldError> {
    if q.sign() <= 0 {
        vec![FieldError::invalid(path, q.canonical(), IS_NOT_POSITIVE)]
    } else {
        Vec::new()
    }
}

/// `ValidateResourceQuantityValue`: not negative, and whole for integer resources.
pub fn validate_resource_quantity(name: &str, q: &Quantity, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = validate_nonnegative_quantity(q, path);
    if is_integer_resource(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(path, q.canonical(), IS_NOT_INTEGER));
    }
    errs
}

/// `validateBasicResource`: the value (not the quantity) must not be negative.
pub fn validate_basic_resource(q: &Quantity, path: &FieldPath) -> Vec<FieldError> {
    if q.value() < 0 {
        vec![FieldError::invalid(
            path,
            q.value(),
            "must be a valid resource quantity",
        )]
    } else {
        Vec::new()
    }
}

/// The entries of a resource list, in Go's sorted-for-us order (upstream ranges over a map).
pub fn entries(list: Option<&Value>) -> Vec<(&str, Quantity)> {
    list.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), quantity(v))).collect())
        .unwrap_or_default()
}

/// Resource requirements (`ValidateContainerResourceRequirements`, without pod claims): names,
/// quantities, and requests within limits.
pub fn validate_container_resource_requirements(
    requirements: &Value,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let limits = entries(requirements.get("limits"));
    let requests = entries(requirements.get("requests"));
    let qos = |n: &str| n == "cpu" || n == "memory";
    let (mut lim_cpu_mem, mut req_cpu_mem, mut huge) = (false, false, false);
    for (name, q) in &limits {
        let at = lim_path.key(name);
        errs.extend(validate_container_resource_name(name, &at));
        errs.extend(validate_resource_quantity(name, q, &at));
        huge |= is_hugepages(name);
        lim_cpu_mem |= qos(name);
    }
    for (name, q) in &requests {
        let at = req_path.key(name);
        errs.extend(validate_container_resource_name(name, &at));
        errs.extend(validate_resource_quantity(name, q, &at));
        match limits.iter().find(|(n, _)| n == name) {
            Some((_, limit)) if q != limit && !is_overcommit_allowed(name) => {
                errs.push(FieldError::invalid(
                    &req_path,
                    q.canonical(),
                    format!("must be equal to {name} limit of {}", limit.canonical()),
                ));
            }
            Some((_, limit)) if q > limit => errs.push(FieldError::invalid(
                &req_path,
                q.canonical(),
                format!(
                    "must be less than or equal to {name} limit of {}",
                    limit.canonical()
                ),
            )),
            Some(_) => {}
            None if !is_overcommit_allowed(name) => errs.push(FieldError::required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
        huge |= is_hugepages(name);
        req_cpu_mem |= qos(name);
    }
    if !lim_cpu_mem && !req_cpu_mem && huge {
        errs.push(FieldError::forbidden(
            path,
            "HugePages require cpu or memory",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quota_names_and_values() {
        let p = FieldPath::new("spec").child("hard");
        assert!(validate_quota_resource_name("pods", &p.key("pods")).is_empty());
        assert_eq!(
            validate_quota_resource_name("widgets", &p.key("widgets"))[0].to_string(),
            "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified"
        );
        let errs = validate_resource_quantity("pods", &quantity(&json!("1500m")), &p.key("pods"));
        assert_eq!(
            errs[0].to_string(),
            "spec.hard[pods]: Invalid value: \"1500m\": must be an integer"
        );
        let errs = validate_resource_quantity("cpu", &quantity(&json!("-1")), &p.key("cpu"));
        assert_eq!(
            errs[0].to_string(),
            "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
        );
    }

    #[test]
    fn extended_resources_count_in_integers() {
        assert!(is_extended("example.com/gpu"));
        assert!(!is_extended("kubernetes.io/gpu"));
        assert!(is_integer_resource("example.com/gpu"));
        assert!(!is_overcommit_allowed("example.com/gpu"));
    }
}
