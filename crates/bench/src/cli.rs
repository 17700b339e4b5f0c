//! The command line: flags and subcommands, mapped onto [`Scenario`] values, and what is printed.
//!
//! It owns flag names, defaults and help texts, the duration syntax (`500ms`, `10s`, `2m`, or
//! plain seconds), and the exit status. It must not measure anything or send any request itself;
//! that is [`run_scenario`]'s.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::error::BenchError;
use crate::report::{ScenarioResult, compare_table};
use crate::scenarios::{
    AdmissionLoad, AggregatorOptions, ClientConfig, ClusterOptions, CommonOptions, CrdOptions,
    CreateKind, CreateOptions, GcOptions, ListOptions, MemoryOptions, MixedOptions, Scenario,
    StartupOptions, WatchOptions, run_scenario,
};

/// Drives a Kubernetes API server (Ironplane or kube-apiserver) through its public API and
/// reports figures that can be compared between servers.
#[derive(Debug, Parser)]
#[command(name = "ironplane-bench", version, about)]
pub struct Cli {
    /// The kubeconfig naming the server and credentials (default: $KUBECONFIG, else
    /// ~/.kube/config). The startup scenario reads it after starting the server.
    #[arg(long, global = true, help_heading = "Common options")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current-context).
    #[arg(long, global = true, help_heading = "Common options")]
    pub context: Option<String>,
    /// Also write the result as JSON to this file (for `compare`).
    #[arg(
        long,
        global = true,
        help_heading = "Common options",
        value_name = "FILE"
    )]
    pub json: Option<PathBuf>,
    /// The server's process id: adds its CPU per request and its memory (read from /proc).
    #[arg(
        long,
        global = true,
        help_heading = "Common options",
        value_name = "PID"
    )]
    pub server_pid: Option<u32>,
    /// The process id of the server's etcd (or any second process serving it): adds its CPU per
    /// request and its memory beside the server's, as `etcd_*` figures.
    #[arg(
        long,
        global = true,
        help_heading = "Common options",
        value_name = "PID"
    )]
    pub etcd_pid: Option<u32>,
    /// The namespace to work in (default: bench-<random>; created if missing).
    #[arg(long, global = true, help_heading = "Common options")]
    pub namespace: Option<String>,
    /// Keep the objects (and a namespace the tool created) at the end.
    #[arg(long, global = true, help_heading = "Common options")]
    pub keep: bool,
    /// Connections to spread requests over (HTTP/2 multiplexes requests on each).
    #[arg(
        long,
        global = true,
        help_heading = "Common options",
        default_value_t = 4
    )]
    pub connections: usize,
    /// Time limit of one request.
    #[arg(long, global = true, help_heading = "Common options", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Bytes of data in each ConfigMap written.
    #[arg(
        long,
        global = true,
        help_heading = "Common options",
        default_value_t = 64
    )]
    pub value_bytes: usize,
    /// No progress lines on stderr.
    #[arg(long, short, global = true, help_heading = "Common options")]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Wall time from spawning the server to its first 200 from /readyz, over several runs.
    Startup {
        /// The command that starts the server in the foreground (run with `sh -c`; the whole
        /// process group is stopped after each run).
        #[arg(long)]
        start_cmd: String,
        #[arg(long, default_value_t = 5)]
        runs: u32,
        /// The longest wait for /readyz in one run.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        max_wait: Duration,
        /// The pause between /readyz polls.
        #[arg(long, default_value = "2ms", value_parser = parse_duration)]
        poll_interval: Duration,
        /// Show the server's stdout and stderr.
        #[arg(long)]
        show_output: bool,
    },
    /// Concurrent clients creating small ConfigMaps: creates per second and latency.
    Create {
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Run this long (default 10s when --count is not given).
        #[arg(long, value_parser = parse_duration, conflicts_with = "count")]
        duration: Option<Duration>,
        /// Send this many creates.
        #[arg(long)]
        count: Option<u64>,
        /// What to create: small ConfigMaps, realistic three-container Pods, Deployments, or custom
        /// resources of a CRD installed first (an 8 KB operator-like schema).
        #[arg(long, value_enum, default_value = "configmap")]
        kind: CreateKind,
        /// What admission checks each create: nothing beyond the default plugins, one
        /// ValidatingAdmissionPolicy, or one validating webhook the bench serves on loopback.
        #[arg(long, value_enum, default_value = "none")]
        admission: AdmissionLoad,
    },
    /// Controller-like mix (GET 60%, LIST by label 10%, UPDATE 20%, CREATE/DELETE 10%).
    Mixed {
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// Size of the pre-created set.
        #[arg(long, default_value_t = 1000)]
        objects: u64,
        /// Every request is an UPDATE (for the server's CPU per update).
        #[arg(long)]
        updates_only: bool,
    },
    /// LIST whole and paginated (limit=500), from cache (resourceVersion=0) and consistent.
    List {
        /// Objects in the namespace (created first if it holds fewer).
        #[arg(long, default_value_t = 1000)]
        objects: u64,
        /// Traversals per variant.
        #[arg(long, default_value_t = 10)]
        iterations: u32,
        /// At most this long per variant.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: Duration,
        /// What is listed: ConfigMaps, or custom resources of a CRD installed first
        /// (configmap or custom-resource).
        #[arg(long, value_enum, default_value_t = CreateKind::Configmap)]
        kind: CreateKind,
        /// List in protobuf, as client-go's informers of built-in kinds do (JSON otherwise).
        #[arg(long)]
        protobuf: bool,
    },
    /// Many watchers while a writer updates ConfigMaps: delivery latency and events lost.
    Watch {
        #[arg(long, default_value_t = 100)]
        watchers: usize,
        /// Writes per second.
        #[arg(long, default_value_t = 50)]
        rate: u32,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// ConfigMaps the writer updates in turn.
        #[arg(long, default_value_t = 10)]
        objects: u64,
        /// Concurrent writer tasks.
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Watch streams per HTTP/2 connection (below kube-apiserver's 100 streams a
        /// connection, which the writers' requests share).
        #[arg(long, default_value_t = 50)]
        streams_per_connection: usize,
        /// How long to wait for the last events after the last write.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        grace: Duration,
        /// Watch in protobuf, as client-go's informers of built-in kinds do (JSON otherwise).
        #[arg(long)]
        protobuf: bool,
    },
    /// Server RSS idle and after N objects (needs --server-pid).
    Memory {
        #[arg(long, default_value_t = 10_000)]
        objects: u64,
        /// Pause before each RSS reading.
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        settle: Duration,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
    },
    /// CustomResourceDefinitions: time to Established and to the first custom resource, and the
    /// server's RSS per installed CRD (with --server-pid).
    Crd {
        #[arg(long, default_value_t = 200)]
        crds: u64,
        /// The approximate size of each CRD's schema, in KB.
        #[arg(long, default_value_t = 20)]
        schema_kb: u64,
        /// The pause between polls of the Established condition.
        #[arg(long, default_value = "1ms", value_parser = parse_duration)]
        poll: Duration,
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        max_wait: Duration,
        /// Pause before each RSS reading.
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        settle: Duration,
    },
    /// The garbage collector's soak: N owners with D dependents each, the owners deleted at
    /// once, timed until every dependent is collected; RSS per round with --server-pid.
    Gc {
        #[arg(long, default_value_t = 10_000)]
        owners: u64,
        #[arg(long, default_value_t = 3)]
        dependents: u64,
        #[arg(long, default_value_t = 2)]
        rounds: u32,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        #[arg(long, default_value = "300s", value_parser = parse_duration)]
        max_wait: Duration,
        /// Pause before each RSS reading.
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        settle: Duration,
    },
    /// The latency the aggregation proxy adds to a GET: the tool serves an extension API server
    /// itself, registers it (APIService, Service, EndpointSlice), and times sequential GETs
    /// straight to it, through the API server's proxy, and of a built-in ConfigMap.
    Aggregator {
        /// Measured GETs per path.
        #[arg(long, default_value_t = 2_000)]
        requests: u64,
        /// Unmeasured GETs per path first.
        #[arg(long, default_value_t = 200)]
        warmup: u64,
        /// Stop the measured phase after this long, with fewer GETs.
        #[arg(long, default_value = "120s", value_parser = parse_duration)]
        duration: Duration,
        /// The longest wait for the APIService to become Available.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        max_wait: Duration,
    },
    /// A large cluster's steady state, as kubemark and clusterloader2 load kube-apiserver: N fake
    /// Nodes with Leases and M pods each; Lease renewals every 10 s, node status every 60 s, pod
    /// status churn, a controller-like mix and list+watch informers; latency against upstream's
    /// SLOs, watch delivery lag, rates held, server CPU and RSS.
    Cluster {
        #[arg(long, default_value_t = 100)]
        nodes: u64,
        #[arg(long, default_value_t = 30)]
        pods_per_node: u64,
        /// Namespaces the pods are spread over.
        #[arg(long, default_value_t = 10)]
        namespaces: u64,
        /// How long the steady state runs.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: Duration,
        /// How often each node renews its Lease (the kubelet's 10 s).
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        lease_period: Duration,
        /// How often each node patches its status (the kubelet's 60 s).
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        status_period: Duration,
        /// Pod status updates per second.
        #[arg(long, default_value_t = 20.0)]
        pod_churn: f64,
        /// Controller-like operations per second (GETs, namespaced LISTs, Event and ConfigMap
        /// writes).
        #[arg(long, default_value_t = 20.0)]
        controller_rate: f64,
        /// Informer clients (one connection each), each list+watching pods, nodes,
        /// endpointslices and configmaps cluster-wide.
        #[arg(long, default_value_t = 2)]
        informers: usize,
        /// Concurrent creates during setup.
        #[arg(long, default_value_t = 64)]
        setup_concurrency: usize,
        /// How long to wait after the last write for the informers' last events.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        grace: Duration,
        /// How often the server's CPU and RSS are sampled (with --server-pid).
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        sample_every: Duration,
        /// Step the node count up (100, 500, 1000, 2000, 5000, ...) to --nodes, a whole run
        /// each, until an SLO, the 100 ms p99 of writes, a rate or a watch event is missed;
        /// reports the largest size sustained.
        #[arg(long)]
        find_max: bool,
        /// Informers list and watch in protobuf, as client-go's informers of built-in kinds
        /// do (JSON otherwise).
        #[arg(long)]
        protobuf: bool,
    },
    /// Prints b/a for every figure of two result files written with --json.
    Compare { a: PathBuf, b: PathBuf },
}

