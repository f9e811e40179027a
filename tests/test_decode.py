"""OTLP decoding: valid requests, partial rejection, garbage, huge and hostile values."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from spanfactory import span, to_request

from mast_otel.collector.decode import TRUNCATION_MARKER, DecodeError, TraceDecoder
from mast_otel.spans import StatusCode

TRACE = "5b8efff798038103d269b633813fc60c"


def test_round_trip_of_typed_fields() -> None:
    root = span(
        TRACE,
        "invoke_agent triage",
        100,
        900,
        status=StatusCode.ERROR,
        gen_ai__agent__name="triage",
        mast__task__score=0.5,
        retries=3,
        ok=True,
        tags=["a", "b"],
    )
    child = span(TRACE, "chat m", 200, 300, parent=root.span_id)
    decoded = TraceDecoder().decode_bytes(to_request([root, child], service="svc").SerializeToString())
    assert decoded.rejected == 0
    by_id = {s.span_id: s for s in decoded.spans}
    got = by_id[root.span_id]
    assert got.trace_id == TRACE and got.is_root and got.service_name == "svc"
    assert got.attributes == {
        "gen_ai.agent.name": "triage",
        "mast.task.score": 0.5,
        "retries": 3,
        "ok": True,
        "tags": ("a", "b"),
    }
    assert got.status is StatusCode.ERROR
    assert by_id[child.span_id].parent_span_id == root.span_id


def test_ids_are_shared_within_a_request() -> None:
    """Spans in assembly are most of the collector's memory: one string per distinct id, not per use."""
    root = replace(span(TRACE, "invoke_agent triage", 100, 900), scope_name="mast_otel", scope_version="1.0")
    children = [
        replace(
            span(TRACE, "chat m", 200 + n, 300, parent=root.span_id),
            scope_name="mast_otel",
            scope_version="1.0",
        )
        for n in range(3)
    ]
    decoded = TraceDecoder().decode_bytes(to_request([*children, root]).SerializeToString())
    by_id = {s.span_id: s for s in decoded.spans}
    decoded_root = by_id[root.span_id]
    for child in children:
        decoded_child = by_id[child.span_id]
        assert decoded_child.parent_span_id == root.span_id
        assert decoded_child.parent_span_id is decoded_root.span_id
        assert decoded_child.trace_id is decoded_root.trace_id
        assert (decoded_child.scope_name, decoded_child.scope_version) == ("mast_otel", "1.0")
        assert decoded_child.scope_name is decoded_root.scope_name


def test_malformed_spans_rejected_others_kept() -> None:
    good = span(TRACE, "ok", 1, 2)
    request = to_request([good])
    scope = request.resource_spans[0].scope_spans[0]
    scope.spans.append(
        PbSpan(trace_id=b"\x00" * 16, span_id=b"\x01" * 8, name="zero trace", start_time_unix_nano=1)
    )
    scope.spans.append(
        PbSpan(trace_id=b"\x01" * 16, span_id=b"\x01" * 3, name="short span id", start_time_unix_nano=1)
    )
    decoded = TraceDecoder().decode(request)
    assert [s.name for s in decoded.spans] == ["ok"]
    assert decoded.rejected == 2
    assert any("trace_id" in r for r in decoded.reasons) and any("span_id" in r for r in decoded.reasons)


def test_end_before_start_is_kept_as_zero_length() -> None:
    decoded = TraceDecoder().decode(to_request([span(TRACE, "skewed", 500, 100)]))
    assert decoded.spans[0].end_ns == 500 and decoded.spans[0].duration_ns == 0


def test_huge_attribute_truncated_not_refused() -> None:
    decoded = TraceDecoder(max_attribute_bytes=4096).decode(
        to_request([span(TRACE, "big", 1, 2, blob="x" * 100_000)])
    )
    value = decoded.spans[0].attributes["blob"]
    assert isinstance(value, str) and len(value) == 4096 and value.endswith(TRUNCATION_MARKER)


