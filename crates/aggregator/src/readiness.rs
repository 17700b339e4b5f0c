//! The aggregator's post-start hooks and its boot-sequence check, under upstream's names and in
//! the order kube-apiserver registers them (kube-aggregator's `NewWithDelegate`, then
//! `CreateAggregatorServer`): each is a [`Check`] the server lists under `/healthz`, `/livez`
//! and `/readyz`.
//!
//! A hook whose upstream function only starts a controller passes at once; the others pass when
//! what upstream's hook waits for has happened:
//! - `apiservice-registration-controller`, `apiservice-wait-for-first-sync`: the APIServices have
//!   been listed (the proxy then serves every Available one: it reads the same list);
//! - `apiservice-discovery-controller`: every remote APIService found at start has been synced
//!   once by `discovery_manager` (upstream's discovery manager's first sync, failures included);
//! - `autoregister-completion` (upstream's `makeAPIServiceAvailableHealthCheck`): every built-in
//!   group version's APIService has been seen `Available=True` at least once. Custom resources'
//!   APIServices are not waited for (upstream builds the list from the delegate's listed paths,
//!   which have no CRD group in them), and once passed it stays passed.

use std::collections::BTreeSet;
use std::sync::Mutex;

use apiserver::health::Check;

use crate::ApiService;

/// The checks, set by the aggregator as its controllers get there.
pub struct Readiness {
    /// Only with a proxy client certificate from files, as upstream registers it.
    reload_proxy_cert: Option<Check>,
    informers: Check,
    local_available: Check,
    remote_available: Check,
    pub(crate) registration: Check,
    pub(crate) first_sync: Check,
    pub(crate) discovery: Check,
    autoregistration: Check,
    pub(crate) autoregister_completion: Check,
    openapi: Check,
    openapi_v3: Check,
    /// The built-in APIServices not yet seen available; None before the list is known.
    pending: Mutex<Option<BTreeSet<String>>>,
}

impl Readiness {
    /// `running`: whether the aggregator runs at all; when it does not, every check passes (there
    /// is nothing to wait for). `reloads_proxy_cert`: whether the proxy client certificate is
    /// read from files (`aggregator-reload-proxy-client-cert`, which passes once its
    /// controller is started).
    pub fn new(running: bool, reloads_proxy_cert: bool) -> Readiness {
        let started = |name: &str| Check::new(format!("poststarthook/{name}"), true);
        let waits = |name: &str| Check::new(format!("poststarthook/{name}"), !running);
        Readiness {
            reload_proxy_cert: reloads_proxy_cert
                .then(|| started("aggregator-reload-proxy-client-cert")),
            informers: started("start-kube-aggregator-informers"),
            local_available: started("apiservice-status-local-available-controller"),
            remote_available: started("apiservice-status-remote-available-controller"),
            registration: waits("apiservice-registration-controller"),
            first_sync: waits("apiservice-wait-for-first-sync"),
            discovery: waits("apiservice-discovery-controller"),
            autoregistration: started("kube-apiserver-autoregistration"),
            autoregister_completion: Check::new("autoregister-completion", !running),
            openapi: started("apiservice-openapi-controller"),
            openapi_v3: started("apiservice-openapiv3-controller"),
            pending: Mutex::new(None),
        }
    }

    /// Every check, in upstream's order of registration.
    pub fn checks(&self) -> Vec<Check> {
        self.reload_proxy_cert
            .iter()
            .chain([
                &self.informers,
                &self.local_available,
                &self.remote_available,
                &self.registration,
                &self.first_sync,
                &self.discovery,
                &self.autoregistration,
                &self.autoregister_completion,
                &self.openapi,
                &self.openapi_v3,
            ])
            .cloned()
            .collect()
    }

    /// The APIService names `autoregister-completion` waits for (set once, at start).
    pub(crate) fn expect(&self, names: BTreeSet<String>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_none() {
            *pending = Some(names);
        }
    }

    /// An APIService as the informer delivers it: one awaited and available is no longer
    /// pending, and the check passes when none is.
    pub(crate) fn observe(&self, apiservice: &ApiService) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(names) = pending.as_mut() else {
            return;
        };
        if apiservice.available {
            names.remove(&apiservice.name);
        }
        if names.is_empty() && !self.autoregister_completion.is_ok() {
            self.autoregister_completion.set(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apiservice(name: &str, available: bool) -> ApiService {
        ApiService::parse(&json!({
            "metadata": {"name": name},
            "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available",
                "status": if available { "True" } else { "False" }}]},
        }))
    }

    #[test]
    fn the_names_and_order_are_upstreams() {
        let names = |reloads| -> Vec<String> {
            Readiness::new(true, reloads)
                .checks()
                .into_iter()
                .map(|c| c.name)
                .collect()
        };
        // Registered only with the proxy client certificate's files, and first.
        assert_eq!(
            names(true)[0],
            "poststarthook/aggregator-reload-proxy-client-cert"
        );
        assert_eq!(names(true)[1..], names(false));
        assert_eq!(
            names(false),
            [
                "poststarthook/start-kube-aggregator-informers",
                "poststarthook/apiservice-status-local-available-controller",
                "poststarthook/apiservice-status-remote-available-controller",
                "poststarthook/apiservice-registration-controller",
                "poststarthook/apiservice-wait-for-first-sync",
                "poststarthook/apiservice-discovery-controller",
                "poststarthook/kube-apiserver-autoregistration",
                "autoregister-completion",
                "poststarthook/apiservice-openapi-controller",
                "poststarthook/apiservice-openapiv3-controller",
            ]
        );
    }

    #[test]
    fn autoregister_completion_waits_for_every_built_in_apiservice_once() {
        let r = Readiness::new(true, false);
        // Nothing counts before the list is known.
        r.observe(&apiservice("v1.apps", true));
        assert!(!r.autoregister_completion.is_ok());
        r.expect(["v1.".to_string(), "v1.apps".to_string()].into());
        r.observe(&apiservice("v1.apps", true));
        // Others, and unavailable ones, do not count.
        r.observe(&apiservice("v1.stable.example.com", true));
        r.observe(&apiservice("v1.", false));
        assert!(!r.autoregister_completion.is_ok());
        r.observe(&apiservice("v1.", true));
        assert!(r.autoregister_completion.is_ok());
        // Sticky: a later unavailability does not fail readiness again.
        r.observe(&apiservice("v1.", false));
        assert!(r.autoregister_completion.is_ok());
        // Without the aggregator every check passes.
        assert!(
            Readiness::new(false, true)
                .checks()
                .iter()
                .all(Check::is_ok)
        );
    }
}
