#!/usr/bin/env bash
# Checks the LLM test peers against each other, without agentsh: fake_upstream.py on 127.0.0.2,
# llm_client.py (the official SDKs) straight at it, for every API x scenario x {buffered, stream
# (and Gemini's JSON-array stream)} x {identity, gzip, br, zstd, deflate}. The summaries must hold the fixtures' text and tool calls,
# --raw must print the fixture byte for byte (httpx2 undoes the Content-Encoding), and the
# upstream's log must hold every request. Also: stream/fixture mismatches, x-fake-status errors,
# an unknown route, and the wire itself (chunk sizes, keep-alive). Exits non-zero on any failure.
#
#     bash tests/peers/llm/selftest.sh      (after scripts/setup.sh made tests/peers/llm/.venv)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py="$here/.venv/bin/python"
if [ ! -x "$py" ]; then
  echo "selftest: $py is missing: run scripts/setup.sh first" >&2; exit 1
fi

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The server reads a copy of the fixtures plus two that exist in one form only.
mkdir "$tmp/fixtures"
cp "$here"/fixtures/*.json "$here"/fixtures/*.sse "$here"/fixtures/*.jsonarray "$tmp/fixtures/"
cp "$here/fixtures/chat_text.json" "$tmp/fixtures/only_json.json"
cp "$here/fixtures/anthropic_text.sse" "$tmp/fixtures/only_sse.sse"

mkfifo "$tmp/ready"
"$py" "$here/fake_upstream.py" --host 127.0.0.2 --port 0 --fixtures "$tmp/fixtures" --log "$tmp/upstream.log" \
  >"$tmp/ready" 2>"$tmp/upstream.err" &
server_pid=$!
read -r line <"$tmp/ready" || { echo "selftest: fake_upstream did not start" >&2; cat "$tmp/upstream.err" >&2; exit 1; }
case "$line" in listening\ 127.0.0.2:*) ;; *) echo "selftest: unexpected first line: $line" >&2; exit 1 ;; esac
port=${line##*:}
echo "selftest: fake upstream on 127.0.0.2:$port"

FIXTURES="$here/fixtures" PORT="$port" LOG="$tmp/upstream.log" CLIENT="$here/llm_client.py" "$py" - <<'EOF'
import concurrent.futures as cf
import contextlib
import io
import json
import os
import socket
import subprocess
import sys

FIXTURES, PORT, LOG, CLIENT = (os.environ[k] for k in ("FIXTURES", "PORT", "LOG", "CLIENT"))
PY = sys.executable
HOST = "127.0.0.2"

ENT = {"entities": [{"name": "alice", "entityType": "person", "observations": ["likes tea"]}]}
WR = {"path": "/tmp/agentsh-e2e/notes.txt", "content": "hello"}
TOOLS_TEXT = "I'll remember that about Alice — and write the note to /tmp/agentsh-e2e/notes.txt."
TEXT = "Hello! I'm doing well, merci — how can I help with your café notes today? ☕"
MEM, FS = "mcp__memory__create_entities", "mcp__filesystem__write_file"
GMEM, GFS = "mcp_memory_create_entities", "mcp_filesystem_write_file"

# scenario -> (api, expected choices as (finish_reason, text, [(name, arguments)]))
EXPECT = {
    "anthropic_tools": ("anthropic", [("tool_use", TOOLS_TEXT, [(MEM, ENT), (FS, WR)])]),
    "anthropic_text": ("anthropic", [("end_turn", TEXT, [])]),
    "anthropic_native": ("anthropic", [("tool_use", "Let me look at the files in the current directory.",
                                        [("Bash", {"command": "ls"})])]),
    "chat_tools": ("chat", [("tool_calls", "", [(MEM, ENT), (FS, WR)]),
                            ("tool_calls", "Saving the note now.", [(FS, WR)])]),
    "chat_text": ("chat", [("stop", TEXT, [])]),
    "responses_tools": ("responses", [("tool_calls", TOOLS_TEXT, [(MEM, ENT), (FS, WR)])]),
    "responses_text": ("responses", [("completed", TEXT, [])]),
    "gemini_tools": ("gemini", [("STOP", TOOLS_TEXT, [(GMEM, ENT), (GFS, WR)])]),
    "gemini_text": ("gemini", [("STOP", TEXT, [])]),
}
ENCODINGS = [None, "gzip", "br", "zstd", "deflate"]
# How each API streams: False buffered, True SSE, "array" Gemini's streamed JSON array.
STREAMS = {"gemini": (False, True, "array")}
EXTENSIONS = {False: ".json", True: ".sse", "array": ".jsonarray"}

passed, failed = 0, 0


def result(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}: {detail}", flush=True)


def base_url(api):
    return f"http://{HOST}:{PORT}" + ("" if api in ("anthropic", "gemini") else "/v1")


def argv(api, scenario, stream=False, encoding=None, raw=False, extra=()):
    args = ["--api", api, "--base-url", base_url(api), "--scenario", scenario]
    if stream == "array":
        args.append("--gemini-array")
    elif stream:
        args.append("--stream")
    if encoding:
        args += ["--encoding", encoding]
    if raw:
        args.append("--raw")
    if scenario == "chat_tools":
        args += ["--n", "2"]
    return args + list(extra)


def client(*a, **kw):
    """llm_client.py as its own process."""
    p = subprocess.run([PY, CLIENT] + argv(*a, **kw), capture_output=True, timeout=120)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def client_inproc(*a, **kw):
    """llm_client.main() in this process: the same code without the SDKs' import time (seconds)."""
    buf, err = io.BytesIO(), io.StringIO()
    out = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = llm_client.main(argv(*a, **kw))
    out.flush()
    return rc, buf.getvalue(), err.getvalue()


def check_case(scenario, stream, encoding, raw, run=client):
    api, want = EXPECT[scenario]
    what = f"{api} {scenario} stream={stream} encoding={encoding or 'identity'} {'raw' if raw else 'summary'}"
    rc, out, err = run(api, scenario, stream, encoding, raw)
    if rc != 0:
        return what, False, f"exit {rc}: {err.strip()}"
    if raw:
        with open(os.path.join(FIXTURES, scenario + EXTENSIONS[stream]), "rb") as f:
            fixture = f.read()
        if out != fixture:
            return what, False, f"raw body differs from the fixture ({len(out)} bytes vs {len(fixture)})"
        return what, True, ""
    try:
        s = json.loads(out)
    except ValueError:
        return what, False, f"not one JSON object: {out[:200]!r}"
    got = [(c["finish_reason"], c["text"], [(t["name"], t["arguments"]) for t in c["tool_calls"]])
           for c in s["choices"]]
    if s["api"] != api or s["stream"] != bool(stream) or got != want:
        return what, False, f"summary {json.dumps(s, ensure_ascii=False)}"
    if api == "gemini":
        # The Gemini API gives calls no id; the first call of the turn is signed.
        calls = [t for c in s["choices"] for t in c["tool_calls"]]
        if any(t["id"] is not None for t in calls) or [t["signed"] for t in calls] != [True, False][: len(calls)]:
            return what, False, f"gemini calls {calls}"
        return what, True, ""
    ids = [t["id"] for c in s["choices"] for t in c["tool_calls"]]
    if not all(ids) or len(set(ids)) != len(ids):
        return what, False, f"tool call ids missing or repeated: {ids}"
    if api == "responses" and stream and s.get("items_match_completed") is not True:
        return what, False, "output_item.done items differ from response.completed"
    return what, True, ""


# Unencoded cases run llm_client.py as a process each (a few at a time); the encoded ones call its
# main() in this process, one after another, which saves the seconds an SDK import takes.
cases = [(sc, st, enc, raw) for sc in EXPECT for st in STREAMS.get(EXPECT[sc][0], (False, True))
         for enc in ENCODINGS for raw in (False, True)]
with cf.ThreadPoolExecutor(max_workers=3) as pool:
    for what, ok, detail in pool.map(lambda c: check_case(*c), [c for c in cases if c[2] is None]):
        result(ok, what, detail)
sys.path.insert(0, os.path.dirname(CLIENT))
import llm_client
for c in cases:
    if c[2] is not None:
        what, ok, detail = check_case(*c, run=client_inproc)
        result(ok, what, detail)
print(f"selftest: {len(cases)} SDK runs done", flush=True)

# Every request reached the upstream log with its scenario, encoding and stream flag.
with open(LOG, encoding="utf-8") as f:
    entries = [json.loads(l) for l in f]
seen = {}


def stream_of(e):
    """How a logged request asked to stream (Google says it in the path)."""
    if ":streamGenerateContent" in e["path"]:
        return True if "alt=sse" in e["path"] else "array"
    return bool(isinstance(e["body"], dict) and e["body"].get("stream"))


for e in entries:
    h = e["headers"]
    key = (h.get("x-fake-scenario"), stream_of(e), h.get("x-fake-encoding"))
    seen[key] = seen.get(key, 0) + 1
for sc in EXPECT:
    for st in STREAMS.get(EXPECT[sc][0], (False, True)):
        for enc in ENCODINGS:
            n = seen.get((sc, st, enc), 0)
            result(n == 2, f"log {sc} stream={st} encoding={enc}", f"{n} requests logged, 2 made")
e = next(e for e in entries if e["path"] == "/v1/messages")
result(e["method"] == "POST" and e["body"]["model"] and e["body"]["messages"][0]["role"] == "user"
       and all(k == k.lower() for k in e["headers"]), "log entry shape", json.dumps(e)[:300])


def expect_fail(what, api, scenario, needle, stream=False, extra=()):
    rc, out, err = client(api, scenario, stream, extra=extra)
    result(rc == 1 and needle in err and not out, what, f"exit {rc}, stdout {out[:100]!r}, stderr {err.strip()!r}")


expect_fail("stream asked, only .json", "chat", "only_json", "has only a .json fixture", stream=True)
expect_fail("buffered asked, only .sse", "anthropic", "only_sse", "has only a .sse fixture")
expect_fail("no fixture", "responses", "nope", "no fixture nope.json")
expect_fail("anthropic 529", "anthropic", "anthropic_text", "OverloadedError", extra=["--header", "x-fake-status: 529"])
expect_fail("anthropic 529 stream", "anthropic", "anthropic_text", "overloaded_error", stream=True,
            extra=["--header", "x-fake-status: 529"])
expect_fail("chat 429", "chat", "chat_text", "RateLimitError", extra=["--header", "x-fake-status: 429"])
expect_fail("responses 500", "responses", "responses_text", "InternalServerError", stream=True,
            extra=["--header", "x-fake-status: 500"])
expect_fail("gemini array asked, only .sse", "gemini", "only_sse", "has no .jsonarray fixture", stream="array")
expect_fail("gemini 429", "gemini", "gemini_text", "429 RESOURCE_EXHAUSTED", extra=["--header", "x-fake-status: 429"])
expect_fail("gemini 503 stream", "gemini", "gemini_text", "503 UNAVAILABLE", stream=True,
            extra=["--header", "x-fake-status: 503"])
expect_fail("gemini 500 array", "gemini", "gemini_text", "500 INTERNAL", stream="array",
            extra=["--header", "x-fake-status: 500"])

# The wire: one keep-alive connection; a streamed body in chunks of at most 37 bytes (several of
# them), a buffered one with Content-Length; an unknown route is a 404 in JSON.
def read_chunked(f):
    sizes, body = [], b""
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            assert f.readline() == b"\r\n"
            return sizes, body
        sizes.append(size)
        body += f.read(size)
        assert f.read(2) == b"\r\n"


def read_head(f):
    status = f.readline().decode()
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def post(sock, path, scenario, body, extra=""):
    data = json.dumps(body).encode()
    sock.sendall((f"POST {path} HTTP/1.1\r\nHost: {HOST}:{PORT}\r\nContent-Type: application/json\r\n"
                  f"x-fake-scenario: {scenario}\r\n{extra}Content-Length: {len(data)}\r\n\r\n").encode() + data)


try:
    with socket.create_connection((HOST, int(PORT)), timeout=10) as sock:
        f = sock.makefile("rb")
        post(sock, "/v1/messages", "anthropic_tools", {"stream": True})
        status, headers = read_head(f)
        sizes, body = read_chunked(f)
        fixture = open(os.path.join(FIXTURES, "anthropic_tools.sse"), "rb").read()
        result(status.startswith("HTTP/1.1 200") and headers.get("transfer-encoding") == "chunked"
               and headers.get("content-type", "").startswith("text/event-stream") and body == fixture
               and max(sizes) <= 37 and len(sizes) > 10, "wire: chunked SSE", f"{status} {headers} {sizes[:5]}")
        post(sock, "/v1/chat/completions", "chat_text", {"stream": True}, "x-fake-encoding: gzip\r\n")
        status, headers = read_head(f)
        sizes, body = read_chunked(f)
        import gzip
        result(headers.get("content-encoding") == "gzip" and len(sizes) > 1
               and gzip.decompress(body) == open(os.path.join(FIXTURES, "chat_text.sse"), "rb").read(),
               "wire: gzip SSE in pieces on the same connection", f"{status} {headers}")
        post(sock, "/v1/responses", "responses_text", {})
        status, headers = read_head(f)
        body = f.read(int(headers["content-length"]))
        result(status.startswith("HTTP/1.1 200") and headers.get("content-type") == "application/json"
               and body == open(os.path.join(FIXTURES, "responses_text.json"), "rb").read(),
               "wire: buffered JSON with Content-Length on the same connection", f"{status} {headers}")
        post(sock, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini_tools", {"contents": []})
        status, headers = read_head(f)
        sizes, body = read_chunked(f)
        result(status.startswith("HTTP/1.1 200") and headers.get("content-type", "").startswith("application/json")
               and body == open(os.path.join(FIXTURES, "gemini_tools.jsonarray"), "rb").read()
               and max(sizes) <= 37 and len(sizes) > 10, "wire: Gemini's JSON array stream in pieces",
               f"{status} {headers} {sizes[:5]}")
        post(sock, "/v1beta/models/gemini-2.5-flash:countTokens", "x", {})
        status, headers = read_head(f)
        body = json.loads(f.read(int(headers["content-length"])))
        result(status.startswith("HTTP/1.1 404") and body["error"]["status"] == "NOT_FOUND"
               and body["error"]["code"] == 404, "wire: unknown Google route 404 in Google's shape",
               f"{status} {body}")
        post(sock, "/v1/nothing", "x", {})
        status, headers = read_head(f)
        body = json.loads(f.read(int(headers["content-length"])))
        result(status.startswith("HTTP/1.1 404") and body["error"]["message"] == "Invalid URL (POST /v1/nothing)",
               "wire: unknown route 404 JSON", f"{status} {body}")
except Exception as exc:
    result(False, "wire", repr(exc))

print(f"selftest: {passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
EOF
