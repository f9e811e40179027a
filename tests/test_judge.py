"""The LLM judge against a real OpenAI-compatible HTTP server on a loopback socket (`llm_stub`).

Every test goes through the real `openai` client over real HTTP: well-formed answers, the answers
that broke agentdash's regex parser, rate limits, server errors, timeouts, refused response formats,
runs longer than the context, the verdict cache, and redaction (no secret reaches the server).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from llm_stub import ChatStub, Reply, answer, response_format_type, steps_shown, user_message

from mast_otel.annotate.llm import Detection, JudgeConfig, JudgeConfigError, JudgeStatus, LLMJudge
from mast_otel.annotate.llm.prompt import FORMAT_NOTE
from mast_otel.conversation.model import Conversation, Outcome, ToolCall, Turn, TurnKind
from mast_otel.store.clickhouse import ClickHouseStore
from mast_otel.taxonomy import CODES


def config(stub: ChatStub, **overrides: Any) -> JudgeConfig:
    tree: dict[str, Any] = {
        "model": "stub-judge",
        "base_url": stub.base_url,
        "request": {"timeout_s": 2.0, "max_attempts": 3, "backoff_initial_s": 0.001, "backoff_max_s": 0.01},
    }
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(tree.get(key), dict):
            tree[key] = {**tree[key], **value}
        else:
            tree[key] = value
    return JudgeConfig.from_mapping(tree)


class Run:
    """A conversation built turn by turn; span ids follow the step indexes."""

    def __init__(self, task: str = "Find why checkout is down and fix it") -> None:
        self.task = task
        self.turns: list[Turn] = []

    def add(self, kind: TurnKind, agent: str, content: str = "", **fields: Any) -> Run:
        index = len(self.turns)
        self.turns.append(Turn(index, kind, agent, content, span_id=f"span{index:03d}", **fields))
        return self

    def system(self, agent: str, text: str) -> Run:
        return self.add(TurnKind.SYSTEM, agent, text)

    def user(self, text: str) -> Run:
        return self.add(TurnKind.USER, "user", text)

    def say(self, agent: str, text: str) -> Run:
        return self.add(TurnKind.AGENT_MESSAGE, agent, text)

    def call(self, agent: str, tool: str, arguments: str, result: str | None, error: str = "") -> Run:
        return self.add(TurnKind.TOOL_CALL, agent, tool, tool=ToolCall(tool, "", arguments, result, error))

    def build(self, trace_id: str = "1" * 32, outcome: Outcome = Outcome.UNKNOWN) -> Conversation:
        return Conversation(trace_id, tuple(self.turns), task=self.task, outcome=outcome, models=("gpt-x",))


def small_run() -> Conversation:
    return (
        Run()
        .system("triage", "You are the triage agent of the SRE team.")
        .user("Find why checkout is down and fix it")
        .call(
            "triage", "get_pods", '{"ns": "shop"}', '{"pods": [{"name": "checkout", "status": "OOMKilled"}]}'
        )
        .call(
            "triage", "get_pods", '{"ns": "shop"}', '{"pods": [{"name": "checkout", "status": "OOMKilled"}]}'
        )
        .say("triage", "Raised the memory limit. The incident is resolved.")
        .build()
    )


@pytest.fixture
def stub() -> Iterator[ChatStub]:
    with ChatStub() as running:
        yield running


@pytest.fixture
def judge(stub: ChatStub) -> Iterator[LLMJudge]:
    built = LLMJudge(config(stub))
    yield built
    built.close()


# --- well-formed answers ---------------------------------------------------------------------------


def test_a_well_formed_answer_becomes_findings_with_evidence_and_provenance(stub: ChatStub) -> None:
    stub.script(Reply(answer({"FM-1.3": [2, 3], "FM-3.2": [4]}, task_completed="no")))
    judge = LLMJudge(config(stub))
    outcome = judge.assess(small_run(), sample=False)
    judge.close()

    assert outcome.status is JudgeStatus.JUDGED
    found = {finding.mode.code: finding for finding in outcome.findings}
    assert set(found) == {"FM-1.3", "FM-3.2"}
    assert found["FM-1.3"].evidence.step_indexes == (2, 3)
    assert found["FM-1.3"].evidence.span_ids == ("span002", "span003")
    assert found["FM-1.3"].evidence.agent == "triage"
    assert {finding.annotator for finding in outcome.findings} == {"llm/stub-judge"}
    assert outcome.verdict is not None and outcome.verdict.task_completed is Detection.NO
    assert outcome.verdict.mode("FM-2.1").detection is Detection.NO
    usage = outcome.usage
    assert (usage.requests, usage.chunks, usage.unknown_modes) == (1, 1, ())
    assert usage.input_tokens > 0 and usage.output_tokens > 0  # the server's reported usage

    body = stub.bodies[0]
    assert body["model"] == "stub-judge"
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    system = body["messages"][0]["content"]
    assert all(code in system for code in CODES)  # the definitions come from taxonomy.py


def test_the_annotator_protocol_judges_without_sampling_or_budget(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(Reply(answer({"FM-2.3": [4]})))
    findings = judge.annotate(small_run())
    assert [finding.mode.code for finding in findings] == ["FM-2.3"]
    assert judge.name == "llm/stub-judge"


# --- the answers that broke agentdash ---------------------------------------------------------------


def modes_answer(entries: Mapping[str, object], task_completed: str = "no") -> str:
    return json.dumps({"modes": dict(entries), "task_completed": task_completed})


def test_mode_names_containing_no_or_ignored_never_flip_a_verdict(judge: LLMJudge, stub: ChatStub) -> None:
    # agentdash read "2.5 Ignored Other Agent's Input: yes" and "3.2 No or Incorrect Verification: yes"
    # as "no": its regex matched the "no" inside the names. Here the verdict is the `detected` field.
    stub.script(
        Reply(
            modes_answer(
                {
                    "2.5 Ignored Other Agent's Input": {
                        "detected": "yes",
                        "steps": [4],
                        "explanation": "ignored it",
                    },
                    "3.2 No or Incorrect Verification": {
                        "detected": True,
                        "steps": ["4"],
                        "explanation": "no check",
                    },
                    "FM-1.1 Disobey task specification": {"detected": "no", "steps": [], "explanation": ""},
                }
            )
        )
    )
    outcome = judge.assess(small_run(), sample=False)
    verdict = outcome.verdict
    assert verdict is not None
    assert verdict.mode("FM-2.5").detection is Detection.YES
    assert verdict.mode("FM-3.2").detection is Detection.YES
    assert verdict.mode("FM-3.2").steps == (4,)
    assert verdict.mode("FM-1.1").detection is Detection.NO


def test_modes_missing_from_the_answer_are_unknown_not_no(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(
        Reply(
            modes_answer(
                {
                    "FM-1.3": {"detected": True, "steps": [3], "explanation": "same call twice"},
                    "FM-1.4": {"detected": False, "steps": [], "explanation": ""},
                    "etc.": "the other modes are similar",
                }
            )
        )
    )
    outcome = judge.assess(small_run(), sample=False)
    verdict = outcome.verdict
    assert outcome.status is JudgeStatus.JUDGED  # the reply was usable...
    assert verdict is not None
    assert verdict.mode("FM-1.3").detection is Detection.YES
    assert verdict.mode("FM-1.4").detection is Detection.NO
    unknown = set(CODES) - {"FM-1.3", "FM-1.4"}
    assert set(verdict.unknown_codes) == unknown  # ...but nothing it skipped reads as "no"
    assert set(outcome.usage.unknown_modes) == unknown
    assert "etc." in outcome.usage.reason


def test_a_mode_answered_twice_with_different_verdicts_is_unknown(judge: LLMJudge, stub: ChatStub) -> None:
    entries = [
        {"mode": "FM-1.3", "detected": True, "steps": [2], "explanation": "repeated"},
        {"mode": "1.3", "detected": False, "steps": [], "explanation": ""},
        {"mode": "FM-2.6", "detected": True, "steps": [3], "explanation": "a"},
        {"mode": "FM-2.6 Reasoning-action mismatch", "detected": "yes", "steps": [4], "explanation": "b"},
    ]
    stub.script(Reply(json.dumps({"modes": entries, "task_completed": "unknown"})))
    verdict = judge.assess(small_run(), sample=False).verdict
    assert verdict is not None
    assert verdict.mode("FM-1.3").detection is Detection.UNKNOWN
    assert verdict.mode("FM-2.6").detection is Detection.YES
    assert verdict.mode("FM-2.6").steps == (3, 4)  # agreeing duplicates merge their evidence


def test_json_wrapped_in_prose_and_fences_is_found(judge: LLMJudge, stub: ChatStub) -> None:
    prose = (
        f"Sure! Here is my analysis of the trace.\n```json\n{answer({'FM-3.3': [4]})}\n```\nHope it helps."
    )
    stub.script(Reply(prose))
    outcome = judge.assess(small_run(), sample=False)
    assert [finding.mode.code for finding in outcome.findings] == ["FM-3.3"]


def test_evidence_outside_the_steps_shown_is_dropped(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(Reply(answer({"FM-1.3": [3, 99, -1]})))
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.findings[0].evidence.step_indexes == (3,)
    assert "99" in outcome.usage.reason


def test_an_echoed_text_template_is_retried_and_never_read_as_no(stub: ChatStub) -> None:
    template = (
        "A. The agents ignored each other.\nB. no\nC.\n1.1 Disobey Task Specification: no\n"
        "2.5 Ignored Other Agent's Input: yes\n3.2 No or Incorrect Verification: yes\n..."
    )
    stub.responder = lambda body: Reply(template)
    judge = LLMJudge(config(stub, request={"max_attempts": 2}))
    outcome = judge.assess(small_run(), sample=False)
    judge.close()
    assert outcome.status is JudgeStatus.FAILED
    assert len(stub.bodies) == 2 == outcome.usage.requests  # retried, bounded
    assert outcome.findings == ()
    assert outcome.verdict is not None
    assert set(outcome.verdict.unknown_codes) == set(CODES)  # unknown, never "no"
    assert "invalid answer" in outcome.reason


def test_an_invalid_answer_then_a_valid_one(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(Reply("I cannot comply with the format, sorry."), Reply(answer({"FM-1.5": [4]})))
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.status is JudgeStatus.JUDGED
    assert outcome.usage.requests == 2
    assert [finding.mode.code for finding in outcome.findings] == ["FM-1.5"]


# --- endpoint trouble ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        Reply(status=429, error="Rate limit reached", headers={"retry-after": "0"}),
        Reply(status=503, error="overloaded"),
        Reply(status=500, error="internal error"),
    ],
    ids=["429", "503", "500"],
)
def test_rate_limits_and_server_errors_are_retried(judge: LLMJudge, stub: ChatStub, failure: Reply) -> None:
    stub.script(failure, failure, Reply(answer({"FM-2.2": [1]})))
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.status is JudgeStatus.JUDGED
    assert outcome.usage.requests == 3 == len(stub.bodies)
    assert [finding.mode.code for finding in outcome.findings] == ["FM-2.2"]


def test_retries_are_bounded_and_the_reason_is_kept(judge: LLMJudge, stub: ChatStub) -> None:
    stub.responder = lambda body: Reply(status=429, error="Rate limit reached")
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.status is JudgeStatus.FAILED
    assert outcome.usage.requests == 3  # max_attempts
    assert "429" in outcome.reason and "Rate limit reached" in outcome.reason


def test_a_refused_key_is_not_retried(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(Reply(status=401, error="Incorrect API key provided"))
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.status is JudgeStatus.FAILED
    assert outcome.usage.requests == 1
    assert "401" in outcome.reason


def test_a_timeout_is_retried(stub: ChatStub) -> None:
    stub.script(Reply(answer(), delay_s=5.0), Reply(answer({"FM-3.1": [4]})))
    judge = LLMJudge(config(stub, request={"timeout_s": 0.25}))
    outcome = judge.assess(small_run(), sample=False)
    judge.close()
    assert outcome.status is JudgeStatus.JUDGED
    assert outcome.usage.requests == 2
    assert [finding.mode.code for finding in outcome.findings] == ["FM-3.1"]


def test_an_endpoint_that_always_times_out_fails_the_run_with_every_mode_unknown(stub: ChatStub) -> None:
    stub.responder = lambda body: Reply(answer(), delay_s=5.0)
    judge = LLMJudge(config(stub, request={"timeout_s": 0.2, "max_attempts": 2}))
    outcome = judge.assess(small_run(), sample=False)
    judge.close()
    assert outcome.status is JudgeStatus.FAILED
    assert outcome.usage.requests == 2
    assert "timed out" in outcome.reason.lower()
    assert set(outcome.usage.unknown_modes) == set(CODES)


def test_a_server_without_json_schema_support_gets_json_mode(stub: ChatStub) -> None:
    def json_mode_only(body: dict[str, Any]) -> Reply:
        if response_format_type(body) == "json_schema":
            return Reply(status=400, error="response_format of type json_schema is not supported")
        return Reply(answer({"FM-1.2": [4]}))

    stub.responder = json_mode_only
    judge = LLMJudge(config(stub))
    first = judge.assess(small_run(), sample=False)
    second = judge.assess(Run("another task").user("hello").say("a", "bye").build(), sample=False)
    judge.close()
    assert [response_format_type(body) for body in stub.bodies] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    assert first.status is JudgeStatus.JUDGED and first.usage.requests == 2
    assert second.usage.requests == 1  # the step down sticks
    assert [finding.mode.code for finding in first.findings] == ["FM-1.2"]
    # The schema says what to answer; without it, the prompt spells the answer's shape out.
    systems = [body["messages"][0]["content"] for body in stub.bodies]
    assert FORMAT_NOTE not in systems[0]
    assert all(FORMAT_NOTE in system for system in systems[1:])


def test_the_compact_answer_becomes_findings_and_unnamed_modes_stay_unknown(
    judge: LLMJudge, stub: ChatStub
) -> None:
    not_detected = [code for code in CODES if code not in ("FM-1.3", "FM-3.3")]
    stub.script(
        Reply(
            json.dumps(
                {
                    "detected": [{"mode": "FM-1.3", "steps": [2, 3], "explanation": "asked twice"}],
                    "not_detected": not_detected,
                    "task_completed": "no",
                }
            )
        )
    )
    outcome = judge.assess(small_run(), sample=False)
    assert [finding.mode.code for finding in outcome.findings] == ["FM-1.3"]
    assert outcome.findings[0].evidence.step_indexes == (2, 3)
    assert outcome.verdict is not None and outcome.verdict.mode("FM-2.1").detection is Detection.NO
    assert outcome.usage.unknown_modes == ("FM-3.3",)  # named in neither list: unknown, never "no"


def test_every_step_stays_visible_and_the_last_steps_keep_more(stub: ChatStub) -> None:
    run = Run()
    for step in range(1, 11):
        run.say(
            f"agent{step % 2}",
            f"OPENING {step} " + f"working on part {step} of the plan. " * 80 + f"END {step}",
        )
    conversation = run.build()
    judge = LLMJudge(config(stub, context={"step_chars": 300, "end_steps": 2, "end_step_chars": 1000}))
    judge.assess(conversation, sample=False)
    judge.close()
    text = user_message(stub.bodies[0])
    lines = {
        int(match.group(1)): match.group(0) for match in re.finditer(r"^\[(\d+)\] .*$", text, re.MULTILINE)
    }
    turns = {turn.index: turn for turn in conversation.turns}
    *middle, before_last, last = sorted(turns)
    assert sorted(lines) == sorted(turns)  # every step: number, speaker, head and tail
    for index, line in lines.items():
        label = turns[index].content.split(" working")[0]
        assert line.startswith(f"[{index}] {turns[index].agent}: {label}")
        assert line.endswith(turns[index].content[-6:])
        assert len(line) <= (1000 if index in (before_last, last) else 300) + 20
    assert all(len(lines[index]) > 2 * len(lines[middle[0]]) for index in (before_last, last))  # the end


def test_a_bad_request_unrelated_to_the_format_is_not_retried(stub: ChatStub) -> None:
    stub.script(Reply(status=400, error="model 'stub-judge' does not exist"))
    judge = LLMJudge(config(stub))
    outcome = judge.assess(small_run(), sample=False)
    judge.close()
    assert outcome.status is JudgeStatus.FAILED
    assert [response_format_type(body) for body in stub.bodies] == ["json_schema"]


def test_a_200_that_is_not_a_chat_completion_is_retried_not_raised(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(
        Reply(raw_body=b"<html>502 Bad Gateway</html>"),
        Reply(raw_body=b'{"choices": []}'),
        Reply(raw_body=b"[1, 2, 3]"),
    )
    outcome = judge.assess(small_run(), sample=False)
    assert outcome.status is JudgeStatus.FAILED  # three attempts, three malformed bodies
    assert outcome.usage.requests == 3
    assert "malformed response" in outcome.reason or "invalid answer" in outcome.reason
    stub.script(Reply(raw_body=b"{truncated"), Reply(answer({"FM-1.1": [1]})))
    recovered = judge.assess(Run("other").user("hi").say("a", "done").build(), sample=False)
    assert recovered.status is JudgeStatus.JUDGED and recovered.usage.requests == 2


# --- long runs ---------------------------------------------------------------------------------------


def long_run(steps: int) -> Conversation:
    run = Run("Restore the payments service and confirm it is healthy")
    run.system("operator", "You operate the payments cluster. Never delete data.")
    run.user("Restore the payments service and confirm it is healthy")
    for step in range(steps):
        if step % 2:
            run.say("operator", f"Step {step}: checking the next shard. " + "Looking at replica lag. " * 20)
        else:
            run.call("operator", "query_metrics", f'{{"shard": {step}}}', f"shard {step} lag ok " + "x" * 500)
    run.say("operator", "FINAL: declared success without checking the payments endpoint")
    return run.build()


def test_a_run_longer_than_the_context_is_chunked_and_every_step_is_seen(stub: ChatStub) -> None:
    conversation = long_run(60)
    last = conversation.turns[-1].index

    def per_chunk(body: dict[str, Any]) -> Reply:
        shown = steps_shown(body)
        detected = {"FM-1.3": [shown[0]]} if shown[0] == 1 else {}
        if last in shown:
            detected["FM-3.2"] = [last]
        return Reply(answer(detected, task_completed="no" if last in shown else "unknown"))

    stub.responder = per_chunk
    context_tokens = 6000
    judge = LLMJudge(config(stub, context={"max_tokens": context_tokens}, request={"max_output_tokens": 600}))
    outcome = judge.assess(conversation, sample=False)
    judge.close()

    bodies = stub.bodies
    assert len(bodies) > 3  # it did not fit in one request
    assert outcome.usage.chunks == len(bodies) == outcome.usage.requests
    shown = [steps_shown(body) for body in bodies]
    every_step = {turn.index for turn in conversation.turns if turn.kind is not TurnKind.SYSTEM}
    assert set().union(*map(set, shown)) == every_step  # every step seen by some chunk
    assert shown[-1][-1] == last  # the end of the run is never what gets dropped
    assert "FINAL: declared success" in user_message(bodies[-1])
    assert all(set(a) & set(b) for a, b in itertools.pairwise(shown))  # chunks overlap
    for body in bodies:
        text = user_message(body)
        assert "Task: Restore the payments service" in text  # the task in every chunk...
        assert "You operate the payments cluster" in text  # ...and the system instructions
        characters = sum(len(message["content"]) for message in body["messages"])
        characters += len(json.dumps(body.get("response_format", {})))
        assert characters / 3.0 + 600 <= context_tokens  # within the window, by the estimate
    verdict = outcome.verdict
    assert verdict is not None and outcome.status is JudgeStatus.JUDGED
    assert verdict.mode("FM-3.2").steps == (last,)  # evidence from the last chunk
    assert verdict.mode("FM-1.3").steps == (1,)  # and from the first
    assert verdict.task_completed is Detection.NO  # from the chunk that saw the end


def test_a_repeat_pointer_only_leads_to_text_the_judge_was_shown(stub: ChatStub) -> None:
    plan = [f"plan line {n}: check the replica set and the ingress rules" for n in range(40)]
    conversation = (
        Run().say("planner", "\n".join(plan)).say("worker", "\n".join([plan[0], plan[20], plan[39]])).build()
    )
    judge = LLMJudge(config(stub, context={"step_chars": 400, "end_steps": 0}))
    judge.assess(conversation, sample=False)
    judge.close()
    worker = user_message(stub.bodies[0]).split("] worker: ")[1]
    first = conversation.turns[0].index
    assert worker.count(f"as in step {first}") == 2  # the first and last lines: the planner's head and tail
    assert plan[20] in worker  # cut from the planner's step, so shown here in full


def test_long_tool_outputs_keep_their_head_and_tail(judge: LLMJudge, stub: ChatStub) -> None:
    log = "BEGIN OF LOG " + "noise line\n" * 3000 + "ERROR: volume /data is full"
    conversation = Run().user("why does the db crash?").call("dba", "read_log", "{}", log).build()
    judge.assess(conversation, sample=False)
    text = user_message(stub.bodies[0])
    assert "BEGIN OF LOG" in text and "ERROR: volume /data is full" in text
    assert re.search(r"\[… [\d,]+ chars omitted …\]", text)
    assert len(text) < len(log) // 4


def test_a_context_too_small_for_the_prompt_is_a_config_error(stub: ChatStub) -> None:
    with pytest.raises(JudgeConfigError, match=r"context\.max_tokens"):
        LLMJudge(config(stub, context={"max_tokens": 2048}, request={"max_output_tokens": 1000}))


# --- the cache ----------------------------------------------------------------------------------------


def test_the_same_content_is_judged_once(judge: LLMJudge, stub: ChatStub) -> None:
    stub.script(Reply(answer({"FM-1.3": [2, 3]})))
    first = judge.assess(small_run(), sample=False)
    again = small_run()
    elsewhere = Conversation("2" * 32, again.turns, task=again.task, models=again.models)  # another trace
    second = judge.assess(elsewhere, sample=False)
    assert len(stub.bodies) == 1
    assert (first.status, second.status) == (JudgeStatus.JUDGED, JudgeStatus.CACHED)
    assert second.usage.requests == 0 and second.usage.input_tokens == 0
    assert [f.mode.code for f in second.findings] == ["FM-1.3"]
    assert second.usage.trace_id == "2" * 32


def test_the_cache_survives_a_restart_through_clickhouse(stub: ChatStub, store: ClickHouseStore) -> None:
    stub.script(Reply(answer({"FM-3.3": [4]})))
    before = LLMJudge(config(stub), source=store)
    judged = before.assess(small_run(), sample=False)
    before.close()
    store.insert_judge_usage([judged.usage])

    after = LLMJudge(config(stub), source=store)  # a new process: empty memory
    cached = after.assess(small_run(), sample=False)
    after.close()
    assert cached.status is JudgeStatus.CACHED
    assert len(stub.bodies) == 1
    assert [f.mode.code for f in cached.findings] == ["FM-3.3"]


def test_a_different_model_judges_afresh(stub: ChatStub, store: ClickHouseStore) -> None:
    first = LLMJudge(config(stub), source=store)
    store.insert_judge_usage([first.assess(small_run(), sample=False).usage])
    first.close()
    other = LLMJudge(config(stub, model="another-judge"), source=store)
    assert other.assess(small_run(), sample=False).status is JudgeStatus.JUDGED
    other.close()
    assert len(stub.bodies) == 2


# --- redaction ----------------------------------------------------------------------------------------

SECRETS = {
    "api key": "sk-proj-Zt8kQ2mN4pR7sV1xY3bC5dF6gH9jK0lL",
    "url password": "s3cr3t-Pa55word",
    "email": "alice.ops@example.com",
    "ipv4": "10.20.30.40",
    "ipv6": "2001:db8:85a3::8a2e:370:7334",
    "bearer": "abcdefghijklmnopqrstuvwxyz012345",
    "custom": "EMP-204981",
}


def secret_run() -> Conversation:
    return (
        Run(f"Rotate the key {SECRETS['api key']} and tell {SECRETS['email']}")
        .system("ops", f"Connect with postgres://admin:{SECRETS['url password']}@db.internal:5432/app")
        .user(f"Employee {SECRETS['custom']} reports host {SECRETS['ipv4']} is down")
        .call(
            "ops",
            "http_get",
            json.dumps({"url": f"http://[{SECRETS['ipv6']}]/health", "auth": f"Bearer {SECRETS['bearer']}"}),
            f'{{"status": 503, "contact": "{SECRETS["email"]}"}}',
            error=f"ConnectionError to {SECRETS['ipv4']}",
        )
        .say("ops", f"Mailed {SECRETS['email']} the new key {SECRETS['api key']}.")
        .build()
    )


def test_no_secret_reaches_the_server(stub: ChatStub) -> None:
    judge = LLMJudge(config(stub, redaction={"patterns": [{"name": "employee", "regex": r"EMP-\d{6}"}]}))
    outcome = judge.assess(secret_run(), sample=False)
    judge.close()
    assert outcome.status is JudgeStatus.JUDGED
    raw = b"".join(stub.raw).decode()
    sent = json.dumps(stub.bodies)
    for name, secret in SECRETS.items():
        assert secret not in raw and secret not in sent, f"the {name} reached the server"
    text = user_message(stub.bodies[0])
    for placeholder in ("<SECRET_1>", "<URL_PASSWORD_1>", "<EMAIL_1>", "<IP_1>", "<EMPLOYEE_1>"):
        assert placeholder in text
    assert text.count("<EMAIL_1>") == 3 and "<EMAIL_2>" not in text  # one value, one placeholder


def test_explanations_get_back_only_what_the_config_allows(stub: ChatStub) -> None:
    explanation = {"FM-2.4": "told <EMAIL_1> about <SECRET_1>"}
    stub.responder = lambda body: Reply(answer({"FM-2.4": [4]}, explanations=explanation))
    strict = LLMJudge(config(stub))
    restoring = LLMJudge(config(stub, redaction={"restorable": ["email"]}))
    kept = strict.assess(secret_run(), sample=False).findings[0].explanation
    restored = restoring.assess(secret_run(), sample=False).findings[0].explanation
    strict.close()
    restoring.close()
    assert kept == "told <EMAIL_1> about <SECRET_1>"
    assert restored == f"told {SECRETS['email']} about <SECRET_1>"  # secrets never come back
