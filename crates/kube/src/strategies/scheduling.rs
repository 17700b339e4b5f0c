//! PriorityClasses: a class preempts lower priorities unless it says otherwise
//! (`SetDefaults_PriorityClass`).

use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn default(&self, obj: &mut Value) {
        if obj.is_object() && obj.get("preemptionPolicy").is_none_or(Value::is_null) {
            obj["preemptionPolicy"] = json!("PreemptLowerPriority");
        }
    }
}
