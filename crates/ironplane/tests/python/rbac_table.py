"""An RBAC decision table checked through SubjectAccessReview with the Python client.

The expected answers are written here from Kubernetes' documented RBAC rules and upstream's
bootstrap policy (the user-facing roles view/edit/admin/cluster-admin as the RBAC documentation
describes them, system:basic-user, system:discovery, system:public-info-viewer), not computed
by Ironplane's code: rule matching (wildcards, `*/subresource`, resourceNames, nonResourceURL
prefixes), RoleBindings confined to their namespace, ClusterRoleBindings everywhere, service
accounts and groups as subjects, and a binding to a missing role granting nothing.
"""
import time

from kubernetes import client, config

RBAC = "rbac.authorization.k8s.io"

# (group, resource, subresource) the table asks about, with what the documented user-facing
# roles allow on each inside a namespace: "r" = view reads it, "w" = edit writes it, "e" =
# edit reads it but view does not (secrets, exec), "a" = admin only (RBAC objects), "" =
# none of them writes it (quota is read-only for all three).
RESOURCES = [
    ("", "pods", "", "rw"),
    ("", "pods", "log", "r"),
    ("", "pods", "exec", "ew"),
    ("", "services", "", "rw"),
    ("", "configmaps", "", "rw"),
    ("", "secrets", "", "ew"),
    ("apps", "deployments", "", "rw"),
    ("apps", "deployments", "scale", "rw"),
    ("batch", "jobs", "", "rw"),
    ("", "resourcequotas", "", "r"),
    (RBAC, "roles", "", "a"),
    (RBAC, "rolebindings", "", "a"),
]
VERBS = ["get", "list", "create", "delete"]


def view_allows(verb, flags):
    return verb in ("get", "list") and "r" in flags


def edit_allows(verb, flags):
    if verb in ("get", "list"):
        return "r" in flags or "e" in flags
    return "w" in flags


def admin_allows(verb, flags):
    return edit_allows(verb, flags) or "a" in flags


def setup(rbac, core):
    for ns in ("team-a", "team-b"):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    core.create_namespaced_service_account("team-a", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="builder")))

    def rb(ns, name, kind, role, subjects):
        rbac.create_namespaced_role_binding(ns, {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": subjects,
        })

    user = lambda n: {"kind": "User", "name": n, "apiGroup": RBAC}
    group = lambda n: {"kind": "Group", "name": n, "apiGroup": RBAC}
    rb("team-a", "alice-edit", "ClusterRole", "edit", [user("alice")])
    rb("team-a", "bob-view", "ClusterRole", "view", [user("bob")])
    rb("team-b", "bob-admin", "ClusterRole", "admin", [user("bob")])
    # A Role with a named resource and `*/scale`, bound to a service account.
    rbac.create_namespaced_role("team-a", {
        "metadata": {"name": "builder"},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["build-cfg"], "verbs": ["get", "update"]},
            {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["update"]},
        ],
    })
    rb("team-a", "builder", "Role", "builder", [{"kind": "ServiceAccount", "name": "builder", "namespace": "team-a"}])
    # A cluster-wide grant to a group, and non-resource URLs with a prefix.
    rbac.create_cluster_role({"metadata": {"name": "node-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]},
    ]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": "ops-node-reader"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "node-reader"},
        "subjects": [group("ops")],
    })
    # A binding to a role that does not exist grants nothing.
    rb("team-a", "eve-missing", "Role", "no-such-role", [user("eve")])


