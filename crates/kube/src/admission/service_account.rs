//! ServiceAccount (upstream: plugin/pkg/admission/serviceaccount). On a Pod's create: the pod
//! runs as `default` unless it names an account; the account must exist (`default` is looked up
//! for up to ten tries, since the service account controller may not have made it yet); unless
//! the pod or else the account turns `automountServiceAccountToken` off, every init container and
//! container that mounts nothing at `/var/run/secrets/kubernetes.io/serviceaccount` mounts the
//! `kube-api-access-<random>` projected volume (a bound token, the cluster CA, the namespace);
//! a pod without image pull secrets gets the account's. Mirror pods are left as they are but may
//! not reference an account, secrets or token projections. An account annotated
//! `kubernetes.io/enforce-mountable-secrets: "true"` limits the secrets a pod (and, on
//! `pods/ephemeralcontainers`, its ephemeral containers) may use to those the account lists.
//! Updates of the pod itself are not looked at.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::{JsonPointer, ObjectExt};
use apiserver::admission::{Attributes, MutatingPlugin, Operation, ValidatingPlugin};
use apiserver::endpoints::ApiResources;
use async_trait::async_trait;
use rand::Rng;
use serde_json::{Map, Value, json};
use storage::ResourceVersion;

use super::forbidden;

/// The account a pod that names none runs as.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The annotation that makes an account limit the secrets its pods may reference.
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// The prefix of the token volume's generated name.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// Where the token volume is mounted.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The annotation that marks a mirror pod (one a kubelet made from a static manifest).
const MIRROR_POD: &str = "kubernetes.io/config.mirror";
/// `WarnOnlyBoundTokenExpirationSeconds`: the token's lifetime the projection asks for.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

pub struct ServiceAccount {
    pub api: Arc<OnceLock<Arc<ApiResources>>>,
}

/// `shouldIgnore`: only pods and their `ephemeralcontainers`.
fn ignored(attrs: &Attributes<'_>) -> bool {
    !attrs.resource.group.is_empty()
        || attrs.resource.resource != "pods"
        || !matches!(attrs.subresource, "" | "ephemeralcontainers")
}

fn is_mirror_pod(pod: &Value) -> bool {
    pod.at("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD))
        .is_some()
}

fn account_name(pod: &Value) -> &str {
    pod.at("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[async_trait]
impl MutatingPlugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    async fn admit(&self, attrs: &Attributes<'_>, pod: &mut Value) -> Result<(), Status> {
        if ignored(attrs) || attrs.operation != Operation::Create {
            return Ok(());
        }
        // A mirror pod's spec must stay what the kubelet wrote; it is only checked.
        if is_mirror_pod(pod) {
            return self.check(attrs, pod).await;
        }
        if account_name(pod).is_empty()
            && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert(
                "serviceAccountName".into(),
                Value::from(DEFAULT_SERVICE_ACCOUNT),
            );
        }
        let name = account_name(pod).to_string();
        let account = self
            .account(attrs.namespace, &name)
            .await
            .map_err(|e| lookup_failed(attrs, pod, &name, e))?;
        if automount(&account, pod) {
            mount_token(pod);
        }
        let has_pull_secrets = pod
            .at("/spec/imagePullSecrets")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let from_account: Vec<Value> = account
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| json!({"name": r.get("name").and_then(Value::as_str).unwrap_or("")}))
            .collect();
        if !has_pull_secrets
            && !from_account.is_empty()
            && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("imagePullSecrets".into(), Value::Array(from_account));
        }
        self.check(attrs, pod).await
    }
}

#[async_trait]
impl ValidatingPlugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    async fn validate(&self, attrs: &Attributes<'_>, pod: &Value) -> Result<(), Status> {
        if ignored(attrs) {
            return Ok(());
        }
        self.check(attrs, pod).await
    }
}

impl ServiceAccount {
    /// `Validate`: what a created pod (and the ephemeral containers an update adds) may
    /// reference.
    async fn check(&self, attrs: &Attributes<'_>, pod: &Value) -> Result<(), Status> {
        if attrs.operation == Operation::Update && attrs.subresource == "ephemeralcontainers" {
            return self.check_ephemeral_containers(attrs, pod).await;
        }
        if attrs.operation != Operation::Create {
            return Ok(());
        }
        if is_mirror_pod(pod) {
            return check_mirror_pod(attrs, pod);
        }
        let account = self.required_account(attrs, pod).await?;
        if enforces_mountable_secrets(&account)
            && let Err(why) = limit_secret_references(&account, pod)
        {
            return Err(forbidden(attrs, pod, why));
        }
        Ok(())
    }

