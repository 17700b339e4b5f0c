//! Fuzz target: the request path parser (`apiserver::request::RequestInfo::parse`). Inputs: any
//! method (the standard ones and extensions), arbitrary paths and paths built from the API's
//! own segments (`api`, `apis`, groups, versions, `namespaces`, `watch`, `status`, empty and
//! dot segments, percent escapes, Unicode), and arbitrary queries. Properties: never panics; the
//! facts agree with each other (a resource request has an API prefix and a version; its name,
//! namespace and resource are path segments; the verb is one of Kubernetes' verbs).

mod common;

use apiserver::request::RequestInfo;
use common::*;
use http::Method;
use proptest::prelude::*;

const TARGET: &str = "request_path";

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        6 => prop::sample::select(&["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"][..])
            .prop_map(|m| Method::from_bytes(m.as_bytes()).expect("standard")),
        1 => "[A-Z]{1,12}".prop_map(|m| Method::from_bytes(m.as_bytes()).expect("a token")),
    ]
}

fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        6 => prop::sample::select(&[
            "api", "apis", "v1", "apps", "namespaces", "default", "pods", "configmaps", "watch",
            "status", "finalize", "scale", "proxy", "", ".", "..", "%2F", "a%00", "é",
        ][..]).prop_map(str::to_string),
        1 => text(),
    ];
    prop_oneof![
        6 => (prop::collection::vec(segment, 0..9), any::<bool>())
            .prop_map(|(s, trailing)| format!("/{}{}", s.join("/"), if trailing { "/" } else { "" })),
        1 => any::<String>(),
    ]
}

fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        prop::sample::select(
            &[
                "watch=true",
                "watch=1",
                "watch=false",
                "fieldSelector=metadata.name%3Dx",
                "fieldSelector=metadata.name=a,b",
                "watch=true&fieldSelector=metadata.name%3D",
                "%zz=%",
            ][..]
        )
        .prop_map(str::to_string),
        any::<String>(),
    ]
}

const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "",
];

proptest! {
    #![proptest_config(config(TARGET, 300_000))]

    #[test]
    fn parse_never_panics_and_is_consistent(method in method(), path in path(), query in query()) {
        let info = RequestInfo::parse(&method, &path, &query);
        if info.is_resource_request {
            prop_assert!(info.api_prefix == "api" || info.api_prefix == "apis");
            prop_assert!(VERBS.contains(&info.verb.as_str()), "verb {:?}", info.verb);
            // `info.path` is the path as handlers see it (percent-decoded, as Go's server does).
            let segments: Vec<&str> = info.path.split('/').collect();
            // The version is a segment of the path: empty only where the path has an empty
            // segment (`/api//v1`), which upstream's split keeps too.
            let inner: Vec<&str> = info.path.trim_matches('/').split('/').collect();
            prop_assert!(inner.contains(&info.api_version.as_str()), "version {:?} of {:?}", info.api_version, info.path);
            for part in [&info.namespace, &info.resource, &info.subresource] {
                prop_assert!(part.is_empty() || segments.contains(&part.as_str()), "{:?} is not a segment of {:?}", part, info.path);
            }
        } else {
            prop_assert_eq!(info.verb, method.as_str().to_ascii_lowercase());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------
