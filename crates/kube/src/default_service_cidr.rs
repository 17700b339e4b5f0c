//! The default ServiceCIDR controller kube-apiserver runs itself (upstream:
//! pkg/controlplane/controller/defaultservicecidr, `kubernetes-service-cidr-controller`, started
//! by the post-start hook `start-kubernetes-service-cidr-controller`). It owns the ServiceCIDR
//! `kubernetes` made from `--service-cluster-ip-range`:
//!
//! - it syncs until a first sync succeeds (every 100 ms; the hook's readiness check passes
//!   then, as upstream's hook returns only then), and after that every 10 s for the life of the
//!   process. It reacts to no event: a deleted default ServiceCIDR is created again by the next
//!   periodic sync, not at once, as upstream's is;
//! - a missing one is created, by the API server (user `system:apiserver`, field manager
//!   `kube-apiserver`, as upstream's loopback client is recorded);
//! - an existing single-range one whose range is the first of two configured ranges is updated
//!   to both (upstream's single- to dual-stack upgrade). Ironplane's allocator takes one IPv4
//!   range, so the configured list has one entry and this never happens today;
//! - `Ready=True` (message `Kubernetes default Service CIDR is ready`) is applied to `/status`
//!   with the field manager `kubernetes-service-cidr-controller` and force, only when the
//!   object is not being deleted, its CIDRs are the configured ones and its `Ready` condition
//!   is missing or `Unknown`. A spec that differs from the flags is reported once per process
//!   and never changed; a `Ready=False` with the configured CIDRs is reported once and left
//!   alone (upstream leaves it to an administrator rather than fight whoever set it).
//!
//! What it must not do: touch a ServiceCIDR being deleted (kube-controller-manager's
//! `service-cidr-controller`, `controllers::service_cidr`, holds it with its finalizer while
//! the `kubernetes` Service's cluster IP or any other allocated address needs it, and marks it
//! `Terminating`), or rewrite a `Ready` condition that is `True` or `False`: that controller
//! rewrites the condition in its own words, and the two never undo each other.
//!
//! The two reports and failed writes are also Warning Events, as upstream records them (its
//! recorder's component is the controller's name; the Events land in `default`, since a
//! ServiceCIDR has no namespace): `KubernetesDefaultServiceCIDRInconsistent` for a spec that
//! differs from the flags, the condition's own reason for `Ready=False`, and
//! `KubernetesDefaultServiceCIDRError` when the create, the dual-stack update or the `Ready`
//! write fails.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester};
use serde_json::{Value, json};
use storage::ResourceVersion;

use crate::bootstrap::{API_SERVER_MANAGER, own_update};
use crate::controllers::events::{ObjectReference, Recorder};
use crate::controllers::service_cidr::{Condition, apply_ready};
use crate::strategies::service_alloc::apiserver_user;

/// The post-start hook that starts the controller, as upstream names it.
pub const HOOK: &str = "start-kubernetes-service-cidr-controller";
/// Upstream's `controllerName`: the field manager of the `Ready` condition.
const CONTROLLER_NAME: &str = "kubernetes-service-cidr-controller";
/// `DefaultServiceCIDRName`.
pub const DEFAULT_SERVICE_CIDR_NAME: &str = "kubernetes";
/// How often the controller syncs once started (upstream's `interval`, the same as the
/// `kubernetes` Service's endpoint reconciler's).
pub const INTERVAL: Duration = Duration::from_secs(10);
/// How often the first sync is tried until it succeeds (it blocks readiness).
const FIRST_SYNC_POLL: Duration = Duration::from_millis(100);
/// A `Ready` condition write that lost a race is decided again at once this many times; the
/// next periodic sync picks up anything left.
const CONFLICT_RETRIES: usize = 3;
const READY_MESSAGE: &str = "Kubernetes default Service CIDR is ready";

/// What a sync does about an existing default ServiceCIDR.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    /// Its single range is the first configured one, and a second is configured.
    UpgradeToDualStack,
    Status(ReadyAction),
}

