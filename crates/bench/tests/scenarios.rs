//! Every scenario for about a second, with tiny sizes, against an in-process Ironplane server
//! (`ironplane::testing::TestServer`). These tests check correctness only (counts add up, no
//! event is lost, no request fails, nothing is left behind), never timing.

use std::time::Duration;

use ironplane_bench::{
    AdmissionLoad, AggregatorOptions, BenchError, ClientConfig, ClusterOptions, CommonOptions,
    CrdOptions, CreateKind, CreateOptions, ListOptions, MemoryOptions, MixedOptions, Scenario,
    WatchOptions, run_scenario,
};

fn client_config(server: &ironplane::testing::TestServer) -> ClientConfig {
    let mut cfg = ClientConfig::new(&server.kubeconfig);
    cfg.request_timeout = Duration::from_secs(10);
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_counts_add_up() {
    let server = ironplane::testing::TestServer::start().await;
    let scenario = Scenario::Create(CreateOptions {
        concurrency: 4,
        count: Some(40),
        duration: None,
        ..Default::default()
    });
    let result = run_scenario(&client_config(&server), &scenario)
        .await
        .unwrap();
    let row = result.row("create").unwrap();
    assert_eq!(row.count, 40);
    assert_eq!(row.errors, 0, "{:?}", result.error_samples);
    assert!(
        result.error_samples.is_empty(),
        "{:?}",
        result.error_samples
    );
    assert!(result.server.starts_with(server.url.trim_end_matches('/')));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_behind_a_policy_or_a_webhook_pass_and_leave_nothing_behind() {
    let server = ironplane::testing::TestServer::start().await;
    let cfg = client_config(&server);
    for admission in [AdmissionLoad::Policy, AdmissionLoad::Webhook] {
        let scenario = Scenario::Create(CreateOptions {
            concurrency: 2,
            count: Some(20),
            duration: None,
            admission,
            ..Default::default()
        });
        let result = run_scenario(&cfg, &scenario).await.unwrap();
        let row = result.row("create").unwrap();
        assert_eq!(
            (row.count, row.errors),
            (20, 0),
            "{admission:?}: {:?}",
            result.error_samples
        );
    }
    let out = std::process::Command::new(common_kubectl())
        .env("KUBECONFIG", &cfg.kubeconfig)
        .args([
            "get",
            "validatingadmissionpolicies,validatingadmissionpolicybindings,validatingwebhookconfigurations",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_creates_install_their_crd_and_clean_up() {
    let server = ironplane::testing::TestServer::start().await;
    let scenario = Scenario::Create(CreateOptions {
        concurrency: 2,
        count: Some(20),
        duration: None,
        kind: CreateKind::CustomResource,
        ..Default::default()
    });
    let cfg = client_config(&server);
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let row = result.row("create").unwrap();
    assert_eq!(
        (row.count, row.errors),
        (20, 0),
        "{:?}",
        result.error_samples
    );
    // The CRD goes with its custom resources (its finalizer runs after the delete answers).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let out = std::process::Command::new(common_kubectl())
            .env("KUBECONFIG", &cfg.kubeconfig)
            .args(["get", "crd", "-o", "name"])
            .output()
            .expect("kubectl runs");
        assert!(out.status.success());
        let left = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if left.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left behind: {left}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The real kubectl (the end-to-end tests' `/usr/bin/kubectl`); a missing one fails the test.
fn common_kubectl() -> &'static str {
    "kubectl"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_has_no_errors() {
    let server = ironplane::testing::TestServer::start().await;
    let scenario = Scenario::Mixed(MixedOptions {
        concurrency: 4,
        duration: Duration::from_secs(1),
        objects: 40,
        ..Default::default()
    });
    let result = run_scenario(&client_config(&server), &scenario)
        .await
        .unwrap();
    let sum: u64 = result
        .rows
        .iter()
        .filter(|r| r.label != "all")
        .map(|r| r.count)
        .sum();
    assert!(sum > 0);
    assert_eq!(result.row("all").unwrap().count, sum);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_variants_see_every_object() {
    let server = ironplane::testing::TestServer::start().await;
    let cfg = client_config(&server);
    // A namespace holds its root CA ConfigMap from the moment the publisher sees it, as on any
    // cluster; the scenario counts it among the objects it finds there.
    let kubectl = |args: &[&str]| {
        std::process::Command::new(common_kubectl())
            .env("KUBECONFIG", &cfg.kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs")
    };
    assert!(kubectl(&["create", "namespace", "listed"]).status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !kubectl(&["-n", "listed", "get", "configmap", "kube-root-ca.crt"])
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no kube-root-ca.crt in the namespace"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // More than one page of 500, so that the paginated variants follow `continue`.
    let list = |iterations: u32, protobuf: bool| {
        let scenario = Scenario::List(ListOptions {
            objects: 600,
            iterations,
            protobuf,
            common: CommonOptions {
                namespace: Some("listed".to_string()),
                ..Default::default()
            },
            ..Default::default()
        });
        let cfg = cfg.clone();
        async move {
            let result = run_scenario(&cfg, &scenario).await.unwrap();
            assert_eq!(result.rows.len(), 4);
            for row in &result.rows {
                assert_eq!(
                    row.count,
                    u64::from(iterations),
                    "{}: {:?}",
                    row.label,
                    result.error_samples
                );
                assert_eq!(row.errors, 0, "{}: {:?}", row.label, result.error_samples);
            }
            result
        }
    };
    let result = list(2, false).await;
    assert_eq!(result.figures["objects_in_namespace"], 600.0);
    assert_eq!(result.figures["objects_created"], 599.0);
    // The same in protobuf: every page's items counted and `continue` followed from the
    // protobuf list.
    list(1, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_loses_no_events() {
    watch_loses_no_events_in(false).await;
}

/// The same in protobuf: every watcher reads each event's type and resourceVersion from the
/// length-prefixed messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_in_protobuf_loses_no_events() {
    watch_loses_no_events_in(true).await;
}

async fn watch_loses_no_events_in(protobuf: bool) {
    let server = ironplane::testing::TestServer::start().await;
    let scenario = Scenario::Watch(WatchOptions {
        watchers: 20,
        rate: 20,
        duration: Duration::from_secs(1),
        objects: 3,
        writers: 2,
        streams_per_connection: 10,
        grace: Duration::from_secs(10),
        protobuf,
        common: CommonOptions::default(),
    });
    let result = run_scenario(&client_config(&server), &scenario)
        .await
        .unwrap();
    let writes = result.figures["writes_acked"];
    assert!(writes > 0.0);
    assert_eq!(
        result.figures["events_lost"], 0.0,
        "{:?}",
        result.error_samples
    );
    assert_eq!(result.figures["events_delivered"], writes * 20.0);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_counts_add_up_loses_no_events_and_cleans_up() {
    cluster_counts_add_up_in(false).await;
}

/// The same with informers that list and watch in protobuf, as client-go's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_informers_in_protobuf_lose_no_events() {
    cluster_counts_add_up_in(true).await;
}

async fn cluster_counts_add_up_in(protobuf: bool) {
    let server = ironplane::testing::TestServer::start().await;
    let cfg = client_config(&server);
    let scenario = Scenario::Cluster(ClusterOptions {
        nodes: 20,
        pods_per_node: 3,
        namespaces: 3,
        duration: Duration::from_secs(3),
        // Short periods, so that every family writes several times in a short run.
        lease_period: Duration::from_secs(1),
        status_period: Duration::from_secs(2),
        pod_churn: 10.0,
        controller_rate: 20.0,
        informers: 2,
        setup_concurrency: 8,
        grace: Duration::from_secs(20),
        sample_every: Duration::from_secs(1),
        find_max: false,
        protobuf,
        common: CommonOptions {
            // The server runs in this test's process.
            server_pid: Some(std::process::id()),
            ..Default::default()
        },
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let count = |label: &str| result.row(label).map_or(0, |r| r.count);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
    assert!(
        result.error_samples.is_empty(),
        "{:?}",
        result.error_samples
    );
    assert_eq!(count("setup POST nodes"), 20);
    assert_eq!(count("setup POST leases"), 20);
    assert_eq!(count("setup POST pods"), 60);
    // Every renewal is one PUT, unless the node's previous renewal was still under way.
    let sent = |family: &str| result.figures[&format!("{family}_sent")] as u64;
    assert!(sent("lease_renewals") > 0);
    assert_eq!(
        count("PUT leases") + result.figures["lease_renewals_overlapped"] as u64,
        sent("lease_renewals")
    );
    assert_eq!(count("PATCH nodes/status"), sent("node_status_updates"));
    assert_eq!(count("PATCH pods/status"), sent("pod_status_updates"));
    let controller: u64 = [
        "GET pods",
        "GET nodes",
        "LIST pods (namespace)",
        "LIST configmaps (namespace)",
        "POST events",
        "POST configmaps",
        "PUT configmaps",
        "DELETE configmaps",
    ]
    .iter()
    .map(|label| count(label))
    .sum();
    assert_eq!(controller, sent("controller_ops"));
    // Each informer saw every node status, pod status and ConfigMap write.
    // (A node status patch within the second of the node's previous heartbeat changes nothing:
    // no event follows, and the scenario counts it apart.)
    let tracked = count("PATCH nodes/status")
        + count("PATCH pods/status")
        + count("POST configmaps")
        + count("PUT configmaps")
        - result.figures["unchanged_writes"] as u64;
    assert!(tracked > 0);
    assert_eq!(result.figures["events_expected"], (tracked * 2) as f64);
    assert_eq!(result.figures["events_lost"], 0.0);
    assert_eq!(result.figures["events_delivered"], (tracked * 2) as f64);
    assert_eq!(count("watch delivery"), tracked * 2);
    assert!(count("LIST pods (cluster)") >= 2);
    assert_eq!(
        result.figures["slos_checked"],
        (result.rows.len() - 1) as f64
    );
    assert!(result.notes.iter().any(|n| n.starts_with("SLO PUT leases")));
    assert!(result.notes.iter().any(|n| n.starts_with("server RSS MiB")));
    assert!(result.figures["server_rss_mib_per_1000_nodes"] > 0.0);
    // Nothing of the run is left: nodes, leases, pods, events, ConfigMaps.
    let out = std::process::Command::new(common_kubectl())
        .env("KUBECONFIG", &cfg.kubeconfig)
        .args([
            "get",
            "nodes,leases,pods,events,configmaps",
            "--all-namespaces",
            "-l",
            "app.kubernetes.io/managed-by=ironplane-bench",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reads_the_server_process() {
    let server = ironplane::testing::TestServer::start().await;
    // The server runs in this test's process.
    let scenario = Scenario::Memory(MemoryOptions {
        objects: 30,
        settle: Duration::from_millis(100),
        concurrency: 4,
        common: CommonOptions {
            server_pid: Some(std::process::id()),
            ..Default::default()
        },
    });
    let result = run_scenario(&client_config(&server), &scenario)
        .await
        .unwrap();
    assert_eq!(result.row("create").unwrap().count, 30);
    assert!(result.figures["server_rss_after_mib"] > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_installs_establishes_and_cleans_up() {
    let server = ironplane::testing::TestServer::start().await;
    let scenario = Scenario::Crd(CrdOptions {
        crds: 3,
        schema_kb: 4,
        settle: Duration::from_millis(100),
        common: CommonOptions {
            server_pid: Some(std::process::id()),
            ..Default::default()
        },
        ..Default::default()
    });
    let result = run_scenario(&client_config(&server), &scenario)
        .await
        .unwrap();
    assert_eq!(result.row("established").unwrap().count, 3);
    assert_eq!(result.row("first custom resource").unwrap().count, 3);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
    assert!(result.figures.contains_key("server_rss_mib_per_crd"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregator_gets_go_three_ways_and_the_registration_is_removed() {
    let server = ironplane::testing::TestServer::start().await;
    let cfg = client_config(&server);
    let scenario = Scenario::Aggregator(AggregatorOptions {
        requests: 30,
        warmup: 5,
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    for path in ["direct", "proxied", "built-in"] {
        let row = result.row(path).unwrap();
        assert_eq!(
            (row.count, row.errors),
            (30, 0),
            "{path}: {:?}",
            result.error_samples
        );
        assert!(row.median_ms > 0.0, "{path}");
    }
    // The proxied and the direct GET return the extension's object, unchanged in size.
    assert_eq!(
        result.params["direct_response_bytes"],
        result.params["proxied_response_bytes"]
    );
    assert!(result.figures.contains_key("proxy_added_p50_ms"));
    assert!(result.figures.contains_key("built_in_p90_ms"));
    let group = &result.params["group_version"];
    let apiservice = format!("apiservice/v1.{}", group.trim_end_matches("/v1"));
    let out = std::process::Command::new(common_kubectl())
        .env("KUBECONFIG", &cfg.kubeconfig)
        .args(["get", &apiservice, "--ignore-not-found", "-o", "name"])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_a_clear_error() {
    let server = ironplane::testing::TestServer::start().await;
    let dir = std::env::temp_dir().join(format!("bench-wrong-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user: {{token: not-a-valid-token}}\n",
        server.url
    );
    std::fs::write(&path, text).unwrap();
    let scenario = Scenario::Create(CreateOptions::default());
    let err = run_scenario(&ClientConfig::new(&path), &scenario)
        .await
        .unwrap_err();
    assert!(
        matches!(err, BenchError::Rejected { status: 401, .. }),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
