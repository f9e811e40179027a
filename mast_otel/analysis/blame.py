"""Where failed runs went wrong: the most blamed agents, steps and modes per group, from the store.

Blame (`mast_otel.annotate.blame`) points each failed run at its decisive error; this reads the
`BLAME_SQL` rollup of those pointers per model (or agent, service, version) and renders it as the
short "where failed runs went wrong" table of `mast-otel analyze`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from mast_otel.analysis.queries import BLAME_SQL, Dimension, Scope
from mast_otel.store.base import QuerySource

FACETS = ("agent", "step", "mode")


@dataclass(frozen=True, slots=True)
class BlameShare:
    value: str  # an agent name, a step index, or a mode code ("structural" when no finding pointed there)
    failed_runs: int
    share: float  # of the group's failed runs that carry blame


@dataclass(frozen=True, slots=True)
class BlameSummary:
    """One group's most blamed agents, steps and modes, most frequent first (at most three each)."""

    key: str
    agents: tuple[BlameShare, ...]
    steps: tuple[BlameShare, ...]
    modes: tuple[BlameShare, ...]
    dimension: Dimension = Dimension.MODEL


def compute_blame(source: QuerySource, scope: Scope | None = None) -> list[BlameSummary]:
    scope = scope or Scope()
    facets: dict[str, dict[str, list[BlameShare]]] = {}
    for row in source.query(BLAME_SQL, scope.parameters()).dicts():
        share = BlameShare(str(row["value"]), int(row["failed_runs"]), float(row["share"]))
        facets.setdefault(row["group_key"], {}).setdefault(row["facet"], []).append(share)
    return [
        BlameSummary(
            key=key,
            agents=tuple(found.get("agent", ())),
            steps=tuple(found.get("step", ())),
            modes=tuple(found.get("mode", ())),
            dimension=scope.by,
        )
        for key, found in sorted(facets.items())
    ]


def blame_to_json(summaries: Sequence[BlameSummary]) -> dict[str, Any]:
    """`{"blame": {"<group>": {"agents": [{"value": ..., "failed_runs": N, "share": s}], ...}}}`."""

    def shares(items: Sequence[BlameShare]) -> list[dict[str, Any]]:
        return [{"value": s.value, "failed_runs": s.failed_runs, "share": round(s.share, 4)} for s in items]

    return {
        "blame": {
            summary.key: {
                "agents": shares(summary.agents),
                "steps": shares(summary.steps),
                "modes": shares(summary.modes),
            }
            for summary in summaries
        }
    }


def blame_table(summaries: Sequence[BlameSummary]) -> Table:
    """One row per group: its top blamed agents, steps and modes, each with its share."""
    dimension = summaries[0].dimension if summaries else Dimension.MODEL
    table = Table(title="Where failed runs went wrong (blame)", title_justify="left")
    table.add_column(dimension.value.capitalize())
    table.add_column("Blamed agents")
    table.add_column("Blamed steps")
    table.add_column("Modes pointing there")
    for summary in summaries:
        table.add_row(
            summary.key or "(none)",
            _cell(summary.agents),
            _cell(summary.steps, prefix="step "),
            _cell(summary.modes),
        )
    return table


def _cell(items: Sequence[BlameShare], prefix: str = "") -> str:
    return "\n".join(f"{prefix}{item.value} {item.share:.0%} ({item.failed_runs})" for item in items) or "—"
