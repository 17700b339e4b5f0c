//! Go's `encoding/json` syntax errors, word for word: the messages of its scanner
//! (`invalid character 'x' looking for beginning of value`, `... after object key`,
//! `unexpected end of JSON input`, ...), which clients see wherever upstream reports a body, a
//! continue token or an embedded document (a Secret's `.dockerconfigjson`) that is not JSON.
//!
//! The validator walks the bytes with the states of Go's scanner and reports the first error
//! exactly where Go's would; parsing stays serde_json's.
//!
//! Writing ([`write`]) is compact JSON with the escapes Go's encoder adds to serde's:
//! kube-apiserver writes `<`, `>` and `&` as `\u003c`, `\u003e` and `\u0026` (the encoder's
//! HTML-safe default, which its serializer keeps), and U+2028 and U+2029 as `\u2028` and
//! `\u2029`. Strings are escaped in one pass over their bytes, with a table.

use serde_json::Value;

/// Appends `value` as compact JSON with Go's escapes (see the module documentation); members
/// in a `Value`'s order, which is sorted, as Go writes a map. Numbers are written as serde
/// writes them.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing a number to memory cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(text) => write_str(text, out),
        Value::Array(items) => write_array(items, out, write),
        Value::Object(members) => write_object(members, out, write),
    }
}

/// Appends `[item,item,...]`, each item written by `write`.
pub fn write_array<T>(
    items: impl IntoIterator<Item = T>,
    out: &mut Vec<u8>,
    mut write: impl FnMut(T, &mut Vec<u8>),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, out);
    }
    out.push(b']');
}

/// Appends `{"name":value,...}` with the members in the order given, each name with Go's
/// escapes and each value written by `write`.
pub fn write_object<N: AsRef<str>, T>(
    members: impl IntoIterator<Item = (N, T)>,
    out: &mut Vec<u8>,
    mut write: impl FnMut(T, &mut Vec<u8>),
) {
    out.push(b'{');
    for (i, (name, member)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(name.as_ref(), out);
        out.push(b':');
        write(member, out);
    }
    out.push(b'}');
}

/// [`write`] into a new buffer.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out);
    out
}

/// Appends `text` as a JSON string with Go's escapes, found in one pass over its bytes.
pub fn write_str(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let kind = ESCAPE[usize::from(byte)];
        if kind == 0 {
            i += 1;
            continue;
        }
        let mut width = 1;
        let short: &[u8] = match kind {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'b' => b"\\b",
            b'f' => b"\\f",
            b'n' => b"\\n",
            b'r' => b"\\r",
            b't' => b"\\t",
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8; other E2 sequences pass.
            b'e' => match (bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(0x80), Some(0xA8)) => {
                    width = 3;
                    b"\\u2028"
                }
                (Some(0x80), Some(0xA9)) => {
                    width = 3;
                    b"\\u2029"
                }
                _ => {
                    i += 1;
                    continue;
                }
            },
            // `u`: control characters, and Go's HTML escapes.
            _ => b"",
        };
        out.extend_from_slice(&bytes[start..i]);
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xF)]);
        } else {
            out.extend_from_slice(short);
        }
        i += width;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// How each byte is written in a JSON string: 0 as itself; the quote, the backslash and the
/// control characters with a short escape (`b`, `f`, `n`, `r`, `t`, as Go and serde write
/// them) or `\u00XX` (`u`); `<`, `>` and `&` as `\u00XX` too (Go's HTML-safe escapes); `e` for
/// the first byte of U+2028 and U+2029.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        table[c] = b'u';
        c += 1;
    }
    table[0x08] = b'b';
    table[0x0C] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'<' as usize] = b'u';
    table[b'>' as usize] = b'u';
    table[b'&' as usize] = b'u';
    table[0xE2] = b'e';
    table
};

/// Appends `object` as Go writes a struct: the members named in `order` (its fields, in
/// declaration order) first, then any others sorted, each value written by `write` (given the
/// member's name).
pub fn write_in_order(
    object: &serde_json::Map<String, Value>,
    order: &[&str],
    out: &mut Vec<u8>,
    write: &dyn Fn(&str, &Value, &mut Vec<u8>),
) {
    let named = order.iter().filter_map(|&name| object.get_key_value(name));
    let others = object
        .iter()
        .filter(|(name, _)| !order.contains(&name.as_str()));
    let members = named
        .chain(others)
        .map(|(name, value)| (name, (name, value)));
    write_object(members, out, |(name, value), out| write(name, value, out));
}

