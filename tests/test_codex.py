"""Codex CLI -> stored conversations, from its rollout files and from its live OTLP logs.

The real Codex CLI (the npm release `scripts/test-deps.sh` pins, see `codex_cli.py`) runs offline
against a scripted Responses API stub on loopback (`codex_model_stub.py`): the model reasons, says
it will run a command, calls `exec_command`, reads what Codex sends back and answers; the session
is resumed for a second prompt, in a second Codex process. Codex writes its rollout and exports
its log events to a real in-process collector, the first turn over OTLP/gRPC, the second over
OTLP/HTTP with JSON bodies. The rollout is imported with `run_import` into the `store` fixture; the
logs are stored by the collector. Each stored conversation is read back and compared, turn by
turn, with what the stub scripted and what Codex sent back to the model.

`tests/fixtures/codex/` holds the same session as produced by Codex 0.171.0 (strings over 300
characters trimmed): its rollout and the two OTLP/JSON log exports it sent, so the reader and the
log mapping are also tested without the binary.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from codex_cli import MODEL, CodexHome, OtelExport, require_codex
from codex_model_stub import ModelTurn, ResponsesStub, function_call, message, reasoning
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.decode import TraceDecoder
from mast_otel.collector.encode import any_value
from mast_otel.collector.logs import translate
from mast_otel.collector.pipeline import PipelineConfig
from mast_otel.collector.receiver_http import parse_otlp_json
from mast_otel.collector.service import Collector
from mast_otel.conversation.codex import RolloutError, rollout_conversation, session_trace_id
from mast_otel.conversation.model import Conversation, TurnKind
from mast_otel.conversation.rebuild import rebuild
from mast_otel.importers import READERS, run_import
from mast_otel.importers.codex import CodexRolloutReader
from mast_otel.spans import Span

FIXTURES = Path(__file__).with_name("fixtures") / "codex"
FIXTURE_ROLLOUT = FIXTURES / "rollout-two-turns.jsonl"
FIXTURE_LOGS = FIXTURES / "otlp-logs-two-turns.jsonl"
LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

PROMPTS = ("Say hello using the shell.", "Now list missing-dir.")
THOUGHT = "The user wants a greeting from the shell; echo prints one."
COMMENTARY = "Running echo."
ANSWERS = ("The command printed hello.", "There is no directory called missing-dir.")
ECHO, LS = {"cmd": "echo hello"}, {"cmd": "ls missing-dir"}
SCRIPT = (
    ModelTurn(
        (
            reasoning("I should run a command first.", THOUGHT),
            message(COMMENTARY, "commentary"),
            function_call("call_echo", "exec_command", ECHO),
        ),
        input_tokens=120,
        output_tokens=30,
    ),
    ModelTurn((message(ANSWERS[0]),), input_tokens=150, output_tokens=10),
    ModelTurn((function_call("call_ls", "exec_command", LS),), input_tokens=200, output_tokens=15),
    ModelTurn((message(ANSWERS[1]),), input_tokens=230, output_tokens=12),
)
TOKENS = (sum(t.input_tokens for t in SCRIPT), sum(t.output_tokens for t in SCRIPT))


@dataclass(frozen=True)
class Step:
    """A turn as both sources must tell it: who did what, with which tool, arguments and result."""

    kind: str
    agent: str
    content: str = ""
    tool: str = ""
    arguments: object = None
    result: str | None = None


def expected_steps(results: tuple[str, str], *, with_model_thoughts: bool) -> list[Step]:
    """The session as scripted; rollouts also hold the reasoning and the commentary message."""
    thoughts = [Step("reasoning", "codex", THOUGHT), Step("agent_message", "codex", COMMENTARY)]
    return [
        Step("user", "user", PROMPTS[0]),
        *(thoughts if with_model_thoughts else []),
        Step("tool_call", "codex", tool="exec_command", arguments=ECHO, result=results[0]),
        Step("agent_message", "codex", ANSWERS[0]),
        Step("user", "user", PROMPTS[1]),
        Step("tool_call", "codex", tool="exec_command", arguments=LS, result=results[1]),
        Step("agent_message", "codex", ANSWERS[1]),
    ]


@dataclass(frozen=True)
class Stored:
    trace_id: str
    conversation_id: str
    service: str
    root_agent: str
    model: str
    task: str
    tokens: tuple[int, int]
    tool_calls: int
    turns: list[Step]
    system_turns: list[str]
    turn_models: list[str]


def read_stored(store: Any, trace_id: str) -> Stored:
    """The run as stored, read back with SQL (FINAL: the latest version only)."""
    rows = store.query(
        "SELECT TraceId, ConversationId, ServiceName, RootAgent, Model, Task, InputTokens, OutputTokens,"
        " ToolCallCount, Turns.Kind, Turns.Agent, Turns.Content, Turns.ToolName, Turns.ToolArguments,"
        " Turns.ToolResult, Turns.Model FROM mast_conversations FINAL WHERE TraceId = {t:String}",
        {"t": trace_id},
    ).rows
    assert len(rows) == 1, f"expected one run for {trace_id}, found {len(rows)}"
    (trace, conversation, service, root, model, task, tokens_in, tokens_out, tools, *turns) = rows[0]
    steps, system, models = [], [], []
    for kind, agent, content, tool, arguments, result, turn_model in zip(*turns, strict=True):
        if kind == "system":
            system.append(content)
            continue
        models.append(turn_model)
        if kind == "tool_call":
            steps.append(Step(kind, agent, tool=tool, arguments=json.loads(arguments), result=result))
        else:
            steps.append(Step(kind, agent, content))
    return Stored(
        trace, conversation, service, root, model, task, (tokens_in, tokens_out), tools, steps, system, models
    )


def steps_of(conversation: Conversation) -> list[Step]:
    steps = []
    for turn in conversation.turns:
        if turn.kind is TurnKind.SYSTEM:
            continue
        if turn.tool is not None:
            arguments = json.loads(turn.tool.arguments)
            steps.append(
                Step(
                    "tool_call", turn.agent, tool=turn.tool.name, arguments=arguments, result=turn.tool.result
                )
            )
        else:
            steps.append(Step(turn.kind.value, turn.agent, turn.content))
    return steps


def tool_outputs_sent(stub: ResponsesStub) -> dict[str, str]:
    """What Codex sent the model as each tool call's output: the truth a stored result must match."""
    return {
        item["call_id"]: item["output"]
        for request in stub.requests
        for item in request["input"]
        if item.get("type") == "function_call_output"
    }


