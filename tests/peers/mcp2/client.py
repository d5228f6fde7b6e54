"""An MCP client on the official Python SDK (`mcp` 2.x) in a chosen protocol era, over stdio
(or Streamable HTTP with --url).

    python client.py --mode auto|legacy|2026-07-28 [--no-list] [--listen URI]...
                     [--call TOOL[:JSON_ARGS] | --wait-events N]... [--wait-timeout SECONDS]
                     (-- COMMAND ARGS... | --url URL)

It connects (2026-07-28 by server/discover; legacy by initialize; auto probes), lists the tools
(unless --no-list: a client with a cached listing), with --listen opens a subscriptions/listen
stream (2026-07-28) for updates of those resources and keeps it open while it calls each --call
in order; --wait-events N, between them, waits until N events have come on that stream (at most
--wait-timeout seconds, 20 by default). It prints one JSON object:

    {"protocol_version": str, "instructions": str|null, "tools": [names],
     "calls": [{"tool": str, "ok": bool, "text": str}],       # text: the result's, or the error
     "asked": [{"kind": "elicitation"|"sampling"|"roots", ...}],  # what reached the callbacks
     "logs": [{"level": str, "logger": str|null, "data": any}],   # server log messages
     # with --listen:
     "listen": {"id": str, "honored": {...}, "error": str,        # the acknowledged filter, or
                "end": "open"|"graceful"|"lost: ..."},            #   why it could not be opened
     "notifications": [{"method": str, "uri": str, "after_calls": int, "ms": int}],
     "waits": [{"events": int, "ok": bool, "ms": int}]}

"after_calls" is how many calls had been answered when the event came, "ms" the milliseconds
since the stream was acknowledged; a wait that timed out has "ok": false.

The callbacks say yes to everything (a password, a URL sign-in, an answer from "the model",
one root), so anything that reaches them is visible in "asked".
"""
import argparse
import asyncio
import contextlib
import json
import time

import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)

EVENT_METHODS = {
    ToolsListChanged: "notifications/tools/list_changed",
    PromptsListChanged: "notifications/prompts/list_changed",
    ResourcesListChanged: "notifications/resources/list_changed",
    ResourceUpdated: "notifications/resources/updated",
}


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="auto")
    # Calls and waits, in the order given.
    parser.add_argument("--call", action="append", dest="steps", default=[], type=lambda s: ("call", s))
    parser.add_argument("--wait-events", action="append", dest="steps", type=lambda n: ("wait", int(n)))
    parser.add_argument("--wait-timeout", type=float, default=20.0)
    parser.add_argument("--listen", action="append", default=[], metavar="URI")
    parser.add_argument("--no-list", action="store_true")
    parser.add_argument("--url", help="a Streamable HTTP server instead of a command")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command and not args.url:
        parser.error("the server command follows --, or --url names one")
    return args


async def call(client, spec, out):
    name, _, raw = spec.partition(":")
    arguments = json.loads(raw) if raw else {}
    try:
        result = await client.call_tool(name, arguments)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        out["calls"].append({"tool": name, "ok": not result.is_error, "text": text})
    except Exception as err:  # the SDK raises the JSON-RPC error
        out["calls"].append({"tool": name, "ok": False, "text": str(err)})


class Listening:
    """One subscriptions/listen stream, read in the background as its events come."""

    @classmethod
    async def open(cls, client, uris, out, stack):
        out["notifications"] = []
        try:
            sub = await stack.enter_async_context(client.listen(resource_subscriptions=uris))
        except Exception as err:  # refused, or not 2026-07-28
            out["listen"] = {"error": f"{type(err).__name__}: {err}"}
            return None
        honored = sub.honored.model_dump(by_alias=True, mode="json", exclude_none=True)
        out["listen"] = {"id": sub.subscription_id, "honored": honored, "end": "open"}
        return cls(sub, out)

    def __init__(self, sub, out):
        self.sub = sub
        self.out = out
        self.events = out["notifications"]
        self.changed = asyncio.Event()
        self.start = time.monotonic()
        self.task = asyncio.create_task(self.read())

    def ms(self):
        return int((time.monotonic() - self.start) * 1000)

    async def read(self):
        try:
            async for event in self.sub:
                entry = {
                    "method": EVENT_METHODS.get(type(event), type(event).__name__),
                    "after_calls": len(self.out["calls"]),
                    "ms": self.ms(),
                }
                if isinstance(event, ResourceUpdated):
                    entry["uri"] = event.uri
                self.events.append(entry)
                self.changed.set()
            self.out["listen"]["end"] = "graceful"
        except Exception as err:  # SubscriptionLost: the stream dropped
            self.out["listen"]["end"] = f"lost: {err}"
        self.changed.set()

    async def wait(self, count, timeout):
        """Until `count` events have come (or the stream ended, or `timeout` seconds)."""
        start = self.ms()
        try:
            async with asyncio.timeout(timeout):
                while len(self.events) < count and self.out["listen"]["end"] == "open":
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            pass
        return {"events": count, "ok": len(self.events) >= count, "ms": self.ms() - start}

    async def close(self):
        """Stops reading; leaving the listen context then ends the subscription."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


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
        async with contextlib.AsyncExitStack() as stack:
            listening = None
            if args.listen:
                listening = await Listening.open(client, args.listen, out, stack)
            for kind, step in args.steps:
                if kind == "call":
                    await call(client, step, out)
                    continue
                waited = {"events": step, "ok": False, "ms": 0}
                if listening is not None:
                    waited = await listening.wait(step, args.wait_timeout)
                out.setdefault("waits", []).append(waited)
            if listening is not None:
                await listening.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
