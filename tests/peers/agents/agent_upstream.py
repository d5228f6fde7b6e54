#!/usr/bin/env python3
"""A scripted fake LLM upstream that real coding agents (Claude Code, Codex, Gemini CLI) can run
against offline, end to end.

    agent_upstream.py --host 127.0.0.2 --port 0 --log FILE --script FILE
                      [--piece-chars 6] [--chunk-size 64] [--chunk-delay 0.002]
                      [--tls-cert PEM --tls-key PEM]

Prints `listening HOST:PORT` on stdout once it accepts connections. HTTP/1.1 with keep-alive;
HTTPS with --tls-cert and --tls-key (the certificate chain and its key, PEM files).

Dialects (POST; SSE when the request asks for a stream, buffered JSON otherwise):
  Anthropic Messages   /v1/messages                   streamed when the body has "stream": true
                       /v1/messages/count_tokens      {"input_tokens": N}
  OpenAI Responses     /v1/responses                  streamed when the body has "stream": true
                       (also under /backend-api/codex/, Codex signed in with ChatGPT)
  Google Gemini        /v1beta/models/M:streamGenerateContent?alt=sse   SSE
                       /v1beta/models/M:streamGenerateContent           one JSON array, chunked
                       /v1beta/models/M:generateContent                 buffered
                       /v1beta/models/M:countTokens                     {"totalTokens": N}
                       over a WebSocket too (GET with Upgrade: websocket, Codex's choice):
                       each response.create answered with the stream's events, a message each
Side paths: GET /backend-api/codex/models {"models": []}, /v1/models, /v1beta/models, Claude
Code's /api/hello (200), /api/claude_code/settings and policy_limits (404, as for an API-key
organization), metrics and event logging (200 {}); anything else: the provider's 404 JSON.

The script (JSON, read again whenever the file changes) says what the model does:

  {"turns": [
     {"prompt_contains": "WRITE_IT",
      "call": {"server": "fs", "tool": "write_file",
               "arguments": {"path": "/tmp/d/out.txt", "content": "hello"}},
      "final": "The tool said: {result}"},
     {"prompt_contains": "HELLO", "text": "Hi there."},
     {"prompt_contains": "WORK",
      "calls": [{"tool_name": "Bash", "arguments": {"command": "ls -la"}},
                {"tool_name": "Write", "arguments": {"file_path": "/p/a.txt", "content": "x"}}],
      "final": "DONE<<{results}>>"}
   ],
   "default_text": "OK."}

("when": "prompt contains WRITE_IT" is accepted for "prompt_contains": "WRITE_IT".)
For each model request the upstream looks at the conversation in it:
  1. The last message carries a tool result: answer final text, the turn's "final" template
     (default "{server}.{tool} returned: {result}") with {result} the result's text, {raw} the
     result as the agent sent it, {server}, {tool} and {name} (the agent's name for the tool).
     The turn is the one whose keyword is in the latest user prompt; no turn: "{result}" alone.
  2. The last message is a user prompt that contains a turn's keyword, and the request offers
     tools: a turn with "call" answers with one call to that MCP tool, named the way this agent
     names it (Claude `mcp__fs__write_file`, Gemini `mcp_fs_write_file`, Codex namespace
     `mcp__fs` + `write_file`), found in the request's tools; the turn's "tool_name" forces a
     name. A turn with "text" only answers that text. When the agent has not offered the MCP
     tool yet, the model first calls the agent's tool-finding tool, as a real model does: Claude
     Code's ToolSearch ("select:mcp__fs__write_file") or WaitForMcpServers, Codex's client-side
     tool_search (a "tool_search_call" item); in Codex's code mode (only `exec` offered) it calls
     exec with JavaScript `text(await tools.mcp__fs__write_file({...}))`. Tools offered but none
     fits: text saying so, listing the names offered.
     A turn with "calls" (the agent's own tools, each by its name with its arguments) makes
     them one after another, one per model request, then answers its "final" template with
     {results} the results' texts.
  3. Anything else (title generation, summaries, next-speaker checks, other side queries):
     "default_text", or JSON filled in from the schema when the request asks for JSON output.
Streamed answers go out in small pieces: text and tool-call arguments in --piece-chars
character deltas, each SSE event its own flushed HTTP chunk (split further at --chunk-size
bytes), --chunk-delay seconds apart.

Every request is appended to --log as one JSON line, flushed:
  {"time": ..., "method": ..., "path": ..., "headers": {lowercased name: value},
   "body": parsed JSON or string, "answer": what the upstream decided}
(a request body in Content-Encoding gzip/br/zstd/deflate is decoded first), plus "tls": the
protocol version and "sni" when it came over TLS. A failed TLS handshake is logged as
  {"tls_error": "..."}
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import ssl
import struct
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:  # in tests/peers/llm/requirements.txt; only needed to decode compressed request bodies
    import brotli
except ImportError:  # pragma: no cover
    brotli = None
try:
    import zstandard
except ImportError:  # pragma: no cover
    zstandard = None


# ---------------------------------------------------------------------------------- utilities

def log(entry):
    entry = {"time": round(time.time(), 3), **entry}
    with Handler.log_lock:
        Handler.log_file.write(json.dumps(entry, ensure_ascii=False) + "\n")
        Handler.log_file.flush()


def decompress(data, encoding):
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(data)
    if encoding == "deflate":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return zlib.decompress(data, -zlib.MAX_WBITS)
    if encoding == "br" and brotli:
        return brotli.decompress(data)
    if encoding == "zstd" and zstandard:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def new_id(prefix, n=24):
    return prefix + uuid.uuid4().hex[:n]


def pieces(text, n):
    n = max(1, n)
    return [text[i : i + n] for i in range(0, len(text), n)] or [""]


def approx_tokens(obj):
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4) if obj is not None else 1


def texts_in(value):
    """All strings under "text" keys (MCP CallToolResult content, Anthropic/Gemini/OpenAI blocks)."""
    out = []
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            out.append(value["text"])
        for k, v in value.items():
            if k != "text":
                out.extend(texts_in(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(texts_in(v))
    return out


def result_text(value):
    """The readable text of a tool result as an agent sent it back (string, blocks or JSON)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, (dict, list)):
            found = texts_in(parsed)
            if found:
                return "\n".join(found)
            if isinstance(parsed, dict):  # e.g. an MCP structuredContent {"content": "..."}
                for key in ("content", "output", "error", "result", "message"):
                    if isinstance(parsed.get(key), str):
                        return parsed[key]
        return value
    found = texts_in(value)
    if found:
        return "\n".join(found)
    if isinstance(value, dict):
        for key in ("content", "output", "error", "result", "message"):
            if isinstance(value.get(key), str):
                return value[key]
            if key in value and value[key] is not None:
                return result_text(value[key])
    return json.dumps(value, ensure_ascii=False)


