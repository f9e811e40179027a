"""`mast-otel report --html`: the analysis as one self-contained HTML page (inline SVG, no scripts).

The numbers are the CLI's (same templates, same bindings); matplotlib draws four plots: the failure
vector heatmap (prevalence of each mode in failed runs, group x mode), each group's prevalence in
successful vs failed runs, the distribution of distinct modes per failed run, and rates over time.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot

import matplotlib.pyplot as plt
from jinja2 import Environment
from matplotlib.figure import Figure

from mast_otel.analysis.insights import recommendations
from mast_otel.analysis.profiles import GroupProfile, compute_profiles
from mast_otel.analysis.queries import MODES_PER_FAILED_RUN_SQL, RATES_OVER_TIME_SQL, Scope
from mast_otel.analysis.render import study_extras
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import CODES

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>mast-otel report</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1, h2, h3 { font-weight: 600; } table { border-collapse: collapse; margin: 1em 0; }
td, th { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right; }
td:first-child, th:first-child, td.text { text-align: left; }
.fatal { color: #b00020; font-weight: 600; } .benign { color: #2e7d32; } .inconclusive { color: #777; }
.plot svg { max-width: 100%; height: auto; } .note { color: #666; }
</style></head><body>
<h1>Why the agents fail</h1>
<p class="note">Generated {{ generated }} from ClickHouse by mast-otel; runs grouped by {{
 dimension }}{{ window }}.
Prevalences and odds ratios count runs with a known outcome. Verdicts marked "prior" fall back to the
reference study because the data is thin.</p>
{% if not profiles %}<p>No runs stored yet.</p>{% else %}
<h2>Overview</h2>
<table><tr><th>{{ dimension }}</th><th>Runs</th><th>Succeeded</th><th>Failed</th><th>Success rate</th>
<th>Mean score</th><th>Modes / failed run</th><th>Profile</th></tr>
{% for p in profiles %}<tr><td>{{ p.key or "(none)" }}</td><td>{{ p.runs }}</td><td>{{ p.successes }}</td>
<td>{{ p.failures }}</td><td>{{ pct(p.success_rate) }}</td><td>{{ num(p.mean_score, 2) }}</td>
<td>{{ num(p.modes_per_failed_run, 1) }}</td><td class="text">{{ p.failure_profile or "—" }}</td>
</tr>{% endfor %}
</table>
<h2>Failure vector</h2><div class="plot" id="plot-heatmap">{{ plots.heatmap }}</div>
<h2>Prevalence in successful vs failed runs</h2>
<div class="plot" id="plot-prevalence">{{ plots.prevalence }}</div>
<h2>Distinct modes per failed run</h2><div class="plot" id="plot-modes">{{ plots.modes }}</div>
<h2>Rates over time</h2><div class="plot" id="plot-rates">{{ plots.rates }}</div>
{% for p in profiles %}
<h2>{{ dimension }} {{ p.key or "(none)" }}</h2>
<table><tr><th>Mode</th><th>In successful</th><th>In failed</th><th>Odds ratio (95% CI)</th>
<th>Fisher p</th>
<th>Verdict</th></tr>
{% for m in p.modes if m.observed %}<tr><td>{{ m.mode.code }} {{ m.mode.name }}</td>
<td>{{ pct(m.success_prevalence) }}</td><td>{{ pct(m.failure_prevalence) }}</td>
<td>{{ odds(m) }}</td><td>{{ num(m.p_value, 3) }}</td>
<td class="text {{ m.verdict.verdict.value }}" title="{{ m.verdict.reason }}">{{ m.verdict.verdict.value }}
{%- if m.verdict.from_prior %} (prior){% endif %}</td></tr>{% endfor %}
</table>
{% for r in advice(p) %}<p><b>{{ r.title }}</b> ({{ r.modes | join(", ") }}): {{ r.action }}</p>{% endfor %}
{% set found = patterns.get(p.key) %}
{% if found and found.openers %}<p>What comes first in failed runs (runs it opens / runs with it):
{% for o in found.openers[:4] %}{{ o.mode.code }} ({{ o.opens_run }}/{{ o.failed_runs_with_mode
 }}){% if not loop.last %}, {% endif %}{% endfor %}</p>{% endif %}
{% if found and found.pairs %}<p>Most frequent together in failed runs:
{% for pair in found.pairs[:4] %}{{ pair.first.code }} + {{ pair.second.code }} ({{ pair.together
 }}){% if not loop.last %}, {% endif %}{% endfor %}</p>{% endif %}
{% endfor %}
{% if comparison %}<h2>{{ comparison.a.key }} vs {{ comparison.b.key }}</h2>
<table><tr><th>Mode, in failed runs</th><th>{{ comparison.a.key }}</th><th>{{ comparison.b.key }}</th></tr>
<tr><td>Success rate</td><td>{{ pct(comparison.a.success_rate) }}</td>
<td>{{ pct(comparison.b.success_rate) }}</td></tr>
{% for c in comparison.modes %}<tr><td>{{ c.mode.code }} {{ c.mode.name }}</td>
<td>{{ pct(c.a_failure_prevalence) }} {{ c.a_verdict.value }}</td>
<td>{{ pct(c.b_failure_prevalence) }} {{ c.b_verdict.value }}</td></tr>{% endfor %}</table>{% endif %}
{% endif %}
</body></html>
"""


