//! `metav1.Status`: the one error type every layer's errors turn into at the HTTP boundary, with
//! upstream's reasons, codes, messages and details.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::gvk::GroupResource;

/// `metav1.StatusReason`. The HTTP code comes from the constructor, not from the reason, because
/// upstream uses some reasons with more than one code (e.g. `NotFound` without details for an
/// unknown path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    AlreadyExists,
    Conflict,
    Gone,
    Expired,
    RequestEntityTooLarge,
    UnsupportedMediaType,
    Invalid,
    TooManyRequests,
    InternalError,
    ServiceUnavailable,
    Timeout,
    /// `StatusReasonUnknown` (empty): what upstream answers for an error that carries no status
    /// of its own (a failed conversion webhook, say).
    Unknown,
    /// A reason outside metav1's list: `StatusReason` is an open string type, and upstream
    /// hands a webhook's refusal to the client with the reason the webhook wrote.
    Other(Box<str>),
}

impl Reason {
    /// The reason a status names (e.g. a webhook's answer): one of metav1's, `Unknown` when
    /// empty, `Other` with the text as written otherwise.
    pub fn parse(s: &str) -> Reason {
        use Reason::*;
        if s.is_empty() {
            return Unknown;
        }
        [
            BadRequest,
            Unauthorized,
            Forbidden,
            NotFound,
            MethodNotAllowed,
            NotAcceptable,
            AlreadyExists,
            Conflict,
            Gone,
            Expired,
            RequestEntityTooLarge,
            UnsupportedMediaType,
            Invalid,
            TooManyRequests,
            InternalError,
            ServiceUnavailable,
            Timeout,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
        .unwrap_or_else(|| Other(s.into()))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Gone => "Gone",
            Reason::Expired => "Expired",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
            Reason::Unknown => "",
            Reason::Other(s) => s,
        }
    }
}

/// A reason is written as the string it is (Go's `StatusReason`).
impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(Reason::parse(&s))
    }
}

/// One `metav1.StatusCause`; `reason` is a `metav1.CauseType` such as `FieldValueInvalid`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// `metav1.StatusDetails`. Note that upstream puts the *resource* (`configmaps`) in `kind` for
/// NotFound/AlreadyExists/Conflict and the *Kind* (`ConfigMap`) for Invalid.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A failed request, as the client will see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    pub reason: Reason,
    pub message: String,
    /// `None` omits `details`; `Some(default)` writes `"details": {}` as upstream does for some
    /// errors (MethodNotAllowed, an unknown resource). Boxed because `Status` is the error of
    /// nearly every `Result` in the server, and most errors carry no details.
    pub details: Option<Box<StatusDetails>>,
    /// `metadata.continue`: a token to go on with, as upstream hands out with the 410 for a
    /// continue token whose revision was compacted.
    pub list_continue: Option<String>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Status {}

fn named(resource: &GroupResource, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.to_string(),
        group: resource.group.clone(),
        kind: resource.resource.clone(),
        ..Default::default()
    }
}

impl Status {
    pub fn new(code: u16, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            list_continue: None,
        }
    }

    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, Reason::BadRequest, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, Reason::Unauthorized, message)
    }

    /// `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(resource: &GroupResource, name: &str, why: impl std::fmt::Display) -> Self {
        let message = if name.is_empty() {
            format!("{resource} is forbidden: {why}")
        } else {
            format!("{resource} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, Reason::Forbidden, message).with_details(named(resource, name))
    }

    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        Self::new(
            404,
            Reason::NotFound,
            format!("{resource} \"{name}\" not found"),
        )
        .with_details(named(resource, name))
    }

    /// The answer for a path that names no resource the server knows.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            Reason::NotFound,
            "the server could not find the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            Reason::MethodNotAllowed,
            "the server does not allow this method on the requested resource",
        )
        .with_details(StatusDetails::default())
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, Reason::NotAcceptable, message)
    }

    pub fn already_exists(resource: &GroupResource, name: &str) -> Self {
        Self::new(
            409,
            Reason::AlreadyExists,
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(named(resource, name))
    }

    /// `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(resource: &GroupResource, name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(
            409,
            Reason::Conflict,
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(named(resource, name))
    }

    /// The optimistic-concurrency conflict: the client's resourceVersion is not the stored one.
    pub fn stale_resource_version(resource: &GroupResource, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 with reason `Expired`, as a watch or list from a compacted resourceVersion gets.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Expired, message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, Reason::Gone, message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, Reason::RequestEntityTooLarge, message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, Reason::UnsupportedMediaType, message)
    }

    /// 422: `<Kind> "<name>" is invalid: <causes>`. `kind` is the Kind (`ConfigMap`) and `group`
    /// its API group, as upstream's `NewInvalid` writes them.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let joined: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let summary = match joined.len() {
            0 => String::new(),
            1 => joined[0].clone(),
            _ => format!("[{}]", joined.join(", ")),
        };
        Self::new(
            422,
            Reason::Invalid,
            format!("{qualified} \"{name}\" is invalid: {summary}"),
        )
        .with_details(StatusDetails {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            causes,
            ..Default::default()
        })
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: i32) -> Self {
        Self::new(429, Reason::TooManyRequests, message).with_details(StatusDetails {
            retry_after_seconds,
            ..Default::default()
        })
    }

    /// 500. Anything that reaches a client this way is a bug or an outage, and is logged as such.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        Self::new(
            500,
            Reason::InternalError,
            format!("Internal error occurred: {message}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                message,
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, Reason::ServiceUnavailable, message)
    }

    /// Upstream's answer for an error that is not a status (`ErrorToAPIStatus`'s fallback): 500,
    /// no reason, the error's text as the message.
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, Reason::Unknown, message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, Reason::Timeout, message)
    }

    /// The `metav1.Status` object, as JSON.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.as_str(),
            "code": self.code,
        });
        // `reason` is omitted when empty, as Go's encoder does for `omitempty`.
        if self.reason == Reason::Unknown
            && let Some(m) = v.as_object_mut()
        {
            m.remove("reason");
        }
        if let Some(d) = &self.details {
            v["details"] = serde_json::to_value(d).unwrap_or_else(|_| json!({}));
        }
        if let Some(token) = &self.list_continue {
            v["metadata"]["continue"] = json!(token);
        }
        v
    }
}

/// A `metav1.Status` of success, as a delete without an object answers.
pub fn success_status(details: Option<StatusDetails>) -> Value {
    let mut v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(d) = details {
        v["details"] = serde_json::to_value(d).unwrap_or_else(|_| json!({}));
    }
    v
}

/// The `metav1.Status` of success that a create without an object of its own answers (a
/// pod's binding), with its 201 code as upstream writes it.
pub fn created_status() -> Value {
    let mut v = success_status(None);
    v["code"] = json!(201);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_upstream_shape() {
        let s = Status::not_found(&GroupResource::new("", "configmaps"), "nope");
        assert_eq!(
            s.to_json(),
            json!({"apiVersion":"v1","code":404,"details":{"kind":"configmaps","name":"nope"},"kind":"Status",
                   "message":"configmaps \"nope\" not found","metadata":{},"reason":"NotFound","status":"Failure"})
        );
    }

    #[test]
    fn invalid_joins_several_causes() {
        let cause = |f: &str| StatusCause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: f.into(),
        };
        let s = Status::invalid("apps", "Deployment", "d", vec![cause("a"), cause("b")]);
        assert_eq!(
            s.message,
            "Deployment.apps \"d\" is invalid: [a: Required value, b: Required value]"
        );
        assert_eq!(s.code, 422);
    }
}
