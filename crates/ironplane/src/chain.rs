//! The server chain (upstream: CreateServerChain): aggregator → built-in groups → extensions →
//! not found; first match wins. The aggregator's proxy sees every request first, before its body
//! is read (`GenericApiServer::streaming`), and keeps those of remote APIServices; the rest go
//! down this list. The built-in groups also store and serve APIService and
//! CustomResourceDefinition objects; custom resources are served by the `apiextensions` delegate
//! behind them.

use std::sync::Arc;

use apiextensions::CrdHandler;
use apiserver::Delegate;
use apiserver::admission::ServedResources;
use apiserver::endpoints::ApiResources;
use apiserver::registry::RegistryStore;

pub fn build(
    builtin: Arc<ApiResources>,
    extensions: Option<Arc<CrdHandler>>,
    aggregator: Option<Arc<aggregator::Aggregator>>,
) -> Vec<Arc<dyn Delegate>> {
    let mut chain: Vec<Arc<dyn Delegate>> = vec![builtin];
    if let Some(e) = extensions {
        chain.push(e);
    }
    // Last in the list although first in the chain: it serves nothing here (its proxy has
    // answered already), and discovery lists groups in the chain's order, where upstream sorts
    // by groupPriorityMinimum — extension servers' groups usually sort after every built-in and
    // custom one.
    if let Some(a) = aggregator {
        chain.push(a);
    }
    chain
}

/// Every resource the chain serves, for admission: the built-in groups' and, as CRDs come and
/// go, the custom resources'.
pub struct ServedApi {
    pub builtin: Arc<ApiResources>,
    pub extensions: Option<Arc<CrdHandler>>,
}

impl ServedResources for ServedApi {
    fn stores(&self) -> Vec<Arc<RegistryStore>> {
        let mut stores: Vec<Arc<RegistryStore>> = self.builtin.all().cloned().collect();
        if let Some(e) = &self.extensions {
            stores.extend(e.all_stores());
        }
        stores
    }

    fn schemas_for(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<Arc<apimachinery::schema::Schemas>> {
        let builtin = self
            .builtin
            .all()
            .any(|s| s.info.group == group && s.info.version == version && s.info.kind == kind);
        if builtin {
            return self.builtin.shared_schemas();
        }
        self.extensions
            .as_ref()
            .and_then(|e| e.schemas_for(group, version, kind))
    }
}
