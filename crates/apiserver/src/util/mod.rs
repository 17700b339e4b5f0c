//! Helpers shared by several layers of the server (upstream: k8s.io/apiserver pkg/util).

pub mod kubeconfig;
pub mod reload;
pub mod webhook;
