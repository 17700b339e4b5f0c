"""Sends the error corpus that kube-apiserver v1.36 answered (tests/golden/requests-errors.json)
and compares status code, reason and message with the recorded answers (tests/golden/errors).
Messages that upstream builds from Go internals (JSON parser errors, resource versions) are
compared by code and reason only. Every mismatch is reported, then the script fails."""
import json
import os
import sys

from common import ROOT_CA, Raw, wait_for_root_ca

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "golden")

# Upstream's message here comes from Go's encoding/json or from live resourceVersions.
CODE_AND_REASON_ONLY = {"malformed-json", "list-bad-continue"}
# Upstream answered watch-too-old at revision 7140; the test server runs with a watch window of
# 5 events, and this script first writes more than that, so resourceVersion 1 is too old here
# too.
WINDOW_FILL = 4


def main():
    raw = Raw()
    with open(os.path.join(GOLDEN, "requests-errors.json")) as f:
        corpus = json.load(f)
    status, _, body = raw.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "golden"}})
    assert status in (201, 409), (status, body)
    wait_for_root_ca(raw, "golden")
    failures = []
    checked = 0
    for i in range(WINDOW_FILL):
        path = "/api/v1/namespaces/default/configmaps"
        s1, _, _ = raw.request("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"fill-{i}"}})
        s2, _, _ = raw.request("DELETE", f"{path}/fill-{i}")
        assert (s1, s2) == (201, 200), (s1, s2)
    for name, req in corpus.items():
        with open(os.path.join(GOLDEN, "errors", name + ".json")) as f:
            want = json.load(f)
        path = req["path"].replace("{ns}", "golden")
        body = req.get("body")
        ct = req.get("contentType")
        got_status, headers, got_body = raw.request(req["method"], path, body, ct)
        checked += 1
        if got_status != want["status"]:
            failures.append(f"{name}: status {got_status}, upstream {want['status']}: {got_body[:300]!r}")
            continue
        wb = want["body"]
        if isinstance(wb, str):
            if got_body.decode() != wb:
                failures.append(f"{name}: body {got_body[:200]!r}, upstream {wb!r}")
            continue
        if req.get("path", "").find("watch=1") >= 0:
            line = got_body.decode().strip().splitlines()[0]
            got = json.loads(line)
            if got.get("type") != wb.get("type") or got["object"].get("reason") != wb["object"].get("reason") or got["object"].get("code") != wb["object"].get("code"):
                failures.append(f"{name}: watch event {got}, upstream {wb}")
            continue
        got = json.loads(got_body)
        if wb.get("kind") == "Status":
            if got.get("reason") != wb.get("reason"):
                failures.append(f"{name}: reason {got.get('reason')}, upstream {wb.get('reason')}")
            elif name not in CODE_AND_REASON_ONLY and got.get("message") != wb.get("message"):
                failures.append(f"{name}: message\n    ours:     {got.get('message')}\n    upstream: {wb.get('message')}")
            elif name not in CODE_AND_REASON_ONLY and "details" in wb and got.get("details") != wb.get("details"):
                failures.append(f"{name}: details {got.get('details')}, upstream {wb.get('details')}")
        else:
            if got.get("kind") != wb.get("kind"):
                failures.append(f"{name}: kind {got.get('kind')}, upstream {wb.get('kind')}")
        if want.get("warning") and want["warning"] not in (headers.get_all("Warning") or []):
            failures.append(f"{name}: warning {headers.get_all('Warning')}, upstream {want['warning']}")
    # A body over upstream's 3 MiB limit is refused before it is decoded.
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "too-big"}, "data": {"a": "x" * (3 * 1024 * 1024 + 1)}}
    status, _, body = raw.request("POST", "/api/v1/namespaces/golden/configmaps", big)
    checked += 1
    got = json.loads(body)
    if (status, got.get("reason"), got.get("message")) != (413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"):
        failures.append(f"too-large body: {status} {got}")

    # Every request above failed or was a dry run or a review that is never stored: none of
    # them may have left an object behind. The namespace holds only what the root CA publisher
    # put there.
    for resource, before in (("api/v1/namespaces/golden/configmaps", [ROOT_CA]), ("api/v1/namespaces/golden/pods", []),
                             ("api/v1/namespaces/golden/services", []), ("apis/apps/v1/namespaces/golden/deployments", [])):
        status, _, body = raw.request("GET", "/" + resource)
        names = [i["metadata"]["name"] for i in json.loads(body).get("items") or []]
        if status != 200 or names != before:
            failures.append(f"{resource}: expected {before} after failed writes, got {status} {names}")
    print(f"{checked} requests checked, {len(failures)} differ from upstream")
    for f in failures:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
