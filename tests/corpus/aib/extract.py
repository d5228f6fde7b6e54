#!/usr/bin/env python3
"""Extract agent-injection-bench (PyPI `agent-injection-bench` 0.1.0, MIT, sentinelden) items.

    pip download --no-deps -d /tmp/dl agent-injection-bench==0.1.0
    mkdir -p /tmp/dl/x/agent_injection_bench && unzip -qo /tmp/dl/agent_injection_bench-0.1.0-py3-none-any.whl -d /tmp/dl/x/agent_injection_bench
    python3 extract.py /tmp/dl/x/agent_injection_bench/aib/data/attacks.jsonl > aib.jsonl

Each case's `injected` text (what arrives through the channel: tool result, document, web page,
EXIF metadata, filename, earlier turn) is one kind=result item. family=control cases are
deliberate look-alike benign texts (label benign); the single family=baseline case is the same
payload typed by the user (not an injection by the benchmark's own definition) and is skipped.
"""
import json, sys
src = sys.argv[1] if len(sys.argv) > 1 else "/tmp/dl/x/agent_injection_bench/aib/data/attacks.jsonl"
for line in open(src, encoding="utf-8"):
    r = json.loads(line)
    if r["family"] == "baseline":
        continue
    print(json.dumps({
        "source": "aib", "id": f"aib:{r['id']}", "kind": "result",
        "label": "benign" if r["family"] == "control" else "attack",
        "text": r["injected"],
        "meta": {"channel": r["channel"], "family": r["family"], "description": r["description"],
                 "task": r["task"], "version": "0.1.0"},
    }, ensure_ascii=False, sort_keys=True))
