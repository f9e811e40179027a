"""Judge benchmark: tokens sent per run by the MAST judge vs a whole-trace prompt in agentdash's style.

Runs on the shared Who&When logs (126 real multi-agent runs, read by the `who-and-when` importer)
against the loopback OpenAI-compatible stub of the tests (`tests/llm_stub.py`): no LLM is involved,
so the figures are about what is *sent*, which the stub records byte for byte, not about answers.

- baseline: agentdash's approach, one request per run carrying the whole trace verbatim between its
  instructions, an answer template and the mode definitions (rebuilt here in the same shape, with
  the definitions from `taxonomy.py`).
- judge, every run judged: the default config (32k context); every Who&When run has failed, and the
  sampling policy judges every failed run, so here only compaction saves tokens.
- judge, full definitions: the same, with `definitions: full` (the paper's definitions instead of
  the one-line gists of the default prompt), to show what the shorter prompt saves.
- judge, small context (4k tokens, 800 of them for the answer): the same runs forced into chunks, to
  show chunking on real data.
- judge with sampling: the same runs as the collector sees them when the grader reports later
  (outcome unknown at judge time): judged when a rule fired, else 10% by content hash.
- replay: the same runs a second time (a re-import, a collector replaying its spool): cache hits.

Tokens are estimated the same way on both sides: one function (`sent_characters`) reads the request
bodies, the judge's as the stub received them and the baseline's as agentdash would send it, and
counts the message texts plus the response format (the judge's JSON schema travels with every
request; agentdash sends none), at 4 characters per token (the stub's accounting). Coverage is read
back from the requests the stub received: every step of every judged run must appear in some
request, and the last step in the run's last request.

    python bench/judge.py --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from llm_stub import ChatStub, steps_shown  # noqa: E402

from mast_otel.annotate.llm import JudgeConfig, JudgeStatus, LLMJudge  # noqa: E402
from mast_otel.annotate.rules import RuleAnnotator  # noqa: E402
from mast_otel.conversation.model import Conversation, Outcome, TurnKind  # noqa: E402
from mast_otel.importers.who_and_when import read_log  # noqa: E402
from mast_otel.taxonomy import MODES  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "who_and_when" / "algorithm_generated"
CHARS_PER_TOKEN = 4


def tokens(characters: int) -> float:
    return characters / CHARS_PER_TOKEN


def agentdash_style_prompt(conversation: Conversation) -> str:
    """One user message: instructions, the answer template, the whole trace, the definitions."""
    template = "\n".join(f"{m.number} {m.name}: <yes or no>" for m in MODES)
    example = "\n".join(f"{m.number} no" for m in MODES)
    trace = "\n".join(f"{turn.agent}: {turn.content}" for turn in conversation.turns)
    definitions = "\n".join(f"{m.number} {m.name}: {m.definition}" for m in MODES)
    return (
        "Below is a multi-agent system trace. Analyse the system's behaviour and tell me, as a binary "
        "yes or no, whether you encounter each of the failure modes and inefficiencies listed below. "
        "Give a one-sentence summary of the problems, and say whether the task was completed, yes or no. "
        "Only mark a failure mode if you can give an example of it from the trace. The definitions of "
        "the failure modes follow the trace. Answer between the @@ signs, in this form:\n@@\n"
        "A. Freeform summary of the problems: <summary>\nB. Task completed: <yes or no>\nC. Failure modes:\n"
        f"{template}\n@@\nAn example answer:\nA. The agents derailed and the verifier missed it.\nB. no\nC.\n"
        f"{example}\nHere is the trace:\nQuestion: {conversation.task}\n{trace}\n"
        f"Here are the definitions of the failure modes:\n{definitions}\n"
    )


def agentdash_style_request(conversation: Conversation) -> dict[str, Any]:
    """The request body agentdash sends: one user message, no response format."""
    return {"messages": [{"role": "user", "content": agentdash_style_prompt(conversation)}]}


def sent_characters(body: dict[str, Any]) -> int:
    """What a request sends: its messages' texts and its response format (the JSON schema)."""
    characters = sum(len(message.get("content") or "") for message in body["messages"])
    if "response_format" in body:
        characters += len(json.dumps(body["response_format"]))
    return characters


