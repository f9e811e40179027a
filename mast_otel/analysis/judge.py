"""The LLM judge in the analysis: its cost per judge model, and how far it agrees with the rules.

`judge_usage` sums the judge's ledger (`mast_judge_usage`): runs judged, served from the cache,
skipped (and why), failed; requests, tokens and cost, also per judged run. `agreement` compares, per
mode, the rules' and the judge's findings on the runs the judge gave a verdict on: both, rules only,
judge only, neither, observed agreement and Cohen's kappa. Both come from `queries.py`'s SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from mast_otel import taxonomy
from mast_otel.analysis.queries import AGREEMENT_SQL, JUDGE_USAGE_SQL, Scope
from mast_otel.store.base import QuerySource
from mast_otel.taxonomy import FailureMode

__all__ = [
    "JudgeUsageSummary",
    "ModeAgreement",
    "agreement",
    "agreement_table",
    "judge_to_json",
    "judge_usage",
    "judge_usage_table",
]

_MISSING = "—"


@dataclass(frozen=True, slots=True)
class JudgeUsageSummary:
    judge_model: str
    judged: int
    partial: int
    cached: int
    skipped_sampling: int
    skipped_budget: int
    skipped_overload: int
    failed: int
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    tokens_per_judged_run: float | None
    requests_per_judged_run: float | None
    cost_per_judged_run: float | None
    cache_hit_rate: float | None


@dataclass(frozen=True, slots=True)
class ModeAgreement:
    mode: FailureMode
    runs: int  # runs the judge settled this mode for
    rules_and_judge: int
    rules_only: int
    judge_only: int
    neither: int
    observed_agreement: float | None
    kappa: float | None  # None when there is no variation to agree on


def judge_usage(source: QuerySource, scope: Scope | None = None) -> list[JudgeUsageSummary]:
    """One summary per judge model, over the usage rows in the scope's time window."""
    fields = JudgeUsageSummary.__dataclass_fields__
    rows = source.query(JUDGE_USAGE_SQL, (scope or Scope()).parameters()).dicts()
    return [JudgeUsageSummary(**{name: row[name] for name in fields}) for row in rows]


def agreement(source: QuerySource, scope: Scope | None = None) -> list[ModeAgreement]:
    """Rules vs judge, per mode in taxonomy order (modes no judged run settled are left out)."""
    rows = source.query(AGREEMENT_SQL, (scope or Scope()).parameters()).dicts()
    return [
        ModeAgreement(
            mode=taxonomy.mode(row["mode"]),
            runs=row["runs"],
            rules_and_judge=row["rules_and_judge"],
            rules_only=row["rules_only"],
            judge_only=row["judge_only"],
            neither=row["neither"],
            observed_agreement=row["observed_agreement"],
            kappa=row["kappa"],
        )
        for row in rows
    ]


def judge_to_json(
    usage: Sequence[JudgeUsageSummary], modes: Sequence[ModeAgreement] | None = None
) -> dict[str, Any]:
    """`{"judge_usage": [...]}`, plus `"agreement": {"FM-1.3": {...}}` when `modes` is given."""
    document: dict[str, Any] = {"judge_usage": [asdict(summary) for summary in usage]}
    if modes is not None:
        document["agreement"] = {
            entry.mode.code: {
                "name": entry.mode.name,
                "runs": entry.runs,
                "rules_and_judge": entry.rules_and_judge,
                "rules_only": entry.rules_only,
                "judge_only": entry.judge_only,
                "neither": entry.neither,
                "observed_agreement": entry.observed_agreement,
                "kappa": entry.kappa,
            }
            for entry in modes
        }
    return document


def judge_usage_table(usage: Sequence[JudgeUsageSummary]) -> Table:
    table = Table(title="LLM judge usage", title_justify="left")
    for heading in ("Judge model", "Judged", "Cached", "Skipped", "Failed", "Requests/run", "Tokens/run"):
        table.add_column(heading, justify="left" if heading == "Judge model" else "right")
    table.add_column("Input tokens", justify="right")
    table.add_column("Output tokens", justify="right")
    table.add_column("Cost (USD)", justify="right")
    for summary in usage:
        skipped = summary.skipped_sampling + summary.skipped_budget + summary.skipped_overload
        table.add_row(
            summary.judge_model,
            str(summary.judged + summary.partial),
            str(summary.cached),
            str(skipped),
            str(summary.failed),
            _number(summary.requests_per_judged_run, 1),
            _number(summary.tokens_per_judged_run, 0),
            f"{summary.input_tokens:,}",
            f"{summary.output_tokens:,}",
            f"{summary.cost_usd:.2f}" if summary.cost_usd else _MISSING,
        )
    return table


def agreement_table(modes: Sequence[ModeAgreement]) -> Table:
    table = Table(title="Rules vs LLM judge, per mode", title_justify="left")
    table.add_column("Mode")
    table.add_column("Name")
    for heading in ("Runs", "Both", "Rules only", "Judge only", "Neither", "Agreement", "Kappa"):
        table.add_column(heading, justify="right")
    for entry in modes:
        table.add_row(
            entry.mode.code,
            entry.mode.name,
            str(entry.runs),
            str(entry.rules_and_judge),
            str(entry.rules_only),
            str(entry.judge_only),
            str(entry.neither),
            _number(entry.observed_agreement, 2, percent=True),
            _number(entry.kappa, 2),
        )
    return table


def _number(value: float | None, digits: int, *, percent: bool = False) -> str:
    if value is None:
        return _MISSING
    return f"{value:.0%}" if percent else f"{value:,.{digits}f}"
