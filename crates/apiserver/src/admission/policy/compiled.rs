//! What every CEL admission policy has, compiled once when the policy changes (upstream:
//! admission/plugin/cel's composited compiler and the generic policy accessors): its match
//! constraints, param kind, match conditions and composited variables, and the evaluation of
//! its expressions for one request (`Input`), with the variables an expression names evaluated
//! once each, before it, as cel-go's lazy variable map evaluates the ones an expression reaches.
//!
//! Evaluations are charged as upstream's condition evaluator charges them (`ForInput`): each
//! group of expressions (match conditions, validations, message expressions, audit annotations,
//! one mutation) is a filter with a budget of its own (`Input::filter`); an expression is charged
//! the cost of the composited variables it is the first of its filter to reach, then its own
//! (`cel::runtime_cost`), and the first charge the budget cannot pay ends the filter with
//! `Failure::OutOfBudget`.

use std::collections::{HashMap, HashSet};

use kube_cel::cel;
use serde_json::Value;

use super::matching::MatchResources;
use crate::admission::compile::{Compiler, Declarations};
use crate::admission::rules::text;
use crate::cel::eval::{ObjectTypes, Program, Vars};
use crate::cel::runtime_cost::{Budget, OUT_OF_BUDGET, RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS};

/// An expression with what it needs of `variables`, compiled.
pub struct Expr {
    pub source: String,
    program: Result<Program, String>,
    /// The composited variables the expression names (`variables.<name>`), evaluated before it,
    /// as cel-go's lazy map evaluates the ones an expression reaches.
    uses: Vec<String>,
}

impl Expr {
    /// An expression that may construct `types` (a mutation's), type-checked with what
    /// `compiler` declares so its runtime cost can be estimated.
    fn compile_in(source: &str, types: ObjectTypes, compiler: &Compiler, params: bool) -> Expr {
        let declarations = Declarations {
            has_params: params,
            // Declared for every field: only the cost estimate uses these types, and an
            // expression that names the authorizer where upstream declares none does not
            // compile there either.
            has_authorizer: true,
        };
        Expr {
            source: source.to_string(),
            program: Program::compile_with(source, types)
                .map(|p| p.check(&compiler.vars(declarations))),
            uses: variables_named(source),
        }
    }
}

/// Why an evaluation gave no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The expression's own error, in upstream's words (its failure policy decides).
    Expression(String),
    /// The filter's budget ran out: no further expression of it runs.
    OutOfBudget,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Expression(e) => f.write_str(e),
            Failure::OutOfBudget => f.write_str(OUT_OF_BUDGET),
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
    /// The composited compiler after the variables: the environment of the policy's other
    /// expressions.
    compiler: Compiler,
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
        let param_kind = spec.get("paramKind").filter(|v| !v.is_null()).map(|k| {
            (
                text(k, "apiVersion").to_string(),
                text(k, "kind").to_string(),
            )
        });
        let params = param_kind.is_some();
        let declarations = Declarations {
            has_params: params,
            has_authorizer: true,
        };
        let conditions = spec_list(spec, "matchConditions")
            .iter()
            .map(|c| {
                Expr::compile_in(
                    text(c, "expression"),
                    ObjectTypes::None,
                    &Compiler::stateless(),
                    params,
                )
            })
            .collect();
        // Each variable sees those before it, typed by what they compile to.
        let mut compiler = Compiler::composited();
        let mut variables = Vec::new();
        for v in spec_list(spec, "variables") {
            let (name, source) = (text(&v, "name"), text(&v, "expression"));
            variables.push((
                name.to_string(),
                Expr::compile_in(source, ObjectTypes::None, &compiler, params),
            ));
            // Its own errors were reported when the policy was written.
            let _ = compiler.compile_and_store_variable(name, source, declarations);
        }
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
            param_kind,
            conditions,
            variables,
            compiler,
        }
    }

    /// One of the policy's expressions, in its environment (with its variables).
    pub fn expr(&self, source: &str) -> Expr {
        self.expr_with(source, ObjectTypes::None)
    }

    /// One of the policy's expressions that may construct `types` (a mutation's).
    pub fn expr_with(&self, source: &str, types: ObjectTypes) -> Expr {
        Expr::compile_in(source, types, &self.compiler, self.param_kind.is_some())
    }

    pub fn fails_closed(&self) -> bool {
        self.failure_policy != "Ignore"
    }

    /// The match conditions (`matchconditions.Matcher`), all evaluated against
    /// `RuntimeCELCostBudgetMatchConditions`: `Ok(false)` when one is false, or when one fails
    /// (or the budget runs out) and the policy fails open; `Err` with the errors when it fails
    /// closed.
    pub fn conditions_match(&self, input: &mut Input<'_>) -> Result<bool, String> {
        input.filter(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS);
        let mut results = Vec::with_capacity(self.conditions.len());
        for c in &self.conditions {
            match input.eval(c) {
                Err(Failure::OutOfBudget) if self.fails_closed() => {
                    return Err(OUT_OF_BUDGET.to_string());
                }
                Err(Failure::OutOfBudget) => return Ok(false),
                other => results.push(other),
            }
        }
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(_) => {}
                Err(e) => errors.push(e.to_string()),
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
/// `namespaceObject`) and the composited variables computed from them, each at most once, with
/// the budget of the filter being evaluated.
pub struct Input<'a> {
    pub vars: Vars,
    core: &'a Core,
    /// Each composited variable's value and what evaluating it cost.
    composited: HashMap<String, (Result<cel::Value, String>, u64)>,
    /// The variables the current filter has been charged for: upstream evaluates them again
    /// in each filter (values are kept here; they cannot differ).
    charged: HashSet<String>,
    /// The cost of variables reached by the expression being evaluated, charged after it.
    composition_cost: u64,
    budget: Budget,
}

