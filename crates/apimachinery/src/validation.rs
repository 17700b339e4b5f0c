//! Field errors and the shared validators: what upstream keeps in
//! `k8s.io/apimachinery/pkg/util/validation` (name, label, key and IP formats),
//! `.../util/validation/field` (field paths and errors) and `.../api/validation` (object metadata).
//!
//! Every message a client can read is upstream's text, byte for byte, including its quirks (the
//! double space in `'key.name',  or`, the `<nil>` path of a label selector's key, Go's quoting of
//! bad values). This module checks formats and metadata only; what a field of a particular kind
//! must hold belongs to that kind's strategy, and nothing here knows HTTP or storage.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value};

use crate::status::{Status, StatusCause};

// ---------------------------------------------------------------------------------------------
// Go formatting, as upstream's messages print values.
// ---------------------------------------------------------------------------------------------

/// Go's `strconv.Quote` (`%q`): double quotes, backslash escapes for quotes, backslashes and
/// characters Go does not consider printable.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint` without Unicode tables: letters, marks, numbers,
/// punctuation and symbols are printable, and of the spaces only U+0020. Controls, other spaces,
/// the common format characters, private use areas and non-characters are not.
fn go_is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    let format_or_private = matches!(u,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF
        | 0xFFFE | 0xFFFF | 0xE0001 | 0xE0020..=0xE007F | 0xF0000..=0x10FFFF);
    !format_or_private
}

/// Go's `encoding/json` rendering of a value: object keys sorted, no spaces, and `<`, `>`, `&`,
/// U+2028 and U+2029 escaped as Go's encoder escapes them for HTML safety.
pub fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_json_number(n)),
        Value::String(s) => write_go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go marshals maps with sorted keys; sort here so that the output does not depend on
            // whether serde_json keeps insertion order.
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(k, out);
                out.push(':');
                write_go_json(item, out);
            }
            out.push('}');
        }
    }
}

fn write_go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Shortest round-trip digits and decimal exponent of a finite float, from Rust's `{:e}`.
fn float_parts(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (
        f.is_sign_negative() && f != 0.0,
        digits,
        exp.parse().unwrap_or(0),
    )
}

fn exponent_form(neg: bool, digits: &str, exp: i32, min_exp_digits: usize) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push_str(&digits[..1]);
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    s.push('e');
    s.push(if exp < 0 { '-' } else { '+' });
    s.push_str(&format!(
        "{:0width$}",
        exp.unsigned_abs(),
        width = min_exp_digits
    ));
    s
}

/// A JSON number as Go's encoder writes it (floats switch to exponent form outside [1e-6, 1e21)).
fn go_json_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => {
            let abs = f.abs();
            if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
                let (neg, digits, exp) = float_parts(f);
                exponent_form(neg, &digits, exp, 1)
            } else {
                format!("{f}")
            }
        }
        _ => n.to_string(),
    }
}

/// A float as Go's `%v` prints it: `%g` with the shortest digits, which switches to exponent
/// form when the decimal exponent is below -4 or at least 6 (so 1e6 prints as `1e+06`).
pub fn go_float_v(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (neg, digits, exp) = float_parts(f);
    if !(-4..6).contains(&exp) {
        exponent_form(neg, &digits, exp, 2)
    } else {
        format!("{f}")
    }
}

/// How upstream's `ErrorBody` prints a bad value: strings quoted with `%q`, numbers and booleans
/// plainly, anything else (maps, lists, null) as Go's JSON.
fn render_bad_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => go_float_v(f),
            _ => n.to_string(),
        },
        other => go_json(other),
    }
}

// ---------------------------------------------------------------------------------------------
// Field paths and errors.
// ---------------------------------------------------------------------------------------------

/// A path to a field, rendered as upstream's `field.Path`: `spec.containers[0].image`,
/// `data[bad key!]`. The nil path (`FieldPath::nil()`) renders as `<nil>`, as upstream prints a
/// missing path (label selector parse errors show it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(Option<String>);

impl FieldPath {
    /// A root path: `FieldPath::new("metadata")`. A root without a name is the whole object,
    /// which upstream's `field.Path` prints as `[]`.
    pub fn new(name: &str) -> Self {
        if name.is_empty() {
            return Self(Some("[]".to_string()));
        }
        Self(Some(name.to_string()))
    }

    /// The nil path.
    pub fn nil() -> Self {
        Self(None)
    }

    /// `parent.name`; on the nil path just `name`. (Validation makes a path for every field it
    /// visits, error or not: these are built by appending, not through the formatter.)
    pub fn child(&self, name: &str) -> Self {
        match &self.0 {
            Some(p) if !p.is_empty() => Self(Some(joined(&[p, ".", name]))),
            _ => Self(Some(name.to_string())),
        }
    }

    /// `parent[i]`.
    pub fn index(&self, i: usize) -> Self {
        self.key(&i.to_string())
    }

    /// `parent[key]`, the key written as it is.
    pub fn key(&self, key: &str) -> Self {
        let parent = self.0.as_deref().unwrap_or("");
        Self(Some(joined(&[parent, "[", key, "]"])))
    }

    pub fn is_nil(&self) -> bool {
        self.0.is_none()
    }
}

/// The parts one after the other, in a string allocated once.
fn joined(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.push_str(p);
    }
    out
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("<nil>"))
    }
}

/// upstream's `field.ErrorType`; `as_str` is the `StatusCause` reason (`metav1.CauseType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooShort,
    TooMany,
    TooFew,
    Internal,
    TypeInvalid,
}

impl ErrorType {
    /// The cause type: `FieldValueRequired`, `FieldValueInvalid`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooShort => "FieldValueTooShort",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::TooFew => "FieldValueTooFew",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words that open the message: `Required value`, `Invalid value`, ...
    pub fn description(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooShort => "Too short",
            ErrorType::TooMany => "Too many",
            ErrorType::TooFew => "Too few",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// One field-level validation failure (upstream's `field.Error`). `bad_value: None` means the
/// value is omitted from the message.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub error_type: ErrorType,
    pub field: String,
    pub bad_value: Option<Value>,
    /// The bad value already printed, for values upstream prints as a Go struct (field names
    /// and order of the internal type, see `ironplane_protobuf::go_struct_json`); it replaces
    /// the rendering of `bad_value` in the message.
    pub rendered: Option<String>,
    pub detail: String,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl FieldError {
    fn new(
        error_type: ErrorType,
        path: &FieldPath,
        bad_value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            error_type,
            field: path.to_string(),
            bad_value,
            rendered: None,
            detail: detail.into(),
        }
    }

    /// The same error with its bad value printed as given (a Go struct's rendering).
    pub fn with_rendered_value(mut self, rendered: impl Into<String>) -> Self {
        self.rendered = Some(rendered.into());
        self
    }

    pub fn required(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, path, Some(Value::from("")), detail)
    }

