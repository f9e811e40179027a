"""The ClickHouse store on real chDB: schema, span round-trips, runs, outcomes, idempotent replays.

chDB hosts one data directory per process, so every test shares the session's directory
(`chdb_dir`) and keeps to a database of its own.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from mast_otel.annotate.base import AnnotatedRun, Evidence, Finding
from mast_otel.conversation.model import Conversation, Outcome, OutcomeReport, ToolCall, Turn, TurnKind
from mast_otel.spans import Resource, Span, SpanEvent, SpanKind, SpanLink, StatusCode
from mast_otel.store.base import StoreError
from mast_otel.store.clickhouse import ClickHouseStore, ServerTarget, attribute_to_string, open_store
from mast_otel.store.schema import SCHEMA_VERSION, TABLES, create_statements, ensure_schema
from mast_otel.taxonomy import mode

T1 = "0af7651916cd43dd8448eb211c80319c"
T2 = "4bf92f3577b34da6a3ce929d0e0e4736"
START = 1_700_000_000_123_456_789  # 2023-11-14, with nanoseconds that must survive


@pytest.fixture
def store(chdb_dir: Path, database: str) -> Iterator[ClickHouseStore]:
    opened = open_store(chdb_dir, database=database)
    yield opened
    opened.close()


def count(store: ClickHouseStore, sql: str) -> int:
    return int(store.query(sql).rows[0][0])


def a_span(trace_id: str = T1, span_id: str = "00f067aa0ba902b7", **overrides: object) -> Span:
    fields: dict[str, object] = {
        "trace_id": trace_id,
        "span_id": span_id,
        "name": "chat gpt-4o",
        "start_ns": START,
        "end_ns": START + 2_500_000,
        "parent_span_id": "53995c3f42cd8ad8",
        "kind": SpanKind.CLIENT,
        "status": StatusCode.ERROR,
        "status_message": "rate limited",
        "attributes": {
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.request.temperature": 0.5,
            "gen_ai.response.finish_reasons": ("stop", "length"),
            "mast.retry": True,
            "raw": b"\x00\x01\xfe",
            "nested": {"b": 2.0, "a": [1, "x"]},
        },
        "events": (
            SpanEvent("gen_ai.evaluation.result", START + 10, {"gen_ai.evaluation.name": "mast.FM-3.3"}),
            SpanEvent("exception", START + 20),
        ),
        "links": (SpanLink(T2, "b7ad6b7169203331", "rojo=00f067aa0ba902b7", {"link.kind": "follows"}),),
        "resource": Resource({"service.name": "sre-agent", "service.version": "1.4.0"}),
        "scope_name": "mast_otel.sdk",
        "scope_version": "0.1.0",
        "trace_state": "congo=t61rcWkgMzE",
    }
    fields.update(overrides)
    return Span(**fields)  # type: ignore[arg-type]


def a_conversation(trace_id: str = T1, **overrides: object) -> Conversation:
    fields: dict[str, object] = {
        "trace_id": trace_id,
        "turns": (
            Turn(0, TurnKind.USER, "user", "checkout is down", time_ns=START),
            Turn(1, TurnKind.REASONING, "triage", "check the pods first", span_id="s1", time_ns=START + 1),
            Turn(
                2,
                TurnKind.TOOL_CALL,
                "triage",
                "get_pods()",
                span_id="s2",
                time_ns=START + 2,
                tool=ToolCall("get_pods", "call_1", '{"ns":"shop"}', "CrashLoopBackOff"),
                model="gpt-4o",
                finish_reason="tool_calls",
                context_size=3,
            ),
            Turn(3, TurnKind.TOOL_CALL, "triage", "restart()", tool=ToolCall("restart", error="Timeout")),
            Turn(4, TurnKind.TOOL_CALL, "triage", "wait()", tool=ToolCall("wait")),
            Turn(5, TurnKind.HANDOFF, "triage", target_agent="fixer"),
        ),
        "service_name": "sre-agent",
        "conversation_id": "conv-1",
        "task_id": "incident-7",
        "task": "find why checkout is down",
        "root_agent": "triage",
        "agents": ("triage", "fixer"),
        "models": ("gpt-4o", "gpt-4o-mini"),
        "start_ns": START,
        "end_ns": START + 9_000_000_000,
        "outcome": Outcome.FAILURE,
        "score": 0.25,
        "input_tokens": 1500,
        "output_tokens": 300,
        "span_count": 12,
        "error": "max_turns",
        "root_span_id": "53995c3f42cd8ad8",
        "attributes": {"service.version": "1.4.0", "deployment.environment": "prod"},
    }
    fields.update(overrides)
    return Conversation(**fields)  # type: ignore[arg-type]


def a_finding(
    code: str, steps: tuple[int, ...] = (2,), annotator: str = "rules/test", **kw: object
) -> Finding:
    evidence = Evidence(steps, tuple(f"span{s}" for s in steps), str(kw.pop("agent", "triage")))
    confidence = float(kw.pop("confidence", 0.8))  # type: ignore[arg-type]
    return Finding(mode(code), evidence, confidence, str(kw.pop("explanation", f"{code} seen")), annotator)


# --- schema ---------------------------------------------------------------------------------------


def test_every_ddl_statement_runs_on_chdb(store: ClickHouseStore) -> None:
    fresh = f"{store.database}_ddl"
    for statement in create_statements(fresh):
        store.query(statement)
    for statement in create_statements(fresh):
        store.query(statement)  # IF NOT EXISTS: running them again is harmless
    in_fresh = {"db": fresh}
    engines = store.query("SELECT name, engine FROM system.tables WHERE database = {db:String}", in_fresh)
    created = dict(engines.rows)
    assert set(created) == {table.name for table in TABLES}  # every table, and nothing else
    # The engines that carry the guarantees: the exporter's layout, and latest-version-wins for runs.
    assert {
        name: created[name]
        for name in (
            "otel_traces",
            "otel_traces_trace_id_ts",
            "mast_conversations",
            "mast_findings",
            "mast_outcomes",
        )
    } == {
        "otel_traces": "MergeTree",
        "otel_traces_trace_id_ts": "MergeTree",
        "mast_conversations": "ReplacingMergeTree",
        "mast_findings": "ReplacingMergeTree",
        "mast_outcomes": "ReplacingMergeTree",
    }


def test_opening_a_store_creates_the_schema_once(store: ClickHouseStore) -> None:
    assert count(store, "SELECT count() FROM system.tables WHERE database = currentDatabase()") == len(TABLES)
    assert store.query("SELECT Version FROM mast_schema_version").rows == ((SCHEMA_VERSION,),)
    ensure_schema(store._client, store.database)  # again, over a complete schema: nothing to do
    assert count(store, "SELECT count() FROM mast_schema_version") == 1


def test_insert_columns_match_the_created_tables(store: ClickHouseStore) -> None:
    for table in TABLES:
        columns = {
            row[0]
            for row in store.query(
                "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String}",
                {"t": table.name},
            ).rows
        }
        assert set(table.insert_columns) <= columns, table.name


def test_traces_table_has_the_exporter_layout(store: ClickHouseStore) -> None:
    create = store.query("SHOW CREATE TABLE otel_traces").rows[0][0]
    for fragment in (
        "`Timestamp` DateTime64(9) CODEC(Delta(8), ZSTD(1))",
        "`Events.Attributes` Array(Map(LowCardinality(String), String)) CODEC(ZSTD(1))",
        "`Links.TraceState` Array(String) CODEC(ZSTD(1))",
        "INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1",
        "INDEX idx_duration Duration TYPE minmax GRANULARITY 1",
        "PARTITION BY toDate(Timestamp)",
        "ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))",
        "ttl_only_drop_parts = 1",
        "non_replicated_deduplication_window = 10000",
    ):
        assert fragment in create


def test_reopening_a_store_keeps_its_data_and_schema_version(chdb_dir: Path, database: str) -> None:
    first = open_store(chdb_dir, database=database)
    first.insert_spans([a_span()])
    second = open_store(f"chdb://{chdb_dir}", database=database)
    assert count(second, "SELECT count() FROM otel_traces") == 1
    assert count(second, "SELECT count() FROM mast_schema_version") == 1
    first.close()
    second.close()


def test_a_newer_schema_is_refused(store: ClickHouseStore) -> None:
    store.query(f"INSERT INTO mast_schema_version (Version) VALUES ({SCHEMA_VERSION + 1})")
    with pytest.raises(StoreError, match="newer than this mast-otel"):
        ensure_schema(store._client, store.database)


def test_invalid_database_names_are_refused(chdb_dir: Path) -> None:
    with pytest.raises(StoreError, match="invalid database name"):
        open_store(chdb_dir, database="mast; DROP TABLE x")


# --- spans ----------------------------------------------------------------------------------------


def test_span_round_trip_with_attributes_events_and_links(store: ClickHouseStore) -> None:
    store.insert_spans([a_span()])
    row = store.query(
        """SELECT toUnixTimestamp64Nano(Timestamp), TraceId, SpanId, ParentSpanId, TraceState,
                  SpanName, SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion,
                  SpanAttributes, Duration, StatusCode, StatusMessage,
                  arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp), Events.Name, Events.Attributes,
                  Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes
           FROM otel_traces"""
    ).rows
    assert row == (
        (
            START,
            T1,
            "00f067aa0ba902b7",
            "53995c3f42cd8ad8",
            "congo=t61rcWkgMzE",
            "chat gpt-4o",
            "Client",
            "sre-agent",
            {"service.name": "sre-agent", "service.version": "1.4.0"},
            "mast_otel.sdk",
            "0.1.0",
            {
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": "1200",
                "gen_ai.request.temperature": "0.5",
                "gen_ai.response.finish_reasons": '["stop","length"]',
                "mast.retry": "true",
                "raw": base64.b64encode(b"\x00\x01\xfe").decode(),
                "nested": '{"a":[1,"x"],"b":2}',
            },
            2_500_000,
            "Error",
            "rate limited",
            [START + 10, START + 20],
            ["gen_ai.evaluation.result", "exception"],
            [{"gen_ai.evaluation.name": "mast.FM-3.3"}, {}],
            [T2],
            ["b7ad6b7169203331"],
            ["rojo=00f067aa0ba902b7"],
            [{"link.kind": "follows"}],
        ),
    )
    # The exporter's trace id lookup is fed by its materialized view.
    assert store.query("SELECT TraceId FROM otel_traces_trace_id_ts").rows == ((T1,),)


def test_replaying_a_span_batch_is_a_no_op(store: ClickHouseStore) -> None:
    day = 86_400 * 10**9
    # Two days: the batch lands in two partitions, and both must be recognised on replay.
    batch = [
        a_span(span_id=f"{i:016x}", start_ns=START + i * day, end_ns=START + i * day + 5) for i in range(2)
    ]
    store.insert_spans(batch)
    store.insert_spans(batch)
    store.insert_spans(list(reversed(batch)))  # a replay may come in another order
    assert count(store, "SELECT count() FROM otel_traces") == 2
    # One trace over both days: one lookup row, not one per (re)insert.
    assert count(store, "SELECT count() FROM otel_traces_trace_id_ts") == 1
    store.insert_spans([a_span(span_id="00000000000000ff")])  # a new batch is stored
    assert count(store, "SELECT count() FROM otel_traces") == 3


def test_text_that_is_not_utf8_is_stored_replaced_not_lost(store: ClickHouseStore) -> None:
    # json.loads turns a "\\udcff" escape in OTLP/JSON into a lone surrogate, which UTF-8 cannot carry.
    store.insert_spans([a_span(name="chat \udcff", attributes={"k\ud800": "v\udcff", "n": 1})])
    assert store.query("SELECT SpanName, SpanAttributes FROM otel_traces").rows == (
        ("chat ?", {"k?": "v?", "n": "1"}),
    )


def test_empty_batches_write_nothing(store: ClickHouseStore) -> None:
    store.insert_spans([])
    store.insert_runs([])
    store.insert_outcomes([])
    assert count(store, "SELECT count() FROM otel_traces") == 0


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("plain", "plain"),
        (True, "true"),
        (False, "false"),
        (-42, "-42"),
        (1.0, "1"),
        (0.1, "0.1"),
        (1e-7, "1e-7"),
        (1e20, "100000000000000000000"),
        (1.5e21, "1.5e+21"),
        (float("nan"), "json: unsupported value: NaN"),
        (float("-inf"), "json: unsupported value: -Inf"),
        (b"hi", "aGk="),
        (("a", 1, 2.5, True, None), '["a",1,2.5,true,null]'),
        ({"z": 1, "a": {"k": ("<&>",)}}, '{"a":{"k":["<&>"]},"z":1}'),
        (("é\u2028",), '["é\\u2028"]'),
        ((float("inf"),), ""),
        (None, ""),
    ],
)
def test_attributes_are_stringified_like_the_clickhouse_exporter(value: object, stored: str) -> None:
    assert attribute_to_string(value) == stored  # type: ignore[arg-type]


# --- runs and outcomes ----------------------------------------------------------------------------


def test_run_round_trip(store: ClickHouseStore) -> None:
    run = AnnotatedRun(
        a_conversation(),
        (
            a_finding("FM-1.3", (2, 3), explanation="called get_pods 3 times"),
            a_finding("FM-1.3", (4, 2), confidence=0.9, explanation="waited twice"),  # same key: merged
            a_finding("FM-1.3", (4,), annotator="llm/judge", agent="fixer", confidence=0.6),
            a_finding("FM-3.3", (5,)),
        ),
        version=START + 100,
    )
    store.insert_runs([run])
    conversation = store.query(
        """SELECT toUnixTimestamp64Nano(Timestamp), toUnixTimestamp64Nano(EndTimestamp), TraceId,
                  RootSpanId, ConversationId, TaskId, ServiceName, ServiceVersion, RootAgent, Agents,
                  Model, Models, Outcome, Score, TurnCount, ToolCallCount, ToolErrorCount, InputTokens,
                  OutputTokens, SpanCount, Error, Task, Attributes, Version,
                  toUnixTimestamp64Nano(AnnotatedAt)
           FROM mast_conversations"""
    ).rows
    assert conversation == (
        (
            START,
            START + 9_000_000_000,
            T1,
            "53995c3f42cd8ad8",
            "conv-1",
            "incident-7",
            "sre-agent",
            "1.4.0",
            "triage",
            ["triage", "fixer"],
            "gpt-4o",
            ["gpt-4o", "gpt-4o-mini"],
            "failure",
            0.25,
            6,
            3,
            1,
            1500,
            300,
            12,
            "max_turns",
            "find why checkout is down",
            {"service.version": "1.4.0", "deployment.environment": "prod"},
            START + 100,
            START + 100,
        ),
    )
    turn = store.query(
        "SELECT tupleElement(Turns[3], 'Kind'), tupleElement(Turns[3], 'ToolName'), "
        "tupleElement(Turns[3], 'ToolArguments'), tupleElement(Turns[3], 'ToolResult'), "
        "tupleElement(Turns[4], 'ToolResult'), tupleElement(Turns[4], 'ToolError'), "
        "tupleElement(Turns[6], 'TargetAgent'), tupleElement(Turns[3], 'ContextSize'), "
        "toUnixTimestamp64Nano(tupleElement(Turns[3], 'Time')) FROM mast_conversations"
    ).rows
    assert turn == (
        (
            "tool_call",
            "get_pods",
            '{"ns":"shop"}',
            "CrashLoopBackOff",
            None,
            "Timeout",
            "fixer",
            3,
            START + 2,
        ),
    )
    findings = store.query(
        """SELECT Mode, ModeName, Category, Annotator, Agent, round(toFloat64(Confidence), 3),
                  EvidenceSpanIds, StepIndex, EvidenceSteps, Explanation, Version, Model, ServiceName,
                  toUnixTimestamp64Nano(Timestamp)
           FROM mast_findings ORDER BY Mode, Annotator"""
    ).rows
    run_columns = (START + 100, "gpt-4o", "sre-agent", START)
    assert findings == (
        ("FM-1.3", "Step repetition", "FC1", "llm/judge", "fixer", 0.6, ["span4"], 4, [4], "FM-1.3 seen",
         *run_columns),
        # Two findings under one key (mode, annotator) became one row holding both's evidence.
        ("FM-1.3", "Step repetition", "FC1", "rules/test", "triage", 0.9, ["span2", "span3", "span4"], 2,
         [2, 3, 4], "called get_pods 3 times; waited twice", *run_columns),
        ("FM-3.3", "Incorrect verification", "FC3", "rules/test", "triage", 0.8, ["span5"], 5, [5],
         "FM-3.3 seen", *run_columns),
    )  # fmt: skip


def test_replaying_a_run_batch_is_a_no_op(store: ClickHouseStore) -> None:
    runs = [
        AnnotatedRun(a_conversation(T1), (a_finding("FM-1.3"), a_finding("FM-3.3")), version=1),
        AnnotatedRun(a_conversation(T2), (a_finding("FM-1.5"),), version=1),
    ]
    for _ in range(3):
        store.insert_runs(runs)
    # Without FINAL: the server dropped the replays, it did not merely hide them.
    assert count(store, "SELECT count() FROM mast_conversations") == 2
    assert count(store, "SELECT count() FROM mast_findings") == 3


def test_the_same_run_in_another_batch_is_read_once(store: ClickHouseStore) -> None:
    run = AnnotatedRun(a_conversation(T1), (a_finding("FM-1.3"),), version=1)
    other = AnnotatedRun(a_conversation(T2), (), version=1)
    store.insert_runs([run])
    store.insert_runs([run, other])  # another batch, so another token: ReplacingMergeTree collapses it
    assert count(store, "SELECT count() FROM mast_conversations FINAL") == 2
    assert count(store, "SELECT count() FROM mast_findings FINAL") == 1


def test_reannotation_keeps_the_highest_version(store: ClickHouseStore) -> None:
    store.insert_runs([AnnotatedRun(a_conversation(T1, outcome=Outcome.UNKNOWN), (a_finding("FM-1.3"),), 5)])
    store.insert_runs([AnnotatedRun(a_conversation(T1), (a_finding("FM-3.3"),), 9)])
    # An older version arriving late changes nothing.
    store.insert_runs([AnnotatedRun(a_conversation(T1, outcome=Outcome.SUCCESS), (), 7)])
    assert store.query("SELECT Version, Outcome FROM mast_conversations FINAL").rows == ((9, "failure"),)


def test_replaying_outcomes_is_a_no_op(store: ClickHouseStore) -> None:
    reports = [
        OutcomeReport(T1, Outcome.FAILURE, 0.1, START),
        OutcomeReport(T2, Outcome.SUCCESS, None, START),
    ]
    store.insert_outcomes(reports)
    store.insert_outcomes(reports)
    assert count(store, "SELECT count() FROM mast_outcomes") == 2


def test_outcomes_keep_the_latest_report(store: ClickHouseStore) -> None:
    # In separate batches, and the later report first: the report time decides, not arrival.
    store.insert_outcomes([OutcomeReport(T1, Outcome.SUCCESS, 0.9, time_ns=START + 20, source="grader-b")])
    store.insert_outcomes(
        [
            OutcomeReport(T1, Outcome.FAILURE, 0.1, time_ns=START + 10, source="grader-a"),
            OutcomeReport(T2, Outcome.SUCCESS, None, time_ns=0, source="import"),
        ]
    )
    latest = store.query("SELECT TraceId, Outcome, Score, Source FROM mast_outcomes FINAL ORDER BY TraceId")
    assert latest.rows == ((T1, "success", 0.9, "grader-b"), (T2, "success", None, "import"))
    # A report without a time is stamped with its arrival.
    stamped = f"SELECT toUnixTimestamp64Nano(Timestamp) > {START} FROM mast_outcomes WHERE TraceId = '{T2}'"
    assert count(store, stamped) == 1


# --- errors, connections --------------------------------------------------------------------------


def test_query_errors_become_store_errors_that_say_what_to_do(store: ClickHouseStore) -> None:
    with pytest.raises(StoreError, match="schema is missing"):
        store.query("SELECT * FROM no_such_table")
    with pytest.raises(StoreError, match="query on chdb://"):
        store.query("SELEC 1")


def test_ping_and_repr(store: ClickHouseStore, chdb_dir: Path) -> None:
    assert store.ping()
    assert repr(store) == f"ClickHouseStore('chdb://{chdb_dir.resolve()}', database='{store.database}')"


def test_a_second_chdb_directory_in_one_process_is_explained(store: ClickHouseStore, tmp_path: Path) -> None:
    # While a store is open on the session's directory, chDB cannot open another one.
    with pytest.raises(StoreError, match="one data directory per process"):
        open_store(tmp_path / "elsewhere")


def test_unknown_targets_are_refused() -> None:
    with pytest.raises(StoreError, match="unsupported store target"):
        open_store("ftp://user:hunter2@host/db")


def test_server_urls_become_client_arguments_without_connecting() -> None:
    target = ServerTarget.parse("https://alice:s3cr%40t@ch.example.com:9443/prod?verify=false", env={})
    assert (target.host, target.port, target.username, target.password, target.secure, target.database) == (
        "ch.example.com",
        9443,
        "alice",
        "s3cr@t",
        True,
        "prod",
    )
    assert target.client_kwargs() == {
        "host": "ch.example.com",
        "port": 9443,
        "interface": "https",
        "secure": True,
        "username": "alice",
        "password": "s3cr@t",
        "verify": "false",
        "autogenerate_session_id": False,
    }
    assert "s3cr@t" not in repr(target)
    assert target.redacted() == "https://alice:***@ch.example.com:9443"


@pytest.mark.parametrize(
    ("url", "host", "port", "secure", "database"),
    [
        ("http://localhost:8123", "localhost", 8123, False, None),
        ("http://ch", "ch", 8123, False, None),
        ("https://ch", "ch", 8443, True, None),
        ("clickhouse://ch/mast", "ch", 8123, False, "mast"),
        ("clickhouse://ch?secure=true", "ch", 8443, True, None),
        ("clickhouses://ch:443/db2", "ch", 443, True, "db2"),
        ("http://ch:8443", "ch", 8443, True, None),
    ],
)
def test_server_url_forms(url: str, host: str, port: int, secure: bool, database: str | None) -> None:
    target = ServerTarget.parse(url, env={})
    assert (target.host, target.port, target.secure, target.database) == (host, port, secure, database)
    assert target.client_kwargs()["interface"] == ("https" if secure else "http")


def test_credentials_come_from_the_environment_when_the_url_has_none() -> None:
    env = {"CLICKHOUSE_USER": "bob", "CLICKHOUSE_PASSWORD": "from-env"}
    from_env = ServerTarget.parse("http://ch:8123/mast", env=env)
    assert (from_env.username, from_env.password) == ("bob", "from-env")
    in_url = ServerTarget.parse("http://carol:pw@ch:8123/mast", env=env)
    assert (in_url.username, in_url.password) == ("carol", "pw")
    anonymous = ServerTarget.parse("http://ch:8123", env={})
    assert (anonymous.username, anonymous.password) == (None, "")


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    # Port 9 on loopback: nothing listens, the connection is refused at once.
    with pytest.raises(StoreError) as error:
        open_store("http://alice:topsecret@127.0.0.1:9/mast?connect_timeout=2")
    message = str(error.value)
    assert "topsecret" not in message
    assert "alice:***@127.0.0.1:9" in message
    assert "check that ClickHouse is running" in message
