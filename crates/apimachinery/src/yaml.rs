//! YAML documents as JSON, read as upstream reads YAML request bodies: sigs.k8s.io/yaml's
//! `YAMLToJSON` over go-yaml v2, and its strict twin `YAMLToJSONStrict`, which refuses keys
//! given twice in a mapping. One pass gives both: the JSON value, in which the last of a
//! duplicate key's values wins (as the non-strict conversion keeps it, and as a request under
//! `fieldValidation=Ignore` stores it), and go-yaml's complaint about every duplicate, in its
//! order and words: `line N: key "x" already set in map`, N being the 1-based line on which the
//! duplicate's *value* starts (go-yaml reports the value node's line). Nested duplicates count
//! (inside mappings and lists); a duplicate whose value holds duplicates is reported after them,
//! as go-yaml decodes the value before it sets the key. [`Document::strict_error`] is the text of
//! go-yaml's `TypeError` that upstream's handlers print or split into warnings.
//!
//! Merge keys (`<<`, plain or tagged `!!merge`) are applied as go-yaml v2 applies them: the
//! merged mapping's entries (or, for a list of mappings, the last one's first, so that earlier
//! ones win) are set into the mapping at the place of the merge key, overwriting what is there;
//! a key set twice this way (before or after the merge, or by two merged mappings) is a
//! duplicate in go-yaml's strict reading, reported on the line of the merged value. A merge
//! value that is no mapping (nor a list of them) is go-yaml's fatal [`MERGE_NOT_MAP`].
//!
//! The parse itself is serde_yaml_ng's (libyaml's), as before; only the visitor that builds the
//! JSON value is ours, so that it sees every key. Lines come from libyaml's marks, which go-yaml
//! (a port of libyaml) computes alike: serde_yaml_ng attaches the mark of the event it is reading
//! to an error a visitor returns, so for the few scalars whose line is needed (a duplicate key,
//! its scalar value, a merge key) the visitor keeps the scalar aside and returns a marker error,
//! which its caller reads the mark from and drops. A collection's first line (where libyaml
//! starts it: its `{`, `[`, first `-` or first key, or a property) is the first thing after its
//! key's `:` in the text.
//!
//! Known differences from go-yaml, all in corners no Kubernetes manifest reaches: keys are
//! compared as the strings they become in JSON (go-yaml compares decoded keys: `1` and `"1"` are
//! two keys to it, which it then writes to JSON in an undefined order, and YAML 1.1's `yes` and
//! `true` are one); values resolve as serde_yaml_ng resolves them, as before (YAML 1.2: `yes` is
//! a string where go-yaml v2 reads a bool); a duplicate key that is itself an alias is located
//! by its anchor's text; in a merge, duplicates inside the merged values are reported before the
//! keys the merge sets twice, where go-yaml interleaves them entry by entry.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::validation::go_quote;

/// A YAML document read as JSON, with go-yaml's strict complaints about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub value: Value,
    /// Keys given twice, in the order go-yaml reports them.
    pub duplicates: Vec<DuplicateKey>,
}

/// A key given twice in one mapping, as go-yaml's strict decoder reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The 1-based line on which the duplicate's value starts.
    pub line: usize,
    /// The key as go-yaml prints it (`%#v` of the decoded key): a string quoted, a number, bool
    /// or null as Go prints those.
    pub key: String,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: key {} already set in map", self.line, self.key)
    }
}

/// The start of go-yaml's `TypeError` text; each complaint follows on its own line, indented by
/// two spaces.
pub const UNMARSHAL_ERRORS: &str = "yaml: unmarshal errors:";

/// go-yaml's fatal error for a merge key whose value is no mapping nor list of mappings.
pub const MERGE_NOT_MAP: &str = "map merge requires map or sequence of maps as the value";

impl Document {
    /// What go-yaml's strict decoder answers for the document: `yaml: unmarshal errors:` and one
    /// line per duplicate key; `None` when no key is given twice.
    pub fn strict_error(&self) -> Option<String> {
        if self.duplicates.is_empty() {
            return None;
        }
        let mut out = String::from(UNMARSHAL_ERRORS);
        for d in &self.duplicates {
            out.push_str("\n  ");
            out.push_str(&d.to_string());
        }
        Some(out)
    }
}

