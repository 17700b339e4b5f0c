//! The `startup` scenario: wall time from spawning the server to its first `200` from `/readyz`.
//!
//! It owns the server process's life in each run: spawned with `sh -c` in a process group of its
//! own (so that the whole group, shell and server, is stopped at the end of the run), polled every
//! few milliseconds within a bounded wait, then stopped with SIGTERM and, if need be, SIGKILL. The
//! kubeconfig is read after the spawn and read again whenever its bytes change, because a server
//! may write it while starting (and a previous run's file may name a CA that no longer holds). It
//! must not signal any process group but the one it created, and it must not start when something
//! already answers at the kubeconfig's address (the figure would be that server's).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use http::Method;

use super::{
    ClientConfig, CommonOptions, MAX_RUNS, MAX_STARTUP_WAIT, Meter, check_duration, check_range,
};
use crate::client::ApiClient;
use crate::error::BenchError;
use crate::kubeconfig;
use crate::progress::note;
use crate::report::{Row, ScenarioResult};
use crate::stats::{Histogram, ProcSample, process_group_members, sample_process_group};

/// The time limit of one `/readyz` poll.
const POLL_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a stopped server may take to exit after SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct StartupOptions {
    /// The command that starts the server, run with `sh -c`.
    pub start_cmd: String,
    pub runs: u32,
    /// The longest wait for `/readyz` in one run.
    pub max_wait: Duration,
    /// The pause between polls.
    pub poll_interval: Duration,
    /// Let the server's stdout and stderr through (they are discarded otherwise).
    pub show_output: bool,
    pub progress: bool,
}

impl Default for StartupOptions {
    fn default() -> Self {
        StartupOptions {
            start_cmd: String::new(),
            runs: 5,
            max_wait: Duration::from_secs(60),
            poll_interval: Duration::from_millis(2),
            show_output: false,
            progress: false,
        }
    }
}

impl StartupOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.start_cmd.trim().is_empty() {
            return Err(BenchError::InvalidArgument(
                "--start-cmd must name a command".to_string(),
            ));
        }
        check_range("runs", self.runs, 1, MAX_RUNS)?;
        check_duration("max wait", self.max_wait, MAX_STARTUP_WAIT)?;
        check_duration("poll interval", self.poll_interval, Duration::from_secs(1))
    }
}

/// One run's figures.
struct Ready {
    took: Duration,
    server: Option<ProcSample>,
    url: String,
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &StartupOptions,
) -> Result<ScenarioResult, BenchError> {
    refuse_if_serving(cfg).await?;
    let meter = Meter::start(&CommonOptions::default());
    let mut histogram = Histogram::new();
    let mut failures = 0u64;
    let mut samples = Vec::new();
    let mut cpu_ms = Vec::new();
    let mut rss_mib = Vec::new();
    let mut server = String::from("(never read)");
    for index in 1..=options.runs {
        match one_run(cfg, options).await? {
            Ok(ready) => {
                histogram.record_duration(ready.took);
                if let Some(sample) = ready.server {
                    cpu_ms.push(sample.cpu_seconds * 1000.0);
                    rss_mib.push(sample.rss_bytes as f64 / (1024.0 * 1024.0));
                }
                server = ready.url;
                note(
                    options.progress,
                    &format!(
                        "[startup] run {index}/{}: ready in {:.1} ms",
                        options.runs,
                        ready.took.as_secs_f64() * 1000.0
                    ),
                );
            }
            Err(problem) => {
                failures += 1;
                note(
                    options.progress,
                    &format!("[startup] run {index}/{}: {problem}", options.runs),
                );
                if samples.len() < 5 && !samples.contains(&problem) {
                    samples.push(problem);
                }
            }
        }
    }
    if histogram.count() == 0 {
        return Err(BenchError::Startup(format!(
            "no run became ready; {}",
            samples
                .first()
                .map(String::as_str)
                .unwrap_or("no reason known")
        )));
    }
    let elapsed = meter.elapsed();
    let mut result = ScenarioResult::new("startup", &server, false);
    result.param("runs", options.runs);
    result.param("start_cmd", &options.start_cmd);
    result.param(
        "poll_interval_ms",
        options.poll_interval.as_secs_f64() * 1000.0,
    );
    result
        .rows
        .push(Row::from_histogram("ready", &histogram, failures, elapsed));
    if let Some(median) = median(&mut cpu_ms) {
        result.figure("server_cpu_ms_to_ready", median);
    }
    if let Some(median) = median(&mut rss_mib) {
        result.figure("server_rss_mib_at_ready", median);
    }
    meter.finish(&mut result, 0);
    result.error_samples = samples;
    Ok(result)
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[(values.len() - 1) / 2])
}

