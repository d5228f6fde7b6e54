#!/usr/bin/env python3
"""Writes fixtures/*.json, *.sse and *.jsonarray: what the Anthropic, OpenAI and Google Gemini
APIs answer, on the wire.

    .venv/bin/python make_fixtures.py      (from tests/peers/llm; rewrites every fixture)

The fixtures are committed; this script is how they were made, so that a change to one scenario
stays consistent across its buffered and streamed forms (the streamed deltas concatenate to the
buffered content, a Responses stream's response.completed holds the items its events built, the
parts of Gemini's streamed chunks are the buffered response's parts, its text split).
Texts carry non-ASCII characters so that fake_upstream.py's odd-sized pieces split UTF-8
sequences.
"""
import base64
import hashlib
import json
import os

from llm_client import ANTHROPIC_MODEL, GEMINI_MODEL, responses_tools

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

ENTITIES = {"entities": [{"name": "alice", "entityType": "person", "observations": ["likes tea"]}]}
WRITE = {"path": "/tmp/agentsh-e2e/notes.txt", "content": "hello"}
BASH = {"command": "ls"}
ASK = {"repoName": "modelcontextprotocol/specification", "question": "What is MRTR?"}
DELETE = {"page": "index"}
ANSWER = "Multi round-trip requests let a server ask for input — café-style, one question at a time."

TOOLS_TEXT = "I'll remember that about Alice — and write the note to /tmp/agentsh-e2e/notes.txt."
TEXT_REPLY = "Hello! I'm doing well, merci — how can I help with your café notes today? ☕"
NATIVE_TEXT = "Let me look at the files in the current directory."

# Pieces an input or arguments JSON string is streamed in: odd sizes, so keys and values split.
PIECES = [1, 7, 3, 12, 5, 9, 14, 2, 11]


def pieces(s, sizes=PIECES):
    out, i, k = [], 0, 0
    while i < len(s):
        n = sizes[k % len(sizes)]
        out.append(s[i : i + n])
        i += n
        k += 1
    return out


def words(s):
    """Splits text the way a tokenizer streams it: a word with its leading space."""
    out, cur = [], ""
    for ch in s:
        if ch == " " and cur:
            out.append(cur)
            cur = ""
        cur += ch
    if cur:
        out.append(cur)
    # pair words up: deltas a few tokens long
    return ["".join(out[i : i + 2]) for i in range(0, len(out), 2)]


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data.encode("utf-8"))


def sse(events):
    """Events as (event name or None, data object or string) -> SSE text."""
    out = []
    for name, data in events:
        if not isinstance(data, str):
            data = compact(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return "".join(out)


# ---------------------------------------------------------------- Anthropic Messages

def anthropic_fixture(stem, msg_id, blocks, stop_reason, input_tokens, output_tokens):
    """blocks: [("text", text) | ("tool_use", id, name, input)
             | ("mcp_tool_use", id, name, server_name, input)
             | ("mcp_tool_result", tool_use_id, text)]."""
    usage_full = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    def block(b, streamed):
        if b[0] == "text":
            return {"type": "text", "text": "" if streamed else b[1]}
        if b[0] == "tool_use":
            return {"type": "tool_use", "id": b[1], "name": b[2], "input": {} if streamed else b[3]}
        if b[0] == "mcp_tool_use":
            return {"type": "mcp_tool_use", "id": b[1], "name": b[2], "server_name": b[3],
                    "input": {} if streamed else b[4]}
        return {"type": "mcp_tool_result", "tool_use_id": b[1], "is_error": False,
                "content": [{"type": "text", "text": b[2]}]}

    content = [block(b, False) for b in blocks]
    message = {
        "model": ANTHROPIC_MODEL,
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage_full,
    }
    write(f"{stem}.json", compact(message))

    start = dict(message, content=[], stop_reason=None, stop_sequence=None, usage=dict(usage_full, output_tokens=1))
    ev = [("message_start", {"type": "message_start", "message": start})]
    for index, b in enumerate(blocks):
        if b[0] == "text":
            ev.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": {"type": "text", "text": ""}}))
            if index == 0:
                ev.append(("ping", '{"type": "ping"}'))
            for piece in words(b[1]):
                ev.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "text_delta", "text": piece}}))
        elif b[0] == "mcp_tool_result":
            # A result comes whole in its block's start.
            ev.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": block(b, True)}))
        else:
            tinput = b[-1]
            ev.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": block(b, True)}))
            if index == 0:
                ev.append(("ping", '{"type": "ping"}'))
            # The API opens with an empty partial_json, then streams the input with ", " and ": ".
            for piece in [""] + pieces(json.dumps(tinput, ensure_ascii=False)):
                ev.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": piece}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    ev.append(("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                 "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                                           "cache_read_input_tokens": 0, "output_tokens": output_tokens}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    write(f"{stem}.sse", sse(ev))


