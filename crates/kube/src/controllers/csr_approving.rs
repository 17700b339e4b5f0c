//! The CSR approving controller (upstream: pkg/controller/certificates/approver,
//! `sarApprover`): a kubelet's client certificate request (signer
//! `kubernetes.io/kube-apiserver-client-kubelet`, a request the kubelet-client signer would
//! accept) is approved when its requester may create `certificatesigningrequests/selfnodeclient`
//! (renewing its own certificate: the request's common name is the requester) or
//! `certificatesigningrequests/nodeclient` (TLS bootstrapping), as the server's authorizer
//! answers for the requester recorded in the request's spec. The approval is the `Approved`
//! condition with reason `AutoApproved`, written through `/approval`.

use std::sync::Arc;

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::authorization::Authorizer;
use apiserver::endpoints::ApiResources;
use apiserver::request::RequestInfo;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::csr_signing::{
    KUBELET_CLIENT, check, has_true_condition, parse_request, push_condition, update_request,
};

/// The permission each recognizer asks for, and the message of its approval.
const RECOGNIZERS: [(bool, &str, &str); 2] = [
    (
        true,
        "selfnodeclient",
        "Auto approving self kubelet client certificate after SubjectAccessReview.",
    ),
    (
        false,
        "nodeclient",
        "Auto approving kubelet client certificate after SubjectAccessReview.",
    ),
];

/// The requester recorded in the request's spec (what a SubjectAccessReview of it names).
fn requester(csr: &Value) -> UserInfo {
    crate::strategies::review::spec_user(csr.get("spec").unwrap_or(&Value::Null), "username")
}

/// Which recognizers match `csr`: a pending kubelet client request, and whether its common
/// name is its requester's name. `None` when the controller has nothing to do with it.
fn recognized(csr: &Value) -> Option<Vec<(&'static str, &'static str)>> {
    if csr.pointer("/spec/signerName").and_then(Value::as_str) != Some(KUBELET_CLIENT)
        || has_true_condition(csr, "Approved")
        || has_true_condition(csr, "Denied")
        || csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
    {
        return None;
    }
    let pem = String::from_utf8(
        STANDARD
            .decode(csr.pointer("/spec/request")?.as_str()?)
            .ok()?,
    )
    .ok()?;
    let request = parse_request(&pem).ok()?;
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    check(KUBELET_CLIENT, &request, &usages).ok()?;
    let own = csr.pointer("/spec/username").and_then(Value::as_str) == Some(&request.common_name);
    Some(
        RECOGNIZERS
            .iter()
            .filter(|(self_only, _, _)| !self_only || own)
            .map(|(_, sub, msg)| (*sub, *msg))
            .collect(),
    )
}

/// Watches CertificateSigningRequests and approves the kubelet client requests whose requester
/// may have them. Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, authorizer: Arc<dyn Authorizer>) {
    let Some(store) = api
        .get("certificates.k8s.io", "v1", "certificatesigningrequests")
        .cloned()
    else {
        return;
    };
    let (pending, wake) = super::csr_signing::feed(store.clone());
    let user = super::kube_system_account("certificate-controller");
    loop {
        wake.notified().await;
        let batch: Vec<Value> =
            std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        for csr in batch {
            let Some(recognizers) = recognized(&csr) else {
                continue;
            };
            let who = requester(&csr);
            let mut approval = None;
            for (subresource, message) in recognizers {
                let review = RequestInfo {
                    is_resource_request: true,
                    verb: "create".into(),
                    api_group: "certificates.k8s.io".into(),
                    api_version: "*".into(),
                    resource: "certificatesigningrequests".into(),
                    subresource: subresource.into(),
                    ..Default::default()
                };
                if authorizer.authorize(&who, &review).await.is_allowed() {
                    approval = Some(message);
                    break;
                }
            }
            let Some(message) = approval else {
                tracing::debug!(csr = %csr.name(), "recognized csr but subject access review was not approved");
                continue;
            };
            let approve = |next: &mut Value| {
                let condition = json!({"type": "Approved", "status": "True",
                    "reason": "AutoApproved", "message": message});
                push_condition(next, condition);
            };
            if let Err(e) = update_request(&api, &store, &user, &csr, "approval", approve).await {
                tracing::warn!(csr = %csr.name(), error = %e.message, "error updating approval for csr");
            }
        }
    }
}
