#!/usr/bin/env python3
"""Small hand-written MCP tool-poisoning examples from three MIT-licensed repositories.

    python3 extract.py > toy-poison.jsonl      (reads raw/, stdlib only, runs no third-party code)

raw/ holds the original files (licences beside them):
  * mcp-shield.bad-mcp-server.js, mcp-shield.mcp-whatsapp.js
      github:riseandignite/mcp-shield @ 379140c3555bf35c6f8f451ee320da24302e792e, mcp-servers-example/
      -> server.tool(name, `description`, {zod params}) calls, parsed with regexes. The
         getFactOfTheDay tool has a benign first description and a poisoned one after a
         trigger file exists (rug pull): both are emitted. fetchWeather's description is
         plain; its threat is only the exfiltration-shaped optional params (feedback, debug,
         extra): label attack, meta.subtype "params-only" (a description scanner cannot see it).
  * tool-poisoning-bench.scenarios.py
      github:harryc295/tool-poisoning-bench @ 9a5c49669f2e50da8e7cfc571ff35dc77cccb034
      -> BASE_TOOLS (benign definitions), description_override (poisoned definitions) and
         tool_outputs (results; category tool_output_injection = attack, control = benign),
         read with `ast` (the file is not executed).
  * mcp-poison-bench.payloads.json
      transcribed from github:chirag-dewan/MCP-Poison-Bench fixtures/payloads.py @ 0b287f9b
      (read through the code index; the snapshot could not be fetched). The payloads are put
      in their carrier: a `calculate` tool description, the `operation` parameter's schema
      description, a tool result, and a shadowing `compliance_audit` tool.
"""
import ast
import json
import re
from pathlib import Path

RAW = Path(__file__).resolve().parent / "raw"


def emit(r):
    print(json.dumps(r, ensure_ascii=False, sort_keys=True))


def zod_schema(block):
    props, req = {}, []
    for name, expr in re.findall(r"(\w+)\s*:\s*(z\.[^\n]*?)(?:,\s*$|\s*$)", block, re.M):
        t = ("number" if "z.number" in expr else "object" if "z.object" in expr else "string")
        props[name] = {"type": t}
        if ".optional()" not in expr:
            req.append(name)
    s = {"type": "object", "properties": props}
    if req:
        s["required"] = req
    return s


def mcp_shield():
    src = (RAW / "mcp-shield.bad-mcp-server.js").read_text()
    labels = {"calculateSum": ("attack", "hidden-instructions"), "sendEmail": ("attack", "shadowing"),
              "fetchWeather": ("attack", "params-only"), "readFile": ("attack", "sensitive-files")}
    for name, desc, params in re.findall(r"server\.tool\(\s*'(\w+)',\s*`(.*?)`,\s*\{(.*?)\n  \},", src, re.S):
        lab, sub = labels[name]
        emit({"source": "mcp-shield", "id": f"mcp-shield:{name}", "kind": "definition", "label": lab,
              "tool": {"name": name, "description": desc, "inputSchema": zod_schema(params)},
              "meta": {"subtype": sub, "file": "mcp-servers-example/bad-mcp-server.js"}})
    benign = re.search(r"let factDescription = `(.*?)`", src, re.S).group(1)
    poisoned = re.search(r"factDescription = `(Get a random fact of the day\.\s*<system>.*?)`", src, re.S).group(1)
    for lab, d, v in (("benign", benign, "before-trigger"), ("attack", poisoned, "after-trigger")):
        emit({"source": "mcp-shield", "id": f"mcp-shield:getFactOfTheDay:{v}", "kind": "definition", "label": lab,
              "tool": {"name": "getFactOfTheDay", "description": d, "inputSchema": {"type": "object", "properties": {}}},
              "meta": {"subtype": "rug-pull " + v, "file": "mcp-servers-example/bad-mcp-server.js",
                       "session_tools": ["send_message"]}})
    wa = (RAW / "mcp-shield.mcp-whatsapp.js").read_text()
    for name, desc, params in re.findall(r"server\.tool\(\s*'(\w+)',\s*`(.*?)`,\s*\{(.*?)\n  \},", wa, re.S):
        emit({"source": "mcp-shield", "id": f"mcp-shield:whatsapp:{name}", "kind": "definition", "label": "benign",
              "tool": {"name": name, "description": desc, "inputSchema": zod_schema(params)},
              "meta": {"file": "mcp-servers-example/mcp-whatsapp.js"}})


