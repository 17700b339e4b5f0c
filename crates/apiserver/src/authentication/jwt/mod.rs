//! JWT authenticators: OpenID Connect ID tokens of issuers configured by `--oidc-*` or by the
//! `jwt` entries of `--authentication-config` (upstream:
//! k8s.io/apiserver/plugin/pkg/authenticator/token/oidc with go-oidc).
//!
//! A token is this authenticator's when its unverified `iss` is the issuer's URL; anything else
//! is left to the next authenticator. The issuer's discovery document and keys are fetched on
//! first use and again when a token names a key not yet known (at most every
//! [`REFRESH_INTERVAL`], so forged tokens cannot make the server hammer the issuer). Then the
//! token is checked as go-oidc checks it (signature by a key of the issuer with an accepted
//! algorithm, expiry, not-before with five minutes of leeway, one of the audiences), and the user
//! is built from its claims by claim names or CEL expressions, checked by the validation rules.
//! A groups claim mapped by name may be distributed (OpenID Connect Core 5.6.2: `_claim_names`
//! and `_claim_sources`): its value is then a JWT fetched from the source's endpoint with the
//! source's access token, verified as a token of its own issuer (discovered on first use) with
//! the same audiences, as upstream resolves it. Aggregated claims (a source with a `JWT`) are
//! left alone, as upstream leaves them.

pub mod config;
pub mod keyfile;
pub mod keys;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::{Value, json};

use self::config::{ClaimMappings, JwtAuthenticatorConfig};
use self::keys::{Jwk, Jws};
use super::token::TokenAuthenticator;
use super::{AuthnError, CREDENTIAL_ID_KEY, UserInfo};
use crate::cel::eval::{Program, Vars};
use crate::util::reload::Reloading;
use kube_cel::cel;

/// How often keys may be fetched again for a token no known key verifies.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// go-oidc's allowance for clocks that disagree, applied to `nbf`.
const NOT_BEFORE_LEEWAY: Duration = Duration::from_secs(300);
/// How long one fetch of a discovery document or key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// A mapping from claims to one field of the user.
enum Mapping {
    None,
    Claim { claim: String, prefix: String },
    Expression(Program),
}

impl Mapping {
    fn of(claim: &str, prefix: Option<&str>, expression: &str) -> Result<Mapping, String> {
        if !expression.is_empty() {
            return Ok(Mapping::Expression(Program::compile(expression)?));
        }
        if claim.is_empty() {
            return Ok(Mapping::None);
        }
        Ok(Mapping::Claim {
            claim: claim.to_string(),
            prefix: prefix.unwrap_or("").to_string(),
        })
    }
}

enum ClaimRule {
    Required { claim: String, value: String },
    Expression { program: Program, message: String },
}

struct UserRule {
    program: Program,
    message: String,
}

/// The issuer's keys and where they come from.
#[derive(Default)]
struct KeySet {
    jwks_uri: Option<String>,
    keys: Arc<Vec<Jwk>>,
    fetched: Option<Instant>,
}

/// What checks a token of one issuer: its keys (discovered and fetched as needed), accepted
/// algorithms and audiences (upstream's `idTokenVerifier`).
struct Verifier {
    issuer: String,
    discovery_url: Option<String>,
    ca_bundle: Vec<u8>,
    audiences: Vec<String>,
    algorithms: Vec<String>,
    keys: RwLock<KeySet>,
    /// One fetch at a time; callers that waited find the keys fresh.
    refresh: tokio::sync::Mutex<()>,
}

/// One JWT issuer.
pub struct JwtAuthenticator {
    verifier: Verifier,
    /// Resolves a distributed groups claim, when groups are mapped from a claim by name.
    resolver: Option<ClaimResolver>,
    username: Mapping,
    groups: Mapping,
    uid: Mapping,
    extra: Vec<(String, Program)>,
    claim_rules: Vec<ClaimRule>,
    user_rules: Vec<UserRule>,
}

