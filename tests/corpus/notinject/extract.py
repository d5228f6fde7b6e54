#!/usr/bin/env python3
"""Extract NotInject (leolee99/PIGuard, MIT) into the agentsh corpus format.

NotInject: 339 benign sentences, each built around 1-3 words common in prompt injections
("ignore", "bypass", "uncensored", ...), in four categories (Common Queries, Technique Queries,
Virtual Creation, Multilingual). They are written as user requests; here they are benign look-alike
texts (label benign) to measure over-defence. Kind "result": the sentence as it would appear
inside data the agent reads.

Usage: python3 extract.py [GIT_DIR]   (default /work/.mirror/leolee99+PIGuard/repo)
"""
import hashlib, json, os, subprocess, sys

GIT = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/leolee99+PIGuard/repo"
SRC = "notinject"
commit = subprocess.run(["git", "--git-dir", GIT, "rev-parse", "HEAD"], check=True,
                        capture_output=True, text=True).stdout.strip()

def lang_of(s):
    if any("\u4e00" <= c <= "\u9fff" for c in s):
        return "zh"
    if any("\u3040" <= c <= "\u30ff" for c in s):
        return "ja"
    if any("\uac00" <= c <= "\ud7af" for c in s):
        return "ko"
    if any("\u0400" <= c <= "\u04ff" for c in s):
        return "ru"
    if any("\u0600" <= c <= "\u06ff" for c in s):
        return "ar"
    return "en"

out, seen = [], set()
for n in ("one", "two", "three"):
    path = f"datasets/NotInject_{n}.json"
    data = json.loads(subprocess.run(["git", "--git-dir", GIT, "show", "HEAD:" + path], check=True,
                                     capture_output=True).stdout.decode("utf-8"))
    for i, d in enumerate(data):
        t = d["prompt"]
        if t in seen:
            continue
        seen.add(t)
        out.append({"source": SRC, "id": f"{SRC}:{n}:{i}", "kind": "result", "label": "benign", "split": "unsplit",
                    "text": t,
                    "meta": {"kind": "benign-lookalike", "category": d.get("category"), "trigger_words": d.get("word_list"),
                             "subset": f"NotInject_{n}", "language": lang_of(t), "file": path,
                             "upstream": "github:leolee99/PIGuard", "commit": commit, "licence": "MIT",
                             "note": "written as a user request, not as tool output"}})

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, SRC + ".jsonl"), "w", encoding="utf-8") as f:
    for r in out:
        f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
print(len(out), "records")
