//! Cases from upstream's policy/*_test.go: the same pods, the same expected reasons and
//! details.

use serde_json::{Value, json};

use super::*;
use crate::admission::pod_security::api::{Level, LevelVersion, Version};

/// Runs check `id` as it is at `v1.<minor>`.
fn run(id: &str, minor: u64, pod: &Value) -> Option<Violation> {
    let check = all().find(|c| c.id == id).expect("a check with that id");
    let rule = check
        .rule_at(minor)
        .expect("the check exists at that version");
    let empty = json!({});
    let p = Pod {
        meta: pod.get("metadata").unwrap_or(&empty),
        spec: pod.get("spec").unwrap_or(&empty),
    };
    (rule.check)(&p)
}

fn forbidden(id: &str, minor: u64, pod: Value, reason: &str, detail: &str) {
    let got = run(id, minor, &pod).unwrap_or_else(|| panic!("{id} allows {pod}"));
    assert_eq!(got.reason, reason, "{id}");
    assert_eq!(got.detail, detail, "{id}");
}

fn allowed(id: &str, minor: u64, pod: Value) {
    assert_eq!(run(id, minor, &pod), None, "{id} refuses {pod}");
}

fn lv(level: Level, version: &str) -> LevelVersion {
    LevelVersion {
        level,
        version: Version::parse(version).unwrap(),
    }
}

// ---- the registry (registry_test.go TestCheckRegistry) ----

fn none(_: &Pod<'_>) -> Option<Violation> {
    None
}

const fn with_overrides(since: u64, overrides: &'static [&'static str]) -> Rule {
    Rule {
        since,
        check: none,
        overrides,
    }
}

static SYNTHETIC: &[Check] = &[
    Check {
        id: "a",
        level: Level::Baseline,
        rules: &[rule(0, none)],
    },
    Check {
        id: "b",
        level: Level::Baseline,
        rules: &[rule(10, none)],
    },
    Check {
        id: "c",
        level: Level::Baseline,
        rules: &[rule(0, none), rule(5, none), rule(10, none)],
    },
    Check {
        id: "d",
        level: Level::Baseline,
        rules: &[rule(11, none), rule(15, none), rule(20, none)],
    },
    Check {
        id: "e",
        level: Level::Restricted,
        rules: &[rule(0, none)],
    },
    Check {
        id: "f",
        level: Level::Restricted,
        rules: &[rule(12, none), rule(16, none), rule(21, none)],
    },
    Check {
        id: "g",
        level: Level::Restricted,
        rules: &[with_overrides(10, &["a"])],
    },
    Check {
        id: "h",
        level: Level::Restricted,
        rules: &[with_overrides(0, &["b"])],
    },
    Check {
        id: "i",
        level: Level::Restricted,
        rules: &[with_overrides(10, &["c"]), with_overrides(21, &["d"])],
    },
];

#[test]
fn registry_picks_rules_by_version_with_overrides() {
    let checks: Vec<&Check> = SYNTHETIC.iter().collect();
    let cases: &[(Level, &str, &[&str])] = &[
        (Level::Privileged, "v1.0", &[]),
        (Level::Privileged, "latest", &[]),
        (Level::Baseline, "v1.0", &["a:v1.0", "c:v1.0"]),
        (Level::Baseline, "v1.4", &["a:v1.0", "c:v1.0"]),
        (Level::Baseline, "v1.5", &["a:v1.0", "c:v1.5"]),
        (Level::Baseline, "v1.10", &["a:v1.0", "b:v1.10", "c:v1.10"]),
        (
            Level::Baseline,
            "v1.11",
            &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"],
        ),
        (
            Level::Baseline,
            "latest",
            &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"],
        ),
        (
            Level::Restricted,
            "v1.0",
            &["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"],
        ),
        (
            Level::Restricted,
            "v1.4",
            &["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"],
        ),
        (
            Level::Restricted,
            "v1.5",
            &["a:v1.0", "c:v1.5", "e:v1.0", "h:v1.0"],
        ),
        (
            Level::Restricted,
            "v1.10",
            &["e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"],
        ),
        (
            Level::Restricted,
            "v1.11",
            &["d:v1.11", "e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"],
        ),
        (
            Level::Restricted,
            "latest",
            &[
                "c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21",
            ],
        ),
        (
            Level::Restricted,
            "v1.10000",
            &[
                "c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21",
            ],
        ),
    ];
    for (level, version, want) in cases {
        let got: Vec<String> = rules_in(&checks, lv(*level, version))
            .into_iter()
            .map(|(id, r)| format!("{id}:v1.{}", r.since))
            .collect();
        assert_eq!(got, *want, "{level:?} {version}");
    }
}

