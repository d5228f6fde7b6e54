#!/usr/bin/env python3
"""Extract LiveMCPBench (icip-cas/LiveMCPBench, Apache-2.0) benign tool definitions and benign
real tool results, from a snapshot (git directory) of github:icip-cas/LiveMCPBench.

    python3 extract.py /work/.mirror/icip-cas+LiveMCPBench/repo > livemcpbench.jsonl

  * kind=definition, label=benign: tools/LiveMCPTool/tools.json (70 servers, 527 tools), the
    tool objects unchanged (name, description, inputSchema, annotations, outputSchema).
  * kind=result, label=benign: the outputs of real MCP tools in the baseline trajectory file
    baseline/output/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json (95 tasks run by the
    authors' MCP Copilot agent with Claude Sonnet 4). Only calls of the execution tool are kept
    (the `route` retrieval tool's listings are skipped); the outer Python repr
    `meta=None content=[TextContent(type='text', text=...)]` is decoded, and the real server's
    CallToolResult inside it (JSON) is decoded too; its text parts are joined. Items longer
    than MAXLEN characters are skipped (not truncated), and identical texts are kept once.
Caveat: results include text fetched from the web by the servers (third-party content).
"""
import ast, json, re, subprocess, sys

GIT = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/icip-cas+LiveMCPBench/repo"
MAXLEN = 20000
COMMIT = subprocess.run(["git", "--git-dir", GIT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

def show(p):
    return subprocess.run(["git", "--git-dir", GIT, "show", f"HEAD:{p}"], check=True,
                          capture_output=True, text=True).stdout

def pystrings(s):
    """Decode every text=<python string literal> in a CallToolResult repr."""
    out = []
    for m in re.finditer(r"text=(['\"])", s):
        q, i = m.group(1), m.end()
        j = i
        while j < len(s):
            if s[j] == "\\":
                j += 2
                continue
            if s[j] == q:
                break
            j += 1
        try:
            out.append(ast.literal_eval(s[m.start() + 5:j + 1]))
        except Exception:
            pass
    return out

def emit(r):
    print(json.dumps(r, ensure_ascii=False, sort_keys=True))

tools = json.loads(show("tools/LiveMCPTool/tools.json"))
servers = tools if isinstance(tools, list) else tools.get("servers", tools)
n = 0
for srv in servers:
    name = srv.get("name") or srv.get("server_name")
    for key, entry in (srv.get("tools") or {}).items():
        for t in entry.get("tools", []):
            emit({"source": "livemcpbench", "id": f"livemcpbench:def:{key}:{t['name']}", "kind": "definition",
                  "label": "benign", "tool": t,
                  "meta": {"server": name, "server_key": key, "category": srv.get("category"),
                           "commit": COMMIT, "file": "tools/LiveMCPTool/tools.json"}})
            n += 1
print(f"definitions: {n}", file=sys.stderr)

traj = json.loads(show("baseline/output/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"))
seen = set()
kept = skipped = 0
for task in traj:
    calls = {}
    for m in task["messages"]:
        if m["role"] == "assistant":
            for tc in m.get("tool_calls") or []:
                calls[tc["id"]] = tc["function"]
        elif m["role"] == "tool":
            fn = calls.get(m.get("tool_call_id"), {})
            if fn.get("name") == "route":
                continue
            content = m.get("content") or ""
            texts = pystrings(content) if "TextContent(" in content else [content]
            # the execution tool wraps the real server's CallToolResult, serialised as JSON
            inner = []
            for t in texts:
                try:
                    obj = json.loads(t)
                except Exception:
                    obj = None
                if isinstance(obj, dict) and isinstance(obj.get("content"), list):
                    inner += [c.get("text", "") for c in obj["content"] if c.get("type") == "text"]
                else:
                    inner.append(t)
            texts = inner
            text = "\n".join(texts).strip()
            if not text or text in seen:
                continue
            if len(text) > MAXLEN:
                skipped += 1
                continue
            seen.add(text)
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except Exception:
                args = {}
            emit({"source": "livemcpbench", "id": f"livemcpbench:result:{task['task_id']}:{m.get('tool_call_id')}",
                  "kind": "result", "label": "benign", "text": text,
                  "meta": {"task_id": task["task_id"], "category": task.get("category"),
                           "server": args.get("server_name"), "tool": args.get("tool_name"),
                           "commit": COMMIT,
                           "file": "baseline/output/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"}})
            kept += 1
print(f"results kept {kept}, skipped as too long {skipped}", file=sys.stderr)
