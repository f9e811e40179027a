"""`mast-otel import FORMAT PATH...`: agent logs from files, annotated and stored like live traces.

One sub-command per format in `mast_otel.importers.READERS`; each reads files (or directories,
walked for the format's files), annotates every run with the rule detectors (findings and blame)
and writes them to the store. Bad files are reported one by one and the rest still import.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mast_otel.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Subcommands,
    add_command,
    add_store_options,
    fail,
)

if TYPE_CHECKING:
    from mast_otel.annotate.base import Annotator
    from mast_otel.importers import ImportReport
    from mast_otel.store.clickhouse import ClickHouseStore


def register(commands: Subcommands) -> None:
    from mast_otel.importers import READERS

    parser = add_command(
        commands,
        "import",
        help="import agent logs from files: annotate them and store them like live traces",
        description="""\
            Reads agent logs in a known format, rebuilds each run as a conversation, annotates it
            with the rule detectors (failure modes and blame) and stores it, exactly as the collector
            does for live traces. A run's trace id comes from its file's content: importing the same
            file again replaces the run instead of adding a second one. A file that cannot be read is
            reported and skipped; the others still import.""",
        examples="""\
            mast-otel import who-and-when ./Who_and_When/Algorithm-Generated --store ./mast-otel-data
            mast-otel import who-and-when 1.json 2.json --dry-run""",
    )
    formats = parser.add_subparsers(title="formats", metavar="FORMAT")
    for name, factory in READERS.items():
        about = factory().description
        sub = add_command(
            formats,
            name,
            help=about,
            description=about,
            examples=f"mast-otel import {name} PATH... --store ./mast-otel-data",
        )
        sub.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories")
        add_store_options(sub)
        sub.add_argument(
            "--dry-run", action="store_true", help="annotate and print what would be stored; store nothing"
        )
        judge = sub.add_argument_group("LLM judge (optional; the rules always run)")
        judge.add_argument("--judge", action="store_true", help="also annotate with the LLM judge")
        judge.add_argument(
            "--judge-config", metavar="FILE", help="YAML with the judge settings (implies --judge)"
        )
        judge.add_argument("--judge-model", help="judge model (implies --judge; else MAST_OTEL_JUDGE_MODEL)")
        judge.add_argument("--judge-base-url", help="OpenAI-compatible endpoint (else OPENAI_BASE_URL)")
        sub.set_defaults(handler=run, reader_name=name)
    parser.set_defaults(handler=lambda _: fail("import", "name a format: " + ", ".join(READERS), EXIT_USAGE))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mast_otel.annotate.rules import RuleAnnotator
    from mast_otel.importers import READERS, run_import
    from mast_otel.store.base import StoreError

    reader = READERS[args.reader_name]()
    console = Console(stderr=True)
    wants_judge = bool(args.judge or args.judge_config or args.judge_model)
    if wants_judge and args.dry_run:
        return fail(
            "import", "--judge with --dry-run would spend tokens on runs it then discards", EXIT_USAGE
        )
    store = None
    annotator: Annotator = RuleAnnotator()
    try:
        if not args.dry_run:
            store = _open_for_writing(args.store, args.database)
        if wants_judge:
            from mast_otel.annotate.llm import build_annotator
            from mast_otel.annotate.llm.config import JudgeConfigError, load_judge_config

            overrides = {"model": args.judge_model, "base_url": args.judge_base_url}
            try:
                judge_config = load_judge_config(
                    args.judge_config, overrides={k: v for k, v in overrides.items() if v}
                )
            except JudgeConfigError as exc:
                return fail("import", exc, EXIT_USAGE)
            annotator = build_annotator(judge_config, store=store)
        report = run_import(
            args.paths, reader, store, annotator, dry_run=args.dry_run, progress=True, console=console
        )
    except StoreError as exc:
        return fail("import", exc, EXIT_UNAVAILABLE)
    finally:
        close = getattr(annotator, "close", None)
        if callable(close):
            close()
        if store is not None:
            store.close()
    for error in report.errors:
        print(f"mast-otel import: skipped {error}", file=sys.stderr)
    for part in report.skipped:
        print(f"mast-otel import: skipped part of {part}", file=sys.stderr)
    if not report.files:
        where = " ".join(map(str, args.paths))
        return fail("import", f"no {reader.format_name} files in {where}", EXIT_USAGE)
    if args.dry_run:
        _print_dry_run(report)
    else:
        failed = f", {len(report.errors)} file(s) skipped" if report.errors else ""
        failed += f", {len(report.skipped)} bad line(s) skipped" if report.skipped else ""
        print(f"imported {report.stored} run(s) from {report.files} file(s) into {args.store}{failed}")
    return EXIT_FAILURE if report.errors or report.skipped else EXIT_OK


def _open_for_writing(target: str, database: str) -> ClickHouseStore:
    """The store at `target`; refuses an embedded store that a running collector holds (chDB opens a
    directory in one process only), saying what to do instead."""
    from mast_otel.collector.query_api import read_lock
    from mast_otel.store.base import StoreError
    from mast_otel.store.clickhouse import open_store

    if "://" not in target or target.startswith("chdb://"):
        data_dir = Path(target.removeprefix("chdb://")).expanduser().resolve()
        holder = read_lock(data_dir) if data_dir.is_dir() else None
        if holder is not None:
            raise StoreError(
                f"a running collector (pid {holder.pid}) holds {data_dir}: stop it first, or import into "
                "a ClickHouse server both can reach"
            )
    return open_store(target, database=database)


def _print_dry_run(report: ImportReport) -> None:
    """One line per run that would be stored: file, trace id, steps, outcome, modes, blame."""
    print(f"would store {len(report.runs)} run(s) (dry run):")
    for run in report.runs:
        blame = run.blame
        where = f"{blame.agent} at step {blame.step_index}" if blame is not None else "-"
        if blame is not None and blame.mode is not None:
            where += f" ({blame.mode.code})"
        modes = " ".join(run.modes) or "-"
        print(
            f"  {run.path.name}  trace {run.trace_id}  {run.turns} steps  {run.outcome.value}"
            f"  modes {modes}  blame {where}"
        )
