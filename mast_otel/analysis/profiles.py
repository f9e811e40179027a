"""Failure profiles per model (or agent, service, version): the reference study's table, for any fleet.

`compute_profiles` runs the two queries of `queries.py` and returns typed profiles: success rate and
mean score, distinct modes per failed run (surgical vs cascading failure) and, per MAST mode, its
prevalence in successful vs failed runs with the relative increase, the odds ratio with its 95%
interval, Fisher's exact p and a fatal / benign / inconclusive verdict (`stats.py`; the study's prior
when data is thin). `profiles_to_json` gives the machine-readable form the CLI prints and reports embed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mast_otel import taxonomy
from mast_otel.analysis.queries import (
    CASCADE_MIN_MODES,
    GROUP_SUMMARY_SQL,
    MODE_PREVALENCE_SQL,
    Dimension,
    Scope,
)
from mast_otel.analysis.stats import ModeVerdict, Verdict, fisher_p, verdict
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import FailureMode, Prior

_NOT_COMPUTED = ModeVerdict(Verdict.INCONCLUSIVE, True, "not computed")

# Mean distinct modes per failed run: at most this is surgical, at least CASCADE_MIN_MODES cascading.
SURGICAL_MAX_MODES = 3.0


@dataclass(frozen=True, slots=True)
class ModePrevalence:
    """One mode in one group. Prevalences are None when the group has no runs of that outcome."""

    mode: FailureMode
    success_prevalence: float | None
    failure_prevalence: float | None
    relative_increase: float | None  # (p_fail - p_success) / p_success; None when p_success is 0
    prior: Prior
    successes_with_mode: int = 0
    failures_with_mode: int = 0
    odds_ratio: float | None = None  # of the mode in failed vs successful runs (Haldane-Anscombe on zeros)
    odds_ratio_low: float | None = None  # 95% interval
    odds_ratio_high: float | None = None
    p_value: float | None = None  # Fisher's exact, two-sided
    verdict: ModeVerdict = _NOT_COMPUTED

    @property
    def observed(self) -> bool:
        return bool(self.successes_with_mode or self.failures_with_mode)


@dataclass(frozen=True, slots=True)
class GroupProfile:
    """The failure profile of one model (agent, service, version). `modes` holds all 14, in order."""

    key: str
    runs: int
    successes: int
    failures: int
    success_rate: float | None  # among runs with a known outcome
    mean_score: float | None
    modes_per_failed_run: float | None  # distinct modes, averaged over failed runs
    modes: tuple[ModePrevalence, ...]
    dimension: Dimension = Dimension.MODEL
    cascading_share: float | None = None  # failed runs with CASCADE_MIN_MODES modes or more
    fatal_mode_rate: float | None = None  # runs with at least one fatal mode (the scope's set)

    @property
    def failure_profile(self) -> str:
        """ "surgical" (few modes per failed run), "cascading" (many), "mixed", or "" without failures."""
        mean = self.modes_per_failed_run
        if mean is None or not self.failures:
            return ""
        if mean <= SURGICAL_MAX_MODES:
            return "surgical"
        return "cascading" if mean >= CASCADE_MIN_MODES else "mixed"

    def fatal_modes(self) -> tuple[ModePrevalence, ...]:
        """Modes judged fatal, the strongest association first."""
        fatal = [m for m in self.modes if m.verdict.verdict is Verdict.FATAL and m.observed]
        return tuple(sorted(fatal, key=lambda m: (m.verdict.from_prior, -(m.odds_ratio or 0.0))))

    def mode(self, code: str) -> ModePrevalence:
        wanted = taxonomy.mode(code)
        for prevalence in self.modes:
            if prevalence.mode == wanted:
                return prevalence
        raise KeyError(f"{wanted.code} is not among the modes of {self.key!r}")


def compute_profiles(
    source: QuerySource,
    by: Dimension | str = Dimension.MODEL,
    since: datetime | None = None,
    until: datetime | None = None,
    scope: Scope | None = None,
) -> list[GroupProfile]:
    """Profiles of every group with runs in [since, until) (all runs when None), most runs first.

    `scope` (filters, fatal modes) wins over `by`, `since` and `until` when given.
    """
    if scope is None:
        scope = Scope(Dimension.parse(by), since, until)
    dimension = scope.by
    bindings = scope.parameters()
    summaries = source.query(GROUP_SUMMARY_SQL, bindings).dicts()
    modes_by_group: dict[str, list[ModePrevalence]] = {}
    for row in source.query(MODE_PREVALENCE_SQL, bindings).dicts():
        modes_by_group.setdefault(row["group_key"], []).append(_prevalence(row))
    return [
        GroupProfile(
            key=row["group_key"],
            runs=row["runs"],
            successes=row["successes"],
            failures=row["failures"],
            success_rate=row["success_rate"],
            mean_score=row["mean_score"],
            modes_per_failed_run=row["modes_per_failed_run"],
            modes=tuple(modes_by_group.get(row["group_key"], ())),
            dimension=dimension,
            cascading_share=row["cascading_share"],
            fatal_mode_rate=row["fatal_mode_rate"],
        )
        for row in summaries
    ]


def _prevalence(row: dict[str, Any]) -> ModePrevalence:
    failure_mode = taxonomy.mode(row["mode"])
    counts = {
        "failures_with": row["failures_with_mode"],
        "failures": row["failures"],
        "successes_with": row["successes_with_mode"],
        "successes": row["successes"],
    }
    p_value = fisher_p(**counts)
    return ModePrevalence(
        mode=failure_mode,
        success_prevalence=row["success_prevalence"],
        failure_prevalence=row["failure_prevalence"],
        relative_increase=row["relative_increase"],
        prior=failure_mode.prior,
        successes_with_mode=row["successes_with_mode"],
        failures_with_mode=row["failures_with_mode"],
        odds_ratio=row["odds_ratio"],
        odds_ratio_low=row["odds_ratio_low"],
        odds_ratio_high=row["odds_ratio_high"],
        p_value=p_value,
        verdict=verdict(failure_mode, odds_ratio=row["odds_ratio"], p_value=p_value, **counts),
    )


def profiles_to_json(profiles: Sequence[GroupProfile], by: Dimension | str | None = None) -> dict[str, Any]:
    """`{"models": [{"model": ..., "runs": N, ..., "modes": {"FM-1.3": {...}}}]}`.

    The top-level key and each entry's key field are named after the dimension ("agents"/"agent"...),
    taken from the profiles, else from `by` (needed only to name an empty result), else "model".
    """
    dimensions = {profile.dimension for profile in profiles}
    if len(dimensions) > 1:
        raise ValueError(f"profiles of different dimensions cannot share one document: {sorted(dimensions)}")
    dimension = dimensions.pop() if dimensions else Dimension.parse(by or Dimension.MODEL)
    return {
        dimension.plural: [
            {
                dimension.value: profile.key,
                "runs": profile.runs,
                "success_rate": profile.success_rate,
                "mean_score": profile.mean_score,
                "modes_per_failed_run": profile.modes_per_failed_run,
                "modes": {
                    prevalence.mode.code: {
                        "name": prevalence.mode.name,
                        "success_prevalence": prevalence.success_prevalence,
                        "failure_prevalence": prevalence.failure_prevalence,
                        "relative_increase": prevalence.relative_increase,
                        "prior": prevalence.prior.value,
                        "successes_with_mode": prevalence.successes_with_mode,
                        "failures_with_mode": prevalence.failures_with_mode,
                        "odds_ratio": prevalence.odds_ratio,
                        "odds_ratio_ci95": [prevalence.odds_ratio_low, prevalence.odds_ratio_high],
                        "fisher_p": prevalence.p_value,
                        "verdict": prevalence.verdict.verdict.value,
                        "verdict_from_prior": prevalence.verdict.from_prior,
                        "verdict_reason": prevalence.verdict.reason,
                    }
                    for prevalence in profile.modes
                },
                "successes": profile.successes,
                "failures": profile.failures,
                "failure_profile": profile.failure_profile,
                "cascading_share": profile.cascading_share,
                "fatal_mode_rate": profile.fatal_mode_rate,
            }
            for profile in profiles
        ]
    }
