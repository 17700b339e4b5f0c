//! Flags and configuration files → the authenticators and the authorizer chain (upstream:
//! pkg/kubeapiserver/authenticator and pkg/kubeapiserver/authorizer configs).
//!
//! Authenticators in upstream's order: the front proxy's request headers, client
//! certificates, then the bearer token's
//! authenticators — the token file, service-account tokens, bootstrap tokens, JWT issuers (`--oidc-*` or
//! `--authentication-config`), the token webhook. Authorizers: `system:masters` first, then
//! `--authorization-mode` (with `--authorization-webhook-*` for `Webhook`,
//! `--authorization-policy-file` for `ABAC`) or the entries of
//! `--authorization-config`.

use std::sync::Arc;
use std::time::Duration;

use apiserver::authentication::jwt::{
    JwtAuthenticator, JwtAuthenticators, ReloadingJwtAuthenticators,
    config::{self as authn_config, AuthenticationConfiguration},
    keys::ALL_ALGORITHMS,
};
use apiserver::authentication::request_header::{RequestHeaderAuthenticator, RequestHeaderConfig};
use apiserver::authentication::token::{
    BearerTokenAuthenticator, TokenAuthenticator, TokenFileAuthenticator,
};
use apiserver::authentication::webhook::WebhookTokenAuthenticator;
use apiserver::authentication::{Authenticator, UnionAuthenticator, x509::ClientCertAuthenticator};
use apiserver::authorization::abac::AbacAuthorizer;
use apiserver::authorization::config::{AuthorizerEntry, ReloadingAuthorizer, legacy_webhook};
use apiserver::authorization::webhook::WebhookAuthorizer;
use apiserver::authorization::{
    AlwaysAllow, AlwaysDeny, Authorizer, PrivilegedGroups, SYSTEM_MASTERS, Union,
};

use crate::Options;

/// How long a JWT's answer is cached (upstream's `TokenSuccessCacheTTL`).
const TOKEN_SUCCESS_CACHE_TTL: Duration = Duration::from_secs(10);

/// Who may come in without credentials.
pub struct Anonymous {
    pub enabled: bool,
    /// Only these paths, when not empty (`anonymous.conditions` of --authentication-config).
    pub paths: Vec<String>,
}

/// The request authenticator and the anonymous settings.
pub fn authenticator(
    opts: &Options,
    client_ca: &[u8],
    service_accounts: Arc<ironplane_kube::serviceaccount::Tokens>,
    bootstrap_tokens: Option<Arc<ironplane_kube::bootstrap_token::BootstrapTokenAuthenticator>>,
) -> Result<(Arc<dyn Authenticator>, Anonymous), String> {
    let config = match &opts.authentication_config {
        Some(path) => authn_config::load(path)?,
        None => AuthenticationConfiguration::default(),
    };
    let mut jwt = config.jwt.clone();
    if opts.authentication_config.is_none()
        && let Some(flags) = opts.oidc_flags().to_jwt()?
    {
        jwt.push(flags);
    }
    let checked = AuthenticationConfiguration {
        jwt: jwt.clone(),
        ..config.clone()
    };
    authn_config::validate(&checked, &opts.service_account_issuer)?;
    let anonymous = match (&config.anonymous, opts.anonymous_auth) {
        (Some(_), Some(_)) => {
            return Err("anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file".into());
        }
        (Some(a), None) => Anonymous {
            enabled: a.enabled,
            paths: a.conditions.iter().map(|c| c.path.clone()).collect(),
        },
        (None, flag) => Anonymous {
            enabled: flag.unwrap_or(true),
            paths: Vec::new(),
        },
    };
    // `--authentication-config` accepts every algorithm a key can verify; the flags only those
    // of --oidc-signing-algs.
    let algorithms: Vec<String> = if opts.authentication_config.is_some() {
        ALL_ALGORITHMS.iter().map(|a| a.to_string()).collect()
    } else {
        opts.oidc_signing_algs.clone()
    };

    let mut tokens: Vec<Box<dyn TokenAuthenticator>> = Vec::new();
    if let Some(path) = &opts.token_auth_file {
        tokens.push(Box::new(
            TokenFileAuthenticator::from_file(path).map_err(|e| e.to_string())?,
        ));
    }
    tokens.push(Box::new(
        ironplane_kube::serviceaccount::TokenAuthenticator(service_accounts),
    ));
    if let Some(bootstrap) = bootstrap_tokens {
        tokens.push(Box::new(bootstrap));
    }
    if let Some(path) = &opts.authentication_config {
        // Read again when the file changes, as upstream does.
        tokens.push(Box::new(ReloadingJwtAuthenticators::start(
            path.clone(),
            opts.service_account_issuer.clone(),
            TOKEN_SUCCESS_CACHE_TTL,
        )?));
    } else if !jwt.is_empty() {
        let issuers = jwt
            .iter()
            .map(|j| JwtAuthenticator::new(j, &algorithms))
            .collect::<Result<Vec<_>, String>>()?;
        tokens.push(Box::new(JwtAuthenticators::new(
            issuers,
            TOKEN_SUCCESS_CACHE_TTL,
        )));
    }
    if let Some(path) = &opts.authentication_token_webhook_config_file {
        tokens.push(Box::new(WebhookTokenAuthenticator::from_file(
            path,
            &opts.authentication_token_webhook_version,
            opts.authentication_token_webhook_cache_ttl,
            opts.token_options().api_audiences,
        )?));
    }
    let mut authenticators: Vec<Box<dyn Authenticator>> = Vec::new();
    if let Some(config) = request_header_config(opts)? {
        authenticators.push(Box::new(RequestHeaderAuthenticator::new(config)?));
    }
    authenticators.push(Box::new(
        ClientCertAuthenticator::from_ca_pem(client_ca).map_err(|e| e.to_string())?,
    ));
    authenticators.push(Box::new(BearerTokenAuthenticator::new(tokens)));
    Ok((Arc::new(UnionAuthenticator::new(authenticators)), anonymous))
}

