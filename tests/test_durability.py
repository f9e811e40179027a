"""Nothing acknowledged is lost (database outages, SIGKILL, restarts, late spans); nothing double-counts."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from faults import Outage
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from spanfactory import agent_attrs, output, span, to_request

from mast_otel.annotate.base import AnnotatedRun
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.pipeline import Mode, PipelineConfig
from mast_otel.collector.process import CollectorProcess
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig
from mast_otel.spans import Span
from mast_otel.store.base import StoreError
from mast_otel.store.clickhouse import open_store

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def trace_id(n: int) -> str:
    return f"{n:032x}"


def run(n: int, tools: int = 2) -> list[Span]:
    root = span(
        trace_id(n), "invoke_agent a", 1_000, 9_000, **agent_attrs("a", mast__task__outcome="success")
    )
    calls = [
        span(
            trace_id(n),
            "execute_tool t",
            2_000 + i,
            3_000 + i,
            parent=root.span_id,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="t",
            gen_ai__tool__call__result=f"r{i}",
        )
        for i in range(tools)
    ]
    return [root, *calls]


def send(target: str, spans: Sequence[Span]) -> None:
    with grpc.insecure_channel(target) as channel:
        channel.unary_unary(
            EXPORT, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString
        )(to_request(spans).SerializeToString(), timeout=30)


@pytest.fixture
def outage(chdb_dir: Path, database: str, tmp_path: Path) -> Iterator[tuple[Collector, Outage]]:
    switch = Outage(open_store(chdb_dir, database=database))
    config = loopback(
        str(chdb_dir),
        database=database,
        http=False,
        assembly=AssemblyConfig(grace_s=0.1, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05, retry_initial_s=0.05, retry_max_s=0.2),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    with Collector(config, store=switch) as running:
        yield running, switch


def test_database_outage_mid_stream_loses_and_duplicates_nothing(outage: tuple[Collector, Outage]) -> None:
    collector, switch = outage
    target = f"127.0.0.1:{collector.grpc_port}"
    runs = {n: run(n) for n in range(1, 31)}
    for n in range(1, 11):
        send(target, runs[n])
    assert collector.wait_idle(20)
    switch.down.set()
    for n in range(11, 31):  # accepted into the spool while the database is away
        send(target, runs[n])
    send(target, runs[5][1:] + runs[12])  # duplicates of a stored and of a spooled trace
    deadline = threading.Event()
    deadline.wait(0.5)
    assert collector.pipeline.mode is Mode.SPOOLING
    assert collector.stats().spool_bytes > 0
    switch.down.clear()
    assert collector.wait_idle(30)
    store = switch.store
    assert store.query("SELECT count(), uniqExact(SpanId) FROM otel_traces").rows[0] == (90, 90)
    assert store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0] == 30
    assert collector.stats().spool_segments <= 1  # drained segments were deleted


def test_late_span_reannotates_the_run_with_one_current_version(outage: tuple[Collector, Outage]) -> None:
    collector, switch = outage
    target = f"127.0.0.1:{collector.grpc_port}"
    spans = run(7, tools=1)
    send(target, spans)
    assert collector.wait_idle(10)
    late = span(
        trace_id(7),
        "message",
        8_000,
        8_000,
        parent=spans[0].span_id,
        mast__step__kind="message",
        gen_ai__agent__name="a",
        gen_ai__output__messages=output("Done, verified."),
    )
    send(target, [late])
    assert collector.wait_idle(10)
    rows = switch.store.query("SELECT TurnCount, SpanCount FROM mast_conversations FINAL").rows
    assert rows == ((2, 3),)  # one run, rebuilt from the stored spans plus the late one
    assert switch.store.query("SELECT count() FROM otel_traces").rows[0][0] == 3
    assert collector.stats().runs_reannotated == 1


@pytest.mark.parametrize("grace", ["60", "0.05"])
def test_sigkill_then_restart_keeps_every_acknowledged_span_once(tmp_path: Path, grace: str) -> None:
    data = tmp_path / "store"
    data.mkdir()
    first = CollectorProcess(data, "--grace", grace)
    acked: list[Span] = []
    try:
        for n in range(1, 41):
            spans = run(n)
            send(first.grpc_target, spans)
            acked.extend(spans)
        assert first.cpu_seconds() > 0  # read from /proc by bench/trickle.py: the parse must hold
    finally:
        first.kill()  # SIGKILL: no flush, no goodbye
    second = CollectorProcess(data, "--grace", "0.05")
    try:
        expected = len(acked)
        assert second.wait_for("SELECT count() FROM otel_traces", expected) == expected
        assert second.count("SELECT uniqExact(SpanId) FROM otel_traces") == expected
        assert second.wait_for("SELECT count() FROM mast_conversations FINAL", 40) == 40
    finally:
        assert second.terminate() == 0


def test_sigkill_during_ingest_keeps_every_acknowledged_span_once(tmp_path: Path) -> None:
    data = tmp_path / "store"
    data.mkdir()
    first = CollectorProcess(data, "--grace", "0.05")
    acked: list[Span] = []
    stop = threading.Event()

    def sender() -> None:
        n = 1000
        while not stop.is_set():
            n += 1
            spans = run(n)
            try:
                send(first.grpc_target, spans)
            except grpc.RpcError:
                return  # the collector died under us: this export was not acknowledged
            acked.extend(spans)

    thread = threading.Thread(target=sender)
    thread.start()
    threading.Event().wait(1.0)
    first.kill()  # in the middle of the stream
    stop.set()
    thread.join(30)
    assert len(acked) > 30
    second = CollectorProcess(data, "--grace", "0.05")
    try:
        ids = [s.span_id for s in acked]
        sql = "SELECT count() FROM otel_traces WHERE SpanId IN ('" + "','".join(ids) + "')"
        assert second.wait_for(sql, len(ids)) == len(ids)
        assert second.count("SELECT count() - uniqExact(SpanId) FROM otel_traces") == 0  # stored once
    finally:
        assert second.terminate() == 0


class RefusesOneRun(Outage):
    """Answers pings, but refuses any batch holding the run of trace 13, as for data it cannot store."""

    def insert_runs(self, runs: Sequence[AnnotatedRun]) -> None:
        if any(run.conversation.trace_id == trace_id(13) for run in runs):
            raise StoreError("Cannot parse input: a value out of range (simulated)")
        super().insert_runs(runs)


def test_a_run_the_store_refuses_is_left_out_not_spooled_for_ever(
    chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    store = RefusesOneRun(open_store(chdb_dir, database=database))
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.05, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.5),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    with Collector(config, store=store) as collector:
        target = f"127.0.0.1:{collector.grpc_port}"
        send(target, [*run(12), *run(13), *run(14)])
        assert collector.wait_idle(20)
        assert collector.pipeline.mode is Mode.LIVE
        stats = collector.stats()
        assert (stats.runs_refused, stats.runs_stored, stats.store_errors) == (1, 2, 0)
        stored = collector.store.query("SELECT TraceId FROM mast_conversations ORDER BY TraceId").rows
        assert [row[0] for row in stored] == [trace_id(12), trace_id(14)]
        assert collector.store.query("SELECT count() FROM otel_traces").rows[0][0] == 9  # every span