# --- the real Codex CLI, once for the module ---------------------------------------------------


@dataclass(frozen=True)
class Session:
    session_id: str
    rollout: Path
    collector: Collector
    stub: ResponsesStub
    base_instructions: str


@pytest.fixture(scope="module")
def codex_session(chdb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    binary = require_codex()
    root = tmp_path_factory.mktemp("codex")
    work = root / "work"
    work.mkdir()
    config = loopback(
        str(chdb_dir),
        database="codex_live",
        assembly=AssemblyConfig(grace_s=0.2, max_wait_s=5.0),
        pipeline=PipelineConfig(flush_interval_s=0.05),
    )
    with Collector(config) as collector, ResponsesStub(SCRIPT) as stub:
        first = CodexHome(
            binary, root / "home", base_url=stub.base_url, otel=OtelExport("grpc", collector.grpc_endpoint)
        )
        first.run(PROMPTS[0], cwd=work)
        [rollout] = first.rollouts()
        session_id = rollout.stem.split("-", 6)[-1]
        assert collector.wait_idle(30)
        # The same session resumed by another Codex process, exporting over OTLP/HTTP with JSON bodies.
        otel = OtelExport("http-json", collector.http_endpoint + "/v1/logs")
        CodexHome(binary, root / "home", base_url=stub.base_url, otel=otel).run(
            PROMPTS[1], cwd=work, resume=session_id
        )
        assert collector.wait_idle(30)
        meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
        yield Session(session_id, rollout, collector, stub, meta["base_instructions"]["text"])


def test_rollout_import_end_to_end(codex_session: Session, store: Any) -> None:
    session = codex_session
    report = run_import([session.rollout], CodexRolloutReader(), store, RuleAnnotator())
    assert (report.stored, report.errors, report.skipped) == (1, (), ())

    stored = read_stored(store, session_trace_id(session.session_id))
    outputs = tool_outputs_sent(session.stub)
    assert "hello" in outputs["call_echo"] and "missing-dir" in outputs["call_ls"]
    assert stored.turns == expected_steps(
        (outputs["call_echo"], outputs["call_ls"]), with_model_thoughts=True
    )
    assert stored.system_turns[0] == session.base_instructions  # Codex's own instructions, from session_meta
    assert stored.trace_id == session.session_id.replace("-", "")
    assert (stored.conversation_id, stored.service, stored.root_agent) == (
        session.session_id,
        "codex_exec",
        "codex",
    )
    assert (stored.model, stored.task, stored.tokens, stored.tool_calls) == (MODEL, PROMPTS[0], TOKENS, 2)
    reasoning_models = {
        m for s, m in zip(stored.turns, stored.turn_models, strict=True) if s.kind == "reasoning"
    }
    assert reasoning_models == {MODEL}


def test_live_logs_end_to_end_one_run_over_two_exports(codex_session: Session) -> None:
    session = codex_session
    collector = session.collector
    trace_id = session_trace_id(session.session_id)

    stored = read_stored(collector.store, trace_id)
    outputs = tool_outputs_sent(session.stub)
    assert stored.turns == expected_steps(
        (outputs["call_echo"], outputs["call_ls"]), with_model_thoughts=False
    )
    assert (stored.conversation_id, stored.service, stored.root_agent) == (
        session.session_id,
        "codex_exec",
        "codex",
    )
    assert (stored.model, stored.task, stored.tokens, stored.tool_calls) == (MODEL, PROMPTS[0], TOKENS, 2)
    # Two Codex processes, two exports, two protocols: one run, re-annotated when the second came.
    stats = collector.pipeline.stats()
    assert stats.runs_reannotated >= 1
    spans = collector.store.query(
        "SELECT count(), uniqExact(SpanId) FROM otel_traces WHERE TraceId = {t:String}", {"t": trace_id}
    ).rows[0]
    assert spans[0] == spans[1] > 0

    # The rollout of the same session tells the same story, plus what logs never carry.
    rollout = CodexRolloutReader().read(session.rollout).conversations[0]
    logged = [s for s in steps_of(rollout) if s.kind != "reasoning" and s.content != COMMENTARY]
    assert logged == stored.turns


# --- the committed fixtures (no binary needed) ---------------------------------------------------


def fixture_exports() -> list[ExportLogsServiceRequest]:
    return [
        parse_otlp_json(line.encode(), ExportLogsServiceRequest(), "resourceLogs")
        for line in FIXTURE_LOGS.read_text().splitlines()
    ]


def logs_conversation(requests: list[ExportLogsServiceRequest]) -> Conversation:
    spans: dict[str, Span] = {}
    for request in requests:
        decoded = TraceDecoder().decode(translate(request).trace_request)
        spans.update((span.span_id, span) for span in decoded.spans)
    return rebuild(list(spans.values()))


def test_fixture_rollout_reads_as_the_session() -> None:
    read = CodexRolloutReader().read(FIXTURE_ROLLOUT)
    assert read.skipped == ()
    [conversation] = read.conversations
    steps = steps_of(conversation)
    assert [s.kind for s in steps] == [s.kind for s in expected_steps(("", ""), with_model_thoughts=True)]
    assert steps[0].content == PROMPTS[0] and steps[1].content == THOUGHT and steps[2].content == COMMENTARY
    assert steps[3].arguments == ECHO and steps[3].result is not None and "hello" in steps[3].result
    assert (conversation.input_tokens, conversation.output_tokens) == TOKENS
    assert conversation.attributes["mast.import.format"] == "codex"
    # What each model call saw grows through the session (the history, not just what was new to it).
    sizes = [t.context_size for t in conversation.turns if t.model]
    assert sizes == sorted(sizes) and sizes[0] > 0


def test_fixture_logs_and_rollout_rebuild_the_same_turns() -> None:
    from_logs = logs_conversation(fixture_exports())
    [from_rollout] = CodexRolloutReader().read(FIXTURE_ROLLOUT).conversations
    assert from_logs.trace_id == from_rollout.trace_id
    logged = [s for s in steps_of(from_rollout) if s.kind != "reasoning" and s.content != COMMENTARY]
    assert steps_of(from_logs) == logged
    assert (from_logs.input_tokens, from_logs.output_tokens) == TOKENS
    assert from_logs.models == from_rollout.models == (MODEL,)


def test_a_retried_or_reordered_export_rebuilds_the_same_run() -> None:
    first, second = fixture_exports()
    once = logs_conversation([first, second])
    again = logs_conversation([second, first, second, first])
    assert steps_of(again) == steps_of(once)
    assert translate(first).trace_request == translate(first).trace_request  # same span ids every time
    assert again.span_count == once.span_count


def test_fixture_exports_through_the_collector_are_one_run(collector: Collector) -> None:
    first, second = fixture_exports()
    for request in (first, second, first):  # the first export retried after the second arrived
        response = export_logs(collector, request.SerializeToString())
        assert response == ExportLogsServiceResponse()
        assert collector.wait_idle(20)
    trace_id = logs_conversation([first]).trace_id
    assert int(collector.store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0]) == 1
    stored = read_stored(collector.store, trace_id)
    assert [s.kind for s in stored.turns] == [
        s.kind for s in expected_steps(("", ""), with_model_thoughts=False)
    ]
    count, unique = collector.store.query("SELECT count(), uniqExact(SpanId) FROM otel_traces").rows[0]
    assert count == unique


