#!/usr/bin/env bash
# Runs three real coding agents (Claude Code, Codex, Gemini CLI) against agent_upstream.py with no
# agentsh in between, each with the MCP filesystem server configured as "fs" in its own config file:
#   1. prompt WRITE_IT: the scripted model calls fs write_file on DIR/out.txt; the file must hold
#      the scripted content and the agent's final answer must quote the tool's result.
#   2. prompt READ_IT: the model calls fs read_file on DIR/seed.txt; the final answer must quote
#      the file's (random) content.
# "codex-codemode" is Codex with its default model, which reaches MCP tools from JavaScript in its
# `exec` tool ("code mode") instead of calling them directly.
#
#     bash tests/peers/agents/run_demo.sh [--tls] [claude] [codex] [codex-codemode] [gemini]
#
# Plain (default): the upstream listens on 127.0.0.2:PORT over HTTP and each agent gets its
# base-URL setting. --tls: the upstream listens on 127.0.0.2:443 with a certificate for
# api.anthropic.com, api.openai.com, chatgpt.com and generativelanguage.googleapis.com from a
# test CA made here with openssl; those names resolve to 127.0.0.2 through a private /etc/hosts;
# no base-URL setting at all, each agent trusts the CA through its own environment variable.
#
# Everything runs inside a new network namespace (unshare --net --mount) whose only interface is
# loopback: nothing an agent does can leave the machine. Needs root (or unprivileged user
# namespaces), npx finding @modelcontextprotocol/server-filesystem in the npm cache (it runs npm
# offline), and the agents under $AGENTS_DIR/node_modules/.bin (default /tmp/agents).
# Env: AGENTS_DIR, NPM_CACHE (default: `npm config get cache`), AGENT_TIMEOUT (s, default 60),
# KEEP=1 keeps the work directory (its path is printed) for a look at logs and configs.
# Exits non-zero if any check fails.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

tls=0
agents=()
for a in "$@"; do
  case "$a" in
    --tls) tls=1 ;;
    claude|codex|codex-codemode|gemini) agents+=("$a") ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run_demo: unknown argument $a" >&2; exit 2 ;;
  esac
