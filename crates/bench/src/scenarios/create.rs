//! The `create` scenario: concurrent clients creating objects with `generateName`: small
//! ConfigMaps by default, or realistic Pods (three containers with probes, resources,
//! environment and volumes) or Deployments of that pod, whose creates pay for the full
//! defaulting and validation of a pod spec, or custom resources of a CRD the scenario installs
//! first (an 8 KB operator-like schema with defaults, bounds, patterns and list maps), to set
//! next to ConfigMaps.
//!
//! It owns the create loop and its stop rule (a duration or a count, and always the hard time
//! cap). It reports creates per second and create latency. It must not reuse names: every object
//! is new, so the figure is the cost of a create, never of a conflict.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::Method;

use super::admission::AdmissionLoad;
use super::{
    ClientConfig, CommonOptions, MANAGED_BY_LABEL, MANAGED_BY_VALUE, MAX_CONCURRENCY, MAX_COUNT,
    MAX_DURATION, Meter, SET_LABEL, Tally, Workspace, check_common, check_duration, check_range,
    configmap_body,
};
use crate::error::BenchError;
use crate::progress::{Counters, Progress};
use crate::report::{Row, ScenarioResult};
use crate::stats::Histogram;
use serde_json::json;

#[derive(Clone, Debug)]
pub struct CreateOptions {
    /// Concurrent clients.
    pub concurrency: usize,
    /// Run for this long...
    pub duration: Option<Duration>,
    /// ...or until this many creates were sent (exactly one of the two).
    pub count: Option<u64>,
    /// What is created.
    pub kind: CreateKind,
    /// What admission checks each create.
    pub admission: AdmissionLoad,
    pub common: CommonOptions,
}

/// The objects the create scenario writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CreateKind {
    #[default]
    Configmap,
    Pod,
    Deployment,
    CustomResource,
}

/// The group of the CRD the custom-resource kind installs in `workspace`.
pub(crate) fn custom_group(workspace: &Workspace) -> String {
    format!("cr.{}.bench.ironplane.io", workspace.namespace)
}

/// Installs the CRD of the custom-resource kind and waits until it is Established.
pub(crate) async fn install_crd(workspace: &Workspace) -> Result<(), BenchError> {
    use super::crd::{CRDS, crd_body, established, schema};
    let group = custom_group(workspace);
    let body = serde_json::to_vec(&crd_body(&group, &schema(8))).unwrap_or_default();
    let client = &workspace.client;
    client
        .expect_success(Method::POST, CRDS, Some(body.into()))
        .await?;
    let path = format!("{CRDS}/things.{group}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = client
            .send(Method::GET, &path, None)
            .await
            .map_err(|e| client.unreachable(e))?;
        if r.is_success() && established(&r.body) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::InvalidArgument(format!(
                "things.{group} was not Established within 60s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The pod spec of the pod and deployment bodies: an application container, a sidecar and an
/// init container, with what real manifests carry.
fn pod_spec() -> serde_json::Value {
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": 8080}, "initialDelaySeconds": 5, "periodSeconds": 10});
    json!({
        "initContainers": [{"name": "migrate", "image": "registry.example.com/team/app:1.4.2",
            "command": ["/app", "migrate"], "env": [{"name": "DB_HOST", "value": "db"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        "containers": [
            {"name": "app", "image": "registry.example.com/team/app:1.4.2",
             "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}],
             "env": [{"name": "MODE", "value": "production"},
                     {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                     {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "app", "key": "password"}}}],
             "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
             "livenessProbe": probe("/healthz"), "readinessProbe": probe("/readyz"),
             "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}, {"name": "cache", "mountPath": "/cache"}],
             "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false,
                                 "capabilities": {"drop": ["ALL"]}}},
            {"name": "proxy", "image": "registry.example.com/infra/proxy:2.0",
             "ports": [{"containerPort": 15001}],
             "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
             "readinessProbe": {"tcpSocket": {"port": 15001}}},
            {"name": "logs", "image": "registry.example.com/infra/logs:0.9",
             "args": ["--path=/cache/logs"],
             "volumeMounts": [{"name": "cache", "mountPath": "/cache", "readOnly": true}]}
        ],
        "volumes": [{"name": "config", "configMap": {"name": "app-config"}},
                    {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}],
        "securityContext": {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 20
    })
}

impl CreateKind {
    /// The collection the objects are created in.
    pub(crate) fn collection(self, workspace: &Workspace) -> String {
        let ns = super::encode_segment(&workspace.namespace);
        match self {
            CreateKind::Configmap => workspace.configmaps_path(),
            CreateKind::Pod => format!("/api/v1/namespaces/{ns}/pods"),
            CreateKind::Deployment => format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            CreateKind::CustomResource => {
                format!(
                    "/apis/{}/v1/namespaces/{ns}/things",
                    custom_group(workspace)
                )
            }
        }
    }

    /// One body, sent by every worker: `generateName` makes each create a new object.
    pub(crate) fn body(self, value_bytes: usize, workspace: &Workspace) -> bytes::Bytes {
        let labels =
            json!({MANAGED_BY_LABEL: MANAGED_BY_VALUE, SET_LABEL: "create", "app": "bench"});
        let body = match self {
            CreateKind::Configmap => {
                return configmap_body(None, "bench-", "create", &[], "", value_bytes);
            }
            CreateKind::Pod => json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": "bench-", "labels": labels}, "spec": pod_spec()}),
            CreateKind::Deployment => json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"generateName": "bench-", "labels": labels},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "bench"}},
                         "template": {"metadata": {"labels": labels}, "spec": pod_spec()}}}),
            // About the size of the ConfigMap body, in fields the schema checks and defaults.
            CreateKind::CustomResource => {
                json!({"apiVersion": format!("{}/v1", custom_group(workspace)),
                "kind": "Thing", "metadata": {"generateName": "bench-", "labels": labels},
                "spec": {"component0": {"enabled": true, "name": "web", "replicas": 2,
                             "ports": [{"port": 80}, {"port": 443}]},
                         "component1": {"name": "worker", "mode": "Standby"}}})
            }
        };
        bytes::Bytes::from(body.to_string())
    }
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            concurrency: 8,
            duration: None,
            count: Some(1000),
            kind: CreateKind::default(),
            admission: AdmissionLoad::default(),
            common: CommonOptions::default(),
        }
    }
}

