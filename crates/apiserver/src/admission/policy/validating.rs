//! One ValidatingAdmissionPolicy, compiled once when it changes, and its evaluation for one
//! request and one param (upstream: admission/plugin/policy/validating/validator.go and
//! plugin/cel's condition and composition evaluators): match conditions, then validations
//! (with `message`, `messageExpression`, `reason`), then audit annotations, each becoming a
//! decision in upstream's words.

use kube_cel::cel;
use serde_json::Value;

use super::compiled::{Core, Expr, Input, spec_list};
use crate::admission::rules::text;

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
        ValidatingPolicy {
            core: Core::compile(policy),
            validations: spec_list(spec, "validations")
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
            audit_annotations: spec_list(spec, "auditAnnotations")
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
        match self.core.conditions_match(input) {
            Ok(true) => {}
            Ok(false) => return Outcome::default(),
            Err(message) => return error(message),
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
    use crate::admission::policy::compiled::variables_named;
    use crate::cel::eval::Vars;
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
}
