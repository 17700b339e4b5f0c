//! ResourceQuota admission and the quota controller against the real binary, driven by kubectl:
//! a quota on `count/configmaps` refuses the object over the limit with upstream's message
//! (plugin/pkg/admission/resourcequota: "exceeded quota: %s, requested: %s, used: %s,
//! limited: %s"), `status.used` follows creates and deletions, concurrent creates never exceed
//! the quota, and a quota on `requests.cpu` asks pods to state it and counts what they ask.
//! As upstream's, a `count/configmaps` quota counts the namespace's `kube-root-ca.crt` too.
//! DRA claims count under the extended resource names their DeviceClass gives them, less what
//! the Pod they were made for already counts.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ROOT_CA, Server};
use serde_json::Value;

fn quota(s: &Server, ns: &str, name: &str) -> Value {
    serde_json::from_str(&s.kubectl(&["-n", ns, "get", "resourcequota", name, "-o", "json"]))
        .expect("a quota as JSON")
}

/// Waits until the quota's status says `want` for `resource` (the controller's first count).
fn wait_used(s: &Server, ns: &str, name: &str, resource: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let q = quota(s, ns, name);
        if q["status"]["used"][resource] == want {
            return q;
        }
        assert!(
            Instant::now() < deadline,
            "status.used.{resource} of {ns}/{name} never became {want}: {}",
            q["status"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn object_count_quota_refuses_with_upstreams_message_and_tracks_usage() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "rq"]);
    // The root CA publisher's ConfigMap is there before the quota, and the quota counts it.
    s.wait_for_root_ca("rq");
    s.kubectl(&[
        "-n",
        "rq",
        "create",
        "quota",
        "q",
        "--hard=count/configmaps=3",
    ]);
    let q = wait_used(&s, "rq", "q", "count/configmaps", "1");
    assert_eq!(q["status"]["hard"]["count/configmaps"], "3");

    s.kubectl(&["-n", "rq", "create", "configmap", "a"]);
    s.kubectl(&["-n", "rq", "create", "configmap", "b"]);
    let err = s.kubectl_fails(&["-n", "rq", "create", "configmap", "c"]);
    assert!(
        err.contains(
            "configmaps \"c\" is forbidden: exceeded quota: q, requested: count/configmaps=1, \
             used: count/configmaps=3, limited: count/configmaps=3"
        ),
        "{err}"
    );
    // Charged at admission, before the answer: right away, not after a controller pass.
    assert_eq!(
        quota(&s, "rq", "q")["status"]["used"]["count/configmaps"],
        "3"
    );
    // A dry run is checked but not charged.
    let err = s.kubectl_fails(&["-n", "rq", "create", "configmap", "d", "--dry-run=server"]);
    assert!(err.contains("exceeded quota: q"), "{err}");

    // A deletion gives the unit back (the controller counts again) and the next create fits.
    s.kubectl(&["-n", "rq", "delete", "configmap", "a"]);
    wait_used(&s, "rq", "q", "count/configmaps", "2");
    s.kubectl(&["-n", "rq", "create", "configmap", "c"]);
    assert_eq!(
        quota(&s, "rq", "q")["status"]["used"]["count/configmaps"],
        "3"
    );

    // Raising the limit is seen by the controller and admission alike.
    s.kubectl(&[
        "-n",
        "rq",
        "patch",
        "resourcequota",
        "q",
        "-p",
        r#"{"spec":{"hard":{"count/configmaps":"4"}}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while quota(&s, "rq", "q")["status"]["hard"]["count/configmaps"] != "4" {
        assert!(
            Instant::now() < deadline,
            "status.hard never followed spec.hard"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    s.kubectl(&["-n", "rq", "create", "configmap", "d"]);
}

#[test]
fn concurrent_creates_never_exceed_the_quota() {
    let s = Arc::new(Server::start());
    s.kubectl(&["create", "namespace", "burst"]);
    // The root CA ConfigMap takes one unit, leaving 10 of 11 for the creates below.
    s.wait_for_root_ca("burst");
    s.kubectl(&[
        "-n",
        "burst",
        "create",
        "quota",
        "q",
        "--hard=count/configmaps=11",
    ]);
    wait_used(&s, "burst", "q", "count/configmaps", "1");
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let out =
                    s.kubectl_output(&["-n", "burst", "create", "configmap", &format!("c{i}")]);
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                (out.status.success(), err)
            })
        })
        .collect();
    let results: Vec<(bool, String)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let created = results.iter().filter(|(ok, _)| *ok).count();
    assert_eq!(created, 10, "{results:?}");
    for (ok, err) in &results {
        if !ok {
            assert!(
                err.contains("exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=11, limited: count/configmaps=11"),
                "{err}"
            );
        }
    }
    let listed = s.kubectl(&["-n", "burst", "get", "configmaps", "-o", "name"]);
    let ours = listed
        .lines()
        .filter(|l| *l != format!("configmap/{ROOT_CA}"))
        .count();
    assert_eq!(ours, 10, "{listed}");
    assert_eq!(listed.lines().count(), 11, "{listed}");
    assert_eq!(
        quota(&s, "burst", "q")["status"]["used"]["count/configmaps"],
        "11"
    );
}

