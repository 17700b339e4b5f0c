//! The runtime cost of CEL evaluations, for every CEL user of the server (upstream: cel-go's
//! runtime cost tracker with `celconfig.PerCallLimit`, and the budgets callers charge it to:
//! `RuntimeCELCostBudget` for one custom resource's validation rules or one admission policy's
//! validations, `RuntimeCELCostBudgetMatchConditions` for one webhook's or policy's match
//! conditions).
//!
//! Admission's expressions are charged what `cost_tracker` counts as they run, as cel-go's
//! tracker counts. CRD validation rules run in `kube-cel`'s validator, which binds `self` with
//! its own values, so a rule is charged what cel-go's static estimator (`cost::estimate`) gives
//! for the expression with the sizes of the value it runs on (`ValueSizes`: the strings, lists
//! and maps that are there, not what a schema allows). That is an upper bound of what cel-go
//! would count: it assumes every iteration of a comprehension runs and both sides of `&&`,
//! `||` and `?:` are taken. Where the estimator cannot follow a value to `self` (the result of
//! a function whose size it does not know), it keeps cel-go's unbounded answer. An expression
//! over the per-call limit is not run at all: it is answered with cel-go's cancellation, as
//! upstream's evaluation would be once it crossed the limit.

use serde_json::Value;

use super::PER_CALL_LIMIT;
use super::checker::Checked;
use super::cost::{SizeEstimate, SizeEstimator, estimate};
use super::types::escape;

/// `RuntimeCELCostBudget`: what the validation rules of one object, or the validations (and
/// then message expressions) of one policy binding and param, may cost together.
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// `RuntimeCELCostBudgetMatchConditions`: what the match conditions of one webhook or one
/// policy may cost together.
pub const RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS: u64 = 2_500_000;

/// cel-go's error when an evaluation crosses its per-call limit.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Upstream's error when evaluations together cross their budget.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// What one evaluation of `checked` with values of `sizes` is charged, and whether it crosses
/// the per-call limit. Over the limit, the charge is the least count that crosses it (cel-go
/// stops counting where it cancels).
pub fn charge(checked: &Checked, sizes: &dyn SizeEstimator) -> Charge {
    let cost = estimate(checked, sizes).max;
    if cost > PER_CALL_LIMIT {
        Charge {
            cost: PER_CALL_LIMIT + 1,
            over_limit: true,
        }
    } else {
        Charge {
            cost,
            over_limit: false,
        }
    }
}

/// The cost of one evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charge {
    pub cost: u64,
    /// The evaluation crossed `PER_CALL_LIMIT`: it fails with `COST_LIMIT_EXCEEDED`.
    pub over_limit: bool,
}

/// A budget evaluations are charged against, in the order they run.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    remaining: u64,
}

/// The budget ran out (`OUT_OF_BUDGET`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBudget;

impl Budget {
    pub fn new(total: u64) -> Budget {
        Budget { remaining: total }
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Takes `cost` from what is left; more than is left spends it all, as upstream then runs
    /// nothing more against it.
    pub fn charge(&mut self, cost: u64) -> Result<(), OutOfBudget> {
        if cost > self.remaining {
            self.remaining = 0;
            return Err(OutOfBudget);
        }
        self.remaining -= cost;
        Ok(())
    }
}

/// Characters of a string, entries of a list or map; 1 for a scalar.
fn size(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.chars().count() as u64,
        Value::Array(a) => a.len() as u64,
        Value::Object(m) => m.len() as u64,
        _ => 1,
    }
}

/// A list's items or a map's values.
fn elements(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => map.values().collect(),
        _ => Vec::new(),
    }
}

/// The field a select step names: a key equal to it, or one that escapes to it (CEL sees
/// a custom resource's property names escaped).
fn field<'v>(v: &'v Value, name: &str) -> Vec<&'v Value> {
    match v {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| k.as_str() == name || escape(k).as_deref() == Some(name))
            .map(|(_, v)| v)
            .collect(),
        _ => Vec::new(),
    }
}

