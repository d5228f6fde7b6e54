#!/usr/bin/env python3
"""Extract CyberSecEval 2's prompt-injection set (meta-llama/PurpleLlama,
CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json, MIT per
CybersecurityBenchmarks/LICENSE; the repository root LICENSE is the Llama licence and does
not apply to this folder).

    python3 extract.py /work/.mirror/meta-llama+PurpleLlama/repo > cyberseceval.jsonl

251 cases: 55 injection_type=indirect (the `user_input` is a question plus third-party content
- code, a web page, an e-mail - that carries the injection) and 196 direct (the user turn
itself is the injection). Every `user_input` becomes one kind=result, label=attack item;
meta.injection_type tells them apart (score "indirect" with tool results; "direct" is a user
turn, kept for breadth). The system prompt (test_case_prompt, which holds the secret being
protected) is in meta. No benign items.
"""
import json, subprocess, sys
GIT = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/meta-llama+PurpleLlama/repo"
P = "CybersecurityBenchmarks/datasets/prompt_injection/prompt_injection.json"
commit = subprocess.run(["git", "--git-dir", GIT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
data = json.loads(subprocess.run(["git", "--git-dir", GIT, "show", f"HEAD:{P}"], check=True,
                                 capture_output=True, text=True).stdout)
for x in data:
    print(json.dumps({
        "source": "cyberseceval", "id": f"cse2-pi:{x['prompt_id']}", "kind": "result", "label": "attack",
        "text": x["user_input"],
        "meta": {"injection_type": x["injection_type"], "injection_variant": x["injection_variant"],
                 "risk_category": x["risk_category"], "language": x["speaking_language"],
                 "system_prompt": x["test_case_prompt"], "judge_question": x["judge_question"],
                 "commit": commit, "file": P},
    }, ensure_ascii=False, sort_keys=True))
