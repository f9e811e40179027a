"""OTLP log records that describe spans (GenAI message events) become events of those spans."""

from __future__ import annotations

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from spanfactory import span

from mast_otel import semconv as sc
from mast_otel.collector.decode import TraceDecoder
from mast_otel.collector.encode import any_value
from mast_otel.collector.logs import translate
from mast_otel.conversation.model import TurnKind
from mast_otel.conversation.rebuild import rebuild

TRACE = "0af7651916cd43dd8448eb211c80319c"
CHAT = "b7ad6b7169203331"


def event(name: str, body: dict[str, object], *, trace: str = TRACE, span_id: str = CHAT) -> LogRecord:
    return LogRecord(
        time_unix_nano=1_000,
        event_name=name,
        trace_id=bytes.fromhex(trace) if trace else b"",
        span_id=bytes.fromhex(span_id) if span_id else b"",
        attributes=[KeyValue(key="gen_ai.system", value=AnyValue(string_value="openai"))],
        body=AnyValue(
            kvlist_value=KeyValueList(values=[KeyValue(key=k, value=any_value(v)) for k, v in body.items()])
        ),
    )


def request(*records: LogRecord) -> ExportLogsServiceRequest:
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])])


def test_logged_genai_events_are_read_as_events_of_their_span() -> None:
    records = [
        event("gen_ai.user.message", {"content": "Why is checkout failing?"}),
        event(
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "A bad deploy."},
            },
        ),
        event("gen_ai.user.message", {"content": "no trace context"}, trace="", span_id=""),
    ]
    translated = translate(request(*records))
    assert (translated.spans, translated.ignored) == (1, 1)  # one carrier; the record without context
    [carrier] = TraceDecoder().decode(translated.trace_request).spans
    assert carrier.parent_span_id == CHAT and carrier.attributes[sc.MAST_EVENTS_FOR_SPAN] == CHAT
    chat = span(TRACE, "chat gpt", 900, 2_000, span_id=CHAT, gen_ai__operation__name="chat")
    turns = rebuild([chat, carrier]).turns
    assert [(t.kind, t.content) for t in turns] == [
        (TurnKind.USER, "Why is checkout failing?"),
        (TurnKind.AGENT_MESSAGE, "A bad deploy."),
    ]
    assert rebuild([chat, carrier]).span_count == 1  # the carrier is plumbing, not a span of the run


def test_a_retried_export_makes_the_same_carrier_and_an_orphan_carrier_stands_for_its_call() -> None:
    body = request(event("gen_ai.user.message", {"content": "hello"}))
    first = TraceDecoder().decode(translate(body).trace_request).spans
    again = TraceDecoder().decode(translate(body).trace_request).spans
    assert first == again  # same span id: the collector drops the second as a duplicate
    other = span(
        TRACE, "invoke_agent a", 1, 5_000, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="a"
    )
    # The model-call span never arrived (sampled out, lost): its logged events still make its turns.
    assert [(t.kind, t.content) for t in rebuild([other, *first]).turns] == [(TurnKind.USER, "hello")]
