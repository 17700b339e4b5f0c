//! `RequestInfo`: what a request is about, parsed from its method, path and query once, before
//! authentication, so that every later layer (authorization, flow control, handlers) reads the same
//! facts. Upstream: k8s.io/apiserver/pkg/endpoints/request/requestinfo.go.

use http::Method;

/// The parsed shape of a request. For non-resource paths (`/healthz`, `/version`, `/openapi/v2`)
/// `is_resource_request` is false and only `path` and `verb` are meaningful.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource_request: bool,
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection; or the
    /// lower-cased HTTP method for non-resource requests.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The path segments after the version, as upstream keeps them.
    pub parts: Vec<String>,
    /// The path went through `namespaces/<namespace>/` to a resource, even with an empty
    /// namespace segment (`/api/v1/namespaces//configmaps`, which upstream routes as namespaced).
    pub namespace_in_path: bool,
    /// The `fieldSelector` of a list or watch, as sent (the Node authorizer reads it, as
    /// upstream's authorizers read the selector attributes).
    pub field_selector: String,
}

/// Query parameters that change the verb: `watch=true` on a GET turns it into a watch. The first
/// value counts, read as upstream's parameter codec reads booleans.
fn query_flag(query: &str, key: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .is_some_and(|(_, v)| crate::endpoints::query::boolean(&v))
}

