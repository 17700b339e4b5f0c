//! Secrets: `stringData` merged into `data` on the way in (upstream's conversion to the internal
//! type does it, so nothing downstream sees `stringData`), type `Opaque` by default, valid keys,
//! the 1 MiB total, what each well-known type requires, an immutable type, and the immutability
//! of `immutable` Secrets, as upstream's `ValidateSecret(Update)` has them.

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::registry::Strategy;
use base64::Engine as _;
use serde_json::Value;

use super::configmap::{
    MAX_TOTAL_BYTES, decoded_len, string_map, validate_immutable, validate_keys,
};
use super::object_at;

pub struct SecretStrategy;

/// `stringData` wins over `data` key by key, then goes: upstream's v1 → internal conversion.
fn merge_string_data(obj: &mut Value) {
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    if let Some(data) = object_at(obj, "data").as_object_mut() {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, Value::from(encoded));
        }
    }
}

fn data_has(obj: &Value, key: &str) -> bool {
    string_map(obj, "data").is_some_and(|d| d.contains_key(key))
}

/// What the well-known secret types require of their keys.
fn validate_type(obj: &Value) -> Vec<FieldError> {
    let data = FieldPath::new("data");
    let required = |key: &str| FieldError::required(&data.key(key), "");
    let mut errs = Vec::new();
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let named = obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !named {
                errs.push(FieldError::required(
                    &FieldPath::new("metadata")
                        .child("annotations")
                        .key("kubernetes.io/service-account.name"),
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => {
            errs.extend(validate_json_key(obj, ".dockercfg"));
        }
        "kubernetes.io/dockerconfigjson" => {
            errs.extend(validate_json_key(obj, ".dockerconfigjson"));
        }
        "kubernetes.io/basic-auth" if !data_has(obj, "username") && !data_has(obj, "password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        "kubernetes.io/ssh-auth" => {
            let key = string_map(obj, "data").and_then(|d| d.get("ssh-privatekey"));
            if key.is_none_or(|v| decoded_len(v) == 0) {
                errs.push(required("ssh-privatekey"));
            }
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !data_has(obj, key) {
                    errs.push(required(key));
                }
            }
        }
        _ => {}
    }
    errs
}

/// A key that must hold a JSON object (docker configs). Upstream shows the error of Go's JSON
/// decoder; serde_json's words differ.
fn validate_json_key(obj: &Value, key: &str) -> Vec<FieldError> {
    let path = FieldPath::new("data").key(key);
    let Some(value) = string_map(obj, "data").and_then(|d| d.get(key)) else {
        return vec![FieldError::required(&path, "")];
    };
    let bytes = value
        .as_str()
        .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
        .unwrap_or_default();
    // Go's syntax errors first (its scanner runs before decoding); then the document must be an
    // object.
    let error = match apimachinery::gojson::check(&bytes) {
        Err(go) => Some(go),
        Ok(()) => serde_json::from_slice::<serde_json::Map<String, Value>>(&bytes)
            .err()
            .map(|e| e.to_string()),
    };
    error
        .map(|e| FieldError::invalid(&path, "<secret contents redacted>", e))
        .into_iter()
        .collect()
}

/// `warningsForSecret`: a TLS Secret whose pair Go's `tls.X509KeyPair` refuses. Only its PEM
/// stage is reproduced (no certificate block, no private key block); the parse of the DER
/// certificate and key and their match are not checked here.
fn tls_warnings(obj: &Value) -> Vec<String> {
    if obj.get("type").and_then(Value::as_str) != Some("kubernetes.io/tls") {
        return Vec::new();
    }
    let bytes = |key: &str| {
        string_map(obj, "data")
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
            .unwrap_or_default()
    };
    let go_list = |types: &[String]| format!("[{}]", types.join(" "));
    let cert_types = pem_block_types(&bytes("tls.crt"));
    if !cert_types.iter().any(|t| t == "CERTIFICATE") {
        let msg = match cert_types.as_slice() {
            [] => "tls: failed to find any PEM data in certificate input".to_string(),
            [only] if only.ends_with("PRIVATE KEY") => "tls: failed to find certificate PEM data \
                in certificate input, but did find a private key; PEM inputs may have been switched"
                .to_string(),
            all => format!(
                "tls: failed to find \"CERTIFICATE\" PEM block in certificate input after \
                 skipping PEM blocks of the following types: {}",
                go_list(all)
            ),
        };
        return vec![msg];
    }
    let mut skipped = Vec::new();
    for t in pem_block_types(&bytes("tls.key")) {
        if t == "PRIVATE KEY" || t.ends_with(" PRIVATE KEY") {
            return Vec::new();
        }
        skipped.push(t);
    }
    let msg = match skipped.as_slice() {
        [] => "tls: failed to find any PEM data in key input".to_string(),
        [only] if only == "CERTIFICATE" => {
            "tls: found a certificate rather than a key in the PEM for the private key".to_string()
        }
        all => format!(
            "tls: failed to find PEM block with type ending in \"PRIVATE KEY\" in key input \
             after skipping PEM blocks of the following types: {}",
            go_list(all)
        ),
    };
    vec![msg]
}

/// The types of the PEM blocks Go's `pem.Decode` finds in `data`, in order: a block starts at
/// a `-----BEGIN TYPE-----` line (at the start or after a newline), may carry `key: value`
/// headers, holds base64 (spaces and tabs ignored) and ends at the matching
/// `-----END TYPE-----` line; a malformed block is skipped and the search goes on after its
/// BEGIN.
fn pem_block_types(data: &[u8]) -> Vec<String> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const END: &[u8] = b"-----END ";
    const DASHES: &[u8] = b"-----";
    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }
    fn line(data: &[u8]) -> (&[u8], &[u8]) {
        let (l, rest) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &data[data.len()..]),
        };
        let trimmed = l.len()
            - l.iter()
                .rev()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
                .count();
        (&l[..trimmed], rest)
    }
    let mut types = Vec::new();
    let mut data = data;
    'blocks: loop {
        // The next BEGIN line.
        let mut rest = if data.starts_with(BEGIN) {
            &data[BEGIN.len()..]
        } else if let Some(i) = find(data, b"\n-----BEGIN ") {
            &data[i + 1 + BEGIN.len()..]
        } else {
            return types;
        };
        let (type_line, after) = line(rest);
        rest = after;
        let Some(kind) = type_line.strip_suffix(DASHES) else {
            data = rest;
            continue 'blocks;
        };
        let mut headers = false;
        loop {
            if rest.is_empty() {
                return types;
            }
            let (l, next) = line(rest);
            if !l.contains(&b':') {
                break;
            }
            headers = true;
            rest = next;
        }
        let (end_index, trailer_index) = if !headers && rest.starts_with(END) {
            (0, END.len())
        } else {
            match find(rest, b"\n-----END ") {
                Some(i) => (i, i + 1 + END.len()),
                None => {
                    data = rest;
                    continue 'blocks;
                }
            }
        };
        let trailer = &rest[trailer_index..];
        let want = kind.len() + DASHES.len();
        let ok = trailer.len() >= want
            && trailer[..want].starts_with(kind)
            && trailer[..want].ends_with(DASHES)
            && line(&trailer[want..]).0.is_empty();
        let body: Vec<u8> = rest[..end_index]
            .iter()
            .copied()
            .filter(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .collect();
        if !ok
            || base64::engine::general_purpose::STANDARD
                .decode(&body)
                .is_err()
        {
            data = rest;
            continue 'blocks;
        }
        types.push(String::from_utf8_lossy(kind).into_owned());
        data = line(&rest[trailer_index..]).1;
    }
}

