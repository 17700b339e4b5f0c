//! ResourceQuotas (upstream: `ValidateResourceQuota*` of pkg/apis/core/validation,
//! pkg/registry/core/resourcequota/strategy.go): status is the quota controller's, so a new
//! quota starts with none; hard limits name quota resources with non-negative (for counts,
//! whole) quantities; scopes must be known, apply to the limited resources and not conflict,
//! and may not change.

use std::collections::BTreeSet;

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::nodeselection::{items, str_of, strings};
use super::resources::{
    entries, is_standard_quota_resource, validate_quota_resource_name, validate_resource_quantity,
};

pub struct ResourceQuotaStrategy;

const POD_OBJECT_COUNT: &[&str] = &["pods"];
const POD_COMPUTE: &[&str] = &[
    "cpu",
    "memory",
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
];
const CONFLICTING_SCOPES: &[(&str, &str)] = &[
    ("BestEffort", "NotBestEffort"),
    ("Terminating", "NotTerminating"),
];

/// `IsStandardResourceQuotaScope`.
fn is_standard_scope(scope: &str) -> bool {
    matches!(
        scope,
        "Terminating"
            | "NotTerminating"
            | "BestEffort"
            | "NotBestEffort"
            | "PriorityClass"
            | "VolumeAttributesClass"
            | "CrossNamespacePodAffinity"
    )
}

/// `IsResourceQuotaScopeValidForResource`.
fn scope_applies(scope: &str, resource: &str) -> bool {
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => {
            POD_OBJECT_COUNT.contains(&resource) || POD_COMPUTE.contains(&resource)
        }
        "BestEffort" => POD_OBJECT_COUNT.contains(&resource),
        "VolumeAttributesClass" => {
            matches!(resource, "persistentvolumeclaims" | "requests.storage")
        }
        _ => true,
    }
}

fn resource_list(list: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, q) in entries(list) {
        let at = path.key(k);
        errs.extend(validate_quota_resource_name(k, &at));
        errs.extend(validate_resource_quantity(k, &q, &at));
    }
    errs
}

fn scopes_value(spec: &Value) -> Value {
    spec.get("scopes").cloned().unwrap_or(Value::Null)
}

fn conflicting(scopes: &BTreeSet<&str>, path: &FieldPath, spec: &Value) -> Vec<FieldError> {
    CONFLICTING_SCOPES
        .iter()
        .filter(|(a, b)| scopes.contains(a) && scopes.contains(b))
        .map(|_| FieldError::invalid(path, scopes_value(spec), "conflicting scopes"))
        .collect()
}

/// `validateResourceQuotaScopes`.
fn validate_scopes(spec: &Value, hard: &[&str], path: &FieldPath) -> Vec<FieldError> {
    let scopes = strings(spec.get("scopes"));
    if scopes.is_empty() {
        return Vec::new();
    }
    let at = path.child("scopes");
    let mut errs = Vec::new();
    let mut set = BTreeSet::new();
    for scope in scopes {
        if !is_standard_scope(scope) {
            errs.push(FieldError::invalid(
                &at,
                scopes_value(spec),
                "unsupported scope",
            ));
        }
        for k in hard {
            if is_standard_quota_resource(k) && !scope_applies(scope, k) {
                errs.push(FieldError::invalid(
                    &at,
                    scopes_value(spec),
                    "unsupported scope applied to resource",
                ));
            }
        }
        set.insert(scope);
    }
    errs.extend(conflicting(&set, &at, spec));
    errs
}

