"""Hostile input against the real binary (issue 6: never crash, never corrupt, never wedge).

Several hundred bad requests, each checked for the HTTP code AND the metav1.Status body that
kube-apiserver v1.36 answers (kind Status, code, reason; the message where upstream's is
stable): deep nesting in JSON, YAML and protobuf, YAML alias bombs, type confusion generated
from the served /openapi/v2 over every creatable kind, hostile patches, bad query parameters,
continue tokens and selectors, big headers, long URLs, big bodies; then garbage on the wire
(plain HTTP to the TLS port, random bytes, truncated ClientHellos, broken request lines).
Afterwards the server must still answer /readyz and nothing may have been written: every
object these requests name starts with "hostile", and no collection holds one afterwards; the
one object patched ("hostile-victim") keeps its data and labels.

Upstream's answers come from the apiserver sources (handlers/create.go, patch.go, rest.go,
get.go; meta/v1 validation; the json serializer; sigs.k8s.io/json, yaml.v2 limits; Go's
net/http MaxHeaderBytes of 1 MiB) and from the recorded corpus in upstream-v1.36.

Where Ironplane answers differently on purpose, the case asserts Ironplane's answer and says why
(each is listed in the README's testing section):
- Nesting: objects may nest at most 100 levels (MAX_OBJECT_DEPTH), in every format, where Go
  allows 10,000 JSON or YAML levels and unlimited protobuf ones. Deeper input gets the same 400
  that upstream gives past its own limit ("exceeded max depth"), instead of being decoded.
- URLs: the HTTP stack (hyper's request parser, through the `http` crate's `Uri`) refuses a
  request target over 64 KiB with a bare 414; Go accepts up to its 1 MiB header limit.
- CRDs: their validation is issue 8's, so the protobuf CRD sanity case is a dry run.

Prints every failing case with expected vs got, then `N passed, M failed`; exits 1 if M > 0."""
import base64
import http.client
import json
import os
import random
import socket
import ssl
import sys
import time

from common import Raw

RAW = Raw()
HOST, PORT = RAW.base.replace("https://", "").rsplit(":", 1)
PORT = int(PORT)
NS = "default"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
VICTIM = "hostile-victim"
VICTIM_PATH = f"{CM_PATH}/{VICTIM}"
PB = "application/vnd.kubernetes.protobuf"
MAX_BODY = 3 * 1024 * 1024
# Ironplane's nesting limit for every decoded object (decode.rs MAX_OBJECT_DEPTH).
OUR_MAX_DEPTH = 100
# The longest request target the HTTP stack reads (http::Uri's limit).
MAX_URI = 65_534

results = []  # (name, ok, detail)


# ---------------------------------------------------------------------------------------------
# transport


