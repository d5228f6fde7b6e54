#!/usr/bin/env python3
"""A minimal stdio MCP server that records every line it receives.

The bypass tests use it to prove that no denied call ever arrived. It parses with Python's json
module (a different parser from agentsh's, accepting NaN and lone surrogates, last duplicate key
wins) from stdin read in text mode like the Python SDK (a bare \r ends a line), answers requests with an empty result, and on start writes its environment to the log.

    recorder.py LOG_FILE
"""
import io
import json
import os
import sys

log_path = sys.argv[1]
with open(log_path, "a", encoding="utf-8") as log:
    log.write(json.dumps({"env": sorted(os.environ)}) + "\n")
    log.flush()
    # Text mode with universal newlines, as the Python MCP SDK reads stdin: "\r", "\n" and
    # "\r\n" all end a line.
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    for raw in stdin:
        log.write(json.dumps({"line": raw}) + "\n")
        log.flush()
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        items = msg if isinstance(msg, list) else [msg]
        replies = []
        for item in items:
            if not isinstance(item, dict) or "id" not in item or "method" not in item:
                continue
            if item["method"] == "tools/list":
                result = {"tools": [
                    {"name": "read_file", "description": "Read a file.", "inputSchema": {"type": "object"}},
                    {"name": "write_file", "description": "Write a file.", "inputSchema": {"type": "object"}},
                ]}
            elif item["method"] == "initialize":
                result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                          "serverInfo": {"name": "recorder", "version": "1"}}
            else:
                result = {"content": [{"type": "text", "text": "ok"}]}
            replies.append({"jsonrpc": "2.0", "id": item["id"], "result": result})
        if replies:
            out = replies if isinstance(msg, list) else replies[0]
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