/// Fails when something already answers at the kubeconfig's server.
async fn refuse_if_serving(cfg: &ClientConfig) -> Result<(), BenchError> {
    let Ok(context) = kubeconfig::load(&cfg.kubeconfig, cfg.context.as_deref()) else {
        return Ok(());
    };
    let Ok(client) = ApiClient::build(&context, 1, false, POLL_TIMEOUT) else {
        return Ok(());
    };
    match client.send_on(0, Method::GET, "/readyz", None).await {
        Ok(response) => Err(BenchError::Startup(format!(
            "a server already answers at {} ({} on /readyz); stop it first",
            context.server,
            response.status.as_u16()
        ))),
        Err(_) => Ok(()),
    }
}

/// Starts the server, waits for it, stops it. The outer error is fatal (the command cannot be
/// spawned at all); the inner one is a failed run.
async fn one_run(
    cfg: &ClientConfig,
    options: &StartupOptions,
) -> Result<Result<Ready, String>, BenchError> {
    let output = || {
        if options.show_output {
            Stdio::inherit()
        } else {
            Stdio::null()
        }
    };
    let started = Instant::now();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&options.start_cmd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(output())
        .stderr(output())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            BenchError::Startup(format!("cannot run sh -c {:?}: {e}", options.start_cmd))
        })?;
    let Some(pgid) = child.id() else {
        return Ok(Err("the server exited at once".to_string()));
    };
    let outcome = wait_ready(cfg, options, &mut child, started, pgid).await;
    stop_group(pgid, &mut child).await;
    Ok(outcome)
}

async fn wait_ready(
    cfg: &ClientConfig,
    options: &StartupOptions,
    child: &mut tokio::process::Child,
    started: Instant,
    pgid: u32,
) -> Result<Ready, String> {
    let deadline = started + options.max_wait;
    let base = cfg
        .kubeconfig
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    let mut loaded: Option<(Vec<u8>, ApiClient, String)> = None;
    let mut last_problem = String::from("nothing tried yet");
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "not ready within {:.0}s; last: {last_problem}",
                options.max_wait.as_secs_f64()
            ));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the server exited ({status}) before it was ready"));
        }
        match std::fs::read(&cfg.kubeconfig) {
            Ok(bytes) => {
                let changed = loaded.as_ref().is_none_or(|(old, _, _)| *old != bytes);
                if changed {
                    match kubeconfig::resolve_bytes(&bytes, &base, cfg.context.as_deref()) {
                        Ok(context) => match ApiClient::build(&context, 1, false, POLL_TIMEOUT) {
                            Ok(client) => loaded = Some((bytes, client, context.server.clone())),
                            Err(e) => last_problem = e.to_string(),
                        },
                        Err(message) => last_problem = format!("kubeconfig: {message}"),
                    }
                }
            }
            Err(e) => last_problem = format!("kubeconfig {}: {e}", cfg.kubeconfig.display()),
        }
        if let Some((_, client, url)) = &loaded {
            match client.send_on(0, Method::GET, "/readyz", None).await {
                Ok(response) if response.status.as_u16() == 200 => {
                    return Ok(Ready {
                        took: started.elapsed(),
                        server: sample_process_group(pgid),
                        url: url.clone(),
                    });
                }
                Ok(response) => {
                    last_problem = format!("/readyz answered {}", response.status.as_u16())
                }
                Err(e) => last_problem = e.to_string(),
            }
        }
        tokio::time::sleep(options.poll_interval).await;
    }
}

/// Sends `signal` to the process group `pgid` with kill(1). Never group 0 or 1, and never the
/// tool's own group: those would reach processes the tool did not start.
async fn signal_group(pgid: u32, signal: &str) {
    if pgid <= 1 || pgid == std::process::id() {
        return;
    }
    let _ = tokio::process::Command::new("kill")
        .arg("-s")
        .arg(signal)
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

/// Stops the whole group: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`], and waits (bounded) until
/// no live member is left, so that the next run finds the port free.
async fn stop_group(pgid: u32, child: &mut tokio::process::Child) {
    signal_group(pgid, "TERM").await;
    if tokio::time::timeout(STOP_TIMEOUT, child.wait())
        .await
        .is_err()
    {
        signal_group(pgid, "KILL").await;
        let _ = child.start_kill();
        let _ = tokio::time::timeout(STOP_TIMEOUT, child.wait()).await;
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    let mut killed = false;
    while !process_group_members(pgid).is_empty() {
        if Instant::now() >= deadline {
            if killed {
                return;
            }
            signal_group(pgid, "KILL").await;
            killed = true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.0));
    }

    #[test]
    fn options_are_checked() {
        assert!(StartupOptions::default().validate().is_err());
        let ok = StartupOptions {
            start_cmd: "true".to_string(),
            ..Default::default()
        };
        assert!(ok.validate().is_ok());
        let too_long = StartupOptions {
            max_wait: Duration::from_secs(3600),
            ..ok
        };
        assert!(too_long.validate().is_err());
    }
}
