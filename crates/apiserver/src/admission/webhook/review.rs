//! AdmissionReview: the request a webhook receives and the checks its answer must pass
//! (upstream: webhook/request/admissionreview.go), and a refusal as the client sees it
//! (webhook/errors/statuserror.go).

use apimachinery::{Reason, Status, StatusDetails};
use base64::Engine;
use serde_json::{Map, Value, json};

use crate::admission::{Attributes, Operation};

/// The resource and kind a webhook is called for: the request's own, or the equivalent version
/// its rules matched. The kind is the subresource's own where it has one, so its group and
/// version may differ from the resource's (`apps/v1 deployments/scale` is `autoscaling/v1
/// Scale`).
pub(crate) struct Invocation {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind_group: String,
    pub kind_version: String,
    pub kind: String,
}

impl Invocation {
    /// The invocation for a request's subresource of `info` (the request's resource or an
    /// equivalent version of it).
    pub fn of(info: &crate::registry::ResourceInfo, subresource: &str) -> Invocation {
        let (kind_group, kind_version, kind) = crate::admission::kind_for(info, subresource);
        Invocation {
            group: info.group.clone(),
            version: info.version.clone(),
            resource: info.resource.clone(),
            kind_group: kind_group.to_string(),
            kind_version: kind_version.to_string(),
            kind: kind.to_string(),
        }
    }
}

/// The operation's options object, as the handlers hand it to admission.
fn options(attrs: &Attributes<'_>) -> Value {
    let kind = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return Value::Null,
    };
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if attrs.dry_run {
        o["dryRun"] = json!(["All"]);
    }
    o
}

/// `userInfo` with Go's `omitempty` fields.
pub(super) fn user_info(attrs: &Attributes<'_>) -> Value {
    let u = attrs.user;
    let mut m = Map::new();
    if !u.name.is_empty() {
        m.insert("username".into(), json!(u.name));
    }
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

/// The `AdmissionRequest` fields a webhook and a CEL `request` share (`uid`, `object` and
/// `oldObject` aside).
pub(crate) fn request_fields(attrs: &Attributes<'_>, inv: &Invocation) -> Map<String, Value> {
    let (rg, rv, rk) = attrs.kind();
    let info = attrs.resource;
    let mut r = Map::new();
    r.insert(
        "kind".into(),
        json!({"group": inv.kind_group, "version": inv.kind_version, "kind": inv.kind}),
    );
    r.insert(
        "resource".into(),
        json!({"group": inv.group, "version": inv.version, "resource": inv.resource}),
    );
    if !attrs.subresource.is_empty() {
        r.insert("subResource".into(), json!(attrs.subresource));
    }
    r.insert(
        "requestKind".into(),
        json!({"group": rg, "version": rv, "kind": rk}),
    );
    r.insert(
        "requestResource".into(),
        json!({"group": info.group, "version": info.version, "resource": info.resource}),
    );
    if !attrs.subresource.is_empty() {
        r.insert("requestSubResource".into(), json!(attrs.subresource));
    }
    if !attrs.name.is_empty() {
        r.insert("name".into(), json!(attrs.name));
    }
    if !attrs.namespace.is_empty() {
        r.insert("namespace".into(), json!(attrs.namespace));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), user_info(attrs));
    r.insert("dryRun".into(), json!(attrs.dry_run));
    r.insert("options".into(), options(attrs));
    r
}

/// The review sent to a webhook, in the first version it accepts that is known here.
pub(super) fn request(
    versions: &[String],
    uid: &str,
    attrs: &Attributes<'_>,
    inv: &Invocation,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Result<(&'static str, Value), String> {
    let version = versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some("admission.k8s.io/v1"),
            "v1beta1" => Some("admission.k8s.io/v1beta1"),
            _ => None,
        })
        .ok_or("webhook does not accept known AdmissionReview versions (v1, v1beta1)")?;
    let mut r = Map::new();
    r.insert("uid".into(), json!(uid));
    r.extend(request_fields(attrs, inv));
    r.insert("object".into(), object.cloned().unwrap_or(Value::Null));
    r.insert(
        "oldObject".into(),
        old_object.cloned().unwrap_or(Value::Null),
    );
    Ok((
        version,
        json!({"kind": "AdmissionReview", "apiVersion": version, "request": r}),
    ))
}

