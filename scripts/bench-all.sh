#!/usr/bin/env bash
# Runs every ironplane-bench scenario against a fresh release Ironplane, three times each, and
# prints median-of-runs figures for BENCHMARKS.md. Results (JSON per run) go to $OUT.
# Usage: scripts/bench-all.sh [OUT]   (takes about 10 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
if [ -z "${SUMMARY_ONLY:-}" ]; then
cargo build --release -p ironplane -p ironplane-bench >/dev/null
bin=target/release/ironplane
bench=target/release/ironplane-bench
mkdir -p "$OUT"
work=$(mktemp -d)
port=19443

start() { # a fresh server in $work/$1; sets PID and KC
  "$bin" --secure-port "$port" --data-dir "$work/$1" >"$work/$1.log" 2>&1 &
  PID=$!
  KC="$work/$1/kubeconfig"
  for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
  sleep 0.5
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }

# Start-up: launch to /readyz 200; the first run makes the data dir, the rest restart on it.
"$bench" --kubeconfig "$work/startup/kubeconfig" startup \
  --start-cmd "exec $bin --secure-port $port --data-dir $work/startup" --runs 10 -q \
  --json "$OUT/startup.json" >/dev/null

for i in $(seq 1 "$RUNS"); do
  start "s$i"
  "$bench" --kubeconfig "$KC" memory --server-pid "$PID" --objects 10000 -q --json "$OUT/memory-$i.json" >/dev/null
  "$bench" --kubeconfig "$KC" create --concurrency 8 --duration 10s --server-pid "$PID" -q --json "$OUT/create-$i.json" >/dev/null
  "$bench" --kubeconfig "$KC" mixed --concurrency 16 --duration 10s --server-pid "$PID" -q --json "$OUT/mixed-$i.json" >/dev/null
  for n in 1000 10000 50000; do
    "$bench" --kubeconfig "$KC" list --objects "$n" --iterations 5 --namespace "list-$n" --keep --server-pid "$PID" -q --json "$OUT/list-$n-$i.json" >/dev/null
  done
  stop
  start "w$i"
  for w in 100 1000 10000; do
    "$bench" --kubeconfig "$KC" watch --watchers "$w" --rate 20 --duration 10s --server-pid "$PID" -q --json "$OUT/watch-$w-$i.json" >/dev/null
  done
  stop
done
rm -rf "$work"
fi

python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
def load(pattern):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, pattern)))]
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")
def rows(results, label, key):
    return med([r.get(key) for res in results for r in res["rows"] if r["label"] == label])
def fig(results, name):
    return med([res["figures"].get(name) for res in results])
s = load("startup.json")[0]
print("startup:", {r["label"]: (r["median_ms"], r["p99_ms"], r["count"]) for r in s["rows"]}, {k: round(v, 1) for k, v in s["figures"].items() if "server" in k})
m = load("memory-*.json")
print("memory:", {k: round(fig(m, k), 1) for k in m[0]["figures"] if "rss" in k})
c = load("create-*.json")
print(f"create c=8: {rows(c,'create','per_second'):.0f}/s, median {rows(c,'create','median_ms'):.2f} ms, p99 {rows(c,'create','p99_ms'):.2f} ms, server CPU {fig(c,'server_cpu_ms_per_request'):.3f} ms/req, bench CPU {fig(c,'bench_cpu_percent'):.0f}%, RSS peak {fig(c,'server_rss_peak_mib'):.0f} MiB")
x = load("mixed-*.json")
print("mixed c=16:", {r["label"]: (round(rows(x, r["label"], "per_second")), round(rows(x, r["label"], "median_ms"), 2), round(rows(x, r["label"], "p99_ms"), 2)) for r in x[0]["rows"]}, f"server CPU {fig(x,'server_cpu_ms_per_request'):.3f} ms/req")
for n in (1000, 10000, 50000):
    l = load(f"list-{n}-*.json")
    print(f"list {n}:", {r["label"]: (round(rows(l, r["label"], "median_ms"), 1), round(rows(l, r["label"], "p99_ms"), 1), round(rows(l, r["label"], "bytes_per_second") / 2**20)) for r in l[0]["rows"]}, f"RSS {fig(l,'server_rss_peak_mib'):.0f} MiB")
for w in (100, 1000, 10000):
    ws = load(f"watch-{w}-*.json")
    print(f"watch {w}:", f"delivery median {rows(ws,'delivery','median_ms'):.2f} ms p99 {rows(ws,'delivery','p99_ms'):.2f} ms max {rows(ws,'delivery','max_ms'):.1f} ms;",
          f"lost {fig(ws,'events_lost'):.0f} of {fig(ws,'events_expected'):.0f}; writes {rows(ws,'write','per_second'):.1f}/s;",
          f"server {fig(ws,'server_cpu_us_per_event'):.1f} us/event; RSS peak {fig(ws,'server_rss_peak_mib'):.0f} MiB; bench CPU {fig(ws,'bench_cpu_percent'):.0f}%")
PY
