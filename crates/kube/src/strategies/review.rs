//! Access reviews, SelfSubjectReview and TokenReview: create-only kinds that are never stored
//! (upstream: pkg/registry/authorization/*, pkg/registry/authentication/* and
//! pkg/apis/authorization/validation). The access reviews ask the server's authorizer (the
//! same union the filter chain asks); a TokenReview asks the server's own authenticators about
//! a token.
//!
//! An access review is validated first (`ValidateSubjectAccessReview` and its siblings): exactly
//! one of resource or non-resource attributes, a subject for the non-self kinds, metadata empty
//! (a LocalSubjectAccessReview keeps its namespace, which must be the one it asks about).
//! Upstream's REST handlers report these with the kind of the decoded internal object, whose
//! type fields are empty: the message reads `.authorization.k8s.io "" is invalid: ...`.

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::validation::{
    FieldError, FieldPath, go_json, invalid_status, is_valid_label_value, validate_label_name,
};
use apiserver::authentication::{Authenticator, AuthnRequest, UserInfo};
use apiserver::authorization::{Authorizer, Decision, Rules};
use apiserver::registry::Strategy;
use apiserver::request::RequestInfo;
use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::fields::{list_at, set_at, str_at, strs_at};

const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";

/// The four access reviews, answered by the server's authorizer (upstream:
/// pkg/registry/authorization/{subjectaccessreview,selfsubjectaccessreview,
/// localsubjectaccessreview,selfsubjectrulesreview}).
pub struct AccessReviewStrategy {
    pub authorizer: Arc<dyn Authorizer>,
}

/// `AuthorizationAttributesFrom`: the request an access review asks about.
fn review_request(spec: &Value) -> RequestInfo {
    match set_at(spec, "resourceAttributes") {
        Some(a) => RequestInfo {
            is_resource_request: true,
            verb: str_at(a, "verb").into(),
            namespace: str_at(a, "namespace").into(),
            api_group: str_at(a, "group").into(),
            api_version: str_at(a, "version").into(),
            resource: str_at(a, "resource").into(),
            subresource: str_at(a, "subresource").into(),
            name: str_at(a, "name").into(),
            ..Default::default()
        },
        None => {
            let a = set_at(spec, "nonResourceAttributes").unwrap_or(&Value::Null);
            RequestInfo {
                verb: str_at(a, "verb").into(),
                path: str_at(a, "path").into(),
                ..Default::default()
            }
        }
    }
}

/// The user a SubjectAccessReview or LocalSubjectAccessReview names in its spec (its name under
/// `name_field`: `user` there, `username` in a CertificateSigningRequest's spec).
pub(crate) fn spec_user(spec: &Value, name_field: &str) -> UserInfo {
    let extra = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let values = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    (k.clone(), values)
                })
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: str_at(spec, name_field).into(),
        uid: str_at(spec, "uid").into(),
        groups: strs_at(spec, "groups")
            .into_iter()
            .map(str::to_string)
            .collect(),
        extra,
    }
}

/// `SubjectRulesReviewStatus`.
fn rules_status(rules: &Rules) -> Value {
    let resource: Vec<Value> = rules
        .resource_rules
        .iter()
        .map(|r| {
            let mut v = json!({"verbs": r.verbs});
            for (k, list) in [
                ("apiGroups", &r.api_groups),
                ("resources", &r.resources),
                ("resourceNames", &r.resource_names),
            ] {
                if !list.is_empty() {
                    v[k] = json!(list);
                }
            }
            v
        })
        .collect();
    let non_resource: Vec<Value> = rules
        .non_resource_rules
        .iter()
        .map(|r| {
            let mut v = json!({"verbs": r.verbs});
            if !r.non_resource_urls.is_empty() {
                v["nonResourceURLs"] = json!(r.non_resource_urls);
            }
            v
        })
        .collect();
    let mut status = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": rules.incomplete,
    });
    if !rules.errors.is_empty() {
        status["evaluationError"] = json!(crate::rbac::aggregate(&rules.errors));
    }
    status
}

