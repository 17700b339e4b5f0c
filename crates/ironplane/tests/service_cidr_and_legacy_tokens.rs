//! Two of kube-controller-manager's controllers Ironplane runs, against the real binary with
//! kubectl: the ServiceCIDR controller (finalizer and `Ready` condition; a deleted ServiceCIDR
//! stays while an allocated cluster IP would be left outside every range), with the API
//! server's own controller of the default ServiceCIDR (created again when it is gone), and the
//! legacy
//! service account token cleaner (unused auto-generated token Secrets labelled invalid, refused
//! by authentication, then deleted); `--controllers` turns each off.

use crate::common;

use std::time::{Duration, Instant};

use common::{Server, wait_until};
use serde_json::{Value, json};

const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";

fn service_cidr(name: &str, cidr: &str) -> String {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": name},
        "spec": {"cidrs": [cidr]},
    })
    .to_string()
}

/// An object with its managed fields, which `kubectl get` leaves out unless asked.
fn get_with_managers(s: &Server, ns: &str, what: &str) -> Value {
    let out = s.kubectl(&["-n", ns, "get", what, "-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&out).unwrap()
}

fn ready(cidr: &Value) -> Option<Value> {
    cidr.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
}

fn has_finalizer(cidr: &Value) -> bool {
    cidr.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

fn terminating(cidr: &Option<Value>) -> bool {
    cidr.as_ref().and_then(ready).is_some_and(|c| {
        c["status"] == "False"
            && c["reason"] == "Terminating"
            && c["message"]
                == "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
    })
}

#[test]
fn a_new_servicecidr_becomes_ready_with_the_finalizer() {
    let s = Server::start();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("extra", "10.96.0.0/28"),
    );
    wait_until("the ServiceCIDR to be ready", 10, || {
        s.get_json("", "servicecidr/extra")
            .is_some_and(|c| has_finalizer(&c) && ready(&c).is_some_and(|r| r["status"] == "True"))
    });
    let cidr = get_with_managers(&s, "", "servicecidr/extra");
    let condition = ready(&cidr).unwrap();
    assert_eq!(condition["message"], "Kubernetes Service CIDR is ready");
    assert_eq!(condition["reason"], "", "{condition}");
    let managers: Vec<(String, String, String)> = cidr["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("manager"), s("operation"), s("subresource"))
        })
        .collect();
    assert!(
        managers.contains(&(
            "service-cidr-controller".into(),
            "Apply".into(),
            "status".into()
        )),
        "{managers:?}"
    );
    assert!(
        managers.contains(&(
            "kube-controller-manager".into(),
            "Update".into(),
            String::new()
        )),
        "{managers:?}"
    );
    // The API server's default ServiceCIDR gets the finalizer too, and the controller's
    // message, without the two writing it back and forth.
    wait_until("the default ServiceCIDR's finalizer", 10, || {
        s.get_json("", "servicecidr/kubernetes").is_some_and(|c| {
            has_finalizer(&c)
                && ready(&c).is_some_and(|r| r["message"] == "Kubernetes Service CIDR is ready")
        })
    });
    let rv = |name: &str| {
        s.get_json("", &format!("servicecidr/{name}")).unwrap()["metadata"]["resourceVersion"]
            .clone()
    };
    let (before, extra_before) = (rv("kubernetes"), rv("extra"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        rv("kubernetes"),
        before,
        "the default ServiceCIDR is left alone"
    );
    assert_eq!(rv("extra"), extra_before);
}

/// The default ServiceCIDR `kubernetes`, deleted with kubectl, keeps its finalizer, with
/// `Ready=False` and reason `Terminating`, while a cluster IP allocated in it has no other
/// ServiceCIDR: first the `kubernetes` Service's 10.0.0.1 and a Service's 10.0.0.200, then,
/// once another ServiceCIDR covers 10.0.0.1, the Service's alone. The API server's controller
/// leaves it alone meanwhile. Once the Service releases its address it goes, and the API
/// server's controller creates it again at its next periodic sync (every 10 s), Ready.
#[test]
fn a_deleted_default_servicecidr_stays_while_cluster_ips_need_it_then_comes_back() {
    // The allocator's range is the default ServiceCIDR's: 10.0.0.0/24.
    let s = Server::start();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.0.0.200", "ports": [{"port": 80}]},
        })
        .to_string(),
    );
    assert!(s.get_json("", "ipaddress/10.0.0.200").is_some());
    wait_until("the default ServiceCIDR's finalizer", 10, || {
        s.get_json("", "servicecidr/kubernetes")
            .is_some_and(|c| has_finalizer(&c))
    });
    let default_uid = s.get_json("", "servicecidr/kubernetes").unwrap()["metadata"]["uid"].clone();

    // Held past the grace period, saying why, and past a periodic sync of the API server's
    // controller, which leaves a ServiceCIDR being deleted alone.
    let deleted = Instant::now();
    s.kubectl(&["delete", "servicecidr", "kubernetes", "--wait=false"]);
    wait_until("the default ServiceCIDR to be terminating", 10, || {
        terminating(&s.get_json("", "servicecidr/kubernetes"))
    });
    std::thread::sleep(Duration::from_secs(11).saturating_sub(deleted.elapsed()));
    let held = s.get_json("", "servicecidr/kubernetes");
    assert!(terminating(&held), "still held by 10.0.0.1 and 10.0.0.200");
    assert_eq!(held.unwrap()["metadata"]["uid"], default_uid);
    // Another range covering 10.0.0.1 leaves 10.0.0.200 holding it.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("lower", "10.0.0.0/25"),
    );
    wait_until("lower's finalizer", 10, || {
        s.get_json("", "servicecidr/lower")
            .is_some_and(|c| has_finalizer(&c))
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        terminating(&s.get_json("", "servicecidr/kubernetes")),
        "still held by 10.0.0.200"
    );

    // The Service releases its address: the default ServiceCIDR goes, and comes back.
    s.kubectl(&["delete", "service", "web"]);
    let mut gone_at = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    let back = loop {
        assert!(
            Instant::now() < deadline,
            "the default ServiceCIDR never came back"
        );
        match s.get_json("", "servicecidr/kubernetes") {
            None => {
                gone_at.get_or_insert_with(Instant::now);
            }
            Some(c) if c["metadata"]["uid"] != default_uid => break c,
            Some(_) => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let away = gone_at.expect("seen gone before it came back").elapsed();
    assert!(
        away <= Duration::from_secs(11),
        "created again within a sync interval, not {away:?}"
    );
    assert_eq!(back["spec"]["cidrs"], json!(["10.0.0.0/24"]));
    wait_until("the new default ServiceCIDR to be ready", 10, || {
        s.get_json("", "servicecidr/kubernetes")
            .is_some_and(|c| has_finalizer(&c) && ready(&c).is_some_and(|r| r["status"] == "True"))
    });
    let created = get_with_managers(&s, "", "servicecidr/kubernetes");
    assert!(
        created["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "kube-apiserver"
                && m["operation"] == "Update"
                && m["fieldsV1"]["f:spec"]["f:cidrs"].is_object()),
        "{created}"
    );
}

/// A ServiceCIDR inside another goes once its grace period is over, whatever it holds.
#[test]
fn a_servicecidr_inside_another_goes_after_the_grace_period() {
    let s = Server::start();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("upper", "10.0.0.128/25"),
    );
    wait_until("upper's finalizer", 10, || {
        s.get_json("", "servicecidr/upper")
            .is_some_and(|c| has_finalizer(&c))
    });
    let deleted = Instant::now();
    s.kubectl(&["delete", "servicecidr", "upper", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(5));
    let held = s.get_json("", "servicecidr/upper");
    assert!(
        held.as_ref()
            .is_some_and(|c| !terminating(&Some(c.clone()))),
        "kept through the grace period, not blocked: {held:?}"
    );
    wait_until("upper to go", 15, || {
        s.get_json("", "servicecidr/upper").is_none()
    });
    // deletionTimestamp has whole seconds: the grace period counts from up to a second before
    // the deletion.
    let waited = deleted.elapsed();
    assert!(waited >= Duration::from_secs(9), "gone after {waited:?}");
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

fn label(v: &Option<Value>, key: &str) -> Option<String> {
    v.as_ref()?
        .pointer("/metadata/labels")?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

const INVALID_SINCE: &str = "kubernetes.io/legacy-token-invalid-since";
const LAST_USED: &str = "kubernetes.io/legacy-token-last-used";

/// Legacy token Secrets of the account `robot` in `default`, filled in by the tokens
/// controller; their tokens, by name.
fn legacy_tokens(s: &Server, names: &[&str]) -> Vec<String> {
    s.kubectl(&["create", "serviceaccount", "robot"]);
    for name in names {
        s.kubectl_stdin(
            &["create", "-f", "-"],
            &json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"kubernetes.io/service-account.name": "robot"}},
                "type": "kubernetes.io/service-account-token",
            })
            .to_string(),
        );
    }
    names
        .iter()
        .map(|name| {
            let mut token = None;
            wait_until("the token filled in", 10, || {
                token = s
                    .get_json("default", &format!("secret/{name}"))
                    .and_then(|v| v["data"]["token"].as_str().map(str::to_string));
                token.is_some()
            });
            let raw =
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, token.unwrap())
                    .unwrap();
            String::from_utf8(raw).unwrap()
        })
        .collect()
}

