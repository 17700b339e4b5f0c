//! One ValidatingAdmissionPolicy, compiled once when it changes, and its evaluation for one
//! request and one param (upstream: admission/plugin/policy/validating/validator.go and
//! plugin/cel's condition and composition evaluators): match conditions, then validations
//! (with `message`, `messageExpression`, `reason`), then audit annotations, each becoming a
//! decision in upstream's words.

use kube_cel::cel;
use serde_json::Value;

use super::compiled::{Core, Expr, Failure, Input, spec_list};
use crate::admission::rules::text;
use crate::cel::runtime_cost::{OUT_OF_BUDGET, RUNTIME_CEL_COST_BUDGET};

/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

pub struct ValidationRule {
    pub expr: Expr,
    pub message: String,
    pub message_expression: Option<Expr>,
    pub reason: Option<String>,
}

pub struct ValidatingPolicy {
    pub core: Core,
    validations: Vec<ValidationRule>,
    audit_annotations: Vec<(String, Expr)>,
}

impl ValidatingPolicy {
    pub fn compile(policy: &Value) -> ValidatingPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let core = Core::compile(policy);
        ValidatingPolicy {
            validations: spec_list(spec, "validations")
                .iter()
                .map(|v| ValidationRule {
                    expr: core.expr(text(v, "expression")),
                    message: text(v, "message").to_string(),
                    message_expression: Some(text(v, "messageExpression"))
                        .filter(|m| !m.is_empty())
                        .map(|m| core.expr(m)),
                    reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
                })
                .collect(),
            audit_annotations: spec_list(spec, "auditAnnotations")
                .iter()
                .map(|a| {
                    (
                        text(a, "key").to_string(),
                        core.expr(text(a, "valueExpression")),
                    )
                })
                .collect(),
            core,
        }
    }

    fn fails_closed(&self) -> bool {
        self.core.fails_closed()
    }
}

/// What one evaluation decided (`PolicyDecision`): a denial carries its message and reason.
pub enum Decision {
    Admit,
    /// A validation that failed, or an error the failure policy turns into a denial.
    Deny {
        message: String,
        reason: Option<String>,
        /// Which validation (for the audit annotation), if a validation decided it.
        index: Option<usize>,
    },
}

/// An audit annotation's outcome: published (key, value), or an error that denies.
pub enum Annotation {
    Publish(String, String),
    Error(String),
}

#[derive(Default)]
pub struct Outcome {
    pub decisions: Vec<Decision>,
    pub annotations: Vec<Annotation>,
}

/// cel-go's name of a value's type, as errors print it.
pub(super) fn type_name(v: &cel::Value) -> &'static str {
    match v {
        cel::Value::Null => "null_type",
        cel::Value::Bool(_) => "bool",
        cel::Value::Int(_) => "int",
        cel::Value::UInt(_) => "uint",
        cel::Value::Float(_) => "double",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "bytes",
        cel::Value::List(_) => "list",
        cel::Value::Map(_) => "map",
        cel::Value::Timestamp(_) => "google.protobuf.Timestamp",
        cel::Value::Duration(_) => "google.protobuf.Duration",
        _ => "dyn",
    }
}

