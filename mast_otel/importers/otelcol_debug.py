"""The OpenTelemetry Collector's `debug` exporter text -> Conversations: traces printed to a log, rebuilt.

The collector's `debug` exporter (and the `logging` exporter it replaced) prints what it receives
through the collector's own logger. With `verbosity: detailed` every span is printed in full, one
`Span #N` block under its `ResourceSpans #N` and `ScopeSpans #N`: ids, name, kind, times, status,
typed attributes, events and links. This module reads those blocks back, in the format
`exporter/debugexporter/internal/otlptext` writes: attribute values as `Type(value)` (`Str`, `Int`,
`Double`, `Bool`, `Bytes` in base64, `Map` and `Slice` as JSON, `Empty`), times as Go's
`time.Time.String()`. Older spellings (`STRING(...)`, `SPAN_KIND_SERVER`, `InstrumentationLibrary`)
and `Key : value` lines that other releases add are tolerated.

Around the blocks, each log entry's console prefix (time, level, caller), the logger's JSON fields
printed after the text, `docker compose logs` line prefixes and the JSON log encoding are peeled
off; whatever is not a trace printout (metrics and logs printouts, other log lines) is passed over.
Each span becomes an OTLP span decoded by the collector's own `TraceDecoder`, so it is validated
and truncated exactly like live traffic; spans are grouped by trace across the whole file, and each
trace is rebuilt by `rebuild`. A malformed span block is skipped and reported with its line number;
the rest of the file still imports.

What the text cannot carry back: strings are printed raw, so a value's line breaks become lines of
the log. They are read as continuation lines up to the next line that has the shape of the
printout's own structure; a value holding such a line is cut there. Inside `Map` and `Slice` values
(JSON) a Double without a fractional part comes back as an Int, and Bytes as base64 text.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum, auto
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

from mast_otel.collector.decode import TraceDecoder
from mast_otel.importers.base import FileRead, ImportFileError, read_uncompressed, rebuild_traces
from mast_otel.spans import Span

FORMAT = "otelcol-debug"

# --- the log around the printouts ----------------------------------------------------------------

# `docker compose logs` / `up` put "service-1  | " before every line a container writes.
_COMPOSE_PREFIX = re.compile(r"(?P<source>[A-Za-z0-9][\w.-]*) +\| ?")
# The collector's console log encoding: time, level, optional caller, then the message; a
# one-line message is followed by the entry's JSON fields. Copies often turn the tabs into spaces.
_CONSOLE_ENTRY = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+"
    r"(?i:debug|info|warn|warning|error|dpanic|panic|fatal)\s+(?:\S+\.go:\d+\s+)?(?P<message>.*)"
)
_MESSAGE_FIELDS = re.compile(r"(?P<message>.*?)\s+(?P<fields>\{.*\})")
_HEAD_LINES = 200  # the log's framing (compose prefixes, console or JSON entries) is told from these
_JSON_ENTRY_KEYS = frozenset({"level", "ts", "caller", "msg", "logger", "stacktrace"})
# Keys of the per-export summary entry ("Traces"), as opposed to the exporter logger's own context.
_SUMMARY_KEYS = frozenset({"resource spans", "spans", "#spans"})
_SUMMARY_MESSAGES = frozenset({"Traces", "TracesExporter"})
# The context fields the collector gives every component's logger (one or more appear in each entry).
_CONTEXT_KEYS = frozenset(
    {"kind", "data_type", "name", "otelcol.component.id", "otelcol.component.kind", "otelcol.signal"}
)
_OTHER_SIGNAL = re.compile(r"Resource(?:Metrics|Logs?|Profiles) #\d+")
# What `normal` verbosity prints: a resource line, then one line per span (name, trace id, span id).
_NORMAL_RESOURCE = re.compile(r"ResourceTraces #\d+.*")
_NORMAL_SPAN = re.compile(r"\S.* [0-9a-f]{32} [0-9a-f]{16}(?: .*)?")

# --- the printout ---------------------------------------------------------------------------------

_RESOURCE = re.compile(r"ResourceSpans #\d+")
_SCOPE = re.compile(r"(?:ScopeSpans|InstrumentationLibrarySpans) #\d+")
_SCOPE_NAME = re.compile(
    r"(?:InstrumentationScope|InstrumentationLibrary)(?: (?P<name>\S*)(?: (?P<version>.*))?)?"
)
_SPAN = re.compile(r"Span #\d+")
_EVENT = re.compile(r"SpanEvent #\d+")
_LINK = re.compile(r"SpanLink #\d+")
_FIELD = re.compile(r"\s+(?P<label>[A-Za-z][A-Za-z ]*?) *:(?: (?P<value>.*))?")
_NESTED_FIELD = re.compile(r"\s+-> (?P<label>[A-Za-z][A-Za-z ]*?):(?: (?P<value>.*))?")
_NESTED_ATTRIBUTES = re.compile(r"\s+-> Attributes::?")
_ATTRIBUTE = re.compile(
    r"\s*-> (?P<key>.*?): "
    r"(?P<type>(?i:str|string|int|double|bool|map|slice|array|bytes|empty))\((?P<rest>.*)"
)
_TYPES = {
    "str": "Str",
    "string": "Str",
    "int": "Int",
    "double": "Double",
    "bool": "Bool",
    "map": "Map",
    "slice": "Slice",
    "array": "Slice",
    "bytes": "Bytes",
    "empty": "Empty",
}
_INT = re.compile(r"[+-]?\d+")
_UNSUPPORTED_DOUBLE = "json: unsupported value: "  # how pdata prints NaN and infinities
# Go's time.Time.String(): "2006-01-02 15:04:05.999999999 -0700 MST", perhaps a monotonic reading.
_GO_TIME = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(?P<fraction>\d{1,9}))? "
    r"(?P<sign>[+-])(?P<hours>\d\d)(?P<minutes>\d\d)(?: \S+)?(?: m=[+-]\d+\.\d+)?"
)
_EPOCH = datetime(1970, 1, 1)
_KINDS = {
    "unspecified": PbSpan.SPAN_KIND_UNSPECIFIED,
    "internal": PbSpan.SPAN_KIND_INTERNAL,
    "server": PbSpan.SPAN_KIND_SERVER,
    "client": PbSpan.SPAN_KIND_CLIENT,
    "producer": PbSpan.SPAN_KIND_PRODUCER,
    "consumer": PbSpan.SPAN_KIND_CONSUMER,
}
_STATUSES = {
    "unset": PbStatus.STATUS_CODE_UNSET,
    "ok": PbStatus.STATUS_CODE_OK,
    "error": PbStatus.STATUS_CODE_ERROR,
}


class OtelcolDebugReader:
    """The `Reader` for the collector `debug` exporter's detailed text: one run per trace in the file."""

    format_name = FORMAT
    description = "OpenTelemetry Collector debug/logging exporter output (verbosity: detailed; .gz too)"
    suffixes = (".log", ".txt", ".gz")

    def __init__(self) -> None:
        self._decoder = TraceDecoder()

    def read(self, path: Path) -> FileRead:
        text = read_debug_text(read_uncompressed(path), self._decoder)
        skipped = tuple(ImportFileError(path, f"line {line}: {problem}") for line, problem in text.problems)
        # A span printed twice (a client retried its export) counts once.
        spans = {(span.trace_id, span.span_id): span for span in text.spans}
        if not spans:
            raise ImportFileError(path, _why_no_spans(text, skipped))
        return FileRead(rebuild_traces(spans.values(), FORMAT, path), skipped)


