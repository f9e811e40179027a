"""The `mast-otel` command: run the collector, the demo, and the analysis.

Exit codes mean something (see EXIT_*): scripts and CI can tell a usage error from a store that is
not there from a run that lost data.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from mast_otel import __version__

EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran and failed (e.g. data not stored)
EXIT_USAGE = 2  # bad arguments (argparse uses 2 as well)
EXIT_UNAVAILABLE = 3  # the store or collector could not be reached / opened

_EXIT_CODES = """\
exit codes:
  0  success
  1  the command ran and failed (e.g. spans accepted but not stored)
  2  usage error: bad arguments or options
  3  the store or collector could not be reached or opened
"""

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG
        if args.verbose
        else logging.INFO
        if getattr(args, "log_info", False)
        else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mast-otel",
        description=_MAIN_HELP,
        epilog=_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mast-otel {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run scripted SRE agents through a real collector and print the analysis",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Starts a collector in this process on a fresh embedded store, runs synthetic SRE
            incident-triage agents of three model profiles (overconfident, termination crisis,
            cascading collapse) instrumented with mast_otel.sdk, exports their spans over real
            OTLP/gRPC, waits until every run is stored, then prints the analysis.
            All data is synthetic and labelled so."""),
        epilog="example:\n  mast-otel demo --runs 300 --seed 7 --data ./demo-data\n\n" + _EXIT_CODES,
    )
    demo.add_argument(
        "--data", type=Path, help="data directory (must be empty or new; default: a new temp dir)"
    )
    demo.add_argument("--seed", type=int, default=42, help="random seed; same seed, same runs (default 42)")
    demo.add_argument("--runs", type=int, default=180, help="number of agent runs, at least 30 (default 180)")
    demo.add_argument("--json", action="store_true", help="print the analysis as JSON instead of tables")
    demo.set_defaults(handler=_demo)

    collector = commands.add_parser(
        "collector",
        help="receive OTLP traces, annotate runs with MAST failure modes, store them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Runs the collector until Ctrl-C / SIGTERM, then flushes everything it accepted.
            Point agents at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:4317.
            While it runs on an embedded store, `mast-otel analyze --store DIR` asks it for the data."""),
        epilog="examples:\n  mast-otel collector --store ./mast-otel-data\n"
        "  mast-otel collector --store http://default:secret@clickhouse:8123 --grpc-endpoint 0.0.0.0:4317\n\n"
        + _EXIT_CODES,
    )
    collector.add_argument(
        "--store",
        default="mast-otel-data",
        help="chDB data directory or ClickHouse URL (default ./mast-otel-data)",
    )
    collector.add_argument("--database", default="mast", help="ClickHouse database (default mast)")
    collector.add_argument("--grpc-endpoint", default="0.0.0.0:4317", help="OTLP/gRPC listen address")
    collector.add_argument(
        "--admin-endpoint",
        default="127.0.0.1:13133",
        help="health + read-only query API address; '' disables (default 127.0.0.1:13133)",
    )
    collector.add_argument(
        "--grace",
        type=float,
        default=2.0,
        help="seconds to wait after a root span for its stragglers (default 2)",
    )
    collector.add_argument(
        "--max-wait",
        type=float,
        default=60.0,
        help="seconds after a trace's first span to release it without a root (default 60)",
    )
    collector.set_defaults(handler=_collector, log_info=True)

    analyze = commands.add_parser(
        "analyze",
        help="failure modes per model from the store: success rate, modes per failed run, prevalence",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Reads ClickHouse only (never a collector's memory). With an embedded store that a running
            collector holds, the query goes through that collector's admin endpoint automatically."""),
        epilog="examples:\n  mast-otel analyze --store ./mast-otel-data\n"
        "  mast-otel analyze --store http://reader@clickhouse:8123 --json\n\n" + _EXIT_CODES,
    )
    analyze.add_argument(
        "--store",
        default="mast-otel-data",
        help="chDB data directory or ClickHouse URL (default ./mast-otel-data)",
    )
    analyze.add_argument("--database", default="mast", help="ClickHouse database (default mast)")
    analyze.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    analyze.set_defaults(handler=_analyze)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from mast_otel.demo.runner import DemoError, run_demo

    try:
        return run_demo(data_dir=args.data, seed=args.seed, runs=args.runs, as_json=args.json)
    except DemoError as exc:
        print(f"mast-otel demo: {exc}", file=sys.stderr)
        return exc.exit_code


def _collector(args: argparse.Namespace) -> int:
    from mast_otel.collector.assembly import AssemblyConfig
    from mast_otel.collector.receiver_grpc import GrpcReceiverConfig
    from mast_otel.collector.service import CollectorConfig, serve
    from mast_otel.store.base import StoreError

    try:
        config = CollectorConfig(
            store=args.store,
            database=args.database,
            grpc=GrpcReceiverConfig(endpoint=args.grpc_endpoint),
            admin_endpoint=args.admin_endpoint,
            assembly=AssemblyConfig(grace_s=args.grace, max_wait_s=args.max_wait),
        )
    except ValueError as exc:
        print(f"mast-otel collector: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return serve(config)
    except (StoreError, RuntimeError, OSError) as exc:
        print(f"mast-otel collector: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE


def _analyze(args: argparse.Namespace) -> int:
    from mast_otel.analysis import compute_profiles, profiles_to_json, render_profiles
    from mast_otel.analysis.source import open_query_source
    from mast_otel.store.base import StoreError

    try:
        with open_query_source(args.store, database=args.database) as source:
            profiles = compute_profiles(source)
    except StoreError as exc:
        print(f"mast-otel analyze: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    if args.json:
        print(json.dumps(profiles_to_json(profiles), indent=2))
    else:
        render_profiles(profiles)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