done
[ ${#agents[@]} -gt 0 ] || agents=(claude codex codex-codemode gemini)

# ------------------------------------------------------------------ into a private namespace
if [ -z "${AGENT_DEMO_IN_NS:-}" ]; then
  NPM_CACHE=${NPM_CACHE:-$(npm config get cache 2>/dev/null || echo "$HOME/.npm")}
  export NPM_CACHE AGENT_DEMO_IN_NS=1
  ns=(unshare --net --mount)
  [ "$(id -u)" = 0 ] || ns=(unshare --user --map-root-user --net --mount)
  exec "${ns[@]}" -- bash "$0" "$@"
fi
ip link set lo up || { echo "run_demo: cannot bring up lo in the new network namespace" >&2; exit 1; }

AGENTS_DIR=${AGENTS_DIR:-/tmp/agents}
BIN=$AGENTS_DIR/node_modules/.bin
AGENT_TIMEOUT=${AGENT_TIMEOUT:-60}
for b in claude codex gemini; do
  [ -x "$BIN/$b" ] || { echo "run_demo: $BIN/$b is missing" >&2; exit 1; }
done
py=$here/../llm/.venv/bin/python
[ -x "$py" ] || py=$(command -v python3)
node_dir=$(dirname "$(command -v node)")

tmp=$(mktemp -d /tmp/agent-demo.XXXXXX)
up_pid=
cleanup() {
  if [ -n "$up_pid" ]; then kill "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "run_demo: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ------------------------------------------------------------------ TLS: test CA, hosts
HOSTS="api.anthropic.com api.openai.com chatgpt.com generativelanguage.googleapis.com"
if [ $tls = 1 ]; then
  mkdir "$tmp/tls" && cd "$tmp/tls" || exit 1
  san=$(printf 'DNS:%s,' $HOSTS); san=${san%,}
  {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -keyout ca.key -out ca.pem -subj "/CN=agentsh agent-demo test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -keyout server.key -out server.csr -subj "/CN=api.anthropic.com"
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectAltName=$san" > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -out server.pem -extfile server.ext
  } >openssl.log 2>&1 || { echo "run_demo: openssl failed:" >&2; cat openssl.log >&2; exit 1; }
  printf '127.0.0.1 localhost\n::1 localhost\n127.0.0.2 %s\n' "$HOSTS" > hosts
  mount --bind "$tmp/tls/hosts" /etc/hosts || { echo "run_demo: cannot bind-mount /etc/hosts" >&2; exit 1; }
  CA=$tmp/tls/ca.pem
  cd "$tmp" || exit 1
fi

# ------------------------------------------------------------------ helpers
start_upstream() {  # $1: the agent's work dir; sets up_pid and port
  local d=$1 args=(--host 127.0.0.2 --port 0)
  [ $tls = 1 ] && args=(--host 127.0.0.2 --port 443 --tls-cert "$tmp/tls/server.pem" --tls-key "$tmp/tls/server.key")
  "$py" "$here/agent_upstream.py" "${args[@]}" --log "$d/upstream.log" --script "$d/script.json" \
    >"$d/upstream.out" 2>"$d/upstream.err" &
  up_pid=$!
  local i line=
  for i in $(seq 100); do
    line=$(head -n1 "$d/upstream.out" 2>/dev/null)
    [ -n "$line" ] && break
    kill -0 "$up_pid" 2>/dev/null || break
    sleep 0.05
  done
  case "$line" in
    "listening 127.0.0.2:"*) port=${line##*:} ;;
    *) echo "run_demo: agent_upstream did not start:" >&2; cat "$d/upstream.err" >&2; exit 1 ;;
  esac
}

stop_upstream() {
  [ -n "$up_pid" ] && { kill "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; }
  up_pid=
}

write_script() {  # $1 dir, $2 agent
  cat > "$1/script.json" <<EOF
{"turns": [
  {"prompt_contains": "WRITE_IT",
   "call": {"server": "fs", "tool": "write_file",
            "arguments": {"path": "$1/dir/out.txt", "content": "hello from WRITE_IT via $2"}},
   "final": "RESULT<<{result}>>"},
  {"prompt_contains": "READ_IT",
   "call": {"server": "fs", "tool": "read_file", "arguments": {"path": "$1/dir/seed.txt"}},
   "final": "RESULT<<{result}>>"}
 ],
 "default_text": "OK."}
EOF
}

# Writes the agent's own config files under $d/home (mcpServers.fs and the like) and sets the
# array cmd_env (environment, on top of a clean one) for it.
configure() {  # $1 agent, $2 dir
  local agent=$1 d=$2 home=$2/home dir=$2/dir
  mkdir -p "$home"
  # npx (which each agent runs for the MCP server) must not touch the registry: offline, from the cache.
  printf 'offline=true\ncache=%s\nupdate-notifier=false\nfund=false\naudit=false\n' "$NPM_CACHE" > "$home/.npmrc"
  local mcp_args="[\"-y\", \"@modelcontextprotocol/server-filesystem\", \"$dir\"]"
  cmd_env=(HOME="$home" PATH="$BIN:$node_dir:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 USER="$(id -un)" TERM=dumb NO_COLOR=1)
  case $agent in
    claude)
      cat > "$home/.claude.json" <<EOF
{"mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": $mcp_args}}}
EOF
      api_key=sk-ant-agent-upstream
      cmd_env+=(ANTHROPIC_API_KEY=$api_key CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
                DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1)
      if [ $tls = 1 ]; then cmd_env+=(NODE_EXTRA_CA_CERTS="$CA"); else cmd_env+=(ANTHROPIC_BASE_URL="http://127.0.0.2:$port"); fi
      ;;
    codex|codex-codemode)
      mkdir -p "$home/.codex"
      {
        [ $agent = codex ] && echo 'model = "gpt-5.5"  # direct tool calls; the default gpt-6 models use code mode'
        [ $tls = 0 ] && echo "openai_base_url = \"http://127.0.0.2:$port/v1\""
        cat <<EOF
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[mcp_servers.fs]
command = "npx"
args = $mcp_args
# Wait for the server before the first turn: otherwise the first model call can come before its tools.
required = true
EOF
      } > "$home/.codex/config.toml"
      # CODEX_API_KEY: with OPENAI_API_KEY alone, codex exec sends no Authorization header.
      api_key=sk-agent-upstream
      cmd_env+=(CODEX_HOME="$home/.codex" CODEX_API_KEY=$api_key)
      [ $tls = 1 ] && cmd_env+=(CODEX_CA_CERTIFICATE="$CA")
      ;;
    gemini)
      mkdir -p "$home/.gemini"
      cat > "$home/.gemini/settings.json" <<EOF
{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "mcpServers": {"fs": {"command": "npx", "args": $mcp_args}}
}
EOF
      api_key=agent-upstream-key
      cmd_env+=(GEMINI_API_KEY=$api_key GEMINI_CLI_TRUST_WORKSPACE=true)
      if [ $tls = 1 ]; then cmd_env+=(NODE_EXTRA_CA_CERTS="$CA"); else cmd_env+=(GOOGLE_GEMINI_BASE_URL="http://127.0.0.2:$port"); fi
      ;;
  esac
}

agent_cmd() {  # $1 agent, $2 prompt -> sets cmd
  case $1 in
    claude) cmd=(claude -p "$2" --allowedTools mcp__fs --output-format text) ;;
    codex|codex-codemode) cmd=(codex exec --skip-git-repo-check --color never "$2") ;;
    gemini) cmd=(gemini -p "$2" --yolo) ;;
  esac
}

