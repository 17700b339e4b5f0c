//! `--authorization-config`: the `AuthorizationConfiguration` file (apiserver.config.k8s.io v1,
//! v1beta1, v1alpha1), an ordered list of authorizers with webhooks configured in full, read and
//! checked as upstream does (k8s.io/apiserver/pkg/apis/apiserver/validation); and the same list
//! built from the legacy `--authorization-mode` and `--authorization-webhook-*` flags.
//!
//! This module reads configuration only: which authorizer each entry becomes is decided by
//! the server's wiring, since RBAC and Node live with their kinds.

use std::collections::BTreeSet;
use std::time::Duration;

use apimachinery::validation::{FieldError, FieldPath, aggregate_message};
use serde_json::Value;

use super::webhook::{FailurePolicy, WebhookSettings};
use crate::cel::eval::Program;
use crate::util::reload::Reloading;

/// One authorizer of the chain.
pub struct AuthorizerEntry {
    /// `AlwaysAllow`, `AlwaysDeny`, `Node`, `RBAC` or `Webhook`.
    pub kind: String,
    pub name: String,
    pub webhook: Option<WebhookSettings>,
}

/// The types a configuration file may name (ABAC only through `--authorization-mode`), and the
/// one that may repeat.
const KNOWN_TYPES: &[&str] = &["AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook"];
const GROUP: &str = "apiserver.config.k8s.io";

fn go_duration(v: &Value) -> Option<Result<Duration, String>> {
    let text = v.as_str()?;
    Some(ironplane_protobuf::parse_go_duration(text).map(|n| Duration::from_nanos(n.max(0) as u64)))
}

/// Decodes and validates `--authorization-config`'s content.
pub fn parse(text: &str) -> Result<Vec<AuthorizerEntry>, String> {
    let doc: Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("error unmarshaling config: {e}"))?;
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let known = ["v1", "v1beta1", "v1alpha1"].map(|v| format!("{GROUP}/{v}"));
    if !known.iter().any(|k| k == api_version) || kind != "AuthorizationConfiguration" {
        return Err(format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme"
        ));
    }
    let mut errs = Vec::new();
    let mut out = Vec::new();
    let root = FieldPath::new("authorizers");
    let list = doc
        .get("authorizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        errs.push(FieldError::required(
            &root,
            "at least one authorization mode must be defined",
        ));
    }
    let mut types = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, a) in list.iter().enumerate() {
        let path = root.index(i);
        let text = |f: &str| a.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let kind = text("type");
        if kind.is_empty() {
            errs.push(FieldError::required(&path.child("type"), ""));
            continue;
        }
        if !KNOWN_TYPES.contains(&kind.as_str()) {
            errs.push(FieldError::not_supported(
                &path.child("type"),
                kind.as_str(),
                KNOWN_TYPES,
            ));
            continue;
        }
        if kind != "Webhook" && !types.insert(kind.clone()) {
            errs.push(FieldError::duplicate(&path.child("type"), kind.as_str()));
            continue;
        }
        let name = text("name");
        if name.is_empty() {
            errs.push(FieldError::required(&path.child("name"), ""));
        } else if !names.insert(name.clone()) {
            errs.push(FieldError::duplicate(&path.child("name"), name.as_str()));
        } else {
            let problems = apimachinery::validation::is_dns1123_subdomain(&name);
            if !problems.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child("name"),
                    name.as_str(),
                    format!("authorizer name is invalid: {}", problems.join(", ")),
                ));
            }
        }
        let webhook = a.get("webhook").filter(|w| !w.is_null());
        let settings = match (kind.as_str(), webhook) {
            ("Webhook", None) => {
                errs.push(FieldError::required(
                    &path.child("webhook"),
                    "required when type=Webhook",
                ));
                None
            }
            ("Webhook", Some(w)) => webhook_settings(&name, w, &path.child("webhook"), &mut errs),
            (_, Some(_)) => {
                errs.push(FieldError::invalid(
                    &path.child("webhook"),
                    "non-null",
                    "may only be specified when type=Webhook",
                ));
                None
            }
            (_, None) => None,
        };
        out.push(AuthorizerEntry {
            kind,
            name,
            webhook: settings,
        });
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(aggregate_message(&errs))
    }
}

