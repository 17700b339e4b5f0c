//! Reading a kubeconfig file and resolving one context to a server address and credentials.
//!
//! It owns the subset of the kubeconfig format that the bench tool supports: the server URL,
//! `certificate-authority(-data)`, `insecure-skip-tls-verify`, `tls-server-name`, client
//! certificates (`client-certificate(-data)`, `client-key(-data)`) and bearer tokens (`token`,
//! `tokenFile`). File paths are resolved relative to the kubeconfig's own folder, as kubectl does.
//! It must not open connections, and it must not silently accept credentials it cannot use (exec
//! plugins, auth providers, basic auth): those are errors, so a benchmark never runs as anonymous
//! by accident.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use crate::error::BenchError;

/// The parts of a kubeconfig file the tool reads. Unknown fields (preferences, extensions) are
/// ignored, and `null` lists are read as empty, as client-go does.
#[derive(Debug, Default, Deserialize)]
pub struct Kubeconfig {
    #[serde(rename = "current-context", default)]
    pub current_context: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub contexts: Vec<NamedContext>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub users: Vec<NamedAuthInfo>,
}

#[derive(Debug, Deserialize)]
pub struct NamedCluster {
    pub name: String,
    #[serde(default)]
    pub cluster: Cluster,
}

#[derive(Debug, Default, Deserialize)]
pub struct Cluster {
    #[serde(default)]
    pub server: String,
    #[serde(rename = "certificate-authority", default)]
    pub certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    pub certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    pub insecure_skip_tls_verify: Option<bool>,
    #[serde(rename = "tls-server-name", default)]
    pub tls_server_name: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct NamedContext {
    pub name: String,
    #[serde(default)]
    pub context: Context,
}

#[derive(Debug, Default, Deserialize)]
pub struct Context {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct NamedAuthInfo {
    pub name: String,
    #[serde(default)]
    pub user: AuthInfo,
}

#[derive(Debug, Default, Deserialize)]
pub struct AuthInfo {
    #[serde(rename = "client-certificate", default)]
    pub client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data", default)]
    pub client_certificate_data: Option<String>,
    #[serde(rename = "client-key", default)]
    pub client_key: Option<String>,
    #[serde(rename = "client-key-data", default)]
    pub client_key_data: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    pub token_file: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub exec: Option<serde_yaml_ng::Value>,
    #[serde(rename = "auth-provider", default)]
    pub auth_provider: Option<serde_yaml_ng::Value>,
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// How the tool proves who it is.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No user, or a user with nothing the tool can present: requests are anonymous.
    Anonymous,
    /// A client certificate chain and its private key, both PEM.
    ClientCertificate { cert_pem: Vec<u8>, key_pem: Vec<u8> },
    /// A bearer token, sent as `Authorization: Bearer <token>`.
    Token(String),
}

impl std::fmt::Debug for Credentials {
    // Keys and tokens never appear in logs or error messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::ClientCertificate { .. } => f.write_str("ClientCertificate(..)"),
            Credentials::Token(_) => f.write_str("Token(..)"),
        }
    }
}

/// One context of a kubeconfig, resolved: everything needed to reach the server and
/// authenticate, with every file already read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedContext {
    /// The context's name.
    pub context: String,
    /// The server URL without a trailing slash, e.g. `https://127.0.0.1:6443`. Every request the
    /// tool makes goes to this address and nowhere else.
    pub server: String,
    /// PEM bundle of the CA(s) that sign the server's certificate, when the kubeconfig gives one.
    pub ca_pem: Option<Vec<u8>>,
    /// `insecure-skip-tls-verify`: do not verify the server's certificate.
    pub insecure_skip_tls_verify: bool,
    /// `tls-server-name`: the name to verify the server's certificate against, instead of the
    /// URL's host.
    pub tls_server_name: Option<String>,
    pub credentials: Credentials,
    /// The context's namespace, if it names one.
    pub namespace: Option<String>,
}

