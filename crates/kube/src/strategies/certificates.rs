//! CertificateSigningRequests (upstream: pkg/apis/certificates/validation and
//! pkg/registry/certificates/certificates). A request is a PEM-wrapped PKCS#10 request whose
//! signature must hold; it names a signer and its key usages. The requester's identity is the
//! server's to write (`prepare_for_create_by` fills it from the authenticated user, over whatever
//! the client sent), and a new request carries no status.
//!
//! Writes are split by concern, as upstream's three strategies split them: the object itself
//! changes only in metadata; `/status` sets the certificate and conditions other than approval;
//! `/approval` sets the conditions only (Approved, Denied). Approved and Denied exclude each
//! other and none of Approved, Denied or Failed is ever removed.

use apimachinery::validation::{FieldError, FieldPath, is_dns1123_label, is_dns1123_subdomain};
use apiserver::authentication::UserInfo;
use apiserver::registry::Strategy;
use base64::Engine;
use serde_json::{Value, json};
use x509_parser::prelude::FromDer;

use super::fields::{list_at, set_at, str_at, strs_at};

/// The signer name that only v1beta1 could use.
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// Key usages, sorted as upstream's set lists them.
const KEY_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Condition types whose status may only be True.
const TRUE_ONLY_CONDITIONS: &[&str] = &["Approved", "Denied", "Failed"];

/// `validation.DNS1123SubdomainMaxLength`, `DNS1123LabelMaxLength`.
const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

pub struct CsrStrategy;

// ---------------------------------------------------------------------------------------------
// The request: PEM, PKCS#10, signature.
// ---------------------------------------------------------------------------------------------

/// The first PEM block of `text`: its type and decoded bytes (Go's `pem.Decode`, which skips
/// blocks it cannot read).
fn first_pem_block(text: &str) -> Option<(String, Vec<u8>)> {
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let type_end = after.find("-----")?;
        let block_type = &after[..type_end];
        let body_start = &after[type_end + 5..];
        let end_marker = format!("-----END {block_type}-----");
        let Some(body_end) = body_start.find(&end_marker) else {
            rest = body_start;
            continue;
        };
        let body: String = body_start[..body_end]
            .lines()
            .filter(|l| !l.contains(':'))
            .flat_map(str::chars)
            .filter(|c| !c.is_whitespace())
            .collect();
        match base64::engine::general_purpose::STANDARD.decode(body.as_bytes()) {
            Ok(bytes) => return Some((block_type.to_string(), bytes)),
            Err(_) => rest = &body_start[body_end..],
        }
    }
    None
}

/// The length of the outer DER element of `der` (tag and length octets included), when its
/// header can be read.
fn der_element_len(der: &[u8]) -> Option<usize> {
    let first = *der.get(1)?;
    if first & 0x80 == 0 {
        return Some(2 + first as usize);
    }
    let n = (first & 0x7f) as usize;
    if n == 0 || n > 4 {
        return None;
    }
    let len = der
        .get(2..2 + n)?
        .iter()
        .fold(0usize, |acc, b| (acc << 8) | *b as usize);
    Some(2 + n + len)
}

/// What upstream's `validateCSR` says about `request` (the decoded `spec.request` bytes), if
/// anything: Go's messages for a missing PEM block, unreadable DER, and a bad signature.
fn csr_error(request: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(request);
    let Some((block_type, der)) =
        first_pem_block(&text).filter(|(t, _)| t == "CERTIFICATE REQUEST")
    else {
        return Some("PEM block type must be CERTIFICATE REQUEST".into());
    };
    debug_assert_eq!(block_type, "CERTIFICATE REQUEST");
    match der_element_len(&der) {
        None => return Some("asn1: syntax error: data truncated".into()),
        Some(n) if n > der.len() => return Some("asn1: syntax error: data truncated".into()),
        Some(n) if n < der.len() => return Some("asn1: syntax error: trailing data".into()),
        Some(_) => {}
    }
    let csr = match x509_parser::certification_request::X509CertificationRequest::from_der(&der) {
        Ok((_, csr)) => csr,
        Err(_) => return Some("x509: malformed certificate request".into()),
    };
    if csr.verify_signature().is_err() {
        let algorithm = csr
            .certification_request_info
            .subject_pki
            .algorithm
            .algorithm
            .to_id_string();
        return Some(
            match algorithm.as_str() {
                "1.2.840.10045.2.1" => "x509: ECDSA verification failure",
                "1.3.101.112" => "x509: Ed25519 verification failure",
                _ => "crypto/rsa: verification error",
            }
            .into(),
        );
    }
    None
}

