//! A webhook without a `caBundle` is trusted through the system's roots, as upstream's REST
//! client trusts it. The system roots are read once per process, so the client runs in a child
//! process whose `SSL_CERT_FILE` names a CA the test made.

use std::sync::Arc;

use apiserver::util::webhook::{ClientConfig, post_json};
use serde_json::{Value, json};

/// A one-shot TLS server on loopback answering every request with `{"ok": true}`, its
/// certificate signed by a fresh CA; returns the port and the CA's PEM.
async fn serve() -> (u16, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, hyper::Error>(hyper::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from_static(br#"{"ok": true}"#),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, ca_pem)
}

/// The client half, run in a child process whose `SSL_CERT_FILE` names the server's CA.
async fn call(port: u16) {
    let timeout = std::time::Duration::from_secs(5);
    let url = format!("https://127.0.0.1:{port}/");
    let system = ClientConfig {
        url: Some(url.clone()),
        service: None,
        ca_bundle: Vec::new(),
        ..ClientConfig::default()
    };
    let answer: Value = post_json(&system, None, &json!({}), timeout).await.unwrap();
    assert_eq!(answer, json!({"ok": true}));
    // A caBundle replaces the system roots: a bundle of another CA does not trust the server.
    let other = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    let pinned = ClientConfig {
        url: Some(url),
        service: None,
        ca_bundle: other.into_bytes(),
        ..ClientConfig::default()
    };
    let err = post_json(&pinned, None, &json!({}), timeout)
        .await
        .unwrap_err()
        .context_text();
    assert!(err.contains("tls: failed to verify certificate"), "{err}");
}

#[tokio::test]
async fn a_webhook_without_ca_bundle_is_trusted_through_the_system_roots() {
    if let Ok(port) = std::env::var("IRONPLANE_TEST_WEBHOOK_PORT") {
        return call(port.parse().unwrap()).await;
    }
    let (port, ca_pem) = serve().await;
    let dir = std::env::temp_dir().join(format!("ironplane-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ca.pem");
    std::fs::write(&file, &ca_pem).unwrap();
    let exe = std::env::current_exe().unwrap();
    let child = tokio::task::spawn_blocking(move || {
        std::process::Command::new(exe)
            .args([
                "--exact",
                "a_webhook_without_ca_bundle_is_trusted_through_the_system_roots",
                "--nocapture",
            ])
            .env("SSL_CERT_FILE", &file)
            .env("IRONPLANE_TEST_WEBHOOK_PORT", port.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        child.status.success(),
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
}
