//! Webhook token authentication (`--authentication-token-webhook-config-file`; upstream:
//! k8s.io/apiserver/plugin/pkg/authenticator/token/webhook): a bearer token no other
//! authenticator recognises is sent in a TokenReview to a remote service, whose answer is cached
//! for `--authentication-token-webhook-cache-ttl` (successes and failures alike, as upstream).
//!
//! The webhook's kubeconfig gives where it listens and how the server presents itself
//! (`util::kubeconfig`). A call that fails (unreachable, a 5xx, an answer that is not a
//! TokenReview) is retried with upstream's backoff (up to 5 tries, 500 ms doubling) and then
//! refuses the token: the request gets 401.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::cache::TokenCache;
use super::token::TokenAuthenticator;
use super::{AuthnError, UserInfo};
use crate::util::webhook::{ClientConfig, post_json};

/// How long one call may take (upstream's request timeout for token webhooks).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Upstream's `DefaultRequestTimeout`-bounded retry backoff: tries and first pause.
const TRIES: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

pub struct WebhookTokenAuthenticator {
    client: ClientConfig,
    /// `authentication.k8s.io/<version>` of the TokenReviews sent (`v1` or `v1beta1`).
    api_version: String,
    /// The server's audiences (`--api-audiences`), sent with each review.
    audiences: Vec<String>,
    cache: TokenCache,
}

impl WebhookTokenAuthenticator {
    /// From the webhook's kubeconfig file, `--authentication-token-webhook-version` and
    /// `--authentication-token-webhook-cache-ttl`.
    pub fn from_file(
        path: &str,
        version: &str,
        cache_ttl: Duration,
        audiences: Vec<String>,
    ) -> Result<Self, String> {
        if !["v1", "v1beta1"].contains(&version) {
            return Err(format!(
                "unsupported authentication webhook version {version:?}, supported versions are \"v1\", \"v1beta1\""
            ));
        }
        Ok(WebhookTokenAuthenticator {
            client: crate::util::kubeconfig::load(path)?,
            api_version: format!("authentication.k8s.io/{version}"),
            audiences,
            cache: TokenCache::new(cache_ttl, cache_ttl),
        })
    }

    async fn review(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        let mut spec = json!({"token": token});
        if !self.audiences.is_empty() {
            spec["audiences"] = json!(self.audiences);
        }
        let review = json!({
            "apiVersion": self.api_version,
            "kind": "TokenReview",
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"user": {}},
        });
        let mut pause = FIRST_BACKOFF;
        let mut tries = 0;
        let answer = loop {
            tries += 1;
            match post_json(&self.client, None, &review, CALL_TIMEOUT).await {
                Ok(answer) => break answer,
                Err(e) if tries >= TRIES => {
                    tracing::warn!("token webhook: {}", e.client_text());
                    return Err(AuthnError::InvalidToken(format!(
                        "webhook call failed: {}",
                        e.client_text()
                    )));
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
            }
        };
        user_of(&answer, &self.audiences)
    }
}

/// The user a TokenReview answer authenticates, or why not.
fn user_of(answer: &Value, audiences: &[String]) -> Result<Option<UserInfo>, AuthnError> {
    let status = answer.get("status").unwrap_or(&Value::Null);
    // The review asked for the server's audiences: an answer naming audiences must share one
    // with them, else the token is not for this server (an answer naming none is taken to
    // accept the server's own, as upstream's implicit audiences).
    let accepted: Vec<&str> = status
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !audiences.is_empty()
        && !accepted.is_empty()
        && !accepted.iter().any(|a| audiences.iter().any(|w| w == a))
    {
        return Ok(None);
    }
    if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
        let error = status.get("error").and_then(Value::as_str).unwrap_or("");
        return if error.is_empty() {
            Ok(None)
        } else {
            Err(AuthnError::InvalidToken(error.to_string()))
        };
    }
    let user = status.get("user").unwrap_or(&Value::Null);
    let text = |f: &str| {
        user.get(f)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Some(UserInfo {
        name: text("username"),
        uid: text("uid"),
        groups: strings(user.get("groups").unwrap_or(&Value::Null)),
        extra: user
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    }))
}

#[async_trait]
impl TokenAuthenticator for WebhookTokenAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        self.cache
            .get_or_insert_with(token.as_bytes(), || self.review(token))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_users_or_refusals() {
        let ok = json!({"status": {"authenticated": true, "user": {"username": "ann", "uid": "1",
            "groups": ["dev"], "extra": {"example.com/team": ["a", "b"]}}}});
        let user = user_of(&ok, &[]).unwrap().unwrap();
        assert_eq!(user.name, "ann");
        assert_eq!(user.groups, ["dev"]);
        assert_eq!(user.extra["example.com/team"], ["a", "b"]);
        assert!(
            user_of(&json!({"status": {"authenticated": false}}), &[])
                .unwrap()
                .is_none()
        );
        let err = user_of(
            &json!({"status": {"authenticated": false, "error": "revoked"}}),
            &[],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "invalid bearer token, revoked");
        // Audiences the webhook names must meet the server's; naming none accepts them.
        let aud = vec!["api".to_string()];
        assert!(user_of(&ok, &aud).unwrap().is_some());
        let mut with = ok.clone();
        with["status"]["audiences"] = json!(["other"]);
        assert!(user_of(&with, &aud).unwrap().is_none());
        with["status"]["audiences"] = json!(["other", "api"]);
        assert!(user_of(&with, &aud).unwrap().is_some());
    }
}
