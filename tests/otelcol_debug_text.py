"""Test-only: OTLP trace requests rendered as the collector's `debug` exporter prints them, logged.

Follows the collector's Go source (open-telemetry/opentelemetry-collector, exporter/debugexporter):
`internal/otlptext/traces.go` and `databuffer.go` for the detailed text (the release that prints the
span's dropped counts, PR #14217), pdata's `Value.AsString()` and `Timestamp.String()` for values
and times, and `exporter.go` for how each export is logged (a "Traces" summary entry, then the text
as one more entry). The log entries are zap's console encoding as the collector configures it:
time, level and message separated by tabs, then the logger's context fields as JSON; a multi-line
message is written as is, so the fields land on a line of their own after the text.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

# The context a current collector gives the debug exporter's logger (it ends every printout).
CONTEXT: Mapping[str, object] = {
    "resource": {
        "service.instance.id": "9d1c4a9e",
        "service.name": "otelcol-contrib",
        "service.version": "0.142.0",
    },
    "otelcol.component.id": "debug",
    "otelcol.component.kind": "exporter",
    "otelcol.signal": "traces",
}
_KINDS = {
    PbSpan.SPAN_KIND_UNSPECIFIED: "Unspecified",
    PbSpan.SPAN_KIND_INTERNAL: "Internal",
    PbSpan.SPAN_KIND_SERVER: "Server",
    PbSpan.SPAN_KIND_CLIENT: "Client",
    PbSpan.SPAN_KIND_PRODUCER: "Producer",
    PbSpan.SPAN_KIND_CONSUMER: "Consumer",
}
_STATUSES = {
    PbStatus.STATUS_CODE_UNSET: "Unset",
    PbStatus.STATUS_CODE_OK: "Ok",
    PbStatus.STATUS_CODE_ERROR: "Error",
}
_VALUE_TYPES = {
    None: "Empty",
    "string_value": "Str",
    "int_value": "Int",
    "double_value": "Double",
    "bool_value": "Bool",
    "kvlist_value": "Map",
    "array_value": "Slice",
    "bytes_value": "Bytes",
}


def debug_exporter_log(
    requests: Iterable[ExportTraceServiceRequest],
    *,
    start: datetime = datetime(2026, 1, 15, 9, 30, tzinfo=timezone.utc),
    context: Mapping[str, object] = CONTEXT,
) -> str:
    """The collector's log after the debug exporter (`verbosity: detailed`) received `requests`."""
    entries = [console_entry(start, "Everything is ready. Begin running and processing data.", {})]
    for number, request in enumerate(requests, start=1):
        when = start + timedelta(seconds=number)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        summary = {**context, "resource spans": len(request.resource_spans), "spans": spans}
        entries.append(console_entry(when, "Traces", summary))
        entries.append(console_entry(when, render_traces(request), context))
    return "".join(entries)


def console_entry(when: datetime, message: str, fields: Mapping[str, object]) -> str:
    """One zap console-encoded entry: `time\\tlevel\\tmessage[\\t{fields}]\\n`."""
    stamp = when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    line = f"{stamp}\tinfo\t{message}"
    if fields:
        line += "\t" + json.dumps(fields, ensure_ascii=False)
    return line + "\n"


def render_traces(request: ExportTraceServiceRequest) -> str:
    """`textTracesMarshaler.MarshalTraces` (otlptext/traces.go)."""
    out: list[str] = []
    for i, resource_spans in enumerate(request.resource_spans):
        out.append(f"ResourceSpans #{i}")
        out.append(f"Resource SchemaURL: {resource_spans.schema_url}")
        out.extend(_attributes("Resource attributes", resource_spans.resource.attributes))
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            out.append(f"ScopeSpans #{j}")
            out.append(f"ScopeSpans SchemaURL: {scope_spans.schema_url}")
            out.append(f"InstrumentationScope {scope_spans.scope.name} {scope_spans.scope.version}")
            out.extend(_attributes("InstrumentationScope attributes", scope_spans.scope.attributes))
            for k, span in enumerate(scope_spans.spans):
                out.append(f"Span #{k}")
                out.append(_field("Trace ID", span.trace_id.hex()))
                out.append(_field("Parent ID", span.parent_span_id.hex()))
                out.append(_field("ID", span.span_id.hex()))
                out.append(_field("Name", span.name))
                out.append(_field("Kind", _KINDS[span.kind]))
                if span.trace_state:
                    out.append(_field("TraceState", span.trace_state))
                out.append(_field("Start time", go_time(span.start_time_unix_nano)))
                out.append(_field("End time", go_time(span.end_time_unix_nano)))
                out.append(_field("Status code", _STATUSES[span.status.code]))
                out.append(_field("Status message", span.status.message))
                out.append(_field("DroppedAttributesCount", str(span.dropped_attributes_count)))
                out.append(_field("DroppedEventsCount", str(span.dropped_events_count)))
                out.append(_field("DroppedLinksCount", str(span.dropped_links_count)))
                out.extend(_attributes("Attributes", span.attributes))
                if span.events:  # logEvents
                    out.append("Events:")
                    for n, event in enumerate(span.events):
                        out.append(f"SpanEvent #{n}")
                        out.append(f"     -> Name: {event.name}")
                        out.append(f"     -> Timestamp: {go_time(event.time_unix_nano)}")
                        out.append(f"     -> DroppedAttributesCount: {event.dropped_attributes_count}")
                        out.extend(_attributes("     -> Attributes:", event.attributes))
                if span.links:  # logLinks
                    out.append("Links:")
                    for n, link in enumerate(span.links):
                        out.append(f"SpanLink #{n}")
                        out.append(f"     -> Trace ID: {link.trace_id.hex()}")
                        out.append(f"     -> ID: {link.span_id.hex()}")
                        out.append(f"     -> TraceState: {link.trace_state}")
                        out.append(f"     -> DroppedAttributesCount: {link.dropped_attributes_count}")
                        out.extend(_attributes("     -> Attributes:", link.attributes))
    return "".join(line + "\n" for line in out)


