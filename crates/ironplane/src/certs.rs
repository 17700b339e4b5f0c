//! The certificates and keys Ironplane makes for itself when it runs without TLS flags: a CA,
//! the serving certificate of the secure port, the admin client certificate behind the admin
//! kubeconfig, and the service-account signing key. All live in the data directory and are
//! made on first start and reused afterwards.
//!
//! On every start the leaves are checked against the CA (signature, validity with a renewal
//! margin, key match; for the serving certificate, every requested name) and only the ones that
//! fail are made again, so that kubeconfigs and trust stores handed out earlier keep working.
//! This module must not touch files other than the seven it names, and never replaces the CA
//! while its key exists.

use std::fmt;
use std::io::{self, Write as _};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, DnsName, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};

pub const CA_CERT_FILE: &str = "ca.crt";
pub const CA_KEY_FILE: &str = "ca.key";
pub const SERVING_CERT_FILE: &str = "apiserver.crt";
pub const SERVING_KEY_FILE: &str = "apiserver.key";
pub const ADMIN_CERT_FILE: &str = "admin.crt";
pub const ADMIN_KEY_FILE: &str = "admin.key";
pub const SA_KEY_FILE: &str = "sa.key";

/// The admin client certificate's user and group: `system:masters` is bound to
/// `cluster-admin` by the bootstrap RBAC policy, as with kubeadm's admin.conf.
pub const ADMIN_USER: &str = "kubernetes-admin";
pub const ADMIN_GROUP: &str = "system:masters";

/// The subject of the CA Ironplane makes. An existing CA is reused only with this subject,
/// because leaves are signed with an issuer rebuilt from it.
const CA_COMMON_NAME: &str = "ironplane-ca";
const SERVING_COMMON_NAME: &str = "kube-apiserver";

/// Names every serving certificate carries: loopback, and the names the `kubernetes` Service
/// gives the API server inside the cluster.
const DEFAULT_SERVING_NAMES: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

const DAY: Duration = Duration::from_secs(24 * 60 * 60);
const CA_VALIDITY: Duration = Duration::from_secs(3650 * DAY.as_secs());
const LEAF_VALIDITY: Duration = Duration::from_secs(365 * DAY.as_secs());
/// Certificates start an hour in the past so that clients with a slightly slow clock accept
/// them, as upstream's self-signed certificates do.
const BACKDATE: Duration = Duration::from_secs(60 * 60);
/// A leaf that expires within this margin is made again at start.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * DAY.as_secs());

/// PEM texts of the data directory's certificates and keys, exactly as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Pki {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    /// The service-account token signing key: ECDSA P-256, PKCS#8.
    pub sa_key_pem: String,
}

impl fmt::Debug for Pki {
    /// Shows certificates but never keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pki")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("serving_cert_pem", &self.serving_cert_pem)
            .field("admin_cert_pem", &self.admin_cert_pem)
            .finish_non_exhaustive()
    }
}

impl Pki {
    /// The public half of the service-account signing key (SPKI PEM), which verifies tokens.
    pub fn sa_public_key_pem(&self) -> Result<String, CertError> {
        let key = KeyPair::from_pem(&self.sa_key_pem).map_err(|source| CertError::Generate {
            what: "the service-account public key",
            source,
        })?;
        Ok(key.public_key_pem())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("serving host {host:?} is neither an IP address nor a valid DNS name")]
    InvalidHost { host: String },
}

