//! The csrsigning controller (upstream: pkg/controller/certificates/signer): approved
//! CertificateSigningRequests for the `kubernetes.io/kube-apiserver-client`,
//! `kubernetes.io/kube-apiserver-client-kubelet` and `kubernetes.io/kubelet-serving` signers
//! are signed with the cluster CA — the CA that verifies client certificates, so an issued
//! client certificate authenticates. Each signer's checks are upstream's; a request that fails
//! them gets the `Failed` condition with reason `SignerValidationFailure` instead of a
//! certificate. Certificates last the requested `expirationSeconds` (at least 10 minutes) or a
//! year, start 5 minutes in the past, and end with the CA at the latest.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apimachinery::object::ObjectExt;
use apimachinery::status::Status;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use serde_json::{Value, json};

/// `--cluster-signing-duration`'s default.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
const MIN_DURATION: Duration = Duration::from_secs(600);
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Below this lifetime the backdating is not taken off the end (`PermissiveSigningPolicy.Short`).
const SHORT: Duration = Duration::from_secs(8 * 3600);
const RETRY: Duration = Duration::from_secs(1);

const CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub(super) const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The cluster CA, as PEM texts.
#[derive(Clone)]
pub struct ClusterCa {
    pub cert_pem: String,
    pub key_pem: String,
    /// `--cluster-signing-duration`: the longest lifetime of a certificate (and the lifetime of
    /// one whose request asks none).
    pub duration: Duration,
}

pub(super) fn has_true_condition(csr: &Value, kind: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

/// What of the request the signers look at.
pub(super) struct Request {
    organizations: Vec<String>,
    pub(super) common_name: String,
    dns: usize,
    ips: usize,
    emails: usize,
    uris: usize,
}

pub(super) fn parse_request(pem: &str) -> Result<Request, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| format!("PEM block type must be CERTIFICATE REQUEST: {e}"))?;
    use x509_parser::prelude::FromDer;
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .map_err(|e| e.to_string())?;
    let subject = &csr.certification_request_info.subject;
    let mut request = Request {
        organizations: subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect(),
        common_name: subject
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok().map(str::to_string))
            .unwrap_or_default(),
        dns: 0,
        ips: 0,
        emails: 0,
        uris: 0,
    };
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                use x509_parser::extensions::GeneralName;
                match name {
                    GeneralName::DNSName(_) => request.dns += 1,
                    GeneralName::IPAddress(_) => request.ips += 1,
                    GeneralName::RFC822Name(_) => request.emails += 1,
                    GeneralName::URI(_) => request.uris += 1,
                    _ => {}
                }
            }
        }
    }
    Ok(request)
}

fn usage_set(usages: &[&str]) -> Vec<String> {
    let mut set: Vec<String> = usages.iter().map(|u| u.to_string()).collect();
    set.sort();
    set.dedup();
    set
}

/// Go's `%v` of a sorted string list.
fn go_list(list: &[&str]) -> String {
    format!("[{}]", list.join(" "))
}

