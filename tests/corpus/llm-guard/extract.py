#!/usr/bin/env python3
"""Extract the prompt-injection scanner test cases of protectai/llm-guard (MIT) into the agentsh
corpus format.

tests/input_scanners/test_prompt_injection.py parametrises (match_type, prompt, valid, score):
valid False = injection (label attack), valid True = benign. Read with ast, never imported.
Only this file is used (not the later agent-* scanner tests).
Most attacks are chat-turn injections / jailbreaks (meta.kind "direct"); the Greshake-style
"the assistant is in error and offline ... secret agenda" texts and the "Ignore all other
evidence" document text were written as indirect injections planted in retrieved content
(meta.kind "indirect"); the split is a heuristic on the text, recorded in meta.kind_rule.

Usage: python3 extract.py [GIT_DIR]   (default /work/.mirror/protectai+llm-guard/repo)
"""
import ast, hashlib, json, os, subprocess, sys

GIT = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/protectai+llm-guard/repo"
PATH = "tests/input_scanners/test_prompt_injection.py"
SRC = "llm-guard"
commit = subprocess.run(["git", "--git-dir", GIT, "rev-parse", "HEAD"], check=True,
                        capture_output=True, text=True).stdout.strip()
code = subprocess.run(["git", "--git-dir", GIT, "show", "HEAD:" + PATH], check=True,
                      capture_output=True).stdout.decode("utf-8")
tree = ast.parse(code)

INDIRECT_MARKERS = ("assistant is in error and offline", "Ignore all other evidence", "secret agenda",
                    "Ignore the image content", "search result")

def lang_of(s):
    if any("\u4e00" <= c <= "\u9fff" for c in s): return "zh"
    if any("\u0400" <= c <= "\u04ff" for c in s): return "ru"
    if any("\u0600" <= c <= "\u06ff" for c in s): return "ar"
    return "en"

out, seen = [], set()
for n in ast.walk(tree):
    # (match_type, prompt, expected_valid, expected_score) at this commit; older/newer layouts have
    # (prompt, expected_prompt, expected_valid, expected_score): take the first str and the first bool
    if isinstance(n, ast.Tuple) and len(n.elts) == 4:
        strs, bools = [], []
        for e in n.elts:
            try:
                v = ast.literal_eval(e)
            except ValueError:
                continue
            (bools if isinstance(v, bool) else strs if isinstance(v, str) else []).append(v)
        if not strs or not bools:
            continue
        text = strs[0]
        if not isinstance(text, str) or text in seen:
            continue
        seen.add(text)
        valid = bools[0]
        label = "benign" if valid else "attack"
        ind = any(m.lower() in text.lower() for m in INDIRECT_MARKERS)
        kind = "benign" if valid else ("indirect" if ind else "direct")
        out.append({"source": SRC, "id": f"{SRC}:{label}:{hashlib.sha256(text.encode()).hexdigest()[:12]}",
                    "kind": "result", "label": label, "split": "tune", "text": text,
                    "meta": {"kind": kind, "kind_rule": "indirect if the text has one of " + "|".join(INDIRECT_MARKERS),
                             "language": lang_of(text), "file": PATH, "line": n.lineno,
                             "upstream": "github:protectai/llm-guard", "commit": commit, "licence": "MIT",
                             "payload_only": True,
                             "note": "scanner test inputs written as user prompts; no tool-result carrier"}})

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, SRC + ".jsonl"), "w", encoding="utf-8") as f:
    for r in out:
        f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
print(len(out), "records")
