//! Auditing (upstream: k8s.io/apiserver/pkg/audit and endpoints/filters/audit.go): a policy
//! decides, per request, the level to record — None, Metadata, Request (plus the request
//! object) or RequestResponse (plus the response object) — and `audit.k8s.io/v1` Events are
//! written as JSON lines at each stage the policy does not omit: RequestReceived,
//! ResponseStarted (long-running requests), ResponseComplete, Panic.

use std::io::Write;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::authentication::UserInfo;
use crate::request::RequestInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

/// Unknown fields are refused, so that a misspelt condition cannot silently widen a rule.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    /// Accepted; managed fields are not written yet, so there is nothing to omit.
    #[serde(default)]
    #[allow(dead_code)]
    omit_managed_fields: Option<bool>,
}

/// An `audit.k8s.io/v1` Policy.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Value>,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    #[allow(dead_code)]
    omit_managed_fields: Option<bool>,
}

/// What the policy decided for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
}

impl Decision {
    pub fn records(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }
}

/// `resources: ["pods/log"]` matches that subresource; `"*"` or `"pods/*"` match more.
fn resource_matches(pattern: &str, resource: &str, subresource: &str) -> bool {
    let full = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    pattern == "*"
        || pattern == full
        || (pattern.strip_suffix("/*").is_some_and(|r| r == resource) && !subresource.is_empty())
        || (pattern.strip_prefix("*/").is_some_and(|s| s == subresource))
}

fn url_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

impl Rule {
    fn matches(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        if !self.users.is_empty() && !self.users.contains(&user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| self.user_groups.contains(g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&info.verb) {
            return false;
        }
        if info.is_resource_request {
            if !self.non_resource_urls.is_empty() {
                return false;
            }
            if !self.namespaces.is_empty() && !self.namespaces.contains(&info.namespace) {
                return false;
            }
            if !self.resources.is_empty() {
                return self.resources.iter().any(|gr| {
                    gr.group == info.api_group
                        && (gr.resources.is_empty()
                            || gr
                                .resources
                                .iter()
                                .any(|p| resource_matches(p, &info.resource, &info.subresource)))
                        && (gr.resource_names.is_empty() || gr.resource_names.contains(&info.name))
                });
            }
            true
        } else {
            if !self.resources.is_empty() || !self.namespaces.is_empty() {
                return false;
            }
            self.non_resource_urls.is_empty()
                || self
                    .non_resource_urls
                    .iter()
                    .any(|p| url_matches(p, &info.path))
        }
    }
}

impl Policy {
    pub fn parse(yaml: &str) -> Result<Policy, String> {
        let v: Value = serde_yaml_ng::from_str(yaml).map_err(|e| format!("audit policy: {e}"))?;
        match (
            v.get("apiVersion").and_then(Value::as_str),
            v.get("kind").and_then(Value::as_str),
        ) {
            (Some("audit.k8s.io/v1"), Some("Policy")) => {}
            other => {
                return Err(format!(
                    "audit policy: expected apiVersion audit.k8s.io/v1, kind Policy, got {other:?}"
                ));
            }
        }
        serde_json::from_value(v).map_err(|e| format!("audit policy: {e}"))
    }

    /// The first rule that matches decides; none matching is level None.
    pub fn decide(&self, user: &UserInfo, info: &RequestInfo) -> Decision {
        match self.rules.iter().find(|r| r.matches(user, info)) {
            Some(r) => {
                let mut omit = self.omit_stages.clone();
                omit.extend(r.omit_stages.iter().copied());
                Decision {
                    level: r.level,
                    omit_stages: omit,
                }
            }
            None => Decision {
                level: Level::None,
                omit_stages: Vec::new(),
            },
        }
    }
}

/// Where events go: a file opened for appending, or standard output for `-`.
pub struct Sink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Sink {
    pub fn open(path: &str) -> Result<Sink, String> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("opening audit log {path}: {e}"))?,
            )
        };
        Ok(Sink {
            out: Mutex::new(out),
        })
    }

    pub fn write(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        EVENTS.inc();
        if let Ok(mut out) = self.out.lock() {
            // An audit log that cannot be written is logged, not fatal, as upstream's
            // blocking backend only logs too.
            if let Err(e) = out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
                ERRORS.with_label_values(&["log"]).inc();
                tracing::error!(error = %e, "cannot write audit event");
            }
        }
    }
}

// Upstream's audit metrics (k8s.io/apiserver/pkg/audit/metrics.go): events sent to the backend,
// events a backend failed to record (by plugin: the log backend is `log`), and the policy level
// of every request while auditing is on.
static EVENTS: std::sync::LazyLock<prometheus::IntCounter> = std::sync::LazyLock::new(|| {
    crate::metrics::counter(
        "apiserver_audit_event_total",
        crate::metrics::Stability::Alpha,
        "Counter of audit events generated and sent to the audit backend.",
    )
});
static ERRORS: std::sync::LazyLock<prometheus::IntCounterVec> = std::sync::LazyLock::new(|| {
    crate::metrics::counter_vec(
        "apiserver_audit_error_total",
        crate::metrics::Stability::Alpha,
        "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
        &["plugin"],
    )
});
static LEVELS: std::sync::LazyLock<prometheus::IntCounterVec> = std::sync::LazyLock::new(|| {
    crate::metrics::counter_vec(
        "apiserver_audit_level_total",
        crate::metrics::Stability::Alpha,
        "Counter of policy levels for audit events (1 per request).",
        &["level"],
    )
});

