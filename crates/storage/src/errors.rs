//! `StorageError`: the object layer's error type (what `Store` and `Cacher` answer), and its
//! mapping to `metav1.Status` with upstream's codes, reasons and messages.
//!
//! Backend errors (`KvError`) are turned into these here; nothing above the storage crate should
//! see a `KvError`. The messages that clients read are upstream's, word for word, where upstream's
//! are deterministic.

use apimachinery::{GroupResource, Status, StatusCause, StatusDetails};

use crate::kv::KvError;

/// Upstream's message when a list's resourceVersion has been compacted.
pub const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

/// Upstream's message when the revision a continue token reads at has been compacted and no
/// fresh token can be made.
pub const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. \
     You can start a new list without the continue parameter.";

/// Upstream's message when the revision a continue token reads at has been compacted: the
/// answer carries a fresh token that goes on at the latest revision.
pub const CONTINUE_INCONSISTENT: &str = "The provided continue parameter is too old to display a consistent list result. \
     You can start a new list without the continue parameter, or use the continue token in this response to \
     retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - \
     objects that were created, modified, or deleted between the time the first chunk was returned and now may \
     show up in the list.";

/// Upstream's message when an etcd watch starts at a compacted revision.
pub const WATCH_EXPIRED: &str = "The resourceVersion for the provided watch is too old.";

/// Upstream's timeout filter's message, when a request outlives its deadline.
pub const ALLOTTED_TIMEOUT: &str = "request did not complete within the allotted timeout";

/// An error of the object store.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// 404.
    #[error("key not found: {key}")]
    NotFound { key: String },
    /// 409 AlreadyExists. `rejected` gives back the object the create was given (see
    /// `RequestTooLarge`), for a create that tries again under another generated name.
    #[error("key already exists: {key}")]
    AlreadyExists {
        key: String,
        rejected: Option<Box<serde_json::Value>>,
    },
    /// 409 Conflict: the expected resourceVersion is not the stored one.
    #[error(
        "the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict {
        key: String,
        current_resource_version: i64,
    },
    /// 410 Expired; the string is the whole message the client sees.
    #[error("{0}")]
    Expired(String),
    /// 410 Expired for a continue token whose revision was compacted, with a fresh token that
    /// reads on at the latest revision (upstream's `handleCompactedErrorForPaging`).
    #[error("{CONTINUE_INCONSISTENT}")]
    ContinueExpired { token: String },
    /// 504 Timeout with a retry-after: the requested resourceVersion is newer than the store's.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion { requested: i64, current: i64 },
    /// 400 BadRequest; the string is the whole message the client sees (e.g. `invalid continue
    /// token: continue key is not valid: ...`). Build the token case with
    /// [`StorageError::invalid_continue_token`].
    #[error("{0}")]
    InvalidContinue(String),
    /// The object could not be stored or read back (not a JSON object, ...).
    #[error("{0}")]
    InvalidObject(String),
    /// 504 Timeout: the backend cannot be reached (etcd down), so the request was given up.
    /// The string says why, for the log; clients read upstream's timeout message.
    #[error("{0}")]
    Unreachable(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
    /// 500: the backend was closed under the request, as the server stops. Apart from
    /// `Internal` because it is no fault to log: the controllers' last writes meet it.
    #[error("{}", KvError::Closed)]
    Closed,
    /// 500 without a reason, the message as it is: an error from outside the server (a
    /// conversion webhook) that upstream passes on without wrapping it in a status.
    #[error("{0}")]
    Unknown(String),
    /// 500 without a reason, etcd's message as it is: the write was refused as too large.
    /// Kept apart from `Unknown` because upstream's write handlers recognize it
    /// (`isTooLargeError`) and try the write again without managedFields. `rejected` gives
    /// back the object the write was given (without its resourceVersion), so that a caller
    /// can try again without keeping a copy of every object it writes; `None` where the store
    /// could not give it back.
    #[error("{message}")]
    RequestTooLarge {
        message: String,
        rejected: Option<Box<serde_json::Value>>,
    },
}

impl StorageError {
    /// The object a refused write gave back (`AlreadyExists`, `RequestTooLarge`), taken out.
    pub fn take_rejected(&mut self) -> Option<serde_json::Value> {
        match self {
            StorageError::AlreadyExists { rejected, .. }
            | StorageError::RequestTooLarge { rejected, .. } => rejected.take().map(|b| *b),
            _ => None,
        }
    }

    /// The error with `obj` as the object the refused write gives back, where it gives one.
    pub fn with_rejected(mut self, obj: Option<serde_json::Value>) -> Self {
        if let StorageError::AlreadyExists { rejected, .. }
        | StorageError::RequestTooLarge { rejected, .. } = &mut self
        {
            *rejected = obj.map(Box::new);
        }
        self
    }

    /// The 400 upstream answers for a continue token it cannot decode.
    pub fn invalid_continue_token(reason: impl std::fmt::Display) -> Self {
        StorageError::InvalidContinue(format!("invalid continue token: {reason}"))
    }

