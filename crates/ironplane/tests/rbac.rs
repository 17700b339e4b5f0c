//! RBAC end to end with the real kubectl and the Python client: `auth can-i` for users, groups
//! and service accounts, escalation prevention, `auth reconcile`, impersonation, anonymous
//! requests, the bootstrap policy and its reconciliation, aggregation, and a decision table
//! checked through SubjectAccessReview.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Server, tests_dir};

/// Static tokens: alice and bob are plain users; carol is in the `qa` group.
const TOKENS: &str =
    "alice-token,alice,uid-alice\nbob-token,bob,uid-bob\ncarol-token,carol,uid-carol,qa\n";

struct Cluster {
    server: Server,
    _tokens: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let tokens = tempfile::tempdir().unwrap();
        let file = tokens.path().join("tokens.csv");
        std::fs::write(&file, TOKENS).unwrap();
        let server = Server::start_with(&["--token-auth-file", file.to_str().unwrap()]);
        Cluster {
            server,
            _tokens: tokens,
        }
    }

    /// A kubeconfig that authenticates with `token` alone (no client certificate).
    fn kubeconfig_for(&self, user: &str) -> PathBuf {
        let ca = self.server.kubectl(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ]);
        let path = self._tokens.path().join(format!("{user}.kubeconfig"));
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {user}-token\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: {user}\ncurrent-context: c\n",
            self.server.url
        );
        std::fs::write(&path, config).unwrap();
        path
    }

    /// kubectl as `user` (by its token): success, stdout, stderr.
    fn kubectl_as(&self, user: &str, args: &[&str]) -> (bool, String, String) {
        let out = std::process::Command::new(common::kubectl_path())
            .env("KUBECONFIG", self.kubeconfig_for(user))
            .args(args)
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// kubectl as admin with `input` on stdin; must succeed.
    fn apply(&self, yaml: &str) {
        let out = self
            .server
            .kubectl_stdin_output(&["apply", "-f", "-"], yaml);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `kubectl auth can-i` as admin with `args` (e.g. `--as`): "yes" or "no".
    fn can_i(&self, args: &[&str]) -> String {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        let out = self.server.kubectl_output(&all);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until `check` holds: RBAC decisions follow the objects through a watch.
    fn eventually(&self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

#[test]
fn can_i_follows_roles_and_bindings_for_users_groups_and_service_accounts() {
    let c = Cluster::start();
    c.apply(
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: dev}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: dev}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: dev}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: readers, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects:
- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}
- {kind: Group, name: qa, apiGroup: rbac.authorization.k8s.io}
- {kind: ServiceAccount, name: robot, namespace: dev}
"#,
    );
    c.eventually("alice may list pods in dev", || {
        c.can_i(&["list", "pods", "-n", "dev", "--as", "alice"]) == "yes"
    });
    assert_eq!(
        c.can_i(&["list", "pods", "-n", "default", "--as", "alice"]),
        "no"
    );
    assert_eq!(
        c.can_i(&["delete", "pods", "-n", "dev", "--as", "alice"]),
        "no"
    );
    assert_eq!(
        c.can_i(&[
            "get",
            "pods",
            "-n",
            "dev",
            "--as",
            "bob",
            "--as-group",
            "qa"
        ]),
        "yes"
    );
    assert_eq!(c.can_i(&["get", "pods", "-n", "dev", "--as", "bob"]), "no");
    assert_eq!(
        c.can_i(&[
            "list",
            "pods",
            "-n",
            "dev",
            "--as",
            "system:serviceaccount:dev:robot"
        ]),
        "yes"
    );
    assert_eq!(
        c.can_i(&[
            "list",
            "pods",
            "-n",
            "dev",
            "--as",
            "system:serviceaccount:default:robot"
        ]),
        "no"
    );
    // The list of rules: what system:basic-user and system:discovery give everybody, and the
    // Role.
    let list = c
        .server
        .kubectl(&["auth", "can-i", "--list", "-n", "dev", "--as", "alice"]);
    let line = |prefix: &str| {
        list.lines()
            .find(|l| l.starts_with(prefix))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    assert_eq!(
        line("pods "),
        Some("pods [] [] [get list]".into()),
        "{list}"
    );
    assert_eq!(
        line("selfsubjectaccessreviews.authorization.k8s.io"),
        Some("selfsubjectaccessreviews.authorization.k8s.io [] [] [create]".into()),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.contains("[/api/*]") && l.contains("[get]")),
        "{list}"
    );
    // The users themselves, by their tokens.
    let (ok, out, err) = c.kubectl_as("alice", &["get", "pods", "-n", "dev"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("No resources found in dev namespace."),
        "{out}{err}"
    );
    let (ok, _, err) = c.kubectl_as("alice", &["get", "pods", "-n", "default"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    let (ok, out, _) = c.kubectl_as("carol", &["auth", "can-i", "get", "pods/x", "-n", "dev"]);
    assert!(ok && out.trim() == "yes", "{out}");
    let (ok, out, _) = c.kubectl_as("alice", &["auth", "can-i", "create", "pods", "-n", "dev"]);
    assert!(!ok && out.trim() == "no", "{out}");
    // Removing the binding takes the rights away.
    c.server
        .kubectl(&["delete", "rolebinding", "readers", "-n", "dev"]);
    c.eventually("alice loses the pods", || {
        c.can_i(&["list", "pods", "-n", "dev", "--as", "alice"]) == "no"
    });
}

#[test]
fn escalation_is_refused_unless_escalate_or_bind_is_granted() {
    let c = Cluster::start();
    c.server.kubectl(&["create", "namespace", "dev"]);
    c.server.kubectl(&[
        "create",
        "rolebinding",
        "alice-admin",
        "-n",
        "dev",
        "--clusterrole=admin",
        "--user=alice",
    ]);
    c.eventually("alice is admin of dev", || {
        c.can_i(&["create", "roles", "-n", "dev", "--as", "alice"]) == "yes"
    });
    // What alice holds she may grant.
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "role",
            "cm",
            "-n",
            "dev",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "rolebinding",
            "bob-view",
            "-n",
            "dev",
            "--clusterrole=view",
            "--user=bob",
        ],
    );
    assert!(ok, "{err}");
    // What she does not hold she may not.
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "role",
            "nodes",
            "-n",
            "dev",
            "--verb=get",
            "--resource=nodes,pods",
        ],
    );
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "Error from server (Forbidden): roles.rbac.authorization.k8s.io \"nodes\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"
    );
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "rolebinding",
            "bob-root",
            "-n",
            "dev",
            "--clusterrole=cluster-admin",
            "--user=bob",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("rolebindings.rbac.authorization.k8s.io \"bob-root\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"),
        "{err}"
    );
    // Nothing was written by the refused requests.
    let roles = c
        .server
        .kubectl(&["get", "roles,rolebindings", "-n", "dev", "-o", "name"]);
    assert!(
        !roles.contains("nodes") && !roles.contains("bob-root"),
        "{roles}"
    );
    // `escalate` on roles and `bind` on one ClusterRole lift the checks, for what they name.
    c.apply(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: escalator, namespace: dev}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [roles], verbs: [escalate]}
- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [bind], resourceNames: [cluster-admin]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-escalator, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: escalator}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
"#,
    );
    c.eventually("alice may escalate roles", || {
        c.can_i(&["escalate", "roles", "-n", "dev", "--as", "alice"]) == "yes"
    });
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "role",
            "nodes",
            "-n",
            "dev",
            "--verb=get",
            "--resource=nodes,pods",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "rolebinding",
            "bob-root",
            "-n",
            "dev",
            "--clusterrole=cluster-admin",
            "--user=bob",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "rolebinding",
            "bob-edit-ns",
            "-n",
            "dev",
            "--clusterrole=system:node",
            "--user=bob",
        ],
    );
    assert!(
        !ok && err.contains("is attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    // A binding to a role that does not exist: the role's 404.
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "create",
            "rolebinding",
            "ghost",
            "-n",
            "dev",
            "--role=ghost",
            "--user=bob",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains(r#"roles.rbac.authorization.k8s.io "ghost" not found"#),
        "{err}"
    );
    // Only cluster admins may aggregate.
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &["create", "clusterrole", "agg", "--aggregation-rule=x=y"],
    );
    assert!(
        !ok && err.contains("cannot create resource \"clusterroles\""),
        "{err}"
    );
}

#[test]
fn impersonation_needs_the_impersonate_verb() {
    let c = Cluster::start();
    // Raw requests: kubectl's discovery would hide the answer's message.
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &["get", "--raw", "/api/v1/namespaces", "--as", "bob"],
    );
    assert!(!ok);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    c.apply(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonate-bob}
