//! Policy rules: does a rule allow a request, and do one user's rules cover another set (upstream:
//! pkg/apis/rbac/v1/evaluation_helpers.go, component-helpers/auth/rbac/validation's
//! policy_comparator.go, pkg/registry/rbac/validation/policy_compact.go).

use apiserver::request::RequestInfo;
use serde_json::{Map, Value, json};

use crate::strategies::fields::strs_at;

/// `rbac/v1 PolicyRule`, read from an object's `rules`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    strs_at(v, key).into_iter().map(str::to_string).collect()
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

impl PolicyRule {
    pub fn from_value(v: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The rules of a Role or ClusterRole object.
    pub fn all_of(obj: &Value) -> Vec<PolicyRule> {
        obj.get("rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(PolicyRule::from_value).collect())
            .unwrap_or_default()
    }

    /// The rule as the API writes it (empty lists left out, `verbs` always present).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("verbs".into(), json!(self.verbs));
        for (key, list) in [
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !list.is_empty() {
                m.insert(key.into(), json!(list));
            }
        }
        Value::Object(m)
    }

    /// `RuleAllows`: the verb, group, resource (with `*/subresource`) and name match for a
    /// resource request; the verb and path (with a trailing `*`) for any other.
    pub fn allows(&self, request: &RequestInfo) -> bool {
        let verb = has(&self.verbs, "*") || has(&self.verbs, &request.verb);
        if !verb {
            return false;
        }
        if !request.is_resource_request {
            return self
                .non_resource_urls
                .iter()
                .any(|url| url_covers(url, &request.path));
        }
        let group = has(&self.api_groups, "*") || has(&self.api_groups, &request.api_group);
        group && self.resource_matches(request) && self.name_matches(&request.name)
    }

    fn resource_matches(&self, request: &RequestInfo) -> bool {
        let sub = request.subresource.as_str();
        self.resources.iter().any(|r| {
            r == "*"
                || (sub.is_empty() && *r == request.resource)
                || (!sub.is_empty()
                    && (r
                        .strip_prefix(&request.resource)
                        .and_then(|rest| rest.strip_prefix('/'))
                        == Some(sub)
                        || r.strip_prefix("*/") == Some(sub)))
        })
    }

    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || has(&self.resource_names, name)
    }

    /// `BreakdownRule`: one rule per group × resource × verb (× name), then per path × verb.
    fn breakdown(&self) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        for group in &self.api_groups {
            for resource in &self.resources {
                for verb in &self.verbs {
                    let one = |names: Vec<String>| PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        resource_names: names,
                        non_resource_urls: Vec::new(),
                    };
                    if self.resource_names.is_empty() {
                        out.push(one(Vec::new()));
                    } else {
                        out.extend(self.resource_names.iter().map(|n| one(vec![n.clone()])));
                    }
                }
            }
        }
        for url in &self.non_resource_urls {
            for verb in &self.verbs {
                out.push(PolicyRule {
                    verbs: vec![verb.clone()],
                    non_resource_urls: vec![url.clone()],
                    ..Default::default()
                });
            }
        }
        out
    }

    /// `ruleCovers`: this owner rule grants everything `sub` (one broken-down rule) asks.
    fn covers(&self, sub: &PolicyRule) -> bool {
        let verbs = has(&self.verbs, "*") || has_all(&self.verbs, &sub.verbs);
        let groups = has(&self.api_groups, "*") || has_all(&self.api_groups, &sub.api_groups);
        let resources = has(&self.resources, "*")
            || sub.resources.iter().all(|path| {
                has(&self.resources, path)
                    || path
                        .split_once('/')
                        .is_some_and(|(_, sub)| has(&self.resources, &format!("*/{sub}")))
            });
        let urls = sub
            .non_resource_urls
            .iter()
            .all(|path| self.non_resource_urls.iter().any(|o| url_covers(o, path)));
        let names = self.resource_names.is_empty()
            || (!sub.resource_names.is_empty()
                && has_all(&self.resource_names, &sub.resource_names));
        verbs && groups && resources && urls && names
    }

    /// Upstream's `CompactString`: the rule's non-empty fields, Go's `%q` of each list.
    pub fn compact_string(&self) -> String {
        let quoted = |list: &[String]| {
            let items: Vec<String> = list.iter().map(|s| go_quote(s)).collect();
            format!("[{}]", items.join(" "))
        };
        let mut parts = Vec::new();
        for (name, list) in [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ] {
            if !list.is_empty() {
                parts.push(format!("{name}:{}", quoted(list)));
            }
        }
        format!("{{{}}}", parts.join(", "))
    }
}

/// A rule path covers a requested path when equal, or when it ends in `*` and prefixes it
/// (`*` alone covers every path).
fn url_covers(rule: &str, path: &str) -> bool {
    rule == path
        || rule
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// Go's `%q` of a string: JSON's escaping is the same for the characters names can hold.
pub fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `Covers`: whether `owner` grants every permission `servant` asks for, and the broken-down
/// rules it does not.
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let missing: Vec<PolicyRule> = servant
        .iter()
        // A rule the owner holds as it is covers each of its parts: only the others are broken
        // down (a role compared with itself, as at every start's reconciliation, allocates
        // nothing for its parts).
        .filter(|rule| !owner.contains(rule))
        .flat_map(PolicyRule::breakdown)
        .filter(|sub| !owner.iter().any(|o| o.covers(sub)))
        .collect();
    (missing.is_empty(), missing)
}

