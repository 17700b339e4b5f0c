//! TLS configuration of the secure port: the serving certificate, ALPN (`h2`, then
//! `http/1.1`), how client certificates are asked for, and which cipher suite a connection gets.
//!
//! Client certificates are requested but neither required nor judged here: as in
//! kube-apiserver, the handshake accepts any chain whose holder proves possession of the key,
//! and the x509 authenticator decides later whether the chain is trusted. A certificate from an
//! unknown CA therefore gives 401 (or lets a bearer token authenticate), never a failed
//! handshake. This module must not trust a chain: it only hands it on, as [`PeerCertificates`].

use std::io;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{Acceptor, ClientHello};
use rustls::{CipherSuite, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};
use rustls::{ServerConnection, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

/// Why a TLS configuration could not be built; each message says which input was at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading serving certificate: {0}")]
    Certificate(String),
    #[error("serving certificate PEM contains no certificate")]
    NoCertificate,
    #[error("reading serving private key: {0}")]
    PrivateKey(String),
    #[error("reading client CA bundle: {0}")]
    ClientCa(String),
    #[error("building TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The client certificate chain (leaf first) of a TLS connection, as the handshake received
/// it and before any verification. The connection code puts it into each request's extensions;
/// the x509 authenticator verifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

impl PeerCertificates {
    /// The chain a finished handshake received, or `None` when the client sent none.
    pub fn from_connection(conn: &ServerConnection) -> Option<Self> {
        conn.peer_certificates()
            .filter(|chain| !chain.is_empty())
            .map(|chain| Self(Arc::new(chain.to_vec())))
    }

    pub fn as_slice(&self) -> &[CertificateDer<'static>] {
        &self.0
    }
}

/// The rustls configurations of the secure port (see [`ServerTls`]).
///
/// `cert_pem` is the serving certificate, optionally followed by its intermediates; `key_pem`
/// its private key (PKCS#8, SEC1 or PKCS#1). `client_ca_pem` is the `--client-ca-file` bundle:
/// its subjects are sent as the acceptable CA names of the certificate request, because Go
/// clients (kubectl, client-go) pick the certificate they send from those names.
pub fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: Option<&[u8]>,
) -> Result<ServerTls, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::PrivateKey(e.to_string()))?;

    let mut root_hint_subjects = Vec::new();
    if let Some(pem) = client_ca_pem {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        }
        root_hint_subjects = roots.subjects();
    }

    let verifier = Arc::new(OfferClientAuth {
        root_hint_subjects,
        algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
    });
    let config = |order: &[Bulk]| -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(Arc::new(provider_in_order(order)))
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier.clone())
            .with_single_cert(chain.clone(), key.clone_key())?;
        config.ignore_client_order = true;
        // HTTP/2 first: kubectl and client-go prefer it, and watches multiplex over one
        // connection.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    };
    Ok(ServerTls {
        aes_first: config(&AES_FIRST)?,
        chacha_first: config(&CHACHA_FIRST)?,
        aes_hardware: aes_hardware(),
    })
}

/// The secure port's TLS: one configuration per order of cipher suites that Go's crypto/tls
/// (and so kube-apiserver) may prefer, and the choice between them for each client.
///
/// Go's server does not follow the client's order. It prefers AES-128-GCM, then AES-256-GCM,
/// then ChaCha20-Poly1305, in TLS 1.3 and 1.2 alike; but ChaCha20-Poly1305 comes first when
/// this machine has no AES hardware, or when the client's first suite is not AES-GCM (which is
/// how a client without AES hardware says so). rustls follows the client's order unless told
/// otherwise, and rustls and OpenSSL clients (kube-rs, the Python client) list AES-256-GCM
/// first: they got the slower suite from us and the faster one from kube-apiserver.
#[derive(Clone)]
pub struct ServerTls {
    aes_first: Arc<ServerConfig>,
    chacha_first: Arc<ServerConfig>,
    aes_hardware: bool,
}

impl ServerTls {
    /// The configuration Go's server would use for this ClientHello.
    fn config_for(&self, hello: &ClientHello<'_>) -> &Arc<ServerConfig> {
        if self.aes_hardware && aes_gcm_preferred(hello.cipher_suites()) {
            &self.aes_first
        } else {
            &self.chacha_first
        }
    }

    /// Reads the ClientHello, then runs the handshake with the configuration it calls for.
    pub async fn accept<IO>(&self, io: IO) -> io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let start = LazyConfigAcceptor::new(Acceptor::default(), io).await?;
        let config = self.config_for(&start.client_hello()).clone();
        start.into_stream(config).await
    }
}

/// The bulk ciphers of the suites the ring provider offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bulk {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