def _field(label: str, value: str) -> str:
    return f"    {label:<15}: {value}"  # logAttr: "    %-15s: %s"


def _attributes(header: str, attributes: Iterable[KeyValue]) -> list[str]:
    """`logAttributes`: nothing when empty; the prefix grows by what precedes "->" in the header."""
    pairs = list(attributes)
    if not pairs:
        return []
    prefix = "     ->"
    if "->" in header:
        prefix = header.split("->")[0] + prefix
    return [f"{header}:", *(f"{prefix} {kv.key}: {value_to_string(kv.value)}" for kv in pairs)]


def value_to_string(value: AnyValue) -> str:
    """`valueToString`: the type's name and `Value.AsString()`."""
    which = value.WhichOneof("value")
    return f"{_VALUE_TYPES[which]}({_as_string(value)})"


def _as_string(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which == "string_value":
        return str(value.string_value)
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "int_value":
        return str(value.int_value)
    if which == "double_value":
        return go_float(value.double_value)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return _go_json(_as_raw(value))


def _as_raw(value: AnyValue) -> object:
    """pdata's `Value.AsRaw()`: what encoding/json marshals for Map and Slice values."""
    which = value.WhichOneof("value")
    if which == "kvlist_value":
        return {kv.key: _as_raw(kv.value) for kv in value.kvlist_value.values}
    if which == "array_value":
        return [_as_raw(item) for item in value.array_value.values]
    if which == "bytes_value":
        return bytes(value.bytes_value)
    return None if which is None else getattr(value, which)


def _go_json(raw: object) -> str:
    """Go's `json.Marshal`: sorted keys, no spaces, HTML-safe escapes, []byte as base64."""
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return go_float(raw)
    if isinstance(raw, bytes):
        return _go_json(base64.b64encode(raw).decode())
    if isinstance(raw, str):
        text = json.dumps(raw, ensure_ascii=False)
        for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escaped)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if isinstance(raw, list):
        return "[" + ",".join(_go_json(item) for item in raw) + "]"
    assert isinstance(raw, dict)
    return "{" + ",".join(f"{_go_json(key)}:{_go_json(raw[key])}" for key in sorted(raw)) + "}"


def go_float(number: float) -> str:
    """pdata's `float64AsString` (encoding/json's float format): shortest digits, positional unless
    the magnitude is below 1e-6 or at least 1e21, exponents without padding."""
    if math.isnan(number) or math.isinf(number):
        spelled = "NaN" if math.isnan(number) else ("+Inf" if number > 0 else "-Inf")
        return f"json: unsupported value: {spelled}"
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, exponent = repr(number).split("e")
        return f"{mantissa.removesuffix('.0')}e{exponent[0]}{int(exponent[1:]):02d}".replace("e-0", "e-")
    return format(Decimal(repr(number)).normalize(), "f")


def go_time(nanos: int) -> str:
    """pdata's `Timestamp.String()`: Go's `time.Time.String()` of the UTC time, trailing zeros of
    the fraction dropped ("2006-01-02 15:04:05.999999999 -0700 MST")."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    stamp = (datetime(1970, 1, 1) + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")
    if fraction:
        stamp += "." + f"{fraction:09d}".rstrip("0")
    return stamp + " +0000 UTC"