    /// The pod's account, which it must name and which must exist.
    async fn required_account(&self, attrs: &Attributes<'_>, pod: &Value) -> Result<Value, Status> {
        let name = account_name(pod);
        if name.is_empty() {
            return Err(forbidden(
                attrs,
                pod,
                format!(
                    "no service account specified for pod {}/{}",
                    attrs.namespace,
                    pod.name()
                ),
            ));
        }
        self.account(attrs.namespace, name)
            .await
            .map_err(|e| lookup_failed(attrs, pod, name, e))
    }

    /// `limitEphemeralContainerSecretReferences`.
    async fn check_ephemeral_containers(
        &self,
        attrs: &Attributes<'_>,
        pod: &Value,
    ) -> Result<(), Status> {
        let account = self.required_account(attrs, pod).await?;
        if !enforces_mountable_secrets(&account) {
            return Ok(());
        }
        let mountable = names(account.get("secrets"));
        let sa = account.name();
        for c in containers(pod, "ephemeralContainers") {
            if let Err(why) = container_secrets_allowed(c, "ephemeral container", &mountable, sa) {
                return Err(forbidden(attrs, pod, why));
            }
        }
        Ok(())
    }

    /// `getServiceAccount`: the account from the watch cache, else from storage; `default` is
    /// tried ten times, 100 to 200 ms apart, since its controller may be about to make it.
    async fn account(&self, namespace: &str, name: &str) -> Result<Value, Status> {
        let Some(store) = self
            .api
            .get()
            .and_then(|a| a.get("", "v1", "serviceaccounts"))
        else {
            return Err(Status::internal("serviceaccounts are not served"));
        };
        match store.get(namespace, name, ResourceVersion::Any).await {
            Ok(o) => return o.value().map_err(Status::internal),
            Err(s) if s.code != 404 => return Err(s),
            Err(_) => {}
        }
        let attempts = if name == DEFAULT_SERVICE_ACCOUNT {
            10
        } else {
            1
        };
        let interval = Duration::from_millis(rand::rng().random_range(100..200));
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(interval).await;
            }
            match store.get(namespace, name, ResourceVersion::Unset).await {
                Ok(o) => return o.value().map_err(Status::internal),
                Err(s) if s.code != 404 => return Err(s),
                Err(_) => {}
            }
        }
        // `errors.NewNotFound(api.Resource("serviceaccount"), name)`: the singular resource.
        Err(Status::not_found(
            &apimachinery::GroupResource::new("", "serviceaccount"),
            name,
        ))
    }
}

/// `error looking up service account <ns>/<name>: <why>`, as a 403 on the pod.
fn lookup_failed(attrs: &Attributes<'_>, pod: &Value, name: &str, err: Status) -> Status {
    forbidden(
        attrs,
        pod,
        format!(
            "error looking up service account {}/{}: {}",
            attrs.namespace, name, err.message
        ),
    )
}

/// `shouldAutomount`: the pod's choice, else the account's, else yes.
fn automount(account: &Value, pod: &Value) -> bool {
    pod.at("/spec/automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            account
                .get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// `enforceMountableSecrets`: the account's annotation, read as Go's `strconv.ParseBool`.
fn enforces_mountable_secrets(account: &Value) -> bool {
    account
        .at("/metadata/annotations")
        .and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS))
        .and_then(Value::as_str)
        .is_some_and(|v| matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// The `name`s of a list of references.
fn names(list: Option<&Value>) -> Vec<&str> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("name").and_then(Value::as_str))
        .collect()
}

fn containers<'a>(pod: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    pod.get("spec")
        .and_then(|s| s.get(field))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.at(pointer).and_then(Value::as_str)
}

/// The secrets a container's environment reads: each `env[].valueFrom.secretKeyRef` with its
/// variable's name, then each `envFrom[].secretRef`.
fn env_secrets(c: &Value) -> (Vec<(&str, &str)>, Vec<&str>) {
    let env = c
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let secret = e.at("/valueFrom/secretKeyRef")?;
            Some((
                e.get("name").and_then(Value::as_str).unwrap_or(""),
                secret.get("name").and_then(Value::as_str).unwrap_or(""),
            ))
        })
        .collect();
    let env_from = c
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let secret = e.get("secretRef")?;
            Some(secret.get("name").and_then(Value::as_str).unwrap_or(""))
        })
        .collect();
    (env, env_from)
}