@dataclass(frozen=True, slots=True)
class DebugText:
    """What a debug exporter log holds: the spans printed in full, in the order printed; what could
    not be read, as (line number, why); and the signs of spans printed without their detail."""

    spans: tuple[Span, ...]
    problems: tuple[tuple[int, str], ...]
    announced_spans: int  # spans the exporter's per-export summary entries counted
    summary_lines: int  # lines `normal` verbosity prints in place of span blocks


def read_debug_text(content: bytes, decoder: TraceDecoder | None = None) -> DebugText:
    """The spans in a log holding the debug exporter's output (bytes, as read from the file)."""
    evidence = _Evidence()
    printouts = _Printouts(decoder or TraceDecoder())
    for printout in _trace_printouts(_log_lines(content), evidence):
        printouts.read(printout)
    return DebugText(
        tuple(printouts.spans), tuple(printouts.problems), evidence.announced_spans, evidence.summary_lines
    )


def _why_no_spans(text: DebugText, skipped: tuple[ImportFileError, ...]) -> str:
    if skipped:
        return f"no spans could be read ({len(skipped)} skipped, the first: {skipped[0].problem})"
    if text.announced_spans or text.summary_lines:
        announced = f" of {text.announced_spans} span(s)" if text.announced_spans else ""
        return (
            f"only summaries{announced}: the debug exporter ran at `normal` or `basic` verbosity, which "
            "leaves out the attributes, parents, times and events a run is rebuilt from; set "
            "`verbosity: detailed` on the exporter"
        )
    return "no spans: expected the collector debug exporter's text at `verbosity: detailed`"