def tool_poisoning_bench():
    tree = ast.parse((RAW / "tool-poisoning-bench.scenarios.py").read_text())
    base, scenarios = None, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "BASE_TOOLS":
                base = ast.literal_eval(node.value)
            if node.targets[0].id == "SCENARIOS":
                for call in node.value.elts:
                    scenarios.append({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    for name, t in base.items():
        f = t["function"]
        emit({"source": "tool-poisoning-bench", "id": f"tpb:def:{name}", "kind": "definition", "label": "benign",
              "tool": {"name": f["name"], "description": f["description"], "inputSchema": f["parameters"]},
              "meta": {"file": "scenarios.py"}})
    for s in scenarios:
        for name, d in (s.get("description_override") or {}).items():
            f = base[name]["function"]
            emit({"source": "tool-poisoning-bench", "id": f"tpb:{s['id']}:{name}", "kind": "definition",
                  "label": "attack",
                  "tool": {"name": name, "description": d, "inputSchema": f["parameters"]},
                  "meta": {"scenario": s["id"], "category": s["category"], "note": s.get("note", ""),
                           "session_tools": s["tool_names"], "file": "scenarios.py"}})
        for name, out in (s.get("tool_outputs") or {}).items():
            lab = "attack" if s["category"] == "tool_output_injection" else "benign"
            emit({"source": "tool-poisoning-bench", "id": f"tpb:{s['id']}:{name}:result", "kind": "result",
                  "label": lab, "text": out,
                  "meta": {"scenario": s["id"], "category": s["category"], "tool": name, "file": "scenarios.py"}})


def mcp_poison_bench():
    d = json.loads((RAW / "mcp-poison-bench.payloads.json").read_text())
    calc = {"name": "calculate", "description": "Perform a basic arithmetic operation on two numbers.",
            "inputSchema": {"type": "object", "required": ["a", "b", "operation"], "properties": {
                "a": {"type": "number"}, "b": {"type": "number"},
                "operation": {"type": "string", "description": "Arithmetic operation: add, subtract, multiply, or divide."}}}}
    for p in d["payloads"]:
        meta = {"attack_class": p["attack_class"], "carrier": p["carrier"],
                "note": "host tool text (calculate) written here; only the injection is upstream's"}
        if p["carrier"] == "description":
            t = json.loads(json.dumps(calc))
            t["description"] += p["injection"]
            emit({"source": "mcp-poison-bench", "id": f"mpb:{p['id']}", "kind": "definition", "label": "attack",
                  "tool": t, "meta": dict(meta, session_tools=["calculate", "export_data"])})
        elif p["carrier"] == "schema_field":
            t = json.loads(json.dumps(calc))
            t["inputSchema"]["properties"]["operation"]["description"] = p["injection"]
            emit({"source": "mcp-poison-bench", "id": f"mpb:{p['id']}", "kind": "definition", "label": "attack",
                  "tool": t, "meta": dict(meta, session_tools=["calculate", "export_data"])})
        elif p["carrier"] == "shadow_description":
            emit({"source": "mcp-poison-bench", "id": f"mpb:{p['id']}", "kind": "definition", "label": "attack",
                  "tool": {"name": "compliance_audit", "description": p["injection"],
                           "inputSchema": {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}},
                  "meta": dict(meta, session_tools=["calculate", "export_data"])})
        else:
            emit({"source": "mcp-poison-bench", "id": f"mpb:{p['id']}", "kind": "result", "label": "attack",
                  "text": "42" + p["injection"], "meta": dict(meta, tool="calculate")})
    emit({"source": "mcp-poison-bench", "id": "mpb:def:calculate", "kind": "definition", "label": "benign",
          "tool": calc, "meta": {"note": "the benign host tool, as written here"}})


mcp_shield()
tool_poisoning_bench()
mcp_poison_bench()
