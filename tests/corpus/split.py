#!/usr/bin/env python3
"""Check every candidate JSON-lines file, assign the fixed tune/evaluate split, print the tables.

    python3 split.py            # checks + counts (per source, kind, label, split)
    python3 split.py --write    # also sets each record's `split` field to what the rule gives

The vendored files carry each record's split in its `split` field, as this rule gives it; a file
is rewritten only when a split changes.

Split rule (deterministic, no state):
    split = "holdout"  if the source is in HOLDOUT (never tuned on; evaluate only)
          = BIPIA's own split for source "bipia" (train -> tune, test -> evaluate)
          = "tune"     if int(sha256(f"{source}|{group}").hexdigest()[:8], 16) % 2 == 0
          = "evaluate" otherwise
where `group` keeps near-duplicates on one side (GROUP below): all items of one AgentDojo
injection task (attacks) or user task (benign) together, one LiveMCPBench server (definitions)
or task (results), one npm package, one Enkrypt tool (definition and its outputs), one
CyberSecEval prompt.

npm-servers was held out until the intent layer's first measurement (issue 20); its false
positives then needed looking at, so it is split by package like LiveMCPBench, and the second
batch of real servers, npm-servers-2, is held out in its place. garak was held out too; its
carriers (a report, résumés, fact snippets, whois records, translations) are the styles of
injection the other tune sources lack, so it is split by probe (carrier), and the evaluate
half's carriers are never seen in tuning. npm-servers-2's false positives were looked at in
turn (issue 20's second session), so it is split by package too, and npm-servers-3 (84 more
servers from npm and PyPI, collected by someone who never ran the detector on them) is held
out in its place. repo-files (READMEs and source files of crates and npm packages) is split
by package. npm-servers-4 (86 more servers from npm and PyPI, collected
blind to the detector like npm-servers-3, to find false positives' causes in) is split by
package: its tune half is looked at, npm-servers-3 stays held out. InjecAgent is split by attacker instruction (its base and enhanced forms on one
side) and, for its benign fills, by user tool. The five sources added in issue 20's fifth
session (ps-fuzz, aicu-scanner, raginject, bastioncorpus, cloneguard: direct and indirect
injections of kinds no tune source had, code-file injections, other languages) are split by
item, raginject by host document and cloneguard by base attack.
"""
import collections
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FILES = {
    "agentdojo": "agentdojo/agentdojo.jsonl",
    "garak": "garak/garak.jsonl",
    "bipia": "bipia/bipia.jsonl",
    "inspect-evals": "inspect-evals/inspect-evals.jsonl",
    "aib": "aib/aib.jsonl",
    "spikee": "spikee/spikee.jsonl",
    "cyberseceval": "cyberseceval/cyberseceval.jsonl",
    "livemcpbench": "livemcpbench/livemcpbench.jsonl",
    "npm-servers": "npm-servers/npm-servers.jsonl",
    "npm-servers-2": "npm-servers-2/npm-servers-2.jsonl",
    "enkrypt-bad-mcps": "enkrypt-bad-mcps/enkrypt-bad-mcps.jsonl",
    "toy-poison": "toy-poison/toy-poison.jsonl",
    "msb": "msb/msb.jsonl",
    "asb": "asb/asb.jsonl",
    "tasktracker": "tasktracker/tasktracker.jsonl",
    "notinject": "notinject/notinject.jsonl",
    "doomarena": "doomarena/doomarena.jsonl",
    "repo-files": "repo-files/repo-files.jsonl",
    "npm-servers-3": "npm-servers-3/npm-servers-3.jsonl",
    "pyrit": "pyrit/pyrit.jsonl",
    "llm-guard": "llm-guard/llm-guard.jsonl",
    "injecagent": "injecagent/injecagent.jsonl",
    "npm-servers-4": "npm-servers-4/npm-servers-4.jsonl",
    "ps-fuzz": "ps-fuzz/ps-fuzz.jsonl",
    "aicu-scanner": "aicu-scanner/aicu-scanner.jsonl",
    "raginject": "raginject/raginject.jsonl",
    "bastioncorpus": "bastioncorpus/bastioncorpus.jsonl",
    "cloneguard": "cloneguard/cloneguard.jsonl",
}
# whole sources never used for tuning
HOLDOUT = {"spikee", "cyberseceval", "aib", "agentthreatbench", "codeipi",
           "npm-servers-3", "asb", "doomarena", "mcp-shield", "tool-poisoning-bench", "mcp-poison-bench"}


