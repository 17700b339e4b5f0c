//! The bootstrap token controllers (upstream: pkg/controller/bootstrap), both off unless
//! `--controllers` names them, as in kube-controller-manager:
//! - the token cleaner (`token-cleaner-controller`): bootstrap token Secrets of `kube-system`
//!   are deleted once their `expiration` has passed (an expiration that does not parse counts
//!   as passed);
//! - the bootstrap signer (`bootstrap-signer-controller`): the `cluster-info` ConfigMap of
//!   `kube-public` carries, for every valid token allowed to sign (`usage-bootstrap-signing`),
//!   a detached HS256 JWS of its `kubeconfig` under `jws-kubeconfig-<token id>`, which
//!   `kubeadm join` checks before it trusts the cluster's CA.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use serde_json::Value;
use storage::{ListOptions, ResourceVersion, WatchEvent, WatchOptions};

use super::expiry::{self, Expiring};
use crate::bootstrap_token::SECRET_TYPE;

const SECRET_PREFIX: &str = "bootstrap-token-";
const SIGNATURE_PREFIX: &str = "jws-kubeconfig-";
const CLUSTER_INFO: (&str, &str) = ("kube-public", "cluster-info");

/// A value of the Secret's `data`, decoded.
fn data(secret: &Value, key: &str) -> Option<String> {
    let b = STANDARD
        .decode(secret.pointer(&format!("/data/{key}"))?.as_str()?)
        .ok()?;
    String::from_utf8(b).ok()
}

/// `GetExpiration`: none when the Secret has no `expiration`; an unparseable one has passed.
fn expiration(secret: &Value) -> Option<DateTime<Utc>> {
    let e = data(secret, "expiration")?;
    Some(expiry::parse_time(&e).unwrap_or(DateTime::UNIX_EPOCH))
}

/// When the token cleaner deletes `secret`.
fn token_expires(secret: &Value) -> Option<DateTime<Utc>> {
    if secret.namespace() != "kube-system"
        || secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE)
    {
        return None;
    }
    expiration(secret)
}

/// Runs the token cleaner until the process ends.
pub async fn run_token_cleaner(api: Arc<ApiResources>) {
    let Some(secrets) = api.get("", "v1", "secrets").cloned() else {
        return;
    };
    expiry::run(Expiring {
        store: secrets,
        expires: token_expires,
        propagation: None,
        user: super::kube_system_account("token-cleaner"),
    })
    .await;
}

/// `validateSecretForSigning`: the token id and secret of a token that may sign now.
fn signing_token(secret: &Value, now: DateTime<Utc>) -> Option<(String, String)> {
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE) {
        return None;
    }
    let name_id = secret.name().strip_prefix(SECRET_PREFIX)?;
    let id = data(secret, "token-id")?;
    let token = data(secret, "token-secret")?;
    if id.is_empty() || id != name_id || token.is_empty() {
        return None;
    }
    if expiration(secret).is_some_and(|t| t <= now) {
        return None;
    }
    (data(secret, "usage-bootstrap-signing").as_deref() == Some("true")).then_some((id, token))
}

/// `jws.ComputeDetachedSignature`: a compact HS256 JWS of `content` keyed by the token secret,
/// with its payload left out (`header..signature`). The header is go-jose's: `alg` then `kid`.
fn detached_signature(content: &str, id: &str, token: &str) -> String {
    let header = serde_json::json!({"alg": "HS256", "kid": id}).to_string();
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.as_bytes()),
        URL_SAFE_NO_PAD.encode(content.as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
    let tag = ring::hmac::sign(&key, signing_input.as_bytes());
    format!(
        "{}..{}",
        URL_SAFE_NO_PAD.encode(header.as_bytes()),
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    )
}

/// The `data` of `cluster-info` signed by `tokens` (id → secret); `None` when nothing changes
/// or there is no `kubeconfig` to sign.
fn signed(config_map: &Value, tokens: &BTreeMap<String, String>) -> Option<Value> {
    let data = config_map.get("data")?.as_object()?;
    let content = data.get("kubeconfig")?.as_str()?;
    let mut new = data.clone();
    new.retain(|k, _| !k.starts_with(SIGNATURE_PREFIX));
    for (id, token) in tokens {
        new.insert(
            format!("{SIGNATURE_PREFIX}{id}"),
            Value::from(detached_signature(content, id, token)),
        );
    }
    (new != *data).then_some(Value::Object(new))
}

