"""The `mast-otel` command. Each subcommand lives in its own module with a `register` function.

Exit codes mean something (see `_common.EXIT_*`): scripts and CI can tell a usage error from a store
that is not there from a run that lost data.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from mast_otel import __version__
from mast_otel.cli import analyze, collector, demo, imports, report, schema
from mast_otel.cli import eval as evaluation
from mast_otel.cli._common import EXIT_CODES_HELP, EXIT_USAGE

_MAIN_HELP = """\
mast-otel tells you *why* your LLM agents fail.

Agents send OpenTelemetry spans (OTLP) to the mast-otel collector; it rebuilds every run into a
conversation, annotates it with the 14 failure modes of the MAST taxonomy and stores runs and
findings in ClickHouse (embedded chDB by default, or a ClickHouse server).

start here:
  mast-otel demo                         scripted SRE agents -> collector -> findings -> analysis
  mast-otel collector --store ./data     receive OTLP/gRPC on :4317 and store into ./data
  mast-otel analyze --store ./data       failure modes per model, from the store
"""

# Each module: register(subcommands).
COMMANDS = (demo, collector, analyze, report, schema, imports, evaluation)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (
        logging.DEBUG
        if args.verbose
        else logging.INFO
        if getattr(args, "log_info", False)
        else logging.WARNING
    )
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        # The CLI says what failed and what to do; the drivers' retry chatter only buries that.
        # (clickhouse-connect sets urllib3's level when imported, so import it first.)
        import clickhouse_connect.driver.httputil  # noqa: F401

        for noisy in ("urllib3", "clickhouse_connect"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mast-otel",
        description=_MAIN_HELP,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mast-otel {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subcommands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.register(subcommands)
    return parser
