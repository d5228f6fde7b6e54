#!/usr/bin/env bash
# Installs what building and testing agentsh needs on a fresh Debian machine, skipping what is
# already there. Safe to run again and again: `make run` and `make test` call it first.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    say "need root to run: $*"; exit 1; fi
}

apt_updated=0
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated -eq 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  say "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Rust: stable for the workspace, nightly + rust-src for the BPF target (build-std=core).
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v rustup >/dev/null; then
  say "rustup is required (https://rustup.rs); the machine image ships it"; exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
if ! rustup toolchain list | grep -q '^nightly'; then
  say "installing the nightly toolchain (BPF target)"; rustup toolchain install nightly --profile minimal
fi
rustup component list --toolchain nightly --installed | grep -q '^rust-src' ||
  rustup component add rust-src --toolchain nightly

# The system roots: upstream TLS trusts them, and each session's CA bundle carries them.
apt_install ca-certificates

# systemd-analyze checks the shipped unit (packaging/agentshd.service) in the tests.
command -v systemd-analyze >/dev/null || apt_install systemd

# bpf-linker links the kernel programs; it builds against LLVM 22 (about 5 minutes, once).
if ! command -v bpf-linker >/dev/null; then
  apt_install llvm-22-dev libpolly-22-dev zlib1g-dev libzstd-dev
  say "cargo install bpf-linker (LLVM 22)"
  LLVM_PREFIX=/usr/lib/llvm-22 cargo install --locked bpf-linker --no-default-features --features llvm-22
fi

# Node.js runs the real MCP servers and the official MCP SDK client in the end-to-end tests.
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
# `npm ci` in DIR when its lock changed since the last one (a stamp in node_modules).
npm_peers() {
  local dir=$1 what=$2 stamp want
  stamp="$dir/node_modules/.agentsh-lock-sha256"
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "npm ci ($what)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$stamp"
  fi
}
npm_peers "$here/tests/peers" "test peers"
# The MCP TypeScript SDK v2 (its 2026-07-28 server and client), in a lock of its own.
npm_peers "$here/tests/peers/ts2" "MCP TypeScript SDK v2 peers"

