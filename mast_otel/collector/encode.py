"""Typed `Span`s -> an OTLP ExportTraceServiceRequest: the inverse of `decode.py`.

The collector makes spans of its own from sources that send none (Codex CLI's log events, see
`logs.py`); encoding them as the request a traced agent would have sent lets them enter the
pipeline, the spool and its replays exactly like exports from traced agents. What `TraceDecoder`
reads back from the result equals the spans that went in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from mast_otel.spans import AttributeValue, Resource, Span, SpanKind, StatusCode

_KINDS = {
    SpanKind.UNSPECIFIED: PbSpan.SPAN_KIND_UNSPECIFIED,
    SpanKind.INTERNAL: PbSpan.SPAN_KIND_INTERNAL,
    SpanKind.SERVER: PbSpan.SPAN_KIND_SERVER,
    SpanKind.CLIENT: PbSpan.SPAN_KIND_CLIENT,
    SpanKind.PRODUCER: PbSpan.SPAN_KIND_PRODUCER,
    SpanKind.CONSUMER: PbSpan.SPAN_KIND_CONSUMER,
}
_STATUSES = {
    StatusCode.UNSET: PbStatus.STATUS_CODE_UNSET,
    StatusCode.OK: PbStatus.STATUS_CODE_OK,
    StatusCode.ERROR: PbStatus.STATUS_CODE_ERROR,
}


def encode_spans(spans: Iterable[Span]) -> ExportTraceServiceRequest:
    """One ResourceSpans per distinct resource, one ScopeSpans per scope within it, in span order."""
    request = ExportTraceServiceRequest()
    resources: dict[int, tuple[Resource, dict[tuple[str, str], list[Span]]]] = {}
    for span in spans:
        _, scopes = resources.setdefault(id(span.resource), (span.resource, {}))
        scopes.setdefault((span.scope_name, span.scope_version), []).append(span)
    for resource, scopes in resources.values():
        resource_spans = ResourceSpans(resource=PbResource(attributes=key_values(resource.attributes)))
        for (name, version), members in scopes.items():
            scope_spans = ScopeSpans(spans=[_pb_span(span) for span in members])
            scope_spans.scope.name = name
            scope_spans.scope.version = version
            resource_spans.scope_spans.append(scope_spans)
        request.resource_spans.append(resource_spans)
    return request


def key_values(attributes: Mapping[str, AttributeValue]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def any_value(value: AttributeValue) -> AnyValue:
    # bool before int: True is an int too.
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, (tuple, list)):  # lists too: callers build attributes by hand
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    return AnyValue()


def _pb_span(span: Span) -> PbSpan:
    pb = PbSpan(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        trace_state=span.trace_state,
        name=span.name,
        kind=_KINDS[span.kind],
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=key_values(span.attributes),
        events=[
            PbSpan.Event(
                time_unix_nano=event.time_ns, name=event.name, attributes=key_values(event.attributes)
            )
            for event in span.events
        ],
        links=[
            PbSpan.Link(
                trace_id=bytes.fromhex(link.trace_id),
                span_id=bytes.fromhex(link.span_id),
                trace_state=link.trace_state,
                attributes=key_values(link.attributes),
            )
            for link in span.links
        ],
        status=PbStatus(code=_STATUSES[span.status], message=span.status_message),
    )
    if span.parent_span_id:
        pb.parent_span_id = bytes.fromhex(span.parent_span_id)
    return pb