/// `ObjectMeta` as Go's encoder prints it in a message: its fields in declaration order, the
/// creation timestamp (a struct) always present.
fn render_object_meta(meta: &Value) -> String {
    const ORDER: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    let empty = Map::new();
    let m = meta.as_object().unwrap_or(&empty);
    let fields: Vec<String> = ORDER
        .iter()
        .filter_map(|k| match (m.get(*k), *k) {
            (None | Some(Value::Null), "creationTimestamp") => {
                Some("\"creationTimestamp\":null".to_string())
            }
            (None | Some(Value::Null), _) => None,
            (Some(Value::String(s)), _) if s.is_empty() => None,
            (Some(v), _) => Some(format!("{}:{}", go_json(&Value::from(*k)), go_json(v))),
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Internal authorization types carry no JSON tags: Go prints their field names.
fn render_non_resource_attributes(v: Option<&Value>) -> String {
    match v {
        None => "null".into(),
        Some(a) => format!(
            "{{\"Path\":{},\"Verb\":{}}}",
            go_json(&Value::from(str_at(a, "path"))),
            go_json(&Value::from(str_at(a, "verb")))
        ),
    }
}

/// Exactly one of resource and non-resource attributes: both are reported at
/// `spec.nonResourceAttributes`, neither at `spec.resourceAttributes` (whose printed value is
/// the absent non-resource attributes, `null`).
fn validate_attributes_union(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let resource = set_at(spec, "resourceAttributes");
    let non_resource = set_at(spec, "nonResourceAttributes");
    let mut errs = Vec::new();
    if resource.is_some() && non_resource.is_some() {
        errs.push(
            FieldError::invalid(
                &path.child("nonResourceAttributes"),
                Value::Null,
                "cannot be specified in combination with resourceAttributes",
            )
            .with_rendered_value(render_non_resource_attributes(non_resource)),
        );
    }
    if resource.is_none() && non_resource.is_none() {
        errs.push(
            FieldError::invalid(
                &path.child("resourceAttributes"),
                Value::Null,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
            .with_rendered_value(render_non_resource_attributes(non_resource)),
        );
    }
    errs
}

/// A selector of the attributes: a raw selector or requirements, not both, not neither.
fn validate_selector_attributes(attrs: &Value, field: &str, path: &FieldPath) -> Vec<FieldError> {
    let Some(selector) = set_at(attrs, field) else {
        return Vec::new();
    };
    let path = path.child(field);
    let raw = str_at(selector, "rawSelector");
    let requirements = list_at(selector, "requirements");
    let mut errs = Vec::new();
    if !raw.is_empty() && !requirements.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("rawSelector"),
            raw,
            "may not specified at the same time as requirements",
        ));
    }
    if raw.is_empty() && requirements.is_empty() {
        errs.push(FieldError::required(
            &path.child("requirements"),
            format!("when {path} is specified, requirements or rawSelector is required"),
        ));
    }
    // `ValidateFieldSelectorRequirement` / `ValidateLabelSelectorRequirement`, unknown
    // operators allowed (newer clients may know more).
    for (i, r) in requirements.iter().enumerate() {
        let p = path.child("requirements").index(i);
        if field == "fieldSelector" {
            errs.extend(validate_field_requirement(r, &p));
        } else {
            errs.extend(validate_label_requirement(r, &p));
        }
    }
    errs
}

/// The operator's rule on values, shared by field and label requirements.
fn operator_value_errors(requirement: &Value, path: &FieldPath) -> Option<FieldError> {
    let values = list_at(requirement, "values");
    match str_at(requirement, "operator") {
        "In" | "NotIn" if values.is_empty() => Some(FieldError::required(
            &path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => Some(FieldError::forbidden(
            &path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        _ => None,
    }
}

fn validate_field_requirement(requirement: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if str_at(requirement, "key").is_empty() {
        errs.push(FieldError::required(
            &path.child("key"),
            "must be specified",
        ));
    }
    errs.extend(operator_value_errors(requirement, path));
    errs
}

/// Label requirements also need a label-name key and label values.
fn validate_label_requirement(requirement: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = operator_value_errors(requirement, path)
        .into_iter()
        .collect();
    errs.extend(validate_label_name(
        str_at(requirement, "key"),
        &path.child("key"),
    ));
    for (i, v) in strs_at(requirement, "values").into_iter().enumerate() {
        for m in is_valid_label_value(v) {
            errs.push(FieldError::invalid(&path.child("values").index(i), v, m));
        }
    }
    errs
}

fn validate_resource_attributes(spec: &Value) -> Vec<FieldError> {
    let Some(attrs) = set_at(spec, "resourceAttributes") else {
        return Vec::new();
    };
    let path = FieldPath::new("spec").child("resourceAttributes");
    let mut errs = validate_selector_attributes(attrs, "fieldSelector", &path);
    errs.extend(validate_selector_attributes(attrs, "labelSelector", &path));
    errs
}

/// Metadata must be empty but for managed fields (and, when `keep_namespace`, the namespace).
fn metadata_errors(obj: &Value, keep_namespace: bool) -> Vec<FieldError> {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    let set = meta.as_object().is_some_and(|m| {
        m.iter().any(|(k, v)| {
            let ignored = k == "managedFields" || (keep_namespace && k == "namespace");
            let empty = v.is_null()
                || v.as_str() == Some("")
                || v.as_object().is_some_and(Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
                || v.as_i64() == Some(0);
            !ignored && !empty
        })
    });
    if !set {
        return Vec::new();
    }
    let detail = if keep_namespace {
        "must be empty except for namespace"
    } else {
        "must be empty"
    };
    vec![
        FieldError::invalid(&FieldPath::new("metadata"), Value::Null, detail)
            .with_rendered_value(render_object_meta(meta)),
    ]
}

/// The kind's validation, in upstream's order.
fn validate_review(obj: &Value) -> Vec<FieldError> {
    let kind = str_at(obj, "kind");
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let spec_path = FieldPath::new("spec");
    let mut errs = validate_attributes_union(spec, &spec_path);
    if kind != "SelfSubjectAccessReview"
        && str_at(spec, "user").is_empty()
        && list_at(spec, "groups").is_empty()
    {
        errs.push(FieldError::invalid(
            &spec_path.child("user"),
            str_at(spec, "user"),
            "at least one of user or group must be specified",
        ));
    }
    errs.extend(validate_resource_attributes(spec));
    let local = kind == "LocalSubjectAccessReview";
    errs.extend(metadata_errors(obj, local));
    if local {
        let namespace = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(attrs) = set_at(spec, "resourceAttributes") {
            let asked = str_at(attrs, "namespace");
            if asked != namespace {
                errs.push(FieldError::invalid(
                    &FieldPath::new("spec.resourceAttributes.namespace"),
                    asked,
                    "must match metadata.namespace",
                ));
            }
        }
        if let Some(nra) = set_at(spec, "nonResourceAttributes") {
            errs.push(
                FieldError::invalid(
                    &FieldPath::new("spec.nonResourceAttributes"),
                    Value::Null,
                    "disallowed on this kind of request",
                )
                .with_rendered_value(render_non_resource_attributes(Some(nra))),
            );
        }
    }
    errs
}

#[async_trait]
impl Strategy for AccessReviewStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        user: &UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, Status>> {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "SelfSubjectRulesReview" {
            // Upstream needs a namespace to resolve rules in, and answers with a new object
            // that holds the rules alone.
            let namespace = obj
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if namespace.is_empty() {
                return Some(Err(Status::bad_request("no namespace on request")));
            }
            let rules = self.authorizer.rules_for(user, namespace);
            return Some(Ok(json!({
                "kind": "SelfSubjectRulesReview",
                "apiVersion": obj.get("apiVersion").cloned().unwrap_or_else(|| json!("authorization.k8s.io/v1")),
                "metadata": {},
                "spec": {},
                "status": rules_status(&rules),
            })));
        }
        let mut out = obj.clone();
        let errs = validate_review(obj);
        if !errs.is_empty() {
            return Some(Err(invalid_status(AUTHORIZATION_GROUP, "", "", &errs)));
        }
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let subject = if kind == "SelfSubjectAccessReview" {
            user.clone()
        } else {
            spec_user(spec, "user")
        };
        let decision = self
            .authorizer
            .authorize(&subject, &review_request(spec))
            .await;
        let mut status = json!({"allowed": decision.is_allowed()});
        if matches!(decision, Decision::Deny(_)) {
            status["denied"] = json!(true);
        }
        if !decision.reason().is_empty() {
            status["reason"] = json!(decision.reason());
        }
        out["status"] = status;
        Some(Ok(out))
    }
}

pub struct SelfSubjectReviewStrategy;

#[async_trait]
impl Strategy for SelfSubjectReviewStrategy {
    /// A new object, whatever the client sent: its creation time and who asked.
    async fn create_without_storage(
        &self,
        obj: &Value,
        user: &UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, Status>> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        Some(Ok(json!({
            "apiVersion": obj.get("apiVersion").cloned().unwrap_or_else(|| json!("authentication.k8s.io/v1")),
            "kind": "SelfSubjectReview",
            "metadata": {"creationTimestamp": now},
            "status": {"userInfo": user_info(user)},
        })))
    }
}

/// `authentication.k8s.io/v1` UserInfo.
fn user_info(user: &UserInfo) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// TokenReview: is `spec.token` a bearer token this server accepts, and whose (upstream:
/// pkg/registry/authentication/tokenreview).
pub struct TokenReviewStrategy {
    pub authenticator: Arc<dyn Authenticator>,
}

#[async_trait]
impl Strategy for TokenReviewStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        _user: &UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, Status>> {
        let token = obj
            .pointer("/spec/token")
            .and_then(Value::as_str)
            .unwrap_or("");
        if token.is_empty() {
            return Some(Err(Status::bad_request(
                "token is required for TokenReview in authentication",
            )));
        }
        let mut headers = http::HeaderMap::new();
        let Ok(value) = http::HeaderValue::from_str(&format!("Bearer {token}")) else {
            return Some(Err(Status::bad_request(
                "token is not a valid header value",
            )));
        };
        headers.insert(http::header::AUTHORIZATION, value);
        let outcome = self
            .authenticator
            .authenticate(&AuthnRequest {
                headers: &headers,
                peer_certificates: None,
            })
            .await;
        let mut out = obj.clone();
        out["status"] = match outcome {
            Ok(Some(user)) => json!({"authenticated": true, "user": user_info(&user)}),
            Ok(None) => json!({"user": {}}),
            Err(e) => json!({"user": {}, "error": e.to_string()}),
        };
        Some(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: Value) -> Vec<String> {
        validate_review(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn subject_access_reviews_need_a_subject_and_one_kind_of_attributes() {
        assert_eq!(
            messages(
                json!({"kind": "SubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get"}}})
            ),
            ["spec.user: Invalid value: \"\": at least one of user or group must be specified"]
        );
        assert_eq!(
            messages(
                json!({"kind": "SelfSubjectAccessReview", "metadata": {"name": "x"}, "spec": {}})
            ),
            [
                "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                "metadata: Invalid value: {\"name\":\"x\",\"creationTimestamp\":null}: must be empty",
            ]
        );
    }

    #[test]
    fn local_reviews_ask_about_their_own_namespace() {
        assert_eq!(
            messages(
                json!({"kind": "LocalSubjectAccessReview", "metadata": {"namespace": "a"}, "spec": {"user": "u", "resourceAttributes": {"namespace": "other"}}})
            ),
            [
                "spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
            ]
        );
        let status = invalid_status(
            AUTHORIZATION_GROUP,
            "",
            "",
            &validate_review(
                &json!({"kind": "LocalSubjectAccessReview", "metadata": {"namespace": "a"}, "spec": {"user": "u", "nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
            ),
        );
        assert_eq!(
            status.message,
            ".authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: {\"Path\":\"/x\",\"Verb\":\"get\"}: disallowed on this kind of request"
        );
    }

    #[test]
    fn selector_attributes_need_one_form() {
        assert_eq!(
            messages(
                json!({"kind": "SubjectAccessReview", "spec": {"user": "u", "resourceAttributes": {"fieldSelector": {}, "labelSelector": {"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}}}})
            ),
            [
                "spec.resourceAttributes.fieldSelector.requirements: Required value: when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required",
                "spec.resourceAttributes.labelSelector.rawSelector: Invalid value: \"a=b\": may not specified at the same time as requirements",
            ]
        );
    }
}
