#!/usr/bin/env python3
"""Extract BIPIA (microsoft/BIPIA, MIT) EmailQA contexts and attacks as tool-result items.

Usage (stdlib only), from a snapshot of github:microsoft/BIPIA:
    python3 extract.py /work/.mirror/microsoft+BIPIA/repo > bipia.jsonl
(the argument is a git directory; files are read with `git show HEAD:<path>`), or
    python3 extract.py --dir <checked-out tree> > bipia.jsonl

Items:
  * label=benign: the 100 e-mails of benchmark/email/{train,test}.jsonl (source: OpenAI Evals,
    per BIPIA's README), unchanged.
  * label=attack: every attack string of benchmark/{text,code}_attack_{train,test}.json
    (15 text categories x 5 and 10 code categories x 5 per split; 250 in all) inserted into ONE
    e-mail of the same split, chosen by sha256 of the attack, at one position (start, end or
    middle, also chosen by hash), as BIPIA's insert_start / insert_end / insert_middle do
    (middle: at a sentence start; BIPIA uses NLTK's Punkt, here a regex sentence split).
    BIPIA's full cross product (50 e-mails x 75 attacks x 3 positions per split) is not written.
meta.split keeps BIPIA's own train/test split.

Not extracted: the table (WikiTableQuestions, CC-BY-SA-4.0) and code (Stack Exchange,
CC-BY-SA) contexts, and WebQA/Summarization (must be generated from NewsQA/XSum).
"""
import hashlib
import json
import re
import subprocess
import sys


def reader(arg):
    if arg.startswith("--dir="):
        root = arg[len("--dir="):]
        return lambda p: open(f"{root}/{p}", encoding="utf-8").read()
    return lambda p: subprocess.run(["git", "--git-dir", arg, "show", f"HEAD:{p}"],
                                    check=True, capture_output=True, text=True).stdout


def h(s):
    return int(hashlib.sha256(s.encode()).hexdigest(), 16)


def insert(context, attack, pos, key):
    if pos == "end":
        return "\n".join([context, attack])
    if pos == "start":
        return "\n".join([attack, context])
    starts = [0] + [m.end() for m in re.finditer(r"[.!?]\s+(?=[A-Z0-9])", context)]
    start = starts[key % len(starts)]
    return "\n".join([context[:start], attack, context[start:]])


def main():
    arg = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/microsoft+BIPIA/repo"
    read = reader(arg)
    out = sys.stdout
    for split in ("train", "test"):
        emails = [json.loads(l) for l in read(f"benchmark/email/{split}.jsonl").splitlines() if l.strip()]
        for i, e in enumerate(emails):
            out.write(json.dumps({
                "source": "bipia", "id": f"bipia:email:{split}:{i}", "kind": "result", "label": "benign",
                "text": e["context"],
                "meta": {"split": split, "task": "email", "question": e["question"]},
            }, ensure_ascii=False, sort_keys=True) + "\n")
        for fam in ("text", "code"):
            attacks = json.loads(read(f"benchmark/{fam}_attack_{split}.json"))
            for cat, strs in attacks.items():
                for j, a in enumerate(strs):
                    k = h(a)
                    e_idx = k % len(emails)
                    pos = ("end", "start", "middle")[(k >> 8) % 3]
                    out.write(json.dumps({
                        "source": "bipia",
                        "id": f"bipia:{fam}:{split}:{cat}-{j}",
                        "kind": "result", "label": "attack",
                        "text": insert(emails[e_idx]["context"], a, pos, k >> 16),
                        "meta": {"split": split, "attack_family": fam, "attack_category": cat,
                                 "payload": a, "position": pos, "email_index": e_idx},
                    }, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