def test_deeply_nested_values_are_bounded() -> None:
    value = AnyValue(string_value="leaf")
    for _ in range(30):  # protobuf itself refuses ~100 levels; we flatten far earlier
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    pb = PbSpan(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="deep", start_time_unix_nano=1)
    pb.attributes.append(KeyValue(key="deep", value=value))
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[pb])])])
    decoded = TraceDecoder().decode_bytes(request.SerializeToString())
    level = decoded.spans[0].attributes["deep"]
    depth = 0
    while isinstance(level, tuple):
        level, depth = level[0], depth + 1
    assert depth == 8 and isinstance(level, str)  # bounded nesting, the rest kept as text


@pytest.mark.parametrize("body", [b"\xff\xff\xff\xff", b"\x0a\x05abc", b"not protobuf at all \x00\x01"])
def test_garbage_raises_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        TraceDecoder().decode_bytes(body)


def test_invalid_utf8_string_is_a_decode_error() -> None:
    # field 1 (resource_spans) -> field 2 (scope_spans) -> field 2 (spans) -> field 5 (name) = b"\xff"
    span_bytes = b"\x2a\x01\xff"
    scope = b"\x12" + bytes([len(span_bytes)]) + span_bytes
    resource = b"\x12" + bytes([len(scope)]) + scope
    body = b"\x0a" + bytes([len(resource)]) + resource
    with pytest.raises(DecodeError):
        TraceDecoder().decode_bytes(body)


def test_empty_request_is_fine() -> None:
    decoded = TraceDecoder().decode_bytes(b"")
    assert decoded.spans == () and decoded.rejected == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_fuzz_decoder_never_crashes(body: bytes) -> None:
    try:
        decoded = TraceDecoder().decode_bytes(body)
    except DecodeError:
        return
    for s in decoded.spans:
        assert len(s.trace_id) == 32 and len(s.span_id) == 16


def test_encode_is_the_inverse_of_decode() -> None:
    from mast_otel.collector.encode import encode_spans
    from mast_otel.spans import Resource, Span, SpanEvent, SpanKind, SpanLink

    agent, tools = Resource({"service.name": "agent", "k8s.pod": "p-1"}), Resource({"service.name": "tools"})
    spans = [
        Span(
            trace_id=TRACE,
            span_id="00000000000000a1",
            name="invoke_agent triage",
            start_ns=100,
            end_ns=900,
            kind=SpanKind.SERVER,
            status=StatusCode.ERROR,
            status_message="boom",
            attributes={
                "s": "text",
                "i": -3,
                "f": 0.25,
                "b": True,
                "raw": b"\x00\xff",
                "arr": ("a", 1),
                "map": {"nested": ("x",)},
            },
            events=(SpanEvent("gen_ai.choice", 500, {"index": 0}),),
            links=(SpanLink("0" * 31 + "1", "00000000000000b2", "v=1", {"why": "retry"}),),
            resource=agent,
            scope_name="mast_otel",
            scope_version="1.0",
            trace_state="k=v",
        ),
        Span(
            TRACE, "00000000000000a2", "chat m", 200, 300, parent_span_id="00000000000000a1", resource=agent
        ),
        Span(
            TRACE,
            "00000000000000a3",
            "execute_tool ls",
            400,
            450,
            parent_span_id="00000000000000a1",
            kind=SpanKind.CLIENT,
            resource=tools,
            scope_name="tools",
        ),
    ]
    decoded = TraceDecoder().decode_bytes(encode_spans(spans).SerializeToString())
    assert decoded.rejected == 0
    assert sorted(decoded.spans, key=lambda s: s.span_id) == spans


def test_times_past_2262_are_rejected_not_stored_wrong() -> None:
    ok = span(TRACE, "ok", 100, 200)
    late = span(TRACE, "late", 100, 200)
    request = to_request([ok, late])
    request.resource_spans[0].scope_spans[0].spans[1].end_time_unix_nano = 2**64 - 1
    decoded = TraceDecoder().decode_bytes(request.SerializeToString())
    assert [s.name for s in decoded.spans] == ["ok"] and decoded.rejected == 1
    assert decoded.reasons == ("span with a time past 2262-04-11 (beyond signed 64-bit Unix nanoseconds)",)
