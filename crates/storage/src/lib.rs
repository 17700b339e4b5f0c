//! The storage layer of the API server (upstream: `k8s.io/apiserver/pkg/storage`).
//!
//! Three layers, each a trait with the same verbs:
//! - [`Kv`] (`kv`): a revisioned key-value store with etcd v3 semantics, implemented by
//!   [`SqliteKv`] (`sqlite`, the embedded default) and [`EtcdKv`] (`etcd`, an etcd v3 cluster).
//! - [`Store`] (`store`): objects (JSON) under keys, with upstream's resourceVersion semantics,
//!   paging and predicates; [`KvStore`] implements it on any `Kv`, writing values with a
//!   [`StorageCodec`] (`codec`: JSON by default; the protobuf codec of built-in kinds comes
//!   from above, since this crate knows no kind).
//! - [`Cacher`] (`cacher`): the per-resource watch cache, itself a `Store` that wraps another.
//!
//! Errors: [`KvError`] stays below the `Store` seam; [`StorageError`] (`errors`) is what the
//! apiserver sees and maps to `metav1.Status`. This crate knows nothing of HTTP or of any
//! particular kind; per-resource knowledge (which fields are selectable) comes in as an
//! [`AttrsFn`].

pub mod cacher;
pub mod codec;
pub mod delegate;
pub mod errors;
pub mod etcd;
pub mod kv;
pub mod metrics;
pub mod sqlite;
pub mod store;
pub mod testing;
pub mod value;

#[cfg(test)]
mod conformance;

pub use cacher::{Cacher, CacherOptions};
pub use codec::{JsonCodec, StorageCodec, StorageMediaType, StoredVersion, read_stored};
pub use delegate::cached;
pub use errors::StorageError;
pub use etcd::{EtcdKv, EtcdOptions};
pub use kv::{KeyValue, Kv, KvError, KvEvent, Precondition, RangeResponse, TxnOutcome, prefix_end};
pub use metrics::ResourceMetrics;
pub use sqlite::{SqliteKv, SqliteOptions};
pub use store::{
    Attrs, AttrsFn, GetOptions, KvStore, ListOptions, ListResult, Object, Predicate,
    ResourceVersion, ResourceVersionMatch, Store, WatchEvent, WatchOptions, WatchStream,
    decode_continue, default_attrs, encode_continue, matches,
};
