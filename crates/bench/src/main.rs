//! The `ironplane-bench` binary: parses the command line and hands it to [`ironplane_bench::cli`].
//! It must not hold any logic of its own, so that tests reach everything through the library.

use clap::Parser as _;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = ironplane_bench::cli::Cli::parse();
    match ironplane_bench::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
