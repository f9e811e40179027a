"""The schema for a ClickHouse cluster: replicated local tables plus Distributed tables over them.

Derived from `schema.py` (the one place the schema is written), not written twice: every table
becomes `<name>_local` with the Replicated variant of its engine, `ON CLUSTER`, and a Distributed
table under the original name, sharded by `cityHash64(TraceId)` so every row of a run lands on one
shard (which keeps ReplacingMergeTree's per-run deduplication correct). Materialized views read and
write the local tables of their shard. Readers and writers use the original names unchanged.

    mast-otel schema --cluster my_cluster > cluster.sql
    clickhouse-client --multiquery < cluster.sql
"""

from __future__ import annotations

import re
from functools import partial

from mast_otel.store.schema import DEFAULT_DATABASE, TABLES, quote_database

_CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\S+)\.(\w+)")
_CREATE_VIEW = re.compile(r"CREATE MATERIALIZED VIEW IF NOT EXISTS (\S+)\.(\w+)")
_ENGINE = re.compile(r"ENGINE = (\w*MergeTree)\(([^)]*)\)")


def cluster_statements(
    cluster: str, database: str = DEFAULT_DATABASE, shard_key: str = "cityHash64(TraceId)"
) -> list[str]:
    """DDL for `database` on `cluster`; run on any node (ON CLUSTER fans it out)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", cluster):
        raise ValueError(f"invalid cluster name {cluster!r}")
    db = quote_database(database)
    on_cluster = f"ON CLUSTER '{cluster}'"
    tables = [t.name for t in TABLES if _CREATE_TABLE.search(t.create(database))]
    statements = [f"CREATE DATABASE IF NOT EXISTS {db} {on_cluster}"]
    for table in TABLES:
        ddl = table.create(database)
        if _CREATE_VIEW.search(ddl):
            statements.append(_local_view(ddl, db, tables, on_cluster))
            continue
        local = _CREATE_TABLE.sub(
            lambda m: f"CREATE TABLE IF NOT EXISTS {m[1]}.{m[2]}_local {on_cluster}", ddl, 1
        )
        local = _ENGINE.sub(partial(_replicated, database=database, table=table.name), local, 1)
        statements.append(local)
        key = shard_key if "TraceId" in ddl else "rand()"
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {db}.{table.name} {on_cluster} AS {db}.{table.name}_local\n"
            f"ENGINE = Distributed('{cluster}', {db}, {table.name}_local, {key})"
        )
    return statements


def _replicated(match: re.Match[str], *, database: str, table: str) -> str:
    engine, arguments = match[1], match[2].strip()
    path = f"'/clickhouse/tables/{{shard}}/{database}/{table}_local', '{{replica}}'"
    return f"ENGINE = Replicated{engine}({path}{', ' + arguments if arguments else ''})"


def _local_view(ddl: str, db: str, tables: list[str], on_cluster: str) -> str:
    view = _CREATE_VIEW.sub(
        lambda m: f"CREATE MATERIALIZED VIEW IF NOT EXISTS {m[1]}.{m[2]} {on_cluster}", ddl, 1
    )
    for name in sorted(
        tables, key=len, reverse=True
    ):  # longest first: otel_traces_trace_id_ts before otel_traces
        view = re.sub(rf"{re.escape(db)}\.{name}\b(?!_local)", f"{db}.{name}_local", view)
    return view
