"""Trickle benchmark: what a collector costs when traffic is light, by raw span flush interval.

A collector that sees a few spans a second should cost next to nothing, but every insert into
ClickHouse has a fixed cost (the raw span writer's view is analysed again for each insert), so how
often the writer flushes decides it. For each `raw_spans.flush_interval_s` given, a collector runs
in its own process on a fresh embedded store; its CPU share of one core (user + system, from
/proc) is measured idle first, then while one sender trickles OTLP/gRPC exports of the GenAI mix
(ingest.py) at `--rate` spans/s. Each interval's figure is also given as a ratio to the first's,
measured in the same run.

    python bench/trickle.py --json
    {"rate_spans_per_s": 20, "runs": [{"raw_flush_interval_s": 0.5, "idle_core_share": ...,
     "trickle_core_share": ...}, ...], "trickle_ratio_vs_first": [...]}
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import export_call, generate_requests
from overload import Exports

from mast_otel.collector.process import CollectorProcess


def core_share(collector: CollectorProcess, during: float, work: Any = None) -> float:
    """CPU share of one core the collector used over `during` seconds (running `work(deadline)`)."""
    before, started = collector.cpu_seconds(), time.monotonic()
    if work is None:
        time.sleep(during)
    else:
        work(started + during)
    return (collector.cpu_seconds() - before) / (time.monotonic() - started)


def trickle(collector: CollectorProcess, exports: Exports, rate: float) -> Any:
    def send_until(deadline: float) -> None:
        channel = grpc.insecure_channel(collector.grpc_target)
        export = export_call(channel)
        started, sent = time.monotonic(), 0
        while time.monotonic() < deadline:
            body, spans = exports.take()
            export(body, timeout=30)
            sent += spans
            time.sleep(max(0.0, min(deadline, started + sent / rate) - time.monotonic()))
        channel.close()

    return send_until


def measure(interval: float, args: argparse.Namespace, exports: Exports) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mast-trickle-") as tmp:
        config = Path(tmp) / "collector.yaml"
        config.write_text(f"raw_spans:\n  flush_interval_s: {interval}\n")
        collector = CollectorProcess(Path(tmp) / "data", "--config", str(config))
        try:
            time.sleep(args.settle)  # start-up work (schema, first merges) is not what is measured
            idle = core_share(collector, args.idle_seconds)
            busy = core_share(collector, args.seconds, trickle(collector, exports, args.rate))
        finally:
            collector.terminate()
    return {
        "raw_flush_interval_s": interval,
        "idle_core_share": round(idle, 3),
        "trickle_core_share": round(busy, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=20.0, help="spans per second (default 20)")
    parser.add_argument("--seconds", type=float, default=30.0, help="trickle duration (default 30)")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="idle measurement (default 10)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after start-up (default 5)")
    parser.add_argument(
        "--intervals",
        default="0.5,5",
        help="raw_spans.flush_interval_s values to compare, comma-separated (default 0.5,5)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    # Small exports, as an agent's BatchSpanProcessor sends them when it has little to say.
    pool, _ = generate_requests(2_000, seed=5, batch=16)
    exports = Exports(pool)
    runs = [measure(float(interval), args, exports) for interval in args.intervals.split(",")]
    first = runs[0]["trickle_core_share"]
    result = {
        "rate_spans_per_s": args.rate,
        "runs": runs,
        "trickle_ratio_vs_first": [round(run["trickle_core_share"] / max(first, 1e-9), 2) for run in runs],
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
