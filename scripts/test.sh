#!/usr/bin/env bash
# Installs what the tests need (kubectl check, the Python client, cryptography, prometheus_client,
# openssl, etcd) and runs every test of the workspace against one release build. Missing tools fail
# loudly; nothing is skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kubectl >/dev/null 2>&1; then
  echo "kubectl is missing: the end-to-end tests drive the real kubectl (expected at /usr/bin/kubectl)" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq kubectl) || true
  fi
  command -v kubectl >/dev/null 2>&1 || { echo "kubectl could not be installed" >&2; exit 1; }
fi
python3 -c "import kubernetes" 2>/dev/null || python3 -m pip install --quiet "kubernetes>=31"
# The service-account token tests forge tokens with `cryptography`; the CSR test makes its
# request with the openssl command, and the OIDC test its issuer's RSA key.
python3 -c "import cryptography" 2>/dev/null || python3 -m pip install --quiet cryptography
# The /metrics test reads the exposition format with Prometheus's own Python parser.
python3 -c "import prometheus_client" 2>/dev/null || python3 -m pip install --quiet prometheus_client
if ! command -v openssl >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq openssl) || true
  fi
  command -v openssl >/dev/null 2>&1 || { echo "openssl could not be installed" >&2; exit 1; }
fi

# The etcd backend's tests (the storage conformance suite on etcd, the etcd end-to-end tests) run
# a real etcd on loopback ports: Debian's etcd-server.
if ! command -v etcd >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq etcd-server) || true
  fi
  command -v etcd >/dev/null 2>&1 || { echo "etcd could not be installed (apt-get install -y etcd-server)" >&2; exit 1; }
fi
# The tests start their own etcd on free ports; one that the package may start does not matter.

# Formatting and lints first: a rule broken fails the run like a test.
./scripts/check.sh

# One release build shared by unit, integration and end-to-end tests.
if command -v cargo-nextest >/dev/null 2>&1 || cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --release --workspace --no-fail-fast "$@"
  # nextest does not run doc tests; `ironplane::testing`'s example is one. The same package
  # selection as above, so that the build's features (and artifacts) are the same.
  cargo test --release --workspace --doc
else
  cargo test --release --workspace --no-fail-fast "$@"
fi