def from_schema(schema, depth=0):
    """A small value that satisfies a JSON schema (OpenAPI-style upper-case types too)."""
    if not isinstance(schema, dict) or depth > 8:
        return "ok"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return from_schema(schema[key][0], depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if str(x).lower() != "null"), t[0] if t else "string")
    t = str(t or ("object" if "properties" in schema else "string")).lower()
    if t == "object":
        props = schema.get("properties") or {}
        return {k: from_schema(v, depth + 1) for k, v in props.items()}
    if t == "array":
        n = schema.get("minItems") or 0
        return [from_schema(schema.get("items") or {}, depth + 1) for _ in range(n)]
    if t in ("integer", "number"):  # 1 unless the schema says otherwise ("a score from 1-100")
        lo, hi = schema.get("minimum"), schema.get("maximum")
        return lo if lo is not None else (min(1, hi) if hi is not None else 1)
    if t == "boolean":
        return False
    if t == "null":
        return None
    return "ok"


# ---------------------------------------------------------------------------------- the script

class Script:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.data = {}
        self.lock = threading.Lock()

    def get(self):
        with self.lock:
            try:
                mtime = os.stat(self.path).st_mtime_ns
            except OSError:
                return self.data
            if mtime != self.mtime:
                with open(self.path, encoding="utf-8") as f:
                    self.data = json.load(f)
                self.mtime = mtime
            return self.data

    @staticmethod
    def keyword(turn):
        if turn.get("prompt_contains"):
            return turn["prompt_contains"]
        when = turn.get("when") or ""
        m = re.match(r"\s*prompt contains\s+(.+?)\s*$", when)
        return m.group(1) if m else (when or None)

    def turn_for(self, prompt):
        if not prompt:
            return None
        for turn in self.get().get("turns", []):
            kw = self.keyword(turn)
            if kw and kw in prompt:
                return turn
        return None

    def default_text(self):
        return self.get().get("default_text", "OK.")


class Conversation:
    """What a request says, in terms common to the three dialects."""

    def __init__(self):
        self.last = "other"         # "prompt" | "tool_result" | "other"
        self.prompt = ""            # text of the latest user prompt (not a tool result)
        self.results = []           # [(call name, result value)] in the last message
        self.tools = []             # [(namespace or None, name)] offered
        self.calls = []             # names of the tools the model called since the latest prompt
        self.wants_json = None      # a JSON schema (or {}) when the request asks for JSON output


