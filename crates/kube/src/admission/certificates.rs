//! CertificateApproval and CertificateSigning (upstream: plugin/pkg/admission/certificates/
//! approval and signing): approving or denying a CertificateSigningRequest (`/approval`) needs
//! the `approve` verb, and writing its certificate or changing its conditions through `/status`
//! needs the `sign` verb, on the synthetic resource `signers` of `certificates.k8s.io` named by
//! the request's signer, or on `<domain>/*` for every signer of its domain
//! (pkg/certauthorization). Both only ask the server's authorizer.

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::validation::go_quote;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::authentication::UserInfo;
use apiserver::authorization::Authorizer;
use apiserver::request::RequestInfo;
use async_trait::async_trait;
use serde_json::Value;

use super::forbidden;

fn is_csr(attrs: &Attributes<'_>, subresource: &str) -> bool {
    attrs.operation == Operation::Update
        && attrs.subresource == subresource
        && attrs.resource.group == "certificates.k8s.io"
        && attrs.resource.resource == "certificatesigningrequests"
}

fn signer_name(csr: &Value) -> &str {
    csr.pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `IsAuthorizedForSignerName`: `verb` on the signer, else on its domain's wildcard.
async fn authorized_for_signer(
    authz: &dyn Authorizer,
    user: &UserInfo,
    verb: &str,
    signer: &str,
) -> bool {
    let domain = signer.split('/').next().unwrap_or("");
    for name in [signer.to_string(), format!("{domain}/*")] {
        let request = RequestInfo {
            is_resource_request: true,
            verb: verb.to_string(),
            api_group: "certificates.k8s.io".into(),
            api_version: "*".into(),
            resource: "signers".into(),
            name,
            ..Default::default()
        };
        if authz.authorize(user, &request).await.is_allowed() {
            return true;
        }
    }
    false
}

pub struct CertificateApproval {
    pub authorizer: Arc<dyn Authorizer>,
}

#[async_trait]
impl ValidatingPlugin for CertificateApproval {
    fn name(&self) -> &'static str {
        "CertificateApproval"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !is_csr(attrs, "approval") {
            return Ok(());
        }
        let Some(old) = attrs.old_object else {
            return Ok(());
        };
        let signer = signer_name(old);
        if authorized_for_signer(self.authorizer.as_ref(), attrs.user, "approve", signer).await {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            obj,
            format!(
                "user not permitted to approve requests with signerName {}",
                go_quote(signer)
            ),
        ))
    }
}

pub struct CertificateSigning {
    pub authorizer: Arc<dyn Authorizer>,
}

