//! Request authentication: turns the credentials a request carries (a verified client
//! certificate, a bearer token) into a [`UserInfo`], as k8s.io/apiserver/pkg/authentication does.
//!
//! This module owns the user model, the [`Authenticator`] trait, the union of several
//! authenticators and the anonymous user. It must not decide what a user may do (that is
//! authorization) nor write HTTP answers: a failed authentication is an [`AuthnError`] that the
//! filter chain turns into upstream's 401 `Unauthorized` Status.

pub mod cache;
pub mod jwt;
pub mod request_header;
pub mod token;
pub mod webhook;
pub mod x509;

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use rustls::pki_types::CertificateDer;

/// The group every authenticated user belongs to (upstream `user.AllAuthenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group of requests that carry no credentials (upstream `user.AllUnauthenticated`).
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of requests that carry no credentials (upstream `user.Anonymous`).
pub const ANONYMOUS: &str = "system:anonymous";
/// The `extra` key that names the credential a user was authenticated with
/// (upstream `user.CredentialIDKey`); client certificates put `X509SHA256=<hex>` there.
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// Who made a request (upstream `user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What an authenticator may look at: the request headers and the client certificate chain the
/// TLS handshake received (leaf first), if any.
#[derive(Clone, Copy, Debug)]
pub struct AuthnRequest<'a> {
    pub headers: &'a http::HeaderMap,
    pub peer_certificates: Option<&'a [CertificateDer<'static>]>,
}

/// Why credentials were refused. Every variant means 401 to the client; the text is for the log
/// only, as upstream never shows it to the client.
#[derive(Debug, thiserror::Error)]
pub enum AuthnError {
    /// The client certificate did not verify against the client CA (unknown authority, expired,
    /// wrong key usage, ...). `identifier` names the certificate as upstream's log line does.
    #[error("verifying certificate {identifier} failed: {reason}")]
    Certificate { identifier: String, reason: String },
    /// A bearer token that no token authenticator knows.
    #[error("invalid bearer token")]
    InvalidBearerToken,
    /// A token of a known issuer that is not valid (bad signature, expired, wrong audience,
    /// its service account or bound object gone), with why.
    #[error("invalid bearer token, {0}")]
    InvalidToken(String),
    /// A failure remembered by a token cache, as it was first worded.
    #[error("{0}")]
    Cached(String),
    /// Several authenticators of a union failed.
    #[error("{}", Aggregate(.0))]
    Aggregate(Vec<AuthnError>),
}

/// Formats a list of errors the way upstream's `utilerrors.NewAggregate` does: one error alone
/// is shown as itself, several as `[a, b]`.
struct Aggregate<'a>(&'a [AuthnError]);

impl fmt::Display for Aggregate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "{one}"),
            many => {
                f.write_str("[")?;
                for (i, err) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{err}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// One way of recognising a user (upstream `authenticator.Request`).
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// `Ok(None)` means the request carries no credentials of this kind, so the next
    /// authenticator may try; `Err` means it carries such credentials but they are not valid.
    async fn authenticate(&self, req: &AuthnRequest<'_>) -> Result<Option<UserInfo>, AuthnError>;
}

/// Tries its authenticators in order; the first that recognises the user wins (upstream's
/// union authenticator wrapped in `AuthenticatedGroupAdder`).
///
/// Errors do not stop the search, because a request may carry a certificate from a foreign CA
/// and a valid token at once: upstream then authenticates the token. Only when nobody
/// recognised the user are the errors returned, so that the request gets 401 rather than being
/// treated as anonymous.
#[derive(Default)]
pub struct UnionAuthenticator {
    authenticators: Vec<Box<dyn Authenticator>>,
}

impl UnionAuthenticator {
    pub fn new(authenticators: Vec<Box<dyn Authenticator>>) -> Self {
        Self { authenticators }
    }

    /// Appends an authenticator, tried after those already present.
    pub fn push(&mut self, authenticator: Box<dyn Authenticator>) {
        self.authenticators.push(authenticator);
    }

    pub fn is_empty(&self) -> bool {
        self.authenticators.is_empty()
    }
}

#[async_trait]
impl Authenticator for UnionAuthenticator {
    async fn authenticate(&self, req: &AuthnRequest<'_>) -> Result<Option<UserInfo>, AuthnError> {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate(req).await {
                Ok(Some(user)) => return Ok(Some(with_authenticated_group(user))),
                Ok(None) => {}
                Err(err) => errors.push(err),
            }
        }
        match errors.len() {
            0 => Ok(None),
            1 => Err(errors.remove(0)),
            _ => Err(AuthnError::Aggregate(errors)),
        }
    }
}

