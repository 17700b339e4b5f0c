//! The `cluster` scenario: a large cluster's steady state, as kubemark's hollow nodes and
//! upstream's scalability tests (clusterloader2) load kube-apiserver.
//!
//! It owns the simulation and its figures. Setup (bounded concurrency, with progress) creates N
//! Nodes, each with its Lease in `kube-node-lease`, and M pods per node (`spec.nodeName` set, one
//! container with requests and limits, as a hollow pod) spread over a few namespaces of its own.
//! The steady state then runs for `duration`:
//!
//! - every node renews its Lease once per `lease_period` (10 s, as the kubelet): a PUT of the
//!   object the previous update returned, with a new `spec.renewTime`, falling back to a GET
//!   after a conflict or a failure, as client-go's lease controller does; one renewal per node at
//!   a time (one due while the previous waits for its answer is counted, not sent);
//! - every node patches its status once per `status_period` (60 s): a strategic-merge PATCH of
//!   `nodes/NAME/status` with the conditions' `lastHeartbeatTime`, as the kubelet's node status
//!   updater;
//! - pods' statuses change at `pod_churn` per second (a strategic-merge PATCH of
//!   `pods/NAME/status` that flips the pod's readiness, so every patch is a real change);
//! - a controller-like mix at `controller_rate` per second: GETs of pods and nodes, namespaced
//!   LISTs, Event creates, ConfigMap creates, updates and deletes;
//! - `informers` clients, each with its own HTTP/2 connection carrying four cluster-wide
//!   list+watches (pods, nodes, endpointslices, configmaps): a LIST paginated by 500, then a WATCH
//!   with bookmarks from the list's resourceVersion, re-listing after a 410.
//!
//! Periodic work is spread evenly: operation `n` of a family of `count` objects at `rate` per
//! second goes to object `n % count` at `n / rate` seconds, so a node renews at `i × period / N`
//! into each period and never in a burst. A family the tool could not keep up with is reported
//! (asked and achieved rates, operations skipped), never hidden.
//!
//! The report has one row per verb and resource with p50/p90/p99/max, checked against upstream's
//! API call latency SLOs (mutating p99 ≤ 1 s, GET and namespaced LIST p99 ≤ 1 s, cluster-scoped
//! LIST p99 ≤ 30 s); the watch delivery lag of every node status, pod status and ConfigMap write
//! (from the write's 2xx to each informer's event, matched by resourceVersion, as in the `watch`
//! scenario) and the events lost; the server's CPU and RSS over time. Every object carries the
//! bench's labels and a label of this run, and cleanup deletes exactly them: pods and events by
//! collection in each namespace (pods with `gracePeriodSeconds=0`, as no kubelet will confirm
//! their end), the namespaces, the Leases and Nodes by label selector. It must not write to any
//! object it did not create.
//!
//! `find_max` repeats the whole run at growing sizes ([`FIND_MAX_STEPS`], up to `nodes`) until a
//! run is not sustained (an SLO not met, the writes' p99 above 100 ms, a rate not held, an event
//! lost, a request failed) and reports the largest size sustained.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::watch::{EventLine, EventReader, WriteLog, rv_key};
use super::{
    ClientConfig, CommonOptions, MANAGED_BY_LABEL, MANAGED_BY_VALUE, MAX_CONNECTIONS, MAX_DURATION,
    MAX_OBJECTS, MAX_RATE, Meter, ObjectSpec, Tally, Workspace, check_common, check_duration,
    check_range, configmap_body, encode_query, encode_segment, random_suffix, resource_version,
};
use crate::client::ApiClient;
use crate::error::BenchError;
use crate::progress::{Counters, Progress, note};
use crate::report::{Row, ScenarioResult};
use crate::stats::{AtomicHistogram, Histogram, sample_process};

/// The most fake nodes.
pub const MAX_NODES: u64 = 20_000;
/// The kubelet's default `--max-pods`.
pub const MAX_PODS_PER_NODE: u64 = 110;
/// The most pods of one run (nodes × pods per node).
pub const MAX_PODS: u64 = 2 * MAX_OBJECTS;
/// The most informer clients (each holds one connection).
pub const MAX_INFORMERS: usize = 256;
/// The label that tells one run's objects from another's (the Nodes and Leases are
/// cluster-scoped or in a shared namespace).
pub const RUN_LABEL: &str = "ironplane-bench/run";
/// Upstream's SLO on the p99 of mutating calls and of GETs and namespaced LISTs.
pub const SLO_MS: f64 = 1_000.0;
/// Upstream's SLO on the p99 of cluster-scoped LISTs.
pub const SLO_CLUSTER_LIST_MS: f64 = 30_000.0;
/// A family holds its rate when it achieved at least this share of it.
const HELD_SHARE: f64 = 0.95;
/// client-go's reflector page size.
const LIST_PAGE: u32 = 500;
/// How often one informer may re-list (after 410 Gone) or re-watch in one run.
const MAX_RELISTS: u32 = 100;
/// ConfigMaps the controller mix updates and reads in its namespace.
const CONTROLLER_CONFIGMAPS: u64 = 50;
/// The lease duration the fake kubelets claim (the kubelet's default).
const LEASE_DURATION_SECONDS: u64 = 40;
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Fake nodes, each with a Lease.
    pub nodes: u64,
    /// Pods bound to each node.
    pub pods_per_node: u64,
    /// Namespaces the pods are spread over.
    pub namespaces: u64,
    /// How long the steady state runs.
    pub duration: Duration,
    /// How often each node renews its Lease (the kubelet: 10 s).
    pub lease_period: Duration,
    /// How often each node patches its status (the kubelet: 60 s without changes).
    pub status_period: Duration,
    /// Pod status updates per second (0: none).
    pub pod_churn: f64,
    /// Controller-like operations per second (0: none).
    pub controller_rate: f64,
    /// Informer clients, each list+watching pods, nodes, endpointslices and configmaps.
    pub informers: usize,
    /// Concurrent creates during setup.
    pub setup_concurrency: usize,
    /// How long to wait after the last write for the informers' last events.
    pub grace: Duration,
    /// How often the server's CPU and RSS are sampled for the series.
    pub sample_every: Duration,
    /// Run at growing sizes up to `nodes` ([`FIND_MAX_STEPS`]), each with its own setup and
    /// cleanup, until a run is not sustained; report the largest sustained size.
    pub find_max: bool,
    /// Informers list and watch in protobuf, as client-go's informers of built-in kinds do.
    pub protobuf: bool,
    pub common: CommonOptions,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nodes: 100,
            pods_per_node: 30,
            namespaces: 10,
            duration: Duration::from_secs(60),
            lease_period: Duration::from_secs(10),
            status_period: Duration::from_secs(60),
            pod_churn: 20.0,
            controller_rate: 20.0,
            informers: 2,
            setup_concurrency: 64,
            grace: Duration::from_secs(10),
            sample_every: Duration::from_secs(5),
            find_max: false,
            protobuf: false,
            common: CommonOptions::default(),
        }
    }
}

impl ClusterOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("nodes", self.nodes, 1, MAX_NODES)?;
        check_range("pods per node", self.pods_per_node, 0, MAX_PODS_PER_NODE)?;
        let pods = self.nodes * self.pods_per_node;
        if pods > MAX_PODS {
            return Err(BenchError::InvalidArgument(format!(
                "nodes x pods per node is {pods} pods; at most {MAX_PODS}"
            )));
        }
        check_range("namespaces", self.namespaces, 1, 1000)?;
        check_duration("duration", self.duration, MAX_DURATION)?;
        for (name, period) in [
            ("lease period (ms)", self.lease_period),
            ("status period (ms)", self.status_period),
        ] {
            check_range(name, period.as_millis(), 100, 600_000)?;
        }
        check_range("pod churn", self.pod_churn, 0.0, f64::from(MAX_RATE))?;
        if self.pod_churn > 0.0 && pods == 0 {
            return Err(invalid("pod churn needs pods (--pods-per-node above 0)"));
        }
        check_range(
            "controller rate",
            self.controller_rate,
            0.0,
            f64::from(MAX_RATE),
        )?;
        check_range("informers", self.informers, 0, MAX_INFORMERS)?;
        check_range("setup concurrency", self.setup_concurrency, 1, 1024)?;
        check_duration("grace", self.grace, Duration::from_secs(300))?;
        check_duration(
            "sample interval",
            self.sample_every,
            Duration::from_secs(60),
        )?;
        for (name, rate) in [
            ("lease renewals", self.lease_rate()),
            ("node status updates", self.status_rate()),
        ] {
            if rate > f64::from(MAX_RATE) {
                return Err(BenchError::InvalidArgument(format!(
                    "{name} would be {rate:.0} per second; at most {MAX_RATE}"
                )));
            }
        }
        Ok(())
    }

    /// Lease renewals per second: every node once per period.
    pub fn lease_rate(&self) -> f64 {
        self.nodes as f64 / self.lease_period.as_secs_f64()
    }

    /// Node status patches per second.
    pub fn status_rate(&self) -> f64 {
        self.nodes as f64 / self.status_period.as_secs_f64()
    }
}

