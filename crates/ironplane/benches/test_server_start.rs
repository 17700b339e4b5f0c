//! How long `testing::TestServer::start()` takes until it returns a ready server: a fresh
//! temporary data directory, PKI, store, post-start hooks and controllers, on the runtime flavour
//! `#[tokio::test]` gives (current thread) and on a two-worker runtime. The first start of the
//! process is reported on its own (it pays for one-time initialisation); the others as median,
//! p90 and max, with the process's CPU time per start and stop (all threads; Linux only), which a
//! busy machine disturbs less than the wall-clock figures. Run with
//! `cargo bench -p ironplane --bench test_server_start [-- RUNS]`.

use std::time::{Duration, Instant};

use ironplane::testing::TestServer;

/// The CPU time this process has used (user and system, every thread), from `/proc/self/stat`.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux architecture Rust targets.
    Some(Duration::from_millis(ticks * 10))
}

fn measure(runtime: &tokio::runtime::Runtime, runs: usize) -> (Vec<Duration>, Option<Duration>) {
    let cpu_before = cpu_time();
    let times = runtime.block_on(async {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let server = TestServer::start().await;
            times.push(t.elapsed());
            server.stop().await;
        }
        times
    });
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| (after - before) / runs as u32);
    (times, cpu)
}

fn report(label: &str, (times, cpu): &(Vec<Duration>, Option<Duration>)) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let first = times[0];
    let mut rest: Vec<Duration> = times[1..].to_vec();
    rest.sort();
    let pick = |q: f64| rest[((rest.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label}: first {:.1} ms; then {} runs: median {:.1} ms, p90 {:.1} ms, min {:.1} ms, max {:.1} ms; CPU {} per start and stop",
        ms(first),
        rest.len(),
        ms(pick(0.5)),
        ms(pick(0.9)),
        ms(rest[0]),
        ms(rest[rest.len() - 1]),
        cpu.map_or("unknown".to_string(), |c| format!("{:.0} ms", ms(c))),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments sets the runs.
    let runs = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(21)
        .max(2);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    report(
        "TestServer::start, current-thread runtime",
        &measure(&current, runs),
    );
    drop(current);
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    report(
        "TestServer::start, 2 worker threads",
        &measure(&multi, runs),
    );
}
