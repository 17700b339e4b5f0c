//! `ironplane`: parse flags, start, serve until SIGTERM or SIGINT, then stop gracefully.

use clap::Parser;
use ironplane::Options;

/// jemalloc, with its background threads purging freed pages, gives memory back to the system
/// within seconds, where glibc's allocator keeps what a burst of connections used (2,000 slow
/// clients left 18 MiB behind): the server's footprint follows its load back down. (mimalloc
/// was tried too: it kept twice the idle RSS.)
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn log_filter(v: u8) -> &'static str {
    match v {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let opts = Options::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter(opts.verbosity)));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    // As Go's runtime does for kube-apiserver: use every descriptor the hard limit allows, since
    // each client connection holds one.
    if let Err(e) = rlimit::increase_nofile_limit(u64::MAX) {
        tracing::warn!(error = %e, "could not raise the open-files limit");
    }
    let running = match ironplane::start(opts).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let kubeconfig =
        std::fs::canonicalize(&running.kubeconfig).unwrap_or_else(|_| running.kubeconfig.clone());
    eprintln!("Ironplane is serving on https://{}", running.addr);
    eprintln!(
        "To use kubectl with it:\n  export KUBECONFIG={}",
        kubeconfig.display()
    );
    let (stop, done) = running.stop_handle();
    wait_for_signal().await;
    eprintln!("shutting down");
    let _ = stop.send(());
    let _ = done.await;
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
