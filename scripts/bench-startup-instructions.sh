#!/usr/bin/env bash
# Instructions from launch to ready, and on which threads: the server runs under callgrind on a
# fresh data directory (on /dev/shm) until its /readyz answers 200, then the counters are dumped
# per thread. Instruction counts do not depend on what else the machine runs, so builds can be
# compared on a busy machine; where the time to ready goes between threads they do not tell.
# Not part of CI (a minute under valgrind).
# Prints the total, and each thread's share; `callgrind_annotate --inclusive=yes OUT/callgrind.*`
# shows where they went.
# Usage: [PORT=...] scripts/bench-startup-instructions.sh IRONPLANE OUT
set -euo pipefail
BIN=$1; OUT=$2; port=${PORT:-27643}
mkdir -p "$OUT"; work=$(mktemp -d /dev/shm/bsi.XXXX)
valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$OUT/callgrind.%p" \
  "$BIN" --secure-port "$port" --data-dir "$work" >"$OUT/log" 2>&1 & PID=$!
until curl -sk --max-time 5 "https://127.0.0.1:$port/readyz" 2>/dev/null | grep -qx ok; do sleep 0.2; done
callgrind_control -d ready $PID >/dev/null
kill -TERM $PID; wait $PID || true; rm -rf "$work"
python3 - "$OUT" <<'PY'
import glob, re, sys
threads = []
for path in glob.glob(f"{sys.argv[1]}/callgrind.*.1-*"):
    text = open(path, errors="replace").read()
    total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if total:
        threads.append((int(total.group(1)), path.rsplit("-", 1)[1]))
threads.sort(reverse=True)
print(f"{sum(t for t, _ in threads) / 1e6:.1f} M instructions to ready in {len(threads)} threads")
for t, n in threads[:6]:
    print(f"  thread {n}: {t / 1e6:.1f} M")
PY
