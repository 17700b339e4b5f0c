"""The official Python client's CustomObjectsApi against Ironplane (issue 8): a CRD created
through ApiextensionsV1Api, then custom objects created, listed, patched (merge patch, status)
and deleted, each answer checked."""
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "py.example.com", "v1", "sprockets"


def main():
    config.load_kube_config()
    ext = client.ApiextensionsV1Api()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "kind": "Sprocket"},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "teeth": {"type": "integer", "minimum": 3, "default": 12}}},
                    "status": {"type": "object", "properties": {"turning": {"type": "boolean"}}},
                }}},
            }],
        },
    }
    ext.create_custom_resource_definition(crd)
    deadline = time.time() + 10
    while True:
        got = ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        conds = {c.type: c.status for c in (got.status.conditions or [])}
        if conds.get("Established") == "True":
            break
        assert time.time() < deadline, f"not established: {conds}"
        time.sleep(0.02)

    api = client.CustomObjectsApi()
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Sprocket", "metadata": {"name": "s1"}, "spec": {}}
    created = api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert created["spec"] == {"teeth": 12}, created
    assert created["metadata"]["generation"] == 1, created

    try:
        bad = dict(body, metadata={"name": "s2"}, spec={"teeth": 1})
        api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, bad)
        raise AssertionError("a schema violation was accepted")
    except ApiException as e:
        assert e.status == 422, e
        assert "spec.teeth: Invalid value: 1: spec.teeth in body should be greater than or equal to 3" in e.body, e.body

    listed = api.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["s1"], listed
    assert listed["kind"] == "SprocketList", listed

    patched = api.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "s1", {"spec": {"teeth": 20}})
    assert patched["spec"]["teeth"] == 20 and patched["metadata"]["generation"] == 2, patched
    status = api.patch_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "s1",
                                                       {"status": {"turning": True}})
    assert status["status"] == {"turning": True} and status["metadata"]["generation"] == 2, status

    api.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "s1")
    try:
        api.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "s1")
        raise AssertionError("the deleted object is still there")
    except ApiException as e:
        assert e.status == 404, e
    print("custom objects: ok")


if __name__ == "__main__":
    main()
