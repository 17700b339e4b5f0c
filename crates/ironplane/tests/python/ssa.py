"""Server-side apply from the Python `kubernetes` client, and upstream's answers to bad applies
over raw HTTPS (the client always names a field manager and sends well-formed YAML).

Usage: ssa.py   (KUBECONFIG: the admin kubeconfig)
"""
import json
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from common import Raw

failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL {what}: {detail}")


config.load_kube_config()
core = client.CoreV1Api()
APPLY = "application/apply-patch+yaml"

# The client's apply: creates the object, records the manager, and a forced second manager
# takes the field over.
cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "py"}, "data": {"a": "1"}}
got = core.patch_namespaced_config_map("py", "default", cm, field_manager="py-one",
                                       _content_type=APPLY)
mf = got.metadata.managed_fields
check("create by apply", got.data == {"a": "1"} and len(mf) == 1 and mf[0].manager == "py-one"
      and mf[0].operation == "Apply" and mf[0].fields_v1 == {"f:data": {"f:a": {}}},
      repr(mf))
cm["data"]["a"] = "2"
try:
    core.patch_namespaced_config_map("py", "default", cm, field_manager="py-two",
                                     _content_type=APPLY)
    check("conflict", False, "no conflict")
except ApiException as e:
    body = json.loads(e.body)
    check("conflict", e.status == 409 and body["reason"] == "Conflict"
          and body["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                             "message": 'conflict with "py-one"',
                                             "field": ".data.a"}], e.body)
got = core.patch_namespaced_config_map("py", "default", cm, field_manager="py-two", force=True,
                                       _content_type=APPLY)
check("forced", got.data == {"a": "2"}
      and [m.manager for m in got.metadata.managed_fields] == ["py-two"],
      repr(got.metadata.managed_fields))

raw = Raw()


def apply(path, body, query="fieldManager=m"):
    status, _, answer = raw.request("PATCH", f"{path}?{query}" if query else path, body, APPLY)
    return status, json.loads(answer)


CM = "/api/v1/namespaces/default/configmaps/bad"
status, answer = apply(CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad"}}', "")
check("no fieldManager", status == 422 and answer["message"] ==
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
      answer)
status, answer = apply(CM, "{ unbalanced")
check("not YAML", status == 400 and answer["message"].startswith("error decoding YAML"), answer)
status, answer = apply(CM, '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad"}}')
check("another kind", status == 400 and answer["message"] == "invalid object type: /v1, Kind=Secret",
      answer)
status, answer = apply(CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad",'
                           '"managedFields":[{"manager":"x"}]}}')
check("managedFields sent", status == 400 and answer["message"] == "metadata.managedFields must be nil",
      answer)
# A field the kind does not declare: upstream's typed conversion refuses it, not as a status.
status, answer = apply(CM, '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad"},"spec":{}}')
check("undeclared field", status == 500 and answer.get("reason", "") == "" and answer["message"] ==
      "failed to create typed patch object (/bad; /v1, Kind=ConfigMap): .spec: field not declared in schema",
      answer)
# A container without its key: the key's default (an empty name) makes it an item, which
# validation then refuses.
status, answer = apply("/api/v1/namespaces/default/pods/p",
                       "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
                       "  containers:\n  - image: nginx\n")
check("keyless item", status == 422 and any(c.get("field") == "spec.containers[0].name"
                                           for c in answer["details"]["causes"]), answer)
status, _, _ = raw.request("GET", "/api/v1/namespaces/default/pods/p")
check("nothing stored", status == 404, status)
# A dry run answers with the object and stores nothing.
status, answer = apply("/api/v1/namespaces/default/configmaps/dry",
                       '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"},"data":{"k":"v"}}',
                       "fieldManager=m&dryRun=All")
check("dry run", status == 201 and answer["data"] == {"k": "v"}
      and answer["metadata"]["managedFields"][0]["manager"] == "m", answer)
status, _, _ = raw.request("GET", "/api/v1/namespaces/default/configmaps/dry")
check("dry run stores nothing", status == 404, status)

# Managed fields travel in every form of the object, as upstream's do.
PY = "/api/v1/namespaces/default/configmaps/py"
for accept, pick in (
        ("application/json;as=Table;v=v1;g=meta.k8s.io", lambda d: d["rows"][0]["object"]["metadata"]),
        ("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", lambda d: d["metadata"]),
        ("application/yaml", None)):
    status, _, answer = raw.request("GET", PY, headers={"Accept": accept})
    if pick is None:
        import yaml
        meta = yaml.safe_load(answer)["metadata"]
    else:
        meta = pick(json.loads(answer))
    check(f"managed fields in {accept}", status == 200
          and [m["manager"] for m in meta.get("managedFields", [])] == ["py-two"], meta)
status, _, answer = raw.request("GET", PY, headers={"Accept": "application/vnd.kubernetes.protobuf"})
check("managed fields in protobuf", status == 200 and b"py-two" in answer and b"f:data" in answer,
      answer[:80])

if failures:
    print(f"{len(failures)} failed: {', '.join(failures)}")
    sys.exit(1)
print("server-side apply: ok")
