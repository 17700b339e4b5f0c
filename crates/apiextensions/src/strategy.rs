//! The custom resource strategy (upstream: apiextensions-apiserver
//! pkg/registry/customresource/strategy.go): defaults from the version's structural schema,
//! `status` reset on create when the status subresource is on, validation against the schema,
//! finalizer names only warned about, names as DNS subdomains.

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use serde_json::Value;

use crate::schema::apply_defaults;

pub struct CustomResourceStrategy {
    /// The served version's `apiVersion` and the CRD's kind.
    pub api_version: String,
    pub kind: String,
    /// The version's `openAPIV3Schema`.
    pub schema: Option<std::sync::Arc<Value>>,
    /// `subresources.status` is set: status is written only through `/status`.
    pub status_enabled: bool,
    /// The schema's `x-kubernetes-validations` rules, compiled.
    pub rules: Option<crate::cel::Rules>,
}

impl CustomResourceStrategy {
    /// Upstream's order: type meta, the schema, then the CEL rules unless a schema error makes
    /// the object unfit for them.
    fn validate_with_old(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let type_meta = self.validate_type_meta(obj);
        if !type_meta.is_empty() {
            return type_meta;
        }
        let mut errs = match &self.schema {
            Some(schema) => crate::validation::validate(schema, obj),
            None => Vec::new(),
        };
        if let Some(rules) = &self.rules {
            match crate::cel::blocking_error(&errs) {
                Some(blocked) => errs.push(blocked),
                None => errs.extend(rules.validate(obj, old)),
            }
        }
        errs
    }

    /// Upstream's `ValidateTypeMeta`: the object is of this kind and version; nothing else is
    /// checked when it is not.
    fn validate_type_meta(&self, obj: &Value) -> Vec<FieldError> {
        let text = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let mut errs = Vec::new();
        if text("kind") != self.kind {
            errs.push(FieldError::invalid(
                &FieldPath::new("kind"),
                Value::from(text("kind")),
                format!("must be {}", self.kind),
            ));
        }
        if text("apiVersion") != self.api_version {
            errs.push(FieldError::invalid(
                &FieldPath::new("apiVersion"),
                Value::from(text("apiVersion")),
                format!("must be {}", self.api_version),
            ));
        }
        errs
    }
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
        self.validate_with_old(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate_with_old(new, Some(old))
    }

    fn checks_kube_finalizer_names(&self) -> bool {
        false
    }
}