def find_tool(conv, server, tool, forced=None):
    """(namespace, name) of the MCP tool server/tool among the tools the request offers."""
    if forced:
        for ns, name in conv.tools:
            if name == forced or (ns and f"{ns}.{name}" == forced):
                return ns, name
        return None
    for ns, name in conv.tools:  # Codex namespaces: {"type":"namespace","name":"mcp__fs__"...}
        if ns and ns.strip("_") in (f"mcp__{server}", server, f"mcp_{server}") and name == tool:
            return ns, name
    wanted = [f"mcp__{server}__{tool}", f"mcp_{server}_{tool}", f"{server}__{tool}",
              f"mcp__{server}_{tool}", f"{server}_{tool}", f"{server}.{tool}"]
    for cand in wanted:
        for ns, name in conv.tools:
            if name == cand:
                return ns, name
    return None


# Tools an agent offers to get at MCP tools it has not put in the tool list yet: Claude Code
# defers MCP tools behind ToolSearch, and offers WaitForMcpServers while a server is connecting.
# A model calls them first; so does this one, when the MCP tool it wants is not offered.
HELPERS = {
    "ToolSearch": lambda server, tool: {"query": f"select:mcp__{server}__{tool}", "max_results": 5},
    "WaitForMcpServers": lambda server, tool: {"servers": [server]},
    # Codex defers MCP tools behind its client-side tool_search (a "tool_search_call" item).
    "tool_search": lambda server, tool: {"query": f"{server} {tool}", "limit": 8},
}


CODE = "__exec_source__"  # arguments key: the call is Codex's freeform exec tool with this source


def next_of_calls(conv, turn):
    """A turn with "calls": the next of them (each {"tool_name", "arguments"}, the agent's own
    tools by their names), or None when each has had its result."""
    done = len([c for c in conv.calls if c not in HELPERS])
    calls = turn.get("calls") or []
    if done >= len(calls):
        return None
    step = calls[done]
    found = find_tool(conv, "", "", step["tool_name"])
    if not found:
        names = ", ".join(f"{ns}.{n}" if ns else n for ns, n in conv.tools)
        return ("text", f"agent_upstream: no tool {step['tool_name']} among: {names}", turn)
    return ("call", {}, found, step.get("arguments", {}))


def decide(conv, script):
    """-> ("call", turn, (ns, name), args) | ("text", text, turn) | ("json", value)"""
    turn = script.turn_for(conv.prompt)
    if turn and turn.get("calls") and conv.tools and conv.last in ("prompt", "tool_result"):
        step = next_of_calls(conv, turn)
        if step is not None:
            return step
        results = " | ".join(result_text(v)[:200] for _, v in conv.results)
        return ("text", turn.get("final", "DONE<<{results}>>").replace("{results}", results), turn)
    helper_result = (conv.last == "tool_result" and conv.results and conv.results[-1][0] in HELPERS
                     and len(conv.calls) <= 4)
    if conv.last == "tool_result" and not helper_result:
        name, value = conv.results[-1] if conv.results else ("?", "")
        text = result_text(value)
        raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if turn and turn.get("call"):
            template = turn.get("final", "{server}.{tool} returned: {result}")
            call = turn["call"]
            return ("text", template.replace("{result}", text).replace("{raw}", raw)
                    .replace("{server}", call.get("server", "")).replace("{tool}", call.get("tool", ""))
                    .replace("{name}", name or ""), turn)
        return ("text", text, turn)
    if conv.wants_json is not None:
        return ("json", from_schema(conv.wants_json))
    if (conv.last == "prompt" or helper_result) and turn and conv.tools:
        call = turn.get("call")
        if not call:
            return ("text", turn.get("text", script.default_text()), turn)
        found = find_tool(conv, call["server"], call["tool"], turn.get("tool_name"))
        if not found and not turn.get("tool_name"):
            for helper, make_args in HELPERS.items():
                if (None, helper) in conv.tools and conv.calls.count(helper) < 2:
                    return ("call", {}, (None, helper), make_args(call["server"], call["tool"]))
            if ("functions", "exec") in conv.tools:
                # Codex "code mode" (its default for gpt-6 models): the model writes JavaScript that
                # calls the MCP tool as tools.mcp__SERVER__TOOL(...) inside the exec tool.
                js = (f"const r = await tools.mcp__{call['server']}__{call['tool']}"
                      f"({json.dumps(call.get('arguments', {}), ensure_ascii=False)});\ntext(r);\n")
                return ("call", turn, ("functions", "exec"), {CODE: js})
        if not found:
            names = ", ".join(f"{ns}.{n}" if ns else n for ns, n in conv.tools)
            return ("text", f"agent_upstream: no tool for {call['server']}.{call['tool']} among: {names}", turn)
        return ("call", turn, found, call.get("arguments", {}))
    return ("text", script.default_text(), turn)