def send(method, path, body=None, ctype=None, headers=None, accept="application/json", timeout=60):
    """One request on its own TLS connection; returns (status, headers, body bytes) or raises."""
    conn = http.client.HTTPSConnection(HOST, PORT, context=RAW.ctx, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        if accept:
            conn.putheader("Accept", accept)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
            conn.putheader("Content-Type", ctype or "application/json")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders()
        if data is not None:
            conn.send(data)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def short(b, n=400):
    s = b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else str(b)
    return s if len(s) <= n else s[: n // 2] + f" ...[{len(s)} chars]... " + s[-n // 2:]


def record(name, ok, detail=""):
    results.append((name, ok, detail))


# ---------------------------------------------------------------------------------------------
# expectations


def expect_status(name, method, path, code, reason, body=None, ctype=None, headers=None,
                  message=None, contains=(), accept="application/json", timeout=60):
    """Expects a metav1.Status: HTTP code == code, body kind Status, code, reason, status
    Failure; message equal to `message` when given, and containing every `contains`."""
    want = f"{code} {reason}" + (f" message={message!r}" if message else "") + (f" containing {list(contains)!r}" if contains else "")
    try:
        st, _, b = send(method, path, body, ctype, headers, accept, timeout)
    except Exception as e:  # noqa: BLE001 - any transport failure is a failed case
        record(name, False, f"expected {want}; got transport error {type(e).__name__}: {e}")
        return
    problems = []
    if st != code:
        problems.append(f"HTTP {st}")
    try:
        j = json.loads(b)
    except Exception:  # noqa: BLE001
        record(name, False, f"expected {want}; got HTTP {st} non-JSON body {short(b)!r}")
        return
    if not isinstance(j, dict) or j.get("kind") != "Status" or j.get("apiVersion") != "v1":
        problems.append("not a v1 Status")
    else:
        if j.get("code") != code:
            problems.append(f"code {j.get('code')}")
        if j.get("reason", "") != reason:
            problems.append(f"reason {j.get('reason')!r}")
        if j.get("status") != "Failure":
            problems.append(f"status {j.get('status')!r}")
        msg = j.get("message", "")
        if message is not None and msg != message:
            problems.append("message differs")
        for c in contains:
            if c not in msg:
                problems.append(f"message lacks {c!r}")
    if problems:
        record(name, False, f"expected {want}; got HTTP {st} ({', '.join(problems)}): {short(b)}")
    else:
        record(name, True)


def expect_ok(name, method, path, code, kind, body=None, ctype=None, headers=None, check=None):
    """Expects success with an object of `kind` (and check(obj) true when given)."""
    try:
        st, _, b = send(method, path, body, ctype, headers)
    except Exception as e:  # noqa: BLE001
        record(name, False, f"expected {code} {kind}; got transport error {type(e).__name__}: {e}")
        return None
    try:
        j = json.loads(b)
    except Exception:  # noqa: BLE001
        j = None
    if st != code or not isinstance(j, dict) or j.get("kind") != kind or (check and not check(j)):
        record(name, False, f"expected {code} {kind}; got HTTP {st}: {short(b)}")
        return None
    record(name, True)
    return j


def expect_refused(name, method, path, headers, codes=(431,)):
    """Over-limit requests: Go's net/http answers 431 (plain text) and closes; a connection
    closed without an answer is also a refusal. Success (2xx) is a failure."""
    try:
        st, _, b = send(method, path, None, None, headers)
    except (ConnectionError, ssl.SSLError, http.client.HTTPException, OSError) as e:
        record(name, True, f"closed: {e}")
        return
    record(name, st in codes, f"expected refusal {codes}; got HTTP {st}: {short(b, 200)}")


def readyz(name):
    try:
        st, _, b = send("GET", "/readyz", accept=None, timeout=10)
        record(name, st == 200 and b.strip() == b"ok", f"expected 200 ok; got {st} {short(b, 100)}")
    except Exception as e:  # noqa: BLE001
        record(name, False, f"/readyz failed: {type(e).__name__}: {e}")


def decode_err(kind, version, err):
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {err}'


def cm_body(name="hostile-cm", data=None, **top):
    o = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    if data is not None:
        o["data"] = data
    o.update(top)
    return o


def deep_array(n, leaf="1"):
    return "[" * n + leaf + "]" * n


def deep_object(n, key="x", leaf='"v"'):
    return ('{"%s":' % key) * n + leaf + "}" * n


def crd_json(name, scope, schema_json):
    return ('{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",'
            '"metadata":{"name":"widgets.%s.example.com"},"spec":{"group":"%s.example.com",'
            '"scope":"%s","names":{"plural":"widgets","kind":"Widget"},"versions":[{"name":"v1",'
            '"served":true,"storage":true,"schema":{"openAPIV3Schema":%s}}]}}') % (name, name, scope, schema_json)


def deep_not_schema(n):
    return '{"type":"object","not":' + '{"not":' * (n - 1) + "{}" + "}" * (n - 1) + "}"


# ---------------------------------------------------------------------------------------------
# protobuf by hand (field numbers from apiextensions/v1 and runtime generated.proto)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def pb_bool(num, v):
    return varint(num << 3) + varint(1 if v else 0)


def pb_envelope(api_version, kind, raw):
    type_meta = pb_bytes(1, api_version) + pb_bytes(2, kind)
    return b"k8s\x00" + pb_bytes(1, type_meta) + pb_bytes(2, raw)


def pb_deep_not(depth):
    """JSONSchemaProps{type: object, not: {not: {... depth levels ...}}} (not = 28, type = 5)."""
    inner = b""
    for _ in range(depth - 1):
        inner = pb_bytes(28, inner)
    return pb_bytes(5, "object") + pb_bytes(28, inner)


def pb_crd(name, scope, schema):
    meta = pb_bytes(1, f"widgets.{name}.example.com")
    names = pb_bytes(1, "widgets") + pb_bytes(4, "Widget")
    version = pb_bytes(1, "v1") + pb_bool(2, True) + pb_bool(3, True) + pb_bytes(4, pb_bytes(1, schema))
    spec = pb_bytes(1, f"{name}.example.com") + pb_bytes(3, names) + pb_bytes(4, scope) + pb_bytes(7, version)
    return pb_envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", pb_bytes(1, meta) + pb_bytes(2, spec))


# ---------------------------------------------------------------------------------------------
# case groups


def deep_nesting():
    # Go's scanner reports "invalid character '[' exceeded max depth" (scanner.pushParseState).
    max_depth = "couldn't get version/kind; json parse error: invalid character '%s' exceeded max depth"
    cm_type = "json: cannot unmarshal %s into Go struct field ConfigMap.data of type string"
    # Go's encoding/json scanner stops at 10,000 levels; the body's own two levels count.
    for n in (10_000, 100_000, 1_000_000):
        body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hostile-deep"},"data":{"a":%s}}' % deep_array(n)
        expect_status(f"json {n}-deep array in ConfigMap data", "POST", CM_PATH, 400, "BadRequest", body,
                      contains=("the object provided is unrecognized (must be of type ConfigMap)", max_depth % "["))
    for n in (10_000, 100_000):
        body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hostile-deep"},"data":{"a":%s}}' % deep_object(n)
        expect_status(f"json {n}-deep object in ConfigMap data", "POST", CM_PATH, 400, "BadRequest", body,
                      contains=(max_depth % "{",))
    body = deep_array(20_000)
    expect_status("json bare 20000-deep array body", "POST", CM_PATH, 400, "BadRequest", body, contains=(max_depth % "[",))
    # Between Ironplane's limit and Go's, Go decodes and answers the type error; Ironplane
    # refuses the nesting itself (see the module doc).
    for n in (OUR_MAX_DEPTH, 9_000):
        body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hostile-deep"},"data":{"a":%s}}' % deep_array(n)
        expect_status(f"json {n}-deep array in ConfigMap data (past our limit)", "POST", CM_PATH, 400, "BadRequest", body,
                      contains=(max_depth % "[",))
    body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hostile-deep","labels":%s}}' % deep_object(9_000)
    expect_status("json 9000-deep object in labels (past our limit)", "POST", CM_PATH, 400, "BadRequest", body,
                  contains=(max_depth % "{",))
    # Within the limit the type check answers, as upstream.
    body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hostile-deep"},"data":{"a":%s}}' % deep_array(OUR_MAX_DEPTH - 3)
    expect_status("json 97-deep array in ConfigMap data (within our limit)", "POST", CM_PATH, 400, "BadRequest", body,
                  message=decode_err("ConfigMap", "v1", cm_type % "array"))
    # CRD openAPIV3Schema `not` chains.
    expect_status("json CRD openAPIV3Schema not 10000-deep", "POST", CRD_PATH, 400, "BadRequest",
                  crd_json("hostile-deep1", "Namespaced", deep_not_schema(10_000)), contains=(max_depth % "{",))
    expect_status("json CRD openAPIV3Schema not 50000-deep", "POST", CRD_PATH, 400, "BadRequest",
                  crd_json("hostile-deep2", "Namespaced", deep_not_schema(50_000)), contains=(max_depth % "{",))
    expect_status("json CRD not 9000-deep (past our limit)", "POST", CRD_PATH, 400, "BadRequest",
                  crd_json("hostile-deep3", "Global", deep_not_schema(9_000)), contains=(max_depth % "{",))
    # YAML: yaml.v2 stops at 10,000 levels, Ironplane at its own limit, with go-yaml's words.
    y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-yaml\ndata:\n  a: %s\n" % deep_array(10_001)
    expect_status("yaml 10001-deep flow sequence", "POST", CM_PATH, 400, "BadRequest", y, "application/yaml",
                  contains=("yaml: exceeded max depth of",))
    y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-yaml\ndata:\n  a: %s\n" % ("{a: " * 10_001 + "b" + "}" * 10_001)
    expect_status("yaml 10001-deep flow mapping", "POST", CM_PATH, 400, "BadRequest", y, "application/yaml",
                  contains=("yaml: exceeded max depth of",))
    y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-yaml\ndata:\n  a:\n    " + "- " * 10_001 + "x\n"
    expect_status("yaml 10001-deep block sequence", "POST", CM_PATH, 400, "BadRequest", y, "application/yaml",
                  contains=("yaml: exceeded max depth of",))
    for n in (OUR_MAX_DEPTH, 5_000):
        y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-yaml\ndata:\n  a: %s\n" % deep_array(n)
        expect_status(f"yaml {n}-deep flow sequence (past our limit)", "POST", CM_PATH, 400, "BadRequest", y,
                      "application/yaml", contains=("yaml: exceeded max depth of",))
    y = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-yaml\ndata:\n  a: %s\n" % deep_array(OUR_MAX_DEPTH - 3)
    expect_status("yaml 97-deep flow sequence (within our limit)", "POST", CM_PATH, 400, "BadRequest", y, "application/yaml",
                  message=decode_err("ConfigMap", "v1", cm_type % "array"))
    # Alias bombs: yaml.v2 refuses documents whose aliases expand excessively.
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: hostile-bomb", "x:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for level in "bcdefghi":
        lines.append(f"  {level}: &{level} [" + ",".join(f"*{prev}" for _ in range(9)) + "]")
        prev = level
    lines.append(f"data:\n  a: *{prev}")
    expect_status("yaml billion laughs (9x9 aliases)", "POST", CM_PATH, 400, "BadRequest", "\n".join(lines) + "\n", "application/yaml",
                  contains=("document contains excessive aliasing",))
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: hostile-bomb", "x:", "  a: &a [" + ",".join(["lol"] * 50) + "]"]
    prev = "a"
    for level in "bcdefg":
        lines.append(f"  {level}: &{level} [" + ",".join(f"*{prev}" for _ in range(50)) + "]")
        prev = level
    expect_status("yaml alias bomb (7x50 aliases)", "POST", CM_PATH, 400, "BadRequest", "\n".join(lines) + "\n", "application/yaml",
                  contains=("document contains excessive aliasing",))
    # Protobuf: a CRD whose schema nests `not` 10,000 and 100,000 deep. Upstream's protobuf
    # decoder has no depth limit; Ironplane's refuses past its own before it recurses.
    def shallow_crd_decoded(o):
        schema = o.get("spec", {}).get("versions", [{}])[0].get("schema", {}).get("openAPIV3Schema", {})
        return schema.get("not", {}).get("not", {}).get("not") == {}
    expect_ok("protobuf CRD, shallow schema, dry run (sanity)", "POST", CRD_PATH + "?dryRun=All", 201,
              "CustomResourceDefinition", pb_crd("hostile-pb0", "Namespaced", pb_deep_not(3)), PB, check=shallow_crd_decoded)
    for n in (10_000, 100_000):
        expect_status(f"protobuf CRD openAPIV3Schema not {n}-deep", "POST", CRD_PATH, 400, "BadRequest",
                      pb_crd(f"hostile-pb{n}", "Global", pb_deep_not(n)), PB,
                      contains=(f"protobuf message nests deeper than {OUR_MAX_DEPTH} levels",))
    # Broken protobuf: the decoder must answer 400, not fall over.
    good = pb_crd("hostile-pb3", "Global", pb_deep_not(3))
    for label, body in (("truncated", good[: len(good) // 2]),
                        ("length varint overflow", b"k8s\x00\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
                        ("length past the end", b"k8s\x00\x12\xf0\xff\x0f" + b"\x00" * 10),
                        ("garbage after magic", b"k8s\x00" + bytes(random.Random(6).randrange(256) for _ in range(4096))),
                        ("no magic", b"\x0a\x05hello")):
        expect_status(f"protobuf CRD {label}", "POST", CRD_PATH, 400, "BadRequest", body, PB)


def type_confusion():
    """Wrong JSON types in every creatable kind's top-level and spec fields, from /openapi/v2."""
    st, _, b = send("GET", "/openapi/v2")
    if st != 200:
        record("GET /openapi/v2", False, f"HTTP {st}")
        return []
    doc = json.loads(b)
    defs = doc["definitions"]
    custom = ("intstr.IntOrString", "resource.Quantity", "meta.v1.Time", "meta.v1.MicroTime", "runtime.RawExtension",
              "meta.v1.Duration", "meta.v1.FieldsV1", "apiextensions.v1.JSON", "JSONSchemaPropsOr", "meta.v1.Patch")

    def ref_of(prop):
        if "$ref" in prop:
            return prop["$ref"].split("/")[-1]
        for a in prop.get("allOf", []):
            if "$ref" in a:
                return a["$ref"].split("/")[-1]
        return None

    def go_name(ref):
        parts = ref.split(".")
        return f"{parts[-2]}.{parts[-1]}"

    def wrong(prop):
        """(bad value, Go's word for its JSON kind, Go type string or None when not derivable)."""
        ref = ref_of(prop)
        if ref:
            if any(c in ref for c in custom):
                return None
            d = defs.get(ref, {})
            if d.get("type") != "object" or "properties" not in d:
                return None
            return "x", "string", go_name(ref)
        t, fmt = prop.get("type"), prop.get("format")
        if t == "string":
            return None if fmt in ("byte", "int-or-string", "date-time") else (5, "number", None)
        if t == "integer":
            return "x", "string", fmt if fmt in ("int32", "int64") else None
        if t == "boolean":
            return "x", "string", "bool"
        if t == "number":
            return "x", "string", None
        if t == "object" and "additionalProperties" in prop:
            return ["a"], "array", None
        if t == "array":
            item = prop.get("items", {})
            r = ref_of(item)
            if r and not any(c in r for c in custom) and "properties" in defs.get(r, {}):
                return {"a": 1}, "object", "[]" + go_name(r)
            return {"a": 1}, "object", None
        return None

    posted = []
    for path, ops in sorted(doc["paths"].items()):
        op = ops.get("post")
        if not op or op.get("x-kubernetes-action") != "post" or "{name}" in path:
            continue
        gvk = op["x-kubernetes-group-version-kind"]
        kind, version, group = gvk["kind"], gvk["version"], gvk["group"]
        api_version = f"{group}/{version}" if group else version
        ref = None
        for p in op.get("parameters", []) + ops.get("parameters", []):
            if p.get("in") == "body":
                ref = ref_of(p.get("schema", {}))
        if not ref or ref not in defs:
            continue
        url = path.replace("{namespace}", NS)
        posted.append(url)
        top = defs[ref].get("properties", {})
        fields = []
        for fname, prop in top.items():
            if fname in ("apiVersion", "kind"):
                continue
            fields.append(((fname,), kind, prop))
        sref = ref_of(top.get("spec", {}))
        if sref and sref in defs:
            for fname, prop in defs[sref].get("properties", {}).items():
                fields.append((("spec", fname), sref.split(".")[-1], prop))
        for fpath, struct, prop in fields:
            w = wrong(prop)
            if w is None:
                continue
            variants = [w]
            if prop.get("type") == "integer" and w[2]:
                variants.append((1.5, "number 1.5", w[2]))
            for value, jkind, gotype in variants:
                seq = len(results)
                obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": f"hostile-tc-{seq}"}}
                if fpath[0] == "metadata":
                    obj["metadata"] = value
                elif len(fpath) == 1:
                    obj[fpath[0]] = value
                else:
                    obj["spec"] = {fpath[1]: value}
                prefix = f"json: cannot unmarshal {jkind} into Go struct field {struct}.{'.'.join(fpath)} of type "
                name = f"type confusion {api_version} {kind} .{'.'.join(fpath)} = {json.dumps(value)}"
                if gotype:
                    expect_status(name, "POST", url, 400, "BadRequest", obj, message=decode_err(kind, version, prefix + gotype))
                else:
                    expect_status(name, "POST", url, 400, "BadRequest", obj, contains=(decode_err(kind, version, prefix),))
    # Hand-written ones, with upstream's full messages.
    hand = [
        ("ConfigMap data {a: 5}", CM_PATH, cm_body(data={"a": 5}),
         decode_err("ConfigMap", "v1", "json: cannot unmarshal number into Go struct field ConfigMap.data of type string")),
        ("ConfigMap labels [a]", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-tc", "labels": ["a"]}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string")),
        ("ConfigMap annotations {a: true}", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-tc", "annotations": {"a": True}}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.annotations of type string")),
        ("ConfigMap name 5", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string")),
        ("ConfigMap finalizers {}", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-tc", "finalizers": {}}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.finalizers of type []string")),
        ("ConfigMap generation x", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-tc", "generation": "x"}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of type int64")),
        ("ConfigMap ownerReferences x", CM_PATH, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hostile-tc", "ownerReferences": "x"}},
         decode_err("ConfigMap", "v1", "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference")),
        ("ConfigMap immutable x", CM_PATH, cm_body(immutable="x"),
         decode_err("ConfigMap", "v1", "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool")),
        ("Deployment replicas three", "/apis/apps/v1/namespaces/default/deployments",
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hostile-tc"}, "spec": {"replicas": "three"}},
         decode_err("Deployment", "v1", "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32")),
        ("Deployment replicas 1.5", "/apis/apps/v1/namespaces/default/deployments",
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hostile-tc"}, "spec": {"replicas": 1.5}},
         decode_err("Deployment", "v1", "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32")),
        ("Deployment replicas 3000000000", "/apis/apps/v1/namespaces/default/deployments",
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hostile-tc"}, "spec": {"replicas": 3000000000}},
         decode_err("Deployment", "v1", "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32")),
        ("Pod containerPort string", "/api/v1/namespaces/default/pods",
         {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile-tc"}, "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}},
         decode_err("Pod", "v1", "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32")),
        ("Deployment template containers {}", "/apis/apps/v1/namespaces/default/deployments",
         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hostile-tc"}, "spec": {"template": {"spec": {"containers": {}}}}},
         decode_err("Deployment", "v1", "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container")),
    ]
    for name, url, obj, msg in hand:
        expect_status(f"type confusion {name}", "POST", url, 400, "BadRequest", obj, message=msg)
    # Wrong top-level shapes.
    expect_status("body is a JSON array", "POST", CM_PATH, 400, "BadRequest", "[1,2,3]",
                  contains=("the object provided is unrecognized (must be of type ConfigMap)", "couldn't get version/kind; json parse error"))
    expect_status("body is a JSON string", "POST", CM_PATH, 400, "BadRequest", '"x"',
                  contains=("couldn't get version/kind; json parse error",))
    expect_status("body kind is a number", "POST", CM_PATH, 400, "BadRequest", '{"apiVersion":"v1","kind":5}',
                  contains=("couldn't get version/kind; json parse error",))
    expect_status("body truncated", "POST", CM_PATH, 400, "BadRequest", '{"apiVersion": "v1", "kind": ',
                  message='the object provided is unrecognized (must be of type ConfigMap): couldn\'t get version/kind; json parse error: unexpected end of JSON input ({"apiVersion": "v1", "kind": )')
    expect_status("body invalid UTF-8 JSON garbage", "POST", CM_PATH, 400, "BadRequest", b"\xff\xfe\x00garbage",
                  contains=("couldn't get version/kind; json parse error",))
    expect_status("wrong kind (Secret to configmaps)", "POST", CM_PATH, 400, "BadRequest",
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hostile-wk"}},
                  message='Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion')
    return posted


def patches():
    canonical = cm_body(VICTIM, data={"a": "YWJj"}, metadata={"name": VICTIM, "labels": {"keep": "me"}})
    st, _, b = send("POST", CM_PATH, canonical)
    record("create the patch victim", st == 201, f"HTTP {st}: {short(b)}")

    def restore_if_changed():
        """A refused patch must leave the victim as it was; if it did not, say so and put the
        victim back, so that the next case starts from the same object."""
        st, _, b = send("GET", VICTIM_PATH)
        o = json.loads(b) if st == 200 else {}
        now = (o.get("kind"), o.get("apiVersion"), o.get("data"), o.get("metadata", {}).get("labels"))
        if now != ("ConfigMap", "v1", {"a": "YWJj"}, {"keep": "me"}):
            record(f"{results[-1][0]}: victim unchanged", False, f"victim now HTTP {st}: {short(b)}")
            send("PUT", VICTIM_PATH, canonical)

    def es(*a, **k):
        expect_status(*a, **k)
        restore_if_changed()

    def eo(*a, **k):
        expect_ok(*a, **k)
        restore_if_changed()

    mp, jp, smp = "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json"
    conv = "converting (v1.Secret) to (core.ConfigMap): unknown conversion"
    es("json patch replace /kind Secret", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '[{"op":"replace","path":"/kind","value":"Secret"}]', jp, contains=(conv,))
    es("merge patch kind Secret", "PATCH", VICTIM_PATH, 422, "Invalid", '{"kind":"Secret"}', mp, contains=(conv,))
    es("strategic patch kind Secret", "PATCH", VICTIM_PATH, 422, "Invalid", '{"kind":"Secret"}', smp)
    # Removing kind: the decoder defaults it from the resource, so upstream applies the patch
    # (a no-op) and answers the object.
    eo("json patch remove /kind (defaulted back)", "PATCH", VICTIM_PATH, 200, "ConfigMap",
              '[{"op":"remove","path":"/kind"}]', jp, check=lambda o: o.get("data") == {"a": "YWJj"})
    eo("merge patch kind null (defaulted back)", "PATCH", VICTIM_PATH, 200, "ConfigMap",
              '{"kind":null}', mp, check=lambda o: o.get("data") == {"a": "YWJj"})
    nokind = 'no kind "ConfigMap" is registered for version'
    es("json patch replace /apiVersion apps/v1", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '[{"op":"replace","path":"/apiVersion","value":"apps/v1"}]', jp, contains=(nokind + ' "apps/v1"',))
    es("merge patch apiVersion v2", "PATCH", VICTIM_PATH, 422, "Invalid", '{"apiVersion":"v2"}', mp,
                  contains=(nokind + ' "v2"',))
    # Not an object: with the default fieldValidation (Warn) the patch is strictly decoded first.
    es("merge patch [1]", "PATCH", VICTIM_PATH, 400, "BadRequest", "[1]", mp,
                  message="error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}")
    es("merge patch 5", "PATCH", VICTIM_PATH, 400, "BadRequest", "5", mp,
                  message="error decoding patch: json: cannot unmarshal number into Go value of type map[string]interface {}")
    es("merge patch \"x\"", "PATCH", VICTIM_PATH, 400, "BadRequest", '"x"', mp,
                  message="error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}")
    es("merge patch null", "PATCH", VICTIM_PATH, 400, "BadRequest", "null", mp, message="Invalid JSON Patch")
    es("merge patch [1] fieldValidation=Ignore", "PATCH", VICTIM_PATH + "?fieldValidation=Ignore", 422, "Invalid", "[1]", mp,
                  contains=("couldn't get version/kind; json parse error",))
    es("merge patch syntax error", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"data":', mp, contains=("error decoding patch",))
    es("json patch not a list", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"op":"add","path":"/data/b","value":"1"}', jp,
                  contains=("error decoding patch",))
    es("json patch syntax error", "PATCH", VICTIM_PATH, 400, "BadRequest", '[{"op":', jp, contains=("error decoding patch",))
    es("strategic patch [1]", "PATCH", VICTIM_PATH, 400, "BadRequest", "[1]", smp)
    es("strategic patch syntax error", "PATCH", VICTIM_PATH, 400, "BadRequest", "{", smp)
    # Patches that produce the wrong types.
    es("merge patch data.a = 5", "PATCH", VICTIM_PATH, 422, "Invalid", '{"data":{"a":5}}', mp,
                  contains=("json: cannot unmarshal number into Go struct field ConfigMap.data of type string",))
    es("merge patch labels = [x]", "PATCH", VICTIM_PATH, 422, "Invalid", '{"metadata":{"labels":["x"]}}', mp,
                  contains=("json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string",))
    es("json patch add /data/b 5", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"add","path":"/data/b","value":5}]', jp,
                  contains=("json: cannot unmarshal number into Go struct field ConfigMap.data of type string",))
    es("json patch replace /metadata/name 5", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '[{"op":"replace","path":"/metadata/name","value":5}]', jp,
                  contains=("json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string",))
    es("json patch replace /metadata []", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '[{"op":"replace","path":"/metadata","value":[]}]', jp,
                  contains=("json: cannot unmarshal array into Go struct field ConfigMap.metadata of type v1.ObjectMeta",))
    es("strategic patch data.a = 5", "PATCH", VICTIM_PATH, 422, "Invalid", '{"data":{"a":5}}', smp)
    # Operations that do not apply.
    es("json patch unknown op", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"frob","path":"/data/a"}]', jp)
    es("json patch failing test", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"test","path":"/data/a","value":"nope"}]', jp)
    es("json patch remove missing key", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"remove","path":"/data/zzz"}]', jp)
    es("json patch replace in missing parent", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"replace","path":"/nope/deeper/x","value":1}]', jp)
    es("json patch move from missing", "PATCH", VICTIM_PATH, 422, "Invalid", '[{"op":"move","from":"/data/zzz","path":"/data/b"}]', jp)
    # Identity changes.
    es("merge patch metadata.name", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"metadata":{"name":"hostile-other"}}', mp,
                  message=f"the name of the object (hostile-other) does not match the name on the URL ({VICTIM})")
    es("merge patch metadata.namespace", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"metadata":{"namespace":"kube-system"}}', mp,
                  contains=("does not match the namespace",))
    es("merge patch with force", "PATCH", VICTIM_PATH + "?force=true", 422, "Invalid", '{"data":{"b":"1"}}', mp,
                  contains=("force: Forbidden: may not be specified for non-apply patch",))
    es("patch with unsupported content type", "PATCH", VICTIM_PATH, 415, "UnsupportedMediaType", '{"data":{}}', "application/xml")
    # Deep patches.
    deep = "error decoding patch: invalid character '%s' exceeded max depth"
    es("merge patch 10000-deep", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"data":{"a":%s}}' % deep_array(10_000), mp,
                  message=deep % "[")
    es("merge patch 100000-deep", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"data":{"a":%s}}' % deep_object(100_000), mp,
                  message=deep % "{")
    es("json patch value 10000-deep", "PATCH", VICTIM_PATH, 400, "BadRequest",
                  '[{"op":"add","path":"/data/b","value":%s}]' % deep_array(10_000), jp, message=deep % "[")
    es("strategic patch 10000-deep", "PATCH", VICTIM_PATH, 400, "BadRequest", '{"data":{"a":%s}}' % deep_object(10_000), smp,
                  message="invalid character '{' exceeded max depth")
    es("merge patch 9000-deep (past our limit)", "PATCH", VICTIM_PATH, 400, "BadRequest",
                  '{"data":{"a":%s}}' % deep_array(9_000), mp, message=deep % "[")
    es("merge patch 97-deep (applies, wrong type)", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '{"data":{"a":%s}}' % deep_array(OUR_MAX_DEPTH - 3), mp,
                  contains=("json: cannot unmarshal array into Go struct field ConfigMap.data of type string",))
    # Huge patches.
    ops = ",".join('{"op":"add","path":"/data/k%d","value":"v"}' % i for i in range(10_001))
    es("json patch with 10001 operations", "PATCH", VICTIM_PATH, 413, "RequestEntityTooLarge", "[" + ops + "]", jp,
                  message="Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001")
    es("merge patch over 3 MiB", "PATCH", VICTIM_PATH, 413, "RequestEntityTooLarge",
                  '{"data":{"big":"%s"}}' % ("x" * (MAX_BODY + 10)), mp, message=f"Request entity too large: limit is {MAX_BODY}")
    es("merge patch making the object too big", "PATCH", VICTIM_PATH, 422, "Invalid",
                  '{"data":{"big":"%s"}}' % ("x" * (1024 * 1024 + 10)), mp, contains=("Too long: may not be more than 1048576 bytes",))
    es("patch of a missing object", "PATCH", CM_PATH + "/hostile-missing", 404, "NotFound", '{"data":{"a":"1"}}', mp,
                  message='configmaps "hostile-missing" not found')