impl Strategy for SecretStrategy {
    fn default(&self, obj: &mut Value) {
        merge_string_data(obj);
        if obj
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            obj["type"] = Value::from("Opaque");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_keys(obj, "data");
        let size: usize = string_map(obj, "data")
            .into_iter()
            .flat_map(|m| m.values())
            .map(decoded_len)
            .sum();
        if size > MAX_TOTAL_BYTES {
            errs.push(FieldError::too_long(
                &FieldPath::new("data"),
                "",
                MAX_TOTAL_BYTES as i64,
            ));
        }
        errs.extend(validate_type(obj));
        errs
    }

    /// `ValidateSecretUpdate`: the type, then `immutable`, then the Secret as on create.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if new.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                &FieldPath::new("type"),
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs.extend(validate_immutable(new, old, &["data"]));
        errs.extend(self.validate(new));
        errs
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        tls_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        tls_warnings(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn string_data_is_merged_into_data_and_wins() {
        let mut s = json!({"data": {"a": "b2xk", "keep": "eA=="}, "stringData": {"a": "new", "b": "plain"}});
        SecretStrategy.default(&mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "bmV3", "b": "cGxhaW4=", "keep": "eA=="}, "type": "Opaque"})
        );
        let mut only = json!({"stringData": {"k": "v"}, "type": "Opaque"});
        SecretStrategy.default(&mut only);
        assert_eq!(only, json!({"data": {"k": "dg=="}, "type": "Opaque"}));
    }

    #[test]
    fn well_known_types_require_their_keys() {
        let s = SecretStrategy;
        assert_eq!(
            messages(&s.validate(&json!({"type": "kubernetes.io/basic-auth"}))),
            vec![
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        assert!(
            s.validate(&json!({"type": "kubernetes.io/basic-auth", "data": {"password": ""}}))
                .is_empty()
        );
        assert_eq!(
            messages(&s.validate(
                &json!({"type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": ""}})
            )),
            vec!["data[ssh-privatekey]: Required value"]
        );
        assert_eq!(
            messages(
                &s.validate(&json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}))
            ),
            vec!["data[tls.key]: Required value"]
        );
        assert_eq!(
            messages(&s.validate(&json!({"type": "kubernetes.io/service-account-token"}))),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        let docker = |content: &str| {
            json!({"type": "kubernetes.io/dockerconfigjson",
                   "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(content)}})
        };
        assert!(s.validate(&docker(r#"{"auths": {}}"#)).is_empty());
        assert!(messages(&s.validate(&docker("{nope"))).len() == 1);
    }

    #[test]
    fn immutable_secrets_keep_their_data() {
        let s = SecretStrategy;
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        assert_eq!(
            messages(&s.validate_update(
                &json!({"type": "Opaque", "immutable": true, "data": {}}),
                &old
            )),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }
}