impl JwtAuthenticator {
    /// An authenticator for a validated configuration entry; `algorithms` are the accepted
    /// signing algorithms (`--oidc-signing-algs`, or all of them with `--authentication-config`).
    pub fn new(c: &JwtAuthenticatorConfig, algorithms: &[String]) -> Result<Self, String> {
        let ClaimMappings {
            username,
            groups,
            uid,
            extra,
        } = &c.claim_mappings;
        let ca_bundle = c.issuer.certificate_authority.as_bytes().to_vec();
        Ok(JwtAuthenticator {
            verifier: Verifier::new(
                c.issuer.url.clone(),
                Some(c.issuer.discovery_url.clone()).filter(|u| !u.is_empty()),
                ca_bundle.clone(),
                c.issuer.audiences.clone(),
                algorithms.to_vec(),
            ),
            resolver: (!groups.claim.is_empty()).then(|| ClaimResolver {
                claim: groups.claim.clone(),
                ca_bundle,
                audiences: c.issuer.audiences.clone(),
                algorithms: algorithms.to_vec(),
                verifiers: std::sync::Mutex::default(),
            }),
            username: Mapping::of(
                &username.claim,
                username.prefix.as_deref(),
                &username.expression,
            )?,
            groups: Mapping::of(&groups.claim, groups.prefix.as_deref(), &groups.expression)?,
            uid: Mapping::of(&uid.claim, None, &uid.expression)?,
            extra: extra
                .iter()
                .map(|e| Ok((e.key.clone(), Program::compile(&e.value_expression)?)))
                .collect::<Result<_, String>>()?,
            claim_rules: c
                .claim_validation_rules
                .iter()
                .map(|r| {
                    Ok(if r.expression.is_empty() {
                        ClaimRule::Required {
                            claim: r.claim.clone(),
                            value: r.required_value.clone(),
                        }
                    } else {
                        ClaimRule::Expression {
                            program: Program::compile(&r.expression)?,
                            message: r.message.clone(),
                        }
                    })
                })
                .collect::<Result<_, String>>()?,
            user_rules: c
                .user_validation_rules
                .iter()
                .map(|r| {
                    Ok(UserRule {
                        program: Program::compile(&r.expression)?,
                        message: r.message.clone(),
                    })
                })
                .collect::<Result<_, String>>()?,
        })
    }

    /// The issuer this authenticator trusts.
    pub fn issuer(&self) -> &str {
        &self.verifier.issuer
    }

    /// Uses `keys` as the issuer's key set, as if just fetched (for benchmarks and tests that
    /// run no issuer; a token naming another key still makes it fetch).
    pub fn preload_keys(&self, keys: Vec<Jwk>) {
        let mut state = self
            .verifier
            .keys
            .write()
            .unwrap_or_else(|e| e.into_inner());
        state.keys = Arc::new(keys);
        state.fetched = Some(Instant::now());
    }

    /// The user a token of this issuer names: `Ok(None)` for a token of another issuer.
    pub async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let Ok(jws) = Jws::parse(token) else {
            return Ok(None);
        };
        let iss = match jws.claims.get("iss").and_then(Value::as_str) {
            // go-oidc coalesces Google's legacy issuer with the URL form.
            Some("accounts.google.com") => "https://accounts.google.com",
            Some(iss) => iss,
            None => return Ok(None),
        };
        if iss != self.verifier.issuer {
            return Ok(None);
        }
        self.verifier
            .verify(&jws)
            .await
            .map_err(|e| format!("oidc: verify token: {e}"))?;
        match &self.resolver {
            Some(resolver) => {
                let mut claims = jws.claims;
                resolver
                    .expand(&mut claims)
                    .await
                    .map_err(|e| format!("oidc: could not expand distributed claims: {e}"))?;
                self.user(&claims).map(Some)
            }
            None => self.user(&jws.claims).map(Some),
        }
    }
}

