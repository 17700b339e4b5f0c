//! The CustomResourceDefinition kind itself: its strategy (defaults, lifecycle, warnings) and
//! validation, for the built-in catalog that stores CRD objects.

mod internal_json;
mod schema_checks;
mod strategy;
mod validation;

pub use strategy::CustomResourceDefinitionStrategy;
