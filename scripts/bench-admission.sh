#!/usr/bin/env bash
# Create throughput and server CPU per ConfigMap create behind each admission load: nothing
# beyond the default plugins, one ValidatingAdmissionPolicy, one validating webhook served by
# the bench on loopback. With BASELINE=<path to an older ironplane binary>, the no-admission
# case is also run on it, interleaved run by run with the current build, for an A/B figure.
# Each run starts a fresh release Ironplane; RUNS (default 3); prints medians of the runs.
# Usage: [BASELINE=bin] scripts/bench-admission.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
cargo build --release -p ironplane -p ironplane-bench >/dev/null
# Built where cargo builds: CARGO_TARGET_DIR when set, the repository's target/ otherwise.
release=${CARGO_TARGET_DIR:-target}/release
bench=$release/ironplane-bench
mkdir -p "$OUT"
work=$(mktemp -d)
port=19445
cases="current:none current:policy current:webhook"
if [ -n "${BASELINE:-}" ]; then cases="baseline:none $cases"; fi
for i in $(seq 1 "$RUNS"); do
  for c in $cases; do
    build=${c%%:*}; load=${c##*:}
    bin=$release/ironplane
    if [ "$build" = baseline ]; then bin=$BASELINE; fi
    dir="$work/$build-$load-$i"
    "$bin" --secure-port "$port" --data-dir "$dir" >"$dir.log" 2>&1 &
    PID=$!
    KC="$dir/kubeconfig"
    for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
    sleep 0.5
    "$bench" --kubeconfig "$KC" create --admission "$load" --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/admission-$build-$load-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" "$cases" <<'PY'
import json, statistics, sys
out, runs, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
for c in cases:
    build, load = c.split(":")
    rs = [json.load(open(f"{out}/admission-{build}-{load}-{i}.json")) for i in range(1, runs + 1)]
    rate = statistics.median(r["rows"][0]["per_second"] for r in rs)
    cpu = statistics.median(r["figures"]["server_cpu_ms_per_request"] for r in rs)
    med = statistics.median(r["rows"][0]["median_ms"] for r in rs)
    p99 = statistics.median(r["rows"][0]["p99_ms"] for r in rs)
    print(f"{build:8s} {load:8s} {rate:8.0f} creates/s  {cpu:.3f} ms server CPU each  median {med:.2f} ms  p99 {p99:.2f} ms"
          f"  (runs: {', '.join(str(round(r['figures']['server_cpu_ms_per_request'], 3)) for r in rs)})")
PY