/// Parses `500ms`, `10s`, `1.5s`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 10s, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    if !(0.0..=86_400.0).contains(&seconds) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl Cli {
    /// The scenario the flags describe; `None` for `compare`.
    pub fn scenario(&self) -> Option<Scenario> {
        let common = CommonOptions {
            namespace: self.namespace.clone(),
            keep: self.keep,
            server_pid: self.server_pid,
            etcd_pid: self.etcd_pid,
            progress: !self.quiet,
            value_bytes: self.value_bytes,
        };
        let scenario = match &self.command {
            Command::Startup {
                start_cmd,
                runs,
                max_wait,
                poll_interval,
                show_output,
            } => Scenario::Startup(StartupOptions {
                start_cmd: start_cmd.clone(),
                runs: *runs,
                max_wait: *max_wait,
                poll_interval: *poll_interval,
                show_output: *show_output,
                progress: !self.quiet,
            }),
            Command::Create {
                concurrency,
                duration,
                count,
                kind,
                admission,
            } => Scenario::Create(CreateOptions {
                concurrency: *concurrency,
                duration: match (duration, count) {
                    (None, None) => Some(Duration::from_secs(10)),
                    _ => *duration,
                },
                count: *count,
                kind: *kind,
                admission: *admission,
                common,
            }),
            Command::Mixed {
                concurrency,
                duration,
                objects,
                updates_only,
            } => Scenario::Mixed(MixedOptions {
                concurrency: *concurrency,
                duration: *duration,
                objects: *objects,
                updates_only: *updates_only,
                common,
            }),
            Command::List {
                objects,
                iterations,
                duration,
                kind,
                protobuf,
            } => Scenario::List(ListOptions {
                objects: *objects,
                iterations: *iterations,
                duration: *duration,
                kind: *kind,
                protobuf: *protobuf,
                common,
            }),
            Command::Watch {
                watchers,
                rate,
                duration,
                objects,
                writers,
                streams_per_connection,
                grace,
                protobuf,
            } => Scenario::Watch(WatchOptions {
                watchers: *watchers,
                rate: *rate,
                duration: *duration,
                objects: *objects,
                writers: *writers,
                streams_per_connection: *streams_per_connection,
                grace: *grace,
                protobuf: *protobuf,
                common,
            }),
            Command::Memory {
                objects,
                settle,
                concurrency,
            } => Scenario::Memory(MemoryOptions {
                objects: *objects,
                settle: *settle,
                concurrency: *concurrency,
                common,
            }),
            Command::Gc {
                owners,
                dependents,
                rounds,
                concurrency,
                max_wait,
                settle,
            } => Scenario::Gc(GcOptions {
                owners: *owners,
                dependents: *dependents,
                rounds: *rounds,
                concurrency: *concurrency,
                max_wait: *max_wait,
                settle: *settle,
                common,
            }),
            Command::Crd {
                crds,
                schema_kb,
                poll,
                max_wait,
                settle,
            } => Scenario::Crd(CrdOptions {
                crds: *crds,
                schema_kb: *schema_kb,
                poll: *poll,
                max_wait: *max_wait,
                settle: *settle,
                common,
            }),
            Command::Aggregator {
                requests,
                warmup,
                duration,
                max_wait,
            } => Scenario::Aggregator(AggregatorOptions {
                requests: *requests,
                warmup: *warmup,
                duration: *duration,
                max_wait: *max_wait,
                common,
            }),
            Command::Cluster {
                nodes,
                pods_per_node,
                namespaces,
                duration,
                lease_period,
                status_period,
                pod_churn,
                controller_rate,
                informers,
                setup_concurrency,
                grace,
                sample_every,
                find_max,
                protobuf,
            } => Scenario::Cluster(ClusterOptions {
                nodes: *nodes,
                pods_per_node: *pods_per_node,
                namespaces: *namespaces,
                duration: *duration,
                lease_period: *lease_period,
                status_period: *status_period,
                pod_churn: *pod_churn,
                controller_rate: *controller_rate,
                informers: *informers,
                setup_concurrency: *setup_concurrency,
                grace: *grace,
                sample_every: *sample_every,
                find_max: *find_max,
                protobuf: *protobuf,
                common,
            }),
            Command::Compare { .. } => return None,
        };
        Some(scenario)
    }

    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            kubeconfig: self
                .kubeconfig
                .clone()
                .unwrap_or_else(crate::kubeconfig::default_path),
            context: self.context.clone(),
            connections: self.connections,
            request_timeout: self.request_timeout,
        }
    }
}

