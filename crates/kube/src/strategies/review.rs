//! Access reviews, SelfSubjectReview and TokenReview: create-only kinds that are never stored.
//! Until RBAC arrives every authenticated user may do everything, and the access reviews say so;
//! a TokenReview asks the server's own authenticators about a token.

use std::sync::Arc;

use apimachinery::Status;
use apiserver::authentication::{Authenticator, AuthnRequest, UserInfo};
use apiserver::registry::Strategy;
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct AccessReviewStrategy;

#[async_trait]
impl Strategy for AccessReviewStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        _user: &UserInfo,
    ) -> Option<Result<Value, Status>> {
        let mut out = obj.clone();
        if out.get("kind").and_then(Value::as_str) == Some("SelfSubjectRulesReview") {
            out["status"] = json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            });
        } else {
            out["status"] = json!({"allowed": true});
        }
        Some(Ok(out))
    }
}

pub struct SelfSubjectReviewStrategy;

#[async_trait]
impl Strategy for SelfSubjectReviewStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        user: &UserInfo,
    ) -> Option<Result<Value, Status>> {
        let mut out = obj.clone();
        out["status"] = json!({"userInfo": user_info(user)});
        Some(Ok(out))
    }
}

/// `authentication.k8s.io/v1` UserInfo.
fn user_info(user: &UserInfo) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// TokenReview: is `spec.token` a bearer token this server accepts, and whose (upstream:
/// pkg/registry/authentication/tokenreview).
pub struct TokenReviewStrategy {
    pub authenticator: Arc<dyn Authenticator>,
}

#[async_trait]
impl Strategy for TokenReviewStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        _user: &UserInfo,
    ) -> Option<Result<Value, Status>> {
        let token = obj
            .pointer("/spec/token")
            .and_then(Value::as_str)
            .unwrap_or("");
        if token.is_empty() {
            return Some(Err(Status::bad_request(
                "token is required for TokenReview in authentication",
            )));
        }
        let mut headers = http::HeaderMap::new();
        let Ok(value) = http::HeaderValue::from_str(&format!("Bearer {token}")) else {
            return Some(Err(Status::bad_request(
                "token is not a valid header value",
            )));
        };
        headers.insert(http::header::AUTHORIZATION, value);
        let outcome = self
            .authenticator
            .authenticate(&AuthnRequest {
                headers: &headers,
                peer_certificates: None,
            })
            .await;
        let mut out = obj.clone();
        out["status"] = match outcome {
            Ok(Some(user)) => json!({"authenticated": true, "user": user_info(&user)}),
            Ok(None) => json!({"user": {}}),
            Err(e) => json!({"user": {}, "error": e.to_string()}),
        };
        Some(Ok(out))
    }
}
