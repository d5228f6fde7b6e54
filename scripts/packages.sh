#!/usr/bin/env bash
# Builds the agentsh packages from the release binaries (`make packages` builds them first):
# the deb (cargo-deb) into target/debian/ and the rpm (cargo-generate-rpm) into
# target/generate-rpm/. The binaries are stripped into a staging directory first (neither tool
# should carry, or wade through, their debug information). Installs the tools when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-deb >/dev/null || cargo install --locked cargo-deb
command -v cargo-generate-rpm >/dev/null || cargo install --locked cargo-generate-rpm
target="${CARGO_TARGET_DIR:-target}"
stage="$target/package-stage"
mkdir -p "$stage/release"
for binary in agentshd agentshctl agentsh-shim; do
    strip -o "$stage/release/$binary" "$target/release/$binary"
done
CARGO_TARGET_DIR="$stage" cargo deb -p agentsh --no-build --no-strip -o "$target/debian/"
mkdir -p "$target/generate-rpm"
cargo generate-rpm -p agent --target-dir "$stage" -o "$target/generate-rpm"
ls -1 "$target"/debian/*.deb "$target"/generate-rpm/*.rpm
