#!/usr/bin/env bash
# Benchmarks of the hot paths, each against the direct path in the same run.
# Run through `make bench` (which builds the release binaries first).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "== stdio shim (agentsh-shim vs a direct pipe) =="
./target/release/shim_bench "$@"
echo
echo "== detector (corpus scan rate, detection and false-positive rates) =="
cargo run --quiet --release -p agentsh --example detector_score