impl CreateOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("concurrency", self.concurrency, 1, MAX_CONCURRENCY)?;
        match (self.duration, self.count) {
            (Some(d), None) => check_duration("duration", d, MAX_DURATION),
            (None, Some(n)) => check_range("count", n, 1, MAX_COUNT),
            _ => Err(BenchError::InvalidArgument(
                "give exactly one of --duration and --count".to_string(),
            )),
        }
    }
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &CreateOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &CreateOptions,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let tally = Arc::new(Tally::new(client.server()));
    let counters = Arc::new(Counters::default());
    let issued = Arc::new(AtomicU64::new(0));
    // generateName makes every create a new object, so all workers can send the same bytes.
    let body = options.kind.body(options.common.value_bytes(), workspace);
    let path = options.kind.collection(workspace);
    if options.kind == CreateKind::CustomResource {
        install_crd(workspace).await?;
    }
    let admission = super::admission::install(workspace, options.admission, options.kind).await?;
    let outcome = create_loop(workspace, options, &path, body, tally, counters, issued).await;
    super::admission::remove(workspace, admission).await;
    outcome
}

/// Runs the workers until the count or the duration is reached, and reports.
async fn create_loop(
    workspace: &Workspace,
    options: &CreateOptions,
    path: &str,
    body: bytes::Bytes,
    tally: Arc<Tally>,
    counters: Arc<Counters>,
    issued: Arc<AtomicU64>,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let path = path.to_string();
    if options.kind != CreateKind::Configmap
        && let Ok(mut extra) = workspace.extra_collections.lock()
    {
        extra.push(path.clone());
        // The CRD goes after its custom resources.
        if options.kind == CreateKind::CustomResource {
            extra.push(super::crd::CRDS.to_string());
        }
    }
    let planned = options.duration;
    let bar = Progress::start(
        options.common.progress,
        "create",
        counters.clone(),
        options.count,
        planned,
    );
    let meter = Meter::start(&options.common);
    let deadline = Instant::now() + planned.unwrap_or(MAX_DURATION);
    let count = options.count;

    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..options.concurrency {
        let client = client.clone();
        let tally = tally.clone();
        let counters = counters.clone();
        let issued = issued.clone();
        let body = body.clone();
        let path = path.clone();
        workers.spawn(async move {
            let mut histogram = Histogram::new();
            let mut errors = 0u64;
            loop {
                if Instant::now() >= deadline || tally.stopped() {
                    break;
                }
                if let Some(n) = count
                    && issued.fetch_add(1, Ordering::Relaxed) >= n
                {
                    break;
                }
                let start = Instant::now();
                let outcome = client
                    .send_on(worker, Method::POST, &path, Some(body.clone()))
                    .await;
                match &outcome {
                    Ok(r) if r.is_success() => {
                        histogram.record_duration(start.elapsed());
                        counters.done.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        errors += 1;
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        tally.failed(&Method::POST, &path, &outcome);
                    }
                }
            }
            (histogram, errors)
        });
    }
    let mut histogram = Histogram::new();
    let mut errors = 0;
    while let Some(joined) = workers.join_next().await {
        let (h, e) = joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
        histogram.merge(&h);
        errors += e;
    }
    let elapsed = meter.elapsed();
    bar.finish();
    if let Some(fatal) = tally.take_fatal() {
        return Err(fatal);
    }

    let mut result = ScenarioResult::new("create", client.server(), client.http2());
    result.param("concurrency", options.concurrency);
    result.param("kind", format!("{:?}", options.kind).to_lowercase());
    result.param(
        "admission",
        format!("{:?}", options.admission).to_lowercase(),
    );
    if let Some(d) = options.duration {
        result.param("duration_s", d.as_secs_f64());
    }
    if let Some(n) = options.count {
        result.param("count", n);
    }
    result.param("connections", client.connections());
    result.param("value_bytes", options.common.value_bytes());
    result
        .rows
        .push(Row::from_histogram("create", &histogram, errors, elapsed));
    meter.finish(&mut result, histogram.count() + errors);
    result.error_samples = tally.samples();
    Ok(result)
}