fn invalid(message: &str) -> BenchError {
    BenchError::InvalidArgument(message.to_string())
}

/// How many operations of a family at `rate` per second are due `elapsed` into the phase: the
/// first at once, then one every `1 / rate` seconds.
pub(crate) fn due(elapsed: Duration, rate: f64) -> u64 {
    if rate <= 0.0 {
        return 0;
    }
    (elapsed.as_secs_f64() * rate).floor() as u64 + 1
}

/// Which object operation `n` of a family of `count` objects goes to, and when it starts
/// (seconds into the phase): objects in turn, evenly spaced.
pub(crate) fn slot(n: u64, count: u64, rate: f64) -> (u64, f64) {
    (n % count.max(1), n as f64 / rate)
}

/// How a measured operation is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slo {
    /// POST, PUT, PATCH, DELETE: p99 ≤ 1 s.
    Mutating,
    /// GET and namespace-scoped LIST: p99 ≤ 1 s.
    Read,
    /// Cluster-scoped LIST: p99 ≤ 30 s.
    ClusterList,
    /// Not an API call (watch delivery).
    Unjudged,
}

/// Every measured operation: its row label and SLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Op {
    CreateNode,
    CreateLease,
    CreatePod,
    RenewLease,
    GetLease,
    PatchNodeStatus,
    PatchPodStatus,
    GetPod,
    GetNode,
    ListPodsNamespace,
    ListConfigMapsNamespace,
    CreateEvent,
    CreateConfigMap,
    UpdateConfigMap,
    DeleteConfigMap,
    ListPods,
    ListNodes,
    ListEndpointSlices,
    ListConfigMaps,
    Delivery,
}

const OPS: [(Op, &str, Slo); 20] = [
    (Op::CreateNode, "setup POST nodes", Slo::Mutating),
    (Op::CreateLease, "setup POST leases", Slo::Mutating),
    (Op::CreatePod, "setup POST pods", Slo::Mutating),
    (Op::RenewLease, "PUT leases", Slo::Mutating),
    (Op::GetLease, "GET leases", Slo::Read),
    (Op::PatchNodeStatus, "PATCH nodes/status", Slo::Mutating),
    (Op::PatchPodStatus, "PATCH pods/status", Slo::Mutating),
    (Op::GetPod, "GET pods", Slo::Read),
    (Op::GetNode, "GET nodes", Slo::Read),
    (Op::ListPodsNamespace, "LIST pods (namespace)", Slo::Read),
    (
        Op::ListConfigMapsNamespace,
        "LIST configmaps (namespace)",
        Slo::Read,
    ),
    (Op::CreateEvent, "POST events", Slo::Mutating),
    (Op::CreateConfigMap, "POST configmaps", Slo::Mutating),
    (Op::UpdateConfigMap, "PUT configmaps", Slo::Mutating),
    (Op::DeleteConfigMap, "DELETE configmaps", Slo::Mutating),
    (Op::ListPods, "LIST pods (cluster)", Slo::ClusterList),
    (Op::ListNodes, "LIST nodes (cluster)", Slo::ClusterList),
    (
        Op::ListEndpointSlices,
        "LIST endpointslices (cluster)",
        Slo::ClusterList,
    ),
    (
        Op::ListConfigMaps,
        "LIST configmaps (cluster)",
        Slo::ClusterList,
    ),
    (Op::Delivery, "watch delivery", Slo::Unjudged),
];

/// The controller mix, in twentieths: GET pod 5, GET node 2, LIST pods in a namespace 1, LIST
/// ConfigMaps 2, POST event 4, POST/PUT/DELETE ConfigMap 2 each.
const CONTROLLER_MIX: [Op; 20] = [
    Op::GetPod,
    Op::CreateEvent,
    Op::GetNode,
    Op::UpdateConfigMap,
    Op::GetPod,
    Op::CreateConfigMap,
    Op::ListConfigMapsNamespace,
    Op::CreateEvent,
    Op::GetPod,
    Op::DeleteConfigMap,
    Op::ListPodsNamespace,
    Op::CreateEvent,
    Op::GetPod,
    Op::UpdateConfigMap,
    Op::GetNode,
    Op::CreateConfigMap,
    Op::GetPod,
    Op::CreateEvent,
    Op::ListConfigMapsNamespace,
    Op::DeleteConfigMap,
];

/// Latency and errors of every operation, recorded by many tasks at once.
struct Recorder {
    latency: Vec<AtomicHistogram>,
    errors: Vec<AtomicU64>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            latency: OPS.iter().map(|_| AtomicHistogram::new()).collect(),
            errors: OPS.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn ok(&self, op: Op, took: Duration) {
        self.latency[op as usize].record_duration(took);
    }

    fn error(&self, op: Op) {
        self.errors[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, op: Op) -> u64 {
        self.latency[op as usize].snapshot().count()
    }
}

/// The kinds each informer list+watches, with the LIST row of each.
const INFORMED: [(&str, Op); 4] = [
    ("/api/v1/pods", Op::ListPods),
    ("/api/v1/nodes", Op::ListNodes),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        Op::ListEndpointSlices,
    ),
    ("/api/v1/configmaps", Op::ListConfigMaps),
];
/// Indexes into [`INFORMED`] of the kinds the steady state writes.
const PODS: usize = 0;
const NODES: usize = 1;
const CONFIGMAPS: usize = 3;

/// What one informer's watch of one kind saw.
#[derive(Default)]
struct StreamState {
    /// Events matched to a tracked write at arrival.
    matched: AtomicU64,
    /// Keys of events whose write was not (yet) known at arrival: written before its 2xx was
    /// read, or not a tracked write (a delete, another client's write).
    pending: Mutex<Vec<u64>>,
}

/// One node's Lease as the last write returned it (`None` before the first answer or after a
/// failure: the next renewal reads it first), and whether a renewal is under way.
#[derive(Default)]
struct LeaseSlot {
    last: Option<Bytes>,
    busy: bool,
}

/// The run: names, the client, and what every task shares.
struct Sim {
    client: Arc<ApiClient>,
    /// Connections used for writes and reads; informers use the ones after these.
    write_connections: usize,
    run: String,
    /// `<workspace namespace>-<i>`: the pods' namespaces.
    namespaces: Vec<String>,
    /// The workspace namespace: the controller mix's ConfigMaps.
    controller_namespace: String,
    nodes: u64,
    pods_per_node: u64,
    /// Each node's Lease as its last renewal returned it.
    leases: Vec<Mutex<LeaseSlot>>,
    /// Renewals not sent because the node's previous one was still waiting for its answer.
    lease_overlaps: AtomicU64,
    /// Each node's resourceVersion (as a key) after the tool's last write to it.
    node_rvs: Vec<AtomicU64>,
    /// Tracked writes whose answer kept the object's resourceVersion.
    unchanged: AtomicU64,
    /// When setup began: the conditions' lastTransitionTime.
    started_at: String,
    recorder: Recorder,
    tally: Tally,
    writes: WriteLog,
    /// Tracked writes acknowledged, per informed kind.
    acked: [AtomicU64; 4],
    /// ConfigMaps the controller mix created and has not deleted yet, oldest first.
    created: Mutex<VecDeque<String>>,
    sequence: AtomicU64,
    /// Set while informers are open: writes are then logged for delivery.
    tracking: AtomicBool,
    stop: AtomicBool,
    relists: AtomicU64,
    rewatches: AtomicU64,
    watch_errors: AtomicU64,
    /// Informers ask for protobuf.
    protobuf: bool,
}