rules:
- {apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [bob]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-impersonates-bob}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonate-bob}
subjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]
"#,
    );
    c.eventually("alice may impersonate bob", || {
        c.kubectl_as(
            "alice",
            &[
                "auth",
                "whoami",
                "--as",
                "bob",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        )
        .1 == "bob"
    });
    // Only bob, and not a group on top.
    let (ok, _, err) = c.kubectl_as("alice", &["get", "--raw", "/api", "--as", "carol"]);
    assert!(
        !ok && err.contains(r#"users "carol" is forbidden"#),
        "{err}"
    );
    let (ok, _, err) = c.kubectl_as(
        "alice",
        &[
            "get",
            "--raw",
            "/api",
            "--as",
            "bob",
            "--as-group",
            "system:masters",
        ],
    );
    assert!(
        !ok && err.contains(r#"groups "system:masters" is forbidden"#),
        "{err}"
    );
}

#[test]
fn auth_reconcile_and_invalid_rules() {
    let c = Cluster::start();
    c.server.kubectl(&["create", "namespace", "dev"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.yaml");
    let write = |verbs: &str| {
        std::fs::write(
            &file,
            format!(
                r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: deployer, namespace: dev}}
rules:
- {{apiGroups: [apps], resources: [deployments], verbs: [{verbs}]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: deployer, namespace: dev}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}}
subjects: [{{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}}]
"#
            ),
        )
        .unwrap();
    };
    write("get");
    let out = c
        .server
        .kubectl(&["auth", "reconcile", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains("role.rbac.authorization.k8s.io/deployer reconciled"),
        "{out}"
    );
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io/deployer reconciled"),
        "{out}"
    );
    c.eventually("alice may get deployments", || {
        c.can_i(&["get", "deployments.apps", "-n", "dev", "--as", "alice"]) == "yes"
    });
    // Reconcile adds what is missing and keeps what is there.
    write("update");
    c.server
        .kubectl(&["auth", "reconcile", "-f", file.to_str().unwrap()]);
    let verbs = c.server.kubectl(&[
        "get",
        "role",
        "deployer",
        "-n",
        "dev",
        "-o",
        "jsonpath={.rules[*].verbs}",
    ]);
    assert_eq!(verbs, r#"["get"] ["update"]"#);
    c.eventually("alice may update deployments", || {
        c.can_i(&["update", "deployments.apps", "-n", "dev", "--as", "alice"]) == "yes"
    });
    // A rule without verbs is refused with upstream's 422, and nothing is written.
    let out = c.server.kubectl_stdin_output(
        &["create", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: bad, namespace: dev}\nrules:\n- {apiGroups: [''], resources: [pods], verbs: []}\n",
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        r#"The Role "bad" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"#
    );
    assert!(
        c.server
            .kubectl_output(&["get", "role", "bad", "-n", "dev"])
            .status
            .code()
            == Some(1)
    );
}

#[test]
fn bootstrap_policy_is_reconciled_at_every_start_and_aggregated() {
    let s = Server::start();
    // Upstream's roles are there, the user-facing ones aggregated from their parts by the
    // aggregation controller soon after the start.
    let deadline = Instant::now() + Duration::from_secs(10);
    let view = loop {
        let view: serde_json::Value =
            serde_json::from_str(&s.kubectl(&["get", "clusterrole", "view", "-o", "json"]))
                .unwrap();
        let has_logs = view["rules"].as_array().is_some_and(|rules| {
            rules.iter().any(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|x| x.iter().any(|x| x == "pods/log"))
            })
        });
        if has_logs {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "view was never aggregated: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        view["metadata"]["labels"]["kubernetes.io/bootstrapping"],
        "rbac-defaults"
    );
    // The controller started after the bootstrap policy was stored, so none of its writes was
    // refused as an escalation on the way.
    let refused: Vec<String> = s
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("not currently held"))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    // A new role labelled for `view` joins it (the aggregation controller).
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: widgets-view}\nrules:\n- {apiGroups: [example.com], resources: [widgets], verbs: [get]}\n",
    );
    s.kubectl(&[
        "label",
        "clusterrole",
        "widgets-view",
        "rbac.authorization.k8s.io/aggregate-to-view=true",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = s.kubectl(&[
            "get",
            "clusterrole",
            "view",
            "-o",
            "jsonpath={.rules[*].resources}",
        ]);
        if got.contains("widgets") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "view never aggregated widgets: {got}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // `admin` aggregates `edit`, which aggregates `view`: the rule reaches admin too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s
        .kubectl(&[
            "get",
            "clusterrole",
            "admin",
            "-o",
            "jsonpath={.rules[*].resources}",
        ])
        .contains("widgets")
    {
        assert!(Instant::now() < deadline, "admin never aggregated widgets");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Damage two bootstrap roles, one of them protected from reconciliation, and restart.
    s.kubectl(&["patch", "clusterrole", "system:discovery", "--type=json", "-p",
        r#"[{"op":"replace","path":"/rules","value":[{"verbs":["get"],"nonResourceURLs":["/extra"]}]},{"op":"add","path":"/metadata/labels/mine","value":"yes"}]"#]);
    s.kubectl(&["patch", "clusterrole", "system:public-info-viewer", "--type=json", "-p",
        r#"[{"op":"replace","path":"/rules","value":[{"verbs":["get"],"nonResourceURLs":["/healthz"]}]},{"op":"replace","path":"/metadata/annotations/rbac.authorization.kubernetes.io~1autoupdate","value":"false"}]"#]);
    s.kubectl(&["delete", "clusterrolebinding", "system:basic-user"]);
    let s = Server::start_in(s.stop());
    let discovery = s.kubectl(&["get", "clusterrole", "system:discovery", "-o", "json"]);
    let discovery: serde_json::Value = serde_json::from_str(&discovery).unwrap();
    let urls: Vec<&str> = discovery["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r["nonResourceURLs"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|u| u.as_str())
        })
        .collect();
    assert!(
        urls.contains(&"/extra") && urls.contains(&"/api") && urls.contains(&"/version/"),
        "{urls:?}"
    );
    assert_eq!(discovery["metadata"]["labels"]["mine"], "yes");
    let public = s.kubectl(&[
        "get",
        "clusterrole",
        "system:public-info-viewer",
        "-o",
        "jsonpath={.rules[*].nonResourceURLs}",
    ]);
    assert_eq!(public, r#"["/healthz"]"#, "autoupdate=false is left alone");
    let basic = s.kubectl(&[
        "get",
        "clusterrolebinding",
        "system:basic-user",
        "-o",
        "jsonpath={.subjects[*].name}",
    ]);
    assert_eq!(basic, "system:authenticated");
}

#[test]
fn anonymous_requests_are_judged_by_rbac_unless_anonymous_auth_is_off() {
    let anonymous =
        |url: &str, path: &str| common::raw_https(&format!("{url}{path}"), "GET", &[], None);
    let s = Server::start();
    assert_eq!(anonymous(&s.url, "/healthz"), "200 ok");
    assert!(anonymous(&s.url, "/version").starts_with("200 {"));
    let api = anonymous(&s.url, "/api");
    assert!(
        api.starts_with("403 ")
            && api.contains(r#"forbidden: User \"system:anonymous\" cannot get path \"/api\""#),
        "{api}"
    );
    let ns = anonymous(&s.url, "/api/v1/namespaces");
    assert!(
        ns.starts_with("403 ") && ns.contains(r#"namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"#),
        "{ns}"
    );
    // Granting system:unauthenticated a role opens what it names.
    s.kubectl(&[
        "create",
        "clusterrolebinding",
        "anon-ns",
        "--clusterrole=view",
        "--group=system:unauthenticated",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !anonymous(&s.url, "/api/v1/namespaces").starts_with("200 ") {
        assert!(Instant::now() < deadline, "the binding never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    let closed = Server::start_with(&["--anonymous-auth=false"]);
    for path in ["/healthz", "/api/v1/namespaces"] {
        let got = anonymous(&closed.url, path);
        assert!(
            got.starts_with("401 ") && got.contains(r#""reason":"Unauthorized""#),
            "{path}: {got}"
        );
    }
}

#[test]
fn rbac_decision_table_through_subject_access_review() {
    let s = Server::start();
    let out = s.python(&tests_dir().join("python/rbac_table.py"), &[]);
    let summary = out
        .lines()
        .find(|l| l.starts_with("rbac table:"))
        .unwrap_or_else(|| panic!("{out}"));
    let rows: usize = summary.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(rows >= 200, "{summary}");
    assert!(summary.ends_with(" 0 failed"), "{out}");
}

#[test]
fn authorization_modes_always_deny_and_always_allow() {
    let deny = Server::start_with(&["--authorization-mode", "AlwaysDeny"]);
    // system:masters is allowed ahead of every mode.
    deny.kubectl(&["get", "namespaces"]);
    let err = deny.kubectl_fails(&["get", "pods", "-n", "default", "--as", "alice"]);
    assert_eq!(
        err.trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default": Everything is forbidden."#
    );
    let allow = Server::start_with(&["--authorization-mode", "AlwaysAllow"]);
    allow.kubectl(&["get", "pods", "-n", "default", "--as", "alice"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--authorization-mode", "RBAC,Magic"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"authorization-mode "Magic" is not a valid mode"#),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_approved_csr_gives_a_certificate_that_authenticates() {
    let c = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("jane.key");
    let csr = dir.path().join("jane.csr");
    let openssl = std::process::Command::new("openssl")
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
        .arg(&key)
        .arg("-out")
        .arg(&csr)
        .args(["-subj", "/CN=jane/O=devs"])
        .output()
        .expect("openssl runs (is it installed?)");
    assert!(
        openssl.status.success(),
        "{}",
        String::from_utf8_lossy(&openssl.stderr)
    );
    let request = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        std::fs::read(&csr).unwrap(),
    );
    c.apply(&format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: jane}}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: 86400\n  usages: [client auth]\n"
    ));
    // The requester is recorded; nothing is signed before approval.
    let user = c
        .server
        .kubectl(&["get", "csr", "jane", "-o", "jsonpath={.spec.username}"]);
    assert_eq!(user, "kubernetes-admin");
    c.server.kubectl(&["certificate", "approve", "jane"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let cert = loop {
        let got = c
            .server
            .kubectl(&["get", "csr", "jane", "-o", "jsonpath={.status.certificate}"]);
        if !got.is_empty() {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the approved CSR was never signed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let pem = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, cert).unwrap();
    let crt = dir.path().join("jane.crt");
    std::fs::write(&crt, &pem).unwrap();
    // A kubeconfig with jane's certificate: she is who the certificate says, in its groups.
    let kubeconfig = dir.path().join("jane.kubeconfig");
    std::fs::copy(c.server.kubeconfig(), &kubeconfig).unwrap();
    let as_jane = |args: &[&str]| {
        std::process::Command::new(common::kubectl_path())
            .env("KUBECONFIG", &kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    let set = as_jane(&[
        "config",
        "set-credentials",
        "jane",
        &format!("--client-certificate={}", crt.display()),
        &format!("--client-key={}", key.display()),
        "--embed-certs=true",
    ]);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let context = as_jane(&["config", "set-context", "--current", "--user=jane"]);
    assert!(context.status.success());
    let who = as_jane(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        r#"jane ["devs","system:authenticated"]"#,
        "{}",
        String::from_utf8_lossy(&who.stderr)
    );
    let denied = as_jane(&["get", "pods"]);
    assert!(
        String::from_utf8_lossy(&denied.stderr)
            .contains(r#"User "jane" cannot list resource "pods""#)
    );
    // A request a signer refuses fails instead.
    c.apply(&format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: not-a-node}}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n"
    ));
    c.server.kubectl(&["certificate", "approve", "not-a-node"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = c.server.kubectl(&[
            "get",
            "csr",
            "not-a-node",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Failed\")].message}",
        ]);
        if !got.is_empty() {
            assert_eq!(got, "subject organization is not system:nodes");
            break;
        }
        assert!(Instant::now() < deadline, "the refused CSR never failed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_kubelet_writes_its_own_node_and_reads_what_its_pods_use() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "n1-token,system:node:n1,uid-n1,system:nodes\n").unwrap();
    // The flags of a kubeadm cluster: Node,RBAC is the default mode; NodeRestriction is on.
    let s = Server::start_with(&[
        "--token-auth-file",
        file.to_str().unwrap(),
        "--enable-admission-plugins",
        "NodeRestriction",
    ]);
    for node in ["n1", "n2"] {
        s.kubectl_stdin(
            &["create", "-f", "-"],
            &format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {node}}}\n"),
        );
    }
    s.kubectl(&["create", "secret", "generic", "used", "--from-literal=k=v"]);
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "unused",
        "--from-literal=k=v",
    ]);
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: nginx}]\n  volumes: [{name: s, secret: {secretName: used}}]\n",
    );
    let ca = s.kubectl(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    let kubeconfig = tokens.path().join("n1.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: {}, certificate-authority-data: {ca}}}\nusers:\n- name: n1\n  user: {{token: n1-token}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: n1}}\ncurrent-context: c\n", s.url),
    )
    .unwrap();
    let kubelet = |args: &[&str]| {
        let out = std::process::Command::new(common::kubectl_path())
            .env("KUBECONFIG", &kubeconfig)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    };
    // Its own Node: read and labelled; not another's.
    assert!(kubelet(&["get", "node", "n1"]).0);
    let (ok, err) = kubelet(&["get", "node", "n2"]);
    assert!(!ok);
    assert_eq!(
        err,
        r#"Error from server (Forbidden): nodes "n2" is forbidden: User "system:node:n1" cannot get resource "nodes" in API group "" at the cluster scope: node 'n1' cannot read 'n2', only its own Node object"#
    );
    let (ok, err) = kubelet(&[
        "patch",
        "node",
        "n1",
        "-p",
        r#"{"metadata":{"labels":{"example.com/rack":"r1"}}}"#,
    ]);
    assert!(ok, "{err}");
    // kubectl would read n2 first; a raw PATCH reaches admission, which refuses it.
    let out = common::raw_https(
        &format!("{}/api/v1/nodes/n2", s.url),
        "PATCH",
        &[
            ("Authorization", "Bearer n1-token"),
            ("Content-Type", "application/merge-patch+json"),
        ],
        Some(r#"{"metadata":{"labels":{"example.com/rack":"r1"}}}"#),
    );
    assert!(
        out.starts_with("403 ") && out.contains(r#""message":"nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"""#),
        "{out}"
    );
    let (ok, err) = kubelet(&[
        "patch",
        "node",
        "n1",
        "-p",
        r#"{"metadata":{"labels":{"node-restriction.kubernetes.io/pool":"a"}}}"#,
    ]);
    assert!(!ok);
    assert!(
        err.ends_with("is not allowed to modify labels: node-restriction.kubernetes.io/pool"),
        "{err}"
    );
    let rack = s.kubectl(&["get", "node", "n2", "-o", "jsonpath={.metadata.labels}"]);
    assert!(!rack.contains("rack"), "{rack}");
    // Secrets: those its pods mount, once the graph has the pod; no others.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !kubelet(&["get", "secret", "used"]).0 {
        assert!(
            Instant::now() < deadline,
            "the node never reached its pod's secret"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, err) = kubelet(&["get", "secret", "unused"]);
    assert!(!ok);
    assert!(
        err.ends_with("no relationship found between node 'n1' and this object"),
        "{err}"
    );
    // Its Lease, and its pods' status.
    let lease = std::process::Command::new(common::kubectl_path())
        .env("KUBECONFIG", &kubeconfig)
        .args(["create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(
                b"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: n1, namespace: kube-node-lease}\nspec: {holderIdentity: n1}\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        lease.status.success(),
        "{}",
        String::from_utf8_lossy(&lease.stderr)
    );
    // Anything else: what RBAC gives (nothing here) — a node may not delete namespaces.
    let (ok, _) = kubelet(&["delete", "namespace", "default", "--wait=false"]);
    assert!(!ok);

    // NodeRestriction's other checks, through raw requests as the kubelet makes them.
    let as_node = |method: &str, path: &str, body: &str| {
        common::raw_https(
            &format!("{}{path}", s.url),
            method,
            &[
                ("Authorization", "Bearer n1-token"),
                ("Content-Type", "application/json"),
            ],
            Some(body),
        )
    };
    let n1_uid = s.kubectl(&["get", "node", "n1", "-o", "jsonpath={.metadata.uid}"]);
    let mirror = |owner: &str, volumes: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"static-n1","annotations":{{"kubernetes.io/config.mirror":"x"}}{owner}}},"spec":{{"nodeName":"n1","containers":[{{"name":"c","image":"i"}}]{volumes}}}}}"#
        )
    };
    let owner = format!(
        r#","ownerReferences":[{{"apiVersion":"v1","kind":"Node","name":"n1","uid":"{}","controller":true}}]"#,
        n1_uid.trim()
    );
    let pods = "/api/v1/namespaces/default/pods";
    let out = as_node("POST", pods, &mirror("", ""));
    assert!(
        out.contains("node \\\"n1\\\" can only create pods with an owner reference set to itself"),
        "{out}"
    );
    let out = as_node(
        "POST",
        pods,
        &mirror(
            &owner,
            r#","volumes":[{"name":"v","configMap":{"name":"m"}}]"#,
        ),
    );
    assert!(
        out.contains("node \\\"n1\\\" can not create pods that reference configmaps"),
        "{out}"
    );
    let out = as_node("POST", pods, &mirror(&owner, ""));
    assert!(out.starts_with("201 "), "{out}");
    // Tokens only for its own pods' accounts, bound to the pod.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p2}\nspec:\n  nodeName: n2\n  containers: [{name: c, image: nginx}]\n",
    );
    let uid = |pod: &str| {
        s.kubectl(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"])
            .trim()
            .to_string()
    };
    let token = |pod: &str, uid: &str| {
        as_node(
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            &format!(
                r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{{"boundObjectRef":{{"apiVersion":"v1","kind":"Pod","name":"{pod}","uid":"{uid}"}}}}}}"#
            ),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = token("p1", &uid("p1"));
        if out.starts_with("201 ") {
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = token("p2", &uid("p2"));
    assert!(out.starts_with("403 "), "{out}");
    let out = as_node(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}"#,
    );
    assert!(
        out.starts_with("403 ") && out.contains("node requested token not bound to a pod"),
        "{out}"
    );
    // Leases: its own, in kube-node-lease only.
    let out = as_node(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"n1"}}"#,
    );
    assert!(out.starts_with("403 "), "{out}");
}