# ---------------------------------------------------------------- OpenAI Chat Completions

CHAT_MODEL = "gpt-5.4-mini-2026-03-17"
CHAT_FP = "fp_7e4bb0a1c3"


def chat_usage(prompt, completion, reasoning):
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


def chat_fixture(stem, cid, created, choices, usage):
    """choices: [(text or None, [(call id, name, arguments obj)], finish_reason)]."""
    body = {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": CHAT_MODEL,
        "choices": [],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": CHAT_FP,
    }
    for i, (text, calls, finish) in enumerate(choices):
        message = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {"id": c[0], "type": "function", "function": {"name": c[1], "arguments": compact(c[2])}}
                for c in calls
            ]
        message["refusal"] = None
        message["annotations"] = []
        body["choices"].append({"index": i, "message": message, "logprobs": None, "finish_reason": finish})
    write(f"{stem}.json", json.dumps(body, ensure_ascii=False, indent=2) + "\n")

    # One stream of deltas per choice; n > 1 choices interleave chunk by chunk.
    per_choice = []
    for i, (text, calls, finish) in enumerate(choices):
        deltas = []
        first = {"role": "assistant", "content": "" if text else None, "refusal": None}
        if text:
            deltas.append(first)
            deltas += [{"content": w} for w in words(text)]
        for k, (call_id, name, arguments) in enumerate(calls):
            head = {"tool_calls": [{"index": k, "id": call_id, "type": "function",
                                    "function": {"name": name, "arguments": ""}}]}
            if not deltas:
                head = {"role": "assistant", "content": None, "tool_calls": head["tool_calls"], "refusal": None}
            deltas.append(head)
            deltas += [{"tool_calls": [{"index": k, "function": {"arguments": p}}]} for p in pieces(compact(arguments))]
        per_choice.append([(i, d, None) for d in deltas] + [(i, {}, finish)])
    order = []
    while any(per_choice):
        for q in per_choice:
            if q:
                order.append(q.pop(0))
    ev = []
    obf = "abcdefghijklmnop"
    for n, (i, delta, finish) in enumerate(order):
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": CHAT_MODEL,
                 "service_tier": "default", "system_fingerprint": CHAT_FP,
                 "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}],
                 "usage": None, "obfuscation": obf[: 1 + n % 9]}
        ev.append((None, chunk))
    ev.append((None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": CHAT_MODEL,
                      "service_tier": "default", "system_fingerprint": CHAT_FP, "choices": [],
                      "usage": usage, "obfuscation": "Qx3"}))
    ev.append((None, "[DONE]"))
    write(f"{stem}.sse", sse(ev))


# ---------------------------------------------------------------- OpenAI Responses

