//! NamespaceLifecycle (upstream:
//! plugin/pkg/admission/namespace/lifecycle): no new objects in a namespace that does not exist
//! (404) or is being deleted (403, with upstream's `NamespaceTerminating` cause), and the system
//! namespaces cannot be deleted.

use std::sync::{Arc, OnceLock};

use apimachinery::{GroupResource, Status, StatusCause};
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;
use storage::ResourceVersion;

/// Namespaces that exist from the start and may not be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

pub struct NamespaceLifecycle {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

#[async_trait]
impl ValidatingPlugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    async fn validate(&self, attrs: &Attributes<'_>, _obj: &Value) -> Result<(), Status> {
        let namespaces = GroupResource::new("", "namespaces");
        if attrs.resource.group.is_empty() && attrs.resource.resource == "namespaces" {
            if attrs.operation == Operation::Delete && IMMORTAL_NAMESPACES.contains(&attrs.name) {
                return Err(Status::forbidden(
                    &namespaces,
                    attrs.name,
                    "this namespace may not be deleted",
                ));
            }
            return Ok(());
        }
        // Access reviews are always answered: refusing one would tell about the namespace.
        let access_review = attrs.resource.group == "authorization.k8s.io"
            && matches!(
                attrs.resource.resource.as_str(),
                "localsubjectaccessreviews" | "subjectaccessreviews"
            );
        if !attrs.resource.namespaced
            || attrs.operation != Operation::Create
            || attrs.namespace.is_empty()
            || access_review
        {
            return Ok(());
        }
        let Some(store) = self.api.get().and_then(|a| a.get("", "v1", "namespaces")) else {
            return Ok(());
        };
        // Read from the watch cache first (cheap); a miss is confirmed with a consistent read, as
        // upstream does, so a namespace created a moment ago is found.
        let ns = match store.get("", attrs.namespace, ResourceVersion::Any).await {
            Ok(o) => o,
            Err(s) if s.code == 404 => store
                .get("", attrs.namespace, ResourceVersion::Unset)
                .await
                .map_err(|_| Status::not_found(&namespaces, attrs.namespace))?,
            Err(s) => return Err(s),
        };
        // Upstream refuses by the phase alone (a deleted namespace is `Terminating` from the
        // write that sets its deletionTimestamp). The phase is a selectable field of namespaces,
        // so the stored object carries it already decoded: nothing is parsed per create.
        if ns.attrs.fields.get("status.phase").map(String::as_str) == Some("Terminating") {
            // The `NamespaceTerminating` cause is how controllers (kube-controller-manager's
            // workload, endpoints and service account controllers) tell a refusal they should
            // ignore from one they should retry and report.
            let mut refusal = Status::forbidden(
                &attrs.resource.group_resource(),
                attrs.name,
                format!(
                    "unable to create new content in namespace {} because it is being terminated",
                    attrs.namespace
                ),
            );
            if let Some(d) = refusal.details.as_mut() {
                d.causes.push(StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {} is being terminated", attrs.namespace),
                    field: "metadata.namespace".into(),
                });
            }
            return Err(refusal);
        }
        Ok(())
    }
}
