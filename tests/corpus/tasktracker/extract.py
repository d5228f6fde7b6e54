#!/usr/bin/env python3
"""Extract microsoft/TaskTracker injection material into the agentsh corpus format.

TaskTracker (MIT) builds poisoned retrieval paragraphs as
    paragraph[:pos] + TRIGGER + ' ' + SECONDARY_TASK + paragraph[pos:]
(dataset_creation/prepare_datasets_poisoned_*.ipynb, embed_secondary_task). The SQuAD / HotPotQA
paragraphs and the HF secondary-task sets are not in the repository, so the records here are the
injected string alone (trigger + secondary task), exactly as TaskTracker concatenates them.

Usage: python3 extract.py [GIT_DIR]   (default /work/.mirror/microsoft+TaskTracker/repo)
Writes tasktracker.jsonl beside this script.
"""
import hashlib, json, os, subprocess, sys

GIT = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/microsoft+TaskTracker/repo"
D = "task_tracker/dataset_creation/datasets/"
SRC = "tasktracker"

def show(path):
    return subprocess.run(["git", "--git-dir", GIT, "show", "HEAD:" + path], check=True,
                          capture_output=True).stdout.decode("utf-8")

def lines(path):
    return [l.strip() for l in show(path).splitlines() if l.strip()]

def pick(seq, key):
    h = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    return seq[h % len(seq)]

def sid(*parts):
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]

commit = subprocess.run(["git", "--git-dir", GIT, "rev-parse", "HEAD"], check=True,
                        capture_output=True, text=True).stdout.strip()

train_triggers = lines(D + "saved_injections.txt")
test_triggers = lines(D + "saved_injections_test.txt")
trivia = []
for l in lines(D + "trivia_pairs.txt"):
    q = l.split(" Answer:")[0]
    if q.startswith("Question: "):
        q = q[len("Question: "):]
    trivia.append(q.strip())
translated = lines(D + "translated_secondary_tasks.txt")
pair = lines(D + "jailbreaks_pair_attack.txt")
adaptive = lines(D + "llm_adaptive_attacks.txt")

LANG = [("Bitte", "de"), ("Veuillez", "fr"), ("Merci", "fr"), ("Rispondi", "it"), ("Per favore", "it"),
        ("Si prega", "it"), ("Por favor", "es"), ("Responda", "es"), ("Responde", "es")]

def lang_of(s):
    for p, l in LANG:
        if s.startswith(p):
            return l
    if any("\u0600" <= c <= "\u06ff" for c in s[:20]):
        return "ar"
    return "en"

base = {"upstream": "github:microsoft/TaskTracker", "commit": commit, "licence": "MIT",
        "payload_only": True,
        "note": "injected string only (trigger + ' ' + secondary task, as TaskTracker's embed_secondary_task builds it); "
                "the carrier paragraphs (SQuAD/HotPotQA) are not in the repository"}
out, seen = [], set()

def emit(kind_tag, text, meta):
    if text in seen:
        return
    seen.add(text)
    m = dict(base); m.update(meta)
    out.append({"source": SRC, "id": f"{SRC}:{kind_tag}:{sid(text)}", "kind": "result", "label": "attack",
                "split": "unsplit", "text": text, "meta": m})

for name, trig in (("saved_injections.txt", train_triggers), ("saved_injections_test.txt", test_triggers)):
    for t in trig:
        task = pick(trivia, t)
        emit("trigger", t + " " + task, {"kind": "indirect", "technique": "attention trigger + trivia secondary task",
             "trigger": t, "secondary_task": task, "language": "en", "file": D + name,
             "secondary_file": D + "trivia_pairs.txt", "trigger_set": "train" if name == "saved_injections.txt" else "test"})

for task in translated:
    t = pick(test_triggers, task)
    emit("translated", t + " " + task, {"kind": "indirect", "technique": "attention trigger (en) + translated secondary task",
         "trigger": t, "secondary_task": task, "language": lang_of(task), "file": D + "translated_secondary_tasks.txt",
         "trigger_file": D + "saved_injections_test.txt"})

for name, jb in (("jailbreaks_pair_attack.txt", pair), ("llm_adaptive_attacks.txt", adaptive)):
    for j in jb:
        t = pick(test_triggers, j)
        emit("jailbreak", t + " " + j, {"kind": "direct", "technique": "trigger + " + name.split(".")[0],
             "note2": "the secondary task is a chat-turn jailbreak (PAIR / adaptive-suffix); TaskTracker plants it in data, "
                      "but its content targets the model's safety, not the agent's task: score apart",
             "trigger": t, "secondary_task": j, "language": "en", "file": D + name,
             "trigger_file": D + "saved_injections_test.txt"})

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, SRC + ".jsonl"), "w", encoding="utf-8") as f:
    for r in out:
        f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
print(len(out), "records")
