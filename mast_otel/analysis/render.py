"""Failure profiles as rich tables for the terminal: one overview of the groups, one mode table each.

The mode table puts a mode's prevalence in successful runs next to its prevalence in failed runs,
the relative increase and the reference study's prior, so a reader sees at a glance which modes
are fatal for *this* fleet and which are merely common.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from mast_otel.analysis.profiles import GroupProfile, ModePrevalence
from mast_otel.analysis.queries import Dimension
from mast_otel.taxonomy import Prior

NO_RUNS = "No runs stored yet: send traces to the collector (or import runs), then analyse again."
_MISSING = "—"
_PRIOR_STYLES = {Prior.FATAL: "bold red", Prior.BENIGN: "green"}


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
    for prevalence in observed:
        table.add_row(
            prevalence.mode.code,
            prevalence.mode.name,
            _share(prevalence.success_prevalence, prevalence.successes_with_mode, profile.successes),
            _share(prevalence.failure_prevalence, prevalence.failures_with_mode, profile.failures),
            _increase(prevalence),
            _prior(prevalence.prior),
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
