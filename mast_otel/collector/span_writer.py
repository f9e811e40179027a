"""Store stage for raw spans: the spool's export requests, as they came off the wire, into `otel_traces`.

Storing spans does not need Python objects: ClickHouse parses the serialized requests itself
(`Store.insert_otlp_requests`, see `mast_otel.store.otlp_ingest`), and that work runs outside the
GIL. So raw spans take their own path, next to the conversation path (assemble -> rebuild ->
annotate -> runs) instead of through it: one thread reads the write-ahead spool in order and
stores it in batches, tracking how far it got with a cursor file in the spool directory, like a
log consumer's committed offset.

Exactly once, across crashes: before a batch is inserted, the cursor file records where the batch
ends; the insert carries a deduplication token computed from the batch's bytes; only after the
insert does the cursor move past the batch. A crash between the two re-reads the same records on
start, computes the same token, and ClickHouse drops the repeated insert. The spool keeps every
segment this writer has not passed (a consumer floor), whatever the conversation path has done.

Failures: while the store is unreachable the writer backs off and retries the same batch. A batch
the store refuses while reachable (it cannot parse a request that our decoder accepted) is stored
through the Python path instead (decode, rows, `insert_spans`, whose token is the rows' keys), so
one odd request neither loses its batch nor stalls the writer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mast_otel.collector.decode import DecodeError, TraceDecoder
from mast_otel.collector.spool import Position, Spool
from mast_otel.collector.telemetry import CollectorMetrics
from mast_otel.spans import Span
from mast_otel.store.base import Store

log = logging.getLogger(__name__)

CURSOR_FILE = "raw-spans.cursor"
SPOOL_CONSUMER = "raw-spans"


@dataclass(frozen=True, slots=True)
class SpanWriterConfig:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # ClickHouse spends a fixed ~0.15 s analysing the flattening view on every insert, so batches
    # should be megabytes; but the engine's peak memory for an insert is ~17x its batch (70 MB for
    # 4 MiB, 276 MB for 16 MiB, measured on chDB 4.4): 8 MiB is the compromise.
    batch_bytes: int = 8 * 1024 * 1024
    # Store a smaller batch once its oldest record waited this long. Each insert costs that fixed
    # analysis, so at a trickle of spans a short interval is most of the collector's CPU (20 spans/s:
    # 19% of a core at 0.5 s, 9% at 5 s); 5 s is what ClickHouse's exporter guidance uses too.
    # Nobody waits for it: re-annotation and `wait_idle` have the writer store at once.
    flush_interval_s: float = 5.0
    retry_initial_s: float = 0.5
    retry_max_s: float = 10.0

    def __post_init__(self) -> None:
        if self.batch_bytes < 1024 or self.flush_interval_s < 0 or self.retry_initial_s <= 0:
            raise ValueError("batch_bytes must be >= 1024, flush_interval_s >= 0 and retry_initial_s > 0")


@dataclass(frozen=True, slots=True)
class SpanWriterStats:
    requests_stored: int
    bytes_stored: int
    bytes_behind: int  # spool bytes not yet stored as raw spans
    batches_decoded_in_python: int  # batches the store's parser refused, stored the Python way
    store_errors: int


@dataclass(frozen=True, slots=True)
class _Cursor:
    written: Position  # every record before this is stored
    pending_end: Position | None = None  # a batch [written, pending_end) may or may not be stored


class RawSpanWriter:
    """The thread that stores the spool's records as raw spans, in order, exactly once."""

    def __init__(
        self,
        spool: Spool,
        store: Store,
        config: SpanWriterConfig | None = None,
        metrics: CollectorMetrics | None = None,
    ) -> None:
        self.config = config or SpanWriterConfig()
        self.metrics = metrics or CollectorMetrics()
        self._spool = spool
        self._store = store
        self._path = spool.directory / CURSOR_FILE
        self._cursor = _load_cursor(self._path) or _Cursor(spool.first_position())
        spool.set_floor(SPOOL_CONSUMER, self._cursor.written.segment)
        self._lock = threading.Condition()
        self._urgent = False  # someone waits for a position: store what there is now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._requests = self._bytes = self._decoded_in_python = self._errors = 0
        self._retry_delay = 0.0

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mast-otel-raw-spans", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Store what the spool holds, then stop. True when nothing is left unstored."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        deadline = time.monotonic() + timeout_s
        while not self.caught_up() and time.monotonic() < deadline:
            if not self._store_next():
                break
        return self.caught_up()

    # --- what the rest of the collector asks ---------------------------------------------------
    def caught_up(self) -> bool:
        return self._spool.bytes_after(self._cursor.written) == 0

    def wait_stored(self, position: Position, timeout_s: float) -> bool:
        """Block until every record before `position` is stored; False on timeout (store away)."""
        deadline = time.monotonic() + timeout_s
        position = self._spool.normalized(position)
        with self._lock:
            while self._spool.normalized(self._cursor.written) < position:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._urgent = True
                self._lock.notify_all()
                self._lock.wait(min(remaining, 0.05))
            return True

    def stats(self) -> SpanWriterStats:
        return SpanWriterStats(
            requests_stored=self._requests,
            bytes_stored=self._bytes,
            bytes_behind=self._spool.bytes_after(self._cursor.written),
            batches_decoded_in_python=self._decoded_in_python,
            store_errors=self._errors,
        )

    # --- worker --------------------------------------------------------------------------------
    def _run(self) -> None:
        oldest_waiting: float | None = None
        while not self._stop.is_set():
            if self.caught_up():
                oldest_waiting = None
                with self._lock:
                    self._lock.wait(0.05)
                continue
            now = time.monotonic()
            oldest_waiting = oldest_waiting or now
            due = (
                self._urgent
                or now - oldest_waiting >= self.config.flush_interval_s
                or self._spool.bytes_after(self._cursor.written) >= self.config.batch_bytes
            )
            if not due:
                with self._lock:
                    self._lock.wait(0.05)
                continue
            try:
                stored = self._store_next()
            except Exception:  # the writer must outlive any single bad batch
                log.exception("raw span writer iteration failed; retrying")
                stored = False
            if stored:
                oldest_waiting = None
            else:
                self._stop.wait(self._retry_delay)

    def _store_next(self) -> bool:
        """Store the next batch (or finish a pending one). False when the store failed."""
        cursor = self._cursor
        bodies, end = self._read_batch(cursor.written, cursor.pending_end)
        if not bodies:
            self._advance(_Cursor(end))
            return True
        if cursor.pending_end is None:
            self._save(_Cursor(cursor.written, end))  # the batch's end is on disk before its insert
        token = "raw-" + _digest(bodies)
        try:
            try:
                self._store.insert_otlp_requests(bodies, token)
            except Exception as exc:
                if not self._store_reachable():
                    raise
                log.warning(
                    "the store refused %d requests (%s); storing them the Python way", len(bodies), exc
                )
                self._store_decoded(bodies)
        except Exception as exc:
            self._errors += 1
            self.metrics.store_errors.inc()
            self._retry_delay = min(
                self.config.retry_max_s, max(self.config.retry_initial_s, self._retry_delay * 2)
            )
            log.warning("raw spans not stored (%s); retrying in %.1fs", exc, self._retry_delay)
            return False
        self._retry_delay = 0.0
        self._requests += len(bodies)
        self._bytes += sum(map(len, bodies))
        self.metrics.raw_requests_stored.inc(len(bodies))
        self._advance(_Cursor(end))
        return True

    def _read_batch(self, start: Position, end: Position | None) -> tuple[list[bytes], Position]:
        """Records from `start`: up to `end` if given (a pending batch), else up to `batch_bytes`."""
        bodies: list[bytes] = []
        size = 0
        reached = start
        for record in self._spool.read_from(start):
            if end is not None and record.position >= end:
                break
            bodies.append(record.data)
            size += len(record.data)
            reached = record.next
            if end is None and size >= self.config.batch_bytes:
                break
        return bodies, (end if end is not None and reached < end else reached)

    def _store_decoded(self, bodies: list[bytes]) -> None:
        decoder = TraceDecoder()
        spans: list[Span] = []
        for body in bodies:
            try:
                spans.extend(decoder.decode_bytes(body).spans)
            except DecodeError as exc:  # accepted once, so this is disk damage the CRC missed
                log.error("skipping an unreadable spool record: %s", exc)
        self._store.insert_spans(spans)
        self._decoded_in_python += 1

    def _store_reachable(self) -> bool:
        try:
            return self._store.ping()
        except Exception:
            return False

    def _advance(self, cursor: _Cursor) -> None:
        # Canonical, so that a fully stored sealed segment is behind the floor and can go.
        cursor = _Cursor(self._spool.normalized(cursor.written))
        self._save(cursor)
        with self._lock:
            self._cursor = cursor
            self._urgent = False
            self._lock.notify_all()
        self._spool.set_floor(SPOOL_CONSUMER, cursor.written.segment)
        self.metrics.raw_bytes_behind.set(self._spool.bytes_after(cursor.written))

    def _save(self, cursor: _Cursor) -> None:
        state = {
            "written": [cursor.written.segment, cursor.written.offset],
            "pending_end": None
            if cursor.pending_end is None
            else [cursor.pending_end.segment, cursor.pending_end.offset],
        }
        temporary = self._path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            if self._spool.config.fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, self._path)
        with self._lock:
            self._cursor = cursor


def _load_cursor(path: Path) -> _Cursor | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        written = Position(*map(int, state["written"]))
        pending = state.get("pending_end")
        return _Cursor(written, None if pending is None else Position(*map(int, pending)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        # Unreadable: start over from the spool's oldest record. Batches cut differently than before
        # get other tokens, so spans of the records still on disk may be stored twice; losing them
        # would be worse.
        log.warning("ignoring the unreadable raw-span cursor %s (%s); re-reading the spool", path, exc)
        return None


def _digest(bodies: list[bytes]) -> str:
    digest = hashlib.sha256()
    for body in bodies:
        digest.update(len(body).to_bytes(8, "little"))
        digest.update(body)
    return digest.hexdigest()
