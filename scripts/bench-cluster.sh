#!/usr/bin/env bash
# The cluster simulation (ironplane-bench cluster) at a few sizes against a fresh release
# Ironplane on its embedded store, and optionally Ironplane and kube-apiserver on the same etcd;
# prints median-of-runs figures for BENCHMARKS.md. Results (JSON per run) go to $OUT.
# Usage: scripts/bench-cluster.sh [OUT]
#   NODES="1000 5000" PODS=30 DURATION=60s RUNS=3 SIDES="sqlite etcd kube-apiserver"
#   ETCD=/usr/bin/etcd KUBE_APISERVER=... (for the kube-apiserver side)
#   CLUSTER_ARGS="--protobuf" (extra arguments of `ironplane-bench cluster`, split on spaces)
# Not for CI: one run at 5,000 nodes takes several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-results}
RUNS=${RUNS:-3}
NODES=${NODES:-1000 5000}
PODS=${PODS:-30}
DURATION=${DURATION:-60s}
INFORMERS=${INFORMERS:-2}
SIDES=${SIDES:-sqlite}
ETCD=${ETCD:-/usr/bin/etcd}
DATA_ROOT=${DATA_ROOT:-/dev/shm}
read -r -a cluster_args <<<"${CLUSTER_ARGS:-}"
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
work=$(mktemp -d -p "$DATA_ROOT" bench-cluster.XXXXXX)
port=${PORT:-19461}
etcd_port=${ETCD_PORT:-24801}
PID= EPID=
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  [ -n "$EPID" ] && kill -TERM "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null || true
  mkdir -p "$OUT/logs"
  find "$work" -name '*.log' | while read -r log; do
    cp "$log" "$OUT/logs/$(echo "${log#"$work"/}" | tr / _)"
  done
  rm -rf "$work"
}
trap cleanup EXIT
start_etcd() { # dir
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
uptime >"$OUT/cluster-uptime.txt"
for n in $NODES; do
  for i in $(seq 1 "$RUNS"); do
    for side in $SIDES; do
      dir="$work/$side-$n-$i"
      mkdir -p "$dir"
      case $side in
        sqlite) start "$dir" ;;
        etcd) start_etcd "$dir"; start "$dir" --etcd-servers "http://127.0.0.1:$etcd_port" ;;
        kube-apiserver) start_etcd "$dir"; start_kube_apiserver "$dir" ;;
      esac
      pids=(--server-pid "$PID")
      [ -n "$EPID" ] && pids+=(--etcd-pid "$EPID")
      "$BENCH" --kubeconfig "$KC" cluster --nodes "$n" --pods-per-node "$PODS" \
        --duration "$DURATION" --informers "$INFORMERS" "${pids[@]}" "${cluster_args[@]}" -q \
        --json "$OUT/cluster-$side-$n-$i.json" >"$OUT/cluster-$side-$n-$i.txt"
      stop
      rm -rf "$dir/etcd" "$dir/ironplane"
      uptime >>"$OUT/cluster-uptime.txt"
    done
  done
done

python3 - "$OUT" "$NODES" "$SIDES" <<'PY'
import glob, json, os, statistics, sys
out, nodes, sides = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")
for side in sides:
    for n in nodes:
        runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, f"cluster-{side}-{n}-*.json")))]
        if not runs:
            continue
        fig = lambda k: med([r["figures"].get(k) for r in runs])
        row = lambda label, k: med([x.get(k) for r in runs for x in r["rows"] if x["label"] == label])
        print(f"{side} {n} nodes ({len(runs)} runs): setup {fig('setup_seconds'):.1f} s, "
              f"mutating p99 {fig('mutating_p99_ms'):.1f} ms, SLOs not met {fig('slos_not_met'):.0f}, "
              f"rates not held {fig('rates_not_held'):.0f}, events lost {fig('events_lost'):.0f}, "
              f"server CPU {fig('server_cpu_ms_per_second'):.0f} ms/s {fig('server_cpu_ms_per_request'):.3f} ms/req, "
              f"RSS {fig('server_rss_mib'):.0f} MiB ({fig('server_rss_mib_per_1000_nodes'):.0f} per 1000 nodes), "
              f"etcd CPU {fig('etcd_cpu_percent'):.0f}% RSS {fig('etcd_rss_mib'):.0f} MiB")
        for label in [x["label"] for x in runs[0]["rows"]]:
            print(f"  {label:32} count {row(label,'count'):8.0f}  {row(label,'per_second'):7.1f}/s  "
                  f"p50 {row(label,'median_ms'):8.2f}  p90 {row(label,'p90_ms'):8.2f}  "
                  f"p99 {row(label,'p99_ms'):8.2f}  max {row(label,'max_ms'):8.1f} ms  errors {row(label,'errors'):.0f}")
PY