/// The signer's checks (`isKubeAPIServerClient`, `ValidateKubeletClientCSR`,
/// `ValidateKubeletServingCSR`), with upstream's messages.
pub(super) fn check(signer: &str, req: &Request, usages: &[&str]) -> Result<(), String> {
    let set = usage_set(usages);
    let equals = |want: &[&str]| set == usage_set(want);
    match signer {
        CLIENT => {
            for u in usages {
                if !matches!(*u, "digital signature" | "key encipherment" | "client auth") {
                    return Err(format!("invalid usage for client certificate: {u}"));
                }
            }
            if !usages.contains(&"client auth") {
                return Err("missing required usage for client certificate: client auth".into());
            }
            Ok(())
        }
        KUBELET_CLIENT => {
            if req.organizations != ["system:nodes"] {
                return Err("subject organization is not system:nodes".into());
            }
            if req.dns > 0 {
                return Err("DNS subjectAltNames are not allowed".into());
            }
            if req.emails > 0 {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if req.ips > 0 {
                return Err("IP subjectAltNames are not allowed".into());
            }
            if req.uris > 0 {
                return Err("URI subjectAltNames are not allowed".into());
            }
            if !req.common_name.starts_with("system:node:") {
                return Err("subject common name does not begin with system:node:".into());
            }
            let full = ["client auth", "digital signature", "key encipherment"];
            if !equals(&full) && !equals(&["digital signature", "client auth"]) {
                return Err(format!("usages did not match {}", go_list(&full)));
            }
            Ok(())
        }
        _ => {
            if req.organizations != ["system:nodes"] {
                return Err("subject organization is not system:nodes".into());
            }
            if req.dns == 0 && req.ips == 0 {
                return Err("DNS or IP subjectAltName is required".into());
            }
            if req.emails > 0 {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if req.uris > 0 {
                return Err("URI subjectAltNames are not allowed".into());
            }
            let full = ["digital signature", "key encipherment", "server auth"];
            if !equals(&full) && !equals(&["digital signature", "server auth"]) {
                return Err(format!("usages did not match {}", go_list(&full)));
            }
            if !req.common_name.starts_with("system:node:") {
                return Err("subject common name does not begin with system:node:".into());
            }
            Ok(())
        }
    }
}

/// The certificate for `request_pem`, as PEM.
fn sign(
    ca: &ClusterCa,
    request_pem: &str,
    usages: &[&str],
    expiration_seconds: Option<i64>,
) -> Result<String, String> {
    let key = KeyPair::from_pem(&ca.key_pem).map_err(|e| e.to_string())?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, key).map_err(|e| e.to_string())?;
    let mut csr =
        CertificateSigningRequestParams::from_pem(request_pem).map_err(|e| e.to_string())?;
    // Upstream's `duration`: the request's own, at most the signing duration, at least ten
    // minutes.
    let ttl = match expiration_seconds {
        None => ca.duration,
        Some(s) => {
            let asked = Duration::from_secs(s.max(0) as u64);
            if asked > ca.duration {
                ca.duration
            } else {
                asked.max(MIN_DURATION)
            }
        }
    };
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let params = &mut csr.params;
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = if ttl < SHORT {
        epoch + since_epoch + ttl
    } else {
        epoch + since_epoch + ttl - BACKDATE
    };
    // Never past the CA's own end.
    if let Ok((_, block)) = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes())
        && let Ok(cert) = block.parse_x509()
    {
        let ca_end =
            epoch + Duration::from_secs(cert.validity().not_after.timestamp().max(0) as u64);
        if params.not_after > ca_end {
            params.not_after = ca_end;
        }
    }
    let mut serial = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial)
        .map_err(|_| "no randomness for the serial number".to_string())?;
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params.is_ca = IsCa::NoCa;
    params.use_authority_key_identifier_extension = true;
    params.key_usages = usages
        .iter()
        .filter_map(|u| match *u {
            "signing" | "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "content commitment" => Some(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => Some(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => Some(KeyUsagePurpose::DataEncipherment),
            "cert sign" => Some(KeyUsagePurpose::KeyCertSign),
            "crl sign" => Some(KeyUsagePurpose::CrlSign),
            "encipher only" => Some(KeyUsagePurpose::EncipherOnly),
            "decipher only" => Some(KeyUsagePurpose::DecipherOnly),
            _ => None,
        })
        .collect();
    params.extended_key_usages = usages
        .iter()
        .filter_map(|u| match *u {
            "any" => Some(ExtendedKeyUsagePurpose::Any),
            "server auth" => Some(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => Some(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => Some(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" | "s/mime" => Some(ExtendedKeyUsagePurpose::EmailProtection),
            "timestamping" => Some(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => Some(ExtendedKeyUsagePurpose::OcspSigning),
            _ => None,
        })
        .collect();
    let cert = csr.signed_by(&issuer).map_err(|e| e.to_string())?;
    Ok(cert.pem())
}

/// What the controller does with one request: nothing, a certificate, or a failure condition.
enum Action {
    Sign(String),
    Fail(String),
}

fn decide(ca: &ClusterCa, csr: &Value) -> Option<Action> {
    let signer = csr.pointer("/spec/signerName").and_then(Value::as_str)?;
    if !matches!(signer, CLIENT | KUBELET_CLIENT | KUBELET_SERVING)
        || !has_true_condition(csr, "Approved")
        || has_true_condition(csr, "Failed")
        || csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
    {
        return None;
    }
    let request = csr.pointer("/spec/request").and_then(Value::as_str)?;
    let pem = String::from_utf8(STANDARD.decode(request).ok()?).ok()?;
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parsed = match parse_request(&pem) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(csr = %csr.name(), error = %e, "unable to parse csr");
            return None;
        }
    };
    if let Err(why) = check(signer, &parsed, &usages) {
        return Some(Action::Fail(why));
    }
    let expiration = csr
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64);
    match sign(ca, &pem, &usages, expiration) {
        Ok(cert) => Some(Action::Sign(cert)),
        Err(e) => {
            tracing::warn!(csr = %csr.name(), error = %e, "error auto signing csr");
            None
        }
    }
}