# ---------------------------------------------------------------------------------- Anthropic

def anthropic_conv(body):
    conv = Conversation()
    conv.tools = [(None, t.get("name")) for t in body.get("tools") or [] if t.get("name")]
    msgs = body.get("messages") or []
    calls = {}
    for m in msgs:
        content = m.get("content")
        if m.get("role") == "assistant" and isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    calls[b.get("id")] = b.get("name")
                    conv.calls.append(b.get("name"))
        if m.get("role") != "user":
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            conv.results = [(calls.get(b.get("tool_use_id")), b.get("content")) for b in results]
            conv.last = "tool_result"
        else:
            conv.prompt = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            conv.results = []
            conv.calls = []
            conv.last = "prompt"
    # Claude Code puts "system" messages (environment, reminders) between and after the turns.
    turns = [m for m in msgs if m.get("role") in ("user", "assistant")]
    if turns and turns[-1].get("role") != "user":
        conv.last = "other"
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        conv.wants_json = fmt.get("schema") or {}
    return conv


def anthropic_answer(h, body, decision):
    model = body.get("model") or "claude-sonnet-4-5"
    usage_in = approx_tokens(body.get("messages"))
    blocks = []
    stop = "end_turn"
    if decision[0] == "call":
        _, turn, (_, name), args = decision
        if turn.get("text"):
            blocks.append({"type": "text", "text": turn["text"]})
        blocks.append({"type": "tool_use", "id": new_id("toolu_01"), "name": name, "input": args})
        stop = "tool_use"
    elif decision[0] == "json":
        blocks.append({"type": "text", "text": json.dumps(decision[1])})
    else:
        blocks.append({"type": "text", "text": decision[1]})
    msg_id = new_id("msg_01")
    usage = {"input_tokens": usage_in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
             "output_tokens": approx_tokens(blocks)}
    headers = {"request-id": new_id("req_011C"), "anthropic-organization-id": "00000000-0000-0000-0000-000000000000"}
    if not body.get("stream"):
        return h.send_json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                 "content": blocks, "stop_reason": stop, "stop_sequence": None,
                                 "usage": usage}, headers)

    def events():
        start_usage = dict(usage, output_tokens=1)
        yield "message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}}
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                yield "content_block_start", {"type": "content_block_start", "index": i,
                                              "content_block": {"type": "text", "text": ""}}
                if i == 0:
                    yield "ping", {"type": "ping"}
                for p in pieces(b["text"], h.piece_chars):
                    yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                                  "delta": {"type": "text_delta", "text": p}}
            else:
                yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}
                for p in pieces(json.dumps(b["input"], ensure_ascii=False), h.piece_chars):
                    yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                                  "delta": {"type": "input_json_delta", "partial_json": p}}
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
        yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": usage["output_tokens"]}}
        yield "message_stop", {"type": "message_stop"}

    h.send_sse(events(), headers, named=True)


# ---------------------------------------------------------------------------------- OpenAI Responses

def responses_tools(conv, tools):
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace" or isinstance(t.get("tools"), list):
            for sub in t.get("tools") or []:
                if isinstance(sub, dict) and sub.get("name"):
                    conv.tools.append((t.get("name"), sub["name"]))
        elif t.get("name"):
            conv.tools.append((None, t["name"]))
        elif t.get("type") == "tool_search":
            conv.tools.append((None, "tool_search"))


def responses_conv(body):
    conv = Conversation()
    responses_tools(conv, body.get("tools"))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    calls = {}
    for it in items or []:
        if not isinstance(it, dict):
            continue
        kind = it.get("type") or ("message" if "role" in it else None)
        if kind == "additional_tools":  # Codex adds tools to the conversation as input items
            responses_tools(conv, it.get("tools"))
        elif kind == "tool_search_call":
            calls[it.get("call_id")] = "tool_search"
            conv.calls.append("tool_search")
            conv.last = "other"
        elif kind == "tool_search_output":  # the tools found are callable from now on
            responses_tools(conv, it.get("tools"))
            conv.results = [("tool_search", it.get("tools"))]
            conv.last = "tool_result"
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            calls[it.get("call_id")] = it.get("name") or kind
            conv.calls.append(calls[it.get("call_id")])
            conv.last = "other"
        elif kind in ("function_call_output", "custom_tool_call_output", "mcp_tool_call_output"):
            if conv.last != "tool_result":
                conv.results = []
            conv.results.append((calls.get(it.get("call_id")), it.get("output")))
            conv.last = "tool_result"
        elif kind == "message" and it.get("role") == "user":
            c = it.get("content")
            conv.prompt = c if isinstance(c, str) else "\n".join(
                p.get("text", "") for p in c or [] if isinstance(p, dict))
            conv.results = []
            conv.calls = []
            conv.last = "prompt"
        elif kind == "message" and it.get("role") == "assistant":
            conv.last = "other"
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        conv.wants_json = fmt.get("schema") or {}
    return conv