/// Go's `json.Indent` of compact JSON with a prefix of nothing and an indent of `indent`: the
/// members and their bytes as they are (order, escapes), a newline and the indent before each
/// member or element and before a closing bracket, a space after each colon, empty objects and
/// arrays kept as `{}` and `[]`, and no final newline. `None` when `json` does not close every
/// bracket it opens.
pub fn indent(json: &[u8], indent: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    // A bracket was opened and its first member or element has not started yet.
    let mut opened = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        for _ in 0..depth {
            out.extend_from_slice(indent.as_bytes());
        }
    };
    let mut i = 0;
    while i < json.len() {
        let c = json[i];
        if is_space(c) {
            i += 1;
            continue;
        }
        if opened && c != b'}' && c != b']' {
            newline(&mut out, depth);
            opened = false;
        }
        match c {
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match json.get(i)? {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
                out.extend_from_slice(&json[start..=i]);
            }
            b'{' | b'[' => {
                out.push(c);
                depth += 1;
                opened = true;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if opened {
                    opened = false;
                } else {
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(c),
        }
        i += 1;
    }
    (depth == 0).then_some(out)
}

/// Go's `json.Compact` of valid JSON with the HTML escapes `json.Marshal` adds when it writes
/// embedded JSON (a `json.RawMessage`): whitespace between tokens dropped, strings kept byte for
/// byte (their escapes as written) but for `<`, `>`, `&`, U+2028 and U+2029, which are escaped.
pub fn compact(json: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(json.len());
    let mut in_string = false;
    let mut i = 0;
    while i < json.len() {
        let c = json[i];
        match c {
            b'<' | b'>' | b'&' => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 0xF)]);
            }
            0xE2 if json.get(i + 1) == Some(&0x80)
                && matches!(json.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                out.extend_from_slice(if json[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 3;
                continue;
            }
            b'\\' if in_string => {
                // An escape is copied whole, so that its second byte is not read as a quote.
                out.extend_from_slice(&json[i..(i + 2).min(json.len())]);
                i += 2;
                continue;
            }
            b'"' => {
                in_string = !in_string;
                out.push(c);
            }
            _ if !in_string && is_space(c) => {}
            _ => out.push(c),
        }
        i += 1;
    }
}

/// How Go's scanner quotes the offending byte (`quoteChar`): `'x'`, `'\''`, `'"'`, and the
/// escapes `strconv.Quote` uses for the rune of that byte's value (`'\x01'`, `'\u0081'`).
pub fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        b'\\' => r"'\\'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x0b => r"'\v'".into(),
        0x20..=0x7e => format!("'{}'", c as char),
        0x00..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        // The byte is read as the rune of the same value: C1 controls, NBSP and the soft hyphen
        // are not printable for Go, the rest of Latin-1 is.
        0x80..=0xa0 | 0xad => format!("'\\u{c:04x}'"),
        _ => format!("'{}'", c as char),
    }
}

/// Go's nesting limit (`maxNestingDepth`).
const MAX_NESTING: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    ObjectKey,
    ObjectValue,
    Array,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    Zero,
    Digits,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside a literal: the rest of it still expected, and its name.
    Literal(&'static [u8], &'static str),
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

struct Scanner {
    state: State,
    stack: Vec<Frame>,
}

impl Scanner {
    fn error(c: u8, context: &str) -> String {
        format!("invalid character {} {context}", quote_char(c))
    }

    fn push(&mut self, frame: Frame) -> Result<(), String> {
        self.stack.push(frame);
        if self.stack.len() > MAX_NESTING {
            return Err("exceeded max depth".into());
        }
        Ok(())
    }

    fn begin_value(&mut self, c: u8) -> Result<(), String> {
        self.state = match c {
            b'{' => {
                self.push(Frame::ObjectKey)?;
                State::BeginStringOrEmpty
            }
            b'[' => {
                self.push(Frame::Array)?;
                State::BeginValueOrEmpty
            }
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::Digits,
            b't' => State::Literal(b"rue", "true"),
            b'f' => State::Literal(b"alse", "false"),
            b'n' => State::Literal(b"ull", "null"),
            _ => return Err(Self::error(c, "looking for beginning of value")),
        };
        Ok(())
    }

