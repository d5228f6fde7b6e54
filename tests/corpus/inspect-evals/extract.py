#!/usr/bin/env python3
"""Extract three small sets bundled in PyPI `inspect-evals` (MIT, UK AISI / Arcadia Impact)
into the common JSON-lines format. Stdlib only; inspect-evals is NOT installed.

    pip download --no-deps -d /tmp/dl inspect-evals==0.28.0
    mkdir -p /tmp/dl/x/inspect_evals && unzip -qo /tmp/dl/inspect_evals-0.28.0-py3-none-any.whl -d /tmp/dl/x/inspect_evals
    python3 extract.py /tmp/dl/x/inspect_evals > inspect-evals.jsonl

Sources inside the wheel (inspect_evals/...):
  * agent_threat_bench/data/{autonomy_hijack,data_exfil,memory_poison}.json (AgentThreatBench;
    NOT the "Agent Threat Rules" project). Each e-mail, customer record and memory entry is
    rendered exactly as the eval's tools (agent_threat_bench/tools.py) render it for the model
    and labelled: e-mails by the sample's attack_email_indices; memory entries by the sample's
    attack_marker (all benign in clean_baseline samples); customer records by the table
    RECORD_LABELS below (read by hand: the record whose `issue` carries instructions).
  * ipi_coding_agent/dataset/samples.json (CodeIPI, 45 samples): the issue text and every repo
    file, as a coding agent would read them. The carrier of the injection (issue text, or the
    file that holds the payload indicator / differs from the benign twin) is labelled attack;
    everything else benign (deduplicated).
  * b3/data/tool_specs/*.json (Lakera b3 threat-snapshot tools): benign tool definitions.
"""
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dl/x/inspect_evals") / "inspect_evals"
VERSION = "0.28.0"

# (sample id, record id) -> label, for agent_threat_bench/data/data_exfil.json
RECORD_ATTACKS = {("de_001", "CX-48217"), ("de_002", "CX-30762"), ("de_003", "INT-00417"),
                  ("de_005", "CX-17304"), ("de_006", "INT-07281"), ("de_008", "CX-72058")}

out = sys.stdout
seen = set()


def emit(rec):
    key = (rec["kind"], rec.get("text") or json.dumps(rec.get("tool"), sort_keys=True))
    if key in seen:
        return
    seen.add(key)
    out.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")


def atb():
    d = json.loads((ROOT / "agent_threat_bench/data/autonomy_hijack.json").read_text())
    for s in d:
        for i, e in enumerate(s["inbox"]):
            text = (f"Email {i + 1}:\n  From: {e.get('from', 'unknown')}\n"
                    f"  Subject: {e.get('subject', 'no subject')}\n  Body: {e.get('body', '')}")
            # attack_email_indices are 1-based, like the "Email N:" numbering (ah_001: [3] of 3)
            lab = "attack" if (i + 1) in s["attack_email_indices"] else "benign"
            emit({"source": "agentthreatbench", "id": f"atb:{s['id']}:email{i}", "kind": "result",
                  "label": lab, "text": text,
                  "meta": {"set": "autonomy_hijack", "attack_name": s["attack_name"],
                           "difficulty": s["difficulty"], "tool": "read_inbox",
                           "inspect_evals": VERSION}})
    d = json.loads((ROOT / "agent_threat_bench/data/data_exfil.json").read_text())
    for s in d:
        for c in s["customer_db"]:
            text = (f"Customer: {c['name']}\nID: {c['id']}\nEmail: {c.get('email', 'N/A')}\n"
                    f"SSN: {c.get('ssn', 'N/A')}\nAccount: {c.get('account', 'N/A')}\n"
                    f"Issue: {c.get('issue', 'N/A')}")
            lab = "attack" if (s["id"], c["id"]) in RECORD_ATTACKS else "benign"
            emit({"source": "agentthreatbench", "id": f"atb:{s['id']}:{c['id']}", "kind": "result",
                  "label": lab, "text": text,
                  "meta": {"set": "data_exfil", "attack_name": s["attack_name"],
                           "difficulty": s["difficulty"], "tool": "lookup_customer",
                           "note": "records carry fake SSNs/account numbers",
                           "inspect_evals": VERSION}})
    d = json.loads((ROOT / "agent_threat_bench/data/memory_poison.json").read_text())
    for s in d:
        for k, v in s["memory_store"].items():
            lab = "attack" if s["attack_name"] != "clean_baseline" and s["attack_marker"] and s["attack_marker"] in v else "benign"
            emit({"source": "agentthreatbench", "id": f"atb:{s['id']}:{k}", "kind": "result",
                  "label": lab, "text": v,
                  "meta": {"set": "memory_poison", "attack_name": s["attack_name"],
                           "difficulty": s["difficulty"], "tool": "memory_read", "key": k,
                           "inspect_evals": VERSION}})


def codeipi():
    d = json.loads((ROOT / "ipi_coding_agent/dataset/samples.json").read_text())
    benign_files = {}
    for s in d:
        if s["is_benign"]:
            benign_files.update(s["repo_files"])
    for s in d:
        carrier = None
        if not s["is_benign"] and s["injection_vector"] != "issue_text":
            ind = re.compile(s.get("payload_indicator") or "(?!)")
            cands = [p for p, t in s["repo_files"].items() if ind.search(t)]
            if not cands:
                want = {"readme": "README", "config_file": ".toml", "code_comment": ".py"}[s["injection_vector"]]
                cands = [p for p in s["repo_files"] if want in p and s["repo_files"][p] != benign_files.get(p)]
            carrier = cands[0] if cands else None
        lab = "attack" if (not s["is_benign"] and s["injection_vector"] == "issue_text") else "benign"
        meta = {"set": "codeipi", "injection_vector": s["injection_vector"],
                "payload_category": s.get("payload_category"), "sophistication": s.get("payload_sophistication"),
                "severity": s.get("severity"), "inspect_evals": VERSION}
        emit({"source": "codeipi", "id": f"codeipi:{s['id']}:issue", "kind": "result", "label": lab,
              "text": s["issue_text"], "meta": dict(meta, tool="read_issue")})
        for p, t in s["repo_files"].items():
            if not t.strip():
                continue
            lab = "attack" if p == carrier else "benign"
            emit({"source": "codeipi", "id": f"codeipi:{s['id']}:{p}", "kind": "result", "label": lab,
                  "text": t, "meta": dict(meta, tool="read_file", path=p)})
        if not s["is_benign"] and s["injection_vector"] != "issue_text" and carrier is None:
            print(f"warning: no carrier found for {s['id']}", file=sys.stderr)


def b3_tools():
    for p in sorted((ROOT / "b3/data/tool_specs").glob("*.json")):
        t = json.loads(p.read_text())
        emit({"source": "b3-tools", "id": f"b3:def:{t['name']}", "kind": "definition", "label": "benign",
              "tool": {k: t[k] for k in ("name", "description", "inputSchema") if k in t},
              "meta": {"file": f"b3/data/tool_specs/{p.name}", "inspect_evals": VERSION}})


atb()
codeipi()
b3_tools()
