//! Client certificate authentication (`--client-ca-file`), as upstream's `request/x509`
//! package does it: the chain the TLS handshake received is verified here against the client
//! CA (validity period, signatures up to a CA certificate, `clientAuth` extended key usage when
//! the certificate lists extended key usages), and a verified leaf becomes the user named by its
//! subject's CN with one group per `O`.
//!
//! Verifying a chain costs an ECDSA or RSA signature check (tens of microseconds, several
//! percent of a small write's CPU), and a client sends the same chain with every request, so
//! successful verifications are remembered for a minute, never past the leaf's `notAfter` (or
//! before its `notBefore`). Failures are not remembered.
//!
//! The TLS layer accepts any chain (see `serving::tls`), so this module is the only place where
//! a client certificate is trusted; it must not trust a chain it did not verify, and it must
//! not fail the connection: an unverifiable certificate is an [`AuthnError`] (401), which lets a
//! bearer token on the same request authenticate instead.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{CertificateError, RootCertStore};
use x509_parser::asn1_rs::Tag;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;
use x509_parser::x509::AttributeTypeAndValue;

use super::{Authenticator, AuthnError, AuthnRequest, CREDENTIAL_ID_KEY, UserInfo, sha256};

/// Why a client CA bundle could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error("client CA bundle contains no certificates")]
    NoCertificates,
    #[error("reading client CA bundle: {0}")]
    Pem(String),
    #[error("client CA certificate {index} is not a usable trust anchor: {source}")]
    Certificate {
        index: usize,
        #[source]
        source: rustls::Error,
    },
    #[error("building client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// Authenticates requests by their verified client certificate.
#[derive(Debug, Clone)]
pub struct ClientCertAuthenticator {
    verifier: Arc<dyn ClientCertVerifier>,
    verified: Arc<Mutex<HashMap<Vec<u8>, Verified>>>,
}

/// A chain that verified, and until when that holds.
#[derive(Debug, Clone)]
struct Verified {
    user: Option<UserInfo>,
    /// Seconds since the epoch: the leaf's validity, cut to [`VERIFIED_FOR`] after the check.
    from: u64,
    until: u64,
}

/// How long a verified chain is trusted without checking it again.
const VERIFIED_FOR: Duration = Duration::from_secs(60);
/// The most chains remembered; past it the memory starts over.
const MAX_VERIFIED: usize = 1024;