    fn end_value(&mut self, c: u8) -> Result<(), String> {
        let Some(top) = self.stack.last().copied() else {
            self.state = State::EndTop;
            return self.step(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (top, c) {
            (Frame::ObjectKey, b':') => {
                *self.stack.last_mut().expect("a frame") = Frame::ObjectValue;
                self.state = State::BeginValue;
            }
            (Frame::ObjectKey, _) => return Err(Self::error(c, "after object key")),
            (Frame::ObjectValue, b',') => {
                *self.stack.last_mut().expect("a frame") = Frame::ObjectKey;
                self.state = State::BeginString;
            }
            (Frame::ObjectValue, b'}') => {
                self.stack.pop();
                self.state = State::EndValue;
            }
            (Frame::ObjectValue, _) => {
                return Err(Self::error(c, "after object key:value pair"));
            }
            (Frame::Array, b',') => self.state = State::BeginValue,
            (Frame::Array, b']') => {
                self.stack.pop();
                self.state = State::EndValue;
            }
            (Frame::Array, _) => return Err(Self::error(c, "after array element")),
        }
        Ok(())
    }

    fn step(&mut self, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValue | State::BeginValueOrEmpty | State::BeginStringOrEmpty
                if is_space(c) => {}
            State::BeginString | State::EndTop if is_space(c) => {}
            State::BeginValue => self.begin_value(c)?,
            State::BeginValueOrEmpty if c == b']' => return self.end_value(c),
            State::BeginValueOrEmpty => self.begin_value(c)?,
            State::BeginStringOrEmpty if c == b'}' => {
                *self.stack.last_mut().expect("a frame") = Frame::ObjectValue;
                return self.end_value(c);
            }
            State::BeginStringOrEmpty | State::BeginString => {
                if c != b'"' {
                    return Err(Self::error(c, "looking for beginning of object key string"));
                }
                self.state = State::InString;
            }
            State::EndValue => return self.end_value(c),
            State::EndTop => return Err(Self::error(c, "after top-level value")),
            State::InString => match c {
                b'"' => self.state = State::EndValue,
                b'\\' => self.state = State::InStringEsc,
                0..=0x1f => return Err(Self::error(c, "in string literal")),
                _ => {}
            },
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = State::InString
                }
                b'u' => self.state = State::InStringEscU(0),
                _ => return Err(Self::error(c, "in string escape code")),
            },
            State::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return Err(Self::error(c, "in \\u hexadecimal character escape"));
                }
                self.state = if n == 3 {
                    State::InString
                } else {
                    State::InStringEscU(n + 1)
                };
            }
            State::Neg => match c {
                b'0' => self.state = State::Zero,
                b'1'..=b'9' => self.state = State::Digits,
                _ => return Err(Self::error(c, "in numeric literal")),
            },
            State::Digits if c.is_ascii_digit() => {}
            State::Digits | State::Zero => match c {
                b'.' => self.state = State::Dot,
                b'e' | b'E' => self.state = State::E,
                _ => return self.end_value(c),
            },
            State::Dot => {
                if !c.is_ascii_digit() {
                    return Err(Self::error(c, "after decimal point in numeric literal"));
                }
                self.state = State::Dot0;
            }
            State::Dot0 => match c {
                b'0'..=b'9' => {}
                b'e' | b'E' => self.state = State::E,
                _ => return self.end_value(c),
            },
            State::E if c == b'+' || c == b'-' => self.state = State::ESign,
            State::E | State::ESign => {
                if !c.is_ascii_digit() {
                    return Err(Self::error(c, "in exponent of numeric literal"));
                }
                self.state = State::E0;
            }
            State::E0 if c.is_ascii_digit() => {}
            State::E0 => return self.end_value(c),
            State::Literal(rest, name) => {
                if rest.first() != Some(&c) {
                    let expected = rest.first().copied().unwrap_or(b' ');
                    return Err(Self::error(
                        c,
                        &format!("in literal {name} (expecting {})", quote_char(expected)),
                    ));
                }
                self.state = match &rest[1..] {
                    [] => State::EndValue,
                    more => State::Literal(more, name),
                };
            }
        }
        Ok(())
    }
}