/// Loads the PKI of `dir`, making whatever is missing or no longer fit.
///
/// `serving_hosts` are added to the serving certificate's names (the first IP of the service
/// CIDR and the bind address, typically); if the existing certificate lacks one, only the
/// serving certificate is made again.
pub fn load_or_create(dir: &Path, serving_hosts: &[String]) -> Result<Pki, CertError> {
    create_private_dir(dir)?;
    let now = SystemTime::now();
    let names = serving_names(serving_hosts)?;

    let ca = load_or_create_ca(dir, now)?;
    let mut roots = RootCertStore::empty();
    roots
        .add(ca.der.clone())
        .map_err(|e| invalid(dir.join(CA_CERT_FILE), e))?;
    let roots = Arc::new(roots);

    let serving = load_pair(dir, SERVING_CERT_FILE, SERVING_KEY_FILE)?;
    let serving = match serving.filter(|p| serving_cert_is_current(p, &roots, &names, now)) {
        Some(pair) => pair,
        None => {
            let pair = make_serving(&ca, &names, now)?;
            ensure_signed_by(&pair, &roots, Usage::Server, dir)?;
            store_pair(dir, SERVING_CERT_FILE, SERVING_KEY_FILE, &pair)?;
            tracing::info!(path = %dir.join(SERVING_CERT_FILE).display(), "made serving certificate");
            pair
        }
    };

    let admin = load_pair(dir, ADMIN_CERT_FILE, ADMIN_KEY_FILE)?;
    let admin = match admin.filter(|p| leaf_is_current(p, &roots, Usage::Client, now).is_some()) {
        Some(pair) => pair,
        None => {
            let pair = make_admin(&ca, now)?;
            ensure_signed_by(&pair, &roots, Usage::Client, dir)?;
            store_pair(dir, ADMIN_CERT_FILE, ADMIN_KEY_FILE, &pair)?;
            tracing::info!(path = %dir.join(ADMIN_CERT_FILE).display(), "made admin client certificate");
            pair
        }
    };

    let sa_path = dir.join(SA_KEY_FILE);
    let sa_key_pem = match read_optional(&sa_path)? {
        Some(pem) => {
            // Only checked to be a usable key: a broken file must stop the start, not be
            // replaced, or every token issued so far would stop verifying.
            KeyPair::from_pem(&pem).map_err(|e| invalid(sa_path.clone(), e))?;
            pem
        }
        None => {
            let pem = generate_key("the service-account signing key")?.serialize_pem();
            write_file_atomic(&sa_path, pem.as_bytes(), KEY_MODE)?;
            pem
        }
    };

    Ok(Pki {
        ca_cert_pem: ca.cert_pem,
        ca_key_pem: ca.key_pem,
        serving_cert_pem: serving.cert_pem,
        serving_key_pem: serving.key_pem,
        admin_cert_pem: admin.cert_pem,
        admin_key_pem: admin.key_pem,
        sa_key_pem,
    })
}

/// A certificate with its key, as PEM texts.
struct Pair {
    cert_pem: String,
    key_pem: String,
}

struct Ca {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

/// The CA's parameters. They are rebuilt, not read back, when an existing CA signs: the
/// issuer name and key identifier of a leaf come from them and must match the CA certificate.
fn ca_params(now: SystemTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    set_validity(&mut params, now, CA_VALIDITY);
    params
}

fn load_or_create_ca(dir: &Path, now: SystemTime) -> Result<Ca, CertError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let (cert_pem, key_pem) = match (read_optional(&cert_path)?, read_optional(&key_path)?) {
        (Some(cert_pem), Some(key_pem)) => (cert_pem, key_pem),
        (Some(_), None) => {
            return Err(invalid(
                cert_path,
                format!(
                    "{CA_KEY_FILE} is missing: supply the CA's key, or remove {CA_CERT_FILE} to \
                     have a new CA made (clients that trust the old CA will then fail)"
                ),
            ));
        }
        (None, key_pem) => {
            // A key without its certificate (an interrupted first start, or a deleted
            // certificate): a certificate made again from the same key and subject verifies
            // every leaf signed before, so only a missing key means a new CA.
            let (key, key_pem) = match key_pem {
                Some(pem) => (
                    KeyPair::from_pem(&pem).map_err(|e| invalid(key_path.clone(), e))?,
                    pem,
                ),
                None => {
                    let key = generate_key("the CA key")?;
                    let pem = key.serialize_pem();
                    write_file_atomic(&key_path, pem.as_bytes(), KEY_MODE)?;
                    (key, pem)
                }
            };
            let cert_pem = ca_params(now)
                .self_signed(&key)
                .map_err(|source| CertError::Generate {
                    what: "the CA certificate",
                    source,
                })?
                .pem();
            write_file_atomic(&cert_path, cert_pem.as_bytes(), CERT_MODE)?;
            tracing::info!(path = %cert_path.display(), "made certificate authority");
            (cert_pem, key_pem)
        }
    };
    let der =
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| invalid(&cert_path, e))?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| invalid(&key_path, e))?;
    if !key_matches(&der, &key) {
        return Err(invalid(key_path, "the key does not belong to ca.crt"));
    }
    Ok(Ca {
        issuer: Issuer::new(ca_params(now), key),
        cert_pem,
        key_pem,
        der,
    })
}

