"""`mast-otel collector`: receive OTLP, annotate runs, store them, until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse

from mast_otel.cli._common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, Subcommands, add_command, fail

# flag -> dotted config path; a flag given on the command line beats the file and the environment
_FLAGS = {
    "store": "store.target",
    "database": "store.database",
    "grpc_endpoint": "receivers.grpc.endpoint",
    "http_endpoint": "receivers.http.endpoint",
    "admin_endpoint": "telemetry.admin_endpoint",
    "metrics_endpoint": "telemetry.metrics_endpoint",
    "spool_dir": "spool.directory",
    "grace": "assembly.grace_s",
    "max_wait": "assembly.max_wait_s",
    "max_in_flight_spans": "pipeline.max_in_flight_spans",
}


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "collector",
        help="receive OTLP traces, annotate runs with MAST failure modes, store them",
        description="""\
            Runs the collector until Ctrl-C / SIGTERM, then flushes everything it accepted.
            Point agents at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:4317 (gRPC) or :4318 (HTTP).
            Every accepted export is first written to a spool on disk; after a crash or a database
            outage the spool is replayed, so nothing acknowledged is lost.
            While it runs on an embedded store, `mast-otel analyze --store DIR` asks it for the data.

            Configuration: defaults < --config FILE (YAML; ${env:VAR} allowed) < MAST_OTEL_* variables
            < flags. `--print-config` shows the effective configuration and exits.""",
        examples="""\
            mast-otel collector --store ./mast-otel-data
            mast-otel collector --config collector/mast-otel.yaml --print-config
            MAST_OTEL_STORE=http://mast:pw@ch:8123 mast-otel collector --grpc-endpoint 0.0.0.0:4317""",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="YAML configuration file (see collector/mast-otel.yaml)"
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the effective configuration and exit"
    )
    parser.add_argument("--store", help="chDB data directory or ClickHouse URL (default ./mast-otel-data)")
    parser.add_argument("--database", help="ClickHouse database (default mast)")
    parser.add_argument("--grpc-endpoint", help="OTLP/gRPC listen address (default 0.0.0.0:4317)")
    parser.add_argument(
        "--http-endpoint", help="OTLP/HTTP listen address; '' disables (default 0.0.0.0:4318)"
    )
    parser.add_argument(
        "--admin-endpoint", help="health + read-only query API; '' disables (default 127.0.0.1:13133)"
    )
    parser.add_argument("--metrics-endpoint", help="Prometheus /metrics; '' disables (default 0.0.0.0:8888)")
    parser.add_argument("--spool-dir", help="write-ahead spool directory (default <data dir>/spool)")
    parser.add_argument(
        "--grace", type=float, help="seconds to wait after a root span for stragglers (default 2)"
    )
    parser.add_argument(
        "--max-wait", type=float, help="seconds before releasing a trace without root (default 60)"
    )
    parser.add_argument(
        "--max-in-flight-spans",
        type=int,
        metavar="N",
        help="spans held in memory before senders are asked to retry (default 200000; a GenAI span"
        " costs about 3.5-6 KB, so the default is roughly 1 GB)",
    )
    parser.set_defaults(handler=run, log_info=True)


def run(args: argparse.Namespace) -> int:
    from mast_otel.collector.config import ConfigError, load, render
    from mast_otel.collector.service import serve
    from mast_otel.store.base import StoreError

    overrides = {path: getattr(args, flag) for flag, path in _FLAGS.items()}
    try:
        config = load(args.config, overrides=overrides)
    except ConfigError as exc:
        return fail("collector", exc, EXIT_USAGE)
    if args.print_config:
        print(render(config), end="")
        return EXIT_OK
    try:
        return serve(config)
    except ValueError as exc:
        return fail("collector", exc, EXIT_USAGE)
    except (StoreError, RuntimeError, OSError) as exc:
        return fail("collector", exc, EXIT_UNAVAILABLE)
