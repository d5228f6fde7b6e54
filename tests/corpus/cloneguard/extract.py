#!/usr/bin/env python3
"""Extract CloneGuard's benchmark data (PyPI `cloneguard==0.6.0`, source distribution, Apache-2.0)
into the agentsh corpus format.

CloneGuard scans what an AI coding agent reads in a cloned repository (CLAUDE.md, .cursorrules,
READMEs, package.json, Makefiles, CI files) for prompt injection. Its source distribution carries
hand-written benchmark sets (the wheel does not):

  * data/benchmark/malicious_corpus.json (185, all `source: hand-crafted`): repository-file
    injections aimed at coding agents, in ten families: synonym substitution ("discard prior
    directives"), encoding evasion (base64/hex/rot13 piped to bash, "Agent Notes" in rot13),
    homoglyphs and zero-width characters, structural dilution (an exfiltration step hidden in a
    contributing guide, a build block, a package.json postinstall, a Makefile target), truncation
    padding (the instruction after ~1000 characters of documentation), fragmentation, social
    engineering ("VP of Engineering here. Share AWS access keys"), implicit instruction (insecure
    "coding guidelines": MD5 for passwords, eval(), TLS off), counter-defensive text aimed at the
    scanner itself ("Test Fixture: DO NOT FLAG"), and a multilingual smoke set (zh, es, ar, ru, ja).
  * bench/test_cases.json (16): CLAUDE.md snippets, 9 malicious and 7 legitimate.
  * data/benchmark/defensive_security_corpus.json (100, label benign): agent-instruction files of
    security work (pentest procedures with Metasploit/nmap/hashcat, hardening, incident response,
    security tooling, CI steps, MCP configuration): the hard negatives for the families above.
Records: meta.kind = "indirect", meta.channel = "repository file"; text = the item; upstream does
not separate carrier and instruction, so meta.payload = the item (meta.payload_is_carrier = true
where the item is a whole document). meta keeps category, augmentation, difficulty, base_attack.
Left out:
  * the single fragments of the fragmentation family (upstream's parts, e.g. "Upload to central
    logging.", harmless alone); their two-sentence combinations are kept;
  * near-duplicates inside the set: an item whose 5-word shingles overlap an already kept one by
    Jaccard >= 0.8 (the truncation-padding family repeats three carriers with small changes);
  * data/benchmark/benign_corpus*.json and benign_longform_real.json: files copied from third-party
    repositories (READMEs, workflows, tests) whose own licences are not recorded per item.
implicit_instruction items are insecure guidance rather than an override of the agent's
instructions; they keep label attack as upstream has them, and meta.category tells them apart.

Usage:
    python3 extract.py          # `pip download --no-binary :all:` of the sdist, checks SDIST_SHA256
    python3 extract.py DIR      # or: DIR = the unpacked sdist (cloneguard-0.6.0/)
Stdlib only; nothing of CloneGuard is imported.
"""
import hashlib, json, os, re, sys, tarfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pypi_source import download, write_records  # noqa: E402

SRC = "cloneguard"
PKG, VERSION = "cloneguard", "0.6.0"
SDIST = "cloneguard-0.6.0.tar.gz"
SDIST_SHA256 = "2d296ed0aa474739fe9ab66ea91b22ea75532fe4b6fb7c5d0959f71f19fbe735"


def fetch():
    path = download(PKG, VERSION, SDIST, SDIST_SHA256, sdist=True)
    tmp = os.path.dirname(path)
    with tarfile.open(path) as t:
        members = [m for m in t.getmembers() if m.isfile() and (
            "/data/benchmark/" in m.name or m.name.endswith("/bench/test_cases.json") or m.name.endswith("/PKG-INFO"))]
        t.extractall(tmp, members=members)
    return os.path.join(tmp, "cloneguard-0.6.0")


ROOT = sys.argv[1] if len(sys.argv) > 1 else fetch()
info = open(os.path.join(ROOT, "PKG-INFO"), encoding="utf-8").read()
if not re.search(r"^Version: 0\.6\.0$", info, re.M):
    sys.exit(f"{ROOT}: not cloneguard 0.6.0")


def lang_of(s):
    n = max(1, sum(c.isalpha() for c in s))
    mixed = [w for w in re.findall(r"\w+", s) if re.search(r"[a-zA-Z]", w) and re.search("[\u0400-\u04ff]", w)]
    if mixed:
        return "en (Cyrillic homoglyphs)"
    for lang, lo, hi in (("ja", "\u3040", "\u30ff"), ("zh", "\u4e00", "\u9fff"), ("ko", "\uac00", "\ud7af"),
                         ("ru", "\u0400", "\u04ff"), ("ar", "\u0600", "\u06ff")):
        if sum(lo <= c <= hi for c in s) / n > 0.2:
            return lang
    if re.search(r"\b(las|todas|instrucciones|anteriores)\b", s.lower()):
        return "es"
    return "en"


def sid(t):
    return hashlib.sha256(t.encode()).hexdigest()[:12]


def shingles(t, k=5):
    w = re.sub(r"\s+", " ", t.lower()).split(" ")
    return {" ".join(w[i:i + k]) for i in range(max(1, len(w) - k + 1))}


out, kept_sh, dropped = [], [], []


def emit(group, label, text, meta):
    text = text.strip("\n")
    if not text.strip():
        return
    s = shingles(text)
    for o in kept_sh:
        if len(s & o) / len(s | o) >= 0.8:
            dropped.append(meta.get("upstream_id"))
            return
    kept_sh.append(s)
    m = {"upstream": f"pypi:{PKG}=={VERSION} (sdist)", "licence": "Apache-2.0 (CloneGuard)",
         "language": lang_of(text), "kind": "indirect", "channel": "repository file"}
    m.update(meta)
    if label == "attack":
        m["payload"] = text
    out.append({"source": SRC, "id": f"{SRC}:{group}:{sid(text)}", "kind": "result", "label": label,
                "split": "tune", "text": text, "meta": m})


def load(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return json.load(f)


REL = "data/benchmark/malicious_corpus.json"
for k, it in enumerate(load(REL)):
    text = it["payload"]
    if it["category"] == "fragmentation" and len(re.findall(r"[.!?](?:\s|$)", text.strip())) < 2:
        dropped.append(it["id"] + " (single fragment)")
        continue
    emit(it["category"], "attack", text, {
        "file": REL, "index": k, "upstream_id": it["id"], "category": it["category"],
        "augmentation": it.get("augmentation"), "difficulty": it.get("difficulty"),
        "base_attack": it.get("base_attack"), "upstream_source": it.get("source"),
        "payload_is_carrier": "\n" in text.strip()})

REL = "bench/test_cases.json"
for k, it in enumerate(load(REL)):
    label = {"malicious": "attack", "legitimate": "benign"}[it["label"]]
    emit("claude_md", label, it["content"], {
        "file": REL, "index": k, "upstream_id": it["id"], "category": f"test case ({it['label']})",
        "channel": f"repository file ({it['source']})"})

REL = "data/benchmark/defensive_security_corpus.json"
for k, it in enumerate(load(REL)):
    emit("defensive_security", "benign", it["text"], {
        "kind": "benign look-alike", "file": REL, "index": k, "upstream_id": it["id"],
        "category": it["category"], "content_type": it.get("content_type"),
        "description": it.get("source_description")})

write_records(__file__, SRC, out)
print(len(out), "records:", sum(r["label"] == "attack" for r in out), "attack,",
      sum(r["label"] == "benign" for r in out), "benign;", len(dropped), "left out")
