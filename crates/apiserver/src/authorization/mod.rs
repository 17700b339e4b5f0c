//! Authorization: may this user do this verb on this resource? (upstream:
//! k8s.io/apiserver/pkg/authorization and pkg/kubeapiserver/authorizer).
//!
//! This module owns the [`Authorizer`] seam, the answers it gives ([`Decision`], and the
//! [`Rules`] a user holds, for SelfSubjectRulesReview), the authorizers that need no data
//! (`AlwaysAllow`, `AlwaysDeny`, the `system:masters` privileged group) and the union that
//! asks a chain of them in `--authorization-mode` order. Authorizers that read API objects (RBAC)
//! live with those objects' kinds, in the `kube` crate; the filter chain turns a refusal into
//! upstream's 403.

pub mod abac;
pub mod config;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;

use crate::authentication::UserInfo;
use crate::request::RequestInfo;

/// The group whose members may do everything (upstream `user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// An authorizer's answer, with its reason (upstream returns `(Decision, reason, error)`; the
/// reason is what a SubjectAccessReview shows and what a 403 message ends with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
    /// No opinion: the next authorizer in a union decides.
    NoOpinion(String),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// A rule a user holds on resources (upstream `authorizer.ResourceRuleInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
}

/// A rule a user holds on non-resource paths (upstream `authorizer.NonResourceRuleInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

/// What a user may do in a namespace, as far as an authorizer can tell (upstream's
/// `RuleResolver.RulesFor`): `incomplete` when it cannot list its rules (a webhook), `errors`
/// when some could not be resolved (a binding naming a missing role).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
    pub incomplete: bool,
    pub errors: Vec<String>,
}

impl Rules {
    /// Every verb on everything.
    pub fn everything() -> Self {
        let all = || vec!["*".to_string()];
        Rules {
            resource_rules: vec![ResourceRule {
                verbs: all(),
                api_groups: all(),
                resources: all(),
                resource_names: Vec::new(),
            }],
            non_resource_rules: vec![NonResourceRule {
                verbs: all(),
                non_resource_urls: all(),
            }],
            incomplete: false,
            errors: Vec::new(),
        }
    }
}

#[async_trait]
pub trait Authorizer: Send + Sync {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision;

    /// The rules `user` holds in `namespace`. An authorizer that cannot list them says the
    /// list is incomplete.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules {
            incomplete: true,
            ..Default::default()
        }
    }
}

/// `AlwaysAllow`: every request, anonymous ones included.
pub struct AlwaysAllow;

#[async_trait]
impl Authorizer for AlwaysAllow {
    async fn authorize(&self, _user: &UserInfo, _request: &RequestInfo) -> Decision {
        Decision::Allow(String::new())
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules::everything()
    }
}

/// `AlwaysDeny`: no opinion on anything, with upstream's reason.
pub struct AlwaysDeny;

#[async_trait]
impl Authorizer for AlwaysDeny {
    async fn authorize(&self, _user: &UserInfo, _request: &RequestInfo) -> Decision {
        Decision::NoOpinion("Everything is forbidden.".into())
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules::default()
    }
}

/// Allows members of the privileged groups (`system:masters`) everything, ahead of every mode,
/// as upstream prepends it to the configured authorizers. It lists no rules: a member's rules
/// come from RBAC's `cluster-admin` binding.
pub struct PrivilegedGroups(pub Vec<String>);

#[async_trait]
impl Authorizer for PrivilegedGroups {
    async fn authorize(&self, user: &UserInfo, _request: &RequestInfo) -> Decision {
        if user.groups.iter().any(|g| self.0.contains(g)) {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(String::new())
        }
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules::default()
    }
}

/// Asks its authorizers in order: the first Allow or Deny decides; when all have no opinion,
/// their reasons are joined by newlines (upstream: authorization/union).
pub struct Union(pub Vec<Arc<dyn Authorizer>>);

#[async_trait]
impl Authorizer for Union {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let mut reasons: Vec<String> = Vec::new();
        for authorizer in &self.0 {
            match authorizer.authorize(user, request).await {
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut all = Rules::default();
        for authorizer in &self.0 {
            let mut rules = authorizer.rules_for(user, namespace);
            all.resource_rules.append(&mut rules.resource_rules);
            all.non_resource_rules.append(&mut rules.non_resource_rules);
            all.incomplete |= rules.incomplete;
            all.errors.append(&mut rules.errors);
        }
        all
    }
}

/// The `--authorization-mode` values (upstream `pkg/kubeapiserver/authorizer/modes`).
pub const MODES: &[&str] = &[
    "AlwaysAllow",
    "AlwaysDeny",
    "ABAC",
    "Webhook",
    "RBAC",
    "Node",
];

/// Checks an `--authorization-mode` list as upstream's options validation does.
pub fn validate_modes(modes: &[String]) -> Result<(), String> {
    if modes.is_empty() {
        return Err("at least one authorization-mode must be passed".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for mode in modes {
        if !MODES.contains(&mode.as_str()) {
            return Err(format!("authorization-mode {mode:?} is not a valid mode"));
        }
        if !seen.insert(mode.as_str()) {
            // Go's %q of the whole list.
            let list: Vec<String> = modes.iter().map(|m| format!("{m:?}")).collect();
            return Err(format!(
                "authorization-mode [{}] has mode specified more than once",
                list.join(" ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Decision);

    #[async_trait]
    impl Authorizer for Fixed {
        async fn authorize(&self, _: &UserInfo, _: &RequestInfo) -> Decision {
            self.0.clone()
        }
    }

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo {
            name: "u".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn the_union_stops_at_the_first_decision_and_joins_reasons() {
        let union = Union(vec![
            Arc::new(PrivilegedGroups(vec![SYSTEM_MASTERS.into()])),
            Arc::new(Fixed(Decision::NoOpinion("first".into()))),
            Arc::new(AlwaysDeny),
        ]);
        let request = RequestInfo::default();
        assert_eq!(
            union.authorize(&user(&["devs"]), &request).await,
            Decision::NoOpinion("first\nEverything is forbidden.".into())
        );
        assert!(
            union
                .authorize(&user(&[SYSTEM_MASTERS]), &request)
                .await
                .is_allowed()
        );
        let denying = Union(vec![
            Arc::new(Fixed(Decision::Deny("no".into()))),
            Arc::new(AlwaysAllow),
        ]);
        assert_eq!(
            denying.authorize(&user(&[]), &request).await,
            Decision::Deny("no".into())
        );
    }

    #[test]
    fn modes_are_checked_as_upstream_checks_them() {
        let modes =
            |m: &[&str]| validate_modes(&m.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(modes(&["Node", "RBAC"]).is_ok());
        assert_eq!(
            modes(&["RBAC", "Magic"]).unwrap_err(),
            r#"authorization-mode "Magic" is not a valid mode"#
        );
        assert_eq!(
            modes(&["RBAC", "RBAC"]).unwrap_err(),
            r#"authorization-mode ["RBAC" "RBAC"] has mode specified more than once"#
        );
        assert!(modes(&[]).is_err());
    }

    #[test]
    fn rules_of_a_union_are_concatenated() {
        let union = Union(vec![Arc::new(AlwaysDeny), Arc::new(AlwaysAllow)]);
        let rules = union.rules_for(&user(&[]), "ns");
        assert_eq!(rules, Rules::everything());
        let with_webhook = Union(vec![Arc::new(Fixed(Decision::NoOpinion(String::new())))]);
        assert!(with_webhook.rules_for(&user(&[]), "ns").incomplete);
    }
}
