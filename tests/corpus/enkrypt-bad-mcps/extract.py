#!/usr/bin/env python3
"""Extract the deliberately malicious test MCP servers of Enkrypt AI's Secure MCP Gateway
(github:enkryptai/secure-mcp-gateway @ b4f0165e1f17100313b2b78164cf035a2ff084f5,
src/secure_mcp_gateway/bad_mcps/*.py, Apache-2.0; copies in raw/).

    python3 extract.py > enkrypt-bad-mcps.jsonl 2> /dev/null
    (also writes enkrypt-bad-mcps.code-only.jsonl beside this script)

The files are FastMCP servers; they are parsed with `ast`, never executed. For every
@mcp.tool(name=..., description=..., annotations=...) function:
  tool = {name, description (decorator keyword, else the docstring), annotations (as written;
  note FastMCP may drop the non-standard keys some of them carry), inputSchema rebuilt from the
  signature without ctx, roughly as FastMCP/pydantic would}.
meta.intent is the function's docstring (the authors' statement of the attack).

Labels (definitions):
  * attack: every tool of tool_poisoning_mcp, mpma_mcp (preference manipulation) and
    prompt_injection_mcp except the plain list_tools tools; the text itself carries the attack.
  * benign: echo tools and the plain "Get a list of all available tools on this server." tools.
  * the tools of the other servers (command injection, RCE, SSRF, path traversal, credential
    theft, resource exhaustion, sessions, unauthenticated access, malicious outputs) describe
    themselves plainly: their threat is in code, arguments or outputs. They go to
    enkrypt-bad-mcps.code-only.jsonl with label attack and meta.surface=implementation, and
    must not be counted as description-poisoning (nor as benign).
Results: the literal TextContent texts returned by bad_output_mcp, schema_poisoning_mcp and
prompt_injection_mcp are kind=result, label=attack ({placeholders} left as written).
"""
import ast
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RAW = HERE / "raw"
COMMIT = "b4f0165e1f17100313b2b78164cf035a2ff084f5"
DESC_ATTACK = {"tool_poisoning_mcp", "mpma_mcp", "prompt_injection_mcp"}
RESULT_ATTACK = {"bad_output_mcp", "schema_poisoning_mcp", "prompt_injection_mcp"}
PLAIN_LIST = "Get a list of all available tools on this server."
PYTYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
           "dict": "object", "list": "array"}


def schema(fn):
    props, req = {}, []
    args = fn.args.args
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    for a, d in zip(args, defaults):
        if a.arg in ("ctx", "self"):
            continue
        ann = ast.unparse(a.annotation) if a.annotation else "str"
        base = ann.split("[")[0].split("|")[0].strip()
        p = {"title": a.arg.replace("_", " ").title(), "type": PYTYPES.get(base, "string")}
        if d is None:
            req.append(a.arg)
        else:
            try:
                p["default"] = ast.literal_eval(d)
            except Exception:
                pass
        props[a.arg] = p
    s = {"type": "object", "properties": props, "title": f"{fn.name}Arguments"}
    if req:
        s["required"] = req
    return s


def strval(node, fn):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values)
    if isinstance(node, ast.Name):
        for st in ast.walk(fn):
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in st.targets):
                v = strval(st.value, fn)
                if v is not None:
                    return v
    return None


def main():
    out_main = sys.stdout
    out_code = open(HERE / "enkrypt-bad-mcps.code-only.jsonl", "w")
    for f in sorted(RAW.glob("*.py")):
        server = f.stem
        tree = ast.parse(f.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.AsyncFunctionDef, ast.FunctionDef)):
                continue
            dec = next((d for d in fn.decorator_list if isinstance(d, ast.Call)
                        and getattr(d.func, "attr", "") == "tool"), None)
            if dec is None:
                continue
            kw = {k.arg: k.value for k in dec.keywords}
            name = ast.literal_eval(kw["name"]) if "name" in kw else fn.name
            doc = ast.get_docstring(fn) or ""
            desc = strval(kw["description"], fn) if "description" in kw else doc
            tool = {"name": name, "description": desc, "inputSchema": schema(fn)}
            if "annotations" in kw:
                try:
                    tool["annotations"] = ast.literal_eval(kw["annotations"])
                except Exception:
                    pass
            meta = {"server": server, "intent": doc, "commit": COMMIT,
                    "file": f"src/secure_mcp_gateway/bad_mcps/{f.name}"}
            plain = server.startswith("echo") or (name == "list_tools" and desc == PLAIN_LIST)
            rec = {"source": "enkrypt-bad-mcps", "id": f"enkrypt:{server}:{name}", "kind": "definition",
                   "tool": tool, "meta": meta}
            if plain:
                rec["label"] = "benign"
                out_main.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
            elif server in DESC_ATTACK:
                rec["label"] = "attack"
                out_main.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
            else:
                rec["label"] = "attack"
                rec["meta"] = dict(meta, surface="implementation")
                out_code.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
            if server in RESULT_ATTACK and not plain:
                for i, call in enumerate(c for c in ast.walk(fn) if isinstance(c, ast.Call)
                                         and getattr(c.func, "attr", "") == "TextContent"):
                    tk = {k.arg: k.value for k in call.keywords}.get("text")
                    text = strval(tk, fn) if tk is not None else None
                    if not text:
                        print(f"no literal text in {server}.{name}", file=sys.stderr)
                        continue
                    out_main.write(json.dumps({
                        "source": "enkrypt-bad-mcps", "id": f"enkrypt:{server}:{name}:result{i}",
                        "kind": "result", "label": "attack", "text": text,
                        "meta": dict(meta, tool=name)}, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