const POD: &str = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "NAME"},
  "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": RESOURCES}]}}"#;

fn pod(name: &str, resources: &str) -> String {
    POD.replace("NAME", name).replace("RESOURCES", resources)
}

#[test]
fn compute_quota_on_pods() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "cpu"]);
    s.kubectl(&[
        "-n",
        "cpu",
        "create",
        "quota",
        "compute",
        "--hard=requests.cpu=1,pods=5",
    ]);
    wait_used(&s, "cpu", "compute", "requests.cpu", "0");

    let out = s.kubectl_stdin_output(&["-n", "cpu", "create", "-f", "-"], &pod("bare", "{}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "pods \"bare\" is forbidden: failed quota: compute: must specify requests.cpu for: c"
        ),
        "{err}"
    );
    s.kubectl_stdin(
        &["-n", "cpu", "create", "-f", "-"],
        &pod("small", r#"{"requests": {"cpu": "600m"}}"#),
    );
    let q = quota(&s, "cpu", "compute");
    assert_eq!(q["status"]["used"]["requests.cpu"], "600m");
    assert_eq!(q["status"]["used"]["pods"], "1");
    let out = s.kubectl_stdin_output(
        &["-n", "cpu", "create", "-f", "-"],
        &pod("big", r#"{"requests": {"cpu": "500m"}}"#),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "pods \"big\" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, \
             used: requests.cpu=600m, limited: requests.cpu=1"
        ),
        "{err}"
    );
    s.kubectl(&[
        "-n",
        "cpu",
        "delete",
        "pod",
        "small",
        "--grace-period=0",
        "--force",
    ]);
    wait_used(&s, "cpu", "compute", "requests.cpu", "0");
    s.kubectl_stdin(
        &["-n", "cpu", "create", "-f", "-"],
        &pod("big", r#"{"requests": {"cpu": "500m"}}"#),
    );
    assert_eq!(
        quota(&s, "cpu", "compute")["status"]["used"]["requests.cpu"],
        "500m"
    );
}

fn claim(name: &str, devices: i64, owner: Option<(&str, &str)>) -> String {
    let mut claim = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": devices}}]}}});
    if let Some((pod, uid)) = owner {
        // As the scheduler makes them for a Pod's extended resources.
        claim["metadata"]["annotations"] =
            serde_json::json!({"resource.kubernetes.io/extended-resource-claim": "true"});
        claim["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "v1",
            "kind": "Pod", "name": pod, "uid": uid, "controller": true}]);
    }
    claim.to_string()
}

