#!/usr/bin/env python3
"""Build spikee (PyPI `spikee` 0.9.2, Apache-2.0, WithSecure Labs) indirect-injection documents.

    pip download --no-deps -d /tmp/dl spikee==0.9.2
    mkdir -p /tmp/dl/x/spikee && unzip -qo /tmp/dl/spikee-0.9.2-py3-none-any.whl -d /tmp/dl/x/spikee
    python3 extract.py /tmp/dl/x/spikee > spikee.jsonl

Seed folders used (spikee/data/workspace/datasets/): seeds-cybersec-2026-01 and seeds-llm-mailbox.
As `spikee generate` does by default (jailbreaks and instructions matched by language), every
jailbreak template gets every instruction of the same language (`<INSTRUCTION>` replaced), and
the result is inserted into the seed's e-mail document (base_user_inputs.jsonl, id email-01) at
start, middle (nearest whitespace to the middle) or end, one position per pair chosen by sha256
(spikee writes all three). Languages: en plus zu, sq, ga, gd (low-resource-language variants).
label=benign: the bare e-mail documents (2 items).
"""
import hashlib, json, sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dl/x/spikee") / "spikee/data/workspace/datasets"

def rows(p):
    return [json.loads(l) for l in open(p, encoding="utf-8") if l.strip()]

def insert(doc, payload, pos):
    inj = "\n" + payload + "\n"
    if pos == "start":
        return inj.lstrip("\n") + doc
    if pos == "end":
        return doc + inj.rstrip("\n")
    mid = len(doc) // 2
    ws = [i for i, c in enumerate(doc) if c.isspace()]
    k = min(ws, key=lambda i: abs(i - mid)) if ws else mid
    return doc[:k] + inj + doc[k:]

seen_docs = set()
for seed in ("seeds-cybersec-2026-01", "seeds-llm-mailbox"):
    J = rows(ROOT / seed / "jailbreaks.jsonl")
    I = rows(ROOT / seed / "instructions.jsonl")
    doc = next(b["document"] for b in rows(ROOT / seed / "base_user_inputs.jsonl") if b["id"] == "email-01")
    if doc not in seen_docs:
        seen_docs.add(doc)
        print(json.dumps({"source": "spikee", "id": f"spikee:{seed}:email-01", "kind": "result",
                          "label": "benign", "text": doc, "meta": {"seed": seed, "version": "0.9.2"}},
                         ensure_ascii=False, sort_keys=True))
    for j in J:
        for ins in I:
            lj, li = j.get("lang", "en"), ins.get("lang", "en")
            if lj != li:
                continue
            payload = j["text"].replace("<INSTRUCTION>", ins["instruction"])
            pos = ("start", "middle", "end")[int(hashlib.sha256(f"{j['id']}|{ins['id']}".encode()).hexdigest(), 16) % 3]
            print(json.dumps({"source": "spikee", "id": f"spikee:{seed}:{j['id']}:{ins['id']}", "kind": "result",
                              "label": "attack", "text": insert(doc, payload, pos),
                              "meta": {"seed": seed, "jailbreak_type": j["jailbreak_type"],
                                       "instruction_type": ins["instruction_type"], "lang": lj,
                                       "position": pos, "payload": payload, "version": "0.9.2"}},
                             ensure_ascii=False, sort_keys=True))