/// Go's preference with AES hardware, and without it (or for a client that prefers ChaCha).
const AES_FIRST: [Bulk; 3] = [Bulk::Aes128Gcm, Bulk::Aes256Gcm, Bulk::ChaCha20Poly1305];
const CHACHA_FIRST: [Bulk; 3] = [Bulk::ChaCha20Poly1305, Bulk::Aes128Gcm, Bulk::Aes256Gcm];

/// Each AEAD suite of TLS 1.3 and of TLS 1.2 with ECDHE, and its bulk cipher.
const SUITES: [(CipherSuite, Bulk); 9] = [
    (CipherSuite::TLS13_AES_128_GCM_SHA256, Bulk::Aes128Gcm),
    (CipherSuite::TLS13_AES_256_GCM_SHA384, Bulk::Aes256Gcm),
    (
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        Bulk::ChaCha20Poly1305,
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        Bulk::Aes128Gcm,
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        Bulk::Aes128Gcm,
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        Bulk::Aes256Gcm,
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        Bulk::Aes256Gcm,
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        Bulk::ChaCha20Poly1305,
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        Bulk::ChaCha20Poly1305,
    ),
];

fn bulk(suite: CipherSuite) -> Option<Bulk> {
    SUITES.iter().find(|(s, _)| *s == suite).map(|(_, b)| *b)
}

/// The ring provider with its cipher suites sorted by `order` of their bulk ciphers (a suite
/// of another cipher last).
fn provider_in_order(order: &[Bulk]) -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| {
        bulk(s.suite())
            .and_then(|b| order.iter().position(|o| *o == b))
            .unwrap_or(order.len())
    });
    provider
}

/// The suites Go's crypto/tls implements besides [`SUITES`] (CBC, RC4, 3DES, and AES-GCM with
/// RSA key exchange, which Go does not count as AES-GCM here).
const GO_OTHER_SUITES: [CipherSuite; 16] = [
    CipherSuite::TLS_RSA_WITH_RC4_128_SHA,
    CipherSuite::TLS_RSA_WITH_3DES_EDE_CBC_SHA,
    CipherSuite::TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite::TLS_RSA_WITH_AES_256_CBC_SHA,
    CipherSuite::TLS_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite::TLS_RSA_WITH_AES_128_GCM_SHA256,
    CipherSuite::TLS_RSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_RC4_128_SHA,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
    CipherSuite::TLS_ECDHE_RSA_WITH_RC4_128_SHA,
    CipherSuite::TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
];

/// Whether the first of the client's suites that Go knows is AES-GCM (Go's
/// `isAESGCMPreferred`): GREASE values, signalling suites and suites Go lacks are passed over.
fn aes_gcm_preferred(client: &[CipherSuite]) -> bool {
    client
        .iter()
        .find_map(|s| match bulk(*s) {
            Some(b) => Some(b != Bulk::ChaCha20Poly1305),
            None => GO_OTHER_SUITES.contains(s).then_some(false),
        })
        .unwrap_or(false)
}