impl Verifier {
    fn new(
        issuer: String,
        discovery_url: Option<String>,
        ca_bundle: Vec<u8>,
        audiences: Vec<String>,
        algorithms: Vec<String>,
    ) -> Verifier {
        Verifier {
            issuer,
            discovery_url,
            ca_bundle,
            audiences,
            algorithms,
            keys: RwLock::new(KeySet::default()),
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// go-oidc's checks, then the audience as upstream checks it (any of several).
    async fn verify(&self, jws: &Jws) -> Result<(), String> {
        let claims = &jws.claims;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let exp = claims.get("exp").and_then(Value::as_f64).unwrap_or(0.0);
        if now > exp {
            return Err(format!(
                "oidc: token is expired (Token Expiry: {})",
                go_time(exp)
            ));
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_f64)
            && now + NOT_BEFORE_LEEWAY.as_secs_f64() < nbf
        {
            return Err(format!(
                "oidc: current time {} before the nbf (not before) time: {}",
                go_time(now),
                go_time(nbf)
            ));
        }
        let alg = jws.algorithm();
        if !self.algorithms.iter().any(|a| a == alg) {
            return Err(format!(
                "oidc: id token signed with unsupported algorithm, expected [{}] got {alg:?}",
                self.algorithms
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        let known = self.current_keys();
        if !jws.verify(&known) {
            let fresh = self.refresh_keys(&known).await?;
            if !jws.verify(&fresh) {
                return Err(
                    "failed to verify signature: failed to verify id token signature".into(),
                );
            }
        }
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences
            .iter()
            .any(|a| self.audiences.iter().any(|want| want == a))
        {
            let mut want = self.audiences.clone();
            want.sort();
            return Err(format!(
                "oidc: expected audience in {want:?} got {audiences:?}"
            ));
        }
        Ok(())
    }

    fn current_keys(&self) -> Arc<Vec<Jwk>> {
        self.keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys
            .clone()
    }

    /// Fetches the key set again unless another caller did so since `seen` was read, or the last
    /// fetch is too recent; answers the keys to use.
    async fn refresh_keys(&self, seen: &Arc<Vec<Jwk>>) -> Result<Arc<Vec<Jwk>>, String> {
        let _one = self.refresh.lock().await;
        let (jwks_uri, fetched) = {
            let state = self.keys.read().unwrap_or_else(|e| e.into_inner());
            if !Arc::ptr_eq(&state.keys, seen) {
                return Ok(state.keys.clone());
            }
            (state.jwks_uri.clone(), state.fetched)
        };
        if fetched.is_some_and(|t| t.elapsed() < REFRESH_INTERVAL) {
            return Ok(seen.clone());
        }
        let result = self.fetch(jwks_uri).await;
        let mut state = self.keys.write().unwrap_or_else(|e| e.into_inner());
        state.fetched = Some(Instant::now());
        match result {
            Ok((uri, keys)) => {
                state.jwks_uri = Some(uri);
                state.keys = Arc::new(keys);
                Ok(state.keys.clone())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, "fetching the issuer's keys: {e}");
                if state.jwks_uri.is_none() {
                    Err("oidc: authenticator not initialized".into())
                } else {
                    Err(format!("failed to verify signature: fetching keys {e}"))
                }
            }
        }
    }

    /// The discovery document (unless its `jwks_uri` is known), then the key set.
    async fn fetch(&self, jwks_uri: Option<String>) -> Result<(String, Vec<Jwk>), String> {
        let uri = match jwks_uri {
            Some(uri) => uri,
            None => {
                let url = self.discovery_url.clone().unwrap_or_else(|| {
                    format!(
                        "{}/.well-known/openid-configuration",
                        self.issuer.trim_end_matches('/')
                    )
                });
                let doc =
                    crate::util::webhook::get_json(&url, &self.ca_bundle, FETCH_TIMEOUT).await?;
                let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
                if issuer != self.issuer {
                    return Err(format!(
                        "oidc: issuer URL provided to client ({:?}) did not match the issuer URL returned by provider ({issuer:?})",
                        self.issuer
                    ));
                }
                match doc.get("jwks_uri").and_then(Value::as_str) {
                    Some(uri) if !uri.is_empty() => uri.to_string(),
                    _ => return Err("provider did not return JWKS URL".into()),
                }
            }
        };
        let doc = crate::util::webhook::get_json(&uri, &self.ca_bundle, FETCH_TIMEOUT).await?;
        Ok((uri, keys::parse_jwks(&doc)?))
    }
}

impl JwtAuthenticator {
    /// The user the verified claims describe, checked by the rules.
    fn user(&self, claims: &Value) -> Result<UserInfo, String> {
        let vars = Vars::default().bind_json("claims", Some(claims));
        let name = match &self.username {
            Mapping::Expression(p) => match p.eval(&vars) {
                Ok(cel::Value::String(s)) if s.is_empty() => {
                    return Err("oidc: empty username via CEL expression is not allowed".into());
                }
                Ok(cel::Value::String(s)) => s.to_string(),
                Ok(_) => {
                    return Err("oidc: error evaluating username claim expression: username claim expression must return a string".into());
                }
                Err(e) => {
                    return Err(format!(
                        "oidc: error evaluating username claim expression: {e}"
                    ));
                }
            },
            Mapping::Claim { claim, prefix } => {
                let Some(value) = claims.get(claim).and_then(Value::as_str) else {
                    return Err(format!(
                        "oidc: parse username claims {claim:?}: claim not present"
                    ));
                };
                if claim == "email"
                    && let Some(verified) = claims.get("email_verified")
                {
                    match verified.as_bool() {
                        Some(true) => {}
                        Some(false) => return Err("oidc: email not verified".into()),
                        None => {
                            return Err("oidc: parse 'email_verified' claim: not a boolean".into());
                        }
                    }
                }
                format!("{prefix}{value}")
            }
            Mapping::None => String::new(),
        };
        let groups = match &self.groups {
            Mapping::Claim { claim, prefix } => match claims.get(claim) {
                None => Vec::new(),
                Some(v) => string_or_array(v)
                    .ok_or_else(|| format!("oidc: parse groups claim {claim:?}: not a string or an array of strings"))?
                    .into_iter()
                    .map(|g| format!("{prefix}{g}"))
                    .collect(),
            },
            Mapping::Expression(p) => p
                .eval(&vars)
                .and_then(|v| string_list(&v))
                .map_err(|e| format!("oidc: error evaluating group claim expression: {e}"))?,
            Mapping::None => Vec::new(),
        };
        let uid = match &self.uid {
            Mapping::Claim { claim, .. } => claims
                .get(claim)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("oidc: parse uid claim {claim:?}: claim not present"))?,
            Mapping::Expression(p) => match p.eval(&vars) {
                Ok(cel::Value::String(s)) => s.to_string(),
                Ok(_) => return Err("oidc: error evaluating uid claim expression: uid claim expression must return a string".into()),
                Err(e) => return Err(format!("oidc: error evaluating uid claim expression: {e}")),
            },
            Mapping::None => String::new(),
        };
        let mut extra = BTreeMap::new();
        if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
            extra.insert(CREDENTIAL_ID_KEY.to_string(), vec![format!("JTI={jti}")]);
        }
        for (key, program) in &self.extra {
            let values = program
                .eval(&vars)
                .and_then(|v| string_list(&v))
                .map_err(|e| {
                    format!(
                        "oidc: error evaluating extra claim expression: {}: {e}",
                        program.source
                    )
                })?;
            if !values.is_empty() {
                extra.insert(key.clone(), values);
            }
        }
        for rule in &self.claim_rules {
            match rule {
                ClaimRule::Required { claim, value } => {
                    let Some(got) = claims.get(claim) else {
                        return Err(format!(
                            "oidc: required claim {claim} not present in ID token"
                        ));
                    };
                    let Some(got) = got.as_str() else {
                        return Err(format!("oidc: parse claim {claim}: not a string"));
                    };
                    if got != value {
                        return Err(format!(
                            "oidc: required claim {claim} value does not match. Got = {got}, want = {value}"
                        ));
                    }
                }
                ClaimRule::Expression { program, message } => {
                    check_rule(program, message, &vars).map_err(|e| {
                        format!("oidc: error evaluating claim validation expression: {e}")
                    })?;
                }
            }
        }
        let user = UserInfo {
            name,
            uid,
            groups,
            extra,
        };
        if !self.user_rules.is_empty() {
            let value = json!({
                "username": user.name,
                "uid": user.uid,
                "groups": user.groups,
                "extra": user.extra,
            });
            let vars = Vars::default().bind_json("user", Some(&value));
            for rule in &self.user_rules {
                check_rule(&rule.program, &rule.message, &vars).map_err(|e| {
                    format!("oidc: error evaluating user info validation rule: {e}")
                })?;
            }
        }
        Ok(user)
    }
}

/// A distributed claim's source (`_claim_sources` entry).
#[derive(serde::Deserialize)]
struct ClaimSource {
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    access_token: String,
}

/// Resolves one distributed claim (upstream's `claimResolver`): the groups claim.
struct ClaimResolver {
    claim: String,
    ca_bundle: Vec<u8>,
    audiences: Vec<String>,
    algorithms: Vec<String>,
    /// A verifier per issuer of the claims' JWTs; few issuers, so never pruned.
    verifiers: std::sync::Mutex<HashMap<String, Arc<Verifier>>>,
}

impl ClaimResolver {
    /// Puts the claim's value into `claims` when the token names a source for it and does not
    /// carry it itself.
    async fn expand(&self, claims: &mut Value) -> Result<(), String> {
        if claims.get(&self.claim).is_some() {
            return Ok(());
        }
        let Some(names) = claims.get("_claim_names") else {
            return Ok(());
        };
        let names: BTreeMap<String, String> = serde_json::from_value(names.clone())
            .map_err(|e| format!("oidc: error parsing distributed claim names: {e}"))?;
        let Some(sources) = claims.get("_claim_sources") else {
            return Err("oidc: no claim sources".into());
        };
        let sources: BTreeMap<String, ClaimSource> = serde_json::from_value(sources.clone())
            .map_err(|e| format!("oidc: could not parse claim sources: {e}"))?;
        let Some(source) = names.get(&self.claim) else {
            return Ok(());
        };
        let Some(source) = sources.get(source) else {
            return Err(format!(
                "id token _claim_names contained a source {source} missing in _claims_sources"
            ));
        };
        if source.endpoint.is_empty() {
            // An aggregated claim (the source carries the JWT itself): not resolved.
            return Ok(());
        }
        let value = self.resolve(source).await?;
        if let Some(claims) = claims.as_object_mut() {
            claims.insert(self.claim.clone(), value);
        }
        Ok(())
    }

    /// Fetches the claim's JWT from the source and answers the claim's value in it, once the
    /// JWT is verified as a token of its issuer for one of the audiences.
    async fn resolve(&self, source: &ClaimSource) -> Result<Value, String> {
        let url = &source.endpoint;
        let bearer = Some(source.access_token.as_str()).filter(|t| !t.is_empty());
        let (status, body) =
            crate::util::webhook::get_with_bearer(url, &self.ca_bundle, bearer, FETCH_TIMEOUT)
                .await
                .map_err(|e| format!("while getting distributed claim {:?}: {e}", self.claim))?;
        // Go's client takes 200 to 226 as success here.
        if !(200..=226).contains(&status.as_u16()) {
            return Err(format!(
                "while getting distributed claim {:?}: error while getting distributed claim JWT: {} {}",
                self.claim,
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ));
        }
        let untrusted = |why: String| {
            format!(
                "getting untrusted issuer from endpoint {url} failed for claim {:?}: {why}",
                self.claim
            )
        };
        let jwt = std::str::from_utf8(&body).map_err(|e| untrusted(e.to_string()))?;
        let jws = Jws::parse(jwt).map_err(untrusted)?;
        let iss = jws
            .claims
            .get("iss")
            .and_then(Value::as_str)
            .ok_or_else(|| untrusted("malformed token".into()))?;
        let verifier = self.verifier(iss);
        verifier
            .verify(&jws)
            .await
            .map_err(|e| format!("verify distributed claim token: {e}"))?;
        jws.claims.get(&self.claim).cloned().ok_or_else(|| {
            format!(
                "jwt returned by distributed claim endpoint {url:?} did not contain claim: {}",
                self.claim
            )
        })
    }

    /// The verifier of `issuer`'s tokens, made (to discover the issuer on first use) if needed.
    fn verifier(&self, issuer: &str) -> Arc<Verifier> {
        let mut verifiers = self.verifiers.lock().unwrap_or_else(|e| e.into_inner());
        verifiers
            .entry(issuer.to_string())
            .or_insert_with(|| {
                Arc::new(Verifier::new(
                    issuer.to_string(),
                    None,
                    self.ca_bundle.clone(),
                    self.audiences.clone(),
                    self.algorithms.clone(),
                ))
            })
            .clone()
    }
}

/// A validation rule must evaluate to true; false is its message (or the expression).
fn check_rule(program: &Program, message: &str, vars: &Vars) -> Result<(), String> {
    match program.eval(vars)? {
        cel::Value::Bool(true) => Ok(()),
        cel::Value::Bool(false) => Err(format!(
            "validation expression '{}' failed: {}",
            program.source, message
        )),
        _ => Err("validation expression must return a boolean".into()),
    }
}

/// A claim that may be one string or a list of them.
fn string_or_array(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => None,
    }
}

/// A CEL result that must be a string or a list of strings; an empty string is no value.
fn string_list(v: &cel::Value) -> Result<Vec<String>, String> {
    const WRONG: &str = "expression must return a string or a list of strings";
    match v {
        cel::Value::String(s) if s.is_empty() => Ok(Vec::new()),
        cel::Value::String(s) => Ok(vec![s.to_string()]),
        cel::Value::List(items) => items
            .iter()
            .filter(|i| !matches!(i, cel::Value::String(s) if s.is_empty()))
            .map(|i| match i {
                cel::Value::String(s) => Ok(s.to_string()),
                _ => Err(WRONG.to_string()),
            })
            .collect(),
        cel::Value::Null => Ok(Vec::new()),
        _ => Err(WRONG.to_string()),
    }
}

/// A Unix time as Go prints a `time.Time` in UTC, for messages.
fn go_time(secs: f64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs_f64(secs.max(0.0));
    let rfc = httpdate_like(t);
    format!("{rfc} +0000 UTC")
}

/// `2006-01-02 15:04:05` of a time.
fn httpdate_like(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Several JWT issuers behind the bearer token of a request, with upstream's token cache: a
/// token's answer is kept for `success_ttl` (upstream's 10 s), failures are not.
pub struct JwtAuthenticators {
    issuers: Vec<JwtAuthenticator>,
    cache: super::cache::TokenCache,
}

impl JwtAuthenticators {
    pub fn new(issuers: Vec<JwtAuthenticator>, success_ttl: Duration) -> Self {
        JwtAuthenticators {
            issuers,
            cache: super::cache::TokenCache::new(success_ttl, Duration::ZERO),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// The user a token names, through the cache.
    pub async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        self.cache
            .get_or_insert_with(token.as_bytes(), || async {
                for issuer in &self.issuers {
                    if let Some(user) = issuer
                        .authenticate_token(token)
                        .await
                        .map_err(AuthnError::InvalidToken)?
                    {
                        return Ok(Some(user));
                    }
                }
                Ok(None)
            })
            .await
    }
}

/// The JWT issuers of `--authentication-config`, read again when the file changes (upstream
/// reloads the file too): a new configuration that reads and validates replaces the issuers
/// (with a fresh token cache); one that does not is logged and the running one kept. As
/// upstream, the `anonymous` section is fixed at start: a file whose `anonymous` differs from
/// the first one read is refused whole, its issuers too.
pub struct ReloadingJwtAuthenticators(Arc<Reloading<JwtAuthenticators>>);

impl ReloadingJwtAuthenticators {
    /// Builds the issuers of `path` and starts watching the file. `disallowed` are the
    /// service-account issuers no JWT issuer may reuse.
    pub fn start(
        path: String,
        disallowed: Vec<String>,
        success_ttl: Duration,
    ) -> Result<Self, String> {
        let algorithms: Vec<String> = keys::ALL_ALGORITHMS.iter().map(|a| a.to_string()).collect();
        // The `anonymous` section of the first file read; later files must keep it.
        let initial_anonymous = std::sync::OnceLock::new();
        let build = move |text: &str| -> Result<Arc<JwtAuthenticators>, String> {
            let c = config::parse(text)?;
            config::validate(&c, &disallowed)?;
            if *initial_anonymous.get_or_init(|| c.anonymous.clone()) != c.anonymous {
                return Err("anonymous: Forbidden: changed from initial configuration file".into());
            }
            let issuers = c
                .jwt
                .iter()
                .map(|j| JwtAuthenticator::new(j, &algorithms))
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Arc::new(JwtAuthenticators::new(issuers, success_ttl)))
        };
        Reloading::start(
            path,
            "authentication config",
            crate::util::reload::RELOAD_INTERVAL,
            Box::new(build),
        )
        .map(ReloadingJwtAuthenticators)
    }
}

#[async_trait]
impl TokenAuthenticator for ReloadingJwtAuthenticators {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        self.0.current().authenticate_token(token).await
    }
}

#[async_trait]
impl TokenAuthenticator for JwtAuthenticators {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        JwtAuthenticators::authenticate_token(self, token).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authenticator(yaml: &str) -> JwtAuthenticator {
        let c = config::parse(yaml).unwrap();
        config::validate(&c, &[]).unwrap();
        JwtAuthenticator::new(&c.jwt[0], &["ES256".to_string()]).unwrap()
    }

