//! `ironplane-bench`: drives a Kubernetes API server (Ironplane or an upstream kube-apiserver)
//! through its public API, given a kubeconfig, and reports figures that can be put side by side.
//!
//! The library holds everything; `main.rs` only parses flags. Tests call
//! [`run_scenario`] in-process. The crate must not speak anything but the public API (HTTPS,
//! JSON, and protobuf where a scenario asks for it as client-go does), and must not aim at any address but the kubeconfig's server (the one exception: the
//! `aggregator` scenario's direct GETs to the extension server it runs itself, in-process).

pub mod cli;
pub mod client;
pub mod error;
pub mod kubeconfig;
pub mod progress;
pub mod protobuf;
pub mod report;
pub mod scenarios;
pub mod stats;

#[cfg(test)]
pub(crate) mod fake;

pub use error::BenchError;
pub use report::{Row, ScenarioResult};
pub use scenarios::{
    AdmissionLoad, AggregatorOptions, ClientConfig, ClusterOptions, CommonOptions, CrdOptions,
    CreateKind, CreateOptions, ListOptions, MemoryOptions, MixedOptions, Scenario, StartupOptions,
    WatchOptions, run_scenario,
};
