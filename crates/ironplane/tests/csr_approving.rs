//! The CSR approving controller against the real binary with kubectl: a kubelet client
//! certificate request is approved (reason `AutoApproved`, upstream's message) when its
//! requester may create `certificatesigningrequests/nodeclient` (or `selfnodeclient` for its
//! own name), and the signing controller then issues it; a requester without that permission
//! waits for a human.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;

/// A PEM certificate request for `subject`, base64-encoded as a CSR object carries it.
fn request(dir: &std::path::Path, name: &str, subject: &str) -> String {
    let csr = dir.join(format!("{name}.csr"));
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&csr)
        .args(["-subj", subject])
        .output()
        .expect("openssl runs (is it installed?)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        std::fs::read(&csr).unwrap(),
    )
}

fn kubelet_csr(name: &str, request: &str) -> String {
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: {name}}}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n"
    )
}

fn approval(s: &Server, name: &str) -> String {
    s.kubectl(&[
        "get",
        "csr",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Approved\")].reason}|{.status.conditions[?(@.type==\"Approved\")].message}",
    ])
}

fn wait_approved(s: &Server, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = approval(s, name);
        if got != "|" {
            return got;
        }
        assert!(Instant::now() < deadline, "{name} was never approved");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kubelet_client_requests_are_approved_after_an_access_review() {
    let s = Server::start();
    let dir = tempfile::tempdir().unwrap();
    // The admin (system:masters) may do anything, nodeclient included.
    let r = request(dir.path(), "n1", "/CN=system:node:n1/O=system:nodes");
    s.kubectl_stdin(&["create", "-f", "-"], &kubelet_csr("node-n1", &r));
    assert_eq!(
        wait_approved(&s, "node-n1"),
        "AutoApproved|Auto approving kubelet client certificate after SubjectAccessReview."
    );
    // Approved, then signed by the signing controller.
    let deadline = Instant::now() + Duration::from_secs(10);
    while s
        .kubectl(&[
            "get",
            "csr",
            "node-n1",
            "-o",
            "jsonpath={.status.certificate}",
        ])
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the approved request was never signed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // jane may create requests but not have node client ones approved.
    s.kubectl(&[
        "create",
        "clusterrolebinding",
        "jane-bootstrapper",
        "--clusterrole=system:node-bootstrapper",
        "--user=jane",
    ]);
    let r = request(dir.path(), "n2", "/CN=system:node:n2/O=system:nodes");
    s.kubectl_stdin(
        &["--as=jane", "create", "-f", "-"],
        &kubelet_csr("by-jane", &r),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        approval(&s, "by-jane"),
        "|",
        "not approved without the permission"
    );

    // With the nodeclient role her next request is approved; a request for her own name asks
    // selfnodeclient first, which she lacks, then nodeclient.
    s.kubectl(&[
        "create",
        "clusterrolebinding",
        "jane-nodeclient",
        "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "--user=jane",
    ]);
    let r = request(dir.path(), "n3", "/CN=system:node:n3/O=system:nodes");
    s.kubectl_stdin(
        &["--as=jane", "create", "-f", "-"],
        &kubelet_csr("by-jane-2", &r),
    );
    assert_eq!(
        wait_approved(&s, "by-jane-2"),
        "AutoApproved|Auto approving kubelet client certificate after SubjectAccessReview."
    );

    // A node renewing its own certificate is approved through selfnodeclient, which kubeadm
    // grants to every node.
    s.kubectl(&[
        "create",
        "clusterrolebinding",
        "kubeadm:node-autoapprove-certificate-rotation",
        "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "--group=system:nodes",
    ]);
    let r = request(dir.path(), "n4", "/CN=system:node:n4/O=system:nodes");
    s.kubectl_stdin(
        &[
            "--as=system:node:n4",
            "--as-group=system:nodes",
            "create",
            "-f",
            "-",
        ],
        &kubelet_csr("self-n4", &r),
    );
    assert_eq!(
        wait_approved(&s, "self-n4"),
        "AutoApproved|Auto approving self kubelet client certificate after SubjectAccessReview."
    );
}