/// A webhook's verified answer.
pub(super) struct Answer {
    pub allowed: bool,
    pub result: Option<Value>,
    /// A JSONPatch (the only patch type there is), decoded from base64.
    pub patch: Option<Vec<u8>>,
    pub patch_type: String,
    pub warnings: Vec<String>,
    /// `auditAnnotations`, published as `<webhook name>/<key>`.
    pub audit_annotations: Vec<(String, String)>,
}

/// `VerifyAdmissionResponse`: the answer must be an AdmissionReview of the version sent, with
/// the request's uid, and only a mutating webhook may patch.
pub(super) fn verify(
    version: &str,
    uid: &str,
    mutating: bool,
    review: &Value,
) -> Result<Answer, String> {
    let Some(response) = review.get("response").filter(|r| !r.is_null()) else {
        return Err("webhook response was absent".into());
    };
    let text = |f: &str| response.get(f).and_then(Value::as_str).unwrap_or("");
    let patch = match response.get("patch") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?,
        ),
        Some(_) => return Err("response.patch must be a base64 string".into()),
    };
    let patch_type = response.get("patchType").and_then(Value::as_str);
    let v1 = version == "admission.k8s.io/v1";
    let mut answer = Answer {
        allowed: response
            .get("allowed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        // `status` in JSON, `Result` in Go.
        result: response.get("status").filter(|r| !r.is_null()).cloned(),
        patch: None,
        patch_type: String::new(),
        warnings: response
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        audit_annotations: response
            .get("auditAnnotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
    };
    if !v1 {
        if mutating && patch.is_some() {
            answer.patch = patch;
            answer.patch_type = "JSONPatch".into();
        }
        return Ok(answer);
    }
    if text("uid") != uid {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            text("uid")
        ));
    }
    let got = (
        review
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        review.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    if got != ("admission.k8s.io/v1", "AdmissionReview") {
        let (group, version) = got.0.rsplit_once('/').unwrap_or(("", got.0));
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={}",
            got.1
        ));
    }
    if mutating {
        match (&patch, patch_type) {
            (Some(_), None) => {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            (None, Some(_)) => {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            (_, Some("")) => {
                return Err("webhook returned invalid response.patchType of \"\"".into());
            }
            _ => {}
        }
        answer.patch = patch;
        answer.patch_type = patch_type.unwrap_or("").to_string();
    } else {
        if patch.is_some() {
            return Err("validating webhook may not return response.patch".into());
        }
        if patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    Ok(answer)
}

/// `ToStatusErr`: a refusal keeps the webhook's code (at least 400), reason and details, and
/// its message is prefixed with who refused.
pub(super) fn denied(webhook: &str, result: Option<&Value>) -> Status {
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let empty = Value::Null;
    let result = result.unwrap_or(&empty);
    let text = |f: &str| result.get(f).and_then(Value::as_str).unwrap_or("");
    let code = result
        .get("code")
        .and_then(Value::as_u64)
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400) as u16;
    let message = match (text("message"), text("reason")) {
        (m, _) if !m.is_empty() => format!("{denied_by}: {m}"),
        (_, r) if !r.is_empty() => format!("{denied_by}: {r}"),
        _ => format!("{denied_by} without explanation"),
    };
    let mut status = Status::new(code, Reason::parse(text("reason")), message);
    if let Some(d) = result.get("details").filter(|d| d.is_object()) {
        let details: StatusDetails = serde_json::from_value(d.clone()).unwrap_or_default();
        status = status.with_details(details);
    }
    status
}

/// `ErrCallingWebhook` as an internal error (a webhook that failed closed).
pub(super) fn calling_failed(webhook: &str, why: impl std::fmt::Display) -> Status {
    Status::internal(format!("failed calling webhook {webhook:?}: {why}"))
}

/// `NewDryRunUnsupportedErr`.
pub(super) fn dry_run_unsupported(webhook: &str) -> Status {
    Status::bad_request(format!(
        "admission webhook {webhook:?} does not support dry run"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_the_webhooks_own_reason() {
        let status = denied(
            "deny.example.com",
            Some(&json!({"code": 409, "reason": "PolicyViolation", "message": "no"})),
        );
        let body = status.to_json();
        assert_eq!(body["reason"], "PolicyViolation");
        assert_eq!(body["code"], 409);
        assert_eq!(
            body["message"],
            "admission webhook \"deny.example.com\" denied the request: no"
        );
        // One of metav1's reasons stays that reason; none at all is omitted.
        assert_eq!(
            denied("d", Some(&json!({"reason": "Forbidden"}))).reason,
            Reason::Forbidden
        );
        assert!(denied("d", None).to_json().get("reason").is_none());
    }
}
