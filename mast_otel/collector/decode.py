"""Receive stage: OTLP trace requests (protobuf) -> typed `Span`s, validating as it goes.

Untrusted bytes come in here. Anything that is not a well-formed ExportTraceServiceRequest raises
`DecodeError` (the receiver answers INVALID_ARGUMENT); individual spans that are malformed (bad ids,
end before start by more than the allowed skew) are rejected and counted, the rest are kept, which is
what OTLP's partial success describes. Oversized string attributes are truncated, never refused:
a diagnosis with a clipped log beats no diagnosis.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from sys import intern

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from mast_otel.spans import AttributeValue, Resource, Span, SpanEvent, SpanKind, SpanLink, StatusCode

DEFAULT_MAX_ATTRIBUTE_BYTES = 256 * 1024
# The last instant ClickHouse's DateTime64(9) holds (2262-04-11): OTLP's unsigned times go further,
# and a span past it could not be stored, so it is rejected like any other malformed span.
MAX_TIME_NS = 2**63 - 1
TRUNCATION_MARKER = "…[truncated by mast-otel]"

_KINDS = {
    PbSpan.SPAN_KIND_UNSPECIFIED: SpanKind.UNSPECIFIED,
    PbSpan.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    PbSpan.SPAN_KIND_SERVER: SpanKind.SERVER,
    PbSpan.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    PbSpan.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    PbSpan.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_STATUSES = {
    PbStatus.STATUS_CODE_UNSET: StatusCode.UNSET,
    PbStatus.STATUS_CODE_OK: StatusCode.OK,
    PbStatus.STATUS_CODE_ERROR: StatusCode.ERROR,
}
_MAX_NESTING = 8  # kvlists/arrays deeper than this are flattened to text: bounded recursion on hostile input


class DecodeError(ValueError):
    """The request body is not a valid OTLP ExportTraceServiceRequest."""


@dataclass(frozen=True, slots=True)
class DecodedTraces:
    spans: tuple[Span, ...]
    rejected: int  # spans dropped as malformed
    reasons: tuple[str, ...]  # one line per distinct reason, for the partial-success message


class TraceDecoder:
    """Decodes OTLP trace requests; one instance per receiver, stateless apart from its limits."""

    def __init__(self, max_attribute_bytes: int = DEFAULT_MAX_ATTRIBUTE_BYTES) -> None:
        if max_attribute_bytes < 1024:
            raise ValueError("max_attribute_bytes must be at least 1024")
        self._max_chars = max_attribute_bytes

    def decode_bytes(self, body: bytes) -> DecodedTraces:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError(f"not an OTLP ExportTraceServiceRequest: {exc}") from exc
        return self.decode(request)

    def decode(self, request: ExportTraceServiceRequest) -> DecodedTraces:
        spans: list[Span] = []
        rejected = 0
        reasons: set[str] = set()
        ids: dict[bytes, str] = {}  # see _shared_hex
        for resource_spans in request.resource_spans:
            resource = Resource(self.attributes(resource_spans.resource.attributes))
            for scope_spans in resource_spans.scope_spans:
                # Read once per scope: each read makes a new string, and every span would hold its own.
                scope_name, scope_version = scope_spans.scope.name, scope_spans.scope.version
                for pb in scope_spans.spans:
                    problem = _invalid(pb)
                    if problem:
                        rejected += 1
                        reasons.add(problem)
                        continue
                    spans.append(self._span(pb, resource, scope_name, scope_version, ids))
        return DecodedTraces(tuple(spans), rejected, tuple(sorted(reasons)))

    def _span(
        self, pb: PbSpan, resource: Resource, scope_name: str, scope_version: str, ids: dict[bytes, str]
    ) -> Span:
        end_ns = pb.end_time_unix_nano
        # A span that claims to end before it starts is clock skew or a bug upstream; keep it, as zero-length.
        end_ns = max(end_ns, pb.start_time_unix_nano)
        return Span(
            trace_id=_shared_hex(ids, pb.trace_id),
            span_id=_shared_hex(ids, pb.span_id),
            parent_span_id=_shared_hex(ids, pb.parent_span_id) if len(pb.parent_span_id) == 8 else "",
            name=pb.name[: self._max_chars],
            start_ns=pb.start_time_unix_nano,
            end_ns=end_ns,
            kind=_KINDS.get(pb.kind, SpanKind.UNSPECIFIED),
            status=_STATUSES.get(pb.status.code, StatusCode.UNSET),
            status_message=self._text(pb.status.message),
            attributes=self.attributes(pb.attributes),
            events=tuple(
                SpanEvent(e.name, e.time_unix_nano, self.attributes(e.attributes)) for e in pb.events
            ),
            links=tuple(
                SpanLink(
                    link.trace_id.hex(),
                    link.span_id.hex(),
                    link.trace_state,
                    self.attributes(link.attributes),
                )
                for link in pb.links
            ),
            resource=resource,
            scope_name=scope_name,
            scope_version=scope_version,
            trace_state=pb.trace_state,
        )

    def attributes(self, pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
        """OTLP key-value pairs (of a span, resource, event, log record...) as typed attributes,
        long strings truncated, deep nesting flattened to text."""
        out: dict[str, AttributeValue] = {}
        for kv in pairs:
            # Interned: every span repeats the same few dozen keys, and spans in assembly are the
            # collector's memory; one shared copy of each key instead of one per span.
            out[intern(kv.key)] = self._value(kv.value, 0)
        return out

    def _value(self, value: AnyValue, depth: int) -> AttributeValue:
        which = value.WhichOneof("value")
        if which == "string_value":
            return self._text(value.string_value)
        if which == "int_value":
            return value.int_value
        if which == "double_value":
            return value.double_value
        if which == "bool_value":
            return value.bool_value
        if which == "bytes_value":
            return value.bytes_value[: self._max_chars]
        if depth >= _MAX_NESTING:
            return self._text(str(value))
        if which == "array_value":
            return tuple(self._value(v, depth + 1) for v in value.array_value.values)
        if which == "kvlist_value":
            return {kv.key: self._value(kv.value, depth + 1) for kv in value.kvlist_value.values}
        return None

    def _text(self, text: str) -> str:
        if len(text) <= self._max_chars:
            return text
        return text[: self._max_chars - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER


def _shared_hex(ids: dict[bytes, str], raw: bytes) -> str:
    """`raw` in hex, one string per distinct id in a request. The spans of a trace share its id and
    children their parent's span id: about 150 bytes less per span held in assembly."""
    text = ids.get(raw)
    if text is None:
        text = ids[raw] = raw.hex()
    return text


