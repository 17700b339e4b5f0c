//! Admission plugins that know built-in kinds (upstream: plugin/pkg/admission), one module
//! each, installed in upstream's order: mutating plugins run first (LimitRanger's defaults,
//! TaintNodesByCondition, Priority, DefaultTolerationSeconds, RuntimeClass), then validating
//! ones (NamespaceLifecycle, LimitRanger's bounds, Priority's check of PriorityClasses,
//! RuntimeClass's check of the overhead). The framework and the seam are `apiserver::admission`.

use std::sync::{Arc, OnceLock};

use apiserver::admission::Admission;
use apiserver::endpoints::ApiResources;

mod default_toleration_seconds;
mod limit_ranger;
mod namespace_lifecycle;
mod priority;
mod runtime_class;
mod taint_nodes_by_condition;

pub use namespace_lifecycle::{IMMORTAL_NAMESPACES, NamespaceLifecycle};

/// The default-on plugins that are built so far, in upstream's order.
pub fn default_plugins(api: Arc<OnceLock<Arc<ApiResources>>>) -> Admission {
    let priority = Arc::new(priority::Priority { api: api.clone() });
    let runtime_class = Arc::new(runtime_class::RuntimeClass { api: api.clone() });
    let limit_ranger = Arc::new(limit_ranger::LimitRanger { api: api.clone() });
    Admission::default()
        .with_mutating(limit_ranger.clone())
        .with_mutating(Arc::new(taint_nodes_by_condition::TaintNodesByCondition))
        .with_mutating(priority.clone())
        .with_mutating(Arc::new(
            default_toleration_seconds::DefaultTolerationSeconds,
        ))
        .with_mutating(runtime_class.clone())
        .with_validating(Arc::new(NamespaceLifecycle { api }))
        .with_validating(limit_ranger)
        .with_validating(priority)
        .with_validating(runtime_class)
}
