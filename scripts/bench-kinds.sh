#!/usr/bin/env bash
# Server CPU per create for three kinds of object, with full defaulting and validation:
# small ConfigMaps, realistic three-container Pods, Deployments of that pod. Each run starts a
# fresh release Ironplane; RUNS (default 3) runs; prints the median of the runs per kind.
# Usage: scripts/bench-kinds.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
cargo build --release -p ironplane -p ironplane-bench >/dev/null
bin=target/release/ironplane
bench=target/release/ironplane-bench
mkdir -p "$OUT"
work=$(mktemp -d)
port=19444
for i in $(seq 1 "$RUNS"); do
  for kind in configmap pod deployment; do
    "$bin" --secure-port "$port" --data-dir "$work/$kind-$i" >"$work/$kind-$i.log" 2>&1 &
    PID=$!
    KC="$work/$kind-$i/kubeconfig"
    for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
    sleep 0.5
    "$bench" --kubeconfig "$KC" create --kind "$kind" --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/create-$kind-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
for kind in ("configmap", "pod", "deployment"):
    rs = [json.load(open(f"{out}/create-{kind}-{i}.json")) for i in range(1, runs + 1)]
    rate = statistics.median(r["rows"][0]["per_second"] for r in rs)
    cpu = statistics.median(r["figures"]["server_cpu_ms_per_request"] for r in rs)
    p99 = statistics.median(r["rows"][0]["p99_ms"] for r in rs)
    print(f"{kind:10s} {rate:8.0f} creates/s  {cpu:.3f} ms server CPU each  p99 {p99:.2f} ms"
          f"  (runs: {', '.join(str(round(r['figures']['server_cpu_ms_per_request'], 3)) for r in rs)})")
PY
