//! Pods and pod templates: upstream's defaults for a pod spec and the basic validation of
//! containers. Workload kinds reuse `default_pod_spec` and `validate_pod_spec` for templates.

mod containers;

use super::set_default;

use apimachinery::object::ObjectExt;
use apimachinery::validation::{FieldError, FieldPath, invalid_status};
use apimachinery::{GroupResource, Status};
use std::sync::Arc;

use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{Requester, Strategy, UpdateOptions};
use async_trait::async_trait;
use serde_json::{Value, json};

pub struct PodStrategy;

/// PodTemplates: the template's pod spec gets the pod spec's defaults.
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.pointer_mut("/template/spec") {
            default_pod_spec(spec);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(
            obj.pointer("/template/spec"),
            &FieldPath::new("template").child("spec"),
        )
    }
}

/// Image pull policy default: `Always` for `:latest` or untagged images, else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        // No tag means `latest`, unless the image is pinned by digest.
        None if image.contains('@') => "IfNotPresent",
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) if image.contains('@') => "IfNotPresent",
        Some(_) => "IfNotPresent",
    }
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`.
fn default_http_get(handler: &mut Value) {
    if let Some(get) = handler.get_mut("httpGet").filter(|g| g.is_object()) {
        set_default(get, "path", json!("/"));
        set_default(get, "scheme", json!("HTTP"));
    }
}

/// `SetDefaults_Probe`, and its handler's.
fn default_probe(probe: &mut Value) {
    if !probe.is_object() {
        return;
    }
    set_default(probe, "timeoutSeconds", json!(1));
    set_default(probe, "periodSeconds", json!(10));
    set_default(probe, "successThreshold", json!(1));
    set_default(probe, "failureThreshold", json!(3));
    default_http_get(probe);
}

/// `SetDefaults_ObjectFieldSelector`: a `fieldRef` reads `v1` fields unless it says otherwise.
fn default_field_ref(holder: &mut Value) {
    if let Some(field_ref) = holder.get_mut("fieldRef").filter(|f| f.is_object()) {
        set_default(field_ref, "apiVersion", json!("v1"));
    }
}

fn each_in<'a>(value: &'a mut Value, list: &str) -> impl Iterator<Item = &'a mut Value> {
    value
        .get_mut(list)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

fn default_container(c: &mut Value) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    set_default(c, "imagePullPolicy", json!(pull_policy(&image)));
    set_default(c, "resources", json!({}));
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    for p in each_in(c, "ports") {
        set_default(p, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = c.get_mut(probe) {
            default_probe(probe);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(handler) = c.pointer_mut(&format!("/lifecycle/{hook}")) {
            default_http_get(handler);
        }
    }
    for env in each_in(c, "env") {
        if let Some(from) = env.get_mut("valueFrom") {
            default_field_ref(from);
        }
    }
}

/// The volume sources upstream defaults: file modes 0644 (420) for configMap, secret,
/// downwardAPI and projected volumes, the downward API's field references, and the unset
/// hostPath type.
fn default_volume(volume: &mut Value) {
    for source in ["configMap", "secret", "downwardAPI", "projected"] {
        if let Some(v) = volume.get_mut(source).filter(|v| v.is_object()) {
            set_default(v, "defaultMode", json!(420));
        }
    }
    if let Some(items) = volume
        .pointer_mut("/downwardAPI/items")
        .and_then(Value::as_array_mut)
    {
        items.iter_mut().for_each(default_field_ref);
    }
    for projection in volume
        .pointer_mut("/projected/sources")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for item in projection
            .pointer_mut("/downwardAPI/items")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            default_field_ref(item);
        }
        if let Some(token) = projection
            .get_mut("serviceAccountToken")
            .filter(|t| t.is_object())
        {
            set_default(token, "expirationSeconds", json!(3600));
        }
    }
    if let Some(host_path) = volume.get_mut("hostPath").filter(|h| h.is_object()) {
        set_default(host_path, "type", json!(""));
    }
}

/// With `hostNetwork`, a container port's host port is the container port
/// (`defaultHostNetworkPorts`).
fn default_host_network_ports(spec: &mut Value) {
    if spec.get("hostNetwork") != Some(&Value::Bool(true)) {
        return;
    }
    for list in ["containers", "initContainers"] {
        for c in each_in(spec, list) {
            for p in each_in(c, "ports") {
                let unset = p.get("hostPort").is_none_or(|h| h.as_i64() == Some(0));
                if let (true, Some(port)) = (unset, p.get("containerPort").cloned()) {
                    p["hostPort"] = port;
                }
            }
        }
    }
}

/// The defaults upstream's scheme gives a `PodSpec`.
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        each_in(spec, list).for_each(default_container);
    }
    each_in(spec, "volumes").for_each(default_volume);
    default_host_network_ports(spec);
}

/// Containers present, and each valid (see `containers`).
pub fn validate_pod_spec(spec: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(&path.child("containers"), ""));
    }
    if let Some(spec) = spec {
        errs.extend(containers::validate_containers(spec, path));
    }
    errs
}

/// Binds a pod to a node, as a scheduler does through `pods/binding` or `bindings`
/// (upstream: pkg/registry/core/pod/storage BindingREST): the pod must be unbound, not being
/// deleted and without scheduling gates; it gets the node, the binding's annotations and a
/// PodScheduled condition.
pub fn bind(pod: &Value, binding: &Value) -> Result<Value, Status> {
    if binding.name() != pod.name() {
        return Err(Status::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let target = FieldPath::new("target");
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut errs = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        errs.push(FieldError::not_supported(
            &target.child("kind"),
            json!(kind),
            &["Node", "<empty>"],
        ));
    }
    if node.is_empty() {
        errs.push(FieldError::required(&target.child("name"), ""));
    }
    if !errs.is_empty() {
        return Err(invalid_status("", "Binding", binding.name(), &errs));
    }
    let pods = GroupResource::new("", "pods");
    if pod.deletion_timestamp().is_some() {
        return Err(Status::internal(format!(
            "pod {} is being deleted, cannot be assigned to a host",
            pod.name()
        )));
    }
    if let Some(bound) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Err(Status::conflict(
            &pods,
            pod.name(),
            format!("pod {} is already assigned to node \"{bound}\"", pod.name()),
        ));
    }
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(Status::conflict(
            &pods,
            pod.name(),
            format!("pod {} has non-empty .spec.schedulingGates", pod.name()),
        ));
    }
    let mut out = pod.clone();
    out["spec"]["nodeName"] = json!(node);
    if let Some(annotations) = binding.annotations() {
        for (k, v) in annotations {
            if !out["metadata"]["annotations"].is_object() {
                out["metadata"]["annotations"] = json!({});
            }
            out["metadata"]["annotations"][k] = v.clone();
        }
    }
    if !out["status"].is_object() {
        out["status"] = json!({});
    }
    let conditions = out["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    out["status"]["conditions"] = json!(conditions);
    Ok(out)
}

/// `bindings`: the older way to bind a pod, a create in the pod's namespace that is never
/// stored; it updates the pod as `pods/binding` does.
pub struct BindingStrategy {
    pub api: Arc<std::sync::OnceLock<Arc<ApiResources>>>,
}

#[async_trait]
impl Strategy for BindingStrategy {
    async fn create_without_storage(
        &self,
        obj: &Value,
        user: &UserInfo,
    ) -> Option<Result<Value, Status>> {
        let pods = self
            .api
            .get()
            .and_then(|a| a.get("", "v1", "pods"))?
            .clone();
        let mut updater = |current: Option<&Value>| match current {
            Some(pod) => bind(pod, obj),
            None => Err(Status::not_found(
                &GroupResource::new("", "pods"),
                obj.name(),
            )),
        };
        let opts = UpdateOptions {
            subresource: "binding".into(),
            ..Default::default()
        };
        let bound = pods
            .update(
                &Requester { user },
                obj.namespace(),
                obj.name(),
                &mut updater,
                &opts,
            )
            .await;
        Some(bound.map(|_| apimachinery::status::created_status()))
    }
}

#[async_trait]
impl Strategy for PodStrategy {
    fn create_on_subresource(
        &self,
        subresource: &str,
        body: &Value,
        current: &Value,
    ) -> Result<Value, Status> {
        match subresource {
            "binding" => bind(current, body),
            _ => Err(Status::method_not_allowed()),
        }
    }

    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec") {
            default_pod_spec(spec);
            set_default(spec, "enableServiceLinks", json!(true));
            set_default(spec, "priority", json!(0));
            set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_pod_spec(obj.get("spec"), &FieldPath::new("spec"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}, "status": {"phase": "Pending"}})
    }

    fn binding(node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"a": "b"}}, "target": {"kind": "Node", "name": node}})
    }

    #[test]
    fn binding_assigns_the_node_once() {
        let bound = bind(&pod(), &binding("n1")).unwrap();
        assert_eq!(bound["spec"]["nodeName"], "n1");
        assert_eq!(bound["metadata"]["annotations"]["a"], "b");
        assert_eq!(bound["status"]["conditions"][0]["type"], "PodScheduled");
        let again = bind(&bound, &binding("n2")).unwrap_err();
        assert_eq!(
            (again.code, again.message.as_str()),
            (
                409,
                r#"Operation cannot be fulfilled on pods "p": pod p is already assigned to node "n1""#
            )
        );
        let no_target = bind(&pod(), &binding("")).unwrap_err();
        assert_eq!(
            (no_target.code, no_target.message.as_str()),
            (
                422,
                r#"Binding "p" is invalid: target.name: Required value"#
            )
        );
        let mut other = binding("n1");
        other["metadata"]["name"] = json!("q");
        assert_eq!(bind(&pod(), &other).unwrap_err().code, 400);
    }
}
