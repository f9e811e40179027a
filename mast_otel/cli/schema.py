"""`mast-otel schema`: print the ClickHouse DDL, for one server or a cluster."""

from __future__ import annotations

import argparse

from mast_otel.cli._common import EXIT_OK, EXIT_USAGE, Subcommands, add_command, fail


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "schema",
        help="print the ClickHouse DDL (single server, or a cluster with --cluster)",
        description="""\
            The collector creates its schema itself on a single server or chDB. For a cluster, create
            it once with this DDL: replicated local tables, Distributed tables under the usual names
            (sharded by trace id), materialized views on the local tables.""",
        examples="""\
            mast-otel schema > schema.sql
            mast-otel schema --cluster prod | clickhouse-client --multiquery""",
    )
    parser.add_argument("--cluster", help="cluster name from the servers' remote_servers config")
    parser.add_argument("--database", default="mast", help="database (default mast)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mast_otel.store.cluster import cluster_statements
    from mast_otel.store.schema import create_statements

    try:
        statements = (
            cluster_statements(args.cluster, args.database)
            if args.cluster
            else list(create_statements(args.database))
        )
    except ValueError as exc:
        return fail("schema", exc, EXIT_USAGE)
    print(";\n\n".join(s.strip() for s in statements) + ";")
    return EXIT_OK
