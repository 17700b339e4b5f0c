//! Authorization: may this user do this verb on this resource? (upstream:
//! k8s.io/apiserver/pkg/authorization). RBAC comes later; until then every authenticated user is
//! allowed, behind the same seam RBAC will use.

use async_trait::async_trait;

use crate::authentication::UserInfo;
use crate::request::RequestInfo;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    /// No opinion: the next authorizer in a union decides.
    NoOpinion,
}

#[async_trait]
pub trait Authorizer: Send + Sync {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision;
}

/// Allows every request that passed authentication. Anonymous users only reach the paths the
/// authentication filter lets through without credentials.
pub struct AllowAuthenticated;

#[async_trait]
impl Authorizer for AllowAuthenticated {
    async fn authorize(&self, user: &UserInfo, _request: &RequestInfo) -> Decision {
        if user.groups.iter().any(|g| g == "system:authenticated") {
            Decision::Allow
        } else {
            Decision::Deny("anonymous requests are not allowed".to_string())
        }
    }
}
