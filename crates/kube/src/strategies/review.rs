//! Access reviews and SelfSubjectReview: create-only kinds that are never stored. Until RBAC
//! arrives every authenticated user may do everything, and the reviews say so.

use apimachinery::Status;
use apiserver::authentication::UserInfo;
use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct AccessReviewStrategy;

impl Strategy for AccessReviewStrategy {
    fn create_without_storage(
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

impl Strategy for SelfSubjectReviewStrategy {
    fn create_without_storage(
        &self,
        obj: &Value,
        user: &UserInfo,
    ) -> Option<Result<Value, Status>> {
        let mut out = obj.clone();
        let mut info = json!({"username": user.name, "groups": user.groups});
        if !user.uid.is_empty() {
            info["uid"] = json!(user.uid);
        }
        if !user.extra.is_empty() {
            info["extra"] = json!(user.extra);
        }
        out["status"] = json!({"userInfo": info});
        Some(Ok(out))
    }
}
