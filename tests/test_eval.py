"""Blame against the Who&When human labels: exact step comparison, random baselines, the shared logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mast_otel.annotate.base import Blame
from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.cli import main
from mast_otel.evaluation import AttributionCase, evaluate_who_and_when, same_agent
from mast_otel.importers.who_and_when import LABEL_AGENT, LABEL_STEP, AttributionLabel
from mast_otel.taxonomy import CODES

FIXTURES = Path(__file__).parent / "fixtures" / "who_and_when_small"
# The benchmark's algorithm-generated half, shared beside the project (CI has it too).
SHARED_LOGS = Path(__file__).parents[2] / "shared" / "data" / "who_and_when" / "algorithm_generated"


def case(blamed_agent: str, blamed_step: int, label_agent: str, label_step: int) -> AttributionCase:
    blame = Blame(blamed_agent, blamed_step, "", None, 0.5, "")
    return AttributionCase(Path("x.json"), AttributionLabel(label_agent, label_step), blame, 4, 20, ())


def test_steps_compare_as_numbers_not_substrings() -> None:
    assert not case("A", 12, "A", 1).step_correct  # the benchmark's own script would count this
    assert case("A", 12, "A", 12).step_correct
    assert case("A", 11, "A", 12).step_within_1 and not case("A", 10, "A", 12).step_within_1


def test_agents_compare_by_bare_name_ignoring_case() -> None:
    assert same_agent("Orchestrator (thought)", "orchestrator")
    assert same_agent("WebSurfer", "WebSurfer")
    assert not same_agent("WebSurfer", "Orchestrator")
    assert not same_agent("Data_Expert", "DataVerification_Expert")


def test_scores_and_random_baselines_on_the_small_fixtures() -> None:
    scores = evaluate_who_and_when([FIXTURES], RuleAnnotator())
    logs = [json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*.json"))]
    assert scores.runs == len(logs) and not scores.skipped
    speakers = [{entry.get("name") or entry["role"] for entry in log["history"]} for log in logs]
    assert scores.random_agent_accuracy == pytest.approx(sum(1 / len(s) for s in speakers) / len(logs))
    assert scores.random_step_accuracy == pytest.approx(
        sum(1 / len(log["history"]) for log in logs) / len(logs)
    )
    right = sum(case.agent_correct for case in scores.cases)
    assert scores.agent_accuracy == pytest.approx(right / len(logs))
    assert list(scores.mode_runs) == list(CODES)


def test_unlabelled_and_unreadable_logs_are_skipped_and_reported(tmp_path: Path) -> None:
    unlabelled = json.loads((FIXTURES / "ag2_small.json").read_text())
    del unlabelled[LABEL_AGENT], unlabelled[LABEL_STEP]
    (tmp_path / "unlabelled.json").write_text(json.dumps(unlabelled))
    (tmp_path / "broken.json").write_text("[")
    scores = evaluate_who_and_when([tmp_path], RuleAnnotator())
    assert scores.runs == 0
    assert sorted(error.path.name for error in scores.skipped) == ["broken.json", "unlabelled.json"]


def test_the_eval_command_prints_the_scores_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "who-and-when", str(FIXTURES), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert list(scores) == [
        "runs",
        "agent_accuracy",
        "step_accuracy",
        "step_accuracy_within_1",
        "random_agent_accuracy",
        "random_step_accuracy",
    ]
    assert scores["runs"] == len(list(FIXTURES.glob("*.json")))


def test_the_eval_command_prints_tables_with_mode_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "who-and-when", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert "random" in out and "FM-1.1" in out and "FM-3.3" in out


def test_blame_beats_random_on_the_shared_algorithm_generated_logs() -> None:
    assert SHARED_LOGS.is_dir(), f"the shared Who&When logs are expected at {SHARED_LOGS}"
    scores = evaluate_who_and_when([SHARED_LOGS], RuleAnnotator())
    assert scores.runs == 126 and not scores.skipped
    assert scores.agent_accuracy > scores.random_agent_accuracy + 0.15
    assert scores.step_accuracy > scores.random_step_accuracy + 0.15
    assert scores.step_accuracy_within_1 >= scores.step_accuracy
