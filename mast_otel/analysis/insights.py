"""Beyond the per-mode table: how modes combine and follow each other in failed runs, what to do about
the dominant fatal ones, and two models (or versions) side by side.

- `mode_patterns`: pairs of modes in failed runs (how often together, which one showed first) and the
  modes that open a failed run: what comes before the collapse.
- `recommendations`: the reference study's remedies, keyed to the fatal modes of a profile.
- `compare`: two groups' profiles aligned mode by mode, to show that the same success rate can hide
  different failure signatures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from mast_otel import taxonomy
from mast_otel.analysis.profiles import GroupProfile
from mast_otel.analysis.queries import MODE_OPENERS_SQL, MODE_PAIRS_SQL, Scope
from mast_otel.analysis.stats import Verdict
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import FailureMode


@dataclass(frozen=True, slots=True)
class ModePair:
    first: FailureMode  # by code order; `a_first` counts runs where it showed first
    second: FailureMode
    together: int  # failed runs with both
    a_first: int
    b_first: int


@dataclass(frozen=True, slots=True)
class Opener:
    mode: FailureMode
    failed_runs_with_mode: int
    opens_run: int  # failed runs where no other mode showed earlier
    median_first_step: float | None


@dataclass(frozen=True, slots=True)
class ModePatterns:
    key: str
    pairs: tuple[ModePair, ...]  # most frequent first
    openers: tuple[Opener, ...]  # most often first first


def mode_patterns(source: QuerySource, scope: Scope | None = None) -> dict[str, ModePatterns]:
    """Co-occurrence and temporal order of modes in failed runs, per group."""
    bindings = (scope or Scope()).parameters()
    pairs: dict[str, list[ModePair]] = {}
    for row in source.query(MODE_PAIRS_SQL, bindings).dicts():
        pairs.setdefault(row["group_key"], []).append(
            ModePair(
                taxonomy.mode(row["mode_a"]),
                taxonomy.mode(row["mode_b"]),
                row["together"],
                row["a_first"],
                row["b_first"],
            )
        )
    openers: dict[str, list[Opener]] = {}
    for row in source.query(MODE_OPENERS_SQL, bindings).dicts():
        openers.setdefault(row["group_key"], []).append(
            Opener(
                taxonomy.mode(row["mode"]),
                row["failed_runs_with_mode"],
                row["opens_run"],
                row["median_first_step"],
            )
        )
    keys = sorted(set(pairs) | set(openers))
    return {key: ModePatterns(key, tuple(pairs.get(key, ())), tuple(openers.get(key, ()))) for key in keys}


@dataclass(frozen=True, slots=True)
class Recommendation:
    title: str
    action: str
    modes: tuple[str, ...]  # the fatal mode codes it answers


# The study's remedies, keyed by the modes they answer.
REMEDIES: Final = (
    (
        ("FM-3.3", "FM-3.2"),
        "External verification gate",
        "Do not let the agent grade its own work: check the outcome with an independent probe "
        "(health check, test, query) before the run may declare success.",
    ),
    (
        ("FM-1.5", "FM-3.1"),
        "Termination state machine",
        "Make stopping explicit: a state machine with exit criteria (goal met, budget spent, no "
        "progress for N steps) instead of leaving termination to the model.",
    ),
    (
        ("FM-1.4", "FM-2.6"),
        "Context hygiene and early error detection",
        "Keep the task, constraints and key findings pinned in context (summarise, do not truncate), "
        "and check each action against the stated plan so a mismatch is caught at the step it happens.",
    ),
    (
        ("FM-2.3", "FM-1.1", "FM-1.2"),
        "Task anchoring",
        "Restate the task and the agent's role at every hand-off and flag tool calls about entities "
        "the task never mentioned.",
    ),
)


def recommendations(profile: GroupProfile) -> tuple[Recommendation, ...]:
    """Remedies for the profile's fatal modes (measured, or the prior when data is thin)."""
    fatal = {m.mode.code for m in profile.fatal_modes()}
    found = []
    for codes, title, action in REMEDIES:
        hit = tuple(code for code in codes if code in fatal)
        if hit:
            found.append(Recommendation(title, action, hit))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ModeContrast:
    mode: FailureMode
    a_failure_prevalence: float | None
    b_failure_prevalence: float | None
    a_verdict: Verdict
    b_verdict: Verdict


@dataclass(frozen=True, slots=True)
class Comparison:
    a: GroupProfile
    b: GroupProfile
    modes: tuple[ModeContrast, ...]  # modes seen in either, largest difference in failed runs first

    @property
    def success_rate_gap(self) -> float | None:
        if self.a.success_rate is None or self.b.success_rate is None:
            return None
        return self.a.success_rate - self.b.success_rate


def compare(profiles: Sequence[GroupProfile], a: str, b: str) -> Comparison:
    """Align the profiles of groups `a` and `b`; KeyError naming the groups there are otherwise."""
    by_key = {profile.key: profile for profile in profiles}
    missing = [key for key in (a, b) if key not in by_key]
    if missing:
        raise KeyError(f"no runs for {', '.join(map(repr, missing))}; groups with runs: {sorted(by_key)}")
    first, second = by_key[a], by_key[b]
    contrasts = [
        ModeContrast(
            x.mode,
            x.failure_prevalence,
            y.failure_prevalence,
            x.verdict.verdict,
            y.verdict.verdict,
        )
        for x, y in zip(first.modes, second.modes, strict=True)
        if x.observed or y.observed
    ]
    contrasts.sort(key=lambda c: -abs((c.a_failure_prevalence or 0.0) - (c.b_failure_prevalence or 0.0)))
    return Comparison(first, second, tuple(contrasts))


def insights_to_json(profiles: Sequence[GroupProfile], patterns: dict[str, ModePatterns]) -> dict[str, Any]:
    """Per group: recommendations, pairs and openers, keyed by the group."""
    document: dict[str, Any] = {}
    for profile in profiles:
        found = patterns.get(profile.key)
        document[profile.key] = {
            "recommendations": [
                {"title": r.title, "action": r.action, "modes": list(r.modes)}
                for r in recommendations(profile)
            ],
            "mode_pairs": [
                {
                    "modes": [p.first.code, p.second.code],
                    "failed_runs_with_both": p.together,
                    "first_shows_first": p.a_first,
                    "second_shows_first": p.b_first,
                }
                for p in (found.pairs if found else ())
            ],
            "openers": [
                {
                    "mode": o.mode.code,
                    "failed_runs_with_mode": o.failed_runs_with_mode,
                    "opens_run": o.opens_run,
                    "median_first_step": o.median_first_step,
                }
                for o in (found.openers if found else ())
            ],
        }
    return document


def comparison_to_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "a": comparison.a.key,
        "b": comparison.b.key,
        "success_rate": [comparison.a.success_rate, comparison.b.success_rate],
        "modes_per_failed_run": [comparison.a.modes_per_failed_run, comparison.b.modes_per_failed_run],
        "failure_profile": [comparison.a.failure_profile, comparison.b.failure_profile],
        "modes": {
            c.mode.code: {
                "failure_prevalence": [c.a_failure_prevalence, c.b_failure_prevalence],
                "verdict": [c.a_verdict.value, c.b_verdict.value],
            }
            for c in comparison.modes
        },
    }
