//! The admin kubeconfig Ironplane writes next to its PKI, so that `kubectl --kubeconfig
//! <data-dir>/admin.kubeconfig` works right after the first start.
//!
//! It embeds the CA and the admin client certificate and key as base64 data (no paths, so the
//! file can be copied elsewhere). This module must not write anything but the file it is
//! given, and writes it with mode 0600 because it holds a private key.

use std::path::Path;

use serde::Serialize;

use crate::certs::{CertError, KEY_MODE, write_file_atomic};

pub const CLUSTER_NAME: &str = "ironplane";
pub const USER_NAME: &str = "ironplane-admin";
pub const CONTEXT_NAME: &str = "ironplane";

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("encoding kubeconfig: {0}")]
    Encode(#[from] serde_yaml_ng::Error),
    #[error(transparent)]
    Write(#[from] CertError),
}

/// Writes an admin kubeconfig to `path`, replacing any earlier one atomically.
pub fn write_admin(
    path: &Path,
    server_url: &str,
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<(), KubeconfigError> {
    let yaml = render_admin(server_url, ca_pem, cert_pem, key_pem)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| CertError::Io {
            action: "creating directory",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    write_file_atomic(path, yaml.as_bytes(), KEY_MODE)?;
    Ok(())
}

/// The admin kubeconfig as YAML, in the layout `kubectl config view --raw` prints.
pub fn render_admin(
    server_url: &str,
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<String, KubeconfigError> {
    let config = Config {
        api_version: "v1",
        kind: "Config",
        clusters: vec![Named {
            name: CLUSTER_NAME,
            cluster: Cluster {
                certificate_authority_data: base64(ca_pem),
                server: server_url,
            },
        }],
        contexts: vec![NamedContext {
            name: CONTEXT_NAME,
            context: Context {
                cluster: CLUSTER_NAME,
                user: USER_NAME,
            },
        }],
        current_context: CONTEXT_NAME,
        preferences: Preferences {},
        users: vec![NamedUser {
            name: USER_NAME,
            user: User {
                client_certificate_data: base64(cert_pem),
                client_key_data: base64(key_pem),
            },
        }],
    };
    Ok(serde_yaml_ng::to_string(&config)?)
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Config<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    clusters: Vec<Named<'a>>,
    contexts: Vec<NamedContext<'a>>,
    current_context: &'a str,
    preferences: Preferences,
    users: Vec<NamedUser<'a>>,
}

#[derive(Serialize)]
struct Named<'a> {
    cluster: Cluster<'a>,
    name: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster<'a> {
    certificate_authority_data: String,
    server: &'a str,
}

#[derive(Serialize)]
struct NamedContext<'a> {
    context: Context<'a>,
    name: &'a str,
}

#[derive(Serialize)]
struct Context<'a> {
    cluster: &'a str,
    user: &'a str,
}

#[derive(Serialize)]
struct Preferences {}

#[derive(Serialize)]
struct NamedUser<'a> {
    name: &'a str,
    user: User,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate_data: String,
    client_key_data: String,
}

/// Standard base64 with padding (RFC 4648 §4), as kubeconfig `*-data` fields hold it.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..4 {
            if i < symbols {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(
            base64(&bytes),
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        );
    }

    #[test]
    fn admin_kubeconfig_has_the_right_fields() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub").join("admin.kubeconfig");
        let ca = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
        let cert = b"-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n";
        let key = b"-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";
        write_admin(&path, "https://127.0.0.1:6443", ca, cert, key).unwrap();
        // Writing again replaces the file.
        write_admin(&path, "https://127.0.0.1:6443", ca, cert, key).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let doc: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        let decode = |v: &serde_json::Value| {
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap()
        };
        assert_eq!(doc["apiVersion"], "v1");
        assert_eq!(doc["kind"], "Config");
        assert_eq!(doc["current-context"], "ironplane");
        assert_eq!(doc["clusters"][0]["name"], "ironplane");
        let cluster = &doc["clusters"][0]["cluster"];
        assert_eq!(cluster["server"], "https://127.0.0.1:6443");
        assert_eq!(decode(&cluster["certificate-authority-data"]), ca);
        assert_eq!(doc["contexts"][0]["name"], "ironplane");
        assert_eq!(doc["contexts"][0]["context"]["cluster"], "ironplane");
        assert_eq!(doc["contexts"][0]["context"]["user"], "ironplane-admin");
        assert_eq!(doc["users"][0]["name"], "ironplane-admin");
        let user = &doc["users"][0]["user"];
        assert_eq!(decode(&user["client-certificate-data"]), cert);
        assert_eq!(decode(&user["client-key-data"]), key);

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["admin.kubeconfig"], "no temporary file is left");
    }
}
