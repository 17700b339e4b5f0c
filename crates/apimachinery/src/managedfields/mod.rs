//! Field management and server-side apply, driven by schemas (upstream:
//! k8s.io/apimachinery/pkg/util/managedfields and sigs.k8s.io/structured-merge-diff).
//!
//! `fieldpath` is the vocabulary (paths, sets, `fieldsV1`), `typed` reads objects through
//! their schema (field sets, comparisons, removals), `manager` moves ownership on updates and
//! applies and keeps `metadata.managedFields`, `scale` carries managers between a parent and
//! its Scale. The registry calls [`FieldManager`] on every write; nothing here knows HTTP or
//! storage.

pub mod fieldpath;
pub mod manager;
pub mod scale;
pub mod typed;

pub use fieldpath::{Path, PathElement, Set};
pub use manager::{
    ApplyError, FieldManager, Managed, OneVersion, VersionConverter, conflict_status,
    manager_or_user_agent, reset_set,
};
pub use typed::Ty;