fn query_value(query: &str, key: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

impl RequestInfo {
    /// Parses a request the way upstream's RequestInfoFactory does. Never fails: anything that is
    /// not a well-formed resource path becomes a non-resource request, which later answers 404.
    pub fn parse(method: &Method, path: &str, query: &str) -> RequestInfo {
        // Go's server hands handlers the percent-decoded path (`%2F` becomes a separator too),
        // and upstream splits that.
        let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
        let path = decoded.as_ref();
        let mut info = RequestInfo {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..Default::default()
        };
        // Empty segments stay, as upstream's split keeps them: `/api/v1//namespaces` names no
        // resource (404), and `namespaces//configmaps` is a namespaced path with an empty
        // namespace.
        let trimmed = path.trim_matches('/');
        let segments: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        let Some((&prefix, rest)) = segments.split_first() else {
            return info;
        };
        if prefix != "api" && prefix != "apis" {
            return info;
        }
        info.api_prefix = prefix.to_string();
        let mut rest = rest;
        if prefix == "apis" {
            let Some((&group, r)) = rest.split_first() else {
                return info;
            };
            info.api_group = group.to_string();
            rest = r;
        }
        let Some((&version, r)) = rest.split_first() else {
            return info;
        };
        info.api_version = version.to_string();
        rest = r;
        if rest.is_empty() {
            // `/api/v1` and `/apis/apps/v1` are discovery documents, not resources.
            return info;
        }
        info.is_resource_request = true;

        // Deprecated `/watch/` prefix paths turn the request into a watch.
        let mut parts: Vec<String> = rest.iter().map(|s| (*s).to_string()).collect();
        let mut watch_prefix = false;
        if parts.first().map(String::as_str) == Some("watch") {
            watch_prefix = true;
            parts.remove(0);
        }
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
        if watch_prefix {
            info.verb = "watch".to_string();
        }

        // `namespaces/<ns>/<resource>...` is namespaced unless it is the namespace object itself
        // (`namespaces/<ns>` or `namespaces/<ns>/status|finalize`).
        if parts.first().map(String::as_str) == Some("namespaces") && parts.len() > 1 {
            info.namespace = parts[1].clone();
            if parts.len() > 2 && parts[2] != "status" && parts[2] != "finalize" {
                parts.drain(..2);
                info.namespace_in_path = true;
            }
        }
        info.parts = parts.clone();
        match parts.len() {
            0 => {}
            1 => info.resource = parts[0].clone(),
            2 => {
                info.resource = parts[0].clone();
                info.name = parts[1].clone();
            }
            _ => {
                info.resource = parts[0].clone();
                info.name = parts[1].clone();
                info.subresource = parts[2].clone();
            }
        }
        // A GET on a collection is a list, or a watch with `watch=true`; a DELETE on one is
        // deletecollection.
        if info.name.is_empty() {
            if info.verb == "get" {
                info.verb = if query_flag(query, "watch") {
                    "watch"
                } else {
                    "list"
                }
                .to_string();
            } else if info.verb == "delete" {
                info.verb = "deletecollection".to_string();
            }
        } else if info.verb == "get" && query_flag(query, "watch") {
            info.verb = "watch".to_string();
        }
        // A list or watch on `?fieldSelector=metadata.name=x` is about one object for
        // authorization, as upstream reports it.
        if matches!(info.verb.as_str(), "list" | "watch")
            && let Some(fs) = query_value(query, "fieldSelector")
        {
            if info.name.is_empty()
                && let Some(name) = fs.strip_prefix("metadata.name=")
                && !name.contains(',')
            {
                info.name = name.to_string();
            }
            info.field_selector = fs;
        }
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(m: Method, path: &str, q: &str) -> RequestInfo {
        RequestInfo::parse(&m, path, q)
    }

    #[test]
    fn empty_segments_stay_where_upstream_keeps_them() {
        let i = p(Method::GET, "/api/v1/namespaces//configmaps/", "");
        assert_eq!(
            (
                i.verb.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.namespace_in_path
            ),
            ("list", "", "configmaps", true)
        );
        let i = p(Method::GET, "/api/v1/configmaps", "");
        assert!(!i.namespace_in_path);
        // Elsewhere an empty segment names nothing that exists.
        let i = p(Method::GET, "/api/v1//namespaces", "");
        assert_eq!((i.resource.as_str(), i.name.as_str()), ("", "namespaces"));
        let i = p(Method::GET, "/apis/apps//v1", "");
        assert_eq!((i.api_version.as_str(), i.resource.as_str()), ("", "v1"));
    }

    #[test]
    fn path_segments_are_percent_decoded_and_booleans_read_as_go_reads_them() {
        let i = p(Method::GET, "/api/v1/namespaces/n%73/configmaps/a%2Eb", "");
        assert_eq!((i.namespace.as_str(), i.name.as_str()), ("ns", "a.b"));
        // An encoded slash separates segments, as in Go's decoded URL path.
        let i = p(Method::GET, "/api/v1/namespaces/ns/pods/p%2Fstatus", "");
        assert_eq!((i.name.as_str(), i.subresource.as_str()), ("p", "status"));
        for (q, verb) in [
            ("watch=true", "watch"),
            ("watch=1", "watch"),
            ("watch=yes", "watch"),
            ("watch=", "watch"),
            ("watch=0", "list"),
            ("watch=FALSE", "list"),
            ("", "list"),
        ] {
            assert_eq!(p(Method::GET, "/api/v1/pods", q).verb, verb, "{q}");
        }
    }

    #[test]
    fn collection_and_item_verbs() {
        let i = p(Method::GET, "/api/v1/namespaces/ns/configmaps", "");
        assert_eq!(
            (i.verb.as_str(), i.namespace.as_str(), i.resource.as_str()),
            ("list", "ns", "configmaps")
        );
        let i = p(
            Method::GET,
            "/api/v1/namespaces/ns/configmaps",
            "watch=true",
        );
        assert_eq!(i.verb, "watch");
        let i = p(
            Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
            "",
        );
        assert_eq!(
            (i.verb.as_str(), i.api_group.as_str()),
            ("deletecollection", "apps")
        );
        let i = p(
            Method::PUT,
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            "",
        );
        assert_eq!(
            (i.verb.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("update", "d", "scale")
        );
    }

    #[test]
    fn namespace_object_and_cluster_scope() {
        let i = p(Method::GET, "/api/v1/namespaces/foo", "");
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("namespaces", "foo", "foo")
        );
        let i = p(Method::PUT, "/api/v1/namespaces/foo/finalize", "");
        assert_eq!(
            (i.resource.as_str(), i.subresource.as_str()),
            ("namespaces", "finalize")
        );
        let i = p(Method::GET, "/api/v1/nodes/n1", "");
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("nodes", "n1", "")
        );
    }

    #[test]
    fn non_resource_paths() {
        assert!(!p(Method::GET, "/healthz", "").is_resource_request);
        assert!(!p(Method::GET, "/apis/apps/v1", "").is_resource_request);
        assert_eq!(p(Method::GET, "/version", "").verb, "get");
    }

    #[test]
    fn watch_prefix_path() {
        let i = p(Method::GET, "/api/v1/watch/namespaces/ns/pods", "");
        assert_eq!((i.verb.as_str(), i.resource.as_str()), ("watch", "pods"));
    }
}
