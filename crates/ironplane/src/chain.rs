//! The server chain (upstream: CreateServerChain): aggregator → built-in groups → extensions →
//! not found; first match wins. The built-in groups also store and serve APIService and
//! CustomResourceDefinition objects; custom resources are served by the `apiextensions` delegate
//! behind them. The aggregation proxy joins the chain in front as its own crate.

use std::sync::Arc;

use apiextensions::CrdHandler;
use apiserver::Delegate;
use apiserver::admission::ServedResources;
use apiserver::endpoints::ApiResources;
use apiserver::registry::RegistryStore;

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
