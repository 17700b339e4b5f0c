#!/usr/bin/env bash
# Watch fan-out, build against build: for each round, a fresh server of each build in turn (its
# embedded store on /dev/shm), then `ironplane-bench watch` with each watcher count; prints the
# median of the rounds per build and count.
# Usage: BINS="before=PATH after=PATH" [WATCHERS="1000 10000"] [RUNS=3] [DURATION=10s]
#        [WATCH_ARGS="--protobuf"] scripts/bench-watch.sh BENCH OUT
set -euo pipefail
BENCH=$1
OUT=$2
BINS=${BINS:?BINS=\"name=path ...\"}
WATCHERS=${WATCHERS:-1000 10000}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
# Extra arguments of `ironplane-bench watch`, split on spaces.
read -r -a watch_args <<<"${WATCH_ARGS:-}"
mkdir -p "$OUT"
base=/dev/shm
[ -w "$base" ] || base=${TMPDIR:-/tmp}
port=19543

for i in $(seq 1 "$RUNS"); do
  for entry in $BINS; do
    name=${entry%%=*}
    bin=${entry#*=}
    work=$(mktemp -d "$base/bench-watch.XXXXXX")
    "$bin" --secure-port "$port" --data-dir "$work" >"$OUT/$name-$i.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 500); do [ -f "$work/kubeconfig" ] && break; sleep 0.01; done
    sleep 1
    for w in $WATCHERS; do
      "$BENCH" --kubeconfig "$work/kubeconfig" watch --watchers "$w" --rate 20 \
        --duration "$DURATION" --server-pid "$pid" "${watch_args[@]}" -q --json "$OUT/$name-w$w-$i.json" >/dev/null
    done
    kill -TERM "$pid"
    wait "$pid" || true
    rm -rf "$work"
  done
done

python3 - "$OUT" "$BINS" "$WATCHERS" <<'PY'
import glob, json, os, statistics, sys
out, bins, watchers = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")
for w in watchers:
    for entry in bins:
        name = entry.split("=", 1)[0]
        runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"{name}-w{w}-*.json")))]
        row = lambda key: med([r.get(key) for res in runs for r in res["rows"] if r["label"] == "delivery"])
        fig = lambda key: med([res["figures"].get(key) for res in runs])
        writes = med([r.get("per_second") for res in runs for r in res["rows"] if r["label"] == "write"])
        print(f"{w} watchers, {name} ({len(runs)} runs): delivery median {row('median_ms'):.2f} ms,"
              f" p99 {row('p99_ms'):.2f} ms, max {row('max_ms'):.1f} ms; lost {fig('events_lost'):.0f}"
              f" of {fig('events_expected'):.0f}; writes {writes:.1f}/s;"
              f" server {fig('server_cpu_us_per_event'):.2f} us/event; RSS peak"
              f" {fig('server_rss_peak_mib'):.0f} MiB; bench CPU {fig('bench_cpu_percent'):.0f}%")
PY
