//! Webhook kubeconfig files (`--authentication-token-webhook-config-file`,
//! `--authorization-webhook-config-file`, an authorizer's `connectionInfo.kubeConfigFile`): the
//! current context's cluster and user become a webhook [`ClientConfig`], as client-go's
//! `clientcmd` builds a REST config from them.
//!
//! Only what a webhook client uses is read: the server URL, the CA (file or data), the client
//! certificate and key (file or data) and a bearer token (inline or file). Relative file names
//! are relative to the kubeconfig's folder, as client-go resolves them.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;

use super::webhook::ClientConfig;

/// Reads a kubeconfig file into the client configuration of its current context (or of its only
/// context when none is current).
pub fn load(path: &str) -> Result<ClientConfig, String> {
    let fail = |why: String| format!("invalid configuration file {path:?}: {why}");
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let dir = Path::new(path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    from_value(&doc, &dir).map_err(fail)
}

fn named<'a>(doc: &'a Value, list: &str, name: &str, field: &str) -> Option<&'a Value> {
    doc.get(list)?
        .as_array()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?
        .get(field)
}

fn from_value(doc: &Value, dir: &Path) -> Result<ClientConfig, String> {
    let contexts = doc.get("contexts").and_then(Value::as_array);
    let current = doc
        .get("current-context")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let context = match current {
        Some(name) => named(doc, "contexts", name, "context")
            .ok_or_else(|| format!("context was not found for specified context: {name}"))?,
        None => match contexts.map(Vec::as_slice) {
            Some([only]) => only.get("context").unwrap_or(&Value::Null),
            _ => return Err("no current context is set".into()),
        },
    };
    let text = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    let cluster_name = text(context, "cluster");
    let cluster = named(doc, "clusters", &cluster_name, "cluster")
        .ok_or_else(|| format!("cluster {cluster_name:?} was not found"))?;
    let server = text(cluster, "server");
    if server.is_empty() {
        return Err("no server found for cluster".into());
    }
    let user_name = text(context, "user");
    let user = named(doc, "users", &user_name, "user").unwrap_or(&Value::Null);
    let ca_bundle = data_or_file(cluster, "certificate-authority", dir)?.unwrap_or_default();
    let cert = data_or_file(user, "client-certificate", dir)?;
    let key = data_or_file(user, "client-key", dir)?;
    let client_identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err("client-cert-data and client-key-data must be specified together".into()),
    };
    let mut bearer_token = Some(text(user, "token")).filter(|t| !t.is_empty());
    let token_file = text(user, "tokenFile");
    if bearer_token.is_none() && !token_file.is_empty() {
        let token = std::fs::read_to_string(resolve(dir, &token_file))
            .map_err(|e| format!("reading {token_file}: {e}"))?;
        bearer_token = Some(token.trim().to_string());
    }
    Ok(ClientConfig {
        url: Some(server),
        service: None,
        ca_bundle,
        client_identity,
        bearer_token,
    })
}

fn resolve(dir: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// `<field>-data` (base64) or `<field>` (a file name).
fn data_or_file(v: &Value, field: &str, dir: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(data) = v.get(format!("{field}-data")).and_then(Value::as_str) {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| format!("{field}-data: {e}"));
    }
    match v.get(field).and_then(Value::as_str) {
        Some(file) if !file.is_empty() => std::fs::read(resolve(dir, file))
            .map(Some)
            .map_err(|e| format!("unable to read {field} {file:?}: {e}")),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_contexts_cluster_and_user_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), "CA").unwrap();
        let path = dir.path().join("hook.yaml");
        std::fs::write(
            &path,
            r#"
apiVersion: v1
kind: Config
clusters:
- name: hook
  cluster: {server: "https://127.0.0.1:9443/authn", certificate-authority: ca.pem}
users:
- name: api
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ, token: secret}
contexts:
- name: default
  context: {cluster: hook, user: api}
current-context: default
"#,
        )
        .unwrap();
        let c = load(path.to_str().unwrap()).unwrap();
        assert_eq!(c.url.as_deref(), Some("https://127.0.0.1:9443/authn"));
        assert_eq!(c.ca_bundle, b"CA");
        assert_eq!(c.client_identity, Some((b"CERT".to_vec(), b"KEY".to_vec())));
        assert_eq!(c.bearer_token.as_deref(), Some("secret"));
        std::fs::write(&path, "clusters: []\ncurrent-context: x\n").unwrap();
        assert!(
            load(path.to_str().unwrap())
                .unwrap_err()
                .contains("context was not found")
        );
    }
}
