"""Replays Ironplane's own corpus (tests/corpus/<family>/requests.json, in the format of
upstream's corpus, with the expected answer of each case beside it as <name>.json) with
upstream's replay.py, and requires every case to pass.

Upstream's recorded corpus cannot cover every rule; these cases add one for each rule Ironplane
implements that it does not exercise, each answer taken from upstream's own tests, source or
documentation (the case's `rule` says which). Families are folders so that the rules of one kind
family live together. Answers written before field management existed list
`metadata.managedFields` as volatile: their rules are elsewhere, and managed fields are compared
with upstream's own answers in the recorded corpus (corpus.py).

Usage: own_corpus.py [family ...]   (KUBECONFIG names the server)."""
import io
import os
import sys
import contextlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
OWN = os.path.join(HERE, "..", "corpus")
UPSTREAM = os.environ.get("IRONPLANE_CORPUS") or os.path.join(REPO, "..", "shared", "upstream-v1.36", "corpus")


def main():
    if not os.path.exists(os.path.join(UPSTREAM, "replay.py")):
        print(f"upstream's replay.py is missing at {UPSTREAM} (set IRONPLANE_CORPUS)", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, UPSTREAM)
    import replay  # noqa: E402  (the corpus's own replay tool)

    # replay.py maps a name generated from `generateName` to `<rand>` only where the name still
    # holds the run's real prefix, but it replaces the prefix with `{p}` first, so a generated
    # name inside a message (a refusal that names the object) is never mapped. The wrapper also
    # passes each generateName as it reads after that replacement.
    unsubst = replay.unsubst

    def unsubst_generated(o, ns, prefix, gen=()):
        mapped = tuple(g.replace(ns, "{ns}").replace(prefix, "{p}") for g in gen)
        return unsubst(o, ns, prefix, tuple(dict.fromkeys(tuple(gen) + mapped)))

    replay.unsubst = unsubst_generated

    families = sys.argv[1:] or sorted(
        d for d in os.listdir(OWN) if os.path.exists(os.path.join(OWN, d, "requests.json")))
    if not families:
        print("no families in tests/corpus", file=sys.stderr)
        sys.exit(2)
    failed = passed = 0
    for family in families:
        folder = os.path.join(OWN, family)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = replay.diff_main(["--kubeconfig", os.environ["KUBECONFIG"],
                                     "--corpus", os.path.join(folder, "requests.json"),
                                     "--recorded", folder, "--all-diffs"])
        text = out.getvalue()
        lines = text.strip().splitlines()
        tally = lines[-1] if lines else "no output"
        p, f = (int(x.split()[0]) for x in tally.split(", "))
        passed += p
        failed += f
        print(f"{family}: {tally}")
        if code != 0:
            print("\n".join(l for l in lines if not l.startswith("PASS ")))
    print(f"own corpus: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
