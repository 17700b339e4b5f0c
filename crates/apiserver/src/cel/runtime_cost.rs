//! The runtime cost of CEL evaluations, for every CEL user of the server (upstream: cel-go's
//! runtime cost tracker with `celconfig.PerCallLimit`, and the budgets callers charge it to:
//! `RuntimeCELCostBudget` for one custom resource's validation rules or one admission policy's
//! validations, `RuntimeCELCostBudgetMatchConditions` for one webhook's or policy's match
//! conditions).
//!
//! The `cel` interpreter counts nothing as it evaluates, so an evaluation is charged what
//! cel-go's static estimator (`cost::estimate`) gives for the expression with the sizes of the
//! values it actually runs on (`ValueSizes`: the strings, lists and maps that are there, not
//! what a schema allows). That is an upper bound of what cel-go would count: it assumes every
//! iteration of a comprehension runs and both sides of `&&`, `||` and `?:` are taken, so an
//! expression that short-circuits early may be charged more than upstream charges it. Where
//! the estimator cannot follow a value to a bound variable (the result of a function whose size
//! it does not know), admission's estimator takes it to be as large as everything bound
//! together, which bounds any value read from the request; custom resources keep cel-go's
//! unbounded answer there. An expression over the per-call limit is not run at all: it is
//! answered with cel-go's cancellation, as upstream's evaluation would be once it crossed the
//! limit.

use std::cell::OnceCell;

use kube_cel::cel::{self, objects::Key};
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

/// A value as the estimator looks into it: JSON (custom resources, as stored) or CEL (the
/// variables an admission expression is bound to).
trait Measured {
    /// Characters of a string, bytes of bytes, entries of a list or map; 1 for a scalar.
    fn size(&self) -> u64;
    /// A list's items or a map's values.
    fn elements(&self) -> Vec<&Self>;
    /// The sizes of a map's keys; `None` when this is not a map.
    fn key_sizes(&self) -> Option<Vec<u64>>;
    /// The field a select step names: a map key equal to it, or (for custom resources, whose
    /// property names CEL sees escaped) one that escapes to it.
    fn field(&self, name: &str) -> Vec<&Self>;
    /// The sum of the sizes of this value and everything in it: no string, list or map read
    /// from it is larger.
    fn total(&self) -> u64 {
        let keys: u64 = self.key_sizes().unwrap_or_default().iter().sum();
        self.elements()
            .iter()
            .fold(self.size().saturating_add(keys), |sum, e| {
                sum.saturating_add(e.total())
            })
    }
}