/// One container's environment against the account's mountable secrets.
fn container_secrets_allowed(
    c: &Value,
    what: &str,
    mountable: &[&str],
    account: &str,
) -> Result<(), String> {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    let (env, env_from) = env_secrets(c);
    for (var, secret) in env {
        if !mountable.contains(&secret) {
            return Err(format!(
                "{what} {name} with envVar {var} referencing secret.secretName=\"{secret}\" is not allowed because service account {account} does not reference that secret"
            ));
        }
    }
    for secret in env_from {
        if !mountable.contains(&secret) {
            return Err(format!(
                "{what} {name} with envFrom referencing secret.secretName=\"{secret}\" is not allowed because service account {account} does not reference that secret"
            ));
        }
    }
    Ok(())
}

/// `limitSecretReferences`: secret volumes, then init containers' and containers'
/// environments, then image pull secrets, each against what the account lists.
fn limit_secret_references(account: &Value, pod: &Value) -> Result<(), String> {
    let mountable = names(account.get("secrets"));
    let sa = account.name();
    for volume in pod
        .at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(secret) = volume.get("secret") else {
            continue;
        };
        let name = secret
            .get("secretName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !mountable.contains(&name) {
            return Err(format!(
                "volume with secret.secretName=\"{name}\" is not allowed because service account {sa} does not reference that secret"
            ));
        }
    }
    for c in containers(pod, "initContainers") {
        container_secrets_allowed(c, "init container", &mountable, sa)?;
    }
    for c in containers(pod, "containers") {
        container_secrets_allowed(c, "container", &mountable, sa)?;
    }
    let pull = names(account.get("imagePullSecrets"));
    for (i, r) in pod
        .at("/spec/imagePullSecrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        if !pull.contains(&name) {
            return Err(format!(
                "imagePullSecrets[{i}].name=\"{name}\" is not allowed because service account {sa} does not reference that imagePullSecret"
            ));
        }
    }
    Ok(())
}

/// A mirror pod may not name an account, reference a secret (`VisitPodSecretNames` over every
/// container) or project a token.
fn check_mirror_pod(attrs: &Attributes<'_>, pod: &Value) -> Result<(), Status> {
    if !account_name(pod).is_empty() {
        return Err(forbidden(
            attrs,
            pod,
            "a mirror pod may not reference service accounts".into(),
        ));
    }
    if references_secrets(pod) {
        return Err(forbidden(
            attrs,
            pod,
            "a mirror pod may not reference secrets".into(),
        ));
    }
    let projects_token = pod
        .at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.at("/projected/sources").and_then(Value::as_array))
        .flatten()
        .any(|s| s.get("serviceAccountToken").is_some_and(|t| !t.is_null()));
    if projects_token {
        return Err(forbidden(
            attrs,
            pod,
            "a mirror pod may not use ServiceAccountToken volume projections".into(),
        ));
    }
    Ok(())
}

/// `VisitPodSecretNames` found a (non-empty) secret name: image pull secrets, any container's
/// environment, or the secret reference of a volume source.
fn references_secrets(pod: &Value) -> bool {
    let named = |n: Option<&str>| n.is_some_and(|n| !n.is_empty());
    if names(pod.at("/spec/imagePullSecrets"))
        .iter()
        .any(|n| !n.is_empty())
    {
        return true;
    }
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        for c in containers(pod, field) {
            let (env, env_from) = env_secrets(c);
            if env.iter().any(|(_, s)| !s.is_empty()) || env_from.iter().any(|s| !s.is_empty()) {
                return true;
            }
        }
    }
    const VOLUME_SECRETS: &[&str] = &[
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/flexVolume/secretRef/name",
        "/rbd/secretRef/name",
        "/secret/secretName",
        "/scaleIO/secretRef/name",
        "/iscsi/secretRef/name",
        "/storageos/secretRef/name",
        "/csi/nodePublishSecretRef/name",
    ];
    for volume in pod
        .at("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if VOLUME_SECRETS.iter().any(|p| named(str_at(volume, p))) {
            return true;
        }
        let projected = volume
            .at("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        if projected
            .filter_map(|s| s.get("secret"))
            .any(|s| named(s.get("name").and_then(Value::as_str)))
        {
            return true;
        }
    }
    false
}

/// `mountServiceAccountToken`: the first volume named `kube-api-access-*` is the token volume,
/// else one is named now; every init container and container without a mount at the token path
/// mounts it, and the volume is added when one of them needed it and it did not exist.
fn mount_token(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .find(|n| n.starts_with(VOLUME_PREFIX))
        .map(str::to_string);
    let volume_name = existing
        .clone()
        .unwrap_or_else(|| apiserver::registry::generated_name(VOLUME_PREFIX));
    let mount = json!({
        "name": volume_name,
        "readOnly": true,
        "mountPath": TOKEN_MOUNT_PATH,
    });
    let mut needed = false;
    for field in ["initContainers", "containers"] {
        let Some(list) = spec.get_mut(field).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in list.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = c
                .entry("volumeMounts")
                .or_insert_with(|| Value::Array(Vec::new()));
            if mounts.is_null() {
                *mounts = Value::Array(Vec::new());
            }
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            let taken = mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH));
            if !taken {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if existing.is_none() && needed {
        let volumes = spec
            .entry("volumes")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !volumes.is_array() {
            *volumes = Value::Array(Vec::new());
        }
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(token_volume(&volume_name));
        }
    }
}

