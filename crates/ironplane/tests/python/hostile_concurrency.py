"""Concurrent unconditional writes all apply (issue 6).

100 concurrent unconditional merge patches, each adding its own key to one ConfigMap, must all
answer 200 and the final object must hold every key; the same with strategic merge patches and
JSON patches. 100 concurrent PUTs without metadata.resourceVersion (ConfigMap allows
unconditional update) must all answer 200, and the final object must be exactly one of the
bodies sent (last writer wins, nothing torn). Prints `N passed, M failed`; exits 1 if M > 0."""
import http.client
import json
import sys
import threading

from common import Raw

RAW = Raw()
HOST, PORT = RAW.base.replace("https://", "").rsplit(":", 1)
PORT = int(PORT)
N = 100
CM = "/api/v1/namespaces/default/configmaps"
results = []


def record(name, ok, detail=""):
    results.append((name, ok, detail))
    print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)


def send(method, path, body=None, ctype="application/json"):
    conn = http.client.HTTPSConnection(HOST, PORT, context=RAW.ctx, timeout=60)
    try:
        data = json.dumps(body).encode() if not isinstance(body, (bytes, str)) else (body if isinstance(body, bytes) else body.encode())
        conn.request(method, path, body=data if body is not None else None,
                     headers={"Content-Type": ctype, "Accept": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def together(fn):
    """Runs fn(i) for i in 0..N on N threads released at once; returns [(status, body)]."""
    out = [None] * N
    barrier = threading.Barrier(N)

    def run(i):
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001
            out[i] = (0, f"{type(e).__name__}: {e}".encode())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def create(name):
    st, b = send("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"seed": "0"}})
    record(f"create {name}", st == 201, f"HTTP {st}: {b[:300]!r}")


def patches(name, ctype, body_of):
    create(name)
    out = together(lambda i: send("PATCH", f"{CM}/{name}", body_of(i), ctype))
    bad = [(i, st, b[:200]) for i, (st, b) in enumerate(out) if st != 200]
    record(f"{N} concurrent {ctype} patches all answer 200", not bad, f"{len(bad)} did not, e.g. {bad[:3]}")
    st, b = send("GET", f"{CM}/{name}")
    data = json.loads(b).get("data", {}) if st == 200 else {}
    missing = [i for i in range(N) if data.get(f"k{i}") != f"v{i}"]
    record(f"after {N} concurrent {ctype} patches the object holds every key", not missing and data.get("seed") == "0",
           f"{len(missing)} keys missing, e.g. {missing[:10]}; HTTP {st}")


def puts(name):
    create(name)
    bodies = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {f"k{i}": f"v{i}", "writer": str(i), "fill": "x" * (i * 10)}} for i in range(N)]
    out = together(lambda i: send("PUT", f"{CM}/{name}", bodies[i]))
    bad = [(i, st, b[:200]) for i, (st, b) in enumerate(out) if st != 200]
    record(f"{N} concurrent unconditional PUTs all answer 200", not bad, f"{len(bad)} did not, e.g. {bad[:3]}")
    st, b = send("GET", f"{CM}/{name}")
    data = json.loads(b).get("data", {}) if st == 200 else {}
    ok = any(data == body["data"] for body in bodies)
    record(f"after {N} concurrent PUTs the object is exactly one of the bodies", ok, f"HTTP {st}: {str(data)[:300]}")


def main():
    patches("conc-merge", "application/merge-patch+json", lambda i: {"data": {f"k{i}": f"v{i}"}})
    patches("conc-strategic", "application/strategic-merge-patch+json", lambda i: {"data": {f"k{i}": f"v{i}"}})
    patches("conc-json", "application/json-patch+json", lambda i: [{"op": "add", "path": f"/data/k{i}", "value": f"v{i}"}])
    puts("conc-put")
    failed = [r for r in results if not r[1]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
