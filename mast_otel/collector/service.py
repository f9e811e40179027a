"""The collector service: builds receivers, pipeline, annotator and store from one config and runs them.

`Collector` is usable in-process (the demo and the tests start one on a free port) and as the
`mast-otel collector` command through `serve`, which stops cleanly on SIGINT/SIGTERM: receivers stop
taking new exports, every pending trace is released, and everything accepted is stored before exit.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType

from mast_otel.annotate.base import Annotator
from mast_otel.collector.assembly import AssemblyConfig, TraceAssembler
from mast_otel.collector.decode import DEFAULT_MAX_ATTRIBUTE_BYTES, TraceDecoder
from mast_otel.collector.pipeline import Pipeline, PipelineConfig, PipelineStats
from mast_otel.collector.query_api import LOCK_FILE, AdminServer, CollectorLock, read_lock, write_lock
from mast_otel.collector.receiver_grpc import GrpcReceiver, GrpcReceiverConfig
from mast_otel.store.base import Store

log = logging.getLogger(__name__)

DEFAULT_STORE = "mast-otel-data"


@dataclass(frozen=True, slots=True)
class CollectorConfig:
    store: str = DEFAULT_STORE  # a chDB data directory, or a ClickHouse server URL
    database: str = "mast"
    grpc: GrpcReceiverConfig = field(default_factory=GrpcReceiverConfig)
    admin_endpoint: str = "127.0.0.1:13133"  # /healthz and the read-only query API; "" disables it
    assembly: AssemblyConfig = field(default_factory=AssemblyConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    max_attribute_bytes: int = DEFAULT_MAX_ATTRIBUTE_BYTES

    @property
    def embedded(self) -> bool:
        return not self.store.startswith(("http://", "https://", "clickhouse://", "clickhouses://"))

    @property
    def data_dir(self) -> Path | None:
        """The chDB data directory, for an embedded store."""
        if not self.embedded:
            return None
        return Path(self.store.removeprefix("chdb://")).expanduser().resolve()


class Collector:
    """One collector: OTLP/gRPC receiver -> pipeline -> store, plus the admin endpoint."""

    def __init__(
        self, config: CollectorConfig, *, store: Store | None = None, annotator: Annotator | None = None
    ) -> None:
        self.config = config
        data_dir = config.data_dir
        if data_dir is not None:
            holder = read_lock(data_dir)
            if holder is not None and holder.pid != os.getpid():
                raise RuntimeError(
                    f"another collector (pid {holder.pid}) holds {data_dir}; stop it, or point this one "
                    f"at another --store. Query the running one with: mast-otel analyze --store {data_dir}"
                )
        if store is None:
            from mast_otel.store.clickhouse import open_store

            store = open_store(config.store, database=config.database)
        if annotator is None:
            from mast_otel.annotate.rules import RuleAnnotator

            annotator = RuleAnnotator()
        self.store = store
        self.pipeline = Pipeline(TraceAssembler(config.assembly), annotator, store, config.pipeline)
        self._receiver = GrpcReceiver(config.grpc, self.pipeline, TraceDecoder(config.max_attribute_bytes))
        self._admin = AdminServer(config.admin_endpoint, store) if config.admin_endpoint else None
        self._lock_path: Path | None = None
        self._started = False

    @property
    def grpc_port(self) -> int:
        return int(self._receiver.port)

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def admin_url(self) -> str:
        return self._admin.url if self._admin else ""

    def start(self) -> Collector:
        self.pipeline.start()
        self._receiver.start()
        if self._admin is not None:
            self._admin.start()
        data_dir = self.config.data_dir
        if data_dir is not None and self._admin is not None:
            self._lock_path = write_lock(
                data_dir, CollectorLock(os.getpid(), self.admin_url, self.grpc_endpoint)
            )
        self._started = True
        return self

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """True once every span accepted so far is stored."""
        return self.pipeline.wait_idle(timeout_s)

    def stats(self) -> PipelineStats:
        return self.pipeline.stats()

    def stop(self, grace_s: float = 5.0) -> bool:
        """Stop receiving, store everything accepted, release the store. True when nothing was lost."""
        if not self._started:
            self.store.close()
            return True
        self._started = False
        self._receiver.stop(grace_s)
        complete = self.pipeline.stop()
        if self._admin is not None:
            self._admin.stop()
        if self._lock_path is not None:
            self._lock_path.unlink(missing_ok=True)
        self.store.close()
        if not complete:
            log.error("stopped with %d spans not stored", self.pipeline.stats().spans_in_flight)
        return complete

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve(config: CollectorConfig, ready: threading.Event | None = None) -> int:
    """Run a collector until SIGINT/SIGTERM; exit code 0 when everything accepted was stored."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: flushing and stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        collector = Collector(config).start()
        log.info(
            "mast-otel collector: OTLP/gRPC on :%d, store %s, admin %s",
            collector.grpc_port,
            config.store,
            collector.admin_url or "off",
        )
        if ready is not None:
            ready.set()
        stop.wait()
        return 0 if collector.stop() else 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["LOCK_FILE", "Collector", "CollectorConfig", "serve"]
