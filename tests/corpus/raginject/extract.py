#!/usr/bin/env python3
"""Extract raginject's built-in attack documents (PyPI `raginject==0.12.0`, Apache-2.0) into the
agentsh corpus format.

raginject tests RAG pipelines against indirect prompt injection: each pattern is a retrieved
document (`injected_content`: an HR policy, an FAQ, a product manual, a changelog ...) carrying an
instruction (`payload`) and a harmless question a user asks about the document. Eight families:
instruction override, data exfiltration (markdown images, links), format smuggling (HTML comments,
JSON/YAML fields, code blocks), authority spoofing ("[System administrator notice]"), payload
delivery (phishing link, fake citation), obfuscation (base64, leetspeak, zero-width, reversed
text), multilingual (Japanese, Chinese, Korean, Spanish, French, German ...), and conditional /
delayed triggers ("if the user asks about X, ..."). Canary strings such as RAGINJECT_ML_001 are
upstream's and kept.

Records (what a retrieval tool would return):
  * label=attack: text = injected_content, meta.payload = payload, meta.question = the user's
    question (not part of the text), meta.category / description / upstream id;
  * label=benign: the same document with the payload cut out, when at least MIN_HOST characters
    of document remain (many patterns are the bare payload, with no host text) and no canary is
    left in it (indirect-injection-006 repeats its instruction outside `payload`), and the seven
    clean corpus documents of raginject's demo pipelines (raginject/demo.py, _BENIGN_CORPUS).
Left out: pattern_sets/retriever/ (retriever poisoning: keyword-stuffed documents with no
instruction in them; their attack is on the ranking, not on the model).

Usage:
    python3 extract.py          # downloads the wheel with `pip download`, checks WHEEL_SHA256
    python3 extract.py DIR      # or: DIR = the unpacked wheel
Needs PyYAML (python3-yaml). Nothing of raginject is imported; demo.py is read with `ast`.
"""
import ast, hashlib, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pypi_source import unpacked_wheel, write_records  # noqa: E402

import yaml

SRC = "raginject"
PKG, VERSION = "raginject", "0.12.0"
WHEEL = "raginject-0.12.0-py3-none-any.whl"
WHEEL_SHA256 = "440e908d01e5936fb960fa6cb87c768c06fe0f5c630bdf548dcf5b762fe710a3"
MIN_HOST = 40


ROOT = unpacked_wheel(PKG, VERSION, WHEEL, WHEEL_SHA256)

STOP = {
    "de": "der die das und ist nicht sie bitte ihre alle anweisungen für mit von".split(),
    "fr": "le la les et est vous votre pas des une tous toutes pour dans".split(),
    "es": "el la los las y es usted su sus por todas para con del".split(),
    "it": "il lo gli sono tuo tua per tutte della con".split(),
    "pt": "o os as e é você seu sua por todas para com não".split(),
}


def lang_of(s):
    n = max(1, sum(c.isalpha() for c in s))
    for lang, lo, hi in (("ja", "\u3040", "\u30ff"), ("zh", "\u4e00", "\u9fff"), ("ko", "\uac00", "\ud7af"),
                         ("ru", "\u0400", "\u04ff"), ("ar", "\u0600", "\u06ff"), ("hi", "\u0900", "\u097f")):
        if sum(lo <= c <= hi for c in s) / n > 0.15:
            return lang
    words = [w for w in re.findall(r"[a-zà-ÿ]+", s.lower()) if len(w) > 1]
    en = sum(w in ("the", "and", "your", "you", "with", "this", "for", "of", "is", "to") for w in words)
    best = max(STOP, key=lambda k: sum(w in STOP[k] for w in words))
    return best if sum(w in STOP[best] for w in words) > max(2, en) else "en"


def sid(t):
    return hashlib.sha256(t.encode()).hexdigest()[:12]


out, seen = [], set()


def emit(group, label, text, meta):
    text = text.strip("\n")
    key = re.sub(r"\s+", " ", text).strip().lower()
    if not text.strip() or key in seen:
        return
    seen.add(key)
    m = {"upstream": f"pypi:{PKG}=={VERSION}", "licence": "Apache-2.0 (raginject)", "language": lang_of(text),
         "channel": "retrieved document (RAG)"}
    m.update(meta)
    out.append({"source": SRC, "id": f"{SRC}:{group}:{sid(text)}", "kind": "result", "label": label,
                "split": "tune", "text": text, "meta": m})


PDIR = os.path.join(ROOT, "raginject", "attacks", "patterns")
hosts = []
for name in sorted(os.listdir(PDIR)):
    if not name.endswith(".yaml"):
        continue
    rel = f"raginject/attacks/patterns/{name}"
    with open(os.path.join(PDIR, name), encoding="utf-8") as f:
        items = yaml.safe_load(f)
    for k, it in enumerate(items):
        content, payload = it["injected_content"], it["payload"]
        assert payload in content, (name, it["id"])
        emit(it["category"], "attack", content, {
            "kind": "indirect", "payload": payload, "file": rel, "index": k, "upstream_id": it["id"],
            "category": it["category"], "description": it.get("description"), "question": it.get("question")})
        host = content.replace(payload, "")
        host = re.sub(r"[ \t]+\n", "\n", host)
        host = re.sub(r"\n{3,}", "\n\n", host).strip()
        if len(host) >= MIN_HOST and "RAGINJECT" not in host:  # one document repeats its instruction
            hosts.append((it, rel, k, host))

for it, rel, k, host in hosts:
    emit("host_document", "benign", host, {
        "kind": "benign document", "file": rel, "index": k, "upstream_id": it["id"],
        "derived": "injected_content with the payload cut out", "question": it.get("question")})

demo = os.path.join(ROOT, "raginject", "demo.py")
tree = ast.parse(open(demo, encoding="utf-8").read())
corpus = None
for n in tree.body:
    tgt = n.target if isinstance(n, ast.AnnAssign) else (n.targets[0] if isinstance(n, ast.Assign) else None)
    if getattr(tgt, "id", None) == "_BENIGN_CORPUS":
        corpus = ast.literal_eval(n.value)
assert corpus and len(corpus) == 7, corpus
for k, (doc_id, text) in enumerate(corpus.items()):
    emit("demo_corpus", "benign", text, {"kind": "benign document", "file": "raginject/demo.py",
                                         "index": k, "upstream_id": doc_id, "variable": "_BENIGN_CORPUS"})

write_records(__file__, SRC, out)
print(len(out), "records:", sum(r["label"] == "attack" for r in out), "attack,",
      sum(r["label"] == "benign" for r in out), "benign")
