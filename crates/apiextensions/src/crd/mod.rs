//! The CustomResourceDefinition kind itself: its strategy (defaults, lifecycle, warnings) and
//! validation, for the built-in catalog that stores CRD objects.

mod strategy;

pub use strategy::CustomResourceDefinitionStrategy;
