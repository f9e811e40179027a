"""Builders for typed spans and OTLP requests used across tests (test helpers, not fixtures)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from mast_otel import semconv as sc
from mast_otel.spans import Resource, Span, StatusCode

_ids = itertools.count(1)
RESOURCE = Resource({"service.name": "test-agent"})


def new_span_id() -> str:
    return f"{next(_ids):016x}"


def span(
    trace_id: str,
    name: str,
    start: int,
    end: int,
    parent: str = "",
    span_id: str | None = None,
    status: StatusCode = StatusCode.UNSET,
    **attributes: Any,
) -> Span:
    attrs = {k.replace("__", "."): v for k, v in attributes.items()}
    return Span(
        trace_id=trace_id,
        span_id=span_id or new_span_id(),
        parent_span_id=parent,
        name=name,
        start_ns=start,
        end_ns=end,
        status=status,
        attributes=attrs,
        resource=RESOURCE,
    )


def messages(*items: tuple[str, str]) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in items])


def output(
    text: str = "",
    reasoning: str = "",
    tool_calls: Sequence[Mapping[str, Any]] = (),
    finish_reason: str = "stop",
) -> str:
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if text:
        parts.append({"type": "text", "content": text})
    for call in tool_calls:
        parts.append({"type": "tool_call", **call})
    return json.dumps([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])


def agent_attrs(agent: str, **extra: Any) -> dict[str, Any]:
    return {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: agent, **extra}


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        out = AnyValue()
        out.array_value.values.extend(_any(v) for v in value)
        return out
    return AnyValue(string_value=str(value))


def to_request(spans: Sequence[Span], service: str = "test-agent") -> ExportTraceServiceRequest:
    """Typed spans -> an OTLP request, as an SDK would send them."""
    pb_spans = []
    for s in spans:
        pb = PbSpan(
            trace_id=bytes.fromhex(s.trace_id),
            span_id=bytes.fromhex(s.span_id),
            parent_span_id=bytes.fromhex(s.parent_span_id) if s.parent_span_id else b"",
            name=s.name,
            start_time_unix_nano=s.start_ns,
            end_time_unix_nano=s.end_ns,
            kind=PbSpan.SPAN_KIND_INTERNAL,
        )
        pb.attributes.extend(KeyValue(key=k, value=_any(v)) for k, v in s.attributes.items())
        if s.status is StatusCode.ERROR:
            pb.status.code = 2
            pb.status.message = s.status_message
        pb_spans.append(pb)
    resource_spans = ResourceSpans(scope_spans=[ScopeSpans(spans=pb_spans)])
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value=service))
    )
    return ExportTraceServiceRequest(resource_spans=[resource_spans])