/// A map key for a chain: each certificate's DER, length-prefixed.
fn chain_key(chain: &[CertificateDer<'_>]) -> Vec<u8> {
    let mut key = Vec::with_capacity(chain.iter().map(|c| c.len() + 4).sum());
    for cert in chain {
        key.extend_from_slice(&(cert.len() as u32).to_be_bytes());
        key.extend_from_slice(cert);
    }
    key
}

impl ClientCertAuthenticator {
    /// Trusts every certificate of a PEM bundle (the contents of `--client-ca-file`).
    pub fn from_ca_pem(pem: &[u8]) -> Result<Self, ClientCaError> {
        let mut roots = RootCertStore::empty();
        for (index, cert) in CertificateDer::pem_slice_iter(pem).enumerate() {
            let cert = cert.map_err(|e| ClientCaError::Pem(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|source| ClientCaError::Certificate { index, source })?;
        }
        if roots.is_empty() {
            return Err(ClientCaError::NoCertificates);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // The rustls verifier is used only for its chain building and checks; whether a
        // request may go on without a certificate is decided by the union of authenticators.
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()?;
        Ok(Self {
            verifier,
            verified: Arc::default(),
        })
    }

    /// Verifies `chain` (leaf first, then the intermediates the client sent) at time `now` and
    /// converts the leaf into a user. `Ok(None)` for a verified certificate without a CN, as
    /// upstream's `CommonNameUserConversion` gives no user for it.
    pub fn verify(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<Option<UserInfo>, AuthnError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        let key = chain_key(chain);
        let at = now.as_secs();
        if let Ok(verified) = self.verified.lock()
            && let Some(v) = verified.get(&key)
            && v.from <= at
            && at < v.until
        {
            return Ok(v.user.clone());
        }
        if let Err(err) = self.verifier.verify_client_cert(leaf, intermediates, now) {
            return Err(AuthnError::Certificate {
                identifier: certificate_identifier(leaf),
                reason: verification_reason(&err),
            });
        }
        let parsed = match x509_parser::parse_x509_certificate(leaf) {
            Ok((_, parsed)) => parsed,
            Err(err) => {
                return Err(AuthnError::Certificate {
                    identifier: certificate_identifier(leaf),
                    reason: format!("x509: malformed certificate: {err}"),
                });
            }
        };
        let user = user_from_certificate(&parsed, leaf);
        let validity = parsed.validity();
        let entry = Verified {
            user: user.clone(),
            from: validity.not_before.timestamp().max(0) as u64,
            until: (validity.not_after.timestamp().max(0) as u64).min(at + VERIFIED_FOR.as_secs()),
        };
        if let Ok(mut verified) = self.verified.lock() {
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
            verified.insert(key, entry);
        }
        Ok(user)
    }
}

#[async_trait]
impl Authenticator for ClientCertAuthenticator {
    async fn authenticate(&self, req: &AuthnRequest<'_>) -> Result<Option<UserInfo>, AuthnError> {
        match req.peer_certificates {
            Some(chain) if !chain.is_empty() => self.verify(chain, UnixTime::now()),
            _ => Ok(None),
        }
    }
}

/// The user of a verified leaf: the subject's CN (the last one, if several, as Go's
/// `pkix.Name` keeps) and every `O` as a group, in order. The credential id is the SHA-256 of
/// the certificate, as upstream records it in `user.extra`.
fn user_from_certificate(cert: &X509Certificate<'_>, der: &[u8]) -> Option<UserInfo> {
    let name = cert
        .subject()
        .iter_common_name()
        .filter_map(attribute_string)
        .last()?;
    if name.is_empty() {
        return None;
    }
    let groups = cert
        .subject()
        .iter_organization()
        .filter_map(attribute_string)
        .collect();
    let credential_id = format!("X509SHA256={}", hex(&sha256(der), ""));
    Some(UserInfo {
        name,
        uid: String::new(),
        groups,
        extra: [(CREDENTIAL_ID_KEY.to_string(), vec![credential_id])].into(),
    })
}

/// The text of a name attribute, for the string types Go's certificate parser reads
/// (UTF8String, PrintableString, IA5String, NumericString, T61String as Latin-1, BMPString);
/// Go skips attributes of other types, and so does this.
fn attribute_string(attr: &AttributeTypeAndValue<'_>) -> Option<String> {
    let value = attr.attr_value();
    match value.header.tag() {
        Tag::T61String => Some(value.data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = value
                .data
                .chunks(2)
                .map(|c| match c {
                    [hi, lo] => u16::from_be_bytes([*hi, *lo]),
                    _ => 0xFFFD,
                })
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => attr.as_str().ok().map(str::to_string),
    }
}

/// Names a certificate in log lines as upstream does: `SN=<decimal>, SKID=<hex>, AKID=<hex>`.
fn certificate_identifier(der: &[u8]) -> String {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return "(unparsable certificate)".to_string();
    };
    let mut skid: &[u8] = &[];
    let mut akid: &[u8] = &[];
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => skid = id.0,
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                if let Some(id) = &aki.key_identifier {
                    akid = id.0;
                }
            }
            _ => {}
        }
    }
    format!(
        "SN={}, SKID={}, AKID={}",
        cert.tbs_certificate.serial,
        hex(skid, ":").to_uppercase(),
        hex(akid, ":").to_uppercase()
    )
}

fn hex(bytes: &[u8], separator: &str) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Words a verification failure as Go's `crypto/x509` does, so that log lines read like
/// upstream's.
fn verification_reason(err: &rustls::Error) -> String {
    const EXPIRED: &str = "x509: certificate has expired or is not yet valid";
    match err {
        rustls::Error::InvalidCertificate(cert_err) => match cert_err {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                "x509: certificate signed by unknown authority".to_string()
            }
            CertificateError::ExpiredContext { time, not_after } => format!(
                "{EXPIRED}: current time {} is after {}",
                rfc3339(time),
                rfc3339(not_after)
            ),
            CertificateError::NotValidYetContext { time, not_before } => format!(
                "{EXPIRED}: current time {} is before {}",
                rfc3339(time),
                rfc3339(not_before)
            ),
            CertificateError::Expired | CertificateError::NotValidYet => EXPIRED.to_string(),
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                "x509: certificate specifies an incompatible key usage".to_string()
            }
            other => format!("x509: {other:?}"),
        },
        other => format!("x509: {other}"),
    }
}