/// Reads one YAML document as JSON (see the module's doc). The errors are serde_yaml_ng's, and
/// [`MERGE_NOT_MAP`] for a bad merge value; an empty document is `null`.
pub fn to_json(body: &[u8]) -> Result<Document, serde_yaml_ng::Error> {
    let mut st = State::new(body);
    let value = ValueSeed {
        st: &mut st,
        capture: false,
    }
    .deserialize(serde_yaml_ng::Deserializer::from_slice(body))?;
    Ok(Document {
        value,
        duplicates: st.duplicates,
    })
}

/// The message of the marker error that carries a mark out of serde_yaml_ng. Nothing a document
/// holds reads as it: it is only ever looked for at the end of an error's text.
const MARK: &str = "\u{0}ironplane: yaml mark\u{0}";

/// A position as libyaml gives it, 1-based; the column counts characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    line: usize,
    column: usize,
}

/// The mark of a marker error: serde_yaml_ng prints an error as `[path: ]message at line L
/// column C` (without the position when it is the document's first character).
fn mark_of(err: &impl fmt::Display) -> Option<Mark> {
    let text = err.to_string();
    let rest = &text[text.rfind(MARK)? + MARK.len()..];
    if rest.is_empty() {
        return Some(Mark { line: 1, column: 1 });
    }
    let (line, column) = rest.strip_prefix(" at line ")?.split_once(" column ")?;
    Some(Mark {
        line: line.parse().ok()?,
        column: column.parse().ok()?,
    })
}

struct State<'a> {
    /// The document's text, for what marks alone do not say; `None` if it is not UTF-8 (libyaml
    /// also reads UTF-16).
    text: Option<&'a str>,
    /// Byte offsets of the lines' starts, computed when first needed.
    lines: Vec<usize>,
    /// The last mark turned into an offset, and that offset (a walk along one long line goes on
    /// from there).
    cursor: Option<(Mark, usize)>,
    duplicates: Vec<DuplicateKey>,
    /// The scalar read by a visitor that returned a marker error.
    scalar: Option<Value>,
    /// The key read by a key visitor that returned a marker error.
    key: Option<String>,
}

impl<'a> State<'a> {
    fn new(body: &'a [u8]) -> Self {
        State {
            text: std::str::from_utf8(body).ok(),
            lines: Vec::new(),
            cursor: None,
            duplicates: Vec::new(),
            scalar: None,
            key: None,
        }
    }

    /// Line starts as libyaml counts lines: `\r\n`, `\r`, `\n`, NEL, LS and PS each end one; a
    /// byte-order mark is not part of the first line's columns.
    fn line_starts(&mut self) -> &[usize] {
        if self.lines.is_empty()
            && let Some(text) = self.text
        {
            let b = text.as_bytes();
            self.lines
                .push(if text.starts_with('\u{feff}') { 3 } else { 0 });
            let mut i = 0;
            while i < b.len() {
                match break_at(b, i) {
                    0 => i += 1,
                    n => {
                        i += n;
                        self.lines.push(i);
                    }
                }
            }
        }
        &self.lines
    }

    /// The byte offset of a mark in the text.
    fn offset(&mut self, mark: Mark) -> Option<usize> {
        let text = self.text?;
        let start = *self.line_starts().get(mark.line.checked_sub(1)?)?;
        let (mut at, mut skip) = (start, mark.column.checked_sub(1)?);
        if let Some((last, offset)) = self.cursor
            && last.line == mark.line
            && last.column <= mark.column
        {
            (at, skip) = (offset, mark.column - last.column);
        }
        let found = if text.is_char_boundary(at) {
            match text[at..].char_indices().nth(skip) {
                Some((i, _)) => at + i,
                None if text[at..].chars().count() == skip => text.len(),
                None => return None,
            }
        } else {
            return None;
        };
        self.cursor = Some((mark, found));
        Some(found)
    }

    /// The 1-based line of a byte offset.
    fn line_of(&mut self, offset: usize) -> usize {
        self.line_starts().partition_point(|&s| s <= offset).max(1)
    }

    /// The node a mark starts: its tag, if it has one, and the offset of its content (past its
    /// anchor and tag).
    fn node_at(&mut self, mark: Mark) -> Option<(Option<&'a str>, usize)> {
        let text = self.text?;
        let b = text.as_bytes();
        let mut at = self.offset(mark)?;
        let mut tag = None;
        while let Some(&c @ (b'&' | b'!')) = b.get(at) {
            let end = at
                + b[at..]
                    .iter()
                    .position(|&c| is_blank(c))
                    .unwrap_or(b.len() - at);
            if c == b'!' {
                tag = Some(&text[at..end]);
            }
            at = end;
            while matches!(b.get(at), Some(b' ' | b'\t')) {
                at += 1;
            }
        }
        Some((tag, at))
    }