def params_and_selectors():
    syntax = 'parsing "abc": invalid syntax'
    expect_status("list timeoutSeconds=abc", "GET", CM_PATH + "?timeoutSeconds=abc", 400, "BadRequest", contains=(syntax,))
    expect_status("list limit=abc", "GET", CM_PATH + "?limit=abc", 400, "BadRequest", contains=(syntax,))
    expect_status("watch timeoutSeconds=abc", "GET", CM_PATH + "?watch=true&timeoutSeconds=abc", 400, "BadRequest", contains=(syntax,), timeout=10)
    # `timeout` is the request deadline (WithRequestDeadline), in Go's duration syntax.
    for verb, path in (("GET", CM_PATH + "?timeout=abc"), ("GET", VICTIM_PATH + "?timeout=10"),
                       ("DELETE", CM_PATH + "/hostile-x?timeout=-"), ("POST", CM_PATH + "?timeout=1x")):
        value = path.rsplit("=", 1)[1]
        expect_status(f"{verb} timeout={value}", verb, path, 400, "BadRequest",
                      body=cm_body("hostile-timeout") if verb == "POST" else None,
                      contains=("invalid timeout specified in the request URL - time: ", f'duration "{value}"'))
    expect_ok("GET timeout=5s is served", "GET", VICTIM_PATH + "?timeout=5s", 200, "ConfigMap")
    expect_status("delete gracePeriodSeconds=abc", "DELETE", CM_PATH + "/hostile-x?gracePeriodSeconds=abc", 400, "BadRequest", contains=(syntax,))
    expect_status("deletecollection gracePeriodSeconds=abc", "DELETE", CM_PATH + "?gracePeriodSeconds=abc&labelSelector=hostile%3Dnone", 400, "BadRequest",
                  contains=(syntax,))
    lo = 'ListOptions.meta.k8s.io "" is invalid: '
    expect_status("list resourceVersionMatch=Exact&resourceVersion=0", "GET", CM_PATH + "?resourceVersionMatch=Exact&resourceVersion=0", 422, "Invalid",
                  message=lo + 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    expect_status("list resourceVersionMatch without resourceVersion", "GET", CM_PATH + "?resourceVersionMatch=NotOlderThan", 422, "Invalid",
                  message=lo + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
    expect_status("list resourceVersionMatch=Bogus", "GET", CM_PATH + "?resourceVersionMatch=Bogus&resourceVersion=1", 422, "Invalid",
                  message=lo + 'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""')
    expect_status("list sendInitialEvents=true", "GET", CM_PATH + "?sendInitialEvents=true", 422, "Invalid",
                  message=lo + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
    do = 'DeleteOptions.meta.k8s.io "" is invalid: '
    expect_status("delete propagationPolicy=Bogus", "DELETE", CM_PATH + "/hostile-x?propagationPolicy=Bogus", 422, "Invalid",
                  message=do + 'propagationPolicy: Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil"')
    # dryRun is a []string: field.NotSupported prints the value with %#v.
    expect_status("delete dryRun=Bogus", "DELETE", CM_PATH + "/hostile-x?dryRun=Bogus", 422, "Invalid",
                  contains=(do + "dryRun: Unsupported value: ", '"Bogus"', 'supported values: "All"'))
    co = 'CreateOptions.meta.k8s.io "" is invalid: '
    expect_status("create dryRun=Bogus", "POST", CM_PATH + "?dryRun=Bogus", 422, "Invalid", cm_body("hostile-opt"),
                  contains=(co + "dryRun: Unsupported value: ", '"Bogus"', 'supported values: "All"'))
    expect_status("create fieldValidation=Bogus", "POST", CM_PATH + "?fieldValidation=Bogus", 422, "Invalid", cm_body("hostile-opt"),
                  contains=(co, 'fieldValidation: Unsupported value: "Bogus"'))
    expect_status("create fieldManager too long", "POST", CM_PATH + "?fieldManager=" + "m" * 200, 422, "Invalid", cm_body("hostile-opt"),
                  contains=(co, "fieldManager: Too long: may not be more than 128 bytes"))
    # Continue tokens.
    expect_status("continue=garbage (recorded)", "GET", CM_PATH + "?limit=1&continue=garbage", 400, "BadRequest",
                  message="invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value")
    for label, token in (("not base64", "%25%25%25"), ("base64 of text", base64.b64encode(b"hello world").decode()),
                         ("base64 of []", base64.b64encode(b"[]").decode()),
                         ("unknown version", base64.b64encode(b'{"v":"x.k8s.io/v9","rv":1,"start":"a"}').decode()),
                         ("path traversal", base64.b64encode(b'{"v":"meta.k8s.io/v1","rv":1,"start":"../../../etc/passwd"}').decode()),
                         ("huge (within the URI limit)", base64.b64encode(b"{" * 40_000).decode())):
        expect_status(f"continue token {label}", "GET", CM_PATH + "?limit=1&continue=" + token.replace("=", "%3D").replace("+", "%2B").replace("/", "%2F"),
                      400, "BadRequest", contains=("invalid continue token",))
    st, _, b = send("GET", "/api/v1/namespaces?limit=1")
    token = json.loads(b).get("metadata", {}).get("continue") if st == 200 else None
    if token:
        expect_status("continue token with a resourceVersion", "GET", f"/api/v1/namespaces?limit=1&resourceVersion=1&continue={token}",
                      400, "BadRequest", message="specifying resource version is not allowed when using continue")
    else:
        record("continue token with a resourceVersion", False, f"no continue token from a limit=1 list of namespaces: {st} {short(b)}")
    # Selectors.
    expect_status("labelSelector a in (b (recorded)", "GET", CM_PATH + "?labelSelector=a%20in%20(b", 400, "BadRequest",
                  message="unable to parse requirement: found '', expected: ',' or ')'")
    for sel in ("a%20in%20b", "!!a", "a%3D%3D%3Db", "a%20notin", "%3Db", "a%3Db%20c", "a%3D(b", "a%3D" + "x" * 64, "x" * 300 + "%3Db", "a%2C%2C%2Cb"):
        expect_status(f"bad labelSelector {sel[:40]}", "GET", CM_PATH + "?labelSelector=" + sel, 400, "BadRequest")
    # Upstream's label lexer reads a NUL as the end of the string: the selector is empty and
    # selects everything (labels/selector.go, Lexer.Lex).
    expect_ok("labelSelector %00 selects everything", "GET", CM_PATH + "?labelSelector=%00", 200, "ConfigMapList",
              check=lambda o: VICTIM in [i["metadata"]["name"] for i in o.get("items", [])])
    expect_status("fieldSelector spec.nope=x (recorded)", "GET", CM_PATH + "?fieldSelector=spec.nope%3Dx", 400, "BadRequest",
                  message='"spec.nope" is not a known field selector: only "metadata.name", "metadata.namespace"')
    for sel in ("metadata.name", "metadata.name%3D%3D%3Da", "%3Da"):
        expect_status(f"bad fieldSelector {sel}", "GET", CM_PATH + "?fieldSelector=" + sel, 400, "BadRequest")
    # A term with neither field nor value is "everything" and drops out (fields/selector.go,
    # hasTerm.Transform), so this selects by name alone.
    expect_ok("fieldSelector metadata.name=a,= is metadata.name=a", "GET", CM_PATH + "?fieldSelector=metadata.name%3Da%2C%3D",
              200, "ConfigMapList", check=lambda o: o.get("items") == [])


def sizes():
    # A 20 KB label selector fits in upstream's 1 MiB of headers: it must be served.
    values = ",".join(f"v{i}" for i in range(4000))
    sel = "hostilekey%20in%20(" + values + ")"
    assert len(sel) > 20_000
    expect_ok("20 KB label selector is served", "GET", CM_PATH + "?labelSelector=" + sel, 200, "ConfigMapList",
              check=lambda o: o.get("items") == [])
    expect_ok("600 KB header is served (limit 1 MiB)", "GET", "/api/v1/namespaces/default", 200, "Namespace",
              headers={"X-Hostile-Pad": "p" * 600_000})
    expect_ok("150 headers are served", "GET", "/api/v1/namespaces/default", 200, "Namespace",
              headers={f"X-Hostile-{i}": "v" * 50 for i in range(150)})
    expect_refused("1.1 MiB header is refused", "GET", "/api/v1/namespaces/default", {"X-Hostile-Pad": "p" * (1100 * 1024)})
    expect_refused("2 MiB of headers is refused", "GET", "/api/v1/namespaces/default",
                   {f"X-Hostile-{i}": "p" * 8000 for i in range(260)})
    for n in (8_000, 60_000):
        name = "hostile" + "a" * n
        expect_status(f"GET a {n}-char name (404)", "GET", f"{CM_PATH}/{name}", 404, "NotFound",
                      contains=("configmaps \"hostile",))
    # Past the HTTP stack's URI limit the request is refused before any handler (module doc).
    for n in (100_000, 600_000):
        expect_refused(f"GET a {n}-char name: URI over {MAX_URI} bytes", "GET", f"{CM_PATH}/hostile{'a' * n}", {}, codes=(414,))
    # Past 1 MiB the request line is over the header limit: 431, as Go answers.
    expect_refused("1.2 MiB URL is refused", "GET", f"{CM_PATH}/hostile{'a' * 1_200_000}", {}, codes=(431,))
    expect_status("POST body over 3 MiB", "POST", CM_PATH, 413, "RequestEntityTooLarge",
                  cm_body("hostile-big", data={"a": "x" * (MAX_BODY + 100)}), message=f"Request entity too large: limit is {MAX_BODY}")
    expect_status("PUT body over 3 MiB", "PUT", VICTIM_PATH, 413, "RequestEntityTooLarge",
                  cm_body(VICTIM, data={"a": "x" * (MAX_BODY + 100)}), message=f"Request entity too large: limit is {MAX_BODY}")
    expect_status("POST YAML body over 3 MiB", "POST", CM_PATH, 413, "RequestEntityTooLarge",
                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile-big\ndata:\n  a: " + "x" * (MAX_BODY + 100) + "\n",
                  "application/yaml", message=f"Request entity too large: limit is {MAX_BODY}")
    expect_status("POST protobuf body over 3 MiB", "POST", CM_PATH, 413, "RequestEntityTooLarge",
                  b"k8s\x00" + b"\x00" * (MAX_BODY + 100), PB, message=f"Request entity too large: limit is {MAX_BODY}")
    expect_status("POST body of 1 MiB + a bit: stored object too big", "POST", CM_PATH, 422, "Invalid",
                  cm_body("hostile-big", data={"a": "x" * (1024 * 1024 + 10)}), contains=("Too long: may not be more than 1048576 bytes",))


# ---------------------------------------------------------------------------------------------
# garbage on the wire: only survival is asserted


def raw_exchange(data, tls=False, half=False, wait=2.0):
    s = socket.create_connection((HOST, PORT), timeout=wait)
    try:
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(s, server_hostname="localhost")
        for chunk in data if isinstance(data, list) else [data]:
            s.sendall(chunk)
        if half and not tls:
            s.shutdown(socket.SHUT_WR)
        try:
            s.recv(65536)
        except (OSError, ssl.SSLError):
            pass
    except (OSError, ssl.SSLError):
        pass
    finally:
        try:
            s.close()
        except OSError:
            pass


def client_hello():
    """A real ClientHello, captured from Python's ssl through a memory BIO."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def garbage():
    rnd = random.Random(42)
    hello = client_hello()
    wire = [
        ("plain HTTP to the TLS port", b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", False, False),
        ("plain HTTP, half-closed", b"GET / HTTP/1.0\r\n\r\n", False, True),
        ("random bytes", bytes(rnd.randrange(256) for _ in range(4096)), False, False),
        ("1 MiB of random bytes", bytes(rnd.randrange(256) for _ in range(1 << 20)), False, True),
        ("truncated ClientHello", hello[: len(hello) // 2], False, True),
        ("ClientHello, first 5 bytes", hello[:5], False, True),
        ("ClientHello then garbage", hello + bytes(rnd.randrange(256) for _ in range(2048)), False, True),
        ("TLS record with huge length", b"\x16\x03\x01\xff\xff" + b"\x01" * 100, False, True),
        ("TLS alert only", b"\x15\x03\x03\x00\x02\x02\x28", False, True),
        ("two ClientHellos", hello + hello, False, True),
        ("empty then close", b"", False, True),
        ("TLS: garbage request line", b"GARBAGE\r\n\r\n", True, False),
        ("TLS: bad method", b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n", True, False),
        ("TLS: HTTP/9.9", b"GET /readyz HTTP/9.9\r\nHost: x\r\n\r\n", True, False),
        ("TLS: no Host, HTTP/1.1", b"GET /readyz HTTP/1.1\r\n\r\n", True, False),
        ("TLS: NUL in path", b"GET /api/v1/\x00namespaces HTTP/1.1\r\nHost: x\r\n\r\n", True, False),
        ("TLS: percent garbage in path", b"GET /api/v1/namespaces/%ZZ/configmaps HTTP/1.1\r\nHost: x\r\n\r\n", True, False),
        ("TLS: negative Content-Length", b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", True, False),
        ("TLS: two Content-Lengths", b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}", True, False),
        ("TLS: Content-Length beyond the body", b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 999999\r\n\r\n{\"a\"", True, False),
        ("TLS: bad chunk size", b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n0\r\n\r\n", True, False),
        ("TLS: huge chunk size", b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc\r\n", True, False),
        ("TLS: header without colon", b"GET /readyz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", True, False),
        ("TLS: header folding", b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n", True, False),
        ("TLS: HTTP/2 preface then garbage", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(rnd.randrange(256) for _ in range(512)), True, False),
        ("TLS: request line of 100 KB", b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", True, False),
        ("TLS: 10000 pipelined requests", b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n" * 10_000, True, False),
    ]
    for name, data, tls, half in wire:
        raw_exchange(data, tls=tls, half=half)
        readyz(f"alive after: {name}")


# ---------------------------------------------------------------------------------------------


def names_in(path):
    try:
        st, _, b = send("GET", path)
    except Exception:  # noqa: BLE001
        return None
    if st != 200:
        return None
    return sorted(i["metadata"]["name"] for i in json.loads(b).get("items", []))


def main():
    readyz("ready at the start")
    groups = {"deep": deep_nesting, "types": type_confusion, "patches": patches, "params": params_and_selectors,
              "sizes": sizes, "garbage": garbage}
    only = sys.argv[1:] or list(groups)  # a subset by name, for debugging
    posted = []
    for g in only:
        try:
            posted += groups[g]() or []
        except Exception as e:  # noqa: BLE001 - e.g. the server died under us
            record(f"group {g} ran to the end", False, f"{type(e).__name__}: {e}")
    readyz("ready at the end")
    # Nothing written: no collection holds an object named hostile* but the victim, which
    # kept its data and labels.
    for url in sorted(set(posted + [CM_PATH, CRD_PATH])):
        names = names_in(url)
        if names is None:
            continue
        written = [n for n in names if "hostile" in n and n != VICTIM]
        record(f"nothing written in {url}", not written, f"found {written[:5]}")
    try:
        st, _, b = send("GET", VICTIM_PATH)
    except Exception as e:  # noqa: BLE001
        st, b = 0, str(e).encode()
    victim = json.loads(b) if st == 200 else {}
    record("the victim is unchanged", victim.get("data") == {"a": "YWJj"} and victim.get("metadata", {}).get("labels") == {"keep": "me"},
           f"HTTP {st}: {short(b)}")
    failed = [r for r in results if not r[1]]
    for name, _, detail in failed:
        print(f"FAIL {name}\n     {detail}")
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