def build_report(
    source: QuerySource, scope: Scope | None = None, compare: tuple[str, str] | None = None
) -> str:
    """The page for the runs in `scope`; `compare` names two groups to set side by side."""
    scope = scope or Scope()
    profiles = compute_profiles(source, scope=scope)
    bindings = scope.parameters()
    extras = study_extras(source, scope, profiles, compare)
    distribution = source.query(MODES_PER_FAILED_RUN_SQL, bindings).dicts()
    rates = source.query(RATES_OVER_TIME_SQL, {**bindings, "bucket_s": _bucket_s(source)}).dicts()
    plots = {
        "heatmap": _svg(_heatmap(profiles)),
        "prevalence": _svg(_prevalence(profiles)),
        "modes": _svg(_distribution(distribution)),
        "rates": _svg(_rates(rates)),
    }
    window = ""
    if scope.since or scope.until:
        window = f", runs started {_when(scope.since, 'from')} {_when(scope.until, 'until')}".rstrip()
    environment = Environment(autoescape=True)
    return environment.from_string(_PAGE).render(
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        dimension=scope.by.value,
        window=window,
        profiles=profiles,
        plots={name: _Markup(svg) for name, svg in plots.items()},
        comparison=extras.comparison,
        advice=recommendations,
        patterns=extras.patterns,
        pct=_percent,
        num=_number,
        odds=_odds,
    )


class _Markup(str):
    """Trusted SVG text from matplotlib: jinja2 must not escape it."""

    def __html__(self) -> str:
        return str(self)


def _when(moment: datetime | None, word: str) -> str:
    return f"{word} {moment:%Y-%m-%d %H:%M}" if moment else ""


def _bucket_s(source: QuerySource) -> int:
    """About 40 buckets over the stored runs' time span, at least a minute."""
    row = source.query(
        "SELECT toUnixTimestamp(min(Timestamp)), toUnixTimestamp(max(Timestamp)) FROM mast_conversations"
    ).rows
    span = (row[0][1] - row[0][0]) if row and row[0][0] is not None else 0
    return max(60, int(span // 40) or 60)


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _heatmap(profiles: Sequence[GroupProfile]) -> Figure:
    figure, axes = plt.subplots(figsize=(10, 1.2 + 0.45 * max(len(profiles), 1)))
    matrix = [[(m.failure_prevalence or 0.0) for m in p.modes] for p in profiles] or [[0.0] * len(CODES)]
    image = axes.imshow(matrix, cmap="Reds", vmin=0, vmax=1, aspect="auto")
    axes.set_xticks(range(len(CODES)), [code.removeprefix("FM-") for code in CODES])
    axes.set_yticks(range(len(profiles)), [p.key or "(none)" for p in profiles])
    axes.set_xlabel("MAST mode (prevalence in failed runs)")
    for row, values in enumerate(matrix):
        for column, value in enumerate(values):
            if value:
                axes.text(
                    column,
                    row,
                    f"{value:.0%}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if value > 0.6 else "black",
                )
    figure.colorbar(image, ax=axes, fraction=0.02)
    return figure


def _prevalence(profiles: Sequence[GroupProfile]) -> Figure:
    count = max(len(profiles), 1)
    figure, axes_list = plt.subplots(count, 1, figsize=(10, 2.4 * count), squeeze=False)
    positions = range(len(CODES))
    for axes, profile in zip((row[0] for row in axes_list), profiles, strict=False):
        success = [m.success_prevalence or 0.0 for m in profile.modes]
        failure = [m.failure_prevalence or 0.0 for m in profile.modes]
        axes.bar([x - 0.2 for x in positions], success, width=0.4, label="successful runs", color="#2e7d32")
        axes.bar([x + 0.2 for x in positions], failure, width=0.4, label="failed runs", color="#b00020")
        axes.set_xticks(list(positions), [code.removeprefix("FM-") for code in CODES])
        axes.set_ylim(0, 1)
        axes.set_title(profile.key or "(none)", loc="left", fontsize=10)
        axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    return figure


def _distribution(rows: Sequence[dict[str, Any]]) -> Figure:
    figure, axes = plt.subplots(figsize=(10, 3))
    groups = sorted({row["group_key"] for row in rows})
    width = 0.8 / max(len(groups), 1)
    for index, group in enumerate(groups):
        mine = [row for row in rows if row["group_key"] == group]
        total = sum(row["failed_runs"] for row in mine) or 1
        axes.bar(
            [int(row["modes"]) + index * width - 0.4 + width / 2 for row in mine],
            [row["failed_runs"] / total for row in mine],
            width=width,
            label=group or "(none)",
        )
    axes.set_xlabel("distinct modes in a failed run")
    axes.set_ylabel("share of failed runs")
    if groups:
        axes.legend(fontsize=8)
    return figure


def _rates(rows: Sequence[dict[str, Any]]) -> Figure:
    figure, (success_axes, fatal_axes) = plt.subplots(1, 2, figsize=(10, 3), sharex=True)
    for group in sorted({row["group_key"] for row in rows}):
        mine = [row for row in rows if row["group_key"] == group]
        times = [row["time"] for row in mine]
        success_axes.plot(times, [row["success_rate"] for row in mine], marker=".", label=group or "(none)")
        fatal_axes.plot(times, [row["fatal_mode_rate"] for row in mine], marker=".", label=group or "(none)")
    success_axes.set_title("success rate", loc="left", fontsize=10)
    fatal_axes.set_title("fatal-mode rate", loc="left", fontsize=10)
    for axes in (success_axes, fatal_axes):
        axes.set_ylim(0, 1)
        axes.tick_params(axis="x", labelrotation=30, labelsize=7)
    if rows:
        fatal_axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _odds(prevalence: Any) -> str:
    if prevalence.odds_ratio is None:
        return "—"
    return f"{prevalence.odds_ratio:.2f} ({prevalence.odds_ratio_low:.2f}–{prevalence.odds_ratio_high:.2f})"