/// Reads `path` and resolves `context` (or the current context when `None`).
pub fn load(path: &Path, context: Option<&str>) -> Result<ResolvedContext, BenchError> {
    let text =
        std::fs::read(path).map_err(|e| kubeconfig_error(path, format!("cannot read: {e}")))?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    resolve_bytes(&text, base, context).map_err(|message| kubeconfig_error(path, message))
}

fn kubeconfig_error(path: &Path, message: String) -> BenchError {
    BenchError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    }
}

/// Parses kubeconfig text and resolves one context; relative file paths are taken from `base`.
/// Errors are plain messages; [`load`] adds the file name.
pub fn resolve_bytes(
    text: &[u8],
    base: &Path,
    context: Option<&str>,
) -> Result<ResolvedContext, String> {
    let config: Kubeconfig =
        serde_yaml_ng::from_slice(text).map_err(|e| format!("cannot parse: {e}"))?;
    config.resolve(base, context)
}

impl Kubeconfig {
    /// Resolves one context; relative file paths are taken from `base`.
    pub fn resolve(&self, base: &Path, context: Option<&str>) -> Result<ResolvedContext, String> {
        let context_name = match context {
            Some(name) => name.to_string(),
            None => match self.current_context.as_deref() {
                Some(name) if !name.is_empty() => name.to_string(),
                _ => return Err("no current-context is set; pass --context".to_string()),
            },
        };
        let named = self
            .contexts
            .iter()
            .find(|c| c.name == context_name)
            .ok_or_else(|| format!("context {context_name:?} not found"))?;
        let cluster = &self
            .clusters
            .iter()
            .find(|c| c.name == named.context.cluster)
            .ok_or_else(|| {
                format!(
                    "cluster {:?} of context {context_name:?} not found",
                    named.context.cluster
                )
            })?
            .cluster;
        let server = normalize_server(&cluster.server)?;

        let ca_pem = match (
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
        ) {
            (Some(data), _) if !data.trim().is_empty() => {
                Some(decode_data(data, "certificate-authority-data")?)
            }
            (_, Some(file)) if !file.is_empty() => Some(read_relative(base, file)?),
            _ => None,
        };

        // A context may name no user at all; that is an anonymous client.
        let user = if named.context.user.is_empty() {
            None
        } else {
            Some(
                &self
                    .users
                    .iter()
                    .find(|u| u.name == named.context.user)
                    .ok_or_else(|| {
                        format!(
                            "user {:?} of context {context_name:?} not found",
                            named.context.user
                        )
                    })?
                    .user,
            )
        };
        let credentials = match user {
            None => Credentials::Anonymous,
            Some(user) => resolve_credentials(user, base)?,
        };

        Ok(ResolvedContext {
            context: context_name,
            server,
            ca_pem,
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
            tls_server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
            credentials,
            namespace: named.context.namespace.clone().filter(|s| !s.is_empty()),
        })
    }
}

fn resolve_credentials(user: &AuthInfo, base: &Path) -> Result<Credentials, String> {
    let cert = match (&user.client_certificate_data, &user.client_certificate) {
        (Some(data), _) if !data.trim().is_empty() => {
            Some(decode_data(data, "client-certificate-data")?)
        }
        (_, Some(file)) if !file.is_empty() => Some(read_relative(base, file)?),
        _ => None,
    };
    let key = match (&user.client_key_data, &user.client_key) {
        (Some(data), _) if !data.trim().is_empty() => Some(decode_data(data, "client-key-data")?),
        (_, Some(file)) if !file.is_empty() => Some(read_relative(base, file)?),
        _ => None,
    };
    let token = match (&user.token, &user.token_file) {
        (Some(token), _) if !token.trim().is_empty() => Some(token.trim().to_string()),
        (_, Some(file)) if !file.is_empty() => {
            let bytes = read_relative(base, file)?;
            let token = String::from_utf8(bytes)
                .map_err(|_| format!("tokenFile {file:?} is not UTF-8"))?
                .trim()
                .to_string();
            if token.is_empty() {
                return Err(format!("tokenFile {file:?} is empty"));
            }
            Some(token)
        }
        _ => None,
    };
    match (cert, key, token) {
        // A token and a certificate together: client-go sends both, and the server authenticates
        // with the certificate first. The tool prefers the certificate for the same reason.
        (Some(cert_pem), Some(key_pem), _) => {
            Ok(Credentials::ClientCertificate { cert_pem, key_pem })
        }
        (Some(_), None, _) => Err("client-certificate is set but client-key is not".to_string()),
        (None, Some(_), _) => Err("client-key is set but client-certificate is not".to_string()),
        (None, None, Some(token)) => Ok(Credentials::Token(token)),
        (None, None, None) => {
            if user.exec.is_some() {
                Err("exec credential plugins are not supported; use a client certificate or a token".to_string())
            } else if user.auth_provider.is_some() {
                Err(
                    "auth-provider is not supported; use a client certificate or a token"
                        .to_string(),
                )
            } else if user.username.is_some() {
                Err(
                    "basic authentication is not supported; use a client certificate or a token"
                        .to_string(),
                )
            } else {
                Ok(Credentials::Anonymous)
            }
        }
    }
}