/// The largest size found at `path` below `root` (the path's first step, the variable, already
/// taken). Steps into elements accept lists and maps alike, and iterating a list by "keys"
/// gives its items: an expression over `dyn` values cannot tell the estimator which it is, and
/// the bound must hold for whichever is there.
fn size_at(root: &Value, path: &[String]) -> SizeEstimate {
    let mut values: Vec<&Value> = vec![root];
    let mut keys: Vec<u64> = Vec::new();
    for step in path {
        let mut next = Vec::new();
        for v in values {
            match step.as_str() {
                "@items" | "@values" => next.extend(elements(v)),
                "@keys" => match v.as_object() {
                    Some(m) => keys.extend(m.keys().map(|k| k.chars().count() as u64)),
                    None => next.extend(elements(v)),
                },
                // A list's indices are integers.
                "@indices" => keys.push(1),
                name => next.extend(field(v, name)),
            }
        }
        values = next;
    }
    let max = values
        .iter()
        .map(|v| size(v))
        .chain(keys)
        .max()
        .unwrap_or(0);
    SizeEstimate { min: 0, max }
}

/// Sizes read from the value a validation rule runs on.
pub struct ValueSizes<'a> {
    /// The rule's `self` (and `oldSelf`, sized as `self`): every variable is this.
    root: &'a Value,
}

impl<'a> ValueSizes<'a> {
    /// Sizes of a validation rule's `self`, with cel-go's unbounded answer where a value cannot
    /// be traced to it.
    pub fn of_self(value: &'a Value) -> Self {
        ValueSizes { root: value }
    }
}

impl SizeEstimator for ValueSizes<'_> {
    fn estimate_size(&self, path: &[String]) -> Option<SizeEstimate> {
        let (_, rest) = path.split_first()?;
        Some(size_at(self.root, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::checker::{Type, compile};
    use serde_json::json;

    fn cost_on(source: &str, obj: Value) -> Charge {
        let checked = compile(source, &[("self", Type::Dyn)]).unwrap();
        charge(&checked, &ValueSizes::of_self(&obj))
    }

    fn data(n: usize) -> Value {
        let data: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("key{i:05}"), Value::from("v")))
            .collect();
        json!({"data": data})
    }

    #[test]
    fn a_nested_comprehension_costs_by_the_size_of_the_value_it_runs_on() {
        let rule = "self.data.all(k, self.data.all(j, k != j || k == j))";
        let small = cost_on(rule, data(10));
        assert!(!small.over_limit);
        assert!(small.cost > 100 && small.cost < 10_000, "{small:?}");
        let large = cost_on(rule, data(1000));
        assert_eq!(
            large,
            Charge {
                cost: PER_CALL_LIMIT + 1,
                over_limit: true
            }
        );
        // Iterating a list the type checker sees as `dyn` counts its items too.
        let list = json!({"items": (0..1000).map(|i| i.to_string()).collect::<Vec<_>>()});
        assert!(cost_on("self.items.all(a, self.items.exists(b, a == b))", list).over_limit);
    }

    #[test]
    fn string_functions_cost_by_the_strings_there() {
        let short = cost_on("self.name.contains('x')", json!({"name": "abc"}));
        let long = cost_on(
            "self.name.contains('x')",
            json!({"name": "a".repeat(100_000)}),
        );
        assert!(short.cost < 10, "{short:?}");
        assert!(long.cost > 1000, "{long:?}");
    }

    #[test]
    fn values_the_estimate_cannot_follow_are_unbounded() {
        // `format`'s result has no size estimate: cel-go's estimate is unbounded there.
        let c = cost_on("self.s.format([1]).contains('x')", json!({"s": "%d"}));
        assert!(c.over_limit);
    }

    #[test]
    fn a_budget_is_spent_in_order_and_refuses_what_it_cannot_pay() {
        let mut b = Budget::new(10);
        assert_eq!(b.charge(4), Ok(()));
        assert_eq!(b.charge(6), Ok(()));
        assert_eq!(b.remaining(), 0);
        assert_eq!(b.charge(1), Err(OutOfBudget));
        let mut b = Budget::new(10);
        assert_eq!(b.charge(11), Err(OutOfBudget));
        assert_eq!(b.remaining(), 0);
    }
}
