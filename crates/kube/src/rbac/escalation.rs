//! Escalation prevention: nobody grants rights they do not hold (upstream:
//! pkg/registry/rbac/escalation_check.go, pkg/registry/rbac/{role,clusterrole,rolebinding,
//! clusterrolebinding}/policybased, `ConfirmNoEscalation` in pkg/registry/rbac/validation).
//!
//! A Role or ClusterRole may be written by `system:masters`, by whoever may `escalate` it, or
//! by a user who already holds every rule it lists (and, for an `aggregationRule`, every right
//! at all). A binding may be written by `system:masters`, by whoever may `bind` the role it
//! names, or by a user who holds every rule of that role. A write that only changes owner
//! references or finalizers is always let through, so that garbage collection works.

use std::sync::{Arc, OnceLock};

use apimachinery::object::ObjectExt;
use apimachinery::{GroupResource, Status};
use apiserver::authentication::UserInfo;
use apiserver::authorization::{Authorizer, SYSTEM_MASTERS};
use apiserver::endpoints::ApiResources;
use apiserver::request::RequestInfo;
use serde_json::Value;
use storage::ResourceVersion;

use super::index::Index;
use super::rules::{self, PolicyRule, go_quote};

pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What the checks need: the user's own rules (the index) and the authorizer for `escalate` and
/// `bind`. Set once the server is built; until then (and without RBAC objects served) the
/// checks hold every non-privileged write to what the index knows.
#[derive(Clone)]
pub struct Escalation {
    pub index: Index,
    pub authorizer: Arc<dyn Authorizer>,
    /// The served API, to read the role a binding names as it is stored now.
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

/// `EscalationAllowed`: members of `system:masters` may grant anything.
fn privileged(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == SYSTEM_MASTERS)
}

/// `IsOnlyMutatingGCFields`: the update changes nothing but owner references and finalizers.
fn only_gc_fields(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "ownerReferences",
                "finalizers",
                "selfLink",
                "managedFields",
                "resourceVersion",
            ] {
                meta.remove(f);
            }
        }
        v
    };
    strip(new) == strip(old)
}

fn go_quote_list(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", items.join(" "))
}

impl Escalation {
    async fn allowed(
        &self,
        user: &UserInfo,
        verb: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> bool {
        let request = RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            api_group: GROUP.into(),
            api_version: "*".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        };
        self.authorizer.authorize(user, &request).await.is_allowed()
    }

    /// `ConfirmNoEscalation`: the user's rules in `namespace` cover `rules`, else upstream's
    /// message listing the missing rights.
    fn confirm_no_escalation(
        &self,
        user: &UserInfo,
        namespace: &str,
        rules: &[PolicyRule],
    ) -> Result<(), String> {
        let (owner, errors) = self.index.rules_for(user, namespace);
        let (covered, missing) = rules::covers(&owner, rules);
        if covered {
            return Ok(());
        }
        let mut described: Vec<String> = rules::compact(missing)
            .iter()
            .map(PolicyRule::compact_string)
            .collect();
        described.sort();
        described.dedup();
        let mut msg = format!(
            "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            go_quote(&user.name),
            go_quote_list(&user.groups),
            described.join("\n")
        );
        if !errors.is_empty() {
            msg.push_str(&format!(
                "; resolution errors: [{}]",
                super::aggregate(&errors)
            ));
        }
        Err(msg)
    }

    /// The policy-based Role and ClusterRole storage.
    pub async fn check_role(
        &self,
        resource: &str,
        user: &UserInfo,
        namespace: &str,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), Status> {
        if privileged(user)
            || self
                .allowed(user, "escalate", resource, namespace, new.name())
                .await
        {
            return Ok(());
        }
        if old.is_some_and(|old| only_gc_fields(new, old)) {
            return Ok(());
        }
        let gr = GroupResource::new(GROUP, resource);
        self.confirm_no_escalation(user, namespace, &PolicyRule::all_of(new))
            .map_err(|e| Status::forbidden(&gr, new.name(), e))?;
        let aggregates = |v: &Value| {
            v.pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
                .is_some_and(|s| !s.is_empty())
        };
        if resource == "clusterroles" && (aggregates(new) || old.is_some_and(aggregates)) {
            let everything = [
                PolicyRule {
                    verbs: vec!["*".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    ..Default::default()
                },
                PolicyRule {
                    verbs: vec!["*".into()],
                    non_resource_urls: vec!["*".into()],
                    ..Default::default()
                },
            ];
            self.confirm_no_escalation(user, namespace, &everything)
                .map_err(|_| {
                    Status::forbidden(
                        &gr,
                        new.name(),
                        "must have cluster-admin privileges to use the aggregationRule",
                    )
                })?;
        }
        Ok(())
    }

    /// The policy-based RoleBinding and ClusterRoleBinding storage.
    pub async fn check_binding(
        &self,
        resource: &str,
        user: &UserInfo,
        namespace: &str,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), Status> {
        if privileged(user) || old.is_some_and(|old| only_gc_fields(new, old)) {
            return Ok(());
        }
        let kind = new
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role = new
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role_resource = match kind {
            "Role" => "roles",
            "ClusterRole" => "clusterroles",
            other => {
                return Err(Status::internal(format!(
                    "unsupported role reference kind: {}",
                    go_quote(other)
                )));
            }
        };
        // `BindingAuthorized`: `bind` on the named role.
        if self
            .allowed(user, "bind", role_resource, namespace, role)
            .await
        {
            return Ok(());
        }
        // The role as stored now (upstream reads it through the registry).
        let ns = if kind == "Role" { namespace } else { "" };
        let store = self
            .api
            .get()
            .and_then(|api| api.get(GROUP, "v1", role_resource).cloned())
            .ok_or_else(|| Status::internal(format!("{role_resource} are not served")))?;
        let stored = store.get(ns, role, ResourceVersion::Unset).await?;
        let rules = PolicyRule::all_of(
            &stored
                .value()
                .map_err(|e| Status::internal(e.to_string()))?,
        );
        self.confirm_no_escalation(user, namespace, &rules)
            .map_err(|e| Status::forbidden(&GroupResource::new(GROUP, resource), new.name(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owner_references_and_finalizers_alone_are_not_escalation() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "5"}, "rules": []});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["x"]);
        new["metadata"]["ownerReferences"] = json!([{"name": "o"}]);
        new["metadata"]["resourceVersion"] = json!("6");
        assert!(only_gc_fields(&new, &old));
        new["rules"] = json!([{"verbs": ["get"]}]);
        assert!(!only_gc_fields(&new, &old));
    }

    #[test]
    fn lists_print_as_go_quotes_them() {
        assert_eq!(
            go_quote_list(&["system:authenticated".into(), "a\"b".into()]),
            r#"["system:authenticated" "a\"b"]"#
        );
    }
}