# --- untrusted input ------------------------------------------------------------------------------


def export_logs(collector: Collector, body: bytes) -> ExportLogsServiceResponse:
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        call = channel.unary_unary(
            LOGS_EXPORT, request_serializer=None, response_deserializer=ExportLogsServiceResponse.FromString
        )
        return call(body, timeout=10)


def post_logs(collector: Collector, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(
        collector.http_endpoint + "/v1/logs",
        data=body,
        method="POST",
        headers={"Content-Type": content_type, **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_broken_lines_are_reported_and_the_rest_imports(tmp_path: Path, store: Any) -> None:
    lines = FIXTURE_ROLLOUT.read_bytes().splitlines()
    bad = tmp_path / "rollout-broken.jsonl"
    bad.write_bytes(
        b"\n".join(
            [
                *lines[:3],
                b"{not json",  # line 4
                b'"a string"',  # line 5
                b'{"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": 7}',  # line 6
                b'{"timestamp": "2026-01-01T00:00:00Z", "type": "response_item",'
                b' "payload": {"type": "function_call", "arguments": "{}"}}',  # line 7: no name, no call_id
                b"\xff\xfe not utf-8",  # line 8
                b'{"timestamp": "2026-01-01T00:00:00Z", "type": "brand_new_kind", "payload": {}}',  # ignored
                b'{"timestamp": "2026-01-01T00:00:00Z", "type": "response_item",'
                b' "payload": {"type": "brand_new_item"}}',  # ignored
                *lines[3:],
                lines[-1][: len(lines[-1]) // 2],  # a file cut off mid-write
            ]
        )
    )
    garbage = tmp_path / "rollout-garbage.jsonl"
    garbage.write_bytes(b"\x00\x01 nothing\nat all\n")
    report = run_import([bad, garbage], CodexRolloutReader(), store, RuleAnnotator())

    assert report.stored == 1 and report.files == 2
    [error] = report.errors
    assert error.path == garbage and "not a Codex rollout" in error.problem
    problems = [p.problem for p in report.skipped]
    assert [p.split(":")[0] for p in problems] == [f"line {n}" for n in (4, 5, 6, 7, 8, len(lines) + 8)]
    assert "not valid JSON" in problems[0] and "expected a JSON object" in problems[1]
    assert "without a name or call_id" in problems[3] and "not UTF-8" in problems[4]
    assert all(p.path == bad for p in report.skipped)
    [run] = report.runs
    stored = read_stored(store, run.trace_id)
    assert [s.kind for s in stored.turns] == [
        s.kind for s in expected_steps(("", ""), with_model_thoughts=True)
    ]


def test_the_first_rollout_format_without_envelopes_is_read(tmp_path: Path) -> None:
    # Codex's first rollout format (mid 2025), from its documented shape: a bare session header,
    # then bare response items without timestamps.
    legacy = tmp_path / "rollout-legacy.jsonl"
    records = [
        {
            "id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e",
            "timestamp": "2025-05-07T17:24:21.123Z",
            "instructions": None,
        },
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files"}]},
        {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"output": "a.txt\\n", "metadata": {}}'},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "One file: a.txt"}],
        },
    ]
    legacy.write_text("\n".join(json.dumps(r) for r in records))
    read = CodexRolloutReader().read(legacy)
    assert read.skipped == ()
    [conversation] = read.conversations
    assert conversation.trace_id == "5973b6c094b8487ba5302aeb6098ae0e"
    assert [(s.kind, s.content or s.tool) for s in steps_of(conversation)] == [
        ("user", "List the files"),
        ("tool_call", "shell"),
        ("agent_message", "One file: a.txt"),
    ]


def test_importing_again_replaces_the_run(store: Any) -> None:
    for _ in range(2):
        report = run_import([FIXTURE_ROLLOUT], CodexRolloutReader(), store, RuleAnnotator())
        assert report.stored == 1
    assert int(store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0]) == 1


def test_the_import_command_lists_codex_and_dry_runs(tmp_path: Path) -> None:
    assert "codex" in READERS
    result = subprocess.run(
        [sys.executable, "-m", "mast_otel.cli", "import", "codex", str(FIXTURES), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr  # a file was skipped: the exit status says so
    trace_id = CodexRolloutReader().read(FIXTURE_ROLLOUT).conversations[0].trace_id
    assert "would store 1 run(s)" in result.stdout and trace_id in result.stdout
    assert FIXTURE_LOGS.name in result.stderr  # not a rollout: named and skipped


def _record(name: str, **attributes: str) -> LogRecord:
    pairs = [KeyValue(key="event.name", value=AnyValue(string_value=name))]
    pairs += [
        KeyValue(key=key.replace("__", "."), value=AnyValue(string_value=v)) for key, v in attributes.items()
    ]
    return LogRecord(observed_time_unix_nano=1_795_000_000_000_000_000, attributes=pairs)


def test_logs_that_are_not_codex_events_are_ignored_and_said_so(collector: Collector) -> None:
    conversation = "0190f0c8-5a8e-7b43-9c11-3e4f5a6b7c8d"
    records = [
        LogRecord(
            observed_time_unix_nano=5, body=AnyValue(string_value="GET /healthz 200")
        ),  # someone's app log
        _record("http.request", conversation__id=conversation),
        _record(EVENT := "codex.user_prompt", prompt="hi"),  # a Codex event in no conversation
        _record(EVENT, prompt="What is running?", conversation__id=conversation),
    ]
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])]
    )
    response = export_logs(collector, request.SerializeToString())
    assert response.partial_success.rejected_log_records == 1
    assert "2 log record(s) ignored" in response.partial_success.error_message
    assert "without conversation.id" in response.partial_success.error_message
    registry = collector.metrics.registry
    for reason, records_skipped in (("ignored", 2), ("rejected", 1)):
        sample = registry.get_sample_value("mast_otel_log_records_skipped_total", {"reason": reason})
        assert sample == records_skipped
    assert collector.wait_idle(20)
    stored = read_stored(collector.store, session_trace_id(conversation))
    assert stored.turns == [Step("user", "user", "What is running?")]

    status, body = post_logs(collector, request.SerializeToString(), "application/x-protobuf")
    answer = ExportLogsServiceResponse.FromString(body)
    assert status == 200 and answer.partial_success == response.partial_success