/// Runs the bootstrap signer until the process ends.
pub async fn run_bootstrap_signer(api: Arc<ApiResources>) {
    let (Some(secrets), Some(config_maps)) = (
        api.get("", "v1", "secrets").cloned(),
        api.get("", "v1", "configmaps").cloned(),
    ) else {
        return;
    };
    let user = super::kube_system_account("bootstrap-signer");
    let write = api.internal_write(&config_maps, super::CONTROLLER_MANAGER);
    loop {
        let opts = WatchOptions {
            resource_version: ResourceVersion::Unset,
            send_initial_events: None,
            allow_bookmarks: false,
            predicate: None,
        };
        let (Ok(mut secret_events), Ok(mut cm_events)) = (
            secrets.watch("kube-system", &opts).await,
            config_maps.watch(CLUSTER_INFO.0, &opts).await,
        ) else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        loop {
            // Any change to a token or to cluster-info, and every minute for expirations.
            let changed = tokio::select! {
                e = secret_events.recv() => e.map(Some),
                e = cm_events.recv() => e.map(Some),
                _ = tokio::time::sleep(Duration::from_secs(60)) => Some(None),
            };
            match changed {
                None | Some(Some(WatchEvent::Error(_))) => break,
                Some(_) => {}
            }
            if let Err(e) = sign(&secrets, &config_maps, &user, &write).await {
                tracing::debug!(error = %e, "bootstrap signer: cluster-info not signed");
            }
        }
    }
}

async fn sign(
    secrets: &RegistryStore,
    config_maps: &RegistryStore,
    user: &apiserver::authentication::UserInfo,
    write: &apiserver::registry::WriteOptions,
) -> Result<(), String> {
    let list = secrets
        .list("kube-system", &ListOptions::default())
        .await
        .map_err(|s| s.message)?;
    let now = Utc::now();
    let mut tokens = BTreeMap::new();
    for item in list.items {
        let Ok(s) = item.value() else { continue };
        if let Some((id, token)) = signing_token(&s, now) {
            tokens.entry(id).or_insert(token);
        }
    }
    let mut updater = |current: Option<&Value>| {
        let gone =
            || apimachinery::Status::new(404, apimachinery::Reason::NotFound, "no cluster-info");
        let mut cm = current.cloned().ok_or_else(gone)?;
        if let Some(data) = signed(&cm, &tokens) {
            cm["data"] = data;
        }
        Ok(cm)
    };
    let opts = UpdateOptions {
        write: write.clone(),
        ..Default::default()
    };
    match config_maps
        .update(
            &Requester { user },
            CLUSTER_INFO.0,
            CLUSTER_INFO.1,
            &mut updater,
            &opts,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if s.code == 404 || s.code == 409 => Ok(()),
        Err(s) => Err(s.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(name: &str, fields: &[(&str, &str)]) -> Value {
        let data: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(STANDARD.encode(v))))
            .collect();
        json!({"metadata": {"name": name, "namespace": "kube-system"},
               "type": SECRET_TYPE, "data": data})
    }

    #[test]
    fn expirations_as_upstream_reads_them() {
        let s = secret(
            "bootstrap-token-abcdef",
            &[("expiration", "2026-01-01T00:00:00Z")],
        );
        assert_eq!(
            token_expires(&s).map(|t| t.to_rfc3339()),
            Some("2026-01-01T00:00:00+00:00".into())
        );
        let bad = secret("bootstrap-token-abcdef", &[("expiration", "tomorrow")]);
        assert_eq!(token_expires(&bad), Some(DateTime::UNIX_EPOCH));
        assert_eq!(token_expires(&secret("bootstrap-token-abcdef", &[])), None);
        let mut opaque = s.clone();
        opaque["type"] = json!("Opaque");
        assert_eq!(token_expires(&opaque), None);
    }

    #[test]
    fn only_valid_signing_tokens_sign() {
        let now = expiry::parse_time("2026-06-01T00:00:00Z").unwrap();
        let ok = [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-signing", "true"),
        ];
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &ok), now),
            Some(("abcdef".into(), "0123456789abcdef".into()))
        );
        assert_eq!(
            signing_token(&secret("bootstrap-token-zzzzzz", &ok), now),
            None,
            "id ≠ name"
        );
        let mut expired = ok.to_vec();
        expired.push(("expiration", "2026-01-01T00:00:00Z"));
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &expired), now),
            None
        );
        assert_eq!(
            signing_token(&secret("bootstrap-token-abcdef", &ok[..2]), now),
            None,
            "no usage"
        );
    }

    /// The signature verifies as kubeadm checks it: recomputed from the header and content.
    #[test]
    fn the_detached_signature_is_an_hs256_jws_without_its_payload() {
        let sig = detached_signature("content", "abcdef", "0123456789abcdef");
        let (header, rest) = sig.split_once("..").unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(header).unwrap(),
            br#"{"alg":"HS256","kid":"abcdef"}"#
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
        let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode("content"));
        ring::hmac::verify(
            &key,
            input.as_bytes(),
            &URL_SAFE_NO_PAD.decode(rest).unwrap(),
        )
        .expect("a valid HMAC");
        // Signing replaces old signatures and drops those of tokens that are gone.
        let cm = json!({"data": {"kubeconfig": "content", "jws-kubeconfig-old": "x"}});
        let tokens: BTreeMap<String, String> =
            [("abcdef".to_string(), "0123456789abcdef".to_string())].into();
        let data = signed(&cm, &tokens).unwrap();
        assert_eq!(
            data,
            json!({"kubeconfig": "content", "jws-kubeconfig-abcdef": sig})
        );
        let again = json!({"data": data});
        assert_eq!(signed(&again, &tokens), None, "nothing to change");
    }
}
