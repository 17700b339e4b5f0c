#!/usr/bin/env bash
# LIST from the watch cache, build against build: one data directory holding OBJECTS ConfigMaps
# (made by the first run), then for each round a server of each build in turn on it and
# `ironplane-bench list`; prints each run's full and paginated rows from the cache (median
# time to last byte, MiB/s) and the server's CPU per traversal.
# Usage: BINS="before=PATH after=PATH" [ROUNDS=3] [ITER=200] [OBJECTS=10000]
#        [LIST_ARGS="--protobuf"] scripts/bench-list.sh BENCH
set -euo pipefail
BENCH=$1
BINS=${BINS:?BINS=\"name=path ...\"}
ROUNDS=${ROUNDS:-3}
ITER=${ITER:-200}
OBJECTS=${OBJECTS:-10000}
# Extra arguments of `ironplane-bench list`, split on spaces.
read -r -a list_args <<<"${LIST_ARGS:-}"
base=/dev/shm
[ -w "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/bench-list.XXXXXX")
trap 'rm -rf "$work"' EXIT
port=19553
for i in $(seq 1 "$ROUNDS"); do
  for entry in $BINS; do
    name=${entry%%=*}
    bin=${entry#*=}
    "$bin" --secure-port "$port" --data-dir "$work/data" >"$work/$name-$i.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 500); do [ -f "$work/data/kubeconfig" ] && break; sleep 0.01; done
    sleep 1.5
    "$BENCH" --kubeconfig "$work/data/kubeconfig" list --objects "$OBJECTS" --iterations "$ITER" \
      --namespace bench-list --keep --server-pid "$pid" "${list_args[@]}" -q |
      awk -v n="$name" -v r="$i" '
        /full\/cache|paged500\/cache/ {print n, "round " r, $1, "median", $5, "ms,", $NF, "MiB/s"}
        /per_traversal_full_cache|per_traversal_paged500_cache/ {print n, "round " r, $1, $2, "ms"}'
    kill -TERM "$pid"
    wait "$pid" || true
  done
done
