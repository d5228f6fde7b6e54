#!/usr/bin/env python3
"""An LLM agent's side of one API call, made with the official Anthropic, OpenAI and Google Gen AI
SDKs.

    llm_client.py --api anthropic|chat|responses|gemini --base-url URL --scenario NAME
                  [--stream] [--gemini-array] [--api-version V] [--encoding gzip|br|zstd|deflate]
                  [--raw] [--n N] [--api-key KEY] [--header NAME:VALUE]...

--base-url goes to the SDK as it is: the Anthropic SDK's has no /v1 (http://HOST:PORT), the
OpenAI SDK's has it (http://HOST:PORT/v1), the Google Gen AI SDK's has no version either
(http://HOST:PORT: the SDK adds /v1/models/..., or /v1beta/models/... with --api-version v1beta,
what Gemini CLI asks for). --scenario and --encoding become the request headers x-fake-scenario
and x-fake-encoding, which fake_upstream.py answers by; --header adds any other (x-fake-status:
529, say). The API key is sk-test unless --api-key says otherwise: ANTHROPIC_*, OPENAI_*, GOOGLE_*
and GEMINI_* variables of the environment are ignored.

gemini calls models.generate_content, or with --stream models.generate_content_stream (which
asks for :streamGenerateContent?alt=sse: the SDK has no way to ask for Google's other stream
form). --gemini-array (implies --stream) asks for that form, :streamGenerateContent without
alt=sse, a streamed JSON array of chunks: the request is the one the SDK builds for
generate_content_stream, sent by the SDK's own HTTP client (its _api_client), with only the path
changed; the array is read element by element as it arrives and each element parsed by the SDK's
own converter into a GenerateContentResponse, as generate_content_stream parses an SSE event.

Without --raw the SDK parses the answer (streams through its stream helpers) and one JSON line
goes to stdout:

    {"api": "anthropic"|"chat"|"responses"|"gemini", "stream": bool, "model": str,
     "choices": [{"finish_reason": str, "text": str,
                  "tool_calls": [{"id": str, "name": str, "arguments": object}]}]}

A choice that has calls of provider-side MCP servers (--mcp-server) also has "provider_calls":
[{"type": "mcp_tool_use"|"mcp_call"|"mcp_approval_request", "server": label, "name": str,
"arguments": object}].

One choice for anthropic (finish_reason = stop_reason) and responses (finish_reason =
"tool_calls" if the output has a function_call, else the response's status); one per choice for
chat, and one per candidate for gemini (finish_reason = the candidate's finishReason, "STOP" as
Google says it; text = its text parts joined, thought parts left out; a streamed candidate's parts
gathered over every chunk). arguments is the parsed JSON (the raw string when it does not parse).
A gemini tool call's id is null when the API gives none (the Gemini API does not), and it has
"signed": whether its part carries a thoughtSignature. A streamed responses call also has
"items_match_completed": whether the items of the response.output_item.done events equal the
output of response.completed.

With --raw the body the SDK received (after httpx2 undid any Content-Encoding) goes to stdout
byte for byte, and nothing else (gemini: the request generate_content or generate_content_stream
would make, or the --gemini-array one, sent by the SDK's own HTTP client, its body unparsed).

Any error: its type and message on stderr, exit status 1.
"""
import argparse
import codecs
import json
import os
import sys

# The peer behaves the same whatever the environment says: no key, base URL, custom header or
# profile of a developer's reaches the SDKs.
for _name in list(os.environ):
    if _name.startswith(("ANTHROPIC_", "OPENAI_", "GOOGLE_", "GEMINI_")):
        del os.environ[_name]

ANTHROPIC_MODEL = "claude-sonnet-4-6"
OPENAI_MODEL = "gpt-5.4-mini"
GEMINI_MODEL = "gemini-2.5-flash"
USER_PROMPT = (
    "Remember that alice is a person who likes tea, then write 'hello' to "
    "/tmp/agentsh-e2e/notes.txt."
)

# JSON Schemas of the tools, as the MCP servers in ../node_modules describe them (an agent names
# an MCP tool mcp__SERVER__TOOL; Gemini CLI mcp_SERVER_TOOL), and of Claude Code's Bash tool.
CREATE_ENTITIES = {
    "name": "mcp__memory__create_entities",
    "description": "Create multiple new entities in the knowledge graph",
    "schema": {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The name of the entity"},
                        "entityType": {"type": "string", "description": "The type of the entity"},
                        "observations": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "An array of observation contents associated with the entity",
                        },
                    },
                    "required": ["name", "entityType", "observations"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["entities"],
        "additionalProperties": False,
    },
}
WRITE_FILE = {
    "name": "mcp__filesystem__write_file",
    "description": (
        "Create a new file or completely overwrite an existing file with new content. Use with "
        "caution as it will overwrite existing files without warning. Handles text content with "
        "proper encoding. Only works within allowed directories."
    ),
    "schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
}
BASH = {
    "name": "Bash",
    "description": "Executes a given bash command and returns its output.",
    "schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
            "description": {"type": "string", "description": "Clear, concise description of what this command does"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}
MCP_TOOLS = [CREATE_ENTITIES, WRITE_FILE]


def anthropic_tools():
    return [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
        for t in MCP_TOOLS + [BASH]
    ]


def chat_tools():
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]},
        }
        for t in MCP_TOOLS
    ]


