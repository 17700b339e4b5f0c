//! NodeRestriction's audience check for the service-account tokens a kubelet asks for its pods,
//! followed through CSI drivers as upstream follows it: an audience is the pod's when a CSI
//! driver behind one of its volumes (inline, through a claim and its volume, through an
//! ephemeral volume's claim) lists it in `spec.tokenRequests`.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;

const OBJECTS: &str = r#"apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec:
  tokenRequests: [{audience: vault}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: csi.example.com, volumeHandle: h1}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-nfs}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  nfs: {server: nfs.example.com, path: /x}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv1
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: eph-data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv1
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nfs-claim}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-nfs
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: by-claim}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: claim}}]
---
apiVersion: v1
kind: Pod
metadata: {name: inline}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
  volumes: [{name: v, csi: {driver: csi.example.com}}]
---
apiVersion: v1
kind: Pod
metadata: {name: eph}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
  volumes:
  - name: data
    ephemeral:
      volumeClaimTemplate:
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: nfs}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: nfs-claim}}]
---
apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: nowhere}}]
"#;

#[test]
fn a_node_may_ask_tokens_for_the_audiences_of_its_pods_csi_drivers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, "n1-token,system:node:n1,uid-n1,system:nodes\n").unwrap();
    let s = Server::start_with(&[
        "--token-auth-file",
        file.to_str().unwrap(),
        "--enable-admission-plugins",
        "NodeRestriction",
    ]);
    s.kubectl_stdin(&["create", "-f", "-"], OBJECTS);
    let token = |pod: &str, audience: &str| {
        let uid = s.kubectl(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"]);
        common::raw_https(
            &format!(
                "{}/api/v1/namespaces/default/serviceaccounts/default/token",
                s.url
            ),
            "POST",
            &[
                ("Authorization", "Bearer n1-token"),
                ("Content-Type", "application/json"),
            ],
            Some(&format!(
                r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{{"audiences":["{audience}"],"boundObjectRef":{{"apiVersion":"v1","kind":"Pod","name":"{pod}","uid":"{}"}}}}}}"#,
                uid.trim()
            )),
        )
    };
    // The Node authorizer lets the node ask once its graph has the pod and its account.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = token("by-claim", "vault");
        if out.starts_with("201 ") {
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // An inline CSI volume and an ephemeral volume's claim (`<pod>-<volume>`) lead to the
    // driver too.
    for pod in ["inline", "eph"] {
        let out = token(pod, "vault");
        assert!(out.starts_with("201 "), "{pod}: {out}");
    }
    // An audience no driver asks for, and a volume without a CSI driver: refused.
    let refused = |audience: &str| {
        format!(
            r#""message":"serviceaccounts \"default\" is forbidden: audience \"{audience}\" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience""#
        )
    };
    let out = token("by-claim", "other");
    assert!(
        out.starts_with("403 ") && out.contains(&refused("other")),
        "{out}"
    );
    let out = token("nfs", "vault");
    assert!(
        out.starts_with("403 ") && out.contains(&refused("vault")),
        "{out}"
    );
    // A claim that cannot be followed is the reason, in the lister's words.
    let out = token("missing", "vault");
    assert!(
        out.starts_with("403 ")
            && out.contains(
                r#"is forbidden: error validating audience \"vault\": persistentvolumeclaim \"nowhere\" not found"#
            ),
        "{out}"
    );
    // The driver is read at each request: once it is gone, no token.
    s.kubectl(&["delete", "csidriver", "csi.example.com"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = token("inline", "vault");
        if out.starts_with("403 ") {
            assert!(
                out.contains(
                    r#"error validating audience \"vault\": csidriver \"csi.example.com\" not found"#
                ),
                "{out}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
