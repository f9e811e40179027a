"""`mast-otel analyze`: failure profiles per model, from ClickHouse alone."""

from __future__ import annotations

import argparse
import json

from mast_otel.cli._common import EXIT_OK, EXIT_UNAVAILABLE, Subcommands, add_command, add_store_options, fail


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "analyze",
        help="failure modes per model from the store: success rate, modes per failed run, prevalence",
        description="""\
            Reads ClickHouse only (never a collector's memory). With an embedded store that a running
            collector holds, the query goes through that collector's admin endpoint automatically.""",
        examples="""\
            mast-otel analyze --store ./mast-otel-data
            mast-otel analyze --store http://reader@clickhouse:8123 --json""",
    )
    add_store_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mast_otel.analysis import compute_profiles, profiles_to_json, render_profiles
    from mast_otel.analysis.source import open_query_source
    from mast_otel.store.base import StoreError

    try:
        with open_query_source(args.store, database=args.database) as source:
            profiles = compute_profiles(source)
    except StoreError as exc:
        return fail("analyze", exc, EXIT_UNAVAILABLE)
    if args.json:
        print(json.dumps(profiles_to_json(profiles), indent=2))
    else:
        render_profiles(profiles)
    return EXIT_OK