    #[test]
    fn claims_map_to_a_user_by_names_and_expressions() {
        let a = authenticator(
            r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: "https://issuer.example", audiences: [k8s]}
  claimValidationRules:
  - {claim: hd, requiredValue: example.com}
  - {expression: "claims.age >= 18", message: too young}
  claimMappings:
    username: {expression: "'oidc:' + claims.sub"}
    groups: {claim: roles, prefix: "r:"}
    uid: {claim: id}
    extra:
    - {key: example.com/tier, valueExpression: "claims.tier"}
  userValidationRules:
  - {expression: "!user.username.startsWith('oidc:root')", message: no root}
"#,
        );
        let claims = json!({"sub": "ann", "hd": "example.com", "age": 30, "roles": ["a", "b"],
                            "id": "u-1", "tier": ["gold"], "jti": "t1"});
        let user = a.user(&claims).unwrap();
        assert_eq!(user.name, "oidc:ann");
        assert_eq!(user.groups, ["r:a", "r:b"]);
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.extra["example.com/tier"], ["gold"]);
        assert_eq!(user.extra[CREDENTIAL_ID_KEY], ["JTI=t1"]);
        // A single string is one group.
        let mut c = claims.clone();
        c["roles"] = json!("solo");
        assert_eq!(a.user(&c).unwrap().groups, ["r:solo"]);
        let mut c = claims.clone();
        c["hd"] = json!("evil.com");
        assert_eq!(
            a.user(&c).unwrap_err(),
            "oidc: required claim hd value does not match. Got = evil.com, want = example.com"
        );
        let mut c = claims.clone();
        c["age"] = json!(12);
        assert_eq!(
            a.user(&c).unwrap_err(),
            "oidc: error evaluating claim validation expression: validation expression 'claims.age >= 18' failed: too young"
        );
        let mut c = claims.clone();
        c["sub"] = json!("root");
        assert!(a.user(&c).unwrap_err().contains("failed: no root"));
    }

    #[test]
    fn email_must_be_verified_when_the_claim_says_so() {
        let a = authenticator(
            r#"{"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
                "jwt": [{"issuer": {"url": "https://i.example", "audiences": ["a"]},
                         "claimMappings": {"username": {"claim": "email", "prefix": ""}}}]}"#,
        );
        assert_eq!(a.user(&json!({"email": "a@b.c"})).unwrap().name, "a@b.c");
        assert_eq!(
            a.user(&json!({"email": "a@b.c", "email_verified": false}))
                .unwrap_err(),
            "oidc: email not verified"
        );
    }

    #[test]
    fn go_time_prints_utc() {
        assert_eq!(go_time(0.0), "1970-01-01 00:00:00 +0000 UTC");
        assert_eq!(go_time(1_700_000_000.0), "2023-11-14 22:13:20 +0000 UTC");
    }
}
