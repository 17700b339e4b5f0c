//! Service-account tokens (upstream: pkg/serviceaccount, pkg/registry/core/serviceaccount/
//! storage/token.go): the TokenRequest subresource `serviceaccounts/<name>/token` that
//! `kubectl create token` and the kubelet call, the bound tokens it issues (JWTs signed with
//! the service-account signing key — RS256, ES256 or ES384 by its type — bound to a Pod, Secret
//! or Node), and the authenticator that accepts them — only while the service account, and the
//! object a token is bound to, still exist with the same uid. Keys are read and tokens signed
//! and checked by `apiserver::authentication::jwt` (`keyfile`, `keys`).
//!
//! The issuer's OIDC discovery documents are built here too (`discovery_documents`).
//!
//! Legacy tokens of `kubernetes.io/service-account-token` Secrets are made here (`legacy_token`,
//! for the tokens controller in `controllers::serviceaccount_tokens`) and checked here against
//! their secret (`check_legacy`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::validation::{FieldError, FieldPath, invalid_status};
use apiserver::authentication::cache::VerifiedSignatures;
use apiserver::authentication::jwt::keyfile::{self, SigningKey};
use apiserver::authentication::jwt::keys::{Jwk, Jws, PublicKey};
use apiserver::authentication::{AuthnError, CREDENTIAL_ID_KEY, UserInfo};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::{Value, json};
use storage::ResourceVersion;

use crate::strategies::fields::strs_at;

/// kubeadm's issuer, the zero-config default of `--service-account-issuer`.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// `SetDefaults_TokenRequestSpec`.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The kubelet's request (`WarnOnlyBoundTokenExpirationSeconds`) that
/// `--service-account-extend-token-expiration` extends to a year for pod-bound tokens.
const WARN_ONLY_EXPIRATION_SECONDS: i64 = 3607;
const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;
/// go-jose's default leeway on `exp` and `nbf`.
const LEEWAY_SECONDS: i64 = 60;
const GROUP: &str = "authentication.k8s.io";
/// The issuer of legacy secret-based tokens (upstream `LegacyIssuer`).
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The label a legacy token's secret gets with the day it was last used.
pub(crate) const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";

/// The update that sets `label` to `value` on a legacy token's Secret as upstream's merge
/// patches naming the Secret's uid do (the authenticator's last-used date, the cleaner's
/// invalid-since date): on the Secret as it now is, whatever its resourceVersion, unless it was
/// replaced or is gone.
pub(crate) fn label_token_secret<'a>(
    uid: &'a str,
    label: &'a str,
    value: &'a str,
) -> impl FnMut(Option<&Value>) -> Result<Value, Status> + 'a {
    move |current| {
        let mut s = current
            .cloned()
            .ok_or_else(|| Status::gone("the secret is gone"))?;
        if s.uid() != uid {
            return Err(Status::gone("the secret was replaced"));
        }
        if !s["metadata"]["labels"].is_object() {
            s["metadata"]["labels"] = json!({});
        }
        s["metadata"]["labels"][label] = json!(value);
        Ok(s)
    }
}
/// The label that marks a legacy token invalid.
pub(crate) const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

/// The service-account token options (kube-apiserver's `--service-account-*` and
/// `--api-audiences` flags).
#[derive(Clone, Debug)]
pub struct TokenOptions {
    /// Issuers accepted; the first one signs.
    pub issuers: Vec<String>,
    /// Audiences a token must name one of; also the default audiences of a TokenRequest.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration`; `None` is no limit.
    pub max_expiration: Option<Duration>,
    pub extend_expiration: bool,
    /// `--service-account-jwks-uri`: the key set's address in the discovery document.
    pub jwks_uri: Option<String>,
}

