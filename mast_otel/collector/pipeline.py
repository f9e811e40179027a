"""The pipeline: accepted exports -> spool -> assemble -> rebuild -> annotate -> store.

Receivers call `accept` from their threads: the export is appended to the write-ahead spool (so
the sender's "OK" means the data is on disk) and, in normal operation, its spans go straight to the
assembler. One worker thread releases complete traces, rebuilds and annotates them, and writes runs
and outcomes to the store in batches. The spans themselves are stored from the spool, as they came
off the wire, by the `RawSpanWriter` (see `span_writer.py`): no Python row is built per span.

Memory is bounded: past `max_in_flight_spans` (accepted, not yet stored) or `max_in_flight_bytes`,
`accept` raises `Overloaded` and receivers answer with OTLP's retryable codes. The pipeline runs in
one of three modes:

- LIVE: spans flow through memory; the spool is only a safety net.
- SPOOLING: the store failed. Memory is dropped (it is all in the spool) and exports are only
  appended to the spool, until it is full; the worker probes the store with backoff.
- REPLAYING: on start-up with a non-empty spool, and once the store is back. The worker reads the
  spool from its oldest record and feeds it through the pipeline at the pace memory allows, then
  switches to LIVE when it has caught up with the end.

Replays are idempotent: a trace whose run is already stored is merged with its stored spans (once
the raw span writer has stored everything admitted before it), and the run gets a new version that
replaces the old one. Late spans of a released trace take the same path, so the run is re-annotated
instead of split. The raw span writer's own inserts are idempotent per batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar

from mast_otel.annotate.base import AnnotatedRun, Annotator
from mast_otel.annotate.run import annotate_run
from mast_otel.collector.assembly import CompletedTrace, TraceAssembler
from mast_otel.collector.decode import DecodedTraces, DecodeError, TraceDecoder, without_duplicates
from mast_otel.collector.span_writer import RawSpanWriter
from mast_otel.collector.spool import REPLAY, Position, Spool, SpoolFull
from mast_otel.collector.telemetry import CollectorMetrics
from mast_otel.conversation.model import OutcomeReport
from mast_otel.conversation.rebuild import is_outcome_only, outcome_reports, rebuild
from mast_otel.spans import Span
from mast_otel.store.base import Store

log = logging.getLogger(__name__)

# How long re-annotation waits for the raw span writer before treating the store as away.
RAW_SPANS_WAIT_S = 30.0
# Spans released from assembly per step of the worker (see `Pipeline._process_due`).
RELEASE_CHUNK_SPANS = 2_000


class Mode(str, Enum):
    LIVE = "live"
    SPOOLING = "spooling"
    REPLAYING = "replaying"


class Overloaded(RuntimeError):
    """Too much accepted and not yet stored (or the spool is full); the sender should retry later."""

    def __init__(self, reason: str, retry_after_s: float, *, store_unavailable: bool = False) -> None:
        super().__init__(f"{reason}; retry in {retry_after_s:.0f}s")
        self.retry_after_s = retry_after_s
        self.store_unavailable = store_unavailable


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    max_in_flight_spans: int = 200_000
    max_in_flight_bytes: int = 512 * 1024 * 1024  # OTLP bytes of the spans held in memory
    batch_max_spans: int = 20_000  # write when this many spans are buffered...
    flush_interval_s: float = 0.5  # ...or this long after the oldest buffered item
    tick_s: float = 0.05
    retry_initial_s: float = 0.5
    retry_max_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_in_flight_spans < 1 or self.batch_max_spans < 1 or self.max_in_flight_bytes < 1024:
            raise ValueError(
                "max_in_flight_spans and batch_max_spans must be >= 1, max_in_flight_bytes >= 1024"
            )
        if self.tick_s <= 0 or self.flush_interval_s < 0:
            raise ValueError("tick_s must be > 0 and flush_interval_s >= 0")


@dataclass(frozen=True, slots=True)
class PipelineStats:
    mode: str
    spans_accepted: int
    spans_duplicate: int
    spans_stored: int
    spans_in_flight: int
    bytes_in_flight: int
    traces_in_assembly: int
    runs_stored: int
    runs_reannotated: int
    findings_stored: int
    outcomes_stored: int
    rebuild_errors: int
    annotate_errors: int
    runs_refused: int  # runs the store refused while answering (bad data, not an outage): left out
    store_errors: int
    refused_exports: int
    spool_bytes: int
    spool_segments: int


@dataclass
class _Holding:
    """What one trace in memory owes the spool and the memory limit."""

    segments: Counter[int] = field(default_factory=Counter)
    spans: int = 0
    bytes: int = 0


@dataclass
class _Batch:
    runs: list[AnnotatedRun] = field(default_factory=list)
    outcomes: list[OutcomeReport] = field(default_factory=list)
    holding: _Holding = field(default_factory=_Holding)
    started: float = 0.0
    reannotated: int = 0

    def empty(self) -> bool:
        return not (self.runs or self.outcomes or self.holding.spans)


class Pipeline:
    def __init__(
        self,
        assembler: TraceAssembler,
        annotator: Annotator,
        store: Store,
        spool: Spool,
        decoder: TraceDecoder,
        config: PipelineConfig | None = None,
        metrics: CollectorMetrics | None = None,
        *,
        raw_spans: RawSpanWriter | None = None,
        on_runs_stored: Callable[[Sequence[AnnotatedRun]], None] | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        # None when something else stores the spans (an otelcol-contrib ClickHouse exporter).
        self._raw_spans = raw_spans
        self._on_runs_stored = on_runs_stored  # e.g. the LLM judge's submit: deeper annotation, later
        self._assembler = assembler
        self._annotator = annotator
        self._store = store
        self._spool = spool
        self._decoder = decoder
        self.metrics = metrics or CollectorMetrics()
        self._lock = threading.Lock()  # guards mode, holdings and counters; taken around spool appends
        self._counts: Counter[str] = Counter()
        self._holdings: dict[str, _Holding] = {}
        self._in_flight_spans = 0
        self._in_flight_bytes = 0
        self._batch = _Batch()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._retry_delay = 0.0
        self._retry_at = 0.0
        has_backlog = spool.total_bytes > 0
        self._mode = Mode.REPLAYING if has_backlog else Mode.LIVE
        self._cursor: Position | None = spool.first_position() if has_backlog else None
        if has_backlog:
            log.info("spool holds %d bytes from before the last stop: replaying them", spool.total_bytes)

    # --- receiver side ---------------------------------------------------------------------
    def accept(self, record: bytes, decoded: DecodedTraces) -> None:
        """Make one export durable and admit its spans. Raises Overloaded (retryable) when full."""
        if not decoded.spans:
            return
        with self._lock:
            live = self._mode is Mode.LIVE
            if live and self._in_flight_spans > 0:
                if self._in_flight_spans + len(decoded.spans) > self.config.max_in_flight_spans:
                    self._refuse(
                        f"{self._in_flight_spans} spans in flight (limit {self.config.max_in_flight_spans})"
                    )
                if self._in_flight_bytes + len(record) > self.config.max_in_flight_bytes:
                    self._refuse(
                        f"{self._in_flight_bytes} bytes in flight (limit {self.config.max_in_flight_bytes})"
                    )
            if live:
                # The spool is what raw spans are stored from: keep spans seen before out of it.
                # (Nothing is known in memory while spooling or replaying; readers then dedupe.)
                first_copies = self._first_copies(record, decoded.spans)
                if first_copies is None:  # nothing new: a retried export whose first try got through
                    self._count_duplicates(len(decoded.spans))
                    return
                record = first_copies
            try:
                position = self._spool.append(record)
            except SpoolFull as exc:
                self._refuse(str(exc), store_unavailable=not live)
            except OSError as exc:
                self._refuse(f"cannot write the spool: {exc}", store_unavailable=True)
            self.metrics.spooled_bytes.inc(len(record))
            if live:
                self._admit(decoded.spans, position.segment, len(record))

    def _first_copies(self, record: bytes, spans: Sequence[Span]) -> bytes | None:
        """`record` without spans admitted before (or repeated in it); None if none is left."""
        # Caller holds the lock, so nothing is admitted between this check and the admission.
        seen = self._assembler.seen(spans)
        unique = {(s.trace_id, s.span_id) for s in spans}
        if not seen and len(unique) == len(spans):
            return record
        if not unique - seen:
            return None
        return without_duplicates(record, seen)

    def _refuse(self, reason: str, *, store_unavailable: bool = False) -> None:
        # Caller holds the lock.
        self._counts["refused_exports"] += 1
        self.metrics.refused_exports.inc()
        hint = max(1.0, self._retry_delay or self.config.flush_interval_s * 2)
        raise Overloaded(f"collector at capacity: {reason}", hint, store_unavailable=store_unavailable)

    def _admit(self, spans: Sequence[Span], segment: int, record_bytes: int) -> None:
        # Caller holds the lock.
        result = self._assembler.add(spans)
        per_span = record_bytes // max(1, len(spans))
        for span in result.accepted:
            holding = self._holdings.get(span.trace_id)
            if holding is None:
                holding = self._holdings[span.trace_id] = _Holding()
            holding.segments[segment] += 1
            holding.spans += 1
            holding.bytes += per_span
        accepted = len(result.accepted)
        self._spool.hold(segment, accepted)
        self._in_flight_spans += accepted
        self._in_flight_bytes += per_span * accepted
        self._counts["spans_accepted"] += accepted
        self.metrics.spans_received.inc(accepted)
        self._count_duplicates(result.duplicates)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mast-otel-pipeline", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Release every pending trace, store everything accepted, stop.

        True when everything accepted is stored; otherwise it stays in the spool for the next start.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        deadline = time.monotonic() + timeout_s
        if self._mode is Mode.REPLAYING:
            self._replay(until=deadline)
        if self._mode is not Mode.SPOOLING:
            self._process(self._assembler.flush())
            while not self._batch.empty() and time.monotonic() < deadline:
                if not self._write():
                    break  # the store is away: what was accepted stays in the spool for the next start
        with self._lock:
            complete = self._mode is Mode.LIVE and self._in_flight_spans == 0
        return complete

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until everything accepted so far is stored (the demo and tests use it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._idle():
                return True
            if self._runs_idle() and self._raw_spans is not None:
                # The raw span writer batches for seconds; whoever waits wants the spans stored now.
                self._raw_spans.wait_stored(self._spool.end, min(0.5, max(0.0, deadline - time.monotonic())))
            else:
                time.sleep(0.02)
        return self._idle()

    def _idle(self) -> bool:
        return self._runs_idle() and (self._raw_spans is None or self._raw_spans.caught_up())

    def _runs_idle(self) -> bool:
        with self._lock:
            return self._mode is Mode.LIVE and self._in_flight_spans == 0 and self._batch.empty()

    @property
    def mode(self) -> Mode:
        return self._mode

    def stats(self) -> PipelineStats:
        with self._lock:
            values: dict[str, Any] = {f.name: self._counts[f.name] for f in fields(PipelineStats)}
            values.update(
                mode=self._mode.value,
                spans_in_flight=self._in_flight_spans,
                bytes_in_flight=self._in_flight_bytes,
                traces_in_assembly=self._assembler.trace_count,
                spool_bytes=self._spool.total_bytes,
                spool_segments=self._spool.segment_count,
            )
        return PipelineStats(**values)

    # --- worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._mode is Mode.SPOOLING:
                    self._probe_store()
                else:
                    if self._mode is Mode.REPLAYING:
                        self._replay(until=time.monotonic() + self.config.tick_s * 4)
                    self._process_due()
                    if self._batch_due():
                        self._write()
            except Exception:  # the worker must outlive any single bad trace
                log.exception("pipeline iteration failed; continuing")
            self._update_gauges()
            self._stop.wait(self.config.tick_s)

    def _process_due(self) -> None:
        """Rebuild, annotate and batch every due trace, a bounded chunk at a time.

        A trace's spans and its rebuilt run are both in memory while it is processed; in chunks,
        that double cost is paid for a few thousand spans, not for everything that fell due while
        the worker was busy, and a full batch is written before the next chunk grows it further.
        """
        while not self._stop.is_set() and self._mode is not Mode.SPOOLING:
            traces = self._assembler.release_due(max_spans=RELEASE_CHUNK_SPANS)
            if not traces:
                return
            self._process(traces)
            if self._batch_due():
                self._write()

    def _process(self, traces: Sequence[CompletedTrace]) -> None:
        if not traces:
            return
        runs = [t for t in traces if not is_outcome_only(t.spans)]
        with self._lock:
            unwritten = {run.conversation.trace_id for run in self._batch.runs}
        if unwritten.intersection(t.trace_id for t in runs) and not self._write():
            # Late spans of a run still waiting in the batch: the batch goes first, or the run
            # would be rebuilt from the late spans alone. The store just failed: all is spooled.
            return
        try:
            stored = self._stored_spans([t.trace_id for t in runs])
        except Exception as exc:
            self._enter_spooling(exc)
            return
        with self._lock:
            batch = self._batch
            if batch.empty():
                batch.started = time.monotonic()
            for trace in traces:
                self.metrics.trace_completion_seconds.observe(trace.waited_s)
                holding = self._holdings.pop(trace.trace_id, None)
                if holding is not None:
                    batch.holding.segments.update(holding.segments)
                    batch.holding.spans += holding.spans
                    batch.holding.bytes += holding.bytes
                batch.outcomes.extend(outcome_reports(trace.spans))
        for trace in runs:
            previous = stored.get(trace.trace_id)
            if previous is not None:
                # The stored spans may already include some of these (stored raw before the run):
                # one span per id, the decoded one preferred (typed attributes, not strings).
                merged = list({s.span_id: s for s in (*previous, *trace.spans)}.values())
            else:
                merged = list(trace.spans)
            run = self._annotated(trace.trace_id, merged)
            if run is not None:
                with self._lock:
                    self._batch.runs.append(run)
                    self._batch.reannotated += previous is not None

    def _stored_spans(self, trace_ids: Sequence[str]) -> dict[str, list[Span]]:
        """Spans already stored for those of `trace_ids` whose run is stored (late spans, replays)."""
        existing = self._store.existing_runs(trace_ids) if trace_ids else set()
        if not existing:
            return {}
        if self._raw_spans is not None:
            # Every span admitted so far must be stored before reading them back: the earlier
            # spans of these traces are among them.
            admitted = self._cursor if self._mode is Mode.REPLAYING and self._cursor else self._spool.end
            if not self._raw_spans.wait_stored(admitted, RAW_SPANS_WAIT_S):
                raise TimeoutError(f"raw spans not stored within {RAW_SPANS_WAIT_S:.0f}s")
        return self._store.load_spans(sorted(existing))

    def _annotated(self, trace_id: str, spans: Sequence[Span]) -> AnnotatedRun | None:
        started = time.perf_counter()
        try:
            conversation = rebuild(spans)
        except Exception:
            log.exception("could not rebuild trace %s; its spans are stored, the run is not", trace_id)
            self._count("rebuild_errors")
            return None
        try:
            run = annotate_run(conversation, self._annotator)
        except Exception:
            log.exception(
                "annotator %s failed on trace %s; storing the run without findings",
                self._annotator.name,
                trace_id,
            )
            self._count("annotate_errors")
            run = AnnotatedRun(conversation, (), version=time.time_ns())
        self.metrics.annotation_seconds.observe(time.perf_counter() - started)
        return run

    def _batch_due(self) -> bool:
        with self._lock:
            batch = self._batch
            if batch.empty() or time.monotonic() < self._retry_at:
                return False
            return (
                batch.holding.spans >= self.config.batch_max_spans
                or time.monotonic() - batch.started >= self.config.flush_interval_s
                or self._assembler.trace_count == 0
            )

    def _write(self) -> bool:
        with self._lock:
            batch, self._batch = self._batch, _Batch()
        try:
            if batch.runs:
                self._insert_runs(batch)
            if batch.outcomes:
                self._store.insert_outcomes(batch.outcomes)
        except Exception as exc:
            self._enter_spooling(exc)
            return False
        self._retry_delay = 0.0
        with self._lock:
            for segment, count in batch.holding.segments.items():
                self._spool.release(segment, count)
            self._in_flight_spans -= batch.holding.spans
            self._in_flight_bytes -= batch.holding.bytes
            self._counts["spans_stored"] += batch.holding.spans
            self._counts["runs_stored"] += len(batch.runs)
            self._counts["runs_reannotated"] += batch.reannotated
            self._counts["findings_stored"] += sum(len(r.findings) for r in batch.runs)
            self._counts["outcomes_stored"] += len(batch.outcomes)
        if self._on_runs_stored is not None and batch.runs:
            try:
                self._on_runs_stored(batch.runs)
            except Exception:
                log.exception("the runs-stored hook failed; the runs themselves are stored")
        self.metrics.spans_stored.inc(batch.holding.spans)
        self.metrics.runs_stored.inc(len(batch.runs))
        self.metrics.findings_stored.inc(sum(len(r.findings) for r in batch.runs))
        return True

    def _insert_runs(self, batch: _Batch) -> None:
        """Insert the batch's runs. A batch the store refuses while it answers pings holds a run it
        cannot take (data, not an outage): the runs go one by one, and the ones refused are logged,
        counted and left out instead of sending the pipeline to the spool for ever."""
        try:
            self._store.insert_runs(batch.runs)
            return
        except Exception:
            if not self._store_answers():
                raise
        kept = []
        for run in batch.runs:
            try:
                self._store.insert_runs([run])
            except Exception as exc:
                if not self._store_answers():
                    raise
                log.error("the store refused run %s, left out: %s", run.conversation.trace_id, exc)
                self._count("runs_refused")
            else:
                kept.append(run)
        batch.runs = kept

    def _store_answers(self) -> bool:
        try:
            return bool(self._store.ping())
        except Exception:
            return False

    # --- outage and replay -------------------------------------------------------------------
    def _enter_spooling(self, exc: Exception) -> None:
        """The store failed: drop memory (the spool has it all) and wait for the store to return."""
        self._count("store_errors")
        self.metrics.store_errors.inc()
        self._retry_delay = min(
            self.config.retry_max_s, max(self.config.retry_initial_s, self._retry_delay * 2)
        )
        self._retry_at = time.monotonic() + self._retry_delay
        with self._lock:
            if self._mode is not Mode.SPOOLING:
                log.warning("store unavailable (%s): spooling to disk until it is back", exc)
            self._mode = Mode.SPOOLING
            self._assembler.clear()
            self._holdings.clear()
            self._batch = _Batch()
            self._in_flight_spans = self._in_flight_bytes = 0
            self._spool.reset_holds()
            self._cursor = self._spool.first_position()
            self._spool.set_floor(REPLAY, self._cursor.segment)

    def _probe_store(self) -> None:
        if time.monotonic() < self._retry_at:
            return
        try:
            healthy = self._store.ping()
        except Exception:
            healthy = False
        if not healthy:
            self._retry_delay = min(
                self.config.retry_max_s, max(self.config.retry_initial_s, self._retry_delay * 2)
            )
            self._retry_at = time.monotonic() + self._retry_delay
            return
        log.info("store is back: replaying the spool")
        with self._lock:
            self._mode = Mode.REPLAYING

    def _replay(self, until: float) -> None:
        """Feed spool records from the cursor until caught up, out of time, or memory is half full."""
        assert self._cursor is not None
        for record in self._spool.read_from(self._cursor):
            if self._mode is not Mode.REPLAYING:
                return
            try:
                decoded = self._decoder.decode_bytes(record.data)
            except DecodeError:
                log.warning("skipping an unreadable spool record at %s", record.position)
                decoded = DecodedTraces((), 0, ())
            with self._lock:
                self._admit(decoded.spans, record.position.segment, len(record.data))
                self._cursor = record.next
                self._spool.set_floor(REPLAY, record.position.segment)
                half_full = self._in_flight_spans * 2 >= self.config.max_in_flight_spans
            if half_full or time.monotonic() >= until:
                return
        with self._lock:
            # Caught up? Under the lock no export can be appended between this check and going LIVE.
            if next(iter(self._spool.read_from(self._cursor)), None) is None:
                self._mode = Mode.LIVE
                self._cursor = None
                self._spool.set_floor(REPLAY, None)
                log.info("spool replayed: back to live")

    def _update_gauges(self) -> None:
        stats = self.stats()
        self.metrics.spans_in_flight.set(stats.spans_in_flight)
        self.metrics.traces_in_assembly.set(stats.traces_in_assembly)
        self.metrics.spool_bytes.set(stats.spool_bytes)
        self.metrics.spool_segments.set(stats.spool_segments)

    def _count_duplicates(self, spans: int) -> None:
        # Caller holds the lock.
        self._counts["spans_duplicate"] += spans
        self.metrics.spans_duplicate.inc(spans)

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1
