//! The ServiceAccount and StorageObjectInUseProtection admission plugins and the controllers
//! that go with them, against the real binary with kubectl: every namespace gets its `default`
//! ServiceAccount (and gets it back when it is deleted), a Pod runs as `default` with the
//! `kube-api-access-*` token volume mounted in every container, a Pod naming a missing account
//! is refused with upstream's message, volumes and claims get their protection finalizers and
//! still delete once unused. `--enable-admission-plugins` / `--disable-admission-plugins` change
//! the chain as upstream's flags do. Expected texts are upstream's
//! (plugin/pkg/admission/serviceaccount, pkg/kubeapiserver/options).

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::Value;

fn json(s: &Server, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&s.kubectl(&all)).expect("kubectl prints JSON")
}

/// Waits up to `limit` for `f` to hold.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn has_default_account(s: &Server, ns: &str) -> bool {
    s.kubectl_output(&["-n", ns, "get", "serviceaccount", "default"])
        .status
        .success()
}

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  initContainers:
  - name: init
    image: busybox
  containers:
  - name: a
    image: nginx:1.27
  - name: b
    image: nginx:1.27
"#;

#[test]
fn service_accounts_and_the_token_volume() {
    let s = Server::start();
    // The controller: the system namespaces and every new one get `default` within a second.
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            eventually(Duration::from_secs(1), || has_default_account(&s, ns)),
            "{ns}"
        );
    }
    s.kubectl(&["create", "namespace", "team"]);
    assert!(eventually(Duration::from_secs(1), || has_default_account(
        &s, "team"
    )));
    let first = json(&s, &["-n", "team", "get", "serviceaccount", "default"]);
    s.kubectl(&["-n", "team", "delete", "serviceaccount", "default"]);
    assert!(eventually(Duration::from_secs(1), || {
        s.kubectl_output(&[
            "-n",
            "team",
            "get",
            "serviceaccount",
            "default",
            "-o",
            "json",
        ])
        .stdout
        .starts_with(b"{")
            && json(&s, &["-n", "team", "get", "serviceaccount", "default"])["metadata"]["uid"]
                != first["metadata"]["uid"]
    }));

    // The plugin: the pod runs as `default`, every init container and container mounts the
    // token volume read-only at the service account path.
    let created: Value = serde_json::from_str(
        &s.kubectl_stdin(&["-n", "team", "create", "-o", "json", "-f", "-"], POD),
    )
    .unwrap();
    let spec = &created["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volumes = spec["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 1);
    let volume = volumes[0]["name"].as_str().unwrap();
    assert!(
        volume.starts_with("kube-api-access-") && volume.len() == 21,
        "{volume}"
    );
    let sources = &volumes[0]["projected"]["sources"];
    assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3607);
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(
        sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    for c in spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spec["containers"].as_array().unwrap())
    {
        assert_eq!(
            c["volumeMounts"],
            serde_json::json!([{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": volume, "readOnly": true}])
        );
    }

    // A missing account: upstream's 403.
    let err = s.kubectl_fails(&[
        "-n",
        "team",
        "run",
        "q",
        "--image=nginx",
        "--overrides={\"spec\":{\"serviceAccountName\":\"robot\"}}",
    ]);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): pods "q" is forbidden: error looking up service account team/robot: serviceaccount "robot" not found"#
    );

    // An account that turns automounting off, with image pull secrets the pod inherits.
    s.kubectl_stdin(
        &["-n", "team", "apply", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\nautomountServiceAccountToken: false\nimagePullSecrets:\n- name: registry\n",
    );
    let pod = json(
        &s,
        &[
            "-n",
            "team",
            "run",
            "q",
            "--image=nginx",
            "--dry-run=server",
            "--overrides={\"spec\":{\"serviceAccountName\":\"robot\"}}",
        ],
    );
    assert!(pod["spec"].get("volumes").is_none(), "{pod}");
    assert!(pod["spec"]["containers"][0].get("volumeMounts").is_none());
    assert_eq!(
        pod["spec"]["imagePullSecrets"],
        serde_json::json!([{"name": "registry"}])
    );
    // The pod's own choice wins over the account's.
    let pod = json(
        &s,
        &[
            "-n",
            "team",
            "run",
            "q",
            "--image=nginx",
            "--dry-run=server",
            "--overrides={\"spec\":{\"serviceAccountName\":\"robot\",\"automountServiceAccountToken\":true}}",
        ],
    );
    assert_eq!(pod["spec"]["volumes"].as_array().map(Vec::len), Some(1));

    // A mirror pod may not name an account.
    let err = s.kubectl_fails(&[
        "-n",
        "team",
        "run",
        "m",
        "--image=nginx",
        "--overrides={\"metadata\":{\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}},\"spec\":{\"serviceAccountName\":\"robot\"}}",
    ]);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): pods "m" is forbidden: a mirror pod may not reference service accounts"#
    );
    s.stop();
}