def without_duplicates(body: bytes, seen: set[tuple[str, str]]) -> bytes:
    """`body` (a valid ExportTraceServiceRequest) without the spans whose (trace id, span id) in hex
    is in `seen`, nor second copies of a span within it. Empty scopes and resources stay: they are
    harmless, and keeping them keeps this simple."""
    request = ExportTraceServiceRequest.FromString(body)
    kept = set(seen)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            spans = list(scope_spans.spans)
            del scope_spans.spans[:]
            for pb in spans:
                key = (pb.trace_id.hex(), pb.span_id.hex())
                if key not in kept:
                    kept.add(key)
                    scope_spans.spans.append(pb)
    serialized: bytes = request.SerializeToString()
    return serialized


def _invalid(pb: PbSpan) -> str:
    """Why a span can't be used, or "" when it can."""
    if len(pb.trace_id) != 16 or not any(pb.trace_id):
        return "span with an invalid trace_id (must be 16 non-zero bytes)"
    if len(pb.span_id) != 8 or not any(pb.span_id):
        return "span with an invalid span_id (must be 8 non-zero bytes)"
    if pb.parent_span_id and len(pb.parent_span_id) != 8:
        return "span with an invalid parent_span_id (must be empty or 8 bytes)"
    if pb.start_time_unix_nano == 0:
        return "span without a start time"
    if (
        pb.start_time_unix_nano > MAX_TIME_NS
        or pb.end_time_unix_nano > MAX_TIME_NS
        or any(event.time_unix_nano > MAX_TIME_NS for event in pb.events)
    ):
        return "span with a time past 2262-04-11 (beyond signed 64-bit Unix nanoseconds)"
    return ""
