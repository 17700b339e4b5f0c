//! The registry pattern: a resource is a data row (`ResourceInfo`) plus a `Strategy` (per-kind
//! behaviour), served by one generic `RegistryStore` that owns the order of the object lifecycle
//! (upstream: k8s.io/apiserver/pkg/registry/generic/registry/store.go and pkg/registry/rest).
//! The registry never names a particular kind.

pub mod conversion;
pub(crate) mod fieldmanager;
pub mod reflector;
mod resource;
mod store;
mod strategy;

pub use conversion::{Conversion, ConvertingStore, SyncConversion};
pub use fieldmanager::ManagedFieldsRequest;
pub use resource::{
    ImmutableField, Refusal, ResourceInfo, STATUS_RESETS_METADATA, ScalePaths, SelectableField,
    SubresourceInfo,
};
pub(crate) use store::request_form;
pub use store::{
    DeleteOptions, DeleteOutcome, RegistryStore, Requester, UpdateOptions, WriteOptions,
    before_delete_preconditions, generated_name,
};
pub use strategy::{Finish, GenericStrategy, Strategy};
