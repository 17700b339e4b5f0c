//! The progress line on stderr during long phases.
//!
//! It owns the shared counters that workers bump and a task that prints them: rewritten in place
//! twice a second on a terminal, one plain line every ten seconds otherwise (CI logs). It must not
//! write to stdout, which carries the result table.

use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters that workers bump with relaxed adds.
#[derive(Debug, Default)]
pub struct Counters {
    pub done: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// A running progress line; it disappears on [`Progress::finish`] or drop.
pub struct Progress {
    task: Option<tokio::task::JoinHandle<()>>,
    terminal: bool,
}

impl Progress {
    /// Starts printing `label` with the counters; `total` and `planned` let the line show how far
    /// along the phase is. With `enabled` false nothing is printed.
    pub fn start(
        enabled: bool,
        label: &str,
        counters: Arc<Counters>,
        total: Option<u64>,
        planned: Option<Duration>,
    ) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        if !enabled {
            return Progress {
                task: None,
                terminal,
            };
        }
        let label = label.to_string();
        let period = if terminal {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(10)
        };
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut ticker = tokio::time::interval(period);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let elapsed = started.elapsed().as_secs_f64();
                let done = counters.done();
                let rate = if elapsed > 0.0 {
                    done as f64 / elapsed
                } else {
                    0.0
                };
                let mut line = format!("[{label}] {elapsed:.0}s");
                if let Some(planned) = planned {
                    line.push_str(&format!("/{:.0}s", planned.as_secs_f64()));
                }
                line.push_str(&format!("  {done}"));
                if let Some(total) = total {
                    line.push_str(&format!("/{total}"));
                }
                line.push_str(&format!(" done  {} errors  {rate:.0}/s", counters.errors()));
                let mut stderr = std::io::stderr().lock();
                if terminal {
                    let _ = write!(stderr, "\r\x1b[2K{line}");
                } else {
                    let _ = writeln!(stderr, "{line}");
                }
                let _ = stderr.flush();
            }
        });
        Progress {
            task: Some(task),
            terminal,
        }
    }

    /// Stops the line and clears it.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            if self.terminal {
                let mut stderr = std::io::stderr().lock();
                let _ = write!(stderr, "\r\x1b[2K");
                let _ = stderr.flush();
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Prints one status line on stderr (not a progress line: it stays).
pub fn note(enabled: bool, message: &str) {
    if enabled {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{message}");
    }
}