impl ValidatingPolicy {
    /// `validator.Validate` for one binding and one param: match conditions against their own
    /// budget, validations against `RuntimeCELCostBudget`, every message expression against
    /// what the validations left, and audit annotations against a budget of their own. A budget
    /// that runs out is an error the failure policy decides, in upstream's words.
    pub fn validate(&self, input: &mut Input<'_>) -> Outcome {
        let error = |message: String| Outcome {
            decisions: vec![self.error_decision(message, None)],
            annotations: Vec::new(),
        };
        match self.core.conditions_match(input) {
            Ok(true) => {}
            Ok(false) => return Outcome::default(),
            Err(message) => return error(message),
        }
        input.filter(RUNTIME_CEL_COST_BUDGET);
        let mut results = Vec::with_capacity(self.validations.len());
        for v in &self.validations {
            match input.eval(&v.expr) {
                Err(Failure::OutOfBudget) => return error(OUT_OF_BUDGET.into()),
                r => results.push(r),
            }
        }
        // Message expressions are all evaluated, for passing validations too, with what the
        // validations left; running out turns every validation without an error of its own
        // into an error.
        let remaining = input.remaining();
        input.filter(remaining);
        let mut messages: Vec<Option<Result<cel::Value, Failure>>> = Vec::new();
        let mut messages_out_of_budget = false;
        for v in &self.validations {
            let Some(m) = &v.message_expression else {
                messages.push(None);
                continue;
            };
            match input.eval(m) {
                Err(Failure::OutOfBudget) => {
                    messages_out_of_budget = true;
                    break;
                }
                r => messages.push(Some(r)),
            }
        }
        let mut out = Outcome::default();
        for (i, (v, result)) in self.validations.iter().zip(results).enumerate() {
            let decision = match result {
                Err(e) => self.error_decision(e.to_string(), Some(i)),
                Ok(_) if messages_out_of_budget => self.error_decision(
                    format!("failed messageExpression: {OUT_OF_BUDGET}"),
                    Some(i),
                ),
                Ok(cel::Value::Bool(true)) => Decision::Admit,
                Ok(_) => Decision::Deny {
                    message: failure_message(v, messages.get(i).and_then(Option::as_ref)),
                    reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
                    index: Some(i),
                },
            };
            out.decisions.push(decision);
        }
        input.filter(RUNTIME_CEL_COST_BUDGET);
        for (key, expr) in &self.audit_annotations {
            match input.eval(expr) {
                // The whole answer is then this error (upstream returns it alone).
                Err(Failure::OutOfBudget) => return error(OUT_OF_BUDGET.into()),
                Err(Failure::Expression(e)) if self.fails_closed() => {
                    out.annotations.push(Annotation::Error(e))
                }
                Err(_) | Ok(cel::Value::Null) => {}
                Ok(cel::Value::String(s)) => {
                    let value = s.trim();
                    if !value.is_empty() {
                        out.annotations
                            .push(Annotation::Publish(key.clone(), value.to_string()));
                    }
                }
                Ok(other) => out.annotations.push(Annotation::Error(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    expr.source,
                    type_name(&other)
                ))),
            }
        }
        out
    }

    /// An error as the failure policy decides it (`policyDecisionActionForError`).
    fn error_decision(&self, message: String, index: Option<usize>) -> Decision {
        if self.fails_closed() {
            Decision::Deny {
                message,
                reason: None,
                index,
            }
        } else {
            Decision::Admit
        }
    }
}