def responses_tools():
    return [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["schema"],
            "strict": False,
        }
        for t in MCP_TOOLS
    ]


def gemini_tools():
    """Function declarations as Gemini CLI sends an MCP server's tools: mcp_SERVER_TOOL, the
    tool's JSON Schema as parametersJsonSchema (the SDK spells it parameters_json_schema on the
    wire, which the API reads the same)."""
    from google.genai import types

    return [
        types.FunctionDeclaration(
            name=t["name"].replace("mcp__", "mcp_", 1).replace("__", "_"),
            description=t["description"],
            parameters_json_schema=t["schema"],
        )
        for t in MCP_TOOLS
    ]


def parse_arguments(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def write_raw(response):
    """Copies the body of an SDK streaming response (already decoded by httpx2) to stdout."""
    out = sys.stdout.buffer
    for chunk in response.iter_bytes():
        out.write(chunk)
    out.flush()


def run_anthropic(args, headers):
    import anthropic

    client = anthropic.Anthropic(
        api_key=args.api_key, base_url=args.base_url, max_retries=0, timeout=30.0, default_headers=headers
    )
    params = dict(
        model=ANTHROPIC_MODEL,
        max_tokens=1024,
        system="You are a helpful assistant with memory and filesystem tools.",
        messages=[{"role": "user", "content": USER_PROMPT}],
        tools=anthropic_tools(),
    )
    if args.mcp_server:
        # Provider-side MCP servers: the beta Messages API calls them itself.
        params["mcp_servers"] = [
            {"type": "url", "name": label, "url": url} for label, url in args.mcp_server
        ]
        betas = ["mcp-client-2025-04-04"]
        if args.stream:
            with client.beta.messages.stream(betas=betas, **params) as stream:
                message = stream.get_final_message()
        else:
            message = client.beta.messages.create(betas=betas, **params)
    elif args.raw:
        with client.messages.with_streaming_response.create(stream=args.stream, **params) as response:
            write_raw(response)
        return None
    elif args.stream:
        with client.messages.stream(**params) as stream:
            message = stream.get_final_message()
    else:
        message = client.messages.create(**params)
    choice = {"finish_reason": message.stop_reason, "text": "", "tool_calls": []}
    for block in message.content:
        if block.type == "text":
            choice["text"] += block.text
        elif block.type == "tool_use":
            choice["tool_calls"].append({"id": block.id, "name": block.name, "arguments": block.input})
        elif block.type == "mcp_tool_use":
            choice.setdefault("provider_calls", []).append(
                {"type": block.type, "server": block.server_name, "name": block.name, "arguments": block.input}
            )
    return {"model": message.model, "choices": [choice]}


def openai_client(args, headers):
    import openai

    return openai.OpenAI(
        api_key=args.api_key, base_url=args.base_url, max_retries=0, timeout=30.0, default_headers=headers
    )


def run_chat(args, headers):
    client = openai_client(args, headers)
    params = dict(
        model=OPENAI_MODEL,
        messages=[
            {"role": "developer", "content": "You are a helpful assistant with memory and filesystem tools."},
            {"role": "user", "content": USER_PROMPT},
        ],
        tools=chat_tools(),
    )
    if args.n is not None:
        params["n"] = args.n
    if args.stream:
        params["stream_options"] = {"include_usage": True}
    if args.raw:
        with client.chat.completions.with_streaming_response.create(stream=args.stream, **params) as response:
            write_raw(response)
        return None
    if not args.stream:
        completion = client.chat.completions.create(**params)
        choices = []
        for c in sorted(completion.choices, key=lambda c: c.index):
            calls = [
                {"id": t.id, "name": t.function.name, "arguments": parse_arguments(t.function.arguments)}
                for t in (c.message.tool_calls or [])
            ]
            choices.append({"finish_reason": c.finish_reason, "text": c.message.content or "", "tool_calls": calls})
        return {"model": completion.model, "choices": choices}
    # Streaming: accumulate each choice's text and each tool call (by its index) from the deltas,
    # as an agent's loop does.
    acc = {}
    model = None
    with client.chat.completions.create(stream=True, **params) as stream:
        for chunk in stream:
            model = model or chunk.model
            for c in chunk.choices:
                a = acc.setdefault(c.index, {"finish_reason": None, "text": "", "calls": {}})
                delta = c.delta
                if delta.content:
                    a["text"] += delta.content
                for t in delta.tool_calls or []:
                    call = a["calls"].setdefault(t.index, {"id": None, "name": "", "arguments": ""})
                    if t.id:
                        call["id"] = t.id
                    if t.function is not None:
                        call["name"] += t.function.name or ""
                        call["arguments"] += t.function.arguments or ""
                if c.finish_reason:
                    a["finish_reason"] = c.finish_reason
    choices = []
    for index in sorted(acc):
        a = acc[index]
        calls = [
            {"id": call["id"], "name": call["name"], "arguments": parse_arguments(call["arguments"])}
            for _, call in sorted(a["calls"].items())
        ]
        choices.append({"finish_reason": a["finish_reason"], "text": a["text"], "tool_calls": calls})
    return {"model": model, "choices": choices}


def responses_choice(output, status):
    choice = {"finish_reason": status, "text": "", "tool_calls": []}
    for item in output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    choice["text"] += part.text
        elif item.type == "function_call":
            choice["tool_calls"].append(
                {"id": item.call_id, "name": item.name, "arguments": parse_arguments(item.arguments)}
            )
        elif item.type in ("mcp_call", "mcp_approval_request"):
            choice.setdefault("provider_calls", []).append(
                {"type": item.type, "server": item.server_label, "name": item.name,
                 "arguments": parse_arguments(item.arguments)}
            )
    if choice["tool_calls"]:
        choice["finish_reason"] = "tool_calls"
    return choice


def run_responses(args, headers):
    client = openai_client(args, headers)
    params = dict(
        model=OPENAI_MODEL,
        instructions="You are a helpful assistant with memory and filesystem tools.",
        input=[{"role": "user", "content": USER_PROMPT}],
        tools=responses_tools()
        + [
            {"type": "mcp", "server_label": label, "server_url": url, "require_approval": "never"}
            for label, url in args.mcp_server
        ],
    )
    if args.raw:
        with client.responses.with_streaming_response.create(stream=args.stream, **params) as response:
            write_raw(response)
        return None
    if not args.stream:
        response = client.responses.create(**params)
        return {"model": response.model, "choices": [responses_choice(response.output, response.status)]}
    completed = None
    done_items = {}
    with client.responses.create(stream=True, **params) as stream:
        for event in stream:
            if event.type == "response.output_item.done":
                done_items[event.output_index] = event.item
            elif event.type == "response.completed":
                completed = event.response
            elif event.type in ("response.failed", "response.incomplete", "error"):
                raise RuntimeError(f"stream ended with {event.type}: {event.to_json(indent=None)}")
    if completed is None:
        raise RuntimeError("the stream ended without a response.completed event")
    items = [done_items[i] for i in sorted(done_items)]
    match = [i.to_dict() for i in items] == [i.to_dict() for i in completed.output]
    return {
        "model": completed.model,
        "choices": [responses_choice(completed.output, completed.status)],
        "items_match_completed": match,
    }


def json_array_elements(chunks):
    """The elements of a streamed JSON array of objects, each as soon as it is complete (the
    bytes split anywhere, UTF-8 sequences included)."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    text, pos, state = "", 0, "start"  # start, element (one may begin), after (one ended), done

    def unexpected(what):
        return ValueError(f"the stream is not a JSON array of objects: {what} {text[pos:pos + 40]!r}")

    for chunk in chunks:
        text += utf8.decode(chunk)
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos == len(text):
                break
            c = text[pos]
            if state == "start" and c == "[":
                state, pos = "element", pos + 1
            elif state == "after" and c == ",":
                state, pos = "element", pos + 1
            elif state in ("element", "after") and c == "]":
                state, pos = "done", pos + 1
            elif state == "element" and c == "{":
                try:
                    element, pos = decoder.raw_decode(text, pos)
                except json.JSONDecodeError:
                    break  # not complete yet
                state = "after"
                yield element
            else:
                raise unexpected(f"in state {state}:")
        text, pos = text[pos:], 0
    text += utf8.decode(b"", final=True)
    if state != "done" or text.strip():
        raise unexpected("it ended before its ] at")


def gemini_request(client, params, path):
    """The request generate_content(_stream) builds for params, sent to path by the SDK's own HTTP
    client (an error status raised as the SDK's APIError); the response, its body unread."""
    from google.genai import _common, models

    api = client._api_client
    request = models._GenerateContentParameters_to_mldev(api, params, None, params)
    request.pop("config", None)
    request = _common.encode_unserializable_types(_common.convert_to_dict(request))
    http_request = api._build_request("post", path, request, None)
    return api._request(http_request, None, stream=True).response_stream


def gemini_summary(responses):
    """One choice per candidate, its parts gathered over every response (chunk)."""
    acc, model = {}, None
    for response in responses:
        model = model or response.model_version
        for candidate in response.candidates or []:
            a = acc.setdefault(candidate.index or 0, {"finish_reason": None, "text": "", "tool_calls": []})
            parts = candidate.content.parts if candidate.content is not None else None
            for part in parts or []:
                if part.function_call is not None:
                    call = part.function_call
                    a["tool_calls"].append({"id": call.id, "name": call.name, "arguments": call.args or {},
                                            "signed": part.thought_signature is not None})
                elif part.text is not None and not part.thought:
                    a["text"] += part.text
            if candidate.finish_reason is not None:
                a["finish_reason"] = getattr(candidate.finish_reason, "value", candidate.finish_reason)
    return {"model": model, "choices": [acc[i] for i in sorted(acc)]}


def run_gemini(args, headers):
    from google import genai
    from google.genai import errors, models, types

    client = genai.Client(
        api_key=args.api_key,
        http_options=types.HttpOptions(
            base_url=args.base_url, api_version=args.api_version, headers=headers, timeout=30_000
        ),
    )
    params = dict(
        model=GEMINI_MODEL,
        contents=[types.Content(role="user", parts=[types.Part(text=USER_PROMPT)])],
        config=types.GenerateContentConfig(
            system_instruction="You are a helpful assistant with memory and filesystem tools.",
            tools=[types.Tool(function_declarations=gemini_tools())],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        ),
    )
    if args.raw or args.gemini_array:
        parameters = types._GenerateContentParameters(**params)
        if not args.stream:
            path = f"models/{GEMINI_MODEL}:generateContent"
        elif args.gemini_array:
            path = f"models/{GEMINI_MODEL}:streamGenerateContent"
        else:
            path = f"models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"
        response = gemini_request(client, parameters, path)
        try:
            if args.raw:
                write_raw(response)
                return None
            chunks = []
            for element in json_array_elements(response.iter_bytes()):
                if "error" in element and "candidates" not in element:
                    raise errors.APIError(element["error"].get("code") or 500, element, response)
                converted = models._GenerateContentResponse_from_mldev(element, None, parameters)
                chunks.append(types.GenerateContentResponse._from_response(response=converted, kwargs={}))
        finally:
            response.close()
        return gemini_summary(chunks)
    if args.stream:
        return gemini_summary(client.models.generate_content_stream(**params))
    return gemini_summary([client.models.generate_content(**params)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True, choices=["anthropic", "chat", "responses", "gemini"])
    p.add_argument("--base-url", required=True)
    p.add_argument("--scenario", required=True)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--gemini-array", action="store_true",
                   help="gemini: stream as a JSON array (:streamGenerateContent without alt=sse); implies --stream")
    p.add_argument("--api-version", help="gemini: the API version in the path (the SDK's default: v1)")
    p.add_argument("--encoding", choices=["gzip", "br", "zstd", "deflate"])
    p.add_argument("--raw", action="store_true")
    p.add_argument("--n", type=int, help="chat: the n parameter (choices wanted)")
    p.add_argument("--api-key", default="sk-test")
    p.add_argument("--mcp-server", action="append", default=[], metavar="LABEL=URL",
                   type=lambda v: tuple(v.split("=", 1)),
                   help="anthropic, responses: a provider-side MCP server the request names")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="an extra request header")
    p.add_argument("--prompt-suffix", default="", help="appended to the user prompt (e.g. a secret for DLP tests)")
    args = p.parse_args(argv)
    if args.gemini_array:
        if args.api != "gemini":
            p.error("--gemini-array is for --api gemini")
        args.stream = True
    global USER_PROMPT
    USER_PROMPT = USER_PROMPT + args.prompt_suffix

    headers = {"x-fake-scenario": args.scenario}
    if args.encoding:
        headers["x-fake-encoding"] = args.encoding
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            p.error(f"--header wants NAME:VALUE, not {h!r}")
        headers[name.strip()] = value.strip()
    run = {"anthropic": run_anthropic, "chat": run_chat, "responses": run_responses, "gemini": run_gemini}[args.api]
    try:
        summary = run(args, headers)
    except Exception as e:  # every SDK error, and ours, the same way
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if summary is not None:
        out = {"api": args.api, "stream": args.stream, **summary}
        print(json.dumps(out, ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
