//! What every CEL admission policy has, compiled once when the policy changes (upstream:
//! admission/plugin/cel's composited compiler and the generic policy accessors): its match
//! constraints, param kind, match conditions and composited variables, and the evaluation of
//! its expressions for one request (`Input`), with the variables an expression names evaluated
//! once each, before it, as cel-go's lazy variable map evaluates the ones an expression reaches.

use std::collections::HashMap;

use kube_cel::cel;
use serde_json::Value;

use super::matching::MatchResources;
use crate::admission::rules::text;
use crate::cel::eval::{ObjectTypes, Program, Vars};

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
        Expr::compile_with(source, ObjectTypes::None)
    }

    /// An expression that may construct `types` (a mutation's).
    pub fn compile_with(source: &str, types: ObjectTypes) -> Expr {
        Expr {
            source: source.to_string(),
            program: Program::compile_with(source, types),
            uses: variables_named(source),
        }
    }
}

/// The names that follow `variables.` in `source`.
pub(super) fn variables_named(source: &str) -> Vec<String> {
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

/// The parts every policy kind has.
pub struct Core {
    pub name: String,
    /// `failurePolicy` (absent: Fail).
    pub failure_policy: String,
    pub constraints: Option<MatchResources>,
    /// `paramKind`: apiVersion and kind.
    pub param_kind: Option<(String, String)>,
    conditions: Vec<Expr>,
    variables: Vec<(String, Expr)>,
}

/// The objects of list `field` of `spec`.
pub fn spec_list(spec: &Value, field: &str) -> Vec<Value> {
    spec.get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

impl Core {
    pub fn compile(policy: &Value) -> Core {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        Core {
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
            conditions: spec_list(spec, "matchConditions")
                .iter()
                .map(|c| Expr::compile(text(c, "expression")))
                .collect(),
            variables: spec_list(spec, "variables")
                .iter()
                .map(|v| {
                    (
                        text(v, "name").to_string(),
                        Expr::compile(text(v, "expression")),
                    )
                })
                .collect(),
        }
    }

    pub fn fails_closed(&self) -> bool {
        self.failure_policy != "Ignore"
    }

    /// The match conditions (`matchconditions.Matcher`): `Ok(false)` when one is false, or when
    /// one fails and the policy fails open; `Err` with the errors when it fails closed.
    pub fn conditions_match(&self, input: &mut Input<'_>) -> Result<bool, String> {
        let mut errors = Vec::new();
        for c in &self.conditions {
            match input.eval(c) {
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Ok(true),
            _ if !self.fails_closed() => Ok(false),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }
}

/// The variables of one evaluation (`object`, `oldObject`, `request`, `params`,
/// `namespaceObject`) and the composited variables computed from them, each at most once.
pub struct Input<'a> {
    pub vars: Vars,
    core: &'a Core,
    composited: HashMap<String, Result<cel::Value, String>>,
}

impl<'a> Input<'a> {
    pub fn new(core: &'a Core, vars: Vars) -> Self {
        Input {
            vars,
            core,
            composited: HashMap::new(),
        }
    }

    /// The value of composited variable `name`: `None` for a name the policy does not declare.
    fn variable(&mut self, name: &str, depth: usize) -> Option<Result<cel::Value, String>> {
        if let Some(v) = self.composited.get(name) {
            return Some(v.clone());
        }
        let policy = self.core;
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
                .core
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
    pub fn eval(&mut self, expr: &Expr) -> Result<cel::Value, String> {
        if let Err(e) = &expr.program {
            return Err(format!("compilation error: {e}"));
        }
        self.eval_raw(expr, None, 0)
            .map_err(|e| format!("expression '{}' resulted in error: {e}", expr.source))
    }
}