@dataclass
class Pass:
    """The judge's requests for a set of runs, with what each run cost and which steps it showed."""

    characters: list[int]
    requests: list[int]
    statuses: list[JudgeStatus]
    steps_covered: int = 0
    steps_total: int = 0
    last_steps_covered: int = 0
    judged: int = 0

    def summary(self, runs: int, baseline_characters: Sequence[int]) -> dict[str, Any]:
        judged = [
            (sent, base)
            for sent, base, status in zip(self.characters, baseline_characters, self.statuses, strict=True)
            if status is JudgeStatus.JUDGED
        ]
        ratios = [sent / base for sent, base in judged]
        return {
            "runs": runs,
            "judged_runs": self.judged,
            "tokens_per_run": round(tokens(sum(self.characters)) / runs, 1),
            "ratio_vs_baseline": round(sum(self.characters) / sum(baseline_characters), 3),
            "median_ratio_of_judged_runs": round(statistics.median(ratios), 3) if ratios else None,
            "requests_per_judged_run": round(sum(self.requests) / max(1, self.judged), 2),
            "max_requests_per_run": max(self.requests, default=0),
            "steps_covered": round(self.steps_covered / max(1, self.steps_total), 4),
            "last_steps_covered": round(self.last_steps_covered / max(1, self.judged), 4),
        }


def judge_pass(
    stub: ChatStub, judge: LLMJudge, conversations: Sequence[Conversation], *, sample: bool
) -> Pass:
    rules = RuleAnnotator()
    result = Pass([], [], [])
    for conversation in conversations:
        first_request = len(stub.bodies)
        outcome = judge.assess(conversation, rules.annotate(conversation), sample=sample)
        bodies = stub.bodies[first_request:]
        result.characters.append(sum(sent_characters(body) for body in bodies))
        result.requests.append(len(bodies))
        result.statuses.append(outcome.status)
        if outcome.status is not JudgeStatus.JUDGED:
            continue
        result.judged += 1
        steps = {turn.index for turn in conversation.turns if turn.kind is not TurnKind.SYSTEM}
        seen = {step for body in bodies for step in steps_shown(body)}
        result.steps_total += len(steps)
        result.steps_covered += len(steps & seen)
        result.last_steps_covered += int(bodies and max(steps) in steps_shown(bodies[-1]))
    return result


def judge_config(stub: ChatStub, **sections: Any) -> JudgeConfig:
    return JudgeConfig.from_mapping({"model": "bench-judge", "base_url": stub.base_url, **sections})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the Who&When JSON logs")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    files = sorted(args.data.glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else p.stem)
    if not files:
        parser.error(f"no Who&When logs in {args.data}")
    conversations = [read_log(path).conversation for path in files]
    baseline = [sent_characters(agentdash_style_request(conversation)) for conversation in conversations]
    runs = len(conversations)
    report: dict[str, Any] = {
        "runs": runs,
        "failed_runs": sum(c.outcome is Outcome.FAILURE for c in conversations),
        "steps": sum(len(c.turns) for c in conversations),
        "baseline_tokens_per_run": round(tokens(sum(baseline)) / runs, 1),
    }
    with ChatStub() as stub:
        judge = LLMJudge(judge_config(stub))
        every = judge_pass(stub, judge, conversations, sample=True)
        report["every_failed_run_judged"] = every.summary(runs, baseline)
        # What every request carries whatever the run: definitions, rules, the JSON schema.
        first = stub.bodies[0]
        fixed = len(first["messages"][0]["content"]) + len(json.dumps(first.get("response_format", {})))
        report["judge_fixed_tokens_per_request"] = round(tokens(fixed), 1)
        before = len(stub.bodies)
        replay = judge_pass(stub, judge, conversations, sample=True)
        report["replay"] = {
            "cache_hit_rate": round(replay.statuses.count(JudgeStatus.CACHED) / runs, 3),
            "requests": len(stub.bodies) - before,
        }
        judge.close()

        full = LLMJudge(judge_config(stub, definitions="full"))
        report["every_failed_run_judged_full_definitions"] = judge_pass(
            stub, full, conversations, sample=True
        ).summary(runs, baseline)
        full.close()

        small = LLMJudge(judge_config(stub, context={"max_tokens": 4096}, request={"max_output_tokens": 800}))
        chunked = judge_pass(stub, small, conversations, sample=True)
        report["context_4k"] = chunked.summary(runs, baseline)
        small.close()

        sampled = LLMJudge(judge_config(stub))
        unknown = [replace(c, outcome=Outcome.UNKNOWN) for c in conversations]
        sampling = judge_pass(stub, sampled, unknown, sample=True)
        report["sampled_outcome_unknown"] = sampling.summary(runs, baseline)
        sampled.close()

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
