//! The `Kv` trait: a revisioned key-value store with etcd v3 semantics, the one seam between the
//! object layer (`Store`) and a backend (embedded SQLite, etcd).
//!
//! This module owns the vocabulary (key-values, transactions that compare a key's `mod_revision`,
//! ranges at a revision, watches from a revision, compaction) and nothing else: it knows no
//! Kubernetes object, no JSON, and no resourceVersion string. Backends must keep etcd's rules so
//! that an etcd backend can implement the same trait without the layers above noticing:
//!
//! - one store-wide revision counter; every successful write (create, update, delete) gets the
//!   next revision, and a failed compare consumes none;
//! - `mod_revision` is the revision of the key's last write, `create_revision` the revision of the
//!   write that (re)created it;
//! - a read at a revision older than the compacted revision fails with [`KvError::Compacted`],
//!   one newer than the current revision with [`KvError::FutureRevision`].

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

/// One key at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    pub create_revision: i64,
    pub mod_revision: i64,
}

/// What a compare-and-write transaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// The compare held and the write committed at `revision`; `prev` is the key's value before it.
    Succeeded {
        revision: i64,
        prev: Option<KeyValue>,
    },
    /// The compare failed; `current` is the key's value now (`None`: absent).
    Failed { current: Option<KeyValue> },
}

/// What a write requires of its key's current value: etcd's transaction compare, one rule for
/// every backend (SQLite evaluates it, etcd is sent it as compares).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// The key must be absent (a create).
    Absent,
    /// The key must exist and, when given, have been last written at `mod_revision` (an update
    /// always names one; a delete may not). An absent key never matches, even for an expected
    /// revision of 0.
    Exists { mod_revision: Option<i64> },
}

impl Precondition {
    /// Whether the key's `current` value (`None`: absent) satisfies the precondition.
    pub fn holds(self, current: Option<&KeyValue>) -> bool {
        match (self, current) {
            (Precondition::Absent, current) => current.is_none(),
            (Precondition::Exists { .. }, None) => false,
            (Precondition::Exists { mod_revision }, Some(kv)) => {
                mod_revision.is_none_or(|expected| expected == kv.mod_revision)
            }
        }
    }
}

/// The answer to [`Kv::range`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeResponse {
    /// The keys found, in key order, at most `limit` of them.
    pub kvs: Vec<KeyValue>,
    /// More keys exist in the range after the last one returned.
    pub more: bool,
    /// How many keys the whole range holds, regardless of the limit (as etcd's `count`).
    pub count: i64,
    /// The store revision the read was served at.
    pub revision: i64,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvEvent {
    /// A key was created or updated; `prev` is its value before (`None`: it was created).
    Put {
        kv: KeyValue,
        prev: Option<KeyValue>,
    },
    /// A key was deleted at `mod_revision`; `prev` is its last value.
    Delete {
        key: String,
        mod_revision: i64,
        prev: Option<KeyValue>,
    },
    /// etcd's progress notification: every event for the watched prefix up to `revision` has been
    /// delivered, although the store moved on with writes to other keys. The `Cacher` relies on
    /// these to know that it has caught up with the store for a consistent read.
    Progress { revision: i64 },
}

impl KvEvent {
    /// The revision this event happened at (for progress: the revision it vouches for).
    pub fn revision(&self) -> i64 {
        match self {
            KvEvent::Put { kv, .. } => kv.mod_revision,
            KvEvent::Delete { mod_revision, .. } => *mod_revision,
            KvEvent::Progress { revision } => *revision,
        }
    }

    /// The key the event is about; `None` for a progress notification.
    pub fn key(&self) -> Option<&str> {
        match self {
            KvEvent::Put { kv, .. } => Some(&kv.key),
            KvEvent::Delete { key, .. } => Some(key),
            KvEvent::Progress { .. } => None,
        }
    }
}

/// Errors of a `Kv` backend.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// The requested revision's history was removed by compaction (etcd's `ErrCompacted`).
    #[error(
        "mvcc: required revision has been compacted (requested {requested}, compacted {compact_revision})"
    )]
    Compacted {
        requested: i64,
        compact_revision: i64,
    },
    /// The requested revision is newer than the store's (etcd's `ErrFutureRev`).
    #[error(
        "mvcc: required revision is a future revision (requested {requested}, current {current})"
    )]
    FutureRevision { requested: i64, current: i64 },
    /// The backend was shut down.
    #[error("storage backend is closed")]
    Closed,
    /// The backend cannot be reached (etcd down, frozen or cut off): the request was given up
    /// instead of waiting for it to come back. A write already sent may still be applied, as
    /// after upstream's timeout; one made while the backend is known unreachable is not sent.
    #[error("storage backend unreachable: {0}")]
    Unreachable(String),
    /// etcd refused the request (`etcdserver: leader changed`, `etcdserver: request timed
    /// out`, ...); the message is etcd's own, which upstream hands to clients unchanged.
    #[error("{0}")]
    Etcd(String),
    /// etcd refused a write as larger than it takes (`etcdserver: request is too large`, past
    /// its `--max-request-bytes`, or gRPC's message limit); the message is the one upstream's
    /// client reports. Upstream's handlers try such a write again without managedFields.
    #[error("{0}")]
    RequestTooLarge(String),
    /// Anything else the backend reported (I/O, corruption, ...).
    #[error("storage backend error: {0}")]
    Backend(String),
    /// A stored value could not be transformed (decrypted) or a value to store could not be
    /// encrypted; the message is upstream's, as clients read it.
    #[error("{0}")]
    Transform(String),
}