/// Whether this machine encrypts AES-GCM in hardware, as Go's `hasAESGCMHardwareSupport` asks
/// (AES and carry-less multiplication instructions).
fn aes_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Asks for a client certificate without requiring one, and accepts any chain at the TLS
/// layer. The handshake signature is still verified with the provider's algorithms, so a
/// client cannot present a certificate whose key it does not hold.
#[derive(Debug)]
struct OfferClientAuth {
    root_hint_subjects: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for OfferClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.root_hint_subjects
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Trust is decided by the x509 authenticator, per request, as upstream does.
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The ring crypto provider this configuration uses, for callers that build matching client
/// configurations (tests, loopback clients). It is passed explicitly rather than installed as
/// the process default, so that nothing depends on which crate installed one first.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::x509::tests::{client_params, sign, test_ca};
    use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair};
    use rustls::ClientConfig;
    use rustls::client::ResolvesClientCert;
    use rustls::sign::CertifiedKey;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use x509_parser::prelude::FromDer;

    struct Server {
        tls: ServerTls,
        ca_pem: String,
        client_ca_pem: String,
        client_ca: crate::authentication::x509::tests::TestCa,
    }

    fn server() -> Server {
        let ca = test_ca("serving-ca");
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca.issuer).unwrap();
        let client_ca = test_ca("client-ca");
        let tls = server_config(
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            Some(client_ca.pem.as_bytes()),
        )
        .unwrap();
        Server {
            tls,
            ca_pem: ca.pem,
            client_ca_pem: client_ca.pem.clone(),
            client_ca,
        }
    }

    /// Sends a fixed client certificate and records the CA names the server asked for.
    #[derive(Debug)]
    struct Recorder {
        key: Option<Arc<CertifiedKey>>,
        hints: Mutex<Vec<Vec<u8>>>,
    }

    impl ResolvesClientCert for Recorder {
        fn resolve(
            &self,
            root_hint_subjects: &[&[u8]],
            _sigschemes: &[SignatureScheme],
        ) -> Option<Arc<CertifiedKey>> {
            if let Ok(mut hints) = self.hints.lock() {
                *hints = root_hint_subjects.iter().map(|h| h.to_vec()).collect();
            }
            self.key.clone()
        }

        fn has_certs(&self) -> bool {
            self.key.is_some()
        }
    }

    fn certified_key(cert: CertificateDer<'static>, key: &KeyPair) -> Arc<CertifiedKey> {
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let signing = crypto_provider()
            .key_provider
            .load_private_key(key)
            .unwrap();
        Arc::new(CertifiedKey::new(vec![cert], signing))
    }

    struct Outcome {
        server: Result<(Option<PeerCertificates>, Option<Vec<u8>>), String>,
        hints: Vec<Vec<u8>>,
        /// The suite the client saw negotiated, when its handshake finished.
        suite: Option<CipherSuite>,
    }

    async fn handshake(
        server: &Server,
        key: Option<Arc<CertifiedKey>>,
        version: &'static rustls::SupportedProtocolVersion,
    ) -> Outcome {
        handshake_offering(server, key, version, crypto_provider()).await
    }

    /// A handshake whose client offers `provider`'s cipher suites, in its order.
    async fn handshake_offering(
        server: &Server,
        key: Option<Arc<CertifiedKey>>,
        version: &'static rustls::SupportedProtocolVersion,
        provider: Arc<CryptoProvider>,
    ) -> Outcome {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(server.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let recorder = Arc::new(Recorder {
            key,
            hints: Mutex::new(Vec::new()),
        });
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots)
            .with_client_cert_resolver(recorder.clone());
        client.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let acceptor = server.tls.clone();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let server_task = tokio::spawn(async move {
            let mut tls = acceptor
                .accept(server_io)
                .await
                .map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            let conn = tls.get_ref().1;
            Ok::<_, String>((
                PeerCertificates::from_connection(conn),
                conn.alpn_protocol().map(<[u8]>::to_vec),
            ))
        });
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut connected = connector.connect(name, client_io).await;
        let mut suite = None;
        if let Ok(tls) = &mut connected {
            suite = tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite());
            assert_eq!(tls.get_ref().1.protocol_version(), Some(version.version));
            // With TLS 1.3 the client finishes before the server has checked its certificate,
            // so a rejected certificate shows up on the server side only.
            let _ = tls.write_all(b"ping").await;
            let _ = tls.flush().await;
        }
        // The client stays open until the server is done, which writes session tickets after
        // the handshake.
        let server = server_task.await.unwrap();
        drop(connected);
        let hints = recorder.hints.lock().unwrap().clone();
        Outcome {
            server,
            hints,
            suite,
        }
    }

    #[tokio::test]
    async fn the_cipher_suite_is_chosen_as_go_chooses_it() {
        let server = server();
        let cases = [
            // rustls's and OpenSSL's own order: Go's server still picks AES-128-GCM.
            (AES_256_FIRST, Bulk::Aes128Gcm),
            (AES_FIRST, Bulk::Aes128Gcm),
            // A client that lists ChaCha20-Poly1305 first has no AES hardware: it gets it.
            (CHACHA_FIRST, Bulk::ChaCha20Poly1305),
            (
                [Bulk::ChaCha20Poly1305, Bulk::Aes256Gcm, Bulk::Aes128Gcm],
                Bulk::ChaCha20Poly1305,
            ),
        ];
        for (offered, expected) in cases {
            for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
                let outcome = handshake_offering(
                    &server,
                    None,
                    version,
                    Arc::new(provider_in_order(&offered)),
                )
                .await;
                outcome.server.unwrap();
                let suite = outcome.suite.unwrap();
                // Without AES hardware, Go's server puts ChaCha20-Poly1305 first for everyone.
                let expected = if server.tls.aes_hardware {
                    expected
                } else {
                    Bulk::ChaCha20Poly1305
                };
                assert_eq!(
                    bulk(suite),
                    Some(expected),
                    "{offered:?} over {version:?} got {suite:?}"
                );
            }
        }
    }

    /// rustls's order of bulk ciphers, as a client sends it.
    const AES_256_FIRST: [Bulk; 3] = [Bulk::Aes256Gcm, Bulk::Aes128Gcm, Bulk::ChaCha20Poly1305];

    #[test]
    fn a_clients_first_suite_known_to_go_says_whether_it_prefers_aes() {
        let grease = CipherSuite::from(0x0a0a);
        let cbc = CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA;
        let scsv = CipherSuite::TLS_EMPTY_RENEGOTIATION_INFO_SCSV;
        let aes = CipherSuite::TLS13_AES_256_GCM_SHA384;
        let chacha = CipherSuite::TLS13_CHACHA20_POLY1305_SHA256;
        let unknown_to_go = CipherSuite::TLS_DHE_RSA_WITH_AES_128_GCM_SHA256;
        assert!(aes_gcm_preferred(&[grease, scsv, aes, chacha]));
        assert!(aes_gcm_preferred(&[unknown_to_go, aes]));
        assert!(!aes_gcm_preferred(&[grease, chacha, aes]));
        // A suite Go knows decides, AEAD or not.
        assert!(!aes_gcm_preferred(&[cbc, aes]));
        assert!(!aes_gcm_preferred(&[
            CipherSuite::TLS_RSA_WITH_AES_128_GCM_SHA256,
            aes
        ]));
        assert!(aes_gcm_preferred(&[
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cbc
        ]));
        assert!(!aes_gcm_preferred(&[grease, scsv]));
        assert!(!aes_gcm_preferred(&[]));
    }

    #[test]
    fn both_orders_hold_every_suite_of_the_provider() {
        let server = server();
        let provided = rustls::crypto::ring::default_provider().cipher_suites.len();
        for (config, order) in [
            (&server.tls.aes_first, AES_FIRST),
            (&server.tls.chacha_first, CHACHA_FIRST),
        ] {
            assert!(config.ignore_client_order);
            let suites = &config.crypto_provider().cipher_suites;
            assert_eq!(suites.len(), provided);
            let ranks: Vec<usize> = suites
                .iter()
                .map(|s| {
                    order
                        .iter()
                        .position(|b| Some(*b) == bulk(s.suite()))
                        .unwrap()
                })
                .collect();
            assert!(ranks.is_sorted(), "{order:?}: {ranks:?}");
        }
    }

    #[tokio::test]
    async fn certificate_from_unknown_ca_is_accepted_at_the_tls_layer() {
        let server = server();
        let stranger = test_ca("stranger");
        let key = KeyPair::generate().unwrap();
        let cert = client_params("mallory", &["system:masters"])
            .signed_by(&key, &stranger.issuer)
            .unwrap()
            .der()
            .clone();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let outcome =
                handshake(&server, Some(certified_key(cert.clone(), &key)), version).await;
            let (peer, alpn) = outcome.server.unwrap();
            assert_eq!(peer.unwrap().as_slice(), std::slice::from_ref(&cert));
            assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
        }
    }

    #[tokio::test]
    async fn no_certificate_is_fine_and_ca_names_are_hinted() {
        let server = server();
        let outcome = handshake(&server, None, &rustls::version::TLS13).await;
        let (peer, _) = outcome.server.unwrap();
        assert!(peer.is_none());
        // The hint is the client CA's subject, encoded as in the certificate.
        let ca = CertificateDer::from_pem_slice(server.client_ca_pem.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&ca).unwrap();
        assert_eq!(outcome.hints, vec![parsed.subject().as_raw().to_vec()]);
        let (_, name) = x509_parser::x509::X509Name::from_der(&outcome.hints[0]).unwrap();
        assert_eq!(name.to_string(), "CN=client-ca");
    }

    #[tokio::test]
    async fn client_must_hold_the_key_of_its_certificate() {
        let server = server();
        let cert = sign(&client_params("alice", &[]), &server.client_ca.issuer);
        let wrong_key = KeyPair::generate().unwrap();
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let outcome = handshake(
                &server,
                Some(certified_key(cert.clone(), &wrong_key)),
                version,
            )
            .await;
            let err = outcome.server.err().unwrap_or_default();
            assert!(
                err.contains("BadSignature"),
                "a forged proof must fail the handshake: {err}"
            );
        }
    }

    #[test]
    fn bad_inputs_are_reported() {
        let ca = test_ca("x");
        let key = KeyPair::generate().unwrap();
        assert!(matches!(
            server_config(b"", key.serialize_pem().as_bytes(), None),
            Err(TlsError::NoCertificate)
        ));
        assert!(matches!(
            server_config(ca.pem.as_bytes(), b"not a key", None),
            Err(TlsError::PrivateKey(_))
        ));
        let other = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&other)
            .unwrap();
        assert!(
            server_config(
                cert.pem().as_bytes(),
                other.serialize_pem().as_bytes(),
                None
            )
            .is_ok()
        );
        assert!(
            server_config(cert.pem().as_bytes(), key.serialize_pem().as_bytes(), None).is_err(),
            "a key that does not match the certificate is refused"
        );
    }
}