impl<'a> Input<'a> {
    pub fn new(core: &'a Core, vars: Vars) -> Self {
        Input {
            vars,
            core,
            composited: HashMap::new(),
            charged: HashSet::new(),
            composition_cost: 0,
            budget: Budget::new(RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS),
        }
    }

    /// Starts a filter (one `ForInput`) with `budget`.
    pub fn filter(&mut self, budget: u64) {
        self.budget = Budget::new(budget);
        self.charged.clear();
        self.composition_cost = 0;
    }

    /// What the current filter has left.
    pub fn remaining(&self) -> u64 {
        self.budget.remaining()
    }

    /// The value of composited variable `name`: `None` for a name the policy does not declare.
    fn variable(&mut self, name: &str, depth: usize) -> Option<Result<cel::Value, String>> {
        if let Some((v, cost)) = self.composited.get(name) {
            let v = v.clone();
            if self.charged.insert(name.to_string()) {
                self.composition_cost = self.composition_cost.saturating_add(*cost);
            }
            return Some(v);
        }
        let policy = self.core;
        let at = policy.variables.iter().position(|(n, _)| n == name)?;
        let (_, expr) = &policy.variables[at];
        // A variable sees only those declared before it; a cycle cannot form then.
        let (result, cost) = match &expr.program {
            Err(e) => (
                Err(format!(
                    "composited variable {name:?} fails to compile: {e}"
                )),
                0,
            ),
            Ok(_) if depth > policy.variables.len() => (
                Err(format!(
                    "composited variable {name:?} fails to evaluate: too deeply nested"
                )),
                0,
            ),
            Ok(_) => {
                let (value, cost) = self.eval_raw(expr, Some(at), depth + 1);
                (
                    value.map_err(|e| {
                        format!("composited variable {name:?} fails to evaluate: {e}")
                    }),
                    cost,
                )
            }
        };
        self.composited
            .insert(name.to_string(), (result.clone(), cost));
        self.charged.insert(name.to_string());
        self.composition_cost = self.composition_cost.saturating_add(cost);
        Some(result)
    }

    /// Evaluates `expr` with the variables it names bound; `visible` limits them to those
    /// declared before a variable. The error is the evaluator's, unwrapped; the cost is the
    /// expression's own (the variables it reached are in `composition_cost`).
    fn eval_raw(
        &mut self,
        expr: &Expr,
        visible: Option<usize>,
        depth: usize,
    ) -> (Result<cel::Value, String>, u64) {
        let program = match &expr.program {
            Ok(p) => p,
            Err(e) => return (Err(e.clone()), 0),
        };
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
                match value {
                    Ok(v) => {
                        bound.insert(name.clone(), v);
                    }
                    // Upstream's evaluation stops at the variable's error; what the
                    // expression did before it is not known here, so it is not charged.
                    Err(e) => return (Err(e), 0),
                }
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
        let metered = program.eval_metered(&self.vars.clone().bind("variables", variables));
        (metered.value, metered.cost)
    }

    /// `activation.Evaluate`: the value, the error in upstream's words, or the end of the
    /// filter's budget (the variables the expression reached are charged first, then the
    /// expression).
    pub fn eval(&mut self, expr: &Expr) -> Result<cel::Value, Failure> {
        if let Err(e) = &expr.program {
            return Err(Failure::Expression(format!("compilation error: {e}")));
        }
        self.composition_cost = 0;
        let (value, cost) = self.eval_raw(expr, None, 0);
        let composition = std::mem::take(&mut self.composition_cost);
        self.budget
            .charge(composition)
            .map_err(|_| Failure::OutOfBudget)?;
        self.budget.charge(cost).map_err(|_| Failure::OutOfBudget)?;
        value.map_err(|e| {
            Failure::Expression(format!(
                "expression '{}' resulted in error: {e}",
                expr.source
            ))
        })
    }
}
