#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from the inputs of the
unit tests (string literals in agent/src) and from the repository's fixtures (policies,
configs, the shell commands of policies/testdata, the control protocol's examples).

Run from anywhere: `python3 fuzz/seeds.py`. It only adds files (named by their content's
hash), so running it again is harmless; each target keeps at most MAX seeds from here.

Seed formats (see each target's header):
- the LLM dialect targets and sse_reader: one byte choosing the reading (below 0x80: raw
  bytes; its low bits: stream, body, ...), one byte of limits (0: the defaults), one byte of
  cut seed, one byte of cut count, then the bytes;
- mcp_jsonrpc: a selector byte, a piece-size byte, then the line;
- config_policy, native_shell, api_protocol, llm_request: a selector byte, then the text.
Targets that read their input with `arbitrary` (mcp_http, proxy_route, proxy_encoding,
tls_hello) are seeded by a short fuzzing run instead (scripts/fuzz.sh seed).
"""

import glob
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "agent", "src")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
MAX = 40


def literals(path):
    """The string literals of a Rust file (raw and escaped), unescaped."""
    text = open(path, encoding="utf-8").read()
    out = []
    i = 0
    pattern = re.compile(r'r(#*)"|"')
    while True:
        m = pattern.search(text, i)
        if not m:
            break
        # Skip character literals like '"' and byte string prefixes are fine.
        if m.start() > 0 and text[m.start() - 1] == "'" and m.group(0) == '"':
            i = m.end()
            continue
        if m.group(0).startswith("r"):
            hashes = m.group(1)
            end = text.find('"' + hashes, m.end())
            if end < 0:
                break
            out.append(text[m.end():end])
            i = end + 1 + len(hashes)
            continue
        j = m.end()
        buf = []
        while j < len(text) and text[j] != '"':
            c = text[j]
            if c == "\\" and j + 1 < len(text):
                n = text[j + 1]
                simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
                if n in simple:
                    buf.append(simple[n])
                    j += 2
                    continue
                if n == "\n":
                    j += 2
                    while j < len(text) and text[j] in " \t\n":
                        j += 1
                    continue
                if n == "u" and text[j + 2] == "{":
                    close = text.find("}", j)
                    try:
                        buf.append(chr(int(text[j + 3:close], 16)))
                    except ValueError:
                        pass
                    j = close + 1
                    continue
                if n == "x":
                    try:
                        buf.append(chr(int(text[j + 2:j + 4], 16)))
                    except ValueError:
                        pass
                    j += 4
                    continue
                buf.append(n)
                j += 2
                continue
            buf.append(c)
            j += 1
        out.append("".join(buf))
        i = j + 1
    return out


def files(*patterns):
    found = []
    for pattern in patterns:
        found.extend(sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)))
    return found


def write(target, seeds):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    seen = set()
    kept = 0
    for seed in seeds:
        if isinstance(seed, str):
            seed = seed.encode("utf-8", "surrogatepass")
        if seed in seen or len(seed) > 64 * 1024:
            continue
        seen.add(seed)
        name = hashlib.sha1(seed).hexdigest()[:16]
        with open(os.path.join(directory, name), "wb") as f:
            f.write(seed)
        kept += 1
        if kept >= MAX:
            break
    print(f"{target}: {kept} seeds")


def raw(kind, body, limits=0, seed=0, cuts=0):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    return bytes([kind, limits, seed, cuts]) + body


def dialect(target, sources, stream_marker, body_marker, array=False):
    seeds = []
    for source in sources:
        for lit in literals(source):
            if stream_marker in lit and ("data:" in lit):
                seeds.append(raw(0, lit))
                seeds.append(raw(0, lit, limits=3, seed=len(lit) % 256, cuts=7))
            elif array and lit.lstrip().startswith("[{") and body_marker in lit:
                seeds.append(raw(1, lit, seed=len(lit) % 256, cuts=5))
            elif lit.lstrip().startswith("{") and body_marker in lit:
                seeds.append(raw(2 if array else 1, lit))
    # Round-robin: stream seeds and body seeds both survive the cap.
    streams = [s for s in seeds if s[0] == 0]
    others = [s for s in seeds if s[0] != 0]
    mixed = []
    while streams or others:
        if streams:
            mixed.append(streams.pop(0))
        if others:
            mixed.append(others.pop(0))
    write(target, mixed)


def main():
    llm = lambda name: [os.path.join(SRC, "llm", name)]
    dialect("llm_anthropic", llm("anthropic.rs") + llm("mod.rs"), "message_start", '"type"')
    dialect("llm_openai_chat", llm("openai_chat.rs"), "chat.completion.chunk", "chat.completion")
    dialect(
        "llm_openai_responses",
        llm("openai_responses.rs"),
        "response.",
        '"output"',
    )
    dialect(
        "llm_gemini",
        llm("gemini.rs") + files("agent/src/llm/gemini/*.rs"),
        "candidates",
        "candidates",
        array=True,
    )

    # The readers: SSE streams of every dialect, and the streamed arrays.
    sse = []
    for source in llm("sse.rs") + llm("anthropic.rs") + llm("openai_chat.rs"):
        for lit in literals(source):
            if "data:" in lit:
                sse.append(raw(0, lit, limits=1 + len(sse) % 9, seed=len(lit) % 256, cuts=9))
    for source in llm("json_array.rs") + files("agent/src/llm/gemini/*.rs"):
        for lit in literals(source):
            if lit.lstrip().startswith(("[{", "{")):
                sse.append(raw(1, lit, limits=1 + len(sse) % 9, seed=len(lit) % 256, cuts=9))
    write("sse_reader", sse[:20] + sse[-20:])

    # MCP lines: JSON-RPC messages of the mcp and guard tests.
    mcp = []
    for source in files("agent/src/mcp/*.rs", "agent/src/guard/*.rs", "shim/src/**/*.rs"):
        for lit in literals(source):
            if '"jsonrpc"' in lit or lit.lstrip().startswith("["):
                for line in lit.split("\n"):
                    if line.strip():
                        mcp.append(bytes([len(mcp) % 256, 3]) + line.encode())
    write("mcp_jsonrpc", mcp)

    # Policies and daemon configs.
    config = []
    for path in files("policies/*.yaml", "policies/**/*.yaml", "agentsh.dev.yaml", "packaging/*.yaml"):
        data = open(path, "rb").read()
        selector = 1 if ("agentsh" in os.path.basename(path)) else 0
        config.append(bytes([selector]) + data)
    for source in files("agent/src/config/tests.rs", "agent/src/config/daemon_tests.rs"):
        for lit in literals(source):
            if ":" in lit and "\n" in lit:
                selector = 1 if "daemon" in source else 0
                config.append(bytes([selector]) + lit.encode())
    write("config_policy", config)

    # Shell commands (the policy's everyday and attack lists), patches, code-mode sources.
    shell = []
    for path in files("policies/testdata/*"):
        if os.path.isfile(path):
            for line in open(path, encoding="utf-8", errors="replace"):
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    shell.append(b"\x00" + line.encode())
    shell = shell[::max(1, len(shell) // 24)][:24]
    for source in files("agent/src/native/*.rs"):
        for lit in literals(source):
            if "*** Begin Patch" in lit:
                shell.append(b"\x01" + lit.encode())
            elif "tools." in lit:
                shell.append(b"\x02" + lit.encode())
            elif lit.lstrip().startswith("{") and '"' in lit:
                shell.append(b"\x03" + lit.encode())
    write("native_shell", shell)

    # Control-socket lines from the protocol's documentation and tests.
    api = []
    for path in files("docs/control-protocol.md"):
        for line in open(path, encoding="utf-8"):
            start = line.find("{")
            if start >= 0 and '"v"' in line:
                text = line[start:].strip().rstrip("`")
                api.append((b"\x00" if '"op"' in text else b"\x02") + text.encode())
    for source in files("agent/src/api/*.rs"):
        for lit in literals(source):
            if '"v"' in lit:
                api.append((b"\x00" if '"op"' in lit else b"\x02") + lit.encode())
    write("api_protocol", api)

    # Requests as agents send them, and the secrets DLP looks for.
    request = []
    for source in llm("request.rs"):
        for lit in literals(source):
            if lit.lstrip().startswith("{"):
                request.append(bytes([3 * len(request) % 12 * 1]) + lit.encode())
    for source in llm("dlp.rs"):
        for lit in literals(source):
            if len(lit) > 12 and not lit.startswith("(?"):
                request.append(b"\x01" + lit.encode())
    for source in llm("host_names.rs"):
        for lit in literals(source):
            if "{server}" in lit:
                request.append(b"\x02" + lit.encode() + b"\nmcp__github__create_issue")
    write("llm_request", request)


if __name__ == "__main__":
    sys.exit(main())
