"""Managed fields through the scale subresource (upstream's TestScaleAllResources and
TestScaleUpdateOnlyStatus): writes and applies of /scale own the parent's replicas path, conflict
with its other owners and take it over when forced; a Scale update that leaves spec.replicas
alone changes no ownership. Custom resources map the Scale's spec.replicas to their CRD's
specReplicasPath.

Usage: ssa_scale.py   (KUBECONFIG: the admin kubeconfig)
"""
import json
import sys
import time

from common import Raw

failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL {what}: {detail}")


raw = Raw()
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def call(method, path, body=None, content_type="application/json"):
    status, _, answer = raw.request(method, path, body, content_type)
    return status, json.loads(answer)


def owners(path, replicas_at=("spec", "replicas")):
    """(replicas, the managers owning the replicas path, their entries with subresource scale)."""
    _, obj = call("GET", path)
    value = obj
    for p in replicas_at:
        value = value.get(p, {}) if isinstance(value, dict) else None
    owning = []
    for e in obj["metadata"].get("managedFields", []):
        f = e.get("fieldsV1", {})
        for p in replicas_at:
            f = f.get("f:" + p) if isinstance(f, dict) else None
        if f is not None:
            owning.append(e)
    return value, sorted(e["manager"] for e in owning), owning


def template(labels):
    return {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}


KINDS = [
    ("Deployment", "/apis/apps/v1", "deployments", "apps/v1"),
    ("StatefulSet", "/apis/apps/v1", "statefulsets", "apps/v1"),
    ("ReplicaSet", "/apis/apps/v1", "replicasets", "apps/v1"),
    ("ReplicationController", "/api/v1", "replicationcontrollers", "v1"),
]
SCALE = '{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"test","namespace":"default"},"spec":{"replicas":%d}}'

for kind, prefix, resource, api_version in KINDS:
    spec = {"replicas": 1, "template": template({"app": "nginx"})}
    if kind == "ReplicationController":
        spec["selector"] = {"app": "nginx"}
    else:
        spec["selector"] = {"matchLabels": {"app": "nginx"}}
    if kind == "StatefulSet":
        spec["serviceName"] = "nginx"
    valid = json.dumps({"apiVersion": api_version, "kind": kind, "metadata": {"name": "test"},
                        "spec": spec})
    path = f"{prefix}/namespaces/default/{resource}/test"

    status, answer = call("PATCH", path + "?fieldManager=apply_test", valid, APPLY)
    check(f"{kind}: create by apply", status == 201, answer)
    check(f"{kind}: creator owns replicas", owners(path)[:2] == (1, ["apply_test"]), owners(path))

    status, answer = call("PATCH", path + "/scale?fieldManager=scale_test", '{"spec":{"replicas": 5}}', MERGE)
    check(f"{kind}: scale", status == 200 and answer["kind"] == "Scale"
          and "managedFields" not in answer["metadata"], answer)
    replicas, managers, entries = owners(path)
    check(f"{kind}: the scaler owns replicas", (replicas, managers) == (5, ["scale_test"]), entries)
    # The parent's entry of a Scale writer: the parent's version, subresource scale, no time
    # (upstream's scale handler takes times from the parent's entries).
    check(f"{kind}: the scaler's entry", entries and entries[0]["apiVersion"] == api_version
          and entries[0].get("subresource") == "scale" and entries[0]["operation"] == "Update"
          and "time" not in entries[0], entries)

    status, answer = call("PATCH", path + "?fieldManager=apply_test", valid, APPLY)
    check(f"{kind}: re-apply conflicts", status == 409 and answer["message"] ==
          f'Apply failed with 1 conflict: conflict with "scale_test" with subresource "scale" using {api_version}: .spec.replicas',
          answer)
    status, answer = call("PATCH", path + "?fieldManager=apply_test&force=true", valid, APPLY)
    check(f"{kind}: forced re-apply", status == 200 and owners(path)[:2] == (1, ["apply_test"]),
          owners(path))

    status, answer = call("PATCH", path + "/scale?fieldManager=apply_scale", SCALE % 17, APPLY)
    check(f"{kind}: scale apply conflicts", status == 409 and answer["message"] ==
          'Apply failed with 1 conflict: conflict with "apply_test": .spec.replicas', answer)
    status, answer = call("PATCH", path + "/scale?fieldManager=apply_scale&force=true", SCALE % 17, APPLY)
    check(f"{kind}: forced scale apply", status == 200 and answer["spec"]["replicas"] == 17, answer)
    replicas, managers, entries = owners(path)
    check(f"{kind}: the scale applier owns replicas", (replicas, managers) == (17, ["apply_scale"])
          and entries[0]["operation"] == "Apply", entries)

    status, answer = call("PUT", path + "/scale?fieldManager=replace_test", SCALE % 7)
    check(f"{kind}: replace", status == 200 and owners(path)[:2] == (7, ["replace_test"]),
          owners(path))
    status, answer = call("PATCH", path + "/scale?fieldManager=co_owning_test", SCALE % 7, APPLY)
    check(f"{kind}: co-owned", status == 200
          and owners(path)[:2] == (7, ["co_owning_test", "replace_test"]), owners(path))
    status, answer = call("PATCH", path + "/scale?fieldManager=scale_test", '{"spec":{"replicas": 5}}', MERGE)
    check(f"{kind}: scaled again", status == 200 and owners(path)[:2] == (5, ["scale_test"]),
          owners(path))

    # A Scale write that leaves spec.replicas alone changes no ownership.
    status, answer = call("PATCH", path + "/scale?fieldManager=status_test", '{"status":{"replicas": 42}}', MERGE)
    check(f"{kind}: status-only scale", status == 200 and owners(path)[:2] == (5, ["scale_test"]),
          owners(path))

    # Bad applies: another kind, no field manager.
    status, answer = call("PATCH", path + "/scale?fieldManager=x",
                          '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"test"}}', APPLY)
    check(f"{kind}: applied kind", status == 400 and answer["message"] ==
          "invalid object type: apps/v1, Kind=Deployment", answer)
    status, answer = call("PATCH", path + "/scale", SCALE % 3, APPLY)
    check(f"{kind}: no field manager", status == 422, answer)
    dup = "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: test\nspec:\n  replicas: 3\n  replicas: 5\n"
    status, answer = call("PATCH", path + "/scale?fieldManager=scale_test&fieldValidation=Strict", dup, APPLY)
    check(f"{kind}: duplicate keys under Strict", status == 400 and answer["message"] ==
          'error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key "replicas" already set in map',
          answer)
    check(f"{kind}: nothing written", owners(path)[:2] == (5, ["scale_test"]), owners(path))
    status, answer = call("PATCH", f"{prefix}/namespaces/default/{resource}/missing/scale?fieldManager=x",
                          SCALE % 3, APPLY)
    check(f"{kind}: missing parent", status == 404, answer)

