//! Storage kinds' defaults: a StorageClass deletes its volumes and binds them at once unless it
//! says otherwise (`SetDefaults_StorageClass`); a CSIDriver's capabilities default as upstream's
//! `SetDefaults_CSIDriver` has them.

use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::set_default;

pub struct StorageClassStrategy;
pub struct CsiDriverStrategy;

impl Strategy for StorageClassStrategy {
    fn default(&self, obj: &mut Value) {
        if obj.is_object() {
            set_default(obj, "reclaimPolicy", json!("Delete"));
            set_default(obj, "volumeBindingMode", json!("Immediate"));
        }
    }
}

impl Strategy for CsiDriverStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        set_default(spec, "attachRequired", json!(true));
        set_default(spec, "podInfoOnMount", json!(false));
        set_default(spec, "storageCapacity", json!(false));
        set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        set_default(spec, "requiresRepublish", json!(false));
        set_default(spec, "seLinuxMount", json!(false));
        if spec
            .get("volumeLifecycleModes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec["volumeLifecycleModes"] = json!(["Persistent"]);
        }
    }
}
