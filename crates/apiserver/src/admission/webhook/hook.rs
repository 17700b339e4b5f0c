//! One webhook of a configuration, read once when the configuration changes (upstream:
//! webhook/accessors.go), and the predicates that decide whether a request goes to it (upstream:
//! webhook/predicates: rules, namespaceSelector, objectSelector; match conditions in CEL).

use std::time::Duration;

use apimachinery::labels::Selector;
use serde_json::Value;

use crate::admission::compile::{Compiler, Declarations};
use crate::admission::rules::{self, Rule, selector, strings, text};
use crate::admission::{Attributes, Operation};
use crate::cel::eval::Program;

/// Webhooks' match conditions see the authorizer and no params.
const CONDITION_DECLARATIONS: Declarations = Declarations {
    has_params: false,
    has_authorizer: true,
};
use crate::util::webhook::ClientConfig;

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

impl Hook {
    /// The webhook at `index` of configuration `configuration`, with v1's defaults for fields
    /// left out (failurePolicy Fail, matchPolicy Equivalent, 10 s, scope `*`).
    pub fn from_api(configuration: &str, index: usize, h: &Value) -> Hook {
        let rules = Rule::list(h.get("rules"));
        let match_conditions = h
            .get("matchConditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| MatchCondition {
                // Checked in the webhooks' environment for its runtime cost.
                program: Program::compile(text(c, "expression"))
                    .map(|p| p.check(&Compiler::stateless().vars(CONDITION_DECLARATIONS))),
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
        rules::object_selector_matches(&self.object_selector, obj, old)
    }

    /// The first rule that matches the request as addressed to `(group, version, resource)`.
    pub fn rules_match(&self, attrs: &Attributes<'_>, gvr: (&str, &str, &str)) -> bool {
        self.rules.iter().any(|r| r.matches(attrs, gvr))
    }

    pub fn equivalent(&self) -> bool {
        self.equivalent
    }
}

/// Whether a webhook may be called on a dry run: a `None` or `NoneOnDryRun` side-effect class.
pub(super) fn dry_run_allowed(side_effects: Option<&str>) -> Option<bool> {
    side_effects.map(|s| matches!(s, "None" | "NoneOnDryRun"))
}

pub(super) fn is_delete(op: Operation) -> bool {
    op == Operation::Delete
}
