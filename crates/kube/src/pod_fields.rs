//! The members of a Pod that the server's own Pod watchers read — the endpoints controllers'
//! model (`controllers::endpoints`) and the Node authorizer's graph (`node_authorizer`) — as one
//! projection. Their reflectors name it alike, so each Pod event is decoded once for all of
//! them (`reflector::run_projected`). A member a reader reads and this does not list would
//! always look empty to it: each reader's tests decode a Pod through [`POD_FIELDS`] and compare
//! what it reads with what it reads in the whole Pod.

use std::sync::LazyLock;

use apimachinery::projection::Projection;

/// The name the reflectors share a decoding under.
pub const NAME: &str = "pods as the server's controllers read them";

/// A Pod's lists of containers, whose members both readers look into.
pub const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Every member either reader reads.
pub static POD_FIELDS: LazyLock<Projection> = LazyLock::new(|| {
    let mut paths: Vec<String> = [
        // Both.
        "metadata.namespace",
        "metadata.name",
        "spec.nodeName",
        // The endpoints controllers (`Pod::from_value`).
        "metadata.uid",
        "metadata.labels",
        "metadata.deletionTimestamp",
        "spec.hostname",
        "spec.subdomain",
        "spec.containers.ports",
        "spec.initContainers.restartPolicy",
        "spec.initContainers.ports",
        "status.podIP",
        "status.podIPs",
        "status.phase",
        "status.conditions",
        // The Node authorizer (`pod_refs`).
        "spec.serviceAccountName",
        "spec.imagePullSecrets",
        "spec.volumes",
        "status.resourceClaimStatuses",
    ]
    .map(String::from)
    .into();
    for list in CONTAINER_LISTS {
        paths.extend(["env", "envFrom"].map(|f| format!("spec.{list}.{f}")));
    }
    Projection::of(paths)
});
