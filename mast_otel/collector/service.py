"""The collector service: builds receivers, spool, pipeline, annotator and store from one config.

`Collector` is usable in-process (the demo and the tests start one on free loopback ports) and as
the `mast-otel collector` command through `serve`, which stops cleanly on SIGINT/SIGTERM: receivers
stop taking new exports, every pending trace is released, and everything accepted is stored before
exit (or, if the store is away, stays in the spool for the next start).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from mast_otel.annotate.base import AnnotatedRun, Annotator
from mast_otel.collector.assembly import TraceAssembler
from mast_otel.collector.config import CollectorConfig
from mast_otel.collector.decode import DecodedTraces, TraceDecoder
from mast_otel.collector.pipeline import Pipeline, PipelineStats
from mast_otel.collector.query_api import AdminServer, CollectorLock, read_lock, write_lock
from mast_otel.collector.receiver_grpc import GrpcReceiver
from mast_otel.collector.receiver_http import HttpReceiver
from mast_otel.collector.span_writer import RawSpanWriter
from mast_otel.collector.spool import Spool
from mast_otel.collector.telemetry import CollectorMetrics, MetricsServer, StatsSnapshots
from mast_otel.store.base import Store

if TYPE_CHECKING:
    from mast_otel.annotate.llm.service import JudgeService

log = logging.getLogger(__name__)


class Collector:
    """One collector: OTLP receivers -> spool -> pipeline -> store, plus admin and metrics endpoints."""

    def __init__(
        self, config: CollectorConfig, *, store: Store | None = None, annotator: Annotator | None = None
    ) -> None:
        self.config = config
        data_dir = config.store.data_dir
        if data_dir is not None:
            holder = read_lock(data_dir)
            if holder is not None and holder.pid != os.getpid():
                raise RuntimeError(
                    f"another collector (pid {holder.pid}) holds {data_dir}; stop it, or point this one "
                    f"at another --store. Query the running one with: mast-otel analyze --store {data_dir}"
                )
        authenticator = config.receivers.auth.authenticator()  # fails early on a missing token
        if store is None:
            from mast_otel.store.clickhouse import open_store

            store = open_store(config.store.target, database=config.store.database)
        if annotator is None:
            from mast_otel.annotate.rules import RuleAnnotator

            annotator = RuleAnnotator()
        self.store = store
        self.metrics = CollectorMetrics()
        self.judge: JudgeService | None = None
        if config.judge is not None:
            from mast_otel.annotate.llm.service import JudgeService

            self.judge = JudgeService(config.judge, store)
        decoder = TraceDecoder()
        self.spool = Spool(config.spool_directory(), config.spool)
        # Its own connection: its big inserts run beside the pipeline's small calls, not between them.
        self._raw_store = store.with_own_connection() if config.store.write_raw_spans else None
        self.raw_spans = (
            RawSpanWriter(self.spool, self._raw_store, config.raw_spans, self.metrics)
            if self._raw_store is not None
            else None
        )
        self.pipeline = Pipeline(
            TraceAssembler(config.assembly),
            annotator,
            store,
            self.spool,
            decoder,
            config.pipeline,
            self.metrics,
            raw_spans=self.raw_spans,
            on_runs_stored=self._judge_runs if self.judge is not None else None,
        )
        receivers = config.receivers
        self._grpc = GrpcReceiver(
            receivers.grpc,
            self._accept("grpc"),
            decoder,
            tls=receivers.tls,
            authenticator=authenticator,
            metrics=self.metrics,
        )
        self._http = (
            HttpReceiver(
                receivers.http,
                self._accept("http"),
                decoder,
                tls=receivers.tls,
                authenticator=authenticator,
                metrics=self.metrics,
            )
            if receivers.http.endpoint
            else None
        )
        telemetry = config.telemetry
        self._admin = (
            AdminServer(telemetry.admin_endpoint, store, stats=self._stats_document)
            if telemetry.admin_endpoint
            else None
        )
        self._metrics_server: MetricsServer | None = None
        self._snapshots = (
            StatsSnapshots(
                store,
                telemetry.instance or f"{socket.gethostname()}:{os.getpid()}",
                telemetry.stats_interval_s,
                self._snapshot,
            )
            if telemetry.stats_interval_s > 0
            else None
        )
        self._lock_path: Path | None = None
        self._started = False

    def _accept(self, protocol: str):  # type: ignore[no-untyped-def]
        exports = self.metrics.exports_received.labels(protocol)
        rejected = self.metrics.spans_rejected

        def accept(record: bytes, decoded: DecodedTraces) -> None:
            exports.inc()
            if decoded.rejected:
                rejected.inc(decoded.rejected)
            self.pipeline.accept(record, decoded)

        return accept

    def _stats_document(self) -> dict[str, object]:
        document: dict[str, object] = asdict(self.pipeline.stats())
        if self.raw_spans is not None:
            document.update({f"raw_spans_{k}": v for k, v in asdict(self.raw_spans.stats()).items()})
        return document

    def _judge_runs(self, runs: Sequence[AnnotatedRun]) -> None:
        assert self.judge is not None
        for run in runs:
            self.judge.submit(run)  # never blocks: sampling, budget and a bounded queue decide

    def _snapshot(self) -> dict[str, float]:
        stats = self.pipeline.stats()
        judge = self.judge.stats() if self.judge is not None else None
        judge_values = (
            {
                "judge_errors": judge.failed + judge.partial + judge.store_errors,
                "judge_queued": judge.queued,
                "judge_input_tokens_total": judge.input_tokens,
                "judge_output_tokens_total": judge.output_tokens,
            }
            if judge is not None
            else {}
        )
        return judge_values | {
            "spans_in_flight": stats.spans_in_flight,
            "spans_stored_total": stats.spans_stored,
            "refused_exports_total": stats.refused_exports,
            "store_errors_total": stats.store_errors,
            "spool_bytes": stats.spool_bytes,
            "traces_in_assembly": stats.traces_in_assembly,
            "runs_stored_total": stats.runs_stored,
            "spooling": float(stats.mode != "live"),
            "raw_spans_bytes_behind": self.raw_spans.stats().bytes_behind if self.raw_spans else 0.0,
        }

    @property
    def grpc_port(self) -> int:
        return int(self._grpc.port)

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_port(self) -> int:
        return self._http.port if self._http else 0

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}" if self._http else ""

    @property
    def admin_url(self) -> str:
        return self._admin.url if self._admin else ""

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self._metrics_server.port}/metrics" if self._metrics_server else ""

    def start(self) -> Collector:
        if self.judge is not None:
            self.judge.start()
        if self.raw_spans is not None:
            self.raw_spans.start()
        self.pipeline.start()
        self._grpc.start()
        if self._http is not None:
            self._http.start()
        if self._admin is not None:
            self._admin.start()
        if self.config.telemetry.metrics_endpoint:
            self._metrics_server = MetricsServer(self.config.telemetry.metrics_endpoint, self.metrics)
        if self._snapshots is not None:
            self._snapshots.start()
        data_dir = self.config.store.data_dir
        if data_dir is not None and self._admin is not None:
            lock = CollectorLock(os.getpid(), self.admin_url, self.grpc_endpoint)
            self._lock_path = write_lock(data_dir, lock)
        self._started = True
        return self

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """True once every span accepted so far is stored."""
        return self.pipeline.wait_idle(timeout_s)

    def stats(self) -> PipelineStats:
        return self.pipeline.stats()

    def stop(self, grace_s: float = 5.0) -> bool:
        """Stop receiving, store everything accepted, release the store. True when nothing is left behind."""
        if not self._started:
            self.spool.close()
            self._close_stores()
            return True
        self._started = False
        self._grpc.stop(grace_s)
        if self._http is not None:
            self._http.stop()
        if self._snapshots is not None:
            self._snapshots.stop()
        complete = self.pipeline.stop()
        if self.raw_spans is not None:
            complete = self.raw_spans.stop() and complete
        if self.judge is not None:
            self.judge.stop(timeout_s=30.0)
        if self._admin is not None:
            self._admin.stop()
        if self._metrics_server is not None:
            self._metrics_server.stop()
        if self._lock_path is not None:
            self._lock_path.unlink(missing_ok=True)
        self.spool.close()
        self._close_stores()
        if not complete:
            log.warning("stopped with data not yet stored; it is in the spool and will be replayed on start")
        return complete

    def _close_stores(self) -> None:
        if self._raw_store is not None and self._raw_store is not self.store:
            self._raw_store.close()
        self.store.close()

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# Allocations between young-generation collections. CPython's default (700) suits short scripts;
# a collector allocates a few hundred objects per span, so at the default it runs a collection every
# few spans and, more often than it should, a full one over every span still in assembly.
GC_YOUNG_THRESHOLD = 50_000


def tune_runtime() -> None:
    """Settings for a long-running collector process (`serve` applies them; so do the benchmarks).

    - The cyclic garbage collector: objects alive at start (modules, the store's client) are frozen
      out of it, and young collections run less often. Spans and conversations hold no reference
      cycles, so the collector has little to free and its scans are pure cost: on the ingest
      benchmark this is 1.1x end to end and 1.6x on building span rows.
    - The allocator: see `tune_allocator`.
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
    tune_allocator()


def tune_allocator() -> None:
    """Fewer page faults under load: keep big buffers in the heap instead of fresh mmaps (glibc only).

    Measured on the issue's 2-core machine, the receive path spent half its CPU in page faults until
    the mmap and trim thresholds were raised (1.3-2.3x faster receive).
    """
    libc_name = ctypes.util.find_library("c")
    if not libc_name or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    try:
        libc = ctypes.CDLL(libc_name)
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)
        libc.mallopt(m_trim_threshold, 256 * 1024 * 1024)
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return


def serve(config: CollectorConfig, ready: threading.Event | None = None) -> int:
    """Run a collector until SIGINT/SIGTERM; exit code 0 when everything accepted was stored."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: flushing and stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    tune_runtime()
    try:
        collector = Collector(config).start()
        log.info(
            "mast-otel collector: OTLP/gRPC :%d, OTLP/HTTP :%s, store %s, admin %s, metrics %s",
            collector.grpc_port,
            collector.http_port or "off",
            config.store.target.split("@")[-1],
            collector.admin_url or "off",
            collector.metrics_url or "off",
        )
        if ready is not None:
            ready.set()
        stop.wait()
        return 0 if collector.stop() else 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
