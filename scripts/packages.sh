#!/usr/bin/env bash
# Builds the agentsh packages from the release binaries (`make packages` builds them first):
# the deb with cargo-deb, into target/debian/. Installs cargo-deb when it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-deb >/dev/null || cargo install --locked cargo-deb
cargo deb -p agentsh --no-build "$@"