/// Runs what the command line asks and prints the outcome on stdout.
pub async fn run(cli: Cli) -> Result<(), BenchError> {
    if let Command::Compare { a, b } = &cli.command {
        let result_a = ScenarioResult::load(a)?;
        let result_b = ScenarioResult::load(b)?;
        print!(
            "{}",
            compare_table(
                &result_a,
                &result_b,
                &a.display().to_string(),
                &b.display().to_string()
            )
        );
        return Ok(());
    }
    let Some(scenario) = cli.scenario() else {
        return Ok(());
    };
    let result = run_scenario(&cli.client_config(), &scenario).await?;
    print!("{}", result.to_table());
    if let Some(path) = &cli.json {
        result.save(path)?;
    }
    if let Some(&lost) = result.figures.get("events_lost")
        && lost > 0.0
    {
        eprintln!("warning: {lost} watch events were lost");
    }
    let errors = result.total_errors();
    if errors > 0 {
        eprintln!("warning: {errors} operations failed (see \"first errors\" above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn flags_map_to_scenarios() {
        let cli = Cli::try_parse_from([
            "ironplane-bench",
            "--kubeconfig",
            "/k",
            "create",
            "--concurrency",
            "3",
            "--count",
            "50",
            "--namespace",
            "ns1",
            "--keep",
        ])
        .unwrap();
        let Some(Scenario::Create(options)) = cli.scenario() else {
            panic!("not create");
        };
        assert_eq!(options.concurrency, 3);
        assert_eq!(options.count, Some(50));
        assert_eq!(options.duration, None);
        assert_eq!(options.common.namespace.as_deref(), Some("ns1"));
        assert!(options.common.keep);
        assert_eq!(cli.client_config().kubeconfig, PathBuf::from("/k"));

        let cli = Cli::try_parse_from(["ironplane-bench", "create"]).unwrap();
        let Some(Scenario::Create(options)) = cli.scenario() else {
            panic!("not create");
        };
        assert_eq!(options.duration, Some(Duration::from_secs(10)));

        assert!(
            Cli::try_parse_from([
                "ironplane-bench",
                "create",
                "--count",
                "1",
                "--duration",
                "1s"
            ])
            .is_err()
        );
        let cli = Cli::try_parse_from([
            "ironplane-bench",
            "watch",
            "--watchers",
            "1000",
            "--rate",
            "20",
            "--server-pid",
            "42",
            "--etcd-pid",
            "43",
        ])
        .unwrap();
        let Some(Scenario::Watch(options)) = cli.scenario() else {
            panic!("not watch");
        };
        assert_eq!(options.watchers, 1000);
        assert_eq!(options.common.server_pid, Some(42));
        assert_eq!(options.common.etcd_pid, Some(43));
        let cli = Cli::try_parse_from([
            "ironplane-bench",
            "cluster",
            "--nodes",
            "5000",
            "--pods-per-node",
            "30",
            "--pod-churn",
            "2.5",
            "--lease-period",
            "5s",
        ])
        .unwrap();
        let Some(Scenario::Cluster(options)) = cli.scenario() else {
            panic!("not cluster");
        };
        assert_eq!((options.nodes, options.pods_per_node), (5000, 30));
        assert_eq!(options.pod_churn, 2.5);
        assert_eq!(options.lease_period, Duration::from_secs(5));
        assert_eq!(options.status_period, Duration::from_secs(60));
        assert_eq!(options.lease_rate(), 1000.0);
        let cli = Cli::try_parse_from(["ironplane-bench", "compare", "a.json", "b.json"]).unwrap();
        assert!(cli.scenario().is_none());
    }
}
