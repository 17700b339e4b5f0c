"""The official Python client against Ironplane: create, list, watch, patch, delete."""
import threading

from kubernetes import client, config, watch

from common import ROOT_CA, Raw, wait_for_root_ca


def main():
    config.load_kube_config()
    v1 = client.CoreV1Api()
    apps = client.AppsV1Api()
    ns = "pyclient"
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    # The watch below starts with what the namespace holds: the root CA publisher's ConfigMap.
    wait_for_root_ca(Raw(), ns)

    seen = []
    started = threading.Event()

    def watcher():
        w = watch.Watch()
        started.set()
        for ev in w.stream(v1.list_namespaced_config_map, namespace=ns, timeout_seconds=10):
            seen.append((ev["type"], ev["object"].metadata.name, ev["object"].data))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=watcher)
    t.start()
    started.wait()
    import time
    time.sleep(0.3)

    cm = v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c1", labels={"app": "py"}), data={"a": "1"}))
    assert cm.metadata.uid and cm.metadata.resource_version
    v1.patch_namespaced_config_map("c1", ns, {"data": {"b": "2"}})
    got = v1.read_namespaced_config_map("c1", ns)
    assert got.data == {"a": "1", "b": "2"}, got.data
    listed = v1.list_namespaced_config_map(ns, label_selector="app=py")
    assert [i.metadata.name for i in listed.items] == ["c1"], listed.items
    assert listed.metadata.resource_version

    d = apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })
    assert d.spec.replicas == 1 and d.spec.strategy.type == "RollingUpdate"
    apps.patch_namespaced_deployment_scale("d1", ns, {"spec": {"replicas": 3}})
    assert apps.read_namespaced_deployment("d1", ns).spec.replicas == 3

    v1.delete_namespaced_config_map("c1", ns)
    t.join(timeout=15)
    events = [s[:2] for s in seen]
    assert events == [("ADDED", ROOT_CA), ("ADDED", "c1"), ("MODIFIED", "c1"), ("DELETED", "c1")], seen
    try:
        v1.read_namespaced_config_map("c1", ns)
        raise AssertionError("deleted object still readable")
    except client.exceptions.ApiException as e:
        assert e.status == 404, e
    print("python client: ok")


if __name__ == "__main__":
    main()
