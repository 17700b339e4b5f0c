//! ServiceAccounts (upstream: pkg/registry/core/serviceaccount/strategy.go): secret references
//! keep only their names, and the `kubernetes.io/enforce-mountable-secrets` annotation warns
//! (deprecated since v1.32) when it is set or newly added. The `token` subresource issues
//! tokens through `crate::serviceaccount`.

use std::sync::Arc;

use apiserver::authentication::UserInfo;
use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct ServiceAccountStrategy {
    pub tokens: Option<Arc<crate::serviceaccount::Tokens>>,
}

const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";

/// `cleanSecretReferences`: each secret reference becomes `{name}`.
fn clean_secret_references(sa: &mut Value) {
    if let Some(secrets) = sa.get_mut("secrets").and_then(Value::as_array_mut) {
        for s in secrets {
            let name = s.get("name").cloned().unwrap_or(json!(""));
            *s = json!({"name": name});
        }
    }
}

fn has_annotation(sa: &Value) -> bool {
    sa.pointer("/metadata/annotations")
        .and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS))
        .is_some()
}

fn warning() -> String {
    format!(
        "metadata.annotations[{ENFORCE_MOUNTABLE_SECRETS}]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets"
    )
}

#[async_trait::async_trait]
impl Strategy for ServiceAccountStrategy {
    /// `serviceaccounts/<name>/token`: a TokenRequest answered with a token. A dry run issues
    /// one too, as upstream's subresource ignores dry-run.
    async fn serve_subresource_create(
        &self,
        subresource: &str,
        namespace: &str,
        name: &str,
        body: &Value,
        _user: &UserInfo,
        _dry_run: bool,
    ) -> Option<Result<Value, apimachinery::Status>> {
        let tokens = self.tokens.as_ref().filter(|_| subresource == "token")?;
        Some(tokens.token_request(namespace, name, body).await)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        clean_secret_references(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        clean_secret_references(new);
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        if has_annotation(obj) {
            vec![warning()]
        } else {
            Vec::new()
        }
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        if has_annotation(new) && !has_annotation(old) {
            vec![warning()]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_references_keep_their_names() {
        let mut sa = json!({"secrets": [{"name": "tok", "namespace": "x", "uid": "u"}]});
        ServiceAccountStrategy { tokens: None }.prepare_for_create(&mut sa);
        assert_eq!(sa["secrets"], json!([{"name": "tok"}]));
    }

    #[test]
    fn the_mountable_secrets_annotation_warns_once() {
        let sa = json!({"metadata": {"annotations": {ENFORCE_MOUNTABLE_SECRETS: "true"}}});
        assert_eq!(
            ServiceAccountStrategy { tokens: None }
                .warnings_on_create(&sa)
                .len(),
            1
        );
        assert!(
            ServiceAccountStrategy { tokens: None }
                .warnings_on_update(&sa, &sa)
                .is_empty()
        );
        assert_eq!(
            ServiceAccountStrategy { tokens: None }.warnings_on_update(&sa, &json!({}))[0],
            "metadata.annotations[kubernetes.io/enforce-mountable-secrets]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets"
        );
    }
}