def test_malformed_logs_requests_are_refused_on_both_endpoints(collector: Collector) -> None:
    for body in (b"\xff\xfe\xfd garbage", b"\x0a\x7f\x01"):
        with pytest.raises(grpc.RpcError) as caught:
            export_logs(collector, body)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ExportLogsServiceRequest" in (caught.value.details() or "")
        status, reply = post_logs(collector, body, "application/x-protobuf")
        assert status == 400 and b"ExportLogsServiceRequest" in reply
    for body in (b"{not json", b"[1, 2]", b'{"resourceLogs": 7}'):
        status, reply = post_logs(collector, body, "application/json")
        assert status == 400, reply
    status, _ = post_logs(
        collector, gzip.compress(b"\x0a\x7f\x01"), "application/x-protobuf", **{"Content-Encoding": "gzip"}
    )
    assert status == 400
    # ... and the collector still takes a good export, gzip-compressed JSON this time.
    good = FIXTURE_LOGS.read_text().splitlines()[0].encode()
    status, reply = post_logs(
        collector, gzip.compress(good), "application/json", **{"Content-Encoding": "gzip"}
    )
    assert status == 200 and json.loads(reply) == {}
    assert collector.wait_idle(20)
    assert int(collector.store.query("SELECT count() FROM mast_conversations FINAL").rows[0][0]) == 1


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIXTURE_RECORDS = [json.loads(line) for line in FIXTURE_ROLLOUT.read_text().splitlines()]


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_any_rollout_content_is_read_or_refused_never_crashes(data: st.DataObject) -> None:
    """The fixture with random values written over random fields, and random lines added."""
    records = copy.deepcopy(FIXTURE_RECORDS)
    for _ in range(data.draw(st.integers(0, 8))):
        record = records[data.draw(st.integers(0, len(records) - 1))]
        payload = record.get("payload")
        target = payload if isinstance(payload, dict) and data.draw(st.booleans()) else record
        key = data.draw(st.sampled_from(sorted(target)) | st.text(max_size=6)) if target else "type"
        target[key] = data.draw(JSON_VALUES)
    records += data.draw(st.lists(JSON_VALUES, max_size=3))
    try:
        run = rollout_conversation(enumerate(records, start=1), fallback_trace_id="ab" * 16)
    except RolloutError:
        return
    assert [turn.index for turn in run.conversation.turns] == list(range(len(run.conversation.turns)))
    assert all(0 <= turn.time_ns < 2**63 for turn in run.conversation.turns)


