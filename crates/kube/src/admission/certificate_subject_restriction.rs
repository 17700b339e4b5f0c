//! CertificateSubjectRestriction (upstream: plugin/pkg/admission/certificates/subjectrestriction):
//! nobody may ask the `kubernetes.io/kube-apiserver-client` signer for a certificate in the
//! `system:masters` group, which would bypass every authorizer.

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use async_trait::async_trait;
use serde_json::Value;

const SIGNER: &str = "kubernetes.io/kube-apiserver-client";

pub struct CertificateSubjectRestriction;

#[async_trait]
impl ValidatingPlugin for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        "CertificateSubjectRestriction"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if attrs.operation != Operation::Create
            || !attrs.subresource.is_empty()
            || attrs.resource.group != "certificates.k8s.io"
            || attrs.resource.resource != "certificatesigningrequests"
            || obj.pointer("/spec/signerName").and_then(Value::as_str) != Some(SIGNER)
        {
            return Ok(());
        }
        let refuse =
            |why: String| Status::forbidden(&attrs.resource.group_resource(), obj.name(), why);
        let request = obj
            .pointer("/spec/request")
            .and_then(Value::as_str)
            .unwrap_or("");
        let organizations = crate::strategies::certificates::csr_organizations(request)
            .map_err(|e| refuse(format!("failed to parse CSR: {e}")))?;
        if organizations.iter().any(|o| o == "system:masters") {
            return Err(refuse(format!(
                "use of {SIGNER} signer with system:masters group is not allowed"
            )));
        }
        Ok(())
    }
}
