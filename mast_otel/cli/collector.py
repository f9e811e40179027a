"""`mast-otel collector`: receive OTLP, annotate runs, store them, until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse

from mast_otel.cli._common import (
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Subcommands,
    add_command,
    add_store_options,
    fail,
)


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "collector",
        help="receive OTLP traces, annotate runs with MAST failure modes, store them",
        description="""\
            Runs the collector until Ctrl-C / SIGTERM, then flushes everything it accepted.
            Point agents at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:4317.
            While it runs on an embedded store, `mast-otel analyze --store DIR` asks it for the data.""",
        examples="""\
            mast-otel collector --store ./mast-otel-data
            mast-otel collector --store http://default:secret@clickhouse:8123 --grpc-endpoint 0.0.0.0:4317""",
    )
    add_store_options(parser)
    parser.add_argument("--grpc-endpoint", default="0.0.0.0:4317", help="OTLP/gRPC listen address")
    parser.add_argument(
        "--admin-endpoint",
        default="127.0.0.1:13133",
        help="health + read-only query API address; '' disables (default 127.0.0.1:13133)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=2.0,
        help="seconds to wait after a root span for its stragglers (default 2)",
    )
    parser.add_argument(
        "--max-wait",
        type=float,
        default=60.0,
        help="seconds after a trace's first span to release it without a root (default 60)",
    )
    parser.set_defaults(handler=run, log_info=True)


def run(args: argparse.Namespace) -> int:
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
        return fail("collector", exc, EXIT_USAGE)
    try:
        return serve(config)
    except (StoreError, RuntimeError, OSError) as exc:
        return fail("collector", exc, EXIT_UNAVAILABLE)