/// A revisioned key-value store with etcd v3 semantics. See the module documentation for the
/// rules every implementation keeps.
#[async_trait]
pub trait Kv: Send + Sync + 'static {
    /// The key's current value (`None`: absent) and the store's current revision.
    async fn get(&self, key: &str) -> Result<(Option<KeyValue>, i64), KvError>;

    /// The key's current value for an update, and whether it is *stale*: stored in a form that
    /// is not the current one (encrypted with a key that is no longer the write key), so that an
    /// update must write it even when the object did not change (upstream's GuaranteedUpdate).
    /// Backends store values as given, so nothing they hold is stale.
    async fn get_for_update(&self, key: &str) -> Result<(Option<KeyValue>, bool), KvError> {
        Ok((self.get(key).await?.0, false))
    }

    /// Whether values may be stale (see [`Kv::get_for_update`]): true for the encryption
    /// decorator, so that the layers above do not skip unchanged updates without asking.
    fn transforms_values(&self) -> bool {
        false
    }

    /// Keys in `[start, end)` in key order, as of `revision` (0 = latest); `limit` 0 = no limit.
    /// An empty `end` means "no upper bound" (etcd spells it `"\0"`). A compacted revision gives
    /// [`KvError::Compacted`], a revision newer than the store's [`KvError::FutureRevision`].
    async fn range(
        &self,
        start: &str,
        end: &str,
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, KvError>;

    /// Writes `key` only if it is absent.
    async fn create(&self, key: &str, value: Bytes) -> Result<TxnOutcome, KvError>;

    /// Writes `key` only if it exists with `mod_revision == expected_mod_revision`.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: i64,
    ) -> Result<TxnOutcome, KvError>;

    /// Deletes `key` if it exists and, when given, its `mod_revision` is `expected_mod_revision`.
    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<i64>,
    ) -> Result<TxnOutcome, KvError>;

    /// Events for keys starting with `prefix`, strictly after `after_revision`, in revision order,
    /// then live ones as they commit. History older than the compacted revision gives
    /// [`KvError::Compacted`] (at once, or as the stream's last item if compaction overtakes a slow
    /// reader). Dropping the receiver ends the watch.
    async fn watch(
        &self,
        prefix: &str,
        after_revision: i64,
    ) -> Result<mpsc::Receiver<Result<KvEvent, KvError>>, KvError>;

    /// The store's current revision (the last committed write's).
    async fn current_revision(&self) -> Result<i64, KvError>;

    /// Removes history superseded at `revision`: reads at older revisions fail afterwards.
    async fn compact(&self, revision: i64) -> Result<(), KvError>;

    /// Asks every open watch for a progress notification (etcd's `RequestWatchProgress`): a
    /// cache waiting to reach a revision learns from it that nothing it watches changed up to
    /// there. Wrappers must pass it on.
    fn request_progress(&self);

    /// Whether a cache following this store's watches learns, after [`Kv::current_revision`],
    /// that it has caught up (from events or progress notifications) soon enough to serve
    /// consistent reads (upstream: etcd's `RequestWatchProgress` support). When not, consistent
    /// reads go to the store, as upstream does on such an etcd.
    fn consistent_reads_from_cache(&self) -> bool {
        true
    }
}

/// The smallest key greater than every key that starts with `prefix` (etcd's "range end" for a
/// prefix), so that `[prefix, prefix_end(prefix))` is exactly the keys under `prefix`.
///
/// Keys are UTF-8 here, so the last *character* is incremented (etcd increments the last byte,
/// which is the same for ASCII keys). An empty prefix, or one made only of `char::MAX`, has no
/// bound: the answer is `""`, which [`Kv::range`] reads as "no upper bound".
pub fn prefix_end(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // Skip the surrogate gap: the next scalar value after U+D7FF is U+E000.
        let next = match last as u32 {
            0xD7FF => Some('\u{E000}'),
            c => char::from_u32(c + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return chars.into_iter().collect();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_character() {
        assert_eq!(prefix_end("/registry/configmaps/"), "/registry/configmaps0");
        assert_eq!(prefix_end("a"), "b");
        assert_eq!(prefix_end("a\u{D7FF}"), "a\u{E000}");
        assert_eq!(prefix_end("ab\u{10FFFF}"), "ac");
        assert_eq!(prefix_end(""), "");
        assert_eq!(prefix_end("\u{10FFFF}"), "");
        // Every key under the prefix sorts below the end, byte-wise as SQLite and etcd compare.
        let end = prefix_end("/a/");
        for key in ["/a/", "/a/b", "/a/\u{10FFFF}\u{10FFFF}"] {
            assert!(key.as_bytes() < end.as_bytes(), "{key}");
        }
        assert!("/a0".as_bytes() >= end.as_bytes());
    }

    /// etcd's compares as both backends apply them: a create needs the key absent; an update or
    /// delete needs it present, at the expected revision when one is given — 0 included, which
    /// an absent key (whose mod_revision etcd reports as 0) must not match.
    #[test]
    fn preconditions_follow_etcds_compares() {
        let at = |mod_revision| KeyValue {
            key: "/k".into(),
            value: Bytes::new(),
            create_revision: 1,
            mod_revision,
        };
        let exists = |mod_revision| Precondition::Exists { mod_revision };
        for (precondition, current, holds) in [
            (Precondition::Absent, None, true),
            (Precondition::Absent, Some(at(3)), false),
            (exists(None), None, false),
            (exists(None), Some(at(3)), true),
            (exists(Some(3)), Some(at(3)), true),
            (exists(Some(2)), Some(at(3)), false),
            (exists(Some(0)), None, false),
            (exists(Some(3)), None, false),
        ] {
            assert_eq!(
                precondition.holds(current.as_ref()),
                holds,
                "{precondition:?} on {current:?}"
            );
        }
    }
}