#[async_trait]
impl ValidatingPlugin for CertificateSigning {
    fn name(&self) -> &'static str {
        "CertificateSigning"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !is_csr(attrs, "status") {
            return Ok(());
        }
        let Some(old) = attrs.old_object else {
            return Ok(());
        };
        // Only a change of the certificate or of the conditions is signing.
        let field = |v: &Value, f: &str| {
            v.get("status")
                .and_then(|s| s.get(f))
                .filter(|x| !x.is_null())
                .cloned()
        };
        if field(old, "certificate") == field(obj, "certificate")
            && field(old, "conditions") == field(obj, "conditions")
        {
            return Ok(());
        }
        let signer = signer_name(old);
        if authorized_for_signer(self.authorizer.as_ref(), attrs.user, "sign", signer).await {
            return Ok(());
        }
        Err(forbidden(
            attrs,
            obj,
            format!(
                "user not permitted to sign requests with signerName {}",
                go_quote(signer)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiserver::authorization::Decision;
    use apiserver::registry::ResourceInfo;
    use serde_json::json;
    use std::sync::Mutex;

    /// Allows only what is listed (verb, name), and records what it was asked.
    struct Only {
        allowed: Vec<(&'static str, &'static str)>,
        asked: Mutex<Vec<RequestInfo>>,
    }

    #[async_trait]
    impl Authorizer for Only {
        async fn authorize(&self, _user: &UserInfo, r: &RequestInfo) -> Decision {
            self.asked.lock().unwrap().push(r.clone());
            if self
                .allowed
                .iter()
                .any(|(v, n)| *v == r.verb && *n == r.name)
            {
                Decision::Allow(String::new())
            } else {
                Decision::Deny("no".into())
            }
        }
    }

    fn csr_info() -> Arc<ResourceInfo> {
        crate::catalog::builtin_resources()
            .into_iter()
            .find(|r| {
                r.group == "certificates.k8s.io" && r.resource == "certificatesigningrequests"
            })
            .expect("CSRs are in the catalog")
    }

    fn csr(conditions: Value) -> Value {
        json!({"metadata": {"name": "req"}, "spec": {"signerName": "example.com/signer"}, "status": {"conditions": conditions}})
    }

    async fn run(
        plugin: &dyn ValidatingPlugin,
        sub: &str,
        old: &Value,
        new: &Value,
    ) -> Result<(), Status> {
        let info = csr_info();
        let user = UserInfo {
            name: "alice".into(),
            ..Default::default()
        };
        let attrs = Attributes {
            operation: Operation::Update,
            resource: &info,
            subresource: sub,
            namespace: "",
            name: "req",
            user: &user,
            dry_run: false,
            old_object: Some(old),
            state: Default::default(),
        };
        plugin.validate(&attrs, new).await
    }

    #[tokio::test]
    async fn approval_needs_approve_on_the_signer_or_its_domain() {
        let old = csr(json!([]));
        let new = csr(json!([{"type": "Approved", "status": "True"}]));
        let deny = Arc::new(Only {
            allowed: vec![],
            asked: Mutex::new(vec![]),
        });
        let plugin = CertificateApproval {
            authorizer: deny.clone(),
        };
        let err = run(&plugin, "approval", &old, &new).await.unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            r#"certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to approve requests with signerName "example.com/signer""#
        );
        let asked = deny.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 2);
        assert_eq!(
            (
                asked[0].verb.as_str(),
                asked[0].api_group.as_str(),
                asked[0].api_version.as_str(),
                asked[0].resource.as_str(),
                asked[0].name.as_str()
            ),
            (
                "approve",
                "certificates.k8s.io",
                "*",
                "signers",
                "example.com/signer"
            )
        );
        assert_eq!(asked[1].name, "example.com/*");
        // The domain wildcard is enough.
        let plugin = CertificateApproval {
            authorizer: Arc::new(Only {
                allowed: vec![("approve", "example.com/*")],
                asked: Mutex::new(vec![]),
            }),
        };
        assert!(run(&plugin, "approval", &old, &new).await.is_ok());
        // Other subresources are not this plugin's.
        let plugin = CertificateApproval { authorizer: deny };
        assert!(run(&plugin, "status", &old, &new).await.is_ok());
    }

    #[tokio::test]
    async fn signing_needs_sign_when_the_certificate_or_conditions_change() {
        let deny = Arc::new(Only {
            allowed: vec![],
            asked: Mutex::new(vec![]),
        });
        let plugin = CertificateSigning {
            authorizer: deny.clone(),
        };
        let old = csr(json!([{"type": "Approved", "status": "True"}]));
        // Nothing signing-related changed: not asked.
        assert!(run(&plugin, "status", &old, &old.clone()).await.is_ok());
        assert!(deny.asked.lock().unwrap().is_empty());
        let mut signed = old.clone();
        signed["status"]["certificate"] = json!("Y2VydA==");
        let err = run(&plugin, "status", &old, &signed).await.unwrap_err();
        assert_eq!(
            err.message,
            r#"certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to sign requests with signerName "example.com/signer""#
        );
        let plugin = CertificateSigning {
            authorizer: Arc::new(Only {
                allowed: vec![("sign", "example.com/signer")],
                asked: Mutex::new(vec![]),
            }),
        };
        assert!(run(&plugin, "status", &old, &signed).await.is_ok());
    }
}