/// CertificateSigningRequests to look at, fed by a list and a watch: every added or changed
/// request is pushed and the returned `Notify` woken.
pub(super) type Feed = (Arc<Mutex<Vec<Value>>>, Arc<tokio::sync::Notify>);

pub(super) fn feed(store: Arc<RegistryStore>) -> Feed {
    let pending: Arc<Mutex<Vec<Value>>> = Arc::default();
    let wake = Arc::new(tokio::sync::Notify::new());
    {
        let (pending, wake) = (pending.clone(), wake.clone());
        tokio::spawn(reflector::run(store.clone(), move |delta| {
            let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
            match delta {
                Delta::Replace(items) => p.extend(items),
                Delta::Upsert(v) => p.push(v),
                Delta::Deleted(_) => return,
            }
            wake.notify_one();
        }));
    }
    (pending, wake)
}

/// Appends `condition` to the request's `status.conditions`.
pub(super) fn push_condition(csr: &mut Value, condition: Value) {
    match csr["status"]["conditions"].as_array_mut() {
        Some(cs) => cs.push(condition),
        None => csr["status"]["conditions"] = json!([condition]),
    }
}

/// Writes what `change` does to request `csr` through `subresource` (`approval` for the
/// approving controller's condition, `status` for the signer's certificate or failure), as the
/// certificate controller `user` with the controller manager's field manager. `change` is made
/// to the request as stored, read again if it changed meanwhile.
pub(super) async fn update_request(
    api: &ApiResources,
    store: &RegistryStore,
    user: &UserInfo,
    csr: &Value,
    subresource: &str,
    change: impl Fn(&mut Value) + Send + Sync,
) -> Result<(), Status> {
    let mut updater = |current: Option<&Value>| {
        let mut next = current.cloned().unwrap_or_else(|| csr.clone());
        change(&mut next);
        Ok(next)
    };
    let opts = UpdateOptions {
        write: api.internal_write(store, super::CONTROLLER_MANAGER),
        subresource: subresource.into(),
        ..Default::default()
    };
    let requester = Requester { user };
    store
        .update(&requester, "", csr.name(), &mut updater, &opts)
        .await
        .map(|_| ())
}

