//! The CSR cleaner (upstream: pkg/controller/certificates/cleaner): CertificateSigningRequests
//! do not pile up. A request is deleted an hour after it was denied or failed, an hour after it
//! was approved once its certificate is issued (or when that certificate expires, if sooner), a
//! day after it was approved without a certificate, and a day after it was created if nobody
//! has handled it. Upstream looks every hour; this controller acts at each deadline.

use std::sync::Arc;

use apiserver::endpoints::ApiResources;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::expiry::{self, Expiring};

const APPROVED_EXPIRATION: Duration = Duration::hours(1);
const DENIED_EXPIRATION: Duration = Duration::hours(1);
const PENDING_EXPIRATION: Duration = Duration::hours(24);

/// The `notAfter` of the first certificate of a PEM bundle.
fn not_after(pem_b64: &str) -> Option<DateTime<Utc>> {
    let pem = STANDARD.decode(pem_b64).ok()?;
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let cert = block.parse_x509().ok()?;
    DateTime::from_timestamp(cert.validity().not_after.timestamp(), 0)
}

/// When the cleaner deletes `csr`: the earliest of upstream's deadlines that apply.
fn expires(csr: &Value) -> Option<DateTime<Utc>> {
    let certificate = csr
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let conditions = csr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let updated = |c: &Value| c["lastUpdateTime"].as_str().and_then(expiry::parse_time);
    let mut deadlines: Vec<DateTime<Utc>> = Vec::new();
    for c in &conditions {
        match c["type"].as_str() {
            Some("Denied" | "Failed") => {
                deadlines.extend(updated(c).map(|t| t + DENIED_EXPIRATION))
            }
            Some("Approved") => match certificate {
                Some(cert) => {
                    deadlines.extend(updated(c).map(|t| t + APPROVED_EXPIRATION));
                    deadlines.extend(not_after(cert));
                }
                None => deadlines.extend(updated(c).map(|t| t + PENDING_EXPIRATION)),
            },
            _ => {}
        }
    }
    if conditions.is_empty() {
        let created = csr
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(expiry::parse_time);
        deadlines.extend(created.map(|t| t + PENDING_EXPIRATION));
    }
    deadlines.into_iter().min()
}

/// Runs until the process ends.
pub async fn run(api: Arc<ApiResources>) {
    let Some(store) = api
        .get("certificates.k8s.io", "v1", "certificatesigningrequests")
        .cloned()
    else {
        return;
    };
    expiry::run(Expiring {
        store,
        expires,
        propagation: None,
        user: super::kube_system_account("certificate-controller"),
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> Option<DateTime<Utc>> {
        expiry::parse_time(s)
    }

    #[test]
    fn deadlines_as_upstream_sets_them() {
        let created = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            expires(&created),
            t("2026-01-02T00:00:00Z"),
            "pending: a day"
        );
        let denied = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Denied", "status": "True", "lastUpdateTime": "2026-01-01T00:10:00Z"}]}});
        assert_eq!(
            expires(&denied),
            t("2026-01-01T01:10:00Z"),
            "denied: an hour"
        );
        let approved = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Approved", "status": "True", "lastUpdateTime": "2026-01-01T00:10:00Z"}]}});
        assert_eq!(
            expires(&approved),
            t("2026-01-02T00:10:00Z"),
            "approved, unissued: a day"
        );
        // Issued: an hour after approval, or when the certificate expires if that is sooner.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2026, 1, 1);
        let pem = params.self_signed(&key).unwrap().pem();
        let mut issued = approved.clone();
        issued["status"]["certificate"] = json!(STANDARD.encode(pem));
        assert_eq!(expires(&issued), t("2026-01-01T00:00:00Z"));
    }
}
