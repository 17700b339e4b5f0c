//! The authentication and authorization filters' Prometheus metrics (upstream:
//! k8s.io/apiserver/pkg/endpoints/filters/metrics.go), with upstream's names — which have no
//! `apiserver_` prefix — labels and buckets: `authentication_attempts` and
//! `authentication_duration_seconds` by result (`success`, `failure`, `error`),
//! `authenticated_user_requests` by a coarse username category (never the name itself), and
//! `authorization_attempts_total` and `authorization_duration_seconds` by result (`allowed`,
//! `denied`, `no-opinion`). All ALPHA upstream.

use std::sync::LazyLock;
use std::time::Instant;

use prometheus::{HistogramVec, IntCounterVec};

use crate::metrics::{Stability, counter_vec, exponential_buckets, histogram_vec};

fn counter(name: &str, level: Stability, help: &str, label: &str) -> IntCounterVec {
    counter_vec(name, level, help, &[label])
}

fn histogram(name: &str, level: Stability, help: &str) -> HistogramVec {
    histogram_vec(
        name,
        level,
        help,
        &["result"],
        exponential_buckets(0.001, 2.0, 15),
    )
}

static USER_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "authenticated_user_requests",
        Stability::Alpha,
        "Counter of authenticated requests broken out by username.",
        "username",
    )
});
static AUTHN_ATTEMPTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "authentication_attempts",
        Stability::Alpha,
        "Counter of authenticated attempts.",
        "result",
    )
});
static AUTHN_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "authentication_duration_seconds",
        Stability::Alpha,
        "Authentication duration in seconds broken out by result.",
    )
});
static AUTHZ_ATTEMPTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    counter(
        "authorization_attempts_total",
        Stability::Alpha,
        "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
        "result",
    )
});
static AUTHZ_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    histogram(
        "authorization_duration_seconds",
        Stability::Alpha,
        "Authorization duration in seconds broken out by result.",
    )
});

/// What authentication concluded, as the metrics label it.
pub enum AuthnResult<'a> {
    Success { user: &'a str },
    Failure,
    Error,
}

/// One authentication, started at `start`.
pub fn record_authentication(result: AuthnResult<'_>, start: Instant) {
    let label = match result {
        AuthnResult::Success { user } => {
            USER_REQUESTS
                .with_label_values(&[compress_username(user)])
                .inc();
            "success"
        }
        AuthnResult::Failure => "failure",
        AuthnResult::Error => "error",
    };
    AUTHN_ATTEMPTS.with_label_values(&[label]).inc();
    AUTHN_DURATION
        .with_label_values(&[label])
        .observe(start.elapsed().as_secs_f64());
}

/// One authorization decision (`allowed`, `denied` or `no-opinion`), started at `start`.
pub fn record_authorization(result: &'static str, start: Instant) {
    AUTHZ_ATTEMPTS.with_label_values(&[result]).inc();
    AUTHZ_DURATION
        .with_label_values(&[result])
        .observe(start.elapsed().as_secs_f64());
}

/// Upstream's `compressUsername`: a few known identities by name, e-mail addresses as one
/// category, everyone else as `other` — bounded cardinality, and no names in the metrics.
fn compress_username(name: &str) -> &str {
    match name {
        "admin"
        | "client"
        | "kube_proxy"
        | "kubelet"
        | "system:serviceaccount:kube-system:default" => name,
        n if n.contains('@') => "email_id",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_usernames_are_labelled_as_upstream() {
        let start = Instant::now();
        record_authentication(
            AuthnResult::Success {
                user: "jane@example.com",
            },
            start,
        );
        record_authentication(AuthnResult::Success { user: "kubelet" }, start);
        record_authentication(AuthnResult::Error, start);
        record_authorization("no-opinion", start);
        assert!(USER_REQUESTS.with_label_values(&["email_id"]).get() >= 1);
        assert!(USER_REQUESTS.with_label_values(&["kubelet"]).get() >= 1);
        assert!(AUTHN_ATTEMPTS.with_label_values(&["error"]).get() >= 1);
        assert!(AUTHZ_ATTEMPTS.with_label_values(&["no-opinion"]).get() >= 1);
        assert_eq!(compress_username("system:serviceaccount:ns:sa"), "other");
    }
}
