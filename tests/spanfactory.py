"""Builders for typed spans and OTLP requests used across tests (test helpers, not fixtures)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel import semconv as sc
from mast_otel.collector.encode import encode_spans
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


def to_request(spans: Sequence[Span], service: str = "test-agent") -> ExportTraceServiceRequest:
    """Typed spans -> an OTLP request, as an SDK would send them, from service `service`."""
    resource = Resource({"service.name": service})
    return encode_spans(replace(s, resource=resource) for s in spans)
