#!/usr/bin/env bash
# Makes an envtest asset directory (for KUBEBUILDER_ASSETS) from Ironplane's release build:
#
#   DIR/ironplane                    the release binary (a copy)
#   DIR/kube-apiserver -> ironplane  takes kube-apiserver's command line as envtest passes it
#   DIR/etcd -> ironplane            a stand-in that only answers envtest's /health check; it
#                                    stores nothing (the state is in Ironplane's embedded store)
#   DIR/kubectl -> your kubectl      envtest runs it only for tests that use its KubeCtl helper
#
# Usage: scripts/envtest-assets.sh DIR
# Then:  KUBEBUILDER_ASSETS=DIR go test ./...
#
# IRONPLANE_BIN=<path> takes that binary instead of building; KUBECTL=<path> links that kubectl
# instead of the one on PATH.
set -euo pipefail

dir=${1:?usage: scripts/envtest-assets.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)

if [[ -n ${IRONPLANE_BIN:-} ]]; then
  bin=$IRONPLANE_BIN
else
  (cd "$root" && cargo build --release -p ironplane)
  target=${CARGO_TARGET_DIR:-target}
  [[ $target = /* ]] || target=$root/$target
  bin=$target/release/ironplane
fi
[[ -x $bin ]] || { echo "no ironplane binary at $bin" >&2; exit 1; }

mkdir -p "$dir"
cp -f "$bin" "$dir/ironplane.new"
mv -f "$dir/ironplane.new" "$dir/ironplane"
# envtest runs the programs by these names; the name chooses the mode.
ln -sfn ironplane "$dir/kube-apiserver"
ln -sfn ironplane "$dir/etcd"

kubectl=${KUBECTL:-$(command -v kubectl || true)}
if [[ -n $kubectl ]]; then
  ln -sfn "$(cd "$(dirname "$kubectl")" && pwd)/$(basename "$kubectl")" "$dir/kubectl"
else
  echo "note: no kubectl found; envtest needs DIR/kubectl only for tests that use its KubeCtl helper" >&2
fi

echo "$dir: $("$dir/kube-apiserver" --version)"