/// The serving certificate's names, the default ones first, without repeats, each with the
/// form rustls checks it in.
fn serving_names(hosts: &[String]) -> Result<Vec<(SanType, ServerName<'static>)>, CertError> {
    let mut names: Vec<(SanType, ServerName<'static>)> = Vec::new();
    let all = DEFAULT_SERVING_NAMES
        .iter()
        .copied()
        .chain(hosts.iter().map(String::as_str));
    for host in all {
        let host = host.trim();
        if host.is_empty() {
            continue;
        }
        let invalid_host = || CertError::InvalidHost {
            host: host.to_string(),
        };
        let name = match host.parse::<IpAddr>() {
            Ok(ip) => (SanType::IpAddress(ip), ServerName::IpAddress(ip.into())),
            Err(_) => {
                let dns = DnsName::try_from(host.to_string()).map_err(|_| invalid_host())?;
                let san = host.to_string().try_into().map_err(|_| invalid_host())?;
                (SanType::DnsName(san), ServerName::DnsName(dns))
            }
        };
        if !names.iter().any(|(_, known)| *known == name.1) {
            names.push(name);
        }
    }
    Ok(names)
}

fn make_serving(
    ca: &Ca,
    names: &[(SanType, ServerName<'static>)],
    now: SystemTime,
) -> Result<Pair, CertError> {
    let mut params = leaf_params(SERVING_COMMON_NAME, None, now);
    params.subject_alt_names = names.iter().map(|(san, _)| san.clone()).collect();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    sign_leaf(&params, ca, "the serving certificate")
}

fn make_admin(ca: &Ca, now: SystemTime) -> Result<Pair, CertError> {
    let mut params = leaf_params(ADMIN_USER, Some(ADMIN_GROUP), now);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    sign_leaf(&params, ca, "the admin client certificate")
}

fn leaf_params(
    common_name: &str,
    organization: Option<&str>,
    now: SystemTime,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    if let Some(organization) = organization {
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
    }
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, now, LEAF_VALIDITY);
    params
}

fn sign_leaf(params: &CertificateParams, ca: &Ca, what: &'static str) -> Result<Pair, CertError> {
    let key = generate_key(what)?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(|source| CertError::Generate { what, source })?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// ECDSA P-256: key generation takes microseconds, where RSA would slow every first start.
fn generate_key(what: &'static str) -> Result<KeyPair, CertError> {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|source| CertError::Generate { what, source })
}

/// Sets the validity period: from an hour before `now`, for `validity`.
fn set_validity(params: &mut CertificateParams, now: SystemTime, validity: Duration) {
    // rcgen takes `time` values; they are built from the epoch so that this crate needs no
    // date library of its own.
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = epoch + since_epoch + validity;
}

/// What a leaf is for, which decides the extended key usage it is verified with.
#[derive(Clone, Copy)]
enum Usage {
    Server,
    Client,
}

/// Whether `cert` chains to the CA in `roots` at time `at`, for `usage`.
fn chains_to(
    cert: &CertificateDer<'_>,
    roots: &Arc<RootCertStore>,
    usage: Usage,
    at: UnixTime,
) -> bool {
    match usage {
        Usage::Server => ParsedCertificate::try_from(cert).is_ok_and(|parsed| {
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &parsed,
                roots,
                &[],
                at,
                provider().signature_verification_algorithms.all,
            )
            .is_ok()
        }),
        Usage::Client => WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .is_ok_and(|verifier| verifier.verify_client_cert(cert, &[], at).is_ok()),
    }
}

/// Checks a freshly signed leaf against the CA certificate. It fails when the CA on disk is
/// not one Ironplane made (another subject: leaves are signed with rebuilt parameters) or is
/// no longer valid.
fn ensure_signed_by(
    pair: &Pair,
    roots: &Arc<RootCertStore>,
    usage: Usage,
    dir: &Path,
) -> Result<(), CertError> {
    let signed = parse_pem_cert(&pair.cert_pem)
        .is_some_and(|der| chains_to(&der, roots, usage, UnixTime::now()));
    if signed {
        Ok(())
    } else {
        Err(invalid(
            dir.join(CA_CERT_FILE),
            format!(
                "certificates signed with this CA do not verify: it has expired, or it was not \
                 made by Ironplane, which signs only with a CA whose subject is \
                 CN={CA_COMMON_NAME} (remove {CA_CERT_FILE} and {CA_KEY_FILE} to have a new CA \
                 made)"
            ),
        ))
    }
}

/// A leaf may stay if it belongs to its key and chains to the CA for its usage, now and at
/// the end of the renewal margin.
fn leaf_is_current(
    pair: &Pair,
    roots: &Arc<RootCertStore>,
    usage: Usage,
    now: SystemTime,
) -> Option<CertificateDer<'static>> {
    let der = parse_pem_cert(&pair.cert_pem)?;
    let key = KeyPair::from_pem(&pair.key_pem).ok()?;
    let current = key_matches(&der, &key)
        && checkpoints(now)
            .into_iter()
            .all(|at| chains_to(&der, roots, usage, at));
    current.then_some(der)
}

/// The serving certificate must also carry every requested name.
fn serving_cert_is_current(
    pair: &Pair,
    roots: &Arc<RootCertStore>,
    names: &[(SanType, ServerName<'static>)],
    now: SystemTime,
) -> bool {
    leaf_is_current(pair, roots, Usage::Server, now).is_some_and(|der| {
        ParsedCertificate::try_from(&der).is_ok_and(|cert| {
            names
                .iter()
                .all(|(_, name)| rustls::client::verify_server_name(&cert, name).is_ok())
        })
    })
}

/// The times a kept leaf must be valid at: now, and at the end of the renewal margin.
fn checkpoints(now: SystemTime) -> [UnixTime; 2] {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    [
        UnixTime::since_unix_epoch(since_epoch),
        UnixTime::since_unix_epoch(since_epoch + RENEW_BEFORE),
    ]
}

fn key_matches(cert: &CertificateDer<'_>, key: &KeyPair) -> bool {
    ParsedCertificate::try_from(cert).is_ok_and(|parsed| {
        parsed.subject_public_key_info().as_ref() == key.subject_public_key_info()
    })
}

fn parse_pem_cert(pem: &str) -> Option<CertificateDer<'static>> {
    CertificateDer::from_pem_slice(pem.as_bytes()).ok()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(path: impl Into<PathBuf>, reason: impl fmt::Display) -> CertError {
    CertError::Invalid {
        path: path.into(),
        reason: reason.to_string(),
    }
}

/// Both files of a pair, or `None` when either is missing (the pair is then made again).
fn load_pair(dir: &Path, cert_file: &str, key_file: &str) -> Result<Option<Pair>, CertError> {
    let cert = read_optional(&dir.join(cert_file))?;
    let key = read_optional(&dir.join(key_file))?;
    Ok(cert
        .zip(key)
        .map(|(cert_pem, key_pem)| Pair { cert_pem, key_pem }))
}

/// Writes the key before the certificate: after a crash between the two, the certificate on
/// disk does not match the key, which the next start notices and repairs.
fn store_pair(dir: &Path, cert_file: &str, key_file: &str, pair: &Pair) -> Result<(), CertError> {
    write_file_atomic(&dir.join(key_file), pair.key_pem.as_bytes(), KEY_MODE)?;
    write_file_atomic(&dir.join(cert_file), pair.cert_pem.as_bytes(), CERT_MODE)
}

fn read_optional(path: &Path) -> Result<Option<String>, CertError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CertError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// File mode of private keys and kubeconfigs.
pub const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;

fn create_private_dir(dir: &Path) -> Result<(), CertError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|source| CertError::Io {
        action: "creating directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Replaces `path` with `contents` so that readers see the old file or the new one, never a
/// part: the bytes go to a temporary file in the same directory (created with `mode`, so a key
/// is never readable by others, even briefly), are synced, and the file is renamed over
/// `path`; the directory is synced so that the rename survives a crash.
pub fn write_file_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), CertError> {
    let io_err = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| CertError::Io {
            action,
            path,
            source,
        }
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let result = (|| {
        let mut file = options.open(&tmp).map_err(io_err("creating", &tmp))?;
        // A stale temporary file from a crashed run keeps its old mode; set it explicitly.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(io_err("setting permissions of", &tmp))?;
        }
        file.write_all(contents).map_err(io_err("writing", &tmp))?;
        file.sync_all().map_err(io_err("syncing", &tmp))?;
        std::fs::rename(&tmp, path).map_err(io_err("renaming into place", path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    #[cfg(unix)]
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("syncing directory", dir))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;

    fn hosts() -> Vec<String> {
        vec!["10.0.0.1".to_string(), "192.168.7.9".to_string()]
    }

    fn read(dir: &Path, file: &str) -> String {
        std::fs::read_to_string(dir.join(file)).unwrap()
    }

    /// The SANs of a PEM certificate as text (DNS names and IP addresses).
    fn sans(pem: &str) -> Vec<String> {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let ext = cert.subject_alternative_name().unwrap().unwrap();
        ext.value
            .general_names
            .iter()
            .map(|name| match name {
                GeneralName::DNSName(dns) => dns.to_string(),
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => IpAddr::from(<[u8; 4]>::try_from(*bytes).unwrap()).to_string(),
                    _ => IpAddr::from(<[u8; 16]>::try_from(*bytes).unwrap()).to_string(),
                },
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn creates_then_reuses_identical_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let first = load_or_create(&dir, &hosts()).unwrap();
        for file in [
            CA_CERT_FILE,
            CA_KEY_FILE,
            SERVING_CERT_FILE,
            SERVING_KEY_FILE,
            ADMIN_CERT_FILE,
            ADMIN_KEY_FILE,
            SA_KEY_FILE,
        ] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        assert_eq!(first.ca_cert_pem, read(&dir, CA_CERT_FILE));
        assert_eq!(first.sa_key_pem, read(&dir, SA_KEY_FILE));
        let second = load_or_create(&dir, &hosts()).unwrap();
        assert_eq!(first, second);
        assert!(
            first
                .sa_public_key_pem()
                .unwrap()
                .starts_with("-----BEGIN PUBLIC KEY-----")
        );
        let debug = format!("{first:?}");
        assert!(!debug.contains("PRIVATE KEY"), "Debug must not show keys");
    }

    #[cfg(unix)]
    #[test]
    fn keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        load_or_create(&dir, &[]).unwrap();
        let mode = |file: &str| {
            std::fs::metadata(dir.join(file))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        for key in [CA_KEY_FILE, SERVING_KEY_FILE, ADMIN_KEY_FILE, SA_KEY_FILE] {
            assert_eq!(mode(key), 0o600, "{key}");
        }
        assert_eq!(mode(CA_CERT_FILE), 0o644);
        let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn serving_certificate_has_every_name() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = load_or_create(tmp.path(), &hosts()).unwrap();
        assert_eq!(
            sans(&pki.serving_cert_pem),
            vec![
                "localhost",
                "127.0.0.1",
                "::1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                "10.0.0.1",
                "192.168.7.9",
            ]
        );
        let der = CertificateDer::from_pem_slice(pki.serving_cert_pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && !eku.client_auth);
        let validity = cert.validity();
        let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86400;
        assert_eq!(
            days, 365,
            "one year, plus the one-hour backdate rounded away"
        );
    }

    #[test]
    fn admin_certificate_is_kubernetes_admin_in_system_masters() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = load_or_create(tmp.path(), &[]).unwrap();
        let der = CertificateDer::from_pem_slice(pki.admin_cert_pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let cn: Vec<_> = cert
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        let o: Vec<_> = cert
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!((cn, o), (vec![ADMIN_USER], vec![ADMIN_GROUP]));
        assert!(
            cert.extended_key_usage()
                .unwrap()
                .unwrap()
                .value
                .client_auth
        );

        let ca_der = CertificateDer::from_pem_slice(pki.ca_cert_pem.as_bytes()).unwrap();
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        assert!(ca.is_ca());
        assert_eq!(ca.subject().to_string(), "CN=ironplane-ca");
        let validity = ca.validity();
        let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86400;
        assert_eq!(days, 3650);
    }

    #[test]
    fn a_new_host_remakes_only_the_serving_certificate() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &hosts()).unwrap();
        let mut more = hosts();
        more.push("api.example.com".to_string());
        let second = load_or_create(tmp.path(), &more).unwrap();
        assert_ne!(first.serving_cert_pem, second.serving_cert_pem);
        assert!(sans(&second.serving_cert_pem).contains(&"api.example.com".to_string()));
        assert_eq!(first.ca_cert_pem, second.ca_cert_pem);
        assert_eq!(first.ca_key_pem, second.ca_key_pem);
        assert_eq!(first.admin_cert_pem, second.admin_cert_pem);
        assert_eq!(first.sa_key_pem, second.sa_key_pem);
        // Fewer hosts than the certificate has is fine: it is kept.
        let third = load_or_create(tmp.path(), &[]).unwrap();
        assert_eq!(third, second);
    }

    #[test]
    fn broken_or_expiring_leaves_are_remade() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let first = load_or_create(dir, &[]).unwrap();

        // A key that does not match the certificate.
        let other = KeyPair::generate().unwrap().serialize_pem();
        std::fs::write(dir.join(SERVING_KEY_FILE), &other).unwrap();
        std::fs::remove_file(dir.join(ADMIN_CERT_FILE)).unwrap();
        let second = load_or_create(dir, &[]).unwrap();
        assert_ne!(second.serving_key_pem, other);
        assert_ne!(second.serving_cert_pem, first.serving_cert_pem);
        assert_ne!(second.admin_cert_pem, first.admin_cert_pem);
        assert_eq!(second.ca_cert_pem, first.ca_cert_pem);

        // A certificate of the right CA that expires within the renewal margin.
        let ca = load_or_create_ca(dir, SystemTime::now()).unwrap();
        let mut params = leaf_params(SERVING_COMMON_NAME, None, SystemTime::now());
        params.subject_alt_names = serving_names(&[])
            .unwrap()
            .into_iter()
            .map(|(san, _)| san)
            .collect();
        set_validity(&mut params, SystemTime::now(), 10 * DAY);
        let short = sign_leaf(&params, &ca, "test").unwrap();
        store_pair(dir, SERVING_CERT_FILE, SERVING_KEY_FILE, &short).unwrap();
        let third = load_or_create(dir, &[]).unwrap();
        assert_ne!(third.serving_cert_pem, short.cert_pem);
        assert_eq!(third.admin_cert_pem, second.admin_cert_pem);
    }

    #[test]
    fn ca_certificate_is_remade_from_its_key() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let first = load_or_create(dir, &[]).unwrap();
        std::fs::remove_file(dir.join(CA_CERT_FILE)).unwrap();
        let second = load_or_create(dir, &[]).unwrap();
        assert_eq!(second.ca_key_pem, first.ca_key_pem);
        // Same key and subject: the leaves made before still verify, so they are kept.
        assert_eq!(second.serving_cert_pem, first.serving_cert_pem);
        assert_eq!(second.admin_cert_pem, first.admin_cert_pem);
    }

    #[test]
    fn ca_certificate_without_key_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        load_or_create(dir, &[]).unwrap();
        std::fs::remove_file(dir.join(CA_KEY_FILE)).unwrap();
        let err = load_or_create(dir, &[]).unwrap_err().to_string();
        assert!(err.contains("ca.key is missing"), "{err}");
    }

    #[test]
    fn foreign_ca_is_refused_rather_than_used_wrongly() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let key = KeyPair::generate().unwrap();
        let mut params = ca_params(SystemTime::now());
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "someone-else");
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join(CA_CERT_FILE), cert.pem()).unwrap();
        std::fs::write(dir.join(CA_KEY_FILE), key.serialize_pem()).unwrap();
        let err = load_or_create(dir, &[]).unwrap_err().to_string();
        assert!(err.contains("CN=ironplane-ca"), "{err}");
    }

    #[test]
    fn bad_hosts_are_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let err = load_or_create(tmp.path(), &["bad host!".to_string()]).unwrap_err();
        assert!(matches!(err, CertError::InvalidHost { .. }));
        assert_eq!(
            serving_names(&["localhost".into(), " ".into(), "::1".into()])
                .unwrap()
                .len(),
            DEFAULT_SERVING_NAMES.len()
        );
    }
}
