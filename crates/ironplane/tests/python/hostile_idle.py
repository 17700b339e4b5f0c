"""Holds idle connections open for the SIGTERM test: <count> TCP-only connections (no TLS
ClientHello) and <count> TLS-connected ones that never send a request. Prints `ready` once they
are all open, then waits until it is killed or its stdin closes."""
import os
import socket
import ssl
import sys

host, port = os.environ["IRONPLANE_URL"].replace("https://", "").rsplit(":", 1)
count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
held = []
for _ in range(count):
    held.append(socket.create_connection((host, int(port)), timeout=10))
    held.append(ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname="localhost"))
print("ready", flush=True)
sys.stdin.read()
