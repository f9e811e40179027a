"""Blame: which agent and step a failed run's decisive error is pinned on, why, and where it is stored."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mast_otel.analysis.blame import blame_to_json, compute_blame
from mast_otel.annotate.base import AnnotatedRun, Blame
from mast_otel.annotate.blame import FALLBACK_CONFIDENCE, assign_blame
from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.annotate.run import annotate_run
from mast_otel.conversation.model import Conversation, Outcome, ToolCall, Turn, TurnKind
from mast_otel.store.clickhouse import ClickHouseStore


class Run:
    """A conversation built turn by turn; steps count from 0, span ids follow them."""

    def __init__(self, task: str = "Find why checkout in namespace shop is slow") -> None:
        self.task = task
        self.turns: list[Turn] = []

    def _add(self, kind: TurnKind, agent: str, **fields: Any) -> Run:
        index = len(self.turns)
        self.turns.append(Turn(index=index, kind=kind, agent=agent, span_id=f"span{index:02d}", **fields))
        return self

    def user(self, text: str) -> Run:
        return self._add(TurnKind.USER, "user", content=text)

    def say(self, agent: str, text: str) -> Run:
        return self._add(TurnKind.AGENT_MESSAGE, agent, content=text)

    def think(self, agent: str, text: str) -> Run:
        return self._add(TurnKind.REASONING, agent, content=text)

    def call(
        self, agent: str, name: str, arguments: str = "{}", result: str | None = "ok", error: str = ""
    ) -> Run:
        return self._add(
            TurnKind.TOOL_CALL, agent, content=name, tool=ToolCall(name, "", arguments, result, error)
        )

    def build(self, outcome: Outcome = Outcome.FAILURE) -> Conversation:
        return Conversation(
            trace_id="b" * 32, turns=tuple(self.turns), task=self.task, outcome=outcome, root_agent="sre"
        )


def blame_of(conversation: Conversation) -> Blame:
    run = annotate_run(conversation, RuleAnnotator())
    assert run.blame is not None
    return run.blame


def test_successful_runs_get_no_blame() -> None:
    run = Run().call("sre", "check_health", error="TimeoutError").say("sre", "The service is healthy.")
    assert annotate_run(run.build(Outcome.SUCCESS), RuleAnnotator()).blame is None


def test_runs_of_unknown_outcome_get_blame_only_with_findings() -> None:
    clean = Run().user("Why is checkout slow?").call("sre", "get_pods").say("sre", "The pods look fine.")
    assert annotate_run(clean.build(Outcome.UNKNOWN), RuleAnnotator()).blame is None
    troubled = Run().call("sre", "check_health", error="TimeoutError").say("sre", "The service is healthy.")
    blame = blame_of(troubled.build(Outcome.UNKNOWN))
    assert blame.step_index == 0
    assert blame.mode is not None and blame.mode.code == "FM-3.3"  # the finding that points there


def test_a_failed_call_is_blamed_on_the_call_itself() -> None:
    run = (
        Run()
        .think("sre", "The pods look fine; I will restart the deployment to be safe.")
        .call("sre", "restart_deployment", '{"name": "checkout"}', result=None, error="Forbidden")
        .say("sre", "I could not restart it.")
    )
    blame = blame_of(run.build())
    assert (blame.agent, blame.step_index, blame.span_id) == ("sre", 1, "span01")
    assert "Forbidden" in blame.explanation
    assert blame.confidence > FALLBACK_CONFIDENCE


def test_code_run_by_an_executor_is_blamed_on_the_message_that_wrote_it() -> None:
    code = "```python\nprint(table[42])\n```"
    run = (
        Run()
        .say("planner", "Let us look the element up.")
        .say("coder", f"Here is the lookup:\n{code}")
        .call("coder", "executor", "print(table[42])", result="KeyError: 42", error="exit code 1")
        .say("checker", "It appears the table has no entry 42.")
    )
    blame = blame_of(run.build())
    assert (blame.agent, blame.step_index) == ("coder", 1)


def test_a_reaction_blames_the_step_it_reacts_to() -> None:
    run = (
        Run()
        .say("searcher", "I searched the archive; the 2019 report lists 12 stores in Ohio.")
        .say("checker", "It seems the report does not cover Ohio at all; the figure is wrong.")
        .say("searcher", "Then the answer is 12.")
    )
    blame = blame_of(run.build())
    assert (blame.agent, blame.step_index) == ("searcher", 0)
    assert blame.mode is None  # structure alone located it
    assert "reacts at step 1" in blame.explanation


def test_the_earliest_cause_wins_with_the_finding_that_points_there() -> None:
    run = (
        Run("Compute the mean of the values in data.csv")
        .say("analyst", "I cannot access data.csv, so let's assume we have the values 3, 5 and 8.")
        .call("analyst", "python", '{"code": "mean([3, 5, 8])"}', result="5.33")
        .call("analyst", "write_report", '{"mean": 5.33}', result=None, error="PermissionError")
        .say("analyst", "The mean is 5.33.")
    )
    blame = blame_of(run.build())
    assert blame.step_index == 0
    assert blame.mode is not None and blame.mode.code in {"FM-1.1", "FM-2.2"}


def test_without_any_trouble_the_first_step_of_work_is_blamed_weakly() -> None:
    task = "What is the capital of the smallest country in Europe by area?"
    run = (
        Run(task)
        .say("planner", f"General task: {task} Plan: identify the country, then its capital.")
        .say("geographer", "The smallest country in Europe is Monaco, so the capital is Monaco.")
        .say("checker", "Agreed, Monaco.")
    )
    blame = blame_of(run.build())
    assert (blame.agent, blame.step_index) == ("geographer", 1)  # the restated task is not work
    assert blame.confidence == pytest.approx(FALLBACK_CONFIDENCE)


def test_stock_replies_of_the_machinery_are_never_blamed() -> None:
    stock = "There is no code from the last 1 message for me to execute."
    run = (
        Run()
        .say("executor", stock)
        .say("solver", "The answer is 7.")
        .say("executor", stock)
        .say("solver", "Final answer: 7.")
    )
    assert blame_of(run.build()).agent == "solver"


def test_assign_blame_works_without_findings_and_without_steps() -> None:
    run = Run().call("sre", "check_health", error="TimeoutError")
    blame = assign_blame(run.build(), ())
    assert blame is not None and blame.step_index == 0 and blame.mode is None
    assert assign_blame(Run().user("hello").build(), ()) is None  # no agent ever acted


def test_blame_confidence_is_bounded() -> None:
    with pytest.raises(ValueError, match="confidence"):
        Blame("a", 0, "", None, 1.5, "x")


def test_blame_is_stored_and_summarised_per_model(store: ClickHouseStore) -> None:
    def failed(trace: str, agent: str, step: int, mode: bool) -> AnnotatedRun:
        run = Run().call(agent, "check_health", error="TimeoutError").say(agent, "It is healthy.")
        conversation = dataclasses.replace(run.build(), trace_id=trace * 32, models=("m1",), start_ns=10**18)
        annotated = annotate_run(conversation, RuleAnnotator(), version=1)
        assert annotated.blame is not None
        blame = dataclasses.replace(annotated.blame, agent=agent, step_index=step)
        if not mode:
            blame = dataclasses.replace(blame, mode=None)
        return dataclasses.replace(annotated, blame=blame)

    store.insert_runs([failed("1", "sre", 0, True), failed("2", "sre", 0, False), failed("3", "db", 2, True)])
    rows = store.query(
        "SELECT BlameAgent, BlameStep, BlameSpanId, BlameMode, BlameConfidence > 0, BlameExplanation != '' "
        "FROM mast_conversations FINAL ORDER BY TraceId"
    ).rows
    assert rows == (
        ("sre", 0, "span00", "FM-3.3", 1, 1),
        ("sre", 0, "span00", "", 1, 1),
        ("db", 2, "span00", "FM-3.3", 1, 1),
    )
    (summary,) = compute_blame(store)
    assert summary.key == "m1"
    assert [(s.value, s.failed_runs) for s in summary.agents] == [("sre", 2), ("db", 1)]
    assert [(s.value, s.failed_runs) for s in summary.steps] == [("0", 2), ("2", 1)]
    assert [(s.value, s.failed_runs) for s in summary.modes] == [("FM-3.3", 2), ("structural", 1)]
    assert summary.agents[0].share == pytest.approx(2 / 3)
    assert blame_to_json([summary])["blame"]["m1"]["agents"][0] == {
        "value": "sre",
        "failed_runs": 2,
        "share": pytest.approx(0.6667),
    }


def test_runs_without_blame_store_no_blame(store: ClickHouseStore) -> None:
    conversation = dataclasses.replace(
        Run().call("sre", "get_pods").build(Outcome.SUCCESS), trace_id="4" * 32
    )
    store.insert_runs([annotate_run(conversation, RuleAnnotator(), version=1)])
    rows = store.query("SELECT BlameAgent, BlameStep, BlameMode FROM mast_conversations FINAL").rows
    assert rows == (("", -1, ""),)