tool_calls() {  # the tool calls the upstream answered with, from its log
  "$py" - "$1" <<'EOF'
import json, sys
calls = []
for line in open(sys.argv[1], encoding="utf-8"):
    answer = json.loads(line).get("answer")
    if isinstance(answer, dict) and "call" in answer:
        calls.append(answer["call"])
print(" -> ".join(calls) or "none")
EOF
}

log_check() {  # $1 log, $2 API key: every model call carried the key; with TLS, every request
               # came over TLS to one of the API names, and no handshake failed
  "$py" - "$1" "$2" "$tls" "$HOSTS" <<'EOF'
import json, sys
log, key, tls, hosts = sys.argv[1], sys.argv[2], sys.argv[3] == "1", set(sys.argv[4].split())
bad, calls = [], 0
for line in open(log, encoding="utf-8"):
    e = json.loads(line)
    if "tls_error" in e:
        bad.append("tls_error: " + e["tls_error"])
        continue
    if tls and (not e.get("tls") or e.get("sni") not in hosts):
        bad.append(f"{e['method']} {e['path']} tls={e.get('tls')} sni={e.get('sni')}")
    if "answer" in e and e["method"] == "POST":
        calls += 1
        h = e["headers"]
        if key not in (h.get("x-api-key"), h.get("x-goog-api-key")) and h.get("authorization") != f"Bearer {key}":
            bad.append(f"{e['method']} {e['path'].split('?')[0]} without the API key")
if not calls:
    bad.append("no model call reached the upstream")
print("; ".join(dict.fromkeys(bad)))
EOF
}

paths_seen() {
  "$py" - "$1" <<'EOF'
import json, sys
seen = []
for line in open(sys.argv[1], encoding="utf-8"):
    e = json.loads(line)
    key = "tls_error" if "tls_error" in e else f"{e['method']} {(e.get('sni') or '')}{e['path'].split('?')[0]}"
    if key not in seen:
        seen.append(key)
print(", ".join(seen))
EOF
}

# ------------------------------------------------------------------ run
passed=0 failed=0
t_all=$(date +%s.%N)
mode=http; [ $tls = 1 ] && mode=https
echo "run_demo ($mode): agents ${agents[*]}; work dir $tmp"
for agent in "${agents[@]}"; do
  d=$tmp/$agent
  mkdir -p "$d/dir"
  seed="seed-$agent-$RANDOM$RANDOM"
  printf '%s\n' "$seed" > "$d/dir/seed.txt"
  write_script "$d" "$agent"
  start_upstream "$d"
  configure "$agent" "$d"
  result=PASS notes=() times=()
  for step in write read; do
    prompt=WRITE_IT; [ $step = read ] && prompt=READ_IT
    agent_cmd "$agent" "$prompt"
    : > "$d/upstream.step.log"
    before=$(wc -l < "$d/upstream.log" 2>/dev/null || echo 0)
    t0=$(date +%s.%N)
    (cd "$d/dir" && env -i "${cmd_env[@]}" timeout "$AGENT_TIMEOUT" "${cmd[@]}") \
      </dev/null >"$d/$step.out" 2>"$d/$step.err"
    rc=$?
    t=$(echo "$(date +%s.%N) - $t0" | bc)
    times+=("$step $(printf '%.1f' "$t")s")
    tail -n +"$((before + 1))" "$d/upstream.log" > "$d/upstream.step.log"
    ok=1 why=
    if [ $rc != 0 ]; then ok=0; why="exit $rc"; fi
    if [ $step = write ]; then
      want="hello from WRITE_IT via $agent"
      [ "$(cat "$d/dir/out.txt" 2>/dev/null)" = "$want" ] || { ok=0; why="$why; out.txt not written"; }
      grep -q "Successfully wrote to $d/dir/out.txt" "$d/$step.out" || { ok=0; why="$why; answer lacks the tool result"; }
    else
      grep -q "$seed" "$d/$step.out" || { ok=0; why="$why; answer lacks the file content"; }
    fi
    bad=$(log_check "$d/upstream.step.log" "$api_key")
    [ -z "$bad" ] || { ok=0; why="$why; $bad"; }
    calls=$(tool_calls "$d/upstream.step.log")
    if [ $ok = 1 ]; then
      passed=$((passed + 1))
      notes+=("$step: $calls")
    else
      failed=$((failed + 1)); result=FAIL
      notes+=("$step FAILED (${why#; }): $calls")
      echo "---- $agent $step: last lines of stdout / stderr"
      tail -n 5 "$d/$step.out"; tail -n 8 "$d/$step.err"
      echo "---- upstream saw: $(paths_seen "$d/upstream.step.log")"
    fi
  done
  stop_upstream
  printf '%-15s %s  (%s)\n' "$agent" "$result" "$(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
  for n in "${notes[@]}"; do printf '    %s\n' "$n"; done
  printf '    requests: %s\n' "$(paths_seen "$d/upstream.log")"
done
total=$(printf '%.0f' "$(echo "$(date +%s.%N) - $t_all" | bc)")
echo "run_demo ($mode): $passed passed, $failed failed in ${total}s"
[ $failed = 0 ]
