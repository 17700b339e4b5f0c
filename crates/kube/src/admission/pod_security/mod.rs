//! PodSecurity (upstream: plugin/pkg/admission/security/podsecurity over
//! staging/src/k8s.io/pod-security-admission): the Pod Security Standards, enforced on pods and
//! checked on the pod templates of workloads.
//!
//! This module owns the plugin: which requests it looks at, the policy a namespace's
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels give over the configured
//! defaults (`api`), the plugin's configuration (`config`: defaults and exemptions), and the
//! answers in upstream's words — the 403 of an enforced violation, the `Warning` headers of the
//! warn mode, the 422 of bad labels on a namespace and the warnings about existing pods when a
//! namespace's enforce level tightens. The checks themselves are rows in `checks`, one module
//! per family.
//!
//! Pods are enforced on create and on updates that change a container image or add an
//! ephemeral container (other updates cannot make a pod less secure); the subresources that
//! cannot change the spec (`status`, `binding`, `eviction`, `exec`, ...) are not looked at.
//! Workloads with pod templates (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs,
//! CronJobs, ReplicationControllers, PodTemplates) only warn, never fail. What the audit event
//! of the request records comes as upstream's audit annotations:
//! `pod-security.kubernetes.io/enforce-policy` (the level a pod was enforced at),
//! `audit-violations` (the audit mode's findings), `exempt` (`namespace`, `user`,
//! `runtimeClass`) and `error` (labels that do not parse).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::validation::invalid_status;
use apiserver::admission::{Attributes, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

pub mod api;
mod checks;
pub mod config;

use api::{Level, LevelVersion, Mode, Policy, no_stricter, policy_to_evaluate};
use checks::Pod;
pub use config::Config;

/// Upstream bounds the check of existing pods on a namespace update.
const NAMESPACE_MAX_PODS: usize = 3000;
const NAMESPACE_POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Upstream's `AuditAnnotationPrefix`: every annotation of the plugin is under it.
fn annotate(key: &str, value: impl Into<String>) {
    apiserver::audit::add_annotation(format!("pod-security.kubernetes.io/{key}"), value);
}

/// `field.ErrorList.ToAggregate().Error()`: one message alone, several in brackets.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        _ => format!("[{}]", errs.join(", ")),
    }
}

/// Pod subresources that cannot change what the checks look at.
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// The workloads with a pod template, and where the template is.
const TEMPLATES: &[(&str, &str, &[&str])] = &[
    ("", "replicationcontrollers", &["spec", "template"]),
    ("", "podtemplates", &["template"]),
    ("apps", "replicasets", &["spec", "template"]),
    ("apps", "deployments", &["spec", "template"]),
    ("apps", "statefulsets", &["spec", "template"]),
    ("apps", "daemonsets", &["spec", "template"]),
    ("batch", "jobs", &["spec", "template"]),
    (
        "batch",
        "cronjobs",
        &["spec", "jobTemplate", "spec", "template"],
    ),
];

pub struct PodSecurity {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
    pub config: Config,
}

#[async_trait]
impl ValidatingPlugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !matches!(attrs.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let group = attrs.resource.group.as_str();
        let resource = attrs.resource.resource.as_str();
        match (group, resource) {
            ("", "namespaces") => self.validate_namespace(attrs, obj).await,
            ("", "pods") => self.validate_pod(attrs, obj).await,
            _ => match TEMPLATES
                .iter()
                .find(|(g, r, _)| *g == group && *r == resource)
            {
                Some((_, _, path)) => self.validate_workload(attrs, obj, path).await,
                None => Ok(()),
            },
        }
    }
}

fn labels(obj: &Value) -> Option<&serde_json::Map<String, Value>> {
    obj.labels()
}

/// A pod's metadata and spec.
fn pod_of(obj: &Value) -> Pod<'_> {
    Pod {
        meta: obj.get("metadata").unwrap_or(&Value::Null),
        spec: obj.get("spec").unwrap_or(&Value::Null),
    }
}

fn runtime_class<'a>(pod: &Pod<'a>) -> Option<&'a str> {
    pod.spec.get("runtimeClassName").and_then(Value::as_str)
}

