//! RBAC: Roles, ClusterRoles and their bindings (upstream: pkg/apis/rbac/validation and
//! pkg/apis/rbac/v1/defaults.go). Names need only be safe as a path segment; a subject that is a
//! User or a Group belongs to the RBAC API group unless it names another (`SetDefaults_Subject`);
//! rules, role references and subjects are checked as `ValidatePolicyRule`,
//! `ValidateRoleBinding` and `ValidateRoleBindingSubject` check them. That a binding's roleRef
//! never changes is a row of the catalog.

use crate::strategies::struct_field;
use apimachinery::validation::{
    FieldError, FieldPath, LabelSelectorValidationOptions, NameValidator, is_dns1123_subdomain,
    is_path_segment_name, is_qualified_name, is_valid_label_value, validate_label_selector,
};
use apiserver::authentication::UserInfo;
use apiserver::registry::Strategy;

use crate::rbac::escalation::Escalation;
use serde_json::{Value, json};

use super::fields::{json_list, list_at, set_at, str_at, strs_at};

const GROUP: &str = "rbac.authorization.k8s.io";

/// Role (namespaced rules) and ClusterRole.
pub struct RoleStrategy {
    pub namespaced: bool,
    pub escalation: Escalation,
}

/// RoleBinding (may name a Role or a ClusterRole) and ClusterRoleBinding.
pub struct BindingStrategy {
    pub namespaced: bool,
    pub escalation: Escalation,
}

#[async_trait::async_trait]
impl Strategy for RoleStrategy {
    /// Nobody writes a role granting rights they lack (policy-based storage).
    async fn authorize_write(
        &self,
        user: &UserInfo,
        namespace: &str,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), apimachinery::Status> {
        let resource = if self.namespaced {
            "roles"
        } else {
            "clusterroles"
        };
        self.escalation
            .check_role(resource, user, namespace, new, old)
            .await
    }

    fn name_validator(&self) -> NameValidator {
        NameValidator::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, rule) in list_at(obj, "rules").iter().enumerate() {
            errs.extend(validate_policy_rule(
                rule,
                self.namespaced,
                &FieldPath::new("rules").index(i),
            ));
        }
        if !self.namespaced {
            errs.extend(validate_aggregation_rule(obj, false));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        if self.namespaced {
            return self.validate(new);
        }
        // Selectors stored before label values were checked stay acceptable
        // (`ClusterRoleValidationOptions` from the old object).
        let mut errs = Vec::new();
        for (i, rule) in list_at(new, "rules").iter().enumerate() {
            errs.extend(validate_policy_rule(
                rule,
                false,
                &FieldPath::new("rules").index(i),
            ));
        }
        let lenient = !validate_aggregation_rule(old, false).is_empty();
        errs.extend(validate_aggregation_rule(new, lenient));
        errs
    }
}

