//! The request-header (front proxy) authenticator (upstream:
//! k8s.io/apiserver/pkg/authentication/request/headerrequest): a proxy that holds a client
//! certificate of `--requestheader-client-ca-file` (with a common name among
//! `--requestheader-allowed-names`, when any are given) says who the user is in headers —
//! `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-<key>` by default at kubeadm, as the
//! `--requestheader-*-headers` flags name them.
//!
//! Without such a certificate the headers mean nothing and are not read: any client could send
//! them. A certificate of the proxy's CA that is not allowed, or headers that name no user, are
//! refused (401), as upstream's.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rustls::pki_types::UnixTime;

use super::x509::ClientCertAuthenticator;
use super::{Authenticator, AuthnError, AuthnRequest, UserInfo};

/// What `--requestheader-*` sets.
#[derive(Clone, Debug, Default)]
pub struct RequestHeaderConfig {
    pub client_ca_pem: Vec<u8>,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
}

pub struct RequestHeaderAuthenticator {
    proxies: ClientCertAuthenticator,
    config: RequestHeaderConfig,
}

impl RequestHeaderAuthenticator {
    pub fn new(config: RequestHeaderConfig) -> Result<Self, String> {
        if config.username_headers.is_empty() {
            return Err("--requestheader-username-headers must name at least one header when --requestheader-client-ca-file is set".into());
        }
        let proxies = ClientCertAuthenticator::from_ca_pem(&config.client_ca_pem)
            .map_err(|e| format!("--requestheader-client-ca-file: {e}"))?;
        Ok(RequestHeaderAuthenticator { proxies, config })
    }

    /// The user the headers name.
    fn user(&self, headers: &http::HeaderMap) -> Option<UserInfo> {
        let values = |name: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let first = |names: &[String]| names.iter().flat_map(|n| values(n)).find(|v| !v.is_empty());
        let name = first(&self.config.username_headers)?;
        let uid = first(&self.config.uid_headers).unwrap_or_default();
        let groups = self
            .config
            .group_headers
            .iter()
            .flat_map(|n| values(n))
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let Ok(value) = value.to_str() else { continue };
            for prefix in &self.config.extra_headers_prefixes {
                let header = header.as_str();
                if header.len() > prefix.len()
                    && header[..prefix.len()].eq_ignore_ascii_case(prefix)
                {
                    let key = percent_decode(&header[prefix.len()..].to_lowercase());
                    extra.entry(key).or_default().push(value.to_string());
                }
            }
        }
        Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        })
    }
}

/// `%XX` escapes decoded, as upstream unescapes extra keys (`url.PathUnescape`); a malformed
/// escape is kept as it is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[async_trait]
impl Authenticator for RequestHeaderAuthenticator {
    async fn authenticate(&self, req: &AuthnRequest<'_>) -> Result<Option<UserInfo>, AuthnError> {
        let Some(chain) = req.peer_certificates.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        // A certificate of another CA is not a proxy's: the next authenticator may know it.
        let Ok(Some(proxy)) = self.proxies.verify(chain, UnixTime::now()) else {
            return Ok(None);
        };
        if !self.config.allowed_names.is_empty() && !self.config.allowed_names.contains(&proxy.name)
        {
            return Err(AuthnError::InvalidToken(format!(
                "x509: subject with cn={} is not in the allowed list",
                proxy.name
            )));
        }
        match self.user(req.headers) {
            Some(user) => Ok(Some(user)),
            None => Err(AuthnError::InvalidToken(
                "the request-header proxy named no user".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_the_user_groups_and_extra() {
        let a = RequestHeaderAuthenticator {
            proxies: {
                let key = rcgen::KeyPair::generate().unwrap();
                let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
                params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
                let ca = params.self_signed(&key).unwrap();
                ClientCertAuthenticator::from_ca_pem(ca.pem().as_bytes()).unwrap()
            },
            config: RequestHeaderConfig {
                username_headers: vec!["X-Remote-User".into()],
                uid_headers: vec!["X-Remote-Uid".into()],
                group_headers: vec!["X-Remote-Group".into()],
                extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
                ..RequestHeaderConfig::default()
            },
        };
        let mut h = http::HeaderMap::new();
        h.insert("x-remote-user", "ann".parse().unwrap());
        h.insert("x-remote-uid", "u1".parse().unwrap());
        h.append("x-remote-group", "a".parse().unwrap());
        h.append("x-remote-group", "b".parse().unwrap());
        h.append("x-remote-extra-acme.com%2fteam", "blue".parse().unwrap());
        let user = a.user(&h).unwrap();
        assert_eq!(user.name, "ann");
        assert_eq!(user.uid, "u1");
        assert_eq!(user.groups, ["a", "b"]);
        assert_eq!(user.extra["acme.com/team"], ["blue"]);
        assert!(a.user(&http::HeaderMap::new()).is_none());
        assert_eq!(percent_decode("a%2Fb%zz"), "a/b%zz");
    }
}
