#!/usr/bin/env bash
# Server CPU per request of two builds side by side (first written for managed fields, now the
# before/after comparison of any change on the request path): ConfigMap creates (8 clients),
# unconditional ConfigMap updates (`mixed --updates-only`, 8 clients, over 1,000 objects),
# Deployment creates, and the controller-like mix (`mixed`: 60 % GETs, LISTs by label, updates,
# creates and deletes; 8 clients). BEFORE and AFTER name two ironplane binaries
# (AFTER defaults to this tree's release build); runs alternate between them, a fresh server
# each, RUNS times (default 3); prints medians and AFTER/BEFORE ratios. BEFORE_FLAGS and
# AFTER_FLAGS add flags to each side's command line (`--controllers=-garbage-collector-controller`
# turns the in-process controllers off, for a build that had none).
# Usage: BEFORE=path/to/old/ironplane scripts/bench-managed-fields.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
: "${BEFORE:?BEFORE must name the ironplane binary to compare with}"
release=${CARGO_TARGET_DIR:-target}/release
if [ -z "${AFTER:-}" ]; then
  cargo build --release -p ironplane -p ironplane-bench >/dev/null
  AFTER=$release/ironplane
fi
bench=${BENCH:-$release/ironplane-bench}
mkdir -p "$OUT"
work=$(mktemp -d)
port=19448
for i in $(seq 1 "$RUNS"); do
  for side in before after; do
    if [ "$side" = before ]; then bin=$BEFORE; flags=${BEFORE_FLAGS:-}; else bin=$AFTER; flags=${AFTER_FLAGS:-}; fi
    dir="$work/$side-$i"
    # shellcheck disable=SC2086 # the flags are words
    "$bin" --secure-port "$port" --data-dir "$dir" $flags >"$dir.log" 2>&1 &
    PID=$!
    KC="$dir/kubeconfig"
    for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
    until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.1; done
    "$bench" --kubeconfig "$KC" create --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/mf-$side-create-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" mixed --updates-only --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/mf-$side-update-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" create --kind deployment --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/mf-$side-deployment-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" mixed --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/mf-$side-mixed-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
figures = {}
for side in ("before", "after"):
    for what in ("create", "update", "deployment", "mixed"):
        rs = [json.load(open(f"{out}/mf-{side}-{what}-{i}.json")) for i in range(1, runs + 1)]
        label = "update" if what == "update" else None
        row = lambda r: next(x for x in r["rows"] if x["label"] == label) if label else r["rows"][0]
        # The mix counts all its requests together: its `all` row (summing every row would
        # count them twice, `all` being the sum of the others).
        per_second = (lambda r: next(x for x in r["rows"] if x["label"] == "all")["per_second"]) \
            if what == "mixed" else (lambda r: row(r)["per_second"])
        figures[(side, what, "per s")] = statistics.median(per_second(r) for r in rs)
        figures[(side, what, "cpu ms")] = statistics.median(
            r["figures"]["server_cpu_ms_per_request"] for r in rs)
print(f"{'figure':<28}{'before':>10}{'after':>10}{'after/before':>14}")
for what in ("create", "update", "deployment", "mixed"):
    for f in ("per s", "cpu ms"):
        b, a = figures[("before", what, f)], figures[("after", what, f)]
        print(f"{what + ' ' + f:<28}{b:>10.3f}{a:>10.3f}{a / b:>14.2f}")
PY
