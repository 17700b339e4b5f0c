//! RBAC bindings: a subject that is a User or a Group belongs to the RBAC API group unless it
//! names another (`SetDefaults_Subject`); a ServiceAccount belongs to the core group.

use apiserver::registry::Strategy;
use serde_json::{Value, json};

pub struct BindingStrategy;

impl Strategy for BindingStrategy {
    fn default(&self, obj: &mut Value) {
        for subject in obj
            .get_mut("subjects")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|s| s.is_object())
        {
            let unset = subject
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            let rbac = matches!(
                subject.get("kind").and_then(Value::as_str),
                Some("User" | "Group")
            );
            if unset && rbac {
                subject["apiGroup"] = json!("rbac.authorization.k8s.io");
            }
        }
    }
}