/// Checks `data` as Go's `json.Unmarshal` does before decoding (`checkValid`): `Err` with Go's
/// message at the first syntax error.
pub fn check(data: &[u8]) -> Result<(), String> {
    let mut s = Scanner {
        state: State::BeginValue,
        stack: Vec::new(),
    };
    for &c in data {
        s.step(c)?;
    }
    // End of input completes a number at the top level; anything else open is an error.
    if s.state != State::EndTop {
        if s.stack.is_empty()
            && matches!(
                s.state,
                State::EndValue | State::Zero | State::Digits | State::Dot0 | State::E0
            )
        {
            return Ok(());
        }
        return Err("unexpected end of JSON input".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        check(s.as_bytes()).expect_err(s)
    }

    #[test]
    fn valid_documents_pass() {
        for ok in [
            "{}",
            "[]",
            "0",
            "-1.5e+3",
            " {\"a\": [1, true, null, \"x\\u00e9\"]} ",
            "\"s\"",
            "1 ",
        ] {
            assert_eq!(check(ok.as_bytes()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn errors_are_gos() {
        // The two recorded in upstream's corpus for Secrets, then the scanner's other states.
        assert_eq!(
            err("{not json"),
            "invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(
            err("nope"),
            "invalid character 'o' in literal null (expecting 'u')"
        );
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("{\"a\":1"), "unexpected end of JSON input");
        assert_eq!(
            err("x"),
            "invalid character 'x' looking for beginning of value"
        );
        assert_eq!(err("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(
            err("{\"a\":1 \"b\"}"),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(
            err("\"\\x\""),
            "invalid character 'x' in string escape code"
        );
        assert_eq!(
            err("\"\\u12g4\""),
            "invalid character 'g' in \\u hexadecimal character escape"
        );
        assert_eq!(err("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(err("-x"), "invalid character 'x' in numeric literal");
        assert_eq!(
            err("1.x"),
            "invalid character 'x' after decimal point in numeric literal"
        );
        assert_eq!(
            err("1ex"),
            "invalid character 'x' in exponent of numeric literal"
        );
        assert_eq!(err("01"), "invalid character '1' after top-level value");
        assert_eq!(err("tru"), "unexpected end of JSON input");
        assert_eq!(
            err("\u{81}"),
            "invalid character 'Â' looking for beginning of value"
        );
    }

    #[test]
    fn writing_takes_gos_escapes() {
        let value =
            serde_json::json!({"b": "<x> & \u{2028}\u{2029} \"q\" \\ \n \u{1}", "a": [1.5, null]});
        assert_eq!(
            String::from_utf8(to_vec(&value)).expect("utf-8"),
            r#"{"a":[1.5,null],"b":"\u003cx\u003e \u0026 \u2028\u2029 \"q\" \\ \n \u0001"}"#
        );
    }

    #[test]
    fn indent_is_gos() {
        let indented = |json: &str| {
            indent(json.as_bytes(), "  ").map(|out| String::from_utf8(out).expect("utf-8"))
        };
        assert_eq!(
            indented(r#"{"z":{},"a":[],"s":"{[,:\"]}","n":[1,{"k":null}]}"#).as_deref(),
            Some(
                "{\n  \"z\": {},\n  \"a\": [],\n  \"s\": \"{[,:\\\"]}\",\n  \"n\": [\n    1,\n    {\n      \"k\": null\n    }\n  ]\n}"
            )
        );
        assert_eq!(indented(" [ ] ").as_deref(), Some("[]"));
        assert_eq!(indented(r#"{"a":[1}"#), None);
        assert_eq!(indented(r#"{"a":"#).as_deref(), None);
    }

    #[test]
    fn compact_keeps_the_text_and_adds_html_escapes() {
        let compacted = |json: &str| {
            let mut out = Vec::new();
            compact(json.as_bytes(), &mut out);
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(
            compacted("{ \"b\" : [ 1.50 , 2e1 ],\n\t\"a\": \"x y \\\" <&> \\u0041 \u{2028}\" }"),
            r#"{"b":[1.50,2e1],"a":"x y \" \u003c\u0026\u003e \u0041 \u2028"}"#
        );
    }
}
