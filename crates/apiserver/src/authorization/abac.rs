//! The ABAC authorizer (`--authorization-mode=ABAC` with `--authorization-policy-file`;
//! upstream: pkg/auth/authorizer/abac): a file of policies, one JSON object per line, each
//! allowing a user or group some requests. A request one policy matches is allowed; otherwise
//! the authorizer has no opinion ("No policy matched.").
//!
//! Lines are `abac.authorization.kubernetes.io/v1beta1` `Policy` objects, or unversioned (v0)
//! policies, converted as upstream converts them: no user or group means every authenticated
//! user, an empty namespace or resource means all, and v0 rules match every API group.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::{Authorizer, Decision, NonResourceRule, ResourceRule, Rules};
use crate::authentication::{ALL_AUTHENTICATED, UserInfo};
use crate::request::RequestInfo;

const API_VERSION: &str = "abac.authorization.kubernetes.io/v1beta1";

/// A policy's spec (upstream `abac.PolicySpec`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PolicySpec {
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default, rename = "apiGroup")]
    pub api_group: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub non_resource_path: String,
}

/// A v0 (unversioned) policy.
#[derive(Deserialize)]
struct V0Policy {
    #[serde(default)]
    user: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    readonly: bool,
    #[serde(default)]
    resource: String,
    #[serde(default)]
    namespace: String,
}

impl From<V0Policy> for PolicySpec {
    fn from(v0: V0Policy) -> PolicySpec {
        let mut spec = PolicySpec {
            user: v0.user.clone(),
            group: v0.group.clone(),
            readonly: v0.readonly,
            api_group: "*".into(),
            resource: v0.resource.clone(),
            namespace: v0.namespace.clone(),
            non_resource_path: String::new(),
        };
        if v0.user.is_empty() && v0.group.is_empty() {
            spec.group = ALL_AUTHENTICATED.into();
        }
        if v0.user == "*" || v0.group == "*" {
            spec.group = ALL_AUTHENTICATED.into();
            spec.user.clear();
        }
        if v0.namespace.is_empty() {
            spec.namespace = "*".into();
        }
        if v0.resource.is_empty() {
            spec.resource = "*".into();
        }
        if v0.namespace.is_empty() && v0.resource.is_empty() {
            spec.non_resource_path = "*".into();
        }
        spec
    }
}

pub struct AbacAuthorizer {
    policies: Vec<PolicySpec>,
}

impl AbacAuthorizer {
    /// Reads `--authorization-policy-file`.
    pub fn from_file(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("open {path}: {e}"))?;
        Self::parse(path, &text)
    }

    /// Parses a policy file's content; `path` names it in errors, with upstream's wording.
    pub fn parse(path: &str, text: &str) -> Result<Self, String> {
        let mut policies = Vec::new();
        let mut unversioned = 0;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fail = |e: String| {
                format!(
                    "error reading policy file {path}, line {}: {line}: {e}",
                    i + 1
                )
            };
            let value: Value = serde_json::from_str(line).map_err(|e| fail(e.to_string()))?;
            let api_version = value
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
            if api_version == API_VERSION && !kind.is_empty() {
                if kind != "Policy" {
                    return Err(fail(format!(
                        "no kind {kind:?} is registered for version {api_version:?}"
                    )));
                }
                let spec = value.get("spec").cloned().unwrap_or(Value::Null);
                let spec: PolicySpec = if spec.is_null() {
                    PolicySpec::default()
                } else {
                    serde_json::from_value(spec).map_err(|e| fail(e.to_string()))?
                };
                policies.push(spec);
            } else {
                // A missing or unknown version or kind is read as an unversioned policy.
                unversioned += 1;
                let v0: V0Policy =
                    serde_json::from_value(value).map_err(|e| fail(e.to_string()))?;
                policies.push(v0.into());
            }
        }
        if unversioned > 0 {
            tracing::warn!(
                "Policy file {path} contained unversioned rules. See docs/admin/authorization.md#abac-mode for ABAC file format details."
            );
        }
        Ok(AbacAuthorizer { policies })
    }
}

/// Upstream's `subjectMatches`: a user and a group given must both match (`*` matches anyone);
/// a policy that names neither matches nobody.
fn subject_matches(p: &PolicySpec, user: &UserInfo) -> bool {
    let user_ok = p.user.is_empty() || p.user == "*" || p.user == user.name;
    let group_ok = p.group.is_empty() || p.group == "*" || user.groups.contains(&p.group);
    user_ok && group_ok && !(p.user.is_empty() && p.group.is_empty())
}

