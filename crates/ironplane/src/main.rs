//! `ironplane`: parse flags, start, serve until SIGTERM or SIGINT, then stop gracefully.
//! Installed as `kube-apiserver` it takes kube-apiserver's command line as envtest passes it,
//! and as `etcd` it is envtest's stand-in etcd (`envtest`).

mod envtest;

use clap::Parser;
use envtest::Mode;
use ironplane::Options;

/// jemalloc, with its background threads purging freed pages, gives memory back to the system
/// within seconds, where glibc's allocator keeps what a burst of connections used (2,000 slow
/// clients left 18 MiB behind): the server's footprint follows its load back down. (mimalloc
/// was tried too: it kept twice the idle RSS.)
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match Mode::of_program(std::env::args_os().next().as_deref()) {
        Mode::Ironplane => serve(Options::parse(), Mode::Ironplane, &[]).await,
        Mode::KubeApiserver => {
            let parsed = match envtest::parse_kube_apiserver(std::env::args_os()) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => return std::process::ExitCode::SUCCESS,
                Err(e) => e.exit(),
            };
            let code = serve(parsed.options, Mode::KubeApiserver, &parsed.notes).await;
            // The temporary data directory, if any, goes once the store is closed.
            drop(parsed.temp_dir);
            code
        }
        Mode::Etcd => {
            ironplane::logging::init(0, ironplane::logging::Format::Text);
            let args: Vec<String> = std::env::args().skip(1).collect();
            envtest::etcd::run(&args, wait_for_signal()).await
        }
    }
}

/// Starts the server, serves until SIGTERM or SIGINT, then stops gracefully.
async fn serve(opts: Options, mode: Mode, notes: &[String]) -> std::process::ExitCode {
    ironplane::logging::init(opts.verbosity, opts.logging_format);
    for note in notes {
        tracing::info!("{note}");
    }
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
    eprintln!("Ironplane is serving on https://{}", running.addr);
    // As kube-apiserver, clients bring their own credentials (envtest makes its own users).
    if mode == Mode::Ironplane {
        let kubeconfig = std::fs::canonicalize(&running.kubeconfig)
            .unwrap_or_else(|_| running.kubeconfig.clone());
        eprintln!(
            "To use kubectl with it:\n  export KUBECONFIG={}",
            kubeconfig.display()
        );
    }
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
