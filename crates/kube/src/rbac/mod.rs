//! Role-based access control (upstream: plugin/pkg/auth/authorizer/rbac, pkg/registry/rbac).
//!
//! - `rules`: what one policy rule allows, and whether one set of rules covers another;
//! - `index`: the Roles, ClusterRoles and bindings in memory, kept by watches, indexed by
//!   subject — every decision is made from it, never from storage;
//! - [`RbacAuthorizer`]: the `RBAC` authorization mode, and the rules a user holds for
//!   SelfSubjectRulesReview;
//! - `escalation`: the checks that keep users from granting rights they lack;
//! - `bootstrap`: the roles and bindings upstream creates at start, reconciled every start.
//!
//! The clusterrole-aggregation controller is in `controllers::clusterrole_aggregation`.

pub mod bootstrap;
pub mod escalation;
pub mod index;
pub mod rules;

use apiserver::authentication::UserInfo;
use apiserver::authorization::{Authorizer, Decision, NonResourceRule, ResourceRule, Rules};
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Synced};
use apiserver::request::RequestInfo;
use async_trait::async_trait;

pub use index::Index;

/// Formats errors as upstream's `utilerrors.NewAggregate`: one alone as itself, several as
/// `[a, b]`.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The `RBAC` authorizer over an [`Index`].
#[derive(Clone)]
pub struct RbacAuthorizer {
    pub index: Index,
    /// Each of the four kinds, listed once.
    synced: Synced,
}

impl Default for RbacAuthorizer {
    fn default() -> Self {
        RbacAuthorizer {
            index: Index::default(),
            synced: Synced::new(index::Kind::ALL.len()),
        }
    }
}

impl RbacAuthorizer {
    /// Keeps the index current from the served RBAC resources, each listed then watched.
    pub fn start(&self, api: &ApiResources) {
        for kind in index::Kind::ALL {
            let listed = self.synced.source();
            let Some(store) = api.get(escalation::GROUP, "v1", kind.resource()).cloned() else {
                listed.mark();
                continue;
            };
            let index = self.index.clone();
            tokio::spawn(async move {
                reflector::run_projected(store, index::FIELDS_NAME, &index::FIELDS, move |delta| {
                    index.apply(kind, delta);
                    listed.mark();
                })
                .await
            });
        }
    }

    /// Every kind has been read once.
    pub fn has_synced(&self) -> bool {
        self.synced.has_synced()
    }
}

#[async_trait]
impl Authorizer for RbacAuthorizer {
    /// The first rule that allows the request decides, with its source as the reason; without
    /// one there is no opinion, and the reason lists the roles that could not be found.
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let mut allowed = None;
        let errors = self
            .index
            .visit_rules_for(user, &request.namespace, |source, rule| {
                if rule.allows(request) {
                    allowed = Some(format!("RBAC: allowed by {source}"));
                    return false;
                }
                true
            });
        match allowed {
            Some(reason) => Decision::Allow(reason),
            None if errors.is_empty() => Decision::NoOpinion(String::new()),
            None => Decision::NoOpinion(format!("RBAC: {}", aggregate(&errors))),
        }
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let (rules, errors) = self.index.rules_for(user, namespace);
        let mut out = Rules {
            errors: if errors.is_empty() {
                Vec::new()
            } else {
                vec![aggregate(&errors)]
            },
            ..Default::default()
        };
        for rule in rules {
            if !rule.resources.is_empty() {
                out.resource_rules.push(ResourceRule {
                    verbs: rule.verbs.clone(),
                    api_groups: rule.api_groups.clone(),
                    resources: rule.resources.clone(),
                    resource_names: rule.resource_names.clone(),
                });
            }
            if !rule.non_resource_urls.is_empty() {
                out.non_resource_rules.push(NonResourceRule {
                    verbs: rule.verbs,
                    non_resource_urls: rule.non_resource_urls,
                });
            }
        }
        out
    }
}