/// Issues and checks tokens. Built before the API, which it reads once `set_api` was called.
pub struct Tokens {
    signer: SigningKey,
    /// The signing key's id (upstream derives it from the public key).
    key_id: String,
    /// The public keys tokens are verified with: `--service-account-key-file`'s, else the
    /// signing key's.
    public_keys: Vec<PublicKey>,
    verify: Vec<Jwk>,
    /// Tokens whose signature checked out lately: the check is the costly part of a request
    /// authenticated by a token (an ES256 verification takes tens of microseconds), while the
    /// account and bound objects are still looked up every time, so a deleted pod's token stops
    /// at once (upstream caches whole answers for 10 s).
    verified: VerifiedSignatures,
    options: TokenOptions,
    api: OnceLock<Arc<ApiResources>>,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Tokens {
    /// From the signing key (PEM) and the PEM contents of the verifying key files (none: the
    /// signing key's public half verifies).
    pub fn new(
        signing_key_pem: &str,
        key_files_pem: &[String],
        options: TokenOptions,
    ) -> Result<Tokens, String> {
        let signer = SigningKey::from_pem(signing_key_pem)
            .map_err(|e| format!("reading the service-account signing key: {e}"))?;
        let key_id = signer.public_key().key_id();
        let mut public_keys = Vec::new();
        for pem in key_files_pem {
            public_keys.extend(
                keyfile::public_keys_from_pem(pem)
                    .map_err(|e| format!("reading a service-account key file: {e}"))?,
            );
        }
        if public_keys.is_empty() {
            public_keys.push(signer.public_key());
        }
        let verify = public_keys.iter().map(PublicKey::to_jwk).collect();
        Ok(Tokens {
            signer,
            key_id,
            public_keys,
            verify,
            verified: VerifiedSignatures::new(Duration::from_secs(10)),
            options,
            api: OnceLock::new(),
        })
    }

    pub fn set_api(&self, api: Arc<ApiResources>) {
        let _ = self.api.set(api);
    }

    /// The JWKS of the keys tokens are verified with.
    pub fn jwks(&self) -> Value {
        json!({"keys": self.public_keys.iter().map(PublicKey::jwk_json).collect::<Vec<_>>()})
    }

    /// The issuer's OIDC discovery documents (upstream's openidmetadata.go), served at
    /// `/.well-known/openid-configuration` and `/openid/v1/jwks` when the issuer is an https
    /// URL; the key set's address is built from the server's external address. Fields are in
    /// upstream's order.
    pub fn discovery_documents(&self, external_address: &str) -> Vec<apiserver::server::Document> {
        let Some(issuer) = self
            .options
            .issuers
            .first()
            .filter(|i| i.starts_with("https://") && !i.contains(['?', '#']))
        else {
            return Vec::new();
        };
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut algorithms: Vec<&str> = self.public_keys.iter().map(PublicKey::algorithm).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        let jwks_uri = self
            .options
            .jwks_uri
            .clone()
            .unwrap_or_else(|| format!("https://{external_address}/openid/v1/jwks"));
        let config = format!(
            "{{\"issuer\":{},\"jwks_uri\":{},\"response_types_supported\":[\"id_token\"],\"subject_types_supported\":[\"public\"],\"id_token_signing_alg_values_supported\":[{}]}}",
            q(issuer),
            q(&jwks_uri),
            algorithms
                .iter()
                .map(|a| q(a))
                .collect::<Vec<_>>()
                .join(",")
        );
        // go-jose's field order, which a JSON map would not keep.
        let keys: Vec<String> = self
            .public_keys
            .iter()
            .map(|key| {
                let k = key.jwk_json();
                let f = |name: &str| q(k[name].as_str().unwrap_or(""));
                match key {
                    PublicKey::Rsa { .. } => format!(
                        "{{\"use\":\"sig\",\"kty\":\"RSA\",\"kid\":{},\"alg\":{},\"n\":{},\"e\":{}}}",
                        f("kid"),
                        f("alg"),
                        f("n"),
                        f("e")
                    ),
                    PublicKey::Ec { .. } => format!(
                        "{{\"use\":\"sig\",\"kty\":\"EC\",\"kid\":{},\"crv\":{},\"alg\":{},\"x\":{},\"y\":{}}}",
                        f("kid"),
                        f("crv"),
                        f("alg"),
                        f("x"),
                        f("y")
                    ),
                }
            })
            .collect();
        let keyset = format!("{{\"keys\":[{}]}}", keys.join(","));
        vec![
            apiserver::server::Document {
                path: "/.well-known/openid-configuration".into(),
                content_type: "application/json",
                body: config.into(),
                max_age_seconds: 3600,
            },
            apiserver::server::Document {
                path: "/openid/v1/jwks".into(),
                content_type: "application/jwk-set+json",
                body: keyset.into(),
                max_age_seconds: 3600,
            },
        ]
    }

    fn api(&self) -> Result<&Arc<ApiResources>, Status> {
        self.api
            .get()
            .ok_or_else(|| Status::service_unavailable("the server is starting"))
    }

    /// An object from the store, by resource of the core group, read consistently (as
    /// upstream's TokenRequest reads through the registry).
    async fn get(&self, resource: &str, namespace: &str, name: &str) -> Result<Value, Status> {
        self.read(resource, namespace, name, ResourceVersion::Unset)
            .await
    }

    /// The same from the watch cache, for authentication, falling back to a consistent read
    /// when the cache does not have it (upstream's getter: listers, then the client), so a
    /// request pays no storage read for its token in the common case.
    async fn cached(&self, resource: &str, namespace: &str, name: &str) -> Result<Value, Status> {
        match self
            .read(resource, namespace, name, ResourceVersion::Any)
            .await
        {
            Err(s) if s.code == 404 => self.get(resource, namespace, name).await,
            other => other,
        }
    }

    async fn read(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        rv: ResourceVersion,
    ) -> Result<Value, Status> {
        let store = self
            .api()?
            .get("", "v1", resource)
            .ok_or_else(|| Status::internal(format!("{resource} are not served")))?;
        let object = store.get(namespace, name, rv).await?;
        object.value().map_err(|e| Status::internal(e.to_string()))
    }

    /// `POST serviceaccounts/<name>/token` (upstream `TokenREST.Create`).
    pub async fn token_request(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, Status> {
        let mut req = body.clone();
        let invalid =
            |errs: Vec<FieldError>, name: &str| invalid_status(GROUP, "TokenRequest", name, &errs);
        let given_name = req.name().to_string();
        if !given_name.is_empty() && given_name != name {
            return Err(invalid(
                vec![FieldError::invalid(
                    &FieldPath::new("metadata").child("name"),
                    json!(given_name),
                    "must match the service account name if specified",
                )],
                name,
            ));
        }
        let given_namespace = req.namespace().to_string();
        if !given_namespace.is_empty() && given_namespace != namespace {
            return Err(invalid(
                vec![FieldError::invalid(
                    &FieldPath::new("metadata").child("namespace"),
                    json!(given_namespace),
                    "must match the service account namespace if specified",
                )],
                name,
            ));
        }
        let account = self.get("serviceaccounts", namespace, name).await?;
        let uid = account.uid().to_string();
        let given_uid = req.uid().to_string();
        if !given_uid.is_empty() && given_uid != uid {
            return Err(Status::conflict(
                &apimachinery::GroupResource::new(GROUP, "TokenRequest"),
                name,
                format!(
                    "the UID in the token request ({given_uid}) does not match the UID of the service account ({uid})"
                ),
            ));
        }
        let spec = req
            .as_object_mut()
            .ok_or_else(|| Status::bad_request("the body must be an object"))?
            .entry("spec")
            .or_insert_with(|| json!({}));
        if spec
            .get("audiences")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec["audiences"] = json!(self.options.api_audiences);
        }
        if spec
            .get("expirationSeconds")
            .and_then(Value::as_i64)
            .is_none()
        {
            spec["expirationSeconds"] = json!(DEFAULT_EXPIRATION_SECONDS);
        }
        if spec.get("boundObjectRef").is_none() {
            spec["boundObjectRef"] = Value::Null;
        }
        let now = unix_now();
        {
            let meta = req.metadata_mut();
            meta.insert("name".into(), json!(name));
            meta.insert("namespace".into(), json!(namespace));
            meta.insert("uid".into(), json!(uid));
            meta.insert("creationTimestamp".into(), json!(rfc3339(now)));
        }
        // `ValidateTokenRequest`.
        let mut expiration = req["spec"]["expirationSeconds"].as_i64().unwrap_or(0);
        let path = FieldPath::new("spec").child("expirationSeconds");
        if expiration < 600 {
            return Err(invalid(
                vec![FieldError::invalid(
                    &path,
                    json!(expiration),
                    "may not specify a duration less than 10 minutes",
                )],
                "",
            ));
        }
        if expiration > 1 << 32 {
            return Err(invalid(
                vec![FieldError::invalid(
                    &path,
                    json!(expiration),
                    "may not specify a duration larger than 2^32 seconds",
                )],
                "",
            ));
        }
        let mut bound = Bound::default();
        if let Some(r) = req["spec"].get("boundObjectRef").filter(|r| r.is_object()) {
            let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
            let ref_name = r.get("name").and_then(Value::as_str).unwrap_or("");
            let ref_uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g, v),
                None => ("", api_version),
            };
            let object_uid = match (group, kind) {
                ("", "Pod") => {
                    let pod = self.get("pods", namespace, ref_name).await?;
                    if pod
                        .pointer("/spec/serviceAccountName")
                        .and_then(Value::as_str)
                        != Some(name)
                    {
                        return Err(Status::bad_request(format!(
                            "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                        )));
                    }
                    // The pod's node is named in the token too (ServiceAccountTokenPodNodeInfo).
                    if let Some(node) = pod
                        .pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                    {
                        let node_uid = match self.get("nodes", "", node).await {
                            Ok(n) => n.uid().to_string(),
                            Err(s) if s.code == 404 => String::new(),
                            Err(s) => return Err(s),
                        };
                        bound.node = Some((node.to_string(), node_uid));
                    }
                    let uid = pod.uid().to_string();
                    bound.pod = Some((ref_name.to_string(), uid.clone()));
                    uid
                }
                ("", "Node") => {
                    let node = self.get("nodes", "", ref_name).await?;
                    let uid = node.uid().to_string();
                    bound.node = Some((ref_name.to_string(), uid.clone()));
                    uid
                }
                ("", "Secret") => {
                    let secret = self.get("secrets", namespace, ref_name).await?;
                    let uid = secret.uid().to_string();
                    bound.secret = Some((ref_name.to_string(), uid.clone()));
                    uid
                }
                _ => {
                    return Err(Status::bad_request(format!(
                        "cannot bind token to object of type {group}/{version}, Kind={kind}"
                    )));
                }
            };
            if !ref_uid.is_empty() && ref_uid != object_uid {
                return Err(Status::conflict(
                    &apimachinery::GroupResource::new(group, kind),
                    ref_name,
                    format!(
                        "the UID in the bound object reference ({ref_uid}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        if let Some(max) = self.options.max_expiration
            && max.as_secs() > 0
            && expiration > max.as_secs() as i64
        {
            apiserver::warning::add(format!(
                "requested expiration of {expiration} seconds shortened to {} seconds",
                max.as_secs()
            ));
            expiration = max.as_secs() as i64;
            req["spec"]["expirationSeconds"] = json!(expiration);
        }
        let audiences: Vec<String> = strs_at(&req["spec"], "audiences")
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut lifetime = expiration;
        let mut warn_after = None;
        if self.options.extend_expiration
            && bound.pod.is_some()
            && expiration == WARN_ONLY_EXPIRATION_SECONDS
            && audiences
                .iter()
                .all(|a| self.options.api_audiences.contains(a))
        {
            warn_after = Some(now + expiration);
            lifetime = EXTENDED_EXPIRATION_SECONDS;
        }
        let jti = uuid::Uuid::new_v4().to_string();
        let claims = self.claims(
            namespace, name, &uid, &bound, &audiences, now, lifetime, warn_after, &jti,
        );
        let token = self
            .signer
            .sign(&self.key_id, &claims)
            .map_err(|e| Status::internal(format!("failed to generate token: {e}")))?;
        apiserver::audit::add_annotation(
            "authentication.kubernetes.io/issued-credential-id",
            format!("JTI={jti}"),
        );
        req["status"] = json!({"token": token, "expirationTimestamp": rfc3339(now + expiration)});
        Ok(req)
    }

    /// Upstream's `Claims`: registered claims and the `kubernetes.io` private claims.
    #[allow(clippy::too_many_arguments)]
    fn claims(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        bound: &Bound,
        audiences: &[String],
        now: i64,
        lifetime: i64,
        warn_after: Option<i64>,
        jti: &str,
    ) -> Value {
        let mut k8s = json!({
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        });
        for (key, r) in [
            ("pod", &bound.pod),
            ("secret", &bound.secret),
            ("node", &bound.node),
        ] {
            if let Some((n, u)) = r {
                k8s[key] = json!({"name": n, "uid": u});
            }
        }
        if let Some(w) = warn_after {
            k8s["warnafter"] = json!(w);
        }
        // go-jose writes a single audience as a string.
        let aud = match audiences {
            [one] => json!(one),
            many => json!(many),
        };
        json!({
            "aud": aud,
            "exp": now + lifetime,
            "iat": now,
            "iss": self.options.issuers.first().cloned().unwrap_or_default(),
            "jti": jti,
            "kubernetes.io": k8s,
            "nbf": now,
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
        })
    }

    /// Checks a token this server issued; `Ok(None)` when it is not one of ours.
    /// A legacy token (upstream `LegacyClaims`): no expiry, no audience, the account and secret
    /// named in `kubernetes.io/serviceaccount/*` claims; the tokens controller puts it in the
    /// secret.
    pub fn legacy_token(
        &self,
        namespace: &str,
        account: &str,
        account_uid: &str,
        secret: &str,
    ) -> Result<String, String> {
        let claims = json!({
            "iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": namespace,
            "kubernetes.io/serviceaccount/secret.name": secret,
            "kubernetes.io/serviceaccount/service-account.name": account,
            "kubernetes.io/serviceaccount/service-account.uid": account_uid,
            "sub": format!("system:serviceaccount:{namespace}:{account}"),
        });
        self.signer.sign(&self.key_id, &claims)
    }

    /// Upstream's legacy validator: the secret still holds this very token and is not being
    /// deleted or marked invalid, and the account lives with the uid the token names. The
    /// secret's last-used label is brought up to date, as upstream does.
    async fn check_legacy(&self, token: &str, claims: &Value) -> Result<UserInfo, String> {
        let claim = |k: &str| {
            claims
                .get(format!("kubernetes.io/serviceaccount/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let subject = claims.get("sub").and_then(Value::as_str).unwrap_or("");
        if subject.is_empty() {
            return Err("sub claim is missing".into());
        }
        let (namespace, secret_name, name, uid) = (
            claim("namespace"),
            claim("secret.name"),
            claim("service-account.name"),
            claim("service-account.uid"),
        );
        for (value, what) in [
            (&namespace, "namespace"),
            (&secret_name, "secretName"),
            (&name, "serviceAccountName"),
            (&uid, "serviceAccountUID"),
        ] {
            if value.is_empty() {
                return Err(format!("{what} claim is missing"));
            }
        }
        if subject != format!("system:serviceaccount:{namespace}:{name}") {
            return Err("sub claim is invalid".into());
        }
        let deleting = |v: &Value| {
            v.pointer("/metadata/deletionTimestamp")
                .is_some_and(|d| !d.is_null())
        };
        let secret = self
            .cached("secrets", &namespace, &secret_name)
            .await
            .map_err(|_| "Token has been invalidated".to_string())?;
        if deleting(&secret) {
            return Err("Token has been invalidated".into());
        }
        let stored = secret
            .pointer("/data/token")
            .and_then(Value::as_str)
            .and_then(|t| {
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, t).ok()
            })
            .unwrap_or_default();
        let same = stored.len() == token.len()
            && stored
                .iter()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            return Err("Token does not match server's copy".into());
        }
        let account = self
            .cached("serviceaccounts", &namespace, &name)
            .await
            .map_err(|s| s.message)?;
        if deleting(&account) {
            return Err(format!(
                "ServiceAccount {namespace}/{name} has been deleted"
            ));
        }
        if account.uid() != uid {
            return Err(format!(
                "ServiceAccount UID ({}) does not match claim ({uid})",
                account.uid()
            ));
        }
        let labels = secret.pointer("/metadata/labels");
        let label = |k: &str| {
            labels
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let invalid = !label(INVALID_SINCE_LABEL).is_empty();
        if invalid {
            apiserver::audit::add_annotation(
                "authentication.k8s.io/legacy-token-invalidated",
                format!("{secret_name}/{namespace}"),
            );
        } else {
            let generated = account
                .get("secrets")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r.get("name").and_then(Value::as_str) == Some(secret_name.as_str())
                    })
                });
            if generated {
                apiserver::warning::add(
                    "Use tokens from the TokenRequest API or manually created secret-based tokens instead of auto-generated secret-based tokens.",
                );
                apiserver::audit::add_annotation(
                    "authentication.k8s.io/legacy-token-autogenerated-secret",
                    secret_name.clone(),
                );
            } else {
                apiserver::audit::add_annotation(
                    "authentication.k8s.io/legacy-token-manual-secret",
                    secret_name.clone(),
                );
            }
        }
        let now = chrono::Utc::now();
        let today = now.format("%Y-%m-%d").to_string();
        let tomorrow = (now + chrono::Duration::days(1))
            .format("%Y-%m-%d")
            .to_string();
        let last_used = label(LAST_USED_LABEL);
        if last_used != today && last_used != tomorrow {
            self.mark_used(
                namespace.clone(),
                secret_name.clone(),
                secret.uid().to_string(),
                today,
            );
        }
        if invalid {
            return Err(format!(
                "the token in secret {namespace}/{secret_name} for service account {namespace}/{name} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token"
            ));
        }
        Ok(UserInfo {
            name: subject.to_string(),
            uid,
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            extra: BTreeMap::new(),
        })
    }

    /// Labels a legacy token's secret with the day it was used, in the background (the request
    /// does not wait for the write).
    fn mark_used(&self, namespace: String, name: String, uid: String, today: String) {
        let Ok(api) = self.api() else { return };
        let Some(store) = api.get("", "v1", "secrets").cloned() else {
            return;
        };
        tokio::spawn(async move {
            let user = crate::controllers::controller_user();
            let mut updater = label_token_secret(&uid, LAST_USED_LABEL, &today);
            if let Err(e) = store
                .update(
                    &apiserver::registry::Requester { user: &user },
                    &namespace,
                    &name,
                    &mut updater,
                    &apiserver::registry::UpdateOptions::default(),
                )
                .await
            {
                tracing::debug!(secret = %format!("{namespace}/{name}"), error = %e.message, "labelling a legacy token's secret failed");
            }
        });
    }

    async fn check(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let Ok(parsed) = Jws::parse(token) else {
            return Ok(None);
        };
        let claims = &parsed.claims;
        let issuer = claims.get("iss").and_then(Value::as_str).unwrap_or("");
        if issuer == LEGACY_ISSUER {
            if !self
                .verified
                .check(token.as_bytes(), || parsed.verify(&self.verify))
            {
                return Err("square/go-jose: error in cryptographic primitive".into());
            }
            return self.check_legacy(token, claims).await.map(Some);
        }
        if !self.options.issuers.iter().any(|i| i == issuer) {
            return Ok(None);
        }
        if !self
            .verified
            .check(token.as_bytes(), || parsed.verify(&self.verify))
        {
            return Err("square/go-jose: error in cryptographic primitive".into());
        }
        let now = unix_now();
        let number = |k: &str| claims.get(k).and_then(Value::as_i64);
        if number("exp").is_some_and(|exp| now > exp + LEEWAY_SECONDS) {
            return Err("service account token has expired".into());
        }
        if number("nbf").is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err("service account token is not valid yet".into());
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences
            .iter()
            .any(|a| self.options.api_audiences.iter().any(|x| x == a))
        {
            return Err(format!(
                "token audiences {audiences:?} is invalid for the target audiences {:?}",
                self.options.api_audiences
            ));
        }
        let Some(k8s) = claims.get("kubernetes.io") else {
            return Err("service account token has no kubernetes.io claims (legacy tokens are not accepted)".into());
        };
        let s = |v: &Value, p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let namespace = s(k8s, "/namespace");
        let name = s(k8s, "/serviceaccount/name");
        let sa_uid = s(k8s, "/serviceaccount/uid");
        let subject = format!("system:serviceaccount:{namespace}:{name}");
        if claims.get("sub").and_then(Value::as_str) != Some(subject.as_str()) {
            return Err("service account token's subject does not match its claims".into());
        }
        let alive = |v: &Result<Value, Status>, uid: &str, what: &str| -> Result<(), String> {
            match v {
                Err(s) if s.code == 404 => Err(format!("{what} has been deleted")),
                Err(s) => Err(s.message.clone()),
                Ok(o) if o.uid() != uid => Err(format!(
                    "{what} UID ({}) does not match claim ({uid})",
                    o.uid()
                )),
                Ok(o)
                    if o.pointer("/metadata/deletionTimestamp")
                        .is_some_and(|d| !d.is_null()) =>
                {
                    Err(format!("{what} has been deleted"))
                }
                Ok(_) => Ok(()),
            }
        };
        let account = self.cached("serviceaccounts", &namespace, &name).await;
        alive(
            &account,
            &sa_uid,
            &format!("service account {namespace}/{name}"),
        )?;
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(secret) = k8s.get("secret") {
            let (n, u) = (s(secret, "/name"), s(secret, "/uid"));
            alive(
                &self.cached("secrets", &namespace, &n).await,
                &u,
                &format!("secret {namespace}/{n}"),
            )?;
        }
        if let Some(pod) = k8s.get("pod") {
            let (n, u) = (s(pod, "/name"), s(pod, "/uid"));
            alive(
                &self.cached("pods", &namespace, &n).await,
                &u,
                &format!("pod {namespace}/{n}"),
            )?;
            extra.insert("authentication.kubernetes.io/pod-name".into(), vec![n]);
            extra.insert("authentication.kubernetes.io/pod-uid".into(), vec![u]);
        }
        if let Some(node) = k8s.get("node") {
            let (n, u) = (s(node, "/name"), s(node, "/uid"));
            // A node named through a pod may be gone; a token bound to a node may not.
            if k8s.get("pod").is_none() {
                alive(
                    &self.cached("nodes", "", &n).await,
                    &u,
                    &format!("node {n}"),
                )?;
            }
            extra.insert("authentication.kubernetes.io/node-name".into(), vec![n]);
            if !u.is_empty() {
                extra.insert("authentication.kubernetes.io/node-uid".into(), vec![u]);
            }
        }
        if let Some(jti) = claims
            .get("jti")
            .and_then(Value::as_str)
            .filter(|j| !j.is_empty())
        {
            extra.insert(CREDENTIAL_ID_KEY.into(), vec![format!("JTI={jti}")]);
        }
        Ok(Some(UserInfo {
            name: subject,
            uid: sa_uid,
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            extra,
        }))
    }
}

/// The objects a token is bound to: (name, uid) each.
#[derive(Default)]
struct Bound {
    pod: Option<(String, String)>,
    secret: Option<(String, String)>,
    node: Option<(String, String)>,
}

/// The token authenticator of service-account tokens.
pub struct TokenAuthenticator(pub Arc<Tokens>);

#[async_trait]
impl apiserver::authentication::token::TokenAuthenticator for TokenAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        self.0.check(token).await.map_err(AuthnError::InvalidToken)
    }
}
