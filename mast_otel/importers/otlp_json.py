"""OTLP/JSON trace files -> Conversations: traces exported to disk, rebuilt like live ones.

Reads what OpenTelemetry writes when traces go to a file: the collector's `file` exporter and the
SDKs' OTLP file exporters write one ExportTraceServiceRequest as OTLP/JSON per line (ids in hex);
a single request pretty-printed over many lines, or a JSON array of requests, is read too; any of
them may be gzip-compressed (`.gz`, or recognised by its magic bytes). Lines holding other signals
(`resourceLogs`, `resourceMetrics`, which the collector's file exporter may interleave) are skipped.

Spans are grouped by trace id across the whole file, so a trace split over several export batches
becomes one run, and each trace is rebuilt by the same `rebuild` the collector uses. A run keeps
its real trace id: importing the same export again replaces the runs instead of adding them twice.
A malformed line is skipped and reported with its number; the file's other lines still import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from mast_otel.collector.decode import DecodeError, TraceDecoder
from mast_otel.collector.receiver_http import decode_json_request
from mast_otel.importers.base import FileRead, ImportFileError, read_uncompressed, rebuild_traces
from mast_otel.spans import Span

FORMAT = "otlp-json"
_OTHER_SIGNALS = frozenset({"resourceLogs", "resourceMetrics", "resourceProfiles"})


class OtlpJsonReader:
    """The `Reader` for OTLP/JSON trace exports: one run per trace in the file."""

    format_name = FORMAT
    description = "OTLP/JSON trace exports (file exporter JSON lines or one request; .gz too)"
    suffixes = (".json", ".jsonl", ".gz")

    def __init__(self) -> None:
        self._decoder = TraceDecoder()

    def read(self, path: Path) -> FileRead:
        spans: dict[str, Span] = {}  # by span id: a span exported twice is one span
        skipped: list[ImportFileError] = []
        for line, request in _requests(path, _text(path), skipped):
            try:
                decoded = self._decoder.decode(decode_json_request(request))
            except DecodeError as exc:
                skipped.append(ImportFileError(path, f"line {line}: {exc}"))
                continue
            spans.update((span.span_id, span) for span in decoded.spans)
        if not spans:
            problem = "no spans: expected OTLP/JSON with resourceSpans"
            if skipped:
                problem += f" ({len(skipped)} line(s) skipped, the first: {skipped[0].problem})"
            raise ImportFileError(path, problem)
        return FileRead(rebuild_traces(spans.values(), FORMAT, path), tuple(skipped))


def _text(path: Path) -> str:
    try:
        return read_uncompressed(path).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _requests(path: Path, text: str, skipped: list[ImportFileError]) -> Iterator[tuple[int, bytes]]:
    """(line number, one request as OTLP/JSON bytes) for every trace request in the file; in JSON
    lines, a line that is not one is appended to `skipped` and the next line is read."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None  # JSON lines, or broken: read line by line to say which line is wrong
    except RecursionError:
        raise ImportFileError(path, "not valid JSON: nested too deeply") from None
    if isinstance(whole, list):
        for item in whole:
            if _is_traces(path, 1, item):
                yield 1, json.dumps(item).encode()
        return
    if isinstance(whole, dict):
        if _is_traces(path, 1, whole):
            yield 1, text.encode()
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            is_traces = _is_traces(path, number, json.loads(line))
        except ValueError as exc:
            skipped.append(ImportFileError(path, f"line {number}: not valid JSON: {exc}"))
        except RecursionError:
            skipped.append(ImportFileError(path, f"line {number}: not valid JSON: nested too deeply"))
        except ImportFileError as exc:
            skipped.append(exc)
        else:
            if is_traces:
                yield number, line.encode()


def _is_traces(path: Path, line: int, document: object) -> bool:
    if isinstance(document, dict):
        if "resourceSpans" in document:
            return True
        if _OTHER_SIGNALS & document.keys():
            return False
    raise ImportFileError(
        path, f"line {line}: not an OTLP/JSON trace request (expected an object with resourceSpans)"
    )
