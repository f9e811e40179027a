"""Assemble stage: group spans by trace and decide when a trace is complete.

A trace is released `grace` seconds after its root span arrived (children of a finished root may
still be in flight from other processes or batches), or `max_wait` seconds after its first span
when no root ever arrives. Timing uses this process's monotonic clock, never span timestamps, so
senders' clock skew cannot hold a trace back or release it early.

Spans are deduplicated by span id within a trace. After release, a trace's span ids are remembered
for a while (bounded) so that a duplicate export arriving late is recognised as such. A genuinely new
span of a released trace starts a *late* trace, released after the grace period: the pipeline merges
it with what is already stored and annotates the run again.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from mast_otel.spans import Span


class ReleaseReason(str, Enum):
    ROOT_ENDED = "root_ended"
    MAX_WAIT = "max_wait"
    LATE = "late"  # spans of a trace released earlier
    FLUSH = "flush"  # shutdown: everything still pending goes out


@dataclass(frozen=True, slots=True)
class AssemblyConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    grace_s: float = 2.0
    max_wait_s: float = 60.0
    max_spans_per_trace: int = 50_000  # past this a runaway trace is released early rather than grow forever
    remembered_traces: int = 20_000  # released traces whose span ids are kept to spot late duplicates

    def __post_init__(self) -> None:
        if self.grace_s < 0 or self.max_wait_s <= 0:
            raise ValueError("grace_s must be >= 0 and max_wait_s > 0")
        if self.max_wait_s < self.grace_s:
            raise ValueError("max_wait_s must be at least grace_s")
        if self.max_spans_per_trace < 1 or self.remembered_traces < 0:
            raise ValueError("max_spans_per_trace must be >= 1 and remembered_traces >= 0")


@dataclass(frozen=True, slots=True)
class CompletedTrace:
    trace_id: str
    spans: tuple[Span, ...]
    reason: ReleaseReason
    waited_s: float  # from first span seen to release


@dataclass(frozen=True, slots=True)
class AddResult:
    accepted: tuple[Span, ...]  # new spans, now held in assembly
    duplicates: int  # spans already seen (same trace id and span id), dropped


@dataclass
class _Pending:
    first_seen: float
    spans: dict[str, Span] = field(default_factory=dict)
    deadline: float = 0.0
    has_root: bool = False
    late: bool = False


class TraceAssembler:
    """Thread-safe: receivers call `add` concurrently; one pipeline thread calls `release_due`."""

    def __init__(
        self, config: AssemblyConfig | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config or AssemblyConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._deadlines: list[tuple[float, str]] = []  # heap; stale entries are skipped on pop
        self._released: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._span_count = 0

    @property
    def trace_count(self) -> int:
        return len(self._pending)

    @property
    def span_count(self) -> int:
        return self._span_count

    def add(self, spans: Iterable[Span]) -> AddResult:
        now = self._clock()
        accepted: list[Span] = []
        duplicates = 0
        with self._lock:
            for span in spans:
                pending = self._pending.get(span.trace_id)
                if pending is None:
                    released = self._released.get(span.trace_id)
                    if released is not None and span.span_id in released:
                        duplicates += 1
                        continue
                    late = released is not None
                    wait = self.config.grace_s if late else self.config.max_wait_s
                    pending = _Pending(first_seen=now, deadline=now + wait, late=late)
                    self._pending[span.trace_id] = pending
                    heapq.heappush(self._deadlines, (pending.deadline, span.trace_id))
                if span.span_id in pending.spans:
                    duplicates += 1
                    continue
                pending.spans[span.span_id] = span
                accepted.append(span)
                self._span_count += 1
                if span.is_root and not pending.has_root:
                    pending.has_root = True
                    self._reschedule(span.trace_id, pending, now + self.config.grace_s)
                if len(pending.spans) >= self.config.max_spans_per_trace:
                    self._reschedule(span.trace_id, pending, now)
        return AddResult(tuple(accepted), duplicates)

    def seen(self, spans: Iterable[Span]) -> set[tuple[str, str]]:
        """(trace id, span id) of those `spans` that `add` would drop as duplicates of spans added
        before (held, or remembered after release); repeats within `spans` itself are not included."""
        with self._lock:
            found: set[tuple[str, str]] = set()
            for span in spans:
                pending = self._pending.get(span.trace_id)
                held = pending.spans if pending is not None else self._released.get(span.trace_id, ())
                if span.span_id in held:
                    found.add((span.trace_id, span.span_id))
            return found

    def release_due(self, max_spans: int | None = None) -> list[CompletedTrace]:
        """Traces whose deadline has passed, oldest deadline first.

        With `max_spans`, stops once the traces released hold that many spans (always releasing at
        least one due trace); the rest stay due for the next call. A caller that rebuilds what it
        releases then holds a trace's spans and its rebuilt run together for a bounded number of
        spans, instead of for everything that fell due while it was busy.
        """
        now = self._clock()
        out: list[CompletedTrace] = []
        released_spans = 0
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                if max_spans is not None and released_spans >= max_spans:
                    break
                deadline, trace_id = heapq.heappop(self._deadlines)
                pending = self._pending.get(trace_id)
                if pending is None or pending.deadline != deadline:
                    continue  # superseded by an earlier deadline, or already released
                reason = (
                    ReleaseReason.LATE
                    if pending.late
                    else ReleaseReason.ROOT_ENDED
                    if pending.has_root
                    else ReleaseReason.MAX_WAIT
                )
                out.append(self._release(trace_id, reason, now))
                released_spans += len(out[-1].spans)
        return out

    def flush(self) -> list[CompletedTrace]:
        """Release everything pending (shutdown)."""
        now = self._clock()
        with self._lock:
            out = [self._release(trace_id, ReleaseReason.FLUSH, now) for trace_id in list(self._pending)]
            self._deadlines.clear()
        return out

    def clear(self) -> int:
        """Forget everything, pending and remembered (the pipeline will replay from the spool)."""
        with self._lock:
            dropped = self._span_count
            self._pending.clear()
            self._deadlines.clear()
            self._released.clear()
            self._span_count = 0
        return dropped

    def _reschedule(self, trace_id: str, pending: _Pending, deadline: float) -> None:
        if deadline < pending.deadline:
            pending.deadline = deadline
            heapq.heappush(self._deadlines, (deadline, trace_id))

    def _release(self, trace_id: str, reason: ReleaseReason, now: float) -> CompletedTrace:
        pending = self._pending.pop(trace_id)
        self._span_count -= len(pending.spans)
        if self.config.remembered_traces:
            self._released[trace_id] = self._released.pop(trace_id, frozenset()) | frozenset(pending.spans)
            while len(self._released) > self.config.remembered_traces:
                self._released.popitem(last=False)
        spans = tuple(sorted(pending.spans.values(), key=lambda s: (s.start_ns, s.span_id)))
        return CompletedTrace(trace_id, spans, reason, now - pending.first_seen)
