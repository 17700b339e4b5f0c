//! Upstream's defaults for pods and pod specs (pkg/apis/core/v1/defaults.go and the declarative
//! defaults of k8s.io/api/core/v1): `SetDefaults_PodSpec` and everything inside a pod spec for
//! every pod spec, `SetDefaults_Pod` for pods only. Also the v1 conversion's handling of the
//! deprecated `serviceAccount` field, which follows `serviceAccountName`, and of the status's
//! single `podIP`, which the internal type keeps only as the first of `podIPs`.

use serde_json::{Value, json};

use super::super::{object_at, set_default};
use super::util::{map, text};

/// Image pull policy default (`parsers.ParseImageName`'s tag): `Always` for `:latest` or an
/// untagged image without digest, else `IfNotPresent`.
pub(super) fn pull_policy(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        None if image.contains('@') => "IfNotPresent",
        None => "Always",
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn each_in<'a>(value: &'a mut Value, list: &str) -> impl Iterator<Item = &'a mut Value> {
    value
        .get_mut(list)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`; a gRPC action's service is `""`.
fn default_handler(handler: &mut Value) {
    if let Some(get) = handler.get_mut("httpGet").filter(|g| g.is_object()) {
        set_default(get, "path", json!("/"));
        set_default(get, "scheme", json!("HTTP"));
    }
    if let Some(grpc) = handler.get_mut("grpc").filter(|g| g.is_object())
        && grpc.get("service").is_none_or(Value::is_null)
    {
        grpc["service"] = json!("");
    }
}

/// `SetDefaults_Probe`, and its handler's.
fn default_probe(probe: &mut Value) {
    if !probe.is_object() {
        return;
    }
    for (field, value) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        if probe.get(field).and_then(Value::as_i64).unwrap_or(0) == 0 {
            probe[field] = json!(value);
        }
    }
    default_handler(probe);
}

/// `SetDefaults_ObjectFieldSelector`: a `fieldRef` reads `v1` fields unless it says otherwise.
fn default_field_ref(holder: &mut Value) {
    if let Some(field_ref) = holder.get_mut("fieldRef").filter(|f| f.is_object()) {
        set_default(field_ref, "apiVersion", json!("v1"));
    }
}

/// `SetDefaults_Container` and the defaults of what a container holds.
fn default_container(c: &mut Value) {
    if !c.is_object() {
        return;
    }
    let image = text(c, "image").to_string();
    set_default(c, "imagePullPolicy", json!(pull_policy(&image)));
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
            default_handler(handler);
        }
    }
    for env in each_in(c, "env") {
        if let Some(from) = env.get_mut("valueFrom") {
            default_field_ref(from);
        }
    }
}

/// The JSON names of the volume sources (a volume with none of them is an empty dir).
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// `SetDefaults_Volume` and the defaults of the sources: file modes 0644 (420) for configMap,
/// secret, downwardAPI and projected volumes, downward API field references, token
/// expiration, the unset hostPath type, image volume pull policy, claim template volume mode.
fn default_volume(volume: &mut Value) {
    if !volume.is_object() {
        return;
    }
    if !VOLUME_SOURCES
        .iter()
        .any(|s| volume.get(*s).is_some_and(|v| !v.is_null()))
    {
        volume["emptyDir"] = json!({});
    }
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
    for projection in each_in_pointer(volume, "/projected/sources") {
        for item in each_in_pointer(projection, "/downwardAPI/items") {
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
    if let Some(image) = volume.get_mut("image").filter(|h| h.is_object()) {
        let reference = text(image, "reference").to_string();
        set_default(image, "pullPolicy", json!(pull_policy(&reference)));
    }
    if let Some(spec) = volume
        .pointer_mut("/ephemeral/volumeClaimTemplate/spec")
        .filter(|s| s.is_object())
    {
        set_default(spec, "volumeMode", json!("Filesystem"));
    }
}

fn each_in_pointer<'a>(value: &'a mut Value, pointer: &str) -> impl Iterator<Item = &'a mut Value> {
    value
        .pointer_mut(pointer)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// The defaults upstream's scheme gives every `PodSpec` (pods and templates).
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    if !spec.get("securityContext").is_some_and(Value::is_object) {
        spec["securityContext"] = json!({});
    }
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        each_in(spec, list).for_each(default_container);
    }
    each_in(spec, "volumes").for_each(default_volume);
    sync_service_account(spec);
}

/// The v1 conversion: an empty `serviceAccountName` is read from the deprecated
/// `serviceAccount`, which is then written back as a copy of `serviceAccountName`.
fn sync_service_account(spec: &mut Value) {
    let name = text(spec, "serviceAccountName").to_string();
    let deprecated = text(spec, "serviceAccount").to_string();
    let effective = if name.is_empty() { deprecated } else { name };
    let Some(obj) = spec.as_object_mut() else {
        return;
    };
    if effective.is_empty() {
        obj.remove("serviceAccountName");
        obj.remove("serviceAccount");
    } else {
        obj.insert("serviceAccountName".into(), json!(effective));
        obj.insert("serviceAccount".into(), json!(effective));
    }
}

/// The v1 `podIP` and `podIPs` agree after the round trip through the internal type, which
/// holds only the list: a single `podIP` becomes the list when the list is empty or starts
/// elsewhere (the single field wins, as older kubelets write only it), and an empty `podIP`
/// is the list's first address. Controllers that read `podIPs` (endpoints, endpoint slices)
/// see the address of a pod whose status names only `podIP`.
fn pair_pod_ips(pod: &mut Value) {
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let single = status
        .get("podIP")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let first = status
        .get("podIPs")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .map(|ip| {
            ip.get("ip")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        });
    match (single, first) {
        (Some(s), Some(f)) if s != f => {
            status.insert("podIPs".into(), json!([{"ip": s}]));
        }
        (Some(s), None) => {
            status.insert("podIPs".into(), json!([{"ip": s}]));
        }
        (None, Some(f)) if !f.is_empty() => {
            status.insert("podIP".into(), json!(f));
        }
        _ => {}
    }
}

/// `SetDefaults_Pod`: what only pods (not templates) get.
pub fn default_pod(pod: &mut Value) {
    pair_pod_ips(pod);
    let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_pod_spec(spec);
    // Requests default to limits in pods, not in templates (a template's pods get this when
    // they are created).
    for list in ["containers", "initContainers"] {
        for c in each_in(spec, list) {
            let Some(res) = c.get_mut("resources").filter(|r| r.is_object()) else {
                continue;
            };
            let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = object_at(res, "requests");
            for (k, v) in limits {
                if requests.get(&k).is_none() {
                    requests[k] = v;
                }
            }
        }
    }
    default_pod_requests(spec);
    set_default(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        // With host networking, a container port's host port is the container port.
        for list in ["containers", "initContainers"] {
            for c in each_in(spec, list) {
                for p in each_in(c, "ports") {
                    let unset = p
                        .get("hostPort")
                        .is_none_or(|h| h.as_i64().unwrap_or(0) == 0);
                    if let (true, Some(port)) = (unset, p.get("containerPort").cloned()) {
                        p["hostPort"] = port;
                    }
                }
            }
        }
    }
}

/// `defaultHugePagePodLimits` then `defaultPodRequests` (PodLevelResources, beta and on in
/// v1.36), for pods whose pod-level resources are partly set: pod-level hugepage limits default
/// to the containers' aggregated hugepage limits (unless the pod requests that size); pod-level
/// requests default to the containers' aggregated cpu and memory requests, then to the
/// pod-level limits of supported resources (cpu, memory, hugepages).
fn default_pod_requests(spec: &mut Value) {
    let Some(res) = spec.get("resources").filter(|r| r.is_object()) else {
        return;
    };
    let supported = |k: &str| matches!(k, "cpu" | "memory") || k.starts_with("hugepages-");
    let mut limits = map(res, "limits").clone();
    let mut requests = map(res, "requests").clone();
    if !(limits.is_empty() && requests.is_empty()) {
        for (k, q) in super::resources::aggregate_containers(spec, "limits") {
            if k.starts_with("hugepages-") && !requests.contains_key(&k) && !limits.contains_key(&k)
            {
                limits.insert(k, json!(q.canonical()));
            }
        }
        if !limits.is_empty() {
            spec["resources"]["limits"] = Value::Object(limits.clone());
        }
    }
    if limits.is_empty() {
        return;
    }
    // Only overcommittable resources (cpu and memory) take the containers' requests.
    for (k, q) in super::resources::aggregate_containers(spec, "requests") {
        if matches!(k.as_str(), "cpu" | "memory") && !requests.contains_key(&k) {
            requests.insert(k, json!(q.canonical()));
        }
    }
    for (k, v) in limits {
        if supported(&k) && !requests.contains_key(&k) {
            requests.insert(k, v);
        }
    }
    if !requests.is_empty() {
        spec["resources"]["requests"] = Value::Object(requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1"}},
                "livenessProbe": {"grpc": {"port": 1}}}],
            "volumes": [{"name": "v"}, {"name": "i", "image": {"reference": "r:1"}}],
            "serviceAccount": "sa"}});
        default_pod(&mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][0]["resources"]["requests"]["cpu"], "1");
        assert_eq!(
            spec["containers"][0]["livenessProbe"]["grpc"]["service"],
            ""
        );
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["image"]["pullPolicy"], "IfNotPresent");
        assert_eq!(spec["serviceAccountName"], "sa");
        assert_eq!(spec["enableServiceLinks"], true);
    }

    #[test]
    fn pod_ip_and_pod_ips_agree() {
        let mut only_single = json!({"spec": {}, "status": {"podIP": "10.2.0.7"}});
        default_pod(&mut only_single);
        assert_eq!(only_single["status"]["podIPs"], json!([{"ip": "10.2.0.7"}]));
        let mut only_list =
            json!({"spec": {}, "status": {"podIPs": [{"ip": "10.2.0.7"}, {"ip": "fd00::7"}]}});
        default_pod(&mut only_list);
        assert_eq!(only_list["status"]["podIP"], "10.2.0.7");
        assert_eq!(only_list["status"]["podIPs"].as_array().unwrap().len(), 2);
        let mut differing = json!({"spec": {}, "status": {"podIP": "10.2.0.8", "podIPs": [{"ip": "10.2.0.7"}, {"ip": "fd00::7"}]}});
        default_pod(&mut differing);
        assert_eq!(differing["status"]["podIPs"], json!([{"ip": "10.2.0.8"}]));
        let mut neither = json!({"spec": {}, "status": {"phase": "Pending"}});
        default_pod(&mut neither);
        assert_eq!(neither["status"], json!({"phase": "Pending"}));
    }

    #[test]
    fn pod_level_resources_default_from_containers() {
        // A sidecar adds to the regular containers; an init container counts alone with the
        // sidecars before it; hugepage limits come from the containers.
        let mut pod = json!({"spec": {
            "resources": {"limits": {"cpu": "4", "memory": "1Gi"}},
            "initContainers": [
                {"name": "s", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "i", "image": "i", "resources": {"requests": {"cpu": "3"}}}],
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"},
                "limits": {"hugepages-2Mi": "4Mi"}}}]}});
        default_pod(&mut pod);
        assert_eq!(
            pod["spec"]["resources"],
            json!({"limits": {"cpu": "4", "memory": "1Gi", "hugepages-2Mi": "4Mi"},
                   "requests": {"cpu": "4", "memory": "1Gi", "hugepages-2Mi": "4Mi"}})
        );
    }
}
