#!/usr/bin/env bash
# What API Priority and Fairness costs per request, in instructions rather than seconds: the
# server runs under callgrind (which counts every instruction it executes, the same count for the
# same work whatever else the machine is doing), once with --enable-priority-and-fairness=true and
# once with false, on its embedded store in /dev/shm. The counters are zeroed after the server is
# ready and dumped after the load, so only the load's requests are counted (with what the server's
# own background tasks did meanwhile). Loads: COUNT ConfigMap creates (8 clients), then
# DURATION of ConfigMap updates (`mixed --updates-only`, 8 clients, over 50 objects it makes first,
# whose creates are counted with the updates on both sides).
# Prints the instructions per request of each side and their ratio.
# Not part of CI (minutes under valgrind). Usage: scripts/bench-apf-instructions.sh IRONPLANE BENCH OUT
set -euo pipefail
BIN=$1; BENCH=$2; OUT=$3; COUNT=${COUNT:-1500}; DURATION=${DURATION:-30s}; RUNS=${RUNS:-1}
mkdir -p "$OUT"; port=26443
for i in $(seq 1 "$RUNS"); do
  for apf in true false; do
    d=$(mktemp -d /dev/shm/apfi.XXXX)
    valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind-$apf-$i.%p" \
      "$BIN" --secure-port $port --data-dir "$d" --enable-priority-and-fairness=$apf >"$OUT/log-$apf-$i" 2>&1 &
    PID=$!
    KC=$d/kubeconfig
    until [ -f "$KC" ] && KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 1; done
    KUBECONFIG=$KC kubectl create ns benchi >/dev/null
    for load in create update; do
      callgrind_control -z $PID >/dev/null
      if [ $load = create ]; then
        "$BENCH" --kubeconfig "$KC" create --namespace benchi --concurrency 8 --count "$COUNT" -q --json "$OUT/$load-$apf-$i.json" >/dev/null
      else
        "$BENCH" --kubeconfig "$KC" mixed --namespace benchi --updates-only --objects 50 --concurrency 8 --duration "$DURATION" -q --json "$OUT/$load-$apf-$i.json" >/dev/null
      fi
      callgrind_control -d "$load-$apf-$i" $PID >/dev/null
    done
    kill -TERM $PID; wait $PID || true; rm -rf "$d"
  done
done
python3 - "$OUT" "$RUNS" <<'PY'
import glob, json, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def instructions(load, apf, i):
    # The dump made at the end of this load (its trigger names it); its totals line.
    for f in glob.glob(f"{out}/callgrind-{apf}-{i}.*"):
        text = open(f).read()
        if f"Trigger: dump {load}-{apf}-{i}\n" in text:
            return int(re.search(r"^totals: (\d+)", text, re.M).group(1))
    raise SystemExit(f"no dump for {load}-{apf}-{i}")
def requests(load, apf, i):
    r = json.load(open(f"{out}/{load}-{apf}-{i}.json"))
    row = next(x for x in r["rows"] if x["label"] == "all") if load == "update" else r["rows"][0]
    return row["count"]
for load in ("create", "update"):
    per = {}
    for apf in ("true", "false"):
        v = [instructions(load, apf, i) / requests(load, apf, i) for i in range(1, runs + 1)]
        per[apf] = statistics.median(v)
        print(f"{load:7s} APF {apf:5s} {per[apf]/1e6:7.3f} M instructions/request (runs {', '.join(f'{x/1e6:.3f}' for x in v)})")
    print(f"{load:7s} on/off {per['true']/per['false']:.3f}")
PY
