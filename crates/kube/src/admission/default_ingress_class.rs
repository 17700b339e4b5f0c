//! DefaultIngressClass (upstream: plugin/pkg/admission/network/defaultingressclass): an Ingress
//! created without a class (no `ingressClassName`, no `kubernetes.io/ingress.class`
//! annotation) gets the default IngressClass, the newest of those annotated
//! `ingressclass.kubernetes.io/is-default-class: "true"`.

use std::sync::{Arc, OnceLock};

use apimachinery::Status;
use apiserver::admission::{Attributes, MutatingPlugin, Operation};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;

pub struct DefaultIngressClass {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

#[async_trait]
impl MutatingPlugin for DefaultIngressClass {
    fn name(&self) -> &'static str {
        "DefaultIngressClass"
    }

    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        if attrs.operation != Operation::Create
            || !attrs.subresource.is_empty()
            || attrs.resource.group != "networking.k8s.io"
            || attrs.resource.resource != "ingresses"
        {
            return Ok(());
        }
        let has_class = obj
            .pointer("/spec/ingressClassName")
            .is_some_and(|v| !v.is_null())
            || obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("kubernetes.io/ingress.class"))
                .is_some();
        if has_class {
            return Ok(());
        }
        let default = super::newest_default(
            &self.api,
            ("networking.k8s.io", "v1", "ingressclasses"),
            &["ingressclass.kubernetes.io/is-default-class"],
        )
        .await?;
        if let (Some(name), Some(spec)) =
            (default, obj.get_mut("spec").and_then(Value::as_object_mut))
        {
            spec.insert("ingressClassName".into(), Value::from(name));
        }
        Ok(())
    }
}