/// What `syncStatus` does about the `Ready` condition.
#[derive(Debug, PartialEq, Eq)]
enum ReadyAction {
    /// Being deleted: kube-controller-manager's controller decides.
    Deleting,
    /// Its CIDRs are not the configured ones: reported, never changed.
    Mismatched,
    /// `Ready=False` although the CIDRs match: reported, left alone.
    NotReady { reason: String, message: String },
    /// `Ready=True`, or a status upstream does not name: nothing to do.
    Settled,
    /// No `Ready` condition, or `Unknown`: set to `True`.
    SetReady,
}

fn spec_cidrs(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn ready_condition(obj: &Value) -> Option<&Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Ready")
}

fn decide_existing(configured: &[String], current: &Value) -> Existing {
    let theirs = spec_cidrs(current);
    if configured.len() == 2 && theirs.len() == 1 && configured[0] == theirs[0] {
        return Existing::UpgradeToDualStack;
    }
    Existing::Status(decide_status(configured, current))
}

fn decide_status(configured: &[String], current: &Value) -> ReadyAction {
    if current.deletion_timestamp().is_some() {
        return ReadyAction::Deleting;
    }
    if spec_cidrs(current) != configured {
        return ReadyAction::Mismatched;
    }
    let Some(ready) = ready_condition(current) else {
        return ReadyAction::SetReady;
    };
    let field = |k: &str| ready.get(k).and_then(Value::as_str).unwrap_or("");
    match field("status") {
        "False" => ReadyAction::NotReady {
            reason: field("reason").to_string(),
            message: field("message").to_string(),
        },
        "Unknown" => ReadyAction::SetReady,
        _ => ReadyAction::Settled,
    }
}

/// The controller's state: its configuration and what it has already reported.
pub struct Controller {
    api: Arc<ApiResources>,
    /// The configured ranges, in order (the first is the default IP family).
    cidrs: Vec<String>,
    reported_mismatch: bool,
    reported_not_ready: bool,
    events: Recorder,
}

/// Go's `%v` (and `%s`) of a `[]string`: `[a b]`.
fn go_list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(" "))
}

/// The reference an Event about `cidr` names (upstream records on the object it holds, which
/// for a failed create is the one it tried to create).
fn reference(cidr: &Value) -> ObjectReference {
    ObjectReference::to("networking.k8s.io/v1", "ServiceCIDR", cidr)
}

/// Runs the controller until the process ends: syncs until a first sync succeeds, calls
/// `started` (the hook's readiness), then syncs every `INTERVAL`. Without ServiceCIDRs served
/// there is nothing to do, and the hook passes at once.
pub async fn run(api: Arc<ApiResources>, cidrs: Vec<String>, started: impl FnOnce() + Send) {
    let Some(store) = api.get("networking.k8s.io", "v1", "servicecidrs").cloned() else {
        started();
        return;
    };
    let events = Recorder::start_as(&api, CONTROLLER_NAME, apiserver_user(), API_SERVER_MANAGER);
    let mut c = Controller {
        api,
        cidrs,
        reported_mismatch: false,
        reported_not_ready: false,
        events,
    };
    tracing::info!(controller = CONTROLLER_NAME, "Starting");
    while let Err(e) = c.sync(&store).await {
        tracing::debug!(error = %e, "initializing the default ServiceCIDR; retrying");
        tokio::time::sleep(FIRST_SYNC_POLL).await;
    }
    started();
    loop {
        tokio::time::sleep(INTERVAL).await;
        if let Err(e) = c.sync(&store).await {
            tracing::error!(error = %e, "error trying to sync the default ServiceCIDR");
        }
    }
}

