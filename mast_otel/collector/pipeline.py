"""The pipeline: accepted spans -> assemble -> rebuild -> annotate -> store, on one worker thread.

Receivers call `submit` from their own threads; it only hands spans to the assembler, so a slow
database never blocks a receive call for long. The worker releases complete traces, rebuilds and
annotates them, and writes spans, runs and outcomes to the store in batches. Memory is bounded by
`max_in_flight_spans` (spans accepted but not yet stored): past it `submit` raises `Overloaded` and
the receivers answer with OTLP's retryable codes, so senders back off instead of the queue growing.
When the store fails, batches stay in memory (still counted in flight) and are retried with backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from mast_otel.annotate.base import AnnotatedRun, Annotator
from mast_otel.annotate.run import annotate_run
from mast_otel.collector.assembly import CompletedTrace, TraceAssembler
from mast_otel.conversation.model import OutcomeReport
from mast_otel.conversation.rebuild import is_outcome_only, outcome_reports, rebuild
from mast_otel.spans import Span
from mast_otel.store.base import Store

log = logging.getLogger(__name__)


class Overloaded(RuntimeError):
    """Too much accepted and not yet stored; the sender should retry later."""

    def __init__(self, in_flight: int, limit: int, retry_after_s: float) -> None:
        super().__init__(
            f"collector is at capacity ({in_flight} spans in flight, limit {limit}); "
            f"retry in {retry_after_s:.0f}s"
        )
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    max_in_flight_spans: int = 200_000
    batch_max_spans: int = 20_000  # write when this many spans are buffered...
    flush_interval_s: float = 0.5  # ...or this long after the oldest buffered item
    tick_s: float = 0.05
    retry_initial_s: float = 0.5
    retry_max_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_in_flight_spans < 1 or self.batch_max_spans < 1:
            raise ValueError("max_in_flight_spans and batch_max_spans must be >= 1")
        if self.tick_s <= 0 or self.flush_interval_s < 0:
            raise ValueError("tick_s must be > 0 and flush_interval_s >= 0")


@dataclass(frozen=True, slots=True)
class PipelineStats:
    spans_accepted: int
    spans_duplicate: int
    spans_late: int
    spans_stored: int
    spans_in_flight: int
    traces_in_assembly: int
    runs_stored: int
    findings_stored: int
    outcomes_stored: int
    rebuild_errors: int
    annotate_errors: int
    store_errors: int
    refused_exports: int


@dataclass
class _Batch:
    spans: list[Span] = field(default_factory=list)
    runs: list[AnnotatedRun] = field(default_factory=list)
    outcomes: list[OutcomeReport] = field(default_factory=list)
    started: float = 0.0

    def empty(self) -> bool:
        return not (self.spans or self.runs or self.outcomes)


class Pipeline:
    def __init__(
        self,
        assembler: TraceAssembler,
        annotator: Annotator,
        store: Store,
        config: PipelineConfig | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self._assembler = assembler
        self._annotator = annotator
        self._store = store
        self._lock = threading.Lock()
        self._counts = {f.name: 0 for f in fields(PipelineStats)}
        self._in_flight = 0
        self._batch = _Batch()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._retry_at = 0.0
        self._retry_delay = 0.0

    # --- receiver side ---------------------------------------------------------------------
    def submit(self, spans: Sequence[Span]) -> int:
        """Accept spans; returns how many were new. Raises Overloaded past the in-flight limit."""
        if not spans:
            return 0
        with self._lock:
            if self._in_flight + len(spans) > self.config.max_in_flight_spans and self._in_flight > 0:
                self._counts["refused_exports"] += 1
                raise Overloaded(self._in_flight, self.config.max_in_flight_spans, self._retry_hint())
            self._in_flight += len(spans)
        result = self._assembler.add(spans)
        with self._lock:
            # Duplicates and late spans don't wait in assembly; late ones go straight to the batch below.
            self._in_flight -= result.duplicates
            self._counts["spans_accepted"] += result.accepted + len(result.late)
            self._counts["spans_duplicate"] += result.duplicates
            self._counts["spans_late"] += len(result.late)
            self._idle.clear()
            if result.late:
                self._add_late(result.late)
        return result.accepted + len(result.late)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mast-otel-pipeline", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Release every pending trace, store everything accepted, stop. True when nothing was left behind."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is None or not self._thread.is_alive():
            self._process(self._assembler.flush())
            deadline = time.monotonic() + timeout_s
            while not self._batch.empty() and time.monotonic() < deadline:
                if not self._write():
                    time.sleep(min(self.config.retry_max_s, 1.0))
        with self._lock:
            return self._in_flight == 0

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until everything accepted so far is stored (used by the demo and tests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            self._idle.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        with self._lock:
            return self._in_flight == 0

    def stats(self) -> PipelineStats:
        with self._lock:
            counts = dict(self._counts)
            counts["spans_in_flight"] = self._in_flight
        counts["traces_in_assembly"] = self._assembler.trace_count
        return PipelineStats(**counts)

    # --- worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._process(self._assembler.release_due())
                if self._batch_due():
                    self._write()
            except Exception:  # the worker must outlive any single bad trace
                log.exception("pipeline iteration failed; continuing")
            self._stop.wait(self.config.tick_s)

    def _process(self, traces: Sequence[CompletedTrace]) -> None:
        for trace in traces:
            with self._lock:
                batch = self._batch
                if batch.empty():
                    batch.started = time.monotonic()
                batch.spans.extend(trace.spans)
                batch.outcomes.extend(outcome_reports(trace.spans))
            if is_outcome_only(trace.spans):
                continue  # a grader's verdict for a run stored earlier: the outcome rows carry it
            run = self._annotated(trace)
            if run is not None:
                with self._lock:
                    self._batch.runs.append(run)

    def _annotated(self, trace: CompletedTrace) -> AnnotatedRun | None:
        try:
            conversation = rebuild(trace.spans)
        except Exception:
            log.exception("could not rebuild trace %s; its spans are stored, the run is not", trace.trace_id)
            self._count("rebuild_errors")
            return None
        try:
            return annotate_run(conversation, self._annotator)
        except Exception:
            log.exception(
                "annotator %s failed on trace %s; storing the run without findings",
                self._annotator.name,
                trace.trace_id,
            )
            self._count("annotate_errors")
            return AnnotatedRun(conversation, (), version=time.time_ns())

    def _add_late(self, spans: Sequence[Span]) -> None:
        # Caller holds the lock. Late outcome reports update the run; other late spans are kept as raw
        # spans (re-annotating the run with them is the durable pipeline's job).
        if self._batch.empty():
            self._batch.started = time.monotonic()
        self._batch.spans.extend(spans)
        self._batch.outcomes.extend(outcome_reports(spans))

    def _batch_due(self) -> bool:
        with self._lock:
            batch = self._batch
            if batch.empty() or time.monotonic() < self._retry_at:
                return False
            return (
                len(batch.spans) >= self.config.batch_max_spans
                or time.monotonic() - batch.started >= self.config.flush_interval_s
                or self._assembler.trace_count == 0
            )

    def _write(self) -> bool:
        with self._lock:
            batch, self._batch = self._batch, _Batch()
        try:
            if batch.spans:
                self._store.insert_spans(batch.spans)
            if batch.runs:
                self._store.insert_runs(batch.runs)
            if batch.outcomes:
                self._store.insert_outcomes(batch.outcomes)
        except Exception as exc:
            # Inserts are idempotent (deduplication tokens), so retrying the whole batch is safe.
            self._count("store_errors")
            self._retry_delay = min(
                self.config.retry_max_s, max(self.config.retry_initial_s, self._retry_delay * 2)
            )
            self._retry_at = time.monotonic() + self._retry_delay
            log.warning("store write failed (%s); retrying in %.1fs", exc, self._retry_delay)
            with self._lock:
                self._batch = _merge(batch, self._batch)
            return False
        self._retry_delay = 0.0
        with self._lock:
            self._in_flight -= len(batch.spans)
            self._counts["spans_stored"] += len(batch.spans)
            self._counts["runs_stored"] += len(batch.runs)
            self._counts["findings_stored"] += sum(len(r.findings) for r in batch.runs)
            self._counts["outcomes_stored"] += len(batch.outcomes)
            if self._in_flight == 0:
                self._idle.set()
        return True

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _retry_hint(self) -> float:
        return max(1.0, self._retry_delay or self.config.flush_interval_s * 2)


def _merge(first: _Batch, second: _Batch) -> _Batch:
    return _Batch(
        first.spans + second.spans,
        first.runs + second.runs,
        first.outcomes + second.outcomes,
        first.started or second.started,
    )
