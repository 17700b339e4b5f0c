//! PodSecurity admission against the real binary, driven by kubectl: a namespace's
//! `pod-security.kubernetes.io` labels enforce (403) and warn (`Warning:` lines) the Pod
//! Security Standards, and `--admission-control-config-file` sets the defaults and exemptions.
//! The expected texts are upstream's (pod-security-admission/admission and policy).

use crate::common;

use std::process::Command;

use common::Server;

const PRIVILEGED_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: ps
spec:
  containers:
  - name: c
    image: nginx:1.27
    securityContext:
      privileged: true
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
"#;

const HOST_NETWORK_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: hn
spec:
  hostNetwork: true
  containers:
  - name: c
    image: nginx:1.27
"#;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn labels_enforce_and_warn() {
    let s = Server::start();
    s.kubectl(&["create", "namespace", "locked"]);
    s.kubectl(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    let out = s.kubectl_stdin_output(&["-n", "locked", "create", "-f", "-"], PRIVILEGED_POD);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        concat!(
            r#"Error from server (Forbidden): error when creating "STDIN": pods "ps" is forbidden: violates PodSecurity "restricted:latest": "#,
            r#"privileged (container "c" must not set securityContext.privileged=true), "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )
    );
    // An older policy version runs the checks of that version: v1.21 has no capabilities rule.
    s.kubectl(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=baseline",
        "pod-security.kubernetes.io/enforce-version=v1.21",
        "--overwrite",
    ]);
    let out = s.kubectl_stdin_output(&["-n", "locked", "create", "-f", "-"], PRIVILEGED_POD);
    assert!(
        stderr(&out).contains(r#"violates PodSecurity "baseline:v1.21": privileged (container "c" must not set securityContext.privileged=true)"#),
        "{}",
        stderr(&out)
    );

    // Warn mode: a Deployment's template is checked, the Deployment is created.
    s.kubectl(&["create", "namespace", "watched"]);
    s.kubectl(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/warn=restricted",
    ]);
    let out = s.kubectl_stdin_output(&["-n", "watched", "create", "-f", "-"], DEPLOYMENT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        concat!(
            r#"Warning: would violate PodSecurity "restricted:latest": "#,
            r#"allowPrivilegeEscalation != false (container "web" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "web" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )
    );

    // A bad level is refused on the namespace.
    let err = s.kubectl_fails(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/enforce=strict",
    ]);
    assert!(
        err.contains(r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#),
        "{err}"
    );

    // Tightening enforce warns about the pods already there.
    s.kubectl(&["create", "namespace", "busy"]);
    s.kubectl_stdin(&["-n", "busy", "create", "-f", "-"], PRIVILEGED_POD);
    let out = s.kubectl_output(&[
        "label",
        "namespace",
        "busy",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "Warning: existing pods in namespace \"busy\" violate the new PodSecurity enforce level \"baseline:latest\"\nWarning: ps: privileged"
    );
}

#[test]
fn configuration_file_sets_defaults_and_exemptions() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pod_security = dir.path().join("pod-security.yaml");
    std::fs::write(
        &pod_security,
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\nexemptions:\n  namespaces: [free]\n",
    )
    .unwrap();
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: pod-security.yaml\n",
    )
    .unwrap();
    let s = Server::start_with(&[
        "--admission-control-config-file",
        admission.to_str().unwrap(),
    ]);
    s.kubectl(&["create", "namespace", "plain"]);
    let out = s.kubectl_stdin_output(&["-n", "plain", "create", "-f", "-"], HOST_NETWORK_POD);
    assert!(
        stderr(&out).contains(
            r#"pods "hn" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#
        ),
        "{}",
        stderr(&out)
    );
    s.kubectl(&["create", "namespace", "free"]);
    s.kubectl_stdin(&["-n", "free", "create", "-f", "-"], HOST_NETWORK_POD);
    let out = s.kubectl_output(&[
        "label",
        "namespace",
        "free",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    assert_eq!(
        stderr(&out).trim(),
        r#"Warning: namespace "free" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"#
    );

    // A configuration the plugin refuses stops the server from starting.
    std::fs::write(
        &pod_security,
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: strict\n",
    )
    .unwrap();
    let data = tempfile::tempdir().expect("a temporary directory");
    let out = Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--admission-control-config-file"])
        .arg(&admission)
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "PodSecurity configuration error: enforce: must be one of privileged, baseline, restricted"
        ),
        "{}",
        stderr(&out)
    );
}