fn rfc3339(time: &UnixTime) -> String {
    i64::try_from(time.as_secs())
        .ok()
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| time.as_secs().to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };

    /// A CA for tests: its PEM and an issuer to sign with.
    pub(crate) struct TestCa {
        pub(crate) pem: String,
        pub(crate) issuer: Issuer<'static, KeyPair>,
    }

    pub(crate) fn test_ca(cn: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Parameters of a client certificate for `cn` with one `O=` per group.
    ///
    /// rcgen keeps one value per attribute type in a name, so the second and later `O=`
    /// values are pushed as a custom attribute type with the organizationName OID (2.5.4.10):
    /// they are encoded exactly as `O=` attributes, each in its own RDN.
    pub(crate) fn client_params(cn: &str, groups: &[&str]) -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        // rcgen keys a name by attribute type, so only two groups can be made this way;
        // tests need no more.
        assert!(groups.len() <= 2, "at most two groups");
        for (i, group) in groups.iter().enumerate() {
            let ty = match i {
                0 => DnType::OrganizationName,
                _ => DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            params.distinguished_name.push(ty, *group);
        }
        if !cn.is_empty() {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2100, 1, 1);
        params
    }

    pub(crate) fn sign(
        params: &CertificateParams,
        issuer: &Issuer<'_, KeyPair>,
    ) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, issuer).unwrap().der().clone()
    }

    fn check(
        ca: &TestCa,
        chain: &[CertificateDer<'static>],
    ) -> Result<Option<UserInfo>, AuthnError> {
        ClientCertAuthenticator::from_ca_pem(ca.pem.as_bytes())
            .unwrap()
            .verify(chain, UnixTime::now())
    }

    fn reason(result: Result<Option<UserInfo>, AuthnError>) -> String {
        match result {
            Err(AuthnError::Certificate { reason, .. }) => reason,
            other => panic!("expected a certificate error, got {other:?}"),
        }
    }

    #[test]
    fn verified_certificate_gives_cn_and_every_o() {
        let ca = test_ca("test-ca");
        let leaf = sign(&client_params("alice", &["dev", "ops"]), &ca.issuer);
        let user = check(&ca, std::slice::from_ref(&leaf)).unwrap().unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["dev", "ops"]);
        assert_eq!(user.uid, "");
        let id = &user.extra[CREDENTIAL_ID_KEY];
        assert_eq!(id, &vec![format!("X509SHA256={}", hex(&sha256(&leaf), ""))]);
        assert_eq!(id[0].len(), "X509SHA256=".len() + 64);
    }

    #[test]
    fn verified_chains_are_remembered_within_their_validity_only() {
        let ca = test_ca("test-ca");
        let auth = ClientCertAuthenticator::from_ca_pem(ca.pem.as_bytes()).unwrap();
        let mut params = client_params("bob", &[]);
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let leaf = sign(&params, &ca.issuer);
        let in_2000 = UnixTime::since_unix_epoch(Duration::from_secs(960_000_000));
        let user = auth.verify(std::slice::from_ref(&leaf), in_2000).unwrap();
        assert_eq!(user.map(|u| u.name).as_deref(), Some("bob"));
        assert_eq!(auth.verified.lock().unwrap().len(), 1);
        // A moment later the remembered answer holds; a year later the certificate has expired
        // and the chain is checked (and refused) again.
        let later = UnixTime::since_unix_epoch(Duration::from_secs(960_000_030));
        assert!(auth.verify(std::slice::from_ref(&leaf), later).is_ok());
        let text = reason(auth.verify(std::slice::from_ref(&leaf), UnixTime::now()));
        assert!(text.contains("certificate has expired"), "{text}");
        // Nor is a chain trusted before its notBefore because it was verified once.
        let before = UnixTime::since_unix_epoch(Duration::from_secs(900_000_000));
        assert!(auth.verify(std::slice::from_ref(&leaf), before).is_err());
    }

    #[test]
    fn certificate_from_unknown_ca_is_rejected() {
        let ca = test_ca("test-ca");
        let other = test_ca("test-ca");
        let leaf = sign(
            &client_params("mallory", &["system:masters"]),
            &other.issuer,
        );
        let err = check(&ca, &[leaf]).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("verifying certificate SN="), "{text}");
        assert!(
            text.ends_with("failed: x509: certificate signed by unknown authority"),
            "{text}"
        );
    }

    #[test]
    fn expired_and_not_yet_valid_certificates_are_rejected() {
        let ca = test_ca("test-ca");
        let mut params = client_params("old", &[]);
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let text = reason(check(&ca, &[sign(&params, &ca.issuer)]));
        assert!(
            text.starts_with("x509: certificate has expired or is not yet valid: current time ")
                && text.ends_with(" is after 2001-01-01T00:00:00Z"),
            "{text}"
        );
        params.not_before = rcgen::date_time_ymd(2099, 1, 1);
        params.not_after = rcgen::date_time_ymd(2100, 1, 1);
        let text = reason(check(&ca, &[sign(&params, &ca.issuer)]));
        assert!(text.ends_with(" is before 2099-01-01T00:00:00Z"), "{text}");
    }

    #[test]
    fn extended_key_usage_must_allow_client_auth_when_present() {
        let ca = test_ca("test-ca");
        let mut params = client_params("server", &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        assert_eq!(
            reason(check(&ca, &[sign(&params, &ca.issuer)])),
            "x509: certificate specifies an incompatible key usage"
        );
        params.extended_key_usages.clear();
        let user = check(&ca, &[sign(&params, &ca.issuer)]).unwrap().unwrap();
        assert_eq!(user.name, "server");
    }

    #[test]
    fn intermediates_sent_by_the_client_are_used() {
        let root = test_ca("root");
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "intermediate");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let intermediate = params.signed_by(&key, &root.issuer).unwrap().der().clone();
        let issuer = Issuer::new(params, key);
        let leaf = sign(&client_params("dave", &["team"]), &issuer);

        let user = check(&root, &[leaf.clone(), intermediate])
            .unwrap()
            .unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups),
            ("dave", vec!["team".to_string()])
        );
        assert_eq!(
            reason(check(&root, &[leaf])),
            "x509: certificate signed by unknown authority"
        );
    }

    #[test]
    fn certificate_without_common_name_gives_no_user() {
        let ca = test_ca("test-ca");
        let leaf = sign(&client_params("", &["dev"]), &ca.issuer);
        assert!(check(&ca, &[leaf]).unwrap().is_none());
    }

    #[tokio::test]
    async fn requests_without_certificates_have_no_credentials() {
        let ca = test_ca("test-ca");
        let authn = ClientCertAuthenticator::from_ca_pem(ca.pem.as_bytes()).unwrap();
        let headers = http::HeaderMap::new();
        for chain in [None, Some(&[][..])] {
            let req = AuthnRequest {
                headers: &headers,
                peer_certificates: chain,
            };
            assert!(authn.authenticate(&req).await.unwrap().is_none());
        }
        let leaf = sign(&client_params("erin", &[]), &ca.issuer);
        let chain = [leaf];
        let req = AuthnRequest {
            headers: &headers,
            peer_certificates: Some(&chain),
        };
        assert_eq!(
            authn.authenticate(&req).await.unwrap().unwrap().name,
            "erin"
        );
    }

    #[test]
    fn ca_bundle_must_hold_certificates() {
        assert!(matches!(
            ClientCertAuthenticator::from_ca_pem(b""),
            Err(ClientCaError::NoCertificates)
        ));
        let bundle = format!("{}{}", test_ca("a").pem, test_ca("b").pem);
        assert!(ClientCertAuthenticator::from_ca_pem(bundle.as_bytes()).is_ok());
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(ClientCertAuthenticator::from_ca_pem(garbage.as_bytes()).is_err());
    }

    #[test]
    fn identifier_matches_upstream_shape() {
        let ca = test_ca("test-ca");
        let mut params = client_params("x", &[]);
        params.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x01, 0x00]));
        let leaf = sign(&params, &ca.issuer);
        let id = certificate_identifier(&leaf);
        assert!(id.starts_with("SN=256, SKID="), "{id}");
        assert!(id.contains(", AKID="), "{id}");
        assert_eq!(hex(&[0xab, 0x01], ":").to_uppercase(), "AB:01");
    }
}