/// `ValidatePolicyRule`: verbs always; non-resource URLs only cluster-wide and never with
/// resources; resource rules need groups and resources.
fn validate_policy_rule(rule: &Value, namespaced: bool, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if list_at(rule, "verbs").is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = strs_at(rule, "nonResourceURLs");
    if !urls.is_empty() {
        if namespaced {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                json_list(&urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        let resource_parts = ["apiGroups", "resources", "resourceNames"]
            .iter()
            .any(|f| !list_at(rule, f).is_empty());
        if resource_parts {
            errs.push(FieldError::invalid(
                &path.child("nonResourceURLs"),
                json_list(&urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if list_at(rule, "apiGroups").is_empty() {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if list_at(rule, "resources").is_empty() {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errs
}

/// A ClusterRole's `aggregationRule`: at least one selector, each a valid label selector.
fn validate_aggregation_rule(obj: &Value, allow_invalid_label_value: bool) -> Vec<FieldError> {
    let Some(rule) = set_at(obj, "aggregationRule") else {
        return Vec::new();
    };
    let path = FieldPath::new("aggregationRule").child("clusterRoleSelectors");
    let selectors = list_at(rule, "clusterRoleSelectors");
    let mut errs = Vec::new();
    if selectors.is_empty() {
        errs.push(FieldError::required(
            &path,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    let opts = LabelSelectorValidationOptions {
        allow_invalid_label_value,
        ..Default::default()
    };
    for (i, s) in selectors.iter().enumerate() {
        errs.extend(validate_label_selector(Some(s), opts, &path.index(i)));
        // Upstream also converts each selector (`LabelSelectorAsSelector`), and reports a
        // failure with the nil selector it got back.
        if !selector_converts(s) {
            errs.push(FieldError::invalid(
                &path.index(i),
                Value::Null,
                "invalid label selector.",
            ));
        }
    }
    errs
}

/// Whether `metav1.LabelSelectorAsSelector` accepts a selector: every label key a qualified
/// name and every value a label value, known operators with the values they call for
/// (`labels.NewRequirement`).
fn selector_converts(selector: &Value) -> bool {
    let labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter().all(|(k, v)| {
                is_qualified_name(k).is_empty()
                    && is_valid_label_value(v.as_str().unwrap_or("")).is_empty()
            })
        });
    labels_ok
        && list_at(selector, "matchExpressions").iter().all(|e| {
            let values = strs_at(e, "values");
            let operator_ok = match str_at(e, "operator") {
                "In" | "NotIn" => !values.is_empty(),
                "Exists" | "DoesNotExist" => values.is_empty(),
                _ => false,
            };
            operator_ok
                && is_qualified_name(str_at(e, "key")).is_empty()
                && values.iter().all(|v| is_valid_label_value(v).is_empty())
        })
}

#[async_trait::async_trait]
impl Strategy for BindingStrategy {
    /// Nobody binds a role granting rights they lack, unless they may `bind` it.
    async fn authorize_write(
        &self,
        user: &UserInfo,
        namespace: &str,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), apimachinery::Status> {
        let resource = if self.namespaced {
            "rolebindings"
        } else {
            "clusterrolebindings"
        };
        self.escalation
            .check_binding(resource, user, namespace, new, old)
            .await
    }

    fn default(&self, obj: &mut Value) {
        // `SetDefaults_RoleBinding` / `SetDefaults_ClusterRoleBinding`: a role reference
        // without a group names an RBAC role.
        if let Some(role_ref) = struct_field(obj, "roleRef").and_then(Value::as_object_mut)
            && role_ref
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            role_ref.insert("apiGroup".into(), json!(GROUP));
        }
        for subject in obj
            .get_mut("subjects")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|s| s.is_object())
        {
            let unset = subject
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            let rbac = matches!(
                subject.get("kind").and_then(Value::as_str),
                Some("User" | "Group")
            );
            if unset && rbac {
                subject["apiGroup"] = json!(GROUP);
            }
        }
    }

    fn name_validator(&self) -> NameValidator {
        NameValidator::PathSegment
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
        let path = FieldPath::new("roleRef");
        let mut errs = Vec::new();
        let group = str_at(role_ref, "apiGroup");
        if group != GROUP {
            errs.push(FieldError::not_supported(
                &path.child("apiGroup"),
                group,
                &[GROUP],
            ));
        }
        // A ClusterRoleBinding can only grant a ClusterRole.
        let kinds: &[&str] = if self.namespaced {
            &["Role", "ClusterRole"]
        } else {
            &["ClusterRole"]
        };
        let kind = str_at(role_ref, "kind");
        if !kinds.contains(&kind) {
            errs.push(FieldError::not_supported(&path.child("kind"), kind, kinds));
        }
        let name = str_at(role_ref, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&path.child("name"), ""));
        } else {
            for m in is_path_segment_name(name) {
                errs.push(FieldError::invalid(&path.child("name"), name, m));
            }
        }
        for (i, subject) in list_at(obj, "subjects").iter().enumerate() {
            errs.extend(validate_subject(
                subject,
                self.namespaced,
                &FieldPath::new("subjects").index(i),
            ));
        }
        errs
    }
}

/// `ValidateRoleBindingSubject`. A namespace on a User or Group subject is kept, not checked.
fn validate_subject(subject: &Value, namespaced: bool, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(subject, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let group = str_at(subject, "apiGroup");
    match str_at(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(&path.child("name"), name, m));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    group,
                    &[""],
                ));
            }
            if !namespaced && str_at(subject, "namespace").is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    group,
                    &[GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escalation() -> Escalation {
        Escalation {
            index: Default::default(),
            authorizer: std::sync::Arc::new(apiserver::authorization::AlwaysAllow),
            api: Default::default(),
        }
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn policy_rules_follow_upstream() {
        let role = RoleStrategy {
            namespaced: true,
            escalation: escalation(),
        };
        let errs = role.validate(&json!({"rules": [{"resources": ["pods"], "verbs": ["get"]}]}));
        assert_eq!(
            messages(&errs),
            [
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group"
            ]
        );
        let errs = role.validate(&json!({"rules": [{"nonResourceURLs": ["/x"]}]}));
        assert_eq!(
            messages(&errs),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].nonResourceURLs: Invalid value: [\"/x\"]: namespaced rules cannot apply to non-resource URLs",
            ]
        );
        let cluster = RoleStrategy {
            namespaced: false,
            escalation: escalation(),
        };
        let errs = cluster.validate(&json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "nonResourceURLs": ["/x"], "verbs": ["get"]}]}));
        assert_eq!(
            messages(&errs),
            [
                "rules[0].nonResourceURLs: Invalid value: [\"/x\"]: rules cannot apply to both regular resources and non-resource URLs"
            ]
        );
        let errs = cluster.validate(&json!({"aggregationRule": {}}));
        assert_eq!(
            messages(&errs),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
    }

    #[test]
    fn bindings_check_role_refs_and_subjects() {
        let rb = BindingStrategy {
            namespaced: true,
            escalation: escalation(),
        };
        let mut b = json!({"roleRef": {"apiGroup": GROUP, "kind": "Policy", "name": ""}, "subjects": [{"kind": "Robot", "name": "a"}, {"kind": "User", "name": "u", "apiGroup": "example.com"}]});
        rb.default(&mut b);
        assert_eq!(
            messages(&rb.validate(&b)),
            [
                "roleRef.kind: Unsupported value: \"Policy\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
                "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "subjects[1].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
            ]
        );
        let crb = BindingStrategy {
            namespaced: false,
            escalation: escalation(),
        };
        let b = json!({"roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "apiGroup": "x"}]});
        assert_eq!(
            messages(&crb.validate(&b)),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].apiGroup: Unsupported value: \"x\": supported values: \"\"",
                "subjects[0].namespace: Required value",
            ]
        );
    }

    #[test]
    fn users_and_groups_default_to_the_rbac_group() {
        let mut b = json!({"subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]});
        BindingStrategy {
            namespaced: true,
            escalation: escalation(),
        }
        .default(&mut b);
        assert_eq!(b["subjects"][0]["apiGroup"], GROUP);
        assert!(b["subjects"][1].get("apiGroup").is_none());
    }
}
