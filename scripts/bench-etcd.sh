#!/usr/bin/env bash
# Ironplane on etcd next to Ironplane on the embedded SQLite store (issue 13): ConfigMap creates
# (creates/s, the server's CPU per create and, on etcd, etcd's CPU per create), LIST of 10,000
# ConfigMaps (each variant's CPU per traversal: `full/cache` is served from the watch cache,
# `full/consistent` — resourceVersion unset — is a quorum read from etcd on an etcd without
# reliable progress notifications such as Debian's 3.4), and watch delivery latency with 1,000
# watchers. Every run starts a fresh etcd (ETCD, default /usr/bin/etcd) and a fresh Ironplane,
# data directories on /dev/shm (DATA_ROOT) so that neither side pays for the disk; the sides
# alternate, their order swapped every run, RUNS times (default 3); prints medians and, per
# figure, the etcd/sqlite ratio of the medians and the median of the run-paired ratios.
# SIDES (default "etcd sqlite") may add `etcd-json` (etcd with --storage-media-type=application/json).
# Each side's server keeps its default media type: protobuf on etcd, JSON on SQLite.
# SIDES may also name `kube-apiserver` (KUBE_APISERVER: its binary, built outside the repository)
# on a fresh etcd of its own, for the side-by-side ratio (the watch scenario spreads its watchers
# over connections of 100 streams, below Go's limit of 250 per connection).
# SCENARIOS (default "create list watch") chooses the scenarios; WATCHERS (default 1000) the
# watch scenario's watchers, WATCH_ARGS more of its flags (`--streams-per-connection 50`: at 100
# streams a connection and 600 watchers or more, kube-apiserver v1.36.2 left the writer's PUTs
# unanswered on this machine, while 50 a connection served 1,000 watchers).
# Usage: scripts/bench-etcd.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
SIDES=${SIDES:-etcd sqlite}
SCENARIOS=${SCENARIOS:-create list watch}
WATCHERS=${WATCHERS:-1000}
read -r -a watch_args <<<"${WATCH_ARGS:-}"
ETCD=${ETCD:-/usr/bin/etcd}
DATA_ROOT=${DATA_ROOT:-/dev/shm}
release=${CARGO_TARGET_DIR:-target}/release
if [ -z "${BIN:-}" ]; then
  cargo build --release -p ironplane --bin ironplane >/dev/null
  BIN=$release/ironplane
fi
if [ -z "${BENCH:-}" ]; then
  cargo build --release -p ironplane-bench >/dev/null
  BENCH=$release/ironplane-bench
fi
mkdir -p "$OUT"
work=$(mktemp -d -p "$DATA_ROOT" bench-etcd.XXXXXX)
port=${PORT:-19451}
etcd_port=${ETCD_PORT:-24791}
PID= EPID=
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  [ -n "$EPID" ] && kill -TERM "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null || true
  # Keep the servers' logs: a failed run is explained there.
  mkdir -p "$OUT/logs"
  find "$work" -name '*.log' | while read -r log; do
    cp "$log" "$OUT/logs/$(echo "${log#"$work"/}" | tr / _)"
  done
  rm -rf "$work"
}
trap cleanup EXIT
start_etcd() { # dir
  # An etcd someone else runs on these ports would answer in place of ours.
  if curl -s -o /dev/null "http://127.0.0.1:$etcd_port/health"; then
    echo "port $etcd_port is taken (ETCD_PORT chooses another)" >&2; exit 1
  fi
  "$ETCD" --name bench --data-dir "$1/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 10))" \
    --initial-cluster "bench=http://127.0.0.1:$((etcd_port + 10))" \
    --log-level warn >"$1/etcd.log" 2>&1 &
  EPID=$!
  until curl -sf "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; do
    kill -0 "$EPID" || { echo "etcd exited: $(cat "$1/etcd.log")" >&2; exit 1; }
    sleep 0.1
  done
  # Another process on the port would have answered for an etcd that failed to start.
  kill -0 "$EPID" || { echo "etcd exited: $(cat "$1/etcd.log")" >&2; exit 1; }
}
start() { # dir, extra flags...
  local dir=$1; shift
  mkdir -p "$dir"
  "$BIN" --secure-port "$port" --data-dir "$dir/ironplane" "$@" >"$dir/ironplane.log" 2>&1 &
  PID=$!
  KC="$dir/ironplane/kubeconfig"
  for _ in $(seq 1 1000); do [ -f "$KC" ] && break; sleep 0.01; done
  until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do
    kill -0 "$PID" || { echo "ironplane exited: $(cat "$dir/ironplane.log")" >&2; exit 1; }
    sleep 0.1
  done
}
start_kube_apiserver() { # dir: kube-apiserver on the etcd started for this run
  local dir=$1
  mkdir -p "$dir/kas"
  echo 'bench-token,bench,bench-uid,"system:masters"' >"$dir/kas/tokens.csv"
  openssl genrsa -out "$dir/kas/sa.key" 2048 2>/dev/null
  "${KUBE_APISERVER:?KUBE_APISERVER names the kube-apiserver binary}" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 \
    --secure-port "$port" --cert-dir "$dir/kas/pki" --token-auth-file "$dir/kas/tokens.csv" \
    --service-account-key-file "$dir/kas/sa.key" \
    --service-account-signing-key-file "$dir/kas/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --service-cluster-ip-range 10.0.0.0/24 >"$dir/kas.log" 2>&1 &
  PID=$!
  KC="$dir/kas/kubeconfig"
  cat >"$KC" <<KC
apiVersion: v1
kind: Config
clusters: [{name: k, cluster: {server: "https://127.0.0.1:$port", insecure-skip-tls-verify: true}}]
users: [{name: k, user: {token: bench-token}}]
contexts: [{name: k, context: {cluster: k, user: k}}]
current-context: k
KC
  until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do
    kill -0 "$PID" || { echo "kube-apiserver exited: $(tail "$dir/kas.log")" >&2; exit 1; }
    sleep 0.2
  done
}
stop() {
  kill -TERM "$PID"; wait "$PID" || true; PID=
  if [ -n "$EPID" ]; then kill -TERM "$EPID"; wait "$EPID" || true; EPID=; fi
}
uptime >"$OUT/etcd-uptime.txt"
for i in $(seq 1 "$RUNS"); do
  order=$SIDES
  # Swap the order every other run, so that a drifting load favours neither side.
  if [ $((i % 2)) -eq 0 ]; then order=$(echo "$SIDES" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for side in $order; do
    dir="$work/$side-$i"
    mkdir -p "$dir"
    pids=()
    case $side in
      etcd) start_etcd "$dir"; start "$dir" --etcd-servers "http://127.0.0.1:$etcd_port" ;;
      etcd-json) start_etcd "$dir"; start "$dir" --etcd-servers "http://127.0.0.1:$etcd_port" \
                   --storage-media-type=application/json ;;
      sqlite) start "$dir" ;;
      kube-apiserver) start_etcd "$dir"; start_kube_apiserver "$dir" ;;
    esac
    pids=(--server-pid "$PID")
    [ -n "$EPID" ] && pids+=(--etcd-pid "$EPID")
    for scenario in $SCENARIOS; do
      case $scenario in
        create) "$BENCH" --kubeconfig "$KC" create --concurrency 8 --duration 10s "${pids[@]}" -q \
                  --json "$OUT/etcd-$side-create-$i.json" >/dev/null ;;
        list) "$BENCH" --kubeconfig "$KC" list --objects 10000 --iterations 10 "${pids[@]}" -q \
                --json "$OUT/etcd-$side-list-$i.json" >/dev/null ;;
        watch) "$BENCH" --kubeconfig "$KC" watch --watchers "$WATCHERS" --rate 20 --duration 10s \
                 "${watch_args[@]}" "${pids[@]}" -q --json "$OUT/etcd-$side-watch-$i.json" \
                 >/dev/null ;;
      esac
    done
    stop
    uptime >>"$OUT/etcd-uptime.txt"
  done
