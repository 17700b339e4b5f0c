//! The server chain (upstream: CreateServerChain): aggregator → built-in groups → extensions →
//! not found; first match wins. Today the chain holds the built-in groups, which also store and
//! serve APIService and CustomResourceDefinition objects; the aggregation proxy and the dynamic
//! CRD server join it as their own delegates in the `aggregator` and `apiextensions` crates.

use std::sync::Arc;

use apiserver::Delegate;
use apiserver::endpoints::ApiResources;

pub fn build(builtin: Arc<ApiResources>) -> Vec<Arc<dyn Delegate>> {
    vec![builtin]
}
