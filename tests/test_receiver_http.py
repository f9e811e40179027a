"""OTLP/HTTP receiver: protobuf, JSON, gzip, limits and errors, over a real socket."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from spanfactory import agent_attrs, span, to_request

from mast_otel import sdk
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.receiver_http import HttpReceiverConfig
from mast_otel.collector.service import Collector
from mast_otel.collector.spool import SpoolConfig

T = "3a3c6e1f9b2d4c8e0f1a2b3c4d5e6f70"


@pytest.fixture
def collector(chdb_dir: Path, database: str, tmp_path: Path) -> Iterator[Collector]:
    config = loopback(
        str(chdb_dir),
        database=database,
        assembly=AssemblyConfig(grace_s=0.1, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
        spool=SpoolConfig(directory=str(tmp_path / "spool")),
    )
    small_bodies = HttpReceiverConfig(endpoint="127.0.0.1:0", max_body_bytes=64 * 1024)
    config = replace(config, receivers=replace(config.receivers, http=small_bodies))
    with Collector(config) as running:
        yield running


def post(
    collector: Collector, body: bytes, content_type: str, **headers: str
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(
        collector.http_endpoint + "/v1/traces", data=body, headers={"Content-Type": content_type, **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def run_spans() -> list:
    root = span(T, "invoke_agent a", 1_000, 5_000, **agent_attrs("a"))
    tool = span(
        T,
        "execute_tool t",
        2_000,
        3_000,
        parent=root.span_id,
        gen_ai__operation__name="execute_tool",
        gen_ai__tool__name="t",
        gen_ai__tool__call__result="ok",
    )
    return [root, tool]


def stored(collector: Collector) -> int:
    assert collector.wait_idle(10)
    return int(collector.store.query("SELECT count() FROM otel_traces").rows[0][0])


def test_protobuf_body(collector: Collector) -> None:
    status, body, headers = post(
        collector, to_request(run_spans()).SerializeToString(), "application/x-protobuf"
    )
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    assert ExportTraceServiceResponse.FromString(body) == ExportTraceServiceResponse()
    assert stored(collector) == 2


def test_json_body_with_hex_ids_and_gzip(collector: Collector) -> None:
    tree = json_format.MessageToDict(to_request(run_spans()))
    for resource in tree["resourceSpans"]:  # OTLP/JSON carries ids as hex, not protobuf's base64
        for scope in resource["scopeSpans"]:
            for s in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in s:
                        s[key] = base64.b64decode(s[key]).hex()
    body = gzip.compress(json.dumps(tree).encode())
    status, reply, headers = post(collector, body, "application/json", **{"Content-Encoding": "gzip"})
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(reply) == {}
    assert stored(collector) == 2
    ids = {row[0] for row in collector.store.query("SELECT TraceId FROM otel_traces").rows}
    assert ids == {T}


def test_partial_success_in_the_requested_encoding(collector: Collector) -> None:
    request = to_request(run_spans())
    request.resource_spans[0].scope_spans[0].spans.append(PbSpan(trace_id=b"\x00" * 16, span_id=b"\x01" * 8))
    status, body, _ = post(collector, request.SerializeToString(), "application/x-protobuf")
    assert status == 200
    assert ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 1
    assert stored(collector) == 2


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "says"),
    [
        (b"\xff\xfe garbage", "application/x-protobuf", {}, 400, "OTLP"),
        (b"{not json", "application/json", {}, 400, "JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            "application/json",
            {},
            400,
            "hex",
        ),
        (b"x" * 70_000, "application/x-protobuf", {}, 413, "limit"),
        (
            gzip.compress(b"\x00" * 200_000),
            "application/x-protobuf",
            {"Content-Encoding": "gzip"},
            413,
            "limit",
        ),
        (b"abc", "application/x-protobuf", {"Content-Encoding": "gzip"}, 400, "gzip"),
        (b"abc", "application/x-protobuf", {"Content-Encoding": "br"}, 415, "Content-Encoding"),
        (b"abc", "text/plain", {}, 415, "Content-Type"),
    ],
)
def test_bad_requests_get_clear_errors_and_the_receiver_keeps_serving(
    collector: Collector, body: bytes, content_type: str, headers: dict[str, str], status: int, says: str
) -> None:
    got, reply, _ = post(collector, body, content_type, **headers)
    assert got == status and says in reply.decode()
    ok, _, _ = post(collector, to_request(run_spans()).SerializeToString(), "application/x-protobuf")
    assert ok == 200


def test_unknown_path_is_404(collector: Collector) -> None:
    request = urllib.request.Request(collector.http_endpoint + "/v1/metrics", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 404


def test_the_otel_sdk_http_exporter_delivers(collector: Collector) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=collector.http_endpoint + "/v1/traces")
    sdk.configure(service_name="http-agent", exporter=exporter, set_global=False)
    with sdk.agent_run("a", model="m", task="t") as run, run.tool_call("get_pods") as tool:
        tool.set_result("ok")
    sdk.shutdown()
    assert stored(collector) == 2
