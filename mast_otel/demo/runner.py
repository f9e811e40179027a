"""`mast-otel demo`: the whole path on one machine, with nothing to install but the package.

A collector starts in this process on a fresh embedded store; synthetic SRE agents instrumented with
`mast_otel.sdk` export over real OTLP/gRPC to it; once every run is stored the analysis is read back
from ClickHouse (never from collector memory) and printed, followed by how to do the same with your
own agent.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mast_otel import sdk
from mast_otel.analysis import compute_profiles, profiles_to_json, render_profiles
from mast_otel.collector.assembly import AssemblyConfig
from mast_otel.collector.config import loopback
from mast_otel.collector.service import Collector
from mast_otel.demo.agents import RunSummary, run_demo_agents

MIN_RUNS = 30
SERVICE_NAME = "sre-triage-demo"


class DemoError(RuntimeError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_demo(
    *, data_dir: Path | None, seed: int, runs: int, as_json: bool = False, console: Console | None = None
) -> int:
    if runs < MIN_RUNS:
        raise DemoError(f"--runs must be at least {MIN_RUNS} for the analysis to mean anything", 2)
    console = console or Console(stderr=as_json)
    data_dir = _fresh_data_dir(data_dir)
    config = loopback(
        str(data_dir),
        http=False,
        # The demo's agents end their runs in-process: a short grace loses nothing and keeps it quick.
        assembly=AssemblyConfig(grace_s=0.5, max_wait_s=10.0),
    )
    started = time.monotonic()
    try:
        collector = Collector(config).start()
    except Exception as exc:
        raise DemoError(f"could not start the collector on {data_dir}: {exc}", 3) from exc
    try:
        provider = sdk.configure(
            service_name=SERVICE_NAME,
            endpoint=collector.grpc_endpoint,
            insecure=True,
            resource_attributes={"mast.demo": "synthetic", "service.version": "demo"},
        )
        console.print(
            f"[bold]mast-otel demo[/] — {runs} synthetic SRE triage runs (seed {seed}) -> "
            f"collector on {collector.grpc_endpoint} -> chDB at {data_dir}"
        )
        summaries = _run_agents(console, runs, seed)
        provider.force_flush()
        sdk.shutdown()
        with console.status("waiting for the collector to store every run…"):
            # Traces are released `grace` after their root span; then written in batches.
            stored = collector.wait_idle(timeout_s=60.0)
        if not stored:
            raise DemoError("the collector did not store every run within 60 s", 1)
        profiles = compute_profiles(collector.store)
        stats = collector.stats()
    finally:
        complete = collector.stop()
    if not complete:
        raise DemoError("some spans were accepted but not stored", 1)
    elapsed = time.monotonic() - started
    if as_json:
        print(json.dumps(profiles_to_json(profiles), indent=2))
    else:
        render_profiles(profiles, console=console)
        _epilogue(console, data_dir, summaries, stats.spans_stored, stats.findings_stored, elapsed)
    return 0


def _run_agents(console: Console, runs: int, seed: int) -> list[RunSummary]:
    columns = (TextColumn("agents"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("runs", total=runs)
        return run_demo_agents(runs=runs, seed=seed, on_run_done=lambda _summary: progress.advance(task))


def _fresh_data_dir(data_dir: Path | None) -> Path:
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix="mast-otel-demo-"))
    data_dir = data_dir.expanduser().resolve()
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise DemoError(
            f"{data_dir} is not an empty directory; the demo needs a fresh one (or omit --data)", 2
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    return data_dir


def _epilogue(
    console: Console, data_dir: Path, summaries: list[RunSummary], spans: int, findings: int, elapsed: float
) -> None:
    late = sum(1 for s in summaries if s.outcome_reported_later)
    console.print(
        f"\n[dim]{len(summaries)} runs, {spans} spans, {findings} findings stored in {elapsed:.1f}s; "
        f"{late} outcomes were attached after their run ended. All data is synthetic.[/]"
    )
    console.print(
        f"""
[bold]Your data[/]: {data_dir}
  mast-otel analyze --store {data_dir}            the same analysis again (add --json for scripts)

[bold]Instrument your own agent[/]
  pip install mast-otel
  mast-otel collector --store ./mast-otel-data    # OTLP/gRPC on :4317

  from mast_otel import sdk
  sdk.configure(service_name="my-agent")          # honours OTEL_EXPORTER_OTLP_ENDPOINT
  with sdk.agent_run("triage", model="gpt-4o", task="...") as run:
      with run.chat(input_messages=[...]) as call:
          call.set_response(text="...", tool_calls=[...])
      with run.tool_call("get_pods", arguments={{"ns": "shop"}}) as tool:
          tool.set_result(pods)
      run.set_outcome("success", score=0.9)       # or later: sdk.record_outcome(trace_id, ...)

Already using OpenTelemetry GenAI instrumentation? Point its OTLP exporter at the collector.""",
        soft_wrap=True,  # commands and code must stay copy-pasteable on narrow terminals
    )
