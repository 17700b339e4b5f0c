"""Compaction on upstream's schedule (run against a server started with
--etcd-compaction-interval=1s): a continue token whose revision was compacted gets upstream's 410
with a fresh token that reads on at the latest revision, and a list at a compacted
resourceVersion gets upstream's 410 too."""
import json
import time

from common import ROOT_CA, Raw, wait_for_root_ca

LIST = "/api/v1/namespaces/default/configmaps"
INCONSISTENT = ("The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter, or use the continue token in this "
                "response to retrieve the remainder of the results. Continuing with the provided token results "
                "in an inconsistent list - objects that were created, modified, or deleted between the time the "
                "first chunk was returned and now may show up in the list.")


def main():
    raw = Raw()
    # The namespace's own ConfigMap, published at start-up, sorts after the test's.
    wait_for_root_ca(raw, "default")
    for i in range(3):
        st, _, body = raw.request("POST", LIST, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
        assert st == 201, (st, body)
    st, _, body = raw.request("GET", LIST + "?limit=1")
    first = json.loads(body)
    token, rv = first["metadata"]["continue"], first["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in first["items"]] == ["c0"], first
    # Two compaction ticks with writes between them: the first records the revision, the
    # second compacts to it, as upstream's compactor does.
    for i in range(3, 6):
        time.sleep(0.8)
        raw.request("POST", LIST, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    deadline = time.time() + 10
    while True:
        st, _, body = raw.request("GET", LIST + "?limit=1&continue=" + token)
        if st == 410 or time.time() > deadline:
            break
        time.sleep(0.3)
    status = json.loads(body)
    assert st == 410, (st, body)
    assert status["reason"] == "Expired" and status["message"] == INCONSISTENT, status
    fresh = status["metadata"]["continue"]
    # The fresh token goes on after c0 at the latest revision: it sees c1 and the later objects
    # (and the root CA ConfigMap, last by name).
    st, _, body = raw.request("GET", LIST + "?limit=10&continue=" + fresh)
    assert st == 200, (st, body)
    rest = [i["metadata"]["name"] for i in json.loads(body)["items"]]
    assert rest == ["c1", "c2", "c3", "c4", "c5", ROOT_CA], rest
    # An exact read at the compacted revision is gone as well.
    st, _, body = raw.request("GET", LIST + f"?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert st == 410, (st, body)
    assert json.loads(body)["message"] == "The resourceVersion for the provided list is too old.", body
    print("compaction: ok")


if __name__ == "__main__":
    main()
