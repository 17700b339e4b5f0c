#!/usr/bin/env bash
# Instructions per create, and where they go: the server runs under callgrind on a fresh etcd
# (its data on /dev/shm), as in scripts/bench-kinds-side.sh; KIND (default pod) is created 200
# times to warm up, the counters are zeroed, COUNT (default 1500) more are created by 8 clients
# (kept, so that no deletion is counted), and the counters are dumped. Instruction counts do not
# depend on what else the machine runs, so builds can be compared on a busy machine.
# Prints the instructions per create; `callgrind_annotate --inclusive=yes OUT/callgrind.*` shows
# where they went. Not part of CI (minutes under valgrind).
# ETCD=none runs the server on its embedded store instead (builds from before etcd support).
# PORT and EP move the server's and etcd's ports, so that two builds can be counted at once.
# Usage: scripts/bench-create-instructions.sh IRONPLANE BENCH OUT [extra ironplane flags]
set -euo pipefail
BIN=$1; BENCH=$2; OUT=$3; shift 3; COUNT=${COUNT:-1500}; KIND=${KIND:-pod}; ETCD=${ETCD:-etcd}
mkdir -p "$OUT"; work=$(mktemp -d /dev/shm/cri.XXXX); ep=${EP:-27790}; port=${PORT:-27443}
store=()
if [ "$ETCD" = none ]; then EPID=""; else
  "$ETCD" --name b --data-dir "$work/etcd" --listen-client-urls http://127.0.0.1:$ep --advertise-client-urls http://127.0.0.1:$ep --listen-peer-urls http://127.0.0.1:$((ep+10)) --initial-advertise-peer-urls http://127.0.0.1:$((ep+10)) --initial-cluster b=http://127.0.0.1:$((ep+10)) --log-level error >"$work/etcd.log" 2>&1 & EPID=$!
  until curl -sf http://127.0.0.1:$ep/health | grep -q true; do sleep 0.1; done
  store=(--etcd-servers "http://127.0.0.1:$ep")
fi
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.%p" "$BIN" --secure-port $port --data-dir "$work/ip" "${store[@]}" "$@" >"$OUT/log" 2>&1 & PID=$!
KC=$work/ip/kubeconfig
until [ -f "$KC" ] && KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 1; done
KUBECONFIG=$KC kubectl create ns benchk >/dev/null
until KUBECONFIG=$KC kubectl -n benchk get sa default >/dev/null 2>&1; do KUBECONFIG=$KC kubectl -n benchk create sa default >/dev/null 2>&1 || sleep 0.2; done
"$BENCH" --kubeconfig "$KC" create --kind "$KIND" --namespace benchk --concurrency 8 --count 200 -q >/dev/null
sleep 2
callgrind_control -z $PID >/dev/null
"$BENCH" --kubeconfig "$KC" create --kind "$KIND" --namespace benchk --concurrency 8 --count "$COUNT" --keep -q --json "$OUT/bench.json" >/dev/null
sleep 3
callgrind_control -d load $PID >/dev/null
kill -TERM $PID; wait $PID || true; if [ -n "$EPID" ]; then kill -TERM $EPID; wait $EPID || true; fi; rm -rf "$work"
"$(dirname "$0")/callgrind-per.py" "$OUT" "$COUNT" create
