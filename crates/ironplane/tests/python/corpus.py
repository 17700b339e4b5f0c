"""Replays upstream's differential corpus (../shared/upstream-v1.36/corpus: a few hundred requests
on built-in kinds with kube-apiserver v1.36.2's recorded answers) against Ironplane with the
corpus's own replay.py, and compares every answer.

Differences that belong to other open issues are expected, each listed once below with its
reason; a case whose only differences are expected ones counts as matching. Cases listed in
tests/golden/corpus-matching.txt must match (a regression fails the test); a case that matches
but is not listed yet is printed so that the list can grow. The script prints every case that
is not matching and ends with `N passed, M failed` over the listed cases.

Usage: corpus.py [--write-list]   (KUBECONFIG names the server; --write-list rewrites the list
with the cases that match now)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
CORPUS = os.environ.get("IRONPLANE_CORPUS") or os.path.join(REPO, "..", "shared", "upstream-v1.36", "corpus")
MATCHING = os.path.join(HERE, "..", "golden", "corpus-matching.txt")

# Differences that other open issues own, as (substring of the difference, reason).
EXPECTED = [
]

# Whole cases that other open issues own: what they check does not exist here yet.
EXPECTED_CASES = {
}


# The recording was made on OpenShift's build of kube-apiserver v1.36.2, whose ServiceAccount
# admission plugin carries a patch (openshift/kubernetes, `TokenVolumeSource`): the
# `kube-api-access-*` volume projects a fourth source, the `openshift-service-ca.crt` ConfigMap.
# kube-apiserver v1.36.2 projects three (token, `kube-root-ca.crt`, namespace), as Ironplane does:
# that source is removed from the recorded answers before they are compared. One answer prints
# the whole pod spec in a diff whose hunk starts 18 lines later for the extra source (its Go
# struct dump is 18 lines): that header is rewritten, every other byte of the answer is compared.
OPENSHIFT_SERVICE_CA = "openshift-service-ca.crt"
RECORDED_TEXT_FIXES = {
    "pod-update-forbidden-field": [("@@ -114,7 +114,15 @@", "@@ -96,7 +96,15 @@")],
}


def without_openshift_carry(name, o):
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k == "sources" and isinstance(v, list):
                v = [x for x in v if not (isinstance(x, dict) and isinstance(x.get("configMap"), dict)
                                          and x["configMap"].get("name") == OPENSHIFT_SERVICE_CA)]
            out[k] = without_openshift_carry(name, v)
        return out
    if isinstance(o, list):
        return [without_openshift_carry(name, x) for x in o]
    if isinstance(o, str):
        for old, new in RECORDED_TEXT_FIXES.get(name, []):
            o = o.replace(old, new)
    return o


def expected_reason(diff):
    for needle, reason in EXPECTED:
        if needle in diff:
            return reason
    return None


def main():
    if not os.path.exists(os.path.join(CORPUS, "replay.py")):
        print(f"the upstream corpus is missing at {CORPUS} (set IRONPLANE_CORPUS)", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, CORPUS)
    import replay  # noqa: E402  (the corpus's own replay tool)

    write_list = "--write-list" in sys.argv
    listed = set()
    if os.path.exists(MATCHING):
        with open(MATCHING) as f:
            listed = {line.strip() for line in f if line.strip() and not line.startswith("#")}

    class Args:
        kubeconfig = os.environ["KUBECONFIG"]
        context = None
        server = token = cacert = cert = key = None
        insecure = False

    # A case whose setup creates a CRD then changes it (crd-update-scope) was recorded against an
    # established CRD: `scope` and `names.kind` are immutable only from then on. Ironplane
    # establishes a CRD within milliseconds, but a loaded CI machine can stretch that past the
    # next request, so a setup step that creates a CRD waits for `Established` as upstream's
    # recording did.
    upstream_send = replay.send

    def send(c, step, ns, prefix):
        out = upstream_send(c, step, ns, prefix)
        method, path, _, (st, _, raw) = out
        if method == "POST" and st == 201 and path.split("?")[0].endswith("/customresourcedefinitions"):
            name = replay.json.loads(raw)["metadata"]["name"]
            for _ in range(100):
                gst, _, graw = c.req("GET", path.split("?")[0] + "/" + name)
                conditions = (replay.json.loads(graw).get("status", {}).get("conditions") or []) if gst == 200 else []
                if any(x.get("type") == "Established" and x.get("status") == "True" for x in conditions):
                    break
                replay.time.sleep(0.05)
        return out

    replay.send = send
    client = replay.client_from_args(Args)
    cases = replay.load_cases(os.path.join(CORPUS, "requests.json"))
    matching, other = [], []

    owned = []

    def check(case, got):
        name = case["name"]
        if name in EXPECTED_CASES:
            owned.append(name)
            return
        with open(os.path.join(CORPUS, name + ".json")) as f:
            recorded = without_openshift_carry(name, replay.json.load(f))
        diffs = [d for d in replay.compare(recorded, got) if expected_reason(d) is None]
        (matching if not diffs else other).append((name, diffs))

    replay.run_all(client, cases, check)
    names = {name for name, _ in matching}
    regressions = sorted(listed - names)
    new = sorted(names - listed)
    for name, diffs in other:
        mark = "REGRESSION" if name in listed else "differs"
        print(f"{mark} {name}: {diffs[0]}" + (f" (+{len(diffs) - 1} more)" if len(diffs) > 1 else ""))
    for name in new:
        print(f"matches, not listed yet: {name}")
    print(f"{len(matching)} of {len(cases)} corpus cases match upstream "
          f"(expected differences: {', '.join(sorted({r for _, r in EXPECTED}))})")
    print(f"{len(owned)} cases belong to other issues: "
          + "; ".join(f"{r}: {', '.join(sorted(n for n in owned if EXPECTED_CASES[n] == r))}"
                      for r in sorted({EXPECTED_CASES[n] for n in owned})))
    if write_list:
        with open(MATCHING, "w") as f:
            f.write("# Corpus cases that match upstream's recorded answers (tests/python/corpus.py).\n")
            f.write("# Regenerate with: corpus.py --write-list (only ever add: a removal is a regression).\n")
            for name in sorted(names):
                f.write(name + "\n")
    print(f"{len(listed) - len(regressions)} passed, {len(regressions)} failed")
    sys.exit(1 if regressions else 0)


if __name__ == "__main__":
    main()
