//! The EndpointSlices the EndpointSlice controller and the mirroring controller manage: the
//! changes a sync makes to them, and their writing — creates, then updates, then deletes, each
//! written slice put into the controller's index at once. What a controller adds to its slices
//! before they are written (the EndpointSlice controller's trigger time) is its own.

use super::runtime::{Objects, Shared, Writer, namespace_closed};
use super::slices::Slice;

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
}

/// Writes `plan`'s slices in namespace `ns`, keeping the controller's index of them
/// (`slices` finds it in the controller's state) in step with each write. Stops at the first
/// write that fails; a create refused because the namespace is closing ends the sync quietly.
pub(super) async fn apply_plan<S: Send + 'static>(
    shared: &Shared<S>,
    writer: &Writer,
    ns: &str,
    plan: Plan,
    slices: fn(&mut S) -> &mut Objects,
) -> Result<(), String> {
    for slice in plan.create {
        match writer.create(ns, slice.to_value()).await {
            Ok(created) => shared.update(|inner| slices(&mut inner.state).wrote(created)),
            Err(s) if namespace_closed(&s) => return Ok(()),
            Err(s) => return Err(format!("creating an EndpointSlice: {}", s.message)),
        }
    }
    for slice in plan.update {
        match writer.update(slice.to_value()).await {
            Ok(updated) => shared.update(|inner| slices(&mut inner.state).wrote(updated)),
            Err(s) => {
                return Err(format!(
                    "updating EndpointSlice {}: {}",
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
                    "deleting EndpointSlice {}: {}",
                    slice.name(),
                    s.message
                ));
            }
        }
    }
    match plan.errors.first() {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}
