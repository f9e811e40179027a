"""`mast-otel analyze`: failure profiles per model, from ClickHouse alone."""

from __future__ import annotations

import argparse
import json

from mast_otel.cli._common import (
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Subcommands,
    add_command,
    add_store_options,
    fail,
)
from mast_otel.cli._scope import add_scope_options, scope_from


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
    add_scope_options(parser)
    parser.add_argument(
        "--agreement",
        action="store_true",
        help="also compare the rules' and the LLM judge's findings per mode (agreement, Cohen's kappa)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mast_otel.analysis import compute_profiles, profiles_to_json, render_profiles
    from mast_otel.analysis.blame import blame_table, blame_to_json, compute_blame
    from mast_otel.analysis.judge import (
        agreement,
        agreement_table,
        judge_to_json,
        judge_usage,
        judge_usage_table,
    )
    from mast_otel.analysis.render import study_extras
    from mast_otel.analysis.source import open_query_source
    from mast_otel.store.base import StoreError

    try:
        with open_query_source(args.store, database=args.database) as source:
            scope = scope_from(args)
            profiles = compute_profiles(source, scope=scope)
            study = study_extras(source, scope, profiles, args.compare)
            usage = judge_usage(source, scope)
            modes = agreement(source, scope) if args.agreement else None
            blamed = compute_blame(source, scope)
    except StoreError as exc:
        return fail("analyze", exc, EXIT_UNAVAILABLE)
    except KeyError as exc:  # --compare named a group without runs
        return fail("analyze", exc.args[0], EXIT_USAGE)
    if args.json:
        document = profiles_to_json(profiles)
        document.update(study.to_json())
        if usage or modes is not None:  # the judge's keys appear once there is a judge
            document.update(judge_to_json(usage, modes))
        document.update(blame_to_json(blamed))
        print(json.dumps(document, indent=2))
    else:
        render_profiles(profiles)
        console = Console()
        study.render(console)
        if blamed:
            console.print(blame_table(blamed))
        if usage:
            console.print(judge_usage_table(usage))
        if modes is not None:
            console.print(
                agreement_table(modes) if modes else "No run has both rule and LLM judge verdicts yet."
            )
    return EXIT_OK
