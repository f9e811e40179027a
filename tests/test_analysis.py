"""Failure profiles from real chDB, checked against numbers worked out by hand from a small fleet.

The fleet (findings per run; "unknown" runs count as runs but in no rate):

    alpha  a1 success score 1.0 {1.3}        beta  b1 success {1.3}
           a2 success score 0.5 {}                 b2 success {}
           a3 failure score 0.0 {1.3, 3.3}         b3 failure {1.3, 3.2}
           a4 failure           {3.3, 1.5, 2.6}    b4 unknown {3.3}
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from rich.console import Console

from mast_otel.analysis import Dimension, compute_profiles, profiles_to_json, render_profiles
from mast_otel.analysis.profiles import GroupProfile
from mast_otel.analysis.queries import GROUP_SUMMARY_SQL, parameters
from mast_otel.analysis.render import NO_RUNS
from mast_otel.annotate.base import AnnotatedRun, Evidence, Finding
from mast_otel.conversation.model import Conversation, Outcome, OutcomeReport, Turn, TurnKind
from mast_otel.store.clickhouse import ClickHouseStore, open_store
from mast_otel.taxonomy import CODES, mode

START = 1_700_000_000_000_000_000
DAY = 86_400 * 10**9


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[ClickHouseStore]:
    opened = open_store(chdb_dir, database=database)
    yield opened
    opened.close()


def trace(name: str) -> str:
    return name.encode().hex().rjust(32, "0")


def run(
    name: str,
    model: str,
    outcome: Outcome,
    codes: tuple[str, ...],
    *,
    score: float | None = None,
    version: int = 1,
    agent: str = "triage",
    service_version: str = "1.0",
    start_ns: int = START,
    annotator: str = "rules/test",
) -> AnnotatedRun:
    conversation = Conversation(
        trace_id=trace(name),
        turns=(
            Turn(0, TurnKind.USER, "user", "fix checkout"),
            Turn(1, TurnKind.AGENT_MESSAGE, agent, "done"),
        ),
        service_name=f"svc-{model}",
        root_agent=agent,
        agents=(agent,),
        models=(model,),
        start_ns=start_ns,
        end_ns=start_ns + 10**9,
        outcome=outcome,
        score=score,
        attributes={"service.version": service_version},
    )
    findings = tuple(
        Finding(mode(code), Evidence((1,), ("s1",), agent), 0.9, f"{code} in {name}", annotator)
        for code in codes
    )
    return AnnotatedRun(conversation, findings, version)


S, F, U = Outcome.SUCCESS, Outcome.FAILURE, Outcome.UNKNOWN
FLEET = (
    run("a1", "alpha", S, ("FM-1.3",), score=1.0, service_version="1.0"),
    run("a2", "alpha", S, (), score=0.5, service_version="2.0", agent="fixer"),
    run("a3", "alpha", F, ("FM-1.3", "FM-3.3"), score=0.0, service_version="1.0"),
    run("a4", "alpha", F, ("FM-3.3", "FM-1.5", "FM-2.6"), service_version="2.0", agent="fixer"),
    run("b1", "beta", S, ("FM-1.3",), service_version="1.0"),
    run("b2", "beta", S, (), service_version="2.0"),
    run("b3", "beta", F, ("FM-1.3", "FM-3.2"), service_version="2.0"),
    run("b4", "beta", U, ("FM-3.3",), service_version="2.0"),
    # A second annotator agreeing on a mode must not count it twice.
    run("a4", "alpha", F, ("FM-3.3",), service_version="2.0", agent="fixer", annotator="llm/judge"),
)


def fleet(*replacing: AnnotatedRun) -> list[AnnotatedRun]:
    """The fleet; the second annotator's findings of a4 are folded into its single run."""
    a4 = FLEET[3]
    merged = AnnotatedRun(a4.conversation, a4.findings + FLEET[8].findings, a4.version)
    return [merged if r is a4 else r for r in FLEET[:8]] + list(replacing)


def by_key(profiles: list[GroupProfile]) -> dict[str, GroupProfile]:
    return {profile.key: profile for profile in profiles}


