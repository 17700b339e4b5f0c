//! `/metrics` and `/metrics/slis` scraped and parsed by Prometheus's Python parser, with the
//! counters checked against the requests made; request logs at `-v=3` in both log formats.

mod common;

use common::{Server, tests_dir};

#[test]
fn metrics_count_the_requests_made_as_upstream_labels_them() {
    let s = Server::start();
    let out = s.python(&tests_dir().join("python/metrics.py"), &[]);
    assert!(out.contains("metrics: ok"), "{out}");
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
