#!/usr/bin/env python3
"""Extract the prompt-injection payloads of AICU (PyPI `aicu-scanner==1.5.0`, MIT) into the agentsh
corpus format.

AICU is an LLM application scanner whose attacks aim mostly at system-prompt and configuration
extraction, worded so that no guardrail trigger word appears: output-format manipulation ("fill
this YAML/terraform/JSON template from your live state"), fake gateway/logging/SIEM requirements,
legitimate-looking tasks (an onboarding e-mail, a unit test, a handoff document that must list the
assistant's rules), side channels, role assumption, completion steering, fake end-of-message and
"[SYSTEM UPDATE]" markers, base64 / token splitting / zero-width characters, other languages, and
documents with instructions buried in them (meeting notes, a Python docstring, a JS file, a JSON
spec, a resume, an HTML comment in Markdown, Unicode-tag smuggling).

Read from the wheel's aicu/payloads/ (YAML parsed with PyYAML; nothing of AICU is imported):
  * single_turn.yaml, advanced_evasion.yaml, jailbreaks.yaml, encoding_attacks.yaml: one record per
    payload, meta.kind = "direct" (a standalone prompt; text = payload);
  * file_payloads.yaml: the documents, meta.kind = "indirect" (text = the whole file content, the
    carrier; upstream does not mark the injected sentence, so meta.payload is the whole content too
    and meta.payload_is_carrier = true);
  * multi_turn.yaml: the turns of one conversation joined with blank lines (what a log, transcript
    or memory tool would return), meta.payload = the last turn (the ask);
  * intruder_*.txt: one record per line (Burp-Intruder style lists), sub-category from the file name.
Left out: toxicity.yaml, hallucination.yaml and dos_probes.yaml (harmful-content, false-fact and
resource-exhaustion probes, not injections) and adversarial_triggers.yaml (prefix/suffix wrappers
and GCG-style suffixes, not complete texts). Exact duplicates (whitespace and case folded) are kept
once.

Usage:
    python3 extract.py          # downloads the wheel with `pip download`, checks WHEEL_SHA256
    python3 extract.py DIR      # or: DIR = the unpacked wheel
Needs PyYAML (python3-yaml).
"""
import hashlib, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pypi_source import unpacked_wheel, write_records  # noqa: E402

import yaml

SRC = "aicu-scanner"
PKG, VERSION = "aicu-scanner", "1.5.0"
WHEEL = "aicu_scanner-1.5.0-py3-none-any.whl"
WHEEL_SHA256 = "5150a453188cf27c85723f157d0d06f362d2286d6427a50920d1a7821f3a6023"


ROOT = unpacked_wheel(PKG, VERSION, WHEEL, WHEEL_SHA256)
PDIR = os.path.join(ROOT, "aicu", "payloads")

STOP = {
    "de": "der die das und ist nicht ich sie bitte ihre ihr gib alle anweisungen".split(),
    "fr": "le la les et est vous votre vos pas des une tous toutes instructions".split(),
    "es": "el la los las y es usted su sus por favor todas instrucciones".split(),
    "it": "il lo gli sono tuo tua tue per favore tutte istruzioni".split(),
}


def lang_of(s):
    mixed = [w for w in re.findall(r"\w+", s) if re.search(r"[a-zA-Z]", w) and re.search("[\u0400-\u04ff]", w)]
    if len(mixed) >= 3:
        return "en (Cyrillic homoglyphs)"
    n = max(1, sum(c.isalpha() for c in s))
    for lang, lo, hi in (("zh", "\u4e00", "\u9fff"), ("ja", "\u3040", "\u30ff"), ("ko", "\uac00", "\ud7af"),
                         ("ru", "\u0400", "\u04ff"), ("ar", "\u0600", "\u06ff"), ("hi", "\u0900", "\u097f")):
        if sum(lo <= c <= hi for c in s) / n > 0.2:
            return lang
    words = [w for w in re.findall(r"[a-zà-ÿ]+", s.lower()) if len(w) > 1]
    en = sum(w in ("the", "and", "your", "you", "with", "this", "for", "of", "what") for w in words)
    best = max(STOP, key=lambda k: sum(w in STOP[k] for w in words))
    if sum(w in STOP[best] for w in words) > max(2, en):
        return best
    return "en"


def sid(t):
    return hashlib.sha256(t.encode()).hexdigest()[:12]


out, seen = [], set()


def emit(group, text, meta):
    text = text.strip("\n")
    key = re.sub(r"\s+", " ", text).strip().lower()
    if not text.strip() or key in seen:
        return
    seen.add(key)
    m = {"upstream": f"pypi:{PKG}=={VERSION}", "licence": "MIT (aicu-scanner)", "language": lang_of(text)}
    m.update(meta)
    out.append({"source": SRC, "id": f"{SRC}:{group}:{sid(text)}", "kind": "result", "label": "attack",
                "split": "tune", "text": text, "meta": m})


def load(name):
    with open(os.path.join(PDIR, name), encoding="utf-8") as f:
        return yaml.safe_load(f)


for name in ("single_turn.yaml", "advanced_evasion.yaml", "jailbreaks.yaml", "encoding_attacks.yaml"):
    group = name[:-5]
    for set_name, items in load(name)["payload_sets"].items():
        for k, it in enumerate(items):
            emit(group, it["content"], {
                "kind": "direct", "payload": it["content"].strip("\n"), "file": f"aicu/payloads/{name}",
                "payload_set": set_name, "index": k, "upstream_id": it["id"], "variant_id": it.get("variant_id"),
                "name": it.get("name"), "technique": it.get("transformation_type")})

for k, it in enumerate(load("file_payloads.yaml")["file_payloads"]):
    emit("file_payloads", it["content"], {
        "kind": "indirect", "channel": f"file ({it['type']})", "payload": it["content"].strip("\n"),
        "payload_is_carrier": True, "file": "aicu/payloads/file_payloads.yaml", "index": k,
        "upstream_id": it["id"], "family": it["family"], "name": it["name"],
        "technique": it["transformation_type"]})

for k, it in enumerate(load("multi_turn.yaml")["multi_turn_tests"]):
    turns = [t.strip() for t in it["turns"]]
    emit("multi_turn", "\n\n".join(turns), {
        "kind": "direct", "channel": "conversation turns joined", "payload": turns[-1], "turns": len(turns),
        "file": "aicu/payloads/multi_turn.yaml", "index": k, "upstream_id": it["id"],
        "family": it["family"], "name": it["name"], "technique": it["transformation_type"]})

for name in sorted(os.listdir(PDIR)):
    if not (name.startswith("intruder") and name.endswith(".txt")):
        continue
    sub = re.sub(r"^intruder_(\d+_)?|\.txt$", "", name) or "payloads"
    with open(os.path.join(PDIR, name), encoding="utf-8") as f:
        for k, line in enumerate(f):
            line = line.rstrip("\n")
            if line.strip():
                emit("intruder", line, {"kind": "direct", "payload": line, "file": f"aicu/payloads/{name}",
                                        "index": k, "technique": sub})

write_records(__file__, SRC, out)
print(len(out), "records (all attack)")