/// `DRAExtendedResource` (beta, on in v1.36): a claim's devices count under the extended
/// resource names their DeviceClass gives them, as a Pod that asks for `example.com/gpu` counts
/// it; the claim the scheduler makes for such a Pod is charged only what the Pod does not
/// already count, and only the Pod's first such claim is. The controller's count adds up Pods
/// and claims the same way.
#[test]
fn dra_extended_resources_count_on_claims_less_what_their_pod_counts() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "dra"]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}"#,
    );
    let hard = "--hard=requests.example.com/gpu=3,\
                requests.deviceclass.resource.kubernetes.io/gpu=4,\
                gpu.deviceclass.resource.k8s.io/devices=10";
    s.kubectl(&["-n", "dra", "create", "quota", "gpus", hard]);
    wait_used(&s, "dra", "gpus", "requests.example.com/gpu", "0");
    // The DeviceClass reaches quota's mapping through a watch: a claim over the limit is
    // refused once it has.
    common::wait_until("the DeviceClass in quota's mapping", 20, || {
        let out = s.kubectl_stdin_output(
            &["-n", "dra", "create", "--dry-run=server", "-f", "-"],
            &claim("probe", 4, None),
        );
        String::from_utf8_lossy(&out.stderr).contains("exceeded quota: gpus")
    });

    s.kubectl_stdin(
        &["-n", "dra", "create", "-f", "-"],
        &claim("shared", 3, None),
    );
    let used = &quota(&s, "dra", "gpus")["status"]["used"];
    assert_eq!(used["requests.example.com/gpu"], "3", "{used}");
    assert_eq!(used["requests.deviceclass.resource.kubernetes.io/gpu"], "3");
    assert_eq!(used["gpu.deviceclass.resource.k8s.io/devices"], "3");
    let out = s.kubectl_stdin_output(&["-n", "dra", "create", "-f", "-"], &claim("more", 2, None));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "resourceclaims.resource.k8s.io \"more\" is forbidden: exceeded quota: gpus, \
             requested: requests.deviceclass.resource.kubernetes.io/gpu=2,requests.example.com/gpu=2, \
             used: requests.deviceclass.resource.kubernetes.io/gpu=3,requests.example.com/gpu=3, \
             limited: requests.deviceclass.resource.kubernetes.io/gpu=4,requests.example.com/gpu=3"
        ),
        "{err}"
    );
    s.kubectl(&["-n", "dra", "delete", "resourceclaim", "shared"]);
    wait_used(&s, "dra", "gpus", "requests.example.com/gpu", "0");

    // A Pod asking for two GPUs by extended resource counts them itself.
    s.kubectl_stdin(
        &["-n", "dra", "create", "-f", "-"],
        &pod(
            "p",
            r#"{"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}}"#,
        ),
    );
    let used = &quota(&s, "dra", "gpus")["status"]["used"];
    assert_eq!(used["requests.example.com/gpu"], "2", "{used}");
    let uid = s.kubectl(&[
        "-n",
        "dra",
        "get",
        "pod",
        "p",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    // Its claim would make four of three if it were charged for them again.
    s.kubectl_stdin(
        &["-n", "dra", "create", "-f", "-"],
        &claim("p-gpu", 2, Some(("p", &uid))),
    );
    let used = &quota(&s, "dra", "gpus")["status"]["used"];
    assert_eq!(used["requests.example.com/gpu"], "2", "{used}");
    assert_eq!(used["requests.deviceclass.resource.kubernetes.io/gpu"], "2");
    assert_eq!(used["gpu.deviceclass.resource.k8s.io/devices"], "2");
    // A second claim of the same Pod is charged in full, and so is a claim whose owner
    // reference does not carry the Pod's uid.
    s.kubectl_stdin(
        &["-n", "dra", "create", "-f", "-"],
        &claim("p-second", 1, Some(("p", &uid))),
    );
    let used = &quota(&s, "dra", "gpus")["status"]["used"];
    assert_eq!(used["requests.example.com/gpu"], "3", "{used}");
    let out = s.kubectl_stdin_output(
        &["-n", "dra", "create", "-f", "-"],
        &claim("stranger", 1, Some(("p", "not-the-uid"))),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    // Only what goes over is named: the implicit name's four fit in its limit.
    assert!(
        err.contains(
            "exceeded quota: gpus, requested: requests.example.com/gpu=1, \
             used: requests.example.com/gpu=3, limited: requests.example.com/gpu=3"
        ),
        "{err}"
    );

    // A new quota is counted by the controller alone: the Pod's two, nothing more for its
    // first claim, one for its second.
    s.kubectl(&["-n", "dra", "create", "quota", "again", hard]);
    let q = wait_used(&s, "dra", "again", "requests.example.com/gpu", "3");
    let used = &q["status"]["used"];
    assert_eq!(
        used["requests.deviceclass.resource.kubernetes.io/gpu"], "3",
        "{used}"
    );
    assert_eq!(used["gpu.deviceclass.resource.k8s.io/devices"], "3");
}
