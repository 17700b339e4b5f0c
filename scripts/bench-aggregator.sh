#!/usr/bin/env bash
# The latency the aggregation proxy adds to a GET: `ironplane-bench aggregator` against a fresh
# release Ironplane per run (RUNS, default 3; REQUESTS per path, default 2000); prints the
# medians over the runs of p50 and p99 per path and of the proxy's added p50/p99.
# IRONPLANE and BENCH name prebuilt binaries instead of building them.
# Usage: [IRONPLANE=bin BENCH=bin] scripts/bench-aggregator.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-2000}
if [ -z "${IRONPLANE:-}" ] || [ -z "${BENCH:-}" ]; then
  cargo build --release -p ironplane -p ironplane-bench >/dev/null
fi
bench=${BENCH:-${CARGO_TARGET_DIR:-target}/release/ironplane-bench}
bin=${IRONPLANE:-${CARGO_TARGET_DIR:-target}/release/ironplane}
mkdir -p "$OUT"
work=$(mktemp -d)
port=19446
for i in $(seq 1 "$RUNS"); do
  dir="$work/run-$i"
  "$bin" --secure-port "$port" --data-dir "$dir" >"$dir.log" 2>&1 &
  PID=$!
  KC="$dir/kubeconfig"
  for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
  sleep 0.5
  "$bench" --kubeconfig "$KC" aggregator --requests "$REQUESTS" -q \
    --json "$OUT/aggregator-$i.json" >/dev/null
  kill -TERM "$PID"; wait "$PID" || true
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
rs = [json.load(open(f"{out}/aggregator-{i}.json")) for i in range(1, runs + 1)]
med = lambda xs: statistics.median(xs)
for label in ["direct", "proxied", "built-in"]:
    rows = [next(r for r in x["rows"] if r["label"] == label) for x in rs]
    key = label.replace("-", "_")
    print(f"{label:9s} p50 {med(r['median_ms'] for r in rows):.3f} ms"
          f"  p90 {med(x['figures'][key + '_p90_ms'] for x in rs):.3f} ms"
          f"  p99 {med(r['p99_ms'] for r in rows):.3f} ms"
          f"  errors {sum(r['errors'] for r in rows)}"
          f"  (p50 runs: {', '.join(str(r['median_ms']) for r in rows)})")
for q in ["p50", "p99"]:
    xs = [x["figures"][f"proxy_added_{q}_ms"] for x in rs]
    print(f"proxy added {q}: {med(xs):.3f} ms (runs: {', '.join(f'{v:.3f}' for v in xs)})")
PY
