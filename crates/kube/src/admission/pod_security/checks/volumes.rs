//! Volume types: restricted pods use only the inline volume sources that carry no host or
//! network storage (upstream: check_restrictedVolumes.go).

use super::{Check, Pod, Rule, Sorted, Violation, at, join_quote, list, plural, str_at};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[Check {
    id: "restrictedVolumes",
    level: Level::Restricted,
    rules: &[Rule {
        since: 0,
        check: restricted_volumes,
        overrides: &["hostPathVolumes"],
    }],
}];

/// The sources restricted pods may use.
const ALLOWED: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The sources upstream names, in the order it looks for them; any other is `unknown`.
const NAMED: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(pod: &Pod<'_>) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = Sorted::new();
    for v in list(pod.spec, &["volumes"]) {
        if ALLOWED.iter().any(|s| at(v, &[s]).is_some()) {
            continue;
        }
        bad.push(str_at(v, &["name"]).unwrap_or(""));
        let named = NAMED.iter().find(|s| at(v, &[s]).is_some());
        types.insert(named.copied().unwrap_or("unknown").to_string());
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}
