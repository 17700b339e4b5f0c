//! One webhook of a configuration, read once when the configuration changes (upstream:
//! webhook/accessors.go), and the predicates that decide whether a request goes to it (upstream:
//! webhook/predicates: rules, namespaceSelector, objectSelector; match conditions in CEL).

use std::time::Duration;

use apimachinery::labels::Selector;
use kube_cel::cel;
use serde_json::Value;

use crate::admission::compile::{Compiler, Declarations};
use crate::admission::rules::{self, Rule, selector, strings, text};
use crate::admission::{Attributes, Operation};
use crate::cel::eval::{Program, Vars};
use crate::cel::runtime_cost::{Budget, RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS};

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

/// What a webhook's match conditions decided, before its failure policy
/// (`matchconditions.Matcher.Match`).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Conditions {
    /// None is false and none failed.
    Match,
    /// One is false (whatever the others gave).
    NoMatch,
    /// Some failed, none is false.
    Errors(Vec<String>),
    /// Together they cost more than `RuntimeCELCostBudgetMatchConditions`.
    OutOfBudget,
}

/// Evaluates every condition with `vars`, charging each against the webhook's budget, then
/// decides: a false one skips the webhook, errors are reported only when none is false.
pub(super) fn evaluate_conditions(conditions: &[MatchCondition], vars: &Vars) -> Conditions {
    let mut budget = Budget::new(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
    let mut results = Vec::with_capacity(conditions.len());
    for c in conditions {
        let source = c.program.as_ref().map(|p| p.source.as_str()).unwrap_or("");
        let result = match &c.program {
            Ok(p) => {
                let metered = p.eval_metered(vars);
                if budget.charge(metered.cost).is_err() {
                    return Conditions::OutOfBudget;
                }
                metered
                    .value
                    .map_err(|e| format!("expression '{source}' resulted in error: {e}"))
            }
            Err(e) => Err(format!("compilation error: {e}")),
        };
        results.push((source, result));
    }
    let mut errors = Vec::new();
    for (source, result) in results {
        match result {
            Ok(cel::Value::Bool(false)) => return Conditions::NoMatch,
            Ok(cel::Value::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "expression '{source}' resulted in error: no such overload: {other:?}"
            )),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Conditions::Match
    } else {
        Conditions::Errors(errors)
    }
}

/// Whether a webhook may be called on a dry run: a `None` or `NoneOnDryRun` side-effect class.
pub(super) fn dry_run_allowed(side_effects: Option<&str>) -> Option<bool> {
    side_effects.map(|s| matches!(s, "None" | "NoneOnDryRun"))
}

pub(super) fn is_delete(op: Operation) -> bool {
    op == Operation::Delete
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const QUADRATIC: &str = "object.data.all(k, object.data.all(j, k == j || k != j))";

    fn hook(conditions: &[&str]) -> Hook {
        let conditions: Vec<Value> = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"name": format!("c{i}"), "expression": c}))
            .collect();
        Hook::from_api(
            "config",
            0,
            &json!({"name": "hook.example.com", "matchConditions": conditions}),
        )
    }

    fn on(n: usize, conditions: &[&str]) -> Conditions {
        let data: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("key{i:05}"), Value::from("v")))
            .collect();
        let vars = Vars::default().bind_json("object", Some(&json!({"data": data})));
        evaluate_conditions(&hook(conditions).match_conditions, &vars)
    }

    #[test]
    fn a_condition_over_the_per_call_limit_is_an_error() {
        assert_eq!(on(10, &[QUADRATIC]), Conditions::Match);
        assert_eq!(
            on(1000, &[QUADRATIC]),
            Conditions::Errors(vec![format!(
                "expression '{QUADRATIC}' resulted in error: operation cancelled: actual cost limit exceeded"
            )])
        );
        // A false condition still decides.
        assert_eq!(on(1000, &[QUADRATIC, "false"]), Conditions::NoMatch);
    }

    #[test]
    fn conditions_together_over_the_budget_run_out() {
        // Each copy costs a few hundred thousand on 300 keys: a few fit in 2.5 million, ten
        // do not, even when one of them is false.
        assert_eq!(on(300, &[QUADRATIC; 2]), Conditions::Match);
        assert_eq!(on(300, &[QUADRATIC; 10]), Conditions::OutOfBudget);
        let mut with_false = vec!["false"];
        with_false.extend([QUADRATIC; 10]);
        assert_eq!(on(300, &with_false), Conditions::OutOfBudget);
    }
}
