//! PersistentVolumes and PersistentVolumeClaims: upstream's defaults (`SetDefaults_PersistentVolume`,
//! `SetDefaults_PersistentVolumeClaim`): a volume is retained and a filesystem unless it says
//! otherwise, and both start `Pending`.

use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::{object_at, set_default};

pub struct PersistentVolumeStrategy;
pub struct PersistentVolumeClaimStrategy;

fn pending(obj: &mut Value) {
    set_default(object_at(obj, "status"), "phase", json!("Pending"));
}

impl Strategy for PersistentVolumeStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
            set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
        pending(obj);
    }

    /// A new volume is `Pending` since now, whatever status the client sent.
    fn prepare_for_create(&self, obj: &mut Value) {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": now});
    }
}

impl Strategy for PersistentVolumeClaimStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
        pending(obj);
    }
}