/// `TokenVolumeSource`: a bound token, the cluster CA from `kube-root-ca.crt`, and the
/// namespace from the downward API; the default mode set explicitly (kubernetes#104464).
fn token_volume(name: &str) -> Value {
    let mut projected = Map::new();
    projected.insert("defaultMode".into(), json!(0o644));
    projected.insert(
        "sources".into(),
        json!([
            {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_EXPIRATION_SECONDS}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]),
    );
    json!({"name": name, "projected": projected})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn mounts_in_init_containers_and_containers_but_not_ephemeral_ones() {
        let mut p = pod(json!({
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x", "mountPath": TOKEN_MOUNT_PATH}]}],
            "ephemeralContainers": [{"name": "e"}],
        }));
        mount_token(&mut p);
        let volumes = p["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 1);
        let name = volumes[0]["name"].as_str().unwrap();
        assert!(name.starts_with(VOLUME_PREFIX) && name.len() == VOLUME_PREFIX.len() + 5);
        assert_eq!(
            volumes[0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        assert_eq!(volumes[0]["projected"]["defaultMode"], 420);
        let mount = json!([{"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}]);
        assert_eq!(p["spec"]["initContainers"][0]["volumeMounts"], mount);
        assert_eq!(p["spec"]["containers"][0]["volumeMounts"], mount);
        assert_eq!(
            p["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert!(
            p["spec"]["ephemeralContainers"][0]
                .get("volumeMounts")
                .is_none()
        );
    }

    #[test]
    fn an_existing_token_volume_is_reused_and_not_added_again() {
        let mut p = pod(json!({
            "containers": [{"name": "a"}],
            "volumes": [{"name": "kube-api-access-abcde", "emptyDir": {}}],
        }));
        mount_token(&mut p);
        assert_eq!(p["spec"]["volumes"].as_array().unwrap().len(), 1);
        assert_eq!(
            p["spec"]["containers"][0]["volumeMounts"][0]["name"],
            "kube-api-access-abcde"
        );
    }

    #[test]
    fn automount_pod_then_account_then_true() {
        let sa_off = json!({"automountServiceAccountToken": false});
        assert!(!automount(&sa_off, &pod(json!({}))));
        assert!(automount(
            &sa_off,
            &pod(json!({"automountServiceAccountToken": true}))
        ));
        assert!(automount(&json!({}), &pod(json!({}))));
    }

    #[test]
    fn mountable_secrets_messages() {
        let sa = json!({"metadata": {"name": "sa"}, "secrets": [{"name": "ok"}], "imagePullSecrets": [{"name": "pull"}]});
        let p = pod(json!({"volumes": [{"name": "v", "secret": {"secretName": "no"}}]}));
        assert_eq!(
            limit_secret_references(&sa, &p).unwrap_err(),
            r#"volume with secret.secretName="no" is not allowed because service account sa does not reference that secret"#
        );
        let p = pod(
            json!({"containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "no", "key": "k"}}}]}]}),
        );
        assert_eq!(
            limit_secret_references(&sa, &p).unwrap_err(),
            r#"container c with envVar E referencing secret.secretName="no" is not allowed because service account sa does not reference that secret"#
        );
        let p = pod(json!({"imagePullSecrets": [{"name": "pull"}, {"name": "x"}]}));
        assert_eq!(
            limit_secret_references(&sa, &p).unwrap_err(),
            r#"imagePullSecrets[1].name="x" is not allowed because service account sa does not reference that imagePullSecret"#
        );
        let p = pod(json!({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}]}));
        assert!(limit_secret_references(&sa, &p).is_ok());
    }

    #[test]
    fn mirror_pods_reference_no_secrets() {
        assert!(!references_secrets(&pod(
            json!({"containers": [{"name": "c"}]})
        )));
        assert!(references_secrets(&pod(
            json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]})
        )));
        assert!(references_secrets(&pod(
            json!({"ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "s"}}]}]})
        )));
        assert!(!references_secrets(&pod(
            json!({"imagePullSecrets": [{"name": ""}]})
        )));
    }
}