/// What `read` takes from a request as `spec.request` holds it (base64 PEM); the error says why
/// it could not be read (validation has refused such requests before admission sees them).
fn with_request<T>(
    request: &str,
    read: impl FnOnce(&x509_parser::certification_request::X509CertificationRequest<'_>) -> T,
) -> Result<T, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let Some((_, der)) = first_pem_block(&text).filter(|(t, _)| t == "CERTIFICATE REQUEST") else {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    };
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|_| "x509: malformed certificate request".to_string())?;
    Ok(read(&csr))
}

/// The subject's common name of a request, for the NodeRestriction admission plugin.
pub(crate) fn csr_common_name(request: &str) -> Result<String, String> {
    with_request(request, |csr| {
        csr.certification_request_info
            .subject
            .iter_common_name()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .last()
            .unwrap_or_default()
    })
}

/// The subject's organizations (its groups) of a request, for the CertificateSubjectRestriction
/// admission plugin.
pub(crate) fn csr_organizations(request: &str) -> Result<Vec<String>, String> {
    with_request(request, |csr| {
        csr.certification_request_info
            .subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------

/// What a write may keep because the stored request already had it (`getValidationOptions`).
#[derive(Clone, Copy, Default)]
struct Tolerances {
    both_approved_and_denied: bool,
    legacy_signer: bool,
    duplicate_condition_types: bool,
    empty_condition_type: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
    /// `allowArbitraryCertificate`: the update leaves the certificate as stored, or the stored
    /// one was already unreadable.
    arbitrary_certificate: bool,
}

fn condition_types(obj: &Value) -> Vec<&str> {
    obj.get("status")
        .map(|s| list_at(s, "conditions"))
        .unwrap_or(&[])
        .iter()
        .map(|c| str_at(c, "type"))
        .collect()
}

fn has_duplicates(values: &[&str]) -> bool {
    values
        .iter()
        .enumerate()
        .any(|(i, v)| values[..i].contains(v))
}

impl Tolerances {
    fn from_old(old: &Value) -> Self {
        let types = condition_types(old);
        let spec = old.get("spec").unwrap_or(&Value::Null);
        let usages = strs_at(spec, "usages");
        Self {
            both_approved_and_denied: types.contains(&"Approved") && types.contains(&"Denied"),
            legacy_signer: str_at(spec, "signerName") == LEGACY_UNKNOWN_SIGNER,
            duplicate_condition_types: has_duplicates(&types),
            empty_condition_type: types.contains(&""),
            unknown_usages: usages.iter().any(|u| !KEY_USAGES.contains(u)),
            duplicate_usages: has_duplicates(&usages),
            arbitrary_certificate: false,
        }
    }

    fn for_update(new: &Value, old: &Value) -> Self {
        let old_cert = certificate_bytes(old);
        Self {
            arbitrary_certificate: certificate_bytes(new) == old_cert
                || certificate_error(&old_cert).is_some(),
            ..Self::from_old(old)
        }
    }
}

/// `status.certificate`, decoded (a Go `[]byte`).
fn certificate_bytes(obj: &Value) -> Vec<u8> {
    let text = obj
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .unwrap_or("");
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_default()
}

/// One block as Go's `pem.Decode` reads it: the type, whether it had headers, the bytes, and
/// what follows. A `-----BEGIN ` counts at the start or after a newline; blocks that cannot be
/// read are skipped.
fn pem_decode(data: &[u8]) -> Option<(String, bool, Vec<u8>, &[u8])> {
    const START: &[u8] = b"-----BEGIN ";
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut rest = data;
    loop {
        rest = if rest.starts_with(START) {
            &rest[START.len()..]
        } else {
            let at = find(rest, b"\n-----BEGIN ")?;
            &rest[at + 1 + START.len()..]
        };
        let line_end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        let line = rest[..line_end]
            .strip_suffix(b"\r")
            .unwrap_or(&rest[..line_end]);
        let Some(block_type) = line.strip_suffix(b"-----") else {
            continue;
        };
        let block_type = String::from_utf8_lossy(block_type).into_owned();
        let mut body = rest.get(line_end + 1..).unwrap_or(&[]);
        let mut headers = false;
        while !body.is_empty() {
            let end = body.iter().position(|b| *b == b'\n').unwrap_or(body.len());
            if !body[..end].contains(&b':') {
                break;
            }
            headers = true;
            body = body.get(end + 1..).unwrap_or(&[]);
        }
        let end_marker = format!("-----END {block_type}-----");
        let Some(end_at) = find(body, end_marker.as_bytes()) else {
            continue;
        };
        let encoded: Vec<u8> = body[..end_at]
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            continue;
        };
        let after = &body[end_at + end_marker.len()..];
        let after = after
            .iter()
            .position(|b| *b == b'\n')
            .map_or(&after[after.len()..], |n| &after[n + 1..]);
        return Some((block_type, headers, bytes, after));
    }
}

/// `validateCertificate`: what is wrong with a certificate chain, if anything (an empty one is
/// fine). Go's x509 parser has many messages for malformed DER; this says its general one.
fn certificate_error(pem: &[u8]) -> Option<String> {
    if pem.is_empty() {
        return None;
    }
    let mut rest = pem;
    let mut blocks = 0;
    while let Some((block_type, headers, der, after)) = pem_decode(rest) {
        if block_type != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                apimachinery::validation::go_quote(&block_type)
            ));
        }
        if headers {
            return Some("no PEM block headers are permitted".into());
        }
        blocks += 1;
        let mut der = der.as_slice();
        if der.is_empty() {
            return Some("found CERTIFICATE PEM block containing 0 certificates".into());
        }
        while !der.is_empty() {
            match x509_parser::certificate::X509Certificate::from_der(der) {
                Ok((tail, _)) => der = tail,
                Err(_) => return Some("x509: malformed certificate".into()),
            }
        }
        rest = after;
    }
    if blocks == 0 {
        return Some("must contain at least one CERTIFICATE PEM block".into());
    }
    None
}

