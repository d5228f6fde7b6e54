#!/usr/bin/env bash
# Benchmarks of the hot paths, each against the direct path in the same run.
# Run through `make bench` (which builds the release binaries first).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# mitmproxy (PyPI), what the transparent proxy is compared with, in a venv of its own.
bench_peers=tests/peers/bench
venv="$bench_peers/.venv"
stamp="$venv/.agentsh-requirements-sha256"
want=$(sha256sum "$bench_peers/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/pip" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bench: pip install mitmproxy (into $venv)"
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$bench_peers/requirements.txt"
    echo "$want" >"$stamp"
fi
echo "== stdio shim (agentsh-shim vs a direct pipe) =="
./target/release/shim_bench "$@"
echo
echo "== detector (corpus scan rate, detection and false-positive rates) =="
cargo run --quiet --release -p agentsh --example detector_score
echo
echo "== verdicts (engine in process, agentshd round trip, bare Unix socket) =="
cargo build --quiet --release -p agentsh --example verdict_bench
./target/release/examples/verdict_bench
# On one CPU no cross-CPU wakeup is paid: on small VMs that wakeup (tens of µs) dominates
# every socket round trip, the bare one included, and hides what the daemon itself costs.
if command -v taskset >/dev/null; then
    echo "  -- all threads on one CPU (taskset -c 0):"
    taskset -c 0 ./target/release/examples/verdict_bench | tail -n +2
fi
echo
echo "== SSE interceptors (in process, vs a plain copy of the same bytes) =="
cargo run --quiet --release -p agentsh --example llm_bench
echo
echo "== MCP over Streamable HTTP (both ways through the guard, in process, vs a copy) =="
cargo run --quiet --release -p agentsh --example mcp_http_bench
echo
echo "== event writer (events/s and record() cost, tamper evidence on vs off) =="
cargo run --quiet --release -p agentsh --example event_bench
echo
echo "== OTLP export (events/s from redb to a loopback collector, vs only reading them back) =="
cargo run --quiet --release -p agentsh --example export_bench
echo
echo "== brokered secrets (a request's added work with placeholders, vs a session holding none) =="
cargo run --quiet --release -p agentsh --example secrets_bench
echo
echo "== LLM proxy (agentshd vs direct to the upstream) =="
# `make bench` built the release agentshd; the example finds it next to itself.
cargo build --quiet --release -p agentsh --bin agentshd --example proxy_bench
"${CARGO_TARGET_DIR:-target}/release/examples/proxy_bench"
echo
echo "== Responses over WebSocket (agentshd vs direct; beside SSE) =="
cargo build --quiet --release -p agentsh --bin agentshd --example ws_bench
"${CARGO_TARGET_DIR:-target}/release/examples/ws_bench"
echo
echo "== kernel hooks and the transparent proxy (connect(), TLS: direct vs agentshd vs mitmproxy) =="
cargo build --quiet --release -p agentsh --bins --example transparent_bench
"${CARGO_TARGET_DIR:-target}/release/examples/transparent_bench"
