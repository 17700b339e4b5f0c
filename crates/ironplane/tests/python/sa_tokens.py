"""Service-account tokens over raw HTTPS: TokenRequest answers, bound tokens, and forged or stale
tokens refused with 401 (nothing logged in). The server's signing key is read from the data
directory (argv[1]) to forge tokens that only differ from real ones in one respect.

Usage: sa_tokens.py DATA_DIR   (KUBECONFIG: the admin kubeconfig)
"""
import base64
import json
import os
import ssl
import sys
import time
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from common import Raw

ISSUER = "https://kubernetes.default.svc.cluster.local"
failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(f"{what}: {detail}")
        print(f"FAIL {what}: {detail}")


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(key, claims, kid=None):
    header = b64(json.dumps({"alg": "ES256", **({"kid": kid} if kid is not None else {})}).encode())
    payload = b64(json.dumps(claims).encode())
    der = key.sign(f"{header}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return f"{header}.{payload}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def claims_of(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class Bearer:
    """Requests with a bearer token only (the CA of the kubeconfig, no client certificate)."""

    def __init__(self, raw):
        self.base = raw.base
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def get(self, path, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        req = urllib.request.Request(self.base + path, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def whoami(self, token):
        body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
        req = urllib.request.Request(self.base + "/apis/authentication.k8s.io/v1/selfsubjectreviews", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def eventually_status(bearer, token, want, seconds=5):
    """Authentication reads a watch cache: a deletion reaches it within moments."""
    deadline = time.time() + seconds
    while True:
        st, body = bearer.whoami(token)
        if st == want or time.time() > deadline:
            return st, body
        time.sleep(0.05)


def token_request(raw, ns, sa, spec):
    st, _, body = raw.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    return st, json.loads(body)


def main():
    data_dir = sys.argv[1]
    raw = Raw()
    bearer = Bearer(raw)
    ns = "tokens"
    raw.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    st, _, _ = raw.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
                           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
    check("service account created", st == 201, st)
    sa_uid = json.loads(raw.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/robot")[2])["metadata"]["uid"]

    # A plain token: the answer, the claims, and who it authenticates as.
    st, tr = token_request(raw, ns, "robot", {})
    check("token request", st == 201, tr)
    token = tr["status"]["token"]
    check("the answer names the account", tr["metadata"]["name"] == "robot" and tr["metadata"]["namespace"] == ns, tr["metadata"])
    check("defaults", tr["spec"]["expirationSeconds"] == 3600 and tr["spec"]["audiences"] == [ISSUER], tr["spec"])
    c = claims_of(token)
    check("claims", c["iss"] == ISSUER and c["aud"] == ISSUER and c["sub"] == f"system:serviceaccount:{ns}:robot"
          and c["exp"] - c["iat"] == 3600 and c["kubernetes.io"]["serviceaccount"] == {"name": "robot", "uid": sa_uid}, c)
    st, me = bearer.whoami(token)
    check("the token authenticates", st == 201, (st, me))
    info = me.get("status", {}).get("userInfo", {})
    check("user info", info.get("username") == f"system:serviceaccount:{ns}:robot" and info.get("uid") == sa_uid
          and info.get("groups") == ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
          and info.get("extra", {}).get("authentication.kubernetes.io/credential-id") == [f"JTI={c['jti']}"], info)

    # The issuer's discovery documents: for service accounts (RBAC's
    # system:service-account-issuer-discovery), not for anonymous users; the key set holds the
    # key that signed the token.
    st, headers, body = bearer.get("/.well-known/openid-configuration", token)
    check("openid configuration", st == 200 and headers.get("Content-Type") == "application/json"
          and headers.get("Cache-Control") == "public, max-age=3600", (st, headers))
    config = json.loads(body)
    check("configuration fields", config["issuer"] == ISSUER and config["jwks_uri"].endswith("/openid/v1/jwks")
          and config["id_token_signing_alg_values_supported"] == ["ES256"]
          and list(config) == ["issuer", "jwks_uri", "response_types_supported", "subject_types_supported",
                               "id_token_signing_alg_values_supported"], config)
    st, headers, body = bearer.get("/openid/v1/jwks", token)
    check("jwks", st == 200 and headers.get("Content-Type") == "application/jwk-set+json", (st, headers))
    kid = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["kid"]
    check("the token's key is published", [k["kid"] for k in json.loads(body)["keys"]] == [kid], body)
    check("anonymous users may not read it", bearer.get("/openid/v1/jwks")[0] == 403)

    # Bound to a Secret: valid while the Secret lives.
    raw.request("POST", f"/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "anchor"}})
    st, tr = token_request(raw, ns, "robot", {"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "anchor"},
                                              "audiences": [ISSUER, "vault"], "expirationSeconds": 7200})
    check("bound token", st == 201, tr)
    bound = tr["status"]["token"]
    bc = claims_of(bound)
    check("bound claims", bc["aud"] == [ISSUER, "vault"] and bc["kubernetes.io"]["secret"]["name"] == "anchor"
          and bc["exp"] - bc["iat"] == 7200, bc)
    check("bound token authenticates", bearer.whoami(bound)[0] == 201)
    st, tr = token_request(raw, ns, "robot", {"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "anchor", "uid": "0000"}})
    check("a wrong bound uid conflicts", st == 409 and "does not match the UID in record" in tr["message"], tr)
    raw.request("DELETE", f"/api/v1/namespaces/{ns}/secrets/anchor")
    st, body = eventually_status(bearer, bound, 401)
    check("the bound token dies with its Secret", st == 401 and body.get("reason") == "Unauthorized", (st, body))
    check("the unbound token still works", bearer.whoami(token)[0] == 201)

    # Refusals of the request itself.
    st, tr = token_request(raw, ns, "robot", {"expirationSeconds": 100})
    check("too short", st == 422 and tr["message"] == 'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 100: may not specify a duration less than 10 minutes', tr)
    st, tr = token_request(raw, ns, "nobody", {})
    check("missing account", st == 404 and tr["message"] == 'serviceaccounts "nobody" not found', tr)
    st, tr = token_request(raw, ns, "robot", {"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}})
    check("unsupported bound kind", st == 400 and tr["message"] == "cannot bind token to object of type /v1, Kind=ConfigMap", tr)

    # Forged and stale tokens: 401, whoever they claim to be.
    with open(os.path.join(data_dir, "pki", "sa.key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    now = int(time.time())
    good = {"iss": ISSUER, "aud": ISSUER, "sub": f"system:serviceaccount:{ns}:robot", "iat": now, "nbf": now, "exp": now + 600,
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": "robot", "uid": sa_uid}}}
    check("a token forged with the real key works (the test's own check)", bearer.whoami(sign(key, good))[0] == 201)
    check("... also under the key's own id", bearer.whoami(sign(key, good, kid))[0] == 201)
    other = ec.generate_private_key(ec.SECP256R1())
    bad = {
        "expired": sign(key, {**good, "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}),
        "not yet valid": sign(key, {**good, "nbf": now + 3600}),
        "wrong audience": sign(key, {**good, "aud": "someone-else"}),
        "wrongly signed": sign(other, good),
        # Upstream looks a key up by the token's key id: the right key under another id fails.
        "signed by the key under another key id": sign(key, good, "forged"),
        "wrong uid": sign(key, {**good, "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": "robot", "uid": "0000"}}}),
        "subject not the account": sign(key, {**good, "sub": "system:serviceaccount:kube-system:admin"}),
        "malformed": "a.b.c",
        "not a jwt": "plainly-wrong",
    }
    for what, t in bad.items():
        st, body = bearer.whoami(t)
        check(f"{what} is refused", st == 401 and body.get("reason") == "Unauthorized", (st, body))
    # A deleted account's tokens die with it.
    raw.request("DELETE", f"/api/v1/namespaces/{ns}/serviceaccounts/robot")
    st, _ = eventually_status(bearer, token, 401)
    check("the account's deletion ends its tokens", st == 401, st)
    print(f"sa tokens: {len(failures)} failed")


if __name__ == "__main__":
    main()