    /// This error as the `metav1.Status` upstream sends, for an object `name` (may be empty) of
    /// `resource`. The apiserver may map errors itself; this is the reference mapping.
    pub fn to_status(&self, resource: &GroupResource, name: &str) -> Status {
        match self {
            StorageError::NotFound { .. } => Status::not_found(resource, name),
            StorageError::AlreadyExists { .. } => Status::already_exists(resource, name),
            StorageError::Conflict { .. } => Status::stale_resource_version(resource, name),
            StorageError::Expired(message) => Status::expired(message.clone()),
            StorageError::ContinueExpired { token } => {
                let mut status = Status::expired(CONTINUE_INCONSISTENT);
                status.list_continue = Some(token.clone());
                status
            }
            StorageError::TooLargeResourceVersion { .. } => {
                // Upstream builds this with `NewTimeoutError(..., 1)` plus a cause that clients
                // (client-go's reflector) look for to retry instead of failing.
                Status::timeout(format!("Timeout: {self}")).with_details(StatusDetails {
                    causes: vec![StatusCause {
                        reason: "ResourceVersionTooLarge".into(),
                        message: "Too large resource version".into(),
                        field: String::new(),
                    }],
                    retry_after_seconds: 1,
                    ..Default::default()
                })
            }
            StorageError::InvalidContinue(message) => Status::bad_request(message.clone()),
            // Upstream's etcd client waits for etcd (gRPC's WaitForReady) until the request's
            // deadline, where the timeout filter answers this (`WithTimeoutForNonLongRunning
            // Requests`: `NewTimeoutError("request did not complete within the allotted
            // timeout", 0)`). The same answer, given once the etcd check has failed.
            StorageError::Unreachable(_) => Status::timeout(format!("Timeout: {ALLOTTED_TIMEOUT}"))
                .with_details(StatusDetails::default()),
            StorageError::InvalidObject(message) | StorageError::Internal(message) => {
                Status::internal(message)
            }
            StorageError::Closed => Status::internal(self),
            StorageError::Unknown(message) | StorageError::RequestTooLarge { message, .. } => {
                Status::unknown(message.clone())
            }
        }
    }
}

impl From<KvError> for StorageError {
    fn from(err: KvError) -> Self {
        match err {
            // Callers that know which message upstream uses (list, watch, continue) map
            // compaction themselves; this is the fallback.
            KvError::Compacted { .. } => StorageError::Expired(LIST_EXPIRED.to_string()),
            KvError::FutureRevision { requested, current } => {
                StorageError::TooLargeResourceVersion { requested, current }
            }
            KvError::Unreachable(_) => StorageError::Unreachable(err.to_string()),
            // Upstream's store returns etcd's errors as they are, and its handlers turn an error
            // that is no Status into a 500 without a reason carrying the error's text.
            KvError::Etcd(message) => StorageError::Unknown(message),
            KvError::RequestTooLarge(message) => StorageError::RequestTooLarge {
                message,
                rejected: None,
            },
            KvError::Closed => StorageError::Closed,
            KvError::Backend(_) => StorageError::Internal(err.to_string()),
            KvError::Transform(message) => StorageError::Internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_resource_version_is_a_timeout_with_retry() {
        let err = StorageError::TooLargeResourceVersion {
            requested: 10,
            current: 3,
        };
        let status = err.to_status(&GroupResource::new("", "configmaps"), "");
        assert_eq!(status.code, 504);
        assert_eq!(
            status.message,
            "Timeout: Too large resource version: 10, current: 3"
        );
        assert_eq!(
            status.details.as_ref().map(|d| d.retry_after_seconds),
            Some(1)
        );
    }

    /// What kube-apiserver answers when etcd does not answer before the request's deadline.
    #[test]
    fn unreachable_is_the_timeout_filters_answer() {
        let err = StorageError::from(KvError::Unreachable("etcd check failed".into()));
        let status = err.to_status(&GroupResource::new("", "configmaps"), "x");
        assert_eq!(
            status.to_json(),
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "code": 504, "reason": "Timeout", "details": {},
                "message": "Timeout: request did not complete within the allotted timeout"})
        );
    }

    /// A backend closed under a request: the same 500 as any internal error, told apart only so
    /// that it is not logged as the server's fault.
    #[test]
    fn a_closed_backend_is_an_internal_error() {
        let err = StorageError::from(KvError::Closed);
        assert_eq!(err, StorageError::Closed);
        let status = err.to_status(&GroupResource::new("", "configmaps"), "x");
        assert_eq!(status.code, 500);
        assert_eq!(status.reason, apimachinery::Reason::InternalError);
        assert_eq!(
            status.message,
            "Internal error occurred: storage backend is closed"
        );
    }

    #[test]
    fn invalid_continue_keeps_upstream_prefix() {
        let err = StorageError::invalid_continue_token("continue key is not valid");
        assert_eq!(
            err.to_string(),
            "invalid continue token: continue key is not valid"
        );
        assert_eq!(
            err.to_status(&GroupResource::new("", "configmaps"), "")
                .code,
            400
        );
    }
}
