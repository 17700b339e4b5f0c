//! The tokens controller (upstream: pkg/controller/serviceaccount/tokens_controller.go): a
//! Secret of type `kubernetes.io/service-account-token` that names a ServiceAccount in its
//! `kubernetes.io/service-account.name` annotation is filled in — a legacy token of that account
//! in `data.token`, the cluster CA in `data.ca.crt`, the namespace in `data.namespace`, and the
//! account's uid in the `kubernetes.io/service-account.uid` annotation. A secret whose account
//! does not exist (or has another uid) is deleted, and so are an account's secrets when the
//! account is deleted.
//!
//! Since Kubernetes 1.24 no secret is made for an account unasked: only secrets users create
//! are filled in.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{DeleteOptions, RegistryStore, Requester, UpdateOptions};
use base64::Engine;
use serde_json::{Value, json};
use storage::ResourceVersion;
use tokio::sync::mpsc;

use crate::serviceaccount::Tokens;

pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// How long a failed sync waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

enum Work {
    /// A secret to fill in or delete.
    Secret { namespace: String, name: String },
    /// An account that is gone: its secrets go too.
    AccountDeleted {
        namespace: String,
        name: String,
        uid: String,
    },
}

/// Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, tokens: Arc<Tokens>, root_ca: String) {
    let (Some(secrets), Some(accounts)) = (
        api.get("", "v1", "secrets").cloned(),
        api.get("", "v1", "serviceaccounts").cloned(),
    ) else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let secret_tx = tx.clone();
    let retry_tx = tx.clone();
    tokio::spawn(reflector::run(secrets.clone(), move |delta| {
        let mut queue = |v: &Value| {
            if v.get("type").and_then(Value::as_str) == Some(SECRET_TYPE) {
                let _ = secret_tx.send(Work::Secret {
                    namespace: v.namespace().to_string(),
                    name: v.name().to_string(),
                });
            }
        };
        match delta {
            Delta::Replace(items) => items.iter().for_each(&mut queue),
            Delta::Upsert(v) => queue(&v),
            Delta::Deleted(_) => {}
        }
    }));
    tokio::spawn(reflector::run(accounts.clone(), move |delta| {
        if let Delta::Deleted(v) = delta {
            let _ = tx.send(Work::AccountDeleted {
                namespace: v.namespace().to_string(),
                name: v.name().to_string(),
                uid: v.uid().to_string(),
            });
        }
    }));
    let user = super::kube_system_account("tokens-controller");
    let requester = Requester { user: &user };
    // Upstream's controller updates through the controller manager's client: the fields it
    // fills in are the `kube-controller-manager` Update entry's.
    let writer = Writer {
        requester: &requester,
        update: UpdateOptions {
            write: api.internal_write(&secrets, super::CONTROLLER_MANAGER),
            ..UpdateOptions::default()
        },
    };
    while let Some(work) = rx.recv().await {
        let result = match &work {
            Work::Secret { namespace, name } => {
                sync_secret(
                    &secrets, &accounts, &tokens, &root_ca, &writer, namespace, name,
                )
                .await
            }
            Work::AccountDeleted {
                namespace,
                name,
                uid,
            } => delete_account_secrets(&secrets, &requester, namespace, name, uid).await,
        };
        if let Err(e) = result {
            // Tried again after a pause, behind what is queued by then.
            tracing::debug!(error = %e, "tokens controller: sync failed; retrying");
            let again = retry_tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RETRY).await;
                let _ = again.send(work);
            });
        }
    }
}

/// Who the controller writes as, and how its updates are recorded.
struct Writer<'a> {
    requester: &'a Requester<'a>,
    update: UpdateOptions,
}

fn annotation<'a>(v: &'a Value, key: &str) -> &'a str {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn data(v: &Value, key: &str) -> Option<Vec<u8>> {
    let encoded = v.get("data")?.get(key)?.as_str()?;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
}

