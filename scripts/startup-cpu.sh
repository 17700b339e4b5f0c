#!/usr/bin/env bash
# CPU a start costs until it is ready, build against build: per round and build, a start on a
# fresh data directory and a restart on it, each polled for /readyz over one kept-alive
# connection and killed at its first 200; prints the median time to ready and the median CPU
# the process used until then (all of its threads, those that ended included).
#
# Why: a start is CPU-bound on two cores (its CPU until ready is about its time to ready), and
# the CPU figure moves less with the machine than the clock does. The CPU is read from a cgroup
# made for the run (cgroup v2's cpu.stat, or v1's cpuacct), so it needs root.
#
# Usage: [ROUNDS=8] scripts/startup-cpu.sh name=BINARY [name=BINARY ...]
set -euo pipefail
python3 - "${ROUNDS:-8}" "$@" <<'PY'
import http.client, os, shutil, signal, socket, ssl, statistics, subprocess, sys, tempfile, time

rounds = int(sys.argv[1])
builds = [a.split("=", 1) for a in sys.argv[2:]]
if not builds:
    raise SystemExit("usage: scripts/startup-cpu.sh name=BINARY [name=BINARY ...]")

# A cgroup of our own: v2 when the unified hierarchy is mounted, else v1's cpuacct.
if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
    group = f"/sys/fs/cgroup/ironplane-startup-cpu-{os.getpid()}"
    os.mkdir(group)
    def used_ms():
        for line in open(f"{group}/cpu.stat"):
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1000
else:
    group = f"/sys/fs/cgroup/cpuacct/ironplane-startup-cpu-{os.getpid()}"
    os.mkdir(group)
    def used_ms():
        return int(open(f"{group}/cpuacct.usage").read()) / 1e6

# Read each binary whole first, so that none starts from a colder page cache than another.
for _, binary in builds:
    with open(binary, "rb") as f:
        while f.read(1 << 20):
            pass

ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def enter():
    with open(f"{group}/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))

def start(binary, data_dir):
    port = free_port()
    before = used_ms()
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "--secure-port", str(port), "--data-dir", data_dir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=enter)
    conn = None
    while True:
        try:
            if conn is None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
                conn.connect()
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                break
        except (OSError, http.client.HTTPException):
            conn = None
            time.sleep(0.0005)
        if time.perf_counter() - t0 > 30:
            p.kill()
            raise SystemExit(f"{binary} not ready in 30 s")
    ready = (time.perf_counter() - t0) * 1000
    cpu = used_ms() - before
    p.send_signal(signal.SIGKILL)
    p.wait()
    return ready, cpu

base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
runs = {name: {"fresh": [], "restart": []} for name, _ in builds}
try:
    for _ in range(rounds):
        for name, binary in builds:
            d = tempfile.mkdtemp(dir=base)
            runs[name]["fresh"].append(start(binary, d))
            runs[name]["restart"].append(start(binary, d))
            shutil.rmtree(d)
finally:
    os.rmdir(group)

for name, _ in builds:
    for kind in ("fresh", "restart"):
        xs = runs[name][kind]
        med = lambda i: statistics.median(x[i] for x in xs)
        print(f"{name} {kind:7s}: ready median {med(0):.1f} ms, CPU until ready median {med(1):.1f} ms "
              f"({rounds} runs; CPU {min(x[1] for x in xs):.0f}-{max(x[1] for x in xs):.0f} ms)")
PY
