//! Fuzz target: JSON and YAML request bodies, through the server's own decoders
//! (`apiserver::endpoints::decode`: the depth pre-scan and Go's error texts for JSON, YAML with
//! its depth check).
//! Inputs: arbitrary bytes, generated documents, nesting up to a few thousand levels (flow and
//! block YAML), and YAML anchors and aliases (including alias bombs and merge keys).
//! Properties: never panics or overflows; deep documents are errors; a JSON document reads back
//! as itself through both parsers (YAML is a superset of JSON, and kubectl sends JSON as YAML).

mod common;

use std::time::{Duration, Instant};

use common::*;
use proptest::prelude::*;
use serde_json::Value;

const TARGET: &str = "body";

fn json(bytes: &[u8]) -> Result<Value, String> {
    apiserver::endpoints::decode::parse_json(bytes)
}

fn yaml(bytes: &[u8]) -> Result<Value, String> {
    apiserver::endpoints::decode::parse(bytes, apiserver::endpoints::negotiation::Encoding::Yaml)
        .map_err(|status| status.message)
}

/// `depth` levels of nesting in one of the forms a body can take.
fn deep_text(depth: usize, form: u8) -> String {
    match form % 5 {
        0 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        1 => format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
        // YAML block mappings, one level of indentation each.
        2 => (0..depth)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect::<String>(),
        // YAML block sequences.
        3 => (0..depth)
            .map(|i| format!("{}-\n", " ".repeat(i)))
            .collect::<String>(),
        // Unclosed.
        _ => "[{\"a\":".repeat(depth),
    }
}

/// A YAML document whose aliases expand to `width^levels` nodes (the "billion laughs"), plus
/// merge keys.
fn alias_bomb(levels: usize, width: usize, merge: bool) -> String {
    let mut doc = String::from("a0: &a0 [\"lol\"]\n");
    for level in 1..=levels {
        let refs = vec![format!("*a{}", level - 1); width].join(", ");
        doc.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    if merge {
        doc.push_str("m0: &m0 {x: 1}\nm1: &m1\n  <<: *m0\n  y: 2\nm2:\n  <<: [*m0, *m1]\n");
    }
    doc
}

/// YAML made of the tokens that matter: anchors, aliases, tags, flow and block punctuation.
fn yaml_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("&b ".to_string()),
        Just("*b".to_string()),
        Just("<<: ".to_string()),
        Just("!!str ".to_string()),
        Just("!!binary ".to_string()),
        Just("!!map ".to_string()),
        Just("!custom ".to_string()),
        Just("? ".to_string()),
        Just(": ".to_string()),
        Just("- ".to_string()),
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(", ".to_string()),
        Just("---\n".to_string()),
        Just("...\n".to_string()),
        Just("|\n".to_string()),
        Just(">-\n".to_string()),
        Just("\"\\u00e9\"".to_string()),
        Just("'q'".to_string()),
        Just("~".to_string()),
        Just("1e400".to_string()),
        Just("0x1F".to_string()),
        Just(".nan".to_string()),
        Just("-.inf".to_string()),
        Just("2001-12-14".to_string()),
        Just("18446744073709551616".to_string()),
        "[a-z]{1,4}",
    ];
    prop::collection::vec(token, 0..64).prop_map(|tokens| tokens.concat())
}

fn longest_key(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.chars().count().max(longest_key(v)))
            .max()
            .unwrap_or(0),
        Value::Array(items) => items.iter().map(longest_key).max().unwrap_or(0),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(config(TARGET, 20_000))]

    #[test]
    fn arbitrary_bytes_are_errors_not_panics(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let _ = json(&bytes);
        let _ = yaml(&bytes);
    }

    #[test]
    fn yaml_token_soup_is_errors_not_panics(doc in yaml_soup()) {
        let _ = yaml(doc.as_bytes());
    }

    /// What the JSON parser accepts, it reads back unchanged after writing it out, and the YAML
    /// parser reads the same JSON text as the same value.
    #[test]
    fn json_documents_read_back_as_themselves(value in json_value(6, 64)) {
        let text = serde_json::to_vec(&value).expect("a Value serializes");
        let parsed = json(&text).map_err(|e| TestCaseError::fail(format!("JSON: {e}")))?;
        prop_assert_eq!(&parsed, &value);
        // YAML allows implicit keys of at most 1024 characters (libyaml and go-yaml, which
        // upstream uses, refuse longer ones too), so longer keys are not JSON-as-YAML.
        if longest_key(&value) > 1000 {
            return Ok(());
        }
        // YAML 1.1 (libyaml, and go-yaml, which upstream uses) reads U+0085, U+2028 and U+2029
        // as line breaks and U+FEFF as a byte order mark, even inside quotes, and serde_json
        // writes them unescaped: such JSON text is not the same YAML.
        if has_yaml_break(&value) {
            return Ok(());
        }
        let as_yaml = yaml(&text).map_err(|e| TestCaseError::fail(format!("YAML: {e}")))?;
        prop_assert_eq!(as_yaml, parsed);
    }
}

proptest! {
    #![proptest_config(forked_config(TARGET, 64, 20_000))]

    /// Nesting up to a few thousand levels is refused (the decoders stop at 100 levels, the
    /// parsers at 128) without overflowing the server's stack.
    #[test]
    fn deep_documents_do_not_crash(depth in 1usize..5000, form in any::<u8>()) {
        let text = deep_text(depth, form);
        let (j, y) = on_server_stack(move || {
            let j = json(text.as_bytes()).map(drop_deep).is_ok();
            let y = yaml(text.as_bytes()).map(drop_deep).is_ok();
            (j, y)
        });
        if depth > 128 {
            prop_assert!(!j, "JSON nested {} deep accepted", depth);
            prop_assert!(!y, "YAML nested {} deep accepted", depth);
        }
    }

    /// Alias expansion is bounded: a bomb is refused (or read) quickly, never expanded into
    /// billions of nodes.
    #[test]
    fn yaml_alias_bombs_are_bounded(levels in 1usize..12, width in 1usize..12, merge in any::<bool>()) {
        let doc = alias_bomb(levels, width, merge);
        let started = Instant::now();
        let _ = yaml(doc.as_bytes()).map(drop_deep);
        prop_assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------

/// Found by `json_documents_read_back_as_themselves`: serde_json reads the text it wrote for
/// -9.196092596694784e136 as -9.196092596694785e136 (one unit in the last place off). Without
/// its `float_roundtrip` feature serde_json parses floats fast but not always to the nearest
/// double; Go's encoding/json (strconv.ParseFloat) is exact. Every stored float can so drift by
/// one ULP on each read and write. Fix: `serde_json = { version = "1", features =
/// ["float_roundtrip"] }` in the workspace's Cargo.toml.
#[test]
fn regression_floats_read_back_exactly() {
    for float in [-9.196092596694784e136_f64, 2.1497023063090285e-29] {
        let text = serde_json::to_string(&float).expect("serializes");
        let back: f64 = serde_json::from_str(&text).expect("parses");
        assert_eq!(back.to_bits(), float.to_bits(), "{text}");
    }
}

/// Whether a string of `value` (key or value) holds a character YAML 1.1 treats as a break.
fn has_yaml_break(value: &Value) -> bool {
    let breaks = |s: &str| s.contains(['\u{85}', '\u{2028}', '\u{2029}', '\u{feff}']);
    match value {
        Value::String(s) => breaks(s),
        Value::Array(items) => items.iter().any(has_yaml_break),
        Value::Object(map) => map.iter().any(|(k, v)| breaks(k) || has_yaml_break(v)),
        _ => false,
    }
}