/// `validateScopedResourceSelectorRequirement`.
fn validate_scope_selector(spec: &Value, hard: &[&str], path: &FieldPath) -> Vec<FieldError> {
    let Some(selector) = spec.get("scopeSelector").filter(|s| !s.is_null()) else {
        return Vec::new();
    };
    let at = path.child("scopeSelector").child("matchExpressions");
    let rendered = go_struct_json("core.v1.ScopeSelector", selector, GoStyle::Internal);
    let mut errs = Vec::new();
    let mut set = BTreeSet::new();
    for req in items(selector.get("matchExpressions")) {
        let scope = str_of(req, "scopeName");
        let operator = str_of(req, "operator");
        let values = strings(req.get("values"));
        if !is_standard_scope(scope) {
            errs.push(FieldError::invalid(
                &at.child("scopeName"),
                scope,
                "unsupported scope",
            ));
        }
        for k in hard {
            if is_standard_quota_resource(k) && !scope_applies(scope, k) {
                let mut err = FieldError::invalid(
                    &at,
                    selector.clone(),
                    "unsupported scope applied to resource",
                );
                if let Some(r) = &rendered {
                    err = err.with_rendered_value(r.clone());
                }
                errs.push(err);
            }
        }
        if matches!(
            scope,
            "BestEffort"
                | "NotBestEffort"
                | "Terminating"
                | "NotTerminating"
                | "CrossNamespacePodAffinity"
        ) && operator != "Exists"
        {
            errs.push(FieldError::invalid(
                &at.child("operator"),
                operator,
                "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        match operator {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        &at.child("values"),
                        "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::invalid(
                        &at.child("values"),
                        req.get("values").cloned().unwrap_or(Value::Null),
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                &at.child("operator"),
                operator,
                "not a valid selector operator",
            )),
        }
        set.insert(scope);
    }
    // Upstream reports the selector's conflicts with `spec.scopes` as the value.
    errs.extend(conflicting(&set, &at, spec));
    errs
}

/// `ValidateResourceQuotaSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let path = FieldPath::new("spec");
    let mut errs = resource_list(spec.get("hard"), &path.child("hard"));
    let hard: Vec<&str> = spec
        .get("hard")
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    errs.extend(validate_scopes(spec, &hard, &path));
    errs.extend(validate_scope_selector(spec, &hard, &path));
    errs
}

fn validate_status(obj: &Value) -> Vec<FieldError> {
    let status = FieldPath::new("status");
    let mut errs = resource_list(obj.pointer("/status/hard"), &status.child("hard"));
    errs.extend(resource_list(
        obj.pointer("/status/used"),
        &status.child("used"),
    ));
    errs
}

impl Strategy for ResourceQuotaStrategy {
    /// Usage is the quota controller's to report.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(obj);
        errs.extend(validate_status(obj));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(new);
        let scopes = |o: &Value| -> BTreeSet<String> {
            strings(o.pointer("/spec/scopes"))
                .into_iter()
                .map(str::to_string)
                .collect()
        };
        if scopes(new) != scopes(old) {
            errs.push(FieldError::invalid(
                &FieldPath::new("spec").child("scopes"),
                new.pointer("/spec/scopes").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_status(new)
    }

    /// A request bound above its limit bound (cpu and memory fall back to their bare names
    /// for the request), as upstream's `WarningsOnCreate`.
    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let hard = obj.pointer("/spec/hard");
        let get = |name: &str| {
            entries(hard)
                .into_iter()
                .find(|(k, _)| *k == name)
                .map(|(_, q)| q)
        };
        let mut out = Vec::new();
        for resource in ["cpu", "memory", "storage", "ephemeral-storage"] {
            let mut request_name = format!("requests.{resource}");
            let mut request = get(&request_name);
            if request.is_none() && matches!(resource, "cpu" | "memory") {
                request = get(resource);
                request_name = resource.to_string();
            }
            let limit_name = format!("limits.{resource}");
            if let (Some(request), Some(limit)) = (request, get(&limit_name))
                && request > limit
            {
                out.push(format!(
                    "ResourceQuota {request_name} ({}) should be less than {limit_name} ({})",
                    request.canonical(),
                    limit.canonical()
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_class_scope_applies_to_pods_only() {
        let rq = json!({"spec": {"hard": {"pods": "10", "requests.storage": "1Gi"},
            "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        let errs = ResourceQuotaStrategy.validate(&rq);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.scopeSelector.matchExpressions: Invalid value: {\"MatchExpressions\":[{\"ScopeName\":\"PriorityClass\",\"Operator\":\"In\",\"Values\":[\"high\"]}]}: unsupported scope applied to resource"
        );
    }

    #[test]
    fn conflicting_scopes() {
        let rq =
            json!({"spec": {"hard": {"pods": "1"}, "scopes": ["Terminating", "NotTerminating"]}});
        assert_eq!(
            ResourceQuotaStrategy.validate(&rq)[0].to_string(),
            "spec.scopes: Invalid value: [\"Terminating\",\"NotTerminating\"]: conflicting scopes"
        );
    }

    #[test]
    fn scopes_may_not_change() {
        let old = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        let new = json!({"spec": {"hard": {"pods": "1"}}});
        assert_eq!(
            ResourceQuotaStrategy.validate_update(&new, &old)[0].to_string(),
            "spec.scopes: Invalid value: null: field is immutable"
        );
    }
}