def rows():
    """(user, groups, attributes, expected) — attributes are resource or non-resource."""
    out = []
    authed = ["system:authenticated"]
    for ns in ("team-a", "team-b", "team-c"):
        for group, resource, sub, flags in RESOURCES:
            for verb in VERBS:
                attrs = {"namespace": ns, "verb": verb, "group": group, "resource": resource, "subresource": sub}
                out.append(("alice", authed, attrs, ns == "team-a" and edit_allows(verb, flags)))
                bob = (ns == "team-a" and view_allows(verb, flags)) or (ns == "team-b" and admin_allows(verb, flags))
                out.append(("bob", authed, attrs, bob))
    # Cluster-scoped reads: nobody's RoleBinding reaches them; the ops group's binding does.
    for user, groups, expected in (("alice", authed, False), ("bob", authed, False), ("carol", ["ops"] + authed, True)):
        for verb, want in (("get", expected), ("list", expected), ("delete", False)):
            out.append((user, groups, {"verb": verb, "resource": "nodes", "name": "n1" if verb != "list" else ""}, want))
    # A service account: resourceNames and `*/scale`, in its own namespace only.
    sa = "system:serviceaccount:team-a:builder"
    sa_groups = ["system:serviceaccounts", "system:serviceaccounts:team-a"] + authed
    for ns in ("team-a", "team-b"):
        inside = ns == "team-a"
        for verb, name, want in (("get", "build-cfg", inside), ("update", "build-cfg", inside),
                                 ("get", "other", False), ("list", "", False), ("delete", "build-cfg", False)):
            out.append((sa, sa_groups, {"namespace": ns, "verb": verb, "resource": "configmaps", "name": name}, want))
        for group, resource in (("apps", "deployments"), ("apps", "statefulsets"), ("", "replicationcontrollers")):
            out.append((sa, sa_groups, {"namespace": ns, "verb": "update", "group": group, "resource": resource, "subresource": "scale", "name": "x"}, inside))
            out.append((sa, sa_groups, {"namespace": ns, "verb": "update", "group": group, "resource": resource, "name": "x"}, False))
    # The same user name without the binding's groups is still the service account (bindings
    # name users); another namespace's account of the same name is not.
    out.append((sa, [], {"namespace": "team-a", "verb": "get", "resource": "configmaps", "name": "build-cfg"}, True))
    out.append(("system:serviceaccount:team-b:builder", sa_groups, {"namespace": "team-a", "verb": "get", "resource": "configmaps", "name": "build-cfg"}, False))
    # A binding to a missing role.
    for verb in VERBS:
        out.append(("eve", authed, {"namespace": "team-a", "verb": verb, "resource": "pods"}, False))
    # system:masters may do anything; cluster-admin is bound to it.
    for verb in ("get", "create", "escalate", "impersonate"):
        out.append(("root", ["system:masters"], {"verb": verb, "group": "*", "resource": "anything"}, True))
    # Everybody authenticated: access reviews about themselves (system:basic-user).
    for user, groups in (("alice", authed), ("nobody", authed)):
        for resource, want in (("selfsubjectaccessreviews", True), ("selfsubjectrulesreviews", True),
                               ("subjectaccessreviews", False), ("localsubjectaccessreviews", False)):
            out.append((user, groups, {"verb": "create", "group": "authorization.k8s.io", "resource": resource, "namespace": "team-a" if resource.startswith("local") else ""}, want))
    # Non-resource URLs: system:discovery and system:public-info-viewer; the ops prefix rule.
    anonymous = ("system:anonymous", ["system:unauthenticated"])
    for path, authed_want, anon_want in (("/healthz", True, True), ("/livez", True, True), ("/readyz", True, True),
                                         ("/version", True, True), ("/version/", True, True), ("/api", True, False),
                                         ("/apis/apps/v1", True, False), ("/openapi/v2", True, False),
                                         ("/metrics", False, False), ("/logs/x", False, False), ("/healthz/etcd", False, False)):
        out.append(("alice", authed, {"path": path, "verb": "get"}, authed_want))
        out.append((anonymous[0], anonymous[1], {"path": path, "verb": "get"}, anon_want))
        out.append(("alice", authed, {"path": path, "verb": "post"}, False))
    for path, want in (("/metrics", True), ("/logs/kube.log", True), ("/logs", False), ("/metricsx", False)):
        out.append(("carol", ["ops"] + authed, {"path": path, "verb": "get"}, want))
    # Anonymous users hold nothing on resources.
    for verb in VERBS:
        out.append((anonymous[0], anonymous[1], {"namespace": "team-a", "verb": verb, "resource": "pods"}, False))
    return out


def review(authz, user, groups, attrs):
    spec = {"user": user, "groups": groups}
    if "path" in attrs:
        spec["nonResourceAttributes"] = attrs
    else:
        spec["resourceAttributes"] = attrs
    r = authz.create_subject_access_review({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
    return r.status


def main():
    config.load_kube_config()
    rbac = client.RbacAuthorizationV1Api()
    core = client.CoreV1Api()
    authz = client.AuthorizationV1Api()
    setup(rbac, core)
    table = rows()
    # The index follows the objects through a watch: wait until the last binding counts.
    deadline = time.time() + 10
    while not review(authz, "carol", ["ops"], {"verb": "list", "resource": "nodes"}).allowed:
        assert time.time() < deadline, "the RBAC objects never took effect"
        time.sleep(0.05)
    failed = 0
    for user, groups, attrs, expected in table:
        status = review(authz, user, groups, attrs)
        if status.allowed != expected:
            failed += 1
            print(f"MISMATCH {user} {groups} {attrs}: expected {expected}, got {status.allowed} ({status.reason})")
    # Allowed answers name their source; a missing role is the reason of a refusal.
    ok = review(authz, "alice", ["system:authenticated"], {"namespace": "team-a", "verb": "create", "resource": "pods"})
    expected_reason = 'RBAC: allowed by RoleBinding "alice-edit/team-a" of ClusterRole "edit" to User "alice"'
    if ok.reason != expected_reason:
        failed += 1
        print(f"MISMATCH reason: {ok.reason!r}")
    missing = review(authz, "eve", ["system:authenticated"], {"namespace": "team-a", "verb": "get", "resource": "pods"})
    if missing.reason != 'RBAC: role.rbac.authorization.k8s.io "no-such-role" not found':
        failed += 1
        print(f"MISMATCH missing-role reason: {missing.reason!r}")
    print(f"rbac table: {len(table)} rows, {failed} failed")


if __name__ == "__main__":
    main()
