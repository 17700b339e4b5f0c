"""Slow and idle clients must not wedge the server (issue 6).

Usage: hostile_slow.py <server pid>

Opens 2,000 connections that never complete a request: a third TCP-only (no TLS ClientHello),
a third TLS-connected but silent, a third sending request headers at 1 byte per second. While
they are open, `kubectl get ns --request-timeout=1s` must still succeed. Upstream's
http.Server closes all of them within ReadHeaderTimeout (32 s; the TLS handshake is bounded by
the same figure, net/http's tlsHandshakeTimeout), so every one must be closed by the server
within 40 s of being opened. Idle keep-alive connections after a completed request
(IdleTimeout, 90 s) are not part of this test. Finally the server's RSS must come back near its
idle figure. Prints `N passed, M failed`; exits 1 if M > 0."""
import os
import resource
import select
import socket
import ssl
import subprocess
import sys
import threading
import time

from common import Raw

PID = int(sys.argv[1])
RAW = Raw()
HOST, PORT = RAW.base.replace("https://", "").rsplit(":", 1)
PORT = int(PORT)
TOTAL = 2000
DEADLINE_S = 40

results = []


def record(name, ok, detail=""):
    results.append((name, ok, detail))
    print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def kubectl_get_ns():
    t = time.time()
    out = subprocess.run([os.environ.get("KUBECTL", "kubectl"), "get", "ns", "--request-timeout=1s"],
                         capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and "default" in out.stdout, time.time() - t, out.stderr.strip()[:300]


def tls_ctx():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Conn:
    def __init__(self, kind, sock, raw):
        self.kind, self.sock, self.raw = kind, sock, raw
        self.opened = time.time()
        self.closed_after = None


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Warm up, then take the idle figure.
    ok, took, err = kubectl_get_ns()
    record("kubectl get ns before", ok, err)
    time.sleep(1)
    idle = rss_kib()
    print(f"idle RSS {idle} KiB", flush=True)

    conns = []
    ctx = tls_ctx()
    open_errors = 0
    t_open = time.time()
    for i in range(TOTAL):
        kind = ("tcp", "tls", "slow")[i % 3]
        try:
            s = socket.create_connection((HOST, PORT), timeout=10)
            raw = s
            if kind != "tcp":
                s = ctx.wrap_socket(s, server_hostname="localhost")
                if kind == "slow":
                    s.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            s.setblocking(False)
            conns.append(Conn(kind, s, raw))
        except (OSError, ssl.SSLError):
            open_errors += 1
    print(f"opened {len(conns)} connections in {time.time() - t_open:.1f}s, {open_errors} failed to open", flush=True)
    record("2000 slow connections opened", len(conns) == TOTAL, f"{len(conns)} opened, {open_errors} failed")
    peak = rss_kib()

    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            for c in conns:
                if c.kind == "slow" and c.closed_after is None:
                    try:
                        c.sock.send(b"a")
                    except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                        pass
                    except (OSError, ssl.SSLError):
                        pass
            stop.wait(1.0)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()

    # The server keeps serving real clients meanwhile.
    for attempt in range(3):
        ok, took, err = kubectl_get_ns()
        record(f"kubectl get ns --request-timeout=1s while 2000 slow connections are open (#{attempt + 1})", ok,
               f"took {took:.2f}s {err}")
        time.sleep(1)

    def poll_closed():
        live = [c for c in conns if c.closed_after is None]
        if not live:
            return
        by_fd = {c.sock.fileno(): c for c in live}
        poller = select.poll()  # select() stops at fd 1024
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        for fd, _ in poller.poll(0):
            c = by_fd[fd]
            closed = False
            try:
                while True:
                    data = c.sock.recv(65536)
                    if not data:
                        closed = True
                        break
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                pass
            except (OSError, ssl.SSLError):
                closed = True
            if closed:
                c.closed_after = time.time() - c.opened
                try:
                    c.sock.close()
                except OSError:
                    pass

    end = time.time() + DEADLINE_S
    while time.time() < end:
        poll_closed()
        if all(c.closed_after is not None for c in conns):
            break
        time.sleep(0.5)
    poll_closed()
    stop.set()
    trickler.join(timeout=5)
    for kind in ("tcp", "tls", "slow"):
        mine = [c for c in conns if c.kind == kind]
        still = [c for c in mine if c.closed_after is None]
        latest = max((c.closed_after for c in mine if c.closed_after is not None), default=0)
        record(f"{kind} connections closed by the server within {DEADLINE_S}s", not still,
               f"{len(still)} of {len(mine)} still open; the last closed after {latest:.1f}s")
    for c in conns:
        if c.closed_after is None:
            try:
                c.sock.close()
            except OSError:
                pass

    ok, took, err = kubectl_get_ns()
    record("kubectl get ns after", ok, err)
    # The allocator gives freed memory back over some seconds: poll for up to 30 s until RSS is
    # within 10% (at least 4 MiB) of its idle figure.
    limit = idle + max(4 * 1024, idle // 10)
    deadline = time.monotonic() + 30
    after = rss_kib()
    while after > limit and time.monotonic() < deadline:
        time.sleep(1)
        after = rss_kib()
    print(f"RSS: idle {idle} KiB, with 2000 connections {peak} KiB, after {after} KiB (limit {limit} KiB)", flush=True)
    record("RSS back near its idle figure", 0 < after <= limit, f"idle {idle} KiB, peak {peak} KiB, after {after} KiB")
    failed = [r for r in results if not r[1]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
