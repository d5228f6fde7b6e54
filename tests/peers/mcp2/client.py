"""An MCP client on the official Python SDK (`mcp` 2.x) in a chosen protocol era, over stdio.

    python client.py --mode auto|legacy|2026-07-28 [--no-list] [--call TOOL[:JSON_ARGS]]...
                     (-- COMMAND ARGS... | --url URL)

It connects (2026-07-28 by server/discover; legacy by initialize; auto probes), lists the tools
(unless --no-list: a client with a cached listing), calls each --call in order, and prints one
JSON object:

    {"protocol_version": str, "instructions": str|null, "tools": [names],
     "calls": [{"tool": str, "ok": bool, "text": str}],       # text: the result's, or the error
     "asked": [{"kind": "elicitation"|"sampling"|"roots", ...}],  # what reached the callbacks
     "logs": [{"level": str, "logger": str|null, "data": any}]}   # server log messages

The callbacks say yes to everything (a password, a URL sign-in, an answer from "the model",
one root), so anything that reaches them is visible in "asked".
"""
import argparse
import asyncio
import json
import sys

import mcp.types as types
from mcp import Client, StdioServerParameters


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--call", action="append", default=[])
    parser.add_argument("--no-list", action="store_true")
    parser.add_argument("--url", help="a Streamable HTTP server instead of a command")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command and not args.url:
        parser.error("the server command follows --, or --url names one")
    return args


async def main():
    args = parse_args()
    asked = []

    async def on_elicit(ctx, params):
        mode = getattr(params, "mode", None) or "form"
        asked.append({"kind": "elicitation", "mode": mode, "message": params.message})
        if mode == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"password": "hunter2"})

    async def on_sample(ctx, params):
        asked.append({"kind": "sampling"})
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a summary"), model="m"
        )

    async def on_roots(ctx):
        asked.append({"kind": "roots"})
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    server = args.url or StdioServerParameters(command=args.command[0], args=args.command[1:])
    logs = []

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    out = {"calls": [], "asked": asked, "logs": logs}
    async with Client(
        server,
        mode=args.mode,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
        logging_callback=on_log,
        log_level="debug",
    ) as client:
        out["protocol_version"] = client.protocol_version
        out["instructions"] = getattr(client, "instructions", None)
        if not args.no_list:
            listed = await client.list_tools()
            out["tools"] = sorted(tool.name for tool in listed.tools)
        for spec in args.call:
            name, _, raw = spec.partition(":")
            arguments = json.loads(raw) if raw else {}
            try:
                result = await client.call_tool(name, arguments)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                out["calls"].append({"tool": name, "ok": not result.is_error, "text": text})
            except Exception as err:  # the SDK raises the JSON-RPC error
                out["calls"].append({"tool": name, "ok": False, "text": str(err)})
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
