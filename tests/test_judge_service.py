"""The judge with its store: the background service the collector uses, the synchronous hybrid
annotator `import` uses, the token budget and sampling, and what `analyze` reads back (usage per
judge model, rules-vs-judge agreement), all against the loopback chat stub and chDB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_stub import ChatStub, Reply, answer

from mast_otel.analysis.judge import agreement, judge_usage
from mast_otel.annotate.base import AnnotatedRun, Evidence, Finding
from mast_otel.annotate.llm import (
    HybridAnnotator,
    JudgeConfig,
    JudgeService,
    JudgeStatus,
    LLMJudge,
    build_annotator,
)
from mast_otel.annotate.llm.policy import HourlyTokenBudget
from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.conversation.model import Conversation, Outcome, ToolCall, Turn, TurnKind
from mast_otel.store.clickhouse import ClickHouseStore
from mast_otel.taxonomy import mode

ROOT = Path(__file__).resolve().parents[1]


def config(stub: ChatStub, **sections: Any) -> JudgeConfig:
    tree: dict[str, Any] = {
        "model": "stub-judge",
        "base_url": stub.base_url,
        "request": {"timeout_s": 2.0, "max_attempts": 2, "backoff_initial_s": 0.001, "backoff_max_s": 0.01},
        "concurrency": 2,
        **sections,
    }
    return JudgeConfig.from_mapping(tree)


def conversation(trace: str, *, outcome: Outcome = Outcome.FAILURE, note: str = "") -> Conversation:
    turns = (
        Turn(0, TurnKind.USER, "user", f"Fix checkout {note}".strip(), span_id=f"{trace[:4]}0"),
        Turn(
            1,
            TurnKind.TOOL_CALL,
            "triage",
            "get_pods",
            span_id=f"{trace[:4]}1",
            tool=ToolCall("get_pods", "", "{}", "[]"),
        ),
        Turn(
            2,
            TurnKind.TOOL_CALL,
            "triage",
            "get_pods",
            span_id=f"{trace[:4]}2",
            tool=ToolCall("get_pods", "", "{}", "[]"),
        ),
        Turn(3, TurnKind.AGENT_MESSAGE, "triage", "All good now.", span_id=f"{trace[:4]}3"),
    )
    return Conversation(
        trace * (32 // len(trace)), turns, task="Fix checkout", outcome=outcome, models=("gpt-x",), start_ns=1
    )


def rule_finding(code: str, steps: tuple[int, ...] = (1, 2)) -> Finding:
    return Finding(mode(code), Evidence(steps), 0.8, "rule saw it", "rules/test")


def stored_rules_version(store: ClickHouseStore, conv: Conversation, *findings: Finding) -> AnnotatedRun:
    """What the pipeline does before it submits: store the rules' version."""
    run = AnnotatedRun(conv, findings, version=time.time_ns())
    store.insert_runs([run])
    return run


def latest_findings(store: ClickHouseStore, trace_id: str) -> set[tuple[str, str]]:
    rows = store.query(
        "SELECT Annotator, Mode FROM mast_findings WHERE TraceId = {t:String} AND Version = "
        "(SELECT max(Version) FROM mast_conversations WHERE TraceId = {t:String})",
        {"t": trace_id},
    ).rows
    return {(row[0], row[1]) for row in rows}


def usage_rows(store: ClickHouseStore) -> list[dict[str, Any]]:
    return store.query(
        "SELECT TraceId, Status, Reason, Requests, InputTokens, OutputTokens, UnknownModes"
        " FROM mast_judge_usage ORDER BY Timestamp"
    ).dicts()


def judge_service(settings: JudgeConfig, store: ClickHouseStore, **options: Any) -> JudgeService:
    """A service that writes promptly (the default batches writes over half a second)."""
    return JudgeService(settings, store, flush_interval_s=0.02, **options)


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def stub() -> Iterator[ChatStub]:
    with ChatStub() as running:
        yield running


# --- the service ----------------------------------------------------------------------------------


