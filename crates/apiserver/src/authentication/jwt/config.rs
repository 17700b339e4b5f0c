//! The `AuthenticationConfiguration` of `--authentication-config` (apiserver.config.k8s.io v1,
//! v1beta1, v1alpha1: the same fields), the JWT authenticator the `--oidc-*` flags describe, and
//! upstream's validation of both (k8s.io/apiserver/pkg/apis/apiserver/validation).
//!
//! This module reads and checks configuration only; running it is `super`'s.

use std::collections::BTreeSet;

use apimachinery::validation::{FieldError, FieldPath, aggregate_message};
use serde::Deserialize;

use crate::cel::eval::Program;

/// The file's content (upstream `AuthenticationConfiguration`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthenticationConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub jwt: Vec<JwtAuthenticatorConfig>,
    #[serde(default)]
    pub anonymous: Option<AnonymousConfig>,
}

/// `anonymous`: whether requests without credentials are let in, and on which paths only.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousConfig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub conditions: Vec<AnonymousCondition>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousCondition {
    #[serde(default)]
    pub path: String,
}

/// One `jwt` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuthenticatorConfig {
    #[serde(default)]
    pub issuer: Issuer,
    #[serde(default)]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    #[serde(default)]
    pub claim_mappings: ClaimMappings,
    #[serde(default)]
    pub user_validation_rules: Vec<UserValidationRule>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    #[serde(default)]
    pub url: String,
    #[serde(default, rename = "discoveryURL")]
    pub discovery_url: String,
    /// PEM certificates that may sign the issuer's serving certificate.
    #[serde(default)]
    pub certificate_authority: String,
    #[serde(default)]
    pub audiences: Vec<String>,
    #[serde(default)]
    pub audience_match_policy: String,
    #[serde(default)]
    pub egress_selector_type: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimValidationRule {
    #[serde(default)]
    pub claim: String,
    #[serde(default)]
    pub required_value: String,
    #[serde(default)]
    pub expression: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    #[serde(default)]
    pub username: PrefixedClaimOrExpression,
    #[serde(default)]
    pub groups: PrefixedClaimOrExpression,
    #[serde(default)]
    pub uid: ClaimOrExpression,
    #[serde(default)]
    pub extra: Vec<ExtraMapping>,
}

