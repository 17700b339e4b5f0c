//! Fuzz target: label selectors (`apimachinery::labels::Selector::parse` and
//! `Selector::from_label_selector`). Inputs: arbitrary strings, and soups of the selector's own
//! tokens (keys with and without prefixes, too long or malformed, values, `in`/`notin`, `=`,
//! `==`, `!=`, `!`, `>`, `<`, parentheses, commas, whitespace, NUL), and arbitrary
//! `metav1.LabelSelector` JSON. Properties: never panics; a parsed selector's canonical string
//! parses back to the same selector; matching never panics.

mod common;

use std::collections::BTreeMap;

use apimachinery::labels::Selector;
use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};

const TARGET: &str = "labels";

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&[
            "a", "b", "app", "tier", "x1", "example.com/app", "k8s.io/x", "a.b-c_d", "in", "notin",
            "=", "==", "!=", "!", ">", "<", "(", ")", ",", " ", "\t", "\n", "\0", "1", "-1", "01",
            "9223372036854775808", "", "/", "-a", "a-", ".", "é",
        ][..]).prop_map(str::to_string),
        1 => "[a-z0-9.-]{60,70}",
        1 => "[a-z0-9.]{250,260}/[a-z]{1,3}",
        1 => text(),
    ]
}

fn selector_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(token(), 0..16).prop_map(|t| t.concat()),
        1 => any::<String>(),
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(&["a", "b", "app", "tier", "example.com/app", "in"][..])
            .prop_map(str::to_string),
        prop::sample::select(&["", "a", "b", "1", "-1", "10", "x"][..]).prop_map(str::to_string),
        0..5,
    )
}

fn label_selector_json() -> impl Strategy<Value = Value> {
    let expr = (
        prop_oneof![token(), Just("app".to_string())],
        prop::sample::select(&["In", "NotIn", "Exists", "DoesNotExist", "Gt", "in", ""][..]),
        proptest::option::of(prop::collection::vec(json_scalar(), 0..3)),
    )
        .prop_map(|(key, op, values)| {
            let mut e = json!({"key": key, "operator": op});
            if let Some(values) = values {
                e["values"] = Value::Array(values);
            }
            e
        });
    prop_oneof![
        (
            proptest::option::of(prop::collection::btree_map(token(), json_scalar(), 0..3)),
            proptest::option::of(prop::collection::vec(expr, 0..3)),
        )
            .prop_map(|(labels, exprs)| {
                let mut s = json!({});
                if let Some(l) = labels {
                    s["matchLabels"] = json!(l);
                }
                if let Some(e) = exprs {
                    s["matchExpressions"] = Value::Array(e);
                }
                s
            }),
        json_value(3, 16),
    ]
}

proptest! {
    #![proptest_config(config(TARGET, 100_000))]

    #[test]
    fn parse_never_panics_and_round_trips(s in selector_text(), set in labels()) {
        if let Ok(selector) = Selector::parse(&s) {
            let canonical = selector.to_string();
            let again = Selector::parse(&canonical)
                .map_err(|e| TestCaseError::fail(format!("canonical form {canonical:?} does not parse: {e}")))?;
            prop_assert_eq!(&again, &selector, "canonical form {:?}", canonical);
            prop_assert_eq!(again.matches(&set), selector.matches(&set));
        }
    }

    #[test]
    fn label_selector_objects_never_panic(v in label_selector_json(), set in labels()) {
        if let Ok(selector) = Selector::from_label_selector(&v) {
            let _ = selector.matches(&set);
            let canonical = selector.to_string();
            if !selector.matches_nothing() {
                // What the object form accepts, the string form accepts (kubectl prints it).
                let again = Selector::parse(&canonical)
                    .map_err(|e| TestCaseError::fail(format!("{canonical:?}: {e}")))?;
                prop_assert_eq!(again.matches(&set), selector.matches(&set), "{:?}", canonical);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------
