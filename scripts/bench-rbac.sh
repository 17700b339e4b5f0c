#!/usr/bin/env bash
# Throughput of a plain user (a bearer token, not system:masters) under Node,RBAC (the default) with 1,000 Roles and
# 1,000 RoleBindings present in its namespace, next to the same user under
# --authorization-mode AlwaysAllow: ConfigMap creates, and the controller-like mix (GET 60 %).
# Each run starts a fresh release Ironplane per mode; RUNS (default 3); prints medians.
# Usage: scripts/bench-rbac.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
cargo build --release -p ironplane -p ironplane-bench >/dev/null
release=${CARGO_TARGET_DIR:-target}/release
bench=$release/ironplane-bench
mkdir -p "$OUT"
work=$(mktemp -d)
port=19447
echo "bench-token,bench-user,uid-bench" >"$work/tokens.csv"
# The objects: the namespace, 1,000 Roles and RoleBindings for other users, and the bench
# user's binding to `edit`.
python3 - "$work/objects.json" <<'PY'
import json, sys
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-rbac"}}]
for i in range(1000):
    items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                  "metadata": {"name": f"role-{i}", "namespace": "bench-rbac"},
                  "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
                            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [f"d-{i}"], "verbs": ["update"]}]})
    items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                  "metadata": {"name": f"binding-{i}", "namespace": "bench-rbac"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"role-{i}"},
                  "subjects": [{"kind": "User", "name": f"user-{i}"}, {"kind": "Group", "name": f"team-{i % 50}"}]})
items.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "bench-user-edit", "namespace": "bench-rbac"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
              "subjects": [{"kind": "User", "name": "bench-user"}]})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
PY
for i in $(seq 1 "$RUNS"); do
  for mode in AlwaysAllow Node,RBAC; do
    dir="$work/$mode-$i"
    "$release/ironplane" --secure-port "$port" --data-dir "$dir" \
      --token-auth-file "$work/tokens.csv" --authorization-mode "$mode" >"$dir.log" 2>&1 &
    PID=$!
    KC="$dir/kubeconfig"
    for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
    until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.1; done
    KUBECONFIG=$KC kubectl create -f "$work/objects.json" >/dev/null
    # The user's kubeconfig: the server and CA of the admin's, the bench token.
    python3 - "$KC" "$dir/user.kubeconfig" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["users"] = [{"name": "bench-user", "user": {"token": "bench-token"}}]
for c in cfg["contexts"]:
    c["context"]["user"] = "bench-user"
yaml.safe_dump(cfg, open(sys.argv[2], "w"))
PY
    UKC="$dir/user.kubeconfig"
    until [ "$(KUBECONFIG=$UKC kubectl auth can-i create configmaps -n bench-rbac)" = yes ]; do sleep 0.1; done
    "$bench" --kubeconfig "$UKC" --namespace bench-rbac create --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/rbac-$mode-create-$i.json" >/dev/null
    "$bench" --kubeconfig "$UKC" --namespace bench-rbac mixed --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/rbac-$mode-mixed-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def med(xs): return statistics.median(xs)
base = {}
for mode in ("AlwaysAllow", "Node,RBAC"):
    c = [json.load(open(f"{out}/rbac-{mode}-create-{i}.json")) for i in range(1, runs + 1)]
    m = [json.load(open(f"{out}/rbac-{mode}-mixed-{i}.json")) for i in range(1, runs + 1)]
    row = lambda r, label: next(x for x in r["rows"] if x["label"] == label)
    figures = {
        "creates/s": med(r["rows"][0]["per_second"] for r in c),
        "create CPU ms": med(r["figures"]["server_cpu_ms_per_request"] for r in c),
        "mixed ops/s": med(row(r, "all")["per_second"] for r in m),
        "get median ms": med(row(r, "get")["median_ms"] for r in m),
        "mixed CPU ms": med(r["figures"]["server_cpu_ms_per_request"] for r in m),
    }
    errors = sum(r["rows"][0]["errors"] for r in c) + sum(row(r, "all")["errors"] for r in m)
    base.setdefault("AlwaysAllow", figures)
    ratio = "  ".join(f"{k} {v:.3f} ({v / base['AlwaysAllow'][k]:.2f}x)" for k, v in figures.items())
    print(f"{mode:12s} {ratio}  errors {errors}")
PY
