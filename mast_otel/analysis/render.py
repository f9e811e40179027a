"""Failure profiles as rich tables for the terminal: one overview of the groups, one mode table each.

The mode table puts a mode's prevalence in successful runs next to its prevalence in failed runs,
the relative increase and the reference study's prior, so a reader sees at a glance which modes
are fatal for *this* fleet and which are merely common.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from mast_otel.analysis.insights import (
    Comparison,
    ModePatterns,
    compare,
    comparison_to_json,
    insights_to_json,
    mode_patterns,
    recommendations,
)
from mast_otel.analysis.profiles import GroupProfile, ModePrevalence
from mast_otel.analysis.queries import Dimension, Scope
from mast_otel.analysis.stats import Verdict
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import Prior

NO_RUNS = "No runs stored yet: send traces to the collector (or import runs), then analyse again."
_MISSING = "—"
_PRIOR_STYLES = {Prior.FATAL: "bold red", Prior.BENIGN: "green"}
_VERDICT_STYLES = {Verdict.FATAL: "bold red", Verdict.BENIGN: "green", Verdict.INCONCLUSIVE: "dim"}


def profile_renderables(
    profiles: Sequence[GroupProfile], by: Dimension | str | None = None
) -> list[RenderableType]:
    """The overview table followed by one mode table per group; a single message when empty."""
    if not profiles:
        return [Text(NO_RUNS, style="yellow")]
    dimension = profiles[0].dimension if by is None else Dimension.parse(by)
    return [_overview(profiles, dimension), *(_mode_table(profile, dimension) for profile in profiles)]


def render_profiles(
    profiles: Sequence[GroupProfile], console: Console | None = None, by: Dimension | str | None = None
) -> None:
    console = console or Console()
    for renderable in profile_renderables(profiles, by):
        console.print(renderable)


def _overview(profiles: Sequence[GroupProfile], dimension: Dimension) -> Table:
    table = Table(title=f"Runs by {dimension.value}", title_justify="left")
    table.add_column(dimension.value.capitalize())
    table.add_column("Runs", justify="right")
    table.add_column("Succeeded", justify="right")
    table.add_column("Failed", justify="right")
    table.add_column("Success rate", justify="right")
    table.add_column("Mean score", justify="right")
    table.add_column("Modes / failed run", justify="right")
    for profile in profiles:
        table.add_row(
            _key(profile.key),
            str(profile.runs),
            str(profile.successes),
            str(profile.failures),
            _percent(profile.success_rate),
            _number(profile.mean_score),
            _number(profile.modes_per_failed_run, digits=1),
        )
    return table


def _mode_table(profile: GroupProfile, dimension: Dimension) -> RenderableType:
    observed = [prevalence for prevalence in profile.modes if prevalence.observed]
    if not observed:
        return Text(f"{_key(profile.key)}: no failure modes detected in {profile.runs} runs.")
    table = Table(title=f"Failure modes, {dimension.value} {_key(profile.key)}", title_justify="left")
    table.add_column("Mode")
    table.add_column("Name")
    table.add_column("In successful runs", justify="right")
    table.add_column("In failed runs", justify="right")
    table.add_column("Relative increase", justify="right")
    table.add_column("Study prior")
    table.add_column("Odds ratio (95% CI)", justify="right")
    table.add_column("Fisher p", justify="right")
    table.add_column("Verdict")
    for prevalence in observed:
        table.add_row(
            prevalence.mode.code,
            prevalence.mode.name,
            _share(prevalence.success_prevalence, prevalence.successes_with_mode, profile.successes),
            _share(prevalence.failure_prevalence, prevalence.failures_with_mode, profile.failures),
            _increase(prevalence),
            _prior(prevalence.prior),
            _odds(prevalence),
            _MISSING if prevalence.p_value is None else f"{prevalence.p_value:.2g}",
            _verdict(prevalence),
        )
    return table


def _odds(prevalence: ModePrevalence) -> str:
    if prevalence.odds_ratio is None:
        return _MISSING
    return f"{prevalence.odds_ratio:.2f} ({prevalence.odds_ratio_low:.2f}-{prevalence.odds_ratio_high:.2f})"


def _verdict(prevalence: ModePrevalence) -> Text:
    verdict = prevalence.verdict
    label = verdict.verdict.value + (" (prior)" if verdict.from_prior else "")
    return Text(label, style=_VERDICT_STYLES[verdict.verdict])


@dataclass(frozen=True, slots=True)
class StudyExtras:
    """What follows the profile tables: patterns and recommendations per group, and a comparison."""

    profiles: tuple[GroupProfile, ...]
    patterns: dict[str, ModePatterns]
    comparison: Comparison | None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"insights": insights_to_json(self.profiles, self.patterns)}
        if self.comparison is not None:
            document["comparison"] = comparison_to_json(self.comparison)
        return document

    def render(self, console: Console) -> None:
        for renderable in self.renderables():
            console.print(renderable)

    def renderables(self) -> list[RenderableType]:
        found: list[RenderableType] = []
        for profile in self.profiles:
            lines = []
            if profile.failure_profile:
                lines.append(
                    f"{_key(profile.key)} fails {profile.failure_profile}ly: "
                    f"{profile.modes_per_failed_run:.1f} distinct modes per failed run."
                )
            patterns = self.patterns.get(profile.key)
            openers = [o for o in (patterns.openers if patterns else ()) if o.opens_run]
            if openers:
                lead = ", ".join(
                    f"{o.mode.code} ({o.opens_run}/{o.failed_runs_with_mode})" for o in openers[:3]
                )
                lines.append(f"  What comes first in failed runs: {lead}")
            pairs = patterns.pairs[:3] if patterns else ()
            if pairs:
                together = ", ".join(f"{p.first.code}+{p.second.code} ({p.together})" for p in pairs)
                lines.append(f"  Most frequent together: {together}")
            for advice in recommendations(profile):
                lines.append(f"  Recommended, for {', '.join(advice.modes)}: {advice.title}. {advice.action}")
            if lines:
                found.append(Text("\n".join(lines)))
        if self.comparison is not None:
            found.append(_comparison_table(self.comparison))
        return found


def study_extras(
    source: QuerySource, scope: Scope, profiles: Sequence[GroupProfile], compare_keys: Sequence[str] | None
) -> StudyExtras:
    """Patterns for every group and, with two keys, their comparison (KeyError for an unknown key)."""
    comparison = compare(profiles, compare_keys[0], compare_keys[1]) if compare_keys else None
    return StudyExtras(tuple(profiles), mode_patterns(source, scope), comparison)


def _comparison_table(comparison: Comparison) -> Table:
    a, b = comparison.a, comparison.b
    table = Table(title=f"{_key(a.key)} vs {_key(b.key)}", title_justify="left")
    table.add_column("")
    table.add_column(_key(a.key), justify="right")
    table.add_column(_key(b.key), justify="right")
    table.add_row("Success rate", _percent(a.success_rate), _percent(b.success_rate))
    table.add_row(
        "Modes / failed run", _number(a.modes_per_failed_run, 1), _number(b.modes_per_failed_run, 1)
    )
    table.add_row("Failure profile", a.failure_profile or _MISSING, b.failure_profile or _MISSING)
    for contrast in comparison.modes:
        table.add_row(
            f"{contrast.mode.code} {contrast.mode.name}, in failed runs",
            f"{_percent(contrast.a_failure_prevalence)} {contrast.a_verdict.value}",
            f"{_percent(contrast.b_failure_prevalence)} {contrast.b_verdict.value}",
        )
    return table


def _increase(prevalence: ModePrevalence) -> Text:
    increase = prevalence.relative_increase
    if increase is None:
        # Seen only in failed runs: no ratio exists, and that is the strongest signal of all.
        if prevalence.failures_with_mode and not prevalence.successes_with_mode:
            return Text("only in failed", style="bold red")
        return Text(_MISSING)
    if not increase:
        return Text("0%")
    return Text(f"{increase:+.0%}", style="red" if increase > 0 else "green")


def _prior(prior: Prior) -> Text:
    if prior is Prior.UNKNOWN:
        return Text(_MISSING, style="dim")
    return Text(prior.value, style=_PRIOR_STYLES[prior])


def _share(prevalence: float | None, count: int, total: int) -> str:
    return _MISSING if prevalence is None else f"{prevalence:.0%} ({count}/{total})"


def _percent(value: float | None) -> str:
    return _MISSING if value is None else f"{value:.1%}"


def _number(value: float | None, digits: int = 2) -> str:
    return _MISSING if value is None else f"{value:.{digits}f}"


def _key(key: str) -> str:
    return key or "(none)"