impl Measured for Value {
    fn size(&self) -> u64 {
        match self {
            Value::String(s) => s.chars().count() as u64,
            Value::Array(a) => a.len() as u64,
            Value::Object(m) => m.len() as u64,
            _ => 1,
        }
    }
    fn elements(&self) -> Vec<&Value> {
        match self {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) => map.values().collect(),
            _ => Vec::new(),
        }
    }
    fn key_sizes(&self) -> Option<Vec<u64>> {
        self.as_object()
            .map(|m| m.keys().map(|k| k.chars().count() as u64).collect())
    }
    fn field(&self, name: &str) -> Vec<&Value> {
        match self {
            Value::Object(map) => map
                .iter()
                .filter(|(k, _)| k.as_str() == name || escape(k).as_deref() == Some(name))
                .map(|(_, v)| v)
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Measured for cel::Value {
    fn size(&self) -> u64 {
        match self {
            cel::Value::String(s) => s.chars().count() as u64,
            cel::Value::Bytes(b) => b.len() as u64,
            cel::Value::List(items) => items.len() as u64,
            cel::Value::Map(m) => m.map.len() as u64,
            _ => 1,
        }
    }
    fn elements(&self) -> Vec<&cel::Value> {
        match self {
            cel::Value::List(items) => items.iter().collect(),
            cel::Value::Map(m) => m.map.values().collect(),
            _ => Vec::new(),
        }
    }
    fn key_sizes(&self) -> Option<Vec<u64>> {
        match self {
            cel::Value::Map(m) => Some(
                m.map
                    .keys()
                    .map(|k| match k {
                        Key::String(s) => s.chars().count() as u64,
                        _ => 1,
                    })
                    .collect(),
            ),
            _ => None,
        }
    }
    fn field(&self, name: &str) -> Vec<&cel::Value> {
        match self {
            cel::Value::Map(m) => m
                .map
                .iter()
                .filter(|(k, _)| matches!(k, Key::String(s) if s.as_str() == name))
                .map(|(_, v)| v)
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The largest size found at `path` below `root` (the path's first step, the variable, already
/// taken). Steps into elements accept lists and maps alike, and iterating a list by "keys"
/// gives its items: an expression over `dyn` values cannot tell the estimator which it is, and
/// the bound must hold for whichever is there.
fn size_at<T: Measured>(root: &T, path: &[String]) -> SizeEstimate {
    let mut values: Vec<&T> = vec![root];
    let mut keys: Vec<u64> = Vec::new();
    for step in path {
        let mut next = Vec::new();
        for v in values {
            match step.as_str() {
                "@items" | "@values" => next.extend(v.elements()),
                "@keys" => match v.key_sizes() {
                    Some(sizes) => keys.extend(sizes),
                    None => next.extend(v.elements()),
                },
                // A list's indices are integers.
                "@indices" => keys.push(1),
                field => next.extend(v.field(field)),
            }
        }
        values = next;
    }
    let max = values
        .iter()
        .map(|v| v.size())
        .chain(keys)
        .max()
        .unwrap_or(0);
    SizeEstimate { min: 0, max }
}

/// Sizes read from the values an expression runs on.
pub struct ValueSizes<'a> {
    roots: Roots<'a>,
    /// The sum of everything bound, computed when the estimator first asks for it.
    total: OnceCell<u64>,
}

enum Roots<'a> {
    /// A validation rule's `self` (and `oldSelf`, sized as `self`): every variable is this.
    Every(&'a Value),
    /// Admission's variables by name.
    Bound(&'a [(String, cel::Value)]),
}

impl<'a> ValueSizes<'a> {
    /// Sizes of a validation rule's `self`, with cel-go's unbounded answer where a value cannot
    /// be traced to it.
    pub fn of_self(value: &'a Value) -> Self {
        ValueSizes {
            roots: Roots::Every(value),
            total: OnceCell::new(),
        }
    }

    /// Sizes of bound variables, a value that cannot be traced to one no larger than all of
    /// them together.
    pub fn of_bound(bound: &'a [(String, cel::Value)]) -> Self {
        ValueSizes {
            roots: Roots::Bound(bound),
            total: OnceCell::new(),
        }
    }
}

impl SizeEstimator for ValueSizes<'_> {
    fn estimate_size(&self, path: &[String]) -> Option<SizeEstimate> {
        let (first, rest) = path.split_first()?;
        match self.roots {
            Roots::Every(v) => Some(size_at(v, rest)),
            Roots::Bound(bound) => bound
                .iter()
                .rev()
                .find(|(name, _)| name == first)
                .map(|(_, v)| size_at(v, rest)),
        }
    }

    fn unknown_size(&self) -> SizeEstimate {
        match self.roots {
            Roots::Every(_) => SizeEstimate {
                min: 0,
                max: u64::MAX,
            },
            Roots::Bound(bound) => SizeEstimate {
                min: 0,
                max: *self.total.get_or_init(|| {
                    bound
                        .iter()
                        .fold(0u64, |sum, (_, v)| sum.saturating_add(v.total()))
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::checker::{Type, compile};
    use crate::cel::eval::json_to_cel;
    use serde_json::json;

    fn bound(obj: Value) -> Vec<(String, cel::Value)> {
        vec![("object".to_string(), json_to_cel(&obj))]
    }

    fn cost_on(source: &str, obj: Value) -> Charge {
        let checked = compile(source, &[("object", Type::Dyn)]).unwrap();
        let vars = bound(obj);
        charge(&checked, &ValueSizes::of_bound(&vars))
    }

    fn data(n: usize) -> Value {
        let data: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("key{i:05}"), Value::from("v")))
            .collect();
        json!({"data": data})
    }

    #[test]
    fn a_nested_comprehension_costs_by_the_size_of_the_value_it_runs_on() {
        let rule = "object.data.all(k, object.data.all(j, k != j || k == j))";
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
        assert!(cost_on("object.items.all(a, object.items.exists(b, a == b))", list).over_limit);
    }

    #[test]
    fn string_functions_cost_by_the_strings_there() {
        let short = cost_on("object.name.contains('x')", json!({"name": "abc"}));
        let long = cost_on(
            "object.name.contains('x')",
            json!({"name": "a".repeat(100_000)}),
        );
        assert!(short.cost < 10, "{short:?}");
        assert!(long.cost > 1000, "{long:?}");
    }

    #[test]
    fn values_the_estimate_cannot_follow_are_bounded_by_everything_bound() {
        // `format`'s result has no size estimate; it is taken as large as the whole object,
        // not unbounded.
        let rule = "object.s.format([1]).contains('x')";
        let c = cost_on(rule, json!({"s": "%d"}));
        assert!(!c.over_limit && c.cost < 100, "{c:?}");
        let checked = compile("self.s.format([1]).contains('x')", &[("self", Type::Dyn)]).unwrap();
        let obj = json!({"s": "%d"});
        assert!(charge(&checked, &ValueSizes::of_self(&obj)).over_limit);
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