    /// Whether the key at `mark` (whose text is `<<`) is a merge key: plain, or tagged `!!merge`.
    fn is_merge(&mut self, mark: Mark) -> bool {
        let Some((tag, at)) = self.node_at(mark) else {
            return true;
        };
        let quoted = matches!(
            self.text.and_then(|t| t.as_bytes().get(at)),
            Some(b'"' | b'\'')
        );
        match tag {
            Some(tag) => tag == "!!merge",
            None => !quoted,
        }
    }

    /// The key at `mark` as go-yaml prints it: a plain scalar resolved as go-yaml resolves it,
    /// anything quoted or tagged `!!str` as a string.
    fn go_key(&mut self, mark: Mark, key: &str) -> String {
        let plain = match self.node_at(mark) {
            None => false,
            Some((Some(tag), _)) => tag != "!!str",
            Some((None, at)) => !matches!(
                self.text.and_then(|t| t.as_bytes().get(at)),
                Some(b'"' | b'\'' | b'|' | b'>')
            ),
        };
        if plain {
            go_plain_key(key)
        } else {
            go_quote(key)
        }
    }

    /// Where the value of the key at `key_mark` starts: the line and first character of what
    /// follows the key's `:` (blanks and comments skipped). `None` when the text does not read
    /// as expected (a block scalar key, a multi-line plain key, text that is not UTF-8).
    fn value_start(&mut self, key_mark: Mark, key: &str) -> Option<(usize, char)> {
        let text = self.text?;
        let b = text.as_bytes();
        let (_, mut at) = self.node_at(key_mark)?;
        match *b.get(at)? {
            b'"' => {
                at += 1;
                loop {
                    match *b.get(at)? {
                        b'\\' => at += 2,
                        b'"' => break at += 1,
                        _ => at += 1,
                    }
                }
            }
            b'\'' => {
                at += 1;
                loop {
                    match *b.get(at)? {
                        b'\'' if b.get(at + 1) == Some(&b'\'') => at += 2,
                        b'\'' => break at += 1,
                        _ => at += 1,
                    }
                }
            }
            b'|' | b'>' => return None,
            _ if text.get(at..)?.starts_with(key) => at += key.len(),
            _ => return None,
        }
        at = skip_blanks(b, at);
        if b.get(at) != Some(&b':') {
            return None;
        }
        at = skip_blanks(b, at + 1);
        let first = text.get(at..)?.chars().next()?;
        Some((self.line_of(at), first))
    }

    fn duplicate(&mut self, line: usize, key_mark: Mark, key: &str) {
        let key = self.go_key(key_mark, key);
        self.duplicates.push(DuplicateKey { line, key });
    }
}

/// The length of the line break at `i`, 0 if none.
fn break_at(b: &[u8], i: usize) -> usize {
    match b[i] {
        b'\r' if b.get(i + 1) == Some(&b'\n') => 2,
        b'\r' | b'\n' => 1,
        0xc2 if b.get(i + 1) == Some(&0x85) => 2,
        0xe2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)) => 3,
        _ => 0,
    }
}

fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Past spaces, tabs, line breaks and comments.
fn skip_blanks(b: &[u8], mut at: usize) -> usize {
    while at < b.len() {
        match b[at] {
            b' ' | b'\t' => at += 1,
            b'#' => {
                while at < b.len() && break_at(b, at) == 0 {
                    at += 1;
                }
            }
            _ => match break_at(b, at) {
                0 => break,
                n => at += n,
            },
        }
    }
    at
}