#[test]
fn the_newest_policy_version_is_v1_35() {
    let checks: Vec<&Check> = all().collect();
    assert_eq!(newest_version(&checks), 35);
    let ids: Vec<&str> = rules_in(&checks, lv(Level::Restricted, "latest"))
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ids,
        [
            "appArmorProfile",
            "hostNamespaces",
            "hostPorts",
            "hostProbesAndHostLifecycle",
            "privileged",
            "seLinuxOptions",
            "sysctls",
            "windowsHostProcess",
            "allowPrivilegeEscalation",
            "capabilities_restricted",
            "procMount_restricted",
            "restrictedVolumes",
            "runAsNonRoot",
            "runAsUser",
            "seccompProfile_restricted",
        ]
    );
}

// ---- the checks ----

#[test]
fn app_armor() {
    let id = "appArmorProfile";
    allowed(
        id,
        0,
        json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/test": "localhost/sec-profile01",
            "env": "dev"}}}),
    );
    allowed(
        id,
        0,
        json!({"spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}}),
    );
    forbidden(
        id,
        0,
        json!({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}),
        "forbidden AppArmor profile",
        r#"pod must not set AppArmor profile type to "Unconfined""#,
    );
    forbidden(
        id,
        0,
        json!({"spec": {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "foo"}],
            "initContainers": [{"name": "bar", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]}}),
        "forbidden AppArmor profile",
        r#"container "bar" must not set AppArmor profile type to "Unconfined""#,
    );
    forbidden(
        id,
        0,
        json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/": "bogus",
            "container.apparmor.security.beta.kubernetes.io/a": "",
            "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
            "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/f": "unknown"}}}),
        "forbidden AppArmor profiles",
        concat!(
            r#"annotations must not set AppArmor profile type to "#,
            r#""container.apparmor.security.beta.kubernetes.io/="bogus"", "#,
            r#""container.apparmor.security.beta.kubernetes.io/e="unconfined"", "#,
            r#""container.apparmor.security.beta.kubernetes.io/f="unknown"""#
        ),
    );
}

#[test]
fn se_linux_options() {
    let id = "seLinuxOptions";
    let typed = |name: &str, opts: Value| json!({"name": name, "securityContext": {"seLinuxOptions": opts}});
    let valid = [
        typed("a", json!({"type": "container_t"})),
        typed("b", json!({"type": "container_init_t"})),
        typed("c", json!({"type": "container_kvm_t"})),
        typed("d", json!({"type": "container_engine_t"})),
    ];
    let mut containers = valid.to_vec();
    containers.extend([
        typed("e", json!({"type": "bar"})),
        typed("f", json!({"user": "bar"})),
        typed("g", json!({"role": "baz"})),
    ]);
    forbidden(
        id,
        31,
        json!({"spec": {
            "securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}},
            "containers": containers}}),
        "seLinuxOptions",
        r#"pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#,
    );
    forbidden(
        id,
        31,
        json!({"spec": {"securityContext": {"seLinuxOptions": {}}, "containers": containers}}),
        "seLinuxOptions",
        r#"containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar"; user may not be set; role may not be set"#,
    );
    allowed(id, 31, json!({"spec": {"containers": valid}}));
    // container_engine_t is allowed from v1.31 only.
    forbidden(
        id,
        30,
        json!({"spec": {"containers": [typed("d", json!({"type": "container_engine_t"}))]}}),
        "seLinuxOptions",
        r#"container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t""#,
    );
}

#[test]
fn restricted_volumes() {
    let mut volumes = Vec::new();
    for (i, source) in [
        "emptyDir",
        "secret",
        "persistentVolumeClaim",
        "downwardAPI",
        "configMap",
        "projected",
        "csi",
        "ephemeral",
        "image",
    ]
    .iter()
    .enumerate()
    {
        volumes.push(json!({"name": format!("a{}", i + 1), *source: {}}));
    }
    for (i, source) in [
        "hostPath",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "nfs",
        "iscsi",
        "glusterfs",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "fc",
        "azureFile",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "portworxVolume",
        "scaleIO",
        "storageos",
    ]
    .iter()
    .enumerate()
    {
        volumes.push(json!({"name": format!("b{}", i + 1), *source: {}}));
    }
    volumes.push(json!({"name": "c1"}));
    forbidden(
        "restrictedVolumes",
        0,
        json!({"spec": {"volumes": volumes}}),
        "restricted volume types",
        concat!(
            r#"volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1""#,
            r#" use restricted volume types "#,
            r#""awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "#,
            r#""hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume""#
        ),
    );
}

#[test]
fn host_ports() {
    forbidden(
        "hostPorts",
        0,
        json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]}]}}),
        "hostPort",
        r#"container "b" uses hostPort 20"#,
    );
    forbidden(
        "hostPorts",
        0,
        json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
            {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]}]}}),
        "hostPort",
        r#"containers "b", "c" use hostPorts 10, 20, 30"#,
    );
}