/// Watches CertificateSigningRequests and signs the approved ones. Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, ca: ClusterCa) {
    let Some(store) = api
        .get("certificates.k8s.io", "v1", "certificatesigningrequests")
        .cloned()
    else {
        return;
    };
    let (pending, wake) = feed(store.clone());
    let user = super::kube_system_account("certificate-controller");
    loop {
        wake.notified().await;
        let batch: Vec<Value> =
            std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        let mut retry = Vec::new();
        for csr in batch {
            let Some(action) = decide(&ca, &csr) else {
                continue;
            };
            let change = |next: &mut Value| match &action {
                Action::Sign(pem) => {
                    next["status"]["certificate"] = json!(STANDARD.encode(pem));
                }
                Action::Fail(why) => {
                    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                    let condition = json!({"type": "Failed", "status": "True",
                        "reason": "SignerValidationFailure", "message": why,
                        "lastUpdateTime": now, "lastTransitionTime": now});
                    push_condition(next, condition);
                }
            };
            if let Err(e) = update_request(&api, &store, &user, &csr, "status", change).await {
                tracing::warn!(csr = %csr.name(), error = %e.message, "error updating signature for csr");
                if e.code != 404 {
                    retry.push(csr);
                }
            }
        }
        if !retry.is_empty() {
            pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(retry);
            let wake = wake.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RETRY).await;
                wake.notify_one();
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, orgs: &[&str], dns: usize) -> Request {
        Request {
            organizations: orgs.iter().map(|s| s.to_string()).collect(),
            common_name: cn.into(),
            dns,
            ips: 0,
            emails: 0,
            uris: 0,
        }
    }

    #[test]
    fn signers_check_requests_as_upstream() {
        let plain = request("jane", &["devs"], 0);
        assert!(check(CLIENT, &plain, &["client auth", "digital signature"]).is_ok());
        assert_eq!(
            check(CLIENT, &plain, &["server auth"]).unwrap_err(),
            "invalid usage for client certificate: server auth"
        );
        assert_eq!(
            check(CLIENT, &plain, &["digital signature"]).unwrap_err(),
            "missing required usage for client certificate: client auth"
        );
        assert_eq!(
            check(KUBELET_CLIENT, &plain, &["client auth"]).unwrap_err(),
            "subject organization is not system:nodes"
        );
        let node = request("system:node:n1", &["system:nodes"], 0);
        assert!(check(KUBELET_CLIENT, &node, &["digital signature", "client auth"]).is_ok());
        assert_eq!(
            check(KUBELET_CLIENT, &node, &["client auth"]).unwrap_err(),
            "usages did not match [client auth digital signature key encipherment]"
        );
        assert_eq!(
            check(
                KUBELET_SERVING,
                &node,
                &["digital signature", "server auth"]
            )
            .unwrap_err(),
            "DNS or IP subjectAltName is required"
        );
        let serving = request("system:node:n1", &["system:nodes"], 1);
        assert!(
            check(
                KUBELET_SERVING,
                &serving,
                &["digital signature", "server auth"]
            )
            .is_ok()
        );
    }

    #[test]
    fn signing_keeps_the_subject_and_bounds_the_lifetime() {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let ca = ClusterCa {
            cert_pem: ca_cert.pem(),
            key_pem: ca_key.serialize_pem(),
            duration: Duration::from_secs(2 * 3600),
        };
        let key = KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "jane");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "devs");
        let csr_pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let pem = sign(
            &ca,
            &csr_pem,
            &["client auth", "digital signature"],
            Some(3600),
        )
        .unwrap();
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = block.parse_x509().unwrap();
        assert_eq!(
            cert.subject()
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "jane"
        );
        let lifetime =
            cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
        // Short-lived: backdated 5 minutes, ending an hour from now.
        assert_eq!(lifetime, 3600 + 300);
        // Asked longer than the signing duration: the duration; asked nothing: the duration.
        for asked in [Some(24 * 3600), None] {
            let pem = sign(&ca, &csr_pem, &["client auth"], asked).unwrap();
            let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
            let cert = block.parse_x509().unwrap();
            let lifetime =
                cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
            assert_eq!(lifetime, 2 * 3600 + 300);
        }
        assert!(
            cert.extended_key_usage()
                .unwrap()
                .unwrap()
                .value
                .client_auth
        );
    }
}
