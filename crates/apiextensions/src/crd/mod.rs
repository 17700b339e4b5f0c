//! The CustomResourceDefinition kind itself: its strategy (defaults, lifecycle, warnings),
//! validation, and the v1beta1 form kube-apiserver stores (`stored`), for the built-in catalog
//! that stores CRD objects.

mod internal_json;
mod schema_checks;
mod stored;
mod strategy;
mod validation;

pub use stored::STORED_VERSIONS;
pub use strategy::CustomResourceDefinitionStrategy;

/// The errors a CRD with this top-level schema gets on create (for other modules' tests).
#[cfg(test)]
pub(crate) fn schema_errors_on_create(
    schema: &serde_json::Value,
) -> Vec<apimachinery::validation::FieldError> {
    schema_checks::validate_validation(
        Some(&serde_json::json!({ "openAPIV3Schema": schema })),
        false,
        &schema_checks::Options::for_create(),
        &apimachinery::validation::FieldPath::new("s"),
        "v1",
    )
}
