#!/usr/bin/env bash
# Server CPU per create of the three kinds of scripts/bench-kinds.sh (small ConfigMaps, realistic
# three-container Pods, Deployments of that pod), Ironplane next to kube-apiserver: each side on a
# fresh etcd with its data on /dev/shm, the sides alternating, RUNS runs (default 3); prints the
# medians and the ratio of the medians per kind (issue 7's target: a third of kube-apiserver's).
# Both run their default admission chains and authorize with Node,RBAC as system:masters; the
# namespace's `default` ServiceAccount is made first (no controller manager runs here).
# IRONPLANE_FLAGS adds flags to Ironplane's command line: `--controllers=-garbage-collector-controller`
# (no `*`: every kube-controller-manager controller off) leaves it the work kube-apiserver does.
# Not part of CI: it needs a kube-apiserver binary, built outside the repository.
# Usage: KUBE_APISERVER=<binary> ETCD=<etcd binary> scripts/bench-kinds-side.sh IRONPLANE BENCH OUT
set -euo pipefail
BIN=$1; BENCH=$2; OUT=$3; RUNS=${RUNS:-3}
KAS=${KUBE_APISERVER:?set KUBE_APISERVER to a kube-apiserver binary}; ETCD=${ETCD:-etcd}
mkdir -p "$OUT"; work=$(mktemp -d /dev/shm/kinds.XXXX)
ep=24790; port=24443
start_etcd() { rm -rf "$1/etcd"; "$ETCD" --name b --data-dir "$1/etcd" --listen-client-urls http://127.0.0.1:$ep --advertise-client-urls http://127.0.0.1:$ep --listen-peer-urls http://127.0.0.1:$((ep+10)) --initial-advertise-peer-urls http://127.0.0.1:$((ep+10)) --initial-cluster b=http://127.0.0.1:$((ep+10)) --log-level error >"$1/etcd.log" 2>&1 & EPID=$!; until curl -sf http://127.0.0.1:$ep/health | grep -q true; do sleep 0.1; done; }
for i in $(seq 1 $RUNS); do
  for side in ironplane kube-apiserver; do
    d=$work/$side-$i; mkdir -p $d; start_etcd $d
    if [ $side = ironplane ]; then
      "$BIN" --secure-port $port --data-dir $d/ip --etcd-servers http://127.0.0.1:$ep ${IRONPLANE_FLAGS:-} >$d/log 2>&1 & PID=$!
      KC=$d/ip/kubeconfig; for _ in $(seq 1 1000); do [ -f $KC ] && break; sleep 0.01; done
    else
      mkdir -p $d/kas; echo 'bench-token,bench,bench-uid,"system:masters"' >$d/kas/tokens.csv; openssl genrsa -out $d/kas/sa.key 2048 2>/dev/null
      "$KAS" --etcd-servers http://127.0.0.1:$ep --bind-address 127.0.0.1 --secure-port $port --cert-dir $d/kas/pki --token-auth-file $d/kas/tokens.csv --service-account-key-file $d/kas/sa.key --service-account-signing-key-file $d/kas/sa.key --service-account-issuer https://kubernetes.default.svc.cluster.local --authorization-mode Node,RBAC --service-cluster-ip-range 10.0.0.0/24 >$d/log 2>&1 & PID=$!
      KC=$d/kas/kubeconfig; printf 'apiVersion: v1\nkind: Config\nclusters: [{name: k, cluster: {server: "https://127.0.0.1:%s", insecure-skip-tls-verify: true}}]\nusers: [{name: k, user: {token: bench-token}}]\ncontexts: [{name: k, context: {cluster: k, user: k}}]\ncurrent-context: k\n' $port >$KC
    fi
    until KUBECONFIG=$KC kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done
    KUBECONFIG=$KC kubectl create ns benchk >/dev/null 2>&1 || true
    until KUBECONFIG=$KC kubectl -n benchk get sa default >/dev/null 2>&1; do KUBECONFIG=$KC kubectl -n benchk create sa default >/dev/null 2>&1 || sleep 0.2; done
    for kind in configmap pod deployment; do
      "$BENCH" --kubeconfig $KC create --kind $kind --namespace benchk --concurrency 8 --duration 10s --server-pid $PID -q --json $OUT/$side-$kind-$i.json >/dev/null
    done
    kill -TERM $PID; wait $PID || true; kill -TERM $EPID; wait $EPID || true
  done
done
rm -rf $work
python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
for kind in ("configmap", "pod", "deployment"):
    f = {}
    for side in ("ironplane", "kube-apiserver"):
        rs = [json.load(open(f"{out}/{side}-{kind}-{i}.json")) for i in range(1, runs + 1)]
        cpu = [r["figures"]["server_cpu_ms_per_request"] for r in rs]
        rate = statistics.median(r["rows"][0]["per_second"] for r in rs)
        f[side] = statistics.median(cpu)
        print(f"{kind:10s} {side:15s} {rate:7.0f}/s  {f[side]:.3f} ms CPU  (runs {', '.join(f'{c:.3f}' for c in cpu)})")
    print(f"{kind:10s} ratio ironplane/kube-apiserver {f['ironplane']/f['kube-apiserver']:.2f}")
PY
