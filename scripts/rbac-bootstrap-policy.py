#!/usr/bin/env python3
"""Writes crates/kube/data/rbac/bootstrap-policy.txt from upstream's bootstrap-policy golden files.

Usage: rbac-bootstrap-policy.py DIR > crates/kube/data/rbac/bootstrap-policy.txt
where DIR holds kube-apiserver v1.36's plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata
(cluster-roles.yaml with default feature gates, cluster-role-bindings.yaml, controller-*.yaml,
namespace-*.yaml). Those files are upstream's record of what its RBAC post-start hook creates;
the output is our line format (read by crates/kube/src/auth/rbac/bootstrap.rs), one object per
header line and one rule or subject per indented line. Objects named system:openshift:* are a
distribution's additions, not upstream's, and are left out.
"""
import sys

import yaml

FILES = [
    "cluster-roles",
    "cluster-role-bindings",
    "controller-roles",
    "controller-role-bindings",
    "namespace-roles",
    "namespace-role-bindings",
]
DEFAULT_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
DEFAULT_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def words(values):
    return ",".join('""' if v == "" else v for v in values)


def main(folder):
    out = []
    for name in FILES:
        out.append(f"# {name}")
        for item in yaml.safe_load(open(f"{folder}/{name}.yaml"))["items"]:
            meta = item["metadata"]
            if meta["name"].startswith("system:openshift:"):
                continue
            labels = dict(meta.get("labels") or {})
            annotations = meta.get("annotations") or {}
            assert annotations == DEFAULT_ANNOTATIONS, meta
            for k, v in DEFAULT_LABELS.items():
                assert labels.pop(k) == v, meta
            kind = item["kind"].lower()
            full = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
            if "roleRef" in item:
                ref = item["roleRef"]
                out.append(f"{kind} {full} -> {ref['kind']} {ref['name']}")
            else:
                out.append(f"{kind} {full}")
            for k, v in sorted(labels.items()):
                out.append(f"  label {k}={v}")
            for sel in (item.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
                assert list(sel) == ["matchLabels"], sel
                out.append("  aggregate " + ",".join(f"{k}={v}" for k, v in sel["matchLabels"].items()))
            for rule in item.get("rules") or []:
                parts = ["  allow", words(rule["verbs"])]
                for key, field in [("groups", "apiGroups"), ("resources", "resources"),
                                   ("names", "resourceNames"), ("urls", "nonResourceURLs")]:
                    if rule.get(field):
                        parts.append(f"{key}={words(rule[field])}")
                assert set(rule) <= {"verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"}
                out.append(" ".join(parts))
            for s in item.get("subjects") or []:
                if s["kind"] == "ServiceAccount":
                    out.append(f"  ServiceAccount {s['namespace']}/{s['name']}")
                else:
                    assert s.get("apiGroup") == "rbac.authorization.k8s.io", s
                    out.append(f"  {s['kind']} {s['name']}")
    print("# The RBAC objects kube-apiserver v1.36 creates and reconciles at start (its bootstrap")
    print("# policy), written by scripts/rbac-bootstrap-policy.py. Every object carries the label")
    print("# kubernetes.io/bootstrapping=rbac-defaults and the annotation")
    print("# rbac.authorization.kubernetes.io/autoupdate=true. Lines:")
    print("#   <kind> [<namespace>/]<name> [-> <roleRef kind> <roleRef name>]")
    print("#     label k=v | aggregate k=v,... (one clusterRoleSelector)")
    print("#     allow <verbs> [groups=..] [resources=..] [names=..] [urls=..]   (\"\" is the core group)")
    print("#     User <name> | Group <name> | ServiceAccount <namespace>/<name>")
    print("\n".join(out))


main(sys.argv[1])
