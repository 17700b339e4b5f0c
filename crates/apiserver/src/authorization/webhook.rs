//! The Webhook authorizer (upstream: k8s.io/apiserver/plugin/pkg/authorizer/webhook): each
//! decision is a SubjectAccessReview sent to a remote service, configured by
//! `--authorization-webhook-config-file` or by a `Webhook` entry of `--authorization-config`.
//!
//! Answers are cached by the review they answer: allowed ones for the authorized TTL, others for
//! the unauthorized TTL. `matchConditions` (CEL over `request`, the review's v1 spec) decide
//! whether the webhook is asked at all: one false condition is no opinion. A call that fails, or a
//! condition that cannot be evaluated, is the failure policy's decision (`NoOpinion`, the legacy
//! flags' behaviour, or `Deny`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Authorizer, Decision};
use crate::authentication::UserInfo;
use crate::cel::eval::{Program, Vars};
use crate::request::RequestInfo;
use crate::util::webhook::{ClientConfig, post_json};
use kube_cel::cel;

/// How many answers the cache keeps at most (upstream's LRU holds 8192).
const MAX_CACHED: usize = 8192;
const TRIES: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// What to decide when the webhook cannot be asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    NoOpinion,
    Deny,
}

/// One webhook authorizer's settings.
pub struct WebhookSettings {
    pub name: String,
    pub client: ClientConfig,
    /// `v1` or `v1beta1`: the SubjectAccessReview version sent.
    pub version: String,
    pub timeout: Duration,
    /// Zero: allowed answers are not cached.
    pub authorized_ttl: Duration,
    /// Zero: other answers are not cached.
    pub unauthorized_ttl: Duration,
    pub failure_policy: FailurePolicy,
    pub match_conditions: Vec<Program>,
}

pub struct WebhookAuthorizer {
    settings: WebhookSettings,
    cache: Mutex<HashMap<String, (Instant, Decision)>>,
}

impl WebhookAuthorizer {
    pub fn new(settings: WebhookSettings) -> Self {
        WebhookAuthorizer {
            settings,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn failure(&self, why: String) -> Decision {
        tracing::warn!(authorizer = %self.settings.name, "webhook authorizer: {why}");
        match self.settings.failure_policy {
            FailurePolicy::NoOpinion => Decision::NoOpinion(why),
            FailurePolicy::Deny => Decision::Deny(why),
        }
    }

    /// Whether every match condition holds; `Err` when one cannot be evaluated.
    fn matches(&self, spec_v1: &Value) -> Result<bool, String> {
        if self.settings.match_conditions.is_empty() {
            return Ok(true);
        }
        let vars = Vars::default().bind_json("request", Some(spec_v1));
        for program in &self.settings.match_conditions {
            match program.eval(&vars) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(_) => {
                    return Err(format!(
                        "matchCondition {:?} must return a boolean",
                        program.source
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "failed to evaluate matchCondition {:?}: {e}",
                        program.source
                    ));
                }
            }
        }
        Ok(true)
    }

    fn cached(&self, key: &str) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (expires, decision) = cache.get(key)?;
        (Instant::now() < *expires).then(|| decision.clone())
    }

    fn remember(&self, key: String, decision: &Decision) {
        let ttl = if decision.is_allowed() {
            self.settings.authorized_ttl
        } else {
            self.settings.unauthorized_ttl
        };
        if ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (t, _)| *t > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now() + ttl, decision.clone()));
    }

    async fn ask(&self, review: &Value) -> Result<Decision, String> {
        let mut pause = FIRST_BACKOFF;
        let mut tries = 0;
        let answer = loop {
            tries += 1;
            match post_json(&self.settings.client, None, review, self.settings.timeout).await {
                Ok(answer) => break answer,
                Err(e) if tries >= TRIES => return Err(e.client_text()),
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = pause.mul_f32(1.5);
                }
            }
        };
        let status = answer.get("status").unwrap_or(&Value::Null);
        let reason = status
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(e) = status.get("evaluationError").and_then(Value::as_str)
            && !e.is_empty()
        {
            tracing::info!(authorizer = %self.settings.name, "webhook evaluation error: {e}");
        }
        let flag = |f: &str| status.get(f).and_then(Value::as_bool) == Some(true);
        Ok(if flag("allowed") {
            Decision::Allow(reason)
        } else if flag("denied") {
            Decision::Deny(reason)
        } else {
            Decision::NoOpinion(reason)
        })
    }
}