/// `syncSecret`: fill the secret in, or delete it when its account is missing.
async fn sync_secret(
    secrets: &RegistryStore,
    accounts: &RegistryStore,
    tokens: &Tokens,
    root_ca: &str,
    writer: &Writer<'_>,
    namespace: &str,
    name: &str,
) -> Result<(), String> {
    let requester = writer.requester;
    let secret = match secrets.get(namespace, name, ResourceVersion::Unset).await {
        Ok(o) => o.value().map_err(|e| e.to_string())?,
        Err(s) if s.code == 404 => return Ok(()),
        Err(s) => return Err(s.message),
    };
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE)
        || secret
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
    {
        return Ok(());
    }
    let account_name = annotation(&secret, NAME_ANNOTATION).to_string();
    let wanted_uid = annotation(&secret, UID_ANNOTATION).to_string();
    let account = match accounts
        .get(namespace, &account_name, ResourceVersion::Unset)
        .await
    {
        Ok(o) => Some(o.value().map_err(|e| e.to_string())?),
        Err(s) if s.code == 404 => None,
        Err(s) => return Err(s.message),
    };
    let account = account.filter(|a| wanted_uid.is_empty() || a.uid() == wanted_uid);
    let Some(account) = account else {
        // The secret's account is gone or another one: the secret goes, upon its uid.
        let opts = DeleteOptions {
            precondition_uid: Some(secret.uid().to_string()),
            ..DeleteOptions::default()
        };
        return match secrets.delete(requester, namespace, name, &opts).await {
            Ok(_) => Ok(()),
            Err(s) if matches!(s.code, 404 | 409) => Ok(()),
            Err(s) => Err(s.message),
        };
    };
    let ca_ok = data(&secret, "ca.crt").is_some_and(|c| !c.is_empty());
    let ns_ok = data(&secret, "namespace").as_deref() == Some(namespace.as_bytes());
    let token_ok = data(&secret, "token").is_some_and(|t| !t.is_empty());
    if ca_ok && ns_ok && token_ok && wanted_uid == account.uid() {
        return Ok(());
    }
    let token = tokens.legacy_token(namespace, &account_name, account.uid(), name)?;
    let uid = account.uid().to_string();
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let expected_uid = secret.uid().to_string();
    let mut updater = |current: Option<&Value>| -> Result<Value, apimachinery::Status> {
        let mut s = current
            .cloned()
            .ok_or_else(|| apimachinery::Status::gone("the secret is gone"))?;
        if s.uid() != expected_uid {
            return Err(apimachinery::Status::gone("the secret was replaced"));
        }
        if !s["data"].is_object() {
            s["data"] = json!({});
        }
        if data(&s, "ca.crt").is_none_or(|c| c.is_empty()) {
            s["data"]["ca.crt"] = json!(b64(root_ca.as_bytes()));
        }
        s["data"]["namespace"] = json!(b64(namespace.as_bytes()));
        if data(&s, "token").is_none_or(|t| t.is_empty()) {
            s["data"]["token"] = json!(b64(token.as_bytes()));
        }
        if !s["metadata"]["annotations"].is_object() {
            s["metadata"]["annotations"] = json!({});
        }
        s["metadata"]["annotations"][UID_ANNOTATION] = json!(uid);
        Ok(s)
    };
    match secrets
        .update(requester, namespace, name, &mut updater, &writer.update)
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if matches!(s.code, 404 | 409 | 410) => Ok(()),
        Err(s) => Err(s.message),
    }
}

/// The secrets of a deleted account are deleted (those naming it, and its uid if they say one).
async fn delete_account_secrets(
    secrets: &RegistryStore,
    requester: &Requester<'_>,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<(), String> {
    let list = secrets
        .list(namespace, &Default::default())
        .await
        .map_err(|s| s.message)?;
    for item in list.items.iter().filter_map(|o| o.value().ok()) {
        let secret_uid = annotation(&item, UID_ANNOTATION);
        if item.get("type").and_then(Value::as_str) == Some(SECRET_TYPE)
            && annotation(&item, NAME_ANNOTATION) == name
            && (secret_uid.is_empty() || secret_uid == uid)
        {
            match secrets
                .delete(requester, namespace, item.name(), &DeleteOptions::default())
                .await
            {
                Ok(_) => {}
                Err(s) if s.code == 404 => {}
                Err(s) => return Err(s.message),
            }
        }
    }
    Ok(())
}
