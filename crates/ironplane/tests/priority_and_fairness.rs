//! API Priority and Fairness end to end: the bootstrap configuration written at start, a
//! PriorityLevelConfiguration and FlowSchema of our own for a flooding user, that user flooding
//! from many threads while another user's requests keep being answered, 429 with `Retry-After`
//! and upstream's text for the flooder, the `X-Kubernetes-PF-*` headers naming the matched
//! objects by UID, the `Dangling` condition written back, the dump endpoints (authorized as
//! non-resource URLs), the `apiserver_flowcontrol_*` metrics, and a restart that rewrites no
//! FlowSchema.

use crate::common;

use common::Server;
use serde_json::Value;

const TOKENS: &str = "flooder-token,flooder,uid-flooder\ncalm-token,calm,uid-calm\n";

/// A level of one seat that borrows none, with one queue of one: the flood spills at once.
const FLOOD_CONFIG: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: flood
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing:
        queues: 1
        handSize: 1
        queueLengthLimit: 1
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: flood
spec:
  priorityLevelConfiguration:
    name: flood
  matchingPrecedence: 500
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: User
      user:
        name: flooder
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
      clusterScope: true
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: nowhere
spec:
  priorityLevelConfiguration:
    name: missing
  matchingPrecedence: 600
  rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: apf-test-view
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: flooder
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: calm
"#;

/// Floods from 40 threads of the flooder (25 requests each, one keep-alive connection each)
/// while one thread of the calm user asks 30 times, one after another; prints what each got.
const FLOOD: &str = r#"
import http.client, json, ssl, sys, threading, urllib.parse
url = urllib.parse.urlparse(sys.argv[1])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
path = "/api/v1/namespaces/default/configmaps"
results = {"flooder": [], "calm": []}
lock = threading.Lock()
def run(who, n):
    c = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=60)
    for _ in range(n):
        c.request("GET", path, headers={"Authorization": "Bearer %s-token" % who})
        r = c.getresponse()
        body = r.read()
        row = {"status": r.status,
               "retry_after": r.getheader("Retry-After"),
               "content_type": r.getheader("Content-Type"),
               "fs": r.getheader("X-Kubernetes-PF-FlowSchema-UID"),
               "pl": r.getheader("X-Kubernetes-PF-PriorityLevel-UID"),
               "body": body.decode() if r.status != 200 else ""}
        with lock:
            results[who].append(row)
threads = [threading.Thread(target=run, args=("flooder", 25)) for _ in range(40)]
threads.append(threading.Thread(target=run, args=("calm", 30)))
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"#;

fn uid(server: &Server, resource: &str, name: &str) -> String {
    server.kubectl(&["get", resource, name, "-o", "jsonpath={.metadata.uid}"])
}

