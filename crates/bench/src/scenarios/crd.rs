//! The `crd` scenario: what a CustomResourceDefinition costs a server. For each of N CRDs (each
//! in its own group, with a realistic schema of about `--schema-kb` KB: nested objects, lists,
//! enums, patterns, bounds, defaults, descriptions), the time from the create's answer to the
//! CRD's `Established` condition and to the first custom resource created, then the server's
//! RSS added per installed CRD (with `--server-pid`).
//!
//! It owns the CRD bodies, the polling of the condition (every `--poll` until `--max-wait`) and
//! the cleanup of the CRDs it made (by its label, unless `--keep`).

use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Value, json};

use super::{
    ClientConfig, CommonOptions, MANAGED_BY_LABEL, MANAGED_BY_VALUE, Meter, Workspace,
    check_common, check_duration, check_range,
};
use crate::error::BenchError;
use crate::report::{Row, ScenarioResult};
use crate::stats::{Histogram, sample_process};

const MIB: f64 = 1024.0 * 1024.0;
pub(crate) const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[derive(Clone, Debug)]
pub struct CrdOptions {
    pub crds: u64,
    /// The approximate size of each CRD's schema, in KB.
    pub schema_kb: u64,
    pub poll: Duration,
    pub max_wait: Duration,
    pub settle: Duration,
    pub common: CommonOptions,
}

impl Default for CrdOptions {
    fn default() -> Self {
        CrdOptions {
            crds: 200,
            schema_kb: 20,
            poll: Duration::from_millis(1),
            max_wait: Duration::from_secs(30),
            settle: Duration::from_secs(2),
            common: CommonOptions::default(),
        }
    }
}

impl CrdOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("crds", self.crds, 1, 5_000)?;
        check_range("schema-kb", self.schema_kb, 1, 1_000)?;
        check_duration("poll", self.poll, Duration::from_secs(1))?;
        check_duration("max-wait", self.max_wait, Duration::from_secs(600))?;
        check_duration("settle", self.settle, Duration::from_secs(60))
    }
}

/// A schema of about `kb` KB, shaped like an operator's spec.
pub(crate) fn schema(kb: u64) -> Value {
    let field = |i: u64| {
        json!({
            "type": "object",
            "description": format!("Settings of component {i} of the managed workload: whether it runs, how it is named, and what it serves."),
            "properties": {
                "enabled": {"type": "boolean", "default": false, "description": "Whether the component runs."},
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
                "mode": {"type": "string", "enum": ["Active", "Standby", "Disabled"], "default": "Active"},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 100, "format": "int32"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                    "items": {"type": "object", "required": ["port"], "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
            },
        })
    };
    let mut props = serde_json::Map::new();
    let mut i = 0;
    while serde_json::to_vec(&props)
        .map(|b| b.len() as u64)
        .unwrap_or(0)
        < kb * 1024
    {
        props.insert(format!("component{i}"), field(i));
        i += 1;
    }
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": props},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }})
}

pub(crate) fn crd_body(group: &str, schema: &Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}"), "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}}, "schema": {"openAPIV3Schema": schema}}]},
    })
}

pub(crate) fn established(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/status/conditions")?.as_array().map(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            })
        })
        .unwrap_or(false)
}

async fn settled_rss(pid: u32, settle: Duration) -> Option<u64> {
    let mut last = None;
    for _ in 0..5 {
        tokio::time::sleep(settle / 5).await;
        if let Some(s) = sample_process(&pid.to_string()) {
            last = Some(s.rss_bytes);
        }
    }
    last
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &CrdOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    // The CRDs first (their custom resources go with them), then the workspace.
    if !options.common.keep {
        let selector = format!("{MANAGED_BY_LABEL}%3D{MANAGED_BY_VALUE}");
        let _ = workspace
            .client
            .send_with_timeout(
                0,
                Method::DELETE,
                &format!("{CRDS}?labelSelector={selector}"),
                None,
                Duration::from_secs(120),
            )
            .await;
    }
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &CrdOptions,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let pid = options.common.server_pid;
    let idle = match pid {
        Some(pid) => settled_rss(pid, options.settle).await,
        None => None,
    };
    let schema = schema(options.schema_kb);
    let schema_bytes = serde_json::to_vec(&schema).map(|b| b.len()).unwrap_or(0);
    let run_id = &workspace.namespace;
    let meter = Meter::start(&options.common);
    let (mut to_established, mut to_first) = (Histogram::new(), Histogram::new());
    let mut errors = 0u64;
    for i in 0..options.crds {
        let group = format!("c{i}.{run_id}.bench.ironplane.io");
        let body = serde_json::to_vec(&crd_body(&group, &schema)).unwrap_or_default();
        client
            .expect_success(Method::POST, CRDS, Some(body.into()))
            .await?;
        let created = Instant::now();
        let path = format!("{CRDS}/things.{group}");
        loop {
            let r = client
                .send(Method::GET, &path, None)
                .await
                .map_err(|e| client.unreachable(e))?;
            if r.is_success() && established(&r.body) {
                break;
            }
            if created.elapsed() > options.max_wait {
                return Err(BenchError::InvalidArgument(format!(
                    "things.{group} was not Established within {:?}",
                    options.max_wait
                )));
            }
            tokio::time::sleep(options.poll).await;
        }
        to_established.record_duration(created.elapsed());
        let cr = json!({"apiVersion": format!("{group}/v1"), "kind": "Thing",
            "metadata": {"name": "first", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
            "spec": {"component0": {"enabled": true, "name": "a"}}});
        let cr_path = format!("/apis/{group}/v1/namespaces/{}/things", workspace.namespace);
        match client
            .send(
                Method::POST,
                &cr_path,
                Some(serde_json::to_vec(&cr).unwrap_or_default().into()),
            )
            .await
        {
            Ok(r) if r.is_success() => to_first.record_duration(created.elapsed()),
            _ => errors += 1,
        }
        if options.common.progress && (i + 1) % 50 == 0 {
            eprintln!("crd: {} of {} installed", i + 1, options.crds);
        }
    }
    let elapsed = meter.elapsed();
    let after = match pid {
        Some(pid) => settled_rss(pid, options.settle).await,
        None => None,
    };
    let mut result = ScenarioResult::new("crd", client.server(), client.http2());
    result.param("crds", options.crds);
    result.param("schema_bytes", schema_bytes);
    result.rows.push(Row::from_histogram(
        "established",
        &to_established,
        0,
        elapsed,
    ));
    result.rows.push(Row::from_histogram(
        "first custom resource",
        &to_first,
        errors,
        elapsed,
    ));
    meter.finish(&mut result, options.crds * 3);
    if let (Some(idle), Some(after)) = (idle, after) {
        let delta = after as f64 - idle as f64;
        result.figure("server_rss_idle_mib", idle as f64 / MIB);
        result.figure("server_rss_after_mib", after as f64 / MIB);
        result.figure("server_rss_mib_per_crd", delta / MIB / options.crds as f64);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_grow_to_the_asked_size() {
        let s = serde_json::to_vec(&schema(20)).unwrap().len();
        assert!((20 * 1024..24 * 1024).contains(&s), "{s}");
    }
}