def responses_fixture(stem, rid, created, items, usage):
    """items: [("reasoning", id) | ("message", id, text) | ("function_call", id, call_id, name, args)
            | ("mcp_call", id, server_label, name, args, output)
            | ("mcp_approval_request", id, server_label, name, args)]."""
    tools = [dict(t, parameters=t["parameters"]) for t in responses_tools()]

    def response(status, output, usage_value, completed_at):
        return {
            "id": rid, "object": "response", "created_at": created, "status": status, "background": False,
            "completed_at": completed_at, "error": None, "incomplete_details": None,
            "instructions": "You are a helpful assistant with memory and filesystem tools.",
            "max_output_tokens": None, "max_tool_calls": None, "model": CHAT_MODEL, "output": output,
            "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
            "prompt_cache_retention": None, "reasoning": {"effort": "medium", "summary": None},
            "safety_identifier": None, "service_tier": "default", "store": True, "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": tools, "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled",
            "usage": usage_value, "user": None, "metadata": {},
        }

    def done_item(it):
        if it[0] == "reasoning":
            return {"id": it[1], "type": "reasoning", "summary": []}
        if it[0] == "message":
            return {"id": it[1], "type": "message", "status": "completed",
                    "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": it[2]}],
                    "role": "assistant"}
        if it[0] == "mcp_call":
            return {"id": it[1], "type": "mcp_call", "status": "completed", "approval_request_id": None,
                    "arguments": compact(it[4]), "error": None, "name": it[3], "output": it[5],
                    "server_label": it[2]}
        if it[0] == "mcp_approval_request":
            return {"id": it[1], "type": "mcp_approval_request", "arguments": compact(it[4]), "name": it[3],
                    "server_label": it[2]}
        return {"id": it[1], "type": "function_call", "status": "completed", "arguments": compact(it[4]),
                "call_id": it[2], "name": it[3]}

    output = [done_item(it) for it in items]
    final = response("completed", output, usage, created + 3)
    write(f"{stem}.json", json.dumps(final, ensure_ascii=False, indent=2) + "\n")

    ev = []

    def emit(etype, **fields):
        ev.append((etype, {"type": etype, "sequence_number": len(ev), **fields}))

    emit("response.created", response=response("in_progress", [], None, None))
    emit("response.in_progress", response=response("in_progress", [], None, None))
    obf = "ZmFrZXVwc3RyZWFt"
    for oi, it in enumerate(items):
        if it[0] == "reasoning":
            emit("response.output_item.added", output_index=oi, item={"id": it[1], "type": "reasoning", "summary": []})
        elif it[0] == "message":
            mid, text = it[1], it[2]
            emit("response.output_item.added", output_index=oi,
                 item={"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
            emit("response.content_part.added", item_id=mid, output_index=oi, content_index=0,
                 part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
            for n, w in enumerate(words(text)):
                emit("response.output_text.delta", item_id=mid, output_index=oi, content_index=0, delta=w,
                     logprobs=[], obfuscation=obf[: 1 + n % 11])
            emit("response.output_text.done", item_id=mid, output_index=oi, content_index=0, text=text, logprobs=[])
            emit("response.content_part.done", item_id=mid, output_index=oi, content_index=0,
                 part={"type": "output_text", "annotations": [], "logprobs": [], "text": text})
        elif it[0] == "mcp_call":
            _, mid, label, name, args, _ = it
            emit("response.output_item.added", output_index=oi,
                 item={"id": mid, "type": "mcp_call", "status": "in_progress", "approval_request_id": None,
                       "arguments": "", "error": None, "name": name, "output": None, "server_label": label})
            emit("response.mcp_call.in_progress", item_id=mid, output_index=oi)
            for p in pieces(compact(args)):
                emit("response.mcp_call_arguments.delta", item_id=mid, output_index=oi, delta=p)
            emit("response.mcp_call_arguments.done", item_id=mid, output_index=oi, arguments=compact(args))
            emit("response.mcp_call.completed", item_id=mid, output_index=oi)
        elif it[0] == "mcp_approval_request":
            emit("response.output_item.added", output_index=oi, item=done_item(it))
        else:
            _, fid, call_id, name, args = it
            emit("response.output_item.added", output_index=oi,
                 item={"id": fid, "type": "function_call", "status": "in_progress", "arguments": "",
                       "call_id": call_id, "name": name})
            for n, p in enumerate(pieces(compact(args))):
                emit("response.function_call_arguments.delta", item_id=fid, output_index=oi, delta=p,
                     obfuscation=obf[: 1 + n % 11])
            emit("response.function_call_arguments.done", item_id=fid, output_index=oi, arguments=compact(args))
        emit("response.output_item.done", output_index=oi, item=done_item(it))
    emit("response.completed", response=final)
    write(f"{stem}.sse", sse(ev))


def responses_usage(inp, out, reasoning):
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": inp + out}


# ---------------------------------------------------------------- Google Gemini generateContent

def gemini_signature(stem):
    """A thoughtSignature: opaque base64 the model wants back with its call (Gemini 2.5 and 3
    sign the first call part of a turn)."""
    digest = b"".join(hashlib.sha512(f"{stem} {i}".encode()).digest() for i in range(3))
    return base64.b64encode(b"\x12\xbc\x01\x0a\xb9\x01" + digest).decode()


def gemini_text_chunks(text, n):
    """text in n streamed chunks of whole words (Gemini streams a few words to a sentence each)."""
    ws = words(text)
    size = -(-len(ws) // n)
    return ["".join(ws[i : i + size]) for i in range(0, len(ws), size)]


def gemini_fixture(stem, response_id, chunks, prompt, candidates, thoughts):
    """chunks: the streamed chunks, each a list of parts ({"text": ...} or a functionCall part);
    the last one finishes the turn (finishReason STOP, the whole usage). The buffered response
    holds the same parts, a run of text parts merged into one."""
    prompt_details = [{"modality": "TEXT", "tokenCount": prompt}]
    partial_usage = {"promptTokenCount": prompt, "totalTokenCount": prompt + thoughts,
                     "promptTokensDetails": prompt_details}
    usage = {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
             "totalTokenCount": prompt + candidates + thoughts, "promptTokensDetails": prompt_details}
    if thoughts:  # absent when the model did not think
        partial_usage["thoughtsTokenCount"] = usage["thoughtsTokenCount"] = thoughts

    def response(parts, last):
        candidate = {"content": {"parts": parts, "role": "model"}}
        if last:
            candidate["finishReason"] = "STOP"
        candidate["index"] = 0
        return {"candidates": [candidate], "usageMetadata": usage if last else partial_usage,
                "modelVersion": GEMINI_MODEL, "responseId": response_id}

    merged = []
    for part in (p for c in chunks for p in c):
        if "text" in part and merged and "text" in merged[-1]:
            merged[-1] = {"text": merged[-1]["text"] + part["text"]}
        else:
            merged.append(part)
    # The buffered answer is pretty-printed with two spaces. The streamed forms write each chunk
    # as it is made: an SSE event is one line (items split by ",", keys followed by ": "), ended
    # by a blank line, CRLF; the JSON array's elements are pretty-printed, CRLF "," CRLF between.
    write(f"{stem}.json", json.dumps(response(merged, True), ensure_ascii=False, indent=2) + "\n")
    streamed = [response(parts, i == len(chunks) - 1) for i, parts in enumerate(chunks)]
    write(f"{stem}.sse", "".join(
        "data: " + json.dumps(r, ensure_ascii=False, separators=(",", ": ")) + "\r\n\r\n" for r in streamed))
    write(f"{stem}.jsonarray",
          "[" + "\r\n,\r\n".join(json.dumps(r, ensure_ascii=False, indent=2) for r in streamed) + "\r\n]")


def main():
    os.makedirs(OUT, exist_ok=True)
    anthropic_fixture(
        "anthropic_tools", "msg_01HCDu5LRGeP2o7s1HkQ8xvR",
        [("text", TOOLS_TEXT),
         ("tool_use", "toolu_01A09q90qw90lq917835lq9T", "mcp__memory__create_entities", ENTITIES),
         ("tool_use", "toolu_01PwQj6nLrBy2xZ4Vt5aFk7M", "mcp__filesystem__write_file", WRITE)],
        "tool_use", 1187, 164)
    # Calls the provider made through a server the request named in mcp_servers.
    anthropic_fixture(
        "anthropic_connector", "msg_01Mc7QnX4vTz2Lp8Ks5Hd3Wb",
        [("text", "Let me look that up in the docs."),
         ("mcp_tool_use", "mcptoolu_01Hs4Kd8Lq2Wn6Vb3Xz9Tc1R", "ask_question", "docs", ASK),
         ("mcp_tool_result", "mcptoolu_01Hs4Kd8Lq2Wn6Vb3Xz9Tc1R", ANSWER),
         ("mcp_tool_use", "mcptoolu_01Pn8Jr3Tw6Qa1Zc5Ym2Lx7E", "delete_page", "docs", DELETE),
         ("mcp_tool_result", "mcptoolu_01Pn8Jr3Tw6Qa1Zc5Ym2Lx7E", "deleted"),
         ("text", ANSWER)],
        "end_turn", 1204, 96)
    anthropic_fixture("anthropic_text", "msg_013Zva2CMHLNnXjNJJKqJ2EF", [("text", TEXT_REPLY)], "end_turn", 1187, 27)
    anthropic_fixture(
        "anthropic_native", "msg_01Ga5hLfT3WbvXr8mQzPn2Ck",
        [("text", NATIVE_TEXT), ("tool_use", "toolu_01Bq7tYx2Vn9Lc4Hd8Rk3sWe", "Bash", BASH)],
        "tool_use", 1187, 71)

    chat_fixture(
        "chat_tools", "chatcmpl-CQm4Tq8yZ1b7XkLw2Jd9Rf0sVnP3a", 1776124800,
        [(None, [("call_Vb1tP5gkX9sE2hQm7YrN4cLa", "mcp__memory__create_entities", ENTITIES),
                 ("call_Jk3oR8wDf6uZ1nTq5XyB2mHs", "mcp__filesystem__write_file", WRITE)], "tool_calls"),
         ("Saving the note now.", [("call_Pz7cL2mVx4sQ9tKb1Wn6yRe8", "mcp__filesystem__write_file", WRITE)],
          "tool_calls")],
        chat_usage(412, 187, 64))
    chat_fixture("chat_text", "chatcmpl-CQm5Aa2bC3dE4fG5hI6jK7lM8nO9p", 1776124860,
                 [(TEXT_REPLY, [], "stop")], chat_usage(398, 52, 0))

    responses_fixture(
        "responses_tools", "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef", 1776124900,
        [("reasoning", "rs_0a1b2c3d4e5f60718293a4b5c6d7e8f9012345aa01"),
         ("message", "msg_0a1b2c3d4e5f60718293a4b5c6d7e8f9012345aa02", TOOLS_TEXT),
         ("function_call", "fc_0a1b2c3d4e5f60718293a4b5c6d7e8f9012345aa03", "call_T4mWq8Zr2Lx6Nb0Vc5Yh9Kd1",
          "mcp__memory__create_entities", ENTITIES),
         ("function_call", "fc_0a1b2c3d4e5f60718293a4b5c6d7e8f9012345aa04", "call_E7sJp3Fv9Qa1Ru5Gn2Xk8Mw4",
          "mcp__filesystem__write_file", WRITE)],
        responses_usage(436, 201, 64))
    responses_fixture(
        "responses_connector", "resp_2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0a1b", 1776125000,
        [("mcp_call", "mcp_2c3d4e5f60718293a4b5c6d7e8f9012345cc01", "docs", "ask_question", ASK, ANSWER),
         ("mcp_approval_request", "mcpr_2c3d4e5f60718293a4b5c6d7e8f9012345cc02", "docs", "delete_page", DELETE),
         ("message", "msg_2c3d4e5f60718293a4b5c6d7e8f9012345cc03", ANSWER)],
        responses_usage(452, 88, 0))
    responses_fixture(
        "responses_text", "resp_1f2e3d4c5b6a79881726354a5b6c7d8e9f0123456789fedc", 1776124960,
        [("message", "msg_1f2e3d4c5b6a79881726354a5b6c7d8e9f012345bb01", TEXT_REPLY)],
        responses_usage(420, 33, 0))

    # Gemini CLI names an MCP tool mcp_SERVER_TOOL; parallel calls come in one turn, the first
    # signed.
    gemini_fixture(
        "gemini_tools", "kq8TacH7JIe-z7IP3sK1mAk",
        [[{"text": t}] for t in gemini_text_chunks(TOOLS_TEXT, 3)]
        + [[{"functionCall": {"name": "mcp_memory_create_entities", "args": ENTITIES},
             "thoughtSignature": gemini_signature("gemini_tools")}],
           [{"functionCall": {"name": "mcp_filesystem_write_file", "args": WRITE}}]],
        388, 61, 143)
    gemini_fixture(
        "gemini_text", "3a8TaeXLFY6Bz7IPwNPd4Q0",
        [[{"text": t}] for t in gemini_text_chunks(TEXT_REPLY, 4)],
        372, 21, 0)


if __name__ == "__main__":
    main()
