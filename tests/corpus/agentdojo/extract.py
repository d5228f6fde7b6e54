#!/usr/bin/env python3
"""Extract AgentDojo (PyPI `agentdojo`, MIT) into the common JSON-lines format.

Needs the venv with agentdojo installed:
    /work/research/venv/bin/pip install agentdojo==0.1.35
    /work/research/venv/bin/python extract.py > agentdojo.jsonl

What it writes (suites of benchmark version v1.2.2):
  * kind=definition, label=benign: every tool of the four suites (name, description,
    inputSchema from the pydantic parameter model).
  * kind=result, label=benign: the tool outputs seen when the ground truth of every
    user task runs in the default (non-injected) environment, formatted as AgentDojo
    formats them for the model (YAML). Deduplicated by text.
  * kind=result, label=attack: for every (injection task, attack) pair, one user task is
    chosen deterministically among those whose ground truth sees an injection vector;
    the environment is injected with the attack and the ground truth is run again; every
    tool output that contains the injected payload is one item. meta.payload holds the
    injected string alone (so a detector can be scored on the bare payload too).

No model is called. Nothing is downloaded. datetime.now() in the e-mail and cloud-drive
tools is frozen at 2024-05-15 12:00 so that reruns give identical files.
"""
import hashlib
import json
import os
import sys

# set iteration order (e.g. calendar participants) must not vary between runs
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))

from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.attacks.attack_registry import ATTACKS
from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.types import get_text_content_as_str

import datetime as _dt

import agentdojo.default_suites.v1.tools.cloud_drive_client as _cdc
import agentdojo.default_suites.v1.tools.email_client as _ec


class _FixedDatetime(_dt.datetime):
    """send_email / create_file stamp datetime.now(); freeze it so the output is reproducible."""

    @classmethod
    def now(cls, tz=None):
        return _dt.datetime(2024, 5, 15, 12, 0, 0)


class _FixedDatetimeModule:
    datetime = _FixedDatetime
    date = _dt.date
    timedelta = _dt.timedelta


_ec.datetime = _FixedDatetimeModule
_cdc.datetime = _FixedDatetimeModule

VERSION = "v1.2.2"
PIPELINE_NAME = "gpt-4o-2024-05-13"  # only used to fill {model} ("GPT-4") in templates
ATTACK_NAMES = [
    "important_instructions",
    "important_instructions_no_names",
    "tool_knowledge",
    "ignore_previous",
    "system_message",
    "injecagent",
    "direct",
    "dos",
    "captcha_dos",
    "felony_dos",
]


class FakePipeline:
    name = PIPELINE_NAME


def h(s):
    return hashlib.sha256(s.encode()).hexdigest()[:12]


def emit(rec):
    sys.stdout.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")


def run_gt(suite, task, injections):
    runtime = FunctionsRuntime(suite.tools)
    env = suite.load_and_inject_default_environment(injections)
    _, _, _, msgs, _ = GroundTruthPipeline(task).query(task.PROMPT, runtime, env)
    out = []
    for m in msgs:
        if m["role"] == "tool" and m["content"] is not None:
            out.append((m["tool_call"].function, dict(m["tool_call"].args), get_text_content_as_str(m["content"])))
    return out


def main():
    suites = get_suites(VERSION)
    seen_defs = set()
    seen_benign = set()
    for sname, suite in sorted(suites.items()):
        # definitions
        for fn in suite.tools:
            key = (fn.name, fn.description)
            if key in seen_defs:
                continue
            seen_defs.add(key)
            emit({
                "source": "agentdojo",
                "id": f"agentdojo:def:{fn.name}",
                "kind": "definition",
                "label": "benign",
                "tool": {"name": fn.name, "description": fn.description,
                         "inputSchema": fn.parameters.model_json_schema()},
                "meta": {"suite": sname, "version": VERSION},
            })
        # benign results
        for ut_id, ut in sorted(suite.user_tasks.items()):
            for i, (fname, args, text) in enumerate(run_gt(suite, ut, {})):
                if not text.strip() or text in seen_benign:
                    continue
                seen_benign.add(text)
                emit({
                    "source": "agentdojo",
                    "id": f"agentdojo:benign:{sname}:{ut_id}:{i}",
                    "kind": "result",
                    "label": "benign",
                    "text": text,
                    "meta": {"suite": sname, "version": VERSION, "user_task": ut_id, "tool": fname,
                             "args": json.loads(json.dumps(args, default=str))},
                })
        # attack results
        pipeline = FakePipeline()
        attacks = {a: ATTACKS[a](suite, pipeline) for a in ATTACK_NAMES}
        injectable = []
        for ut_id, ut in sorted(suite.user_tasks.items()):
            try:
                attacks["direct"].get_injection_candidates(ut)
                injectable.append((ut_id, ut))
            except ValueError:
                pass
        n = 0
        for it_id, it in sorted(suite.injection_tasks.items()):
            for a_idx, aname in enumerate(ATTACK_NAMES):
                # deterministic rotation over the injectable user tasks
                ut_id, ut = injectable[(n * 7 + a_idx) % len(injectable)]
                n += 1
                inj = attacks[aname].attack(ut, it)
                payload = next(iter(inj.values()))
                # which outputs carry an injection: run once with canaries in the same vectors
                canaries = {v: f"<CANARY---{v}--->" for v in inj}
                carrying = {i for i, (_, _, t) in enumerate(run_gt(suite, ut, canaries))
                            if any(c in t for c in canaries.values())}
                for i, (fname, args, text) in enumerate(run_gt(suite, ut, inj)):
                    if i not in carrying:
                        continue
                    hit = [payload]
                    emit({
                        "source": "agentdojo",
                        "id": f"agentdojo:attack:{sname}:{it_id}:{aname}:{ut_id}:{i}",
                        "kind": "result",
                        "label": "attack",
                        "text": text,
                        "meta": {"suite": sname, "version": VERSION, "user_task": ut_id,
                                 "injection_task": it_id, "attack": aname, "tool": fname,
                                 "goal": it.GOAL, "payload": hit[0].strip(),
                                 "vectors": sorted(inj)},
                    })


if __name__ == "__main__":
    main()