# --- stage 1: the physical lines, with the log's framing peeled off -------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    number: int  # 1-based, in the file
    text: str  # without the log's framing and trailing whitespace
    original: str  # as written, less a docker compose prefix: what a continuation line adds to a value
    source: str = ""  # the docker compose service that wrote it, when the file has such prefixes
    entry: Mapping[str, object] | None = None  # set on the first line of a log entry: its fields
    ends_entry: bool = False  # the last line of a log entry whose end is known (JSON encoding)
    undecodable: bool = False  # not UTF-8: `text` holds a lossy rendering


def _log_lines(content: bytes) -> Iterator[_Line]:
    """The file's lines, each entry's first line marked. Which framing the log uses is decided from
    its first lines, once: a line quoting another program's log inside a printed value must not be
    taken for the collector's own framing."""
    decoded = [_decoded(raw, first=number == 0) for number, raw in enumerate(content.split(b"\n"))]
    head = [text for text, _ in decoded[:_HEAD_LINES]]
    compose = any(
        (prefix := _COMPOSE_PREFIX.match(text)) and _is_entry(text[prefix.end() :]) for text in head
    )
    if compose:
        head = [text[prefix.end() :] if (prefix := _COMPOSE_PREFIX.match(text)) else text for text in head]
    json_encoded = not any(_CONSOLE_ENTRY.fullmatch(text) for text in head) and any(
        _json_entry(text) is not None for text in head
    )
    for number, (text, undecodable) in enumerate(decoded, start=1):
        source = ""
        if compose and (prefix := _COMPOSE_PREFIX.match(text)):
            source, text = prefix["source"], text[prefix.end() :]
        if json_encoded and (entry := _json_entry(text)) is not None:
            yield from _json_entry_lines(number, entry, source)
        elif not json_encoded and (console := _CONSOLE_ENTRY.fullmatch(text)):
            message, fields = _split_fields(console["message"].rstrip())
            yield _Line(number, message, text, source, fields, undecodable=undecodable)
        else:
            yield _Line(number, text.rstrip(), text, source, undecodable=undecodable)


