"""Receive stage for OTLP logs: agents that report as log events (Codex CLI, GenAI message events)
become trace requests.

Codex CLI exports OTLP *logs*, not spans, when its `[otel]` config names an exporter. Both
receivers take `LogsService/Export` (gRPC) and `POST /v1/logs` (HTTP) and hand the request here:
the Codex events in it (`event.name` `codex.*`) are mapped by `mast_otel.conversation.codex` to the
spans our SDK emits for the same run, and those spans are encoded as an ExportTraceServiceRequest
that enters the pipeline exactly like an export from a traced agent: spooled as trace-request bytes
(replays decode them with `TraceDecoder`), assembled, rebuilt, annotated and stored. Backpressure is
the pipeline's: `Overloaded` propagates to the receiver, which answers with OTLP's retryable codes.

A Codex session's events arrive over many exports and no span ever ends the session, so each
export names the session's root span (same id every time) and carries its events as spans whose
ids are derived from the log records: assembly releases the session a grace period after an
export, later exports re-annotate the same run, and a retried export duplicates nothing.

GenAI per-message events (`gen_ai.user.message`, `gen_ai.choice`, ...), which OpenTelemetry's
openai-v2 instrumentation sends as log records by default, belong to the model-call span whose
context they were emitted in. The records of one span in one export become the events of one
carrier span, a child of that span marked `mast.events.for_span`; rebuild moves the events onto
the span itself, so the call reads as if the events had been span events. The carrier's id is
derived from the records, so a retried export duplicates nothing.

Answers follow OTLP's partial success: Codex events that name no conversation are rejected
(`rejected_log_records`); records that are not Codex events are accepted and ignored, which the
answer says in `error_message` with `rejected_log_records` 0, the form OTLP gives warnings.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from mast_otel import semconv as sc
from mast_otel.collector.decode import MAX_TIME_NS, DecodedTraces, DecodeError, TraceDecoder
from mast_otel.collector.encode import encode_spans
from mast_otel.collector.telemetry import CollectorMetrics
from mast_otel.conversation.codex import ATTR_EVENT_NAME, LogEvent, is_codex_event, log_spans
from mast_otel.conversation.genai_events import is_genai_event
from mast_otel.spans import Resource, Span, SpanEvent

log = logging.getLogger(__name__)

LOGS_SERVICE_NAME = "opentelemetry.proto.collector.logs.v1.LogsService"
LOGS_PATH = "/v1/logs"
CARRIER_SCOPE = "mast_otel.logs"  # the scope of spans made to carry logged GenAI events

Accept = Callable[[bytes, DecodedTraces], None]  # the pipeline's entry: trace-request bytes + decoded spans

# Attribute decoding shared with the trace path (same truncation); it keeps no state.
_DECODER = TraceDecoder()


def decode_logs_request(body: bytes) -> ExportLogsServiceRequest:
    """Protobuf bytes -> ExportLogsServiceRequest; `DecodeError` when they are not one."""
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"not an OTLP ExportLogsServiceRequest: {exc}") from exc
    return request


@dataclass(frozen=True, slots=True)
class TranslatedLogs:
    """One logs export, as the traces it describes."""

    trace_request: ExportTraceServiceRequest  # the spans of the Codex events (empty when none)
    spans: int
    ignored: int  # log records that are not Codex events
    rejected: int  # Codex events that name no conversation

    def response(self) -> ExportLogsServiceResponse:
        problems = []
        if self.rejected:
            problems.append(f"{self.rejected} Codex log record(s) without conversation.id rejected")
        if self.ignored:
            problems.append(
                f"{self.ignored} log record(s) ignored: not Codex events (event.name codex.*), "
                "the only logs this collector reads"
            )
        response = ExportLogsServiceResponse()
        if problems:
            response.partial_success.CopyFrom(
                ExportLogsPartialSuccess(
                    rejected_log_records=self.rejected, error_message="; ".join(problems)
                )
            )
        return response


def translate(request: ExportLogsServiceRequest) -> TranslatedLogs:
    """The spans for the Codex and GenAI events in `request`, as an ExportTraceServiceRequest."""
    events: list[LogEvent] = []
    described: dict[tuple[bytes, bytes], list[tuple[LogRecord, Resource, str]]] = {}
    ignored = 0
    for record, resource in _records(request):
        name = _event_name(record)
        if is_genai_event(name) and len(record.trace_id) == 16 and len(record.span_id) == 8:
            described.setdefault((record.trace_id, record.span_id), []).append((record, resource, name))
            continue
        if not is_codex_event(name):
            ignored += 1
            continue
        events.append(
            LogEvent(
                name=name,
                time_ns=_record_time(record),
                attributes=_DECODER.attributes(record.attributes),
                resource=resource,
                key=record.SerializeToString(deterministic=True),
            )
        )
    mapped = log_spans(events)
    spans = [*mapped.spans, *(_carrier(*ids, records) for ids, records in described.items())]
    return TranslatedLogs(encode_spans(spans), len(spans), ignored, mapped.unusable)


def _carrier(trace_id: bytes, span_id: bytes, records: list[tuple[LogRecord, Resource, str]]) -> Span:
    """One span holding, as span events, the GenAI events logged in the context of span `span_id`."""
    events = []
    identity = hashlib.sha256(trace_id + span_id)
    for record, _, name in records:
        identity.update(record.SerializeToString(deterministic=True))
        body = record.body
        if body.WhichOneof("value") == "kvlist_value":
            fields = _DECODER.attributes(body.kvlist_value.values)
        elif body.WhichOneof("value") == "string_value":
            fields = _DECODER.attributes([KeyValue(key="content", value=body)])
        else:
            fields = {}
        time_ns = _record_time(record)
        events.append(SpanEvent(name, time_ns, {**_DECODER.attributes(record.attributes), **fields}))
    start = min((event.time_ns for event in events if event.time_ns), default=1)
    return Span(
        trace_id=trace_id.hex(),
        span_id=_nonzero(identity.digest()[:8]).hex(),
        parent_span_id=span_id.hex(),
        name="gen_ai.events",
        start_ns=start,
        end_ns=max(start, *(event.time_ns for event in events)),
        attributes={sc.MAST_EVENTS_FOR_SPAN: span_id.hex()},
        events=tuple(events),
        resource=records[0][1],
        scope_name=CARRIER_SCOPE,
    )


def _record_time(record: LogRecord) -> int:
    # Clamped to what a span may hold, so a sender's garbage time can't get its spans rejected.
    return min(record.time_unix_nano or record.observed_time_unix_nano, MAX_TIME_NS)


def _nonzero(span_id: bytes) -> bytes:
    return span_id if any(span_id) else b"\x00" * 7 + b"\x01"


class LogsExporter:
    """What both receivers do with a logs export: translate it, and accept the spans like a trace export."""

    def __init__(
        self, accept: Accept, decoder: TraceDecoder, metrics: CollectorMetrics | None = None
    ) -> None:
        self._accept = accept
        self._decoder = decoder
        self._metrics = metrics or CollectorMetrics()

    def export(self, request: ExportLogsServiceRequest) -> ExportLogsServiceResponse:
        """Raises `Overloaded` (from the pipeline) when the collector is at capacity."""
        translated = translate(request)
        if translated.ignored:
            self._metrics.log_records_skipped.labels("ignored").inc(translated.ignored)
        if translated.rejected:
            self._metrics.log_records_skipped.labels("rejected").inc(translated.rejected)
        if translated.spans:
            body = translated.trace_request.SerializeToString()
            decoded = self._decoder.decode_bytes(body)
            if decoded.rejected:  # our own spans: a bug here, not the sender's fault
                log.warning(
                    "%d spans made from Codex logs were invalid: %s", decoded.rejected, decoded.reasons
                )
            self._accept(body, decoded)
        return translated.response()


def _records(request: ExportLogsServiceRequest) -> Iterator[tuple[LogRecord, Resource]]:
    for resource_logs in request.resource_logs:
        resource = Resource(_DECODER.attributes(resource_logs.resource.attributes))
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                yield record, resource


def _event_name(record: LogRecord) -> str:
    # Codex (0.171) names its events in the `event.name` attribute; the LogRecord field it fills
    # with a Rust source location. Senders following the current spec use the field.
    for kv in record.attributes:
        if kv.key == ATTR_EVENT_NAME and kv.value.WhichOneof("value") == "string_value":
            return str(kv.value.string_value)
    return str(record.event_name)