done
python3 - "$OUT" "$RUNS" $SIDES <<'PY'
import json, statistics, sys
out, runs, sides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(side, what):
    # A scenario that did not run leaves its figures empty.
    try:
        return [json.load(open(f"{out}/etcd-{side}-{what}-{i}.json")) for i in range(1, runs + 1)]
    except FileNotFoundError:
        return [{"figures": {}, "rows": []}] * runs
def fig(name):
    return lambda r: r["figures"].get(name)
def row(label, key):
    return lambda r: next((x[key] for x in r["rows"] if x["label"] == label), None)
figures = [
    ("create", "creates/s", row("create", "per_second")),
    ("create", "create median ms", row("create", "median_ms")),
    ("create", "create p99 ms", row("create", "p99_ms")),
    ("create", "server CPU ms/create", fig("server_cpu_ms_per_request")),
    ("create", "etcd CPU ms/create", fig("etcd_cpu_ms_per_request")),
    ("create", "load generator CPU %", fig("bench_cpu_percent")),
]
for variant in ("full/cache", "full/consistent", "paged500/cache", "paged500/consistent"):
    v = variant.replace("/", "_")
    figures += [
        ("list", f"{variant} median ms", row(variant, "median_ms")),
        ("list", f"{variant} server CPU ms", fig(f"server_cpu_ms_per_traversal_{v}")),
        ("list", f"{variant} etcd CPU ms", fig(f"etcd_cpu_ms_per_traversal_{v}")),
    ]
figures += [
    ("watch", "delivery median ms", row("delivery", "median_ms")),
    ("watch", "delivery p99 ms", row("delivery", "p99_ms")),
    ("watch", "delivery max ms", row("delivery", "max_ms")),
    ("watch", "events lost", fig("events_lost")),
    ("watch", "writes acked", fig("writes_acked")),
    ("watch", "server CPU us/event", fig("server_cpu_us_per_event")),
    ("watch", "etcd CPU us/event", fig("etcd_cpu_us_per_event")),
    ("watch", "server RSS peak MiB", fig("server_rss_peak_mib")),
]
data = {s: {w: load(s, w) for w in ("create", "list", "watch")} for s in sides}
base = "sqlite" if "sqlite" in sides else sides[-1]
head = "".join(f"{s:>12}" for s in sides)
ratios = "".join(f"{s + '/' + base:>16}" for s in sides if s != base)
print(f"{'scenario':<8}{'figure':<34}{head}{ratios}  runs")
for what, name, pick in figures:
    vals = {s: [pick(r) for r in data[s][what]] for s in sides}
    med = {s: (statistics.median(v) if all(x is not None for x in v) else None)
           for s, v in vals.items()}
    cells = "".join(f"{med[s]:>12.3f}" if med[s] is not None else f"{'-':>12}" for s in sides)
    rcells = ""
    for s in sides:
        if s == base:
            continue
        if med[s] is None or not med[base]:
            rcells += f"{'-':>16}"
            continue
        paired = [a / b for a, b in zip(vals[s], vals[base]) if b]
        rcells += f"{med[s] / med[base]:>9.2f}"
        rcells += f" ({statistics.median(paired):.2f})" if paired else ""
    spread = "; ".join(f"{s} " + ",".join(f"{x:.3g}" for x in vals[s] if x is not None)
                       for s in sides)
    print(f"{what:<8}{name:<34}{cells}{rcells}  {spread}")
PY
