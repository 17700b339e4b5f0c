//! One webhook of a configuration, read once when the configuration changes (upstream:
//! webhook/accessors.go), and the predicates that decide whether a request goes to it (upstream:
//! webhook/predicates: rules, namespaceSelector, objectSelector; match conditions in CEL).

use std::time::Duration;

use apimachinery::labels::Selector;
use serde_json::Value;

use crate::admission::{Attributes, Operation};
use crate::cel::eval::Program;
use crate::util::webhook::ClientConfig;

/// A rule: which operations on which resources (`rules[]` of a webhook).
pub(super) struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

pub(super) struct MatchCondition {
    pub program: Result<Program, String>,
}

pub(super) struct Hook {
    /// Tells webhooks apart for reinvocation: the configuration's name and the hook's place.
    pub uid: String,
    pub configuration: String,
    pub name: String,
    pub client: ClientConfig,
    rules: Vec<Rule>,
    pub fail_open: bool,
    equivalent: bool,
    namespace_selector: Result<Selector, String>,
    object_selector: Result<Selector, String>,
    pub side_effects: Option<String>,
    pub timeout: Duration,
    pub review_versions: Vec<String>,
    pub match_conditions: Vec<MatchCondition>,
    pub reinvoke_if_needed: bool,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

fn selector(v: Option<&Value>) -> Result<Selector, String> {
    match v {
        None | Some(Value::Null) => Ok(Selector::everything()),
        Some(s) => Selector::from_label_selector(s),
    }
}

impl Hook {
    /// The webhook at `index` of configuration `configuration`, with v1's defaults for fields
    /// left out (failurePolicy Fail, matchPolicy Equivalent, 10 s, scope `*`).
    pub fn from_api(configuration: &str, index: usize, h: &Value) -> Hook {
        let rules = h
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| Rule {
                operations: strings(r.get("operations")),
                groups: strings(r.get("apiGroups")),
                versions: strings(r.get("apiVersions")),
                resources: strings(r.get("resources")),
                scope: match text(r, "scope") {
                    "" => "*".into(),
                    s => s.into(),
                },
            })
            .collect();
        let match_conditions = h
            .get("matchConditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| MatchCondition {
                program: Program::compile(text(c, "expression")),
            })
            .collect();
        Hook {
            uid: format!("{configuration}/{index}"),
            configuration: configuration.to_string(),
            name: text(h, "name").to_string(),
            client: ClientConfig::from_api(h.get("clientConfig").unwrap_or(&Value::Null)),
            rules,
            fail_open: text(h, "failurePolicy") == "Ignore",
            equivalent: text(h, "matchPolicy") != "Exact",
            namespace_selector: selector(h.get("namespaceSelector")),
            object_selector: selector(h.get("objectSelector")),
            side_effects: h
                .get("sideEffects")
                .and_then(Value::as_str)
                .map(str::to_string),
            timeout: Duration::from_secs(
                h.get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(10)
                    .clamp(1, 30),
            ),
            review_versions: strings(h.get("admissionReviewVersions")),
            match_conditions,
            reinvoke_if_needed: text(h, "reinvocationPolicy") == "IfNeeded",
        }
    }

    pub fn namespace_selector(&self) -> &Result<Selector, String> {
        &self.namespace_selector
    }

    /// `MatchObjectSelector`: the new object's labels or the old one's.
    pub fn object_selector_matches(
        &self,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<bool, String> {
        let selector = self.object_selector.as_ref().map_err(Clone::clone)?;
        if selector.is_empty() {
            return Ok(true);
        }
        let labels = |o: Option<&Value>| {
            o.is_some_and(|o| {
                selector.matches_json(o.pointer("/metadata/labels").and_then(Value::as_object))
            })
        };
        Ok(labels(obj) || labels(old))
    }

    /// The first rule that matches the request as addressed to `(group, version, resource)`.
    pub fn rules_match(&self, attrs: &Attributes<'_>, gvr: (&str, &str, &str)) -> bool {
        self.rules.iter().any(|r| r.matches(attrs, gvr))
    }

    pub fn equivalent(&self) -> bool {
        self.equivalent
    }
}

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

impl Rule {
    /// Upstream's `rules.Matcher`: scope, operation, group, version and `resource/subresource`
    /// (either side may be `*`).
    fn matches(
        &self,
        attrs: &Attributes<'_>,
        (group, version, resource): (&str, &str, &str),
    ) -> bool {
        let is_namespace_object = group.is_empty() && version == "v1" && resource == "namespaces";
        let scope = match self.scope.as_str() {
            "*" => true,
            "Namespaced" => !is_namespace_object && !attrs.namespace.is_empty(),
            "Cluster" => is_namespace_object || attrs.namespace.is_empty(),
            _ => false,
        };
        let operation = self
            .operations
            .iter()
            .any(|o| o == "*" || o == attrs.operation.as_str());
        scope
            && operation
            && exact_or_wildcard(&self.groups, group)
            && exact_or_wildcard(&self.versions, version)
            && self.resources.iter().any(|r| {
                let (res, sub) = r.split_once('/').unwrap_or((r, ""));
                (res == "*" || res == resource) && (sub == "*" || sub == attrs.subresource)
            })
    }
}

/// Whether the request is for an admission configuration object itself, which no webhook sees,
/// so that a broken webhook can always be removed (`IsExemptAdmissionConfigurationResource`).
pub(super) fn exempt(attrs: &Attributes<'_>) -> bool {
    let (group, _, kind) = attrs.kind();
    group == "admissionregistration.k8s.io"
        && matches!(
            kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// Whether a webhook may be called on a dry run: a `None` or `NoneOnDryRun` side-effect class.
pub(super) fn dry_run_allowed(side_effects: Option<&str>) -> Option<bool> {
    side_effects.map(|s| matches!(s, "None" | "NoneOnDryRun"))
}

pub(super) fn is_delete(op: Operation) -> bool {
    op == Operation::Delete
}