def test_the_service_stores_a_new_version_with_rules_and_judge_findings(
    stub: ChatStub, store: ClickHouseStore
) -> None:
    stub.responder = lambda body: Reply(answer({"FM-1.3": [1, 2], "FM-3.2": [3]}, task_completed="no"))
    run = stored_rules_version(store, conversation("a1"), rule_finding("FM-1.3"))
    service = judge_service(config(stub), store)
    service.start()
    assert service.submit(run)
    assert service.wait_idle(10)
    assert service.stop(5)

    trace = run.conversation.trace_id
    assert latest_findings(store, trace) == {
        ("rules/test", "FM-1.3"),
        ("llm/stub-judge", "FM-1.3"),
        ("llm/stub-judge", "FM-3.2"),
    }
    version = store.query(
        "SELECT max(Version) FROM mast_conversations WHERE TraceId = {t:String}", {"t": trace}
    )
    assert version.rows[0][0] > run.version
    [row] = usage_rows(store)
    assert (row["Status"], row["Requests"]) == ("judged", 1)
    assert row["InputTokens"] > 0 and row["OutputTokens"] > 0
    stats = service.stats()
    assert (stats.judged, stats.runs_written, stats.usage_rows_written) == (1, 1, 1)


def test_submit_never_judges_a_run_the_sampling_policy_leaves_out(
    stub: ChatStub, store: ClickHouseStore
) -> None:
    service = judge_service(config(stub, sampling={"other_fraction": 0.0}), store)
    service.start()
    quiet = stored_rules_version(store, conversation("b1", outcome=Outcome.SUCCESS, note="1"))
    flagged = stored_rules_version(
        store, conversation("b2", outcome=Outcome.SUCCESS, note="2"), rule_finding("FM-1.3")
    )
    failed = stored_rules_version(store, conversation("b3", outcome=Outcome.FAILURE, note="3"))
    assert service.submit(quiet) is False
    assert service.submit(flagged) is True
    assert service.submit(failed) is True
    assert service.wait_idle(10) and service.stop(5)

    rows = {row["TraceId"]: row for row in usage_rows(store)}
    assert rows[quiet.conversation.trace_id]["Status"] == "skipped_sampling"
    assert "not sampled" in rows[quiet.conversation.trace_id]["Reason"]
    assert rows[flagged.conversation.trace_id]["Status"] == "judged"
    assert rows[failed.conversation.trace_id]["Status"] == "judged"
    assert len(stub.bodies) == 2


def test_budget_exhaustion_queues_then_skips_with_a_reason_and_loses_nothing(
    stub: ChatStub, store: ClickHouseStore
) -> None:
    settings = config(stub, concurrency=1, queue_size=1, budget={"hourly_tokens": 50_000})
    budget = HourlyTokenBudget(50_000)
    assert budget.reserve(50_000) is not None  # this hour's budget is spent
    service = judge_service(settings, store, judge=LLMJudge(settings, source=store, budget=budget))
    service.start()
    runs = [
        stored_rules_version(store, conversation(f"c{n}", note=str(n)), rule_finding("FM-1.3"))
        for n in range(3)
    ]

    assert service.submit(runs[0])  # taken by the worker, which waits for budget room...
    assert wait_for(lambda: service.stats().in_progress == 1)
    assert service.submit(runs[1])  # ...so this one waits in the queue
    assert service.submit(runs[2]) is False  # and this one finds the queue full
    assert service.stop(timeout_s=0.3) is False  # it could not judge what waited

    rows = {row["TraceId"]: row for row in usage_rows(store)}
    first, second, third = (rows[run.conversation.trace_id] for run in runs)
    assert first["Status"] == "skipped_budget" and "stopped while waiting" in first["Reason"]
    assert (
        second["Status"] == "skipped_overload" and "stopped before the judge reached it" in second["Reason"]
    )
    assert third["Status"] == "skipped_budget" and "budget exhausted" in third["Reason"]
    assert stub.bodies == []  # not a token spent over budget
    stored = store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0]
    assert stored == 3  # every run is stored with its rules' findings: nothing lost
    for run in runs:
        assert latest_findings(store, run.conversation.trace_id) == {("rules/test", "FM-1.3")}


def test_a_waiting_run_is_judged_once_the_budget_window_moves_on(stub: ChatStub) -> None:
    now = [0.0]
    budget = HourlyTokenBudget(50_000, clock=lambda: now[0])
    budget.reserve(50_000)
    judge = LLMJudge(config(stub, budget={"hourly_tokens": 50_000}), budget=budget)
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        now[0] += 3601  # an hour passes
        return True

    outcome = judge.assess(conversation("d1"), sample=False, wait_for_budget=wait)
    judge.close()
    assert outcome.status is JudgeStatus.JUDGED
    assert len(waits) == 1
    assert 0 < budget.used() < 50_000  # settled to what the server reported