fn now_micro() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn now_seconds() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Sim {
    fn node_name(&self, i: u64) -> String {
        format!("{}-node-{i}", self.controller_namespace)
    }

    fn pod_count(&self) -> u64 {
        self.nodes * self.pods_per_node
    }

    /// Pod `p` is the `p % pods_per_node`-th pod of node `p / pods_per_node`, in namespace
    /// `p % namespaces`.
    fn pod(&self, p: u64) -> (String, String, String) {
        let node = p / self.pods_per_node.max(1);
        let index = p % self.pods_per_node.max(1);
        let namespace = self.namespaces[(p % self.namespaces.len() as u64) as usize].clone();
        let node_name = self.node_name(node);
        (namespace, format!("{node_name}-pod-{index}"), node_name)
    }

    fn labels(&self) -> Value {
        json!({MANAGED_BY_LABEL: MANAGED_BY_VALUE, RUN_LABEL: self.run})
    }

    fn run_selector(&self) -> String {
        encode_query(&format!("{RUN_LABEL}={}", self.run))
    }

    fn node_body(&self, i: u64) -> Bytes {
        let name = self.node_name(i);
        let conditions = self.node_conditions(&self.started_at);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {
                MANAGED_BY_LABEL: MANAGED_BY_VALUE, RUN_LABEL: self.run,
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "hollow"}},
            "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + i / 256 % 64, i % 256)},
            "status": {
                "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "200Gi"},
                "allocatable": {"cpu": "31", "memory": "126Gi", "pods": "110", "ephemeral-storage": "190Gi"},
                "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": format!("10.128.{}.{}", i / 250 % 250, i % 250 + 1)},
                              {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1.0",
                    "osImage": "hollow", "containerRuntimeVersion": "containerd://2.0.0",
                    "kubeletVersion": "v1.36.2", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64"}
            }
        });
        Bytes::from(body.to_string())
    }

    /// The kubelet's four conditions, all with `heartbeat` as their lastHeartbeatTime.
    fn node_conditions(&self, heartbeat: &str) -> Value {
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({"type": kind, "status": status, "lastHeartbeatTime": heartbeat,
                   "lastTransitionTime": self.started_at, "reason": reason, "message": message})
        };
        json!([
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure"
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status"
            ),
        ])
    }

    fn lease_body(&self, i: u64) -> Bytes {
        let name = self.node_name(i);
        let body = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease", "labels": self.labels()},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                     "renewTime": now_micro()}
        });
        Bytes::from(body.to_string())
    }

    /// A hollow pod: one container with requests and limits, bound to its node.
    fn pod_body(&self, p: u64) -> Bytes {
        let (_, name, node) = self.pod(p);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {
                MANAGED_BY_LABEL: MANAGED_BY_VALUE, RUN_LABEL: self.run,
                "app": format!("app-{}", p % 20)}},
            "spec": {
                "nodeName": node,
                "containers": [{
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "10Mi"},
                                  "limits": {"cpu": "100m", "memory": "50Mi"}},
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}]
                }],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30
            }
        });
        Bytes::from(body.to_string())
    }

    /// The status a kubelet reports for a running pod, ready or not.
    fn pod_status_patch(&self, ready: bool) -> Bytes {
        let now = now_seconds();
        let status = if ready { "True" } else { "False" };
        let body = json!({"status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": status, "lastProbeTime": null, "lastTransitionTime": now},
                {"type": "ContainersReady", "status": status, "lastProbeTime": null, "lastTransitionTime": now}
            ],
            "containerStatuses": [{
                "name": "app", "ready": ready, "restartCount": 0, "started": true,
                "image": "registry.k8s.io/pause:3.10", "imageID": "",
                "state": {"running": {"startedAt": self.started_at}}
            }],
            "startTime": self.started_at
        }});
        Bytes::from(body.to_string())
    }

    fn event_body(&self, p: u64) -> (String, Bytes) {
        let (namespace, pod, node) = self.pod(p);
        let now = now_seconds();
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{pod}."), "labels": self.labels()},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod},
            "reason": "Pulled",
            "message": "Container image \"registry.k8s.io/pause:3.10\" already present on machine",
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1, "type": "Normal"
        });
        (
            format!("/api/v1/namespaces/{}/events", encode_segment(&namespace)),
            Bytes::from(body.to_string()),
        )
    }

    fn configmaps_path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/configmaps",
            encode_segment(&self.controller_namespace)
        )
    }

    /// Notes a tracked write of informed kind `kind` (its answer's resourceVersion and the
    /// instant of its 2xx), so that the informers' events can be matched to it. `last` holds the
    /// object's resourceVersion before the write, when the tool knows it: an answer with the same
    /// one changed nothing (a heartbeat within the second of the previous one), so no event
    /// follows and it is counted in `unchanged_writes` instead.
    fn track(&self, kind: usize, body: &[u8], at: Instant, last: Option<&AtomicU64>) {
        let Some(rv) = resource_version(body) else {
            self.tally
                .note("a write's answer has no resourceVersion".to_string());
            return;
        };
        let key = rv_key(&rv);
        if let Some(last) = last
            && last.swap(key, Ordering::Relaxed) == key
        {
            self.unchanged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.tracking.load(Ordering::Relaxed) {
            self.writes.insert(key, at);
            self.acked[kind].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends one request and records it under `op`; returns the answer's body on a 2xx.
    async fn call(
        &self,
        op: Op,
        connection: usize,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Option<(Bytes, Instant)> {
        let start = Instant::now();
        let outcome = if method == Method::PATCH {
            self.client
                .patch_on(
                    connection,
                    path,
                    body.unwrap_or_default(),
                    STRATEGIC_MERGE_PATCH,
                )
                .await
        } else {
            self.client
                .send_on(connection, method.clone(), path, body)
                .await
        };
        self.record(op, &method, path, start, outcome)
    }

    /// A GET asking for `accept` instead of JSON, recorded as [`Sim::call`] records.
    async fn get_accepting(
        &self,
        op: Op,
        connection: usize,
        path: &str,
        accept: &'static str,
    ) -> Option<(Bytes, Instant)> {
        let start = Instant::now();
        let outcome = self.client.get_on_accepting(connection, path, accept).await;
        self.record(op, &Method::GET, path, start, outcome)
    }

    fn record(
        &self,
        op: Op,
        method: &Method,
        path: &str,
        start: Instant,
        outcome: Result<crate::client::ApiResponse, crate::client::RequestError>,
    ) -> Option<(Bytes, Instant)> {
        let done = Instant::now();
        match outcome {
            Ok(r) if r.is_success() => {
                self.recorder.ok(op, done - start);
                Some((r.body, done))
            }
            other => {
                self.recorder.error(op);
                self.tally.failed(method, path, &other);
                None
            }
        }
    }

    /// Renews node `i`'s Lease from the object its previous renewal returned; after a failure
    /// (or before the first answer) reads it first, as client-go's lease controller does.
    async fn renew_lease(&self, i: u64, connection: usize) {
        let name = self.node_name(i);
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{}",
            encode_segment(&name)
        );
        let slot = &self.leases[i as usize];
        // One renewal per node at a time, as the kubelet's single loop: a renewal that comes
        // due while the previous one is still waiting for its answer is not sent.
        let mut current = {
            let Ok(mut slot) = slot.lock() else {
                return;
            };
            if slot.busy {
                self.lease_overlaps.fetch_add(1, Ordering::Relaxed);
                return;
            }
            slot.busy = true;
            slot.last.take()
        };
        if current.is_none() {
            current = self
                .call(Op::GetLease, connection, Method::GET, &path, None)
                .await
                .map(|(body, _)| body);
        }
        let lease = current.as_deref().map(serde_json::from_slice::<Value>);
        let answer = match lease {
            Some(Ok(mut lease)) => {
                lease["spec"]["renewTime"] = json!(now_micro());
                lease["spec"]["holderIdentity"] = json!(name);
                let body = Bytes::from(lease.to_string());
                self.call(Op::RenewLease, connection, Method::PUT, &path, Some(body))
                    .await
                    .map(|(answer, _)| answer)
            }
            Some(Err(_)) => {
                self.tally.note(format!("GET {path}: not a Lease"));
                None
            }
            None => None,
        };
        if let Ok(mut slot) = slot.lock() {
            slot.last = answer;
            slot.busy = false;
        }
    }

    async fn patch_node_status(&self, i: u64, connection: usize) {
        let path = format!(
            "/api/v1/nodes/{}/status",
            encode_segment(&self.node_name(i))
        );
        let body = json!({"status": {"conditions": self.node_conditions(&now_seconds())}});
        if let Some((answer, at)) = self
            .call(
                Op::PatchNodeStatus,
                connection,
                Method::PATCH,
                &path,
                Some(Bytes::from(body.to_string())),
            )
            .await
        {
            self.track(NODES, &answer, at, self.node_rvs.get(i as usize));
        }
    }

    /// Patches pod `n % pods`; its readiness flips from one round over all pods to the next, so
    /// every patch changes the object.
    async fn patch_pod_status(&self, n: u64, connection: usize) {
        let pods = self.pod_count();
        let (namespace, name, _) = self.pod(n % pods);
        let ready = (n / pods).is_multiple_of(2);
        let path = format!(
            "/api/v1/namespaces/{}/pods/{}/status",
            encode_segment(&namespace),
            encode_segment(&name)
        );
        if let Some((answer, at)) = self
            .call(
                Op::PatchPodStatus,
                connection,
                Method::PATCH,
                &path,
                Some(self.pod_status_patch(ready)),
            )
            .await
        {
            self.track(PODS, &answer, at, None);
        }
    }

    async fn controller_op(&self, n: u64, connection: usize) {
        let mut op = CONTROLLER_MIX[(n % CONTROLLER_MIX.len() as u64) as usize];
        let pods = self.pod_count();
        // Spread reads over the objects with a stride coprime to most counts.
        let pick = n.wrapping_mul(7919);
        if pods == 0 && matches!(op, Op::GetPod | Op::CreateEvent | Op::ListPodsNamespace) {
            op = Op::GetNode;
        }
        let configmaps = self.configmaps_path();
        match op {
            Op::GetPod => {
                let (namespace, name, _) = self.pod(pick % pods);
                let path = format!(
                    "/api/v1/namespaces/{}/pods/{}",
                    encode_segment(&namespace),
                    encode_segment(&name)
                );
                self.call(op, connection, Method::GET, &path, None).await;
            }
            Op::GetNode => {
                let path = format!(
                    "/api/v1/nodes/{}",
                    encode_segment(&self.node_name(pick % self.nodes))
                );
                self.call(op, connection, Method::GET, &path, None).await;
            }
            Op::ListPodsNamespace => {
                let namespace = &self.namespaces[(pick % self.namespaces.len() as u64) as usize];
                let path = format!(
                    "/api/v1/namespaces/{}/pods?limit={LIST_PAGE}&labelSelector={}",
                    encode_segment(namespace),
                    encode_query(&format!("app=app-{}", pick % 20))
                );
                self.call(op, connection, Method::GET, &path, None).await;
            }
            Op::ListConfigMapsNamespace => {
                let path = format!("{configmaps}?limit={LIST_PAGE}");
                self.call(op, connection, Method::GET, &path, None).await;
            }
            Op::CreateEvent => {
                let (path, body) = self.event_body(pick % pods);
                self.call(op, connection, Method::POST, &path, Some(body))
                    .await;
            }
            Op::UpdateConfigMap => {
                let name = format!("ctl-{}", pick % CONTROLLER_CONFIGMAPS);
                let body = self.configmap(&name, n);
                let path = format!("{configmaps}/{name}");
                if let Some((answer, at)) = self
                    .call(op, connection, Method::PUT, &path, Some(body))
                    .await
                {
                    self.track(CONFIGMAPS, &answer, at, None);
                }
            }
            Op::DeleteConfigMap => {
                // Deletes only what the mix created, oldest first; with nothing to delete it
                // creates instead, so the asked rate is still sent.
                let oldest = self.created.lock().ok().and_then(|mut c| c.pop_front());
                match oldest {
                    Some(name) => {
                        let path = format!("{configmaps}/{name}");
                        self.call(op, connection, Method::DELETE, &path, None).await;
                    }
                    None => self.create_configmap(n, connection).await,
                }
            }
            _ => self.create_configmap(n, connection).await,
        }
    }

    fn configmap(&self, name: &str, n: u64) -> Bytes {
        configmap_body(
            Some(name),
            "",
            "cluster",
            &[(RUN_LABEL, &self.run)],
            &format!("s{n}-"),
            64,
        )
    }

    async fn create_configmap(&self, n: u64, connection: usize) {
        let name = format!("ctl-x-{n}");
        let body = self.configmap(&name, n);
        if let Some((answer, at)) = self
            .call(
                Op::CreateConfigMap,
                connection,
                Method::POST,
                &self.configmaps_path(),
                Some(body),
            )
            .await
        {
            self.track(CONFIGMAPS, &answer, at, None);
            if let Ok(mut created) = self.created.lock() {
                created.push_back(name);
            }
        }
    }
}

/// A family of periodic operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Leases,
    NodeStatus,
    PodStatus,
    Controller,
}

const FAMILIES: [(Family, &str); 4] = [
    (Family::Leases, "lease_renewals"),
    (Family::NodeStatus, "node_status_updates"),
    (Family::PodStatus, "pod_status_updates"),
    (Family::Controller, "controller_ops"),
];

/// What one family did in the steady state.
struct FamilyOutcome {
    asked: f64,
    /// Operations whose start came due.
    due: u64,
    /// Operations the workers could not start in time (the backlog was full).
    skipped: u64,
    /// Operations started.
    sent: u64,
}

/// Runs one family for `duration`: a pacer releases `rate` permits per second (never more than
/// a small backlog) and `workers` tasks take them, operation `n` going to object `n % count`.
async fn run_family(
    sim: Arc<Sim>,
    family: Family,
    rate: f64,
    duration: Duration,
    counters: Arc<Counters>,
) -> FamilyOutcome {
    if rate <= 0.0 {
        return FamilyOutcome {
            asked: 0.0,
            due: 0,
            skipped: 0,
            sent: 0,
        };
    }
    // Enough workers to hold the rate at up to 500 ms per request: kubelets do not wait for each
    // other, so a slow answer to one node must not hold back the next node's renewal.
    let workers = ((rate * 0.5).ceil() as usize).clamp(4, 2048);
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let sequence = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..workers {
        let sim = sim.clone();
        let permits = permits.clone();
        let sequence = sequence.clone();
        let counters = counters.clone();
        tasks.spawn(async move {
            let connection = (worker + family as usize) % sim.write_connections;
            // The semaphore is closed when the phase ends; that ends the loop.
            while let Ok(permit) = permits.acquire().await {
                permit.forget();
                if sim.tally.stopped() {
                    break;
                }
                let n = sequence.fetch_add(1, Ordering::Relaxed);
                match family {
                    Family::Leases => {
                        let (node, _) = slot(n, sim.nodes, rate);
                        sim.renew_lease(node, connection).await;
                    }
                    Family::NodeStatus => {
                        let (node, _) = slot(n, sim.nodes, rate);
                        sim.patch_node_status(node, connection).await;
                    }
                    Family::PodStatus => sim.patch_pod_status(n, connection).await,
                    Family::Controller => {
                        let n = sim.sequence.fetch_add(1, Ordering::Relaxed);
                        sim.controller_op(n, connection).await;
                    }
                }
                counters.done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let tick = Duration::from_secs_f64((1.0 / rate).clamp(0.001, 0.05));
    let backlog_cap = workers * 2;
    let start = Instant::now();
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut released = 0u64;
    let mut skipped = 0u64;
    loop {
        ticker.tick().await;
        let elapsed = start.elapsed();
        if elapsed >= duration || sim.tally.stopped() {
            break;
        }
        let wanted = due(elapsed, rate).saturating_sub(released);
        let room = backlog_cap.saturating_sub(permits.available_permits()) as u64;
        let give = wanted.min(room);
        permits.add_permits(give as usize);
        skipped += wanted - give;
        released += wanted;
    }
    // Permits still waiting when the phase ends were never started: skipped too.
    let unstarted = permits.available_permits() as u64;
    permits.close();
    while tasks.join_next().await.is_some() {}
    FamilyOutcome {
        asked: rate,
        due: released,
        skipped: skipped + unstarted,
        sent: sequence.load(Ordering::Relaxed),
    }
}

/// One informer: for each kind a LIST (paginated by 500) and a WATCH from its resourceVersion,
/// all on the informer's own connection; re-lists after 410 Gone.
async fn informer(
    sim: Arc<Sim>,
    connection: usize,
    states: Arc<Vec<StreamState>>,
    synced: Arc<AtomicUsize>,
    watch_timeout: u64,
) {
    let mut streams = tokio::task::JoinSet::new();
    for kind in 0..states.len() {
        let sim = sim.clone();
        let states = states.clone();
        let synced = synced.clone();
        streams.spawn(async move {
            list_watch(
                &sim,
                connection,
                kind,
                &states[kind],
                &synced,
                watch_timeout,
            )
            .await
        });
    }
    while streams.join_next().await.is_some() {}
}

/// A paginated LIST of a kind; returns the list's resourceVersion.
async fn list_all(sim: &Sim, connection: usize, kind: usize) -> Option<String> {
    let (base, op) = INFORMED[kind];
    let mut continue_token: Option<String> = None;
    for _page in 0..(MAX_PODS / u64::from(LIST_PAGE) + 100) {
        let mut path = format!("{base}?limit={LIST_PAGE}");
        if let Some(token) = &continue_token {
            path.push_str(&format!("&continue={}", encode_query(token)));
        }
        if sim.protobuf {
            let (body, _) = sim
                .get_accepting(op, connection, &path, crate::protobuf::MEDIA_TYPE)
                .await?;
            let Ok(page) = crate::protobuf::list_page(&body) else {
                sim.tally.note(format!("GET {base}: not a protobuf list"));
                return None;
            };
            match page.continue_token.filter(|t| !t.is_empty()) {
                Some(token) => continue_token = Some(token),
                None => return Some(page.resource_version.unwrap_or_default()),
            }
            continue;
        }
        let (body, _) = sim.call(op, connection, Method::GET, &path, None).await?;
        #[derive(serde::Deserialize)]
        struct ListMeta {
            #[serde(rename = "resourceVersion", default)]
            resource_version: String,
            #[serde(rename = "continue", default)]
            continue_token: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct List {
            metadata: ListMeta,
        }
        let Ok(list) = serde_json::from_slice::<List>(&body) else {
            sim.tally.note(format!("GET {base}: not a list"));
            return None;
        };
        match list.metadata.continue_token.filter(|t| !t.is_empty()) {
            Some(token) => continue_token = Some(token),
            None => return Some(list.metadata.resource_version),
        }
    }
    sim.tally.note(format!("GET {base}: too many pages"));
    None
}

async fn list_watch(
    sim: &Sim,
    connection: usize,
    kind: usize,
    state: &StreamState,
    synced: &AtomicUsize,
    watch_timeout: u64,
) {
    let base = INFORMED[kind].0;
    let mut first = true;
    let mut reader = EventReader::default();
    'relist: for _ in 0..=MAX_RELISTS {
        if sim.stop.load(Ordering::Relaxed) {
            return;
        }
        let Some(mut rv) = list_all(sim, connection, kind).await else {
            sim.watch_errors.fetch_add(1, Ordering::Relaxed);
            if first {
                // Counted as synced so that the start does not wait for it; its misses count
                // as lost.
                synced.fetch_add(1, Ordering::Relaxed);
                first = false;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        if !first {
            sim.relists.fetch_add(1, Ordering::Relaxed);
        }
        for _ in 0..=MAX_RELISTS {
            if sim.stop.load(Ordering::Relaxed) {
                return;
            }
            let path = format!(
                "{base}?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={watch_timeout}",
                encode_query(&rv)
            );
            let accept = crate::protobuf::accept(sim.protobuf);
            let response = match sim
                .client
                .open_stream_accepting(connection, &path, accept)
                .await
            {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    let status = r.status();
                    if status.as_u16() == 410 {
                        continue 'relist;
                    }
                    let body = r
                        .into_body()
                        .collect()
                        .await
                        .map(|c| c.to_bytes())
                        .unwrap_or_default();
                    let outcome = Ok(crate::client::ApiResponse { status, body });
                    sim.tally.failed(&Method::GET, &path, &outcome);
                    sim.watch_errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                Err(error) => {
                    sim.tally.note(format!("watch {base}: {error}"));
                    sim.watch_errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            if first {
                first = false;
                synced.fetch_add(1, Ordering::Relaxed);
            }
            let mut body = response.into_body();
            reader.reset();
            loop {
                let frame = match body.frame().await {
                    Some(Ok(frame)) => frame,
                    Some(Err(error)) => {
                        if !sim.stop.load(Ordering::Relaxed) {
                            sim.tally.note(format!("watch {base} broke: {error}"));
                            sim.watch_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        break;
                    }
                    None => break,
                };
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                let arrived = Instant::now();
                let mut expired = false;
                reader.feed(data, sim.protobuf, |line, event| {
                    if expired {
                        return;
                    }
                    match event {
                        EventLine::Object(event_rv) => {
                            let key = rv_key(event_rv);
                            rv.clear();
                            rv.push_str(event_rv);
                            match sim.writes.get(key) {
                                Some(acked) => {
                                    sim.recorder.latency[Op::Delivery as usize]
                                        .record_duration(arrived.saturating_duration_since(acked));
                                    state.matched.fetch_add(1, Ordering::Relaxed);
                                }
                                None => {
                                    if let Ok(mut pending) = state.pending.lock() {
                                        pending.push(key);
                                    }
                                }
                            }
                        }
                        EventLine::Bookmark(event_rv) => {
                            rv.clear();
                            rv.push_str(event_rv);
                        }
                        EventLine::Error(code, message) => {
                            if code == Some(410) {
                                // The events since `rv` are gone: list again, as the
                                // reflector does (what happened in between is not seen as
                                // events and counts as lost).
                                expired = true;
                                return;
                            }
                            sim.watch_errors.fetch_add(1, Ordering::Relaxed);
                            sim.tally.note(format!(
                                "watch {base} ERROR event {}: {message}",
                                code.unwrap_or(0)
                            ));
                        }
                        EventLine::Unknown => {
                            sim.watch_errors.fetch_add(1, Ordering::Relaxed);
                            sim.tally.note(format!(
                                "watch {base}: unreadable event: {}",
                                String::from_utf8_lossy(&line[..line.len().min(120)])
                            ));
                        }
                    }
                });
                if expired {
                    continue 'relist;
                }
            }
            if sim.stop.load(Ordering::Relaxed) {
                return;
            }
            // The server ended the watch at its time limit: watch again from the last event.
            sim.rewatches.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Samples the server's RSS and CPU every `every`, for the report's series.
struct Series {
    task: tokio::task::JoinHandle<()>,
    points: Arc<Mutex<Vec<(f64, f64, f64)>>>,
}

impl Series {
    fn start(pid: Option<u32>, every: Duration) -> Option<Series> {
        let pid = pid?.to_string();
        let points = Arc::new(Mutex::new(Vec::new()));
        let out = points.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut last = sample_process(&pid).map(|s| (Instant::now(), s.cpu_seconds));
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            // Runs for as long as the phase, which is bounded.
            loop {
                ticker.tick().await;
                let Some(sample) = sample_process(&pid) else {
                    continue;
                };
                let now = Instant::now();
                let cpu_ms_per_second = match last {
                    Some((at, cpu)) => {
                        (sample.cpu_seconds - cpu) * 1000.0 / (now - at).as_secs_f64().max(1e-3)
                    }
                    None => 0.0,
                };
                last = Some((now, sample.cpu_seconds));
                if let Ok(mut points) = out.lock() {
                    points.push((
                        started.elapsed().as_secs_f64(),
                        sample.rss_bytes as f64 / (1024.0 * 1024.0),
                        cpu_ms_per_second,
                    ));
                }
            }
        });
        Some(Series { task, points })
    }

    fn finish(self) -> Vec<(f64, f64, f64)> {
        self.task.abort();
        self.points.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

/// The sizes `--find-max` tries, in order, up to `--nodes`.
pub const FIND_MAX_STEPS: [u64; 7] = [100, 500, 1000, 2000, 5000, 10_000, 20_000];
/// `--find-max`'s target besides the SLOs: the p99 of the steady state's writes.
pub const FIND_MAX_MUTATING_P99_MS: f64 = 100.0;

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &ClusterOptions,
) -> Result<ScenarioResult, BenchError> {
    if !options.find_max {
        return run_once(cfg, options).await;
    }
    let steps = find_max_steps(options.nodes);
    let mut notes = Vec::new();
    let mut sustained = 0;
    let mut last = None;
    for nodes in steps {
        let step = ClusterOptions {
            nodes,
            find_max: false,
            ..options.clone()
        };
        note(
            options.common.progress,
            &format!("[cluster] find-max: {nodes} nodes"),
        );
        let result = run_once(cfg, &step).await?;
        let failures = sustained_failures(&result);
        notes.push(format!(
            "find-max {nodes} nodes: mutating p99 {:.1} ms, {}",
            result
                .figures
                .get("mutating_p99_ms")
                .copied()
                .unwrap_or(0.0),
            if failures.is_empty() {
                "sustained".to_string()
            } else {
                format!("NOT sustained ({})", failures.join(", "))
            }
        ));
        let passed = failures.is_empty();
        last = Some(result);
        if !passed {
            break;
        }
        sustained = nodes;
    }
    let mut result = last.ok_or_else(|| invalid("--find-max has no size to try"))?;
    result.notes.extend(notes);
    result.figure("max_nodes_sustained", sustained as f64);
    result.param("find_max", true);
    Ok(result)
}

/// The sizes `--find-max` tries: the steps below `ceiling`, then `ceiling` itself.
pub(crate) fn find_max_steps(ceiling: u64) -> Vec<u64> {
    let mut steps: Vec<u64> = FIND_MAX_STEPS
        .iter()
        .copied()
        .filter(|&n| n < ceiling)
        .collect();
    steps.push(ceiling);
    steps
}

/// Why a run does not count as sustained: an SLO not met, the writes' p99 above 100 ms, a rate
/// not held, a watch event lost, a failed request.
pub(crate) fn sustained_failures(result: &ScenarioResult) -> Vec<String> {
    let figure = |name: &str| result.figures.get(name).copied().unwrap_or(0.0);
    let mut failures = Vec::new();
    if figure("slos_not_met") > 0.0 {
        failures.push(format!("{} SLOs not met", figure("slos_not_met")));
    }
    if figure("mutating_p99_ms") > FIND_MAX_MUTATING_P99_MS {
        failures.push(format!("mutating p99 above {FIND_MAX_MUTATING_P99_MS} ms"));
    }
    if figure("rates_not_held") > 0.0 {
        failures.push(format!("{} rates not held", figure("rates_not_held")));
    }
    if figure("events_lost") > 0.0 {
        failures.push(format!("{} events lost", figure("events_lost")));
    }
    if result.total_errors() > 0 {
        failures.push(format!("{} errors", result.total_errors()));
    }
    failures
}

async fn run_once(
    cfg: &ClientConfig,
    options: &ClusterOptions,
) -> Result<ScenarioResult, BenchError> {
    let mut cfg = cfg.clone();
    let write_connections = cfg.connections.max(1);
    cfg.connections = (write_connections + options.informers).min(MAX_CONNECTIONS);
    if write_connections + options.informers > MAX_CONNECTIONS {
        return Err(BenchError::InvalidArgument(format!(
            "{} connections and {} informers need more than {MAX_CONNECTIONS} connections",
            write_connections, options.informers
        )));
    }
    let workspace = Workspace::open(&cfg, &options.common).await?;
    let run = random_suffix(8);
    let namespaces: Vec<String> = (0..options.namespaces)
        .map(|i| format!("{}-{i}", workspace.namespace))
        .collect();
    let sim = Arc::new(Sim {
        client: workspace.client.clone(),
        write_connections,
        run,
        namespaces,
        controller_namespace: workspace.namespace.clone(),
        nodes: options.nodes,
        pods_per_node: options.pods_per_node,
        leases: (0..options.nodes).map(|_| Mutex::default()).collect(),
        lease_overlaps: AtomicU64::new(0),
        node_rvs: (0..options.nodes).map(|_| AtomicU64::new(0)).collect(),
        unchanged: AtomicU64::new(0),
        started_at: now_seconds(),
        recorder: Recorder::new(),
        tally: Tally::new(workspace.client.server()),
        writes: WriteLog::new(),
        acked: Default::default(),
        created: Mutex::new(VecDeque::new()),
        sequence: AtomicU64::new(0),
        tracking: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        relists: AtomicU64::new(0),
        rewatches: AtomicU64::new(0),
        watch_errors: AtomicU64::new(0),
        protobuf: options.protobuf,
    });
    let mut created_lease_namespace = false;
    let outcome = measure(&workspace, &sim, options, &mut created_lease_namespace).await;
    sim.stop.store(true, Ordering::Relaxed);
    let problem = cleanup(
        &workspace,
        &sim,
        options.common.keep,
        created_lease_namespace,
    )
    .await;
    let mut outcome = outcome;
    if let (Ok(result), Some(problem)) = (&mut outcome, problem) {
        result.error_samples.push(problem);
    }
    workspace.close(outcome).await
}

/// Deletes this run's pods (at once: no kubelet will confirm their end), events, namespaces,
/// Leases and Nodes, unless `keep`. Returns the first problem.
async fn cleanup(
    workspace: &Workspace,
    sim: &Sim,
    keep: bool,
    created_lease_namespace: bool,
) -> Option<String> {
    if keep {
        return None;
    }
    let selector = sim.run_selector();
    let mut paths = Vec::new();
    for namespace in &sim.namespaces {
        let ns = encode_segment(namespace);
        paths.push(format!(
            "/api/v1/namespaces/{ns}/pods?labelSelector={selector}&gracePeriodSeconds=0"
        ));
        paths.push(format!(
            "/api/v1/namespaces/{ns}/events?labelSelector={selector}"
        ));
    }
    paths.push(format!(
        "/api/v1/namespaces/{}/events?labelSelector={selector}",
        encode_segment(&workspace.namespace)
    ));
    paths.push(format!(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?labelSelector={selector}"
    ));
    paths.push(format!("/api/v1/nodes?labelSelector={selector}"));
    for namespace in &sim.namespaces {
        paths.push(format!("/api/v1/namespaces/{}", encode_segment(namespace)));
    }
    if created_lease_namespace {
        paths.push("/api/v1/namespaces/kube-node-lease".to_string());
    }
    let mut problem = None;
    for path in paths {
        match workspace
            .client
            .send_with_timeout(0, Method::DELETE, &path, None, super::CLEANUP_TIMEOUT)
            .await
        {
            Ok(r) if r.is_success() || r.status.as_u16() == 404 => {}
            Ok(r) => {
                problem.get_or_insert(format!(
                    "cleanup: DELETE {path}: {} {}",
                    r.status.as_u16(),
                    crate::error::status_message(&r.body)
                ));
            }
            Err(e) => {
                problem.get_or_insert(format!("cleanup: DELETE {path}: {e}"));
            }
        }
    }
    problem
}

/// Creates `total` objects with `concurrency` tasks: `make(i)` gives the path and body of
/// object `i`; `keep(i, answer)` is called with each 2xx answer.
async fn create_many(
    sim: &Arc<Sim>,
    op: Op,
    total: u64,
    concurrency: usize,
    progress: bool,
    make: impl Fn(&Sim, u64) -> (String, Bytes) + Send + Sync + Copy + 'static,
    keep: impl Fn(&Sim, u64, Bytes) + Send + Sync + Copy + 'static,
) -> Result<(u64, Duration), BenchError> {
    let label = OPS[op as usize].1.trim_start_matches("setup ");
    let counters = Arc::new(Counters::default());
    let bar = Progress::start(
        progress,
        &format!("{label}: {total}"),
        counters.clone(),
        Some(total),
        None,
    );
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + MAX_DURATION;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency.max(1) {
        let sim = sim.clone();
        let next = next.clone();
        let counters = counters.clone();
        tasks.spawn(async move {
            let mut errors = 0u64;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || Instant::now() >= deadline || sim.tally.stopped() {
                    break;
                }
                let (path, body) = make(&sim, i);
                let connection = worker % sim.write_connections;
                match sim
                    .call(op, connection, Method::POST, &path, Some(body))
                    .await
                {
                    Some((answer, _)) => {
                        keep(&sim, i, answer);
                        counters.done.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        errors += 1;
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            errors
        });
    }
    let mut errors = 0;
    while let Some(joined) = tasks.join_next().await {
        errors += joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?;
    }
    bar.finish();
    if let Some(fatal) = sim.tally.take_fatal() {
        return Err(fatal);
    }
    Ok((errors, started.elapsed()))
}

/// POSTs `body` to `path`; 409 (it exists) is as good as 201.
async fn ensure(sim: &Sim, path: &str, body: Value) -> Result<bool, BenchError> {
    let response = sim
        .client
        .send(Method::POST, path, Some(Bytes::from(body.to_string())))
        .await
        .map_err(|e| sim.client.unreachable(e))?;
    match response.status.as_u16() {
        200..=299 => Ok(true),
        409 => Ok(false),
        code => Err(BenchError::from_status(
            sim.client.server(),
            "POST",
            path,
            code,
            &response.body,
        )),
    }
}

async fn setup(
    workspace: &Workspace,
    sim: &Arc<Sim>,
    options: &ClusterOptions,
    created_lease_namespace: &mut bool,
    result: &mut ScenarioResult,
) -> Result<(), BenchError> {
    let progress = options.common.progress;
    let started = Instant::now();
    // kube-apiserver creates kube-node-lease itself; a server that does not gets it from us.
    *created_lease_namespace = ensure(
        sim,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-node-lease"}}),
    )
    .await?;
    for namespace in &sim.namespaces {
        ensure(
            sim,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": namespace, "labels": sim.labels()}}),
        )
        .await?;
        // Pods name the `default` ServiceAccount, which admission requires to exist; without a
        // controller manager (a bare kube-apiserver) nobody else creates it.
        ensure(
            sim,
            &format!(
                "/api/v1/namespaces/{}/serviceaccounts",
                encode_segment(namespace)
            ),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        )
        .await?;
    }
    // The controller mix's ConfigMaps.
    let spec = ObjectSpec {
        name_prefix: Some("ctl-".to_string()),
        generate_name: String::new(),
        count: CONTROLLER_CONFIGMAPS,
        set: "cluster".to_string(),
        groups: 0,
        value_bytes: 64,
    };
    let setup_tally = Arc::new(Tally::new(sim.client.server()));
    let (_, errors, _) = workspace
        .create_objects(spec, 8, false, &setup_tally)
        .await?;
    if errors > 0 {
        return Err(BenchError::Protocol(format!(
            "the controller's ConfigMaps could not be created: {}",
            setup_tally.samples().join("; ")
        )));
    }
    let concurrency = options.setup_concurrency;
    let (errors, took) = create_many(
        sim,
        Op::CreateNode,
        options.nodes,
        concurrency,
        progress,
        |sim, i| ("/api/v1/nodes".to_string(), sim.node_body(i)),
        |sim, i, answer| {
            if let (Some(rv), Some(slot)) =
                (resource_version(&answer), sim.node_rvs.get(i as usize))
            {
                slot.store(rv_key(&rv), Ordering::Relaxed);
            }
        },
    )
    .await?;
    result.figure("setup_nodes_seconds", took.as_secs_f64());
    let (lease_errors, took) = create_many(
        sim,
        Op::CreateLease,
        options.nodes,
        concurrency,
        progress,
        |sim, i| {
            (
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases".to_string(),
                sim.lease_body(i),
            )
        },
        |sim, i, answer| {
            if let Ok(mut slot) = sim.leases[i as usize].lock() {
                slot.last = Some(answer);
            }
        },
    )
    .await?;
    result.figure("setup_leases_seconds", took.as_secs_f64());
    let (pod_errors, took) = create_many(
        sim,
        Op::CreatePod,
        sim.pod_count(),
        concurrency,
        progress,
        |sim, p| {
            let (namespace, _, _) = sim.pod(p);
            (
                format!("/api/v1/namespaces/{}/pods", encode_segment(&namespace)),
                sim.pod_body(p),
            )
        },
        |_, _, _| {},
    )
    .await?;
    result.figure("setup_pods_seconds", took.as_secs_f64());
    result.figure("setup_seconds", started.elapsed().as_secs_f64());
    let failed = errors + lease_errors + pod_errors;
    if failed > 0 {
        return Err(BenchError::Protocol(format!(
            "{failed} setup creates failed: {}",
            sim.tally.samples().join("; ")
        )));
    }
    Ok(())
}

async fn measure(
    workspace: &Workspace,
    sim: &Arc<Sim>,
    options: &ClusterOptions,
    created_lease_namespace: &mut bool,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let mut result = ScenarioResult::new("cluster", client.server(), client.http2());
    note(
        options.common.progress,
        &format!(
            "[cluster] setup: {} nodes, {} pods in {} namespaces",
            options.nodes,
            sim.pod_count(),
            options.namespaces
        ),
    );
    setup(
        workspace,
        sim,
        options,
        created_lease_namespace,
        &mut result,
    )
    .await?;

    // Informers: each syncs (LIST) and watches before the steady state, so every tracked write
    // must reach every one of them.
    let watch_timeout =
        (options.duration + options.grace + client.request_timeout()).as_secs() + 60;
    let synced = Arc::new(AtomicUsize::new(0));
    let mut informers = tokio::task::JoinSet::new();
    let mut states = Vec::with_capacity(options.informers);
    let sync_start = Instant::now();
    sim.tracking.store(true, Ordering::Relaxed);
    for i in 0..options.informers {
        let streams: Arc<Vec<StreamState>> =
            Arc::new(INFORMED.iter().map(|_| StreamState::default()).collect());
        states.push(streams.clone());
        informers.spawn(informer(
            sim.clone(),
            sim.write_connections + i,
            streams,
            synced.clone(),
            watch_timeout,
        ));
    }
    let streams_total = options.informers * INFORMED.len();
    let sync_deadline = Instant::now() + MAX_DURATION;
    while synced.load(Ordering::Relaxed) < streams_total
        && Instant::now() < sync_deadline
        && !sim.tally.stopped()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if options.informers > 0 {
        result.figure("informer_sync_seconds", sync_start.elapsed().as_secs_f64());
    }
    if let Some(fatal) = sim.tally.take_fatal() {
        sim.stop.store(true, Ordering::Relaxed);
        informers.shutdown().await;
        return Err(fatal);
    }

    note(
        options.common.progress,
        &format!(
            "[cluster] steady state for {:.0}s: {:.1} lease renewals/s, {:.1} node status/s, {} pod status/s, {} controller ops/s, {} informers",
            options.duration.as_secs_f64(),
            options.lease_rate(),
            options.status_rate(),
            options.pod_churn,
            options.controller_rate,
            options.informers
        ),
    );
    let counters = Arc::new(Counters::default());
    let bar = Progress::start(
        options.common.progress,
        "cluster",
        counters.clone(),
        None,
        Some(options.duration),
    );
    let before: Vec<u64> = OPS
        .iter()
        .map(|(op, _, _)| sim.recorder.count(*op))
        .collect();
    let errors_before: Vec<u64> = sim
        .recorder
        .errors
        .iter()
        .map(|e| e.load(Ordering::Relaxed))
        .collect();
    let meter = Meter::start(&options.common);
    let series = Series::start(options.common.server_pid, options.sample_every);
    let rates = [
        options.lease_rate(),
        options.status_rate(),
        options.pod_churn,
        options.controller_rate,
    ];
    let phase_start = Instant::now();
    let mut families = tokio::task::JoinSet::new();
    for ((family, _), rate) in FAMILIES.iter().zip(rates) {
        let sim = sim.clone();
        let counters = counters.clone();
        let family = *family;
        let duration = options.duration;
        families.spawn(async move {
            (
                family,
                run_family(sim, family, rate, duration, counters).await,
            )
        });
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = families.join_next().await {
        outcomes.push(joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))?);
    }
    let phase = phase_start.elapsed();
    let requests: u64 = OPS
        .iter()
        .enumerate()
        .filter(|(_, (op, _, _))| *op != Op::Delivery)
        .map(|(i, (op, _, _))| {
            sim.recorder.count(*op) - before[i] + sim.recorder.errors[i].load(Ordering::Relaxed)
                - errors_before[i]
        })
        .sum();
    let points = series.map(Series::finish).unwrap_or_default();
    meter.finish(&mut result, requests);

    // Wait (bounded) for every informer to see every tracked write.
    let expected_per_kind: Vec<u64> = sim
        .acked
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    let delivered = |states: &[Arc<Vec<StreamState>>]| -> (u64, u64, u64) {
        let (mut delivered, mut early, mut lost) = (0, 0, 0);
        for streams in states {
            for (kind, state) in streams.iter().enumerate() {
                let mut matched = state.matched.load(Ordering::Relaxed);
                let resolved = state
                    .pending
                    .lock()
                    .map(|p| p.iter().filter(|k| sim.writes.get(**k).is_some()).count() as u64)
                    .unwrap_or(0);
                matched += resolved;
                early += resolved;
                delivered += matched;
                lost += expected_per_kind[kind].saturating_sub(matched);
            }
        }
        (delivered, early, lost)
    };
    let grace_deadline = Instant::now() + options.grace;
    while delivered(&states).2 > 0 && Instant::now() < grace_deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sim.stop.store(true, Ordering::Relaxed);
    informers.shutdown().await;
    bar.finish();
    let (events_delivered, early, lost) = delivered(&states);
    if let Some(fatal) = sim.tally.take_fatal() {
        return Err(fatal);
    }

    // Rows: the setup creates over the setup, the rest over the steady state.
    let mut delivery = sim.recorder.latency[Op::Delivery as usize].snapshot();
    for _ in 0..early {
        delivery.record(0);
    }
    let mut slos_checked = 0;
    let mut slos_not_met = 0;
    let mut verdicts = Vec::new();
    for (i, (op, label, slo)) in OPS.iter().enumerate() {
        let histogram = if *op == Op::Delivery {
            delivery.clone()
        } else {
            sim.recorder.latency[i].snapshot()
        };
        let errors = sim.recorder.errors[i].load(Ordering::Relaxed);
        if histogram.count() == 0 && errors == 0 {
            continue;
        }
        let span = match op {
            Op::CreateNode | Op::CreateLease | Op::CreatePod => Duration::from_secs_f64(
                result
                    .figures
                    .get(match op {
                        Op::CreateNode => "setup_nodes_seconds",
                        Op::CreateLease => "setup_leases_seconds",
                        _ => "setup_pods_seconds",
                    })
                    .copied()
                    .unwrap_or(0.0),
            ),
            _ => phase,
        };
        let row = Row::from_histogram(label, &histogram, errors, span);
        let limit = match slo {
            Slo::Mutating | Slo::Read => Some(SLO_MS),
            Slo::ClusterList => Some(SLO_CLUSTER_LIST_MS),
            Slo::Unjudged => None,
        };
        if let Some(limit) = limit
            && histogram.count() > 0
        {
            slos_checked += 1;
            let met = row.p99_ms <= limit;
            if !met {
                slos_not_met += 1;
            }
            verdicts.push(format!(
                "SLO {label}: p99 {:.1} ms <= {:.0} ms: {}",
                row.p99_ms,
                limit,
                if met { "met" } else { "NOT MET" }
            ));
        }
        result.rows.push(row);
    }
    result.notes.extend(verdicts);
    result.figure("slos_checked", f64::from(slos_checked));
    result.figure("slos_not_met", f64::from(slos_not_met));
    let mutating = mutating_p99(&sim.recorder);
    result.figure("mutating_p99_ms", mutating);

    // Asked against achieved.
    let seconds = phase.as_secs_f64();
    let mut rates_not_held = 0;
    outcomes.sort_by_key(|(family, _)| *family as usize);
    for (family, outcome) in &outcomes {
        let Some((_, name)) = FAMILIES.iter().find(|(f, _)| f == family) else {
            continue;
        };
        if outcome.asked <= 0.0 {
            continue;
        }
        let achieved = outcome.sent as f64 / seconds;
        result.figure(&format!("{name}_asked_per_second"), outcome.asked);
        result.figure(&format!("{name}_achieved_per_second"), achieved);
        result.figure(&format!("{name}_skipped"), outcome.skipped as f64);
        result.figure(&format!("{name}_sent"), outcome.sent as f64);
        let held = outcome.skipped == 0 && achieved >= outcome.asked * HELD_SHARE;
        if !held {
            rates_not_held += 1;
        }
        result.notes.push(format!(
            "rate {name}: asked {:.1}/s, achieved {achieved:.1}/s ({} due, {} skipped): {}",
            outcome.asked,
            outcome.due,
            outcome.skipped,
            if held { "held" } else { "NOT HELD" }
        ));
    }
    result.figure("rates_not_held", f64::from(rates_not_held));
    result.figure(
        "unchanged_writes",
        sim.unchanged.load(Ordering::Relaxed) as f64,
    );
    result.figure(
        "lease_renewals_overlapped",
        sim.lease_overlaps.load(Ordering::Relaxed) as f64,
    );

    let expected: u64 = expected_per_kind.iter().sum::<u64>() * options.informers as u64;
    if options.informers > 0 {
        result.figure("events_expected", expected as f64);
        result.figure("events_delivered", events_delivered as f64);
        result.figure("events_lost", lost as f64);
        result.figure("events_before_2xx", early as f64);
        result.figure(
            "informer_relists",
            sim.relists.load(Ordering::Relaxed) as f64,
        );
        result.figure("rewatches", sim.rewatches.load(Ordering::Relaxed) as f64);
        result.figure(
            "watch_errors",
            sim.watch_errors.load(Ordering::Relaxed) as f64,
        );
        if lost > 0 {
            result
                .error_samples
                .push(format!("{lost} of {expected} watch events lost"));
        }
    }
    result.figure("requests", requests as f64);
    if let Some(&cpu) = result.figures.get("server_cpu_seconds") {
        result.figure("server_cpu_ms_per_second", cpu * 1000.0 / seconds.max(1e-3));
    }
    if let Some(&rss) = result.figures.get("server_rss_mib") {
        result.figure(
            "server_rss_mib_per_1000_nodes",
            rss * 1000.0 / options.nodes as f64,
        );
    }
    if !points.is_empty() {
        let rss: Vec<String> = points.iter().map(|p| format!("{:.0}", p.1)).collect();
        let cpu: Vec<String> = points.iter().map(|p| format!("{:.0}", p.2)).collect();
        result.notes.push(format!(
            "server RSS MiB every {:.0}s: {}",
            options.sample_every.as_secs_f64(),
            rss.join(" ")
        ));
        result.notes.push(format!(
            "server CPU ms/s every {:.0}s: {}",
            options.sample_every.as_secs_f64(),
            cpu.join(" ")
        ));
    }

    result.param("nodes", options.nodes);
    result.param("pods_per_node", options.pods_per_node);
    result.param("namespaces", options.namespaces);
    result.param("duration_s", options.duration.as_secs_f64());
    result.param("lease_period_s", options.lease_period.as_secs_f64());
    result.param("status_period_s", options.status_period.as_secs_f64());
    result.param("pod_churn", options.pod_churn);
    result.param("controller_rate", options.controller_rate);
    result.param("informers", options.informers);
    result.param("encoding", crate::protobuf::encoding(options.protobuf));
    result.param("connections", sim.write_connections);
    result.error_samples.extend(sim.tally.samples());
    Ok(result)
}

/// The p99 over every mutating call of the steady state.
fn mutating_p99(recorder: &Recorder) -> f64 {
    let mut all = Histogram::new();
    for (i, (op, _, slo)) in OPS.iter().enumerate() {
        if *slo == Slo::Mutating && !matches!(op, Op::CreateNode | Op::CreateLease | Op::CreatePod)
        {
            all.merge(&recorder.latency[i].snapshot());
        }
    }
    crate::stats::micros_to_ms(all.percentile(99.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_is_even() {
        assert_eq!(due(Duration::ZERO, 10.0), 1);
        assert_eq!(due(Duration::from_millis(99), 10.0), 1);
        assert_eq!(due(Duration::from_millis(100), 10.0), 2);
        assert_eq!(due(Duration::from_secs(1), 10.0), 11);
        assert_eq!(due(Duration::from_secs(5), 0.0), 0);
        // 1,000 nodes renewing every 10 s: 100 per second; over two periods every node renews
        // exactly twice, a period apart, and the renewals are evenly spaced (never a burst).
        let (nodes, period) = (1000u64, 10.0);
        let rate = nodes as f64 / period;
        let mut last: Vec<Option<f64>> = vec![None; nodes as usize];
        let mut previous_start: Option<f64> = None;
        for n in 0..2 * nodes {
            let (node, at) = slot(n, nodes, rate);
            if let Some(before) = last[node as usize] {
                assert!((at - before - period).abs() < 1e-9, "node {node}");
            }
            last[node as usize] = Some(at);
            if let Some(p) = previous_start {
                assert!((at - p - period / nodes as f64).abs() < 1e-9);
            }
            previous_start = Some(at);
        }
        assert!(last.iter().all(Option::is_some));
        // Within any one second, as many as the rate asks.
        let in_second = (0..2 * nodes)
            .filter(|&n| (3.0..4.0).contains(&slot(n, nodes, rate).1))
            .count();
        assert_eq!(in_second, 100);
    }

    #[test]
    fn options_are_checked() {
        assert!(ClusterOptions::default().validate().is_ok());
        let bad = [
            ClusterOptions {
                nodes: 0,
                ..Default::default()
            },
            ClusterOptions {
                nodes: MAX_NODES + 1,
                ..Default::default()
            },
            ClusterOptions {
                nodes: 10_000,
                pods_per_node: 110,
                ..Default::default()
            },
            ClusterOptions {
                pod_churn: -1.0,
                ..Default::default()
            },
            ClusterOptions {
                pods_per_node: 0,
                pod_churn: 5.0,
                ..Default::default()
            },
            ClusterOptions {
                lease_period: Duration::from_millis(10),
                ..Default::default()
            },
            ClusterOptions {
                nodes: 20_000,
                pods_per_node: 1,
                lease_period: Duration::from_millis(100),
                ..Default::default()
            },
            ClusterOptions {
                informers: MAX_INFORMERS + 1,
                ..Default::default()
            },
            ClusterOptions {
                duration: Duration::ZERO,
                ..Default::default()
            },
        ];
        for options in bad {
            assert!(options.validate().is_err(), "{options:?}");
        }
        let rates = ClusterOptions {
            nodes: 5000,
            ..Default::default()
        };
        assert_eq!(rates.lease_rate(), 500.0);
        assert!((rates.status_rate() - 83.333).abs() < 0.001);
    }

    #[test]
    fn find_max_steps_up_to_the_ceiling_and_judges_runs() {
        assert_eq!(find_max_steps(5000), vec![100, 500, 1000, 2000, 5000]);
        assert_eq!(find_max_steps(1500), vec![100, 500, 1000, 1500]);
        assert_eq!(find_max_steps(50), vec![50]);
        let mut result = ScenarioResult::new("cluster", "s", true);
        result.figure("mutating_p99_ms", 20.0);
        result.figure("slos_not_met", 0.0);
        assert!(sustained_failures(&result).is_empty());
        result.figure("mutating_p99_ms", 150.0);
        result.figure("rates_not_held", 1.0);
        assert_eq!(sustained_failures(&result).len(), 2);
    }

    #[test]
    fn the_controller_mix_has_every_operation() {
        let count = |op: Op| CONTROLLER_MIX.iter().filter(|o| **o == op).count();
        assert_eq!(count(Op::GetPod), 5);
        assert_eq!(count(Op::CreateEvent), 4);
        assert_eq!(count(Op::CreateConfigMap), 2);
        assert_eq!(count(Op::DeleteConfigMap), 2);
        assert_eq!(count(Op::UpdateConfigMap), 2);
        for (i, (op, _, _)) in OPS.iter().enumerate() {
            assert_eq!(*op as usize, i, "OPS is in the order of Op");
        }
    }

    #[test]
    fn pods_spread_over_nodes_and_namespaces() {
        let sim = Sim {
            client: Arc::new(
                ApiClient::build(
                    &crate::kubeconfig::ResolvedContext {
                        context: "test".to_string(),
                        server: "https://127.0.0.1:1".to_string(),
                        ca_pem: None,
                        insecure_skip_tls_verify: true,
                        tls_server_name: None,
                        credentials: crate::kubeconfig::Credentials::Anonymous,
                        namespace: None,
                    },
                    1,
                    false,
                    Duration::from_secs(1),
                )
                .unwrap(),
            ),
            write_connections: 1,
            run: "r".to_string(),
            namespaces: vec!["b-0".to_string(), "b-1".to_string(), "b-2".to_string()],
            controller_namespace: "b".to_string(),
            nodes: 4,
            pods_per_node: 5,
            leases: Vec::new(),
            lease_overlaps: AtomicU64::new(0),
            node_rvs: Vec::new(),
            unchanged: AtomicU64::new(0),
            started_at: now_seconds(),
            recorder: Recorder::new(),
            tally: Tally::new("x"),
            writes: WriteLog::new(),
            acked: Default::default(),
            created: Mutex::new(VecDeque::new()),
            sequence: AtomicU64::new(0),
            tracking: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            relists: AtomicU64::new(0),
            rewatches: AtomicU64::new(0),
            watch_errors: AtomicU64::new(0),
            protobuf: false,
        };
        let mut names = std::collections::HashSet::new();
        for p in 0..sim.pod_count() {
            let (namespace, name, node) = sim.pod(p);
            assert!(names.insert((namespace.clone(), name.clone())), "{name}");
            assert_eq!(node, sim.node_name(p / 5));
            let body: Value = serde_json::from_slice(&sim.pod_body(p)).unwrap();
            assert_eq!(body["spec"]["nodeName"], json!(node));
            assert_eq!(body["metadata"]["labels"][RUN_LABEL], json!("r"));
        }
        assert_eq!(names.len(), 20);
        let ready: Value = serde_json::from_slice(&sim.pod_status_patch(true)).unwrap();
        let not_ready: Value = serde_json::from_slice(&sim.pod_status_patch(false)).unwrap();
        assert_ne!(
            ready["status"]["conditions"][0]["status"],
            not_ready["status"]["conditions"][0]["status"]
        );
        let lease: Value = serde_json::from_slice(&sim.lease_body(3)).unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], json!("b-node-3"));
        assert!(lease["spec"]["renewTime"].as_str().unwrap().ends_with('Z'));
    }
}