/// The message of a failed validation: the message expression's string if it gave a usable
/// one, else `message`, else the expression itself.
fn failure_message(v: &ValidationRule, evaluated: Option<&Result<cel::Value, Failure>>) -> String {
    if let Some(Ok(cel::Value::String(s))) = evaluated {
        let s = s.trim();
        if !s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n') {
            return s.to_string();
        }
    }
    if !v.message.trim().is_empty() {
        return v.message.trim().to_string();
    }
    format!("failed expression: {}", v.expr.source.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::policy::compiled::variables_named;
    use crate::cel::eval::Vars;
    use crate::cel::runtime_cost::RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS;
    use serde_json::json;

    fn policy(spec: Value) -> ValidatingPolicy {
        ValidatingPolicy::compile(&json!({"metadata": {"name": "p"}, "spec": spec}))
    }

    fn run(p: &ValidatingPolicy, obj: Value) -> Outcome {
        let mut input = Input::new(&p.core, Vars::default().bind_json("object", Some(&obj)));
        p.validate(&mut input)
    }

    fn denial(o: &Outcome) -> Vec<(String, Option<String>)> {
        o.decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Deny {
                    message, reason, ..
                } => Some((message.clone(), reason.clone())),
                Decision::Admit => None,
            })
            .collect()
    }

    #[test]
    fn finds_the_variables_an_expression_names() {
        assert_eq!(
            variables_named("variables.a + myvariables.b + variables.c_1 > variables.a"),
            vec!["a", "c_1"]
        );
    }

    #[test]
    fn messages_come_from_the_expression_the_message_or_the_source() {
        let p = policy(json!({"validations": [
            {"expression": "object.n < 3"},
            {"expression": "object.n < 2", "message": "  too big  ", "reason": "Forbidden"},
            {"expression": "object.n < 1", "message": "m", "messageExpression": "'n is ' + string(object.n)"},
            {"expression": "object.n < 0", "message": "fallback", "messageExpression": "'a\\nb'"},
        ]}));
        let out = run(&p, json!({"n": 5}));
        assert_eq!(
            denial(&out),
            vec![
                (
                    "failed expression: object.n < 3".into(),
                    Some("Invalid".into())
                ),
                ("too big".into(), Some("Forbidden".into())),
                ("n is 5".into(), Some("Invalid".into())),
                ("fallback".into(), Some("Invalid".into())),
            ]
        );
        assert!(denial(&run(&p, json!({"n": -1}))).is_empty());
    }

    #[test]
    fn variables_are_composited_and_their_errors_named() {
        let p = policy(json!({
            "variables": [
                {"name": "n", "expression": "object.spec.n"},
                {"name": "twice", "expression": "variables.n * 2"},
            ],
            "validations": [{"expression": "variables.twice < 10"}],
        }));
        assert!(denial(&run(&p, json!({"spec": {"n": 4}}))).is_empty());
        assert_eq!(denial(&run(&p, json!({"spec": {"n": 5}}))).len(), 1);
        assert_eq!(
            denial(&run(&p, json!({"spec": {}})))[0].0,
            "expression 'variables.twice < 10' resulted in error: composited variable \"twice\" fails to evaluate: composited variable \"n\" fails to evaluate: no such key: n"
        );
    }

    #[test]
    fn failure_policy_decides_errors_and_match_conditions_skip() {
        let spec = |fp: &str| {
            json!({"failurePolicy": fp,
                   "matchConditions": [{"name": "has-spec", "expression": "has(object.spec)"}],
                   "validations": [{"expression": "object.spec.missing == 1"}]})
        };
        let closed = policy(spec("Fail"));
        assert_eq!(
            denial(&run(&closed, json!({"spec": {}})))[0].0,
            "expression 'object.spec.missing == 1' resulted in error: no such key: missing"
        );
        assert!(denial(&run(&closed, json!({}))).is_empty());
        let open = policy(spec("Ignore"));
        assert!(denial(&run(&open, json!({"spec": {}}))).is_empty());
    }

    #[test]
    fn audit_annotations_must_be_strings_or_null() {
        let p = policy(json!({"auditAnnotations": [
            {"key": "a", "valueExpression": "' v '"},
            {"key": "b", "valueExpression": "null"},
            {"key": "c", "valueExpression": "1"},
        ]}));
        let out = run(&p, json!({}));
        let texts: Vec<String> = out
            .annotations
            .iter()
            .map(|a| match a {
                Annotation::Publish(k, v) => format!("{k}={v}"),
                Annotation::Error(e) => e.clone(),
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                "a=v".to_string(),
                "valueExpression '1' resulted in unsupported return type: int. Return type must be either string or null.".into()
            ]
        );
    }

    /// An object whose `data` has `n` keys, and the quadratic expression's cost on it.
    fn data(n: usize) -> Value {
        let data: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("key{i:05}"), Value::from("v")))
            .collect();
        json!({"data": data})
    }

    const QUADRATIC: &str = "object.data.all(k, object.data.all(j, k == j || k != j))";

    fn quadratic_cost(obj: &Value) -> u64 {
        let program = crate::cel::eval::Program::compile(QUADRATIC)
            .unwrap()
            .check(&[("object", crate::cel::checker::Type::Dyn)]);
        let vars = crate::cel::eval::Vars::default().bind_json("object", Some(obj));
        program.eval_metered(&vars).cost
    }

    #[test]
    fn an_evaluation_over_the_per_call_limit_is_an_error_the_failure_policy_decides() {
        let spec =
            |fp: &str| json!({"failurePolicy": fp, "validations": [{"expression": QUADRATIC}]});
        let closed = policy(spec("Fail"));
        assert!(denial(&run(&closed, data(10))).is_empty());
        assert_eq!(
            denial(&run(&closed, data(1000))),
            vec![(
                format!(
                    "expression '{QUADRATIC}' resulted in error: operation cancelled: actual cost limit exceeded"
                ),
                None
            )]
        );
        let open = policy(spec("Ignore"));
        assert!(denial(&run(&open, data(1000))).is_empty());
    }

    /// Enough copies of the quadratic expression, each under the per-call limit, to cross
    /// `budget` together on `obj`.
    fn copies_over(budget: u64, obj: &Value) -> usize {
        let cost = quadratic_cost(obj);
        assert!(
            cost > 100_000 && cost < crate::cel::PER_CALL_LIMIT,
            "{cost}"
        );
        (budget / cost + 1) as usize
    }

    #[test]
    fn validations_together_over_the_budget_are_one_error() {
        let obj = data(300);
        let n = copies_over(RUNTIME_CEL_COST_BUDGET, &obj);
        let validations: Vec<Value> = (0..n).map(|_| json!({"expression": QUADRATIC})).collect();
        let p = policy(json!({"validations": validations[..n - 1]}));
        assert!(denial(&run(&p, obj.clone())).is_empty());
        let p = policy(json!({"validations": validations}));
        let out = run(&p, obj.clone());
        assert_eq!(denial(&out), vec![(OUT_OF_BUDGET.to_string(), None)]);
        assert_eq!(out.decisions.len(), 1);
        let open = policy(json!({"failurePolicy": "Ignore", "validations": validations}));
        assert!(denial(&run(&open, obj)).is_empty());
    }

    #[test]
    fn a_composited_variable_is_charged_once_per_filter() {
        let obj = data(300);
        let n = copies_over(RUNTIME_CEL_COST_BUDGET, &obj);
        // The same work through a variable: evaluated, and charged, once.
        let validations: Vec<Value> = (0..n)
            .map(|_| json!({"expression": "variables.all_equal"}))
            .collect();
        let p = policy(json!({
            "variables": [{"name": "all_equal", "expression": QUADRATIC}],
            "validations": validations,
        }));
        assert!(denial(&run(&p, obj)).is_empty());
    }

    #[test]
    fn match_conditions_have_a_smaller_budget() {
        let obj = data(300);
        let n = copies_over(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS, &obj);
        assert!(n < copies_over(RUNTIME_CEL_COST_BUDGET, &obj));
        let spec = |fp: &str| {
            let conditions: Vec<Value> = (0..n)
                .map(|i| json!({"name": format!("c{i}"), "expression": QUADRATIC}))
                .collect();
            json!({"failurePolicy": fp, "matchConditions": conditions,
                   "validations": [{"expression": "false", "message": "matched"}]})
        };
        assert_eq!(
            denial(&run(&policy(spec("Fail")), obj.clone())),
            vec![(OUT_OF_BUDGET.to_string(), None)]
        );
        // Failing open, the policy does not apply.
        assert!(denial(&run(&policy(spec("Ignore")), obj)).is_empty());
    }

    #[test]
    fn message_expressions_spend_what_the_validations_left() {
        let obj = data(300);
        let n = copies_over(RUNTIME_CEL_COST_BUDGET, &obj);
        // Half the budget in validations that pass, the rest in their message expressions,
        // which run for passing validations too.
        let half = n / 2 + 1;
        let validations: Vec<Value> = (0..half)
            .map(|_| json!({"expression": QUADRATIC, "messageExpression": format!("{QUADRATIC} ? 'a' : 'b'")}))
            .collect();
        let out = run(&policy(json!({"validations": validations})), obj);
        let expected = format!("failed messageExpression: {OUT_OF_BUDGET}");
        assert_eq!(denial(&out), vec![(expected, None); half]);
    }
}
