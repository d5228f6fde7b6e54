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
- config_policy, native_shell, api_protocol, llm_request: a selector byte, then the text;
- evidence_verify: a selector byte below 0x80, then a JSON-lines audit trail, chained and
  signed here as agentshd does (`agent/src/evidence`) with the unit tests' key, intact and
  tampered with (its structured mode, a selector of 0x80 or above, is seeded by fuzzing).
Targets that read their input with `arbitrary` (mcp_http, proxy_route, proxy_encoding,
tls_hello, secrets_scan) are seeded by a short fuzzing run instead (scripts/fuzz.sh seed).
"""

import glob
import hashlib
import json
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

    write("evidence_verify", trails())


# --- Audit trails (evidence_verify) -------------------------------------------------------------
#
# Ed25519 (RFC 8032, section 6's reference code: no dependency, deterministic), and the chain of
# agent/src/evidence: SHA-256 over a domain and the canonical JSON (keys sorted, no whitespace,
# serde_json's escaping; the seeds hold integers and strings only, whose canonical form is
# Python's with sort_keys and ensure_ascii=False).

ED_P = 2**255 - 19
ED_D = -121665 * pow(121666, -1, ED_P) % ED_P
ED_Q = 2**252 + 27742317777372353535851937790883648493
ED_SQRT_M1 = pow(2, (ED_P - 1) // 4, ED_P)


def ed_add(a, b):
    x = (a[1] - a[0]) * (b[1] - b[0]) % ED_P
    y = (a[1] + a[0]) * (b[1] + b[0]) % ED_P
    c = 2 * a[3] * b[3] * ED_D % ED_P
    d = 2 * a[2] * b[2] % ED_P
    e, f, g, h = y - x, d - c, d + c, y + x
    return (e * f, g * h, f * g, e * h)


def ed_mul(s, point):
    out = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            out = ed_add(out, point)
        point = ed_add(point, point)
        s >>= 1
    return out


def ed_base():
    y = 4 * pow(5, -1, ED_P) % ED_P
    x2 = (y * y - 1) * pow(ED_D * y * y + 1, -1, ED_P)
    x = pow(x2, (ED_P + 3) // 8, ED_P)
    if (x * x - x2) % ED_P != 0:
        x = x * ED_SQRT_M1 % ED_P
    if x & 1:
        x = ED_P - x
    return (x, y, 1, x * y % ED_P)


def ed_compress(point):
    zinv = pow(point[2], -1, ED_P)
    x, y = point[0] * zinv % ED_P, point[1] * zinv % ED_P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


class Ed25519:
    def __init__(self, seed):
        h = hashlib.sha512(seed).digest()
        a = int.from_bytes(h[:32], "little")
        self.a = (a & ((1 << 254) - 8)) | (1 << 254)
        self.prefix = h[32:]
        self.public = ed_compress(ed_mul(self.a, ed_base()))

    def sign(self, message):
        r = int.from_bytes(hashlib.sha512(self.prefix + message).digest(), "little") % ED_Q
        big_r = ed_compress(ed_mul(r, ed_base()))
        k = int.from_bytes(hashlib.sha512(big_r + self.public + message).digest(), "little") % ED_Q
        return big_r + ((r + k * self.a) % ED_Q).to_bytes(32, "little")


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


ZERO_HASH = "0" * 64


class Trail:
    """A chain being sealed and signed (evidence::Chain and evidence::Signer)."""

    KEY = Ed25519(bytes([7] * 32))  # agent/src/evidence/tests.rs's seed
    KEY_ID = hashlib.sha256(KEY.public).hexdigest()[:16]

    def __init__(self, seq=0, head=ZERO_HASH):
        self.seq, self.head = seq, head
        self.session_heads = {}
        self.records = []

    def seal(self, record, session=None):
        chain = {"seq": self.seq + 1, "prev": self.head}
        if session in self.session_heads:
            chain["session_prev"] = self.session_heads[session]
        record["chain"] = chain
        digest = hashlib.sha256(b"agentsh-event-v1\n" + canonical(record)).hexdigest()
        chain["hash"] = digest
        self.seq, self.head = self.seq + 1, digest
        if session is not None:
            self.session_heads[session] = digest
        self.records.append(record)

    def event(self, n, session=None, kind="mcp_tool_called"):
        record = {"timestamp": "2025-01-01T00:00:%02d.000000Z" % (n % 60), "event": kind}
        if session is not None:
            record["session"] = session
        record.update({
            "server": "fs",
            "tool": "read_file",
            "action": "allow" if n % 4 else "block",
            "reason": "call %d: \u00fcn\u00efc\u00f6d\u00e9 \u2713 \"quoted\"\n" % n,
            "details": {"n": n, "nested": {"z": 1, "a": [1, "x", None, True]}},
        })
        self.seal(record, session)

    def checkpoint(self, reason, session=None, deleted=None, seq=None, head=None):
        fields = {
            "seq": self.seq if seq is None else seq,
            "head": self.head if head is None else head,
            "time_ms": 1735689600000 + self.seq,
            "reason": reason,
        }
        if deleted:
            fields["deleted"] = deleted
        if reason == "session_end":
            fields["session"] = session
            if session in self.session_heads:
                fields["session_head"] = self.session_heads[session]
        fields["key_id"] = self.KEY_ID
        signature = self.KEY.sign(b"agentsh-checkpoint-v1\n" + canonical(fields)).hex()
        record = {"timestamp": "2025-01-01T01:00:00.000000Z", "event": "audit_checkpoint"}
        if session is not None:
            record["session"] = session
        record.update({
            "server": "",
            "action": "audit",
            "reason": "signed checkpoint at #%d (%s) by key %s" % (fields["seq"], reason, self.KEY_ID),
            "details": dict(fields, signature=signature),
        })
        self.seal(record, session)
        if reason == "session_end":
            self.session_heads.pop(session, None)

    def lines(self, reverse_keys=False, newline="\n"):
        def rev(v):
            if isinstance(v, dict):
                return {k: rev(v[k]) for k in reversed(list(v))}
            if isinstance(v, list):
                return [rev(x) for x in v]
            return v
        out = []
        for r in self.records:
            out.append(json.dumps(rev(r) if reverse_keys else r, separators=(",", ":"), ensure_ascii=False))
        return newline.join(out) + newline


def trails():
    """(selector, JSON lines) seeds: intact trails of every shape, then tampered ones."""
    seeds = []
    basic = Trail()
    for n in range(1, 15):
        basic.event(n, ["a", "b", None][n % 3])
        if n % 5 == 0:
            basic.checkpoint("interval")
        if n == 11:
            basic.event(99, "b", "session_ended")
            basic.checkpoint("session_end", "b")
    basic.checkpoint("shutdown")
    text = basic.lines()
    seeds += [(0, text), (2, text), (4, text)]
    seeds.append((1, basic.lines(reverse_keys=True, newline="\r\n\n")))
    tail = Trail()
    for n in range(1, 8):
        tail.event(n, "c")
        if n == 4:
            tail.checkpoint("interval")
    seeds.append((4, tail.lines()))

    # Retention: #1..#12 deleted but session a's, the runs signed.
    kept = Trail()
    for n in range(1, 21):
        kept.event(n, ["a", "b", None][n % 3])
        if n % 6 == 0:
            kept.checkpoint("interval")
    kept.records = [r for r in kept.records if r["chain"]["seq"] > 12 or r.get("session") == "a"]
    present = {r["chain"]["seq"] for r in kept.records}
    runs = []
    for seq in range(1, 13):
        if seq in present:
            continue
        if runs and runs[-1][1] + 1 == seq:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    kept.checkpoint("retention", deleted=runs)
    seeds += [(0, kept.lines()), (2, kept.lines())]
    cut = kept.lines().split("\n")
    del cut[1]
    seeds.append((0, "\n".join(cut)))

    # An upgraded daemon's trail: old records without chain fields, then a chain start.
    upgraded = Trail(seq=3)
    old = [json.dumps({"timestamp": "2024-12-31T00:00:0%dZ" % n, "event": "mcp_tool_called",
                       "session": "old", "seq": n}) for n in range(1, 4)]
    upgraded.checkpoint("chain_start", seq=3, head=ZERO_HASH)
    for n in range(4, 8):
        upgraded.event(n, "new")
    upgraded.checkpoint("shutdown")
    seeds.append((0, "\n".join(old) + "\n" + upgraded.lines()))

    # Tampered with: a byte, a line deleted, two swapped, one duplicated, a tail cut mid-line,
    # a checkpoint's signature, a chain rebuilt from a record on.
    lines = text.split("\n")
    edited = list(lines)
    edited[6] = edited[6].replace('"read_file"', '"read_fild"', 1)
    seeds.append((0, "\n".join(edited)))
    for change in ("delete", "swap", "duplicate"):
        changed = list(lines)
        if change == "delete":
            del changed[8]
        elif change == "swap":
            changed[3], changed[9] = changed[9], changed[3]
        else:
            changed.insert(4, changed[3])
        seeds.append((0, "\n".join(changed)))
    seeds.append((0, text[: len(text) - 40]))
    forged = list(lines)
    sig_at = forged[5].find('"signature":"') + len('"signature":"')
    forged[5] = forged[5][:sig_at] + ("1" if forged[5][sig_at] == "0" else "0") + forged[5][sig_at + 1:]
    seeds.append((0, "\n".join(forged)))
    # Record 3 changed and the chain rebuilt from it, the checkpoints left as they were signed.
    rebuilt = Trail(seq=2, head=basic.records[1]["chain"]["hash"])
    rebuilt.session_heads = {r["session"]: r["chain"]["hash"] for r in basic.records[:2] if "session" in r}
    rebuilt.records = [dict(r) for r in basic.records[:2]]
    for i, r in enumerate(basic.records[2:]):
        r = json.loads(json.dumps(r))
        del r["chain"]
        if i == 0:
            r["action"] = "block"
        rebuilt.seal(r, r.get("session"))
        if r.get("reason", "").startswith("signed checkpoint") and r["details"]["reason"] == "session_end":
            rebuilt.session_heads.pop(r["session"], None)
    seeds.append((0, rebuilt.lines()))
    # Hostile numbers, and lines that are not records.
    big = json.loads(lines[0])
    big["chain"]["seq"] = 2**64 - 1
    seeds.append((0, lines[0] + "\n" + json.dumps(big) + "\nnot json\n[1,2]\n{\"chain\":{\"seq\":-1}}\n"))
    return [bytes([selector]) + body.encode("utf-8") for selector, body in seeds]


if __name__ == "__main__":
    sys.exit(main())
