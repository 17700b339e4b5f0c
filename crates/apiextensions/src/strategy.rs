//! The custom resource strategy (upstream: apiextensions-apiserver
//! pkg/registry/customresource/strategy.go): defaults from the version's structural schema,
//! `status` reset on create when the status subresource is on, validation against the schema,
//! finalizer names only warned about, names as DNS subdomains.

use apimachinery::validation::FieldError;
use apiserver::registry::Strategy;
use serde_json::Value;

use crate::schema::apply_defaults;

pub struct CustomResourceStrategy {
    /// The version's `openAPIV3Schema`.
    pub schema: Option<Value>,
    /// `subresources.status` is set: status is written only through `/status`.
    pub status_enabled: bool,
}

impl Strategy for CustomResourceStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            apply_defaults(schema, obj);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.status_enabled
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match &self.schema {
            Some(schema) => crate::validation::validate(schema, obj),
            None => Vec::new(),
        }
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    fn checks_kube_finalizer_names(&self) -> bool {
        false
    }
}
