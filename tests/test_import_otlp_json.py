"""`mast-otel import otlp-json`: OTLP/JSON trace exports -> stored runs, whatever way they were written.

The fixture is what the collector's `file` exporter writes for two runs of an agent instrumented with
openinference-instrumentation-openai 0.1.66 (real `openai` client, scripted stub): one
ExportTraceServiceRequest per line, ids in hex, the first run's spans split over both lines.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.conversation.model import TurnKind
from mast_otel.importers import READERS, ImportFileError, run_import
from mast_otel.importers.otlp_json import OtlpJsonReader
from mast_otel.store.clickhouse import ClickHouseStore

FIXTURE = Path(__file__).parent / "fixtures" / "otlp_json" / "openinference_two_runs.jsonl"
FIRST_RUN = "c1e72c6d9cf997eb4b1f6703b09ac7df"
SECOND_RUN = "0fc6df654aa96c2a2a6bab8c8c5a39b3"


def lines() -> list[str]:
    return FIXTURE.read_text().splitlines()


def test_the_file_exporter_output_becomes_one_run_per_trace() -> None:
    runs = {c.trace_id: c for c in OtlpJsonReader().read(FIXTURE).conversations}
    assert sorted(runs) == sorted([FIRST_RUN, SECOND_RUN])
    first = runs[FIRST_RUN]
    assert first.span_count == 4  # two model calls, a tool, the agent: from both lines of the file
    assert [(t.kind, t.agent) for t in first.turns] == [
        (TurnKind.USER, "user"),
        (TurnKind.SYSTEM, "system"),
        (TurnKind.TOOL_CALL, "triage"),
        (TurnKind.AGENT_MESSAGE, "triage"),
    ]
    tool = first.turns[2].tool
    assert tool is not None
    assert (tool.name, tool.call_id, json.loads(tool.arguments), tool.result) == (
        "get_pods",
        "call_1",
        {"ns": "shop"},
        "checkout: CrashLoopBackOff",
    )
    assert first.turns[3].content == "Checkout is crash-looping after the 14:02 deploy."
    assert (first.root_agent, first.task, first.models) == (
        "triage",
        "Why is checkout failing?",
        ("stub-model",),
    )
    assert (first.input_tokens, first.output_tokens) == (37, 17)
    assert first.attributes["mast.import.format"] == "otlp-json"
    assert runs[SECOND_RUN].turns[-1].content == "Checkout is fine."


def test_gzip_pretty_printed_and_array_forms_read_alike(tmp_path: Path) -> None:
    expected = {c.trace_id: c.turns for c in OtlpJsonReader().read(FIXTURE).conversations}
    compressed = tmp_path / "traces.jsonl.gz"
    compressed.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    array = tmp_path / "array.json"
    array.write_text(json.dumps([json.loads(line) for line in lines()], indent=2))
    for path in (compressed, array):
        assert {c.trace_id: c.turns for c in OtlpJsonReader().read(path).conversations} == expected
    pretty = tmp_path / "pretty.json"  # one request over many lines: the second run's spans only
    pretty.write_text(json.dumps(json.loads(lines()[1]), indent=2))
    assert {c.trace_id for c in OtlpJsonReader().read(pretty).conversations} == {FIRST_RUN, SECOND_RUN}


def test_other_signals_in_the_same_file_are_skipped(tmp_path: Path) -> None:
    mixed = tmp_path / "all-signals.jsonl"
    logs = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": "hi"}}]}]}]})
    mixed.write_text("\n".join([logs, *lines(), "", json.dumps({"resourceMetrics": []})]) + "\n")
    read = OtlpJsonReader().read(mixed)
    assert len(read.conversations) == 2 and read.skipped == ()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "no spans"),
        (b"\x1f\x8b not really gzip", "not a readable gzip file"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b'{"resourceSpans": []}\n{"hello": 1}\n', "1 line(s) skipped, the first: line 2: not an OTLP/JSON"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            "line 1: traceId 'zz' is not hex",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_line(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ImportFileError) as caught:
        OtlpJsonReader().read(path)
    assert problem in str(caught.value) and str(path) in str(caught.value)


def test_a_bad_line_is_skipped_and_named_and_the_rest_of_the_file_is_read(tmp_path: Path) -> None:
    first, second = lines()
    path = tmp_path / "partly-bad.jsonl"
    path.write_text("\n".join([first, "{oops", '{"hello": 1}', second]) + "\n")
    read = OtlpJsonReader().read(path)
    assert {c.trace_id for c in read.conversations} == {FIRST_RUN, SECOND_RUN}
    assert [str(error) for error in read.skipped] == [
        f"{path}: line 2: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1)",
        f"{path}: line 3: not an OTLP/JSON trace request (expected an object with resourceSpans)",
    ]


def test_the_runner_stores_runs_reports_bad_files_and_replaces_on_reimport(
    tmp_path: Path, store: ClickHouseStore
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    partly_bad = tmp_path / "partly-bad.jsonl"
    partly_bad.write_text(lines()[0] + "\nnot json either\n")
    report = run_import([FIXTURE, bad, partly_bad], READERS["otlp-json"](), store, RuleAnnotator())
    [error] = report.errors
    [skipped] = report.skipped
    assert str(error).startswith(f"{bad}: no spans: expected OTLP/JSON with resourceSpans (1 line(s) skipped")
    assert str(skipped).startswith(f"{partly_bad}: line 2: not valid JSON: Expecting value")
    assert report.stored == 2 + 1  # the partly bad file's good line holds one run's spans
    run_import([FIXTURE], OtlpJsonReader(), store, RuleAnnotator())
    rows = store.query(
        "SELECT TraceId, RootAgent, TurnCount FROM mast_conversations FINAL ORDER BY TraceId"
    ).rows
    assert [tuple(row) for row in rows] == sorted([(FIRST_RUN, "triage", 4), (SECOND_RUN, "triage", 4)])


def test_the_import_command_reads_otlp_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "import", "otlp-json", str(FIXTURE), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "would store 2 run(s)" in result.stdout
    assert FIRST_RUN in result.stdout and SECOND_RUN in result.stdout
