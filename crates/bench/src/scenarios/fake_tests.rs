//! Every scenario run in-process against the fake server: counts add up, no events are lost,
//! nothing is left behind, and bad credentials or a dead server end the run with a clear error.
//! These tests check correctness only, never timing.

use std::time::Duration;

use super::*;
use crate::fake::{FakeAuth, FakeServer};

fn config(server: &FakeServer, tag: &str) -> ClientConfig {
    let mut cfg = ClientConfig::new(server.write_kubeconfig(tag));
    cfg.request_timeout = Duration::from_secs(10);
    cfg
}

fn namespace_of(result: &ScenarioResult) -> String {
    result.params["namespace"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_by_count_cleans_up() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "create");
    let scenario = Scenario::Create(CreateOptions {
        concurrency: 4,
        count: Some(50),
        duration: None,
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let row = result.row("create").unwrap();
    assert_eq!(row.count, 50);
    assert_eq!(row.errors, 0);
    assert!(result.http2);
    assert!(result.figures.contains_key("bench_cpu_percent"));
    let ns = namespace_of(&result);
    assert!(ns.starts_with("bench-"), "{ns}");
    assert!(!server.has_namespace(&ns));
    assert_eq!(server.count(&ns), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_by_duration_keeps_objects_with_client_certificate() {
    let server = FakeServer::start(FakeAuth::ClientCertificate).await;
    let cfg = config(&server, "create-keep");
    let scenario = Scenario::Create(CreateOptions {
        concurrency: 2,
        count: None,
        duration: Some(Duration::from_millis(300)),
        kind: Default::default(),
        admission: Default::default(),
        common: CommonOptions {
            namespace: Some("kept".to_string()),
            keep: true,
            ..Default::default()
        },
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let row = result.row("create").unwrap();
    assert!(row.count > 0);
    assert_eq!(row.errors, 0);
    assert_eq!(server.count("kept") as u64, row.count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_updates_only_sends_nothing_but_updates() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "updates");
    let scenario = Scenario::Mixed(MixedOptions {
        concurrency: 2,
        duration: Duration::from_millis(500),
        objects: 20,
        updates_only: true,
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let updates = result.row("update").unwrap().count;
    assert!(updates > 0);
    assert_eq!(result.row("all").unwrap().count, updates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_counts_add_up() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "mixed");
    let scenario = Scenario::Mixed(MixedOptions {
        concurrency: 4,
        duration: Duration::from_millis(800),
        objects: 50,
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let labels: Vec<&str> = result.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["get", "list", "update", "create", "delete", "all"]);
    let sum: u64 = result.rows[..5].iter().map(|r| r.count).sum();
    assert_eq!(result.row("all").unwrap().count, sum);
    assert!(sum > 0);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
    assert_eq!(server.count(&namespace_of(&result)), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_variants_see_every_object() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "list");
    let scenario = Scenario::List(ListOptions {
        objects: 1100,
        iterations: 2,
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    assert_eq!(result.rows.len(), 4);
    for row in &result.rows {
        assert_eq!(row.count, 2, "{}", row.label);
        assert_eq!(row.errors, 0, "{}: {:?}", row.label, result.error_samples);
        assert!(row.bytes_per_second.unwrap_or(0.0) > 0.0);
    }
    assert_eq!(result.figures["objects_in_namespace"], 1100.0);
    assert_eq!(result.figures["objects_created"], 1100.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_reports_the_etcd_process_and_each_variants_cpu() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "list-etcd");
    // The fake runs in this process, so this process stands for the server and for its etcd.
    let me = std::process::id();
    let scenario = Scenario::List(ListOptions {
        objects: 600,
        iterations: 2,
        common: CommonOptions {
            server_pid: Some(me),
            etcd_pid: Some(me),
            ..Default::default()
        },
        ..Default::default()
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    for process in ["server", "etcd"] {
        for variant in [
            "full_cache",
            "full_consistent",
            "paged500_cache",
            "paged500_consistent",
        ] {
            let name = format!("{process}_cpu_ms_per_traversal_{variant}");
            assert!(
                result.figures.get(&name).is_some_and(|v| *v >= 0.0),
                "{name}"
            );
        }
    }
    assert!(result.figures.contains_key("etcd_cpu_ms_per_request"));
    assert!(result.figures["etcd_rss_mib"] > 0.0);

    let missing = Scenario::List(ListOptions {
        objects: 1,
        common: CommonOptions {
            // Above any pid_max Linux allows.
            etcd_pid: Some(4_000_000_000),
            ..Default::default()
        },
        ..Default::default()
    });
    let err = run_scenario(&cfg, &missing).await.unwrap_err();
    assert!(err.to_string().contains("--etcd-pid"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_reuses_a_namespace_that_has_enough() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "list-reuse");
    let common = CommonOptions {
        namespace: Some("listed".to_string()),
        keep: true,
        ..Default::default()
    };
    let first = ListOptions {
        objects: 30,
        iterations: 1,
        common: common.clone(),
        ..Default::default()
    };
    run_scenario(&cfg, &Scenario::List(first.clone()))
        .await
        .unwrap();
    let second = run_scenario(&cfg, &Scenario::List(first)).await.unwrap();
    assert_eq!(second.figures["objects_created"], 0.0);
    assert_eq!(server.count("listed"), 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_loses_no_events() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "watch");
    let scenario = Scenario::Watch(WatchOptions {
        watchers: 20,
        rate: 40,
        duration: Duration::from_millis(800),
        objects: 3,
        writers: 2,
        streams_per_connection: 8,
        grace: Duration::from_secs(5),
        protobuf: false,
        common: CommonOptions::default(),
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let writes = result.figures["writes_acked"];
    assert!(writes > 0.0);
    assert_eq!(
        result.figures["events_lost"], 0.0,
        "{:?}",
        result.error_samples
    );
    assert_eq!(result.figures["events_delivered"], writes * 20.0);
    assert_eq!(result.figures["events_expected"], writes * 20.0);
    assert_eq!(result.total_errors(), 0, "{:?}", result.error_samples);
    // 20 watchers at 8 streams per connection need 3 connections; the default is 4.
    assert_eq!(result.params["connections"], "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reads_the_server_process() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let cfg = config(&server, "memory");
    // The fake runs in this process, so this process is "the server".
    let scenario = Scenario::Memory(MemoryOptions {
        objects: 40,
        settle: Duration::from_millis(50),
        concurrency: 4,
        common: CommonOptions {
            server_pid: Some(std::process::id()),
            ..Default::default()
        },
    });
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    assert_eq!(result.row("create").unwrap().count, 40);
    assert!(result.figures["server_rss_idle_mib"] > 0.0);
    assert!(result.figures["server_rss_after_mib"] > 0.0);
    assert!(result.figures.contains_key("server_cpu_ms_per_request"));

    let without_pid = Scenario::Memory(MemoryOptions::default());
    let err = run_scenario(&cfg, &without_pid).await.unwrap_err();
    assert!(err.to_string().contains("--server-pid"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_reads_a_kubeconfig_written_after_spawn() {
    let server = FakeServer::start(FakeAuth::Token("t".to_string())).await;
    let source = server.write_kubeconfig("startup-src");
    let target = source.with_file_name("written-by-server");
    let _ = std::fs::remove_file(&target);
    let mut cfg = ClientConfig::new(&target);
    cfg.request_timeout = Duration::from_secs(5);
    // The "server" writes its kubeconfig a moment after it starts, then stays in the foreground
    // until it is stopped.
    let start_cmd = format!(
        "sleep 0.2; cp '{}' '{}'; sleep 30",
        source.display(),
        target.display()
    );
    let scenario = Scenario::Startup(StartupOptions {
        start_cmd: start_cmd.clone(),
        runs: 2,
        max_wait: Duration::from_secs(10),
        ..Default::default()
    });
    let started = std::time::Instant::now();
    let result = run_scenario(&cfg, &scenario).await.unwrap();
    let row = result.row("ready").unwrap();
    assert_eq!(row.count, 2, "{:?}", result.error_samples);
    assert_eq!(row.errors, 0);
    assert!(row.max_ms >= 200.0, "{}", row.max_ms);
    // Both `sleep 30` were stopped, not waited for.
    assert!(started.elapsed() < Duration::from_secs(25));
    assert_eq!(result.server, server.url);

    // Now the kubeconfig names a server that answers: a run would measure that server.
    let err = run_scenario(&cfg, &scenario).await.unwrap_err();
    assert!(err.to_string().contains("already answers"), "{err}");
    std::fs::remove_file(&target).unwrap();

    // A server that exits is a failed run, not a hang.
    let failing = Scenario::Startup(StartupOptions {
        start_cmd: "exit 3".to_string(),
        runs: 1,
        max_wait: Duration::from_secs(10),
        ..Default::default()
    });
    let err = run_scenario(&cfg, &failing).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("no run became ready; the server exited"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_credentials_and_dead_servers_are_clear_errors() {
    let server = FakeServer::start(FakeAuth::Token("right".to_string())).await;
    // A file of the test's own: it must outlive the server's folders.
    let path = std::env::temp_dir().join(format!("bench-rejected-{}.yaml", std::process::id()));
    let text = server
        .kubeconfig_yaml()
        .replace("token: right", "token: wrong");
    std::fs::write(&path, text).unwrap();
    let cfg = ClientConfig::new(&path);
    let scenario = Scenario::Create(CreateOptions::default());
    let err = run_scenario(&cfg, &scenario).await.unwrap_err();
    assert!(
        matches!(err, BenchError::Rejected { status: 401, .. }),
        "{err}"
    );

    let url = server.url.clone();
    drop(server);
    // Give the aborted accept loop a moment to release the port.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = run_scenario(&cfg, &scenario).await.unwrap_err();
    assert!(matches!(err, BenchError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn bounds_are_checked_before_sending() {
    let cfg = ClientConfig::new("/nonexistent/kubeconfig");
    let too_long = Scenario::Create(CreateOptions {
        duration: Some(Duration::from_secs(3600)),
        count: None,
        ..Default::default()
    });
    assert!(matches!(
        run_scenario(&cfg, &too_long).await,
        Err(BenchError::InvalidArgument(_))
    ));
    let too_many = Scenario::List(ListOptions {
        objects: MAX_OBJECTS + 1,
        ..Default::default()
    });
    assert!(matches!(
        run_scenario(&cfg, &too_many).await,
        Err(BenchError::InvalidArgument(_))
    ));
    let missing = Scenario::Create(CreateOptions::default());
    assert!(matches!(
        run_scenario(&cfg, &missing).await,
        Err(BenchError::Kubeconfig { .. })
    ));
}