/// The account lists its Secrets, as the tokens controller of old did: they are auto-generated.
fn list_secrets(s: &Server, names: &[&str]) {
    let refs: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
    s.kubectl(&[
        "patch",
        "serviceaccount",
        "robot",
        "-p",
        &json!({"secrets": refs}).to_string(),
    ]);
}

/// Tracking began long ago (the API server writes the day it started, in a post-start hook).
fn backdate_tracking(s: &Server) {
    wait_until("the legacy token tracking ConfigMap", 10, || {
        s.get_json(
            "kube-system",
            "configmap/kube-apiserver-legacy-service-account-token-tracking",
        )
        .is_some()
    });
    s.kubectl(&[
        "patch",
        "configmap",
        "-n",
        "kube-system",
        "kube-apiserver-legacy-service-account-token-tracking",
        "-p",
        r#"{"data":{"since":"2020-01-01"}}"#,
    ]);
}

#[test]
fn unused_legacy_tokens_are_invalidated_refused_then_deleted() {
    let s = Server::start_with(&["--legacy-service-account-token-clean-up-period=2s"]);
    wait_until("the default ServiceAccount", 10, || {
        s.get_json("default", "serviceaccount/default").is_some()
    });
    let tokens = legacy_tokens(&s, &["unused-token", "mounted-token", "used-token"]);
    // Used today (while still a manual secret, so the cleaner cannot touch it yet).
    let who = s.whoami(&tokens[2]);
    assert!(who.user.is_ok(), "{}", who.stderr);
    wait_until("the last-used label", 10, || {
        label(&s.get_json("default", "secret/used-token"), LAST_USED) == Some(today())
    });
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "mounts", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "t", "secret": {"secretName": "mounted-token"}}]},
        })
        .to_string(),
    );
    backdate_tracking(&s);
    list_secrets(&s, &["unused-token", "mounted-token", "used-token"]);

    wait_until("the unused token marked invalid", 15, || {
        label(&s.get_json("default", "secret/unused-token"), INVALID_SINCE) == Some(today())
    });
    let marked = get_with_managers(&s, "default", "secret/unused-token");
    assert!(
        marked["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "kube-controller-manager" && m["operation"] == "Update"),
        "{marked}"
    );
    // Refused from now on.
    wait_until("the invalidated token refused", 10, || {
        s.whoami(&tokens[0]).user.is_err()
    });
    let refused = s.whoami(&tokens[0]);
    assert!(
        refused.stderr.contains("Unauthorized"),
        "{}",
        refused.stderr
    );
    // Another sync or two: the mounted and the used tokens are left alone.
    std::thread::sleep(Duration::from_secs(5));
    for name in ["mounted-token", "used-token"] {
        let secret = s.get_json("default", &format!("secret/{name}"));
        assert_eq!(label(&secret, INVALID_SINCE), None, "{name}");
    }
    assert!(s.whoami(&tokens[1]).user.is_ok());
    // The refused use counted as a use today; the invalid mark is a day old at most, and days
    // are what upstream compares. Make both older than the period, as tomorrow would.
    wait_until("the refused use recorded", 10, || {
        label(&s.get_json("default", "secret/unused-token"), LAST_USED) == Some(today())
    });
    s.kubectl(&[
        "label",
        "secret",
        "unused-token",
        "--overwrite",
        &format!("{INVALID_SINCE}=2020-01-02"),
        &format!("{LAST_USED}=2020-01-02"),
    ]);
    wait_until("the invalid token deleted", 10, || {
        s.get_json("default", "secret/unused-token").is_none()
    });
    assert!(s.get_json("default", "secret/mounted-token").is_some());
    assert!(s.get_json("default", "secret/used-token").is_some());
}

