#!/usr/bin/env bash
# Instructions per LIST traversal, and where they go: a data directory holding OBJECTS (default
# 10,000) ConfigMaps is made once by a native run of the server (kept in DATA, default
# /dev/shm/bench-list-data, and reused), copied, and the server started under callgrind on the
# copy; one `ironplane-bench list` traversal warms up, the counters are zeroed, ITER (default 10)
# traversals of each of the tool's four variants (full and paginated, from the cache and
# consistent) run, and the counters are dumped. Instruction counts do not depend on what else the
# machine runs, so builds can be compared on a busy one; under valgrind, ring's AES-GCM takes its
# AES-NI path rather than the VAES one a native run takes, so the encryption's share is not the
# native one. Prints the instructions per traversal (the total over 4 x ITER);
# `callgrind_annotate --inclusive=yes OUT/callgrind.*` shows where they went. Not part of CI.
# PORT moves the server's port, so that two builds can be counted at once (let the first make DATA
# before the second starts).
# Usage: scripts/bench-list-instructions.sh IRONPLANE BENCH OUT
set -euo pipefail
BIN=$1; BENCH=$2; OUT=$3
OBJECTS=${OBJECTS:-10000}; ITER=${ITER:-10}; PORT=${PORT:-28601}
DATA=${DATA:-/dev/shm/bench-list-data}
NS=bench-list
mkdir -p "$OUT"
if [ ! -f "$DATA/state.db" ] && [ ! -d "$DATA/pki" ]; then
  mkdir -p "$DATA"
  "$BIN" --secure-port "$PORT" --data-dir "$DATA" >"$OUT/data.log" 2>&1 & PID=$!
  until [ -f "$DATA/kubeconfig" ] && KUBECONFIG=$DATA/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done
  "$BENCH" --kubeconfig "$DATA/kubeconfig" list --objects "$OBJECTS" --iterations 1 --namespace $NS --keep -q >/dev/null
  kill -TERM $PID; wait $PID || true
fi
work=$(mktemp -d /dev/shm/bli.XXXX); cp -a "$DATA" "$work/ip"; rm -f "$work/ip/kubeconfig"
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.%p" "$BIN" --secure-port "$PORT" --data-dir "$work/ip" >"$OUT/log" 2>&1 & PID=$!
KC=$work/ip/kubeconfig
until [ -f "$KC" ] && KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 1; done
"$BENCH" --kubeconfig "$KC" list --objects "$OBJECTS" --iterations 1 --namespace $NS --keep -q >/dev/null
sleep 2
callgrind_control -z $PID >/dev/null
"$BENCH" --kubeconfig "$KC" list --objects "$OBJECTS" --iterations "$ITER" --namespace $NS --keep -q --json "$OUT/bench.json" >/dev/null
sleep 2
callgrind_control -d load $PID >/dev/null
kill -TERM $PID; wait $PID || true; rm -rf "$work"
"$(dirname "$0")/callgrind-per.py" "$OUT" "$((4 * ITER))" traversal
