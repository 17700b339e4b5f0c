//! Bootstrap token authentication (`--enable-bootstrap-token-auth`; upstream:
//! plugin/pkg/auth/authenticator/token/bootstrap): a token `<id>.<secret>` names the Secret
//! `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token`, and authenticates
//! as `system:bootstrap:<id>` in `system:bootstrappers` (plus the secret's
//! `auth-extra-groups`) while the secret allows authentication, is not expired and is not being
//! deleted.
//!
//! Secrets are read from the watch cache, falling back to a consistent read on a miss (a token
//! created a moment ago works at once). Every refusal is "not my token", as upstream's: the
//! request then gets 401 from the bearer-token authenticator; the reason goes to the log only.

use std::sync::{Arc, OnceLock};

use apiserver::authentication::token::TokenAuthenticator;
use apiserver::authentication::{AuthnError, UserInfo};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use base64::Engine;
use serde_json::Value;
use storage::ResourceVersion;

/// The secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The group every bootstrap token's user is in.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";

#[derive(Default)]
pub struct BootstrapTokenAuthenticator {
    api: OnceLock<Arc<ApiResources>>,
}

impl BootstrapTokenAuthenticator {
    pub fn set_api(&self, api: Arc<ApiResources>) {
        let _ = self.api.set(api);
    }

    async fn secret(&self, name: &str) -> Option<Value> {
        let store = self.api.get()?.get("", "v1", "secrets")?;
        let object = match store.get("kube-system", name, ResourceVersion::Any).await {
            Err(s) if s.code == 404 => store.get("kube-system", name, ResourceVersion::Unset).await,
            other => other,
        }
        .ok()?;
        object.value().ok()
    }
}

/// `<6 of [a-z0-9]>.<16 of [a-z0-9]>`, split.
fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// A `data` entry of the secret, decoded.
fn data(secret: &Value, key: &str) -> Option<String> {
    let encoded = secret.get("data")?.get(key)?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Upstream's check of an extra group: `system:bootstrappers:` then `[a-z0-9:-]`, ending in
/// `[a-z0-9]`, at most 255 characters after the prefix.
fn valid_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    !rest.is_empty()
        && rest.len() <= 256
        && rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
        && rest
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The user a secret gives to a token, or why it gives none.
pub fn user_of(
    secret: &Value,
    id: &str,
    token_secret: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<UserInfo, String> {
    if secret
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return Err("secret is being deleted".into());
    }
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE) {
        return Err(format!("secret is not of type {SECRET_TYPE}"));
    }
    let stored = data(secret, "token-secret").unwrap_or_default();
    let same = stored.len() == token_secret.len()
        && stored
            .bytes()
            .zip(token_secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        return Err("token secret does not match".into());
    }
    if data(secret, "token-id").as_deref() != Some(id) {
        return Err("token id does not match the secret".into());
    }
    if let Some(expiration) = data(secret, "expiration") {
        match chrono::DateTime::parse_from_rfc3339(&expiration) {
            Ok(t) if t.with_timezone(&chrono::Utc) < now => {
                return Err(format!("token expired at {expiration}"));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("unparseable expiration {expiration:?}: {e}")),
        }
    }
    if data(secret, "usage-bootstrap-authentication").as_deref() != Some("true") {
        return Err("token may not be used for authentication".into());
    }
    let mut groups = vec![BOOTSTRAPPERS.to_string()];
    if let Some(extra) = data(secret, "auth-extra-groups") {
        for group in extra.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            if !valid_group(group) {
                return Err(format!("invalid auth-extra-groups entry {group:?}"));
            }
            if !groups.iter().any(|g| g == group) {
                groups.push(group.to_string());
            }
        }
    }
    Ok(UserInfo {
        name: format!("system:bootstrap:{id}"),
        groups,
        ..UserInfo::default()
    })
}

#[async_trait]
impl TokenAuthenticator for BootstrapTokenAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        let Some((id, token_secret)) = parse_token(token) else {
            return Ok(None);
        };
        let Some(secret) = self.secret(&format!("bootstrap-token-{id}")).await else {
            return Ok(None);
        };
        match user_of(&secret, id, token_secret, chrono::Utc::now()) {
            Ok(user) => Ok(Some(user)),
            Err(why) => {
                tracing::debug!("bootstrap token {id}: {why}");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(extra: &[(&str, &str)]) -> Value {
        let mut data = json!({"token-id": b64("abcdef"), "token-secret": b64("0123456789abcdef"),
                              "usage-bootstrap-authentication": b64("true")});
        for (k, v) in extra {
            data[*k] = json!(b64(v));
        }
        json!({"type": SECRET_TYPE, "metadata": {"name": "bootstrap-token-abcdef"}, "data": data})
    }

    #[test]
    fn a_valid_secret_gives_the_bootstrap_user() {
        let now = chrono::Utc::now();
        let user = user_of(
            &secret(&[(
                "auth-extra-groups",
                "system:bootstrappers:kubeadm:default-node-token",
            )]),
            "abcdef",
            "0123456789abcdef",
            now,
        )
        .unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token"
            ]
        );
        assert!(user_of(&secret(&[]), "abcdef", "0123456789abcdeX", now).is_err());
        assert!(
            user_of(
                &secret(&[("expiration", "2000-01-01T00:00:00Z")]),
                "abcdef",
                "0123456789abcdef",
                now
            )
            .is_err()
        );
        assert!(
            user_of(
                &secret(&[("usage-bootstrap-authentication", "false")]),
                "abcdef",
                "0123456789abcdef",
                now
            )
            .is_err()
        );
        assert!(
            user_of(
                &secret(&[("auth-extra-groups", "system:masters")]),
                "abcdef",
                "0123456789abcdef",
                now
            )
            .is_err()
        );
        let mut deleting = secret(&[]);
        deleting["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
        assert!(user_of(&deleting, "abcdef", "0123456789abcdef", now).is_err());
        assert_eq!(
            parse_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse_token("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse_token("abcdef.0123"), None);
    }
}
