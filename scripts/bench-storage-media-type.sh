#!/usr/bin/env bash
# Server CPU per request with built-in objects stored as JSON and as protobuf
# (--storage-media-type), on the embedded SQLite store: ConfigMap creates, unconditional
# updates (`mixed --updates-only`), the controller-like mix (GET 60 %: GETs without a
# resourceVersion read the store, so each decodes a stored value), Deployment creates, and
# LIST of 10,000 ConfigMaps with the watch cache off (every list decodes every stored value).
# One binary (BIN, default this tree's release build); runs alternate between the media types,
# a fresh server each, RUNS times (default 3); prints medians and protobuf/JSON ratios.
# Usage: scripts/bench-storage-media-type.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
release=${CARGO_TARGET_DIR:-target}/release
if [ -z "${BIN:-}" ]; then
  cargo build --release -p ironplane -p ironplane-bench >/dev/null
  BIN=$release/ironplane
fi
bench=${BENCH:-$release/ironplane-bench}
mkdir -p "$OUT"
work=$(mktemp -d)
port=19449
start() { # dir, extra flags...
  local dir=$1; shift
  "$BIN" --secure-port "$port" --data-dir "$dir" "$@" >"$dir.log" 2>&1 &
  PID=$!
  KC="$dir/kubeconfig"
  for _ in $(seq 1 500); do [ -f "$KC" ] && break; sleep 0.01; done
  until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.1; done
}
for i in $(seq 1 "$RUNS"); do
  for side in json protobuf; do
    if [ "$side" = json ]; then mt=application/json; else mt=application/vnd.kubernetes.protobuf; fi
    start "$work/$side-$i" --storage-media-type=$mt
    "$bench" --kubeconfig "$KC" create --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/smt-$side-create-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" mixed --updates-only --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/smt-$side-update-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" mixed --concurrency 16 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/smt-$side-mixed-$i.json" >/dev/null
    "$bench" --kubeconfig "$KC" create --kind deployment --concurrency 8 --duration 10s \
      --server-pid "$PID" -q --json "$OUT/smt-$side-deployment-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
    start "$work/$side-list-$i" --storage-media-type=$mt --default-watch-cache-size=0
    "$bench" --kubeconfig "$KC" list --objects 10000 --iterations 5 \
      --server-pid "$PID" -q --json "$OUT/smt-$side-list-$i.json" >/dev/null
    kill -TERM "$PID"; wait "$PID" || true
    du -k "$work/$side-list-$i/state.db" | cut -f1 >"$OUT/smt-$side-dbkib-$i.txt"
  done
done
rm -rf "$work"
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(side, what):
    return [json.load(open(f"{out}/smt-{side}-{what}-{i}.json")) for i in range(1, runs + 1)]
rows = []
for what in ("create", "update", "mixed", "deployment", "list"):
    for side in ("json", "protobuf"):
        rs = load(side, what)
        cpu = statistics.median(r["figures"]["server_cpu_ms_per_request"] for r in rs)
        rows.append((what, side, "cpu ms/request", cpu,
                     sorted(r["figures"]["server_cpu_ms_per_request"] for r in rs)))
        labels = [row["label"] for row in rs[0]["rows"]]
        for label in labels:
            pick = lambda r: next(x for x in r["rows"] if x["label"] == label)
            rows.append((what, side, f"{label} median ms",
                         statistics.median(pick(r)["median_ms"] for r in rs), None))
            if what != "list":
                rows.append((what, side, f"{label} per s",
                             statistics.median(pick(r)["per_second"] for r in rs), None))
for side in ("json", "protobuf"):
    sizes = [int(open(f"{out}/smt-{side}-dbkib-{i}.txt").read()) for i in range(1, runs + 1)]
    rows.append(("list", side, "state.db KiB (10,000+ objects)", statistics.median(sizes), None))
table = {}
for what, side, figure, value, spread in rows:
    table.setdefault((what, figure), {})[side] = (value, spread)
print(f"{'scenario':<11}{'figure':<34}{'json':>10}{'protobuf':>10}{'pb/json':>9}  runs (cpu)")
for (what, figure), sides in table.items():
    j, p = sides["json"][0], sides["protobuf"][0]
    spread = ""
    if sides["json"][1]:
        spread = f"json {sides['json'][1]} pb {sides['protobuf'][1]}"
    ratio = p / j if j else float("nan")
    print(f"{what:<11}{figure:<34}{j:>10.3f}{p:>10.3f}{ratio:>9.2f}  {spread}")
PY