/// A plain key as go-yaml v2 resolves it (its YAML 1.1 table, ints in Go's base-prefixed
/// syntax, floats) and Go's `%#v` prints the result; a string is quoted.
fn go_plain_key(key: &str) -> String {
    let word = match key {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => "true",
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            "false"
        }
        "" | "~" | "null" | "Null" | "NULL" => "<nil>",
        ".nan" | ".NaN" | ".NAN" => "NaN",
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => "+Inf",
        "-.inf" | "-.Inf" | "-.INF" => "-Inf",
        _ => "",
    };
    if !word.is_empty() {
        return word.to_string();
    }
    match key.as_bytes()[0] {
        b'.' => {
            if let Some(f) = go_parse_float(key) {
                return go_float(f);
            }
        }
        b'0'..=b'9' | b'+' | b'-' => {
            let digits: String = key.chars().filter(|&c| c != '_').collect();
            if let Some(n) = go_parse_int(&digits) {
                return n;
            }
            if yaml_style_float(&digits)
                && let Some(f) = go_parse_float(&digits)
            {
                return go_float(f);
            }
        }
        _ => {}
    }
    go_quote(key)
}

/// Go's `strconv.ParseInt(s, 0, 64)` printed as `%#v` prints an `int`, or failing that
/// `ParseUint(s, 0, 64)` printed as `%#v` prints a `uint64` (in hex).
fn go_parse_int(s: &str) -> Option<String> {
    let (negative, signed, rest) = match s.as_bytes().first()? {
        b'-' => (true, true, &s[1..]),
        b'+' => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let lower = rest.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        if magnitude <= 1u128 << 63 {
            return Some(format!("-{magnitude}"));
        }
        return None;
    }
    if magnitude <= i64::MAX as u128 {
        Some(magnitude.to_string())
    } else if !signed && magnitude <= u64::MAX as u128 {
        Some(format!("{magnitude:#x}"))
    } else {
        None
    }
}

