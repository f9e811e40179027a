"""`mast-otel demo`: synthetic SRE agents through a real collector, then the analysis."""

from __future__ import annotations

import argparse
from pathlib import Path

from mast_otel.cli._common import Subcommands, add_command, fail


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "demo",
        help="run scripted SRE agents through a real collector and print the analysis",
        description="""\
            Starts a collector in this process on a fresh embedded store, runs synthetic SRE
            incident-triage agents of three model profiles (overconfident, termination crisis,
            cascading collapse) instrumented with mast_otel.sdk, exports their spans over real
            OTLP/gRPC, waits until every run is stored, then prints the analysis.
            All data is synthetic and labelled so.""",
        examples="mast-otel demo --runs 300 --seed 7 --data ./demo-data",
    )
    parser.add_argument(
        "--data", type=Path, help="data directory (must be empty or new; default: a new temp dir)"
    )
    parser.add_argument("--seed", type=int, default=42, help="random seed; same seed, same runs (default 42)")
    parser.add_argument(
        "--runs", type=int, default=180, help="number of agent runs, at least 30 (default 180)"
    )
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON instead of tables")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mast_otel.demo.runner import DemoError, run_demo

    try:
        return run_demo(data_dir=args.data, seed=args.seed, runs=args.runs, as_json=args.json)
    except DemoError as exc:
        return fail("demo", exc, exc.exit_code)