/// Counts a request's audit level (upstream's `ObservePolicyLevel`).
pub fn observe_policy_level(level: Level) {
    let label = match level {
        Level::None => "None",
        Level::Metadata => "Metadata",
        Level::Request => "Request",
        Level::RequestResponse => "RequestResponse",
    };
    LEVELS.with_label_values(&[label]).inc();
}

/// The policy and its sink.
pub struct Auditor {
    pub policy: Policy,
    pub sink: Sink,
}

/// The annotations gathered for one event, and the event's level when it is known (annotations
/// that ask for a higher level are left out, as upstream's `AddAnnotationWithLevel` leaves them).
#[derive(Default)]
struct Collected {
    level: Option<Level>,
    annotations: std::collections::BTreeMap<String, String>,
    request_object: ObjectMeta,
}

/// What upstream's `LogRequestObject` takes from the decoded request object into the event's
/// `objectRef` where the URL said nothing (a create's name, an update's resourceVersion).
#[derive(Default, Clone, Debug, PartialEq)]
pub struct ObjectMeta {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

/// What the layers of a request's chain left for its audit event.
#[derive(Default)]
pub struct Notes {
    pub annotations: std::collections::BTreeMap<String, String>,
    pub request_object: ObjectMeta,
}

tokio::task_local! {
    static ANNOTATIONS: std::cell::RefCell<Collected>;
}

/// Adds an annotation to the audit event of the request being served (upstream
/// `audit.AddAuditAnnotation`), from any layer: authorization, admission. A key already set
/// keeps its first value, as upstream's; outside an audited request nothing is recorded.
pub fn add_annotation(key: impl Into<String>, value: impl Into<String>) {
    add_annotation_with_level(key, value, Level::Metadata);
}

/// Adds an annotation that only an event of at least `level` records (upstream's
/// `AddAnnotationWithLevel`: a mutating webhook's patch is recorded at `Request`, since it may
/// hold the object's data).
pub fn add_annotation_with_level(key: impl Into<String>, value: impl Into<String>, level: Level) {
    let _ = ANNOTATIONS.try_with(|a| {
        let mut a = a.borrow_mut();
        if a.level.is_some_and(|l| l < level) {
            return;
        }
        a.annotations
            .entry(key.into())
            .or_insert_with(|| value.into());
    });
}

/// Records the metadata of a create's or update's decoded object for the request's event
/// (upstream's `LogRequestObject`, which every event of level Metadata and above gets): each
/// of namespace, name, uid and resourceVersion is kept from the first object that has it.
pub fn log_request_object(obj: &Value) {
    use apimachinery::object::ObjectExt;
    let _ = ANNOTATIONS.try_with(|a| {
        let mut a = a.borrow_mut();
        let Some(level) = a.level else { return };
        if level < Level::Metadata {
            return;
        }
        let m = &mut a.request_object;
        for (to, from) in [
            (&mut m.namespace, obj.namespace()),
            (&mut m.name, obj.name()),
            (&mut m.uid, obj.uid()),
            (&mut m.resource_version, obj.resource_version()),
        ] {
            if to.is_empty() {
                *to = from.to_string();
            }
        }
    });
}

/// Runs `fut` collecting the audit annotations added while it runs, whatever their level.
pub async fn collect_annotations<F: std::future::Future>(
    fut: F,
) -> (F::Output, std::collections::BTreeMap<String, String>) {
    let (out, notes) = collect(None, fut).await;
    (out, notes.annotations)
}

/// Runs `fut` collecting what an event of `level` records: annotations and the request
/// object's metadata.
pub async fn collect_notes_at<F: std::future::Future>(level: Level, fut: F) -> (F::Output, Notes) {
    collect(Some(level), fut).await
}

async fn collect<F: std::future::Future>(level: Option<Level>, fut: F) -> (F::Output, Notes) {
    let scope = Collected {
        level,
        ..Default::default()
    };
    ANNOTATIONS
        .scope(std::cell::RefCell::new(scope), async {
            let out = fut.await;
            let notes = ANNOTATIONS.with(|a| {
                let mut a = a.borrow_mut();
                Notes {
                    annotations: std::mem::take(&mut a.annotations),
                    request_object: std::mem::take(&mut a.request_object),
                }
            });
            (out, notes)
        })
        .await
}

/// The facts an event records, gathered along the request.
pub struct Record {
    pub audit_id: String,
    pub level: Level,
    pub info: std::sync::Arc<RequestInfo>,
    pub request_uri: String,
    pub user: UserInfo,
    pub impersonated: Option<UserInfo>,
    pub source_ips: Vec<String>,
    pub user_agent: Option<String>,
    pub received: String,
    pub request_object: Option<Value>,
    /// The request object's metadata, for `objectRef` (`log_request_object`).
    pub request_object_meta: ObjectMeta,
    /// What the layers of the chain added (`add_annotation`).
    pub annotations: std::collections::BTreeMap<String, String>,
}

fn user_json(u: &UserInfo) -> Value {
    let mut v = json!({"username": u.name, "groups": u.groups});
    if !u.uid.is_empty() {
        v["uid"] = json!(u.uid);
    }
    if !u.extra.is_empty() {
        v["extra"] = json!(u.extra);
    }
    v
}

pub fn micro_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

impl Record {
    /// The Event of `stage`; `status` is the response's code and, for failures, its Status.
    pub fn event(
        &self,
        stage: Stage,
        status: Option<(u16, Option<&Value>)>,
        response_object: Option<&Value>,
    ) -> Value {
        let level = match self.level {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        };
        let mut e = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": level,
            "auditID": self.audit_id,
            "stage": stage.as_str(),
            "requestURI": self.request_uri,
            "verb": self.info.verb,
            "user": user_json(&self.user),
            "sourceIPs": self.source_ips,
            "requestReceivedTimestamp": self.received,
            "stageTimestamp": micro_time(),
        });
        if let Some(ua) = &self.user_agent {
            e["userAgent"] = json!(ua);
        }
        if let Some(u) = &self.impersonated {
            e["impersonatedUser"] = user_json(u);
        }
        if !self.annotations.is_empty() {
            e["annotations"] = json!(self.annotations);
        }
        if self.info.is_resource_request {
            let mut r =
                json!({"resource": self.info.resource, "apiVersion": self.info.api_version});
            // The URL's namespace and name first, the request object's where it has none.
            let meta = &self.request_object_meta;
            let or = |url: &str, object: &str| {
                if url.is_empty() {
                    object.to_string()
                } else {
                    url.to_string()
                }
            };
            for (k, v) in [
                ("namespace", or(&self.info.namespace, &meta.namespace)),
                ("name", or(&self.info.name, &meta.name)),
                ("uid", meta.uid.clone()),
                ("resourceVersion", meta.resource_version.clone()),
                ("apiGroup", self.info.api_group.clone()),
                ("subresource", self.info.subresource.clone()),
            ] {
                if !v.is_empty() {
                    r[k] = json!(v);
                }
            }
            e["objectRef"] = r;
        }
        if let Some((code, failure)) = status {
            let mut s = json!({"metadata": {}, "code": code});
            if let Some(f) = failure {
                for k in ["status", "message", "reason"] {
                    if let Some(v) = f.get(k) {
                        s[k] = v.clone();
                    }
                }
            }
            e["responseStatus"] = s;
        }
        if self.level >= Level::Request
            && let Some(o) = &self.request_object
        {
            e["requestObject"] = o.clone();
        }
        if self.level >= Level::RequestResponse
            && let Some(o) = response_object
        {
            e["responseObject"] = o.clone();
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "pods/log"]
- level: Request
  users: ["jane"]
"#;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let p = Policy::parse(POLICY).unwrap();
        let info = |m: Method, path: &str| RequestInfo::parse(&m, path, "");
        let admin = user("admin");
        assert_eq!(
            p.decide(&admin, &info(Method::GET, "/healthz")).level,
            Level::None
        );
        assert_eq!(
            p.decide(
                &admin,
                &info(Method::POST, "/api/v1/namespaces/a/configmaps")
            )
            .level,
            Level::RequestResponse
        );
        assert_eq!(
            p.decide(&admin, &info(Method::GET, "/api/v1/namespaces/a/secrets/s"))
                .level,
            Level::Metadata
        );
        assert_eq!(
            p.decide(
                &admin,
                &info(Method::GET, "/api/v1/namespaces/a/pods/p/log")
            )
            .level,
            Level::Metadata
        );
        assert_eq!(
            p.decide(&admin, &info(Method::GET, "/api/v1/namespaces/a/pods/p"))
                .level,
            Level::None
        );
        assert_eq!(
            p.decide(
                &user("jane"),
                &info(Method::GET, "/api/v1/namespaces/a/pods/p")
            )
            .level,
            Level::Request
        );
        let d = p.decide(
            &admin,
            &info(Method::POST, "/api/v1/namespaces/a/configmaps"),
        );
        assert!(!d.records(Stage::RequestReceived) && d.records(Stage::ResponseComplete));
    }

    #[test]
    fn rejects_other_documents() {
        assert!(Policy::parse("apiVersion: v1\nkind: ConfigMap\n").is_err());
        assert!(
            Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
                .is_err()
        );
    }
}
