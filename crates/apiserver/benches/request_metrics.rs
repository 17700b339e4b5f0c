//! The cost of recording one request in the metrics, as the server does for every request a
//! route serves: the labels taken from the request (`Monitor::resource`), then
//! `apiserver_request_total`, `apiserver_request_duration_seconds`,
//! `apiserver_request_sli_duration_seconds` and `apiserver_response_sizes` recorded
//! (`Monitor::finish`), plus one authentication and one authorization record. Run with
//! `cargo bench -p apiserver --bench request_metrics`; prints the median and p99 of per-request
//! times, each measured over a batch of 1,000 requests spread over 20 label sets.

use std::time::{Duration, Instant};

use apiserver::endpoints::metrics::Monitor;
use apiserver::request::RequestInfo;

const BATCH: u32 = 1000;
const BATCHES: usize = 101;

fn main() {
    let headers = http::HeaderMap::new();
    let infos: Vec<RequestInfo> = (0..20)
        .map(|i| {
            let (verb, name) = match i % 4 {
                0 => ("get", "x"),
                1 => ("list", ""),
                2 => ("create", ""),
                _ => ("update", "x"),
            };
            RequestInfo::parse(
                &if verb == "create" {
                    http::Method::POST
                } else if verb == "update" {
                    http::Method::PUT
                } else {
                    http::Method::GET
                },
                &format!("/api/v1/namespaces/ns{}/resource{}/{name}", i % 3, i / 4),
                "",
            )
        })
        .collect();
    // The response each request needs anyway, timed alone so that it can be taken out.
    let baseline = measure(|_| {
        let response = http::Response::new(apiserver::endpoints::response::full("{}"));
        std::hint::black_box(response);
    });
    let recorded = measure(|i| {
        let info = &infos[i as usize % infos.len()];
        let response = http::Response::new(apiserver::endpoints::response::full("{}"));
        let m = Monitor::resource(info, "", &headers, Instant::now());
        std::hint::black_box(m.finish(response));
    });
    let show = |d: Duration| format!("{} ns", d.as_nanos());
    println!(
        "record one request: median {} p99 {} (the response alone: median {})",
        show(recorded.0.saturating_sub(baseline.0)),
        show(recorded.1.saturating_sub(baseline.0)),
        show(baseline.0),
    );
}

/// Median and p99 of the per-call time of `f`, over batches.
fn measure(mut f: impl FnMut(u32)) -> (Duration, Duration) {
    let mut per_call = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let start = Instant::now();
        for i in 0..BATCH {
            f(i);
        }
        per_call.push(start.elapsed() / BATCH);
    }
    per_call.sort();
    let pct = |p: f64| per_call[((per_call.len() - 1) as f64 * p) as usize];
    (pct(0.5), pct(0.99))
}