ATTRIBUTE_VALUES = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.floats(),
    st.binary(max_size=8),
)
CODEX_EVENTS = st.sampled_from(
    [
        "codex.conversation_starts",
        "codex.user_prompt",
        "codex.sse_event",
        "codex.tool_result",
        "codex.agent_response",
    ]
)
CODEX_KEYS = st.sampled_from(
    [
        "conversation.id",
        "prompt",
        "event.kind",
        "input_token_count",
        "output_token_count",
        "tool_name",
        "call_id",
        "arguments",
        "output",
        "success",
        "duration_ms",
        "response",
        "model",
        "event.timestamp",
    ]
)


@given(
    st.lists(
        st.tuples(
            CODEX_EVENTS,
            st.dictionaries(CODEX_KEYS | st.text(max_size=6), ATTRIBUTE_VALUES, max_size=8),
            st.integers(min_value=0, max_value=2**64 - 1),
        ),
        max_size=8,
    )
)
@settings(max_examples=150, deadline=None)
def test_any_codex_log_records_translate_into_valid_spans(
    records: list[tuple[str, dict[str, object], int]],
) -> None:
    request = ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                scope_logs=[
                    ScopeLogs(
                        log_records=[
                            LogRecord(
                                observed_time_unix_nano=time,
                                attributes=[KeyValue(key="event.name", value=AnyValue(string_value=name))]
                                + [KeyValue(key=k, value=any_value(v)) for k, v in attributes.items()],
                            )
                            for name, attributes, time in records
                        ]
                    )
                ]
            )
        ]
    )
    translated = translate(request)
    decoded = TraceDecoder().decode(translated.trace_request)
    assert decoded.rejected == 0 and len(decoded.spans) == translated.spans
    by_trace: dict[str, list[Span]] = {}
    for span in decoded.spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    for spans in by_trace.values():
        rebuild(spans)
