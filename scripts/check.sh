#!/usr/bin/env bash
# House rules as code: formatting and lints, warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