#[test]
fn probe_and_lifecycle_hosts() {
    forbidden(
        "hostProbesAndHostLifecycle",
        34,
        json!({"spec": {"containers": [
            {"name": "valid"},
            {"name": "invalid1", "livenessProbe": {"httpGet": {"host": "a.com"}}},
            {"name": "invalid2",
             "lifecycle": {"preStop": {"tcpSocket": {"host": "b.com"}}},
             "startupProbe": {"httpGet": {"host": "a.com"}}}]}}),
        "probe or lifecycle host",
        r#"containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com""#,
    );
}

#[test]
fn capabilities_restricted() {
    let id = "capabilities_restricted";
    let pod = json!({"spec": {"containers": [
        {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
        {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
        {"name": "c", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}}}]}});
    let detail = r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#;
    forbidden(id, 22, pod.clone(), "unrestricted capabilities", detail);
    forbidden(id, 25, pod, "unrestricted capabilities", detail);
    allowed(
        id,
        25,
        json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}}),
    );
    forbidden(
        id,
        25,
        json!({"spec": {"os": {"name": "linux"}, "containers": [{"name": "a"}]}}),
        "unrestricted capabilities",
        r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#,
    );
}

#[test]
fn run_as_non_root() {
    let id = "runAsNonRoot";
    forbidden(
        id,
        0,
        json!({"spec": {"containers": [{"name": "a"}]}}),
        "runAsNonRoot != true",
        r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
    );
    forbidden(
        id,
        0,
        json!({"spec": {"securityContext": {"runAsNonRoot": false}, "containers": [{"name": "a"}]}}),
        "runAsNonRoot != true",
        "pod must not set securityContext.runAsNonRoot=false",
    );
    forbidden(
        id,
        0,
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "securityContext": {}}]}}),
        "runAsNonRoot != true",
        r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#,
    );
    // From v1.35 a pod in a user namespace passes.
    allowed(id, 35, json!({"spec": {"hostUsers": false}}));
    forbidden(
        id,
        34,
        json!({"spec": {"hostUsers": false, "containers": [{"name": "a"}]}}),
        "runAsNonRoot != true",
        r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
    );
}

#[test]
fn seccomp_restricted() {
    let id = "seccompProfile_restricted";
    forbidden(
        id,
        19,
        json!({"spec": {"containers": [{"name": "a"}]}}),
        "seccompProfile",
        r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
    );
    allowed(
        id,
        25,
        json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}}),
    );
    forbidden(
        id,
        19,
        json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [{"name": "a"}]}}),
        "seccompProfile",
        r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#,
    );
    let profile = |t: &str| json!({"seccompProfile": {"type": t}});
    forbidden(
        id,
        25,
        json!({"spec": {"securityContext": profile("RuntimeDefault"), "containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": profile("Unconfined")},
            {"name": "d", "securityContext": profile("Unconfined")},
            {"name": "e", "securityContext": profile("RuntimeDefault")},
            {"name": "f", "securityContext": profile("RuntimeDefault")}]}}),
        "seccompProfile",
        r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#,
    );
}

#[test]
fn sysctls_grow_with_versions() {
    let pod = |name: &str| json!({"spec": {"securityContext": {"sysctls": [{"name": name}]}}});
    forbidden(
        "sysctls",
        0,
        json!({"spec": {"securityContext": {"sysctls": [{"name": "a"}, {"name": "b"}]}}}),
        "forbidden sysctls",
        "a, b",
    );
    for (name, since) in [
        ("net.ipv4.ip_local_reserved_ports", 27),
        ("net.ipv4.tcp_keepalive_time", 29),
        ("net.ipv4.tcp_fin_timeout", 29),
        ("net.ipv4.tcp_keepalive_intvl", 29),
        ("net.ipv4.tcp_keepalive_probes", 29),
        ("net.ipv4.tcp_rmem", 32),
        ("net.ipv4.tcp_wmem", 32),
    ] {
        forbidden("sysctls", since - 1, pod(name), "forbidden sysctls", name);
        allowed("sysctls", since, pod(name));
    }
}

// ---- a whole policy, aggregated ----

/// The recorded answer of upstream's corpus case `pod-podsecurity-restricted-forbidden`.
#[test]
fn a_privileged_pod_breaks_restricted_in_upstream_order() {
    let pod = json!({"metadata": {"name": "ps"}, "spec": {"containers": [
        {"name": "c", "image": "nginx:1.27", "securityContext": {"privileged": true}}]}});
    let p = Pod {
        meta: &pod["metadata"],
        spec: &pod["spec"],
    };
    let v = evaluate(lv(Level::Restricted, "latest"), &p);
    assert_eq!(
        details(&v),
        concat!(
            r#"privileged (container "c" must not set securityContext.privileged=true), "#,
            r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
            r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
            r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
            r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
        )
    );
    assert_eq!(
        reasons(&v),
        "privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
    );
    assert!(evaluate(lv(Level::Privileged, "latest"), &p).is_empty());
    assert_eq!(
        reasons(&evaluate(lv(Level::Baseline, "v1.0"), &p)),
        "privileged"
    );
}
