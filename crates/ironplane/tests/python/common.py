"""Shared helpers for the Python end-to-end scripts: an HTTPS client with the admin
certificate from $KUBECONFIG, for raw requests the kubernetes client cannot make."""
import base64
import json
import os
import ssl
import tempfile
import urllib.request

import yaml


def _kubeconfig():
    with open(os.environ["KUBECONFIG"]) as f:
        return yaml.safe_load(f)


class Raw:
    def __init__(self):
        cfg = _kubeconfig()
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        self.base = cluster["server"]
        d = tempfile.mkdtemp()
        paths = {}
        for key, name in (("certificate-authority-data", "ca"), ("client-certificate-data", "crt"), ("client-key-data", "key")):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(base64.b64decode(cluster.get(key) or user.get(key)))
            paths[name] = p
        self.ctx = ssl.create_default_context(cafile=paths["ca"])
        self.ctx.load_cert_chain(paths["crt"], paths["key"])

    def request(self, method, path, body=None, content_type=None, headers=None):
        data = None
        h = dict(headers or {})
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            h["Content-Type"] = content_type or "application/json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()


# The ConfigMap the root CA publisher puts in every namespace, as on any cluster.
ROOT_CA = "kube-root-ca.crt"


def wait_for_root_ca(raw, namespace, timeout_s=20):
    """Waits until the root CA publisher has put kube-root-ca.crt in the namespace, so a script
    that lists the namespace's ConfigMaps knows every object in it."""
    import time
    deadline = time.time() + timeout_s
    while True:
        status, _, body = raw.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{ROOT_CA}")
        if status == 200:
            return
        assert status == 404 and time.time() < deadline, (status, body)
        time.sleep(0.02)
