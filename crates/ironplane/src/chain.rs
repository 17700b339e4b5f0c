//! The server chain (upstream: CreateServerChain): aggregator → built-in groups → extensions →
//! not found; first match wins. The built-in groups also store and serve APIService and
//! CustomResourceDefinition objects; custom resources are served by the `apiextensions` delegate
//! behind them. The aggregation proxy joins the chain in front as its own crate.

use std::sync::Arc;

use apiextensions::CrdHandler;
use apiserver::Delegate;
use apiserver::endpoints::ApiResources;

pub fn build(
    builtin: Arc<ApiResources>,
    extensions: Option<Arc<CrdHandler>>,
) -> Vec<Arc<dyn Delegate>> {
    let mut chain: Vec<Arc<dyn Delegate>> = vec![builtin];
    if let Some(e) = extensions {
        chain.push(e);
    }
    chain
}
