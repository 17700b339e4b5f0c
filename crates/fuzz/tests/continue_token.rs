//! Fuzz target: list continue tokens (`storage::encode_continue`, `storage::decode_continue`).
//! Inputs: arbitrary strings, base64url of arbitrary bytes and of token-shaped JSON (versions,
//! revisions, start keys with `.`, `..`, `//`, NUL, Unicode). Properties: never panics; a token
//! never resolves outside the listed prefix (no `..` or `.` segment survives); encode → decode
//! gives back the key and revision.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use proptest::prelude::*;
use serde_json::json;
use storage::{decode_continue, encode_continue};

const TARGET: &str = "continue_token";
const PREFIX: &str = "/registry/configmaps/";

fn start_key() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        4 => "[a-z0-9-]{1,8}",
        1 => prop::sample::select(&[".", "..", "", "...", "\0", "é", "%2e%2e"][..]).prop_map(str::to_string),
        1 => text(),
    ];
    prop::collection::vec(segment, 0..6).prop_map(|s| s.join("/"))
}

fn token_json() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(json!("meta.k8s.io/v1")), json_scalar()],
        prop_oneof![any::<i64>().prop_map(|i| json!(i)), json_scalar()],
        prop_oneof![start_key().prop_map(|s| json!(s)), json_scalar()],
    )
        .prop_map(|(v, rv, start)| {
            serde_json::to_vec(&json!({"v": v, "rv": rv, "start": start})).expect("JSON")
        })
}

/// The decoded key must stay under the prefix, in clean path form.
fn stays_under_prefix(key: &str) -> Result<(), TestCaseError> {
    let rest = key
        .strip_prefix(PREFIX)
        .ok_or_else(|| TestCaseError::fail(format!("{key:?} left the prefix")))?;
    for segment in rest.split('/') {
        prop_assert!(
            segment != ".." && segment != ".",
            "{:?} has a {:?} segment",
            key,
            segment
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(TARGET, 100_000))]

    #[test]
    fn arbitrary_tokens_are_errors_not_panics(token in prop_oneof![any::<String>(), "[A-Za-z0-9_=+/-]{0,64}"]) {
        if let Ok((key, _)) = decode_continue(&token, PREFIX) {
            stays_under_prefix(&key)?;
        }
    }

    #[test]
    fn crafted_tokens_stay_under_the_prefix(bytes in prop_oneof![token_json(), prop::collection::vec(any::<u8>(), 0..64)]) {
        let token = URL_SAFE_NO_PAD.encode(bytes);
        if let Ok((key, rv)) = decode_continue(&token, PREFIX) {
            stays_under_prefix(&key)?;
            prop_assert_ne!(rv, 0);
        }
    }

    /// Every key a list can stop at (the prefix then a clean relative path) round trips.
    #[test]
    fn tokens_round_trip(segments in prop::collection::vec("[^/]{1,12}".prop_filter("not . or ..", |s| s != "." && s != ".."), 1..5),
                         rv in any::<i64>().prop_filter("non-zero", |rv| *rv != 0)) {
        let key = format!("{PREFIX}{}", segments.join("/"));
        let token = encode_continue(&key, PREFIX, rv).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let decoded = decode_continue(&token, PREFIX).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded, (key, rv));
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: the smallest inputs the properties above found.
// ---------------------------------------------------------------------------------------------
