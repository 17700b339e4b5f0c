//! The YAML text gnostic keeps in `Any.yaml`: the JSON value as go-yaml v3 marshals the node
//! tree it read (`compiler.Marshal`, styles cleared), i.e. block style, four-space indentation
//! (a mapping inside a sequence item starts after the `- `, and deeper levels snap to the next
//! multiple of four), plain scalars where YAML reads them back as the same string, double quotes
//! for strings that would read back as another type (`""`, `"true"`, `"1"`), single quotes for
//! strings plain style cannot carry (`'*'`), literal blocks for multi-line strings.
//!
//! Clients parse this text back (kubectl reads vendor extensions such as
//! `x-kubernetes-group-version-kind` from it), so what matters is that it is valid YAML of the
//! same value; the layout follows go-yaml so the bytes match upstream's where it counts.

use super::Node;

const INDENT: usize = 4;

pub(super) fn to_yaml(v: &Node) -> String {
    let mut out = String::new();
    match v {
        Node::Map(entries) if !entries.is_empty() => mapping(&mut out, entries, 0, true),
        Node::Seq(items) if !items.is_empty() => sequence(&mut out, items, 0, true),
        // A scalar at the top takes the indentation a block scalar's lines would need.
        other => inline(&mut out, other, INDENT),
    }
    out
}

/// Where a nested node starts: inside a sequence item right after the `- `, elsewhere at the
/// next multiple of four (go-yaml v3's `increase_indent`).
fn deeper(indent: usize, in_sequence_item: bool) -> usize {
    if in_sequence_item {
        indent + 2
    } else {
        INDENT * ((indent + INDENT) / INDENT)
    }
}

/// A block mapping whose keys sit at column `indent`; the first key continues the current line
/// when `inline_first` (at the top, or after a sequence item's `- `).
fn mapping(out: &mut String, entries: &[(String, Node)], indent: usize, inline_first: bool) {
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        scalar_string(out, k, indent);
        out.push(':');
        match v {
            Node::Map(m) if !m.is_empty() => {
                out.push('\n');
                mapping(out, m, deeper(indent, false), false);
            }
            Node::Seq(s) if !s.is_empty() => {
                out.push('\n');
                sequence(out, s, deeper(indent, false), false);
            }
            other => {
                out.push(' ');
                inline(out, other, deeper(indent, false));
            }
        }
    }
}

/// A block sequence whose `- ` indicators sit at column `indent`.
fn sequence(out: &mut String, items: &[Node], indent: usize, inline_first: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        out.push_str("- ");
        match item {
            Node::Map(m) if !m.is_empty() => mapping(out, m, deeper(indent, true), true),
            Node::Seq(s) if !s.is_empty() => sequence(out, s, deeper(indent, true), true),
            other => inline(out, other, deeper(indent, true)),
        }
    }
}

/// A scalar or empty collection and its line end; `indent` is where a literal block's lines go.
fn inline(out: &mut String, v: &Node, indent: usize) {
    match v {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Number(n) => out.push_str(&n.to_string()),
        Node::String(s) => scalar_string(out, s, indent),
        Node::Seq(_) => out.push_str("[]"),
        Node::Map(_) => out.push_str("{}"),
    }
    out.push('\n');
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A string scalar in the style go-yaml picks for a `!!str` node with no style of its own.
fn scalar_string(out: &mut String, s: &str, indent: usize) {
    let special = s.chars().any(|c| !printable(c) && c != '\n');
    if s.contains('\n') && !special && !s.contains(" \n") && !s.ends_with(' ') {
        literal(out, s, indent);
    } else if s.contains('\n') || special || resolves_to_other_type(s) {
        double_quoted(out, s);
    } else if plain_allowed(s) {
        out.push_str(s);
    } else {
        out.push('\'');
        out.push_str(&s.replace('\'', "''"));
        out.push('\'');
    }
}

/// `|` with chomping (`-` without a final newline, `+` with more than one) and, when the text
/// opens with a space or a newline, an explicit indentation indicator.
fn literal(out: &mut String, s: &str, indent: usize) {
    out.push('|');
    if s.starts_with(' ') || s.starts_with('\n') {
        out.push_str(&INDENT.to_string());
    }
    if !s.ends_with('\n') {
        out.push('-');
    } else if s.ends_with("\n\n") || s == "\n" {
        out.push('+');
    }
    let body = s.strip_suffix('\n').unwrap_or(s);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
    }
}

fn double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
}

/// libyaml's printable set (tab and other controls are not).
fn printable(c: char) -> bool {
    matches!(c as u32, 0x0a | 0x20..=0x7e | 0x85 | 0xa0..=0xd7ff | 0xe000..=0xfffd | 0x10000..)
        && c != '\u{feff}'
}

/// Whether plain style would read back as something other than this string: null, a boolean,
/// a number, a timestamp, the merge key (go-yaml v3's `resolve`).
fn resolves_to_other_type(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", ".inf",
        ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN",
        ".NAN", "<<",
    ];
    WORDS.contains(&s) || is_int(s) || is_float(s) || is_timestamp(s)
}

/// Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` after dropping underscores.
fn is_int(s: &str) -> bool {
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    let digits = plain
        .strip_prefix('-')
        .or_else(|| plain.strip_prefix('+'))
        .unwrap_or(&plain);
    let (radix, body) = match digits.get(..2) {
        Some("0x" | "0X") => (16, &digits[2..]),
        Some("0o" | "0O") => (8, &digits[2..]),
        Some("0b" | "0B") => (2, &digits[2..]),
        _ if digits.len() > 1 && digits.starts_with('0') => (8, &digits[1..]),
        _ => (10, digits),
    };
    !body.is_empty() && body.chars().all(|c| c.is_digit(radix))
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)))
}

/// A date opening (`2006-1-2`) is all go-yaml's timestamp formats share.
fn is_timestamp(s: &str) -> bool {
    let mut parts = s.splitn(3, '-');
    let (Some(y), Some(m), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let d: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = &rest[d.len()..];
    y.len() == 4
        && y.bytes().all(|b| b.is_ascii_digit())
        && (1..=2).contains(&m.len())
        && m.bytes().all(|b| b.is_ascii_digit())
        && (1..=2).contains(&d.len())
        && (after.is_empty() || after.starts_with(['T', 't', ' ']))
}

/// Whether libyaml's scalar analysis allows plain style in block context.
fn plain_allowed(s: &str) -> bool {
    let bytes = s.as_bytes();
    if s.is_empty()
        || s.starts_with(' ')
        || s.ends_with(' ')
        || ((s.starts_with("---") || s.starts_with("..."))
            && matches!(bytes.get(3), None | Some(b' ')))
    {
        return false;
    }
    let blank_at = |i: usize| matches!(bytes.get(i), None | Some(b' ' | b'\t'));
    for (i, &b) in bytes.iter().enumerate() {
        let indicator = if i == 0 {
            match b {
                b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                | b'\'' | b'"' | b'%' | b'@' | b'`' => true,
                b'?' | b':' | b'-' => blank_at(1),
                _ => false,
            }
        } else {
            match b {
                b':' => blank_at(i + 1),
                b'#' => bytes[i - 1] == b' ',
                _ => false,
            }
        };
        if indicator {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn y(json: &str) -> String {
        let node: Node = serde_json::from_str(json).unwrap();
        to_yaml(&node)
    }

    #[test]
    fn scalars_take_go_yamls_styles() {
        assert_eq!(y(r#""merge""#), "merge\n");
        assert_eq!(y(r#""""#), "\"\"\n");
        assert_eq!(y(r#""*""#), "'*'\n");
        assert_eq!(y(r#""true""#), "\"true\"\n");
        assert_eq!(y(r#""8080""#), "\"8080\"\n");
        assert_eq!(y(r#""1.5e3""#), "\"1.5e3\"\n");
        assert_eq!(y(r#""2024-01-02""#), "\"2024-01-02\"\n");
        assert_eq!(y(r#""merge,retainKeys""#), "merge,retainKeys\n");
        assert_eq!(y(r#""digital signature""#), "digital signature\n");
        assert_eq!(y(r#""a: b""#), "'a: b'\n");
        assert_eq!(y(r#""it's""#), "it's\n");
        assert_eq!(y(r#""- x""#), "'- x'\n");
        assert_eq!(y(r#""tab\there""#), "\"tab\\there\"\n");
        assert_eq!(y(r#""two\nlines""#), "|-\n    two\n    lines\n");
        assert_eq!(y("true"), "true\n");
        assert_eq!(y("12"), "12\n");
        assert_eq!(y("null"), "null\n");
        assert_eq!(y("{}"), "{}\n");
        assert_eq!(y("[]"), "[]\n");
    }

    #[test]
    fn collections_nest_as_go_yaml_v3_indents_them() {
        assert_eq!(
            y(r#"[{"group": "", "kind": "Pod", "version": "v1"}]"#),
            "- group: \"\"\n  kind: Pod\n  version: v1\n"
        );
        assert_eq!(
            y(r#"{"group": "apps", "kind": "Deployment", "version": "v1"}"#),
            "group: apps\nkind: Deployment\nversion: v1\n"
        );
        assert_eq!(
            y(
                r#"[{"discriminator": "type", "fields-to-discriminateBy": {"localhostProfile": "LocalhostProfile", "type": "type"}}]"#
            ),
            "- discriminator: type\n  fields-to-discriminateBy:\n    localhostProfile: LocalhostProfile\n    type: type\n"
        );
        assert_eq!(
            y(r#"{"a": {"b": [1, {"c": [], "d": "x"}]}}"#),
            "a:\n    b:\n        - 1\n        - c: []\n          d: x\n"
        );
        assert_eq!(y(r#"[["a", "b"], "c"]"#), "- - a\n  - b\n- c\n");
    }

    /// What is written reads back as the same value.
    #[test]
    fn the_text_parses_back_to_the_value() {
        for json in [
            r##"{"k": "v: w", "e": "", "n": null, "q": "#x", "h": "a #b", "t": "  lead", "m": "x\n y\n", "u": "ü\u0001"}"##,
            r#"[{"a": [{"b": {"c": "d"}}]}, "-", "?", ":x", "0x1F", "0755", "1_000", ".5", "~"]"#,
        ] {
            let node: Node = serde_json::from_str(json).unwrap();
            let text = to_yaml(&node);
            let back: serde_json::Value =
                serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let want: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(back, want, "{text}");
        }
    }
}
