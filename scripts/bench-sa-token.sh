#!/usr/bin/env bash
# Requests authenticated by a service-account token: the controller-like mix (GET 60 %) as a
# service account bound to `edit`, with the token from `kubectl create token`, against two
# builds of Ironplane given as BIN_A and BIN_B (default: both target/release/ironplane), runs
# interleaved. RUNS (default 3); prints medians and B/A ratios.
# Usage: BIN_A=old BIN_B=new scripts/bench-sa-token.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
cargo build --release -p ironplane -p ironplane-bench >/dev/null
release=${CARGO_TARGET_DIR:-target}/release
bench=$release/ironplane-bench
BIN_A=${BIN_A:-$release/ironplane}
BIN_B=${BIN_B:-$release/ironplane}
mkdir -p "$OUT"
work=$(mktemp -d)
port=19453
for i in $(seq 1 "$RUNS"); do
  for side in A B; do
    bin=BIN_$side
    dir="$work/$side-$i"
    "${!bin}" --secure-port "$port" --data-dir "$dir" >"$dir.log" 2>&1 &
    PID=$!
    KC="$dir/kubeconfig"
    for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
    until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.1; done
    KUBECONFIG=$KC kubectl create namespace bench-sa >/dev/null
    KUBECONFIG=$KC kubectl create serviceaccount robot -n bench-sa >/dev/null
    KUBECONFIG=$KC kubectl create rolebinding robot-edit -n bench-sa --clusterrole=edit \
      --serviceaccount=bench-sa:robot >/dev/null
    TOKEN=$(KUBECONFIG=$KC kubectl create token robot -n bench-sa --duration=1h)
    python3 - "$KC" "$dir/sa.kubeconfig" "$TOKEN" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["users"] = [{"name": "robot", "user": {"token": sys.argv[3]}}]
for c in cfg["contexts"]:
    c["context"]["user"] = "robot"
yaml.safe_dump(cfg, open(sys.argv[2], "w"))
PY
    SKC="$dir/sa.kubeconfig"
    until [ "$(KUBECONFIG=$SKC kubectl auth can-i create configmaps -n bench-sa)" = yes ]; do sleep 0.1; done
    "$bench" --kubeconfig "$SKC" --namespace bench-sa mixed --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/sa-$side-mixed-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
base = {}
for side in ("A", "B"):
    m = [json.load(open(f"{out}/sa-{side}-mixed-{i}.json")) for i in range(1, runs + 1)]
    row = lambda r, label: next(x for x in r["rows"] if x["label"] == label)
    figures = {
        "mixed ops/s": statistics.median(row(r, "all")["per_second"] for r in m),
        "get median ms": statistics.median(row(r, "get")["median_ms"] for r in m),
        "CPU ms/op": statistics.median(r["figures"]["server_cpu_ms_per_request"] for r in m),
    }
    errors = sum(row(r, "all")["errors"] for r in m)
    base.setdefault("A", figures)
    print(f"{side}  " + "  ".join(f"{k} {v:.3f} ({v / base['A'][k]:.2f}x)" for k, v in figures.items()) + f"  errors {errors}")
PY
