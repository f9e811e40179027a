"""The collector over real OTLP/gRPC sockets, into real chDB."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from spanfactory import agent_attrs, messages, output, span, to_request

from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.service import Collector
from mast_otel.collector.span_writer import SpanWriterConfig
from mast_otel.collector.spool import SpoolConfig

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
T = "7a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70"


def make_collector(chdb_dir: Path, database: str, **pipeline: int) -> Collector:
    return Collector(
        loopback(
            str(chdb_dir),
            database=database,
            assembly=AssemblyConfig(grace_s=0.2, max_wait_s=5.0),
            pipeline=PipelineConfig(flush_interval_s=0.05, **pipeline),
        )
    )


def export(collector: Collector, body: bytes) -> ExportTraceServiceResponse:
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        call = channel.unary_unary(
            EXPORT, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString
        )
        return call(body, timeout=10)


def count(collector: Collector, sql: str) -> int:
    return int(collector.store.query(sql).rows[0][0])


def small_run(trace_id: str) -> list:
    root = span(
        trace_id,
        "invoke_agent triage",
        1_000,
        5_000,
        **agent_attrs("triage", mast__task__outcome="success"),
        gen_ai__input__messages=messages(("user", "why is checkout down?")),
    )
    chat = span(
        trace_id,
        "chat m",
        1_100,
        1_500,
        parent=root.span_id,
        gen_ai__operation__name="chat",
        gen_ai__agent__name="triage",
        gen_ai__request__model="m1",
        gen_ai__output__messages=output("checking pods"),
    )
    tool = span(
        trace_id,
        "execute_tool get_pods",
        2_000,
        2_200,
        parent=root.span_id,
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="get_pods",
        gen_ai__tool__call__result="all Running",
    )
    return [root, chat, tool]


def test_garbage_gets_invalid_argument_and_collector_keeps_serving(collector: Collector) -> None:
    for body in (b"\xff\xfe\xfd garbage", b"\x0a\x7f\x01"):
        with pytest.raises(grpc.RpcError) as caught:
            export(collector, body)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "OTLP" in (caught.value.details() or "")
    response = export(collector, to_request(small_run(T)).SerializeToString())
    assert response.partial_success.rejected_spans == 0
    assert collector.wait_idle(10)
    assert count(collector, "SELECT count() FROM otel_traces") == 3


def test_empty_export_is_fine(collector: Collector) -> None:
    response = export(collector, b"")
    assert response == ExportTraceServiceResponse()
    response = export(collector, ExportTraceServiceRequest().SerializeToString())
    assert response == ExportTraceServiceResponse()


def test_malformed_spans_get_partial_success(collector: Collector) -> None:
    request = to_request(small_run(T))
    request.resource_spans[0].scope_spans[0].spans.append(
        PbSpan(trace_id=b"\x00" * 16, span_id=b"\x01" * 8, name="bad", start_time_unix_nano=5)
    )
    response = export(collector, request.SerializeToString())
    assert response.partial_success.rejected_spans == 1
    assert "trace_id" in response.partial_success.error_message
    assert collector.wait_idle(10)
    assert count(collector, "SELECT count() FROM otel_traces") == 3


def test_one_trace_over_several_exports_out_of_order_and_duplicated(collector: Collector) -> None:
    root, chat, tool = small_run(T)
    export(collector, to_request([tool]).SerializeToString())
    export(collector, to_request([root, tool]).SerializeToString())  # root arrives second; tool twice
    export(collector, to_request([chat, chat]).SerializeToString())
    assert collector.wait_idle(10)
    assert count(collector, "SELECT count() FROM otel_traces") == 3
    assert count(collector, "SELECT uniqExact(SpanId) FROM otel_traces") == 3
    rows = collector.store.query("SELECT TraceId, TurnCount, Outcome FROM mast_conversations FINAL").rows
    assert [(r[0], r[1], r[2]) for r in rows] == [(T, 3, "success")]
    export(collector, to_request([root]).SerializeToString())  # a duplicate after release
    assert collector.wait_idle(10)
    assert count(collector, "SELECT count() FROM otel_traces") == 3
    assert collector.stats().spans_duplicate == 3


def test_late_spans_of_a_run_still_in_the_write_batch_join_it(chdb_dir: Path, database: str) -> None:
    """The run is released but not yet written (the batch waits: another trace is still assembling)
    when a late span arrives: the new version must hold every span, not only the late one."""
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.05, max_wait_s=30.0),
        pipeline=PipelineConfig(flush_interval_s=30.0),
    )
    with Collector(config) as running:
        waiting_root, *waiting_children = small_run("8a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70")
        export(running, to_request(waiting_children).SerializeToString())  # no root: assembles for 30 s
        root, chat, tool = small_run(T)
        export(running, to_request([root, chat, tool]).SerializeToString())
        deadline = time.monotonic() + 10
        while running.stats().traces_in_assembly > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # released into the batch, which is not written: flush interval 30 s
        assert count(running, "SELECT count() FROM mast_conversations") == 0
        late = span(
            T,
            "execute_tool get_logs",
            3_000,
            3_100,
            parent=root.span_id,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="get_logs",
        )
        export(running, to_request([late]).SerializeToString())
        export(running, to_request([waiting_root]).SerializeToString())  # completes the other trace
        assert running.wait_idle(15)
        rows = running.store.query(
            "SELECT SpanCount, ToolCallCount FROM mast_conversations FINAL WHERE TraceId = {t:String}",
            {"t": T},
        ).rows
        assert [tuple(row) for row in rows] == [(4, 2)]
        assert count(running, "SELECT count() FROM otel_traces") == 7


def test_over_capacity_answers_retryable_resource_exhausted(chdb_dir: Path, database: str) -> None:
    with make_collector(chdb_dir, database, max_in_flight_spans=4) as running:
        root, chat, tool = small_run(T)
        # The trace has no root yet, so it waits in assembly (max_wait 5 s) and stays in flight.
        export(running, to_request([chat, tool]).SerializeToString())
        other = small_run("8a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70")
        with pytest.raises(grpc.RpcError) as caught:
            export(running, to_request(other).SerializeToString())
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "retry" in (caught.value.details() or "")
        export(running, to_request([root]).SerializeToString())  # completes the first trace
        assert running.wait_idle(10)
        export(running, to_request(other).SerializeToString())  # capacity is back
        assert running.wait_idle(10)
        assert count(running, "SELECT count() FROM otel_traces") == 6
        assert running.stats().refused_exports == 1


def test_analyze_reads_through_the_running_collector(
    collector: Collector, chdb_dir: Path, database: str
) -> None:
    export(collector, to_request(small_run(T)).SerializeToString())
    assert collector.wait_idle(10)
    # Another process cannot open the chDB directory this one holds: it must go through the collector.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mast_otel.cli",
            "analyze",
            "--store",
            str(chdb_dir),
            "--database",
            database,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(m["model"], m["runs"], m["success_rate"]) for m in report["models"]] == [("m1", 1, 1.0)]


def test_sigterm_flushes_everything_accepted(tmp_path: Path) -> None:
    data = tmp_path / "store"
    data.mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mast_otel.cli",
            "collector",
            "--store",
            str(data),
            "--grpc-endpoint",
            "127.0.0.1:0",
            "--admin-endpoint",
            "127.0.0.1:0",
            "--grace",
            "60",
            "--max-wait",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lock = data / "collector.json"
        deadline = time.monotonic() + 60
        while not lock.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert lock.exists(), process.stderr.read() if process.stderr else ""
        endpoint = json.loads(lock.read_text())["grpc_endpoint"].removeprefix("http://")
        with grpc.insecure_channel(endpoint) as channel:
            call = channel.unary_unary(
                EXPORT, request_serializer=None, response_deserializer=ExportTraceServiceResponse.FromString
            )
            call(to_request(small_run(T)).SerializeToString(), timeout=10)
        # The trace is still in its 60 s grace period: only the shutdown flush can store it.
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
    assert not (data / "collector.json").exists()
    result = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "analyze", "--store", str(data), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["models"][0]["runs"] == 1


def test_raw_span_writes_can_be_left_to_otelcol(chdb_dir: Path, database: str, tmp_path: Path) -> None:
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.1, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    config = replace(config, store=replace(config.store, write_raw_spans=False))
    with Collector(config) as running:
        export(running, to_request(small_run(T)).SerializeToString())
        assert running.wait_idle(10)
        assert count(running, "SELECT count() FROM mast_conversations FINAL") == 1
        assert count(running, "SELECT count() FROM otel_traces") == 0


def test_waiting_for_idle_stores_raw_spans_now_not_at_the_next_flush(chdb_dir: Path, database: str) -> None:
    """The raw span writer batches for `flush_interval_s`; whoever waits for the collector to be idle
    (the demo, shutdown, tests) gets the spans stored at once, not after the interval."""
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
        raw_spans=SpanWriterConfig(flush_interval_s=3600.0),
    )
    with Collector(config) as collector:
        spans = small_run(T)
        export(collector, to_request(spans).SerializeToString())
        assert collector.wait_idle(30)  # with the writer waiting out its interval, this times out
        assert count(collector, "SELECT count() FROM otel_traces") == len(spans)