# A custom resource whose replicas live at .spec.size.
crd = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "scalers.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "scalers", "singular": "scaler", "kind": "Scaler"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                      "statusReplicasPath": ".status.size"}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"},
                                                                          "color": {"type": "string"}}},
                               "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}
status, answer = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json.dumps(crd))
check("crd", status == 201, answer)
CR = "/apis/example.com/v1/namespaces/default/scalers/test"
deadline = time.time() + 30
while True:
    status, answer = call("PATCH", CR + "?fieldManager=owner",
                          '{"apiVersion":"example.com/v1","kind":"Scaler","metadata":{"name":"test"},"spec":{"size":2,"color":"red"}}',
                          APPLY)
    if status != 404 or time.time() > deadline:
        break
    time.sleep(0.2)
check("cr: create by apply", status == 201, answer)
status, answer = call("PATCH", CR + "/scale?fieldManager=apply_scale", SCALE.replace('"test"', '"test"') % 4, APPLY)
check("cr: scale apply conflicts", status == 409 and answer["message"] ==
      'Apply failed with 1 conflict: conflict with "owner": .spec.replicas', answer)
status, answer = call("PATCH", CR + "/scale?fieldManager=apply_scale&force=true", SCALE % 4, APPLY)
check("cr: forced scale apply", status == 200 and answer["spec"]["replicas"] == 4, answer)
size, managers, entries = owners(CR, ("spec", "size"))
check("cr: the scale applier owns spec.size", (size, managers) == (4, ["apply_scale"])
      and entries[0]["apiVersion"] == "example.com/v1", entries)
_, obj = call("GET", CR)
owner = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "owner"]
check("cr: the owner keeps the rest", owner and owner[0]["fieldsV1"] == {"f:spec": {"f:color": {}}}, owner)

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("scale managed fields: ok")