fn read_only(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

fn matches(p: &PolicySpec, request: &RequestInfo) -> bool {
    if p.readonly && !read_only(&request.verb) {
        return false;
    }
    if request.is_resource_request {
        (p.namespace == "*" || p.namespace == request.namespace)
            && (p.resource == "*" || p.resource == request.resource)
            && (p.api_group == "*" || p.api_group == request.api_group)
    } else {
        p.non_resource_path == "*"
            || p.non_resource_path == request.path
            || (p.non_resource_path.ends_with('*')
                && request
                    .path
                    .starts_with(p.non_resource_path.trim_end_matches('*')))
    }
}

fn verbs(readonly: bool) -> Vec<String> {
    if readonly {
        vec!["get".into(), "list".into(), "watch".into()]
    } else {
        vec!["*".into()]
    }
}

#[async_trait]
impl Authorizer for AbacAuthorizer {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        if self
            .policies
            .iter()
            .any(|p| subject_matches(p, user) && matches(p, request))
        {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion("No policy matched.".into())
        }
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut rules = Rules::default();
        for p in &self.policies {
            if !subject_matches(p, user) || !(p.namespace == "*" || p.namespace == namespace) {
                continue;
            }
            if !p.resource.is_empty() {
                rules.resource_rules.push(ResourceRule {
                    verbs: verbs(p.readonly),
                    api_groups: vec![p.api_group.clone()],
                    resources: vec![p.resource.clone()],
                    resource_names: Vec::new(),
                });
            }
            if !p.non_resource_path.is_empty() {
                rules.non_resource_rules.push(NonResourceRule {
                    verbs: verbs(p.readonly),
                    non_resource_urls: vec![p.non_resource_path.clone()],
                });
            }
        }
        rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
# comments and blank lines are skipped
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "*", "resource": "*", "apiGroup": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "readers", "namespace": "projectCaribou", "resource": "pods", "apiGroup": "", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "*", "nonResourcePath": "/version*", "readonly": true}}
{"user": "legacy", "resource": "events"}
"#;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    fn req(method: &str, path: &str) -> RequestInfo {
        RequestInfo::parse(&method.parse().unwrap(), path, "")
    }

    #[tokio::test]
    async fn policies_allow_what_they_match_and_nothing_else() {
        let abac = AbacAuthorizer::parse("policy.jsonl", FILE).unwrap();
        let alice = user("alice", &[]);
        let reader = user("bob", &["readers"]);
        let pods = "/api/v1/namespaces/projectCaribou/pods";
        assert!(
            abac.authorize(
                &alice,
                &req("DELETE", "/apis/apps/v1/namespaces/x/deployments/d")
            )
            .await
            .is_allowed()
        );
        assert!(
            abac.authorize(&reader, &req("GET", pods))
                .await
                .is_allowed()
        );
        assert_eq!(
            abac.authorize(&reader, &req("POST", pods)).await,
            Decision::NoOpinion("No policy matched.".into())
        );
        assert!(
            !abac
                .authorize(&reader, &req("GET", "/api/v1/namespaces/other/pods"))
                .await
                .is_allowed()
        );
        assert!(
            abac.authorize(&reader, &req("GET", "/version"))
                .await
                .is_allowed()
        );
        assert!(
            !abac
                .authorize(&reader, &req("GET", "/healthz"))
                .await
                .is_allowed()
        );
        // v0: every namespace and group, resource "events" only.
        let legacy = user("legacy", &[]);
        assert!(
            abac.authorize(
                &legacy,
                &req("POST", "/apis/events.k8s.io/v1/namespaces/a/events")
            )
            .await
            .is_allowed()
        );
        assert!(
            !abac
                .authorize(&legacy, &req("GET", "/api/v1/namespaces/a/pods"))
                .await
                .is_allowed()
        );
        let rules = abac.rules_for(&reader, "projectCaribou");
        assert_eq!(rules.resource_rules.len(), 1);
        assert_eq!(rules.resource_rules[0].verbs, ["get", "list", "watch"]);
        // A policy without a namespace lists its path only for the empty namespace, as upstream.
        assert!(rules.non_resource_rules.is_empty());
        let rules = abac.rules_for(&reader, "");
        assert_eq!(rules.non_resource_rules[0].non_resource_urls, ["/version*"]);
    }

    #[test]
    fn v0_policies_convert_as_upstream_and_bad_lines_name_their_place() {
        let spec: PolicySpec = serde_json::from_str::<V0Policy>(r#"{"readonly": true}"#)
            .unwrap()
            .into();
        assert_eq!(spec.group, ALL_AUTHENTICATED);
        assert_eq!(
            (spec.namespace.as_str(), spec.resource.as_str()),
            ("*", "*")
        );
        assert_eq!(spec.non_resource_path, "*");
        let star: PolicySpec =
            serde_json::from_str::<V0Policy>(r#"{"user": "*", "namespace": "a"}"#)
                .unwrap()
                .into();
        assert_eq!(
            (star.user.as_str(), star.group.as_str()),
            ("", ALL_AUTHENTICATED)
        );
        assert_eq!(star.non_resource_path, "");
        let err = AbacAuthorizer::parse("p.jsonl", "\n{not json\n")
            .err()
            .unwrap();
        assert!(
            err.starts_with("error reading policy file p.jsonl, line 2: {not json: "),
            "{err}"
        );
    }
}