def _decoded(raw: bytes, *, first: bool) -> tuple[str, bool]:
    """A line's text (a byte order mark and a carriage return dropped), and whether it was not UTF-8
    (the text is then a lossy rendering)."""
    try:
        return raw.decode("utf-8-sig" if first else "utf-8").rstrip("\r"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace").rstrip("\r"), True


def _is_entry(text: str) -> bool:
    return bool(_CONSOLE_ENTRY.fullmatch(text)) or _json_entry(text) is not None


def _json_entry(text: str) -> dict[str, object] | None:
    """The fields of a log entry in the JSON encoding, or None when the line is not one."""
    if not text.startswith("{"):
        return None
    try:
        entry = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(entry, dict) and isinstance(entry.get("msg"), str) and "level" in entry:
        return entry
    return None


def _json_entry_lines(number: int, entry: dict[str, object], source: str) -> Iterator[_Line]:
    message = str(entry["msg"]).split("\n")
    fields = {key: value for key, value in entry.items() if key not in _JSON_ENTRY_KEYS}
    last = len(message) - 1
    for index, text in enumerate(message):
        yield _Line(
            number, text.rstrip(), text, source, fields if index == 0 else None, ends_entry=index == last
        )


def _split_fields(message: str) -> tuple[str, Mapping[str, object]]:
    """A console entry's message and the JSON fields printed after it on the same line."""
    match = _MESSAGE_FIELDS.fullmatch(message)
    if match:
        fields = _json_object(match["fields"])
        if fields is not None:
            return match["message"], fields
    return message, {}


def _json_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# --- stage 2: the trace printouts among the log's entries -----------------------------------------


@dataclass
class _Evidence:
    """What the log says about spans it did not print in full."""

    announced_spans: int = 0  # counted by the exporter's per-export summary entries
    summary_lines: int = 0  # lines `normal` verbosity prints instead of span blocks


@dataclass(frozen=True, slots=True)
class _Printout:
    """The lines one export's traces were printed on; `cut_off` when the log ends (or moves on)
    before the printout does, so its last span may be incomplete."""

    lines: tuple[_Line, ...]
    cut_off: bool


def _trace_printouts(lines: Iterator[_Line], evidence: _Evidence) -> Iterator[_Printout]:
    """Each trace printout, whether framed by log entries or bare text; everything else is passed over.

    A framed printout ends with the line the logger prints the exporter's context fields on. When
    an earlier summary entry named those fields the end is known for certain, and a line that only
    looks like a log entry (a tool's output quoting a log, say) stays inside the printout; one of the
    collector's own entries before that line means the printout was cut off.
    """
    trailers: dict[str, Mapping[str, object]] = {}  # per source: the context fields that end a printout
    current: list[_Line] = []
    source = ""
    framed = False
    for line in lines:
        if current and line.source != source:
            continue  # another container's line, interleaved by docker compose
        if current:
            trailer = trailers.get(source) if framed else None
            if framed and trailer and _is_trailer(line.text, trailer):
                yield _Printout(tuple(current), cut_off=False)
                current = []
                continue
            # With the context known, only an entry carrying the same context keys (another of the
            # collector's own entries) ends the printout early; any other stays a line of a value.
            if line.entry is not None and (not trailer or trailer.keys() <= line.entry.keys()):
                yield _Printout(tuple(current), cut_off=framed and bool(trailer))
                current = []
            elif (framed and not trailer and _looks_like_trailer(line.text)) or (
                not framed and _OTHER_SIGNAL.fullmatch(line.text)
            ):
                yield _Printout(tuple(current), cut_off=False)
                current = []
                continue
            else:
                # A line shaped like a log entry that does not end the printout is part of a value.
                current.append(
                    line if line.entry is None else _Line(line.number, line.original, line.original)
                )
                if line.ends_entry:
                    yield _Printout(tuple(current), cut_off=False)
                    current = []
                continue
        if line.entry is not None and line.text in _SUMMARY_MESSAGES:
            spans = line.entry.get("spans", line.entry.get("#spans"))
            evidence.announced_spans += spans if isinstance(spans, int) else 0
            trailers[line.source] = {k: v for k, v in line.entry.items() if k not in _SUMMARY_KEYS}
        elif _RESOURCE.fullmatch(line.text):
            current, source, framed = [line], line.source, line.entry is not None
            if line.ends_entry:
                yield _Printout(tuple(current), cut_off=False)
                current = []
        elif _NORMAL_RESOURCE.fullmatch(line.text) or _NORMAL_SPAN.fullmatch(line.text):
            evidence.summary_lines += 1
    if current:
        yield _Printout(tuple(current), cut_off=framed and bool(trailers.get(source)))


def _is_trailer(text: str, context: Mapping[str, object]) -> bool:
    stripped = text.strip()
    return stripped.startswith("{") and _json_object(stripped) == context


def _looks_like_trailer(text: str) -> bool:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return False
    fields = _json_object(stripped)
    return fields is not None and bool(_CONTEXT_KEYS & fields.keys())


# --- stage 3: span blocks -> OTLP spans -> typed spans --------------------------------------------


class _Malformed(ValueError):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line = line


@dataclass
class _Text:
    """A printed value: its first line and the continuation lines its line breaks made."""

    line: int
    parts: list[str]

    @property
    def text(self) -> str:
        parts = list(self.parts)
        while len(parts) > 1 and not parts[-1]:
            parts.pop()  # the blank line the logger ends an entry with
        return "\n".join(parts)


@dataclass
class _Attribute(_Text):
    key: str = ""
    type: str = "Str"


@dataclass
class _Record:
    """A span, event or link as printed: its `Key : value` lines and its attributes."""

    line: int
    fields: dict[str, _Text] = field(default_factory=dict)
    attributes: list[_Attribute] = field(default_factory=list)
    events: list[_Record] = field(default_factory=list)
    links: list[_Record] = field(default_factory=list)
    problem: _Malformed | None = None


@dataclass
class _Resource:
    attributes: list[_Attribute] = field(default_factory=list)
    converted: list[KeyValue] | None = None


@dataclass
class _Scope:
    name: str = ""
    version: str = ""
    attributes: list[_Attribute] = field(default_factory=list)
    converted: list[KeyValue] | None = None


class _Section(Enum):
    RESOURCE = auto()
    RESOURCE_ATTRIBUTES = auto()
    ENTITY_REFS = auto()
    SCOPE = auto()
    SCOPE_ATTRIBUTES = auto()
    SPAN = auto()
    SPAN_ATTRIBUTES = auto()
    EVENT = auto()
    EVENT_ATTRIBUTES = auto()
    LINK = auto()
    LINK_ATTRIBUTES = auto()


_ATTRIBUTE_SECTIONS = frozenset(
    {
        _Section.RESOURCE_ATTRIBUTES,
        _Section.SCOPE_ATTRIBUTES,
        _Section.SPAN_ATTRIBUTES,
        _Section.EVENT_ATTRIBUTES,
        _Section.LINK_ATTRIBUTES,
    }
)


class _Printouts:
    """Reads trace printouts, one line at a time; collects the spans and the problems (line, why)."""

    def __init__(self, decoder: TraceDecoder) -> None:
        self._decoder = decoder
        self.spans: list[Span] = []
        self.problems: list[tuple[int, str]] = []
        self._resource = _Resource()
        self._scope = _Scope()
        self._span: _Record | None = None
        self._section = _Section.RESOURCE
        self._open: _Text | None = None  # the value the next unstructured line continues

    def read(self, printout: _Printout) -> None:
        self._resource, self._scope, self._span, self._open = _Resource(), _Scope(), None, None
        self._section = _Section.RESOURCE
        lines = printout.lines
        for index, line in enumerate(lines):
            following = lines[index + 1].text if index + 1 < len(lines) else ""
            if line.undecodable:
                self._problem(line.number, "not UTF-8 text")
                continue
            if not self._structure(line, following) and self._open is not None:
                self._open.parts.append(line.original)
        if self._span is not None and printout.cut_off:
            self._span.problem = self._span.problem or _Malformed(
                self._span.line, "cut off: the log ends (or moves on) before this span's printout does"
            )
        self._finish_span()

    def _problem(self, line: int, problem: str) -> None:
        """A problem in a span block costs the span; elsewhere, only the line."""
        if self._span is not None:
            self._span.problem = self._span.problem or _Malformed(line, problem)
        else:
            self.problems.append((line, f"{problem} (line left out)"))

    def _structure(self, line: _Line, following: str) -> bool:
        """Take `line` as part of the printout's structure; False when it has none (a continuation).
        The printout's headers start at the margin; its `Key : value` and `-> ...` lines are indented,
        and a line that starts a value leaves it open for the continuation lines that may follow."""
        if not line.text:
            return False
        if line.text[0].isspace():
            return self._indented(line, following)
        if self._header(line, following):
            self._open = None
            return True
        return False

    def _header(self, line: _Line, following: str) -> bool:
        text, number, section = line.text, line.number, self._section
        if _RESOURCE.fullmatch(text):
            self._finish_span()
            self._resource, self._scope, self._section = _Resource(), _Scope(), _Section.RESOURCE
        elif _SCOPE.fullmatch(text):
            self._finish_span()
            self._scope, self._section = _Scope(), _Section.SCOPE
        elif text.startswith(("Resource SchemaURL:", "ScopeSpans SchemaURL:")):
            pass
        elif text in ("Resource attributes:", "Resource labels:") and _ATTRIBUTE.fullmatch(following):
            self._section = _Section.RESOURCE_ATTRIBUTES
        elif text == "Resource entity refs:":
            self._section = _Section.ENTITY_REFS
        elif text == "InstrumentationScope attributes:" and _ATTRIBUTE.fullmatch(following):
            self._section = _Section.SCOPE_ATTRIBUTES
        elif section is _Section.SCOPE and (scope := _SCOPE_NAME.fullmatch(text)):
            self._scope.name, self._scope.version = scope["name"] or "", scope["version"] or ""
        elif _SPAN.fullmatch(text) and _FIELD.fullmatch(following):
            self._finish_span()
            self._span, self._section = _Record(number), _Section.SPAN
        elif self._span is None:
            return False
        elif text == "Attributes:" and _ATTRIBUTE.fullmatch(following):
            self._section = _Section.SPAN_ATTRIBUTES
        elif text == "Events:" and _EVENT.fullmatch(following):
            self._section = _Section.EVENT
        elif text == "Links:" and _LINK.fullmatch(following):
            self._section = _Section.LINK
        elif _EVENT.fullmatch(text) and _NESTED_FIELD.fullmatch(following):
            self._span.events.append(_Record(number))
            self._section = _Section.EVENT
        elif _LINK.fullmatch(text) and _NESTED_FIELD.fullmatch(following):
            self._span.links.append(_Record(number))
            self._section = _Section.LINK
        else:
            return False
        return True

    def _indented(self, line: _Line, following: str) -> bool:
        original, number, section = line.original, line.number, self._section
        if section in _ATTRIBUTE_SECTIONS and (attribute := _ATTRIBUTE.fullmatch(original)):
            self._open = _Attribute(
                number, [attribute["rest"]], attribute["key"], _TYPES[attribute["type"].lower()]
            )
            self._add_attribute(self._open)
            return True
        if section is _Section.ENTITY_REFS and line.text.lstrip().startswith("->"):
            self._open = None
            return True
        if self._span is None:
            return False
        if (span_field := _FIELD.fullmatch(original)) and (
            section is _Section.SPAN or span_field["label"].startswith("Dropped")
        ):
            # Some releases print the span's dropped counts after its events and links.
            self._open = self._span.fields[span_field["label"]] = _Text(number, [span_field["value"] or ""])
            return True
        if section not in (_Section.EVENT, _Section.LINK):
            return False
        if _NESTED_ATTRIBUTES.fullmatch(line.text) and _ATTRIBUTE.fullmatch(following):
            self._section = (
                _Section.EVENT_ATTRIBUTES if section is _Section.EVENT else _Section.LINK_ATTRIBUTES
            )
            self._open = None
            return True
        record = self._nested_record()
        if record is not None and (nested := _NESTED_FIELD.fullmatch(original)):
            self._open = record.fields[nested["label"]] = _Text(number, [nested["value"] or ""])
            return True
        return False

    def _nested_record(self) -> _Record | None:
        if self._span is None:
            return None
        records = (
            self._span.events
            if self._section in (_Section.EVENT, _Section.EVENT_ATTRIBUTES)
            else self._span.links
        )
        return records[-1] if records else None

    def _add_attribute(self, attribute: _Attribute) -> None:
        if self._section is _Section.RESOURCE_ATTRIBUTES:
            self._resource.attributes.append(attribute)
        elif self._section is _Section.SCOPE_ATTRIBUTES:
            self._scope.attributes.append(attribute)
        elif self._section is _Section.SPAN_ATTRIBUTES and self._span is not None:
            self._span.attributes.append(attribute)
        elif (record := self._nested_record()) is not None:
            record.attributes.append(attribute)

    def _finish_span(self) -> None:
        draft, self._span, self._open = self._span, None, None
        if draft is None:
            return
        name = draft.fields["Name"].text if "Name" in draft.fields else ""
        try:
            if draft.problem is not None:
                raise draft.problem
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(self._shared_attributes(self._resource))
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = self._scope.name
            scope_spans.scope.version = self._scope.version
            scope_spans.scope.attributes.extend(self._shared_attributes(self._scope))
            scope_spans.spans.append(_pb_span(draft))
        except _Malformed as exc:
            self.problems.append((exc.line, f"span {name!r} skipped: {exc}"))
            return
        decoded = self._decoder.decode(request)
        if decoded.rejected:
            self.problems.append((draft.line, f"span {name!r} skipped: {decoded.reasons[0]}"))
        self.spans.extend(decoded.spans)

    def _shared_attributes(self, owner: _Resource | _Scope) -> list[KeyValue]:
        """A resource's or scope's attributes, converted once for all its spans; a malformed one is
        reported once and left out."""
        if owner.converted is None:
            owner.converted = []
            for attribute in owner.attributes:
                try:
                    owner.converted.append(_key_value(attribute))
                except _Malformed as exc:
                    self.problems.append((exc.line, f"attribute {attribute.key!r} left out: {exc}"))
        return owner.converted


def _pb_span(draft: _Record) -> PbSpan:
    """The OTLP span a printed span block describes; `_Malformed` when it can't be one."""
    pb = PbSpan(
        trace_id=_id(draft, "Trace ID"),
        span_id=_id(draft, "ID"),
        parent_span_id=_id(draft, "Parent ID", required=False),
        name=draft.fields["Name"].text if "Name" in draft.fields else "",
        kind=_KINDS.get(
            _text(draft, "Kind").lower().removeprefix("span_kind_"), PbSpan.SPAN_KIND_UNSPECIFIED
        ),
        trace_state=_text(draft, "TraceState"),
        start_time_unix_nano=_time(draft, "Start time"),
        dropped_attributes_count=_count(draft, "DroppedAttributesCount"),
        dropped_events_count=_count(draft, "DroppedEventsCount"),
        dropped_links_count=_count(draft, "DroppedLinksCount"),
    )
    pb.end_time_unix_nano = _time(draft, "End time", required=False) or pb.start_time_unix_nano
    pb.status.code = _STATUSES.get(
        _text(draft, "Status code").lower().removeprefix("status_code_"), PbStatus.STATUS_CODE_UNSET
    )
    pb.status.message = draft.fields["Status message"].text if "Status message" in draft.fields else ""
    pb.attributes.extend(_key_value(attribute) for attribute in draft.attributes)
    for event in draft.events:
        pb_event = pb.events.add(
            name=event.fields["Name"].text if "Name" in event.fields else "",
            time_unix_nano=_time(event, "Timestamp", required=False),
            dropped_attributes_count=_count(event, "DroppedAttributesCount"),
        )
        pb_event.attributes.extend(_key_value(attribute) for attribute in event.attributes)
    for link in draft.links:
        pb_link = pb.links.add(
            trace_id=_id(link, "Trace ID", required=False),
            span_id=_id(link, "ID", required=False),
            trace_state=_text(link, "TraceState"),
            dropped_attributes_count=_count(link, "DroppedAttributesCount"),
        )
        pb_link.attributes.extend(_key_value(attribute) for attribute in link.attributes)
    return pb


def _text(record: _Record, label: str) -> str:
    value = record.fields.get(label)
    return value.text.strip() if value is not None else ""


def _id(record: _Record, label: str, *, required: bool = True) -> bytes:
    value = record.fields.get(label)
    if value is None:
        if required:
            raise _Malformed(record.line, f"no {label!r} line")
        return b""
    try:
        return bytes.fromhex(value.text.strip())
    except ValueError:
        raise _Malformed(value.line, f"{label} {value.text.strip()[:40]!r} is not hex") from None


def _time(record: _Record, label: str, *, required: bool = True) -> int:
    """Nanoseconds since the epoch from Go's `time.Time.String()`, in whatever zone it was printed."""
    value = record.fields.get(label)
    if value is None:
        if required:
            raise _Malformed(record.line, f"no {label!r} line")
        return 0
    match = _GO_TIME.fullmatch(value.text.strip())
    try:
        if match is None:
            raise ValueError
        local = datetime.fromisoformat(match["date"])
    except ValueError:
        raise _Malformed(value.line, f"{label} {value.text.strip()[:60]!r} is not a time") from None
    offset = timedelta(hours=int(match["hours"]), minutes=int(match["minutes"]))
    utc = local - offset if match["sign"] == "+" else local + offset
    nanos = ((utc - _EPOCH) // timedelta(seconds=1)) * 1_000_000_000 + int(
        (match["fraction"] or "").ljust(9, "0")
    )
    if nanos < 0:
        raise _Malformed(value.line, f"{label} {value.text.strip()!r} is before 1970")
    return nanos


def _count(record: _Record, label: str) -> int:
    text = _text(record, label)
    return int(text) if text.isdigit() and int(text) < 2**32 else 0


def _key_value(attribute: _Attribute) -> KeyValue:
    """The attribute as OTLP; `_Malformed` when its printed value is cut off or not of its type."""
    last = max((i for i, part in enumerate(attribute.parts) if part.rstrip().endswith(")")), default=None)
    if last is None:
        raise _Malformed(
            attribute.line, f"the value of {attribute.key!r} is cut off (no closing parenthesis)"
        )
    # The printer closes the value with ")"; lines after the last line ending in one are not part of it.
    printed = "\n".join(attribute.parts[: last + 1]).rstrip()[:-1]
    try:
        value = _any_value(attribute.type, printed)
    except (ValueError, RecursionError):
        article = "an" if attribute.type == "Int" else "a"
        raise _Malformed(
            attribute.line, f"{attribute.key!r}: {printed[:60]!r} is not {article} {attribute.type}"
        ) from None
    return KeyValue(key=attribute.key, value=value)


def _any_value(type_name: str, printed: str) -> AnyValue:
    """The value pdata's `Value.AsString()` printed, as OTLP."""
    if type_name == "Str":
        return AnyValue(string_value=printed)
    if type_name == "Int":
        if not _INT.fullmatch(printed) or not -(2**63) <= int(printed) < 2**63:
            raise ValueError(printed)
        return AnyValue(int_value=int(printed))
    if type_name == "Double":
        return AnyValue(double_value=float(printed.removeprefix(_UNSUPPORTED_DOUBLE)))
    if type_name == "Bool":
        if printed not in ("true", "false"):
            raise ValueError(printed)
        return AnyValue(bool_value=printed == "true")
    if type_name == "Bytes":
        try:
            return AnyValue(bytes_value=base64.b64decode(printed, validate=True))
        except binascii.Error as exc:
            raise ValueError(printed) from exc
    if type_name == "Empty":
        return AnyValue()
    try:
        decoded = json.loads(printed)
    except ValueError:
        # Not JSON: a release that printed maps and slices another way. Keep what was printed.
        return AnyValue(string_value=printed)
    if not isinstance(decoded, dict if type_name == "Map" else list):
        raise ValueError(printed)
    return _json_value(decoded)


def _json_value(value: object) -> AnyValue:
    """A JSON value (pdata's `AsRaw()` marshalled) as OTLP."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value) if -(2**63) <= value < 2**63 else AnyValue(double_value=float(value))
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    out = AnyValue()
    if isinstance(value, list):
        out.array_value.SetInParent()
        for item in value:
            out.array_value.values.append(_json_value(item))
    elif isinstance(value, dict):
        out.kvlist_value.SetInParent()
        for key, item in value.items():
            out.kvlist_value.values.append(KeyValue(key=key, value=_json_value(item)))
    return out
