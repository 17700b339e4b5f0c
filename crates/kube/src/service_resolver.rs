//! Finding the endpoint behind a Service for the server's own outgoing calls (conversion
//! webhooks now; admission webhooks and aggregated APIs later). Upstream dials the Service's
//! cluster IP unless `--enable-aggregator-routing` makes it pick an endpoint; nothing routes
//! cluster IPs to pods here, so the resolver always picks a ready endpoint of the Service port
//! from its EndpointSlices (upstream: k8s.io/apiserver pkg/util/proxy `ResolveEndpoint`).

use std::sync::Arc;

use apiserver::registry::RegistryStore;
use apiserver::util::webhook::{ServiceReference, ServiceResolver};
use async_trait::async_trait;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

pub struct EndpointSliceResolver {
    services: Arc<RegistryStore>,
    slices: Arc<RegistryStore>,
}

impl EndpointSliceResolver {
    /// The resolver over the built-in Service and EndpointSlice stores, if both are served.
    pub fn new(resources: &apiserver::endpoints::ApiResources) -> Option<Arc<Self>> {
        Some(Arc::new(Self {
            services: resources.get("", "v1", "services")?.clone(),
            slices: resources
                .get("discovery.k8s.io", "v1", "endpointslices")?
                .clone(),
        }))
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

#[async_trait]
impl ServiceResolver for EndpointSliceResolver {
    async fn resolve(&self, service: &ServiceReference) -> Result<(String, u16), String> {
        let ns = &service.namespace;
        let svc = self
            .services
            .get(ns, &service.name, ResourceVersion::Unset)
            .await
            .map_err(|_| format!("service {:?} not found", service.name))?
            .value()
            .map_err(|e| e.to_string())?;
        let port = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(service.port as i64))
            .ok_or_else(|| {
                format!(
                    "no service port {} found for service {:?}",
                    service.port, service.name
                )
            })?;
        let port_name = text(port, "/name");
        let slices = self
            .slices
            .list(ns, &ListOptions::default())
            .await
            .map_err(|e| e.message)?;
        for slice in slices.items.iter().filter_map(|o| o.value().ok()) {
            if text(&slice, "/metadata/labels/kubernetes.io~1service-name") != service.name {
                continue;
            }
            let Some(target) = slice
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|p| text(p, "/name") == port_name)
                .and_then(|p| p.get("port").and_then(Value::as_u64))
            else {
                continue;
            };
            let ready = slice
                .get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|e| e.pointer("/conditions/ready") != Some(&Value::Bool(false)))
                .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str));
            if let Some(address) = ready {
                return Ok((address.to_string(), target as u16));
            }
        }
        Err(format!(
            "no endpoints available for service {:?}",
            service.name
        ))
    }
}