/// `ValidateSignerName` (core validation): `<domain>/<path>`, each part DNS-shaped.
fn validate_signer_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let segments: Vec<&str> = name.split('/').collect();
    let [domain, signer_path] = segments.as_slice() else {
        return vec![FieldError::invalid(
            path,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.len() > SUBDOMAIN_MAX {
        errs.push(FieldError::too_long(path, "", SUBDOMAIN_MAX as i64));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    // The first bad label only: the others would say the same.
    if let Some((label, msgs)) = labels
        .iter()
        .map(|l| (l, is_dns1123_label(l)))
        .find(|(_, m)| !m.is_empty())
    {
        for m in msgs {
            errs.push(FieldError::invalid(
                path,
                *domain,
                format!(
                    "validating label {}: {m}",
                    apimachinery::validation::go_quote(label)
                ),
            ));
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path,
            *domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some((label, msgs)) = signer_path
        .split('.')
        .map(|l| (l, is_dns1123_subdomain(l)))
        .find(|(_, m)| !m.is_empty())
    {
        for m in msgs {
            errs.push(FieldError::invalid(
                path,
                *signer_path,
                format!(
                    "validating label {}: {m}",
                    apimachinery::validation::go_quote(label)
                ),
            ));
        }
    }
    let max = SUBDOMAIN_MAX + (SUBDOMAIN_MAX + LABEL_MAX + 1) + 1;
    if name.len() > max {
        errs.push(FieldError::too_long(path, "", max as i64));
    }
    errs
}

/// Conditions: types present and once, True-only types True, Approved and Denied not together
/// (upstream's handwritten rule, which v1.36 keeps authoritative: its declarative twin is
/// alpha).
fn validate_conditions(obj: &Value, t: Tolerances) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("conditions");
    let conditions = obj
        .get("status")
        .map(|s| list_at(s, "conditions"))
        .unwrap_or(&[]);
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        let ty = str_at(c, "type");
        if !t.empty_condition_type && ty.is_empty() {
            errs.push(FieldError::required(&p.child("type"), ""));
        }
        let status = str_at(c, "status");
        let allowed: &[&str] = if TRUE_ONLY_CONDITIONS.contains(&ty) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errs.push(FieldError::required(&p.child("status"), ""));
        } else if !allowed.contains(&status) {
            errs.push(FieldError::not_supported(
                &p.child("status"),
                status,
                allowed,
            ));
        }
        // Each Approved after a Denied (and each Denied after an Approved) is reported.
        let conflict = match ty {
            "Approved" => {
                approved = true;
                denied
            }
            "Denied" => {
                denied = true;
                approved
            }
            _ => false,
        };
        if !t.both_approved_and_denied && conflict {
            errs.push(FieldError::invalid(
                &path,
                ty,
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if !t.duplicate_condition_types {
            if seen.contains(&ty) {
                errs.push(FieldError::duplicate(&p.child("type"), ty));
            }
            seen.push(ty);
        }
    }
    errs
}

fn validate_csr(obj: &Value, t: Tolerances) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = FieldPath::new("spec");
    let mut errs = Vec::new();
    let request_text = str_at(spec, "request");
    let request = base64::engine::general_purpose::STANDARD
        .decode(request_text)
        .unwrap_or_default();
    if let Some(why) = csr_error(&request) {
        // Upstream shows the request bytes as JSON does: `null` when there are none at all.
        let shown = match spec.get("request") {
            None | Some(Value::Null) => Value::Null,
            Some(_) => Value::from(request_text),
        };
        errs.push(FieldError::invalid(&path.child("request"), shown, why));
    }
    let usages = strs_at(spec, "usages");
    if usages.is_empty() {
        errs.push(FieldError::required(&path.child("usages"), ""));
    }
    if !t.unknown_usages {
        for (i, u) in usages.iter().enumerate() {
            if !KEY_USAGES.contains(u) {
                errs.push(FieldError::not_supported(
                    &path.child("usages").index(i),
                    *u,
                    KEY_USAGES,
                ));
            }
        }
    }
    if !t.duplicate_usages {
        for (i, u) in usages.iter().enumerate() {
            if usages[..i].contains(u) {
                errs.push(FieldError::duplicate(&path.child("usages").index(i), *u));
            }
        }
    }
    let signer = str_at(spec, "signerName");
    if !t.legacy_signer && signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            &path.child("signerName"),
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(validate_signer_name(signer, &path.child("signerName")));
    }
    if let Some(e) = set_at(spec, "expirationSeconds").and_then(Value::as_i64)
        && e < 600
    {
        errs.push(FieldError::invalid(
            &path.child("expirationSeconds"),
            e,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs.extend(validate_conditions(obj, t));
    if !t.arbitrary_certificate
        && let Some(why) = certificate_error(&certificate_bytes(obj))
    {
        errs.push(FieldError::invalid(
            &FieldPath::new("status").child("certificate"),
            "<certificate data>",
            why,
        ));
    }
    errs
}

/// Conditions of `ty` in `obj`.
fn conditions_of<'a>(obj: &'a Value, ty: &str) -> Vec<&'a Value> {
    obj.get("status")
        .map(|s| list_at(s, "conditions"))
        .unwrap_or(&[])
        .iter()
        .filter(|c| str_at(c, "type") == ty)
        .collect()
}

/// Which update path this is (`ValidateCertificateSigningRequest{,Status,Approval}Update`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum UpdatePath {
    Main,
    Status,
    Approval,
}

/// What every update checks beyond the object itself: Approved, Denied and Failed conditions are
/// never removed; approval conditions change only through `/approval`; the certificate is set
/// only through `/status`, and once issued never changes.
fn validate_update_rules(new: &Value, old: &Value, via: UpdatePath) -> Vec<FieldError> {
    let conditions_path = FieldPath::new("status").child("conditions");
    let mut errs = validate_csr(new, Tolerances::for_update(new, old));
    for ty in TRUE_ONLY_CONDITIONS {
        if conditions_of(new, ty).len() < conditions_of(old, ty).len() {
            errs.push(FieldError::forbidden(
                &conditions_path,
                format!(
                    "updates may not remove a condition of type {}",
                    apimachinery::validation::go_quote(ty)
                ),
            ));
        }
    }
    if via != UpdatePath::Approval {
        for ty in ["Approved", "Denied"] {
            let (n, o) = (conditions_of(new, ty), conditions_of(old, ty));
            if n.len() > o.len() {
                errs.push(FieldError::forbidden(
                    &conditions_path,
                    format!(
                        "updates may not add a condition of type {}",
                        apimachinery::validation::go_quote(ty)
                    ),
                ));
            }
            // A change in place cannot reach here: the status path keeps the stored instances
            // when their number is unchanged, and the others keep the stored status.
        }
    }
    let (new_cert, old_cert) = (certificate_bytes(new), certificate_bytes(old));
    if new_cert != old_cert {
        let path = FieldPath::new("status").child("certificate");
        if via != UpdatePath::Status {
            errs.push(FieldError::forbidden(
                &path,
                "updates may not set certificate content",
            ));
        } else if !old_cert.is_empty() {
            errs.push(FieldError::forbidden(
                &path,
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

/// `populateConditionTimestamps`: a condition without times gets now, or, for its transition,
/// the time of a stored condition of the same type and status.
fn populate_condition_timestamps(new: &mut Value, old: &Value) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let old_conditions = old
        .get("status")
        .map(|s| list_at(s, "conditions"))
        .unwrap_or(&[]);
    let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in conditions.iter_mut().filter(|c| c.is_object()) {
        if str_at(c, "lastUpdateTime").is_empty() {
            c["lastUpdateTime"] = json!(now);
        }
        if str_at(c, "lastTransitionTime").is_empty() {
            let (ty, status) = (str_at(c, "type"), str_at(c, "status"));
            let earlier = old_conditions
                .iter()
                .find(|o| {
                    str_at(o, "type") == ty
                        && str_at(o, "status") == status
                        && !str_at(o, "lastTransitionTime").is_empty()
                })
                .map(|o| str_at(o, "lastTransitionTime").to_string());
            c["lastTransitionTime"] = json!(earlier.unwrap_or_else(|| now.clone()));
        }
    }
}

/// `preserveConditionInstances`: the stored conditions of `ty` replace the new ones, in place,
/// when there are as many of each; otherwise the change stays for validation to refuse.
fn preserve_condition_instances(new: &mut Value, old: &Value, ty: &str) {
    let old_instances: Vec<Value> = conditions_of(old, ty).into_iter().cloned().collect();
    let Some(conditions) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let indices: Vec<usize> = conditions
        .iter()
        .enumerate()
        .filter(|(_, c)| str_at(c, "type") == ty)
        .map(|(i, _)| i)
        .collect();
    if indices.len() != old_instances.len() {
        return;
    }
    for (i, stored) in indices.into_iter().zip(old_instances) {
        conditions[i] = stored;
    }
}

// ---------------------------------------------------------------------------------------------
// The strategy.
// ---------------------------------------------------------------------------------------------

/// The requester as `spec` holds it: username, uid, groups, extra.
fn requester_fields(spec: &mut serde_json::Map<String, Value>, user: &UserInfo) {
    for f in ["username", "uid", "groups", "extra"] {
        spec.remove(f);
    }
    if !user.name.is_empty() {
        spec.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

impl Strategy for CsrStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for f in ["username", "uid", "groups", "extra"] {
                spec.remove(f);
            }
        }
        // Nobody creates a request already approved.
        if obj.is_object() {
            obj["status"] = json!({});
        }
    }

    fn prepare_for_create_by(&self, obj: &mut Value, user: &UserInfo) {
        self.prepare_for_create(obj);
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            requester_fields(spec, user);
        }
    }

    /// The request itself never changes after creation. The store has already kept the stored
    /// status for a write to the object (so what follows changes nothing there) and taken the
    /// client's for `/status`, where the stored Approved and Denied conditions are kept in place
    /// and new conditions get their times (upstream's status strategy).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let Some(n) = new.as_object_mut() else {
            return;
        };
        match old.get("spec") {
            Some(v) => n.insert("spec".into(), v.clone()),
            None => n.remove("spec"),
        };
        preserve_condition_instances(new, old, "Approved");
        preserve_condition_instances(new, old, "Denied");
        populate_condition_timestamps(new, old);
    }

    /// `/approval` changes the conditions and nothing else.
    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        if subresource != "approval" || !new.is_object() {
            return;
        }
        populate_condition_timestamps(new, old);
        let conditions = new.pointer("/status/conditions").cloned();
        let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
        match (conditions, status.as_object_mut()) {
            (Some(c), Some(s)) if !c.is_null() => {
                s.insert("conditions".into(), c);
            }
            (_, Some(s)) => {
                s.remove("conditions");
            }
            _ => {}
        }
        new["spec"] = old.get("spec").cloned().unwrap_or(Value::Null);
        new["status"] = status;
    }

    fn name_validator(&self) -> apimachinery::validation::NameValidator {
        // "We don't care what you call your certificate requests."
        apimachinery::validation::NameValidator::None
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_csr(obj, Tolerances::default())
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update_rules(new, old, UpdatePath::Main)
    }

    /// `/status` may set the certificate, not the approval conditions.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update_rules(new, old, UpdatePath::Status)
    }

    /// `/approval` may set the approval conditions, nothing else.
    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        let via = if subresource == "approval" {
            UpdatePath::Approval
        } else {
            UpdatePath::Main
        };
        validate_update_rules(new, old, via)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 request for CN=corpus-user1, O=corpus-group (the corpus's own).
    const REQUEST: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIb01JR1BBZ0VBTUMweEZEQVNCZ05WQkFNTUMyTnZjbkIxY3kxMWMyVnlNUlV3RXdZRFZRUUtEQXhqYjNKdwpkWE10WjNKdmRYQXdXVEFUQmdjcWhrak9QUUlCQmdncWhrak9QUU1CQndOQ0FBVHlYUkQ5am55Q2s2cjJuTXh3CklBeWc2dm1mRkdKQ0tLbk44T0ttR1k3WEJVeUVsSkhwT2hEOUU5SVlxNkYyNDdWekpWNWtTbHQ3RXpoOFZQZjMKYWdZTm9BQXdDZ1lJS29aSXpqMEVBd0lEU0FBd1JRSWdaY0hHZkdYaG9aa0F1R0hWTVp4K1p5OEJCK0NQeGlzQgptRGFZOC8rTmJ6Y0NJUUNMODYyRGpGcXZXb3krUGRwZ0x6c21nNURjNlBtK2tIQTQrUHlmNkNvbTl3PT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==";

    fn csr(spec: Value) -> Value {
        let mut c = json!({"metadata": {"name": "c"}, "spec": {"request": REQUEST, "signerName": "example.com/signer", "usages": ["client auth"]}});
        if let (Some(s), Some(extra)) = (c["spec"].as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        c
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_valid_request_passes() {
        assert!(CsrStrategy.validate(&csr(json!({}))).is_empty());
    }

    #[test]
    fn request_signer_usages_and_expiration() {
        let errs = CsrStrategy.validate(&csr(json!({"request": "bm90IGEgcGVt", "signerName": "", "usages": ["client auth", "client auth", "flying"], "expirationSeconds": 60})));
        assert_eq!(
            messages(&errs),
            [
                "spec.request: Invalid value: \"bm90IGEgcGVt\": PEM block type must be CERTIFICATE REQUEST",
                "spec.usages[2]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\"",
                "spec.usages[1]: Duplicate value: \"client auth\"",
                "spec.signerName: Required value",
                "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)",
            ]
        );
        let errs = CsrStrategy.validate(&csr(json!({"signerName": "signer"})));
        assert_eq!(
            messages(&errs),
            [
                "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
            ]
        );
        let errs = CsrStrategy.validate(&csr(json!({"signerName": "example/Bad"})));
        assert_eq!(errs.len(), 2);
        assert!(
            errs[0]
                .to_string()
                .ends_with("should be a domain with at least two segments separated by dots")
        );
    }

    #[test]
    fn a_truncated_request_is_go_s_data_truncated() {
        let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIICVjCCAT4CAQAwETEPMA0GA1UEAwwGZ29sZGVuMIIBIjANBgkqhkiG9w0BAQEF\n-----END CERTIFICATE REQUEST-----\n";
        assert_eq!(
            csr_error(pem.as_bytes()).as_deref(),
            Some("asn1: syntax error: data truncated")
        );
    }

    #[test]
    fn approval_sets_conditions_only_and_they_exclude_each_other() {
        let old = json!({"spec": {"request": REQUEST, "signerName": "example.com/signer", "usages": ["client auth"], "username": "alice"}, "status": {}});
        let mut new = json!({"spec": {"username": "mallory"}, "status": {"certificate": "eA==", "conditions": [{"type": "Approved", "status": "True", "reason": "R"}, {"type": "Denied", "status": "True", "reason": "R"}]}});
        CsrStrategy.prepare_for_subresource_update("approval", &mut new, &old);
        assert_eq!(new["spec"]["username"], "alice");
        assert!(new["status"].get("certificate").is_none());
        assert!(new["status"]["conditions"][0]["lastUpdateTime"].is_string());
        assert!(new["status"]["conditions"][1]["lastTransitionTime"].is_string());
        assert_eq!(
            messages(&CsrStrategy.validate_subresource_update("approval", &new, &old)),
            [
                "status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
            ]
        );
        // Through the object itself the same conditions are refused as additions.
        let errs = messages(&CsrStrategy.validate_update(&new, &old));
        assert!(errs.contains(
            &"status.conditions: Forbidden: updates may not add a condition of type \"Approved\"".to_string()
        ));
        // Every conflicting condition is reported, not only the first.
        let both = json!({"status": {"conditions": [{"type": "Denied", "status": "True"}, {"type": "Approved", "status": "True"}, {"type": "Approved", "status": "True"}]}});
        let errs = messages(&validate_conditions(&both, Tolerances::default()));
        assert_eq!(
            errs,
            [
                "status.conditions: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive",
                "status.conditions: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive",
                "status.conditions[2].type: Duplicate value: \"Approved\"",
            ]
        );
    }

    #[test]
    fn status_keeps_stored_approvals_and_checks_certificates() {
        let old = json!({"spec": {"request": REQUEST, "signerName": "example.com/signer", "usages": ["client auth"]}, "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "A", "lastUpdateTime": "2020-01-01T00:00:00Z", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        let mut new = old.clone();
        new["status"]["conditions"][0]["reason"] = json!("Changed");
        new["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Failed", "status": "True", "reason": "F"}));
        // "bm90IHBlbQ==" is "not pem".
        new["status"]["certificate"] = json!("bm90IHBlbQ==");
        CsrStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(new["status"]["conditions"][0]["reason"], "A");
        assert_eq!(new["status"]["conditions"][1]["reason"], "F");
        assert!(new["status"]["conditions"][1]["lastUpdateTime"].is_string());
        assert_eq!(
            messages(&CsrStrategy.validate_status_update(&new, &old)),
            [
                "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"
            ]
        );
        let pem = b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert_eq!(
            certificate_error(pem).as_deref(),
            Some("only CERTIFICATE PEM blocks are allowed, found \"CERTIFICATE REQUEST\"")
        );
        let pem = b"-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(
            certificate_error(pem).as_deref(),
            Some("no PEM block headers are permitted")
        );
        let pem = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(
            certificate_error(pem).as_deref(),
            Some("x509: malformed certificate")
        );
    }

    #[test]
    fn the_requester_comes_from_the_server() {
        let mut c = csr(json!({"username": "mallory", "groups": ["system:masters"]}));
        let user = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        };
        CsrStrategy.prepare_for_create_by(&mut c, &user);
        assert_eq!(c["spec"]["username"], "alice");
        assert_eq!(c["spec"]["groups"], json!(["system:authenticated"]));
        assert_eq!(c["status"], json!({}));
    }
}
