"""A batch span processor that applies backpressure instead of dropping spans.

The OpenTelemetry SDK's `BatchSpanProcessor` drops spans when its queue is full: an agent that ends
spans faster than the exporter sends them silently loses most of its trace (measured: 60-67% of the
spans of a tight loop at the SDK's default queue of 2048). A trace with holes rebuilds into a wrong
conversation, so this processor makes the application wait instead: when the spans waiting for
export reach 90% of the queue, the thread ending a span exports the backlog itself (`force_flush`)
before it continues.

Defaults, larger than the SDK's because agent traces come in bursts:

- max_queue_size 8192 (`OTEL_BSP_MAX_QUEUE_SIZE`)
- max_export_batch_size 512 (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`)
- schedule_delay 500 ms (`OTEL_BSP_SCHEDULE_DELAY`)
- export timeout: the SDK's (`OTEL_BSP_EXPORT_TIMEOUT`)

An environment variable that is set wins over the default, with the SDK's meaning.

Backpressure only helps while the exporter delivers. When its last export failed (the collector is
down and the exporter has given up retrying), making the agent wait would not save a single span, so
the processor falls back to the SDK's behaviour and drops when the queue is full, with a warning: an
observability outage must not stall the application it observes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Final, TypeVar

from opentelemetry.sdk.environment_variables import (
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    OTEL_BSP_MAX_QUEUE_SIZE,
    OTEL_BSP_SCHEDULE_DELAY,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

_logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_SIZE: Final = 8192
DEFAULT_MAX_EXPORT_BATCH_SIZE: Final = 512
DEFAULT_SCHEDULE_DELAY_MILLIS: Final = 500
HIGH_WATER_FRACTION: Final = 0.9

_Number = TypeVar("_Number", int, float)


class _CountingExporter(SpanExporter):
    """Delegates to the real exporter and counts the spans the batch processor handed to it."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self._lock = threading.Lock()
        self._handed_over = 0
        self._last_export_failed = False
        self._exporting = threading.local()

    @property
    def handed_over(self) -> int:
        with self._lock:
            return self._handed_over

    @property
    def delivering(self) -> bool:
        """False while the exporter's last export failed."""
        return not self._last_export_failed

    def exporting_on_this_thread(self) -> bool:
        return bool(getattr(self._exporting, "active", False))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # Counted on hand-over, the moment the batch processor takes the spans off its queue, so
        # (ended - handed over) bounds the queue's length from above.
        with self._lock:
            self._handed_over += len(spans)
        self._exporting.active = True
        try:
            result = self._exporter.export(spans)
        finally:
            self._exporting.active = False
        self._last_export_failed = result is not SpanExportResult.SUCCESS
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class BackpressureBatchSpanProcessor(BatchSpanProcessor):
    """`BatchSpanProcessor` that blocks the thread ending a span rather than drop it; see the module doc."""

    def __init__(
        self,
        span_exporter: SpanExporter,
        max_queue_size: int | None = None,
        schedule_delay_millis: float | None = None,
        max_export_batch_size: int | None = None,
        export_timeout_millis: float | None = None,
    ) -> None:
        queue_size = max_queue_size if max_queue_size is not None else _default_max_queue_size()
        self._counting_exporter = _CountingExporter(span_exporter)
        super().__init__(
            self._counting_exporter,
            max_queue_size=queue_size,
            schedule_delay_millis=_unless_env(
                schedule_delay_millis, OTEL_BSP_SCHEDULE_DELAY, DEFAULT_SCHEDULE_DELAY_MILLIS
            ),
            max_export_batch_size=_unless_env(
                max_export_batch_size, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, DEFAULT_MAX_EXPORT_BATCH_SIZE
            ),
            export_timeout_millis=export_timeout_millis,
        )
        self._queue_capacity = queue_size
        self._high_water_mark = max(1, int(queue_size * HIGH_WATER_FRACTION))
        self._ended_lock = threading.Lock()
        self._ended = 0
        self._is_shut_down = False
        self._warned_backpressure = False
        self._warned_dropping = False

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is None or not context.trace_flags.sampled:
            return  # the base class exports sampled spans only; counting others would fake a backlog
        if self._is_shut_down:
            _logger.warning(
                "Span %r ended after the span processor was shut down; it is not exported.", span.name
            )
            return
        with self._ended_lock:
            self._ended += 1
            backlog = self._ended - self._counting_exporter.handed_over
        # A span ended by the exporter itself (an instrumented transport) must not wait for the export
        # it is part of: the flush below would deadlock on the batch processor's export lock.
        if backlog >= self._high_water_mark and not self._counting_exporter.exporting_on_this_thread():
            self._relieve(backlog)
        super().on_end(span)

    def shutdown(self) -> None:
        self._is_shut_down = True
        super().shutdown()  # type: ignore[no-untyped-call]

    def _relieve(self, backlog: int) -> None:
        if self._counting_exporter.delivering:
            if not self._warned_backpressure:
                self._warned_backpressure = True
                _logger.warning(
                    "Spans are ending faster than the exporter sends them (%d of %d queue slots used); "
                    "the application waits for the exporter instead of dropping spans. A larger "
                    "OTEL_BSP_MAX_QUEUE_SIZE or a closer collector avoids the wait.",
                    backlog,
                    self._queue_capacity,
                )
            self._warned_dropping = False  # a later outage deserves its own warning
            self.force_flush()
        elif not self._warned_dropping:
            self._warned_dropping = True
            _logger.warning(
                "The span exporter is failing and %d spans are waiting; spans are dropped when the queue "
                "of %d is full rather than stall the application.",
                backlog,
                self._queue_capacity,
            )


def _unless_env(explicit: _Number | None, variable: str, default: _Number) -> _Number | None:
    """The explicit value, else None when the variable is set (the SDK reads it), else our default."""
    if explicit is not None:
        return explicit
    return None if os.environ.get(variable) else default


def _default_max_queue_size() -> int:
    # Read here rather than by the SDK because the high-water mark needs the number.
    configured = os.environ.get(OTEL_BSP_MAX_QUEUE_SIZE)
    if not configured:
        return DEFAULT_MAX_QUEUE_SIZE
    try:
        size = int(configured)
    except ValueError:
        size = 0
    if size <= 0:
        _logger.warning(
            "%s=%r is not a positive integer; using %d.",
            OTEL_BSP_MAX_QUEUE_SIZE,
            configured,
            DEFAULT_MAX_QUEUE_SIZE,
        )
        return DEFAULT_MAX_QUEUE_SIZE
    return size