# Python runs test peers, each from a venv of its own beside its requirements.txt: the fake LLM
# upstream and the official Anthropic and OpenAI SDK clients (tests/peers/llm), an OTLP collector
# stand-in on grpcio and the official OpenTelemetry protos (tests/peers/otlp), and a server and
# client on the official MCP Python SDK 2.x, which speaks both protocol eras (tests/peers/mcp2).
# Debian's python3 lacks ensurepip (so venv) without python3-venv; a python3 that already has
# both (pyenv, say) is used as it is.
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || apt_install python3 python3-venv
python_peers() {
  local dir="$here/tests/peers/$1" venv="$here/tests/peers/$1/.venv"
  if [ ! -x "$venv/bin/python" ] || [ ! -x "$venv/bin/pip" ]; then
    say "python3 -m venv (test peers: $1)"
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  local stamp="$venv/.agentsh-requirements-sha256" want
  want=$(sha256sum "$dir/requirements.txt" | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "pip install (test peers: $1)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$dir/requirements.txt"
    echo "$want" >"$stamp"
  fi
}
python_peers llm
python_peers otlp
python_peers mcp2

# The real coding agents the end-to-end tests run under `agentshctl run` (tests/peers/agents,
# pinned in its lock; only with --tests): npm skips their install scripts, so Claude Code's
# install.cjs, which puts its native binary in place, runs here.
agent_peers() {
  local dir="$here/tests/peers/agents"
  npm_peers "$dir" "test agents: Claude Code, Codex CLI, Gemini CLI"
  if ! "$dir/node_modules/.bin/claude" --version >/dev/null 2>&1; then
    say "Claude Code's install.cjs (its native binary)"
    (cd "$dir/node_modules/@anthropic-ai/claude-code" && node install.cjs)
  fi
}

# What only the tests need (`setup.sh --tests`, which `make test` runs): the package test
# builds the deb with cargo-deb and installs it into a fresh Debian root, a debootstrap minbase
# of bookworm (with ca-certificates, which the package depends on) kept as a tarball; the boot test installs it where systemd runs (below).
# The Debian mirror this machine's apt uses for bookworm (debootstrap fetches from it): the
# first deb source whose suites include bookworm itself, in deb822 or one-line form.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS="";FS="\n"} {uri="";suite=0;deb=0
      for(i=1;i<=NF;i++){
        if($i ~ /^URIs:/){split($i,a," "); uri=a[2]}
        if($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) suite=1
        if($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb=1}
      if(uri!="" && suite && deb){print uri; exit}}' "$f"
  done | head -n1 | grep . && return 0
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1=="deb" && $3=="bookworm" {for(i=2;i<=NF;i++) if($i ~ /^[a-z]+:\/\//){print $i; exit}}' | head -n1 | grep . && return 0
  say "no apt source for bookworm in /etc/apt: cannot debootstrap the test roots"; return 1
}

if [ "${1:-}" = --tests ]; then
  agent_peers
  # The official MCP conformance suite (it needs Node 22, which npm ships as a package) and the
  # MCP Python SDK's everything server it tests, run behind agentshd (tests/peers/conformance).
  npm_peers "$here/tests/peers/conformance" "MCP conformance suite, Node 22"
  python_peers conformance
  apt_install binutils
  command -v cargo-deb >/dev/null || { say "cargo install cargo-deb"; cargo install --locked cargo-deb; }
  command -v cargo-generate-rpm >/dev/null ||
    { say "cargo install cargo-generate-rpm"; cargo install --locked cargo-generate-rpm; }
  command -v rpm >/dev/null || apt_install rpm
  # cargo-fuzz runs the fuzz targets (scripts/fuzz.sh, on the nightly toolchain above).
  cargo +nightly fuzz --version >/dev/null 2>&1 ||
    { say "cargo install cargo-fuzz"; cargo install --locked cargo-fuzz; }
  root_tar=/var/cache/agentsh/bookworm-minbase-ca.tar
  if [ "$(id -u)" -eq 0 ] && [ ! -f "$root_tar" ]; then
    apt_install debootstrap
    say "debootstrap bookworm (minbase) for the package test"
    tmp=$(mktemp -d)
    debootstrap --variant=minbase --include=init-system-helpers,ca-certificates bookworm "$tmp" "$(debian_mirror)" >/dev/null
    mkdir -p "$(dirname "$root_tar")"
    tar -C "$tmp" -cf "$root_tar.new" . && mv "$root_tar.new" "$root_tar"
    rm -rf "$tmp"
  fi
  # The boot test (tests/tests/systemd_boot.rs) boots a second root under systemd-nspawn, with
  # systemd as its PID 1: bookworm with systemd, dbus and the system roots (agentshd's upstream
  # TLS needs them). No procps: the unit must not need /bin/kill.
  command -v systemd-nspawn >/dev/null || apt_install systemd-container
  systemd_tar=/var/cache/agentsh/bookworm-systemd.tar
  if [ "$(id -u)" -eq 0 ] && [ ! -f "$systemd_tar" ]; then
    apt_install debootstrap
    say "debootstrap bookworm (systemd) for the boot test"
    tmp=$(mktemp -d)
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,ca-certificates,init-system-helpers \
      bookworm "$tmp" "$(debian_mirror)" >/dev/null
    chmod 755 "$tmp" # the root directory (mktemp made it 0700): services run as other users
    mkdir -p "$(dirname "$systemd_tar")"
    tar -C "$tmp" -cf "$systemd_tar.new" . && mv "$systemd_tar.new" "$systemd_tar"
    rm -rf "$tmp"
  fi
fi
