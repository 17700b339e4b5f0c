"""Object semantics over raw HTTPS, checked against what kube-apiserver v1.36 does: namespace
lifecycle, status only through /status, generation, delete preconditions, watch bookmarks and
watch-list, timeouts, protobuf and YAML on the wire, deletecollection, PartialObjectMetadata.
Every check that fails is reported; the script then exits non-zero."""
import json
import struct
import sys
import time
import urllib.request

import yaml

from common import Raw

failures = []


def check(what, cond, detail=""):
    if not cond:
        failures.append(f"{what}: {detail}")


def ns_create(raw, name):
    s, _, b = raw.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert s == 201, (s, b)


def cm(name, **extra):
    o = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}
    o["metadata"].update(extra)
    return o


def deployment(name):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def stream_lines(raw, path, headers=None, limit_s=10):
    """Reads a watch until the server ends it or limit_s passes; returns the JSON events."""
    req = urllib.request.Request(raw.base + path, headers=headers or {})
    events = []
    start = time.time()
    with urllib.request.urlopen(req, context=raw.ctx, timeout=limit_s) as r:
        for line in r:
            events.append(json.loads(line))
            if time.time() - start > limit_s:
                break
    return events


def namespace_lifecycle(raw):
    ns_create(raw, "doomed")
    s, _, b = raw.request("POST", "/api/v1/namespaces/doomed/configmaps", cm("held", finalizers=["example.com/hold"]))
    check("create held configmap", s == 201, b)
    s, _, b = raw.request("DELETE", "/api/v1/namespaces/doomed")
    check("delete namespace", s == 200 and json.loads(b)["status"]["phase"] == "Terminating", b)
    s, _, b = raw.request("POST", "/api/v1/namespaces/doomed/configmaps", cm("late"))
    body = json.loads(b)
    check("create in terminating namespace is 403", s == 403 and body.get("reason") == "Forbidden"
          and body.get("message") == 'configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated', b)
    # The namespace waits for the held object; releasing it lets the deletion finish.
    time.sleep(0.5)
    s, _, _ = raw.request("GET", "/api/v1/namespaces/doomed")
    check("namespace waits for content with finalizers", s == 200, s)
    s, _, b = raw.request("PATCH", "/api/v1/namespaces/doomed/configmaps/held", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    check("release finalizer", s == 200, b)
    deadline = time.time() + 15
    while time.time() < deadline:
        s, _, _ = raw.request("GET", "/api/v1/namespaces/doomed")
        if s == 404:
            break
        time.sleep(0.1)
    check("namespace removed after its content", s == 404, s)


def status_and_generation(raw):
    ns_create(raw, "sem")
    s, _, b = raw.request("POST", "/apis/apps/v1/namespaces/sem/deployments", deployment("d"))
    check("create deployment", s == 201, b)
    d = json.loads(b)
    check("generation starts at 1", d["metadata"].get("generation") == 1, d["metadata"])
    # Status in a main-resource write is ignored.
    s, _, b = raw.request("PATCH", "/apis/apps/v1/namespaces/sem/deployments/d", {"status": {"replicas": 7}}, "application/merge-patch+json")
    check("status through the main resource is ignored", s == 200 and json.loads(b).get("status", {}).get("replicas") is None, b)
    # Status through /status is written, without touching spec or generation.
    s, _, b = raw.request("PATCH", "/apis/apps/v1/namespaces/sem/deployments/d/status",
                          {"status": {"replicas": 7}, "spec": {"replicas": 9}}, "application/merge-patch+json")
    d = json.loads(b)
    check("status through /status", s == 200 and d["status"].get("replicas") == 7 and d["spec"]["replicas"] == 1
          and d["metadata"]["generation"] == 1, b)
    # A label change does not bump generation; a spec change does.
    s, _, b = raw.request("PATCH", "/apis/apps/v1/namespaces/sem/deployments/d", {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")
    check("metadata-only change keeps generation", json.loads(b)["metadata"]["generation"] == 1, b)
    s, _, b = raw.request("PATCH", "/apis/apps/v1/namespaces/sem/deployments/d", {"spec": {"replicas": 3}}, "application/merge-patch+json")
    check("spec change bumps generation", json.loads(b)["metadata"]["generation"] == 2, b)
    # A no-op update does not change the resourceVersion.
    s, _, before = raw.request("GET", "/apis/apps/v1/namespaces/sem/deployments/d")
    s, _, after = raw.request("PUT", "/apis/apps/v1/namespaces/sem/deployments/d", json.loads(before))
    check("no-op update keeps resourceVersion", json.loads(after)["metadata"]["resourceVersion"] == json.loads(before)["metadata"]["resourceVersion"], after)


def delete_preconditions(raw):
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/configmaps", cm("pre"))
    o = json.loads(b)
    s, _, b = raw.request("DELETE", "/api/v1/namespaces/sem/configmaps/pre",
                          {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-the-uid"}})
    body = json.loads(b)
    check("uid precondition mismatch is 409", s == 409 and body["reason"] == "Conflict" and
          body["message"] == f'Operation cannot be fulfilled on ConfigMap "pre": the UID in the precondition (not-the-uid) does not match the UID in record ({o["metadata"]["uid"]}). The object might have been deleted and then recreated'
          and body["details"] == {"name": "pre", "kind": "ConfigMap"}, b)
    # rest.BeforeDelete names the kind (with its group), as the real kube-apiserver answers.
    s, _, b = raw.request("DELETE", "/api/v1/namespaces/sem/configmaps/pre",
                          {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}})
    check("resourceVersion precondition mismatch is 409", s == 409 and json.loads(b)["message"] ==
          f'Operation cannot be fulfilled on ConfigMap "pre": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({o["metadata"]["resourceVersion"]}). The object might have been modified', b)
    s, _, b = raw.request("DELETE", "/api/v1/namespaces/sem/configmaps/pre",
                          {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": o["metadata"]["uid"]}})
    body = json.loads(b)
    check("matching precondition deletes, answering a Status of success", s == 200 and body.get("status") == "Success"
          and body.get("details", {}).get("uid") == o["metadata"]["uid"], b)


def watches(raw):
    for i in range(3):
        raw.request("POST", "/api/v1/namespaces/sem/configmaps", cm(f"w{i}", labels={"w": "yes"}))
    # watch-list: initial events, then a bookmark marking their end.
    ev = stream_lines(raw, "/api/v1/namespaces/sem/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                      "&resourceVersionMatch=NotOlderThan&labelSelector=w%3Dyes&timeoutSeconds=2")
    types = [e["type"] for e in ev]
    check("watch-list sends the initial objects then a bookmark", types[:4] == ["ADDED"] * 3 + ["BOOKMARK"], types)
    bm = [e for e in ev if e["type"] == "BOOKMARK"]
    check("the bookmark marks the end of initial events",
          bool(bm) and bm[0]["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true", bm[:1])
    # sendInitialEvents without bookmarks is refused, as upstream does.
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?watch=1&sendInitialEvents=true")
    check("sendInitialEvents needs allowWatchBookmarks", s == 422, b)
    # timeoutSeconds ends the stream.
    start = time.time()
    stream_lines(raw, "/api/v1/namespaces/sem/configmaps?watch=1&timeoutSeconds=1&resourceVersion=0", limit_s=8)
    check("timeoutSeconds ends the watch", time.time() - start < 4, time.time() - start)


def wire_formats(raw):
    # Protobuf answers: the k8s\0 envelope for objects, length-prefixed frames for watches.
    s, h, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps/w0", headers={"Accept": "application/vnd.kubernetes.protobuf"})
    check("protobuf GET", s == 200 and h.get("Content-Type") == "application/vnd.kubernetes.protobuf" and b[:4] == b"k8s\x00", (s, h.get("Content-Type"), b[:8]))
    req = urllib.request.Request(raw.base + "/api/v1/namespaces/sem/configmaps?watch=1&timeoutSeconds=1&resourceVersion=0",
                                 headers={"Accept": "application/vnd.kubernetes.protobuf;stream=watch"})
    with urllib.request.urlopen(req, context=raw.ctx, timeout=10) as r:
        ct = r.headers.get("Content-Type")
        data = r.read()
    frames = 0
    while len(data) >= 4:
        (n,) = struct.unpack(">I", data[:4])
        frames += 1
        data = data[4 + n:]
    check("protobuf watch frames", ct == "application/vnd.kubernetes.protobuf;stream=watch" and frames >= 3 and data == b"", (ct, frames, len(data)))
    # YAML in and out.
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
    s, h, b = raw.request("POST", "/api/v1/namespaces/sem/configmaps", body, "application/yaml", headers={"Accept": "application/yaml"})
    check("YAML create answered in YAML", s == 201 and h.get("Content-Type") == "application/yaml" and yaml.safe_load(b)["data"] == {"k": "v"}, b[:200])
    # PartialObjectMetadataList.
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?labelSelector=w%3Dyes",
                          headers={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
    body = json.loads(b)
    check("PartialObjectMetadataList", s == 200 and body["kind"] == "PartialObjectMetadataList" and len(body["items"]) == 3
          and all("data" not in i and i["kind"] == "PartialObjectMetadata" for i in body["items"]), b[:300])


def delete_collection(raw):
    s, _, b = raw.request("DELETE", "/api/v1/namespaces/sem/configmaps?labelSelector=w%3Dyes")
    check("deletecollection", s == 200 and len(json.loads(b)["items"]) == 3, b[:200])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?labelSelector=w%3Dyes")
    check("deletecollection removed only the selected objects", json.loads(b)["items"] == [], b[:200])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps/from-yaml")
    check("unselected object kept", s == 200, s)


def delete_options(raw):
    """Upstream's delete handler reads DeleteOptions from the body when there is one, and then
    not the query at all; the body must be a DeleteOptions of Go's types; ValidateDeleteOptions
    reports every error at once."""
    path = "/api/v1/namespaces/sem/configmaps/opts"
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/configmaps", cm("opts"))
    check("configmap for the delete options", s == 201, b)
    s, _, b = raw.request("DELETE", path, {"kind": "Foo", "apiVersion": "v1"})
    check("a body of another kind is 400", s == 400 and json.loads(b)["message"] ==
          'no kind "Foo" is registered for version "v1" in scheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:27"', b)
    s, _, b = raw.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": "x"})
    check("a body of the wrong Go type is 400", s == 400 and json.loads(b)["message"] ==
          "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64", b)
    s, _, b = raw.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["Bogus"],
                                           "propagationPolicy": "Bogus", "orphanDependents": True})
    check("every DeleteOptions error at once", s == 422 and json.loads(b)["message"] ==
          'DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Invalid value: "Bogus": orphanDependents and deletionPropagation cannot be both set, '
          'propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil", '
          'dryRun: Unsupported value: ["Bogus"]: supported values: "All"]', b)
    s, _, b = raw.request("DELETE", path + "?dryRun=All", {"kind": "DeleteOptions", "apiVersion": "v1"})
    check("with a body the query's dryRun is not read", s == 200, b)
    s, _, b = raw.request("GET", path)
    check("so the object is gone", s == 404, b)


def versions(raw):
    """autoscaling/v1 and v2 are one stored resource, converted for each version."""
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h1"},
          "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}}
    s, _, b = raw.request("POST", "/apis/autoscaling/v1/namespaces/sem/horizontalpodautoscalers", v1)
    got = json.loads(b)
    # Upstream's answer (defaults/hpa-v1.json) for the same request.
    check("v1 create answers upstream's v1 object", s == 201 and got["spec"] == {
        "maxReplicas": 5, "minReplicas": 1, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d1"},
        "targetCPUUtilizationPercentage": 70} and got["status"] == {"currentReplicas": 0, "desiredReplicas": 0}, b)
    s, _, b = raw.request("GET", "/apis/autoscaling/v2/namespaces/sem/horizontalpodautoscalers/h1")
    v2 = json.loads(b)
    check("the same object through v2", v2.get("apiVersion") == "autoscaling/v2" and v2["spec"].get("metrics") == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}], b)
    # A metric v1 cannot express survives a write through v1.
    v2["spec"]["metrics"].append({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}})
    s, _, b = raw.request("PUT", "/apis/autoscaling/v2/namespaces/sem/horizontalpodautoscalers/h1", v2)
    check("v2 update", s == 200, b)
    s, _, b = raw.request("PATCH", "/apis/autoscaling/v1/namespaces/sem/horizontalpodautoscalers/h1",
                          {"spec": {"maxReplicas": 8}}, "application/merge-patch+json")
    check("v1 patch", s == 200 and json.loads(b)["spec"]["maxReplicas"] == 8, b)
    s, _, b = raw.request("GET", "/apis/autoscaling/v2/namespaces/sem/horizontalpodautoscalers/h1")
    after = json.loads(b)
    check("metrics v1 cannot express are kept", after["spec"]["maxReplicas"] == 8 and len(after["spec"]["metrics"]) == 2
          and "annotations" not in after["metadata"], b)
    s, _, b = raw.request("GET", "/apis/autoscaling/v1/namespaces/sem/horizontalpodautoscalers")
    listed = json.loads(b)
    # Items of a typed list carry no apiVersion or kind of their own, as kube-apiserver writes
    # them; the v1 form shows in the annotation that keeps v2's metrics.
    check("v1 list", listed.get("apiVersion") == "autoscaling/v1" and [sorted(i) for i in listed["items"]] == [["metadata", "spec", "status"]]
          and "autoscaling.alpha.kubernetes.io/metrics" in listed["items"][0]["metadata"].get("annotations", {}), b[:300])


def namespaced_outside_a_namespace(raw):
    """A namespaced resource without a namespace in the path has only the all-namespaces list
    and watch: a create or a collection delete there is 405 (and deletes nothing), an object
    there is not found."""
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/configmaps", cm("everywhere"))
    check("configmap for the all-namespaces checks", s == 201, b)
    s, _, b = raw.request("GET", "/api/v1/configmaps?fieldSelector=metadata.name%3Deverywhere")
    check("all-namespaces list", s == 200 and [i["metadata"]["name"] for i in json.loads(b)["items"]] == ["everywhere"], b[:200])
    for method, path, code in (("POST", "/api/v1/configmaps", 405), ("DELETE", "/api/v1/configmaps", 405),
                               ("GET", "/api/v1/configmaps/everywhere", 404), ("PUT", "/api/v1/configmaps/everywhere", 404),
                               ("DELETE", "/api/v1/configmaps/everywhere", 404)):
        s, _, b = raw.request(method, path, cm("everywhere", namespace="sem") if method in ("POST", "PUT") else None)
        body = json.loads(b)
        want = ("the server does not allow this method on the requested resource" if code == 405
                else "the server could not find the requested resource")
        check(f"{method} {path} is {code}", s == code and body.get("message") == want and body.get("details") == {}, b)
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps/everywhere")
    check("nothing deleted through the all-namespaces path", s == 200, b)


def custom_resources(raw):
    """Custom resources as the CRD handler answers (each answer checked against a real
    kube-apiserver v1.36.2): only the URL's group version in a body, the body's kind named in
    its 422, field labels, patch types, the all-namespaces path, HEAD, list items' kinds."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gizmos.sem.example.com"},
           "spec": {"group": "sem.example.com", "scope": "Namespaced",
                    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}}]}}
    s, _, b = raw.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    check("gizmo CRD", s == 201, b)
    base = "/apis/sem.example.com/v1"
    gizmo = lambda name, **over: dict({"apiVersion": "sem.example.com/v1", "kind": "Gizmo", "metadata": {"name": name},
                                       "spec": {"color": "red"}}, **over)
    deadline = time.time() + 30
    while True:
        s, _, b = raw.request("POST", base + "/namespaces/sem/gizmos", gizmo("g1"))
        if s != 404 or time.time() > deadline:
            break
        time.sleep(0.2)
    check("a gizmo", s == 201, b)
    s, _, b = raw.request("GET", base + "/namespaces/sem/gizmos")
    check("custom resources' list items keep their kind", s == 200 and
          [(i.get("apiVersion"), i.get("kind")) for i in json.loads(b)["items"]] == [("sem.example.com/v1", "Gizmo")], b[:300])
    s, _, b = raw.request("POST", base + "/namespaces/sem/gizmos?dryRun=All", gizmo("g2", apiVersion="sem.example.com/v2"))
    check("only the URL's group version", s == 400 and json.loads(b)["message"] ==
          "the API version in the data (sem.example.com/v2) does not match the expected API version (sem.example.com/v1)", b)
    s, _, b = raw.request("POST", base + "/namespaces/sem/gizmos?dryRun=All", gizmo("g2", kind="Gadget"))
    body = json.loads(b)
    check("the body's kind names the 422", s == 422 and body["message"] ==
          'Gadget.sem.example.com "g2" is invalid: kind: Invalid value: "Gadget": must be Gizmo'
          and body["details"]["kind"] == "Gadget", b)
    s, _, b = raw.request("GET", base + "/namespaces/sem/gizmos?fieldSelector=spec.color%3Dred")
    check("field labels of a CRD without selectable fields", s == 400 and json.loads(b)["message"] ==
          "field label not supported: spec.color", b)
    s, _, b = raw.request("PATCH", base + "/namespaces/sem/gizmos/g1", {"spec": {"color": "blue"}}, "application/strategic-merge-patch+json")
    check("the patch types a custom resource takes", s == 415 and json.loads(b)["message"] ==
          "the body of the request was in an unknown format - accepted media types include: "
          "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml", b)
    for method, path in (("POST", base + "/gizmos"), ("DELETE", base + "/gizmos"), ("GET", base + "/gizmos/g1")):
        s, _, b = raw.request(method, path, gizmo("g3") if method == "POST" else None)
        check(f"{method} {path} is the plain 404", s == 404 and b == b"404 page not found\n", b)
    s, _, b = raw.request("HEAD", base + "/namespaces/sem/gizmos/g1")
    check("HEAD of a custom resource is a get", s == 200 and b == b"", b)
    s, _, b = raw.request("GET", base + "/namespaces/sem/gizmos/g1")
    check("nothing deleted through the all-namespaces path", s == 200, b)
    raw.request("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.sem.example.com")


def pretty_print(raw):
    """Upstream's isPrettyPrint: `pretty=true`, or a curl/Wget/browser user agent, indents JSON
    objects, lists, errors and discovery with two spaces; watch streams stay one line per event;
    /version is always indented."""
    indented = lambda b: b.startswith(b'{\n  "') and b.endswith(b"\n}")
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?pretty=true")
    check("pretty=true indents a list", s == 200 and indented(b) and json.loads(b)["kind"] == "ConfigMapList", b[:100])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps/nope", headers={"User-Agent": "curl/8.5.0"})
    check("a curl user agent indents an error", s == 404 and indented(b) and b'\n  "code": 404' in b, b[:100])
    s, _, b = raw.request("GET", "/apis", headers={"User-Agent": "Wget/1.21"})
    check("discovery indented for Wget", s == 200 and indented(b), b[:100])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?pretty=false", headers={"User-Agent": "curl/8.5.0"})
    check("pretty=false wins over the user agent", s == 200 and b.startswith(b'{"'), b[:100])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps", headers={"User-Agent": "kubectl/v1.32.0"})
    check("other clients get compact JSON", s == 200 and b.startswith(b'{"'), b[:100])
    s, _, b = raw.request("GET", "/version", headers={"User-Agent": "kubectl/v1.32.0"})
    check("/version is always indented", s == 200 and b.startswith(b'{\n  "'), b[:100])
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/configmaps?watch=1&timeoutSeconds=1", headers={"User-Agent": "curl/8.5.0"})
    check("a watch stream is not indented", s == 200 and b.startswith(b'{"type":"ADDED"'), b[:100])


def binding(raw):
    """What a scheduler does: pods/binding and the older bindings resource."""
    pod = lambda name: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    for name in ("p1", "p2"):
        s, _, b = raw.request("POST", "/api/v1/namespaces/sem/pods", pod(name))
        check(f"create {name}", s == 201, b)
    bind = lambda name, node: {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/pods/p1/binding", bind("p1", "n1"))
    check("pods/binding answers 201 Success", s == 201 and json.loads(b).get("status") == "Success", b)
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/pods/p1")
    p1 = json.loads(b)
    check("the pod is bound and scheduled", p1["spec"].get("nodeName") == "n1"
          and any(c["type"] == "PodScheduled" and c["status"] == "True" for c in p1["status"].get("conditions", [])), b)
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/pods/p1/binding", bind("p1", "n2"))
    check("a bound pod cannot be bound again", s == 409 and json.loads(b)["message"] ==
          'Operation cannot be fulfilled on pods/binding "p1": pod p1 is already assigned to node "n1"', b)
    s, _, b = raw.request("POST", "/api/v1/namespaces/sem/bindings", bind("p2", "n2"))
    check("bindings resource", s == 201, b)
    s, _, b = raw.request("GET", "/api/v1/namespaces/sem/pods?fieldSelector=spec.nodeName%3Dn2")
    check("field selector on the node", [i["metadata"]["name"] for i in json.loads(b)["items"]] == ["p2"], b[:200])


def main():
    raw = Raw()
    for step in (namespace_lifecycle, status_and_generation, delete_preconditions, delete_options, watches, wire_formats, delete_collection, versions, namespaced_outside_a_namespace, custom_resources, pretty_print, binding):
        try:
            step(raw)
        except Exception as e:  # a crash in one step is a failure, not the end of the report
            failures.append(f"{step.__name__} raised {e!r}")
    print(f"{len(failures)} semantic checks failed")
    for f in failures:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
