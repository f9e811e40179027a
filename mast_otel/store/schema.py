"""The ClickHouse schema of mast-otel, in one place: every table's DDL and the columns the store writes.

`otel_traces`, `otel_traces_trace_id_ts` and its materialized view are the otelcol-contrib
clickhouseexporter's layout, statement for statement (engine MergeTree, no TTL), so Grafana's trace
view and existing queries work and an exporter already writing spans can share the tables. The
`mast_*` tables hold what mast-otel derives: one row per annotated run (`mast_conversations`), one
row per detected failure mode per run and annotator (`mast_findings`) and late outcomes from graders
(`mast_outcomes`). Re-annotations carry a higher `Version` and replace older rows
(ReplacingMergeTree); readers use FINAL or join on the latest version.

Every MergeTree table sets `non_replicated_deduplication_window`, so a batch inserted again with the
same `insert_deduplication_token` is dropped by the server: replaying a spooled batch is a no-op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from clickhouse_connect.driver.client import Client

from mast_otel.store.base import StoreError

SCHEMA_VERSION: Final = 1
DEFAULT_DATABASE: Final = "mast"
# How many recent insert blocks per table the server remembers for deduplication: a spool replays
# at most a few hundred batches, so this covers a long outage with room to spare.
DEDUPLICATION_WINDOW: Final = 10_000

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Table:
    """One table: its name, the columns the store inserts (in order) and its CREATE statement."""

    name: str
    insert_columns: tuple[str, ...]
    create_template: str  # `{db}` stands for the quoted database name

    def create(self, database: str) -> str:
        return self.create_template.format(db=quote_database(database))


def quote_database(database: str) -> str:
    """The database name as a quoted identifier; refuses anything that is not a plain identifier."""
    if not _IDENTIFIER.match(database):
        raise StoreError(
            f"invalid database name {database!r}: use letters, digits and underscores, no leading digit"
        )
    return f"`{database}`"


_SETTINGS = f"non_replicated_deduplication_window = {DEDUPLICATION_WINDOW}"

TRACES = Table(
    "otel_traces",
    (
        "Timestamp",
        "TraceId",
        "SpanId",
        "ParentSpanId",
        "TraceState",
        "SpanName",
        "SpanKind",
        "ServiceName",
        "ResourceAttributes",
        "ScopeName",
        "ScopeVersion",
        "SpanAttributes",
        "Duration",
        "StatusCode",
        "StatusMessage",
        "Events.Timestamp",
        "Events.Name",
        "Events.Attributes",
        "Links.TraceId",
        "Links.SpanId",
        "Links.TraceState",
        "Links.Attributes",
    ),
    """
