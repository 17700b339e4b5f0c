//! The apiextensions layer (upstream: k8s.io/apiextensions-apiserver): custom resources served
//! from CustomResourceDefinitions, the delegate after the built-in groups in the server chain.
//!
//! - `handler`: the delegate. It serves every version of every established CRD from a table
//!   that `controller` swaps whole when CRDs change, so a request never waits on a rebuild.
//! - `controller`: upstream's naming, establishing and finalizer controllers in one loop over
//!   the CRDs: accepted names and conditions written to each CRD's status, the served table
//!   rebuilt, and the custom resources of a deleted CRD removed before its finalizer goes.
//! - `registration`: what one CRD version serves: its `ResourceInfo` row, strategy, storage and
//!   pruning schema.
//! - `conversion`: the conversion webhook (ConversionReview out, checked answer back), for
//!   versions of a CRD whose strategy is `Webhook`.
//! - `strategy`: the custom resource lifecycle rules (status reset, defaults from the schema).
//! - `schema`: structural schemas: defaults, and the OpenAPI form the pruner reads.
//! - `validation`: custom resources checked against their structural schema.
//! - `cel`: the CEL layer — `x-kubernetes-validations` rules (kube-cel), to be shared with the
//!   admission policies.
//! - `openapi`: the OpenAPI v3 documents of the served CRDs (`kubectl explain`).
//! - `table`: `kubectl get` columns from `additionalPrinterColumns`.
//!
//! Versions are ordered as Kubernetes orders them by `apimachinery::version`, which the
//! aggregator's discovery order uses too.
//!
//! - `crd`: the CustomResourceDefinition kind's own strategy and validation. The CRD objects are
//!   stored by the built-in catalog (crate `ironplane-kube`, which keeps upstream's discovery
//!   order), with this crate's strategy handed to it at start-up; this crate reads them back
//!   through that store.

pub mod cel;
mod controller;
mod conversion;
pub mod crd;
mod handler;
mod openapi;
mod registration;
mod schema;
mod strategy;
mod table;
pub mod validation;
use apimachinery::version;

pub use controller::run as run_controller;
pub use handler::{CrdHandler, StorageConfig};
pub use schema::apply_defaults as schema_defaults;
