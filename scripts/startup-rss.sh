#!/usr/bin/env bash
# Measures time from launch to the first 200 from /readyz (fresh data dir and restart) and the
# idle RSS of the release binary. Usage: scripts/startup-rss.sh [runs]
set -euo pipefail
bin=${IRONPLANE_BIN:-target/release/ironplane}
runs=${1:-5}
python3 - "$bin" "$runs" <<'PY'
import os, ssl, subprocess, sys, tempfile, time, urllib.request, statistics
binary, runs = sys.argv[1], int(sys.argv[2])
def run(dirpath, port):
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "--secure-port", str(port), "--data-dir", dirpath], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    while True:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=1) as r:
                if r.status == 200:
                    break
        except Exception:
            time.sleep(0.002)
        if time.perf_counter() - t0 > 30:
            raise SystemExit("not ready in 30s")
    ready = time.perf_counter() - t0
    time.sleep(2)
    rss = int([l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
    p.terminate(); p.wait()
    return ready, rss
first, restart, rss = [], [], []
for i in range(runs):
    d = tempfile.mkdtemp()
    r, m = run(d, 17443 + i); first.append(r); rss.append(m)
    r, m = run(d, 17443 + i); restart.append(r); rss.append(m)
med = statistics.median
print(f"ready, fresh data dir: median {med(first)*1000:.0f} ms (runs: {', '.join(f'{x*1000:.0f}' for x in first)})")
print(f"ready, restart:        median {med(restart)*1000:.0f} ms (runs: {', '.join(f'{x*1000:.0f}' for x in restart)})")
print(f"idle RSS 2 s after ready: median {med(rss):.1f} MiB")
PY