/// `--controllers=*,-service-cidr-controller`: no finalizer or condition on a new ServiceCIDR,
/// while the cleaner, still on, acts in the same time; the API server alone marks its default
/// ServiceCIDR ready, as upstream's does, and creates it again when it is deleted.
#[test]
fn controllers_turns_the_service_cidr_controller_off() {
    let s = Server::start_with(&[
        "--controllers=*,-service-cidr-controller",
        "--legacy-service-account-token-clean-up-period=1s",
    ]);
    wait_until("the default ServiceAccount", 10, || {
        s.get_json("default", "serviceaccount/default").is_some()
    });
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("extra", "10.96.0.0/28"),
    );
    legacy_tokens(&s, &["unused-token"]);
    backdate_tracking(&s);
    list_secrets(&s, &["unused-token"]);
    wait_until("the cleaner, still on, to mark the token", 15, || {
        label(&s.get_json("default", "secret/unused-token"), INVALID_SINCE).is_some()
    });
    let cidr = s.get_json("", "servicecidr/extra").unwrap();
    assert!(!has_finalizer(&cidr), "{cidr}");
    assert_eq!(ready(&cidr), None);
    let default = get_with_managers(&s, "", "servicecidr/kubernetes");
    assert!(!has_finalizer(&default), "{default}");
    assert_eq!(
        ready(&default).unwrap()["message"],
        "Kubernetes default Service CIDR is ready"
    );
    assert!(
        default["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "kubernetes-service-cidr-controller"
                && m["operation"] == "Apply"
                && m["subresource"] == "status"),
        "{default}"
    );
    // Without the finalizer, a deleted default ServiceCIDR goes at once; the API server's
    // controller creates it again, Ready, at its next periodic sync (every 10 s).
    let deleted = Instant::now();
    s.kubectl(&["delete", "servicecidr", "kubernetes"]);
    let old_uid = default["metadata"]["uid"].clone();
    wait_until("the default ServiceCIDR to come back", 12, || {
        s.get_json("", "servicecidr/kubernetes")
            .is_some_and(|c| c["metadata"]["uid"] != old_uid)
    });
    let away = deleted.elapsed();
    assert!(away <= Duration::from_secs(11), "back after {away:?}");
    wait_until("the new default ServiceCIDR to be ready", 5, || {
        s.get_json("", "servicecidr/kubernetes").is_some_and(|c| {
            ready(&c).is_some_and(|r| {
                r["status"] == "True" && r["message"] == "Kubernetes default Service CIDR is ready"
            })
        })
    });
    let back = get_with_managers(&s, "", "servicecidr/kubernetes");
    assert!(!has_finalizer(&back), "{back}");
    assert_eq!(back["spec"]["cidrs"], json!(["10.0.0.0/24"]));

    // A default ServiceCIDR whose ranges are not the flag's (made again right after the sync
    // that brought it back, so well before the next) is left alone and reported as upstream
    // reports it: one Warning Event in `default`, recorded by the API server.
    s.kubectl(&["delete", "servicecidr", "kubernetes"]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("kubernetes", "10.96.0.0/28"),
    );
    let inconsistent = || {
        let events = get_with_managers(&s, "default", "events");
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["reason"] == "KubernetesDefaultServiceCIDRInconsistent")
            .cloned()
    };
    wait_until("the Inconsistent Event", 12, || inconsistent().is_some());
    let event = inconsistent().unwrap();
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(
        event["message"],
        "The default ServiceCIDR [10.96.0.0/28] does not match the controller flag configurations [10.0.0.0/24]"
    );
    assert_eq!(
        event["source"],
        json!({"component": "kubernetes-service-cidr-controller"})
    );
    assert_eq!(
        event["reportingComponent"],
        "kubernetes-service-cidr-controller"
    );
    assert_eq!(event["involvedObject"]["kind"], "ServiceCIDR");
    assert_eq!(event["involvedObject"]["name"], "kubernetes");
    assert_eq!(event["count"], 1);
    assert_eq!(
        event["metadata"]["managedFields"][0]["manager"],
        "kube-apiserver"
    );
    let kept = s.get_json("", "servicecidr/kubernetes").unwrap();
    assert_eq!(kept["spec"]["cidrs"], json!(["10.96.0.0/28"]));
    assert_eq!(ready(&kept), None, "{kept}");
}