/// A claim with a prefix (which must be given, possibly empty, with a claim), or an expression.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixedClaimOrExpression {
    #[serde(default)]
    pub claim: String,
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub expression: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimOrExpression {
    #[serde(default)]
    pub claim: String,
    #[serde(default)]
    pub expression: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraMapping {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value_expression: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserValidationRule {
    #[serde(default)]
    pub expression: String,
    #[serde(default)]
    pub message: String,
}

const GROUP: &str = "apiserver.config.k8s.io";

/// Reads `--authentication-config` (YAML or JSON), in upstream's words when it cannot.
pub fn load(path: &str) -> Result<AuthenticationConfiguration, String> {
    let fail = |why: String| {
        format!("failed to load authentication configuration from file {path:?}: {why}")
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    parse(&text).map_err(fail)
}

/// Decodes a configuration: only the kind and versions upstream registers, unknown fields
/// refused as its strict decoder refuses them.
pub fn parse(text: &str) -> Result<AuthenticationConfiguration, String> {
    let value: serde_json::Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("error unmarshaling config: {e}"))?;
    let api_version = value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or("");
    let known = ["v1", "v1beta1", "v1alpha1"].map(|v| format!("{GROUP}/{v}"));
    if !known.iter().any(|k| k == api_version) || kind != "AuthenticationConfiguration" {
        return Err(format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme"
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("strict decoding error: {e}"))
}

/// What the `--oidc-*` flags set.
#[derive(Clone, Debug, Default)]
pub struct OidcFlags {
    pub issuer_url: String,
    pub client_id: String,
    pub ca_file: String,
    pub username_claim: String,
    pub username_prefix: String,
    pub groups_claim: String,
    pub groups_prefix: String,
    /// `claim=value` pairs.
    pub required_claims: Vec<(String, String)>,
}

impl OidcFlags {
    /// The JWT authenticator the flags describe, as upstream's `ToAuthenticationConfig` builds
    /// it: claims other than `email` prefixed with `<issuer>#` unless a prefix is given, `-`
    /// meaning no prefix. `None` without an issuer and client id.
    pub fn to_jwt(&self) -> Result<Option<JwtAuthenticatorConfig>, String> {
        if self.issuer_url.is_empty() || self.client_id.is_empty() {
            return Ok(None);
        }
        let username_claim = if self.username_claim.is_empty() {
            "sub"
        } else {
            &self.username_claim
        };
        let mut prefix = self.username_prefix.clone();
        if prefix.is_empty() && username_claim != "email" {
            prefix = format!("{}#", self.issuer_url);
        }
        if prefix == "-" {
            prefix.clear();
        }
        let mut jwt = JwtAuthenticatorConfig {
            issuer: Issuer {
                url: self.issuer_url.clone(),
                audiences: vec![self.client_id.clone()],
                ..Issuer::default()
            },
            ..JwtAuthenticatorConfig::default()
        };
        jwt.claim_mappings.username = PrefixedClaimOrExpression {
            claim: username_claim.to_string(),
            prefix: Some(prefix),
            expression: String::new(),
        };
        if !self.groups_claim.is_empty() {
            jwt.claim_mappings.groups = PrefixedClaimOrExpression {
                claim: self.groups_claim.clone(),
                prefix: Some(self.groups_prefix.clone()),
                expression: String::new(),
            };
        }
        if !self.ca_file.is_empty() {
            jwt.issuer.certificate_authority = std::fs::read_to_string(&self.ca_file)
                .map_err(|e| format!("open {}: {e}", self.ca_file))?;
        }
        jwt.claim_validation_rules = self
            .required_claims
            .iter()
            .map(|(claim, value)| ClaimValidationRule {
                claim: claim.clone(),
                required_value: value.clone(),
                ..ClaimValidationRule::default()
            })
            .collect();
        Ok(Some(jwt))
    }
}

/// Upstream's `ValidateAuthenticationConfiguration`: the issuers that service-account tokens
/// use are `disallowed`. The error is the whole list, as upstream's aggregate prints it.
pub fn validate(c: &AuthenticationConfiguration, disallowed: &[String]) -> Result<(), String> {
    let mut errs = Vec::new();
    let root = FieldPath::new("jwt");
    if c.jwt.len() > 64 {
        errs.push(FieldError::too_many(
            &root,
            Some(c.jwt.len() as i64),
            Some(64),
        ));
    } else {
        let mut issuers = BTreeSet::new();
        let mut discovery = BTreeSet::new();
        for (i, a) in c.jwt.iter().enumerate() {
            let path = root.index(i);
            errs.extend(validate_jwt(a, &path, disallowed));
            let issuer = path.child("issuer");
            if !issuers.insert(a.issuer.url.as_str()) {
                errs.push(FieldError::duplicate(
                    &issuer.child("url"),
                    a.issuer.url.as_str(),
                ));
            }
            if !a.issuer.discovery_url.is_empty()
                && !discovery.insert(a.issuer.discovery_url.as_str())
            {
                errs.push(FieldError::duplicate(
                    &issuer.child("discoveryURL"),
                    a.issuer.discovery_url.as_str(),
                ));
            }
        }
    }
    if let Some(anonymous) = &c.anonymous
        && !anonymous.enabled
        && !anonymous.conditions.is_empty()
    {
        errs.push(
            FieldError::invalid(
                &FieldPath::new("anonymous").child("conditions"),
                serde_json::Value::Null,
                "enabled should be set to true when conditions are defined",
            )
            .with_rendered_value(format!(
                "[{}]",
                anonymous
                    .conditions
                    .iter()
                    .map(|c| format!("{{{}}}", c.path))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid authentication configuration: {}",
            aggregate_message(&errs)
        ))
    }
}

fn validate_jwt(
    a: &JwtAuthenticatorConfig,
    path: &FieldPath,
    disallowed: &[String],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let issuer = path.child("issuer");
    errs.extend(validate_url(
        &a.issuer.url,
        &issuer.child("url"),
        disallowed,
        true,
    ));
    if !a.issuer.discovery_url.is_empty() {
        let p = issuer.child("discoveryURL");
        if a.issuer.discovery_url.trim_end_matches('/') == a.issuer.url.trim_end_matches('/') {
            errs.push(FieldError::invalid(
                &p,
                a.issuer.discovery_url.as_str(),
                "discoveryURL must be different from URL",
            ));
        }
        errs.extend(validate_url(&a.issuer.discovery_url, &p, &[], false));
    }
    errs.extend(validate_audiences(&a.issuer, &issuer));
    if !a.issuer.certificate_authority.is_empty() {
        let mut reader = a.issuer.certificate_authority.as_bytes();
        let certs: Vec<_> = rustls_pemfile::certs(&mut reader).collect();
        if certs.is_empty() || certs.iter().any(Result::is_err) {
            errs.push(
                FieldError::invalid(
                    &issuer.child("certificateAuthority"),
                    "<omitted>",
                    "data does not contain any valid RSA or ECDSA certificates",
                )
                .with_rendered_value("\"<omitted>\""),
            );
        }
    }
    if !a.issuer.egress_selector_type.is_empty()
        && !["controlplane", "cluster"].contains(&a.issuer.egress_selector_type.as_str())
    {
        errs.push(FieldError::invalid(
            &issuer.child("egressSelectorType"),
            a.issuer.egress_selector_type.as_str(),
            "egress selector must be either controlplane or cluster",
        ));
    }

    // Claim validation rules.
    let rules = path.child("claimValidationRules");
    let mut claims = BTreeSet::new();
    let mut expressions = BTreeSet::new();
    let mut uses_email_verified = false;
    for (i, rule) in a.claim_validation_rules.iter().enumerate() {
        let p = rules.index(i);
        match (rule.claim.is_empty(), rule.expression.is_empty()) {
            (false, false) => errs.push(FieldError::invalid(
                &p,
                rule.claim.as_str(),
                "claim and expression can't both be set",
            )),
            (true, true) => errs.push(FieldError::required(&p, "claim or expression is required")),
            (false, true) => {
                if !rule.message.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("message"),
                        rule.message.as_str(),
                        "may not be specified when claim is set",
                    ));
                }
                if !claims.insert(rule.claim.as_str()) {
                    errs.push(FieldError::duplicate(
                        &p.child("claim"),
                        rule.claim.as_str(),
                    ));
                }
            }
            (true, false) => {
                if !rule.required_value.is_empty() {
                    errs.push(FieldError::invalid(
                        &p.child("requiredValue"),
                        rule.required_value.as_str(),
                        "may not be specified when expression is set",
                    ));
                }
                if !expressions.insert(rule.expression.as_str()) {
                    errs.push(FieldError::duplicate(
                        &p.child("expression"),
                        rule.expression.as_str(),
                    ));
                    continue;
                }
                uses_email_verified |= uses_claim(&rule.expression, "email_verified");
                errs.extend(compile_error(&p.child("expression"), &rule.expression));
            }
        }
    }

    // Claim mappings.
    let m = &a.claim_mappings;
    let mappings = path.child("claimMappings");
    errs.extend(validate_prefixed(
        &m.username,
        &mappings.child("username"),
        true,
    ));
    errs.extend(validate_prefixed(
        &m.groups,
        &mappings.child("groups"),
        false,
    ));
    if !m.uid.claim.is_empty() && !m.uid.expression.is_empty() {
        errs.push(FieldError::invalid(
            &mappings.child("uid"),
            "",
            "claim and expression can't both be set",
        ));
    } else if !m.uid.expression.is_empty() {
        errs.extend(compile_error(
            &mappings.child("uid").child("expression"),
            &m.uid.expression,
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, extra) in m.extra.iter().enumerate() {
        let p = mappings.child("extra").index(i);
        let key = p.child("key");
        errs.extend(domain_prefixed_path(&key, &extra.key));
        if extra.key != extra.key.to_lowercase() {
            errs.push(FieldError::invalid(
                &key,
                extra.key.as_str(),
                "must be lowercase",
            ));
        }
        if is_kubernetes_domain(&extra.key) {
            errs.push(FieldError::invalid(
                &key,
                extra.key.as_str(),
                "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
            ));
        }
        if !keys.insert(extra.key.as_str()) {
            errs.push(FieldError::duplicate(&key, extra.key.as_str()));
            continue;
        }
        if extra.value_expression.is_empty() {
            errs.push(FieldError::required(&p.child("valueExpression"), ""));
            continue;
        }
        uses_email_verified |= uses_claim(&extra.value_expression, "email_verified");
        errs.extend(compile_error(
            &p.child("valueExpression"),
            &extra.value_expression,
        ));
    }
    let username = &m.username.expression;
    if !username.is_empty()
        && uses_claim(username, "email")
        && !uses_email_verified
        && !uses_claim(username, "email_verified")
    {
        errs.push(FieldError::invalid(
            &mappings.child("username").child("expression"),
            username.as_str(),
            "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
        ));
    }

    // User validation rules.
    let mut seen = BTreeSet::new();
    for (i, rule) in a.user_validation_rules.iter().enumerate() {
        let p = path.child("userValidationRules").index(i);
        if rule.expression.is_empty() {
            errs.push(FieldError::required(&p.child("expression"), ""));
        } else if !seen.insert(rule.expression.as_str()) {
            errs.push(FieldError::duplicate(
                &p.child("expression"),
                rule.expression.as_str(),
            ));
        } else {
            errs.extend(compile_error(&p.child("expression"), &rule.expression));
        }
    }
    errs
}

/// Whether an expression selects `claims.<claim>` (upstream walks the AST for the select; the
/// expression is searched for the selection, as a field name follows `claims.` only there).
fn uses_claim(expression: &str, claim: &str) -> bool {
    let needle = format!("claims.{claim}");
    expression.match_indices(&needle).any(|(i, _)| {
        let after = expression[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn compile_error(path: &FieldPath, expression: &str) -> Option<FieldError> {
    Program::compile(expression)
        .err()
        .map(|e| FieldError::invalid(path, expression, format!("compilation failed: {e}")))
}

fn validate_prefixed(
    mapping: &PrefixedClaimOrExpression,
    path: &FieldPath,
    required: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (mapping.claim.is_empty(), mapping.expression.is_empty()) {
        (false, false) => errs.push(FieldError::invalid(
            path,
            "",
            "claim and expression can't both be set",
        )),
        (true, true) if required => {
            errs.push(FieldError::required(path, "claim or expression is required"))
        }
        (true, false) => {
            if let Some(prefix) = &mapping.prefix {
                errs.push(FieldError::invalid(
                    &path.child("prefix"),
                    prefix.as_str(),
                    "may not be specified when expression is set",
                ));
            }
            errs.extend(compile_error(&path.child("expression"), &mapping.expression));
        }
        (false, true) if mapping.prefix.is_none() => errs.push(FieldError::required(
            &path.child("prefix"),
            "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
        )),
        _ => {}
    }
    errs
}

/// Upstream's `validateURL`: https only, no user, query or fragment, and not an issuer of
/// service-account tokens.
fn validate_url(
    url: &str,
    path: &FieldPath,
    disallowed: &[String],
    required: bool,
) -> Vec<FieldError> {
    if url.is_empty() {
        return if required {
            vec![FieldError::required(path, "")]
        } else {
            Vec::new()
        };
    }
    let mut errs = Vec::new();
    if disallowed.iter().any(|d| d == url) {
        let mut list = disallowed.to_vec();
        list.sort();
        errs.push(FieldError::invalid(
            path,
            url,
            format!(
                "URL must not overlap with disallowed issuers: [{}]",
                list.join(" ")
            ),
        ));
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        errs.push(FieldError::invalid(
            path,
            url,
            format!("parse {url:?}: invalid URI"),
        ));
        return errs;
    };
    if uri.scheme_str() != Some("https") {
        errs.push(FieldError::invalid(path, url, "URL scheme must be https"));
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        errs.push(FieldError::invalid(
            path,
            url,
            "URL must not contain a username or password",
        ));
    }
    if uri.query().is_some() {
        errs.push(FieldError::invalid(
            path,
            url,
            "URL must not contain a query",
        ));
    }
    if url.contains('#') {
        errs.push(FieldError::invalid(
            path,
            url,
            "URL must not contain a fragment",
        ));
    }
    errs
}

fn validate_audiences(issuer: &Issuer, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = path.child("audiences");
    let policy = path.child("audienceMatchPolicy");
    if issuer.audiences.is_empty() {
        errs.push(FieldError::required(
            &p,
            format!("at least one {p} is required"),
        ));
        return errs;
    }
    let mut seen = BTreeSet::new();
    for (i, audience) in issuer.audiences.iter().enumerate() {
        if audience.is_empty() {
            errs.push(FieldError::required(&p.index(i), ""));
        } else if !seen.insert(audience.as_str()) {
            errs.push(FieldError::duplicate(&p.index(i), audience.as_str()));
        }
    }
    let policy_value = issuer.audience_match_policy.as_str();
    if issuer.audiences.len() > 1 && policy_value != "MatchAny" {
        errs.push(FieldError::invalid(
            &policy,
            policy_value,
            "audienceMatchPolicy must be MatchAny for multiple audiences",
        ));
    }
    if issuer.audiences.len() == 1 && !["", "MatchAny"].contains(&policy_value) {
        errs.push(FieldError::invalid(
            &policy,
            policy_value,
            "audienceMatchPolicy must be empty or MatchAny for single audience",
        ));
    }
    errs
}

/// `k8s.io`, `kubernetes.io` and their subdomains, as the domain of a `domain/path` key.
fn is_kubernetes_domain(key: &str) -> bool {
    let domain = key.split('/').next().unwrap_or("");
    ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// Upstream's `IsDomainPrefixedPath`: `<DNS subdomain>/<non-empty path>`.
fn domain_prefixed_path(path: &FieldPath, key: &str) -> Vec<FieldError> {
    if key.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((domain, rest)) = key.split_once('/') else {
        return vec![FieldError::invalid(
            path,
            key,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    if rest.is_empty() {
        return vec![FieldError::invalid(
            path,
            key,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    }
    apimachinery::validation::is_dns1123_subdomain(domain)
        .into_iter()
        .map(|msg| FieldError::invalid(path, domain, msg))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_one_jwt_authenticator_with_upstreams_prefix_rules() {
        let mut flags = OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "kubernetes".into(),
            ..OidcFlags::default()
        };
        let jwt = flags.to_jwt().unwrap().unwrap();
        assert_eq!(jwt.claim_mappings.username.claim, "sub");
        assert_eq!(
            jwt.claim_mappings.username.prefix.as_deref(),
            Some("https://issuer.example#")
        );
        flags.username_claim = "email".into();
        let jwt = flags.to_jwt().unwrap().unwrap();
        assert_eq!(jwt.claim_mappings.username.prefix.as_deref(), Some(""));
        flags.username_prefix = "-".into();
        flags.username_claim = "name".into();
        let jwt = flags.to_jwt().unwrap().unwrap();
        assert_eq!(jwt.claim_mappings.username.prefix.as_deref(), Some(""));
        flags.client_id.clear();
        assert!(flags.to_jwt().unwrap().is_none());
    }

    #[test]
    fn validation_reports_upstreams_errors() {
        let c = parse(
            r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: http://issuer.example?x=1
    audiences: [a, b]
  claimMappings:
    username:
      claim: sub
    extra:
    - key: kubernetes.io/foo
      valueExpression: claims.foo
"#,
        )
        .unwrap();
        let err = validate(&c, &[]).unwrap_err();
        for want in [
            "jwt[0].issuer.url: Invalid value: \"http://issuer.example?x=1\": URL scheme must be https",
            "URL must not contain a query",
            "jwt[0].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences",
            "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set",
            "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
        ] {
            assert!(err.contains(want), "{want} not in {err}");
        }
        let email = parse(
            r#"{"apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration",
                "jwt": [{"issuer": {"url": "https://i.example", "audiences": ["a"]},
                         "claimMappings": {"username": {"expression": "claims.email"}}}]}"#,
        )
        .unwrap();
        assert!(
            validate(&email, &[])
                .unwrap_err()
                .contains("claims.email_verified must be used")
        );
        assert!(
            parse("apiVersion: v1\nkind: AuthenticationConfiguration\n")
                .unwrap_err()
                .contains("no kind")
        );
        assert!(
            parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nbogus: 1\n")
                .unwrap_err()
                .contains("strict decoding error")
        );
        let disallowed = parse(
            r#"{"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthenticationConfiguration",
                "jwt": [{"issuer": {"url": "https://kubernetes.default.svc", "audiences": ["a"]},
                         "claimMappings": {"username": {"claim": "sub", "prefix": ""}}}]}"#,
        )
        .unwrap();
        assert!(
            validate(&disallowed, &["https://kubernetes.default.svc".into()])
                .unwrap_err()
                .contains("URL must not overlap with disallowed issuers")
        );
        assert!(validate(&disallowed, &[]).is_ok());
    }
}
