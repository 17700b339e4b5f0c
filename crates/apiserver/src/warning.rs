//! Warnings for the client (`Warning: 299 - "..."` headers), collected while a request is served,
//! as upstream's warning recorder does (k8s.io/apiserver/pkg/warning and the
//! `WithWarningRecorder` filter): any layer — decoding, a strategy, admission — calls [`add`]
//! without the warnings being threaded through every return value. The recorder drops repeats
//! and keeps the order in which warnings were added; past upstream's limits (4 KiB of warning
//! text per response, 256 characters per warning once the total is exceeded) it truncates as
//! upstream does.

use std::cell::RefCell;
use std::future::Future;

use http::{HeaderValue, header};

use crate::endpoints::Response;

tokio::task_local! {
    static RECORDER: RefCell<Vec<String>>;
}

/// Upstream's totals: warnings are cut to this many characters each once all of them together
/// exceed the total, and warnings past the total are dropped.
const TOTAL_RUNES: usize = 4 * 1024;
const ITEM_RUNES: usize = 256;

/// Records a warning for the response of the request being served. Outside a request (a
/// controller, a test) the warning is dropped, as upstream's `AddWarning` with no recorder in
/// the context does.
pub fn add(message: impl Into<String>) {
    let message = message.into();
    if message.is_empty() {
        return;
    }
    let _ = RECORDER.try_with(|r| {
        let mut r = r.borrow_mut();
        if !r.contains(&message) {
            r.push(message);
        }
    });
}

/// Records several warnings in order.
pub fn add_all(messages: impl IntoIterator<Item = String>) {
    for m in messages {
        add(m);
    }
}

/// Runs `fut` with a fresh recorder and returns its output with the warnings it recorded.
pub async fn record<F: Future>(fut: F) -> (F::Output, Vec<String>) {
    RECORDER
        .scope(RefCell::new(Vec::new()), async {
            let out = fut.await;
            let warnings = RECORDER.with(|r| r.take());
            (out, warnings)
        })
        .await
}

/// The warnings as upstream sends them: all of them while their text fits the total, else each
/// cut to `ITEM_RUNES` characters and then only as many as fit.
fn truncated(warnings: Vec<String>) -> Vec<String> {
    let total: usize = warnings.iter().map(|w| w.chars().count()).sum();
    if total <= TOTAL_RUNES {
        return warnings;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for w in warnings {
        let cut: String = w.chars().take(ITEM_RUNES).collect();
        let n = cut.chars().count();
        if used + n > TOTAL_RUNES {
            break;
        }
        used += n;
        out.push(cut);
    }
    out
}

/// Appends the warnings to a response as `Warning` headers (code 299, agent `-`), escaping as
/// upstream's `NewWarningHeader` does.
pub fn append(mut r: Response, warnings: Vec<String>) -> Response {
    for w in truncated(warnings) {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn warnings_are_recorded_once_in_order() {
        let ((), got) = record(async {
            add("b");
            add("a");
            add("b");
            add("");
        })
        .await;
        assert_eq!(got, vec!["b", "a"]);
        // Outside a request nothing is recorded, and nothing fails.
        add("lost");
    }

    #[test]
    fn long_warnings_are_cut_as_upstream_cuts_them() {
        let short = vec!["x".repeat(100); 3];
        assert_eq!(truncated(short.clone()), short);
        let long = vec!["y".repeat(3000); 20];
        let cut = truncated(long);
        assert_eq!(cut.len(), 16);
        assert!(cut.iter().all(|w| w.len() == ITEM_RUNES));
    }
}
