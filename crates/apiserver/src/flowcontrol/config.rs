//! The configuration the filter works from: FlowSchemas and PriorityLevelConfigurations read
//! out of their stored JSON into the few fields classification and queuing need, the mandatory
//! objects put in where the stored ones are missing (upstream's config controller does the
//! same, so that `exempt` and `catch-all` always work, before the bootstrap hook has written
//! them too), FlowSchemas ordered by matching precedence then name, and upstream's matching of
//! a request against a schema's rules (k8s.io/apiserver/pkg/util/flowcontrol/rule.go).
//!
//! What it must not do: fail on an object it cannot read (the store validated it; an object
//! that still cannot be read is left out, as a reflector leaves out what it cannot decode).

use serde_json::Value;

use crate::authentication::UserInfo;
use crate::request::RequestInfo;

/// How a FlowSchema splits its requests into flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distinguisher {
    None,
    ByUser,
    ByNamespace,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub cluster_scope: bool,
    pub namespaces: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    pub urls: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rule {
    pub subjects: Vec<Subject>,
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlowSchema {
    pub name: String,
    pub uid: String,
    pub priority_level: String,
    pub precedence: i64,
    pub distinguisher: Distinguisher,
    pub rules: Vec<Rule>,
}

/// What a level does with requests beyond its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitResponse {
    Reject,
    Queue {
        queues: usize,
        hand_size: usize,
        queue_length_limit: usize,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct PriorityLevel {
    pub name: String,
    pub uid: String,
    /// `Exempt`: never limited, never queued.
    pub exempt: bool,
    pub nominal_shares: u64,
    pub lendable_percent: u64,
    pub borrowing_limit_percent: Option<u64>,
    pub limit_response: LimitResponse,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn u64_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

impl FlowSchema {
    /// A stored (defaulted) flowcontrol.apiserver.k8s.io/v1 FlowSchema.
    pub fn from_object(obj: &Value) -> Option<Self> {
        let name = str_at(obj, "/metadata/name");
        if name.is_empty() {
            return None;
        }
        let distinguisher = match str_at(obj, "/spec/distinguisherMethod/type") {
            "ByUser" => Distinguisher::ByUser,
            "ByNamespace" => Distinguisher::ByNamespace,
            _ => Distinguisher::None,
        };
        let rules = obj
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .map(|rules| rules.iter().map(Rule::from_value).collect())
            .unwrap_or_default();
        Some(Self {
            name: name.to_string(),
            uid: str_at(obj, "/metadata/uid").to_string(),
            priority_level: str_at(obj, "/spec/priorityLevelConfiguration/name").to_string(),
            // Defaulted to 1000 by the strategy, as upstream's defaulting does.
            precedence: obj
                .pointer("/spec/matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(1000),
            distinguisher,
            rules,
        })
    }

    /// Whether any of the schema's rules matches the request (upstream's `matchesFlowSchema`).
    pub fn matches(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        self.rules.iter().any(|r| r.matches(user, info))
    }

    /// The flow a request belongs to within this schema.
    pub fn flow_distinguisher(&self, user: &UserInfo, info: &RequestInfo) -> String {
        match self.distinguisher {
            Distinguisher::None => String::new(),
            Distinguisher::ByUser => user.name.clone(),
            Distinguisher::ByNamespace => info.namespace.clone(),
        }
    }
}

impl Rule {
    fn from_value(v: &Value) -> Self {
        let subjects = v
            .get("subjects")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Subject::from_value).collect())
            .unwrap_or_default();
        let resource_rules = v
            .get("resourceRules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .map(|r| ResourceRule {
                        verbs: strings(r, "verbs"),
                        api_groups: strings(r, "apiGroups"),
                        resources: strings(r, "resources"),
                        cluster_scope: r
                            .get("clusterScope")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        namespaces: strings(r, "namespaces"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let non_resource_rules = v
            .get("nonResourceRules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .map(|r| NonResourceRule {
                        verbs: strings(r, "verbs"),
                        urls: strings(r, "nonResourceURLs"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            subjects,
            resource_rules,
            non_resource_rules,
        }
    }

    fn matches(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        if !self.subjects.iter().any(|s| s.matches(user)) {
            return false;
        }
        if info.is_resource_request {
            self.resource_rules.iter().any(|r| r.matches(info))
        } else {
            self.non_resource_rules.iter().any(|r| r.matches(info))
        }
    }
}

impl Subject {
    fn from_value(v: &Value) -> Option<Self> {
        match v.get("kind").and_then(Value::as_str)? {
            "User" => Some(Self::User(str_at(v, "/user/name").to_string())),
            "Group" => Some(Self::Group(str_at(v, "/group/name").to_string())),
            "ServiceAccount" => Some(Self::ServiceAccount {
                namespace: str_at(v, "/serviceAccount/namespace").to_string(),
                name: str_at(v, "/serviceAccount/name").to_string(),
            }),
            _ => None,
        }
    }

    fn matches(&self, user: &UserInfo) -> bool {
        match self {
            Self::User(name) => name == "*" || *name == user.name,
            Self::Group(name) => name == "*" || user.groups.iter().any(|g| g == name),
            Self::ServiceAccount { namespace, name } => {
                // `system:serviceaccount:<namespace>:<name>`; `*` is every name in the
                // namespace.
                let Some(rest) = user.name.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                let Some(rest) = rest.strip_prefix(namespace.as_str()) else {
                    return false;
                };
                let Some(sa) = rest.strip_prefix(':') else {
                    return false;
                };
                name == "*" || sa == name
            }
        }
    }
}

/// Upstream's `containsString`: the wildcard counts only as the list's one entry.
fn contains(list: &[String], x: &str, wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|y| y == x)
}

impl ResourceRule {
    fn matches(&self, info: &RequestInfo) -> bool {
        // Joined only for subresources: classification runs on every request.
        let joined;
        let resource: &str = if info.subresource.is_empty() {
            &info.resource
        } else {
            joined = format!("{}/{}", info.resource, info.subresource);
            &joined
        };
        if !contains(&self.verbs, &info.verb, "*")
            || !contains(&self.resources, resource, "*")
            || !contains(&self.api_groups, &info.api_group, "*")
        {
            return false;
        }
        if info.namespace.is_empty() {
            return self.cluster_scope;
        }
        contains(&self.namespaces, &info.namespace, "*")
    }
}

impl NonResourceRule {
    fn matches(&self, info: &RequestInfo) -> bool {
        if !contains(&self.verbs, &info.verb, "*") {
            return false;
        }
        self.urls.iter().any(|pattern| {
            if pattern == "*" || *pattern == info.path {
                return true;
            }
            // A pattern names its subtree too: `/healthz` matches `/healthz/etcd`, and
            // `/apis/*` everything below `/apis/`.
            let mut prefix = pattern.strip_suffix('*').unwrap_or(pattern).to_string();
            if !prefix.ends_with('/') {
                prefix.push('/');
            }
            info.path.starts_with(&prefix)
        })
    }
}

impl PriorityLevel {
    /// A stored (defaulted) flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration.
    pub fn from_object(obj: &Value) -> Option<Self> {
        let name = str_at(obj, "/metadata/name");
        if name.is_empty() {
            return None;
        }
        let uid = str_at(obj, "/metadata/uid").to_string();
        if str_at(obj, "/spec/type") == "Exempt" {
            return Some(Self {
                name: name.to_string(),
                uid,
                exempt: true,
                nominal_shares: u64_at(obj, "/spec/exempt/nominalConcurrencyShares").unwrap_or(0),
                lendable_percent: u64_at(obj, "/spec/exempt/lendablePercent").unwrap_or(0),
                borrowing_limit_percent: None,
                limit_response: LimitResponse::Reject,
            });
        }
        let limit_response = if str_at(obj, "/spec/limited/limitResponse/type") == "Queue" {
            let q = "/spec/limited/limitResponse/queuing";
            LimitResponse::Queue {
                // Upstream's defaults: 64 queues, hands of 8, 50 requests a queue.
                queues: u64_at(obj, &format!("{q}/queues")).unwrap_or(64) as usize,
                hand_size: u64_at(obj, &format!("{q}/handSize")).unwrap_or(8) as usize,
                queue_length_limit: u64_at(obj, &format!("{q}/queueLengthLimit")).unwrap_or(50)
                    as usize,
            }
        } else {
            LimitResponse::Reject
        };
        Some(Self {
            name: name.to_string(),
            uid,
            exempt: false,
            nominal_shares: u64_at(obj, "/spec/limited/nominalConcurrencyShares").unwrap_or(30),
            lendable_percent: u64_at(obj, "/spec/limited/lendablePercent").unwrap_or(0),
            borrowing_limit_percent: u64_at(obj, "/spec/limited/borrowingLimitPercent"),
            limit_response,
        })
    }
}

/// A level's share of the server's concurrency limit, in seats (upstream's
/// `apf_controller.go`: nominal = ⌈limit × shares / Σ shares⌉, lendable = round(nominal ×
/// lendablePercent / 100), and the borrowing limit likewise from borrowingLimitPercent, none
/// when unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seats {
    pub nominal: u64,
    pub lendable: u64,
    pub borrowing_limit: Option<u64>,
}

pub fn allocate(server_limit: u64, levels: &[PriorityLevel]) -> Vec<Seats> {
    let total: u64 = levels.iter().map(|l| l.nominal_shares).sum();
    levels
        .iter()
        .map(|l| {
            let nominal = if total == 0 {
                0
            } else {
                (server_limit * l.nominal_shares).div_ceil(total)
            };
            let percent = |p: u64| ((nominal * p) as f64 / 100.0).round() as u64;
            Seats {
                nominal,
                lendable: percent(l.lendable_percent),
                borrowing_limit: l.borrowing_limit_percent.map(percent),
            }
        })
        .collect()
}

/// One level's part in dividing the seats: its bounds and the seats it would like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllocationItem {
    pub lower: f64,
    pub upper: f64,
    pub target: f64,
}

/// Upstream's `computeConcurrencyAllocation`: each level gets its target scaled by one common
/// factor, held within its bounds, the factor chosen (by bisection) so that the allocations
/// add up to `total`; when the bounds leave no choice, every level is at the bound.
pub fn allocate_concurrency(total: f64, items: &[AllocationItem]) -> Vec<f64> {
    let at = |f: f64| -> Vec<f64> {
        items
            .iter()
            .map(|i| (f * i.target).max(i.lower).min(i.upper.max(i.lower)))
            .collect()
    };
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    if total <= items.iter().map(|i| i.lower).sum::<f64>() {
        return items.iter().map(|i| i.lower).collect();
    }
    if total >= items.iter().map(|i| i.upper.max(i.lower)).sum::<f64>() {
        return items.iter().map(|i| i.upper.max(i.lower)).collect();
    }
    let (mut low, mut high) = (0.0f64, 1.0f64);
    // Levels that want nothing stay at their lower bound however large the factor grows.
    while sum(&at(high)) < total && high < 1e12 {
        high *= 2.0;
    }
    for _ in 0..100 {
        let mid = (low + high) / 2.0;
        if sum(&at(mid)) < total {
            low = mid;
        } else {
            high = mid;
        }
    }
    at(high)
}

/// The configuration in effect: schemas in matching order, and levels by name.
#[derive(Clone, Debug, Default)]
pub struct Digest {
    pub flow_schemas: Vec<FlowSchema>,
    pub priority_levels: Vec<PriorityLevel>,
}

impl Digest {
    /// The stored objects, with the mandatory ones added where missing, schemas sorted by
    /// precedence then name (upstream's order), and schemas naming a missing level left out
    /// (they are `Dangling`).
    pub fn new(flow_schemas: &[Value], priority_levels: &[Value]) -> Self {
        let mut levels: Vec<PriorityLevel> = priority_levels
            .iter()
            .filter_map(PriorityLevel::from_object)
            .collect();
        for m in super::bootstrap::mandatory_priority_levels() {
            if let Some(m) = PriorityLevel::from_object(&m)
                && !levels.iter().any(|l| l.name == m.name)
            {
                levels.push(m);
            }
        }
        levels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut schemas: Vec<FlowSchema> = flow_schemas
            .iter()
            .filter_map(FlowSchema::from_object)
            .collect();
        for m in super::bootstrap::mandatory_flow_schemas() {
            if let Some(m) = FlowSchema::from_object(&m)
                && !schemas.iter().any(|s| s.name == m.name)
            {
                schemas.push(m);
            }
        }
        schemas.retain(|s| levels.iter().any(|l| l.name == s.priority_level));
        schemas.sort_by(|a, b| {
            a.precedence
                .cmp(&b.precedence)
                .then_with(|| a.name.cmp(&b.name))
        });
        Self {
            flow_schemas: schemas,
            priority_levels: levels,
        }
    }

    /// The first matching schema and its level. The mandatory `catch-all` matches every
    /// authenticated or anonymous user, so only a user in neither group matches nothing.
    pub fn classify(
        &self,
        user: &UserInfo,
        info: &RequestInfo,
    ) -> Option<(&FlowSchema, &PriorityLevel)> {
        let fs = self.flow_schemas.iter().find(|s| s.matches(user, info))?;
        let pl = self
            .priority_levels
            .iter()
            .find(|l| l.name == fs.priority_level)?;
        Some((fs, pl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    fn req(method: &str, path: &str) -> RequestInfo {
        RequestInfo::parse(&method.parse().unwrap(), path, "")
    }

    fn bootstrap_digest() -> Digest {
        use super::super::bootstrap::*;
        let mut fs = mandatory_flow_schemas();
        fs.extend(suggested_flow_schemas());
        let mut pl = mandatory_priority_levels();
        pl.extend(suggested_priority_levels());
        Digest::new(&fs, &pl)
    }

    fn classified(d: &Digest, u: &UserInfo, r: &RequestInfo) -> (String, String) {
        let (fs, pl) = d.classify(u, r).expect("a match");
        (fs.name.clone(), pl.name.clone())
    }

    #[test]
    fn the_bootstrap_configuration_classifies_as_upstream_does() {
        let d = bootstrap_digest();
        let authed = ["system:authenticated"];
        let cases = [
            (
                user("admin", &["system:masters", "system:authenticated"]),
                req("POST", "/api/v1/namespaces/a/pods"),
                ("exempt", "exempt"),
            ),
            (
                user("system:anonymous", &["system:unauthenticated"]),
                req("GET", "/healthz"),
                ("probes", "exempt"),
            ),
            (
                user("jane", &authed),
                req("GET", "/readyz/etcd"),
                ("probes", "exempt"),
            ),
            (
                user("jane", &authed),
                req("POST", "/readyz"),
                ("global-default", "global-default"),
            ),
            (
                user("system:node:n1", &["system:nodes", "system:authenticated"]),
                req("PUT", "/api/v1/nodes/n1/status"),
                ("system-node-high", "node-high"),
            ),
            (
                user("system:node:n1", &["system:nodes", "system:authenticated"]),
                req("GET", "/api/v1/namespaces/a/pods"),
                ("system-nodes", "system"),
            ),
            (
                user("system:kube-scheduler", &authed),
                req(
                    "PUT",
                    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/s",
                ),
                ("system-leader-election", "leader-election"),
            ),
            (
                user("system:kube-scheduler", &authed),
                req("GET", "/api/v1/pods"),
                ("kube-scheduler", "workload-high"),
            ),
            (
                user(
                    "system:serviceaccount:kube-system:robot",
                    &["system:serviceaccounts", "system:authenticated"],
                ),
                req("GET", "/api/v1/pods"),
                ("kube-system-service-accounts", "workload-high"),
            ),
            (
                user(
                    "system:serviceaccount:kube-systemx:robot",
                    &["system:serviceaccounts", "system:authenticated"],
                ),
                req("GET", "/api/v1/pods"),
                ("service-accounts", "workload-low"),
            ),
            (
                user("jane", &authed),
                req("GET", "/api/v1/namespaces/a/configmaps"),
                ("global-default", "global-default"),
            ),
        ];
        for (u, r, want) in cases {
            assert_eq!(
                classified(&d, &u, &r),
                (want.0.to_string(), want.1.to_string()),
                "{} {}",
                u.name,
                r.path
            );
        }
    }

    #[test]
    fn without_stored_objects_the_mandatory_ones_apply() {
        let d = Digest::new(&[], &[]);
        let jane = user("jane", &["system:authenticated"]);
        assert_eq!(
            classified(&d, &jane, &req("GET", "/api/v1/pods")),
            ("catch-all".to_string(), "catch-all".to_string())
        );
        // A user in neither the authenticated nor the unauthenticated group matches nothing.
        assert!(d.classify(&user("x", &[]), &req("GET", "/api")).is_none());
    }

    #[test]
    fn schemas_match_in_precedence_then_name_order_and_dangling_ones_are_skipped() {
        let fs = |name: &str, level: &str, precedence: i64| {
            json!({"metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": {
                "priorityLevelConfiguration": {"name": level},
                "matchingPrecedence": precedence,
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "bob"}}],
                    "resourceRules": [{"verbs": ["list"], "apiGroups": [""],
                        "resources": ["configmaps"], "namespaces": ["a"]}]}]}})
        };
        let pl = json!({"metadata": {"name": "mine"}, "spec": {"type": "Limited",
            "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}}}});
        let d = Digest::new(
            &[
                fs("b", "mine", 500),
                fs("a", "mine", 500),
                fs("first", "missing", 1),
            ],
            &[pl],
        );
        let bob = user("bob", &["system:authenticated"]);
        let (s, _) = d
            .classify(&bob, &req("GET", "/api/v1/namespaces/a/configmaps"))
            .unwrap();
        assert_eq!((s.name.as_str(), s.uid.as_str()), ("a", "uid-a"));
        // Another namespace, a cluster-scoped list or another verb fall through.
        for r in [
            req("GET", "/api/v1/namespaces/b/configmaps"),
            req("GET", "/api/v1/configmaps"),
            req("GET", "/api/v1/namespaces/a/configmaps/x"),
        ] {
            assert_eq!(
                d.classify(&bob, &r).unwrap().0.name,
                "catch-all",
                "{}",
                r.path
            );
        }
    }

    #[test]
    fn subjects_and_rules_match_as_upstream() {
        let sa = |ns: &str, name: &str| Subject::ServiceAccount {
            namespace: ns.into(),
            name: name.into(),
        };
        let robot = user("system:serviceaccount:ns1:robot", &[]);
        assert!(sa("ns1", "robot").matches(&robot));
        assert!(sa("ns1", "*").matches(&robot));
        assert!(!sa("ns", "*").matches(&robot));
        assert!(!sa("ns1", "other").matches(&robot));
        assert!(Subject::Group("*".into()).matches(&robot));
        // The wildcard is a wildcard only alone.
        let rule = ResourceRule {
            verbs: vec!["*".into(), "get".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            cluster_scope: true,
            namespaces: vec![],
        };
        assert!(!rule.matches(&req("GET", "/api/v1/pods")));
        assert!(rule.matches(&req("GET", "/api/v1/nodes/n1")));
        let status = ResourceRule {
            verbs: vec!["*".into()],
            api_groups: vec!["".into()],
            resources: vec!["pods/status".into()],
            cluster_scope: false,
            namespaces: vec!["*".into()],
        };
        assert!(status.matches(&req("PUT", "/api/v1/namespaces/a/pods/p/status")));
        assert!(!status.matches(&req("PUT", "/api/v1/namespaces/a/pods/p")));
        let urls = NonResourceRule {
            verbs: vec!["get".into()],
            urls: vec!["/apis/*".into(), "/version".into()],
        };
        assert!(urls.matches(&req("GET", "/apis/apps")));
        assert!(urls.matches(&req("GET", "/version")));
        assert!(urls.matches(&req("GET", "/version/x")));
        assert!(!urls.matches(&req("GET", "/api")));
    }

    #[test]
    fn idle_levels_lend_their_seats_to_busy_ones() {
        let item = |lower: f64, upper: f64, target: f64| AllocationItem {
            lower,
            upper,
            target,
        };
        // 20 seats: an idle level that may lend half of its 10, a busy one asking for 15.
        let allocs = allocate_concurrency(20.0, &[item(5.0, 20.0, 5.0), item(10.0, 20.0, 15.0)]);
        assert!(
            (allocs[0] - 5.0).abs() < 0.01 && (allocs[1] - 15.0).abs() < 0.01,
            "{allocs:?}"
        );
        // Both busy: shared in proportion to what they ask, within the bounds.
        let allocs = allocate_concurrency(20.0, &[item(5.0, 20.0, 30.0), item(10.0, 20.0, 30.0)]);
        assert!(
            (allocs[0] - 10.0).abs() < 0.01 && (allocs[1] - 10.0).abs() < 0.01,
            "{allocs:?}"
        );
        // A borrowing limit holds.
        let allocs = allocate_concurrency(20.0, &[item(5.0, 20.0, 5.0), item(10.0, 12.0, 15.0)]);
        assert!((allocs[1] - 12.0).abs() < 0.01, "{allocs:?}");
        // No choice: the lower bounds.
        assert_eq!(allocate_concurrency(3.0, &[item(5.0, 9.0, 9.0)]), vec![5.0]);
    }

    #[test]
    fn seats_are_shared_by_nominal_shares() {
        let d = bootstrap_digest();
        let seats = allocate(600, &d.priority_levels);
        let by_name: std::collections::BTreeMap<_, _> = d
            .priority_levels
            .iter()
            .map(|l| l.name.as_str())
            .zip(seats)
            .collect();
        // Σ shares = 5 + 0 + 30 + 40 + 10 + 40 + 100 + 20 = 245.
        assert_eq!(by_name["catch-all"].nominal, 13); // ⌈600 × 5 / 245⌉
        assert_eq!(by_name["global-default"].nominal, 49);
        assert_eq!(by_name["workload-low"].nominal, 245);
        assert_eq!(by_name["workload-low"].lendable, 221); // round(245 × 0.9)
        assert_eq!(by_name["exempt"].nominal, 0);
        assert_eq!(by_name["leader-election"].borrowing_limit, None);
    }
}