def group(r):
    s, m = r["source"], r.get("meta", {})
    if s == "agentdojo":
        if r["kind"] == "definition":
            return r["tool"]["name"]
        if r["label"] == "attack":
            return f"{m['suite']}:{m['injection_task']}"
        return f"{m['suite']}:{m['user_task']}"
    if s == "livemcpbench":
        return m.get("server_key") or m.get("task_id")
    if s == "enkrypt-bad-mcps":
        return r["id"].split(":")[2]  # the tool name: definition and its outputs together
    if s in ("npm-servers", "npm-servers-2", "npm-servers-4", "repo-files"):
        return m["package"]
    if s == "msb":
        return m.get("server") or m["attack"]
    if s == "garak":
        return m["probe"]
    if s == "tasktracker":
        return m["trigger"]
    if s == "b3-tools":
        return r["tool"]["name"]
    if s == "cyberseceval":
        return r["id"]
    if s == "injecagent":
        # one attacker instruction (base and enhanced together), one user tool's template
        return m["attacker_instruction"] if r["label"] == "attack" else m["user_tool"]
    if s == "raginject":
        return m["upstream_id"]  # a document with its payload and without it together
    if s == "cloneguard":
        return m.get("base_attack") or m["upstream_id"]  # one base attack's rewrites together
    return r["id"]


# AgentDojo's templates of the same kind as the independent rule set's ("an important message
# from me to you", "call this tool with these arguments"): never tuned on.
EVAL_ONLY_ATTACKS = {"important_instructions", "important_instructions_no_names", "tool_knowledge"}


def split_of(r):
    s = r["source"]
    if s == "agentdojo" and r["label"] == "attack" and r["meta"].get("attack") in EVAL_ONLY_ATTACKS:
        return "evaluate"
    if s in HOLDOUT:
        return "holdout"
    if s == "bipia":
        return "tune" if r["meta"]["split"] == "train" else "evaluate"
    h = int(hashlib.sha256(f"{s}|{group(r)}".encode()).hexdigest()[:8], 16)
    return "tune" if h % 2 == 0 else "evaluate"


SECRETS = re.compile(r"AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|gh[pousr]_[A-Za-z0-9]{30,}|"
                     r"xox[abpr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}")


def main():
    write = "--write" in sys.argv
    ids = set()
    table = collections.Counter()
    sizes = {}
    secrets = collections.Counter()
    problems = 0
    for name, rel in FILES.items():
        p = ROOT / rel
        if not p.exists():
            print(f"{rel}: missing", file=sys.stderr)
            problems += 1
            continue
        sizes[name] = p.stat().st_size
        lines, changed = [], 0
        for n, line in enumerate(open(p, encoding="utf-8"), 1):
            r = json.loads(line)
            ok = (r.get("kind") in ("definition", "result") and r.get("label") in ("attack", "benign")
                  and isinstance(r.get("id"), str) and isinstance(r.get("source"), str)
                  and ((r["kind"] == "result" and isinstance(r.get("text"), str))
                       or (r["kind"] == "definition" and isinstance(r.get("tool"), dict)
                           and isinstance(r["tool"].get("name"), str))))
            if not ok or r["id"] in ids:
                problems += 1
                print(f"{rel}:{n}: bad or duplicate record {r.get('id')}", file=sys.stderr)
            ids.add(r["id"])
            sp = split_of(r)
            table[(name, r["source"], r["kind"], r["label"], sp)] += 1
            body = r.get("text") or json.dumps(r.get("tool"))
            if r["label"] == "benign" and SECRETS.search(body):
                secrets[(r["source"], r["kind"])] += 1
            if r.get("split") != sp:
                changed += 1
                r["split"] = sp
                line = json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
            lines.append(line)
        if write and changed:
            p.write_text("".join(lines), encoding="utf-8")
            print(f"{rel}: {changed} splits changed", file=sys.stderr)
    print("| file | source | kind | label | tune | evaluate | holdout | total |")
    print("|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:4] for k in table})
    for k in keys:
        t, e, ho = (table.get(k + (x,), 0) for x in ("tune", "evaluate", "holdout"))
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {t} | {e} | {ho} | {t + e + ho} |")
    print()
    tot = collections.Counter()
    for k, v in table.items():
        tot[(k[2], k[3], k[4])] += v
    for k in sorted(tot):
        print("total", *k, tot[k])
    print("bytes", sum(sizes.values()), sizes)
    print("benign items matching a secret pattern:", dict(secrets))
    print("problems:", problems)


if __name__ == "__main__":
    main()
