"""Failure profiles per model (or agent, service, version): the reference study's table, for any fleet.

`compute_profiles` runs the two queries of `queries.py` and returns typed profiles: success rate and
mean score, distinct modes per failed run (surgical vs cascading failure) and, per MAST mode, its
prevalence in successful vs failed runs with the relative increase, next to the study's prior.
`profiles_to_json` gives the machine-readable form the CLI prints and reports embed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mast_otel import taxonomy
from mast_otel.analysis.queries import GROUP_SUMMARY_SQL, MODE_PREVALENCE_SQL, Dimension, parameters
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import FailureMode, Prior


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

    def mode(self, code: str) -> ModePrevalence:
        wanted = taxonomy.mode(code)
        for prevalence in self.modes:
            if prevalence.mode == wanted:
                return prevalence
        raise KeyError(f"{wanted.code} is not among the modes of {self.key!r}")


def compute_profiles(
    source: QuerySource, by: Dimension | str = Dimension.MODEL, since: datetime | None = None
) -> list[GroupProfile]:
    """Profiles of every group with runs since `since` (all runs when None), most runs first."""
    dimension = Dimension.parse(by)
    bindings = parameters(dimension, since)
    summaries = source.query(GROUP_SUMMARY_SQL, bindings).dicts()
    modes_by_group: dict[str, list[ModePrevalence]] = {}
    for row in source.query(MODE_PREVALENCE_SQL, bindings).dicts():
        failure_mode = taxonomy.mode(row["mode"])
        modes_by_group.setdefault(row["group_key"], []).append(
            ModePrevalence(
                mode=failure_mode,
                success_prevalence=row["success_prevalence"],
                failure_prevalence=row["failure_prevalence"],
                relative_increase=row["relative_increase"],
                prior=failure_mode.prior,
                successes_with_mode=row["successes_with_mode"],
                failures_with_mode=row["failures_with_mode"],
            )
        )
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
        )
        for row in summaries
    ]


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
                    }
                    for prevalence in profile.modes
                },
            }
            for profile in profiles
        ]
    }
