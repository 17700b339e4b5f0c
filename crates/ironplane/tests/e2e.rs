//! The end-to-end tests, one module per area, built as one test binary.
//!
//! One binary rather than one per file: each of them links the whole server, kube-rs and the
//! harness (about 230 MB with line tables), so forty-seven of them cost CI ten gigabytes of disk
//! and as many links and builds of `common`. nextest still runs every test in its own process, so a
//! test's process-wide state (environment, statics) stays its own. Run one area with
//! `cargo nextest run --release -p ironplane --test e2e -E 'test(/^kubectl::/)'`.

mod common;

mod admission_audit;
mod admission_cel_cost;
mod admission_plugins;
mod admission_policies;
mod admission_webhooks;
mod aggregator;
mod controller_events;
mod controller_manager;
mod crash;
mod crd;
mod crd_conversion;
mod csr_approving;
mod encryption_at_rest;
mod endpoints_controllers;
mod envtest;
mod etcd_backend;
mod etcd_faults;
mod etcd_leader;
mod etcd_overrides;
mod etcd_replicas;
mod events;
mod expiry_controllers;
mod external_auth;
mod garbage_collector;
mod go_json;
mod golden;
mod hostile;
mod kube_rs;
mod kube_rs_crd;
mod kubectl;
mod managed_fields_etcd;
mod managed_fields_internal_writes;
mod managed_fields_schema_changes;
mod metrics;
mod node_token_audiences;
mod pod_security;
mod priority_and_fairness;
mod python;
mod rbac;
mod resource_quota;
mod server_side_apply;
mod service_cidr_and_legacy_tokens;
mod serviceaccount_tokens;
mod storage_media_type;
mod testing_harness;
mod validatingadmissionpolicy_status;
mod yaml_duplicate_keys;