/// The v1 SubjectAccessReview spec of a request (what match conditions see as `request`).
pub fn review_spec(user: &UserInfo, request: &RequestInfo) -> Value {
    let mut spec = Map::new();
    if request.is_resource_request {
        let mut attrs = Map::new();
        for (k, v) in [
            ("namespace", &request.namespace),
            ("verb", &request.verb),
            ("group", &request.api_group),
            ("version", &request.api_version),
            ("resource", &request.resource),
            ("subresource", &request.subresource),
            ("name", &request.name),
        ] {
            if !v.is_empty() {
                attrs.insert(k.into(), json!(v));
            }
        }
        spec.insert("resourceAttributes".into(), Value::Object(attrs));
    } else {
        spec.insert(
            "nonResourceAttributes".into(),
            json!({"path": request.path, "verb": request.verb}),
        );
    }
    if !user.name.is_empty() {
        spec.insert("user".into(), json!(user.name));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    Value::Object(spec)
}

#[async_trait]
impl Authorizer for WebhookAuthorizer {
    async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let spec = review_spec(user, request);
        match self.matches(&spec) {
            Ok(true) => {}
            Ok(false) => return Decision::NoOpinion(String::new()),
            Err(why) => return self.failure(why),
        }
        let mut sent = spec;
        // v1beta1 names the groups `group`.
        if self.settings.version == "v1beta1"
            && let Some(groups) = sent.as_object_mut().and_then(|m| m.remove("groups"))
        {
            sent["group"] = groups;
        }
        let key = sent.to_string();
        if let Some(decision) = self.cached(&key) {
            return decision;
        }
        let review = json!({
            "apiVersion": format!("authorization.k8s.io/{}", self.settings.version),
            "kind": "SubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": sent,
            "status": {"allowed": false},
        });
        match self.ask(&review).await {
            Ok(decision) => {
                self.remember(key, &decision);
                decision
            }
            Err(why) => self.failure(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_review_spec_names_resource_or_path() {
        let user = UserInfo {
            name: "ann".into(),
            groups: vec!["dev".into()],
            ..UserInfo::default()
        };
        let get = RequestInfo::parse(&http::Method::GET, "/api/v1/namespaces/ns/pods/p", "");
        assert_eq!(
            review_spec(&user, &get),
            json!({"resourceAttributes": {"namespace": "ns", "verb": "get", "version": "v1",
                   "resource": "pods", "name": "p"}, "user": "ann", "groups": ["dev"]})
        );
        let health = RequestInfo::parse(&http::Method::GET, "/healthz", "");
        assert_eq!(
            review_spec(&user, &health)["nonResourceAttributes"],
            json!({"path": "/healthz", "verb": "get"})
        );
    }

    #[tokio::test]
    async fn match_conditions_skip_the_webhook_and_errors_follow_the_failure_policy() {
        let settings = |policy, conditions: &[&str]| WebhookSettings {
            name: "w".into(),
            // Nothing listens there: any call fails at once.
            client: ClientConfig {
                url: Some("https://127.0.0.1:1/".into()),
                ..ClientConfig::default()
            },
            version: "v1".into(),
            timeout: Duration::from_secs(1),
            authorized_ttl: Duration::ZERO,
            unauthorized_ttl: Duration::ZERO,
            failure_policy: policy,
            match_conditions: conditions
                .iter()
                .map(|c| Program::compile(c).unwrap())
                .collect(),
        };
        let user = UserInfo {
            name: "ann".into(),
            ..UserInfo::default()
        };
        let health = RequestInfo::parse(&http::Method::GET, "/healthz", "");
        let only_resources = WebhookAuthorizer::new(settings(
            FailurePolicy::Deny,
            &["has(request.resourceAttributes)"],
        ));
        assert_eq!(
            only_resources.authorize(&user, &health).await,
            Decision::NoOpinion(String::new())
        );
        let broken = WebhookAuthorizer::new(settings(FailurePolicy::Deny, &["request.nope == 1"]));
        assert!(matches!(
            broken.authorize(&user, &health).await,
            Decision::Deny(r) if r.contains("failed to evaluate matchCondition")
        ));
        let not_bool = WebhookAuthorizer::new(settings(FailurePolicy::NoOpinion, &["'x'"]));
        assert!(matches!(
            not_bool.authorize(&user, &health).await,
            Decision::NoOpinion(r) if r.contains("must return a boolean")
        ));
    }
}