CREATE TABLE IF NOT EXISTS {db}.otel_traces (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, """
    + _SETTINGS,
)

TRACE_ID_TS = Table(
    "otel_traces_trace_id_ts",
    (),  # filled by the materialized view below, never written directly
    """
CREATE TABLE IF NOT EXISTS {db}.otel_traces_trace_id_ts (
    TraceId String CODEC(ZSTD(1)),
    Start DateTime CODEC(Delta, ZSTD(1)),
    End DateTime CODEC(Delta, ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Start)
ORDER BY (TraceId, Start)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, """
    + _SETTINGS,
)

TRACE_ID_TS_MV = Table(
    "otel_traces_trace_id_ts_mv",
    (),
    """
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.otel_traces_trace_id_ts_mv
TO {db}.otel_traces_trace_id_ts
AS SELECT
    TraceId,
    min(Timestamp) AS Start,
    max(Timestamp) AS End
FROM {db}.otel_traces
WHERE TraceId != ''
GROUP BY TraceId""",
)

CONVERSATIONS = Table(
    "mast_conversations",
    (
        "Timestamp",
        "EndTimestamp",
        "TraceId",
        "RootSpanId",
        "ConversationId",
        "TaskId",
        "ServiceName",
        "ServiceVersion",
        "RootAgent",
        "Agents",
        "Model",
        "Models",
        "Outcome",
        "Score",
        "TurnCount",
        "ToolCallCount",
        "ToolErrorCount",
        "InputTokens",
        "OutputTokens",
        "SpanCount",
        "Error",
        "Task",
        "Attributes",
        "Turns",
        "Version",
        "AnnotatedAt",
    ),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_conversations (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    EndTimestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    RootSpanId String CODEC(ZSTD(1)),
    ConversationId String CODEC(ZSTD(1)),
    TaskId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ServiceVersion LowCardinality(String) CODEC(ZSTD(1)),
    RootAgent LowCardinality(String) CODEC(ZSTD(1)),
    Agents Array(LowCardinality(String)) CODEC(ZSTD(1)),
    Model LowCardinality(String) CODEC(ZSTD(1)),
    Models Array(LowCardinality(String)) CODEC(ZSTD(1)),
    Outcome LowCardinality(String) CODEC(ZSTD(1)),
    Score Nullable(Float64) CODEC(ZSTD(1)),
    TurnCount UInt32 CODEC(ZSTD(1)),
    ToolCallCount UInt32 CODEC(ZSTD(1)),
    ToolErrorCount UInt32 CODEC(ZSTD(1)),
    InputTokens UInt64 CODEC(ZSTD(1)),
    OutputTokens UInt64 CODEC(ZSTD(1)),
    SpanCount UInt32 CODEC(ZSTD(1)),
    Error String CODEC(ZSTD(1)),
    Task String CODEC(ZSTD(1)),
    Attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Turns Array(Tuple(
        Index UInt32,
        Kind LowCardinality(String),
        Agent LowCardinality(String),
        Content String,
        SpanId String,
        Time DateTime64(9),
        ToolName LowCardinality(String),
        ToolCallId String,
        ToolArguments String,
        ToolResult Nullable(String),
        ToolError String,
        TargetAgent LowCardinality(String),
        Model LowCardinality(String),
        FinishReason LowCardinality(String),
        ContextSize UInt32
    )) CODEC(ZSTD(1)),
    Version UInt64 CODEC(ZSTD(1)),
    AnnotatedAt DateTime64(9) CODEC(Delta, ZSTD(1)),
    INDEX idx_conversation_id ConversationId TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_task_id TaskId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toYYYYMM(Timestamp)
ORDER BY TraceId
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
)

FINDINGS = Table(
    "mast_findings",
    (
        "Timestamp",
        "TraceId",
        "ServiceName",
        "Model",
        "Agent",
        "Mode",
        "ModeName",
        "Category",
        "Annotator",
        "Confidence",
        "EvidenceSpanIds",
        "StepIndex",
        "EvidenceSteps",
        "Explanation",
        "Version",
    ),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_findings (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Model LowCardinality(String) CODEC(ZSTD(1)),
    Agent LowCardinality(String) CODEC(ZSTD(1)),
    Mode LowCardinality(String) CODEC(ZSTD(1)),
    ModeName LowCardinality(String) CODEC(ZSTD(1)),
    Category LowCardinality(String) CODEC(ZSTD(1)),
    Annotator LowCardinality(String) CODEC(ZSTD(1)),
    Confidence Float32 CODEC(ZSTD(1)),
    EvidenceSpanIds Array(String) CODEC(ZSTD(1)),
    StepIndex Int32 CODEC(ZSTD(1)),
    EvidenceSteps Array(Int32) CODEC(ZSTD(1)),
    Explanation String CODEC(ZSTD(1)),
    Version UInt64 CODEC(ZSTD(1))
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toYYYYMM(Timestamp)
ORDER BY (TraceId, Version, Mode, Annotator)
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
)

OUTCOMES = Table(
    "mast_outcomes",
    ("Timestamp", "TraceId", "Outcome", "Score", "Source"),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_outcomes (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    Outcome LowCardinality(String) CODEC(ZSTD(1)),
    Score Nullable(Float64) CODEC(ZSTD(1)),
    Source String CODEC(ZSTD(1))
) ENGINE = ReplacingMergeTree(Timestamp)
ORDER BY TraceId
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
)

SCHEMA_VERSIONS = Table(
    "mast_schema_version",
    ("Version",),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_schema_version (
    Version UInt32,
    AppliedAt DateTime64(9) DEFAULT now64(9)
) ENGINE = MergeTree()
ORDER BY Version""",
)

# In creation order: the materialized view needs both its source and its target.
TABLES: Final[tuple[Table, ...]] = (
    TRACES,
    TRACE_ID_TS,
    TRACE_ID_TS_MV,
    CONVERSATIONS,
    FINDINGS,
    OUTCOMES,
    SCHEMA_VERSIONS,
)


def create_statements(database: str = DEFAULT_DATABASE) -> tuple[str, ...]:
    """Every DDL statement, in order, for one database (itself created first)."""
    return (
        f"CREATE DATABASE IF NOT EXISTS {quote_database(database)}",
        *(table.create(database) for table in TABLES),
    )


def ensure_schema(client: Client, database: str = DEFAULT_DATABASE) -> None:
    """Create whatever is missing of the schema in `database`; check an existing schema's version.

    Only missing objects are created, so a user allowed to read but not to create (an analyst,
    Grafana's user) can open a store whose schema is already in place.
    """
    quoted = quote_database(database)
    in_database = {"database": database}
    exists = client.query(
        "SELECT count() FROM system.databases WHERE name = {database:String}", parameters=in_database
    ).result_rows[0][0]
    if not exists:
        client.command(f"CREATE DATABASE IF NOT EXISTS {quoted}")
    present = {
        row[0]
        for row in client.query(
            "SELECT name FROM system.tables WHERE database = {database:String}", parameters=in_database
        ).result_rows
    }
    for table in TABLES:
        if table.name not in present:
            client.command(table.create(database))
    stored = client.query(f"SELECT max(Version) FROM {quoted}.{SCHEMA_VERSIONS.name}").result_rows[0][0]
    if stored > SCHEMA_VERSION:
        raise StoreError(
            f"database {database!r} holds mast-otel schema version {stored}, newer than this mast-otel "
            f"understands ({SCHEMA_VERSION}): upgrade mast-otel, or point it at another database"
        )
    if stored < SCHEMA_VERSION:
        client.insert(
            SCHEMA_VERSIONS.name,
            [[SCHEMA_VERSION]],
            column_names=SCHEMA_VERSIONS.insert_columns,
            database=database,
        )