#[test]
fn a_flooding_flow_is_limited_while_others_are_served() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, TOKENS).unwrap();
    // 80 seats in all, shared by the levels' nominal shares (the flood level's one share of
    // 246 gives it one seat). The sum also bounds connections yet to send a request, so it is
    // kept above the flood's 41 connections.
    let server = Server::start_with(&[
        "--token-auth-file",
        file.to_str().unwrap(),
        "--max-requests-inflight",
        "60",
        "--max-mutating-requests-inflight",
        "20",
    ]);

    // Readiness waits for both of flow control's hooks: the stored configuration in effect,
    // and the bootstrap objects written.
    let readyz = server.kubectl(&["get", "--raw", "/readyz?verbose"]);
    for hook in [
        "[+]poststarthook/priority-and-fairness-config-consumer ok",
        "[+]poststarthook/priority-and-fairness-config-producer ok",
    ] {
        assert!(readyz.lines().any(|l| l == hook), "{hook} in {readyz}");
    }

    // The bootstrap configuration is there once the server is ready, annotated as kept up to
    // date, written by upstream's field manager.
    let names = |resource: &str| {
        server.kubectl(&["get", resource, "-o", "jsonpath={.items[*].metadata.name}"])
    };
    let levels = names("prioritylevelconfigurations");
    for name in [
        "catch-all",
        "exempt",
        "global-default",
        "leader-election",
        "node-high",
        "system",
        "workload-high",
        "workload-low",
    ] {
        assert!(levels.split(' ').any(|n| n == name), "{name} in {levels}");
    }
    let schemas = names("flowschemas");
    for name in [
        "catch-all",
        "exempt",
        "global-default",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-system-service-accounts",
        "probes",
        "service-accounts",
        "system-leader-election",
        "system-node-high",
        "system-nodes",
    ] {
        assert!(schemas.split(' ').any(|n| n == name), "{name} in {schemas}");
    }
    let probes: Value = serde_json::from_str(&server.kubectl(&[
        "get",
        "flowschema",
        "probes",
        "-o",
        "json",
        "--show-managed-fields",
    ]))
    .unwrap();
    assert_eq!(
        probes["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
    // The producer wrote the object; the consumer applied its Dangling condition to /status.
    let managers: Vec<(String, String, String)> = probes["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (field("manager"), field("operation"), field("subresource"))
        })
        .collect();
    for want in [
        ("api-priority-and-fairness-config-producer-v1", "Update", ""),
        (
            "api-priority-and-fairness-config-consumer-v1",
            "Apply",
            "status",
        ),
    ] {
        assert!(
            managers
                .iter()
                .any(|(m, o, s)| (m.as_str(), o.as_str(), s.as_str()) == want),
            "{managers:?}"
        );
    }

    // Something to list: fifty ConfigMaps of 8 KiB make each flood request take a while.
    let mut list = String::from("apiVersion: v1\nkind: List\nitems:\n");
    let data = "x".repeat(8192);
    for i in 0..50 {
        list.push_str(&format!(
            "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i}\n    namespace: default\n  data:\n    d: {data}\n"
        ));
    }
    server.kubectl_stdin(&["apply", "-f", "-"], &list);
    server.kubectl_stdin(&["apply", "-f", "-"], FLOOD_CONFIG);

    // The controller writes each FlowSchema's Dangling condition back.
    let condition = |name: &str| {
        server.kubectl(&[
            "get",
            "flowschema",
            name,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Dangling\")].status}/{.status.conditions[?(@.type==\"Dangling\")].reason}",
        ])
    };
    common::wait_until("the Dangling conditions", 30, || {
        condition("flood") == "False/Found" && condition("nowhere") == "True/NotFound"
    });
    let flood_fs = uid(&server, "flowschema", "flood");
    let flood_pl = uid(&server, "prioritylevelconfiguration", "flood");
    let global_fs = uid(&server, "flowschema", "global-default");
    let global_pl = uid(&server, "prioritylevelconfiguration", "global-default");
    assert!(!flood_fs.is_empty() && !flood_pl.is_empty());

    let out = std::process::Command::new("python3")
        .args(["-c", FLOOD, &server.url])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = |who: &str| results[who].as_array().unwrap().clone();

    // The calm user is always answered, through global-default.
    let calm = rows("calm");
    assert_eq!(calm.len(), 30);
    for row in &calm {
        assert_eq!(row["status"], 200, "{row}");
        assert_eq!(row["fs"], global_fs.as_str());
        assert_eq!(row["pl"], global_pl.as_str());
    }
    // The flooder gets some answers and many 429s, all naming its schema and level.
    let flood = rows("flooder");
    assert_eq!(
        flood.len(),
        1000,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ok = flood.iter().filter(|r| r["status"] == 200).count();
    let rejected: Vec<&Value> = flood.iter().filter(|r| r["status"] == 429).collect();
    assert_eq!(ok + rejected.len(), 1000, "only 200s and 429s");
    eprintln!("flood: {ok} served, {} rejected", rejected.len());
    assert!(ok > 0, "some flood requests are served");
    assert!(!rejected.is_empty(), "the flood is limited");
    for row in flood.iter() {
        assert_eq!(row["fs"], flood_fs.as_str(), "{row}");
        assert_eq!(row["pl"], flood_pl.as_str(), "{row}");
    }
    let r = rejected[0];
    // The level's first drops ask for 1 s; later ones for more as the flood goes on, never
    // more than 32 s (upstream's dropped-requests tracker; its rule is unit-tested).
    assert_eq!(r["retry_after"], "1");
    let waits: Vec<u64> = rejected
        .iter()
        .map(|r| r["retry_after"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(waits.iter().all(|w| (1..=32).contains(w)), "{waits:?}");
    eprintln!("Retry-After of the 429s: {waits:?}");
    assert_eq!(r["content_type"], "text/plain; charset=utf-8");
    assert_eq!(r["body"], "Too many requests, please try again later.\n");

    // LIST estimates read the watch cache's counts and sizes, which /metrics shows too: the 50
    // ConfigMaps of 8 KiB at least.
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    let size: f64 = metrics
        .lines()
        .find(|l| {
            l.starts_with("apiserver_resource_size_estimate_bytes{")
                && l.contains("resource=\"configmaps\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no configmaps size estimate in /metrics"));
    assert!(size >= 50.0 * 8192.0, "{size}");

    // The dumps, for those who may read them.
    let dump = server.kubectl(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_priority_levels",
    ]);
    let mut lines = dump.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').map(str::trim).collect();
    assert_eq!(
        header,
        [
            "PriorityLevelName",
            "ActiveQueues",
            "IsIdle",
            "IsQuiescing",
            "WaitingRequests",
            "ExecutingRequests",
            "DispatchedRequests",
            "RejectedRequests",
            "TimedoutRequests",
            "CancelledRequests"
        ]
    );
    let flood_row: Vec<String> = lines
        .map(|l| {
            l.split(',')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .find(|cells| cells[0] == "flood")
        .unwrap_or_else(|| panic!("{dump}"));
    assert_eq!(flood_row[6].parse::<usize>().unwrap(), ok, "{dump}");
    assert_eq!(
        flood_row[7].parse::<usize>().unwrap(),
        rejected.len(),
        "{dump}"
    );
    let queues = server.kubectl(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_queues",
    ]);
    assert!(queues.starts_with("PriorityLevelName, Index,"), "{queues}");
    assert!(
        queues
            .lines()
            .any(|l| l.starts_with("flood,") && l.split(',').nth(1).map(str::trim) == Some("0")),
        "{queues}"
    );
    let requests = server.kubectl(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1",
    ]);
    assert!(
        requests.starts_with("PriorityLevelName, FlowSchemaName, QueueIndex,"),
        "{requests}"
    );
    assert!(
        requests
            .lines()
            .next()
            .unwrap()
            .ends_with("Resource, SubResource"),
        "{requests}"
    );
    // The calm user has no grant on /debug: a 403 as for any non-resource URL.
    let denied = server.kubectl_with_token(
        "calm-token",
        &[
            "get",
            "--raw",
            "/debug/api_priority_and_fairness/dump_queues",
        ],
    );
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("Forbidden"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );

    // The metrics count what happened.
    let metrics = server.kubectl(&["get", "--raw", "/metrics"]);
    let sample = |prefix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(
        sample(
            "apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"flood\",priority_level=\"flood\"}"
        ) as usize,
        ok,
        "{metrics}"
    );
    assert_eq!(
        sample(
            "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"flood\",priority_level=\"flood\","
        ) as usize,
        rejected.len()
    );
    assert_eq!(
        sample("apiserver_flowcontrol_nominal_limit_seats{priority_level=\"flood\"}"),
        1.0
    );
    assert!(
        metrics.contains("# TYPE apiserver_flowcontrol_request_wait_duration_seconds histogram")
    );
}

#[test]
fn off_it_serves_no_dumps_and_on_it_needs_a_positive_limit() {
    let server = Server::start_with(&["--enable-priority-and-fairness=false"]);
    // No flow-control headers, no dumps.
    let out = server.kubectl_output(&[
        "get",
        "--raw",
        "/debug/api_priority_and_fairness/dump_priority_levels",
    ]);
    assert!(!out.status.success());
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args([
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--secure-port=0",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("MaxRequestsInFlight=0 and MaxMutatingRequestsInFlight=0; they must add up to something positive"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Each FlowSchema's name, resourceVersion and `Dangling` condition status.
fn flow_schemas(server: &Server) -> Vec<(String, String, String)> {
    let list = server
        .get_json("", "flowschemas")
        .expect("FlowSchemas are served");
    let mut rows: Vec<(String, String, String)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|fs| {
            let dangling = fs["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Dangling"))
                .and_then(|c| c["status"].as_str())
                .unwrap_or("")
                .to_string();
            let meta = |k: &str| fs["metadata"][k].as_str().unwrap_or("").to_string();
            (meta("name"), meta("resourceVersion"), dangling)
        })
        .collect();
    rows.sort();
    rows
}

/// A restart writes no FlowSchema: the configuration is read once both kinds are listed, so no
/// FlowSchema is marked dangling while the PriorityLevelConfigurations are still being listed
/// (it was, and then found again, at many restarts: two status writes per FlowSchema). The
/// bootstrap FlowSchemas all exist once the server is ready (the producer's hook gates it).
#[test]
fn a_restart_writes_no_flow_schema() {
    let server = Server::start();
    common::wait_until("every FlowSchema's Dangling condition False", 30, || {
        let rows = flow_schemas(&server);
        !rows.is_empty() && rows.iter().all(|(_, _, d)| d == "False")
    });
    let before = flow_schemas(&server);
    let server = Server::start_in(server.stop());
    // The consumer writes conditions in turn: once a FlowSchema made now has its condition,
    // whatever the restart's earlier turns wrote is written.
    server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {name: after-restart}\n\
         spec:\n  priorityLevelConfiguration: {name: global-default}\n  matchingPrecedence: 9000\n",
    );
    common::wait_until("the new FlowSchema's Dangling condition", 30, || {
        flow_schemas(&server)
            .iter()
            .any(|(name, _, d)| name == "after-restart" && d == "False")
    });
    let after: Vec<_> = flow_schemas(&server)
        .into_iter()
        .filter(|(name, _, _)| name != "after-restart")
        .collect();
    assert_eq!(before, after);
}
