//! The generic API server (upstream: k8s.io/apiserver): serving, the filter chain,
//! authentication, authorization, admission, endpoints and discovery, health, OpenAPI and the
//! generic registry. It never names a built-in kind: kinds come in as `ResourceInfo` rows and
//! `Strategy` values from the crates above it.

pub mod admission;
pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod cel;
pub mod endpoints;
pub mod filters;
pub mod flowcontrol;
pub mod health;
pub mod metrics;
pub mod openapi;
pub mod registry;
pub mod request;
pub mod server;
pub mod serving;
pub mod util;
pub mod warning;

pub use request::RequestInfo;
pub use server::{Config, Delegate, GenericApiServer};