def message_item(text):
    return {"id": new_id("msg_", 32), "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]}


def call_item(ns, name, args):
    item_id, call_id = new_id("fc_", 32), new_id("call_")
    if CODE in args:  # Codex's freeform tool: the input is raw text, not JSON
        return {"id": item_id, "type": "custom_tool_call", "status": "completed", "call_id": call_id,
                "name": name, "input": args[CODE]}
    if name == "tool_search" and not ns:  # Codex's client-side tool search
        return {"id": item_id, "type": "tool_search_call", "status": "completed", "execution": "client",
                "call_id": call_id, "arguments": args}
    item = {"id": item_id, "type": "function_call", "status": "completed",
            "arguments": json.dumps(args, ensure_ascii=False), "call_id": call_id, "name": name}
    if ns:
        item["namespace"] = ns
    return item


def responses_answer(h, body, decision, sink=None):
    model = body.get("model") or "gpt-5"
    resp_id = new_id("resp_", 32)
    created = int(time.time())
    items = []
    if decision[0] == "call":
        _, turn, (ns, name), args = decision
        if turn.get("text"):
            items.append(message_item(turn["text"]))
        items.append(call_item(ns, name, args))
    else:
        items.append(message_item(json.dumps(decision[1]) if decision[0] == "json" else decision[1]))
    usage = {"input_tokens": approx_tokens(body.get("input")), "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": approx_tokens(items), "output_tokens_details": {"reasoning_tokens": 0}}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]

    def response(status, out):
        return {"id": resp_id, "object": "response", "created_at": created, "status": status,
                "error": None, "incomplete_details": None, "instructions": None, "model": model,
                "output": out, "parallel_tool_calls": bool(body.get("parallel_tool_calls")),
                "tool_choice": body.get("tool_choice", "auto"), "tools": [], "store": False,
                "usage": usage if status == "completed" else None}

    headers = {"x-request-id": new_id("req_", 32), "openai-processing-ms": "12"}
    if not body.get("stream"):
        return h.send_json(200, response("completed", items), headers)

    def events():
        seq = iter(range(10**9))
        yield "response.created", {"type": "response.created", "sequence_number": next(seq),
                                   "response": response("in_progress", [])}
        yield "response.in_progress", {"type": "response.in_progress", "sequence_number": next(seq),
                                       "response": response("in_progress", [])}
        for idx, item in enumerate(items):
            iid = item["id"]
            if item["type"] == "message":
                text = item["content"][0]["text"]
                yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                    "output_index": idx, "item": dict(item, status="in_progress", content=[])}
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
                yield "response.content_part.added", {"type": "response.content_part.added", "sequence_number": next(seq),
                    "item_id": iid, "output_index": idx, "content_index": 0, "part": part}
                for p in pieces(text, h.piece_chars):
                    yield "response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": next(seq),
                        "item_id": iid, "output_index": idx, "content_index": 0, "delta": p, "logprobs": []}
                yield "response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(seq),
                    "item_id": iid, "output_index": idx, "content_index": 0, "text": text, "logprobs": []}
                yield "response.content_part.done", {"type": "response.content_part.done", "sequence_number": next(seq),
                    "item_id": iid, "output_index": idx, "content_index": 0, "part": dict(part, text=text)}
            elif item["type"] == "tool_search_call":
                yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                    "output_index": idx, "item": dict(item, status="in_progress")}
            elif item["type"] == "custom_tool_call":
                yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                    "output_index": idx, "item": dict(item, status="in_progress", input="")}
                for p in pieces(item["input"], h.piece_chars):
                    yield "response.custom_tool_call_input.delta", {"type": "response.custom_tool_call_input.delta",
                        "sequence_number": next(seq), "item_id": iid, "output_index": idx, "delta": p}
                yield "response.custom_tool_call_input.done", {"type": "response.custom_tool_call_input.done",
                    "sequence_number": next(seq), "item_id": iid, "output_index": idx, "input": item["input"]}
            else:
                yield "response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                    "output_index": idx, "item": dict(item, status="in_progress", arguments="")}
                for p in pieces(item["arguments"], h.piece_chars):
                    yield "response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                        "sequence_number": next(seq), "item_id": iid, "output_index": idx, "delta": p}
                yield "response.function_call_arguments.done", {"type": "response.function_call_arguments.done",
                    "sequence_number": next(seq), "item_id": iid, "output_index": idx,
                    "name": item["name"], "arguments": item["arguments"]}
            yield "response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                "output_index": idx, "item": item}
        yield "response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                     "response": response("completed", items)}

    if sink is not None:  # over a WebSocket: one message per event
        return sink(events())
    h.send_sse(events(), headers, named=True)