/// Adds `system:authenticated` as upstream's `AuthenticatedGroupAdder` does: not to the
/// anonymous user, and not when the user already carries `system:authenticated` or
/// `system:unauthenticated`.
fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    let already = user
        .groups
        .iter()
        .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
    if user.name != ANONYMOUS && !already {
        user.groups.push(ALL_AUTHENTICATED.to_string());
    }
    user
}

/// The user of a request without credentials when anonymous requests are allowed
/// (upstream's anonymous authenticator).
pub fn anonymous_user() -> UserInfo {
    UserInfo {
        name: ANONYMOUS.to_string(),
        uid: String::new(),
        groups: vec![ALL_UNAUTHENTICATED.to_string()],
        extra: BTreeMap::new(),
    }
}

/// SHA-256 of `data`: token lookup keys and certificate credential ids.
fn sha256(data: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type Answer = fn() -> Result<Option<UserInfo>, AuthnError>;

    /// Answers with a fixed result, to test the union's rules in isolation.
    struct Fixed(Answer);

    #[async_trait]
    impl Authenticator for Fixed {
        async fn authenticate(
            &self,
            _req: &AuthnRequest<'_>,
        ) -> Result<Option<UserInfo>, AuthnError> {
            (self.0)()
        }
    }

    fn alice() -> Result<Option<UserInfo>, AuthnError> {
        Ok(Some(UserInfo {
            name: "alice".into(),
            groups: vec!["dev".into()],
            ..UserInfo::default()
        }))
    }

    fn nobody() -> Result<Option<UserInfo>, AuthnError> {
        Ok(None)
    }

    fn bad_token() -> Result<Option<UserInfo>, AuthnError> {
        Err(AuthnError::InvalidBearerToken)
    }

    fn bad_cert() -> Result<Option<UserInfo>, AuthnError> {
        Err(AuthnError::Certificate {
            identifier: "SN=1, SKID=, AKID=".into(),
            reason: "x509: certificate signed by unknown authority".into(),
        })
    }

    fn union(parts: &[Answer]) -> UnionAuthenticator {
        UnionAuthenticator::new(
            parts
                .iter()
                .map(|f| Box::new(Fixed(*f)) as Box<dyn Authenticator>)
                .collect(),
        )
    }

    async fn run(u: &UnionAuthenticator) -> Result<Option<UserInfo>, AuthnError> {
        let headers = http::HeaderMap::new();
        u.authenticate(&AuthnRequest {
            headers: &headers,
            peer_certificates: None,
        })
        .await
    }

    #[tokio::test]
    async fn first_success_wins_and_gets_authenticated_group() {
        let user = run(&union(&[nobody, bad_cert, alice]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["dev", ALL_AUTHENTICATED]);
    }

    #[tokio::test]
    async fn no_credentials_is_none() {
        assert!(run(&union(&[nobody, nobody])).await.unwrap().is_none());
        assert!(run(&UnionAuthenticator::default()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn errors_are_returned_when_nobody_succeeds() {
        let err = run(&union(&[nobody, bad_token])).await.unwrap_err();
        assert_eq!(err.to_string(), "invalid bearer token");
        let err = run(&union(&[bad_cert, bad_token])).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "[verifying certificate SN=1, SKID=, AKID= failed: x509: certificate signed by \
             unknown authority, invalid bearer token]"
        );
    }

    #[test]
    fn authenticated_group_is_not_duplicated_nor_given_to_anonymous() {
        let user = UserInfo {
            name: "bob".into(),
            groups: vec![ALL_AUTHENTICATED.into(), "x".into()],
            ..UserInfo::default()
        };
        assert_eq!(with_authenticated_group(user.clone()), user);
        assert_eq!(with_authenticated_group(anonymous_user()), anonymous_user());
        let unauthenticated = UserInfo {
            name: "carol".into(),
            groups: vec![ALL_UNAUTHENTICATED.into()],
            ..UserInfo::default()
        };
        assert_eq!(
            with_authenticated_group(unauthenticated.clone()),
            unauthenticated
        );
    }

    #[test]
    fn anonymous_user_matches_upstream() {
        let user = anonymous_user();
        assert_eq!(user.name, "system:anonymous");
        assert_eq!(user.groups, vec!["system:unauthenticated"]);
        assert!(user.uid.is_empty() && user.extra.is_empty());
    }
}