    pub fn invalid(path: &FieldPath, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, path, Some(value.into()), detail)
    }

    pub fn type_invalid(
        path: &FieldPath,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::TypeInvalid, path, Some(value.into()), detail)
    }

    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(path: &FieldPath, value: impl Into<Value>, valid: &[&str]) -> Self {
        let detail = if valid.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, path, Some(value.into()), detail)
    }

    /// [`not_supported`](Self::not_supported) for a bad value that is no JSON value (Go's `%#v`
    /// of a slice, `[]string{"x"}`), given already rendered.
    pub fn not_supported_rendered(path: &FieldPath, rendered: &str, valid: &[&str]) -> Self {
        let quoted: Vec<String> = valid.iter().map(|v| go_quote(v)).collect();
        Self::new(
            ErrorType::NotSupported,
            path,
            None,
            format!("{rendered}: supported values: {}", quoted.join(", ")),
        )
    }

    pub fn duplicate(path: &FieldPath, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::Duplicate, path, Some(value.into()), "")
    }

    pub fn not_found(path: &FieldPath, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::NotFound, path, Some(value.into()), "")
    }

    pub fn forbidden(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, path, Some(Value::from("")), detail)
    }

    /// `Too long: may not be more than <max> bytes`. As upstream, the value is never printed
    /// (it may be huge); a negative `max` gives `value is too long`.
    pub fn too_long(path: &FieldPath, _value: impl Into<Value>, max: i64) -> Self {
        let detail = if max >= 0 {
            format!("may not be more than {}", plural(max, "byte", "bytes"))
        } else {
            "value is too long".into()
        };
        Self::new(
            ErrorType::TooLong,
            path,
            Some(Value::from("<value omitted>")),
            detail,
        )
    }

    /// As `too_long`, counting characters.
    pub fn too_long_characters(path: &FieldPath, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "may not be more than {}",
                plural(max, "character", "characters")
            )
        } else {
            "value is too long".into()
        };
        Self::new(
            ErrorType::TooLong,
            path,
            Some(Value::from("<value omitted>")),
            detail,
        )
    }

    /// `Too short: must be at least <min> characters`.
    pub fn too_short(path: &FieldPath, value: impl Into<Value>, min: i64) -> Self {
        let detail = if min >= 0 {
            format!(
                "must be at least {}",
                plural(min, "character", "characters")
            )
        } else {
            "value is too short".into()
        };
        Self::new(ErrorType::TooShort, path, Some(value.into()), detail)
    }

    /// `Too many: <actual>: must have at most <max> items`; without `actual` the count is left out,
    /// without `max` the detail is `has too many items`.
    pub fn too_many(path: &FieldPath, actual: Option<i64>, max: Option<i64>) -> Self {
        let detail = match max {
            Some(m) => format!("must have at most {}", plural(m, "item", "items")),
            None => "has too many items".into(),
        };
        Self::new(ErrorType::TooMany, path, actual.map(Value::from), detail)
    }

    /// `Too few: <actual>: must have at least <min> items`.
    pub fn too_few(path: &FieldPath, actual: i64, min: Option<i64>) -> Self {
        let detail = match min {
            Some(m) => format!("must have at least {}", plural(m, "item", "items")),
            None => "has too few items".into(),
        };
        Self::new(ErrorType::TooFew, path, Some(Value::from(actual)), detail)
    }

    pub fn internal(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, path, None, detail)
    }

    /// The message without the field, as upstream's `ErrorBody()`: `Required value`,
    /// `Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain ...`. Types that never show
    /// their value (Required, Forbidden, TooLong, TooShort, Internal) print only their words.
    pub fn message(&self) -> String {
        let words = self.error_type.description();
        let mut s = match (self.error_type, &self.bad_value) {
            (
                ErrorType::Required
                | ErrorType::Forbidden
                | ErrorType::TooLong
                | ErrorType::TooShort
                | ErrorType::Internal,
                _,
            )
            | (_, None) => words.to_string(),
            _ if self.rendered.is_some() => {
                format!("{words}: {}", self.rendered.as_deref().unwrap_or_default())
            }
            (_, Some(v)) => format!("{words}: {}", render_bad_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The `metav1.StatusCause` for a 422 answer.
    pub fn to_cause(&self) -> StatusCause {
        StatusCause {
            reason: self.error_type.as_str().to_string(),
            message: self.message(),
            field: self.field.clone(),
        }
    }
}

/// `<field>: <message>`, as upstream's `Error()`.
impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

impl std::error::Error for FieldError {}

/// The text of upstream's aggregated error list: duplicates (by full text) dropped, one error
/// alone as it is, several as `[a, b]`. Empty for no errors.
pub fn aggregate_message(errs: &[FieldError]) -> String {
    let mut seen = BTreeSet::new();
    let mut msgs = Vec::new();
    for e in errs {
        let m = e.to_string();
        if seen.insert(m.clone()) {
            msgs.push(m);
        }
    }
    match msgs.len() {
        0 => String::new(),
        1 => msgs.remove(0),
        _ => format!("[{}]", msgs.join(", ")),
    }
}

/// The 422 `Invalid` status for `errs`: one cause per error (duplicates kept, as upstream), and
/// the message `<Kind>[.<group>] "<name>" is invalid: <aggregate>`.
pub fn invalid_status(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Status {
    let causes = errs.iter().map(FieldError::to_cause).collect();
    let mut status = Status::invalid(group, kind, name, causes);
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    status.message = if errs.is_empty() {
        format!("{qualified} {} is invalid", go_quote(name))
    } else {
        format!(
            "{qualified} {} is invalid: {}",
            go_quote(name),
            aggregate_message(errs)
        )
    };
    status
}

// ---------------------------------------------------------------------------------------------
// Format validators. Each returns upstream's messages; empty means valid. The regular
// expressions upstream uses are checked by hand and quoted in the messages.
// ---------------------------------------------------------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_UNDERSCORE_FMT: &str =
    "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_UNDERSCORE_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const WILDCARD_DNS1123_SUBDOMAIN_FMT: &str =
    "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const WILDCARD_DNS1123_SUBDOMAIN_ERR: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_ERR: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_ERR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";
const PERCENT_FMT: &str = "[0-9]+%";
const PERCENT_ERR: &str =
    "a valid percent string must be a numeric string followed by an ending '%'";
const HTTP_HEADER_NAME_FMT: &str = "[-A-Za-z0-9]+";
const HTTP_HEADER_NAME_ERR: &str =
    "a valid HTTP header must consist of alphanumeric characters or '-'";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_ERR: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const RELAXED_ENV_VAR_NAME_ERR: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const CONDITION_REASON_FMT: &str = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";
const CONDITION_REASON_ERR: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'";

/// The longest DNS-1123 label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// The longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// The longest DNS-1035 label.
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;
/// The longest label value, and the longest name part of a label key.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// The largest total size of an object's annotations (keys and values).
pub const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES: usize = 256 * 1024;
/// upstream's message for a field that may not change.
pub const FIELD_IMMUTABLE_ERROR_MSG: &str = "field is immutable";

/// `<msg> (e.g. 'a',  or 'b', regex used for validation is '<re>')`, upstream's `RegexError`,
/// double space included.
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(re);
    s.push_str("')");
    s
}

/// `must be no more than <n> characters` (util/validation's wording, used for names and keys).
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `must be no more than <n> bytes` (the newer wording of the content validators: label keys
/// and values).
fn max_len_bytes_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `must be between <lo> and <hi>, inclusive`.
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

const EMPTY_ERROR: &str = "must be non-empty";

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn dns1123_label_ok(b: &[u8]) -> bool {
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f) && lower_alnum(l) && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn dns1123_subdomain_ok(b: &[u8]) -> bool {
    b.split(|&c| c == b'.').all(dns1123_label_ok)
}

/// `_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
fn dns1123_label_underscore_ok(b: &[u8]) -> bool {
    let rest = b.strip_prefix(b"_").unwrap_or(b);
    match (rest.first(), rest.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f)
                && lower_alnum(l)
                && rest
                    .iter()
                    .all(|&c| lower_alnum(c) || c == b'-' || c == b'_')
        }
        _ => false,
    }
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`
fn dns1035_label_ok(b: &[u8]) -> bool {
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_lowercase()
                && lower_alnum(l)
                && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn label_name_ok(b: &[u8]) -> bool {
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn dns1123_label_bytes(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !dns1123_label_ok(b) {
        if dns1123_subdomain_ok(b) {
            // A valid subdomain that is not a valid label: the length was checked above, so
            // the dots are what is wrong.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

fn dns1123_subdomain_bytes(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !dns1123_subdomain_ok(b) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn dns1035_label_bytes(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1035_LABEL_MAX_LENGTH));
    }
    if !dns1035_label_ok(b) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// A DNS-1123 label (at most 63 characters): namespace names, most port and container names.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    dns1123_label_bytes(value.as_bytes())
}

/// A lowercase DNS-1123 subdomain (at most 253 characters): most object names.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain_bytes(value.as_bytes())
}

/// A DNS-1123 subdomain whose labels may also hold `_` (and start with one).
pub fn is_dns1123_subdomain_with_underscore(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let mut errs = Vec::new();
    if b.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !b.split(|&c| c == b'.').all(dns1123_label_underscore_ok) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_UNDERSCORE_ERR,
            DNS1123_SUBDOMAIN_UNDERSCORE_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// A DNS-1035 label (starts with a letter): Service names.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    dns1035_label_bytes(value.as_bytes())
}

/// `*.` followed by a DNS-1123 subdomain.
pub fn is_wildcard_dns1123_subdomain(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let mut errs = Vec::new();
    if b.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !b.strip_prefix(b"*.").is_some_and(dns1123_subdomain_ok) {
        errs.push(regex_error(
            WILDCARD_DNS1123_SUBDOMAIN_ERR,
            WILDCARD_DNS1123_SUBDOMAIN_FMT,
            &["*.example.com"],
        ));
    }
    errs
}

/// A label key, which upstream also calls a qualified name: an optional DNS subdomain prefix and
/// `/`, then a name of at most 63 characters. Used for label and annotation keys, finalizers,
/// condition types.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match value.split_once('/') {
        None => value,
        Some((prefix, name)) if !name.contains('/') => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {EMPTY_ERROR}"));
            } else {
                let b = prefix.as_bytes();
                if b.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
                    errs.push(format!(
                        "prefix part {}",
                        max_len_bytes_error(DNS1123_SUBDOMAIN_MAX_LENGTH)
                    ));
                }
                if !dns1123_subdomain_ok(b) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            name
        }
        Some(_) => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {EMPTY_ERROR}"));
    } else if name.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_bytes_error(LABEL_VALUE_MAX_LENGTH)
        ));
    }
    if !label_name_ok(name.as_bytes()) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// A label value: empty, or at most 63 characters of `[-A-Za-z0-9_.]` starting and ending
/// alphanumeric.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_bytes_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !(value.is_empty() || label_name_ok(value.as_bytes())) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn has_chdir_prefix(value: &str) -> Vec<String> {
    if value == "." {
        vec!["must not be '.'".into()]
    } else if value == ".." {
        vec!["must not be '..'".into()]
    } else if value.starts_with("..") {
        vec!["must not start with '..'".into()]
    } else {
        Vec::new()
    }
}

/// A key of a ConfigMap's or Secret's data.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_ERR,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// A C identifier (no length limit).
pub fn is_c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = b
        .first()
        .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            C_IDENTIFIER_ERR,
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// A port number, 1 to 65535.
pub fn is_valid_port_num(port: i64) -> Vec<String> {
    is_in_range(port, 1, 65535)
}

/// An integer in `[lo, hi]`.
pub fn is_in_range(value: i64, lo: i64, hi: i64) -> Vec<String> {
    if (lo..=hi).contains(&value) {
        Vec::new()
    } else {
        vec![inclusive_range_error(lo, hi)]
    }
}

/// A Unix group id, 0 to 2^31-1.
pub fn is_valid_group_id(gid: i64) -> Vec<String> {
    is_in_range(gid, 0, i64::from(i32::MAX))
}

/// A Unix user id, 0 to 2^31-1.
pub fn is_valid_user_id(uid: i64) -> Vec<String> {
    is_in_range(uid, 0, i64::from(i32::MAX))
}

/// A named port (IANA service name syntax): at most 15 of `[-a-z0-9]`, at least one letter, no
/// leading, trailing or doubled hyphen.
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.bytes().all(|c| lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `[0-9]+%`.
pub fn is_valid_percent(percent: &str) -> Vec<String> {
    let ok = percent
        .strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
    if ok {
        Vec::new()
    } else {
        vec![regex_error(PERCENT_ERR, PERCENT_FMT, &["1%", "93%"])]
    }
}

/// An HTTP header name as Go's HTTP library accepts it.
pub fn is_http_header_name(value: &str) -> Vec<String> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            HTTP_HEADER_NAME_ERR,
            HTTP_HEADER_NAME_FMT,
            &["X-Header-Name"],
        )]
    }
}

/// The strict environment variable name (the form used when relaxed names are disabled).
pub fn is_env_var_name(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = b
        .first()
        .is_some_and(|&c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_'))
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    let mut errs = Vec::new();
    if !ok {
        errs.push(regex_error(
            ENV_VAR_NAME_ERR,
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(has_chdir_prefix(value));
    errs
}

/// The relaxed environment variable name: printable ASCII other than `=`.
pub fn is_relaxed_env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.is_empty() {
        errs.push(format!("environment variable name {EMPTY_ERROR}"));
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_ERR.into());
    }
    errs
}

/// A `metav1.Condition` reason.
pub fn is_valid_condition_reason(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last()
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'));
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            CONDITION_REASON_ERR,
            CONDITION_REASON_FMT,
            &[
                "my_name",
                "MY_NAME",
                "MyName",
                "ReasonA,ReasonB",
                "ReasonA:ReasonB",
            ],
        )]
    }
}

/// A name that can be one segment of a URL path: not `.` or `..`, no `/` or `%`.
pub fn is_path_segment_name(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    is_path_segment_prefix(name)
}

/// As `is_path_segment_name` for a prefix that more text will follow.
pub fn is_path_segment_prefix(name: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|s| name.contains(*s))
        .map(|s| format!("may not contain '{s}'"))
        .collect()
}

/// A domain name with at least three segments (no trailing dot). Errors carry the field path.
pub fn is_fully_qualified_name(path: &FieldPath, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, errs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

/// A domain name with at least two segments; a trailing dot is allowed.
pub fn is_fully_qualified_domain_name(path: &FieldPath, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, errs.join(","))];
    }
    if name.split('.').count() < 2 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        )];
    }
    for label in name.split('.') {
        let errs = is_dns1123_label(label);
        if !errs.is_empty() {
            return vec![FieldError::invalid(path, label, errs.join(","))];
        }
    }
    Vec::new()
}

// ---------------------------------------------------------------------------------------------
// IP addresses and CIDRs.
// ---------------------------------------------------------------------------------------------

/// Parses decimal IPv4 the way Go's old `net.ParseIP` did (and `netutils.ParseIPSloppy` still
/// does): leading zeros are allowed and read as decimal.
fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let p = parts.next()?;
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let digits = p.trim_start_matches('0');
        if digits.len() > 3 {
            return None;
        }
        let n: u16 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        *octet = u8::try_from(n).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
}

/// `netutils.ParseIPSloppy`: IPv4 (leading zeros allowed) or IPv6 (an embedded IPv4 tail with
/// leading zeros allowed); no zones.
fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if !s.contains(':') {
        return parse_ipv4_sloppy(s).map(IpAddr::V4);
    }
    if let Ok(v6) = s.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    let (head, tail) = s.rsplit_once(':')?;
    if !tail.contains('.') {
        return None;
    }
    let v4 = parse_ipv4_sloppy(tail)?;
    format!("{head}:{v4}")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// `netip.ParseAddr` without zones: no leading zeros in IPv4 octets.
fn parse_ip_strict(s: &str) -> Option<IpAddr> {
    s.parse::<IpAddr>().ok()
}

fn is_4in6(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// The canonical text of an address as Go's `net.IP.String()` writes it.
fn go_ip_string(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn parse_ip_checked(
    path: &FieldPath,
    value: &str,
    strict: bool,
) -> (Option<IpAddr>, Vec<FieldError>) {
    let Some(ip) = parse_ip_sloppy(value) else {
        return (
            None,
            vec![FieldError::invalid(
                path,
                value,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            )],
        );
    };
    let mut errs = Vec::new();
    if strict {
        match parse_ip_strict(value) {
            None => errs.push(FieldError::invalid(path, value, "must not have leading 0s")),
            Some(addr) if is_4in6(&addr) => errs.push(FieldError::invalid(
                path,
                value,
                "must not be an IPv4-mapped IPv6 address",
            )),
            Some(_) => {}
        }
    }
    (Some(ip), errs)
}

/// An IP address by today's rules: valid, no leading zeros, not IPv4-mapped IPv6, and in
/// canonical form.
pub fn is_valid_ip(path: &FieldPath, value: &str) -> Vec<FieldError> {
    let (ip, errs) = parse_ip_checked(path, value, true);
    if !errs.is_empty() {
        return errs;
    }
    match ip {
        Some(ip) if go_ip_string(&ip) != value => {
            vec![FieldError::invalid(
                path,
                value,
                format!(
                    "must be in canonical form ({})",
                    go_quote(&go_ip_string(&ip))
                ),
            )]
        }
        _ => Vec::new(),
    }
}

/// An IP address in a field that predates strict validation (e.g. `spec.clusterIPs`): any
/// form is accepted, and with `strict` leading zeros and IPv4-mapped IPv6 are refused. Values in
/// `valid_old` (from the object being updated) pass as they are.
pub fn is_valid_ip_for_legacy_field(
    path: &FieldPath,
    value: &str,
    strict: bool,
    valid_old: &[&str],
) -> Vec<FieldError> {
    if valid_old.contains(&value) {
        return Vec::new();
    }
    parse_ip_checked(path, value, strict).1
}

struct ParsedCidr {
    ip: IpAddr,
    bits: u8,
}

impl ParsedCidr {
    fn network(&self) -> IpAddr {
        match self.ip {
            IpAddr::V4(v4) => {
                let mask = if self.bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(self.bits))
                };
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = if self.bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.bits))
                };
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        }
    }

    /// Go's `net.IPNet.String()` of the parsed network.
    fn network_string(&self) -> String {
        format!("{}/{}", go_ip_string(&self.network()), self.bits)
    }
}

/// `netutils.ParseCIDRSloppy`: the address as `parse_ip_sloppy`, the prefix length decimal with
/// leading zeros allowed.
fn parse_cidr_sloppy(s: &str) -> Option<ParsedCidr> {
    let (addr, len) = s.split_once('/')?;
    let ip = parse_ip_sloppy(addr)?;
    if len.is_empty() || !len.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = len.trim_start_matches('0');
    let bits: u32 = if digits.is_empty() {
        0
    } else if digits.len() > 3 {
        return None;
    } else {
        digits.parse().ok()?
    };
    let max = if addr.contains(':') { 128 } else { 32 };
    if bits > max {
        return None;
    }
    Some(ParsedCidr {
        ip,
        bits: u8::try_from(bits).ok()?,
    })
}

fn parse_cidr_checked(
    path: &FieldPath,
    value: &str,
    strict: bool,
) -> (Option<ParsedCidr>, Vec<FieldError>) {
    let Some(cidr) = parse_cidr_sloppy(value) else {
        return (
            None,
            vec![FieldError::invalid(
                path,
                value,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )],
        );
    };
    let mut errs = Vec::new();
    if strict {
        let strict_ok = value.split_once('/').is_some_and(|(a, l)| {
            parse_ip_strict(a).is_some() && (l == "0" || !l.starts_with('0'))
        });
        if !strict_ok {
            errs.push(FieldError::invalid(
                path,
                value,
                "must not have leading 0s in IP or prefix length",
            ));
        } else if is_4in6(&cidr.ip) {
            errs.push(FieldError::invalid(
                path,
                value,
                "must not have an IPv4-mapped IPv6 address",
            ));
        } else if cidr.network() != cidr.ip {
            errs.push(FieldError::invalid(
                path,
                value,
                "must not have bits set beyond the prefix length",
            ));
        }
    }
    (Some(cidr), errs)
}

/// A subnet CIDR by today's rules (`192.168.1.0/24`: no bits beyond the prefix, canonical).
pub fn is_valid_cidr(path: &FieldPath, value: &str) -> Vec<FieldError> {
    let (cidr, errs) = parse_cidr_checked(path, value, true);
    if !errs.is_empty() {
        return errs;
    }
    match cidr {
        Some(c) if c.network_string() != value => {
            vec![FieldError::invalid(
                path,
                value,
                format!(
                    "must be in canonical form ({})",
                    go_quote(&c.network_string())
                ),
            )]
        }
        _ => Vec::new(),
    }
}

/// A CIDR in a field that predates strict validation; see `is_valid_ip_for_legacy_field`.
pub fn is_valid_cidr_for_legacy_field(
    path: &FieldPath,
    value: &str,
    strict: bool,
    valid_old: &[&str],
) -> Vec<FieldError> {
    if valid_old.contains(&value) {
        return Vec::new();
    }
    parse_cidr_checked(path, value, strict).1
}

/// `GetWarningsForIP`: an address a legacy field accepted that is not in standard form
/// (leading zeros, IPv4-mapped IPv6), or an IPv6 address not in RFC 5952 form.
pub fn get_warnings_for_ip(path: &str, value: &str) -> Vec<String> {
    let Some(ip) = parse_ip_sloppy(value) else {
        return Vec::new();
    };
    match parse_ip_strict(value) {
        Some(addr) if !is_4in6(&addr) => match addr {
            IpAddr::V6(v6) if v6.to_string() != value => vec![format!(
                "{path}: IPv6 address {} should be in RFC 5952 canonical format ({})",
                go_quote(value),
                go_quote(&v6.to_string())
            )],
            _ => Vec::new(),
        },
        _ => vec![format!(
            "{path}: non-standard IP address {} is invalid: use {}",
            go_quote(value),
            go_quote(&go_ip_string(&ip))
        )],
    }
}

/// `GetWarningsForCIDR`: a CIDR with bits set past its prefix (ambiguous), one not in
/// standard form, or an IPv6 CIDR not in RFC 5952 form.
pub fn get_warnings_for_cidr(path: &str, value: &str) -> Vec<String> {
    let Some(cidr) = parse_cidr_sloppy(value) else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let network = cidr.network_string();
    if cidr.network() != cidr.ip {
        let bits = if matches!(cidr.ip, IpAddr::V4(_)) {
            32
        } else {
            128
        };
        warnings.push(format!(
            "{path}: CIDR value {} is ambiguous in this context (should be {} or {}?)",
            go_quote(value),
            go_quote(&network),
            go_quote(&format!("{}/{bits}", go_ip_string(&cidr.ip)))
        ));
    }
    // `netip.ParsePrefix`: a strict address and a prefix length without leading zeros.
    let strict = value.split_once('/').and_then(|(a, l)| {
        let addr = parse_ip_strict(a)?;
        (l == "0" || (!l.starts_with('0') && l.bytes().all(|c| c.is_ascii_digit())))
            .then_some((addr, l))
    });
    match strict {
        Some((addr, _)) if is_4in6(&addr) => warnings.push(format!(
            "{path}: non-standard CIDR value {} is invalid: use {}",
            go_quote(value),
            go_quote(&network)
        )),
        None => warnings.push(format!(
            "{path}: non-standard CIDR value {} is invalid: use {}",
            go_quote(value),
            go_quote(&network)
        )),
        Some((IpAddr::V6(v6), len)) if warnings.is_empty() => {
            let canonical = format!("{v6}/{len}");
            if canonical != value {
                warnings.push(format!(
                    "{path}: IPv6 CIDR value {} should be in RFC 5952 canonical format ({})",
                    go_quote(value),
                    go_quote(&canonical)
                ));
            }
        }
        Some(_) => {}
    }
    warnings
}

// ---------------------------------------------------------------------------------------------
// Object metadata.
// ---------------------------------------------------------------------------------------------

/// How a kind's names are checked (upstream's `ValidateNameFunc` choices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameValidator {
    /// Most kinds: ConfigMap, Secret, Deployment, ...
    Dns1123Subdomain,
    /// Namespace, and kinds whose names become DNS labels.
    Dns1123Label,
    /// Service.
    Dns1035Label,
    /// Names that need only be safe as a URL path segment (RBAC kinds).
    PathSegment,
    /// No format check.
    None,
}

impl NameValidator {
    /// The messages for `name`; `prefix` is true for a `generateName`, to which a random
    /// suffix will be appended.
    pub fn validate(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let b = if prefix
            && matches!(
                self,
                Self::Dns1123Subdomain | Self::Dns1123Label | Self::Dns1035Label
            ) {
            masked = mask_trailing_dash(name.as_bytes());
            masked.as_slice()
        } else {
            name.as_bytes()
        };
        match self {
            Self::Dns1123Subdomain => dns1123_subdomain_bytes(b),
            Self::Dns1123Label => dns1123_label_bytes(b),
            Self::Dns1035Label => dns1035_label_bytes(b),
            Self::PathSegment if prefix => is_path_segment_prefix(name),
            Self::PathSegment => is_path_segment_name(name),
            Self::None => Vec::new(),
        }
    }
}

/// upstream's `maskTrailingDash`: a generateName ending in `-` is checked as if its last *two*
/// bytes were `a` (upstream drops two bytes and appends one; kept as it is so that lengths and
/// messages agree).
fn mask_trailing_dash(name: &[u8]) -> Vec<u8> {
    if name.len() > 1 && name.ends_with(b"-") {
        let mut v = name[..name.len() - 2].to_vec();
        v.push(b'a');
        v
    } else {
        name.to_vec()
    }
}

fn meta_str<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A JSON object of strings as a sorted map. Upstream iterates a Go map (random order); sorting
/// keeps our error order stable. A JSON null value reads as the empty string, as Go decodes it.
/// The members of a map of strings, sorted by key (a `null` value reads as empty, anything
/// else that is not a string is left out), borrowed: every write validates its labels.
fn string_map(v: Option<&Value>) -> impl Iterator<Item = (&str, &str)> {
    let members = match v {
        Some(Value::Object(m)) => Some(m.iter()),
        _ => None,
    };
    members
        .into_iter()
        .flatten()
        .filter_map(|(k, val)| match val {
            Value::String(s) => Some((k.as_str(), s.as_str())),
            Value::Null => Some((k.as_str(), "")),
            _ => None,
        })
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// A label key (upstream's `ValidateLabelName`): one error per message, the key as the value.
pub fn validate_label_name(key: &str, path: &FieldPath) -> Vec<FieldError> {
    is_qualified_name(key)
        .into_iter()
        .map(|m| FieldError::invalid(path, key, m))
        .collect()
}

/// A map of labels (upstream's `ValidateLabels`): keys then values, all reported at `path`
/// itself (not at `path[key]`), as upstream does.
pub fn validate_labels(labels: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in string_map(labels) {
        errs.extend(validate_label_name(k, path));
        errs.extend(
            is_valid_label_value(v)
                .into_iter()
                .map(|m| FieldError::invalid(path, v, m)),
        );
    }
    errs
}

/// A map of annotations: keys are qualified names compared case-insensitively, and keys and
/// values together must fit in 256 KiB.
pub fn validate_annotations(annotations: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, v) in string_map(annotations) {
        errs.extend(
            is_qualified_name(&k.to_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, k, m)),
        );
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        errs.push(FieldError::too_long(
            path,
            "",
            TOTAL_ANNOTATION_SIZE_LIMIT_BYTES as i64,
        ));
    }
    errs
}

/// Owner references: each needs apiVersion (with a version), kind, name and uid; Events may not
/// own anything; at most one reference may be the controller. Errors are reported at `path`
/// itself, without the index, as upstream does.
pub fn validate_owner_references(refs: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(Value::Array(refs)) = refs else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in refs {
        let api_version = meta_str(r, "apiVersion");
        let kind = meta_str(r, "kind");
        let name = meta_str(r, "name");
        let uid = meta_str(r, "uid");
        // schema.FromAPIVersionAndKind: `v1`, `group/version`; anything with more slashes has
        // no version at all.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("kind"),
                kind,
                "must not be empty",
            ));
        }
        if name.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("name"),
                name,
                "must not be empty",
            ));
        }
        if uid.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("uid"),
                uid,
                "must not be empty",
            ));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(
                FieldError::invalid(
                    path,
                    r.clone(),
                    format!("{group}/{version}, Kind={kind} is disallowed from being an owner"),
                )
                .with_rendered_value(owner_reference_json(r)),
            );
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => {
                    let all: Vec<String> = refs.iter().map(owner_reference_json).collect();
                    errs.push(
                        FieldError::invalid(
                            path,
                            Value::Array(refs.clone()),
                            format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"),
                        )
                        .with_rendered_value(format!("[{}]", all.join(","))),
                    )
                }
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// An `OwnerReference` as Go's encoder writes it: JSON names in declaration order, the
/// `omitempty` pointers left out when unset.
fn owner_reference_json(r: &Value) -> String {
    let mut out = String::from("{");
    for (i, field) in ["apiVersion", "kind", "name", "uid"].iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_go_json_string(field, &mut out);
        out.push(':');
        write_go_json_string(meta_str(r, field), &mut out);
    }
    for field in ["controller", "blockOwnerDeletion"] {
        if let Some(b) = r.get(field).and_then(Value::as_bool) {
            out.push(',');
            write_go_json_string(field, &mut out);
            out.push_str(if b { ":true" } else { ":false" });
        }
    }
    out.push('}');
    out
}

/// Finalizer names (qualified names, reported at `path`), and `orphan` with `foregroundDeletion`
/// refused together.
pub fn validate_finalizers(finalizers: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let list = string_list(finalizers);
    let mut errs = Vec::new();
    for f in &list {
        errs.extend(
            is_qualified_name(f)
                .into_iter()
                .map(|m| FieldError::invalid(path, f.as_str(), m)),
        );
    }
    if list.iter().any(|f| f == "orphan") && list.iter().any(|f| f == "foregroundDeletion") {
        errs.push(FieldError::invalid(
            path,
            Value::from(list.clone()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// The extra finalizer check of built-in kinds (k8s.io/kubernetes core validation adds it after
/// `validate_object_meta` and `validate_object_meta_update`): a name without `/` must be one of
/// the standard finalizers. Reported at `path[i]`. Custom resources get warnings instead, see
/// `finalizer_warnings`.
pub fn validate_kube_finalizer_names(meta: &Value, path: &FieldPath) -> Vec<FieldError> {
    let fpath = path.child("finalizers");
    string_list(meta.get("finalizers"))
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()))
        .map(|(i, f)| {
            FieldError::invalid(
                &fpath.index(i),
                f.as_str(),
                "name is neither a standard finalizer name nor is it fully qualified",
            )
        })
        .collect()
}

/// The warnings a custom resource's finalizers get (`metadata.finalizers[0]: "x": <why>`).
pub fn finalizer_warnings(meta: &Value, path: &FieldPath) -> Vec<String> {
    let fpath = path.child("finalizers");
    let mut warnings = Vec::new();
    for (i, f) in string_list(meta.get("finalizers")).iter().enumerate() {
        let p = fpath.index(i);
        for m in is_qualified_name(f) {
            warnings.push(format!("{p}: {}: {m}", go_quote(f)));
        }
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
            warnings.push(format!(
                "{p}: {}: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers",
                go_quote(f)
            ));
        }
    }
    warnings
}

/// The longest field manager name.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// A field manager name: at most 128 bytes, printable characters only.
pub fn validate_field_manager(manager: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::too_long(
            path,
            "",
            FIELD_MANAGER_MAX_LENGTH as i64,
        ));
    }
    for (i, c) in manager.char_indices() {
        if !go_is_print(c) {
            errs.push(FieldError::invalid(
                path,
                manager,
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

/// `metadata.managedFields` entries: operation, fieldsType, manager and subresource.
pub fn validate_managed_fields(entries: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let Some(Value::Array(entries)) = entries else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let p = path.index(i);
        let operation = meta_str(e, "operation");
        if operation != "Apply" && operation != "Update" {
            errs.push(FieldError::invalid(
                &p.child("operation"),
                operation,
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = meta_str(e, "fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                &p.child("fieldsType"),
                fields_type,
                "must be `FieldsV1`",
            ));
        }
        errs.extend(validate_field_manager(
            meta_str(e, "manager"),
            &p.child("manager"),
        ));
        if meta_str(e, "subresource").len() > 256 {
            errs.push(FieldError::too_long(&p.child("subresource"), "", 256));
        }
    }
    errs
}

/// Object metadata on create (upstream's `ValidateObjectMeta`), on the `metadata` object itself.
/// Name generation must already have happened. Checks, in upstream's order: generateName and
/// name format, namespace by scope, generation, labels, annotations, owner references,
/// finalizers, managed fields. Built-in kinds add `validate_kube_finalizer_names`.
pub fn validate_object_meta(
    meta: &Value,
    namespaced: bool,
    name_validator: NameValidator,
    path: &FieldPath,
) -> Vec<FieldError> {
    validate_object_meta_with(
        meta,
        namespaced,
        &|n, p| name_validator.validate(n, p),
        path,
    )
}

/// [`validate_object_meta`] with the kind's own name function (upstream's `ValidateNameFunc`),
/// for kinds whose names depend on the object (a CRD is named `<plural>.<group>`).
pub fn validate_object_meta_with(
    meta: &Value,
    namespaced: bool,
    name_validator: &dyn Fn(&str, bool) -> Vec<String>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta_str(meta, "generateName");
    if !generate_name.is_empty() {
        for m in name_validator(generate_name, true) {
            errs.push(FieldError::invalid(
                &path.child("generateName"),
                generate_name,
                m,
            ));
        }
    }
    let name = meta_str(meta, "name");
    if name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for m in name_validator(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, m));
        }
    }
    errs.extend(validate_object_meta_common(meta, namespaced, path));
    errs
}

fn validate_object_meta_common(
    meta: &Value,
    namespaced: bool,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let namespace = meta_str(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            for m in NameValidator::Dns1123Label.validate(namespace, false) {
                errs.push(FieldError::invalid(&path.child("namespace"), namespace, m));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    errs.extend(validate_nonnegative_field(
        generation(meta),
        &path.child("generation"),
    ));
    errs.extend(validate_labels(meta.get("labels"), &path.child("labels")));
    errs.extend(validate_annotations(
        meta.get("annotations"),
        &path.child("annotations"),
    ));
    errs.extend(validate_owner_references(
        meta.get("ownerReferences"),
        &path.child("ownerReferences"),
    ));
    errs.extend(validate_finalizers(
        meta.get("finalizers"),
        &path.child("finalizers"),
    ));
    errs.extend(validate_managed_fields(
        meta.get("managedFields"),
        &path.child("managedFields"),
    ));
    errs
}

fn generation(meta: &Value) -> i64 {
    meta.get("generation").and_then(Value::as_i64).unwrap_or(0)
}

/// `must be greater than or equal to 0` for a negative value.
pub fn validate_nonnegative_field(value: i64, path: &FieldPath) -> Vec<FieldError> {
    if value < 0 {
        vec![FieldError::invalid(
            path,
            value,
            "must be greater than or equal to 0",
        )]
    } else {
        Vec::new()
    }
}

/// `field is immutable` when `new` differs from `old`; the new value is the one shown.
pub fn validate_immutable_field(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    if new != old {
        vec![FieldError::invalid(
            path,
            new.clone(),
            FIELD_IMMUTABLE_ERROR_MSG,
        )]
    } else {
        Vec::new()
    }
}

/// A string field of metadata, absent read as "" (Go's zero value).
fn meta_string_value(meta: &Value, key: &str) -> Value {
    Value::from(meta_str(meta, key))
}

/// A pointer-like field of metadata (timestamps, grace period), absent read as null.
fn meta_nullable_value(meta: &Value, key: &str) -> Value {
    meta.get(key).cloned().unwrap_or(Value::Null)
}

/// Object metadata on update (upstream's `ValidateObjectMetaAccessorUpdate`): no new
/// finalizers once deletion started, a resourceVersion present (the store fills it in for
/// unconditional updates before validating, as upstream), generation not decremented, name,
/// namespace, uid, creationTimestamp, deletionTimestamp and deletionGracePeriodSeconds
/// unchanged, then labels, annotations, owner references and managed fields as on create.
pub fn validate_object_meta_update(new: &Value, old: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !meta_nullable_value(old, "deletionTimestamp").is_null() {
        let old_set: BTreeSet<String> = string_list(old.get("finalizers")).into_iter().collect();
        let extra: BTreeSet<String> = string_list(new.get("finalizers"))
            .into_iter()
            .filter(|f| !old_set.contains(f))
            .collect();
        if !extra.is_empty() {
            let quoted: Vec<String> = extra.iter().map(|f| go_quote(f)).collect();
            errs.push(FieldError::forbidden(
                &path.child("finalizers"),
                format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}", quoted.join(", ")),
            ));
        }
    }
    let rv = meta_str(new, "resourceVersion");
    if rv.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("resourceVersion"),
            rv,
            "must be specified for an update",
        ));
    }
    let (new_gen, old_gen) = (generation(new), generation(old));
    if new_gen < old_gen {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            new_gen,
            "must not be decremented",
        ));
    }
    for key in ["name", "namespace", "uid"] {
        errs.extend(validate_immutable_field(
            &meta_string_value(new, key),
            &meta_string_value(old, key),
            &path.child(key),
        ));
    }
    for key in [
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        errs.extend(validate_immutable_field(
            &meta_nullable_value(new, key),
            &meta_nullable_value(old, key),
            &path.child(key),
        ));
    }
    errs.extend(validate_labels(new.get("labels"), &path.child("labels")));
    errs.extend(validate_annotations(
        new.get("annotations"),
        &path.child("annotations"),
    ));
    errs.extend(validate_owner_references(
        new.get("ownerReferences"),
        &path.child("ownerReferences"),
    ));
    errs.extend(validate_managed_fields(
        new.get("managedFields"),
        &path.child("managedFields"),
    ));
    errs
}

/// Options of `validate_label_selector`, as upstream's `LabelSelectorValidationOptions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelSelectorValidationOptions {
    /// Accept values that are not valid label values (kept for objects stored before the check).
    pub allow_invalid_label_value: bool,
    /// Accept operators this version does not know (access reviews).
    pub allow_unknown_operator: bool,
}

/// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as upstream's
/// `ValidateLabelSelector`. Null or absent is valid.
pub fn validate_label_selector(
    selector: Option<&Value>,
    opts: LabelSelectorValidationOptions,
    path: &FieldPath,
) -> Vec<FieldError> {
    let Some(Value::Object(sel)) = selector else {
        return Vec::new();
    };
    let mut errs = validate_labels(sel.get("matchLabels"), &path.child("matchLabels"));
    if let Some(Value::Array(exprs)) = sel.get("matchExpressions") {
        for (i, e) in exprs.iter().enumerate() {
            errs.extend(validate_label_selector_requirement(
                e,
                opts,
                &path.child("matchExpressions").index(i),
            ));
        }
    }
    errs
}

fn validate_label_selector_requirement(
    req: &Value,
    opts: LabelSelectorValidationOptions,
    path: &FieldPath,
) -> Vec<FieldError> {
    let empty = Map::new();
    let req = req.as_object().unwrap_or(&empty);
    let operator = req.get("operator").and_then(Value::as_str).unwrap_or("");
    let key = req.get("key").and_then(Value::as_str).unwrap_or("");
    let values = string_list(req.get("values"));
    let mut errs = Vec::new();
    match operator {
        "In" | "NotIn" if values.is_empty() => {
            errs.push(FieldError::required(
                &path.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ));
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            errs.push(FieldError::forbidden(
                &path.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ));
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        _ if !opts.allow_unknown_operator => {
            errs.push(FieldError::invalid(
                &path.child("operator"),
                operator,
                "not a valid selector operator",
            ));
        }
        _ => {}
    }
    errs.extend(validate_label_name(key, &path.child("key")));
    if !opts.allow_invalid_label_value {
        for (i, v) in values.iter().enumerate() {
            for m in is_valid_label_value(v) {
                errs.push(FieldError::invalid(
                    &path.child("values").index(i),
                    v.as_str(),
                    m,
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The recorded upstream error body `name` (kube-apiserver v1.36's, kept in the repository
    /// beside the end-to-end tests). A missing recording fails the test.
    fn recorded(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../ironplane/tests/golden/errors")
            .join(format!("{name}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str::<Value>(&text).expect("a recording is JSON")["body"].clone()
    }

    fn assert_matches_recording(name: &str, status: &Status) {
        assert_eq!(status.to_json(), recorded(name), "{name}");
    }

    fn md() -> FieldPath {
        FieldPath::new("metadata")
    }

    #[test]
    fn invalid_name_matches_upstream() {
        let errs = validate_object_meta(
            &json!({"name": "Bad_Name", "namespace": "golden"}),
            true,
            NameValidator::Dns1123Subdomain,
            &md(),
        );
        assert_eq!(errs.len(), 1);
        let status = invalid_status("", "ConfigMap", "Bad_Name", &errs);
        assert_eq!(
            status.message,
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_matches_recording("invalid-name", &status);
    }

    #[test]
    fn missing_name_matches_upstream() {
        let errs = validate_object_meta(
            &json!({"namespace": "golden"}),
            true,
            NameValidator::Dns1123Subdomain,
            &md(),
        );
        let status = invalid_status("", "ConfigMap", "", &errs);
        assert_eq!(
            status.message,
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(errs[0].to_cause().reason, "FieldValueRequired");
        assert_matches_recording("missing-name", &status);
    }

    #[test]
    fn invalid_label_matches_upstream() {
        let meta = json!({"name": "l", "namespace": "golden", "labels": {"bad label": "x"}});
        let errs = validate_object_meta(&meta, true, NameValidator::Dns1123Subdomain, &md());
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "metadata.labels");
        assert_matches_recording(
            "invalid-label",
            &invalid_status("", "ConfigMap", "l", &errs),
        );
    }

    #[test]
    fn invalid_configmap_key_matches_upstream() {
        let key = "bad key!";
        let errs: Vec<FieldError> = is_config_map_key(key)
            .into_iter()
            .map(|m| FieldError::invalid(&FieldPath::new("data").key(key), key, m))
            .collect();
        assert_eq!(errs[0].field, "data[bad key!]");
        assert_matches_recording(
            "invalid-configmap-key",
            &invalid_status("", "ConfigMap", "k", &errs),
        );
    }

    #[test]
    fn deployment_selector_mismatch_prints_a_map_as_json() {
        let labels = json!({"app": "y"});
        let e = FieldError::invalid(
            &FieldPath::new("spec")
                .child("template")
                .child("metadata")
                .child("labels"),
            labels,
            "`selector` does not match template `labels`",
        );
        assert_matches_recording(
            "deployment-selector-mismatch",
            &invalid_status("apps", "Deployment", "d", &[e]),
        );
    }

    #[test]
    fn required_and_index_paths_match_upstream() {
        let e = FieldError::required(
            &FieldPath::new("spec")
                .child("containers")
                .index(0)
                .child("image"),
            "",
        );
        assert_matches_recording("pod-no-image", &invalid_status("", "Pod", "p", &[e]));
        let e = FieldError::required(&FieldPath::new("spec").child("ports"), "");
        assert_matches_recording(
            "service-no-ports",
            &invalid_status("", "Service", "s", &[e]),
        );
    }

    #[test]
    fn bad_cluster_ip_matches_upstream() {
        let path = FieldPath::new("spec").child("clusterIPs").index(0);
        let errs = is_valid_ip_for_legacy_field(&path, "999.1.1.1", true, &[]);
        assert_matches_recording(
            "service-bad-clusterip",
            &invalid_status("", "Service", "s", &errs),
        );
    }

    #[test]
    fn error_bodies_print_values_as_go_does() {
        let p = FieldPath::new("f");
        assert_eq!(
            FieldError::invalid(&p, 5, "x").message(),
            "Invalid value: 5: x"
        );
        assert_eq!(
            FieldError::invalid(&p, true, "x").message(),
            "Invalid value: true: x"
        );
        assert_eq!(
            FieldError::invalid(&p, Value::Null, "x").message(),
            "Invalid value: null: x"
        );
        assert_eq!(
            FieldError::invalid(&p, 1.5, "x").message(),
            "Invalid value: 1.5: x"
        );
        assert_eq!(
            FieldError::invalid(&p, 1e6, "x").message(),
            "Invalid value: 1e+06: x"
        );
        assert_eq!(
            FieldError::invalid(&p, json!(["a", "<b>"]), "x").message(),
            "Invalid value: [\"a\",\"\\u003cb\\u003e\"]: x"
        );
        assert_eq!(
            FieldError::invalid(&p, "a\"b\n", "x").message(),
            "Invalid value: \"a\\\"b\\n\": x"
        );
        assert_eq!(
            FieldError::not_supported(&p, "x", &["a", "b"]).message(),
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            FieldError::not_supported(&p, "x", &[]).message(),
            "Unsupported value: \"x\""
        );
        assert_eq!(
            FieldError::forbidden(&p, "not allowed on this type").message(),
            "Forbidden: not allowed on this type"
        );
        assert_eq!(
            FieldError::too_long(&p, "abc", 63).message(),
            "Too long: may not be more than 63 bytes"
        );
        assert_eq!(
            FieldError::too_long(&p, "abc", 1).message(),
            "Too long: may not be more than 1 byte"
        );
        assert_eq!(
            FieldError::too_many(&p, Some(5), Some(3)).message(),
            "Too many: 5: must have at most 3 items"
        );
        assert_eq!(
            FieldError::too_many(&p, None, Some(1)).message(),
            "Too many: must have at most 1 item"
        );
        assert_eq!(
            FieldError::duplicate(&p, "a").message(),
            "Duplicate value: \"a\""
        );
        assert_eq!(FieldError::not_found(&p, "a").message(), "Not found: \"a\"");
        assert_eq!(
            FieldError::internal(&p, "boom").message(),
            "Internal error: boom"
        );
        assert_eq!(
            FieldError::required(&p, "").to_string(),
            "f: Required value"
        );
        assert_eq!(
            FieldError::duplicate(&p, "a").to_cause().reason,
            "FieldValueDuplicate"
        );
    }

    #[test]
    fn go_quote_escapes_as_strconv() {
        assert_eq!(go_quote("héllo"), "\"héllo\"");
        assert_eq!(
            go_quote("\u{1}\u{7f}\u{a0}\u{200b}"),
            "\"\\x01\\x7f\\u00a0\\u200b\""
        );
        assert_eq!(go_quote("tab\there"), "\"tab\\there\"");
    }

    #[test]
    fn field_paths_render_as_upstream() {
        assert_eq!(FieldPath::nil().to_string(), "<nil>");
        assert_eq!(FieldPath::nil().child("key").to_string(), "key");
        assert_eq!(
            FieldPath::nil()
                .child("values")
                .index(0)
                .key("a")
                .to_string(),
            "values[0][a]"
        );
        assert_eq!(
            FieldPath::new("data").key("bad key!").to_string(),
            "data[bad key!]"
        );
        assert_eq!(
            FieldPath::new("spec")
                .child("containers")
                .index(2)
                .child("ports")
                .to_string(),
            "spec.containers[2].ports"
        );
    }

    #[test]
    fn aggregate_drops_duplicates_and_brackets_several() {
        let p = FieldPath::new("a");
        let r = FieldError::required(&p, "");
        assert_eq!(
            aggregate_message(&[r.clone(), r.clone()]),
            "a: Required value"
        );
        let f = FieldError::forbidden(&FieldPath::new("b"), "no");
        assert_eq!(
            aggregate_message(&[r.clone(), f.clone(), r]),
            "[a: Required value, b: Forbidden: no]"
        );
        let s = invalid_status("apps", "Deployment", "d", &[]);
        assert_eq!(s.message, "Deployment.apps \"d\" is invalid");
    }

    #[test]
    fn dns_validators() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(is_dns1123_subdomain("a").is_empty());
        assert_eq!(is_dns1123_subdomain("").len(), 1);
        assert_eq!(is_dns1123_subdomain("a..b").len(), 1);
        assert_eq!(is_dns1123_subdomain("-a").len(), 1);
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters".to_string()]
        );
        assert!(is_dns1123_label("my-name").is_empty());
        assert_eq!(
            is_dns1123_label("a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert_eq!(
            is_dns1123_label("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert!(is_dns1035_label("svc-1").is_empty());
        assert_eq!(
            is_dns1035_label("1svc"),
            vec!["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert!(is_wildcard_dns1123_subdomain("*.example.com").is_empty());
        assert_eq!(is_wildcard_dns1123_subdomain("*example.com").len(), 1);
        assert!(is_dns1123_subdomain_with_underscore("_srv._tcp.example.com").is_empty());
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/My_Name.1").is_empty());
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty".to_string()]
        );
        let long = is_qualified_name(&"a".repeat(64));
        assert_eq!(
            long,
            vec!["name part must be no more than 63 bytes".to_string()]
        );
        let empty = is_qualified_name("example.com/");
        assert_eq!(empty.len(), 2);
        assert_eq!(empty[0], "name part must be non-empty");
        let many = is_qualified_name("a/b/c");
        assert_eq!(
            many,
            vec!["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()]
        );
        assert!(
            is_qualified_name("Bad.Prefix/a")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_x-y").is_empty());
        assert_eq!(
            is_valid_label_value("-x"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 bytes".to_string()]
        );
    }

    #[test]
    fn other_formats() {
        assert!(is_config_map_key("a.b_c-D").is_empty());
        assert_eq!(
            is_config_map_key(".."),
            vec!["must not be '..'".to_string()]
        );
        assert_eq!(
            is_config_map_key("..a"),
            vec!["must not start with '..'".to_string()]
        );
        assert!(is_c_identifier("_a1").is_empty());
        assert_eq!(is_c_identifier("1a").len(), 1);
        assert_eq!(
            is_valid_port_num(0),
            vec!["must be between 1 and 65535, inclusive".to_string()]
        );
        assert!(is_valid_port_num(443).is_empty());
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(is_valid_port_name("-a--").len(), 2);
        assert_eq!(
            is_valid_port_name("123"),
            vec!["must contain at least one letter (a-z)".to_string()]
        );
        assert!(is_valid_percent("50%").is_empty());
        assert_eq!(is_valid_percent("%").len(), 1);
        assert!(is_path_segment_name("a:b").is_empty());
        assert_eq!(
            is_path_segment_name(".."),
            vec!["may not be '..'".to_string()]
        );
        assert_eq!(
            is_path_segment_name("a/b%"),
            vec![
                "may not contain '/'".to_string(),
                "may not contain '%'".to_string()
            ]
        );
        assert!(is_env_var_name("MY_VAR").is_empty());
        assert!(is_relaxed_env_var_name("1 a").is_empty());
        assert_eq!(is_relaxed_env_var_name("a=b").len(), 1);
    }

    #[test]
    fn ip_validation() {
        let p = FieldPath::new("ip");
        assert!(is_valid_ip(&p, "10.0.0.1").is_empty());
        assert!(is_valid_ip(&p, "2001:db8::1").is_empty());
        assert_eq!(
            is_valid_ip(&p, "010.0.0.1")[0].detail,
            "must not have leading 0s"
        );
        assert_eq!(
            is_valid_ip(&p, "::ffff:1.2.3.4")[0].detail,
            "must not be an IPv4-mapped IPv6 address"
        );
        assert_eq!(
            is_valid_ip(&p, "2001:DB8::1")[0].detail,
            "must be in canonical form (\"2001:db8::1\")"
        );
        assert_eq!(
            is_valid_ip(&p, "fe80::1%eth0")[0].detail,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        );
        assert!(is_valid_ip_for_legacy_field(&p, "010.0.0.1", false, &[]).is_empty());
        assert!(is_valid_ip_for_legacy_field(&p, "bad", true, &["bad"]).is_empty());
        assert!(is_valid_cidr(&p, "10.0.0.0/8").is_empty());
        assert_eq!(
            is_valid_cidr(&p, "10.0.0.1/8")[0].detail,
            "must not have bits set beyond the prefix length"
        );
        assert_eq!(
            is_valid_cidr(&p, "10.0.0.0/08")[0].detail,
            "must not have leading 0s in IP or prefix length"
        );
        assert_eq!(
            is_valid_cidr(&p, "10.0.0.0/33")[0].detail,
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        );
        assert_eq!(
            is_valid_cidr(&p, "2001:DB8::/32")[0].detail,
            "must be in canonical form (\"2001:db8::/32\")"
        );
    }

    #[test]
    fn object_meta_scope_generate_name_and_more() {
        let errs = validate_object_meta(
            &json!({"name": "a"}),
            true,
            NameValidator::Dns1123Subdomain,
            &md(),
        );
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec!["metadata.namespace: Required value"]
        );
        let errs = validate_object_meta(
            &json!({"name": "a", "namespace": "x"}),
            false,
            NameValidator::Dns1123Subdomain,
            &md(),
        );
        assert_eq!(
            errs[0].to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        // A generateName ending in '-' is checked with the dash masked.
        let meta = json!({"generateName": "web-", "name": "web-x1b2c", "namespace": "n"});
        assert!(
            validate_object_meta(&meta, true, NameValidator::Dns1123Subdomain, &md()).is_empty()
        );
        let meta = json!({"generateName": "Web-", "name": "web-x", "namespace": "n"});
        assert_eq!(
            validate_object_meta(&meta, true, NameValidator::Dns1123Subdomain, &md())[0].field,
            "metadata.generateName"
        );
        let meta = json!({"name": "a", "namespace": "n", "generation": -1});
        assert_eq!(
            validate_object_meta(&meta, true, NameValidator::Dns1123Subdomain, &md())[0]
                .to_string(),
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0"
        );
        let meta = json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion", "bad/x/y"]});
        let errs = validate_object_meta(&meta, false, NameValidator::PathSegment, &md());
        assert_eq!(errs.len(), 2);
        assert_eq!(
            errs[1].to_string(),
            "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\",\"bad/x/y\"]: finalizer orphan and foregroundDeletion cannot be both set"
        );
        let meta = json!({"name": "a", "finalizers": ["custom"]});
        assert_eq!(
            validate_kube_finalizer_names(&meta, &md())[0].to_string(),
            "metadata.finalizers[0]: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
        );
        assert_eq!(finalizer_warnings(&meta, &md()).len(), 1);
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_BYTES);
        let meta = json!({"name": "a", "annotations": {"k": big, "Example.COM/Key": "v"}});
        let errs = validate_object_meta(&meta, false, NameValidator::None, &md());
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        assert_eq!(
            NameValidator::PathSegment.validate("a/b", false),
            vec!["may not contain '/'".to_string()]
        );
    }

    #[test]
    fn owner_references() {
        let meta = json!({"name": "a", "namespace": "n", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "2", "controller": true},
            {"apiVersion": "", "kind": "", "name": "", "uid": ""}
        ]});
        let errs: Vec<String> =
            validate_object_meta(&meta, true, NameValidator::Dns1123Subdomain, &md())
                .iter()
                .map(ToString::to_string)
                .collect();
        assert!(
            errs[0].starts_with("metadata.ownerReferences: Invalid value: {\"apiVersion\":\"v1\""),
            "{errs:?}"
        );
        assert!(errs[0].ends_with(": /v1, Kind=Event is disallowed from being an owner"));
        assert!(errs[1].ends_with("Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs and Event/e"));
        assert_eq!(
            errs[2],
            "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty"
        );
        assert_eq!(
            errs[5],
            "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
        );
    }

    #[test]
    fn object_meta_update() {
        let old = json!({"name": "a", "namespace": "n", "uid": "u1", "resourceVersion": "5", "creationTimestamp": "2024-01-01T00:00:00Z", "generation": 3});
        let new = json!({"name": "b", "namespace": "n", "uid": "u2", "resourceVersion": "5", "creationTimestamp": "2024-01-01T00:00:00Z", "generation": 2});
        let errs: Vec<String> = validate_object_meta_update(&new, &old, &md())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "metadata.generation: Invalid value: 2: must not be decremented",
                "metadata.name: Invalid value: \"b\": field is immutable",
                "metadata.uid: Invalid value: \"u2\": field is immutable",
            ]
        );
        let old = json!({"name": "a", "resourceVersion": "5", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/a"]});
        let new = json!({"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["x/a", "x/c", "x/b"]});
        let errs: Vec<String> = validate_object_meta_update(&new, &old, &md())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x/b\", \"x/c\"}",
                "metadata.resourceVersion: Invalid value: \"\": must be specified for an update",
            ]
        );
        let new = json!({"name": "a", "resourceVersion": "1", "creationTimestamp": "2024-01-01T00:00:00Z"});
        let old = json!({"name": "a", "resourceVersion": "1"});
        assert_eq!(
            validate_object_meta_update(&new, &old, &md())[0].to_string(),
            "metadata.creationTimestamp: Invalid value: \"2024-01-01T00:00:00Z\": field is immutable"
        );
    }

    #[test]
    fn label_selector_validation() {
        let sel = json!({"matchLabels": {"a": "b"}, "matchExpressions": [
            {"key": "k", "operator": "In", "values": []},
            {"key": "k", "operator": "Exists", "values": ["x"]},
            {"key": "k", "operator": "Bogus"},
            {"key": "bad key", "operator": "In", "values": ["-x"]}
        ]});
        let errs: Vec<String> = validate_label_selector(
            Some(&sel),
            LabelSelectorValidationOptions::default(),
            &FieldPath::new("spec").child("selector"),
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            errs[0],
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            errs[1],
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        );
        assert_eq!(
            errs[2],
            "spec.selector.matchExpressions[2].operator: Invalid value: \"Bogus\": not a valid selector operator"
        );
        assert!(errs[3].starts_with("spec.selector.matchExpressions[3].key: Invalid value: \"bad key\": name part must consist"));
        assert!(errs[4].starts_with("spec.selector.matchExpressions[3].values[0]: Invalid value: \"-x\": a valid label must be"));
        assert_eq!(errs.len(), 5);
    }

    #[test]
    fn field_manager() {
        let p = FieldPath::new("fieldManager");
        assert_eq!(
            validate_field_manager("a\u{7}", &p)[0].detail,
            "invalid character U+0007 (at position 1)"
        );
        assert_eq!(
            validate_field_manager(&"m".repeat(129), &p)[0].message(),
            "Too long: may not be more than 128 bytes"
        );
    }
}
