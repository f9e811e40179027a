"""`mast-otel report --html FILE`: the analysis as one self-contained HTML page with plots."""

from __future__ import annotations

import argparse
from pathlib import Path

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
        "report",
        help="the failure analysis as one self-contained HTML page with plots",
        description="""\
            The same numbers as `mast-otel analyze` (same SQL), with plots: the failure-vector heatmap,
            prevalence in successful vs failed runs, distinct modes per failed run and rates over time.
            The page embeds everything (SVG plots, no scripts, no network).""",
        examples="""\
            mast-otel report --store ./mast-otel-data --html report.html
            mast-otel report --store ./mast-otel-data --html v2.html --by version --since 7d""",
    )
    add_store_options(parser)
    parser.add_argument("--html", required=True, type=Path, metavar="FILE", help="where to write the page")
    add_scope_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mast_otel.analysis.report import build_report
    from mast_otel.analysis.source import open_query_source
    from mast_otel.store.base import StoreError

    scope = scope_from(args)
    try:
        with open_query_source(args.store, database=args.database) as source:
            page = build_report(source, scope, compare=tuple(args.compare) if args.compare else None)
    except StoreError as exc:
        return fail("report", exc, EXIT_UNAVAILABLE)
    except KeyError as exc:
        return fail("report", exc.args[0], EXIT_USAGE)
    args.html.write_text(page, encoding="utf-8")
    print(f"wrote {args.html}")
    return EXIT_OK
