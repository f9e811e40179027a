"""SDK -> OTLP/gRPC -> collector -> chDB -> analyze, with exact counts and turn-by-turn content."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mast_otel import sdk
from mast_otel.analysis import compute_profiles, profiles_to_json
from mast_otel.collector.service import Collector

TASK = "Alert CheckoutErrors firing: find the root cause."


@pytest.fixture
def collector(collector: Collector) -> Iterator[Collector]:
    """The shared test collector, with our SDK sending to it."""
    sdk.configure(service_name="e2e-agent", endpoint=collector.grpc_endpoint, insecure=True, set_global=False)
    yield collector
    sdk.shutdown()


def run_agent(model: str, outcome: str | None, repeat_checks: int = 1) -> str:
    with sdk.agent_run("triage", model=model, task=TASK, task_id="INC-1") as run:
        with run.chat(input_messages=[{"role": "user", "content": TASK}]) as call:
            call.set_response(
                reasoning="Look at the pods first.",
                tool_calls=[{"id": "c1", "name": "get_pods", "arguments": {"ns": "shop"}}],
                input_tokens=100,
                output_tokens=10,
            )
        for _ in range(repeat_checks):
            with run.tool_call("get_pods", arguments={"ns": "shop"}, call_id="c1") as tool:
                tool.set_result({"checkout": "CrashLoopBackOff"})
        run.message("Root cause: checkout is crash-looping after the 14:02 deploy.")
        if outcome:
            run.set_outcome(outcome, score=1.0 if outcome == "success" else 0.0)
        return run.trace_id


def test_round_trip_exact_counts(collector: Collector) -> None:
    late = run_agent("m1", None)
    for outcome in ("success", "success", "failure"):
        run_agent("m1", outcome)
    run_agent("m2", "failure", repeat_checks=3)  # three identical calls: step repetition
    run_agent("m2", "success")
    sdk.record_outcome(late, "failure", score=0.2)  # a grader, after the run ended
    assert sdk.force_flush()
    assert collector.wait_idle(30)

    report = profiles_to_json(compute_profiles(collector.store))
    models = {m["model"]: m for m in report["models"]}
    assert sorted(models) == ["m1", "m2"]
    assert (models["m1"]["runs"], models["m1"]["success_rate"]) == (4, 0.5)  # the late verdict counts
    assert (models["m2"]["runs"], models["m2"]["success_rate"]) == (2, 0.5)
    assert models["m2"]["modes"]["FM-1.3"]["failure_prevalence"] == 1.0
    assert models["m2"]["modes"]["FM-1.3"]["success_prevalence"] == 0.0
    assert models["m1"]["modes"]["FM-1.3"]["failure_prevalence"] == 0.0
    spans = collector.store.query("SELECT count() FROM otel_traces").rows[0][0]
    assert spans == 6 * 4 + 2 + 1  # 6 runs of 4 spans (root, chat, tool, message), 2 repeats, 1 grader


def test_stored_conversation_matches_what_the_agent_did(collector: Collector) -> None:
    trace_id = run_agent("m1", "success")
    assert sdk.force_flush()
    assert collector.wait_idle(30)
    rows = collector.store.query(
        "SELECT Task, RootAgent, Model, Outcome, TurnCount, ToolCallCount, InputTokens,"
        " Turns.Kind, Turns.Agent, Turns.Content"
        " FROM mast_conversations FINAL WHERE TraceId = {t:String}",
        {"t": trace_id},
    ).rows
    [(task, agent, model, outcome, turn_count, tool_calls, tokens, kinds, agents, contents)] = rows
    assert (task, agent, model, outcome, tool_calls, tokens) == (TASK, "triage", "m1", "success", 1, 100)
    assert list(kinds) == ["user", "reasoning", "tool_call", "agent_message"] and turn_count == 4
    assert list(agents) == ["user", "triage", "triage", "triage"]
    assert contents[0] == TASK and contents[1] == "Look at the pods first."
    assert contents[2].startswith("get_pods(") and "shop" in contents[2]
    assert contents[3] == "Root cause: checkout is crash-looping after the 14:02 deploy."


def test_demo_command_end_to_end(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mast_otel.cli",
            "demo",
            "--runs",
            "60",
            "--seed",
            "3",
            "--json",
            "--data",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    models = {m["model"]: m for m in json.loads(result.stdout)["models"]}
    assert sum(m["runs"] for m in models.values()) == 60
    assert len(models) == 3
    # The profiles' signatures: the cascading model fails with more modes than the overconfident one.
    cascading = next(m for name, m in models.items() if "cascading" in name)
    overconfident = next(m for name, m in models.items() if "overconfident" in name)
    assert cascading["modes_per_failed_run"] > overconfident["modes_per_failed_run"]
    # Same seed, same analysis: the demo is deterministic.
    again = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "demo", "--runs", "60", "--seed", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert rounded(json.loads(again.stdout)) == rounded(json.loads(result.stdout))


def rounded(value: object) -> object:
    """Sums of floats may differ in the last bits with ClickHouse's merge order."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def test_demo_refuses_a_used_directory(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "demo", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "empty directory" in result.stderr
