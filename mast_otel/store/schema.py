"""The ClickHouse schema of mast-otel, in one place: every table's DDL and the columns the store writes.

`otel_traces`, `otel_traces_trace_id_ts` and its materialized view are the otelcol-contrib
clickhouseexporter's layout, statement for statement (engine MergeTree, no TTL), so Grafana's trace
view and existing queries work and an exporter already writing spans can share the tables. The
`mast_*` tables hold what mast-otel derives: one row per annotated run (`mast_conversations`), one
row per detected failure mode per run and annotator (`mast_findings`) and late outcomes from graders
(`mast_outcomes`). Re-annotations carry a higher `Version` and replace older rows
(ReplacingMergeTree); readers use FINAL or join on the latest version. Rollups that dashboards and
alerts read cheaply (`mast_run_modes`, filled by a materialized view), the collectors' own metric
snapshots (`mast_collector_stats`) and the LLM judge's ledger and verdict cache (`mast_judge_usage`)
complete it.

Every MergeTree table sets `non_replicated_deduplication_window`, so a batch inserted again with the
same `insert_deduplication_token` is dropped by the server: replaying a spooled batch is a no-op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from clickhouse_connect.driver.client import Client

from mast_otel.store import otlp_schema
from mast_otel.store.base import StoreError
from mast_otel.taxonomy import CODES

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
    # Run once right after the table is created in a database that already holds data (rollups).
    backfill_template: str = ""
    # Columns added after the table first shipped: in its CREATE, and added to older tables by
    # `ensure_schema` (each a column definition with a DEFAULT).
    added_columns: tuple[str, ...] = ()

    def create(self, database: str) -> str:
        return self.create_template.format(db=quote_database(database))

    def backfill(self, database: str) -> str:
        return self.backfill_template.format(db=quote_database(database))


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

# Where a failed run went wrong (`annotate.blame`): the decisive step's agent, index, span, the mode of
# the finding pointing there ('' when the run's structure alone did), a confidence and a one-liner.
# BlameStep is -1 for runs without blame.
_BLAME_COLUMNS = (
    "BlameAgent LowCardinality(String) DEFAULT '' CODEC(ZSTD(1))",
    "BlameStep Int32 DEFAULT -1 CODEC(ZSTD(1))",
    "BlameSpanId String DEFAULT '' CODEC(ZSTD(1))",
    "BlameMode LowCardinality(String) DEFAULT '' CODEC(ZSTD(1))",
    "BlameConfidence Float32 DEFAULT 0 CODEC(ZSTD(1))",
    "BlameExplanation String DEFAULT '' CODEC(ZSTD(1))",
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
        *(column.split()[0] for column in _BLAME_COLUMNS),
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
    """
    + "".join(f"{column},\n    " for column in _BLAME_COLUMNS)
    + """INDEX idx_conversation_id ConversationId TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_task_id TaskId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toYYYYMM(Timestamp)
ORDER BY TraceId
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
    added_columns=_BLAME_COLUMNS,
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

# --- rollups the dashboards and alerts read --------------------------------------------------------
#
# `mast_run_modes`: one row per (run, version) with the run's distinct modes as a bit mask, bit i set
# for `taxonomy.CODES[i]`. Fed by a materialized view on `mast_findings`, so it needs no writer of
# its own. Why it stays right:
# - keyed by (TraceId, Version) and read joined to the run's latest version (FINAL on
#   `mast_conversations`), so a re-annotated run counts once, with its new modes only;
# - merged with bit-or, which is idempotent: a replayed findings batch (deduplicated upstream anyway)
#   or a second annotator reporting the same mode cannot count anything twice;
# - `Timestamp` is the run's start, so readers can apply the same time filter as on runs.
# A run without findings has no row here; readers LEFT JOIN and take a missing mask as 0.


def _mode_bit(column: str) -> str:
    codes = ", ".join(f"'{code}'" for code in CODES)
    return f"toUInt32(bitShiftLeft(toUInt32(1), indexOf([{codes}], {column}) - 1))"


RUN_MODES = Table(
    "mast_run_modes",
    (),  # filled by the materialized view below, never written directly
    """
CREATE TABLE IF NOT EXISTS {db}.mast_run_modes (
    Timestamp SimpleAggregateFunction(min, DateTime64(9)) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    Version UInt64 CODEC(ZSTD(1)),
    ModeMask SimpleAggregateFunction(groupBitOr, UInt32) CODEC(ZSTD(1))
) ENGINE = AggregatingMergeTree()
ORDER BY (TraceId, Version)
SETTINGS index_granularity = 8192""",
    backfill_template=f"""
INSERT INTO {{db}}.mast_run_modes
SELECT min(Timestamp), TraceId, Version, groupBitOr({_mode_bit("Mode")})
FROM {{db}}.mast_findings
GROUP BY TraceId, Version""",
)

RUN_MODES_MV = Table(
    "mast_run_modes_mv",
    (),
    f"""
CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.mast_run_modes_mv
TO {{db}}.mast_run_modes
AS SELECT
    min(Timestamp) AS Timestamp,
    TraceId,
    Version,
    groupBitOr({_mode_bit("Mode")}) AS ModeMask