# ---------------------------------------------------------------------------------- Gemini

def gemini_conv(body):
    conv = Conversation()
    for t in body.get("tools") or []:
        for fd in (t.get("functionDeclarations") or t.get("function_declarations") or []) if isinstance(t, dict) else []:
            if fd.get("name"):
                conv.tools.append((None, fd["name"]))
    for c in body.get("contents") or []:
        parts = c.get("parts") or []
        if c.get("role", "user") == "user":
            fr = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
            if fr:
                conv.results = [(r.get("name"), r.get("response")) for r in fr]
                conv.last = "tool_result"
            else:
                conv.prompt = "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))
                conv.results = []
                conv.calls = []
                conv.last = "prompt"
        else:
            conv.calls += [p["functionCall"].get("name") for p in parts if isinstance(p, dict) and "functionCall" in p]
            conv.last = "other"
    gc = body.get("generationConfig") or body.get("generation_config") or {}
    if gc.get("responseMimeType") == "application/json" or gc.get("responseSchema") or gc.get("responseJsonSchema"):
        conv.wants_json = gc.get("responseJsonSchema") or gc.get("responseSchema") or {}
    return conv


def gemini_answer(h, body, decision, model, stream, sse=True):
    model = model or "gemini-2.5-pro"
    resp_id = new_id("", 22)
    prompt_tokens = approx_tokens(body.get("contents"))
    chunks = []  # each a list of parts
    if decision[0] == "call":
        _, turn, (_, name), args = decision
        if turn.get("text"):
            chunks += [[{"text": p}] for p in pieces(turn["text"], h.piece_chars)]
        chunks.append([{"functionCall": {"name": name, "args": args}}])
    else:
        text = json.dumps(decision[1]) if decision[0] == "json" else decision[1]
        chunks += [[{"text": p}] for p in (pieces(text, h.piece_chars) if stream else [text])]
    out_tokens = approx_tokens(chunks)
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens,
             "totalTokenCount": prompt_tokens + out_tokens,
             "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}]}

    def reply(parts, last):
        cand = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if last:
            cand["finishReason"] = "STOP"
        r = {"candidates": [cand], "modelVersion": model, "responseId": resp_id}
        r["usageMetadata"] = usage if last else {"promptTokenCount": prompt_tokens,
                                                  "totalTokenCount": prompt_tokens}
        return r

    if not stream:
        return h.send_json(200, reply([p for c in chunks for p in c], True), {})

    replies = [reply(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]
    if not sse:  # streamGenerateContent without alt=sse: one JSON array, sent in pieces
        h.send_chunked(json.dumps(replies, ensure_ascii=False, indent=1).encode(), "application/json")
        return
    h.send_sse(((None, r) for r in replies), {}, named=False, sep="\r\n\r\n")


# ---------------------------------------------------------------------------------- HTTP

class TLSServer(ThreadingHTTPServer):
    """HTTPS: each connection's handshake runs in its own thread."""

    tls = None  # an ssl.SSLContext, set by main()

    def finish_request(self, request, client_address):
        try:
            request = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            # A client refusing our certificate ends here: logged, no request read.
            log({"tls_error": str(e)})
            return
        try:
            super().finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

GEMINI_RE = re.compile(r"^/(?:v1beta|v1alpha|v1)/(?:models|tunedModels)/([^/:]+):([A-Za-z]+)$")
GEMINI_MODELS_RE = re.compile(r"^/(?:v1beta|v1alpha)/models(?:/[^/:]+)?$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "agent-upstream/1"

    # set on the class by main()
    script = None
    log_file = None
    log_lock = threading.Lock()
    piece_chars = 6
    chunk_size = 64
    chunk_delay = 0.002

    def log_message(self, format, *args):
        pass

    # -------------------------------------------------------------- request side

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def record(self, raw):
        headers = {}
        for name, value in self.headers.items():
            name = name.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        data = raw
        try:
            for enc in reversed([e.strip().lower() for e in headers.get("content-encoding", "").split(",") if e.strip()]):
                data = decompress(data, enc)
        except Exception:
            data = raw
        text = data.decode("utf-8", errors="replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        self.entry = {"method": self.command, "path": self.path, "headers": headers, "body": body}
        if isinstance(self.connection, ssl.SSLSocket):
            self.entry["tls"] = self.connection.version()
            self.entry["sni"] = getattr(self.connection, "agent_sni", None)
        return body

    # -------------------------------------------------------------- answer side

    def send_json(self, status, obj, headers=None, reason=None):
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status, reason)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        self.entry.setdefault("status", status)

    def write_chunk(self, data):
        size = max(1, self.chunk_size)
        for i in range(0, len(data), size):
            piece = data[i : i + size]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            if self.chunk_delay > 0:
                time.sleep(self.chunk_delay)

    def send_chunked(self, data, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.write_chunk(data)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.entry.setdefault("status", 200)

    def send_sse(self, events, headers, named=True, sep="\n\n"):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        for name, data in events:
            line = (f"event: {name}\n" if named and name else "") + "data: " + json.dumps(data, ensure_ascii=False) + sep
            self.write_chunk(line.encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.entry.setdefault("status", 200)

    def not_found(self, provider):
        rid = new_id("req_011C")
        if provider == "anthropic":
            return self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"},
                                        "request_id": rid}, {"request-id": rid})
        if provider == "gemini":
            return self.send_json(404, {"error": {"code": 404, "message": f"{self.path} is not found.", "status": "NOT_FOUND"}})
        return self.send_json(404, {"error": {"message": f"Invalid URL ({self.command} {self.path.split('?')[0]})",
                                              "type": "invalid_request_error", "param": None, "code": None}})

    def handle_one(self):
        raw = self.read_body()
        body = self.record(raw)
        try:
            self.route(body)
        finally:
            log(self.entry)

    def do_any(self):
        try:
            self.handle_one()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_any

    def route(self, body):
        full = self.path.split("?", 1)[0]
        path = full
        if path.startswith("/backend-api/codex/"):  # Codex signed in with ChatGPT: same API there
            path = "/v1/" + path[len("/backend-api/codex/"):]
        body = body if isinstance(body, dict) else {}
        get, post = self.command in ("GET", "HEAD"), self.command == "POST"

        # ---- model calls
        if post and path == "/v1/messages":
            return self.model_call(anthropic_conv, body, lambda d: anthropic_answer(self, body, d))
        if post and path == "/v1/responses":
            return self.model_call(responses_conv, body, lambda d: responses_answer(self, body, d))
        m = GEMINI_RE.match(path)
        if m and post:
            model, method = m.groups()
            if method in ("streamGenerateContent", "generateContent"):
                stream = method == "streamGenerateContent"
                sse = "alt=sse" in self.path
                return self.model_call(gemini_conv, body,
                                       lambda d: gemini_answer(self, body, d, model, stream, sse))
            if method == "countTokens":
                return self.send_json(200, {"totalTokens": approx_tokens(body.get("contents"))})
            if method in ("embedContent", "batchEmbedContents"):
                vec = {"values": [0.0] * 8}
                return self.send_json(200, {"embedding": vec} if method == "embedContent" else
                                      {"embeddings": [vec for _ in body.get("requests") or []]})
            return self.not_found("gemini")

        # ---- the rest of the model APIs
        if post and path == "/v1/messages/count_tokens":
            return self.send_json(200, {"input_tokens": approx_tokens(body.get("messages"))})
        if get and path == "/v1/responses" and "websocket" in self.headers.get("Upgrade", "").lower():
            # Codex's preferred transport: the Responses API over a WebSocket.
            return self.websocket()
        if get and path == "/v1/responses":
            self.entry["answer"] = "not a WebSocket upgrade (426)"
            return self.send_json(426, {"error": {"message": "GET /v1/responses is a WebSocket",
                                                  "type": "invalid_request_error", "param": None,
                                                  "code": "upgrade_required"}})
        if get and full == "/backend-api/codex/models":
            # Codex's model catalog refresh (GET ...?client_version=X): none new, it keeps its own.
            return self.send_json(200, {"models": []})
        if get and path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": []})
        if get and GEMINI_MODELS_RE.match(path):
            name = path.split("/models", 1)[1].strip("/")
            return self.send_json(200, {"name": "models/" + name} if name else {"models": []})

        # ---- side paths: Claude Code's on api.anthropic.com, Codex's on chatgpt.com
        if path == "/api/hello":
            return self.send_json(200, {"message": "hello"})
        if path in ("/api/claude_code/settings", "/api/claude_code/policy_limits"):
            # No managed settings and no policy limits for this (API key) organization.
            return self.not_found("anthropic")
        if path.startswith("/api/claude_code/organizations/metrics_enabled"):
            return self.send_json(200, {"metrics_logging_enabled": False})
        if path.startswith(("/api/event_logging", "/api/claude_code/metrics", "/api/eval")):
            return self.send_json(200, {})
        if path.startswith("/api/"):
            return self.not_found("anthropic")
        return self.not_found("anthropic" if self.headers.get("anthropic-version") or
                              self.headers.get("x-api-key") else "openai")

    # -------------------------------------------------------------- WebSocket (RFC 6455)

    def websocket(self):
        """The Responses API over a WebSocket: each `response.create` message is answered with
        the events an SSE stream would carry, one text message each. No extensions (the
        client's offer of permessage-deflate is declined), so every frame is plain."""
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.entry["answer"] = "websocket"
        self.entry["extensions_offered"] = self.headers.get("Sec-WebSocket-Extensions")
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.entry.setdefault("status", 101)
        log(dict(self.entry))
        self.close_connection = True
        # The connection keeps the conversation: a response.create with previous_response_id
        # sends only what is new (the Responses API's own rule: the previous response's input
        # and output come first).
        history, last_id = [], None
        while True:
            message = self.ws_read()
            if message is None:
                return
            try:
                body = json.loads(message)
            except ValueError:
                self.ws_send(json.dumps({"type": "error", "error": {"message": "not JSON"}}))
                continue
            if not isinstance(body, dict) or body.get("type") != "response.create":
                continue
            request = {k: v for k, v in body.items() if k != "type"}
            request["stream"] = True
            items = request.get("input")
            if isinstance(items, str):
                items = [{"type": "message", "role": "user", "content": items}]
            items = list(items or [])
            if last_id is not None and request.get("previous_response_id") == last_id:
                items = history + items
            request["input"] = items
            entry = {"method": "WEBSOCKET", "path": self.path, "body": body}
            decision = decide(responses_conv(request), self.script)
            entry["answer"] = describe(decision)
            log(entry)
            done = {}

            def send(events):
                for _, data in events:
                    if data.get("type") == "response.completed":
                        done.update(data["response"])
                    self.ws_send(json.dumps(data, ensure_ascii=False))

            responses_answer(self, request, decision, sink=send)
            history, last_id = items + list(done.get("output") or []), done.get("id")

    def ws_read(self):
        """One whole message (text or binary), answering pings; None when the peer closed."""
        parts = []
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return None
            fin, opcode = head[0] & 0x80, head[0] & 0x0F
            masked, length = head[1] & 0x80, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if masked else b"\0\0\0\0"
            data = bytearray(self.rfile.read(length))
            for i in range(len(data)):
                data[i] ^= mask[i % 4]
            if opcode == 0x8:
                self.ws_frame(0x8, bytes(data[:2]))
                return None
            if opcode == 0x9:
                self.ws_frame(0xA, bytes(data))
                continue
            if opcode == 0xA:
                continue
            parts.append(bytes(data))
            if fin:
                return b"".join(parts).decode("utf-8", errors="replace")

    def ws_frame(self, opcode, data):
        head = bytes([0x80 | opcode])
        if len(data) < 126:
            head += bytes([len(data)])
        elif len(data) < 65536:
            head += bytes([126]) + struct.pack("!H", len(data))
        else:
            head += bytes([127]) + struct.pack("!Q", len(data))
        self.wfile.write(head + data)
        self.wfile.flush()

    def ws_send(self, text):
        self.ws_frame(0x1, text.encode())

    def model_call(self, parse, body, answer):
        decision = decide(parse(body), self.script)
        self.entry["answer"] = describe(decision)
        return answer(decision)


def describe(decision):
    if decision[0] == "call":
        _, turn, (ns, name), args = decision
        return {"call": (ns + "." if ns else "") + name, "arguments": args}
    if decision[0] == "json":
        return {"json": decision[1]}
    return {"text": decision[1]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.2")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", required=True)
    p.add_argument("--script", required=True, help="JSON file saying what the model does")
    p.add_argument("--piece-chars", type=int, default=6, help="characters per streamed text/arguments delta")
    p.add_argument("--chunk-size", type=int, default=64, help="most bytes per HTTP chunk of a stream")
    p.add_argument("--chunk-delay", type=float, default=0.002, help="seconds between chunks")
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    p.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    args = p.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")

    Handler.script = Script(args.script)
    Handler.script.get()  # fail early on a bad script
    Handler.log_file = open(args.log, "a", encoding="utf-8")
    Handler.piece_chars = args.piece_chars
    Handler.chunk_size = args.chunk_size
    Handler.chunk_delay = args.chunk_delay
    if args.tls_cert:
        TLSServer.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLSServer.tls.load_cert_chain(args.tls_cert, args.tls_key)
        TLSServer.tls.set_alpn_protocols(["http/1.1"])

        def remember_sni(sock, name, ctx):  # the host name the client asked for, for the log
            sock.agent_sni = name

        TLSServer.tls.sni_callback = remember_sni
        server = TLSServer((args.host, args.port), Handler)
    else:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"listening {host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
