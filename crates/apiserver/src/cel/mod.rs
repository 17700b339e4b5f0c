//! The CEL layer every CEL user of the server shares (upstream: apiserver/pkg/cel): CRD
//! validation rules now, admission policies, match conditions and authn/authz configuration
//! next. The `cel` crate (with `kube-cel`'s Kubernetes libraries) parses and evaluates; this
//! layer adds what it lacks and upstream's answers depend on:
//! - `types`: the declared types of schema nodes and their size facts;
//! - `functions`: the overloads Kubernetes' CEL environment declares, as data;
//! - `checker`: types and overloads of every node, and cel-go's compile errors;
//! - `cost`: cel-go's static cost estimate with Kubernetes' library costs;
//! - `eval`: running an expression with JSON values bound (admission's variables);
//! - `resolver`: a served kind's schema from its OpenAPI v3 document, references filled in
//!   (for type checking admission policies against the kinds they match);
//! - `cost_tracker`: what one evaluation costs, counted as cel-go's runtime tracker counts it
//!   (the `cel` interpreter counts nothing): admission's expressions are charged this;
//! - `runtime_cost`: the per-call limit and the budgets evaluations are charged against. CRD
//!   rules, which `kube-cel`'s validator runs with its own values, are still charged `cost`'s
//!   estimate with the sizes of the values they run on, an upper bound of cel-go's count.

pub mod authz;
pub mod checker;
pub mod cost;
pub mod cost_tracker;
pub mod eval;
pub mod functions;
pub mod resolver;
pub mod runtime_cost;
pub mod types;

use std::sync::Arc;

pub use checker::{Checked, Extensions, Type, compile, compile_with};
pub use cost::{CostEstimate, SizeEstimate, SizeEstimator, estimate};
pub use types::{DeclKind, DeclType, MAX_REQUEST_SIZE_BYTES};

/// The most one evaluation of an expression may cost (`celconfig.PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// Sizes from a declared type: the variable (the path's first step) is the root, and each
/// further step a field, `@items`/`@values` (elements) or `@keys` (map keys) below it
/// (upstream: the CRD compiler's `sizeEstimator`).
pub struct DeclSizes(pub Arc<DeclType>);

impl SizeEstimator for DeclSizes {
    fn estimate_size(&self, path: &[String]) -> Option<SizeEstimate> {
        let mut node: &Arc<DeclType> = &self.0;
        for step in path.iter().skip(1) {
            while let DeclKind::Named(_, inner) = &node.kind {
                node = inner;
            }
            node = match (step.as_str(), &node.kind) {
                ("@items" | "@values", DeclKind::List(e) | DeclKind::Map(e)) => e,
                // Map keys are plain strings with no declared size.
                ("@keys", DeclKind::Map(_)) => return Some(SizeEstimate { min: 0, max: 0 }),
                (field, DeclKind::Object(fields)) => fields.get(field)?,
                _ => return None,
            };
        }
        Some(SizeEstimate {
            min: 0,
            max: node.max_elements.max(0) as u64,
        })
    }
}

/// `getCostErrorMessage`: how far `cost` is over `limit`, in upstream's words.
pub fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let shown = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}
