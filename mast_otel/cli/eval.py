"""`mast-otel eval who-and-when PATH [--json]`: blame measured against the benchmark's human labels."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mast_otel.cli._common import EXIT_OK, EXIT_USAGE, Subcommands, add_command, fail


def register(commands: Subcommands) -> None:
    parser = add_command(
        commands,
        "eval",
        help="measure the offline annotator's blame against labelled failure logs",
        description="""\
            Annotates labelled logs exactly as `mast-otel import` would (rule detectors, then blame)
            and compares each run's blame with its label: agent accuracy, step accuracy (exact step
            numbers) and step accuracy within one step, next to the random baselines of the same logs
            (1 / distinct speakers, 1 / steps). Stores nothing.""",
        examples="""\
            mast-otel eval who-and-when ./Who_and_When/Algorithm-Generated
            mast-otel eval who-and-when ./Who_and_When/Hand-Crafted --json""",
    )
    benchmarks = parser.add_subparsers(title="benchmarks", metavar="BENCHMARK")
    sub = add_command(
        benchmarks,
        "who-and-when",
        help="Who&When failure attribution (Zhang, Yin et al., ICML 2025): which agent, which step",
        description="""\
            Who&When logs carry `mistake_agent` and `mistake_step` (the 0-based history index of the
            decisive error). Agents compare by bare name, case-insensitively ("Orchestrator (thought)"
            is the Orchestrator); steps compare as numbers (the benchmark's own script compares them as
            substrings, so "1" would match "12").""",
        examples="mast-otel eval who-and-when ./logs --json",
    )
    sub.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="labelled log files or directories")
    sub.add_argument("--json", action="store_true", help="print only the scores, as one JSON object")
    sub.set_defaults(handler=run)
    parser.set_defaults(handler=lambda _: fail("eval", "name a benchmark: who-and-when", EXIT_USAGE))


def run(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console
    from rich.table import Table

    from mast_otel.annotate.rules import RuleAnnotator
    from mast_otel.evaluation import evaluate_who_and_when
    from mast_otel.taxonomy import BY_CODE

    scores = evaluate_who_and_when(args.paths, RuleAnnotator())
    for skipped in scores.skipped:
        print(f"mast-otel eval: skipped {skipped}", file=sys.stderr)
    if not scores.runs:
        return fail("eval", "no labelled Who&When log found in the given paths", EXIT_USAGE)
    if args.json:
        print(json.dumps(scores.to_json()))
        return EXIT_OK
    console = Console()
    table = Table(title=f"Blame vs human labels, {scores.runs} Who&When runs", title_justify="left")
    for column in ("", "Agent", "Step", "Step ±1"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row(
        "rules + blame",
        f"{scores.agent_accuracy:.1%}",
        f"{scores.step_accuracy:.1%}",
        f"{scores.step_accuracy_within_1:.1%}",
    )
    table.add_row("random", f"{scores.random_agent_accuracy:.1%}", f"{scores.random_step_accuracy:.1%}", "")
    console.print(table)
    modes = Table(title="Modes detected", title_justify="left")
    for column in ("Mode", "Name", "Runs"):
        modes.add_column(column, justify="right" if column == "Runs" else "left")
    for code, runs in scores.mode_runs.items():
        modes.add_row(code, BY_CODE[code].name, f"{runs} ({runs / scores.runs:.0%})")
    console.print(modes)
    return EXIT_OK
