"""Odds ratios, intervals, Fisher's p and verdicts, checked against numbers computed independently;
co-occurrence, temporal order, recommendations and comparison on hand-built fleets in real chDB."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mast_otel.analysis import compute_profiles
from mast_otel.analysis.insights import compare, mode_patterns, recommendations
from mast_otel.analysis.queries import Scope
from mast_otel.analysis.stats import MIN_RUNS_PER_OUTCOME, Verdict, fisher_p, verdict
from mast_otel.annotate.base import AnnotatedRun, Evidence, Finding
from mast_otel.cli._scope import moment
from mast_otel.conversation.model import Conversation, Outcome, Turn, TurnKind
from mast_otel.store.clickhouse import ClickHouseStore, open_store
from mast_otel.taxonomy import mode

START = 1_700_000_000_000_000_000


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[ClickHouseStore]:
    opened = open_store(chdb_dir, database=database)
    yield opened
    opened.close()


def run(name: str, model: str, outcome: Outcome, steps: dict[str, int]) -> AnnotatedRun:
    """A run whose findings show each mode first at the given step."""
    conversation = Conversation(
        trace_id=name.encode().hex().rjust(32, "0"),
        turns=(Turn(0, TurnKind.USER, "user", "fix it"), Turn(1, TurnKind.AGENT_MESSAGE, "triage", "done")),
        service_name="svc",
        root_agent="triage",
        agents=("triage",),
        models=(model,),
        start_ns=START,
        end_ns=START + 10**9,
        outcome=outcome,
    )
    findings = tuple(
        Finding(mode(code), Evidence((step, step + 1), ("s",), "triage"), 0.9, code, "rules/test")
        for code, step in steps.items()
    )
    return AnnotatedRun(conversation, findings, 1)


S, F = Outcome.SUCCESS, Outcome.FAILURE


def fleet(model: str, counts: dict[str, tuple[int, int, int, int]]) -> list[AnnotatedRun]:
    """`counts[code] = (failed with, failed total, successful with, successful total)`; one code."""
    [(code, (a, failures, b, successes))] = counts.items()
    runs = [run(f"{model}f{i}", model, F, {code: 3} if i < a else {}) for i in range(failures)]
    runs += [run(f"{model}s{i}", model, S, {code: 3} if i < b else {}) for i in range(successes)]
    return runs


def woolf(a: int, c: int, b: int, d: int) -> tuple[float, float, float]:
    """Odds ratio a*d / (c*b) (a, c: failed with / without; b, d: successful with / without)."""
    k = 0.5 if 0 in (a, b, c, d) else 0.0
    ratio = ((a + k) * (d + k)) / ((c + k) * (b + k))
    se = math.sqrt(sum(1 / (x + k) for x in (a, b, c, d)))
    return ratio, ratio * math.exp(-1.959963984540054 * se), ratio * math.exp(1.959963984540054 * se)


def fisher_by_hand(a: int, failures: int, b: int, successes: int) -> float:
    """Two-sided Fisher p: the hypergeometric tables at most as likely as the observed one."""
    total, with_mode = failures + successes, a + b

    def probability(x: int) -> float:
        return (
            math.comb(with_mode, x) * math.comb(total - with_mode, failures - x) / math.comb(total, failures)
        )

    observed = probability(a)
    low, high = max(0, failures - (total - with_mode)), min(with_mode, failures)
    return sum(p for x in range(low, high + 1) if (p := probability(x)) <= observed * (1 + 1e-7))


def test_odds_ratio_interval_and_p_match_independent_computations(store: ClickHouseStore) -> None:
    store.insert_runs(fleet("m", {"FM-3.3": (9, 12, 2, 15)}))
    [profile] = compute_profiles(store)
    prevalence = profile.mode("FM-3.3")
    ratio, low, high = woolf(9, 3, 2, 13)
    assert prevalence.odds_ratio == pytest.approx(ratio, rel=1e-12)  # 19.5
    assert (prevalence.odds_ratio_low, prevalence.odds_ratio_high) == (
        pytest.approx(low, rel=1e-12),
        pytest.approx(high, rel=1e-12),
    )
    assert prevalence.p_value == pytest.approx(fisher_by_hand(9, 12, 2, 15), rel=1e-9)
    assert prevalence.verdict.verdict is Verdict.FATAL and not prevalence.verdict.from_prior


def test_zero_cells_get_the_haldane_anscombe_correction(store: ClickHouseStore) -> None:
    store.insert_runs(fleet("z", {"FM-1.5": (6, 12, 0, 12)}))
    prevalence = compute_profiles(store)[0].mode("FM-1.5")
    ratio, low, high = woolf(6, 6, 0, 12)  # (6.5 * 12.5) / (6.5 * 0.5) = 25
    assert prevalence.odds_ratio == pytest.approx(ratio) == pytest.approx(25.0)
    assert prevalence.odds_ratio_low == pytest.approx(low) and prevalence.odds_ratio_high == pytest.approx(
        high
    )
    never = compute_profiles(store)[0].mode("FM-2.1")  # seen nowhere: every cell but two is zero
    assert never.odds_ratio == pytest.approx(1.0)
    assert never.verdict.from_prior and never.verdict.verdict is Verdict.INCONCLUSIVE


def test_thin_data_falls_back_to_the_study_prior_and_says_so() -> None:
    thin = verdict(
        mode("FM-1.3"),
        failures_with=3,
        failures=4,
        successes_with=0,
        successes=3,
        odds_ratio=30.0,
        p_value=0.03,
    )
    assert thin.verdict is Verdict.BENIGN and thin.from_prior  # the study's prior, not the data
    assert "thin data" in thin.reason and str(MIN_RUNS_PER_OUTCOME) in thin.reason
    unknown_prior = verdict(
        mode("FM-2.2"),
        failures_with=1,
        failures=2,
        successes_with=0,
        successes=2,
        odds_ratio=3.0,
        p_value=1.0,
    )
    assert unknown_prior.verdict is Verdict.INCONCLUSIVE and unknown_prior.from_prior


def test_benign_when_common_in_successes_and_inconclusive_otherwise() -> None:
    counts = {"failures": 20, "successes": 20}
    common = verdict(
        mode("FM-3.3"), failures_with=18, successes_with=17, odds_ratio=1.6, p_value=1.0, **counts
    )
    assert common.verdict is Verdict.BENIGN and not common.from_prior  # data overrides the fatal prior
    protective = verdict(
        mode("FM-3.3"), failures_with=1, successes_with=12, odds_ratio=0.04, p_value=0.001, **counts
    )
    assert protective.verdict is Verdict.BENIGN
    rare = verdict(mode("FM-3.3"), failures_with=4, successes_with=2, odds_ratio=2.1, p_value=0.66, **counts)
    assert rare.verdict is Verdict.INCONCLUSIVE and "p=0.66" in rare.reason
    assert fisher_p(1, 0, 0, 5) is None


def test_patterns_say_which_mode_comes_first(store: ClickHouseStore) -> None:
    runs = [
        run("c1", "casc", F, {"FM-1.4": 2, "FM-2.3": 5, "FM-3.1": 9}),
        run("c2", "casc", F, {"FM-1.4": 1, "FM-2.3": 4}),
        run("c3", "casc", F, {"FM-2.3": 1, "FM-1.4": 6}),
        run("c4", "casc", S, {"FM-1.4": 1, "FM-2.3": 2}),  # successful: not part of failure patterns
    ]
    store.insert_runs(runs)
    patterns = mode_patterns(store)["casc"]
    pairs = {(p.first.code, p.second.code): (p.together, p.a_first, p.b_first) for p in patterns.pairs}
    assert pairs[("FM-1.4", "FM-2.3")] == (3, 2, 1)
    assert pairs[("FM-1.4", "FM-3.1")] == (1, 1, 0)
    openers = {o.mode.code: (o.failed_runs_with_mode, o.opens_run) for o in patterns.openers}
    assert openers == {"FM-1.4": (3, 2), "FM-2.3": (3, 1), "FM-3.1": (1, 0)}
    assert patterns.openers[0].mode.code == "FM-1.4"  # what precedes the collapse


def test_same_success_rate_different_signatures_and_their_remedies(store: ClickHouseStore) -> None:
    store.insert_runs(
        fleet("verifier", {"FM-3.3": (10, 12, 1, 12)}) + fleet("looper", {"FM-1.5": (10, 12, 1, 12)})
    )
    profiles = compute_profiles(store)
    comparison = compare(profiles, "verifier", "looper")
    assert comparison.success_rate_gap == 0.0
    top = {c.mode.code: (c.a_failure_prevalence, c.b_failure_prevalence) for c in comparison.modes}
    assert top == {"FM-3.3": (10 / 12, 0.0), "FM-1.5": (0.0, 10 / 12)}
    by_key = {p.key: p for p in profiles}
    measured, assumed = by_key["verifier"].mode("FM-3.3").verdict, by_key["looper"].mode("FM-3.3").verdict
    assert (measured.verdict, measured.from_prior) == (Verdict.FATAL, False)
    assert (assumed.verdict, assumed.from_prior) == (Verdict.FATAL, True)  # never seen: the prior speaks
    assert [r.title for r in recommendations(by_key["verifier"])] == ["External verification gate"]
    assert [r.title for r in recommendations(by_key["looper"])] == ["Termination state machine"]
    with pytest.raises(KeyError, match="no runs for 'nobody'"):
        compare(profiles, "verifier", "nobody")


def test_failure_profile_and_filters(store: ClickHouseStore) -> None:
    many = {code: step for step, code in enumerate(("FM-1.4", "FM-2.3", "FM-3.1", "FM-1.5", "FM-2.6"))}
    store.insert_runs(
        [run(f"k{i}", "cascade", F, many) for i in range(3)]
        + [run(f"s{i}", "surgeon", F, {"FM-3.3": 1}) for i in range(3)]
    )
    profiles = {p.key: p for p in compute_profiles(store)}
    assert profiles["cascade"].failure_profile == "cascading" and profiles["cascade"].cascading_share == 1.0
    assert profiles["surgeon"].failure_profile == "surgical" and profiles["surgeon"].cascading_share == 0.0
    assert profiles["surgeon"].fatal_mode_rate == 1.0  # FM-3.3 is among the study's fatal modes
    only = compute_profiles(store, scope=Scope(models=("surgeon",)))
    assert [p.key for p in only] == ["surgeon"]
    none_fatal = compute_profiles(store, scope=Scope(models=("surgeon",), fatal_modes=("FM-1.3",)))
    assert none_fatal[0].fatal_mode_rate == 0.0


def test_relative_and_iso_times() -> None:
    now = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    assert moment("24h", now) == datetime(2025, 5, 31, 12, 0, tzinfo=timezone.utc)
    assert moment("7d", now) == datetime(2025, 5, 25, 12, 0, tzinfo=timezone.utc)
    assert moment("30m", now) == datetime(2025, 6, 1, 11, 30, tzinfo=timezone.utc)
    assert moment("2025-05-01T08:00:00Z") == datetime(2025, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert moment("2025-05-01") == datetime(2025, 5, 1, tzinfo=timezone.utc)
    with pytest.raises(Exception, match="neither a relative time"):
        moment("yesterday")
