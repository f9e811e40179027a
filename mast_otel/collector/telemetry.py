"""The collector's own metrics, in Prometheus text format on the metrics port (`/metrics`).

One registry per collector instance, so several collectors in one process (tests, the demo) don't
collide. Names follow Prometheus conventions (`_total` counters, base units).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from mast_otel.store.base import Store

log = logging.getLogger(__name__)

_NS = "mast_otel"


class CollectorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.exports_received = Counter(
            "exports", "OTLP export requests received", ["protocol"], namespace=_NS, registry=r
        )
        self.spans_received = Counter(
            "spans_received", "Spans accepted into assembly", namespace=_NS, registry=r
        )
        self.spans_duplicate = Counter(
            "spans_duplicate", "Spans dropped as duplicates", namespace=_NS, registry=r
        )
        self.spans_rejected = Counter(
            "spans_rejected", "Malformed spans rejected (OTLP partial success)", namespace=_NS, registry=r
        )
        self.refused_exports = Counter(
            "refused_exports", "Exports refused with a retryable answer (capacity)", namespace=_NS, registry=r
        )
        self.spooled_bytes = Counter(
            "spooled_bytes", "Bytes appended to the spool", namespace=_NS, registry=r
        )
        self.spans_stored = Counter("spans_stored", "Spans written to the store", namespace=_NS, registry=r)
        self.runs_stored = Counter(
            "runs_stored", "Annotated runs written to the store", namespace=_NS, registry=r
        )
        self.findings_stored = Counter("findings_stored", "MAST findings written", namespace=_NS, registry=r)
        self.store_errors = Counter(
            "store_errors", "Failed store writes or probes", namespace=_NS, registry=r
        )
        self.log_records_skipped = Counter(
            "log_records_skipped",
            "OTLP log records not turned into spans: `ignored` (not an agent's event) or `rejected`",
            ["reason"],
            namespace=_NS,
            registry=r,
        )
        self.raw_requests_stored = Counter(
            "raw_requests_stored",
            "Export requests stored in otel_traces by the raw span writer",
            namespace=_NS,
            registry=r,
        )
        self.raw_bytes_behind = Gauge(
            "raw_bytes_behind",
            "Spool bytes the raw span writer has not stored yet",
            namespace=_NS,
            registry=r,
        )
        self.spans_in_flight = Gauge(
            "spans_in_flight", "Spans accepted, not yet stored", namespace=_NS, registry=r
        )
        self.traces_in_assembly = Gauge(
            "traces_in_assembly", "Traces waiting for completion", namespace=_NS, registry=r
        )
        self.spool_bytes = Gauge("spool_bytes", "Bytes in the spool (depth)", namespace=_NS, registry=r)
        self.spool_segments = Gauge("spool_segments", "Segment files in the spool", namespace=_NS, registry=r)
        self.trace_completion_seconds = Histogram(
            "trace_completion_seconds",
            "From a trace's first span to its release",
            namespace=_NS,
            registry=r,
            buckets=(0.1, 0.5, 1, 2, 3, 5, 10, 30, 60, 120),
        )
        self.annotation_seconds = Histogram(
            "annotation_seconds",
            "Rebuild + annotation time per run",
            namespace=_NS,
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1),
        )


class StatsSnapshots:
    """Writes a snapshot of the pipeline's numbers to the store every `interval_s` (`mast_collector_stats`).

    Prometheus may not be scraping; the pipeline-health alerts (spool growth, store errors, silent
    collectors) then still have their data in ClickHouse, next to everything else Grafana reads.
    """

    def __init__(
        self, store: Store, instance: str, interval_s: float, source: Callable[[], Mapping[str, float]]
    ) -> None:
        self._store = store
        self._instance = instance
        self._interval = interval_s
        self._source = source
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mast-otel-stats", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._store.insert_collector_stats(self._instance, self._source(), time.time_ns())
            except Exception as exc:  # the store being away is the pipeline's business, not ours
                log.debug("could not write a stats snapshot: %s", exc)


class MetricsServer:
    """Serves `registry` at http://ENDPOINT/metrics."""

    def __init__(self, endpoint: str, metrics: CollectorMetrics) -> None:
        host, _, port = endpoint.rpartition(":")
        server, thread = start_http_server(int(port), addr=host or "0.0.0.0", registry=metrics.registry)
        self._server = server
        self._thread: threading.Thread = thread
        self.port: int = server.server_address[1]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