fn webhook_settings(
    name: &str,
    w: &Value,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> Option<WebhookSettings> {
    let text = |f: &str| w.get(f).and_then(Value::as_str).unwrap_or("").to_string();
    let before = errs.len();
    let mut duration = |field: &str, max: Option<Duration>| -> Duration {
        let p = path.child(field);
        match w.get(field).and_then(go_duration) {
            None => {
                errs.push(FieldError::required(&p, ""));
                Duration::ZERO
            }
            Some(Err(e)) => {
                errs.push(FieldError::invalid(&p, text(field).as_str(), e));
                Duration::ZERO
            }
            Some(Ok(d)) => {
                let shown = text(field);
                if d.is_zero() || max.is_some_and(|m| d > m) {
                    errs.push(FieldError::invalid(
                        &p,
                        shown.as_str(),
                        match max {
                            Some(_) => "must be > 0s and <= 30s",
                            None => "must be > 0s",
                        },
                    ));
                }
                d
            }
        }
    };
    let timeout = duration("timeout", Some(Duration::from_secs(30)));
    let authorized_ttl = duration("authorizedTTL", None);
    let unauthorized_ttl = duration("unauthorizedTTL", None);
    let version = text("subjectAccessReviewVersion");
    if version.is_empty() {
        errs.push(FieldError::required(
            &path.child("subjectAccessReviewVersion"),
            "",
        ));
    } else if !["v1", "v1beta1"].contains(&version.as_str()) {
        errs.push(FieldError::not_supported(
            &path.child("subjectAccessReviewVersion"),
            version.as_str(),
            &["v1", "v1beta1"],
        ));
    }
    let conditions = w
        .get("matchConditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mc_version = text("matchConditionSubjectAccessReviewVersion");
    if !conditions.is_empty() && mc_version.is_empty() {
        errs.push(FieldError::required(
            &path.child("matchConditionSubjectAccessReviewVersion"),
            "required if match conditions are specified",
        ));
    } else if !mc_version.is_empty() && mc_version != "v1" {
        errs.push(FieldError::not_supported(
            &path.child("matchConditionSubjectAccessReviewVersion"),
            mc_version.as_str(),
            &["v1"],
        ));
    }
    let failure_policy = match text("failurePolicy").as_str() {
        "NoOpinion" => FailurePolicy::NoOpinion,
        "Deny" => FailurePolicy::Deny,
        "" => {
            errs.push(FieldError::required(&path.child("failurePolicy"), ""));
            FailurePolicy::NoOpinion
        }
        other => {
            errs.push(FieldError::not_supported(
                &path.child("failurePolicy"),
                other,
                &["NoOpinion", "Deny"],
            ));
            FailurePolicy::NoOpinion
        }
    };
    // Upstream v1.34+: caching can be turned off per decision.
    let cache_flag = |f: &str| w.get(f).and_then(Value::as_bool).unwrap_or(true);
    let info = w.get("connectionInfo").unwrap_or(&Value::Null);
    let info_path = path.child("connectionInfo");
    let info_type = info.get("type").and_then(Value::as_str).unwrap_or("");
    let file = info.get("kubeConfigFile").and_then(Value::as_str);
    let mut client = None;
    match info_type {
        "" => errs.push(FieldError::required(&info_path.child("type"), "")),
        "InClusterConfig" => {
            if let Some(f) = file {
                errs.push(FieldError::invalid(
                    &info_path.child("kubeConfigFile"),
                    f,
                    "can only be set when type=KubeConfigFile",
                ));
            }
            errs.push(FieldError::invalid(
                &info_path.child("type"),
                "InClusterConfig",
                "in-cluster webhook connections are not supported by Ironplane; use KubeConfigFile",
            ));
        }
        "KubeConfigFile" => match file {
            None | Some("") => {
                errs.push(FieldError::required(&info_path.child("kubeConfigFile"), ""))
            }
            Some(f) if !f.starts_with('/') => errs.push(FieldError::invalid(
                &info_path.child("kubeConfigFile"),
                f,
                "must be an absolute path",
            )),
            Some(f) => match crate::util::kubeconfig::load(f) {
                Ok(c) => client = Some(c),
                Err(e) => errs.push(FieldError::invalid(
                    &info_path.child("kubeConfigFile"),
                    f,
                    format!("error loading file: {e}"),
                )),
            },
        },
        other => errs.push(FieldError::not_supported(
            &info_path.child("type"),
            other,
            &["InClusterConfig", "KubeConfigFile"],
        )),
    }
    let mut programs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.child("matchConditions").index(i).child("expression");
        let expression = c.get("expression").and_then(Value::as_str).unwrap_or("");
        if expression.is_empty() {
            errs.push(FieldError::required(&p, ""));
        } else if !seen.insert(expression.to_string()) {
            errs.push(FieldError::duplicate(&p, expression));
        } else {
            match Program::compile(expression) {
                Ok(program) => programs.push(program),
                Err(e) => errs.push(FieldError::invalid(
                    &p,
                    expression,
                    format!("compilation failed: {e}"),
                )),
            }
        }
    }
    if errs.len() != before {
        return None;
    }
    Some(WebhookSettings {
        name: name.to_string(),
        client: client?,
        version,
        timeout,
        authorized_ttl: if cache_flag("cacheAuthorizedRequests") {
            authorized_ttl
        } else {
            Duration::ZERO
        },
        unauthorized_ttl: if cache_flag("cacheUnauthorizedRequests") {
            unauthorized_ttl
        } else {
            Duration::ZERO
        },
        failure_policy,
        match_conditions: programs,
    })
}

/// The authorizers of `--authorization-config`, read again when the file changes (upstream
/// reloads the file too): a new configuration that reads, validates and builds replaces the
/// running chain; one that does not is logged and the running chain kept.
pub struct ReloadingAuthorizer(std::sync::Arc<Reloading<dyn super::Authorizer>>);

/// Turns the file's entries into the chain they describe.
pub type BuildChain = dyn Fn(Vec<AuthorizerEntry>) -> Result<std::sync::Arc<dyn super::Authorizer>, String>
    + Send
    + Sync;

impl ReloadingAuthorizer {
    /// Reads `path`, builds its chain with `build`, and starts watching the file.
    pub fn start(path: String, build: Box<BuildChain>) -> Result<Self, String> {
        Reloading::start(
            path,
            "authorization config",
            crate::util::reload::RELOAD_INTERVAL,
            Box::new(move |text| parse(text).and_then(&build)),
        )
        .map(ReloadingAuthorizer)
    }
}

#[async_trait::async_trait]
impl super::Authorizer for ReloadingAuthorizer {
    async fn authorize(
        &self,
        user: &crate::authentication::UserInfo,
        request: &crate::request::RequestInfo,
    ) -> super::Decision {
        self.0.current().authorize(user, request).await
    }

    fn rules_for(&self, user: &crate::authentication::UserInfo, namespace: &str) -> super::Rules {
        self.0.current().rules_for(user, namespace)
    }
}

/// The legacy flags' webhook (`--authorization-webhook-config-file`, `-version`,
/// `-cache-authorized-ttl`, `-cache-unauthorized-ttl`): named `webhook`, 30 s timeout, no
/// match conditions, no opinion on failure.
pub fn legacy_webhook(
    file: &str,
    version: &str,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
) -> Result<WebhookSettings, String> {
    if !["v1", "v1beta1"].contains(&version) {
        return Err(format!(
            "unsupported authorization webhook version {version:?}, supported versions are \"v1\", \"v1beta1\""
        ));
    }
    Ok(WebhookSettings {
        name: "webhook".into(),
        client: crate::util::kubeconfig::load(file)?,
        version: version.to_string(),
        timeout: Duration::from_secs(30),
        authorized_ttl,
        unauthorized_ttl,
        failure_policy: FailurePolicy::NoOpinion,
        match_conditions: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_lists_authorizers_in_order_with_upstreams_checks() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("hook.yaml");
        std::fs::write(
            &kubeconfig,
            "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1/'}}]\n\
             contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
        )
        .unwrap();
        let good = format!(
            r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- {{type: Node, name: node}}
- type: Webhook
  name: hook
  webhook:
    timeout: 3s
    authorizedTTL: 1m
    unauthorizedTTL: 10s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo: {{type: KubeConfigFile, kubeConfigFile: {}}}
    matchConditions:
    - expression: has(request.resourceAttributes)
- {{type: RBAC, name: rbac}}
"#,
            kubeconfig.display()
        );
        let entries = parse(&good).unwrap();
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["Node", "Webhook", "RBAC"]);
        let hook = entries[1].webhook.as_ref().unwrap();
        assert_eq!(hook.timeout, Duration::from_secs(3));
        assert_eq!(hook.authorized_ttl, Duration::from_secs(60));
        assert_eq!(hook.failure_policy, FailurePolicy::Deny);
        assert_eq!(hook.match_conditions.len(), 1);

        let bad = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- {type: RBAC, name: rbac}
- {type: RBAC, name: rbac2}
- {type: ABAC, name: abac}
- type: Webhook
  name: hook
  webhook:
    timeout: 31s
    subjectAccessReviewVersion: v2
    failurePolicy: Maybe
    connectionInfo: {type: KubeConfigFile, kubeConfigFile: relative.yaml}
"#;
        let err = parse(bad).err().unwrap();
        for want in [
            "authorizers[1].type: Duplicate value: \"RBAC\"",
            "authorizers[2].type: Unsupported value: \"ABAC\"",
            "authorizers[3].webhook.timeout: Invalid value: \"31s\": must be > 0s and <= 30s",
            "authorizers[3].webhook.authorizedTTL: Required value",
            "authorizers[3].webhook.subjectAccessReviewVersion: Unsupported value: \"v2\"",
            "authorizers[3].webhook.failurePolicy: Unsupported value: \"Maybe\"",
            "must be an absolute path",
        ] {
            assert!(err.contains(want), "{want} not in {err}");
        }
        assert!(
            parse("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n")
                .err()
                .unwrap()
                .contains("at least one authorization mode must be defined")
        );
    }
}