/// `--controllers=*,-legacy-serviceaccount-token-cleaner-controller`: an unused auto-generated
/// token stays unmarked through several periods, while the ServiceCIDR controller, still on,
/// works.
#[test]
fn controllers_turns_the_legacy_token_cleaner_off() {
    let s = Server::start_with(&[
        "--controllers=*,-legacy-serviceaccount-token-cleaner-controller",
        "--legacy-service-account-token-clean-up-period=1s",
    ]);
    wait_until("the default ServiceAccount", 10, || {
        s.get_json("default", "serviceaccount/default").is_some()
    });
    legacy_tokens(&s, &["unused-token"]);
    backdate_tracking(&s);
    list_secrets(&s, &["unused-token"]);
    let listed = Instant::now();
    s.kubectl_stdin(
        &["create", "-f", "-"],
        &service_cidr("extra", "10.96.0.0/28"),
    );
    wait_until("the ServiceCIDR controller, still on, to act", 10, || {
        s.get_json("", "servicecidr/extra")
            .is_some_and(|c| has_finalizer(&c) && ready(&c).is_some())
    });
    // The cleaner, were it on, would have marked the token within two periods (a second each);
    // absence can only be waited for.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(listed.elapsed()));
    let secret = s.get_json("default", "secret/unused-token");
    assert!(secret.is_some());
    assert_eq!(label(&secret, INVALID_SINCE), None);
}

#[test]
fn a_zero_clean_up_period_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .arg("--legacy-service-account-token-clean-up-period=0s")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "failed to init the legacy service account token cleaner: invalid CleanUpPeriod: 0s"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