/// `CompactRules`: rules on one group, one resource and at most one name merge their verbs.
/// The merged rules follow the others (upstream appends them from a map, in no set order; the
/// callers sort the printed forms).
pub fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let is_simple = rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty()
            && rule.api_groups.len() == 1
            && rule.resources.len() == 1;
        if !is_simple {
            out.push(rule);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == rule.api_groups
                && s.resources == rule.resources
                && s.resource_names == rule.resource_names
        }) {
            Some(existing) => existing.verbs.extend(rule.verbs),
            None => simple.push(rule),
        }
    }
    out.extend(simple);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        PolicyRule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: Vec::new(),
        }
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        PolicyRule {
            verbs: v(verbs),
            non_resource_urls: v(urls),
            ..Default::default()
        }
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn path(verb: &str, path: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn rules_match_as_upstream_matches_them() {
        let pods = rule(&["get"], &[""], &["pods"], &[]);
        assert!(pods.allows(&request("get", "", "pods", "", "p")));
        assert!(!pods.allows(&request("list", "", "pods", "", "")));
        assert!(!pods.allows(&request("get", "apps", "pods", "", "p")));
        assert!(
            !pods.allows(&request("get", "", "pods", "log", "p")),
            "a resource does not grant its subresources"
        );
        let logs = rule(&["get"], &[""], &["pods/log"], &[]);
        assert!(logs.allows(&request("get", "", "pods", "log", "p")));
        assert!(!logs.allows(&request("get", "", "pods", "", "p")));
        let any_status = rule(&["update"], &["*"], &["*/status"], &[]);
        assert!(any_status.allows(&request("update", "apps", "deployments", "status", "d")));
        assert!(!any_status.allows(&request("update", "apps", "deployments", "scale", "d")));
        assert!(!any_status.allows(&request("update", "apps", "deployments", "", "d")));
        let named = rule(&["*"], &["apps"], &["deployments"], &["web"]);
        assert!(named.allows(&request("patch", "apps", "deployments", "", "web")));
        assert!(!named.allows(&request("patch", "apps", "deployments", "", "db")));
        assert!(
            !named.allows(&request("list", "apps", "deployments", "", "")),
            "a list has no name, so named rules never allow it"
        );
        let everything = rule(&["*"], &["*"], &["*"], &[]);
        assert!(everything.allows(&request(
            "escalate",
            "rbac.authorization.k8s.io",
            "roles",
            "",
            "r"
        )));
        assert!(
            !everything.allows(&path("get", "/healthz")),
            "resources grant no paths"
        );
        let health = urls(&["get"], &["/healthz", "/apis/*"]);
        assert!(health.allows(&path("get", "/healthz")));
        assert!(!health.allows(&path("get", "/healthz/etcd")));
        assert!(health.allows(&path("get", "/apis/apps/v1")));
        assert!(!health.allows(&path("get", "/apis")));
        assert!(!health.allows(&path("post", "/healthz")));
        assert!(urls(&["*"], &["*"]).allows(&path("delete", "/anything")));
    }

    #[test]
    fn coverage_breaks_rules_down_and_reports_what_is_missing() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "services"], &[]),
            rule(&["update"], &["apps"], &["*/scale"], &[]),
            rule(&["get"], &[""], &["secrets"], &["a", "b"]),
            urls(&["get"], &["/metrics*"]),
        ];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"], &[])]).0);
        assert!(
            covers(
                &owner,
                &[rule(&["update"], &["apps"], &["deployments/scale"], &[])]
            )
            .0
        );
        assert!(covers(&owner, &[rule(&["get"], &[""], &["secrets"], &["a"])]).0);
        assert!(
            !covers(&owner, &[rule(&["get"], &[""], &["secrets"], &[])]).0,
            "named rights do not cover all names"
        );
        assert!(covers(&owner, &[urls(&["get"], &["/metrics/x"])]).0);
        let (ok, missing) = covers(
            &owner,
            &[rule(&["get", "delete"], &["", "apps"], &["pods"], &[])],
        );
        assert!(!ok);
        let printed: Vec<String> = compact(missing)
            .iter()
            .map(PolicyRule::compact_string)
            .collect();
        assert_eq!(
            printed,
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "delete"]}"#,
            ]
        );
        let everything = vec![rule(&["*"], &["*"], &["*"], &[]), urls(&["*"], &["*"])];
        assert!(covers(&everything, &owner).0);
        // Rules held as they are cover themselves, the rest is still broken down: a named
        // rule beside an equal one is covered, its unnamed form is not.
        assert_eq!(covers(&owner, &owner), (true, Vec::new()));
        let (ok, missing) = covers(
            &owner[2..3],
            &[owner[2].clone(), rule(&["get"], &[""], &["secrets"], &[])],
        );
        assert!(!ok);
        assert_eq!(missing, [rule(&["get"], &[""], &["secrets"], &[])]);
    }
}
