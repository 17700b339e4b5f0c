//! Fuzz target: field selectors (`apimachinery::fields::FieldSelector::parse`, `escape_value`,
//! `unescape_value`). Inputs: arbitrary strings and soups of the syntax's own characters
//! (`=`, `==`, `!=`, `,`, `\`, field paths, Unicode). Properties: never panics; unescaping an
//! escaped value gives it back; a parsed selector's canonical string parses to the same terms.

mod common;

use apimachinery::fields::{FieldSelector, escape_value, unescape_value};
use common::*;
use proptest::prelude::*;

const TARGET: &str = "fields";

fn selector_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        4 => prop::sample::select(&[
            "metadata.name", "metadata.namespace", "spec.nodeName", "a", "=", "==", "!=", "!", ",",
            "\\", "\\,", "\\=", "\\\\", " ", "é", "\0", "",
        ][..]).prop_map(str::to_string),
        1 => text(),
    ];
    prop_oneof![
        4 => prop::collection::vec(token, 0..16).prop_map(|t| t.concat()),
        1 => any::<String>(),
    ]
}

fn sorted_terms(selector: &FieldSelector) -> Vec<String> {
    let mut terms: Vec<String> = selector
        .terms()
        .iter()
        .map(|t| format!("{:?}", (&t.field, t.operator, &t.value)))
        .collect();
    terms.sort();
    terms
}

proptest! {
    #![proptest_config(config(TARGET, 100_000))]

    #[test]
    fn escaping_round_trips(s in prop_oneof![any::<String>(), "[a=,\\\\]{0,12}"]) {
        prop_assert_eq!(unescape_value(&escape_value(&s)), Ok(s));
    }

    #[test]
    fn unescape_never_panics(s in selector_text()) {
        let _ = unescape_value(&s);
    }

    #[test]
    fn parse_never_panics_and_round_trips(s in selector_text(), value in text()) {
        if let Ok(selector) = FieldSelector::parse(&s) {
            let canonical = selector.to_string();
            let again = FieldSelector::parse(&canonical)
                .map_err(|e| TestCaseError::fail(format!("canonical form {canonical:?} does not parse: {e}")))?;
            prop_assert_eq!(sorted_terms(&again), sorted_terms(&selector), "canonical form {:?}", canonical);
            let _ = selector.matches_by(|_| Some(value.as_str()));
            let _ = selector.requires_exact_match("metadata.name");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------
