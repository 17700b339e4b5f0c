#!/usr/bin/env bash
# Measures time from launch to the first 200 from /readyz (fresh data dir and restart) and the
# idle RSS of the release binary, SETTLE seconds after ready (2 by default; the allocator gives
# start-up's freed pages back within about 20 s), split into anonymous and file-backed (the
# binary's code) memory, with the thread count; the binary is read into the page cache first.
# Usage: scripts/startup-rss.sh [runs] [settle]
set -euo pipefail
bin=${IRONPLANE_BIN:-target/release/ironplane}
runs=${1:-5}
settle=${2:-2}
python3 - "$bin" "$runs" "$settle" <<'PY'
import os, ssl, subprocess, sys, tempfile, time, urllib.request, statistics
binary, runs, settle = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
# The kernel maps a faulting page's neighbours (fault-around) only when they are already in the
# page cache, so the file-backed figure depends on how much of the binary is cached: a build
# just written (all of it cached) can show more than an older one partly evicted (a 1 MiB gap
# between two builds shrank to 0.1-0.7 MiB once both were read). Reading the binary whole first
# makes builds comparable.
with open(binary, "rb") as f:
    while f.read(1 << 20):
        pass
def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
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
    time.sleep(settle)
    status = {l.split(":")[0]: l.split()[1] for l in open(f"/proc/{p.pid}/status") if len(l.split()) > 1}
    mib = lambda k: int(status[k]) / 1024
    p.terminate(); p.wait()
    return ready, (mib("VmRSS"), mib("RssAnon"), mib("RssFile"), int(status["Threads"]))
first, restart, rss = [], [], []
for i in range(runs):
    d = tempfile.mkdtemp()
    r, m = run(d, free_port()); first.append(r); rss.append(m)
    r, m = run(d, free_port()); restart.append(r); rss.append(m)
med = statistics.median
print(f"ready, fresh data dir: median {med(first)*1000:.0f} ms (runs: {', '.join(f'{x*1000:.0f}' for x in first)})")
print(f"ready, restart:        median {med(restart)*1000:.0f} ms (runs: {', '.join(f'{x*1000:.0f}' for x in restart)})")
print(f"idle RSS {settle:g} s after ready: median {med([r[0] for r in rss]):.1f} MiB "
      f"(anonymous {med([r[1] for r in rss]):.1f}, file-backed {med([r[2] for r in rss]):.1f}; "
      f"threads {med([r[3] for r in rss]):.0f})")
PY
