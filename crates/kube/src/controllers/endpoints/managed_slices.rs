//! The EndpointSlices the EndpointSlice controller and the mirroring controller manage: the
//! changes a sync makes to them, and their writing — creates, then updates, then deletes, each
//! written slice put into the controller's index at once. What a controller adds to its slices
//! before they are written (the EndpointSlice controller's trigger time) is its own. Also the
//! watch of slices that keeps a controller's index of those it manages.

use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::registry::reflector::Delta;
use serde_json::Value;

use super::model::{Key, key_of};
use super::runtime::{Applied, Objects, Queue, Shared, Writer, namespace_closed};
use super::slices::Slice;
use super::{LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::controllers::events::aggregate_errors;

/// The changes a sync makes.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub create: Vec<Slice>,
    /// Named, at the resourceVersion they were read at, so that an update fails if the slice
    /// changed meanwhile.
    pub update: Vec<Slice>,
    pub delete: Vec<Slice>,
    /// What could not be planned yet (the EndpointSlice controller's pods on nodes it does not
    /// know): the sync fails once the rest is written, so the key is tried again later.
    pub errors: Vec<String>,
    /// Warnings to record on the object mirrored from (reason, message), before the writes.
    pub warnings: Vec<(&'static str, String)>,
}

/// Writes `plan`'s slices for the Service (or, mirroring, the Endpoints) `key`, keeping the
/// controller's index of them (`slices` finds it in the controller's state) in step with each
/// write. Stops at the first write that fails; a create refused because the namespace is
/// closing ends the sync quietly. The error is upstream's reconciler's: what could not be
/// planned, then the failed write, aggregated as `utilerrors` prints them.
pub(super) async fn apply_plan<S: Send + 'static>(
    shared: &Shared<S>,
    writer: &Writer,
    (kind, key): (&str, &Key),
    mut plan: Plan,
    slices: fn(&mut S) -> &mut Objects,
) -> Result<(), String> {
    let (ns, name) = (key.0.as_str(), key.1.as_str());
    let mut errors = std::mem::take(&mut plan.errors);
    let failed = async {
        for slice in plan.create {
            match writer.create(ns, slice.to_value()).await {
                Ok(created) => shared.update(|inner| slices(&mut inner.state).wrote(created)),
                Err(s) if namespace_closed(&s) => return Ok(()),
                Err(s) => {
                    return Err(format!(
                        "failed to create EndpointSlice for {kind} {ns}/{name}: {}",
                        s.message
                    ));
                }
            }
        }
        for slice in plan.update {
            match writer.update(slice.to_value()).await {
                Ok(updated) => shared.update(|inner| slices(&mut inner.state).wrote(updated)),
                Err(s) => {
                    return Err(format!(
                        "failed to update {} EndpointSlice for {kind} {ns}/{name}: {}",
                        slice.name(),
                        s.message
                    ));
                }
            }
        }
        for slice in plan.delete {
            let key = (ns.to_string(), slice.name().to_string());
            match writer.delete(&key).await {
                Ok(Some(rv)) => shared.update(|inner| slices(&mut inner.state).deleted(key, rv)),
                // Already gone: the index may still hold it until the deletion event arrives.
                Ok(None) => {
                    shared.update(|inner| slices(&mut inner.state).forget(&key));
                }
                Err(s) => {
                    return Err(format!(
                        "failed to delete {} EndpointSlice for {kind} {ns}/{name}: {}",
                        slice.name(),
                        s.message
                    ));
                }
            }
        }
        Ok(())
    }
    .await;
    // A closing namespace ends the writes, not what could not be planned (as upstream's
    // `finalize` returns nothing on `NamespaceTerminating` but the node errors stay).
    match failed {
        Ok(()) if errors.is_empty() => Ok(()),
        Ok(()) => Err(aggregate_errors(&errors)),
        Err(e) => {
            errors.push(e);
            Err(aggregate_errors(&errors))
        }
    }
}

/// Whether `slice` is labelled as managed by `controller`.
fn managed_by(slice: &Value, controller: &str) -> bool {
    slice
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .and_then(Value::as_str)
        == Some(controller)
}

/// The Service a slice is of (for a mirrored slice, the Endpoints of that name): its
/// `kubernetes.io/service-name` label.
pub(super) fn service_key_of(slice: &Value) -> Option<Key> {
    let name = slice
        .pointer("/metadata/labels")
        .and_then(|l| l.get(LABEL_SERVICE_NAME))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())?;
    Some((slice.namespace().to_string(), name.to_string()))
}

/// A change to EndpointSlices, for a controller whose index `slices` holds those `controller`
/// manages. A change someone else made to one of them (or a slice taken over from, or handed
/// to, another manager) syncs the key its slices are of after `delay`; the echoes of the
/// controller's own writes do not.
pub(super) fn on_slices(
    slices: &mut Objects,
    queue: &mut Queue,
    controller: &str,
    delay: Duration,
    delta: Delta,
) {
    let managed = |v: &Value| managed_by(v, controller);
    let mut touched: Vec<Key> = Vec::new();
    match delta {
        Delta::Replace(items) => {
            let old = slices.replace(items.into_iter().filter(managed));
            // Slices that went away while the watch was down.
            touched.extend(
                old.into_iter()
                    .filter(|(k, _)| slices.get(k).is_none())
                    .filter_map(|(_, v)| service_key_of(&v)),
            );
        }
        Delta::Upsert(v) => {
            if managed(&v) {
                let now = service_key_of(&v);
                if let Applied::Changed(old) = slices.upsert(v) {
                    touched.extend(old.as_ref().and_then(service_key_of));
                    touched.extend(now);
                }
            } else if let Some(old) = slices.forget(&key_of(&v)) {
                touched.extend(service_key_of(&old));
            }
        }
        Delta::Deleted(v) => {
            if managed(&v) && slices.remove(&v).is_some() {
                touched.extend(service_key_of(&v));
            }
        }
    }
    for key in touched {
        queue.add_after(key, delay);
    }
}