impl Controller {
    /// Upstream's `sync`: an error only when the object could not be read or created.
    async fn sync(&mut self, store: &RegistryStore) -> Result<(), String> {
        for _ in 0..CONFLICT_RETRIES {
            let current = match self.read(store).await? {
                Some(v) => v,
                None => match self.create(store).await? {
                    Some(created) => created,
                    // Created meanwhile by someone else: look at theirs.
                    None => continue,
                },
            };
            match decide_existing(&self.cidrs, &current) {
                Existing::UpgradeToDualStack => {
                    // Upstream logs a failure (and records an Event) but does not fail the sync.
                    if let Err(e) = self.upgrade(store, &current).await {
                        tracing::error!(from = ?spec_cidrs(&current), to = ?self.cidrs, error = %e, "The default ServiceCIDR can not be updated to dual stack");
                        self.events.warning(
                            &reference(&current),
                            "KubernetesDefaultServiceCIDRError",
                            format!(
                                "The default ServiceCIDR can not be upgraded from {} to dual stack {} : {e}",
                                self.cidrs[0],
                                go_list(&self.cidrs)
                            ),
                        );
                    }
                    return Ok(());
                }
                Existing::Status(status) => {
                    if !self.sync_status(store, &current, status).await {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    async fn read(&self, store: &RegistryStore) -> Result<Option<Value>, String> {
        match store
            .get("", DEFAULT_SERVICE_CIDR_NAME, ResourceVersion::Unset)
            .await
        {
            Ok(o) => o.value().map(Some).map_err(|e| e.to_string()),
            Err(s) if s.code == 404 => Ok(None),
            Err(s) => Err(s.message),
        }
    }

    /// Creates the default ServiceCIDR; `None` when one appeared meanwhile.
    async fn create(&self, store: &RegistryStore) -> Result<Option<Value>, String> {
        tracing::info!(cidrs = ?self.cidrs, "Creating default ServiceCIDR");
        let obj = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": DEFAULT_SERVICE_CIDR_NAME},
            "spec": {"cidrs": self.cidrs},
        });
        let user = apiserver_user();
        let write = self.api.internal_write(store, API_SERVER_MANAGER);
        let obj_for_event = obj.clone();
        match store
            .create(&Requester { user: &user }, "", obj, &write)
            .await
        {
            Ok(o) => o.value().map(Some).map_err(|e| e.to_string()),
            Err(s) if s.code == 409 => Ok(None),
            Err(s) => {
                tracing::warn!(error = %s.message, "The default ServiceCIDR can not be created");
                self.events.warning(
                    &reference(&obj_for_event),
                    "KubernetesDefaultServiceCIDRError",
                    "The default ServiceCIDR can not be created",
                );
                Err(format!("creating the default ServiceCIDR: {}", s.message))
            }
        }
    }

    /// Sets the configured ranges on a single-range default ServiceCIDR.
    async fn upgrade(&self, store: &RegistryStore, current: &Value) -> Result<(), String> {
        tracing::info!(from = ?spec_cidrs(current), to = ?self.cidrs, "Updating default ServiceCIDR from single-stack to dual-stack");
        let mut changed = current.clone();
        changed["spec"]["cidrs"] = json!(self.cidrs);
        let mut updater = |_: Option<&Value>| Ok(changed.clone());
        let user = apiserver_user();
        store
            .update(
                &Requester { user: &user },
                "",
                DEFAULT_SERVICE_CIDR_NAME,
                &mut updater,
                &own_update(&self.api, store),
            )
            .await
            .map(|_| ())
            .map_err(|s| s.message)
    }

    /// Upstream's `syncStatus`. True when the condition write lost a race and the object
    /// should be read and decided again.
    async fn sync_status(
        &mut self,
        store: &RegistryStore,
        current: &Value,
        status: ReadyAction,
    ) -> bool {
        match status {
            ReadyAction::Deleting => {
                tracing::trace!("ServiceCIDR is being deleted, skipping status sync");
            }
            ReadyAction::Mismatched => {
                if !self.reported_mismatch {
                    tracing::warn!(
                        "The default ServiceCIDR {:?} does not match the controller flag configurations {:?}",
                        spec_cidrs(current),
                        self.cidrs,
                    );
                    self.events.warning(
                        &reference(current),
                        "KubernetesDefaultServiceCIDRInconsistent",
                        format!(
                            "The default ServiceCIDR {} does not match the controller flag configurations {}",
                            go_list(&spec_cidrs(current)),
                            go_list(&self.cidrs)
                        ),
                    );
                    self.reported_mismatch = true;
                }
            }
            ReadyAction::NotReady { reason, message } => {
                if !self.reported_not_ready {
                    tracing::warn!(%reason, %message, "Default ServiceCIDR condition Ready is False, but controller configuration matches. Please validate your cluster's network configuration.");
                    self.events.warning(
                        &reference(current),
                        &reason,
                        format!("Configuration matches, but {message}"),
                    );
                    self.reported_not_ready = true;
                }
            }
            ReadyAction::Settled => {}
            ReadyAction::SetReady => {
                tracing::info!("Setting default ServiceCIDR condition Ready to True");
                let condition = Condition {
                    status: "True",
                    reason: None,
                    message: READY_MESSAGE,
                };
                let user = apiserver_user();
                match apply_ready(
                    &self.api,
                    store,
                    current,
                    &condition,
                    CONTROLLER_NAME,
                    &user,
                )
                .await
                {
                    Ok(()) => {}
                    // Upstream's apply has no precondition; this one is made on what was read,
                    // so a change in between is decided again instead.
                    Err(s) if s.code == 409 => return true,
                    Err(s) => {
                        tracing::error!(error = %s.message, "The default ServiceCIDR Status can not be set to Ready=True");
                        self.events.warning(
                            &reference(current),
                            "KubernetesDefaultServiceCIDRError",
                            "The default ServiceCIDR Status can not be set to Ready=True",
                        );
                    }
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(cidrs: &[&str], ready: Option<Value>) -> Value {
        let mut v = json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": cidrs}});
        if let Some(c) = ready {
            v["status"]["conditions"] = json!([c]);
        }
        v
    }

    fn flags(cidrs: &[&str]) -> Vec<String> {
        cidrs.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn ready_is_set_only_when_missing_or_unknown_and_the_ranges_match() {
        let ours = flags(&["10.0.0.0/24"]);
        let decide = |v: &Value| decide_existing(&ours, v);
        assert_eq!(
            decide(&cidr(&["10.0.0.0/24"], None)),
            Existing::Status(ReadyAction::SetReady)
        );
        assert_eq!(
            decide(&cidr(
                &["10.0.0.0/24"],
                Some(json!({"type": "Ready", "status": "Unknown"}))
            )),
            Existing::Status(ReadyAction::SetReady)
        );
        // kube-controller-manager's own words are left alone.
        assert_eq!(
            decide(&cidr(
                &["10.0.0.0/24"],
                Some(
                    json!({"type": "Ready", "status": "True", "message": "Kubernetes Service CIDR is ready"})
                )
            )),
            Existing::Status(ReadyAction::Settled)
        );
        assert_eq!(
            decide(&cidr(
                &["10.0.0.0/24"],
                Some(
                    json!({"type": "Ready", "status": "False", "reason": "Why", "message": "because"})
                )
            )),
            Existing::Status(ReadyAction::NotReady {
                reason: "Why".into(),
                message: "because".into()
            })
        );
        assert_eq!(
            decide(&cidr(&["10.96.0.0/24"], None)),
            Existing::Status(ReadyAction::Mismatched)
        );
        let mut deleting = cidr(&["10.0.0.0/24"], None);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(decide(&deleting), Existing::Status(ReadyAction::Deleting));
    }

    #[test]
    fn a_single_stack_default_is_upgraded_only_from_the_first_configured_range() {
        let dual = flags(&["10.0.0.0/24", "fd00::/108"]);
        assert_eq!(
            decide_existing(&dual, &cidr(&["10.0.0.0/24"], None)),
            Existing::UpgradeToDualStack
        );
        assert_eq!(
            decide_existing(&dual, &cidr(&["10.96.0.0/24"], None)),
            Existing::Status(ReadyAction::Mismatched)
        );
        assert_eq!(
            decide_existing(&dual, &cidr(&["10.0.0.0/24", "fd00::/108"], None)),
            Existing::Status(ReadyAction::SetReady)
        );
        // Dual to single is a mismatch, never a change.
        assert_eq!(
            decide_existing(
                &flags(&["10.0.0.0/24"]),
                &cidr(&["10.0.0.0/24", "fd00::/108"], None)
            ),
            Existing::Status(ReadyAction::Mismatched)
        );
    }
}