FROM {{db}}.mast_findings
GROUP BY TraceId, Version""",
)

# `mast_collector_stats`: snapshots of each collector's own metrics (the numbers its Prometheus
# endpoint serves), one row per metric per snapshot, so that Grafana's pipeline-health alerts (judge
# errors, spool growth, silent collectors) need nothing but ClickHouse. `Metric` is the metric's
# name without the `mast_otel_` prefix, e.g. "spool_bytes", "judge_errors", "store_errors".
COLLECTOR_STATS = Table(
    "mast_collector_stats",
    ("Timestamp", "Instance", "Metric", "Value"),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_collector_stats (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    Instance LowCardinality(String) CODEC(ZSTD(1)),
    Metric LowCardinality(String) CODEC(ZSTD(1)),
    Value Float64 CODEC(ZSTD(1))
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (Metric, Instance, Timestamp)
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
)

# `mast_judge_usage`: the LLM judge's ledger, one row per decision about a run (judged, answered
# from its cache, skipped and why, failed and why) with requests, tokens and cost. Rows of judged
# runs carry the verdict (JSON), looked up by `ContentHash`: the judge's cache that survives restarts.
# Plain MergeTree: every row is an event; the insert deduplication token covers replays.
JUDGE_USAGE = Table(
    "mast_judge_usage",
    (
        "Timestamp",
        "ContentHash",
        "TraceId",
        "ServiceName",
        "RunModel",
        "JudgeModel",
        "Status",
        "Reason",
        "Requests",
        "Chunks",
        "InputTokens",
        "OutputTokens",
        "CostUsd",
        "UnknownModes",
        "Verdict",
    ),
    """
CREATE TABLE IF NOT EXISTS {db}.mast_judge_usage (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    ContentHash String CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    RunModel LowCardinality(String) CODEC(ZSTD(1)),
    JudgeModel LowCardinality(String) CODEC(ZSTD(1)),
    Status LowCardinality(String) CODEC(ZSTD(1)),
    Reason String CODEC(ZSTD(1)),
    Requests UInt32 CODEC(ZSTD(1)),
    Chunks UInt32 CODEC(ZSTD(1)),
    InputTokens UInt64 CODEC(ZSTD(1)),
    OutputTokens UInt64 CODEC(ZSTD(1)),
    CostUsd Float64 CODEC(ZSTD(1)),
    UnknownModes Array(LowCardinality(String)) CODEC(ZSTD(1)),
    Verdict String CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(Timestamp)
ORDER BY (ContentHash, Timestamp)
SETTINGS index_granularity = 8192, """
    + _SETTINGS,
)

# --- raw OTLP ingest ---------------------------------------------------------------------------------
#
# `mast_otlp_requests` takes serialized ExportTraceServiceRequests as they came off the wire (input
# format Protobuf, see `otlp_ingest.OtlpSpanWriter`), one row per request, and keeps nothing (Null
# engine). Its materialized view flattens each request into `otel_traces` rows, the same rows the
# Python path writes (`otlp_schema` says how), and `otel_traces_trace_id_ts_mv` follows as usual.


_DATABASE_MARKER = "__database__"


def _sql_template(sql: str) -> str:
    """Generated SQL as a `Table` template: its braces escaped, `_DATABASE_MARKER` made `{db}`."""
    return sql.replace("{", "{{").replace("}", "}}").replace(_DATABASE_MARKER, "{db}")


OTLP_REQUESTS = Table(
    "mast_otlp_requests",
    (),  # raw protobuf only, see otlp_ingest
    "\nCREATE TABLE IF NOT EXISTS {db}.mast_otlp_requests (\n    "
    + _sql_template(otlp_schema.landing_columns())
    + "\n) ENGINE = Null",
)

OTLP_REQUESTS_MV = Table(
    "mast_otlp_requests_mv",
    (),
    "\nCREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mast_otlp_requests_mv\nTO {db}.otel_traces\nAS"
    + _sql_template(otlp_schema.flatten_select(f"{_DATABASE_MARKER}.mast_otlp_requests")),
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
    RUN_MODES,
    RUN_MODES_MV,
    COLLECTOR_STATS,
    JUDGE_USAGE,
    OTLP_REQUESTS,
    OTLP_REQUESTS_MV,
)


def create_statements(database: str = DEFAULT_DATABASE) -> tuple[str, ...]:
    """Every DDL statement, in order, for one database (itself created first)."""
    return (
        f"CREATE DATABASE IF NOT EXISTS {quote_database(database)}",
        *(table.create(database) for table in TABLES),
    )


def _add_missing_columns(client: Client, database: str, table: Table) -> None:
    """Give a table created by an older mast-otel the columns added since (ALTER only when needed)."""
    present = {
        row[0]
        for row in client.query(
            "SELECT name FROM system.columns WHERE database = {database:String} AND table = {table:String}",
            parameters={"database": database, "table": table.name},
        ).result_rows
    }
    for column in table.added_columns:
        if column.split()[0] not in present:
            client.command(
                f"ALTER TABLE {quote_database(database)}.{table.name} ADD COLUMN IF NOT EXISTS {column}"
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
    created = []
    for table in TABLES:
        if table.name not in present:
            client.command(table.create(database))
            created.append(table)
    for table in created:
        # A rollup added to a database that already holds findings starts from them.
        if table.backfill_template:
            client.command(table.backfill(database))
    for table in TABLES:
        if table.added_columns and table.name in present:
            _add_missing_columns(client, database, table)
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