def test_a_run_bigger_than_the_whole_budget_is_skipped_at_once(stub: ChatStub) -> None:
    judge = LLMJudge(config(stub, budget={"hourly_tokens": 100}))
    outcome = judge.assess(conversation("e1"), sample=False, wait_for_budget=lambda s: True)
    judge.close()
    assert outcome.status is JudgeStatus.SKIPPED_BUDGET
    assert "more than the hourly budget" in outcome.reason


def test_a_full_queue_turns_runs_away_with_a_reason(stub: ChatStub, store: ClickHouseStore) -> None:
    service = judge_service(config(stub, queue_size=1), store)  # not started: nothing drains the queue
    first = stored_rules_version(store, conversation("f1"))
    second = stored_rules_version(store, conversation("f2"))
    assert service.submit(first)
    assert service.submit(second) is False
    service.start()
    assert service.wait_idle(10) and service.stop(5)
    statuses = {row["TraceId"]: row["Status"] for row in usage_rows(store)}
    assert statuses == {
        first.conversation.trace_id: "judged",
        second.conversation.trace_id: "skipped_overload",
    }


def test_a_result_for_a_superseded_version_is_not_written(stub: ChatStub, store: ClickHouseStore) -> None:
    stub.responder = lambda body: Reply(answer({"FM-2.3": [3]}))
    old = stored_rules_version(store, conversation("g1", note="before late spans"))
    new = stored_rules_version(store, conversation("g1", note="after late spans"))
    service = judge_service(config(stub), store)
    assert service.submit(old) and service.submit(new)
    service.start()
    assert service.wait_idle(10) and service.stop(5)
    assert service.stats().superseded == 1
    task = store.query(
        "SELECT Turns[1].Content FROM mast_conversations FINAL WHERE TraceId = {t:String}",
        {"t": new.conversation.trace_id},
    ).rows[0][0]
    assert task == "Fix checkout after late spans"  # the newer content won
    assert ("llm/stub-judge", "FM-2.3") in latest_findings(store, new.conversation.trace_id)


def test_stop_drains_the_queue(stub: ChatStub, store: ClickHouseStore) -> None:
    service = judge_service(config(stub), store)
    runs = [stored_rules_version(store, conversation(f"h{n}", note=str(n))) for n in range(4)]
    assert all(service.submit(run) for run in runs)
    service.start()
    assert service.stop(timeout_s=10)
    assert [row["Status"] for row in usage_rows(store)] == ["judged"] * 4


# --- the synchronous path (import) ------------------------------------------------------------------


def test_build_annotator_without_a_judge_is_the_rules_alone() -> None:
    assert isinstance(build_annotator(None), RuleAnnotator)


def test_the_hybrid_annotator_returns_both_with_provenance(stub: ChatStub, store: ClickHouseStore) -> None:
    stub.responder = lambda body: Reply(answer({"FM-2.2": [0]}))
    annotator = build_annotator(config(stub), store=store)
    assert isinstance(annotator, HybridAnnotator)
    assert annotator.name == "rules+llm/stub-judge"
    findings = annotator.annotate(conversation("i1"))
    annotator.close()
    by_source = {(f.annotator.split("/")[0], f.mode.code) for f in findings}
    assert ("llm", "FM-2.2") in by_source
    assert any(source == "rules" for source, _ in by_source)  # the rules saw the repeated call
    assert [row["Status"] for row in usage_rows(store)] == ["judged"]


def test_the_hybrid_annotator_skips_over_budget_and_keeps_the_rules(
    stub: ChatStub, store: ClickHouseStore
) -> None:
    settings = config(stub, budget={"hourly_tokens": 50_000})
    budget = HourlyTokenBudget(50_000)
    budget.reserve(50_000)
    annotator = HybridAnnotator(RuleAnnotator(), LLMJudge(settings, budget=budget), usage_store=store)
    findings = annotator.annotate(conversation("j1"))
    annotator.close()
    assert findings and all(f.annotator.startswith("rules/") for f in findings)
    [row] = usage_rows(store)
    assert row["Status"] == "skipped_budget" and "budget exhausted" in row["Reason"]
    assert stub.bodies == []


