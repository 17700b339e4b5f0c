//! Kubernetes API machinery shared by every layer: group/version/kind/resource names, object and
//! metadata access on JSON objects, `metav1.Status` errors, label and field selectors, field
//! validation helpers, serializers and patches, YAML bodies read as upstream reads them.
//!
//! This crate knows nothing of HTTP, storage or any particular kind: it is the vocabulary the
//! other crates speak.

pub mod duration;
pub mod fields;
pub mod gojson;
pub mod gvk;
pub mod labels;
pub mod managedfields;
pub mod object;
pub mod patch;
pub mod projection;
pub mod quantity;
pub mod schema;
pub mod status;
pub mod structured_merge;
pub mod validation;
pub mod version;
pub mod yaml;

pub use gvk::{GroupResource, GroupVersion, GroupVersionKind, GroupVersionResource};
pub use status::{Reason, Status, StatusCause, StatusDetails};