/// Upstream's `isSignificantPodUpdate`: only a changed image, a changed number of containers
/// or a new (or changed) ephemeral container can make a pod less secure.
fn significant_pod_update(new: &Value, old: &Value) -> bool {
    let containers = |pod: &Value, field: &str| -> Vec<Value> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let image = |c: &Value| {
        c.get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    for field in ["containers", "initContainers"] {
        let (n, o) = (containers(new, field), containers(old, field));
        if n.len() != o.len() || n.iter().zip(&o).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = containers(old, "ephemeralContainers");
    containers(new, "ephemeralContainers").iter().any(|c| {
        let name = c.get("name");
        match old_ephemeral.iter().find(|o| o.get("name") == name) {
            None => true,
            Some(o) => image(c) != image(o),
        }
    })
}

impl PodSecurity {
    fn policy(&self, labels: Option<&serde_json::Map<String, Value>>) -> (Policy, Vec<String>) {
        let (p, errs) = policy_to_evaluate(labels, self.config.defaults);
        (p, errs.iter().map(ToString::to_string).collect())
    }

    /// The namespace's labels, through the cache and then storage, as upstream's lister falls
    /// back to a live read.
    /// The error is the reason the namespace could not be read, for the audit annotation.
    async fn namespace_labels(
        &self,
        ns: &str,
    ) -> Result<Option<serde_json::Map<String, Value>>, String> {
        let store = self
            .api
            .get()
            .and_then(|a| a.get("", "v1", "namespaces"))
            .ok_or("namespaces are not served")?;
        let found = match store.get("", ns, ResourceVersion::Any).await {
            Ok(o) => o,
            Err(s) if s.code == 404 => store
                .get("", ns, ResourceVersion::Unset)
                .await
                .map_err(|s| s.message)?,
            Err(s) => return Err(s.message),
        };
        let v = found.value().map_err(|e| e.to_string())?;
        Ok(labels(&v).cloned())
    }

    async fn validate_pod(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if IGNORED_POD_SUBRESOURCES.contains(&attrs.subresource) {
            return Ok(());
        }
        if self.exempt(attrs) {
            return Ok(());
        }
        // A namespace that cannot be read refuses the pod (upstream's `errorResponse`: the
        // refusal's message and the reason in the audit event).
        let labels = match self.namespace_labels(attrs.namespace).await {
            Ok(labels) => labels,
            Err(e) => {
                let refusal = Status::internal(format!(
                    "failed to lookup namespace \"{}\"",
                    attrs.namespace
                ));
                annotate("error", format!("{}: {e}", refusal.message));
                return Err(refusal);
            }
        };
        let (policy, errs) = self.policy(labels.as_ref());
        if errs.is_empty() && policy.fully_privileged() {
            annotate("enforce-policy", "privileged:latest");
            return Ok(());
        }
        if attrs.operation == Operation::Update
            && let Some(old) = attrs.old_object
            && !significant_pod_update(obj, old)
        {
            return Ok(());
        }
        self.evaluate(attrs, policy, &errs, &pod_of(obj), true)
    }

    /// An exempt namespace or user, noted in the audit event.
    fn exempt(&self, attrs: &Attributes<'_>) -> bool {
        let why = if self.config.exempt_namespace(attrs.namespace) {
            "namespace"
        } else if self.config.exempt_user(&attrs.user.name) {
            "user"
        } else {
            return false;
        };
        annotate("exempt", why);
        true
    }

    async fn validate_workload(
        &self,
        attrs: &Attributes<'_>,
        obj: &Value,
        template_path: &[&str],
    ) -> Result<(), Status> {
        if !attrs.subresource.is_empty() || self.exempt(attrs) {
            return Ok(());
        }
        // A namespace that cannot be read lets the workload through, with the reason in the
        // audit event.
        let labels = match self.namespace_labels(attrs.namespace).await {
            Ok(labels) => labels,
            Err(e) => {
                annotate(
                    "error",
                    format!("failed to lookup namespace \"{}\": {e}", attrs.namespace),
                );
                return Ok(());
            }
        };
        let (policy, errs) = self.policy(labels.as_ref());
        if errs.is_empty()
            && policy.warn.level == Level::Privileged
            && policy.audit.level == Level::Privileged
        {
            return Ok(());
        }
        let mut template = obj;
        for p in template_path {
            match template.get(p) {
                Some(t) if !t.is_null() => template = t,
                // A ReplicationController without a template has nothing to check.
                _ => return Ok(()),
            }
        }
        self.evaluate(attrs, policy, &errs, &pod_of(template), false)
    }

    /// Upstream's `EvaluatePod`: enforce (pods only) refuses, audit notes its findings in the
    /// audit event, warn adds a warning when the request is not refused.
    fn evaluate(
        &self,
        attrs: &Attributes<'_>,
        policy: Policy,
        errs: &[String],
        pod: &Pod<'_>,
        enforce: bool,
    ) -> Result<(), Status> {
        if self.config.exempt_runtime_class(runtime_class(pod)) {
            annotate("exempt", "runtimeClass");
            return Ok(());
        }
        if !errs.is_empty() {
            annotate(
                "error",
                format!("Failed to parse policy: {}", aggregate(errs)),
            );
        }
        let mut results: HashMap<LevelVersion, Vec<checks::Violation>> = HashMap::new();
        let mut refusal = None;
        if enforce {
            annotate("enforce-policy", policy.enforce.to_string());
            let violations = checks::evaluate(policy.enforce, pod);
            if !violations.is_empty() {
                refusal = Some(Status::forbidden(
                    &attrs.resource.group_resource(),
                    // A generated name is the request's by now: upstream's validating
                    // admission names the object once its name is generated.
                    attrs.name,
                    format!(
                        "violates PodSecurity \"{}\": {}",
                        policy.enforce,
                        checks::details(&violations)
                    ),
                ));
            }
            results.insert(policy.enforce, violations);
        }
        let audit = match results.get(&policy.audit) {
            Some(v) => v.clone(),
            None => checks::evaluate(policy.audit, pod),
        };
        if !audit.is_empty() {
            annotate(
                "audit-violations",
                format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    checks::details(&audit)
                ),
            );
        }
        results.insert(policy.audit, audit);
        // A refused request gets no warnings.
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        let violations = results
            .remove(&policy.warn)
            .unwrap_or_else(|| checks::evaluate(policy.warn, pod));
        if !violations.is_empty() {
            apiserver::warning::add(format!(
                "would violate PodSecurity \"{}\": {}",
                policy.warn,
                checks::details(&violations)
            ));
        }
        Ok(())
    }

    async fn validate_namespace(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        if !attrs.subresource.is_empty() {
            return Ok(());
        }
        // Upstream's request attributes name a namespace as its own namespace.
        let name = obj.name();
        let new_labels = labels(obj);
        let (new_policy, new_errs) = policy_to_evaluate(new_labels, self.config.defaults);
        let invalid = || invalid_status("", "Namespace", name, &new_errs);
        let exempt_warning = || {
            if self.config.exempt_namespace(name)
                && let Some(w) = self.exempt_namespace_warning(name, &new_policy, new_labels)
            {
                apiserver::warning::add(w);
            }
        };
        match attrs.operation {
            Operation::Create => {
                if !new_errs.is_empty() {
                    return Err(invalid());
                }
                exempt_warning();
                Ok(())
            }
            Operation::Update => {
                let old_labels = attrs.old_object.and_then(labels);
                let (old_policy, old_errs) = self.policy(old_labels);
                let new_texts: Vec<String> = new_errs.iter().map(ToString::to_string).collect();
                if !new_errs.is_empty() && (old_errs.is_empty() || old_errs != new_texts) {
                    return Err(invalid());
                }
                let (new, old) = (new_policy.enforce, old_policy.enforce);
                if new == old
                    || new.level == Level::Privileged
                    || (new.version == old.version && no_stricter(new.level, old.level))
                {
                    return Ok(());
                }
                if self.config.exempt_namespace(name) {
                    exempt_warning();
                    return Ok(());
                }
                let warnings = self.check_existing_pods(name, new).await;
                apiserver::warning::add_all(warnings);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Upstream's `exemptNamespaceWarning`: the modes the labels set to something else than
    /// privileged, which an exempt namespace ignores.
    fn exempt_namespace_warning(
        &self,
        name: &str,
        policy: &Policy,
        labels: Option<&serde_json::Map<String, Value>>,
    ) -> Option<String> {
        if policy.fully_privileged() || policy.equivalent(&self.config.defaults) {
            return None;
        }
        let has = |key: String| labels.is_some_and(|l| l.contains_key(&key));
        let mut policy = *policy;
        let parts: Vec<String> = Mode::ALL
            .into_iter()
            .filter_map(|mode| {
                let lv = *mode.of(&mut policy);
                let set = has(mode.level_label()) || has(mode.version_label());
                (lv.level != Level::Privileged && set).then(|| format!("{}={lv}", mode.name()))
            })
            .collect();
        Some(format!(
            "namespace \"{name}\" is exempt from Pod Security, and the policy ({}) will be ignored",
            parts.join(", ")
        ))
    }

    /// Upstream's `EvaluatePodsInNamespace`: the existing pods checked against a tighter
    /// enforce level, one warning per distinct set of reasons naming the first pod by name and
    /// how many others share it. One pod per controller goes first; at most 3000 pods and one
    /// second are spent.
    async fn check_existing_pods(&self, namespace: &str, enforce: LevelVersion) -> Vec<String> {
        let started = Instant::now();
        let failed =
            || vec!["failed to list pods while checking new PodSecurity enforce level".to_string()];
        let Some(store) = self.api.get().and_then(|a| a.get("", "v1", "pods")) else {
            return failed();
        };
        let opts = ListOptions {
            resource_version: ResourceVersion::Any,
            ..Default::default()
        };
        let Ok(list) = store.list(namespace, &opts).await else {
            return failed();
        };
        let pods: Vec<Value> = list.items.iter().filter_map(|o| o.value().ok()).collect();
        let pods = self.prioritize(pods);
        let total = pods.len();
        let mut checked = total.min(NAMESPACE_MAX_PODS);
        // Distinct reasons in the order first seen, with the first pod name and the count.
        let mut seen: Vec<(String, String, usize)> = Vec::new();
        for (i, pod) in pods.iter().take(NAMESPACE_MAX_PODS).enumerate() {
            let violations = checks::evaluate(enforce, &pod_of(pod));
            if !violations.is_empty() {
                let reason = checks::reasons(&violations);
                let name = pod.name().to_string();
                match seen.iter_mut().find(|(r, _, _)| *r == reason) {
                    Some((_, first, count)) => {
                        if name < *first {
                            *first = name;
                        }
                        *count += 1;
                    }
                    None => seen.push((reason, name, 1)),
                }
            }
            if started.elapsed() > NAMESPACE_POD_CHECK_TIMEOUT {
                checked = i + 1;
                break;
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
            ));
        }
        if !seen.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut per_reason: Vec<String> = seen
            .into_iter()
            .map(|(reason, first, count)| match count {
                1 => format!("{first}: {reason}"),
                2 => format!("{first} (and 1 other pod): {reason}"),
                n => format!("{first} (and {} other pods): {reason}", n - 1),
            })
            .collect();
        per_reason.sort();
        warnings.extend(per_reason);
        warnings
    }

    /// Upstream's `prioritizePods`: pods of exempt runtime classes dropped, one pod per
    /// controller first, the controllers' other pods after.
    fn prioritize(&self, pods: Vec<Value>) -> Vec<Value> {
        let mut first = Vec::new();
        let mut later = Vec::new();
        let mut controllers = std::collections::HashSet::new();
        for pod in pods {
            if self
                .config
                .exempt_runtime_class(runtime_class(&pod_of(&pod)))
            {
                continue;
            }
            let controller = pod
                .controller_ref()
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                .map(String::from);
            let repeated = controller.is_some_and(|uid| !controllers.insert(uid));
            if repeated {
                later.push(pod);
            } else {
                first.push(pod);
            }
        }
        first.extend(later);
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiserver::authentication::UserInfo;
    use apiserver::registry::ResourceInfo;
    use serde_json::json;

    /// A namespace that cannot be read (here: no catalog to read it from): a pod is refused
    /// with a 500 and a workload admitted, each with upstream's `error` audit annotation.
    #[tokio::test]
    async fn a_namespace_that_cannot_be_read_is_noted_in_the_audit_event() {
        let plugin = PodSecurity {
            api: Arc::new(OnceLock::new()),
            config: Config::default(),
        };
        let user = UserInfo {
            name: "alice".into(),
            ..Default::default()
        };
        let run = |group: &'static str, resource: &'static str, obj: Value| {
            let plugin = &plugin;
            let user = &user;
            async move {
                let info = ResourceInfo {
                    group: group.into(),
                    resource: resource.into(),
                    ..Default::default()
                };
                let attrs = Attributes {
                    operation: Operation::Create,
                    resource: &info,
                    subresource: "",
                    namespace: "team",
                    name: "x",
                    user,
                    dry_run: false,
                    old_object: None,
                    state: Default::default(),
                };
                apiserver::audit::collect_annotations(plugin.validate(&attrs, &obj)).await
            }
        };
        let pod = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let (answer, notes) = run("", "pods", pod.clone()).await;
        let refusal = answer.unwrap_err();
        assert_eq!(refusal.code, 500);
        assert_eq!(
            refusal.message,
            r#"Internal error occurred: failed to lookup namespace "team""#
        );
        assert_eq!(
            notes
                .get("pod-security.kubernetes.io/error")
                .map(String::as_str),
            Some(
                r#"Internal error occurred: failed to lookup namespace "team": namespaces are not served"#
            )
        );
        let deployment = json!({"metadata": {"name": "x"}, "spec": {"template": pod}});
        let (answer, notes) = run("apps", "deployments", deployment).await;
        assert!(answer.is_ok());
        assert_eq!(
            notes
                .get("pod-security.kubernetes.io/error")
                .map(String::as_str),
            Some(r#"failed to lookup namespace "team": namespaces are not served"#)
        );
    }
}