#[test]
fn storage_protection_finalizers() {
    let s = Server::start();
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv1
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: claim
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata:
  name: gold
driverName: csi.example.com
parameters: {iops: "100"}
"#,
    );
    let finalizers = |args: &[&str]| json(&s, args)["metadata"]["finalizers"].clone();
    assert_eq!(
        finalizers(&["get", "pv", "pv1"]),
        serde_json::json!(["kubernetes.io/pv-protection"])
    );
    assert_eq!(
        finalizers(&["get", "pvc", "claim"]),
        serde_json::json!(["kubernetes.io/pvc-protection"])
    );
    assert_eq!(
        finalizers(&["get", "volumeattributesclass", "gold"]),
        serde_json::json!(["kubernetes.io/vac-protection"])
    );

    // A scheduled pod that mounts the claim keeps it while it exists.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  nodeName: node-1
  containers: [{name: c, image: nginx}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: claim}}]
"#,
    );
    s.kubectl(&["delete", "pvc", "claim", "--wait=false"]);
    std::thread::sleep(Duration::from_millis(1200));
    let claim = json(&s, &["get", "pvc", "claim"]);
    assert!(claim["metadata"]["deletionTimestamp"].is_string());
    s.kubectl(&["delete", "pod", "user", "--grace-period=0", "--force"]);
    // Unused: the finalizers go and the deletes finish (the claim may already be gone: its
    // delete was asked before, and the controller removes the finalizer once the pod is).
    s.kubectl(&[
        "delete",
        "pvc",
        "claim",
        "--timeout=10s",
        "--ignore-not-found",
    ]);
    s.kubectl(&["wait", "--for=delete", "pvc/claim", "--timeout=10s"]);
    assert!(
        s.kubectl_fails(&["get", "pvc", "claim"])
            .contains("NotFound")
    );
    s.kubectl(&["delete", "pv", "pv1", "--timeout=10s"]);
    s.kubectl(&["delete", "volumeattributesclass", "gold", "--timeout=10s"]);
    s.stop();
}

#[test]
fn admission_plugin_flags() {
    // Turned off, the ServiceAccount plugin neither names an account nor mounts a token, and
    // StorageObjectInUseProtection adds no finalizer.
    let s = Server::start_with(&[
        "--disable-admission-plugins",
        "ServiceAccount,StorageObjectInUseProtection",
    ]);
    let pod = json(&s, &["run", "p", "--image=nginx", "--dry-run=server"]);
    assert!(pod["spec"].get("serviceAccountName").is_none(), "{pod}");
    assert!(pod["spec"].get("volumes").is_none(), "{pod}");
    // The other default plugins still run (DefaultTolerationSeconds).
    assert_eq!(pod["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
    s.stop();

    // Unknown names and a default-off plugin Ironplane lacks fail start-up, as upstream's option
    // validation does (its messages, aggregated).
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .args([
            "--enable-admission-plugins=Foo",
            "--disable-admission-plugins=Bar",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            r#"[enable-admission-plugins plugin "Foo" is unknown, disable-admission-plugins plugin "Bar" is unknown]"#
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .arg("--enable-admission-plugins=AlwaysPullImages")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"admission plugin "AlwaysPullImages" is not implemented by Ironplane"#)
    );
}

/// The root CA publisher: every namespace gets `kube-root-ca.crt` with the CA the kubeconfig
/// trusts and upstream's description, put back when deleted or edited.
#[test]
fn every_namespace_gets_the_root_ca() {
    let s = Server::start();
    let kubeconfig: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(s.kubeconfig()).unwrap()).unwrap();
    let ca_data = kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .unwrap()
        .to_string();
    use base64::Engine;
    let ca = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca_data)
            .unwrap(),
    )
    .unwrap();
    s.kubectl(&["create", "namespace", "team"]);
    let published = |ns: &str| {
        let out = s.kubectl_output(&[
            "-n",
            ns,
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-o",
            "json",
        ]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
    };
    for ns in ["default", "kube-system", "team"] {
        assert!(
            eventually(Duration::from_secs(5), || published(ns).is_some()),
            "{ns} has no kube-root-ca.crt"
        );
    }
    let cm = published("team").unwrap();
    assert_eq!(cm["data"]["ca.crt"], ca);
    assert_eq!(
        cm["metadata"]["annotations"]["kubernetes.io/description"],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
    );
    s.kubectl(&[
        "-n",
        "team",
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-p",
        r#"{"data":{"ca.crt":"edited"}}"#,
    ]);
    assert!(eventually(Duration::from_secs(5), || {
        published("team").is_some_and(|c| c["data"]["ca.crt"] == ca)
    }));
    s.kubectl(&["-n", "team", "delete", "configmap", "kube-root-ca.crt"]);
    assert!(eventually(Duration::from_secs(5), || {
        published("team").is_some_and(|c| c["data"]["ca.crt"] == ca)
    }));
}