/// Checks the server URL and strips a trailing slash, so that paths can be appended as they are.
fn normalize_server(server: &str) -> Result<String, String> {
    let server = server.trim();
    if server.is_empty() {
        return Err("the cluster has no server".to_string());
    }
    let uri: http::Uri = server
        .parse()
        .map_err(|e| format!("server {server:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("https") | Some("http") => {}
        _ => {
            return Err(format!(
                "server {server:?} must start with https:// (or http://)"
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("server {server:?} has no host"));
    }
    if uri.query().is_some() {
        return Err(format!("server {server:?} must not have a query"));
    }
    Ok(server.trim_end_matches('/').to_string())
}

fn decode_data(data: &str, field: &str) -> Result<Vec<u8>, String> {
    // Kubeconfig writers sometimes wrap long base64 values; whitespace is not part of the data.
    let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| format!("{field} is not valid base64: {e}"))
}

fn read_relative(base: &Path, file: &str) -> Result<Vec<u8>, String> {
    let path = resolve_path(base, file);
    std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Resolves a path named in a kubeconfig: absolute paths as they are, relative ones from the
/// kubeconfig's folder (client-go's rule), and `~/` from `$HOME`.
pub fn resolve_path(base: &Path, file: &str) -> PathBuf {
    if let Some(rest) = file.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// The kubeconfig path the CLI uses when none is given: the first entry of `$KUBECONFIG`, else
/// `~/.kube/config`.
pub fn default_path() -> PathBuf {
    if let Some(list) = std::env::var_os("KUBECONFIG") {
        let list = list.to_string_lossy().to_string();
        if let Some(first) = list.split(':').find(|p| !p.is_empty()) {
            return PathBuf::from(first);
        }
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".kube").join("config")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn embedded_certificate_data() {
        let text = format!(
            r#"
apiVersion: v1
kind: Config
current-context: admin@ironplane
clusters:
- name: ironplane
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: {}
contexts:
- name: admin@ironplane
  context:
    cluster: ironplane
    user: admin
    namespace: team-a
users:
- name: admin
  user:
    client-certificate-data: {}
    client-key-data: {}
preferences: {{}}
"#,
            b64(b"CA PEM"),
            b64(b"CERT PEM"),
            b64(b"KEY PEM")
        );
        let resolved = resolve_bytes(text.as_bytes(), Path::new("/nowhere"), None).unwrap();
        assert_eq!(resolved.server, "https://127.0.0.1:6443");
        assert_eq!(resolved.ca_pem.as_deref(), Some(&b"CA PEM"[..]));
        assert_eq!(
            resolved.credentials,
            Credentials::ClientCertificate {
                cert_pem: b"CERT PEM".to_vec(),
                key_pem: b"KEY PEM".to_vec()
            }
        );
        assert_eq!(resolved.namespace.as_deref(), Some("team-a"));
        assert!(!resolved.insecure_skip_tls_verify);
    }

    #[test]
    fn file_paths_are_relative_to_the_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("bench-kc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        std::fs::write(dir.join("pki/ca.crt"), b"CA").unwrap();
        std::fs::write(dir.join("pki/admin.crt"), b"CERT").unwrap();
        std::fs::write(dir.join("admin.key"), b"KEY").unwrap();
        let text = format!(
            r#"
current-context: c
clusters:
- name: k
  cluster:
    server: https://localhost:6443
    certificate-authority: pki/ca.crt
    tls-server-name: kubernetes
contexts:
- name: c
  context: {{cluster: k, user: u}}
users:
- name: u
  user:
    client-certificate: pki/admin.crt
    client-key: {}
"#,
            dir.join("admin.key").display()
        );
        let path = dir.join("config");
        std::fs::write(&path, text).unwrap();
        let resolved = load(&path, None).unwrap();
        assert_eq!(resolved.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(resolved.tls_server_name.as_deref(), Some("kubernetes"));
        assert_eq!(
            resolved.credentials,
            Credentials::ClientCertificate {
                cert_pem: b"CERT".to_vec(),
                key_pem: b"KEY".to_vec()
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn token_and_token_file_and_insecure() {
        let text = r#"
current-context: a
clusters:
- name: k
  cluster: {server: "https://[::1]:6443", insecure-skip-tls-verify: true}
contexts:
- {name: a, context: {cluster: k, user: t}}
- {name: b, context: {cluster: k, user: f}}
- {name: anon, context: {cluster: k}}
users:
- name: t
  user: {token: " abc.def \n"}
- name: f
  user: {tokenFile: token.txt}
"#;
        let dir = std::env::temp_dir().join(format!("bench-kc-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token.txt"), "from-file\n").unwrap();

        let a = resolve_bytes(text.as_bytes(), &dir, None).unwrap();
        assert_eq!(a.credentials, Credentials::Token("abc.def".to_string()));
        assert!(a.insecure_skip_tls_verify);
        assert_eq!(a.server, "https://[::1]:6443");
        assert_eq!(a.ca_pem, None);

        let b = resolve_bytes(text.as_bytes(), &dir, Some("b")).unwrap();
        assert_eq!(b.credentials, Credentials::Token("from-file".to_string()));

        let anon = resolve_bytes(text.as_bytes(), &dir, Some("anon")).unwrap();
        assert_eq!(anon.credentials, Credentials::Anonymous);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unusable_configs_are_errors() {
        let base = Path::new("/nowhere");
        let no_current = "clusters: []\ncontexts: []\nusers: []\n";
        assert!(
            resolve_bytes(no_current.as_bytes(), base, None)
                .unwrap_err()
                .contains("current-context")
        );

        let missing_context = "current-context: x\ncontexts: null\n";
        assert!(
            resolve_bytes(missing_context.as_bytes(), base, None)
                .unwrap_err()
                .contains("\"x\" not found")
        );

        let exec = r#"
current-context: c
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {exec: {command: aws}}}]
"#;
        assert!(
            resolve_bytes(exec.as_bytes(), base, None)
                .unwrap_err()
                .contains("exec credential plugins are not supported")
        );

        let half_cert = r#"
current-context: c
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
users: [{name: u, user: {client-certificate-data: QUJD}}]
"#;
        assert!(
            resolve_bytes(half_cert.as_bytes(), base, None)
                .unwrap_err()
                .contains("client-key is not")
        );

        let bad_server = r#"
current-context: c
clusters: [{name: k, cluster: {server: "ftp://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: k}}]
"#;
        assert!(
            resolve_bytes(bad_server.as_bytes(), base, None)
                .unwrap_err()
                .contains("https://")
        );

        let bad_base64 = r#"
current-context: c
clusters: [{name: k, cluster: {server: "https://127.0.0.1:1", certificate-authority-data: "!!"}}]
contexts: [{name: c, context: {cluster: k}}]
"#;
        assert!(
            resolve_bytes(bad_base64.as_bytes(), base, None)
                .unwrap_err()
                .contains("not valid base64")
        );

        assert!(
            resolve_bytes(b"{{{", base, None)
                .unwrap_err()
                .contains("cannot parse")
        );
    }

    #[test]
    fn credentials_debug_hides_secrets() {
        let text = format!("{:?}", Credentials::Token("secret".to_string()));
        assert!(!text.contains("secret"));
    }
}