/// go-yaml's `yamlStyleFloat`: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    } else {
        if !digits(&mut i) {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// A finite float Go's `ParseFloat` would read (one out of range is an error to it).
fn go_parse_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    if lower.contains("inf") || lower.contains("nan") {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// A float as Go's `%v` prints it: `%g` with the shortest digits, in exponent form below 1e-4
/// and from 1e6 on (`strconv` decides with a precision of 6 when the digits are the shortest).
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if f.is_sign_negative() {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        ));
    } else if exp < 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-exp - 1) as usize));
        out.push_str(&digits);
    } else {
        let whole = exp as usize + 1;
        if digits.len() <= whole {
            out.push_str(&digits);
            out.push_str(&"0".repeat(whole - digits.len()));
        } else {
            out.push_str(&digits[..whole]);
            out.push('.');
            out.push_str(&digits[whole..]);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The visitors. Values are built as serde_json's own `Value` visitor builds them (the same
// numbers, `null` for YAML's nulls and for floats JSON cannot hold, the same expectations in
// type errors), so that only what the duplicates need is new.
// ---------------------------------------------------------------------------------------------

/// Reads any node as JSON. With `capture`, a scalar is kept in the state and a marker error
/// returned instead, so the caller learns the scalar's mark.
struct ValueSeed<'s, 'a> {
    st: &'s mut State<'a>,
    capture: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl ValueSeed<'_, '_> {
    fn scalar<E: de::Error>(self, value: Value) -> Result<Value, E> {
        if self.capture {
            self.st.scalar = Some(value);
            return Err(E::custom(MARK));
        }
        Ok(value)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.scalar(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.scalar(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.scalar(Value::Number(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        let n = Number::deserialize(de::value::I128Deserializer::<E>::new(v))?;
        self.scalar(Value::Number(n))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        let n = Number::deserialize(de::value::U128Deserializer::<E>::new(v))?;
        self.scalar(Value::Number(n))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.scalar(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.scalar(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.scalar(Value::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.scalar(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.scalar(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ValueSeed {
            st: &mut *self.st,
            capture: false,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        read_mapping(self.st, map).map(Value::Object)
    }
}

/// One entry of a merged mapping: its key (and the key's mark), value, and the line of the value.
struct Entry {
    key: String,
    key_mark: Mark,
    value: Value,
    line: usize,
}

/// A mapping read into a JSON object: the last of duplicate keys wins, each duplicate is
/// reported after its value was read, merge keys set their mappings' entries.
fn read_mapping<'de, A: MapAccess<'de>>(
    st: &mut State<'_>,
    mut map: A,
) -> Result<Map<String, Value>, A::Error> {
    let mut obj = Map::new();
    let mut first = true;
    loop {
        let read = map.next_key_seed(KeySeed {
            st: &mut *st,
            taken: Some(&obj),
            first,
        });
        first = false;
        let (key, key_mark) = match read {
            Ok(None) => break,
            Ok(Some(key)) => {
                let value = map.next_value_seed(ValueSeed {
                    st: &mut *st,
                    capture: false,
                })?;
                obj.insert(key, value);
                continue;
            }
            Err(e) => match mark_of(&e) {
                Some(mark) => (st.key.take().unwrap_or_default(), mark),
                None => return Err(e),
            },
        };
        if key == "<<" && st.is_merge(key_mark) {
            for e in read_merge(st, &mut map, key_mark)? {
                if obj.contains_key(&e.key) {
                    st.duplicate(e.line, e.key_mark, &e.key);
                }
                obj.insert(e.key, e.value);
            }
            continue;
        }
        let (value, line) = read_keyed_value(st, &mut map, key_mark, &key)?;
        st.duplicate(line, key_mark, &key);
        obj.insert(key, value);
    }
    Ok(obj)
}

/// The value of the key at `key_mark`, and the line it starts on.
fn read_keyed_value<'de, A: MapAccess<'de>>(
    st: &mut State<'_>,
    map: &mut A,
    key_mark: Mark,
    key: &str,
) -> Result<(Value, usize), A::Error> {
    let read = map.next_value_seed(ValueSeed {
        st: &mut *st,
        capture: true,
    });
    let start = st.value_start(key_mark, key);
    match read {
        // A collection: it starts where its text does.
        Ok(value) => Ok((value, start.map_or(key_mark.line, |(line, _)| line))),
        Err(e) => match mark_of(&e) {
            Some(mark) => {
                let value = st.scalar.take().unwrap_or(Value::Null);
                // The mark of an alias's scalar is its anchor's; go-yaml names the alias.
                let line = match start {
                    Some((line, '*')) => line,
                    _ => mark.line,
                };
                Ok((value, line))
            }
            None => Err(e),
        },
    }
}

/// The entries a merge key's value sets, in the order go-yaml sets them: a mapping's in its
/// order, a list's mappings from the last to the first. An alias must name a mapping.
fn read_merge<'de, A: MapAccess<'de>>(
    st: &mut State<'_>,
    map: &mut A,
    key_mark: Mark,
) -> Result<Vec<Entry>, A::Error> {
    let alias = matches!(st.value_start(key_mark, "<<"), Some((_, '*')));
    map.next_value_seed(MergeSeed {
        st,
        list_allowed: !alias,
    })
}

/// Reads a merge key's value (with `list_allowed`) or one mapping of its list.
struct MergeSeed<'s, 'a> {
    st: &'s mut State<'a>,
    list_allowed: bool,
}

impl<'de> DeserializeSeed<'de> for MergeSeed<'_, '_> {
    type Value = Vec<Entry>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Entry>, D::Error> {
        d.deserialize_any(self)
    }
}

fn not_a_map<T, E: de::Error>() -> Result<T, E> {
    Err(E::custom(MERGE_NOT_MAP))
}

impl<'de> Visitor<'de> for MergeSeed<'_, '_> {
    type Value = Vec<Entry>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MERGE_NOT_MAP)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_none<E: de::Error>(self) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Vec<Entry>, E> {
        not_a_map()
    }

    fn visit_enum<A: EnumAccess<'de>>(self, _: A) -> Result<Vec<Entry>, A::Error> {
        not_a_map()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Entry>, A::Error> {
        if !self.list_allowed {
            return not_a_map();
        }
        let mut maps = Vec::new();
        while let Some(entries) = seq.next_element_seed(MergeSeed {
            st: &mut *self.st,
            list_allowed: false,
        })? {
            maps.push(entries);
        }
        Ok(maps.into_iter().rev().flatten().collect())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<Entry>, A::Error> {
        read_merged_mapping(self.st, map)
    }
}

/// A merged mapping's entries with their lines, duplicates kept: go-yaml sets them one by one
/// into the mapping that merges, where a key already there is the duplicate. A merge key inside
/// sets its own entries at its place.
fn read_merged_mapping<'de, A: MapAccess<'de>>(
    st: &mut State<'_>,
    mut map: A,
) -> Result<Vec<Entry>, A::Error> {
    let mut entries = Vec::new();
    let mut first = true;
    loop {
        let read = map.next_key_seed(KeySeed {
            st: &mut *st,
            taken: None,
            first,
        });
        first = false;
        let (key, key_mark) = match read {
            Ok(None) => break,
            Ok(Some(key)) => (key, Mark { line: 0, column: 0 }),
            Err(e) => match mark_of(&e) {
                Some(mark) => (st.key.take().unwrap_or_default(), mark),
                None => return Err(e),
            },
        };
        if key == "<<" && st.is_merge(key_mark) {
            entries.extend(read_merge(st, &mut map, key_mark)?);
            continue;
        }
        let (value, line) = read_keyed_value(st, &mut map, key_mark, &key)?;
        entries.push(Entry {
            key,
            key_mark,
            value,
            line,
        });
    }
    Ok(entries)
}

/// Reads a key as serde_json's `Value` reads one (any scalar's text). Returns a marker error,
/// keeping the key in the state, for a key whose mark is needed: one already in `taken`, a
/// possible merge key, or any key when there is no `taken` (a merged mapping's).
struct KeySeed<'s, 'a, 'm> {
    st: &'s mut State<'a>,
    taken: Option<&'m Map<String, Value>>,
    /// serde_json expects its first key as "a string key", the others as "a string".
    first: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_, '_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_, '_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.first {
            "a string key"
        } else {
            "a string"
        })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        let marked = match self.taken {
            None => true,
            Some(taken) => v == "<<" || taken.contains_key(v),
        };
        if marked {
            self.st.key = Some(v.to_owned());
            return Err(E::custom(MARK));
        }
        Ok(v.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dups(yaml: &str) -> Vec<String> {
        to_json(yaml.as_bytes())
            .unwrap_or_else(|e| panic!("{yaml}: {e}"))
            .duplicates
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn value(yaml: &str) -> Value {
        to_json(yaml.as_bytes()).unwrap().value
    }

    #[test]
    fn a_document_without_duplicates_reads_as_serde_json_reads_it() {
        let text =
            "a: 1\nb: [x, 2.5, true, ~, '']\nc: {d: -3, e: 18446744073709551615}\n\"f\": .nan\n";
        let ours = to_json(text.as_bytes()).unwrap();
        let theirs: Value = serde_yaml_ng::from_str(text).unwrap();
        assert_eq!(ours.value, theirs);
        assert!(ours.duplicates.is_empty());
        assert_eq!(ours.strict_error(), None);
        assert_eq!(value(""), Value::Null);
        assert_eq!(value("--- 5\n"), json!(5));
    }

    #[test]
    fn a_top_level_duplicate_keeps_the_last_value_and_names_the_line() {
        let doc = to_json(b"a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(doc.value, json!({"a": 3, "b": 2}));
        assert_eq!(
            doc.strict_error().unwrap(),
            "yaml: unmarshal errors:\n  line 3: key \"a\" already set in map"
        );
    }

    #[test]
    fn nested_duplicates_in_maps_and_lists_are_all_reported_in_order() {
        let text = "spec:\n  containers:\n  - name: x\n    image: a\n    image: b\n  - {name: y, name: z}\n  paused: true\n  paused: false\n";
        assert_eq!(
            dups(text),
            [
                r#"line 5: key "image" already set in map"#,
                r#"line 6: key "name" already set in map"#,
                r#"line 8: key "paused" already set in map"#,
            ]
        );
        assert_eq!(
            value(text),
            json!({"spec": {"containers": [{"name": "x", "image": "b"}, {"name": "z"}], "paused": false}})
        );
    }

    /// upstream's test/integration/apiserver/field_validation_test.go, invalidBodyYAML and the
    /// lines its strict decoding error names.
    #[test]
    fn upstreams_field_validation_fixture() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dupename\n  name: test-deployment\n  unknownMeta: metaVal\n  labels:\n    app: nginx\nspec:\n  unknown1: val1\n  unknownDupe: valDupe\n  unknownDupe: valDupe2\n  paused: true\n  paused: false\n  selector:\n    matchLabels:\n      app: nginx\n  template:\n    metadata:\n      labels:\n        app: nginx\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:latest\n        unknownNested: val1\n        imagePullPolicy: Always\n        imagePullPolicy: Never";
        let doc = to_json(text.as_bytes()).unwrap();
        assert_eq!(
            doc.strict_error().unwrap(),
            "yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  line 12: key \"unknownDupe\" already set in map\n  line 14: key \"paused\" already set in map\n  line 28: key \"imagePullPolicy\" already set in map"
        );
        assert_eq!(doc.value["metadata"]["name"], "test-deployment");
        assert_eq!(doc.value["spec"]["unknownDupe"], "valDupe2");
        assert_eq!(
            doc.value["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Never"
        );
    }

    /// upstream's applyInvalidBody: JSON read as YAML, tab-indented.
    #[test]
    fn upstreams_apply_fixture_in_json() {
        let text = "{\n\t\t\"apiVersion\": \"apps/v1\",\n\t\t\"kind\": \"Deployment\",\n\t\t\"metadata\": {\n\t\t\t\"name\": \"x\",\n\t\t\t\"labels\": {\"app\": \"nginx\"}\n\t\t},\n\t\t\"spec\": {\n\t\t\t\"paused\": false,\n\t\t\t\"paused\": true,\n\t\t\t\"selector\": {\n\t\t\t\t\"matchLabels\": {\n\t\t\t\t\t\"app\": \"nginx\"\n\t\t\t\t}\n\t\t\t},\n\t\t\t\"template\": {\n\t\t\t\t\"metadata\": {\n\t\t\t\t\t\"labels\": {\n\t\t\t\t\t\t\"app\": \"nginx\"\n\t\t\t\t\t}\n\t\t\t\t},\n\t\t\t\t\"spec\": {\n\t\t\t\t\t\"containers\": [{\n\t\t\t\t\t\t\"name\":  \"nginx\",\n\t\t\t\t\t\t\"image\": \"nginx:latest\",\n\t\t\t\t\t\t\"imagePullPolicy\": \"Never\",\n\t\t\t\t\t\t\"imagePullPolicy\": \"Always\"\n\t\t\t\t\t}]\n\t\t\t\t}\n\t\t\t}\n\t\t}\n\t}";
        assert_eq!(
            dups(text),
            [
                r#"line 10: key "paused" already set in map"#,
                r#"line 27: key "imagePullPolicy" already set in map"#,
            ]
        );
        assert_eq!(value(text)["spec"]["paused"], true);
    }

    #[test]
    fn a_collection_value_starts_where_libyaml_starts_it() {
        // A block mapping at its first key, a block list at its first dash, a flow collection
        // at its bracket, whatever comments and blank lines come between.
        assert_eq!(
            dups("a:\n  x: 1\na:\n  # c\n\n  y: 2\n"),
            [r#"line 6: key "a" already set in map"#]
        );
        assert_eq!(
            dups("a: [1]\na:\n- 2\n"),
            [r#"line 3: key "a" already set in map"#]
        );
        assert_eq!(
            dups("{\"a\": {\"x\": 1},\n \"a\":\n\n  [1]}"),
            [r#"line 4: key "a" already set in map"#]
        );
        assert_eq!(
            dups("a: {}\n'a': &x {\n}\n"),
            [r#"line 2: key "a" already set in map"#]
        );
    }

    #[test]
    fn scalar_values_are_located_by_their_own_marks() {
        // An empty value is where its `:` ends; a block scalar at its indicator; an alias at
        // the alias, not its anchor.
        assert_eq!(
            dups("a: 1\na:\nb: 2\n"),
            [r#"line 2: key "a" already set in map"#]
        );
        assert_eq!(
            dups("a: 1\na:\n\n  |\n  text\n"),
            [r#"line 4: key "a" already set in map"#]
        );
        assert_eq!(
            dups("x: &v 1\na: 2\n\na:\n  *v\n"),
            [r#"line 5: key "a" already set in map"#]
        );
        assert_eq!(value("x: &v 1\na: 2\na: *v\n")["a"], 1);
    }

    #[test]
    fn a_duplicate_is_reported_after_the_duplicates_in_its_value() {
        assert_eq!(
            dups("a:\n  x: 1\na:\n  x: 1\n  x: 2\n"),
            [
                r#"line 5: key "x" already set in map"#,
                r#"line 4: key "a" already set in map"#,
            ]
        );
        // Keys given three times are reported twice.
        assert_eq!(
            dups("k: 1\nk: 2\nk: 3\n"),
            [
                r#"line 2: key "k" already set in map"#,
                r#"line 3: key "k" already set in map"#,
            ]
        );
    }

    #[test]
    fn keys_are_printed_as_go_yaml_decodes_them() {
        assert_eq!(
            dups("1: a\n1: b\n"),
            [r#"line 2: key 1 already set in map"#]
        );
        assert_eq!(
            dups("'1': a\n\"1\": b\n"),
            [r#"line 2: key "1" already set in map"#]
        );
        assert_eq!(
            dups("on: a\non: b\n"),
            [r#"line 2: key true already set in map"#]
        );
        assert_eq!(
            dups("0x1F: a\n0x1F: b\n"),
            [r#"line 2: key 31 already set in map"#]
        );
        assert_eq!(
            dups("1.5: a\n1.5: b\n"),
            [r#"line 2: key 1.5 already set in map"#]
        );
        assert_eq!(
            dups("~: a\n~: b\n"),
            [r#"line 2: key <nil> already set in map"#]
        );
        assert_eq!(
            dups("!!str 7: a\n!!str 7: b\n"),
            [r#"line 2: key "7" already set in map"#]
        );
        assert_eq!(
            dups("\"a\\tb\": 1\n\"a\\tb\": 2\n"),
            [r#"line 2: key "a\tb" already set in map"#]
        );
        assert_eq!(go_plain_key("18446744073709551615"), "0xffffffffffffffff");
        assert_eq!(go_plain_key("-9223372036854775808"), "-9223372036854775808");
        assert_eq!(go_plain_key("010"), "8");
        assert_eq!(go_plain_key("08"), "8");
        assert_eq!(go_plain_key("1_000"), "1000");
        assert_eq!(go_plain_key("2024-01-02"), "\"2024-01-02\"");
        assert_eq!(go_plain_key("-.inf"), "-Inf");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.5e-7), "-2.5e-07");
        assert_eq!(go_float(1.0), "1");
    }

    #[test]
    fn lines_count_every_kind_of_line_break() {
        assert_eq!(
            dups("a: 1\r\nb: 2\r\na: 3\r\n"),
            [r#"line 3: key "a" already set in map"#]
        );
        assert_eq!(
            dups("a: 1\rb: {}\ra: {}\r"),
            [r#"line 3: key "a" already set in map"#]
        );
        assert_eq!(
            dups("é: 1\né: [\n]\n"),
            [r#"line 2: key "é" already set in map"#]
        );
    }

    #[test]
    fn merge_keys_merge_as_go_yaml_v2_merges() {
        // A later key overwrites a merged one, and go-yaml's strict reading reports it.
        let text = "base: &b {a: 1, b: 2}\nderived:\n  <<: *b\n  b: 3\n";
        assert_eq!(value(text)["derived"], json!({"a": 1, "b": 3}));
        assert_eq!(dups(text), [r#"line 4: key "b" already set in map"#]);
        // A list's mappings are set from the last: the first wins, and its keys collide with
        // the later ones' on the lines of its values.
        let text = "x: &x {a: 1}\ny: &y\n  a: 2\n  c: 3\nz:\n  <<: [*x, *y]\n";
        assert_eq!(value(text)["z"], json!({"a": 1, "c": 3}));
        assert_eq!(dups(text), [r#"line 1: key "a" already set in map"#]);
        // A merge sets keys over earlier ones, too.
        let text = "a: 0\n<<: {a: 5}\n";
        assert_eq!(value(text), json!({"a": 5}));
        assert_eq!(dups(text), [r#"line 2: key "a" already set in map"#]);
        // Merges inside merged mappings set their entries in place.
        let text = "b: &b {x: 1}\nm: &m {<<: *b, y: 2}\nt: {<<: *m, z: 3}\n";
        assert_eq!(value(text)["t"], json!({"x": 1, "y": 2, "z": 3}));
        assert!(dups(text).is_empty());
        // A quoted `<<` is a key like any other.
        assert_eq!(value("{\"<<\": {a: 1}}"), json!({"<<": {"a": 1}}));
        for bad in [
            "<<: 1\n",
            "<<: [{a: 1}, 2]\n",
            "l: &l [{a: 1}]\nm: {<<: *l}\n",
        ] {
            let err = to_json(bad.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(MERGE_NOT_MAP), "{bad}: {err}");
        }
    }

    #[test]
    fn errors_are_serde_yaml_ngs() {
        for text in ["a: [1", "a: *nope\n", "[1]: 2\n", "a: 1\n---\nb: 2\n"] {
            let ours = to_json(text.as_bytes()).unwrap_err().to_string();
            let theirs = serde_yaml_ng::from_str::<Value>(text)
                .unwrap_err()
                .to_string();
            assert_eq!(ours, theirs, "{text}");
        }
    }
}
