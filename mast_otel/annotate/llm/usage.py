"""What judging a run cost and how it ended: one `JudgeUsage` row per attempt, kept in ClickHouse.

The rows are the judge's ledger and its persistent cache at once: `mast_judge_usage` holds every
decision (judged, answered from the cache, skipped and why, failed and why) with requests, tokens
and cost, and for judged runs the verdict itself, looked up by content hash so that a run is never
judged twice, across restarts too. `analyze` sums them per judge model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from mast_otel.store.base import Store

__all__ = ["JudgeStatus", "JudgeStore", "JudgeUsage", "UsageStore"]


class JudgeStatus(str, Enum):
    JUDGED = "judged"  # every chunk answered: the verdict is cached
    PARTIAL = "partial"  # some chunks got no valid reply: findings of the others, not cached
    CACHED = "cached"  # same content judged before: its verdict reused, no request
    SKIPPED_SAMPLING = "skipped_sampling"  # the sampling policy left it out
    SKIPPED_BUDGET = "skipped_budget"  # the hourly token budget could not cover it
    SKIPPED_OVERLOAD = "skipped_overload"  # the judge's queue was full, or it stopped first
    FAILED = "failed"  # no chunk got a valid reply (endpoint down, refused, garbage)

    @property
    def has_verdict(self) -> bool:
        return self in (JudgeStatus.JUDGED, JudgeStatus.PARTIAL, JudgeStatus.CACHED)


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    """One row of `mast_judge_usage`."""

    time_ns: int
    content_hash: str
    trace_id: str
    service_name: str
    run_model: str  # the judged run's model
    judge_model: str
    status: JudgeStatus
    reason: str = ""  # why skipped or failed, or what was wrong with replies
    requests: int = 0
    chunks: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unknown_modes: tuple[str, ...] = ()  # modes the verdict could not settle
    verdict: str = ""  # RunVerdict.to_json(), for JUDGED rows only (the cache)


class UsageStore(Protocol):
    def insert_judge_usage(self, rows: Sequence[JudgeUsage]) -> None: ...


class JudgeStore(Store, UsageStore, Protocol):
    """What the judge service writes to: runs (new versions with judge findings) and usage rows."""