def test_profiles_per_model_match_the_hand_computed_numbers(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    profiles = compute_profiles(store)
    assert [p.key for p in profiles] == ["alpha", "beta"]
    alpha, beta = profiles
    assert (alpha.runs, alpha.successes, alpha.failures) == (4, 2, 2)
    assert (alpha.success_rate, alpha.mean_score, alpha.modes_per_failed_run) == (0.5, 0.5, 2.5)
    assert (beta.runs, beta.successes, beta.failures) == (4, 2, 1)
    assert beta.success_rate == pytest.approx(2 / 3, rel=1e-15)
    assert (beta.mean_score, beta.modes_per_failed_run) == (None, 2.0)

    assert [m.mode.code for m in alpha.modes] == list(CODES)
    prevalence = {
        m.mode.code: (m.success_prevalence, m.failure_prevalence, m.relative_increase) for m in alpha.modes
    }
    assert prevalence["FM-1.3"] == (0.5, 0.5, 0.0)
    assert prevalence["FM-3.3"] == (0.0, 1.0, None)  # never in a successful run: no ratio
    assert prevalence["FM-1.5"] == prevalence["FM-2.6"] == (0.0, 0.5, None)
    assert prevalence["FM-1.1"] == (0.0, 0.0, None)
    assert (alpha.mode("FM-3.3").successes_with_mode, alpha.mode("FM-3.3").failures_with_mode) == (0, 2)

    assert (beta.mode("FM-1.3").success_prevalence, beta.mode("FM-1.3").failure_prevalence) == (0.5, 1.0)
    assert beta.mode("FM-1.3").relative_increase == 1.0
    assert beta.mode("FM-3.2").failure_prevalence == 1.0
    # b4's outcome is unknown: its mode counts in neither column.
    assert (beta.mode("FM-3.3").successes_with_mode, beta.mode("FM-3.3").failures_with_mode) == (0, 0)
    assert beta.mode("FM-3.3").prior is mode("FM-3.3").prior


def test_reannotation_with_a_higher_version_replaces_the_old_findings(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    # a3 re-annotated: FM-1.3 withdrawn. Then the old version arrives once more, late.
    store.insert_runs([run("a3", "alpha", F, ("FM-3.3",), score=0.0, version=2)])
    store.insert_runs([FLEET[2]])
    alpha = by_key(compute_profiles(store))["alpha"]
    assert alpha.runs == 4
    assert alpha.mode("FM-1.3").failure_prevalence == 0.0
    assert alpha.mode("FM-3.3").failure_prevalence == 1.0
    assert alpha.modes_per_failed_run == 2.0  # (1 + 3) / 2


def test_a_late_outcome_overrides_the_runs_own(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    store.insert_outcomes(
        [
            OutcomeReport(trace("a2"), S, 0.9, time_ns=START + 1),
            OutcomeReport(trace("a2"), F, 0.5, time_ns=START + 2),  # the latest report wins
            OutcomeReport(trace("b1"), U, 0.25, time_ns=START + 1),  # score only: the outcome stays
            OutcomeReport(trace("zz"), F, 0.0, time_ns=START + 1),  # a run never stored: ignored
        ]
    )
    alpha, beta = compute_profiles(store)
    assert (alpha.runs, alpha.successes, alpha.failures, alpha.success_rate) == (4, 1, 3, 0.25)
    assert alpha.mean_score == 0.5  # (1.0 + 0.5 + 0.0) / 3
    assert alpha.modes_per_failed_run == pytest.approx(5 / 3, rel=1e-15)  # a2 failed with no mode
    assert alpha.mode("FM-1.3").success_prevalence == 1.0  # a1 is now the only success
    assert (beta.successes, beta.failures, beta.mean_score) == (2, 1, 0.25)


def test_replayed_batches_do_not_double_count(store: ClickHouseStore) -> None:
    runs = fleet()
    store.insert_runs(runs)
    store.insert_runs(runs)
    store.insert_runs(runs[:4])  # the same runs in another batch: collapsed by version
    assert [(p.key, p.runs, p.failures, p.modes_per_failed_run) for p in compute_profiles(store)] == [
        ("alpha", 4, 2, 2.5),
        ("beta", 4, 1, 2.0),
    ]


def test_other_dimensions_group_by_their_column(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    versions = by_key(compute_profiles(store, by="version"))
    assert {key: (p.runs, p.successes, p.failures) for key, p in versions.items()} == {
        "1.0": (3, 2, 1),
        "2.0": (5, 2, 2),
    }
    agents = by_key(compute_profiles(store, by=Dimension.AGENT))
    assert {key: (p.runs, p.successes, p.failures) for key, p in agents.items()} == {
        "triage": (6, 3, 2),
        "fixer": (2, 1, 1),
    }
    assert agents["fixer"].modes_per_failed_run == 3.0
    services = by_key(compute_profiles(store, by="service"))
    assert sorted(services) == ["svc-alpha", "svc-beta"]
    with pytest.raises(ValueError, match="choose one of model, agent, service, version"):
        compute_profiles(store, by="planet")


def test_the_time_window_keeps_runs_started_since(store: ClickHouseStore) -> None:
    old = run("old", "alpha", F, ("FM-1.5",), start_ns=START - 10 * DAY)
    store.insert_runs([*fleet(), old])
    assert by_key(compute_profiles(store))["alpha"].runs == 5
    since = datetime.fromtimestamp(START / 1e9, tz=timezone.utc) - timedelta(days=1)
    windowed = by_key(compute_profiles(store, since=since))["alpha"]
    assert (windowed.runs, windowed.failures, windowed.mode("FM-1.5").failure_prevalence) == (4, 2, 0.5)
    naive = by_key(compute_profiles(store, since=since.replace(tzinfo=None)))["alpha"]  # taken as UTC
    assert naive.runs == 4


def test_query_parameters_survive_json_for_remote_sources(store: ClickHouseStore) -> None:
    # The collector's query API carries parameters as JSON: they must mean the same after the trip.
    store.insert_runs(fleet())
    since = datetime.fromtimestamp(START / 1e9, tz=timezone.utc)
    bindings = parameters("model", since)
    assert json.loads(json.dumps(bindings)) == bindings
    assert bindings["since"] == f"{START // 10**9}.000000000"
    assert store.query(GROUP_SUMMARY_SQL, bindings).rows[0][:2] == ("alpha", 4)
    later = parameters("model", since + timedelta(microseconds=1))
    assert store.query(GROUP_SUMMARY_SQL, later).rows == ()
    assert parameters(since=datetime(1969, 12, 31, tzinfo=timezone.utc))["since"] == "0.000000000"


def test_profiles_json_has_the_documented_shape(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    document = profiles_to_json(compute_profiles(store))
    assert list(document) == ["models"]
    alpha = document["models"][0]
    # The documented keys come first, in order; later issues only add keys after them.
    assert list(alpha)[:6] == ["model", "runs", "success_rate", "mean_score", "modes_per_failed_run", "modes"]
    assert (alpha["model"], alpha["runs"], alpha["success_rate"], alpha["modes_per_failed_run"]) == (
        "alpha",
        4,
        0.5,
        2.5,
    )
    assert list(alpha["modes"]) == list(CODES)
    assert (
        alpha["modes"]["FM-1.3"].items()
        >= {
            "name": "Step repetition",
            "success_prevalence": 0.5,
            "failure_prevalence": 0.5,
            "relative_increase": 0.0,
            "prior": "benign",
        }.items()
    )
    assert alpha["modes"]["FM-3.3"]["prior"] == "fatal"
    assert document["models"][1]["mean_score"] is None

    agents = profiles_to_json(compute_profiles(store, by="agent"))
    assert list(agents) == ["agents"]
    assert {entry["agent"] for entry in agents["agents"]} == {"triage", "fixer"}


def test_an_empty_store_has_no_profiles(store: ClickHouseStore) -> None:
    assert compute_profiles(store) == []
    assert profiles_to_json([]) == {"models": []}
    assert profiles_to_json([], by="version") == {"versions": []}


def rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of every table row in `text` whose first cell is `first_cell`."""
    found = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells[0] == first_cell:
            found.append(cells)
    return found


def test_render_shows_prevalence_relative_increase_and_prior(store: ClickHouseStore) -> None:
    store.insert_runs(fleet())
    console = Console(record=True, width=200, color_system=None)
    render_profiles(compute_profiles(store), console=console)
    text = console.export_text()
    assert "Runs by model" in text
    assert rows(text, "alpha") == [["alpha", "4", "2", "2", "50.0%", "0.50", "2.5"]]
    assert rows(text, "beta") == [["beta", "4", "2", "1", "66.7%", "—", "2.0"]]
    # The first six columns; the odds ratio, p and verdict that follow are tested in test_analysis_stats.
    assert [cells[:6] for cells in rows(text, "FM-1.3")] == [
        ["FM-1.3", "Step repetition", "50% (1/2)", "50% (1/2)", "0%", "benign"],
        ["FM-1.3", "Step repetition", "50% (1/2)", "100% (1/1)", "+100%", "benign"],
    ]
    assert [cells[:6] for cells in rows(text, "FM-3.3")] == [
        ["FM-3.3", "Incorrect verification", "0% (0/2)", "100% (2/2)", "only in failed", "fatal"],
    ]  # beta's FM-3.3 run had no known outcome: not a row of its table
    assert [cells[:6] for cells in rows(text, "FM-3.2")] == [
        ["FM-3.2", "No or incomplete verification", "0% (0/2)", "100% (1/1)", "only in failed", "—"],
    ]


def test_render_says_so_when_nothing_is_stored() -> None:
    console = Console(record=True, width=120, color_system=None)
    render_profiles([], console=console)
    assert console.export_text().strip() == NO_RUNS
