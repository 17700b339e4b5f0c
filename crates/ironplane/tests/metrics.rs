//! `/metrics` and `/metrics/slis` scraped and parsed by Prometheus's Python parser, with the
//! counters checked against the requests made; the stability level in front of every HELP text
//! that upstream's component-base annotates; request logs at `-v=3` in both log formats.

use crate::common;

use common::{Server, tests_dir};

#[test]
fn metrics_count_the_requests_made_as_upstream_labels_them() {
    let s = Server::start();
    let out = s.python(&tests_dir().join("python/metrics.py"), &[]);
    assert!(out.contains("metrics: ok"), "{out}");
}

/// The families that component-base defines upstream, whose HELP text begins with their level;
/// client_golang's `process_*` and `go_*` do not.
const LEVELLED: &[&str] = &[
    "apiserver_",
    "etcd_",
    "authentication_",
    "authorization_",
    "aggregator_",
    "apiextensions_",
    "watch_cache_",
];
const LEVELS: &[&str] = &["[ALPHA] ", "[BETA] ", "[STABLE] ", "[INTERNAL] "];

/// Each `# HELP` line of `text`: the family's name and its help.
fn help_lines(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split_once(' '))
        .collect()
}

#[test]
fn help_lines_carry_upstreams_stability_levels() {
    let s = Server::start();
    s.kubectl(&["get", "configmaps", "-n", "kube-system"]);
    s.kubectl(&["get", "--raw", "/readyz"]);
    let text = s.kubectl(&["get", "--raw", "/metrics"]);
    let helps = help_lines(&text);
    let mut levelled = 0;
    for (name, help) in &helps {
        if LEVELLED.iter().any(|p| name.starts_with(p)) {
            assert!(
                LEVELS.iter().any(|l| help.starts_with(l)),
                "{name} has no stability level: {help}"
            );
            levelled += 1;
        }
        if name.starts_with("process_") || name.starts_with("go_") {
            assert!(!help.starts_with('['), "{name}: {help}");
        }
    }
    // Families that every server has written by now, with upstream's exact text.
    for line in [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n",
        "# HELP authentication_attempts [ALPHA] Counter of authenticated attempts.\n",
        "# HELP etcd_requests_total [ALPHA] Etcd request counts for each operation and object type.\n",
        "# HELP apiserver_storage_objects [STABLE] (Deprecated since 1.34.0) [DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.\n",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(levelled >= 10, "only {levelled} levelled families:\n{text}");
    assert!(
        helps.iter().any(|(n, _)| n.starts_with("process_")),
        "{text}"
    );

    let slis = s.kubectl(&["get", "--raw", "/metrics/slis"]);
    for line in [
        "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n",
        "# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n",
        "# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.\n",
    ] {
        assert!(slis.contains(line), "{line} missing from\n{slis}");
    }
}

/// The server's log lines that are JSON objects with `msg` "HTTP".
fn request_lines(s: &Server) -> Vec<serde_json::Value> {
    s.log_lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["msg"] == "HTTP")
        .collect()
}

#[test]
fn request_lines_are_logged_from_verbosity_three_in_json() {
    let s = Server::start_with(&["-v", "3", "--logging-format", "json"]);
    s.kubectl(&["get", "configmaps", "-n", "kube-system"]);
    common::wait_until("the request line is logged", 10, || {
        request_lines(&s).iter().any(|l| {
            l["verb"] == "LIST"
                && l["URI"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("/api/v1/namespaces/kube-system/configmaps"))
        })
    });
    let line = request_lines(&s)
        .into_iter()
        .find(|l| l["verb"] == "LIST")
        .expect("a LIST line");
    assert_eq!(line["v"], 3, "{line}");
    assert_eq!(line["resp"], 200, "{line}");
    assert!(line["ts"].as_f64().is_some_and(|t| t > 1.6e12), "{line}");
    assert!(
        line["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubectl")),
        "{line}"
    );
    assert!(
        line["srcIP"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{line}"
    );
    assert!(
        line["caller"].as_str().is_some_and(|c| c.contains(".rs:")),
        "{line}"
    );
    // Every log line is JSON in this format; only the start-up banner (where the server is and
    // how to reach it with kubectl) is plain text.
    let banner = [
        "Ironplane is serving on ",
        "To use kubectl with it:",
        "  export KUBECONFIG=",
    ];
    let text: Vec<String> = s
        .log_lines()
        .into_iter()
        .filter(|l| !banner.iter().any(|b| l.starts_with(b)))
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_err())
        .collect();
    assert!(text.is_empty(), "{text:#?}");
}

#[test]
fn request_lines_stay_off_below_verbosity_three_and_text_is_klogs() {
    let s = Server::start_with(&["-v", "2"]);
    s.kubectl(&["get", "configmaps", "-n", "kube-system"]);
    let lines = s.log_lines();
    assert!(!lines.iter().any(|l| l.contains("\"HTTP\"")), "{lines:#?}");
    // klog's header: severity, date, time, pid, caller.
    let klog = lines
        .iter()
        .find(|l| l.starts_with('I') && l.contains("] \""))
        .expect("an info line");
    let header = klog.split(']').next().unwrap_or("");
    let fields: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{klog}");
    assert_eq!(fields[0].len(), 5, "{klog}");
    assert!(fields[2].parse::<u32>().is_ok(), "{klog}");
    assert!(fields[3].contains(".rs:"), "{klog}");
}

#[test]
fn metrics_are_authorized_as_the_non_resource_url_they_are() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "tok-monitor,prometheus,u1,\"system:monitoring\"\ntok-nobody,nobody,u2\n",
    )
    .expect("the token file is written");
    let s = Server::start_with(&["--token-auth-file", tokens.to_str().expect("a UTF-8 path")]);
    // The bootstrap policy's `system:monitoring` role lets its group read both documents.
    for path in ["/metrics", "/metrics/slis"] {
        let out = s.kubectl_with_token("tok-monitor", &["get", "--raw", path]);
        assert!(out.status.success(), "{path}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("# TYPE "),
            "{path}"
        );
    }
    // Anyone else is refused with upstream's non-resource message.
    let out = s.kubectl_with_token("tok-nobody", &["get", "--raw", "/metrics"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("forbidden: User \"nobody\" cannot get path \"/metrics\""),
        "{err}"
    );
}