/// `--requestheader-*`, when a front proxy CA is given.
pub fn request_header_config(opts: &Options) -> Result<Option<RequestHeaderConfig>, String> {
    let Some(path) = &opts.requestheader_client_ca_file else {
        return Ok(None);
    };
    let client_ca_pem =
        std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(Some(RequestHeaderConfig {
        client_ca_pem,
        allowed_names: opts.requestheader_allowed_names.clone(),
        username_headers: opts.requestheader_username_headers.clone(),
        uid_headers: opts.requestheader_uid_headers.clone(),
        group_headers: opts.requestheader_group_headers.clone(),
        extra_headers_prefixes: opts.requestheader_extra_headers_prefix.clone(),
    }))
}

/// The data of `kube-system/extension-apiserver-authentication`: the client CA and, with a
/// front proxy, its settings (JSON lists, as upstream writes them), for extension servers.
pub fn authentication_info(
    client_ca_pem: &str,
    request_header: Option<&RequestHeaderConfig>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut data = serde_json::Map::new();
    data.insert("client-ca-file".into(), client_ca_pem.into());
    if let Some(rh) = request_header {
        let list =
            |v: &Vec<String>| serde_json::Value::from(serde_json::to_string(v).unwrap_or_default());
        data.insert(
            "requestheader-allowed-names".into(),
            list(&rh.allowed_names),
        );
        data.insert(
            "requestheader-client-ca-file".into(),
            String::from_utf8_lossy(&rh.client_ca_pem)
                .into_owned()
                .into(),
        );
        data.insert(
            "requestheader-extra-headers-prefix".into(),
            list(&rh.extra_headers_prefixes),
        );
        data.insert(
            "requestheader-group-headers".into(),
            list(&rh.group_headers),
        );
        data.insert("requestheader-uid-headers".into(), list(&rh.uid_headers));
        data.insert(
            "requestheader-username-headers".into(),
            list(&rh.username_headers),
        );
    }
    data
}

/// The authorizer entries of the flags, one per `--authorization-mode` value.
fn authorizer_entries(opts: &Options) -> Result<Vec<AuthorizerEntry>, String> {
    opts.authorization_modes()
        .into_iter()
        .map(|mode| {
            let webhook = if mode == "Webhook" {
                let file = opts
                    .authorization_webhook_config_file
                    .as_deref()
                    .ok_or("authorization-mode Webhook's authorization config file not passed")?;
                Some(legacy_webhook(
                    file,
                    opts.authorization_webhook_version
                        .as_deref()
                        .unwrap_or("v1beta1"),
                    opts.authorization_webhook_cache_authorized_ttl
                        .unwrap_or(Duration::from_secs(300)),
                    opts.authorization_webhook_cache_unauthorized_ttl
                        .unwrap_or(Duration::from_secs(30)),
                )?)
            } else {
                None
            };
            Ok(AuthorizerEntry {
                name: mode.to_lowercase(),
                kind: mode,
                webhook,
            })
        })
        .collect()
}

/// The authorizer chain: `system:masters` first, then the entries in order — those of
/// `--authorization-config`, read again when the file changes, or those of the flags.
pub fn authorizer(
    opts: &Options,
    rbac: &ironplane_kube::rbac::RbacAuthorizer,
    node: &ironplane_kube::node_authorizer::NodeAuthorizer,
) -> Result<Arc<dyn Authorizer>, String> {
    let privileged: Arc<dyn Authorizer> = Arc::new(PrivilegedGroups(vec![SYSTEM_MASTERS.into()]));
    let (rbac, node) = (rbac.clone(), node.clone());
    let policy_file = opts.authorization_policy_file.clone();
    let build = move |entries: Vec<AuthorizerEntry>| -> Result<Arc<dyn Authorizer>, String> {
        let mut chain: Vec<Arc<dyn Authorizer>> = Vec::new();
        for entry in entries {
            match (entry.kind.as_str(), entry.webhook) {
                ("AlwaysAllow", _) => chain.push(Arc::new(AlwaysAllow)),
                ("AlwaysDeny", _) => chain.push(Arc::new(AlwaysDeny)),
                ("RBAC", _) => chain.push(Arc::new(rbac.clone())),
                ("Node", _) => chain.push(Arc::new(node.clone())),
                ("Webhook", Some(settings)) => {
                    chain.push(Arc::new(WebhookAuthorizer::new(settings)))
                }
                ("ABAC", _) => {
                    let file = policy_file
                        .as_deref()
                        .ok_or("authorization-mode ABAC's authorization policy file not passed")?;
                    chain.push(Arc::new(AbacAuthorizer::from_file(file)?));
                }
                (other, _) => return Err(format!("authorization-mode {other:?} is not supported")),
            }
        }
        Ok(Arc::new(Union(chain)))
    };
    let configured: Arc<dyn Authorizer> = match &opts.authorization_config {
        Some(path) => Arc::new(ReloadingAuthorizer::start(path.clone(), Box::new(build))?),
        None => build(authorizer_entries(opts)?)?,
    };
    Ok(Arc::new(Union(vec![privileged, configured])))
}
