//! One ValidatingAdmissionPolicy, compiled once when it changes, and its evaluation for one
//! request and one param (upstream: admission/plugin/policy/validating/validator.go and
//! plugin/cel's condition and composition evaluators): match conditions, then validations
//! (with `message`, `messageExpression`, `reason`), then audit annotations, each becoming a
//! decision in upstream's words.

use std::collections::HashMap;

use kube_cel::cel;
use serde_json::Value;

use super::matching::MatchResources;
use crate::admission::rules::text;
use crate::cel::eval::{Program, Vars};

/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// An expression with what it needs of `variables`, compiled.
pub struct Expr {
    pub source: String,
    program: Result<Program, String>,
    /// The composited variables the expression names (`variables.<name>`), evaluated before it,
    /// as cel-go's lazy map evaluates the ones an expression reaches.
    uses: Vec<String>,
}

impl Expr {
    pub fn compile(source: &str) -> Expr {
        Expr {
            source: source.to_string(),
            program: Program::compile(source),
            uses: variables_named(source),
        }
    }
}

/// The names that follow `variables.` in `source`.
fn variables_named(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("variables.") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "variables.".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

pub struct ValidationRule {
    pub expr: Expr,
    pub message: String,
    pub message_expression: Option<Expr>,
    pub reason: Option<String>,
}

pub struct ValidatingPolicy {
    pub name: String,
    /// `failurePolicy` (absent: Fail).
    pub failure_policy: String,
    pub constraints: Option<MatchResources>,
    /// `paramKind`: apiVersion and kind.
    pub param_kind: Option<(String, String)>,
    conditions: Vec<Expr>,
    variables: Vec<(String, Expr)>,
    validations: Vec<ValidationRule>,
    audit_annotations: Vec<(String, Expr)>,
}

impl ValidatingPolicy {
    pub fn compile(policy: &Value) -> ValidatingPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let list = |field: &str| {
            spec.get(field)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        ValidatingPolicy {
            name: text(policy.get("metadata").unwrap_or(&Value::Null), "name").to_string(),
            failure_policy: match text(spec, "failurePolicy") {
                "" => "Fail".to_string(),
                f => f.to_string(),
            },
            constraints: spec
                .get("matchConstraints")
                .filter(|v| !v.is_null())
                .map(MatchResources::from_api),
            param_kind: spec.get("paramKind").filter(|v| !v.is_null()).map(|k| {
                (
                    text(k, "apiVersion").to_string(),
                    text(k, "kind").to_string(),
                )
            }),
            conditions: list("matchConditions")
                .iter()
                .map(|c| Expr::compile(text(c, "expression")))
                .collect(),
            variables: list("variables")
                .iter()
                .map(|v| {
                    (
                        text(v, "name").to_string(),
                        Expr::compile(text(v, "expression")),
                    )
                })
                .collect(),
            validations: list("validations")
                .iter()
                .map(|v| ValidationRule {
                    expr: Expr::compile(text(v, "expression")),
                    message: text(v, "message").to_string(),
                    message_expression: Some(text(v, "messageExpression"))
                        .filter(|m| !m.is_empty())
                        .map(Expr::compile),
                    reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
                })
                .collect(),
            audit_annotations: list("auditAnnotations")
                .iter()
                .map(|a| {
                    (
                        text(a, "key").to_string(),
                        Expr::compile(text(a, "valueExpression")),
                    )
                })
                .collect(),
        }
    }

    fn fails_closed(&self) -> bool {
        self.failure_policy != "Ignore"
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

/// The variables of one evaluation (`object`, `oldObject`, `request`, `params`,
/// `namespaceObject`) and the composited variables computed from them, each at most once.
pub struct Input<'a> {
    pub vars: Vars,
    policy: &'a ValidatingPolicy,
    composited: HashMap<String, Result<cel::Value, String>>,
}

impl<'a> Input<'a> {
    pub fn new(policy: &'a ValidatingPolicy, vars: Vars) -> Self {
        Input {
            vars,
            policy,
            composited: HashMap::new(),
        }
    }

    /// The value of composited variable `name`: `None` for a name the policy does not declare.
    fn variable(&mut self, name: &str, depth: usize) -> Option<Result<cel::Value, String>> {
        if let Some(v) = self.composited.get(name) {
            return Some(v.clone());
        }
        let policy = self.policy;
        let at = policy.variables.iter().position(|(n, _)| n == name)?;
        let (_, expr) = &policy.variables[at];
        // A variable sees only those declared before it; a cycle cannot form then.
        let result = match &expr.program {
            Err(e) => Err(format!(
                "composited variable {name:?} fails to compile: {e}"
            )),
            Ok(_) if depth > policy.variables.len() => Err(format!(
                "composited variable {name:?} fails to evaluate: too deeply nested"
            )),
            Ok(_) => self
                .eval_raw(expr, Some(at), depth + 1)
                .map_err(|e| format!("composited variable {name:?} fails to evaluate: {e}")),
        };
        self.composited.insert(name.to_string(), result.clone());
        Some(result)
    }

    /// Evaluates `expr` with the variables it names bound; `visible` limits them to those
    /// declared before a variable. The error is the evaluator's, unwrapped.
    fn eval_raw(
        &mut self,
        expr: &Expr,
        visible: Option<usize>,
        depth: usize,
    ) -> Result<cel::Value, String> {
        let program = expr.program.as_ref().map_err(Clone::clone)?;
        let mut bound = HashMap::new();
        for name in &expr.uses {
            let declared_before = self
                .policy
                .variables
                .iter()
                .position(|(n, _)| n == name)
                .is_some_and(|i| visible.is_none_or(|v| i < v));
            if !declared_before {
                continue;
            }
            if let Some(value) = self.variable(name, depth) {
                bound.insert(name.clone(), value?);
            }
        }
        let variables = cel::Value::Map(cel::objects::Map {
            map: std::sync::Arc::new(
                bound
                    .into_iter()
                    .map(|(k, v)| (cel::objects::Key::String(std::sync::Arc::new(k)), v))
                    .collect(),
            ),
        });
        program.eval(&self.vars.clone().bind("variables", variables))
    }

    /// `activation.Evaluate`: the value, or the error in upstream's words.
    fn eval(&mut self, expr: &Expr) -> Result<cel::Value, String> {
        if let Err(e) = &expr.program {
            return Err(format!("compilation error: {e}"));
        }
        self.eval_raw(expr, None, 0)
            .map_err(|e| format!("expression '{}' resulted in error: {e}", expr.source))
    }
}

/// cel-go's name of a value's type, as errors print it.
fn type_name(v: &cel::Value) -> &'static str {
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
    /// `validator.Validate` for one binding and one param.
    pub fn validate(&self, input: &mut Input<'_>) -> Outcome {
        let error = |message: String| Outcome {
            decisions: vec![if self.fails_closed() {
                Decision::Deny {
                    message,
                    reason: None,
                    index: None,
                }
            } else {
                Decision::Admit
            }],
            annotations: Vec::new(),
        };
        // Match conditions: one false skips the policy; errors follow the failure policy.
        let mut errors = Vec::new();
        for c in &self.conditions {
            match input.eval(c) {
                Ok(cel::Value::Bool(false)) => return Outcome::default(),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            if !self.fails_closed() {
                return Outcome::default();
            }
            let message = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("[{}]", errors.join(", "))
            };
            return error(message);
        }
        let mut out = Outcome::default();
        for (i, v) in self.validations.iter().enumerate() {
            let decision = match input.eval(&v.expr) {
                Err(message) if self.fails_closed() => Decision::Deny {
                    message,
                    reason: None,
                    index: Some(i),
                },
                Err(_) => Decision::Admit,
                Ok(cel::Value::Bool(true)) => Decision::Admit,
                Ok(_) => Decision::Deny {
                    message: self.failure_message(v, input),
                    reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
                    index: Some(i),
                },
            };
            out.decisions.push(decision);
        }
        for (key, expr) in &self.audit_annotations {
            match input.eval(expr) {
                Err(e) if self.fails_closed() => out.annotations.push(Annotation::Error(e)),
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

    /// The message of a failed validation: the message expression's string if it gives a
    /// usable one, else `message`, else the expression itself.
    fn failure_message(&self, v: &ValidationRule, input: &mut Input<'_>) -> String {
        if let Some(m) = &v.message_expression
            && let Ok(cel::Value::String(s)) = input.eval(m)
        {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(spec: Value) -> ValidatingPolicy {
        ValidatingPolicy::compile(&json!({"metadata": {"name": "p"}, "spec": spec}))
    }

    fn run(p: &ValidatingPolicy, obj: Value) -> Outcome {
        let mut input = Input::new(p, Vars::default().bind_json("object", Some(&obj)));
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
}