def test_a_judge_that_cannot_reach_its_endpoint_costs_no_rule_finding(store: ClickHouseStore) -> None:
    with ChatStub() as closed:
        unreachable = closed.base_url
    settings = JudgeConfig.from_mapping(
        {"model": "m", "base_url": unreachable, "request": {"timeout_s": 0.5, "max_attempts": 1}}
    )
    annotator = build_annotator(settings, store=store)
    findings = annotator.annotate(conversation("k1"))
    assert findings and all(f.annotator.startswith("rules/") for f in findings)
    [row] = usage_rows(store)
    assert row["Status"] == "failed" and "Connection" in row["Reason"]
    assert len(row["UnknownModes"]) == 14


# --- what analyze reads ------------------------------------------------------------------------------


def test_agreement_and_usage_per_judge_model(stub: ChatStub, store: ClickHouseStore) -> None:
    verdicts = {"aa": {"FM-1.3": [1, 2], "FM-3.2": [3]}, "bb": {}}

    def per_run(body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        return Reply(answer(verdicts["aa"] if "run-aa" in text else verdicts["bb"]))

    stub.responder = per_run
    service = judge_service(config(stub), store)
    service.start()
    service.submit(stored_rules_version(store, conversation("aa", note="run-aa"), rule_finding("FM-1.3")))
    service.submit(stored_rules_version(store, conversation("bb", note="run-bb")))
    assert service.wait_idle(10) and service.stop(5)

    modes = {entry.mode.code: entry for entry in agreement(store)}
    repetition = modes["FM-1.3"]
    assert (repetition.runs, repetition.rules_and_judge, repetition.neither) == (2, 1, 1)
    assert repetition.observed_agreement == 1.0 and repetition.kappa == pytest.approx(1.0)
    verification = modes["FM-3.2"]
    assert (verification.judge_only, verification.rules_only, verification.neither) == (1, 0, 1)
    assert verification.observed_agreement == 0.5 and verification.kappa == pytest.approx(0.0)
    assert modes["FM-2.1"].neither == 2 and modes["FM-2.1"].kappa is None  # nothing to agree on

    [usage] = judge_usage(store)
    assert usage.judge_model == "stub-judge"
    assert (usage.judged, usage.cached, usage.failed, usage.requests) == (2, 0, 0, 2)
    assert usage.tokens_per_judged_run is not None and usage.tokens_per_judged_run > 0
    assert usage.cache_hit_rate == 0.0


def test_analyze_agreement_on_the_command_line(tmp_path: Path) -> None:
    # A separate chDB directory, so another process (chDB opens one directory per process).
    data = tmp_path / "data"
    writer = textwrap.dedent(
        f"""
        import time
        from mast_otel.annotate.base import AnnotatedRun, Evidence, Finding
        from mast_otel.annotate.llm import JudgeStatus, JudgeUsage
        from mast_otel.conversation.model import Conversation, Outcome, Turn, TurnKind
        from mast_otel.store.clickhouse import open_store
        from mast_otel.taxonomy import mode

        store = open_store({str(data)!r})
        conv = Conversation("c" * 32, (Turn(0, TurnKind.USER, "user", "hi"),), outcome=Outcome.FAILURE,
                            models=("gpt-x",), start_ns=1)
        found = [Finding(mode("FM-1.3"), Evidence((0,)), 0.8, "x", a) for a in ("rules/r", "llm/j")]
        store.insert_runs([AnnotatedRun(conv, tuple(found), time.time_ns())])
        usage = JudgeUsage(time.time_ns(), "h", conv.trace_id, "svc", "gpt-x", "j", JudgeStatus.JUDGED,
                           requests=2, input_tokens=900, output_tokens=100, cost_usd=0.01)
        store.insert_judge_usage([usage])
        store.close()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", writer], check=True, env=env, cwd=ROOT, timeout=120)
    result = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "analyze", "--store", str(data), "--agreement", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    [usage] = document["judge_usage"]
    assert (usage["judge_model"], usage["judged"], usage["input_tokens"], usage["cost_usd"]) == (
        "j",
        1,
        900,
        0.01,
    )
    assert usage["requests_per_judged_run"] == 2.0
    assert document["agreement"]["FM-1.3"]["rules_and_judge"] == 1
    assert "models" in document
