#!/usr/bin/env python3
"""Extract bastioncorpus (PyPI `bastioncorpus==0.6.0`, MIT) into the agentsh corpus format.

bastioncorpus is the shared injection corpus of the "bastion" tools (agentbastion, bastionprobe,
bastiontrace): one JSON line per row, `label` malicious or benign. Malicious rows cover direct
injection, instruction override, persona jailbreaks, exfiltration, delimiter injection,
obfuscation (base64, hex, homoglyphs, leetspeak) and indirect injection in tool output (fake
SYSTEM NOTEs, "Note for AI agents" in a repository, tables and front matter carrying a canary,
memory-poisoning notes), in en, de, fr, es and it. Benign rows are false-positive traps: ordinary
user or tool text that uses the words injections use ("Disregard the typo in line 3", "Bitte
ignorieren Sie meine vorherige E-Mail", checksums and backup codes that look encoded, memory
summaries, role-play requests).

Records: text = the row's text (standalone: upstream has no carrier), meta.payload = text for
malicious rows. A row's `{canary}` slot (bastionprobe fills it with a unique token per run) is
filled here with a per-row token, "BC-" + 8 hex digits of sha256(row id), so that no single token
recurs across records. label: malicious -> attack, benign -> benign; meta keeps the row's id,
category, tactic, channel (user_input | tool_output | memory), check, forbidden_tool, severity,
lang and intent. meta.kind = "indirect" for channel tool_output or memory, else "direct".

Usage:
    python3 extract.py          # downloads the wheel with `pip download`, checks WHEEL_SHA256
    python3 extract.py DIR      # or: DIR = the unpacked wheel
Stdlib only; nothing of bastioncorpus is imported.
"""
import hashlib, json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pypi_source import unpacked_wheel, write_records  # noqa: E402

SRC = "bastioncorpus"
PKG, VERSION = "bastioncorpus", "0.6.0"
WHEEL = "bastioncorpus-0.6.0-py3-none-any.whl"
WHEEL_SHA256 = "96d7268cfafc2be0908382b61af8b67dec19058e2877657b217e68be0552a00a"
DATA = "bastioncorpus/corpus/injections.jsonl"


ROOT = unpacked_wheel(PKG, VERSION, WHEEL, WHEEL_SHA256)

out, seen = [], set()
with open(os.path.join(ROOT, DATA), encoding="utf-8") as f:
    for k, line in enumerate(f):
        if not line.strip():
            continue
        row = json.loads(line)
        canary = "BC-" + hashlib.sha256(row["id"].encode()).hexdigest()[:8]
        text = row["text"].replace("{canary}", canary).strip("\n")
        key = re.sub(r"\s+", " ", text).strip().lower()
        if not text.strip() or key in seen:
            continue
        seen.add(key)
        label = {"malicious": "attack", "benign": "benign"}[row["label"]]
        meta = {"upstream": f"pypi:{PKG}=={VERSION}", "licence": "MIT (bastioncorpus)", "file": DATA, "index": k,
                "upstream_id": row["id"], "category": row["category"], "tactic": row.get("tactic"),
                "channel": row.get("channel"), "check": row.get("check"), "forbidden_tool": row.get("forbidden_tool"),
                "severity": row.get("severity"), "language": row.get("lang"), "intent": row.get("intent"),
                "kind": "indirect" if row.get("channel") in ("tool_output", "memory") else "direct"}
        if label == "benign":
            meta["kind"] = "benign look-alike"
        else:
            meta["payload"] = text
        if "{canary}" in row["text"]:
            meta["canary_filled"] = canary
        out.append({"source": SRC, "id": f"{SRC}:{row['category']}:{row['id']}", "kind": "result",
                    "label": label, "split": "tune", "text": text, "meta": meta})

write_records(__file__, SRC, out)
print(len(out), "records:", sum(r["label"] == "attack" for r in out), "attack,",
      sum(r["label"] == "benign" for r in out), "benign")
