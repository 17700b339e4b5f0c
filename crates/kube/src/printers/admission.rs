//! Rows of the `admissionregistration.k8s.io` kinds: webhook configurations, admission policies and
//! their bindings (validating and mutating alike).

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, len_at, str_at};
use super::format::{age, label_selector_go_string};

/// Name, Webhooks (their number), Age; for mutating and validating configurations alike.
pub(super) fn webhook_configuration(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![obj.name(), len_at(obj, &["webhooks"]) as i64, age(obj, now)]
}

/// Name, Validations (their number), ParamKind, Age.
pub(super) fn validating_admission_policy(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        len_at(obj, &["spec", "validations"]) as i64,
        param_kind(obj),
        age(obj, now),
    ]
}

/// Name, Mutations (their number), ParamKind, Age.
pub(super) fn mutating_admission_policy(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        len_at(obj, &["spec", "mutations"]) as i64,
        param_kind(obj),
        age(obj, now),
    ]
}

/// "apiVersion/kind" of the policy's parameters, or "<unset>".
fn param_kind(obj: &Value) -> String {
    match at(obj, &["spec", "paramKind"]) {
        None => "<unset>".to_string(),
        Some(p) => format!("{}/{}", str_at(p, &["apiVersion"]), str_at(p, &["kind"])),
    }
}

/// Name, PolicyName, ParamRef, Age; for validating and mutating bindings alike.
pub(super) fn policy_binding(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let param = match at(obj, &["spec", "paramRef"]) {
        None => "<unset>".to_string(),
        Some(r) => {
            let name = str_at(r, &["name"]);
            let namespace = str_at(r, &["namespace"]);
            if !name.is_empty() {
                // Whether the parameter kind is cluster-scoped is unknown here, so a name without
                // a namespace reads "*/name", as upstream prints it.
                if namespace.is_empty() {
                    format!("*/{name}")
                } else {
                    format!("{namespace}/{name}")
                }
            } else if let Some(selector) = at(r, &["selector"]) {
                label_selector_go_string(selector)
            } else {
                "<unset>".to_string()
            }
        }
    };
    cells![
        obj.name(),
        str_at(obj, &["spec", "policyName"]),
        param,
        age(obj, now)
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn webhooks_and_policies() {
        let w = json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a.example.com"}]});
        assert_eq!(
            webhook_configuration(&w, now()),
            vec![json!("w"), json!(1), json!("<unknown>")]
        );
        let p = json!({"metadata": {"name": "p"}, "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "true"}, {"expression": "false"}]}});
        assert_eq!(
            validating_admission_policy(&p, now()),
            vec![
                json!("p"),
                json!(2),
                json!("v1/ConfigMap"),
                json!("<unknown>")
            ]
        );
        let m = json!({"metadata": {"name": "m"}, "spec": {"mutations": []}});
        assert_eq!(
            mutating_admission_policy(&m, now())[1..3],
            [json!(0), json!("<unset>")]
        );
    }

    #[test]
    fn bindings() {
        let b = |param: Value| json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": param}});
        assert_eq!(
            policy_binding(&b(json!({"name": "cfg", "namespace": "ns"})), now())[1..3],
            [json!("p"), json!("ns/cfg")]
        );
        assert_eq!(
            policy_binding(&b(json!({"name": "cfg"})), now())[2],
            json!("*/cfg")
        );
        assert_eq!(policy_binding(&b(json!(null)), now())[2], json!("<unset>"));
        assert_eq!(policy_binding(&b(json!({})), now())[2], json!("<unset>"));
        assert_eq!(
            policy_binding(&b(json!({"selector": {"matchLabels": {"a": "b"}}})), now())[2],
            json!(
                "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}"
            )
        );
    }
}
